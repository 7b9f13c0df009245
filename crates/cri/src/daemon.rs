//! The frontend's one link to podscoped: a system-bus connection made on
//! first use and made again after it breaks (dbus-daemon restarted). The
//! daemon itself restarting needs nothing here: calls go to its bus name,
//! which D-Bus activation brings back.

use super::deadline;
use super::errors::{connection_lost, status_of};
use podscope_api::bus_gate::BusGate;
use podscope_api::proxy::{system_connection, ManagerProxy};
use podscope_api::Client;
use std::future::Future;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tonic::Status;

pub struct Daemon {
    client: Mutex<Option<Client>>,
    /// Calls in flight on `client` (`daemon_calls_max`), and on
    /// `long_client`: each connection may wait on at most 128 replies
    /// (dbus-daemon's max_replies_per_connection), past which the bus
    /// refuses every call of it. A call beyond waits its turn; a refusal
    /// that still comes (the call never reached podscoped) is repeated
    /// with back-off (`bus_gate`).
    gate: BusGate,
    long_gate: BusGate,
    /// Upper bound for one D-Bus call; a longer wait is DEADLINE_EXCEEDED.
    call_timeout: Duration,
    /// Pulls and ExecSyncs on a connection of their own, with a bound to
    /// match: a large image from a slow registry, or a command kubelet gave
    /// no timeout, takes longer than any pod operation (the daemon ends a
    /// pull whose registry stalls, and an exec at its timeout).
    long_client: Mutex<Option<Client>>,
}

/// Upper bound for one PullImage's or ExecSync's D-Bus call.
pub const LONG_CALL_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

impl Daemon {
    pub fn new(call_timeout: Duration, calls_max: usize) -> Self {
        Daemon {
            client: Mutex::new(None),
            gate: BusGate::new(calls_max),
            long_gate: BusGate::new(calls_max),
            call_timeout,
            long_client: Mutex::new(None),
        }
    }

    async fn client(&self) -> zbus::Result<Client> {
        Self::connect(&self.client, self.call_timeout).await
    }

    /// The client itself (for a signal subscription), its failure a status.
    pub async fn signals_client(&self) -> Result<Client, Status> {
        Self::connect(&self.long_client, LONG_CALL_TIMEOUT)
            .await
            .map_err(|e| status_of(&e))
    }

    async fn connect(slot: &Mutex<Option<Client>>, timeout: Duration) -> zbus::Result<Client> {
        let mut slot = slot.lock().await;
        if let Some(p) = slot.as_ref() {
            return Ok(p.clone());
        }
        // Any failure to get a connection reads as one broken (UNAVAILABLE).
        let unavailable = |e: zbus::Error| {
            zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!("cannot connect to the system bus: {e}"),
            )))
        };
        let conn = system_connection(timeout).await.map_err(unavailable)?;
        // No properties to cache: building the proxy costs no round-trip.
        let p = ManagerProxy::builder(&conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(unavailable)?;
        let c = Client::from_proxy(p).await.map_err(unavailable)?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Run one call to podscoped; a broken connection is dropped so the
    /// next call makes a new one. It waits (for a slot on the bus, then for
    /// the answer) until the frontend's own bound (`--call-timeout`) or the
    /// caller's deadline (`deadline::current`), whichever is first.
    pub async fn call<T, F, Fut>(&self, mut f: F) -> Result<T, zbus::Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = zbus::Result<T>>,
    {
        let bound = Bound::of(self.call_timeout, "--call-timeout");
        let r = bound
            .keep(async {
                let client = self.client().await?;
                self.gate
                    .call("a call to podscoped", bound.own, || f(client.clone()))
                    .await
                    .unwrap_or_else(|e| Err(refused(e)))
            })
            .await;
        if let Err(e) = &r {
            if connection_lost(e) {
                tracing::warn!("system bus connection lost ({e}); reconnecting on the next call");
                *self.client.lock().await = None;
            }
        }
        r
    }

    /// Calls in flight to podscoped now, and the most at once since start
    /// (on the connection for pulls and execs too).
    pub fn calls(
        &self,
    ) -> (
        podscope_api::bus_gate::Figures,
        podscope_api::bus_gate::Figures,
    ) {
        (self.gate.figures(), self.long_gate.figures())
    }

    /// A pull or an exec, on their connection, its error as a gRPC status.
    pub async fn long_rpc<T, F, Fut>(&self, mut f: F) -> Result<T, Status>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = zbus::Result<T>>,
    {
        let bound = Bound::of(LONG_CALL_TIMEOUT, "the bound on pulls and execs");
        let r = bound
            .keep(async {
                let c = Self::connect(&self.long_client, LONG_CALL_TIMEOUT).await?;
                self.long_gate
                    .call("a pull or exec in podscoped", bound.own, || f(c.clone()))
                    .await
                    .unwrap_or_else(|e| Err(refused(e)))
            })
            .await;
        if let Err(e) = &r {
            if connection_lost(e) {
                *self.long_client.lock().await = None;
            }
        }
        r.map_err(|e| status_of(&e))
    }

    /// `call`, with the error already a gRPC status.
    pub async fn rpc<T, F, Fut>(&self, f: F) -> Result<T, Status>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = zbus::Result<T>>,
    {
        self.call(f).await.map_err(|e| status_of(&e))
    }
}

