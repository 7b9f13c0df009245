//! In-memory index of sandboxes or containers: by id (sorted, for prefix
//! lookup) and by key (for the duplicate check). Each entry carries its own
//! operation lock so that operations on different objects run in parallel
//! while operations on one are serialized.

use podscope_api::domain::id::{resolve_prefix, Id, ID_LEN};
use podscope_api::domain::{PodKey, Sandbox, SandboxId};
use podscope_api::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// What the registry keeps: a record with an id and a key that no two live
/// records may share.
pub trait Record: Clone + Send + Sync + 'static {
    type Id: Id;
    type Key: Clone + Eq + Hash + Debug + Send + Sync;
    fn id(&self) -> &Self::Id;
    fn key(&self) -> Self::Key;
    /// The AlreadyExists message for `key`, held by `who`.
    fn key_taken(key: &Self::Key, who: &str) -> String;
}

impl Record for Sandbox {
    type Id = SandboxId;
    type Key = PodKey;
    fn id(&self) -> &SandboxId {
        &self.id
    }
    fn key(&self) -> PodKey {
        self.config.key()
    }
    fn key_taken(key: &PodKey, who: &str) -> String {
        format!(
            "a sandbox named {}/{} with uid {} and attempt {} already exists: {who}",
            key.namespace, key.name, key.uid, key.attempt
        )
    }
}

pub struct Entry<T: Record = Sandbox> {
    pub id: T::Id,
    record: RwLock<T>,
    /// Held for the whole of Start/Stop/Remove/reconcile of this sandbox.
    pub op: tokio::sync::Mutex<()>,
    /// A pod's gate for its members: container Creates and Starts hold it
    /// shared, the pod's Stop and Remove exclusively, so no container
    /// starts in a pod that is stopping. Lock order: the pod's `op`, then
    /// this, then a container's `op`.
    pub members: tokio::sync::RwLock<()>,
    removed: AtomicBool,
    /// Ticks on every change of the record and on removal (for Wait).
    changes: tokio::sync::watch::Sender<()>,
}

impl<T: Record> std::fmt::Debug for Entry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Entry({:?})", self.id)
    }
}

impl<T: Record> Entry<T> {
    pub fn new(record: T) -> Arc<Self> {
        Arc::new(Entry {
            id: record.id().clone(),
            record: RwLock::new(record),
            op: tokio::sync::Mutex::new(()),
            members: tokio::sync::RwLock::new(()),
            removed: AtomicBool::new(false),
            changes: tokio::sync::watch::Sender::new(()),
        })
    }

    pub fn snapshot(&self) -> T {
        self.record.read().unwrap().clone()
    }

    /// Read a part of the record without cloning all of it.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.record.read().unwrap())
    }

    pub fn replace(&self, record: T) {
        *self.record.write().unwrap() = record;
        self.changes.send_replace(());
    }

    /// A receiver that sees every later `replace` and `mark_removed`.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.changes.subscribe()
    }

    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    pub fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
        self.changes.send_replace(());
    }
}

pub struct Registry<T: Record = Sandbox> {
    inner: Mutex<Inner<T>>,
}

impl<T: Record> Default for Registry<T> {
    fn default() -> Self {
        Registry {
            inner: Mutex::new(Inner {
                by_id: BTreeMap::new(),
                by_key: HashMap::new(),
            }),
        }
    }
}

struct Inner<T: Record> {
    by_id: BTreeMap<T::Id, Arc<Entry<T>>>,
    /// Keys of live records and of Creates in flight.
    by_key: HashMap<T::Key, Option<T::Id>>,
}

impl<T: Record> Registry<T> {
    /// Claim `key` for a Create in flight. Fails with AlreadyExists (naming
    /// the existing sandbox) when another sandbox or Create holds it.
    pub fn reserve(&self, key: &T::Key) -> Result<()> {
        let mut inner = self.inner.lock().unwrap();
        if let Some(existing) = inner.by_key.get(key) {
            let who = match existing {
                Some(id) => format!("{} {id}", T::Id::KIND),
                None => "a Create in progress".to_owned(),
            };
            return Err(Error::already_exists(T::key_taken(key, &who)));
        }
        inner.by_key.insert(key.clone(), None);
        Ok(())
    }

