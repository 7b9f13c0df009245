//! One bound on the calls podscoped makes on its system-bus connection:
//! to systemd, to systemd-machined and to polkit.
//!
//! dbus-daemon lets a connection wait on at most `max_replies_per_connection`
//! replies (128 in Debian's system.conf); past that, every further call the
//! connection makes fails at once with `org.freedesktop.DBus.Error.LimitsExceeded`,
//! whoever made it. A drain of a full node (kubelet stopping a hundred
//! pods at once, each stopping its containers) made more than 128 calls to
//! systemd at once, and pods failed to stop. So every such call takes a
//! permit first, `bus_calls_max` of them (64 by default, half of
//! dbus-daemon's limit: room for calls it does not see, such as the bus
//! driver's and the object server's replies): a call beyond them waits its
//! turn instead of failing, up to its own deadline. polkit checks may hold
//! at most half of the permits (`bus::polkit`), so a flood of checks from
//! local users never keeps systemd's calls waiting.
//!
//! A refusal by the bus (its LimitsExceeded) that still comes — another
//! bus implementation's limits, calls made outside the gate — means the
//! call was never delivered, so it is repeated with back-off, for up to
//! `REFUSED_RETRY_FOR`. A call that got no reply (`NoReply`, or none by
//! its deadline) may have been carried out: the gate does not repeat it;
//! its caller decides (`systemd::Systemd::start_transient` looks for the
//! unit first).

use crate::error::{Error, Result};
use crate::errors::BUS_LIMITS_EXCEEDED;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

/// The default of `bus_calls_max`.
pub const DEFAULT_MAX: usize = 64;
/// How long a call the bus keeps refusing is repeated before it fails
/// (Busy).
const REFUSED_RETRY_FOR: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// How long a call without a deadline of its own waits for a permit.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// The bus driver's name: the sender of the errors the bus itself makes.
const BUS_DRIVER: &str = "org.freedesktop.DBus";

/// Whether `e` is the bus refusing the call (never delivered). The same
/// error name from the callee (sd-bus answers ENOBUFS with it) means the
/// call was delivered, so only the bus driver's own counts.
pub fn refused_by_bus(e: &zbus::Error) -> bool {
    match e {
        zbus::Error::MethodError(name, _, reply) => {
            name.as_str() == BUS_LIMITS_EXCEEDED
                && reply.header().sender().map(|s| s.as_str()) == Some(BUS_DRIVER)
        }
        _ => false,
    }
}

/// What a call that got no reply by its deadline gives back: read as a
/// `NoReply` by its caller (the call may have been carried out).
fn no_reply_by(what: &str) -> zbus::Error {
    zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what}: no reply by the call's deadline"),
    )))
}

/// The gate's figures, for RuntimeStatus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Permits: calls that may be in flight at once.
    pub max: usize,
    /// Calls in flight now, and the most there have been since start.
    pub in_flight: usize,
    pub peak: usize,
    /// Calls that had to wait for a permit.
    pub waited: u64,
    /// Refusals by the bus that were repeated, and calls that failed
    /// after `REFUSED_RETRY_FOR` of them or waited past their deadline.
    pub refused_retried: u64,
    pub gave_up: u64,
}

pub struct BusGate {
    permits: Semaphore,
    max: usize,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    waited: AtomicU64,
    refused_retried: AtomicU64,
    gave_up: AtomicU64,
}

