//! Containers in pods, with systemd as the only supervisor: each one a
//! transient service in its pod's slice whose main process is the one the
//! OCI runtime's `create` leaves (`unit`; the daemon runs its `start`:
//! `runtime`), its root an overlay of the image's layers (`rootfs`), its
//! output read into the CRI log file (`logs`), OOM kills watched from its
//! cgroup (`oom`). One file per verb, as for pods: `create`, `start`,
//! `stop`, `remove`, `update`, `exec` (ExecSync), `reconcile` (unit events,
//! recovery at start).
//!
//! Rules, as for pods: a checkpoint is written before a success is
//! reported; a unit is made only for a container with a checkpoint; a
//! failing step undoes the steps before it; callers run these in tasks of
//! their own, so a caller hanging up never cuts a step short. Lock order:
//! the pod's `op`, the pod's `members` gate, then the container's `op`.

pub mod archive;
mod attach;
mod checkpoint;
mod checkpoint_key;
mod cpuacct;
mod create;
mod exec;
pub mod hugetlb;
pub mod logs;
pub mod oom;
mod reconcile;
mod remove;
mod reopen;
mod restore;
pub mod rootfs;
mod runtime;
mod signals;
pub mod spec;
mod start;
mod stop;
#[cfg(test)]
mod tests;
pub mod unified;
pub mod unit;
mod update;
mod xattr;

pub use exec::{ExecIo, ExecOutput, RunningExec};

use crate::host::hostns::HostNs;
use crate::image::Images;
use crate::pod::{files, holder, Event, Members, Pods};
use crate::state::checkpoint::{Checkpoint, Quarantined, Store};
use crate::state::index::{Entry, Record, Registry};
use crate::systemd::{Prop, Systemd, SystemdClient, UnitEvent};
use logs::{End, LogFile};
use podscope_api::domain::container::{
    exit_reason, id_from_container_unit, Container, ContainerConfig, ContainerExit, ContainerKey,
    ContainerState, REASON_UNKNOWN,
};
use podscope_api::domain::{oomd, ContainerId, Sandbox, SandboxId, State};
use podscope_api::error::{Error, ErrorKind, Result, ResultExt};
use podscope_config::{RuntimeKind, Settings};
use podscope_sys::failpoint;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, info, warn};

impl Record for Container {
    type Id = ContainerId;
    type Key = ContainerKey;
    fn id(&self) -> &ContainerId {
        &self.id
    }
    fn key(&self) -> ContainerKey {
        self.config.key(&self.pod_id)
    }
    fn key_taken(key: &ContainerKey, who: &str) -> String {
        format!(
            "a container named {} with attempt {} already exists in sandbox {}: {who}",
            key.name, key.attempt, key.pod
        )
    }
}

impl Checkpoint for Container {
    const DIR: &'static str = "containers";
}

pub type ContainerEntry = Entry<Container>;

/// Filters for `list`; all given ones must match.
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub id_prefix: Option<String>,
    pub pod_id_prefix: Option<String>,
    pub state: Option<ContainerState>,
    pub labels: BTreeMap<String, String>,
}

impl ListFilter {
    pub fn matches(&self, c: &Container) -> bool {
        self.id_prefix
            .as_ref()
            .is_none_or(|p| c.id.as_str().starts_with(p.as_str()))
            && self
                .pod_id_prefix
                .as_ref()
                .is_none_or(|p| c.pod_id.as_str().starts_with(p.as_str()))
            && self.state.is_none_or(|s| s == c.state)
            && self
                .labels
                .iter()
                .all(|(k, v)| c.config.labels.get(k) == Some(v))
    }
}

/// What a running container has in the daemon besides its record: its
/// log readers and their end switch, its log file, its OOM watch, its
/// stdin's write end, its terminal's master (for attachers' input and
/// sizes) and the tap attachers read its output from.
struct Live {
    end: watch::Sender<End>,
    log: Arc<LogFile>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    oom: Option<oom::OomWatch>,
    stdin: Option<std::os::fd::OwnedFd>,
    tty: Option<std::os::fd::OwnedFd>,
    tap: Arc<logs::Tap>,
}

impl Live {
    /// Descriptors it holds: one per reader (stdout, stderr, a terminal),
    /// the log file, the OOM watch's, stdin's write end, a terminal's copy.
    fn descriptors(&self) -> usize {
        self.readers.len()
            + usize::from(self.log.has_file())
            + self.oom.as_ref().map_or(0, |o| o.descriptors)
            + usize::from(self.stdin.is_some())
            + usize::from(self.tty.is_some())
    }
}

