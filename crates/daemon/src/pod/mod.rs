//! The sandbox lifecycle: Create, Start, Stop, Remove, recovery at daemon
//! start and reconciliation with what systemd reports, one file per verb,
//! written against `SystemdClient` so its unit tests (`tests`) run it on a
//! fake systemd.
//!
//! Rules that hold everywhere here:
//! - a checkpoint is written before any success is reported, so a daemon
//!   killed at any moment loses nothing that a caller was told exists;
//! - a scope is only ever created for a sandbox with a checkpoint;
//! - a failing step undoes exactly the steps before it;
//! - callers run these in spawned tasks (see `bus`), so a caller hanging up
//!   never cancels a step or its cleanup half way.

mod create;
pub mod files;
pub mod holder;
pub mod init_spawn;
pub mod machined;
mod network;
mod port_forward;
mod reconcile;
mod recover;
mod remove;
mod start;
mod stop;
#[cfg(test)]
mod tests;
mod timings;
mod update;
mod wait;

use crate::cni::netns::{Handoffs, HeldNetns};
use crate::cni::{AttachmentStore, Cni};
use crate::state::checkpoint::{Quarantined, Store};
use crate::state::index::{Entry, Registry};
use crate::systemd::{Prop, Systemd, SystemdClient, UnitEvent};
use machined::Machined;
use podscope_api::domain::sandbox::{
    id_from_netns_unit, id_from_scope_unit, now_usec, scope_unit_name, PodNetwork,
};
use podscope_api::domain::{oomd, slice, Resources, Sandbox, SandboxConfig, SandboxId, State};
use podscope_api::error::{Error, ErrorKind, Result, ResultExt};
use podscope_config::Settings;
use podscope_sys::failpoint;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use timings::{CreateTimings, Laps, StartTimings, StopTimings};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// What changed, for the bus layer to announce.
#[derive(Debug, Clone)]
pub enum Event {
    Created(SandboxId),
    Changed(SandboxId),
    Removed(SandboxId),
    ContainerCreated(podscope_api::domain::ContainerId),
    /// A container changed; its state then (a quick container's Running
    /// is announced as such even if it has exited by the time the signal
    /// goes out).
    ContainerChanged(
        podscope_api::domain::ContainerId,
        podscope_api::domain::container::ContainerState,
    ),
    /// A removed container and its pod.
    ContainerRemoved(podscope_api::domain::ContainerId, SandboxId),
}

/// Filters for `list`; all given ones must match.
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub id_prefix: Option<String>,
    pub state: Option<State>,
    pub labels: BTreeMap<String, String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl ListFilter {
    pub fn matches(&self, sb: &Sandbox) -> bool {
        self.id_prefix
            .as_ref()
            .is_none_or(|p| sb.id.as_str().starts_with(p.as_str()))
            && self.state.is_none_or(|s| s == sb.state)
            && self
                .namespace
                .as_ref()
                .is_none_or(|n| *n == sb.config.namespace)
            && self.name.as_ref().is_none_or(|n| *n == sb.config.name)
            && self
                .labels
                .iter()
                .all(|(k, v)| sb.config.labels.get(k) == Some(v))
    }
}

/// How a sandbox left READY: what Wait returns (the wire's own type).
pub use podscope_api::Exit;

/// What lives in a pod and must go before it: its containers. The pod's
/// Stop stops them first, its Remove removes them; both run with the pod's
/// gate (`Entry::members`) held exclusively.
pub trait Members: Send + Sync + 'static {
    fn stop_all<'a>(&'a self, pod: &'a Sandbox) -> futures_util::future::BoxFuture<'a, Result<()>>;
    fn remove_all<'a>(
        &'a self,
        pod: &'a Sandbox,
    ) -> futures_util::future::BoxFuture<'a, Result<()>>;
}

#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    pub recovered: usize,
    pub quarantined: Vec<Quarantined>,
    pub incomplete: usize,
    pub orphans_stopped: Vec<String>,
    pub duration_usec: u64,
}

/// The lifecycle over a systemd client: the real one in the daemon, a fake
/// in the unit tests.
pub struct Pods<S = Systemd> {
    pub settings: Settings,
    store: Store,
    systemd: S,
    machined: Machined,
    /// Namespaces the daemon made, offered to their netns units to pin.
    /// Unset until the daemon listens (after it owns its bus name), or when
    /// it cannot: Create then starts the unit before ADD.
    handoffs: std::sync::OnceLock<Arc<Handoffs>>,
    registry: Registry,
    events: mpsc::UnboundedSender<Event>,
    recovery: Mutex<RecoveryReport>,
    pub cni: Cni,
    attachments: AttachmentStore,
    /// Attachments found at recovery, before any new Create could add one:
    /// the candidates for reconciliation.
    recovered_attachments: Mutex<Vec<SandboxId>>,
    /// ADDs hold it shared, GC exclusively: GC must never see an attachment
    /// whose ADD is in flight as invalid.
    gc_lock: tokio::sync::RwLock<()>,
    /// The pods' containers, once the container side is up.
    members: std::sync::OnceLock<Arc<dyn Members>>,
    /// The host's mount namespace, where Stop unpins a pod's namespace
    /// itself. Unset (the unit tests): Stop waits for the netns unit's own
    /// stop to unpin it.
    hostns: std::sync::OnceLock<crate::host::hostns::HostNs>,
}

