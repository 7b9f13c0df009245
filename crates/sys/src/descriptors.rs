//! File descriptors: the daemons' limit, what they hold, and a budget that
//! refuses a call before its first step when too few are left.
//!
//! systemd starts services with a soft `RLIMIT_NOFILE` of 1024 (its hard
//! limit is 524288), kept low for programs that still use select(2). A node
//! runs 110 pods and more, and podscoped holds ~5 descriptors for each
//! running container (its output pipes' read ends, its log file, its OOM
//! watch): a full node ran out at ~200 containers, and every part of the
//! daemon failed with EMFILE halfway through its step. So:
//!
//! - podscoped and podscope-cri raise their soft limit to the hard one at
//!   start (`raise`), as Go programs (runc, containerd, kubelet) do. The
//!   processes the daemon runs (CNI plugins, the OCI runtime, the pods'
//!   inits) inherit it, as containerd's and CRI-O's children inherit
//!   theirs: giving them the first one back would take a hook between
//!   fork and exec, which makes the standard library fork the whole daemon
//!   (its page tables, its thousands of descriptors) instead of
//!   vfork-spawning, for every plugin and runtime run.
//! - Each mutating call reserves what it may open while it runs (and, for
//!   a start, what it keeps) before its first step (`Budget::reserve`):
//!   past the limit less `HEADROOM`, it is LimitsExceeded (gRPC
//!   RESOURCE_EXHAUSTED), named, with nothing done, instead of Internal
//!   with half of it done.

use podscope_api::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Descriptors kept free for what no reservation covers: Stop and Remove,
/// which a drain must never see refused and which free more than they use
/// (a CNI DEL's plugins take ~6 while they run), the descriptors that come
/// with incoming messages (an Exec's pipes) before any call can look, the
/// journal, reading the configuration, a bus reconnect.
pub const HEADROOM: u64 = 128;

/// What a call may open while it runs, beyond what it keeps (measured in
/// the harness, with room): a pod's Create (CNI plugins' pipes and the
/// namespace it holds), a pod's Start (the init's pipes and pidfd), a
/// container's Create (the bundle's files), a container's Start (the
/// pipes and their copies for systemd and the init, the runtime's pipes),
/// an Exec or Attach (its unit's pipes, its control socket), a pull (its
/// connections and layer files), a port forward (a socket).
pub mod cost {
    pub const POD_CREATE: u64 = 24;
    pub const POD_START: u64 = 12;
    pub const CONTAINER_CREATE: u64 = 8;
    /// Beyond `CONTAINER_HELD`, which a running container keeps.
    pub const CONTAINER_START: u64 = 24;
    /// A running container: stdout and stderr read ends, its log file,
    /// its OOM watch (an eventfd and memory.oom_control on cgroup v1, an
    /// inotify on v2), and for stdin or a terminal one more each. The
    /// daemon's own count of each is `Containers::descriptors_held`.
    pub const CONTAINER_HELD: u64 = 7;
    pub const EXEC: u64 = 16;
    pub const PULL: u64 = 32;
    pub const PORT_FORWARD: u64 = 4;
}

/// The process's descriptor limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The soft limit it was started with, and now.
    pub soft_before: u64,
    pub soft: u64,
    pub hard: u64,
}

fn get() -> std::io::Result<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r)
}

/// Raise the soft limit to the hard one; call once, at start.
pub fn raise() -> std::io::Result<Limit> {
    let mut r = get()?;
    let before = r.rlim_cur;
    if r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(Limit {
        soft_before: before,
        soft: r.rlim_cur,
        hard: r.rlim_max,
    })
}

/// `raise`, said in the journal; a failure is said and not fatal: the
/// budget then works within the limit there is.
pub fn raise_at_start(who: &str) {
    match raise() {
        Ok(l) => tracing::info!(
            nofile_soft = l.soft,
            nofile_hard = l.hard,
            "{who}: file descriptor limit {} (soft limit raised from {})",
            l.soft,
            l.soft_before
        ),
        Err(e) => tracing::warn!("{who}: cannot raise the file descriptor limit: {e}"),
    }
}

/// The limit now.
pub fn limit() -> u64 {
    get().map(|r| r.rlim_cur).unwrap_or(1024)
}

