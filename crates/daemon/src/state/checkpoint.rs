//! Durable state of sandboxes and containers: one checkpoint per record
//! under `<state_dir>/sandboxes/<id>/checkpoint` (or `containers/`),
//! written atomically (temp file, fsync, rename, fsync dir) and verified
//! with a sha256 on load.
//!
//! File format: a header line `podscope-checkpoint 1 sha256:<hex>` followed
//! by the JSON body; the digest covers the body bytes exactly as written.

use crate::state::files::{
    fsync_dir, private_dir, private_file, remove_tree_on_one_fs, PRIVATE_DIR_MODE,
};
use crate::state::index::Record;
use podscope_api::domain::id::Id;
use podscope_api::domain::Sandbox;
use podscope_api::error::{Error, IoResultExt, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fs::{self, DirBuilder};
use std::io::Write;
use std::marker::PhantomData;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// A record kept in checkpoints.
pub trait Checkpoint: Record + Serialize + DeserializeOwned {
    /// The directory under the state dir that holds one directory per record.
    const DIR: &'static str;
}

impl Checkpoint for Sandbox {
    const DIR: &'static str = "sandboxes";
}

pub(crate) const MAGIC: &str = "podscope-checkpoint 1 sha256:";
const CHECKPOINT: &str = "checkpoint";
const CHECKPOINT_TMP: &str = "checkpoint.tmp";

pub struct Store<T: Checkpoint = Sandbox> {
    records: PathBuf,
    quarantine: PathBuf,
    kind: PhantomData<fn() -> T>,
}

/// A checkpoint that could not be loaded and was moved aside.
#[derive(Debug, Clone)]
pub struct Quarantined {
    pub dir: String,
    pub moved_to: PathBuf,
    pub reason: String,
}

#[derive(Debug)]
pub struct Recovered<T> {
    pub records: Vec<T>,
    pub quarantined: Vec<Quarantined>,
    /// Directories of Creates that never completed (no checkpoint): removed.
    pub incomplete: Vec<String>,
}

impl<T> Default for Recovered<T> {
    fn default() -> Self {
        Recovered {
            records: Vec::new(),
            quarantined: Vec::new(),
            incomplete: Vec::new(),
        }
    }
}

pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    let body = serde_json::to_vec(record).expect("a record always serializes");
    let digest = Sha256::digest(&body);
    let mut out = Vec::with_capacity(MAGIC.len() + 65 + body.len());
    out.extend_from_slice(MAGIC.as_bytes());
    for b in digest {
        out.extend_from_slice(format!("{b:02x}").as_bytes());
    }
    out.push(b'\n');
    out.extend_from_slice(&body);
    out
}

