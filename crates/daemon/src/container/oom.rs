//! OOM kills in a container's cgroup, on both cgroup layouts.
//!
//! systemd reports `Result=oom-kill` only on a pure cgroup v2 node and only
//! when the unit stops for it; with `OOMPolicy=continue` an OOM kill of a
//! child is only logged, and on the v1 memory controller (hybrid nodes,
//! these machines) systemd sees none. When the main process is the one
//! killed, the unit fails with `Result=signal` and its cgroup, with its
//! counters, is already gone. So the daemon watches each container's memory
//! cgroup from before its process starts:
//!
//! - v1: an eventfd registered on `memory.oom_control` through
//!   `cgroup.event_control`. The kernel signals it for every OOM in the
//!   cgroup, and once more when the cgroup is removed: a notification while
//!   the cgroup exists, or two or more at once as it goes, is an OOM.
//! - v2: inotify on `memory.events`; a rise of `oom_kill` is an OOM.
//!
//! The cgroup directory is made before the unit starts (systemd takes an
//! existing one as it is), so a container killed at once is still seen.

use crate::host::hostns::HostNs;
use podscope_api::error::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Which memory controller the node has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The v1 memory controller (legacy or hybrid).
    V1,
    /// The unified hierarchy holds memory.
    V2,
    /// No memory controller: OOM kills cannot be told.
    None,
}