    pub fn release(&self, key: &T::Key) {
        let mut inner = self.inner.lock().unwrap();
        if matches!(inner.by_key.get(key), Some(None)) {
            inner.by_key.remove(key);
        }
    }

    /// Add a sandbox (completing a reservation, or at recovery).
    pub fn insert(&self, entry: Arc<Entry<T>>) {
        let key = entry.with(|s| s.key());
        let mut inner = self.inner.lock().unwrap();
        inner.by_key.insert(key, Some(entry.id.clone()));
        inner.by_id.insert(entry.id.clone(), entry);
    }

    pub fn remove(&self, id: &T::Id) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(entry) = inner.by_id.remove(id) {
            let key = entry.with(|s| s.key());
            if inner.by_key.get(&key) == Some(&Some(id.clone())) {
                inner.by_key.remove(&key);
            }
        }
    }

    /// Look up by full id or unique prefix.
    pub fn resolve(&self, prefix: &str) -> Result<Arc<Entry<T>>> {
        let inner = self.inner.lock().unwrap();
        if prefix.len() == ID_LEN {
            if let Ok(id) = T::Id::parse(prefix) {
                if let Some(e) = inner.by_id.get(&id) {
                    return Ok(e.clone());
                }
            }
        }
        // Only the ids from the prefix onwards can match.
        let start = T::Id::parse(&format!("{prefix:0<64}")).ok();
        let candidates: Box<dyn Iterator<Item = &T::Id>> = match &start {
            Some(s) => Box::new(inner.by_id.range(s.clone()..).map(|(k, _)| k).take(2)),
            None => Box::new(inner.by_id.keys()),
        };
        let id = resolve_prefix(prefix, candidates)?;
        Ok(inner.by_id[&id].clone())
    }

    pub fn get(&self, id: &T::Id) -> Option<Arc<Entry<T>>> {
        self.inner.lock().unwrap().by_id.get(id).cloned()
    }

    pub fn find_key(&self, key: &T::Key) -> Option<T::Id> {
        self.inner
            .lock()
            .unwrap()
            .by_key
            .get(key)
            .cloned()
            .flatten()
    }

    pub fn entries(&self) -> Vec<Arc<Entry<T>>> {
        self.inner.lock().unwrap().by_id.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::domain::SandboxConfig;
    use podscope_api::error::ErrorKind;

    fn sandbox(id: &str, name: &str) -> Sandbox {
        Sandbox::new(
            SandboxId::parse(&format!("{id:0<64}")).unwrap(),
            SandboxConfig {
                name: name.into(),
                namespace: "ns".into(),
                uid: "u".into(),
                ..Default::default()
            },
            String::new(),
            0,
        )
    }

    #[test]
    fn reserve_is_exclusive() {
        let r = Registry::default();
        let sb = sandbox("ab", "a");
        let key = sb.config.key();
        r.reserve(&key).unwrap();
        let e = r.reserve(&key).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AlreadyExists);
        assert!(e.to_string().contains("in progress"));
        r.insert(Entry::new(sb.clone()));
        let e = r.reserve(&key).unwrap_err();
        assert!(e.to_string().contains(sb.id.as_str()), "{e}");
        assert_eq!(r.find_key(&key), Some(sb.id.clone()));
        r.remove(&sb.id);
        r.reserve(&key).unwrap();
        r.release(&key);
        r.reserve(&key).unwrap();
    }

    #[test]
    fn prefix_lookup() {
        let r = Registry::default();
        for (id, n) in [("ab1", "a"), ("ab2", "b"), ("c", "c")] {
            r.insert(Entry::new(sandbox(id, n)));
        }
        assert_eq!(r.resolve("c").unwrap().with(|s| s.config.name.clone()), "c");
        assert_eq!(
            r.resolve("ab2").unwrap().with(|s| s.config.name.clone()),
            "b"
        );
        assert_eq!(
            r.resolve("ab").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(r.resolve("d").unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(r.resolve("0").unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(
            r.resolve("XYZ").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        let full = format!("{:0<64}", "ab1");
        assert!(r.resolve(&full).is_ok());
        assert_eq!(r.len(), 3);
    }
}