#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    pub recovered: usize,
    pub quarantined: Vec<Quarantined>,
    /// Containers whose end was learned at recovery (they ended while the
    /// daemon was down).
    pub exited_while_down: usize,
    pub orphans_stopped: Vec<String>,
}

pub struct Containers<S: SystemdClient + Clone = Systemd> {
    pub settings: Settings,
    store: Store<Container>,
    registry: Registry<Container>,
    systemd: S,
    pods: Arc<Pods<S>>,
    images: Arc<Images>,
    hostns: HostNs,
    events: mpsc::UnboundedSender<Event>,
    live: Mutex<HashMap<ContainerId, Live>>,
    /// Woken by every event of a container's unit before its lock is
    /// taken: Stop, which holds the lock, waits on it for the exit.
    wakers: Mutex<HashMap<ContainerId, Arc<Notify>>>,
    /// Pods' /dev/shm mounts are made one at a time.
    shm_lock: tokio::sync::Mutex<()>,
    oom_layout: oom::Layout,
    hugetlb_layout: hugetlb::Layout,
    /// A `cpuacct` hierarchy apart from `cpu`, where the daemon counts
    /// crun's containers itself (`cpuacct`).
    cpuacct_root: Option<PathBuf>,
    recovery: Mutex<RecoveryReport>,
    /// Where processes are looked at (`/proc`; a test's directory).
    proc_root: PathBuf,
    /// The node's cgroups are v2 (a private cgroup namespace per
    /// container, unified keys).
    cgroup_v2: bool,
    /// The capabilities units get: PID 1's bounding set ("ALL" for a
    /// container means these).
    host_caps: Vec<String>,
    /// The lowest oom_score_adj a container may be given
    /// (`spec::oom_score_floor`).
    oom_score_floor: Option<i32>,
    /// The node's CDI spec directories.
    pub cdi: crate::host::cdi::CdiSpecs,
}

/// What PID 1, whose children the units' processes are, allows them.
struct NodeProcessLimits {
    caps: Vec<String>,
    oom_score_floor: Option<i32>,
}

impl NodeProcessLimits {
    fn of_pid1() -> Self {
        let bounding = std::fs::read_to_string("/proc/1/status")
            .ok()
            .and_then(|s| spec::bounding_set(&s));
        let caps = bounding.map(spec::caps_in_mask).unwrap_or_else(|| {
            podscope_oci::caps::ALL
                .iter()
                .map(|c| (*c).to_owned())
                .collect()
        });
        let pid1_adj = std::fs::read_to_string("/proc/1/oom_score_adj")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let oom_score_floor = bounding.and_then(|b| spec::oom_score_floor(b, pid1_adj));
        if let Some(floor) = oom_score_floor {
            info!(
                "CAP_SYS_RESOURCE is not in the node's bounding set: containers' oom_score_adj is kept at {floor} (PID 1's) or above"
            );
        }
        NodeProcessLimits {
            caps,
            oom_score_floor,
        }
    }
}

impl<S: SystemdClient + Clone> Containers<S> {
    pub fn new(
        settings: Settings,
        systemd: S,
        pods: Arc<Pods<S>>,
        images: Arc<Images>,
        hostns: HostNs,
        events: mpsc::UnboundedSender<Event>,
    ) -> Result<Self> {
        let node = NodeProcessLimits::of_pid1();
        Ok(Containers {
            store: Store::open(&settings.state_dir)?,
            cdi: crate::host::cdi::CdiSpecs::new(&settings),
            settings,
            registry: Registry::default(),
            systemd,
            pods,
            images,
            hostns,
            events,
            live: Mutex::new(HashMap::new()),
            wakers: Mutex::new(HashMap::new()),
            shm_lock: tokio::sync::Mutex::new(()),
            oom_layout: oom::layout(),
            hugetlb_layout: hugetlb::layout(),
            cpuacct_root: cpuacct::layout(),
            recovery: Mutex::new(RecoveryReport::default()),
            proc_root: PathBuf::from("/proc"),
            cgroup_v2: std::path::Path::new(unified::CGROUP_V2_ROOT)
                .join("cgroup.controllers")
                .exists(),
            host_caps: node.caps,
            oom_score_floor: node.oom_score_floor,
        })
    }

    fn emit(&self, ev: Event) {
        let _ = self.events.send(ev);
    }

