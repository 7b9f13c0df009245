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

use crate::domain::IdMapping;
use crate::hostns::ChildStack;
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
        // Returns when the daemon closes its end (done, or failed).
        libc::read(a.wait_fd, (&mut b as *mut u8).cast(), 1);
        libc::_exit(0)
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
    // either drops); the signal mask is this thread's, restored at once.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_entry,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_FILES | libc::CLONE_NEWUSER | libc::SIGCHLD,
            (&args as *const ChildArgs).cast_mut().cast(),
        );
        let e = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "clone a user namespace: {e} (podscoped needs `user` in RestrictNamespaces=)"
                ),
            ));
        }
        pid
    };
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
}
