//! The D-Bus service `org.podscope.Sandbox1`: one file per object
//! (`manager`, `sandbox`), error replies, polkit and the callers' watch. The
//! contract itself (names, dictionaries) is `api`.
//!
//! Every mutating call is authorized first, then runs in its own task: a
//! caller that hangs up never cancels a lifecycle step or its cleanup.

pub mod callers;
pub mod container;
#[cfg(test)]
mod documented;
pub mod errors;
pub mod images;
pub mod limits;
pub mod manager;
pub mod polkit;
pub mod sandbox;

use crate::api::{
    self, Condition, CreateOptions, HandlerFeatures, PodMetadata, Quarantined, RuntimeInfo,
    SandboxStatus,
};
use crate::descriptors::{cost, Budget};
use crate::domain::Resources;
use crate::domain::{SandboxId, State};
use crate::error::{Error, Result};
use crate::pod::{Event, Exit, Pods};
use crate::registry::Entry;
use crate::settings::Settings;
use crate::store::Store;
use crate::systemd::Systemd;
use errors::BusError;
use manager::Manager;
use polkit::{Detail, Verb};
use sandbox::SandboxObject;
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::warn;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::OwnedObjectPath;
use zbus::Connection;

pub use api::{sandbox_path, BUS_NAME, MANAGER_PATH};
/// Wait calls in flight at once, from all callers (each holds a task and
/// a reply slot until its pod stops or its caller leaves; reading is open
/// to every local user), and per user other than root.
pub const MAX_WAITERS: usize = 1024;
pub const WAITERS_PER_UID: usize = 64;
/// Tasks handling systemd's unit events.
const UNIT_EVENT_HANDLERS: usize = 16;

/// What polkit's rules see of a call: `verb`, `sandbox` (namespace/name)
/// and `sandbox_id` (empty for Create).
/// CRI metadata is opaque and may hold '/': `sandbox` escapes it ('%' and
/// '/' as %25 and %2F) so that "team-a/" can only ever be namespace team-a;
/// `namespace` and `name` carry the exact strings.
pub(crate) fn polkit_details(
    verb: Verb,
    namespace: &str,
    name: &str,
    id: &str,
) -> Vec<(Detail, String)> {
    let esc = |s: &str| s.replace('%', "%25").replace('/', "%2F");
    vec![
        (Detail::Verb, verb.as_str().to_owned()),
        (Detail::Sandbox, format!("{}/{}", esc(namespace), esc(name))),
        (Detail::Namespace, namespace.to_owned()),
        (Detail::Name, name.to_owned()),
        (Detail::SandboxId, id.to_owned()),
    ]
}

pub struct Service {
    pub pods: Arc<Pods>,
    pub containers: Arc<crate::container::Containers>,
    pub images: Arc<crate::image::Images>,
    auth: polkit::Authorizer,
    conn: Connection,
    /// Mutating operations in flight; shutdown waits for them.
    inflight: tokio::sync::watch::Sender<usize>,
    /// Mutating operations done since start.
    done: std::sync::atomic::AtomicU64,
    callers: callers::Callers,
    waiters: limits::Limiter,
    /// The bound on the daemon's own calls on the bus (its figures go in
    /// RuntimeStatus).
    gate: Arc<crate::bus_gate::BusGate>,
    /// File descriptors: each mutating call reserves what it may open
    /// before its first step (`descriptors`).
    pub fds: Arc<Budget>,
}

impl Service {
    /// Run `fut` to completion in its own task, whatever happens to the
    /// caller, counting it as in flight until it is done.
    async fn detached<T: Send + 'static>(
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

    /// Resolve `id` (a prefix is checked and looked up here, once), then the
    /// polkit check for `verb` on that sandbox, whose full id the rules see
    /// with its namespace and name (`polkit_details`), so a site may grant a
    /// group one namespace only. The operation then acts on the entry
    /// resolved here. A malformed or unknown id fails before polkit is
    /// asked: reading is open to everyone, so that says nothing new.
    async fn authorize(&self, hdr: &Header<'_>, verb: Verb, id: &str) -> Result<Arc<Entry>> {
        let entry = self.pods.resolve(id)?;
        let full = entry.id.to_string();
        // A port forward into a pod of the host's network reaches the
        // host's own loopback services: as privileged as that pod was.
        let privileges = match verb {
            Verb::PortForward => entry.with(|sb| sb.config.host_namespaces()),
            _ => Vec::new(),
        };
        let action = if privileges.is_empty() {
            polkit::ACTION_MANAGE
        } else {
            polkit::ACTION_MANAGE_PRIVILEGED
        };
        self.auth
            .check(hdr, action, verb, || {
                let mut d = entry
                    .with(|sb| polkit_details(verb, &sb.config.namespace, &sb.config.name, &full));
                if verb == Verb::PortForward {
                    d.push((Detail::Privileges, privileges.join(", ")));
                }
                d
            })
            .await?;
        Ok(entry)
    }