    pub fn resolve(&self, id: &str) -> Result<Arc<ContainerEntry>> {
        self.registry.resolve(id)
    }

    pub fn get(&self, id: &ContainerId) -> Option<Arc<ContainerEntry>> {
        self.registry.get(id)
    }

    pub fn count(&self) -> usize {
        self.registry.len()
    }

    pub fn count_in(&self, state: ContainerState) -> usize {
        self.registry
            .entries()
            .iter()
            .filter(|e| e.with(|c| c.state == state))
            .count()
    }

    pub fn recovery_report(&self) -> RecoveryReport {
        self.recovery.lock().unwrap().clone()
    }

    /// Descriptors the daemon holds for its containers (`Live`).
    pub fn descriptors_held(&self) -> usize {
        self.live
            .lock()
            .unwrap()
            .values()
            .map(Live::descriptors)
            .sum()
    }

    /// The containers matching `filter`, sorted by id.
    pub fn list(&self, filter: &ListFilter) -> Vec<Arc<ContainerEntry>> {
        let mut v = self.registry.entries();
        v.retain(|e| e.with(|c| filter.matches(c)));
        v
    }

    /// A pod's containers.
    fn of_pod(&self, pod: &SandboxId) -> Vec<Arc<ContainerEntry>> {
        self.list(&ListFilter {
            pod_id_prefix: Some(pod.to_string()),
            ..Default::default()
        })
    }

    /// The containers' writable layers: the directory their bundles are in,
    /// and the bytes and inodes of every upper directory (ImageFsInfo's
    /// container filesystem).
    pub async fn writable_usage(&self) -> (PathBuf, u64, u64) {
        let uppers: Vec<PathBuf> = self
            .list(&ListFilter::default())
            .iter()
            .map(|e| rootfs::Dirs::of(&self.bundle(&e.id)).upper)
            .collect();
        let sum = tokio::task::spawn_blocking(move || {
            uppers
                .iter()
                .filter_map(|u| podscope_sys::usage::usage_of(u).ok())
                .fold((0, 0), |(b, i), (bb, ii)| (b + bb, i + ii))
        })
        .await
        .unwrap_or((0, 0));
        (self.store.records_dir().to_owned(), sum.0, sum.1)
    }

    /// The bundle: the container's directory under the state dir.
    fn bundle(&self, id: &ContainerId) -> PathBuf {
        self.store.dir_of(id)
    }

    /// The daemon is going: each log reader writes what its pipe holds and
    /// lets go (the pipe stays open at the pod's init for the next daemon).
    pub async fn detach_logs(&self) {
        let lives: Vec<Live> = self.live.lock().unwrap().drain().map(|(_, l)| l).collect();
        for live in &lives {
            let _ = live.end.send(End::Detach);
        }
        for live in lives {
            for r in live.readers {
                let _ = tokio::time::timeout(Duration::from_secs(2), r).await;
            }
        }
    }

    /// The container's writable layer, as Status and List report it.
    pub fn upper_dir(&self, id: &ContainerId) -> String {
        rootfs::Dirs::of(&self.bundle(id))
            .upper
            .display()
            .to_string()
    }

    /// The container's runtime directory: its PID file, runtime log and
    /// console socket.
    fn run_dir(&self, id: &ContainerId) -> PathBuf {
        self.settings.run_dir.join("containers").join(id.as_str())
    }

    fn pod_dir(&self, pod: &SandboxId) -> PathBuf {
        files::dir_of(&self.settings.run_dir, pod)
    }

    /// Save and publish a new record; a removed container is never
    /// written back.
    fn persist(&self, entry: &ContainerEntry, c: Container) -> Result<()> {
        if entry.is_removed() {
            debug!(container_id = %entry.id, "container {}: removed; its record is not written back", entry.id);
            return Ok(());
        }
        self.store.save(&c)?;
        entry.replace(c);
        Ok(())
    }

    fn waker(&self, id: &ContainerId) -> Arc<Notify> {
        self.wakers
            .lock()
            .unwrap()
            .entry(id.clone())
            .or_default()
            .clone()
    }

    /// The holding name of a container's pipes at its pod's init.
    fn holding(id: &ContainerId) -> String {
        format!("ctr-{id}")
    }

    /// Ask the pod's init to forget a container's pipes (best effort: an
    /// init that is gone holds nothing).
    async fn release_at_init(&self, c: &Container) {
        let base = Self::holding(&c.id);
        for name in [format!("{base}-stdin"), format!("{base}-tty"), base] {
            self.release_holding(c, name).await;
        }
    }

