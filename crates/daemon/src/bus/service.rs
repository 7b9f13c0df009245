//! The daemon behind its D-Bus objects: the pods, containers and images,
//! the polkit authorizer, the callers' watch and limits, the descriptor
//! budget, and the operations in flight (each mutating call runs to the
//! end in a task of its own, whatever its caller does; shutdown waits for
//! them). The verbs are beside the objects that answer them: sandbox.rs,
//! container.rs, images.rs.

use super::polkit;
use super::BUS_NAME;
use crate::pod::Pods;
use podscope_api::domain::State;
use podscope_api::error::{Error, Result};
use podscope_api::{Condition, HandlerFeatures, Quarantined, RuntimeInfo};
use podscope_sys::descriptors::Budget;
use std::future::Future;
use std::sync::Arc;
use tracing::warn;
use zbus::Connection;

/// Wait calls in flight at once, from all callers (each holds a task and
/// a reply slot until its pod stops or its caller leaves; reading is open
/// to every local user), and per user other than root.
pub const MAX_WAITERS: usize = 1024;
pub const WAITERS_PER_UID: usize = 64;

pub struct Service {
    pub pods: Arc<Pods>,
    pub containers: Arc<crate::container::Containers>,
    pub images: Arc<crate::image::Images>,
    pub(crate) auth: polkit::Authorizer,
    pub(crate) conn: Connection,
    /// Mutating operations in flight; shutdown waits for them.
    pub(crate) inflight: tokio::sync::watch::Sender<usize>,
    /// Mutating operations done since start.
    pub(crate) done: std::sync::atomic::AtomicU64,
    pub(crate) callers: super::callers::Callers,
    pub(crate) waiters: super::limits::Limiter,
    /// The bound on the daemon's own calls on the bus (its figures go in
    /// RuntimeStatus).
    pub(crate) gate: Arc<podscope_api::bus_gate::BusGate>,
    /// File descriptors: each mutating call reserves what it may open
    /// before its first step (`descriptors`).
    pub fds: Arc<Budget>,
}

