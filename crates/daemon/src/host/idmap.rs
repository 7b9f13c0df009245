//! A user namespace that holds a pod's id mapping and nothing else: what
//! `mount_setattr(MOUNT_ATTR_IDMAP)` takes to make an idmapped mount.
//!
//! The kernel names a mapping by a user namespace, so one is made: a child
//! cloned into a new user namespace (`CLONE_NEWUSER`) waits on a pipe
//! while the daemon writes its `uid_map` and `gid_map` and opens its
//! `/proc/<pid>/ns/user`; the open descriptor keeps the namespace after
//! the child has exited. As in `hostns`, the child shares the daemon's
//! memory and descriptor table (`CLONE_VM`, `CLONE_FILES`: nothing
//! copied, and the daemon's close of the pipe is the child's EOF) on a
//! stack of its own, with every signal blocked, and makes only raw system
//! calls.
//!
//! Writing a mapping of ids other than its own takes CAP_SETUID and
//! CAP_SETGID in the daemon's user namespace (user_namespaces(7)), and the
//! clone takes `user` in the unit's RestrictNamespaces=.

use crate::host::clone::ChildStack;
use podscope_api::domain::IdMapping;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A user namespace with the pod's mapping, held open.
pub struct MappedUserNs {
    fd: OwnedFd,
}

impl MappedUserNs {
    pub fn as_raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

/// What the child is given: its end of the pipe.
struct ChildArgs {
    wait_fd: i32,
}

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `create` passes a live ChildArgs and reaps the child before
    // it goes; the child only reads a descriptor and exits.
    unsafe {
        let a = &*(arg as *const ChildArgs);
        let mut b = 0u8;
        // Returns when the daemon closes its end (done, or failed). Raw
        // system calls, not glibc's: the child runs beside the daemon's
        // thread (no CLONE_VFORK) with that thread's TLS, which glibc's
        // wrappers (errno, cancellation) would write to.
        libc::syscall(libc::SYS_read, a.wait_fd, &mut b as *mut u8, 1usize);
        libc::syscall(libc::SYS_exit, 0);
        unreachable!()
    }
}

fn map_text(m: &[IdMapping]) -> String {
    m.iter().map(|m| m.map_line() + "\n").collect()
}

/// A user namespace mapping `uids` and `gids`.
pub fn create(uids: &[IdMapping], gids: &[IdMapping]) -> io::Result<MappedUserNs> {
    let mut pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills `pipe` on success.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors from pipe2.
    let (wait_r, wait_w) =
        unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
    let stack = ChildStack::new()?;
    let args = ChildArgs {
        wait_fd: wait_r.as_raw_fd(),
    };
    // SAFETY: the stack and `args` outlive the child (reaped below before
    // either drops); the child makes raw system calls only.
    let pid = unsafe {
        crate::host::clone::clone_blocked(
            child_entry,
            &stack,
            libc::CLONE_VM | libc::CLONE_FILES | libc::CLONE_NEWUSER | libc::SIGCHLD,
            (&args as *const ChildArgs).cast_mut().cast(),
        )
    }
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("clone a user namespace: {e} (podscoped needs `user` in RestrictNamespaces=)"),
        )
    })?;
    let result = (|| {
        let write = |file: &str, text: &str| {
            let path = format!("/proc/{pid}/{file}");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("write {text:?} to {path}: {e} (podscoped needs CAP_SETUID and CAP_SETGID)"),
                    )
                })
        };
        write("uid_map", &map_text(uids))?;
        write("gid_map", &map_text(gids))?;
        let path = format!("/proc/{pid}/ns/user");
        std::fs::File::open(&path)
            .map(|f| MappedUserNs { fd: f.into() })
            .map_err(|e| io::Error::new(e.kind(), format!("open {path}: {e}")))
    })();
    drop(wait_w);
    let mut status = 0;
    // SAFETY: reaping the child cloned above.
    while unsafe { libc::waitpid(pid, &mut status, libc::__WALL) } < 0 {
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    drop(stack);
    drop(wait_r);
    result
}

/// Whether the daemon can idmap what is under `dir` (the image store,
/// whose layers a user-namespace pod's roots are made of): a user
/// namespace of its own making (RestrictNamespaces=, CAP_SETUID,
/// user.max_user_namespaces) and an idmapped clone of the directory's
/// mount (the file system must allow it; the clone is never attached).
pub fn probe(dir: &std::path::Path) -> Result<(), String> {
    let m = [IdMapping {
        container_id: 0,
        host_id: 65536,
        length: 65536,
    }];
    let ns = create(&m, &m).map_err(|e| e.to_string())?;
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{} has a NUL byte", dir.display()))?;
    // SAFETY: a NUL-terminated path; the descriptor is owned at once.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            1 /* OPEN_TREE_CLONE */ | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if tree < 0 {
        return Err(format!(
            "open_tree {}: {}",
            dir.display(),
            io::Error::last_os_error()
        ));
    }
    // SAFETY: open_tree's new descriptor.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as i32) };
    let attr: [u64; 4] = [
        0x0010_0000, /* MOUNT_ATTR_IDMAP */
        0,
        0,
        ns.as_raw_fd() as u64,
    ];
    // SAFETY: the kernel's struct mount_attr (four u64s), on our stack.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if r != 0 {
        return Err(format!(
            "an idmapped mount of {}: {}",
            dir.display(),
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_text_is_one_line_per_range() {
        let m = IdMapping {
            container_id: 0,
            host_id: 1000,
            length: 100_000,
        };
        assert_eq!(map_text(&[m]), "0 1000 100000\n");
    }

    /// A namespace of its own, held after its child has gone.
    #[test]
    fn create_makes_a_new_user_namespace() {
        let m = [IdMapping {
            container_id: 0,
            host_id: 1000,
            length: 100_000,
        }];
        let ns = create(&m, &m).unwrap();
        let link = |p: String| std::fs::read_link(p).unwrap().display().to_string();
        let held = link(format!("/proc/self/fd/{}", ns.as_raw_fd()));
        assert!(held.starts_with("user:["), "{held}");
        assert_ne!(held, link("/proc/self/ns/user".into()));
    }

    /// Here (ext4 or tmpfs on a new kernel) the daemon can.
    #[test]
    fn probe_idmaps_a_directory() {
        probe(&std::env::temp_dir()).unwrap();
        let e = probe(std::path::Path::new("/no/such/dir")).unwrap_err();
        assert!(e.contains("open_tree /no/such/dir"), "{e}");
    }
}
