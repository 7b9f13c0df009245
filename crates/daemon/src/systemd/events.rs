//! The queue between systemd's unit signals and the lifecycle's handlers.
//!
//! A drain of a full node makes thousands of unit signals within seconds
//! (every container and pod unit passes through deactivating, inactive,
//! removed). The dispatchers must never stop reading them: zbus stops
//! reading the whole connection, replies included, while a signal stream
//! is full. And the queue must not grow with the burst. So events are
//! kept per unit, the latest one winning: the handlers read the unit's
//! state back from systemd anyway (an event can be stale by the time it is
//! handled), so an intermediate state folded away loses nothing. The queue
//! holds at most one event per unit, and units are bounded by the pods and
//! containers there are.

use super::UnitEvent;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::Notify;

#[derive(Default)]
pub struct UnitEvents {
    inner: Mutex<Pending>,
    ready: Notify,
}

#[derive(Default)]
struct Pending {
    /// Units in the order their first pending event came.
    order: VecDeque<String>,
    latest: HashMap<String, UnitEvent>,
}

impl UnitEvents {
    /// Queue `ev`, folding it into an event of the same unit not yet taken.
    pub fn push(&self, ev: UnitEvent) {
        let mut p = self.inner.lock().unwrap();
        match p.latest.get_mut(&ev.unit) {
            Some(queued) => {
                let removed = ev.active_state.is_none() && ev.sub_state.is_none();
                if removed {
                    *queued = ev;
                } else {
                    // A signal may carry one of the two states only.
                    queued.active_state = ev.active_state.or(queued.active_state.take());
                    queued.sub_state = ev.sub_state.or(queued.sub_state.take());
                }
            }
            None => {
                p.order.push_back(ev.unit.clone());
                p.latest.insert(ev.unit.clone(), ev);
            }
        }
        drop(p);
        self.ready.notify_one();
    }

    fn take(&self) -> Option<UnitEvent> {
        let mut p = self.inner.lock().unwrap();
        let unit = p.order.pop_front()?;
        p.latest.remove(&unit)
    }

    /// The next event, waiting for one.
    pub async fn next(&self) -> UnitEvent {
        loop {
            let notified = self.ready.notified();
            if let Some(ev) = self.take() {
                // Wake another taker for what is left.
                if !self.is_empty() {
                    self.ready.notify_one();
                }
                return ev;
            }
            notified.await;
        }
    }

    /// Events waiting to be taken (one per unit at most).
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(unit: &str, active: Option<&str>, sub: Option<&str>) -> UnitEvent {
        UnitEvent {
            unit: unit.into(),
            active_state: active.map(Into::into),
            sub_state: sub.map(Into::into),
        }
    }

    #[tokio::test]
    async fn a_burst_holds_one_event_per_unit_the_latest() {
        let q = UnitEvents::default();
        for round in 0..1000 {
            for u in ["podscope-a.scope", "podscope-ctr-b.service"] {
                let state = if round % 2 == 0 {
                    "deactivating"
                } else {
                    "active"
                };
                q.push(ev(u, Some(state), Some("running")));
            }
        }
        // Only SubState in the last signal of b: the ActiveState stays.
        q.push(ev("podscope-ctr-b.service", None, Some("exited")));
        q.push(ev("podscope-a.scope", None, None));
        assert_eq!(q.len(), 2);
        let a = q.next().await;
        assert_eq!(a.unit, "podscope-a.scope");
        assert_eq!((a.active_state, a.sub_state), (None, None), "removed wins");
        let b = q.next().await;
        assert_eq!(b.active_state.as_deref(), Some("active"));
        assert_eq!(b.sub_state.as_deref(), Some("exited"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn takers_wait_for_events_and_each_gets_one() {
        let q = std::sync::Arc::new(UnitEvents::default());
        let mut takers = Vec::new();
        for _ in 0..3 {
            let q = q.clone();
            takers.push(tokio::spawn(async move { q.next().await.unit }));
        }
        tokio::task::yield_now().await;
        for u in ["x", "y", "z"] {
            q.push(ev(u, Some("inactive"), None));
        }
        let mut got = Vec::new();
        for t in takers {
            got.push(t.await.unwrap());
        }
        got.sort();
        assert_eq!(got, ["x", "y", "z"]);
    }
}