impl Service {
    /// Run `fut` to completion in its own task, whatever happens to the
    /// caller, counting it as in flight until it is done.
    pub(super) async fn detached<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.inflight.send_modify(|n| *n += 1);
        let tx = self.inflight.clone();
        let handle = tokio::spawn(async move {
            let r = fut.await;
            tx.send_modify(|n| *n -= 1);
            r
        });
        self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        handle
            .await
            .map_err(|e| Error::internal(format!("operation task failed: {e}")))?
    }

    /// Export `obj` at `path` (a sandbox or container just made).
    pub(super) async fn export<T: zbus::object_server::Interface>(
        &self,
        path: &zbus::zvariant::OwnedObjectPath,
        obj: T,
    ) -> Result<()> {
        self.conn
            .object_server()
            .at(path, obj)
            .await
            .map(drop)
            .map_err(|e| Error::internal(format!("export {path}: {e}")))
    }

    /// Take `what`'s object off the bus once it is removed; a failure is
    /// logged, never the removal's (the record is gone either way).
    pub(super) async fn unexport<T: zbus::object_server::Interface>(
        &self,
        path: &zbus::zvariant::OwnedObjectPath,
        what: &str,
    ) {
        if let Err(e) = self.conn.object_server().remove::<T, _>(path).await {
            warn!("{what}: unexport {path}: {e}");
        }
    }

    /// Mutating operations done since start (counted as they are handed
    /// to their task).
    pub fn operations_done(&self) -> u64 {
        self.done.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn operations_in_flight(&self) -> usize {
        *self.inflight.borrow()
    }

    /// Stop taking calls, then wait (at most `limit`) for the operations in
    /// flight to finish, so a restart does not cut a Start or Stop in half.
    pub async fn drain(&self, limit: std::time::Duration) {
        // Bounded: shutdown must never hang on the bus.
        match tokio::time::timeout(
            std::time::Duration::from_secs(2),
            self.conn.release_name(BUS_NAME),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!("releasing {BUS_NAME}: {e}"),
            Err(_) => warn!("releasing {BUS_NAME}: no answer from the bus within 2 s"),
        }
        let mut rx = self.inflight.subscribe();
        let n = *rx.borrow();
        if n > 0 {
            tracing::info!("waiting for {n} operations in flight");
        }
        if tokio::time::timeout(limit, rx.wait_for(|n| *n == 0))
            .await
            .is_err()
        {
            warn!(
                "{} operations still in flight after {} s; exiting anyway",
                *rx.borrow(),
                limit.as_secs()
            );
        }
    }

    pub async fn runtime_status(&self) -> (Vec<Condition>, RuntimeInfo) {
        let lc = &self.pods;
        let rec = lc.recovery_report();
        let ctr_rec = self.containers.recovery_report();
        let platform = podscope_api::domain::platform::host();
        let layout = crate::host::cgroup_layout::detect();
        let condition = |kind: &str, status: bool, reason: &str, message: String| Condition {
            kind: kind.to_owned(),
            status,
            reason: reason.to_owned(),
            message,
        };
        let network = match lc.cni.readiness().await {
            Ok(list) => condition(
                "NetworkReady",
                true,
                "",
                format!(
                    "CNI network {:?} ({}, cniVersion {}, plugins {})",
                    list.name,
                    list.source.display(),
                    list.cni_version,
                    list.plugins
                        .iter()
                        .map(|p| p.plugin_type.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Err(nr) => condition("NetworkReady", false, nr.reason, nr.message),
        };
        // A handler is ready when its binary is there; the default one
        // decides RuntimeReady (kubelet's pods without a RuntimeClass).
        let unavailable: Vec<(String, String)> = lc
            .settings
            .runtimes
            .iter()
            .filter(|(_, h)| !h.path.is_file())
            .map(|(name, h)| {
                (
                    name.clone(),
                    format!("{name}: {} is not there", h.path.display()),
                )
            })
            .collect();
        let runtime = match unavailable
            .iter()
            .find(|(n, _)| *n == lc.settings.default_runtime)
        {
            Some((_, why)) => condition(
                "RuntimeReady",
                false,
                "RuntimeMissing",
                format!("the default runtime handler {why}"),
            ),
            None => condition("RuntimeReady", true, "", String::new()),
        };
        let conditions = vec![runtime, network];
        // The default handler first: it is the CRI's "" too.
        let mut handler_features = Vec::new();
        let default = &lc.settings.default_runtime;
        let names =
            std::iter::once(default).chain(lc.settings.runtimes.keys().filter(|n| *n != default));
        for name in names {
            let f = crate::host::features::of(name, &lc.settings.runtimes[name]).await;
            handler_features.push(HandlerFeatures {
                name: name.clone(),
                recursive_read_only_mounts: f.recursive_read_only_mounts,
                user_namespaces: f.user_namespaces,
                why_not: f.why_not,
            });
        }
        let (fds, bus) = (self.fds.figures(), self.gate.figures());
        let cdi = self.containers.cdi.report().await;
        let info = RuntimeInfo {
            sandboxes: lc.count() as u32,
            ready: lc.count_in(State::Ready) as u32,
            recovered: rec.recovered as u32,
            recovery_usec: rec.duration_usec,
            // The pods' and the containers' (one quarantine/, ids that
            // never collide).
            quarantined: rec
                .quarantined
                .iter()
                .chain(&ctr_rec.quarantined)
                .map(|q| Quarantined {
                    dir: q.dir.clone(),
                    moved_to: q.moved_to.display().to_string(),
                    reason: q.reason.clone(),
                })
                .collect(),
            orphans_stopped: rec
                .orphans_stopped
                .iter()
                .chain(&ctr_rec.orphans_stopped)
                .cloned()
                .collect(),
            network_teardowns_owed: lc.attachments_owed() as u32,
            state_dir: lc.settings.state_dir.display().to_string(),
            runtime_handlers: lc.settings.runtimes.keys().cloned().collect(),
            runtimes_unavailable: unavailable.into_iter().map(|(_, why)| why).collect(),
            handler_features,
            containers: self.containers.count() as u32,
            containers_running: self
                .containers
                .count_in(podscope_api::domain::container::ContainerState::Running)
                as u32,
            waits_in_flight: self.waiters.in_flight() as u32,
            descriptors_limit: fds.limit,
            descriptors_open: fds.open,
            descriptors_peak: fds.peak,
            descriptors_reserved: fds.reserved,
            descriptors_containers: self.containers.descriptors_held() as u64,
            bus_calls_max: bus.max as u32,
            bus_calls_in_flight: bus.in_flight as u32,
            bus_calls_peak: bus.peak as u32,
            bus_calls_waited: bus.waited,
            bus_refusals_retried: bus.refused_retried,
            bus_calls_failed: bus.gave_up,
            os: platform.os.into(),
            architecture: platform.architecture.into(),
            variant: platform.variant.into(),
            cgroup_layout: layout.name().into(),
            cgroup_advice: layout.advice().into(),
            oomd_memory_pressure_limit: lc
                .settings
                .oomd_limit()
                .map(podscope_api::domain::oomd::percent)
                .unwrap_or_default(),
            cdi_spec_dirs: cdi.dirs,
            cdi_kinds: cdi.kinds,
            cdi_devices: cdi.devices,
            cdi_spec_errors: cdi.errors,
        };
        (conditions, info)
    }
}
