//! Caps on calls that stay pending: how many of a kind may be in flight
//! for one local user, and for everyone together. Reading is open to every
//! local user, and a user can open any number of bus connections, so the
//! share is per uid, not per sender. Root (the CRI frontend, kubelet's
//! path) is never held back by another user's share.

use podscope_api::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Counts {
    total: usize,
    by_uid: HashMap<u32, usize>,
}

/// One kind of pending call, with its caps.
#[derive(Clone)]
pub struct Limiter {
    /// What the calls are, for the error ("polkit checks").
    what: &'static str,
    per_uid: usize,
    total: usize,
    counts: Arc<Mutex<Counts>>,
}

/// One call counted while it lives.
pub struct Slot {
    uid: u32,
    counts: Arc<Mutex<Counts>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap();
        c.total -= 1;
        if let Some(n) = c.by_uid.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                c.by_uid.remove(&self.uid);
            }
        }
    }
}

impl Limiter {
    pub fn new(what: &'static str, per_uid: usize, total: usize) -> Self {
        Limiter {
            what,
            per_uid,
            total,
            counts: Arc::default(),
        }
    }

    /// A slot for one more call by `uid`, or LimitsExceeded at once. Root
    /// has no per-uid share; its calls count towards the total only when
    /// `root_counts` (Wait: each holds a task).
    pub fn acquire(&self, uid: u32, root_counts: bool) -> Result<Option<Slot>> {
        if uid == 0 && !root_counts {
            return Ok(None);
        }
        let mut c = self.counts.lock().unwrap();
        if c.total >= self.total {
            return Err(Error::limits_exceeded(format!(
                "{} {} are in flight already; try again later",
                self.total, self.what
            )));
        }
        let mine = c.by_uid.get(&uid).copied().unwrap_or(0);
        if uid != 0 && mine >= self.per_uid {
            return Err(Error::limits_exceeded(format!(
                "uid {uid} has {} {} in flight already (at most {} per user); try again later",
                mine, self.what, self.per_uid
            )));
        }
        c.total += 1;
        *c.by_uid.entry(uid).or_default() += 1;
        Ok(Some(Slot {
            uid,
            counts: self.counts.clone(),
        }))
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.counts.lock().unwrap().total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::error::ErrorKind;

    #[test]
    fn a_user_gets_a_share_and_root_is_never_held_back_by_it() {
        let l = Limiter::new("checks", 2, 3);
        let a1 = l.acquire(1000, false).unwrap();
        let _a2 = l.acquire(1000, false).unwrap();
        let e = l.acquire(1000, false).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::LimitsExceeded);
        assert!(e.to_string().contains("uid 1000 has 2 checks"), "{e}");
        // Another user still has room; root is not counted here.
        let _b = l.acquire(1001, false).unwrap();
        assert!(l.acquire(0, false).unwrap().is_none());
        // The total is reached.
        assert!(l.acquire(1002, false).is_err());
        assert_eq!(l.in_flight(), 3);
        drop(a1);
        assert_eq!(l.in_flight(), 2);
        l.acquire(1000, false).unwrap();
    }

    #[test]
    fn root_counts_towards_the_total_when_asked() {
        let l = Limiter::new("waits", 1, 2);
        let _r1 = l.acquire(0, true).unwrap();
        let _r2 = l.acquire(0, true).unwrap();
        assert!(l.acquire(0, true).is_err());
    }
}
