//! podscoped's metrics: the one registry every room counts into (the
//! families of `podscope_metrics::catalog`), the endpoint a Prometheus
//! scrapes (`endpoint`), what a scrape reads (`scrape`: the registry, the
//! index's counts, the gates, the process, and podscope-cri's families
//! over its socket), and the bus calls counted as they arrive
//! (`bus_calls`). A scrape calls nothing on the bus and takes no pod's or
//! container's lock.

pub mod bus_calls;
pub mod endpoint;
pub mod scrape;

use podscope_metrics::catalog::{self, Process};
use podscope_metrics::Registry;
use std::sync::LazyLock;
use std::time::Duration;

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::new(catalog::of(Process::Daemon)));

/// The daemon's registry.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

/// One call to systemd (`systemd::counted`).
pub fn systemd_call(method: &'static str) {
    REGISTRY.inc(&catalog::SYSTEMD_CALLS, &[method]);
}

/// A method of podscoped's answered with an error (`bus::errors`).
pub fn bus_error(method: &str, error_name: &str) {
    let error = error_name.rsplit('.').next().unwrap_or(error_name);
    REGISTRY.inc(
        &catalog::BUS_CALL_ERRORS,
        &[bus_calls::known_method(method), error],
    );
}

/// A CNI ADD or DEL through the chain, done or failed.
pub fn cni_operation(operation: &'static str, took: Duration, ok: bool) {
    REGISTRY.observe(&catalog::CNI_DURATION, &[operation], took.as_secs_f64());
    if !ok {
        REGISTRY.inc(&catalog::CNI_FAILURES, &[operation]);
    }
}

/// A container ended by an OOM kill: `kernel` or `systemd-oomd`.
pub fn oom_kill(kind: &'static str) {
    REGISTRY.inc(&catalog::OOM_KILLS, &[kind]);
}

/// An image pull finished: its registry, how long it took, the bytes it
/// fetched, or the kind of error it failed with.
pub fn image_pull(registry: &str, took: Duration, outcome: Result<u64, &str>) {
    let registry = if registry.is_empty() {
        "none"
    } else {
        registry
    };
    REGISTRY.inc(&catalog::IMAGE_PULLS, &[registry]);
    REGISTRY.observe(
        &catalog::IMAGE_PULL_DURATION,
        &[registry],
        took.as_secs_f64(),
    );
    match outcome {
        Ok(bytes) => REGISTRY.add(&catalog::IMAGE_PULL_BYTES, &[registry], bytes as f64),
        Err(reason) => REGISTRY.inc(&catalog::IMAGE_PULL_FAILURES, &[registry, reason]),
    }
}