    pub async fn create(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        meta: PodMetadata,
        options: CreateOptions,
    ) -> Result<(String, OwnedObjectPath), BusError> {
        // Validate, then authorize: polkit is asked only about a pod that
        // could be made.
        let config = options.into_config(meta);
        config.validate()?;
        // Host namespaces, host ports or a chosen cgroup parent need the
        // privileged action: a rule granting one namespace's pods does not
        // grant those.
        let privileges = config.privileges(&self.containers.settings.log_root);
        let action = if privileges.is_empty() {
            polkit::ACTION_MANAGE
        } else {
            polkit::ACTION_MANAGE_PRIVILEGED
        };
        self.auth
            .check(hdr, action, Verb::Create, || {
                let mut d = polkit_details(Verb::Create, &config.namespace, &config.name, "");
                d.push((Detail::Privileges, privileges.join(", ")));
                d
            })
            .await?;
        let fds = self.fds.reserve(
            &format!("sandbox {}/{}: create", config.namespace, config.name),
            cost::POD_CREATE,
        )?;
        let this = self.clone();
        let out = self
            .detached(async move {
                let _fds = fds;
                let entry = this.pods.create(config).await?;
                let path = sandbox_path(&entry.id);
                let obj = SandboxObject {
                    entry: entry.clone(),
                    service: this.clone(),
                };
                this.conn
                    .object_server()
                    .at(&path, obj)
                    .await
                    .map_err(|e| Error::internal(format!("export {path}: {e}")))?;
                Ok((entry.id.to_string(), path))
            })
            .await?;
        Ok(out)
    }

    pub async fn start(self: &Arc<Self>, hdr: &Header<'_>, id: &str) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::Start, id).await?;
        let fds = self
            .fds
            .reserve(&format!("sandbox {}: start", entry.id), cost::POD_START)?;
        let this = self.clone();
        self.detached(async move {
            let _fds = fds;
            this.pods.start(&entry).await.map(drop)
        })
        .await?;
        Ok(())
    }

    pub async fn stop(self: &Arc<Self>, hdr: &Header<'_>, id: &str) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::Stop, id).await?;
        let this = self.clone();
        self.detached(async move { this.pods.stop(&entry).await.map(drop) })
            .await?;
        Ok(())
    }

    pub async fn remove(self: &Arc<Self>, hdr: &Header<'_>, id: &str) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::Remove, id).await?;
        let this = self.clone();
        self.detached(async move {
            let id = this.pods.remove(&entry).await?;
            let path = sandbox_path(&id);
            if let Err(e) = this
                .conn
                .object_server()
                .remove::<SandboxObject, _>(&path)
                .await
            {
                warn!(sandbox_id = %id, "sandbox {id}: unexport {path}: {e}");
            }
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// Status, with the annotations for root's callers only: they can hold
    /// secrets, and reading is open to every local user. (A polkit check
    /// here would hand the flood of an open read call on to polkitd.)
    pub async fn status(&self, hdr: &Header<'_>, id: &str) -> Result<SandboxStatus, BusError> {
        let entry = self.pods.resolve(id)?;
        let status = entry.with(SandboxStatus::of);
        Ok(if self.auth.caller_uid(hdr).await? == 0 {
            status
        } else {
            status.without_annotations()
        })
    }

    /// Wait until the sandbox leaves READY. Ends early, unanswered, when
    /// the caller disconnects.
    pub async fn wait(&self, hdr: &Header<'_>, id: &str) -> Result<Exit, BusError> {
        let uid = self.auth.caller_uid(hdr).await?;
        let _slot = self.waiters.acquire(uid, true)?;
        let Some(caller) = hdr.sender() else {
            return Ok(self.pods.wait(id).await?);
        };
        tokio::select! {
            exit = self.pods.wait(id) => Ok(exit?),
            _ = self.callers.gone(caller) => {
                tracing::debug!(caller = %caller, "Wait({id}): the caller left");
                Err(Error::internal("the caller disconnected").into())
            }
        }
    }

    pub async fn update_resources(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        resources: Resources,
    ) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::UpdateResources, id).await?;
        let this = self.clone();
        self.detached(async move {
            this.pods
                .update_resources(&entry, resources)
                .await
                .map(drop)
        })
        .await?;
        Ok(())
    }

    pub async fn port_forward(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        port: u16,
    ) -> Result<std::os::fd::OwnedFd, BusError> {
        let entry = self.authorize(hdr, Verb::PortForward, id).await?;
        let fds = self.fds.reserve(
            &format!("sandbox {}: port forward", entry.id),
            cost::PORT_FORWARD,
        )?;
        let this = self.clone();
        let fd = self
            .detached(async move {
                let _fds = fds;
                this.pods.port_forward(&entry, port).await
            })
            .await?;
        Ok(fd)
    }

    pub async fn runtime_status(&self) -> (Vec<Condition>, RuntimeInfo) {
        let lc = &self.pods;
        let rec = lc.recovery_report();
        let ctr_rec = self.containers.recovery_report();
        let platform = crate::domain::platform::host();
        let layout = crate::cgroup_layout::detect();
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
            let f = crate::container::features::of(name, &lc.settings.runtimes[name]).await;
            handler_features.push(HandlerFeatures {
                name: name.clone(),
                recursive_read_only_mounts: f.recursive_read_only_mounts,
                user_namespaces: f.user_namespaces,
                why_not: f.why_not,
            });
        }
        let (fds, bus) = (self.fds.figures(), self.gate.figures());
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
                .count_in(crate::domain::container::ContainerState::Running)
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
                .map(crate::domain::oomd::percent)
                .unwrap_or_default(),
        };
        (conditions, info)
    }
}