pub fn layout() -> Layout {
    let root = Path::new(CGROUP_ROOT);
    if std::fs::read_to_string(root.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"))
    {
        Layout::V2
    } else if crate::host::cgroup_layout::is_cgroup1(&root.join("memory")) {
        Layout::V1
    } else {
        Layout::None
    }
}

/// Whether systemd-oomd killed in the cgroup `dir`: it counts its kills
/// in the `user.oomd_ooms` extended attribute (systemd 248+). False when
/// the cgroup is gone (systemd removes it once the unit is stopped).
pub fn oomd_killed(dir: &Path) -> bool {
    super::xattr::short(dir, c"user.oomd_ooms")
        .and_then(|v| String::from_utf8(v).ok())
        .and_then(|v| v.trim_end_matches('\0').trim().parse::<u64>().ok())
        .is_some_and(|k| k > 0)
}

/// The container's memory cgroup directory for `cgroup_path` (the unit's
/// path below the hierarchy's root).
pub fn memory_dir(layout: Layout, cgroup_path: &str) -> Option<PathBuf> {
    let rel = cgroup_path.trim_start_matches('/');
    match layout {
        Layout::V1 => Some(Path::new(CGROUP_ROOT).join("memory").join(rel)),
        Layout::V2 => Some(Path::new(CGROUP_ROOT).join(rel)),
        Layout::None => None,
    }
}

/// A watch on one container: `seen` turns true at the first OOM kill
/// by the kernel, `oomd` when systemd-oomd marks the cgroup it killed
/// (v2 only: oomd needs it).
pub struct OomWatch {
    pub seen: Arc<AtomicBool>,
    pub oomd: Arc<AtomicBool>,
    /// What its task holds open: an eventfd and memory.oom_control (v1),
    /// an inotify (v2).
    pub descriptors: usize,
    task: tokio::task::JoinHandle<()>,
}

impl OomWatch {
    /// Whether systemd-oomd killed in the cgroup, waiting up to `grace`
    /// for its mark.
    pub async fn oomd_seen(&self, grace: std::time::Duration) -> bool {
        let end = tokio::time::Instant::now() + grace;
        loop {
            if self.oomd.load(Ordering::Acquire) {
                return true;
            }
            if tokio::time::Instant::now() >= end {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

impl Drop for OomWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Make the cgroup's directory (as the host sees it: the daemon's own view
/// of /sys/fs/cgroup is read-only) and watch it.
pub async fn watch(hostns: &HostNs, layout: Layout, cgroup_path: &str) -> Result<Option<OomWatch>> {
    let Some(dir) = memory_dir(layout, cgroup_path) else {
        return Ok(None);
    };
    hostns.create_dir_all(&dir).await?;
    let seen = Arc::new(AtomicBool::new(false));
    let oomd = Arc::new(AtomicBool::new(false));
    let descriptors = match layout {
        Layout::V1 => 2,
        _ => 1,
    };
    let task = match layout {
        Layout::V1 => {
            let control = std::fs::File::open(dir.join("memory.oom_control"))
                .map_err(|e| Error::io(format!("open {}/memory.oom_control", dir.display()), e))?;
            // SAFETY: eventfd(2); the fd is owned from here on.
            let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            if efd < 0 {
                return Err(Error::io("eventfd", std::io::Error::last_os_error()));
            }
            // SAFETY: a fresh fd from the kernel.
            let efd = unsafe { OwnedFd::from_raw_fd(efd) };
            // The line names descriptors of this process; the host-namespace
            // helper, forked from it, has the same ones.
            let line = format!("{} {}", efd.as_raw_fd(), control.as_raw_fd());
            hostns
                .write(&dir.join("cgroup.event_control"), line.as_bytes())
                .await?;
            let seen2 = seen.clone();
            tokio::spawn(watch_v1(efd, control, dir, seen2))
        }
        Layout::V2 => {
            let events = dir.join("memory.events");
            let base = oom_kills(&events).unwrap_or(0);
            // memory.events for the kernel's kills; the directory's
            // attributes for oomd's mark (an extended attribute set is an
            // IN_ATTRIB on the directory).
            let ino = inotify_on(&[(&events, libc::IN_MODIFY), (&dir, libc::IN_ATTRIB)])?;
            tokio::spawn(watch_v2(ino, dir, base, seen.clone(), oomd.clone()))
        }
        Layout::None => return Ok(None),
    };
    Ok(Some(OomWatch {
        seen,
        oomd,
        descriptors,
        task,
    }))
}

async fn watch_v1(efd: OwnedFd, control: std::fs::File, dir: PathBuf, seen: Arc<AtomicBool>) {
    let Ok(afd) = super::logs::async_fd(efd) else {
        return;
    };
    loop {
        let Ok(mut guard) = afd.readable().await else {
            return;
        };
        let mut count = [0u8; 8];
        // SAFETY: an 8-byte read of an eventfd we own.
        let n = unsafe { libc::read(afd.get_ref().as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        guard.clear_ready();
        if n != 8 {
            continue;
        }
        let count = u64::from_ne_bytes(count);
        // The cgroup's files answer while it exists.
        let alive = read_at(&control).is_some() && dir.exists();
        if alive || count >= 2 {
            seen.store(true, Ordering::Release);
        }
        if !alive {
            return;
        }
    }
}

fn read_at(f: &std::fs::File) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 256];
    let n = f.read_at(&mut buf, 0).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// `oom_kill` from a v2 memory.events file.
pub fn oom_kills(events: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(events).ok()?;
    parse_oom_kill(&text)
}

fn parse_oom_kill(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|v| v.trim().parse().ok())
}

fn inotify_on(watches: &[(&Path, u32)]) -> Result<OwnedFd> {
    // SAFETY: inotify_init1(2) and inotify_add_watch(2) with checked results.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
        if fd < 0 {
            return Err(Error::io("inotify", std::io::Error::last_os_error()));
        }
        let fd = OwnedFd::from_raw_fd(fd);
        for (path, mask) in watches {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                .map_err(|_| Error::internal("a cgroup path with a NUL"))?;
            if libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), *mask) < 0 {
                return Err(Error::io(
                    format!("watch {}", path.display()),
                    std::io::Error::last_os_error(),
                ));
            }
        }
        Ok(fd)
    }
}

async fn watch_v2(
    ino: OwnedFd,
    dir: PathBuf,
    base: u64,
    seen: Arc<AtomicBool>,
    oomd: Arc<AtomicBool>,
) {
    let Ok(afd) = super::logs::async_fd(ino) else {
        return;
    };
    let events = dir.join("memory.events");
    loop {
        let Ok(mut guard) = afd.readable().await else {
            return;
        };
        let mut buf = [0u8; 4096];
        // SAFETY: reading inotify events into our buffer.
        let n = unsafe {
            libc::read(
                afd.get_ref().as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        guard.clear_ready();
        if !oomd.load(Ordering::Relaxed) && oomd_killed(&dir) {
            oomd.store(true, Ordering::Release);
        }
        match oom_kills(&events) {
            Some(k) if k > base => {
                seen.store(true, Ordering::Release);
                return;
            }
            Some(_) => {}
            // The cgroup went (IN_IGNORED): nothing more to see.
            None if n > 0 => return,
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_per_layout() {
        let p = "/podscope.slice/podscope-x.slice/podscope-ctr-y.service";
        assert_eq!(
            memory_dir(Layout::V1, p).unwrap(),
            Path::new(
                "/sys/fs/cgroup/memory/podscope.slice/podscope-x.slice/podscope-ctr-y.service"
            )
        );
        assert_eq!(
            memory_dir(Layout::V2, p).unwrap(),
            Path::new("/sys/fs/cgroup/podscope.slice/podscope-x.slice/podscope-ctr-y.service")
        );
        assert!(memory_dir(Layout::None, p).is_none());
    }

    #[test]
    fn memory_events_are_read() {
        let text = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(parse_oom_kill(text), Some(2));
        assert_eq!(parse_oom_kill("low 0\n"), None);
    }

    /// v2's watch on a directory standing in for a cgroup's, its
    /// memory.events at 0: the watch, with its task running.
    fn v2_watch(dir: &Path) -> (PathBuf, OomWatch) {
        let events = dir.join("memory.events");
        std::fs::write(&events, "oom 0\noom_kill 0\n").unwrap();
        let ino = inotify_on(&[(&events, libc::IN_MODIFY), (dir, libc::IN_ATTRIB)]).unwrap();
        let seen = Arc::new(AtomicBool::new(false));
        let oomd = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(watch_v2(ino, dir.to_owned(), 0, seen.clone(), oomd.clone()));
        let w = OomWatch {
            seen,
            oomd,
            descriptors: 1,
            task,
        };
        (events, w)
    }

    /// A rise of oom_kill is seen, a change of other counters is not.
    #[tokio::test]
    async fn a_rise_of_oom_kill_is_seen() {
        let t = podscope_test_support::TempDir::new();
        let (events, w) = v2_watch(&t.0);
        std::fs::write(&events, "oom 1\noom_kill 0\n").unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!w.seen.load(Ordering::Acquire));
        std::fs::write(&events, "oom 1\noom_kill 1\n").unwrap();
        let end = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while !w.seen.load(Ordering::Acquire) && tokio::time::Instant::now() < end {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(w.seen.load(Ordering::Acquire));
        assert!(!w.oomd.load(Ordering::Acquire));
    }

    /// systemd-oomd's mark on the directory (an extended attribute set is
    /// an IN_ATTRIB there) is seen; the kernel's count is not touched.
    #[tokio::test]
    async fn oomds_mark_is_seen() {
        let t = podscope_test_support::TempDir::new();
        let (_events, w) = v2_watch(&t.0);
        assert!(!oomd_killed(&t.0));
        xattr::set(&t.0, "user.oomd_ooms", b"1").expect("user xattrs on the test's directory");
        assert!(w.oomd_seen(std::time::Duration::from_secs(5)).await);
        assert!(!w.seen.load(Ordering::Acquire));
        assert!(oomd_killed(&t.0));
    }
}
