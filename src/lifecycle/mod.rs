//! The sandbox lifecycle: Create, Start, Stop, Remove, recovery at daemon
//! start and reconciliation with what systemd reports.
//!
//! Rules that hold everywhere here:
//! - a checkpoint is written before any success is reported, so a daemon
//!   killed at any moment loses nothing that a caller was told exists;
//! - a scope is only ever created for a sandbox with a checkpoint;
//! - a failing step undoes exactly the steps before it;
//! - callers run these in spawned tasks (see `bus`), so a caller hanging up
//!   never cancels a step or its cleanup half way.

mod network;

use crate::cni::{AttachmentStore, Cni};
use crate::domain::sandbox::{
    id_from_netns_unit, id_from_scope_unit, now_usec, scope_unit_name, PodNetwork,
};
use crate::domain::{slice, Resources, Sandbox, SandboxConfig, SandboxId, State};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::init_spawn;
use crate::machined::Machined;
use crate::netns::{Handoffs, HeldNetns};
use crate::pod_files;
use crate::registry::{Entry, Registry};
use crate::settings::Settings;
use crate::store::{Quarantined, Store};
use crate::systemd::{Prop, Systemd, UnitEvent};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

/// What changed, for the bus layer to announce.
#[derive(Debug, Clone)]
pub enum Event {
    Created(SandboxId),
    Changed(SandboxId),
    Removed(SandboxId),
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

/// How a sandbox left READY: what Wait returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// 0 when stopped through podscope (Stop, Remove); 1 when it ended any
    /// other way (its scope stopped outside podscope, `machinectl
    /// terminate`, a failed Start): `reason` says how.
    pub status: u32,
    /// µs since the epoch.
    pub finished_at: u64,
    pub reason: String,
}

impl Exit {
    /// The exit of a sandbox that is no longer (or never got) ready.
    pub fn of(sb: &Sandbox) -> Option<Exit> {
        (sb.state == State::NotReady).then(|| Exit {
            status: u32::from(!sb.reason.is_empty()),
            finished_at: sb.finished_at,
            reason: sb.reason.clone(),
        })
    }
}

#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    pub recovered: usize,
    pub quarantined: Vec<Quarantined>,
    pub incomplete: usize,
    pub orphans_stopped: Vec<String>,
    pub duration_usec: u64,
}

pub struct Lifecycle {
    pub settings: Settings,
    store: Store,
    systemd: Systemd,
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
}

fn is_active(state: &str) -> bool {
    matches!(state, "active" | "activating" | "reloading")
}

