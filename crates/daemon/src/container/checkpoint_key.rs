//! The node's checkpoint key, `checkpoint.key` in the state directory
//! (root's, 0600): it seals each archive this node writes, and a restore
//! takes only an archive sealed with it (`podscope_oci::checkpoint_seal`:
//! a restore runs the archive's CRIU images as root). Made at the first
//! checkpoint or restore; nodes that restore each other's archives are
//! given one key by their operator (OPERATIONS.md).

use podscope_api::error::{Error, Result};
use podscope_oci::checkpoint_seal::KEY_LEN;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub const FILE: &str = "checkpoint.key";

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// The key, made first if there is none. Made whole under another name
/// and linked into place, so a daemon ended halfway leaves none, and two
/// at once agree on one.
pub fn load_or_create(state_dir: &Path) -> Result<[u8; KEY_LEN]> {
    // Two first checkpoints at once (of two containers) make it once: the
    // temporary name is the process's.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|p| p.into_inner());
    let path = path(state_dir);
    match load(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        other => return other.map_err(|e| named(&path, e)),
    }
    let mut key = [0u8; KEY_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|e| Error::io("read /dev/urandom for the checkpoint key", e))?;
    let temp = state_dir.join(format!(".{FILE}.{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| {
            f.write_all(&key)?;
            f.sync_all()
        })
        .and_then(|()| match std::fs::hard_link(&temp, &path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        })
        // Durable before an archive is sealed with it: a key lost to a
        // crash would leave those archives unrestorable.
        .and_then(|()| crate::state::files::fsync_dir(state_dir));
    let _ = std::fs::remove_file(&temp);
    made.map_err(|e| Error::io(format!("make {}", path.display()), e))?;
    load(&path).map_err(|e| named(&path, e))
}

fn named(path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("the checkpoint key {}", path.display()), e)
}

/// The key file as it is: a regular file of `KEY_LEN` bytes, root's and
/// for root alone (it lets its holder run code as root on a restore).
fn load(path: &Path) -> std::io::Result<[u8; KEY_LEN]> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() || m.uid() != 0 || m.mode() & 0o077 != 0 || m.len() != KEY_LEN as u64 {
        return Err(std::io::Error::other(format!(
            "must be a file of {KEY_LEN} bytes, root's, that only root may read \
             (uid {}, mode {:o}, {} bytes)",
            m.uid(),
            m.mode() & 0o7777,
            m.len()
        )));
    }
    let mut key = [0u8; KEY_LEN];
    f.read_exact(&mut key)?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_then_read_and_a_bad_one_refused() {
        let dir = std::env::temp_dir().join(format!("podscope-ckey-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(path(&dir));
        if nix::unistd::geteuid().is_root() {
            let a = load_or_create(&dir).unwrap();
            let b = load_or_create(&dir).unwrap();
            assert_eq!(a, b);
            assert_eq!(std::fs::metadata(path(&dir)).unwrap().mode() & 0o777, 0o600);
            std::fs::set_permissions(
                path(&dir),
                std::os::unix::fs::PermissionsExt::from_mode(0o644),
            )
            .unwrap();
            let e = load_or_create(&dir).unwrap_err().to_string();
            assert!(e.contains("only root may read"), "{e}");
        }
        std::fs::write(path(&dir), b"short").unwrap();
        std::fs::set_permissions(
            path(&dir),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let e = load_or_create(&dir).unwrap_err().to_string();
        assert!(e.contains("checkpoint.key") && e.contains("5 bytes"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