/// A permit held while one call is in flight.
pub struct Permit<'a> {
    _permit: SemaphorePermit<'a>,
    gate: &'a BusGate,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.gate.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BusGate {
    pub fn new(max: usize) -> Self {
        BusGate {
            permits: Semaphore::new(max),
            max,
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            waited: AtomicU64::new(0),
            refused_retried: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    pub fn figures(&self) -> Figures {
        Figures {
            max: self.max,
            in_flight: self.in_flight.load(Ordering::Relaxed),
            peak: self.peak.load(Ordering::Relaxed),
            waited: self.waited.load(Ordering::Relaxed),
            refused_retried: self.refused_retried.load(Ordering::Relaxed),
            gave_up: self.gave_up.load(Ordering::Relaxed),
        }
    }

    /// A permit, waited for until `deadline`; Busy past it.
    pub async fn permit(&self, what: &str, deadline: Instant) -> Result<Permit<'_>> {
        let permit = match self.permits.try_acquire() {
            Ok(p) => p,
            Err(_) => {
                self.waited.fetch_add(1, Ordering::Relaxed);
                match tokio::time::timeout_at(deadline, self.permits.acquire()).await {
                    Ok(Ok(p)) => p,
                    Ok(Err(_)) => unreachable!("the gate's semaphore is never closed"),
                    Err(_) => {
                        self.gave_up.fetch_add(1, Ordering::Relaxed);
                        return Err(Error::busy(format!(
                            "{what}: all {} of podscoped's system-bus call slots stayed taken until the call's deadline (bus_calls_max)",
                            self.max
                        )));
                    }
                }
            }
        };
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Ok(Permit {
            _permit: permit,
            gate: self,
        })
    }

    /// Run one call (`call` makes it; it is made again only after a
    /// refusal by the bus) under a permit waited for until `deadline`. The
    /// outer error is the gate's own (Busy: no permit in time, or the bus
    /// refused throughout); the inner result is the call's.
    pub async fn call<T, F, Fut>(
        &self,
        what: &str,
        deadline: Instant,
        mut call: F,
    ) -> Result<zbus::Result<T>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = zbus::Result<T>>,
    {
        let _permit = self.permit(what, deadline).await?;
        let mut backoff = FIRST_BACKOFF;
        let give_up = Instant::now() + REFUSED_RETRY_FOR;
        loop {
            // Bounded by the deadline too: a permit is never held for a
            // callee that does not answer.
            let r = tokio::time::timeout_at(deadline, call())
                .await
                .unwrap_or_else(|_| Err(no_reply_by(what)));
            match r {
                Err(e) if refused_by_bus(&e) => {
                    let now = Instant::now();
                    if now + backoff > give_up.min(deadline) {
                        self.gave_up.fetch_add(1, Ordering::Relaxed);
                        return Err(Error::busy(format!(
                            "{what}: the system bus kept refusing the call ({e}); retry later"
                        )));
                    }
                    self.refused_retried.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("{what}: refused by the bus ({e}); again in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                other => return Ok(other),
            }
        }
    }

    /// `call` with the default wait for a permit.
    pub async fn call_soon<T, F, Fut>(&self, what: &str, call: F) -> Result<zbus::Result<T>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = zbus::Result<T>>,
    {
        self.call(what, Instant::now() + DEFAULT_WAIT, call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::sync::Arc;

    /// A LimitsExceeded error sent by `sender`.
    fn limits_exceeded(sender: &str) -> zbus::Error {
        zbus::Error::MethodError(
            zbus::names::OwnedErrorName::try_from(BUS_LIMITS_EXCEEDED).unwrap(),
            Some("The maximum number of pending replies per connection has been reached".into()),
            zbus::message::Message::method_call("/", "Ping")
                .unwrap()
                .sender(sender)
                .unwrap()
                .build(&())
                .unwrap(),
        )
    }

    fn refused() -> zbus::Error {
        limits_exceeded(BUS_DRIVER)
    }

    #[tokio::test(start_paused = true)]
    async fn calls_beyond_the_bound_wait_their_turn() {
        let gate = Arc::new(BusGate::new(4));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (gate, running, most) = (gate.clone(), running.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                gate.call_soon("test", || async {
                    let n = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                })
                .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 4);
        let f = gate.figures();
        assert_eq!((f.max, f.in_flight, f.peak), (4, 0, 4));
        assert_eq!(f.waited, 16);
        assert_eq!(f.gave_up, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_the_deadline_is_busy() {
        let gate = BusGate::new(1);
        let _held = gate
            .permit("held", Instant::now() + DEFAULT_WAIT)
            .await
            .unwrap();
        let e = gate
            .call(
                "StopUnit x",
                Instant::now() + Duration::from_millis(50),
                || async { Ok(()) },
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(e.to_string().contains("StopUnit x"), "{e}");
        assert_eq!(gate.figures().gave_up, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_by_the_bus_is_repeated_then_named() {
        let gate = BusGate::new(2);
        let tries = AtomicUsize::new(0);
        let r = gate
            .call_soon("GetUnit y", || async {
                if tries.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(refused())
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(r.unwrap().unwrap(), 7);
        assert_eq!(gate.figures().refused_retried, 3);

        let e = gate
            .call_soon("GetUnit z", || async { Err::<(), _>(refused()) })
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(e.to_string().contains("kept refusing"), "{e}");
        // Other errors are the call's own, given back at once.
        let other = gate
            .call_soon("GetUnit w", || async {
                Err::<(), _>(zbus::Error::Failure("x".into()))
            })
            .await
            .unwrap();
        assert!(matches!(other, Err(zbus::Error::Failure(_))));
        // The same name from the callee: delivered, so not repeated.
        let tries = AtomicUsize::new(0);
        let callee = gate
            .call_soon("StartTransientUnit v", || async {
                tries.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(limits_exceeded(":1.7"))
            })
            .await
            .unwrap();
        assert!(callee.is_err());
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_unanswered_by_its_deadline_lets_its_permit_go() {
        let gate = BusGate::new(1);
        let r = gate
            .call(
                "StopUnit u",
                Instant::now() + Duration::from_secs(1),
                std::future::pending::<zbus::Result<()>>,
            )
            .await
            .unwrap();
        match r {
            Err(zbus::Error::InputOutput(e)) => {
                assert_eq!(e.kind(), std::io::ErrorKind::TimedOut)
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(gate.figures().in_flight, 0);
        gate.call_soon("next", || async { Ok(()) })
            .await
            .unwrap()
            .unwrap();
    }
}