impl Lifecycle {
    pub fn new(
        settings: Settings,
        store: Store,
        systemd: Systemd,
        machined: Machined,
        events: mpsc::UnboundedSender<Event>,
    ) -> Result<Self> {
        Ok(Lifecycle {
            cni: Cni::new(settings.cni()),
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
        })
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
                crate::netns::HANDOFF_SOCKET
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

    fn persist(&self, entry: &Entry, sandbox: Sandbox) -> Result<()> {
        self.store.save(&sandbox)?;
        entry.replace(sandbox);
        Ok(())
    }

    /// Validate, reserve the name, persist, set up the network and the
    /// pod's files: the sandbox is Created.
    pub async fn create(&self, config: SandboxConfig) -> Result<Arc<Entry>> {
        let t0 = Instant::now();
        config.validate()?;
        if !self.settings.handler_known(&config.runtime_handler) {
            return Err(Error::invalid(
                "runtime_handler",
                format!(
                    "unknown runtime handler {:?} (configured: {:?})",
                    config.runtime_handler, self.settings.runtime_handlers
                ),
            ));
        }
        let slice =
            slice::slice_for_cgroup_parent(&config.cgroup_parent, &self.settings.default_slice)?;
        let key = config.key();
        self.registry.reserve(&key)?;
        let mut sandbox = Sandbox::new(SandboxId::random(), config, slice, now_usec());
        let id = sandbox.id.clone();
        let pod = format!("{}/{}", key.namespace, key.name);
        if let Err(e) = self.store.save(&sandbox) {
            self.registry.release(&key);
            let _ = self.store.delete(&id);
            return Err(e.context(format!("create sandbox {pod}")));
        }
        let t_saved = t0.elapsed();
        let mut t_netns = std::time::Duration::ZERO;
        if let Err(e) = self.create_steps(&mut sandbox, &mut t_netns).await {
            // Undo exactly what was done; each undo step is idempotent.
            if let Err(de) = self.detach_network(&id).await {
                tracing::error!(sandbox_id = %id, "sandbox {id}: create failed and its network teardown too: {de}");
            }
            if sandbox.has_netns() {
                let _ = self
                    .systemd
                    .stop_unit(&sandbox.netns_unit(), self.settings.stop_timeout())
                    .await;
            }
            let _ = pod_files::remove(&self.settings.run_dir, &id);
            let _ = self.store.delete(&id);
            self.registry.release(&key);
            return Err(e);
        }
        let entry = Entry::new(sandbox);
        self.registry.insert(entry.clone());
        info!(sandbox_id = %id, pod = %pod, checkpoint_us = t_saved.as_micros() as u64,
              netns_us = t_netns.as_micros() as u64,
              elapsed_us = t0.elapsed().as_micros() as u64, "sandbox {id} created");
        self.emit(Event::Created(id));
        Ok(entry)
    }

    /// Create's steps after the first checkpoint: namespace, network, files.
    /// `t_netns` gets the time the netns unit took to start.
    async fn create_steps(
        &self,
        sb: &mut Sandbox,
        t_netns: &mut std::time::Duration,
    ) -> Result<()> {
        let id = sb.id.clone();
        if sb.has_netns() {
            sb.network = self.create_network(sb, t_netns).await?;
        }
        let (resolv, hostname) = pod_files::write(&self.settings.run_dir, sb)
            .with_context(|| format!("sandbox {id}: create: pod files"))?;
        sb.resolv_conf_path = resolv;
        sb.hostname_path = hostname;
        self.store
            .save(sb)
            .with_context(|| format!("sandbox {id}: create: save checkpoint"))
    }

    /// The pod's namespace, pinned by its netns unit, with CNI ADD done in
    /// it. The daemon makes the namespace and runs ADD while the unit pins
    /// it (the unit's process costs a cgroup migration that ADD need not
    /// wait for); without the handoff, the unit makes it first.
    async fn create_network(
        &self,
        sb: &Sandbox,
        t_netns: &mut std::time::Duration,
    ) -> Result<PodNetwork> {
        let id = &sb.id;
        let unit = sb.netns_unit();
        let start_unit = || async {
            let t = Instant::now();
            let r = self
                .systemd
                .start_unit(&unit, self.settings.start_timeout())
                .await
                .with_context(|| format!("sandbox {id}: create: start {unit}"));
            (r, t.elapsed())
        };
        // The namespace made here and offered to the unit, when the handoff
        // is served and the daemon may make namespaces (a drop-in can take
        // that away); else the unit makes it before ADD.
        let made = self.handoffs.get().and_then(|handoffs| {
            let offered = HeldNetns::create()
                .and_then(|held| handoffs.offer(id.as_str(), &held).map(|o| (held, o)));
            offered
                .map_err(|e| warn!(sandbox_id = %id, "sandbox {id}: cannot make its network namespace in podscoped ({e}); {unit} makes it"))
                .ok()
        });
        let Some((held, offer)) = made else {
            let (r, t) = start_unit().await;
            *t_netns = t;
            r?;
            return self.attach_network(sb, None).await;
        };
        let ((pinned, t), added) =
            tokio::join!(start_unit(), self.attach_network(sb, Some(held.path())));
        drop(offer);
        *t_netns = t;
        match (pinned, added) {
            (Ok(()), Ok(net)) if held.is_pinned_at(&sb.netns_path()) => Ok(net),
            (Ok(()), Ok(_)) => {
                // The helper pinned a namespace of its own (it could not
                // reach the daemon in time): move the network there.
                warn!(sandbox_id = %id, "sandbox {id}: {unit} did not take the namespace handed to it; setting the network up again in the one it pinned");
                self.detach_network_in(id, Some(held.path())).await?;
                self.attach_network(sb, None).await
            }
            (Err(e), Ok(_)) => {
                // Undo ADD while the namespace is still held.
                if let Err(de) = self.detach_network_in(id, Some(held.path())).await {
                    tracing::error!(sandbox_id = %id, "sandbox {id}: undoing ADD after the namespace unit failed: {de}");
                }
                Err(e)
            }
            // ADD undid itself; the caller stops the unit.
            (_, Err(e)) => Err(e),
        }
    }

    /// Spawn the init and put it in a new transient scope: Ready.
    pub async fn start(&self, id: &str) -> Result<Arc<Entry>> {
        let entry = self.resolve(id)?;
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {id}")));
        }
        let sb = entry.snapshot();
        let ctx = |step: &str| format!("sandbox {}: start: {step}", sb.id);
        match sb.state {
            State::Ready => return Ok(entry.clone()),
            State::NotReady => {
                return Err(Error::invalid_state(format!(
                    "sandbox {} is stopped; a stopped sandbox cannot be started again (create a new attempt)",
                    sb.id
                )))
            }
            State::Created => {}
        }
        let t0 = Instant::now();
        match self.start_steps(&sb).await {
            Ok((next, t)) => {
                let unit = next.unit();
                let pid = next.init_pid;
                if let Err(e) = self.persist(&entry, next) {
                    let e = e.context(ctx("save checkpoint"));
                    self.fail_start(&entry, &e).await;
                    return Err(e);
                }
                let us = |d: std::time::Duration| d.as_micros() as u64;
                info!(sandbox_id = %sb.id, unit = %unit, init_pid = pid,
                      network_us = us(t.network),
                      init_us = us(t.init - t.network),
                      scope_us = us(t.scope - t.init),
                      machine_us = us(t.machine - t.scope),
                      total_us = us(t0.elapsed()), "sandbox {} started in {unit}", sb.id);
                self.emit(Event::Changed(sb.id.clone()));
                Ok(entry.clone())
            }
            Err(e) => {
                self.fail_start(&entry, &e).await;
                Err(e)
            }
        }
    }

