//! In-memory index of sandboxes: by id (sorted, for prefix lookup) and by
//! pod key (for the duplicate check). Each entry carries its own operation
//! lock so that operations on different sandboxes run in parallel while
//! operations on one sandbox are serialized.

use crate::domain::id::resolve_prefix;
use crate::domain::{PodKey, Sandbox, SandboxId};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

pub struct Entry {
    pub id: SandboxId,
    record: RwLock<Sandbox>,
    /// Held for the whole of Start/Stop/Remove/reconcile of this sandbox.
    pub op: tokio::sync::Mutex<()>,
    removed: AtomicBool,
    /// Ticks on every change of the record and on removal (for Wait).
    changes: tokio::sync::watch::Sender<()>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Entry({:?})", self.id)
    }
}

impl Entry {
    pub fn new(sandbox: Sandbox) -> Arc<Self> {
        Arc::new(Entry {
            id: sandbox.id.clone(),
            record: RwLock::new(sandbox),
            op: tokio::sync::Mutex::new(()),
            removed: AtomicBool::new(false),
            changes: tokio::sync::watch::Sender::new(()),
        })
    }

    pub fn snapshot(&self) -> Sandbox {
        self.record.read().unwrap().clone()
    }

    /// Read a part of the record without cloning all of it.
    pub fn with<R>(&self, f: impl FnOnce(&Sandbox) -> R) -> R {
        f(&self.record.read().unwrap())
    }

    pub fn replace(&self, sandbox: Sandbox) {
        *self.record.write().unwrap() = sandbox;
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

#[derive(Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: BTreeMap<SandboxId, Arc<Entry>>,
    /// Keys of live sandboxes and of Creates in flight.
    by_key: HashMap<PodKey, Option<SandboxId>>,
}

impl Registry {
    /// Claim `key` for a Create in flight. Fails with AlreadyExists (naming
    /// the existing sandbox) when another sandbox or Create holds it.
    pub fn reserve(&self, key: &PodKey) -> Result<()> {
        let mut inner = self.inner.lock().unwrap();
        if let Some(existing) = inner.by_key.get(key) {
            let who = match existing {
                Some(id) => format!("sandbox {id}"),
                None => "a Create in progress".to_owned(),
            };
            return Err(Error::already_exists(format!(
                "a sandbox named {}/{} with uid {} and attempt {} already exists: {who}",
                key.namespace, key.name, key.uid, key.attempt
            )));
        }
        inner.by_key.insert(key.clone(), None);
        Ok(())
    }

    pub fn release(&self, key: &PodKey) {
        let mut inner = self.inner.lock().unwrap();
        if matches!(inner.by_key.get(key), Some(None)) {
            inner.by_key.remove(key);
        }
    }

    /// Add a sandbox (completing a reservation, or at recovery).
    pub fn insert(&self, entry: Arc<Entry>) {
        let key = entry.with(|s| s.config.key());
        let mut inner = self.inner.lock().unwrap();
        inner.by_key.insert(key, Some(entry.id.clone()));
        inner.by_id.insert(entry.id.clone(), entry);
    }

    pub fn remove(&self, id: &SandboxId) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(entry) = inner.by_id.remove(id) {
            let key = entry.with(|s| s.config.key());
            if inner.by_key.get(&key) == Some(&Some(id.clone())) {
                inner.by_key.remove(&key);
            }
        }
    }

    /// Look up by full id or unique prefix.
    pub fn resolve(&self, prefix: &str) -> Result<Arc<Entry>> {
        let inner = self.inner.lock().unwrap();
        if prefix.len() == crate::domain::id::ID_LEN {
            if let Ok(id) = SandboxId::parse(prefix) {
                if let Some(e) = inner.by_id.get(&id) {
                    return Ok(e.clone());
                }
            }
        }
        // Only the ids from the prefix onwards can match.
        let start = SandboxId::parse(&format!("{prefix:0<64}")).ok();
        let candidates: Box<dyn Iterator<Item = &SandboxId>> = match &start {
            Some(s) => Box::new(inner.by_id.range(s.clone()..).map(|(k, _)| k).take(2)),
            None => Box::new(inner.by_id.keys()),
        };
        let id = resolve_prefix(prefix, candidates)?;
        Ok(inner.by_id[&id].clone())
    }

    pub fn get(&self, id: &SandboxId) -> Option<Arc<Entry>> {
        self.inner.lock().unwrap().by_id.get(id).cloned()
    }

    pub fn find_key(&self, key: &PodKey) -> Option<SandboxId> {
        self.inner
            .lock()
            .unwrap()
            .by_key
            .get(key)
            .cloned()
            .flatten()
    }

    pub fn entries(&self) -> Vec<Arc<Entry>> {
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
    use crate::domain::SandboxConfig;
    use crate::error::ErrorKind;

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