    async fn release_holding(&self, c: &Container, name: String) {
        let sock = holder::socket_path(&self.pod_dir(&c.pod_id));
        let r = tokio::task::spawn_blocking(move || holder::release(&sock, &name)).await;
        if let Ok(Err(e)) = r {
            if e.kind() != std::io::ErrorKind::NotFound
                && e.kind() != std::io::ErrorKind::ConnectionRefused
            {
                debug!(container_id = %c.id, "container {}: the pod's init: {e}", c.id);
            }
        }
    }

    /// The container ended: its record says how, its output is read to
    /// the end, its OOM watch goes. Called with its lock held.
    async fn finish(&self, entry: &ContainerEntry, mut exit: ContainerExit) -> Result<()> {
        let c = entry.snapshot();
        let live = self.live.lock().unwrap().remove(&c.id);
        let mut oom_killed = c.oom_killed;
        let mut oomd_killed = false;
        if let Some(live) = live {
            oom_killed |= live
                .oom
                .as_ref()
                .is_some_and(|w| w.seen.load(Ordering::Acquire));
            if let Some(w) = live
                .oom
                .as_ref()
                .filter(|_| !oom_killed && exit.code == 137)
            {
                oomd_killed = w.oomd_seen(self.oomd_grace(&c)).await;
            }
            let _ = live.end.send(End::Drain);
            for r in live.readers {
                // The pipe holds at most its buffer: this is quick.
                let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
            }
        }
        self.end_execs(&c).await;
        if exit.reason.is_empty() && oomd_killed {
            let pod = self.pods.get(&c.pod_id).map(|p| p.snapshot());
            let slice = pod.as_ref().map(|p| p.slice.clone()).unwrap_or_default();
            exit.reason = oomd::REASON_OOMD_KILLED.into();
            exit.message = oomd::oomd_message(&slice, self.settings.oomd_limit());
            warn!(
                container_id = %c.id,
                sandbox_id = %c.pod_id,
                reason = oomd::REASON_OOMD_KILLED,
                "container {} ({}) of pod {} killed by systemd-oomd: {}",
                c.id,
                c.config.name,
                pod.map(|p| format!("{}/{}", p.config.namespace, p.config.name))
                    .unwrap_or_else(|| c.pod_id.to_string()),
                exit.message
            );
        }
        // Seen now, not carried over from the record (a recovered end).
        if oom_killed && !c.oom_killed {
            crate::metrics::oom_kill("kernel");
        } else if oomd_killed {
            crate::metrics::oom_kill("systemd-oomd");
        }
        if exit.reason.is_empty() {
            exit.reason = exit_reason(exit.code, oom_killed).to_owned();
        }
        if exit.finished_at == 0 {
            exit.finished_at = podscope_api::domain::sandbox::now_usec();
        }
        let mut next = c.clone();
        next.oom_killed = oom_killed;
        next.mark_exited(exit);
        info!(
            event = podscope_sys::logging::event::CONTAINER_EXITED,
            container_id = %c.id,
            sandbox_id = %c.pod_id,
            exit_code = next.exit.code,
            reason = %next.exit.reason,
            "container {} ({}) exited: code {}, {}",
            c.id,
            c.config.name,
            next.exit.code,
            next.exit.reason
        );
        self.persist(entry, next)
            .with_context(|| format!("container {}: record its exit", c.id))?;
        self.emit(Event::ContainerChanged(
            c.id.clone(),
            ContainerState::Exited,
        ));
        Ok(())
    }

    /// How long a SIGKILLed container's end waits for systemd-oomd's mark
    /// on its cgroup (set just after oomd's kill, so it can trail the
    /// exit): only where podscope handed the pod's slice to oomd; other
    /// kills are told at once, so a forced stop is not slowed.
    fn oomd_grace(&self, c: &Container) -> Duration {
        let handed = self.settings.oomd_limit().is_some()
            && self.pods.get(&c.pod_id).is_some_and(|p| {
                podscope_api::domain::slice::is_own_pod_slice(
                    &self.settings.default_slice,
                    c.pod_id.as_str(),
                    &p.snapshot().slice,
                )
            });
        if handed {
            Duration::from_millis(500)
        } else {
            Duration::ZERO
        }
    }