/// How long one call may wait on podscoped: the frontend's own bound, cut
/// to the caller's deadline when that comes first.
struct Bound {
    own: Instant,
    what: &'static str,
    caller: Option<Instant>,
}

impl Bound {
    fn of(own: Duration, what: &'static str) -> Self {
        let own = Instant::now() + own;
        Bound {
            own,
            what,
            caller: deadline::current().filter(|d| *d < own),
        }
    }

    /// `work` within the bound. Past it, the wait ends as a timeout
    /// (DEADLINE_EXCEEDED, `errors::status_of`) that says whose bound it
    /// was; podscoped's reply, if one still comes, goes unread.
    async fn keep<T>(&self, work: impl Future<Output = zbus::Result<T>>) -> zbus::Result<T> {
        let timed_out = |whose: String| {
            zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                whose,
            )))
        };
        let r = match self.caller {
            Some(d) => tokio::time::timeout_at(d, work)
                .await
                .unwrap_or_else(|_| Err(timed_out("the caller's deadline passed".into()))),
            None => work.await,
        };
        // zbus's own method timeout is the frontend's bound.
        r.map_err(|e| match e {
            zbus::Error::InputOutput(io)
                if io.kind() == std::io::ErrorKind::TimedOut && self.caller.is_none() =>
            {
                timed_out(format!("past podscope-cri's {}", self.what))
            }
            e => e,
        })
    }
}

/// The gate's own failure (the bus refused throughout, or no slot within
/// the call's bound) as the bus's refusal: podscoped never saw the call,
/// and it reads as UNAVAILABLE (`errors::status_of`).
fn refused(e: podscope_api::Error) -> zbus::Error {
    zbus::fdo::Error::LimitsExceeded(e.to_string()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_timeout(e: &zbus::Error, says: &str) -> bool {
        matches!(e, zbus::Error::InputOutput(io)
            if io.kind() == std::io::ErrorKind::TimedOut && io.to_string().contains(says))
    }

    /// A wait on podscoped ends at the caller's deadline when it comes
    /// before the frontend's own bound, and says whose it was; zbus's own
    /// timeout is named as the frontend's bound.
    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_the_callers_deadline_or_names_the_frontends_bound() {
        let never = || std::future::pending::<zbus::Result<()>>();
        let deadline = Instant::now() + Duration::from_secs(2);
        let e = deadline::within(deadline, async {
            Bound::of(Duration::from_secs(240), "--call-timeout")
                .keep(never())
                .await
        })
        .await
        .unwrap_err();
        assert!(is_timeout(&e, "the caller's deadline passed"), "{e:?}");
        assert_eq!(status_of(&e).code(), tonic::Code::DeadlineExceeded);
        assert_eq!(Instant::now(), deadline);
        // A caller's deadline past the frontend's bound leaves it to zbus.
        let far = deadline::within(Instant::now() + Duration::from_secs(3600), async {
            Bound::of(Duration::from_secs(240), "--call-timeout").caller
        })
        .await;
        assert_eq!(far, None);
        let zbus_timeout = || async {
            Err::<(), _>(zbus::Error::InputOutput(std::sync::Arc::new(
                std::io::ErrorKind::TimedOut.into(),
            )))
        };
        let e = Bound::of(Duration::from_secs(240), "--call-timeout")
            .keep(zbus_timeout())
            .await
            .unwrap_err();
        assert!(
            is_timeout(&e, "past podscope-cri's --call-timeout"),
            "{e:?}"
        );
    }
}
