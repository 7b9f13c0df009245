//! The daemon's own files and directories: made private (its state holds
//! every pod's annotations and network configs, which may carry secrets),
//! synced, and removed by descriptor without ever crossing into another
//! filesystem (a container's root still mounted) or following a link a
//! container planted.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// State is root's alone: checkpoints and attachments hold every pod's
/// annotations and network configs, which may carry secrets.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Create `dir` (and its parents) as a private directory; an existing one
/// is made private too (an upgrade from a version that made it 0755).
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(PRIVATE_DIR_MODE))
}

/// Open `path` for writing as a private file, truncating it.
pub fn private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)
}

/// Make a directory's entries (a rename into it) durable.
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `remove_dir_all` that never crosses into another filesystem: a
/// directory mounted over (a container root still mounted) is an error,
/// so what another mount holds is never deleted through it. It walks by
/// descriptor (each directory opened beneath its parent with O_NOFOLLOW,
/// entries removed with unlinkat), so a directory swapped for a symbolic
/// link while it runs (by a container process writing its upper
/// directory) is an error, never followed.
pub fn remove_tree_on_one_fs(top: &Path) -> std::io::Result<()> {
    remove_tree_racing(top, &mut |_| {})
}

/// `remove_tree_on_one_fs`, calling `between` with each directory's path
/// after its type is known and before it is opened: the window a swap
/// would use (a test's hook).
fn remove_tree_racing(top: &Path, between: &mut dyn FnMut(&Path)) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    fn cstr(p: &std::ffi::OsStr) -> std::io::Result<std::ffi::CString> {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::CString::new(p.as_bytes()).map_err(std::io::Error::other)
    }
    fn open_dir(at: libc::c_int, name: &std::ffi::CStr) -> std::io::Result<OwnedFd> {
        // SAFETY: openat with a valid C string; the fd is owned from here.
        let fd = unsafe {
            libc::openat(
                at,
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
    fn busy(path: &Path) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::ResourceBusy,
            format!("{} is a mount point: not removed", path.display()),
        )
    }
    fn empty(
        dir: &OwnedFd,
        dev: u64,
        path: &Path,
        between: &mut dyn FnMut(&Path),
    ) -> std::io::Result<()> {
        // The names of the directory the descriptor holds (the magic link
        // is that directory, whatever its path names by now).
        let names: Vec<std::ffi::OsString> =
            fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<std::io::Result<_>>()?;
        for name in names {
            let c = cstr(&name)?;
            let here = path.join(&name);
            // SAFETY: fstatat into a zeroed stat, no link followed.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe {
                libc::fstatat(
                    dir.as_raw_fd(),
                    c.as_ptr(),
                    &mut st,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            } != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let flags = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                if st.st_dev != dev {
                    return Err(busy(&here));
                }
                between(&here);
                let sub = open_dir(dir.as_raw_fd(), &c)?;
                if fs::File::from(sub.try_clone()?).metadata()?.dev() != dev {
                    return Err(busy(&here));
                }
                empty(&sub, dev, &here, between)?;
                libc::AT_REMOVEDIR
            } else {
                0
            };
            // SAFETY: unlinkat of a name in a directory we hold; it never
            // follows a link.
            if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
    let dev = fs::symlink_metadata(top)?.dev();
    let dir = open_dir(libc::AT_FDCWD, &cstr(top.as_os_str())?)?;
    empty(&dir, dev, top, between)?;
    fs::remove_dir(top)
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_test_support::TempDir;

    /// What another filesystem holds (a container's root still mounted) is
    /// never deleted through the mount point. The unit tests run as root
    /// (make check), which mounting needs.
    #[test]
    fn a_tree_is_removed_on_its_own_filesystem_only() {
        let t = TempDir::new();
        let mnt = t.0.join("bundle/rootfs");
        fs::create_dir_all(&mnt).unwrap();
        fs::write(t.0.join("bundle/config.json"), b"{}").unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .expect("mount a tmpfs (the unit tests run as root)");
        fs::write(mnt.join("precious"), b"keep").unwrap();
        let e = remove_tree_on_one_fs(&t.0.join("bundle")).unwrap_err();
        assert!(e.to_string().contains("is a mount point"), "{e}");
        assert_eq!(fs::read(mnt.join("precious")).unwrap(), b"keep");
        nix::mount::umount(&mnt).unwrap();
        remove_tree_on_one_fs(&t.0.join("bundle")).unwrap();
        assert!(!t.0.join("bundle").exists());
    }

    /// Issue 41, finding 13: the walk took a directory's type with lstat,
    /// then read it by path, so one swapped for a link in between was
    /// followed. By descriptor, a link where a directory was is an error
    /// and what it points to is untouched; links themselves are removed
    /// as entries, never followed.
    #[test]
    fn a_tree_is_removed_by_descriptor_and_no_link_is_followed() {
        let t = TempDir::new();
        let outside = t.0.join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("keep"), b"1").unwrap();
        let bundle = t.0.join("bundle");
        fs::create_dir_all(bundle.join("upper/etc")).unwrap();
        fs::write(bundle.join("upper/etc/x"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, bundle.join("upper/link")).unwrap();
        remove_tree_on_one_fs(&bundle).unwrap();
        assert!(!bundle.exists());
        assert_eq!(fs::read(outside.join("keep")).unwrap(), b"1");
        // The swap itself: a directory of the tree replaced by a link to
        // the outside after its type was read, before it is walked.
        fs::create_dir_all(bundle.join("upper/d")).unwrap();
        fs::write(bundle.join("upper/d/f"), b"f").unwrap();
        let e = remove_tree_racing(&bundle, &mut |dir| {
            if dir.ends_with("upper/d") {
                fs::remove_dir_all(dir).unwrap();
                std::os::unix::fs::symlink(&outside, dir).unwrap();
            }
        })
        .unwrap_err();
        assert!(
            matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)),
            "{e}"
        );
        assert_eq!(
            fs::read(outside.join("keep")).unwrap(),
            b"1",
            "not followed"
        );
        remove_tree_on_one_fs(&bundle).unwrap();
        assert_eq!(fs::read(outside.join("keep")).unwrap(), b"1");
    }
}