    /// Start's steps; returns the Ready record and when each step was done.
    /// Undoes its own init and scope.
    async fn start_steps(&self, sb: &Sandbox) -> Result<(Sandbox, StartTimes)> {
        let t0 = Instant::now();
        let ctx = |step: &str| format!("sandbox {}: start: {step}", sb.id);
        let unit = sb.unit();
        let mut next = sb.clone();
        if sb.has_netns() {
            if !std::path::Path::new(&sb.netns_path()).exists() {
                // The namespace unit was stopped since Create: bring it back.
                // (A pinned namespace means the unit is up: no bus round-trip.)
                let netns = sb.netns_unit();
                self.systemd
                    .start_unit(&netns, self.settings.start_timeout())
                    .await
                    .with_context(|| ctx(&format!("start {netns}")))?;
                if sb.network.attached {
                    // A new namespace (after a reboot, say): the old
                    // attachment's interfaces went with the old one.
                    self.detach_network(&sb.id).await?;
                    next.network = PodNetwork::default();
                }
            }
            if !next.network.attached {
                // Create's ADD was cut short by a restart and undone since.
                next.network = self.attach_network(sb, None).await?;
            }
        }
        let t_net = t0.elapsed();
        let pid = init_spawn::spawn_init(
            &self.settings.init_path,
            &next,
            self.settings.start_timeout(),
        )
        .await
        .with_context(|| ctx("spawn podscope-init"))?;
        let t_init = t0.elapsed();
        let props = self.scope_properties(&next, pid);
        if let Err(e) = self
            .systemd
            .start_transient(&unit, props, self.settings.start_timeout())
            .await
        {
            // Undo: the init is ours alone until the scope holds it.
            kill_pid(pid);
            let _ = self
                .systemd
                .stop_unit(&unit, self.settings.stop_timeout())
                .await;
            return Err(e.context(ctx("create scope")));
        }
        let t_scope = t0.elapsed();
        next.state = State::Ready;
        next.started_at = now_usec();
        next.init_pid = pid;
        // Recorded with the Ready checkpoint, so Stop knows what to
        // unregister even after a daemon restart.
        next.machine = self.machined.register(&next).await;
        let times = StartTimes {
            network: t_net,
            init: t_init,
            scope: t_scope,
            machine: t0.elapsed(),
        };
        Ok((next, times))
    }