    /// The container ended: so do its execs. In a pod's shared PID
    /// namespace nothing else would end them (the kernel does only when
    /// the container's own PID namespace loses its init), and a command
    /// must not outlive the container it ran in.
    async fn end_execs(&self, c: &Container) {
        let pattern = format!("podscope-exec-{}-*.service", c.id.short());
        let Ok(units) = self.systemd.list_units(&pattern).await else {
            return;
        };
        for (unit, state) in units {
            if state != "inactive" && state != "failed" {
                let _ = self.systemd.kill_unit(&unit, libc::SIGKILL).await;
            }
        }
    }

    /// Ask systemd whether a running container's main process ended; if it
    /// did, record how. Called with its lock held. Whether it ended.
    async fn observe_exit(&self, entry: &ContainerEntry) -> Result<bool> {
        let c = entry.snapshot();
        if c.state != ContainerState::Running {
            return Ok(c.state != ContainerState::Created);
        }
        let exit = match self.systemd.service_status(&c.unit()).await? {
            Some(st) if !st.main_exited() => return Ok(false),
            Some(st) => ContainerExit {
                code: st.exit_code(),
                reason: if st.result == "oom-kill" {
                    podscope_api::domain::container::REASON_OOM_KILLED.into()
                } else {
                    String::new()
                },
                message: String::new(),
                finished_at: st.exec_main_exit_usec,
            },
            // Stopped outside podscope and collected before its exit was
            // read: the code is lost, as containerd reports a lost task.
            None => ContainerExit {
                code: 255,
                reason: REASON_UNKNOWN.into(),
                message: format!(
                    "its unit {} went away before its exit status was read",
                    c.unit()
                ),
                finished_at: 0,
            },
        };
        self.finish(entry, exit).await?;
        Ok(true)
    }
}

/// The pod's side of a container: what its spec and unit take from it.
fn pod_view(settings: &Settings, sb: &Sandbox) -> spec::PodView {
    let run = &settings.run_dir;
    let c = &sb.config;
    let host_ipc = c.ipc_namespace == podscope_api::domain::NamespaceMode::Node;
    spec::PodView {
        netns_path: sb.has_netns().then(|| sb.netns_path()),
        init_pid: sb.init_pid,
        host_ipc,
        pid_mode: c.pid_namespace,
        hostname: files::pod_hostname(sb),
        hostname_file: sb.hostname_path.clone(),
        resolv_conf: sb.resolv_conf_path.clone(),
        hosts: files::hosts_path(run, &sb.id).display().to_string(),
        shm: if host_ipc {
            "/dev/shm".into()
        } else {
            files::shm_path(run, &sb.id).display().to_string()
        },
        user_namespace: c.user_namespace.clone(),
    }
}

impl<S: SystemdClient + Clone> Members for Containers<S> {
    fn stop_all<'a>(&'a self, pod: &'a Sandbox) -> futures_util::future::BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // All at once: each waits on systemd, not on the others.
            let entries = self.of_pod(&pod.id);
            let mut errors: Vec<Error> =
                futures_util::future::join_all(entries.iter().map(|e| self.stop(e, 0)))
                    .await
                    .into_iter()
                    .filter_map(Result::err)
                    // Removed meanwhile (RemoveContainer does not wait for
                    // the pod): nothing left to stop, and the pod's stop
                    // must go on.
                    .filter(|e| e.kind() != ErrorKind::NotFound)
                    .collect();
            // The pod's /dev/shm goes with its last container.
            if let Err(e) = self
                .hostns
                .unmount(&files::shm_path(&self.settings.run_dir, &pod.id))
                .await
            {
                errors.push(e);
            }
            Error::gather(errors)
        })
    }

    fn remove_all<'a>(
        &'a self,
        pod: &'a Sandbox,
    ) -> futures_util::future::BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let entries = self.of_pod(&pod.id);
            let errors: Vec<Error> =
                futures_util::future::join_all(entries.iter().map(|e| self.remove(e)))
                    .await
                    .into_iter()
                    .filter_map(Result::err)
                    .filter(|e| e.kind() != ErrorKind::NotFound)
                    .collect();
            // The pod's own slice in hierarchies systemd does not manage
            // goes with the pod (`pod::remove`).
            Error::gather(errors)
        })
    }
}

/// Where a container's CRI log goes: the pod's log directory and the
/// container's log path (None when either is missing).
fn log_file_path(pod_log_dir: &str, log_path: &str) -> Option<PathBuf> {
    if log_path.is_empty() || pod_log_dir.is_empty() {
        return None;
    }
    Some(Path::new(pod_log_dir).join(log_path))
}