/// Connect to the system bus, recover state, export every object, and only
/// then take the bus name: a caller never sees a half-recovered daemon.
pub async fn serve(settings: Settings) -> Result<(Connection, Arc<Service>)> {
    // Serving an interface through the Builder makes build() wait until the
    // object server's dispatch stream is in place. Without that, a call
    // queued by D-Bus activation, delivered the instant the name is granted,
    // can arrive before the stream exists and be dropped unanswered.
    let bus_err = |e: zbus::Error| Error::internal(format!("connect to the system bus: {e}"));
    let conn = zbus::connection::Builder::system()
        .and_then(|b| b.serve_at(MANAGER_PATH, zbus::fdo::ObjectManager))
        .map_err(bus_err)?
        .build()
        .await
        .map_err(bus_err)?;
    let gate = Arc::new(crate::bus_gate::BusGate::new(
        settings.bus_calls_max as usize,
    ));
    let unit_events = Arc::new(crate::systemd::events::UnitEvents::default());
    let systemd = Systemd::connect(&conn, gate.clone(), unit_events.clone()).await?;
    let store = Store::open(&settings.state_dir)?;
    let (event_tx, event_rx) = mpsc::unbounded_channel();
    let machined = crate::pod::machined::Machined::new(&conn, gate.clone());
    let images = crate::image::Images::open(settings.images())?;
    let hostns = crate::hostns::HostNs::connect()?;
    let pods = Arc::new(Pods::new(
        settings.clone(),
        store,
        systemd.clone(),
        machined,
        event_tx.clone(),
    )?);
    let containers = Arc::new(crate::container::Containers::new(
        settings,
        systemd,
        pods.clone(),
        images.clone(),
        hostns.clone(),
        event_tx,
    )?);
    pods.set_members(containers.clone());
    pods.set_hostns(hostns);
    pods.recover().await?;
    containers.recover().await?;

    let service = Arc::new(Service {
        pods: pods.clone(),
        containers: containers.clone(),
        images,
        auth: polkit::Authorizer::new(
            &conn,
            gate.clone(),
            std::time::Duration::from_millis(pods.settings.polkit_timeout_ms),
        ),
        gate,
        conn: conn.clone(),
        inflight: tokio::sync::watch::Sender::new(0),
        done: Default::default(),
        callers: callers::Callers::new(&conn),
        waiters: limits::Limiter::new("Wait calls", WAITERS_PER_UID, MAX_WAITERS),
        fds: Arc::new(Budget::new(crate::descriptors::limit())),
    });
    let server = conn.object_server();
    let export = |e: zbus::Error| Error::internal(format!("export objects: {e}"));
    server
        .at(
            MANAGER_PATH,
            Manager {
                service: service.clone(),
            },
        )
        .await
        .map_err(export)?;
    server
        .at(
            MANAGER_PATH,
            images::ImagesObject {
                service: service.clone(),
            },
        )
        .await
        .map_err(export)?;
    for entry in pods.list(&Default::default()) {
        let path = sandbox_path(&entry.id);
        server
            .at(
                &path,
                SandboxObject {
                    entry,
                    service: service.clone(),
                },
            )
            .await
            .map_err(export)?;
    }
    for entry in containers.list(&Default::default()) {
        let path = api::container_path(&entry.id);
        server
            .at(
                &path,
                container::ContainerObject {
                    entry,
                    service: service.clone(),
                },
            )
            .await
            .map_err(export)?;
    }

    // A fixed number of handlers take the unit events (one queued per
    // unit at most: `systemd::events`); a handler waits for its object's
    // lock, so several run at once.
    for _ in 0..UNIT_EVENT_HANDLERS {
        let (lc, cs, events) = (pods.clone(), containers.clone(), unit_events.clone());
        tokio::spawn(async move {
            loop {
                let ev = events.next().await;
                if crate::domain::container::id_from_container_unit(&ev.unit).is_some() {
                    cs.on_unit_event(ev).await
                } else {
                    lc.on_unit_event(ev).await
                }
            }
        });
    }
    tokio::spawn(announce(
        conn.clone(),
        pods.clone(),
        containers.clone(),
        event_rx,
    ));

    conn.request_name_with_flags(BUS_NAME, zbus::fdo::RequestNameFlags::DoNotQueue.into())
        .await
        .map_err(|e| Error::internal(format!("take bus name {BUS_NAME}: {e}")))?;
    pods.listen_for_handoffs();
    // CNI DELs owed since the last run: plugins may be slow, so this runs
    // while the daemon already serves (each sandbox under its own lock).
    let lc = pods.clone();
    tokio::spawn(async move { lc.reconcile_networks().await });
    // Ready pods that machined forgot (it restarted while we were down).
    let lc = pods.clone();
    tokio::spawn(async move { lc.reconcile_machines().await });
    Ok((conn, service))
}

