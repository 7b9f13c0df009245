//! The sandbox record: configuration plus everything the daemon learned
//! while running it. This is what a checkpoint holds.

use super::config::{NetworkMode, SandboxConfig};
use super::id::SandboxId;
use super::state::State;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    pub id: SandboxId,
    pub config: SandboxConfig,
    pub state: State,
    /// µs since the epoch.
    pub created_at: u64,
    pub started_at: u64,
    pub finished_at: u64,
    /// The slice the scope is (or will be) in.
    pub slice: String,
    /// Host PID of the pod's podscope-init while Ready, else 0.
    pub init_pid: u32,
    /// Why the sandbox stopped, when it was not asked to (e.g. "scope stopped
    /// outside podscope").
    #[serde(default)]
    pub reason: String,
    /// The pod's network as CNI set it up (pod network only).
    #[serde(default)]
    pub network: PodNetwork,
    /// The pod's resolv.conf and hostname files (under the run dir).
    #[serde(default)]
    pub resolv_conf_path: String,
    #[serde(default)]
    pub hostname_path: String,
    /// The machine name systemd-machined knows the pod by while Ready
    /// ("" when it is not registered).
    #[serde(default)]
    pub machine: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodNetwork {
    /// CNI ADD completed and no DEL has yet succeeded: a DEL is owed.
    pub attached: bool,
    /// The CNI network's name.
    pub name: String,
    /// Primary address first.
    pub ips: Vec<String>,
    /// The last failed teardown, while one is owed.
    pub error: String,
}

impl Sandbox {
    /// A sandbox as Create makes it: created, nothing started, no network.
    pub fn new(id: SandboxId, config: SandboxConfig, slice: String, created_at: u64) -> Self {
        Sandbox {
            id,
            config,
            state: State::Created,
            created_at,
            started_at: 0,
            finished_at: 0,
            slice,
            init_pid: 0,
            reason: String::new(),
            network: PodNetwork::default(),
            resolv_conf_path: String::new(),
            hostname_path: String::new(),
            machine: String::new(),
        }
    }

    pub fn unit(&self) -> String {
        scope_unit_name(&self.id)
    }

    /// The pod's own network namespace (pod network only).
    pub fn has_netns(&self) -> bool {
        self.config.network == NetworkMode::Pod
    }

    pub fn netns_unit(&self) -> String {
        netns_unit_name(&self.id)
    }

    pub fn netns_path(&self) -> String {
        netns_path_of(&self.id)
    }

    /// Start finished: Ready, running `init_pid`, since `now`.
    pub fn mark_ready(&mut self, init_pid: u32, now: u64) {
        self.state = State::Ready;
        self.started_at = now;
        self.init_pid = init_pid;
    }

    /// The pod ended, or will never start: NotReady (terminal). `reason` is
    /// why, when nobody asked ("" for Stop and Remove). A sandbox already
    /// NotReady keeps its first end and reason.
    pub fn mark_not_ready(&mut self, reason: &str, now: u64) {
        if self.state == State::NotReady {
            return;
        }
        self.state = State::NotReady;
        self.finished_at = now;
        self.init_pid = 0;
        self.reason = reason.to_owned();
        self.machine.clear();
    }

    /// CNI DEL succeeded: no attachment is owed. The network's name stays
    /// (Status still says which network the pod was on).
    pub fn network_detached(&mut self) {
        self.network = PodNetwork {
            name: std::mem::take(&mut self.network.name),
            ..Default::default()
        };
    }

    /// CNI DEL failed: the attachment is still owed, and this is why.
    pub fn network_teardown_failed(&mut self, error: String) {
        self.network.error = error;
    }

    /// Where the pod's network namespace is, while it has one ("" else).
    pub fn live_netns_path(&self) -> String {
        if self.has_netns() && self.state != State::NotReady {
            self.netns_path()
        } else {
            String::new()
        }
    }

    /// The scope's control group below the hierarchy's root, as systemd
    /// places it (`/podscope.slice/podscope-<id>.scope`).
    pub fn cgroup_path(&self) -> String {
        format!(
            "{}/{}",
            super::slice::slice_cgroup_path(&self.slice),
            self.unit()
        )
    }
}

/// Where network namespaces are pinned (the iproute2 convention, so
/// `ip netns` lists ours).
pub const NETNS_DIR: &str = "/run/netns";

/// Where a pod's network namespace is pinned.
pub fn netns_path_of(id: &SandboxId) -> String {
    format!("{NETNS_DIR}/podscope-{id}")
}

pub fn netns_unit_name(id: &SandboxId) -> String {
    format!("podscope-netns@{id}.service")
}

/// Parse `podscope-netns@<id>.service` back into an id.
pub fn id_from_netns_unit(unit: &str) -> Option<SandboxId> {
    let id = unit
        .strip_prefix("podscope-netns@")?
        .strip_suffix(".service")?;
    SandboxId::parse(id).ok()
}

pub fn scope_unit_name(id: &SandboxId) -> String {
    format!("podscope-{id}.scope")
}

/// Parse `podscope-<id>.scope` back into an id.
pub fn id_from_scope_unit(unit: &str) -> Option<SandboxId> {
    let id = unit.strip_prefix("podscope-")?.strip_suffix(".scope")?;
    SandboxId::parse(id).ok()
}

pub fn now_usec() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_changes_keep_the_record_consistent() {
        let mut sb = Sandbox::new(SandboxId::random(), SandboxConfig::default(), "s".into(), 1);
        sb.mark_ready(42, 2);
        sb.machine = "default-web".into();
        sb.network = PodNetwork {
            attached: true,
            name: "podnet".into(),
            ips: vec!["10.0.0.2".into()],
            error: String::new(),
        };
        assert_eq!(
            (sb.state, sb.started_at, sb.init_pid),
            (State::Ready, 2, 42)
        );
        sb.network_teardown_failed("plugin said no".into());
        assert!(sb.network.attached, "still owed");
        sb.network_detached();
        assert_eq!(
            sb.network,
            PodNetwork {
                name: "podnet".into(),
                ..Default::default()
            }
        );
        sb.mark_not_ready("scope stopped outside podscope", 3);
        assert_eq!(
            (sb.state, sb.finished_at, sb.init_pid, sb.machine.as_str()),
            (State::NotReady, 3, 0, "")
        );
        // The first end stands.
        sb.mark_not_ready("", 4);
        assert_eq!(sb.finished_at, 3);
        assert_eq!(sb.reason, "scope stopped outside podscope");
    }

    #[test]
    fn unit_names_round_trip() {
        let id = SandboxId::random();
        let unit = scope_unit_name(&id);
        assert!(unit.starts_with("podscope-") && unit.ends_with(".scope"));
        assert_eq!(id_from_scope_unit(&unit), Some(id.clone()));
        assert_eq!(id_from_scope_unit("podscope.slice"), None);
        assert_eq!(id_from_scope_unit("podscope-abc.scope"), None);
        let netns = netns_unit_name(&id);
        assert_eq!(netns, format!("podscope-netns@{id}.service"));
        assert_eq!(id_from_netns_unit(&netns), Some(id.clone()));
        assert_eq!(id_from_netns_unit(&unit), None);
    }
}