fn is_active(state: &str) -> bool {
    matches!(state, "active" | "activating" | "reloading")
}

impl<S: SystemdClient> Pods<S> {
    pub fn new(
        settings: Settings,
        store: Store,
        systemd: S,
        machined: Machined,
        events: mpsc::UnboundedSender<Event>,
    ) -> Result<Self> {
        Ok(Pods {
            cni: Cni::new((&settings).into()),
            attachments: AttachmentStore::open(&settings.state_dir)?,
            recovered_attachments: Mutex::new(Vec::new()),
            gc_lock: tokio::sync::RwLock::new(()),
            settings,
            store,
            systemd,
            machined,
            handoffs: std::sync::OnceLock::new(),
            registry: Registry::default(),
            events,
            recovery: Mutex::new(RecoveryReport::default()),
            members: std::sync::OnceLock::new(),
            hostns: std::sync::OnceLock::new(),
        })
    }

    /// Where Stop unpins namespaces (see `stop_locked`).
    pub fn set_hostns(&self, hostns: crate::host::hostns::HostNs) {
        let _ = self.hostns.set(hostns);
    }

    /// Who stops and removes the pods' containers.
    pub fn set_members(&self, m: Arc<dyn Members>) {
        let _ = self.members.set(m);
    }

    async fn stop_members(&self, sb: &Sandbox) -> Result<()> {
        match self.members.get() {
            Some(m) => m
                .stop_all(sb)
                .await
                .map_err(|e| e.context(format!("sandbox {}: stop its containers", sb.id))),
            None => Ok(()),
        }
    }

    async fn remove_members(&self, sb: &Sandbox) -> Result<()> {
        match self.members.get() {
            Some(m) => m
                .remove_all(sb)
                .await
                .map_err(|e| e.context(format!("sandbox {}: remove its containers", sb.id))),
            None => Ok(()),
        }
    }

    /// Serve the netns handoff socket. Only the daemon that owns the bus
    /// name may: a second one starting would otherwise take the socket
    /// from the first.
    pub fn listen_for_handoffs(&self) {
        let h = Arc::new(Handoffs::default());
        match h.listen() {
            Ok(()) => {
                let _ = self.handoffs.set(h);
            }
            Err(e) => warn!(
                "netns handoff socket {}: {e}; pod networks are set up after their namespace unit starts",
                crate::cni::netns::HANDOFF_SOCKET
            ),
        }
    }

    fn emit(&self, ev: Event) {
        let _ = self.events.send(ev);
    }

    pub async fn systemd_connection_lost(&self) {
        self.systemd.connection_lost().await
    }

    pub fn resolve(&self, id: &str) -> Result<Arc<Entry>> {
        self.registry.resolve(id)
    }

    pub fn get(&self, id: &SandboxId) -> Option<Arc<Entry>> {
        self.registry.get(id)
    }

    pub fn count(&self) -> usize {
        self.registry.len()
    }

    pub fn recovery_report(&self) -> RecoveryReport {
        self.recovery.lock().unwrap().clone()
    }

    /// The sandboxes matching `filter`, sorted by id.
    pub fn list(&self, filter: &ListFilter) -> Vec<Arc<Entry>> {
        let mut v = self.registry.entries();
        v.retain(|e| e.with(|s| filter.matches(s)));
        v
    }

    pub fn count_in(&self, state: State) -> usize {
        self.registry
            .entries()
            .iter()
            .filter(|e| e.with(|s| s.state == state))
            .count()
    }

    /// Save and publish a new record. A removed sandbox is never written
    /// back (a step that finished after its Remove, like a reconciliation's
    /// DEL, must not resurrect its checkpoint).
    fn persist(&self, entry: &Entry, sandbox: Sandbox) -> Result<()> {
        if entry.is_removed() {
            debug!(sandbox_id = %entry.id, "sandbox {}: removed; its record is not written back", entry.id);
            return Ok(());
        }
        self.store.save(&sandbox)?;
        entry.replace(sandbox);
        Ok(())
    }
}