/// Turn lifecycle events into D-Bus signals, in order.
async fn announce(
    conn: Connection,
    pods: Arc<Pods>,
    containers: Arc<crate::container::Containers>,
    mut events: mpsc::UnboundedReceiver<Event>,
) {
    let manager = SignalEmitter::new(&conn, MANAGER_PATH).expect("valid path");
    while let Some(ev) = events.recv().await {
        let r = match &ev {
            Event::Created(id) => {
                Manager::sandbox_created(&manager, id.as_str(), sandbox_path(id).as_ref()).await
            }
            Event::Removed(id) => {
                Manager::sandbox_removed(&manager, id.as_str(), sandbox_path(id).as_ref()).await
            }
            Event::Changed(id) => changed(&conn, &pods, &manager, id).await,
            Event::ContainerCreated(id) => {
                Manager::container_created(&manager, id.as_str(), api::container_path(id).as_ref())
                    .await
            }
            Event::ContainerRemoved(id, _) => {
                // Its object goes too, whoever removed it: RemoveContainer
                // has unexported it already, a pod's Remove (its members)
                // or recovery has not.
                let path = api::container_path(id);
                let _ = conn
                    .object_server()
                    .remove::<container::ContainerObject, _>(&path)
                    .await;
                Manager::container_removed(&manager, id.as_str(), path.as_ref()).await
            }
            Event::ContainerChanged(id, state) => {
                container_changed(&conn, &containers, &manager, id, *state).await
            }
        };
        if let Err(e) = r {
            warn!("emitting signal for {ev:?} failed: {e}");
        }
    }
}

/// One PropertiesChanged of `iface` carrying every property in `changed`:
/// zbus's generated emitters send a signal per property, seven through the
/// bus for each change of a sandbox, six for a container.
async fn properties_changed(
    emitter: &SignalEmitter<'_>,
    iface: zbus::names::InterfaceName<'_>,
    changed: HashMap<&str, zbus::zvariant::Value<'_>>,
) -> zbus::Result<()> {
    zbus::fdo::Properties::properties_changed(emitter, iface, changed, Cow::Borrowed(&[])).await
}

/// A container's PropertiesChanged, then ContainerStateChanged.
async fn container_changed(
    conn: &Connection,
    containers: &crate::container::Containers,
    manager: &SignalEmitter<'_>,
    id: &crate::domain::ContainerId,
    state: crate::domain::container::ContainerState,
) -> zbus::Result<()> {
    if containers.get(id).is_none() {
        return Ok(());
    }
    let path = api::container_path(id);
    if let Ok(iface) = conn
        .object_server()
        .interface::<_, container::ContainerObject>(&path)
        .await
    {
        iface
            .get()
            .await
            .emit_changes(iface.signal_emitter())
            .await?;
    }
    Manager::container_state_changed(manager, id.as_str(), path.as_ref(), state.as_str()).await
}

/// PropertiesChanged for the properties that change (zbus's emitters, so
/// the list is the interface's own), then SandboxStateChanged.
async fn changed(
    conn: &Connection,
    pods: &Pods,
    manager: &SignalEmitter<'_>,
    id: &SandboxId,
) -> zbus::Result<()> {
    let Some(entry) = pods.get(id) else {
        return Ok(());
    };
    let state = entry.with(|sb| sb.state);
    let path = sandbox_path(id);
    // Not exported yet (a change during Create): nobody can watch it.
    if let Ok(iface) = conn
        .object_server()
        .interface::<_, SandboxObject>(&path)
        .await
    {
        iface
            .get()
            .await
            .emit_changes(iface.signal_emitter())
            .await?;
    }
    Manager::sandbox_state_changed(manager, id.as_str(), path.as_ref(), state.as_str()).await
}