/// Decode and verify a checkpoint; the error says what is wrong with it.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> std::result::Result<T, String> {
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("no header line (truncated or not a checkpoint)")?;
    let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| "header is not UTF-8")?;
    let want = header
        .strip_prefix(MAGIC)
        .ok_or_else(|| format!("unknown header {:?}", truncate(header, 60)))?;
    let body = &bytes[nl + 1..];
    let got: String = Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if got != want {
        return Err(format!(
            "sha256 mismatch: header says {}, body is {} ({} bytes)",
            truncate(want, 16),
            &got[..16],
            body.len()
        ));
    }
    serde_json::from_slice(body).map_err(|e| format!("invalid checkpoint JSON: {e}"))
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl<T: Checkpoint> Store<T> {
    pub fn open(state_dir: &Path) -> Result<Self> {
        let records = state_dir.join(T::DIR);
        let quarantine = state_dir.join("quarantine");
        for d in [state_dir, &records, &quarantine] {
            private_dir(d).io_context(format!("create {}", d.display()))?;
        }
        Ok(Store {
            records,
            quarantine,
            kind: PhantomData,
        })
    }

    /// The directory of every record's directory.
    pub fn records_dir(&self) -> &Path {
        &self.records
    }

    pub fn dir_of(&self, id: &T::Id) -> PathBuf {
        self.records.join(id.as_str())
    }

    /// Make the record's directory before its first checkpoint (a Create
    /// that keeps files beside it needs the directory first).
    pub fn make_dir(&self, id: &T::Id) -> Result<PathBuf> {
        let dir = self.dir_of(id);
        match DirBuilder::new().mode(PRIVATE_DIR_MODE).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("create {}", dir.display()), e)),
        }
        Ok(dir)
    }

    /// Persist atomically: after this returns, a crash at any moment leaves
    /// either the old or the new checkpoint, never a mix.
    pub fn save(&self, record: &T) -> Result<()> {
        let id = record.id();
        let dir = self.dir_of(id);
        let ctx = || format!("save checkpoint of {} {id}", T::Id::KIND);
        let fresh = !dir.join(CHECKPOINT).exists();
        if !dir.exists() {
            DirBuilder::new()
                .mode(PRIVATE_DIR_MODE)
                .create(&dir)
                .io_context(format!("{}: create {}", ctx(), dir.display()))?;
        }
        let tmp = dir.join(CHECKPOINT_TMP);
        let mut f = private_file(&tmp).io_context(format!("{}: open {}", ctx(), tmp.display()))?;
        f.write_all(&encode(record))
            .and_then(|_| f.sync_all())
            .io_context(format!("{}: write {}", ctx(), tmp.display()))?;
        drop(f);
        fs::rename(&tmp, dir.join(CHECKPOINT)).io_context(format!("{}: rename", ctx()))?;
        fsync_dir(&dir).io_context(format!("{}: fsync {}", ctx(), dir.display()))?;
        if fresh {
            fsync_dir(&self.records).io_context(format!("{}: fsync {} dir", ctx(), T::DIR))?;
        }
        Ok(())
    }

    /// Delete a record's state. The checkpoint goes first, so a crash half
    /// way leaves a directory that recovery treats as incomplete. Nothing
    /// on another filesystem is touched: a directory that is still a mount
    /// point (a container's root, say) fails the deletion instead.
    pub fn delete(&self, id: &T::Id) -> Result<()> {
        let dir = self.dir_of(id);
        let kind = T::Id::KIND;
        match fs::remove_file(dir.join(CHECKPOINT)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("delete checkpoint of {kind} {id}"), e)),
        }
        match remove_tree_on_one_fs(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("delete state of {kind} {id}"), e)),
        }
        fsync_dir(&self.records).io_context(format!("fsync {} dir", T::DIR))?;
        Ok(())
    }

    /// Load every checkpoint. Bad ones are moved to `quarantine/` and
    /// reported; they never stop the others from loading.
    pub fn recover(&self) -> Result<Recovered<T>> {
        let mut out = Recovered::default();
        let entries =
            fs::read_dir(&self.records).io_context(format!("read {}", self.records.display()))?;
        for entry in entries {
            let entry = entry.io_context(format!("read {} dir", T::DIR))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let dir = entry.path();
            let ckpt = dir.join(CHECKPOINT);
            let result = match fs::read(&ckpt) {
                Ok(bytes) => decode(&bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.is_dir() => {
                    // Create never finished its first save: nothing was
                    // promised to anyone, so the leftovers just go.
                    let _ = remove_tree_on_one_fs(&dir);
                    out.incomplete.push(name);
                    continue;
                }
                Err(e) => Err(format!("cannot read {}: {e}", ckpt.display())),
            };
            let result = result.and_then(|r: T| {
                if r.id().as_str() == name {
                    Ok(r)
                } else {
                    Err(format!(
                        "checkpoint is for {} {}, not {name}",
                        T::Id::KIND,
                        r.id()
                    ))
                }
            });
            match result {
                Ok(r) => out.records.push(r),
                Err(reason) => {
                    // Moved aside when it can be; left in place (and still
                    // reported) when it cannot: one bad directory never
                    // stops the daemon from coming up for the others.
                    let target = self.quarantine_dir(&name);
                    let (moved_to, reason) = match fs::rename(&dir, &target) {
                        Ok(()) => (target, reason),
                        Err(e) => (
                            dir.clone(),
                            format!("{reason}; left in place: cannot move it to quarantine: {e}"),
                        ),
                    };
                    out.quarantined.push(Quarantined {
                        dir: name,
                        moved_to,
                        reason,
                    });
                }
            }
        }
        out.records.sort_by(|a, b| a.id().cmp(b.id()));
        Ok(out)
    }

    /// The names (ids) of the records in `quarantine/`, from this start and
    /// earlier ones: each stays there until an operator removes it.
    pub fn quarantined_names(&self) -> std::collections::HashSet<String> {
        let Ok(dir) = fs::read_dir(&self.quarantine) else {
            return Default::default();
        };
        dir.flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                Some(name.rsplit_once('.')?.0.to_owned())
            })
            .collect()
    }

    fn quarantine_dir(&self, name: &str) -> PathBuf {
        let stamp = podscope_api::domain::sandbox::now_usec();
        self.quarantine.join(format!("{name}.{stamp}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::domain::{SandboxConfig, State};
    use podscope_test_support::TempDir;
    use std::os::unix::fs::PermissionsExt;

    use podscope_api::domain::SandboxId;

    fn sample() -> Sandbox {
        Sandbox::new(
            SandboxId::random(),
            SandboxConfig {
                name: "n".into(),
                namespace: "ns".into(),
                uid: "u".into(),
                ..Default::default()
            },
            "podscope.slice".to_owned(),
            1,
        )
    }

    #[test]
    fn encode_decode_round_trip() {
        let sb = sample();
        assert_eq!(decode::<Sandbox>(&encode(&sb)).unwrap(), sb);
    }

    #[test]
    fn corruption_is_detected() {
        let mut bytes = encode(&sample());
        let last = bytes.len() - 3;
        bytes[last] ^= 1;
        assert!(decode::<Sandbox>(&bytes)
            .unwrap_err()
            .contains("sha256 mismatch"));
        let full = encode(&sample());
        assert!(decode::<Sandbox>(&full[..full.len() / 2])
            .unwrap_err()
            .contains("sha256 mismatch"));
        assert!(decode::<Sandbox>(&full[..10])
            .unwrap_err()
            .contains("no header"));
        assert!(decode::<Sandbox>(b"garbage\n{}")
            .unwrap_err()
            .contains("unknown header"));
    }

    #[test]
    fn state_is_private_even_after_an_upgrade() {
        let t = TempDir::new();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // What an older version left: world-readable directories.
        fs::create_dir_all(t.0.join("sandboxes")).unwrap();
        fs::set_permissions(&t.0, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(t.0.join("sandboxes"), fs::Permissions::from_mode(0o755)).unwrap();
        let store: Store = Store::open(&t.0).unwrap();
        let sb = sample();
        store.save(&sb).unwrap();
        for dir in [
            t.0.clone(),
            t.0.join("sandboxes"),
            t.0.join("quarantine"),
            store.dir_of(&sb.id),
        ] {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        assert_eq!(mode(&store.dir_of(&sb.id).join(CHECKPOINT)), 0o600);
    }

    #[test]
    fn a_checkpoint_that_cannot_be_moved_aside_is_reported_in_place() {
        let t = TempDir::new();
        let store: Store = Store::open(&t.0).unwrap();
        let good = sample();
        store.save(&good).unwrap();
        let bad = sample();
        store.save(&bad).unwrap();
        fs::write(store.dir_of(&bad.id).join(CHECKPOINT), b"garbage\n{}").unwrap();
        // quarantine/ is no directory: the move fails.
        fs::remove_dir_all(t.0.join("quarantine")).unwrap();
        fs::write(t.0.join("quarantine"), b"").unwrap();
        let r = store.recover().unwrap();
        assert_eq!(r.records, vec![good]);
        assert_eq!(r.quarantined.len(), 1);
        let q = &r.quarantined[0];
        assert_eq!(q.moved_to, store.dir_of(&bad.id));
        assert!(q.reason.contains("left in place"), "{}", q.reason);
    }

    #[test]
    fn save_recover_quarantine_and_incomplete() {
        let t = TempDir::new();
        let store: Store = Store::open(&t.0).unwrap();
        let a = sample();
        let mut b = sample();
        store.save(&a).unwrap();
        store.save(&b).unwrap();
        b.state = State::Ready;
        store.save(&b).unwrap();

        // A corrupt checkpoint and a directory whose Create never finished.
        let bad = sample();
        store.save(&bad).unwrap();
        fs::write(
            store.dir_of(&bad.id).join(CHECKPOINT),
            b"podscope-checkpoint 1 sha256:00\n{}",
        )
        .unwrap();
        let half = SandboxId::random();
        fs::create_dir(store.dir_of(&half)).unwrap();
        fs::write(store.dir_of(&half).join(CHECKPOINT_TMP), b"partial").unwrap();

        let r = store.recover().unwrap();
        let mut want = vec![a.clone(), b.clone()];
        want.sort_by(|x, y| x.id.cmp(&y.id));
        assert_eq!(r.records, want);
        assert_eq!(r.quarantined.len(), 1);
        assert_eq!(r.quarantined[0].dir, bad.id.as_str());
        assert!(r.quarantined[0].moved_to.exists());
        assert!(!store.dir_of(&bad.id).exists());
        assert_eq!(r.incomplete, vec![half.to_string()]);
        assert!(!store.dir_of(&half).exists());

        store.delete(&a.id).unwrap();
        store.delete(&a.id).unwrap();
        let again = store.recover().unwrap();
        assert_eq!(again.records, vec![b]);
        // Reported once; still held (by id) on every later start.
        assert!(again.quarantined.is_empty());
        let held = store.quarantined_names();
        assert_eq!(held.len(), 1);
        assert!(held.contains(bad.id.as_str()));
    }
}
