//! What every CRI call uses: `Cri`, the frontend's one shared state (the
//! daemon's bus connections, the streaming server, the CPU rates between
//! two stats calls), a call traced with its duration, a mutating call
//! detached from its client, ids checked before the bus is asked.

use crate::daemon::Daemon;
use crate::stats::CpuRates;
use std::future::Future;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tonic::{Response, Status};
use tracing::{debug, warn};

pub struct Cri {
    pub daemon: Arc<Daemon>,
    pub(crate) rates: CpuRates,
    /// Where Exec, Attach and PortForward send their clients.
    pub(crate) stream: Arc<crate::stream::StreamServer>,
}

impl Cri {
    pub fn new(daemon: Arc<Daemon>, stream: Arc<crate::stream::StreamServer>) -> Arc<Self> {
        Arc::new(Cri {
            daemon,
            rates: CpuRates::default(),
            stream,
        })
    }

    /// The frontend's own figures for a verbose Status: its descriptors
    /// (it holds none per pod or container: a socket per client, a few per
    /// streaming session, its two bus connections) and its calls to
    /// podscoped in flight.
    pub(crate) fn frontend_json(&self) -> String {
        let (calls, long) = self.daemon.calls();
        serde_json::json!({
            "descriptors_limit": podscope_sys::descriptors::limit(),
            "descriptors_open": podscope_sys::descriptors::open_now(),
            "daemon_calls_max": calls.max,
            "daemon_calls_in_flight": calls.in_flight + long.in_flight,
            "daemon_calls_peak": calls.peak,
            "daemon_calls_waited": calls.waited + long.waited,
            "daemon_refusals_retried": calls.refused_retried + long.refused_retried,
        })
        .to_string()
    }
}

pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Run one CRI call: debug log with method, sandbox and duration on
/// success, warning with the code on failure.
pub(crate) async fn traced<T>(
    method: &'static str,
    sandbox: &str,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<Response<T>, Status> {
    let t0 = Instant::now();
    let r = call.await;
    let us = t0.elapsed().as_micros() as u64;
    match &r {
        Ok(_) => debug!(
            cri_method = method,
            sandbox_id = sandbox,
            elapsed_us = us,
            "CRI {method} {sandbox}: ok in {us} µs"
        ),
        Err(s) => warn!(
            cri_method = method,
            sandbox_id = sandbox,
            code = ?s.code(),
            elapsed_us = us,
            "CRI {method} {sandbox}: {:?}: {}",
            s.code(),
            s.message()
        ),
    }
    r.map(Response::new)
}

/// Run `work` to completion even if the caller goes away or its deadline
/// passes, and wait for it. The task does not inherit the caller's
/// deadline (`deadline::current`): its calls to podscoped are bound only by
/// the frontend's own, so the work ends whole, and a retry joins it.
pub(crate) async fn detached<T: Send + 'static>(
    work: impl Future<Output = Result<T, Status>> + Send + 'static,
) -> Result<T, Status> {
    tokio::spawn(work)
        .await
        .unwrap_or_else(|e| Err(Status::internal(format!("CRI task failed: {e}"))))
}

pub(crate) fn required_id(id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(Status::invalid_argument(
            "pod_sandbox_id: must not be empty",
        ));
    }
    podscope_api::domain::id::validate_prefix(id)
        .map_err(|e| Status::invalid_argument(format!("pod_sandbox_id: {e}")))
}

/// Whether `id` cannot name any pod or container of `kind`: Stop and Remove
/// of it have nothing to do. (Other calls name it as an invalid argument.)
pub(crate) fn cannot_name(kind: &str, id: &str) -> bool {
    let no = podscope_api::domain::id::validate_prefix_of(kind, id).is_err();
    if no {
        tracing::debug!("{kind} id {id:?} names nothing: nothing to stop or remove");
    }
    no
}

pub(crate) fn unimplemented(what: &str) -> Status {
    Status::unimplemented(format!("{what}: not implemented by podscope"))
}

/// A streaming call's answer, whatever makes it.
pub type Streamed<T> =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;