    /// A Start that failed leaves nothing running: no scope, no network, no
    /// namespace. The sandbox is NotReady (terminal, as for any stopped
    /// pod); kubelet removes it and makes a new attempt.
    async fn fail_start(&self, entry: &Entry, cause: &Error) {
        let reason = format!("start failed: {cause}");
        // The scope may exist when only the final checkpoint failed.
        if let Err(e) = self
            .stop_scope(&entry.id, &scope_unit_name(&entry.id))
            .await
        {
            warn!(sandbox_id = %entry.id, "sandbox {}: cleaning up after a failed start: {e}", entry.id);
        }
        if let Err(e) = self.stop_locked(entry, &reason).await {
            warn!(sandbox_id = %entry.id, "sandbox {}: cleaning up after a failed start: {e}", entry.id);
        }
    }

    fn scope_properties(&self, sb: &Sandbox, pid: u32) -> Vec<(&'static str, Prop)> {
        let c = &sb.config;
        let mut props = vec![
            ("PIDs", Prop::Pids(vec![pid])),
            ("Slice", Prop::Str(sb.slice.clone())),
            (
                "Description",
                Prop::Str(format!(
                    "podscope pod {}/{} ({})",
                    c.namespace,
                    c.name,
                    sb.id.short()
                )),
            ),
            ("Delegate", Prop::Bool(true)),
            ("CollectMode", Prop::Str("inactive-or-failed".into())),
            ("CPUAccounting", Prop::Bool(true)),
            ("MemoryAccounting", Prop::Bool(true)),
            ("TasksAccounting", Prop::Bool(true)),
            (
                "TimeoutStopUSec",
                Prop::U64(self.settings.stop_timeout_ms * 1000),
            ),
        ];
        if sb.has_netns() {
            // The pod lives and dies with its network namespace.
            let netns = sb.netns_unit();
            props.push(("BindsTo", Prop::Strs(vec![netns.clone()])));
            props.push(("After", Prop::Strs(vec![netns])));
        }
        for (k, v) in crate::domain::resources::scope_properties(&c.resources, &c.overhead) {
            props.push((k, Prop::U64(v)));
        }
        props
    }