/// Descriptors this process has open now.
/// Unreadable (no descriptor left to open it with, most likely) counts as
/// all of them: the budget then refuses instead of letting a call through.
pub fn open_now() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        // The directory's own descriptor is among them.
        .map(|d| d.count().saturating_sub(1) as u64)
        .unwrap_or_else(|_| limit())
}

/// The budget's figures, for RuntimeStatus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub limit: u64,
    pub open: u64,
    /// Promised to calls in flight.
    pub reserved: u64,
    /// The most open at once since start (seen at reservations).
    pub peak: u64,
    /// Calls refused since start (LimitsExceeded).
    pub refused: u64,
}

pub struct Budget {
    limit: u64,
    /// How many are open (`open_now`; a fixed count in the unit tests,
    /// which share their process with other tests).
    count: fn() -> u64,
    /// Reservations are made one at a time: a count and a check that
    /// stay true together.
    reserved: Mutex<u64>,
    peak: AtomicU64,
    refused: AtomicU64,
}

/// Descriptors promised to one call, given back when it ends.
pub struct Reservation {
    budget: Arc<Budget>,
    n: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        *self.budget.reserved.lock().unwrap() -= self.n;
    }
}

impl Budget {
    /// A budget under `limit` (the process's soft limit).
    pub fn new(limit: u64) -> Self {
        Self::counting(limit, open_now)
    }

    fn counting(limit: u64, count: fn() -> u64) -> Self {
        Budget {
            limit,
            count,
            reserved: Mutex::new(0),
            peak: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn figures(&self) -> Figures {
        let open = (self.count)();
        self.peak.fetch_max(open, Ordering::Relaxed);
        Figures {
            limit: self.limit,
            open,
            reserved: *self.reserved.lock().unwrap(),
            peak: self.peak.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }

    /// `n` descriptors for `what`, or LimitsExceeded saying how many are
    /// open, promised and asked for.
    pub fn reserve(self: &Arc<Self>, what: &str, n: u64) -> Result<Reservation> {
        let mut reserved = self.reserved.lock().unwrap();
        let open = (self.count)();
        self.peak.fetch_max(open, Ordering::Relaxed);
        if open + *reserved + n + HEADROOM > self.limit {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(Error::limits_exceeded(format!(
                "{what}: refused before any step: {open} of podscoped's {} file descriptors are open and {} promised to calls in flight, it needs {n} and keeps {HEADROOM} free (raise LimitNOFILE= of the unit: podscoped(8))",
                self.limit, *reserved
            )));
        }
        *reserved += n;
        Ok(Reservation {
            budget: self.clone(),
            n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::error::ErrorKind;

    #[test]
    fn a_call_past_the_budget_is_refused_by_name_and_reservations_come_back() {
        let b = Arc::new(Budget::counting(100 + HEADROOM + 10, || 100));
        let r1 = b.reserve("one", 6).unwrap();
        let e = b.reserve("sandbox abc: create", 6).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::LimitsExceeded);
        let m = e.to_string();
        assert!(
            m.starts_with("sandbox abc: create: refused before any step"),
            "{m}"
        );
        let expect = format!(
            "100 of podscoped's {} file descriptors are open and 6 promised",
            110 + HEADROOM
        );
        assert!(m.contains(&expect), "{m}");
        drop(r1);
        assert_eq!(b.figures().reserved, 0);
        assert_eq!(b.figures().refused, 1);
        let _r2 = b.reserve("two", 6).unwrap();
        assert_eq!(b.figures().reserved, 6);
    }

    /// A child of its own, so no other test's descriptors come and go
    /// while it counts.
    #[test]
    fn open_descriptors_are_counted_and_the_soft_limit_raised() {
        // SAFETY: the child makes system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = (|| {
                let before = open_now();
                let f = std::fs::File::open("/proc/self/status").ok()?;
                (open_now() == before + 1).then_some(())?;
                drop(f);
                (open_now() == before).then_some(())?;
                // Lower first, so that raising has room to show.
                let mut r = get().ok()?;
                r.rlim_cur = 512.min(r.rlim_max);
                // SAFETY: a struct on this stack.
                (unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0).then_some(())?;
                let l = raise().ok()?;
                (l.soft_before == r.rlim_cur && l.soft == l.hard && limit() == l.hard).then_some(())
            })();
            // SAFETY: leaving the forked child at once.
            unsafe { libc::_exit(if ok.is_some() { 0 } else { 1 }) }
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status:#x}"
        );
    }
}
