//! Waiting for systemd jobs without the JobRemoved race.
//!
//! The race: a job can finish (and JobRemoved be emitted) before the caller
//! that queued it has the job path to wait for. The tracker is fed by one
//! dispatcher that subscribed to JobRemoved *before* any job was queued; a
//! result that arrives before its waiter is parked in `done` until claimed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long an unclaimed result is kept: a waiter arrives within a method
/// round-trip, and most results are never claimed (jobs systemd queued by
/// itself, a pod slice's start, a netns unit's stop left to systemd): a
/// burst's hundreds must not outlive it long.
const UNCLAIMED_TTL: Duration = Duration::from_secs(10);
/// How often unclaimed results are looked at when no job comes.
pub const PRUNE_EVERY: Duration = Duration::from_secs(5);

#[derive(Default)]
pub struct JobTracker {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    waiters: HashMap<String, oneshot::Sender<String>>,
    done: HashMap<String, (String, Instant)>,
}

pub enum Waiter {
    Ready(String),
    Pending(oneshot::Receiver<String>),
}

impl JobTracker {
    /// Called by the dispatcher for every JobRemoved of a unit we care about.
    pub fn finished(&self, job: &str, result: &str) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(tx) = inner.waiters.remove(job) {
            let _ = tx.send(result.to_owned());
            return;
        }
        let now = Instant::now();
        inner
            .done
            .retain(|_, (_, at)| now.duration_since(*at) < UNCLAIMED_TTL);
        inner.done.insert(job.to_owned(), (result.to_owned(), now));
    }

    /// Drop unclaimed results past their time (also without new jobs).
    pub fn prune(&self) {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap();
        inner
            .done
            .retain(|_, (_, at)| now.duration_since(*at) < UNCLAIMED_TTL);
        if inner.done.is_empty() {
            inner.done.shrink_to_fit();
        }
    }

    /// Register interest in `job`; the result may already be there.
    pub fn watch(&self, job: &str) -> Waiter {
        let mut inner = self.inner.lock().unwrap();
        if let Some((result, _)) = inner.done.remove(job) {
            return Waiter::Ready(result);
        }
        let (tx, rx) = oneshot::channel();
        inner.waiters.insert(job.to_owned(), tx);
        Waiter::Pending(rx)
    }

    /// Forget a waiter that gave up (timeout).
    pub fn forget(&self, job: &str) {
        let mut inner = self.inner.lock().unwrap();
        inner.waiters.remove(job);
        inner.done.remove(job);
    }

    /// Wait for the result of `job`, at most `timeout`.
    pub async fn wait(&self, job: &str, timeout: Duration) -> Option<String> {
        match self.watch(job) {
            Waiter::Ready(r) => Some(r),
            Waiter::Pending(rx) => match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(r)) => Some(r),
                _ => {
                    self.forget(job);
                    None
                }
            },
        }
    }

    #[cfg(test)]
    fn parked(&self) -> usize {
        self.inner.lock().unwrap().done.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn result_before_waiter_is_not_lost() {
        let t = JobTracker::default();
        t.finished("/job/1", "done");
        assert_eq!(
            t.wait("/job/1", Duration::from_millis(10)).await.as_deref(),
            Some("done")
        );
        assert_eq!(t.parked(), 0);
    }

    #[tokio::test]
    async fn waiter_before_result() {
        let t = std::sync::Arc::new(JobTracker::default());
        let t2 = t.clone();
        let h = tokio::spawn(async move { t2.wait("/job/2", Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        t.finished("/job/2", "failed");
        assert_eq!(h.await.unwrap().as_deref(), Some("failed"));
    }

    #[tokio::test]
    async fn timeout_forgets_the_waiter() {
        let t = JobTracker::default();
        assert_eq!(t.wait("/job/3", Duration::from_millis(10)).await, None);
        // A late result for a forgotten job is parked, not delivered anywhere.
        t.finished("/job/3", "done");
        assert_eq!(t.parked(), 1);
    }
}