    /// Stop the scope: NotReady. Idempotent.
    pub async fn stop(&self, id: &str) -> Result<Arc<Entry>> {
        let entry = self.resolve(id)?;
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {id}")));
        }
        self.stop_locked(&entry, "").await?;
        Ok(entry.clone())
    }

    /// Scope, then network (CNI DEL), then namespace. A failed DEL still
    /// lets the namespace go (DEL works without it), leaves the sandbox
    /// NotReady with the DEL still owed, and fails the call; the next Stop
    /// retries it.
    async fn stop_locked(&self, entry: &Entry, reason: &str) -> Result<()> {
        let sb = entry.snapshot();
        let owes_del = self.attachments.exists(&sb.id);
        if sb.state == State::NotReady && !owes_del {
            return Ok(());
        }
        let t0 = Instant::now();
        let unit = sb.unit();
        if sb.state == State::Ready {
            // Before the scope goes, so machined never shows a dead pod.
            self.machined.unregister(&sb).await;
            self.stop_scope(&sb.id, &unit).await?;
        }
        let t_scope = t0.elapsed();
        // DEL runs in the namespace, as plugins that move host devices in
        // and out need; the daemon holds it open meanwhile, so its pin can
        // be released at the same time (the netns unit's stop is a process
        // systemd starts: a cgroup migration and an exec, ~10-20 ms on a
        // small node, no longer added to DEL's time).
        let held = if owes_del && sb.has_netns() {
            HeldNetns::open(&sb.netns_path())
        } else {
            None
        };
        let del = async {
            let t = Instant::now();
            let r = if owes_del {
                self.detach_network_in(&sb.id, held.as_ref().map(HeldNetns::path))
                    .await
            } else {
                Ok(())
            };
            (r, t.elapsed())
        };
        let unpin = async {
            let t = Instant::now();
            let r = if sb.has_netns() {
                let netns = sb.netns_unit();
                self.systemd
                    .stop_unit(&netns, self.settings.stop_timeout())
                    .await
                    .with_context(|| format!("sandbox {}: stop: stop {netns}", sb.id))
            } else {
                Ok(())
            };
            (r, t.elapsed())
        };
        let ((net, t_del), (unpinned, t_unpin)) = tokio::join!(del, unpin);
        drop(held);
        unpinned?;
        let mut next = sb.clone();
        if sb.state != State::NotReady {
            next.state = State::NotReady;
            next.finished_at = now_usec();
            next.init_pid = 0;
            next.reason = reason.to_owned();
            next.machine.clear();
        }
        match &net {
            Ok(()) => {
                next.network = PodNetwork {
                    name: sb.network.name.clone(),
                    ..Default::default()
                }
            }
            Err(e) => next.network.error = e.to_string(),
        }
        self.persist(entry, next)
            .with_context(|| format!("sandbox {}: stop: save checkpoint", sb.id))?;
        info!(sandbox_id = %sb.id, unit = %unit,
              scope_us = t_scope.as_micros() as u64,
              network_us = t_del.as_micros() as u64,
              netns_us = t_unpin.as_micros() as u64,
              elapsed_us = t0.elapsed().as_micros() as u64, "sandbox {} stopped", sb.id);
        self.emit(Event::Changed(sb.id.clone()));
        net
    }

    /// Stop a scope; past the timeout, SIGKILL everything in it and wait once more.
    async fn stop_scope(&self, id: &SandboxId, unit: &str) -> Result<()> {
        match self
            .systemd
            .stop_unit(unit, self.settings.stop_timeout())
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::Timeout => {
                warn!(sandbox_id = %id, unit = %unit, "sandbox {id}: {unit} did not stop in time; killing it");
                self.systemd.kill_unit(unit, libc::SIGKILL).await?;
                self.systemd
                    .stop_unit(unit, self.settings.stop_timeout())
                    .await
                    .with_context(|| format!("sandbox {id}: stop scope after SIGKILL"))
            }
            Err(e) => Err(e.context(format!("sandbox {id}: stop scope"))),
        }
    }

    /// Stop if needed, then delete all state. Unknown ids are NotFound.
    pub async fn remove(&self, id: &str) -> Result<SandboxId> {
        let entry = self.resolve(id)?;
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {id}")));
        }
        let id = entry.id.clone();
        match self.stop_locked(&entry, "").await {
            Ok(()) => {}
            // Plugins missing or failing must not make a pod unremovable:
            // the attachment stays on disk (with the error) and its DEL is
            // retried when podscoped next starts.
            Err(e) if e.kind() == ErrorKind::NetworkFailed => {
                tracing::error!(sandbox_id = %id,
                    "sandbox {id}: removed with its network teardown still owed (retried at the next daemon start): {e}");
            }
            Err(e) => return Err(e),
        }
        self.store
            .delete(&id)
            .with_context(|| format!("sandbox {id}: remove: delete state"))?;
        if let Err(e) = pod_files::remove(&self.settings.run_dir, &id) {
            warn!(sandbox_id = %id, "sandbox {id}: {e}");
        }
        entry.mark_removed();
        self.registry.remove(&id);
        info!(sandbox_id = %id, "sandbox {id} removed");
        self.emit(Event::Removed(id.clone()));
        Ok(id)
    }

    /// Load checkpoints and reconcile them with systemd. Called once, before
    /// the bus name is taken.
    pub async fn recover(&self) -> Result<RecoveryReport> {
        let t0 = Instant::now();
        let recovered = self.store.recover()?;
        *self.recovered_attachments.lock().unwrap() = self.attachments.ids()?;
        for q in &recovered.quarantined {
            tracing::error!(sandbox_dir = %q.dir, moved_to = %q.moved_to.display(), reason = %q.reason,
                            "corrupt checkpoint of {} quarantined to {}: {}", q.dir, q.moved_to.display(), q.reason);
        }
        let units = self.systemd.list_units("podscope-*.scope").await?;
        let netns_units = self.systemd.list_units("podscope-netns@*.service").await?;
        let mut report = RecoveryReport {
            recovered: recovered.sandboxes.len(),
            quarantined: recovered.quarantined.clone(),
            incomplete: recovered.incomplete.len(),
            ..Default::default()
        };
        let mut known = std::collections::HashSet::new();
        let mut known_netns = std::collections::HashSet::new();
        for mut sb in recovered.sandboxes {
            let unit = sb.unit();
            known.insert(unit.clone());
            let alive = units.get(&unit).is_some_and(|s| is_active(s));
            match (sb.state, alive) {
                (State::Ready, true) | (State::NotReady, false) | (State::Created, false) => {}
                (State::Ready, false) => {
                    sb.state = State::NotReady;
                    sb.finished_at = now_usec();
                    sb.init_pid = 0;
                    sb.machine.clear();
                    sb.reason = "scope ended while podscoped was not running".into();
                    self.store.save(&sb)?;
                    info!(sandbox_id = %sb.id, unit = %unit, "sandbox {}: scope ended while podscoped was down; not ready", sb.id);
                }
                (State::Created | State::NotReady, true) => {
                    // A Start or Stop was cut short; its caller got no
                    // answer. Finish it the safe way: no scope.
                    warn!(sandbox_id = %sb.id, unit = %unit, state = %sb.state,
                          "sandbox {}: scope {unit} running but sandbox is {}: stopping the scope", sb.id, sb.state);
                    self.recovery_stop(&sb.id, &unit).await;
                }
            }
            // A sandbox that is not ready holds no network namespace.
            let netns = sb.netns_unit();
            if sb.state == State::NotReady && netns_units.get(&netns).is_some_and(|s| is_active(s))
            {
                warn!(sandbox_id = %sb.id, unit = %netns, "sandbox {} is not ready: stopping {netns}", sb.id);
                self.recovery_stop(&sb.id, &netns).await;
            }
            known_netns.insert(netns);
            self.registry.insert(Entry::new(sb));
        }
        let quarantined: Vec<&str> = report.quarantined.iter().map(|q| q.dir.as_str()).collect();
        let mut orphans = self
            .stop_orphans(&units, &known, &quarantined, id_from_scope_unit)
            .await;
        orphans.extend(
            self.stop_orphans(&netns_units, &known_netns, &quarantined, id_from_netns_unit)
                .await,
        );
        report.orphans_stopped = orphans;
        report.duration_usec = t0.elapsed().as_micros() as u64;
        info!(
            recovered = report.recovered,
            quarantined = report.quarantined.len(),
            incomplete = report.incomplete,
            orphans = report.orphans_stopped.len(),
            elapsed_us = report.duration_usec,
            "recovered {} sandboxes in {} µs ({} quarantined, {} orphan scopes stopped)",
            report.recovered,
            report.duration_usec,
            report.quarantined.len(),
            report.orphans_stopped.len()
        );
        *self.recovery.lock().unwrap() = report.clone();
        Ok(report)
    }

    /// Stop the active units in `units` that belong to no known sandbox.
    /// A unit whose record is quarantined is damaged, not absent: it is left
    /// running for an operator to decide.
    async fn stop_orphans(
        &self,
        units: &std::collections::HashMap<String, String>,
        known: &std::collections::HashSet<String>,
        quarantined: &[&str],
        id_of: fn(&str) -> Option<SandboxId>,
    ) -> Vec<String> {
        let mut stopped = Vec::new();
        for (unit, state) in units {
            if known.contains(unit) || !is_active(state) {
                continue;
            }
            let Some(id) = id_of(unit) else { continue };
            if quarantined.contains(&id.as_str()) {
                warn!(sandbox_id = %id, unit = %unit, "{unit} of quarantined sandbox {id} left running");
                continue;
            }
            warn!(sandbox_id = %id, unit = %unit, "{unit} has no sandbox record: stopping it");
            self.recovery_stop(&id, unit).await;
            stopped.push(unit.clone());
        }
        stopped
    }

    /// Stop a unit during recovery. A failure is logged, not fatal: the
    /// daemon must come up to manage the other sandboxes.
    async fn recovery_stop(&self, id: &SandboxId, unit: &str) {
        let r = if unit.ends_with(".scope") {
            self.stop_scope(id, unit).await
        } else {
            self.systemd
                .stop_unit(unit, self.settings.stop_timeout())
                .await
        };
        if let Err(e) = r {
            tracing::error!(sandbox_id = %id, unit = %unit, "sandbox {id}: stopping {unit} at recovery failed: {e}");
        }
    }

    /// Block until the sandbox is no longer ready (or never will be: a
    /// created one waits for its Start and then its end). Answers at once
    /// for a stopped sandbox; NotFound if it is removed before it stopped.
    pub async fn wait(&self, id: &str) -> Result<Exit> {
        let entry = self.resolve(id)?;
        let mut changes = entry.changes();
        loop {
            if let Some(exit) = entry.with(Exit::of) {
                return Ok(exit);
            }
            if entry.is_removed() || changes.changed().await.is_err() {
                return Err(Error::not_found(format!(
                    "sandbox {} was removed while waited for",
                    entry.id
                )));
            }
        }
    }

    /// New pod-level resources: applied to a ready pod's scope at once
    /// (SetUnitProperties), kept for Start in a created one, and recorded.
    pub async fn update_resources(&self, id: &str, resources: Resources) -> Result<Arc<Entry>> {
        resources.validate("resources")?;
        let entry = self.resolve(id)?;
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {id}")));
        }
        let sb = entry.snapshot();
        if sb.state == State::NotReady {
            return Err(Error::invalid_state(format!(
                "sandbox {} is stopped; its resources cannot change",
                sb.id
            )));
        }
        if sb.state == State::Ready {
            let unit = sb.unit();
            let props =
                crate::domain::resources::scope_property_updates(&resources, &sb.config.overhead)
                    .into_iter()
                    .map(|(k, v)| (k, Prop::U64(v)))
                    .collect();
            self.systemd
                .set_properties(&unit, props)
                .await
                .with_context(|| format!("sandbox {}: update resources of {unit}", sb.id))?;
        }
        let mut next = sb.clone();
        next.config.resources = resources;
        self.persist(&entry, next)
            .with_context(|| format!("sandbox {}: update resources: save checkpoint", sb.id))?;
        info!(sandbox_id = %sb.id, "sandbox {}: resources updated", sb.id);
        self.emit(Event::Changed(sb.id.clone()));
        Ok(entry.clone())
    }

    /// After recovery: every Ready pod registered with machined again where
    /// machined lost it (it restarted, or was installed, while podscoped
    /// was down). Each pod under its lock; a pod that stopped meanwhile is
    /// left alone.
    pub async fn reconcile_machines(&self) {
        for entry in self.list(&ListFilter {
            state: Some(State::Ready),
            ..Default::default()
        }) {
            let _op = entry.op.lock().await;
            let sb = entry.snapshot();
            if entry.is_removed() || sb.state != State::Ready {
                continue;
            }
            if !sb.machine.is_empty() && self.machined.is_registered(&sb).await {
                continue;
            }
            let mut next = sb.clone();
            next.machine = self.machined.register(&sb).await;
            if next.machine != sb.machine {
                info!(sandbox_id = %sb.id, machine = %next.machine,
                      "sandbox {}: registered with systemd-machined again as {:?}", sb.id, next.machine);
                if let Err(e) = self.persist(&entry, next) {
                    warn!(sandbox_id = %sb.id, "sandbox {}: {e}", sb.id);
                }
                self.emit(Event::Changed(sb.id.clone()));
            }
        }
    }

    /// A `podscope-*` unit changed or went away: a Ready sandbox whose scope
    /// is no longer active becomes NotReady.
    pub async fn on_unit_event(&self, ev: UnitEvent) {
        let Some(id) = id_from_scope_unit(&ev.unit) else {
            return;
        };
        if matches!(&ev.active_state, Some(s) if is_active(s)) {
            return;
        }
        let Some(entry) = self.registry.get(&id) else {
            return;
        };
        // Lock before looking at the state: an event that arrives while Start
        // is still finishing must be judged after Start has recorded "ready".
        let _op = entry.op.lock().await;
        if entry.is_removed() || entry.with(|s| s.state) != State::Ready {
            return;
        }
        // Confirm with systemd: events can be stale by the time we run.
        let state = match self.systemd.active_state(&ev.unit).await {
            Ok(s) => s,
            Err(e) => {
                warn!(sandbox_id = %id, unit = %ev.unit, "sandbox {id}: cannot read state of {}: {e}", ev.unit);
                return;
            }
        };
        if state.as_deref().is_some_and(is_active) {
            return;
        }
        let reason = format!(
            "scope {} {} outside podscope",
            ev.unit,
            match state.as_deref() {
                None => "was stopped".to_owned(),
                Some(s) => format!("became {s}"),
            }
        );
        info!(sandbox_id = %id, unit = %ev.unit, "sandbox {id} is not ready: {reason}");
        if let Err(e) = self.stop_locked(&entry, &reason).await {
            warn!(sandbox_id = %id, unit = %ev.unit, "sandbox {id}: marking it not ready failed: {e}");
        }
    }
}

/// When each of Start's steps was done, from its beginning.
struct StartTimes {
    network: std::time::Duration,
    init: std::time::Duration,
    scope: std::time::Duration,
    machine: std::time::Duration,
}

fn kill_pid(pid: u32) {
    debug!(pid, "killing podscope-init after a failed start");
    // SAFETY: kill(2) on a PID we spawned and that no scope has adopted.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_filter_matches_all_given_fields() {
        let mut sb = Sandbox::new(
            SandboxId::random(),
            SandboxConfig {
                name: "a".into(),
                namespace: "ns".into(),
                uid: "u".into(),
                labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            },
            String::new(),
            0,
        );
        sb.state = State::Ready;
        assert!(ListFilter::default().matches(&sb));
        let f = ListFilter {
            id_prefix: Some(sb.id.as_str()[..5].to_owned()),
            state: Some(State::Ready),
            labels: [("app".to_string(), "web".to_string())].into(),
            namespace: Some("ns".into()),
            name: Some("a".into()),
        };
        assert!(f.matches(&sb));
        sb.state = State::NotReady;
        assert!(!f.matches(&sb));
        sb.state = State::Ready;
        sb.config.labels.insert("app".into(), "db".into());
        assert!(!f.matches(&sb));
    }
}
