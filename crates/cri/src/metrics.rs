//! podscope-cri's metrics: every CRI call by method and gRPC code, and
//! its latency, counted in a layer every call passes (outside the
//! deadline layer, so a DEADLINE_EXCEEDED it answers counts too, and a
//! call whose client hung up counts as Canceled); the frontend's bus gates
//! and the process. It binds no TCP port (it is socket-activated, and may
//! not run when a scrape comes): with `metrics_address` set it serves its
//! families on a root-only socket, which podscoped's endpoint reads and
//! merges into one answer (`podscoped::metrics::scrape`).

use crate::daemon::Daemon;
use podscope_metrics::catalog::{self, Process, PROCESS_CRI};
use podscope_metrics::{GateFigures, ProcessFigures, Registry, OTHER};
use std::collections::BTreeSet;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::new(catalog::of(Process::Cri)));

/// podscope-cri's registry.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

const PROTO: &str = include_str!("../../cri-api/proto/api.proto");

/// The CRI's methods, from the proto kubelet and podscope-cri share.
static METHODS: LazyLock<BTreeSet<&'static str>> = LazyLock::new(|| {
    PROTO
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("rpc "))
        .filter_map(|l| l.split('(').next())
        .map(str::trim)
        .collect()
});

/// A request's path (`/runtime.v1.RuntimeService/Version`) as the
/// `method` label: the CRI's method, or `other` for what the proto does
/// not have (a client may send any path).
pub fn method_of(path: &str) -> &'static str {
    let (service, method) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or(("", ""));
    if service != "runtime.v1.RuntimeService" && service != "runtime.v1.ImageService" {
        return OTHER;
    }
    METHODS.get(method).copied().unwrap_or(OTHER)
}

/// gRPC's codes as grpc-go spells them (codes.Code's String).
pub fn code_name(code: i32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("Unknown")
}

fn record(method: &'static str, code: &'static str, took: Duration) {
    REGISTRY.inc(&catalog::CRI_CALLS, &[method, code]);
    REGISTRY.observe(&catalog::CRI_CALL_DURATION, &[method], took.as_secs_f64());
}

/// The layer that counts every call (`server::serve` puts it outermost).
#[derive(Clone, Copy, Default)]
pub struct Layer;

impl<S> tower::Layer<S> for Layer {
    type Service = Metered<S>;
    fn layer(&self, inner: S) -> Metered<S> {
        Metered { inner }
    }
}

#[derive(Clone)]
pub struct Metered<S> {
    inner: S,
}

/// Counts its call as Canceled if dropped before the answer (the
/// client hung up, the connection went).
struct Pending {
    method: &'static str,
    arrived: Instant,
    done: bool,
}

impl Pending {
    fn answered(mut self, code: &'static str) {
        self.done = true;
        record(self.method, code, self.arrived.elapsed());
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            record(self.method, "Canceled", self.arrived.elapsed());
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqB, ResB> tower::Service<http::Request<ReqB>> for Metered<S>
where
    S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<ResB>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let pending = Pending {
            method: method_of(req.uri().path()),
            arrived: Instant::now(),
            done: false,
        };
        let call = self.inner.call(req);
        Box::pin(async move {
            let r = call.await;
            // An error status comes in the headers (tonic answers a
            // failed call "trailers-only"); a call answered OK has its
            // status in the trailers, after the message.
            let code = match &r {
                Ok(res) => res
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .map_or("OK", code_name),
                Err(_) => "Unknown",
            };
            pending.answered(code);
            r
        })
    }
}

/// Where podscope-cri serves its families: in the runtime directory its
/// unit makes (`RuntimeDirectory=podscope/cri`, mode 0700), which systemd
/// removes when it stops. podscoped reads it (`scrape::CRI_SOCKET`).
pub const SOCKET: &str = "/run/podscope/cri/metrics.sock";

/// The families now, this process's gates and usage with them.
pub fn snapshot(daemon: &Daemon) -> podscope_metrics::Snapshot {
    let mut s = REGISTRY.snapshot();
    let (a, b) = daemon.calls();
    s.gate(
        PROCESS_CRI,
        GateFigures {
            slots: (a.max + b.max) as u64,
            in_flight: (a.in_flight + b.in_flight) as u64,
            peak: (a.peak + b.peak) as u64,
            waited: a.waited + b.waited,
            refused_retried: a.refused_retried + b.refused_retried,
            gave_up: a.gave_up + b.gave_up,
        },
    );
    let u = podscope_sys::process::usage();
    s.process(
        PROCESS_CRI,
        ProcessFigures {
            resident_bytes: u.resident_bytes,
            cpu_seconds: u.cpu_seconds,
            open_fds: podscope_sys::descriptors::open_now(),
            max_fds: podscope_sys::descriptors::limit(),
            start_time_seconds: u.start_time_seconds,
        },
    );
    s
}

/// Bind `path` for root alone (its directory 0700, itself 0600); a
/// stale socket is replaced, a live one (another podscope-cri) refused.
pub fn bind(path: &Path) -> std::io::Result<std::os::unix::net::UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another podscope-cri serves its metrics there",
            ));
        }
        std::fs::remove_file(path)?;
    }
    let l = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Answer each connection with the snapshot as JSON, then close; a few
/// at once (only root can connect), each within a deadline.
pub async fn serve(listener: std::os::unix::net::UnixListener, daemon: Arc<Daemon>) {
    let listener = match tokio::net::UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("metrics socket: {e}");
            return;
        }
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(4));
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let json = snapshot(&daemon).to_json();
        tokio::spawn(async move {
            let _ =
                tokio::time::timeout(Duration::from_secs(2), conn.write_all(json.as_bytes())).await;
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_and_codes_are_named_as_the_cri_and_grpc_go_name_them() {
        assert_eq!(
            method_of("/runtime.v1.RuntimeService/RunPodSandbox"),
            "RunPodSandbox"
        );
        assert_eq!(method_of("/runtime.v1.ImageService/PullImage"), "PullImage");
        assert_eq!(method_of("/runtime.v1.RuntimeService/DropTables"), OTHER);
        assert_eq!(method_of("/evil.Service/Version"), OTHER);
        assert_eq!(method_of(""), OTHER);
        assert!(METHODS.len() >= 40, "{METHODS:?}");
        assert_eq!(code_name(0), "OK");
        assert_eq!(code_name(4), "DeadlineExceeded");
        assert_eq!(code_name(16), "Unauthenticated");
        assert_eq!(code_name(99), "Unknown");
    }
}
