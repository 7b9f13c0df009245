//! The dictionaries of `org.podscope.Sandbox1.Manager`, one Rust type each.
//!
//! Written with zvariant's dictionary encoding (`SerializeDict`: each field
//! a key, its value in a variant) and read with `dict::from_dict`, so a
//! struct's field names are the only spelling of its keys. Inputs
//! (`CreateOptions`, `ListFilter`, `Resources`) deny unknown keys and default
//! absent ones; outputs (`SandboxSummary`, `SandboxStatus`, `RuntimeInfo`)
//! require every key and ignore new ones, so an older client keeps working
//! against a newer daemon.

use super::dict::negative_is_zero;
use crate::domain::{self, NamespaceMode, NetworkMode, Protocol, SandboxConfig, State};
use crate::mirror::mirror;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use zbus::zvariant::{SerializeDict, Type};

/// Pod-level limits: Create's `resources` and `overhead`, UpdateResources'
/// argument, and Status' copies. A key left out is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct Resources {
    pub cpu_period: u64,
    /// CRI sends -1 (or 0) for "no quota".
    #[serde(deserialize_with = "negative_is_zero")]
    pub cpu_quota: u64,
    pub cpu_shares: u64,
    pub memory_limit_in_bytes: u64,
    pub pids_limit: u64,
}

mirror!(
    Resources,
    domain::Resources,
    [
        cpu_period,
        cpu_quota,
        cpu_shares,
        memory_limit_in_bytes,
        pids_limit
    ]
);

/// The pod's resolv.conf settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct Dns {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

mirror!(Dns, domain::DnsConfig, [servers, searches, options]);

/// One published port; `host_port` 0 is not published.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct PortMapping {
    pub protocol: Protocol,
    pub container_port: u32,
    pub host_port: u32,
    pub host_ip: String,
}

mirror!(
    PortMapping,
    domain::PortMapping,
    [protocol, container_port, host_port, host_ip]
);

/// One range of a pod's user namespace: ids `container_id..+length` in
/// the pod are `host_id..+length` on the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct IdMapping {
    pub container_id: u32,
    pub host_id: u32,
    pub length: u32,
}

mirror!(
    IdMapping,
    domain::IdMapping,
    [container_id, host_id, length]
);

fn mappings(v: &[domain::IdMapping]) -> Vec<IdMapping> {
    v.iter().copied().map(Into::into).collect()
}

/// Create's `options`: everything but the four metadata arguments. Absent
/// is the default; the daemon validates the values (`SandboxConfig::validate`).
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct CreateOptions {
    pub hostname: Option<String>,
    pub log_directory: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    pub annotations: Option<BTreeMap<String, String>>,
    pub network: Option<NetworkMode>,
    pub pid_namespace: Option<NamespaceMode>,
    pub ipc_namespace: Option<NamespaceMode>,
    pub runtime_handler: Option<String>,
    pub cgroup_parent: Option<String>,
    pub resources: Option<Resources>,
    pub overhead: Option<Resources>,
    pub dns: Option<Dns>,
    pub port_mappings: Option<Vec<PortMapping>>,
    pub sysctls: Option<BTreeMap<String, String>>,
    /// A user namespace of the pod's own (`hostUsers: false`): both or
    /// neither; left out, the node's.
    pub uid_mappings: Option<Vec<IdMapping>>,
    pub gid_mappings: Option<Vec<IdMapping>>,
    /// SELinux labels for the pod's containers (CRI's SELinuxOption); each
    /// left out for the default.
    pub selinux_user: Option<String>,
    pub selinux_role: Option<String>,
    pub selinux_type: Option<String>,
    pub selinux_level: Option<String>,
}

/// Create's four positional arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMetadata {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
}

fn some_if<T>(keep: bool, v: T) -> Option<T> {
    keep.then_some(v)
}

impl CreateOptions {
    /// The options for a config (for clients that build a `SandboxConfig`
    /// first, like the CRI frontend); empty fields are left out.
    pub fn from_config(c: &SandboxConfig) -> (PodMetadata, Self) {
        let c = c.clone();
        let meta = PodMetadata {
            name: c.name,
            namespace: c.namespace,
            uid: c.uid,
            attempt: c.attempt,
        };
        let text = |s: String| some_if(!s.is_empty(), s);
        let map = |m: BTreeMap<String, String>| some_if(!m.is_empty(), m);
        let limits = |r: domain::Resources| some_if(!r.is_empty(), r.into());
        let opts = CreateOptions {
            hostname: text(c.hostname),
            log_directory: text(c.log_directory),
            labels: map(c.labels),
            annotations: map(c.annotations),
            network: Some(c.network),
            pid_namespace: Some(c.pid_namespace),
            ipc_namespace: Some(c.ipc_namespace),
            runtime_handler: text(c.runtime_handler),
            cgroup_parent: text(c.cgroup_parent),
            resources: limits(c.resources),
            overhead: limits(c.overhead),
            dns: some_if(c.dns != domain::DnsConfig::default(), c.dns.into()),
            port_mappings: some_if(
                !c.port_mappings.is_empty(),
                c.port_mappings.into_iter().map(Into::into).collect(),
            ),
            sysctls: map(c.sysctls),
            uid_mappings: c.user_namespace.as_ref().map(|u| mappings(&u.uids)),
            gid_mappings: c.user_namespace.as_ref().map(|u| mappings(&u.gids)),
            selinux_user: text(c.selinux.user),
            selinux_role: text(c.selinux.role),
            selinux_type: text(c.selinux.type_),
            selinux_level: text(c.selinux.level),
        };
        (meta, opts)
    }

    /// The config these options describe (not yet validated).
    pub fn into_config(self, meta: PodMetadata) -> SandboxConfig {
        SandboxConfig {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            attempt: meta.attempt,
            hostname: self.hostname.unwrap_or_default(),
            log_directory: self.log_directory.unwrap_or_default(),
            labels: self.labels.unwrap_or_default(),
            annotations: self.annotations.unwrap_or_default(),
            network: self.network.unwrap_or_default(),
            pid_namespace: self.pid_namespace.unwrap_or_default(),
            ipc_namespace: self.ipc_namespace.unwrap_or_default(),
            runtime_handler: self.runtime_handler.unwrap_or_default(),
            cgroup_parent: self.cgroup_parent.unwrap_or_default(),
            resources: self.resources.unwrap_or_default().into(),
            overhead: self.overhead.unwrap_or_default().into(),
            dns: self.dns.unwrap_or_default().into(),
            port_mappings: self
                .port_mappings
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            sysctls: self.sysctls.unwrap_or_default(),
            // One key without the other is a namespace with no mapping
            // there, which validation names.
            user_namespace: (self.uid_mappings.is_some() || self.gid_mappings.is_some()).then(
                || domain::UserNamespace {
                    uids: self
                        .uid_mappings
                        .unwrap_or_default()
                        .into_iter()
                        .map(Into::into)
                        .collect(),
                    gids: self
                        .gid_mappings
                        .unwrap_or_default()
                        .into_iter()
                        .map(Into::into)
                        .collect(),
                },
            ),
            selinux: domain::selinux::SeLinuxOptions {
                user: self.selinux_user.unwrap_or_default(),
                role: self.selinux_role.unwrap_or_default(),
                type_: self.selinux_type.unwrap_or_default(),
                level: self.selinux_level.unwrap_or_default(),
            },
        }
    }
}

/// List's `filter`: every key given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct ListFilter {
    /// A prefix of the id.
    pub id: Option<String>,
    pub state: Option<State>,
    /// Subset match.
    pub labels: Option<BTreeMap<String, String>>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// What List returns per sandbox: enough for a listing (and for CRI's
/// ListPodSandbox and ListPodSandboxStats); Status has the rest. Kept small
/// because List of a thousand pods is on kubelet's hot path.
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct SandboxSummary {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    pub state: State,
    /// µs since the epoch.
    pub created_at: u64,
    pub unit: String,
    pub slice: String,
    /// The scope's control group, relative to the hierarchy's root
    /// (`/podscope.slice/podscope-<id>.scope`).
    pub cgroup: String,
    pub init_pid: u32,
    pub network: NetworkMode,
    pub runtime_handler: String,
    pub labels: BTreeMap<String, String>,
    /// Root's callers only, as in Status, and within List's budget
    /// (`list_budget`): an entry past it carries none, and
    /// `annotations_left_out` says how many bytes it lost.
    pub annotations: BTreeMap<String, String>,
    pub annotations_hidden: bool,
    pub annotations_left_out: u64,
}

/// Everything the daemon knows of one sandbox, as Status returns it.
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct SandboxStatus {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    pub state: State,
    /// µs since the epoch; 0 = not yet.
    pub created_at: u64,
    pub started_at: u64,
    pub finished_at: u64,
    pub unit: String,
    pub slice: String,
    /// As in `SandboxSummary`.
    pub cgroup: String,
    pub hostname: String,
    pub log_directory: String,
    pub labels: BTreeMap<String, String>,
    /// Root's callers only (the CRI frontend runs as root): annotations can
    /// carry secrets, e.g. kubectl's last-applied-configuration. Empty for
    /// anyone else, with `annotations_hidden`.
    pub annotations: BTreeMap<String, String>,
    pub annotations_hidden: bool,
    pub runtime_handler: String,
    pub network: NetworkMode,
    pub pid_namespace: NamespaceMode,
    pub ipc_namespace: NamespaceMode,
    pub cgroup_parent: String,
    /// While a pod-network sandbox has its namespace, else "".
    pub netns_path: String,
    /// For pod network, else "".
    pub netns_unit: String,
    /// Primary first.
    pub ips: Vec<String>,
    pub network_name: String,
    pub network_attached: bool,
    pub network_error: String,
    pub resolv_conf_path: String,
    pub hostname_path: String,
    /// The systemd-machined name while ready and registered, else "".
    pub machine: String,
    pub dns: Dns,
    pub port_mappings: Vec<PortMapping>,
    pub sysctls: BTreeMap<String, String>,
    /// The pod's user namespace; both empty: the node's (and what a
    /// daemon older than them sends).
    #[serde(default)]
    pub uid_mappings: Vec<IdMapping>,
    #[serde(default)]
    pub gid_mappings: Vec<IdMapping>,
    pub init_pid: u32,
    pub reason: String,
    pub resources: Resources,
    pub overhead: Resources,
}

/// A readiness condition: (type, status, reason, message), CRI's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct Condition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// A state directory recovery set aside: (dir, moved_to, reason).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct Quarantined {
    pub dir: String,
    pub moved_to: String,
    pub reason: String,
}

/// A runtime handler's CRI features (`RuntimeHandlerFeatures`), and why
/// each that is off is off: (name, recursive_read_only_mounts,
/// user_namespaces, why_not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct HandlerFeatures {
    pub name: String,
    pub recursive_read_only_mounts: bool,
    pub user_namespaces: bool,
    pub why_not: Vec<String>,
}

/// RuntimeStatus' counters and settings.
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct RuntimeInfo {
    pub sandboxes: u32,
    pub ready: u32,
    pub recovered: u32,
    pub recovery_usec: u64,
    pub quarantined: Vec<Quarantined>,
    pub orphans_stopped: Vec<String>,
    pub network_teardowns_owed: u32,
    pub state_dir: String,
    /// The configured handlers; "" is always accepted.
    pub runtime_handlers: Vec<String>,
    /// Handlers that cannot run here, each with why ("runc: /usr/bin/runc
    /// is not there").
    pub runtimes_unavailable: Vec<String>,
    /// Each configured handler's features, the default's first.
    pub handler_features: Vec<HandlerFeatures>,
    pub containers: u32,
    pub containers_running: u32,
    /// Wait calls now blocked.
    pub waits_in_flight: u32,
    /// podscoped's file descriptors: its (soft) limit, open now, the most
    /// seen open at once since it started, promised to calls in flight,
    /// and held by running containers (their output pipes, log files, OOM
    /// watches; a pod holds none once started).
    pub descriptors_limit: u64,
    pub descriptors_open: u64,
    pub descriptors_peak: u64,
    pub descriptors_reserved: u64,
    pub descriptors_containers: u64,
    /// podscoped's calls to systemd, machined and polkit: the most allowed
    /// in flight (bus_calls_max), in flight now, the most at once since it
    /// started; calls that waited for a slot, refusals by the bus that
    /// were retried, and calls that failed for want of a slot or after
    /// the retries.
    pub bus_calls_max: u32,
    pub bus_calls_in_flight: u32,
    pub bus_calls_peak: u32,
    pub bus_calls_waited: u64,
    pub bus_refusals_retried: u64,
    pub bus_calls_failed: u64,
    pub os: String,
    pub architecture: String,
    pub variant: String,
    /// The node's cgroup layout ("v2", "v1-hybrid", "v1") and what an
    /// operator should know of it (empty on v2).
    pub cgroup_layout: String,
    pub cgroup_advice: String,
    /// The pod slices' limit given to systemd-oomd ("60.00%"); empty when
    /// off.
    pub oomd_memory_pressure_limit: String,
    /// The CDI spec directories (lowest priority first), the kinds and
    /// devices (qualified names) their specs define, and what is in error
    /// (`path: why`: a spec file that does not parse or is refused, a
    /// directory not read whole, a device two files of one directory
    /// define).
    pub cdi_spec_dirs: Vec<String>,
    pub cdi_kinds: Vec<String>,
    pub cdi_devices: Vec<String>,
    pub cdi_spec_errors: Vec<String>,
}

/// Wait's answer: how a sandbox left READY.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
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
    pub fn of(sb: &domain::Sandbox) -> Option<Exit> {
        (sb.state == State::NotReady).then(|| Exit {
            status: u32::from(!sb.reason.is_empty()),
            finished_at: sb.finished_at,
            reason: sb.reason.clone(),
        })
    }
}

/// Version's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct Version {
    pub runtime_name: String,
    pub runtime_version: String,
    pub api_version: String,
}

/// Platform's answer, in OCI image index terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: String,
}

impl SandboxSummary {
    pub fn of(sb: &domain::Sandbox) -> Self {
        let c = &sb.config;
        SandboxSummary {
            id: sb.id.to_string(),
            name: c.name.clone(),
            namespace: c.namespace.clone(),
            uid: c.uid.clone(),
            attempt: c.attempt,
            state: sb.state,
            created_at: sb.created_at,
            unit: sb.unit(),
            slice: sb.slice.clone(),
            cgroup: sb.cgroup_path(),
            init_pid: sb.init_pid,
            network: c.network,
            runtime_handler: c.runtime_handler.clone(),
            labels: c.labels.clone(),
            annotations: c.annotations.clone(),
            annotations_hidden: false,
            annotations_left_out: 0,
        }
    }
}

impl SandboxStatus {
    /// The List entry of the same sandbox.
    pub fn summary(&self) -> SandboxSummary {
        SandboxSummary {
            id: self.id.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            attempt: self.attempt,
            state: self.state,
            created_at: self.created_at,
            unit: self.unit.clone(),
            slice: self.slice.clone(),
            cgroup: self.cgroup.clone(),
            init_pid: self.init_pid,
            network: self.network,
            runtime_handler: self.runtime_handler.clone(),
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            annotations_hidden: self.annotations_hidden,
            annotations_left_out: 0,
        }
    }

    /// What a caller that is not root sees: no annotations.
    pub fn without_annotations(mut self) -> Self {
        self.annotations_hidden = true;
        self.annotations.clear();
        self
    }

    pub fn of(sb: &domain::Sandbox) -> Self {
        // The fields it shares with the List entry are read from the record
        // in one place (`SandboxSummary::of`).
        let SandboxSummary {
            id,
            name,
            namespace,
            uid,
            attempt,
            state,
            created_at,
            unit,
            slice,
            cgroup,
            init_pid,
            network,
            runtime_handler,
            labels,
            annotations,
            annotations_hidden: _,
            annotations_left_out: _,
        } = SandboxSummary::of(sb);
        let c = &sb.config;
        SandboxStatus {
            id,
            name,
            namespace,
            uid,
            attempt,
            state,
            created_at,
            started_at: sb.started_at,
            finished_at: sb.finished_at,
            unit,
            slice,
            cgroup,
            hostname: c.hostname.clone(),
            log_directory: c.log_directory.clone(),
            labels,
            annotations,
            annotations_hidden: false,
            runtime_handler,
            network,
            pid_namespace: c.pid_namespace,
            ipc_namespace: c.ipc_namespace,
            cgroup_parent: c.cgroup_parent.clone(),
            netns_path: sb.live_netns_path(),
            netns_unit: if sb.has_netns() {
                sb.netns_unit()
            } else {
                String::new()
            },
            ips: sb.network.ips.clone(),
            network_name: sb.network.name.clone(),
            network_attached: sb.network.attached,
            network_error: sb.network.error.clone(),
            resolv_conf_path: sb.resolv_conf_path.clone(),
            hostname_path: sb.hostname_path.clone(),
            machine: sb.machine.clone(),
            dns: c.dns.clone().into(),
            port_mappings: c.port_mappings.iter().cloned().map(Into::into).collect(),
            sysctls: c.sysctls.clone(),
            uid_mappings: c
                .user_namespace
                .as_ref()
                .map_or(Vec::new(), |u| mappings(&u.uids)),
            gid_mappings: c
                .user_namespace
                .as_ref()
                .map_or(Vec::new(), |u| mappings(&u.gids)),
            init_pid,
            reason: sb.reason.clone(),
            resources: c.resources.into(),
            overhead: c.overhead.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Sandbox, SandboxId};
    use crate::error::{ErrorKind, Result};
    use crate::{from_dict, to_dict, Dict};
    use std::collections::HashMap;
    use zbus::zvariant::{OwnedValue, Value};

    fn ov(v: Value<'_>) -> OwnedValue {
        v.try_to_owned().unwrap()
    }

    fn opts(pairs: Vec<(&str, Value<'static>)>) -> Dict {
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ov(v)))
            .collect()
    }

    fn meta() -> PodMetadata {
        PodMetadata {
            name: "n".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            attempt: 1,
        }
    }

    fn parse(o: &Dict) -> Result<SandboxConfig> {
        Ok(from_dict::<CreateOptions>(None, o)?.into_config(meta()))
    }

    #[test]
    fn full_options_parse() {
        let labels: HashMap<&str, &str> = [("app", "web")].into();
        let res: HashMap<&str, Value> = [
            ("cpu_quota", Value::I64(50_000)),
            ("cpu_period", Value::I64(100_000)),
            ("memory_limit_in_bytes", Value::U64(1 << 28)),
        ]
        .into();
        let o = opts(vec![
            ("hostname", "h".into()),
            ("labels", labels.into()),
            ("network", "host".into()),
            ("pid_namespace", "pod".into()),
            ("cgroup_parent", "/kubepods/pod1".into()),
            ("resources", res.into()),
        ]);
        let c = parse(&o).unwrap();
        assert_eq!(c.hostname, "h");
        assert_eq!(c.labels["app"], "web");
        assert_eq!(c.network, NetworkMode::Host);
        assert_eq!(c.pid_namespace, NamespaceMode::Pod);
        assert_eq!(c.resources.cpu_quota, 50_000);
        assert_eq!(c.resources.memory_limit_in_bytes, 1 << 28);
        assert_eq!(c.attempt, 1);
    }

    #[test]
    fn network_options_parse_with_any_integer_type() {
        let dns: HashMap<&str, Value<'_>> = HashMap::from([
            ("servers", vec!["10.96.0.10"].into()),
            ("searches", vec!["svc.cluster.local"].into()),
            ("options", vec!["ndots:5"].into()),
        ]);
        let pm: HashMap<&str, Value<'_>> = HashMap::from([
            ("protocol", "udp".into()),
            ("container_port", Value::U32(53)),
            ("host_port", Value::I32(5353)),
            // Boxed twice, as some clients send it.
            ("host_ip", Value::Value(Box::new("127.0.0.1".into()))),
        ]);
        let sysctls = HashMap::from([("net.core.somaxconn", "1024")]);
        let o = opts(vec![
            ("dns", dns.into()),
            ("port_mappings", vec![pm].into()),
            ("sysctls", sysctls.into()),
        ]);
        let c = parse(&o).unwrap();
        assert_eq!(c.dns.servers, ["10.96.0.10"]);
        assert_eq!(c.dns.options, ["ndots:5"]);
        assert_eq!(c.port_mappings[0].protocol, Protocol::Udp);
        assert_eq!(c.port_mappings[0].host_port, 5353);
        assert_eq!(c.port_mappings[0].host_ip, "127.0.0.1");
        assert_eq!(c.sysctls["net.core.somaxconn"], "1024");
    }

    #[test]
    fn bad_keys_and_types_are_named_by_their_path() {
        let pm = |k: &'static str, v: Value<'static>| -> Value<'static> {
            vec![HashMap::from([(k, v)])].into()
        };
        for (o, field) in [
            (opts(vec![("hostnme", "h".into())]), "hostnme"),
            (opts(vec![("hostname", Value::U32(3))]), "hostname"),
            (opts(vec![("labels", "x".into())]), "labels"),
            (
                opts(vec![("labels", HashMap::from([("a", 1u32)]).into())]),
                "labels.a",
            ),
            (
                opts(vec![(
                    "resources",
                    HashMap::from([("cpu_sharez", Value::U64(2))]).into(),
                )]),
                "resources.cpu_sharez",
            ),
            (
                opts(vec![(
                    "resources",
                    HashMap::from([("cpu_shares", Value::I64(-5))]).into(),
                )]),
                "resources.cpu_shares",
            ),
            (opts(vec![("network", "bridge".into())]), "network"),
            (
                opts(vec![("port_mappings", pm("hostport", Value::U32(1)))]),
                "port_mappings[0].hostport",
            ),
            (
                opts(vec![(
                    "port_mappings",
                    pm("host_port", Value::U64(1 << 40)),
                )]),
                "port_mappings[0].host_port",
            ),
            (
                opts(vec![("port_mappings", pm("protocol", "icmp".into()))]),
                "port_mappings[0].protocol",
            ),
            (opts(vec![("dns", "8.8.8.8".into())]), "dns"),
        ] {
            let e = parse(&o).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().starts_with(&format!("{field}: ")), "{e}");
        }
        let e = from_dict::<ListFilter>(Some("filter"), &opts(vec![("colour", "x".into())]))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("filter.colour: unknown key (known: id, state"),
            "{e}"
        );
        let e = from_dict::<ListFilter>(Some("filter"), &opts(vec![("state", "running".into())]))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "filter.state: \"running\" is not one of created, ready, notready"
        );
    }

    #[test]
    fn huge_strings_are_refused_where_they_are_met() {
        let big: &'static str = "x".repeat(crate::dict::STRING_MAX + 1).leak();
        let annotations = HashMap::from([("a", big)]);
        let e = parse(&opts(vec![("annotations", annotations.into())])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "annotations.a: a string of 262145 bytes, more than 262144"
        );
        // A key is bounded before it is copied to be sorted.
        let annotations = HashMap::from([(big, "v")]);
        let e = parse(&opts(vec![("annotations", annotations.into())])).unwrap_err();
        assert!(
            e.to_string().starts_with("annotations: a string of 262145"),
            "{e}"
        );
        // A borrowed dictionary (a method's argument) reads the same.
        let borrowed: crate::DictArg<'_> = HashMap::from([("hostname", Value::from(big))]);
        let e = from_dict::<CreateOptions>(None, &borrowed).unwrap_err();
        assert!(e.to_string().starts_with("hostname: a string of"), "{e}");
    }

    #[test]
    fn negative_quota_means_unlimited() {
        let o = opts(vec![(
            "resources",
            HashMap::from([("cpu_quota", Value::I64(-1))]).into(),
        )]);
        assert_eq!(parse(&o).unwrap().resources.cpu_quota, 0);
    }

    fn full_config() -> SandboxConfig {
        let mut c = SandboxConfig {
            name: "n".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            attempt: 1,
            hostname: "h".into(),
            log_directory: "/var/log/pods/x".into(),
            network: NetworkMode::Host,
            pid_namespace: NamespaceMode::Pod,
            ipc_namespace: NamespaceMode::Node,
            runtime_handler: "podscope".into(),
            cgroup_parent: "kubepods-besteffort.slice".into(),
            ..Default::default()
        };
        c.labels.insert("app".into(), "web".into());
        c.annotations.insert("a".into(), "b".into());
        c.sysctls.insert("net.core.somaxconn".into(), "1024".into());
        c.resources.cpu_quota = 50_000;
        c.overhead.memory_limit_in_bytes = 1 << 20;
        c.dns.servers = vec!["10.96.0.10".into()];
        c.port_mappings = vec![domain::PortMapping {
            protocol: Protocol::Udp,
            container_port: 53,
            host_port: 5353,
            host_ip: "127.0.0.1".into(),
        }];
        c
    }

    /// What a client writes is what the daemon reads, through the real
    /// D-Bus encoding.
    #[test]
    fn create_options_round_trip_through_the_wire() {
        for c in [
            full_config(),
            SandboxConfig {
                attempt: 1,
                ..meta().into_config_default()
            },
        ] {
            let (m, o) = CreateOptions::from_config(&c);
            assert_eq!(m, meta());
            let d = to_dict(&o).unwrap();
            assert_eq!(parse(&d).unwrap(), c);
        }
        let (_, o) = CreateOptions::from_config(&full_config());
        let d = to_dict(&o).unwrap();
        // The documented shapes: dns a{sv}, port_mappings aa{sv}.
        assert_eq!(d["dns"].value_signature().to_string(), "a{sv}");
        assert_eq!(d["port_mappings"].value_signature().to_string(), "aa{sv}");
        assert_eq!(d["network"].value_signature().to_string(), "s");
        assert_eq!(
            String::try_from(d["network"].try_clone().unwrap()).unwrap(),
            "host"
        );
    }

    #[test]
    fn status_and_summary_round_trip_and_require_every_key() {
        let mut sb = Sandbox::new(
            SandboxId::random(),
            full_config(),
            "podscope.slice".into(),
            7,
        );
        sb.state = State::Ready;
        sb.network.ips = vec!["10.0.0.2".into()];
        let status = SandboxStatus::of(&sb);
        let d = to_dict(&status).unwrap();
        assert_eq!(from_dict::<SandboxStatus>(None, &d).unwrap(), status);
        assert_eq!(d["attempt"].value_signature().to_string(), "u");
        assert_eq!(d["created_at"].value_signature().to_string(), "t");
        assert_eq!(d["dns"].value_signature().to_string(), "a{sv}");
        assert_eq!(
            status.cgroup,
            format!("/podscope.slice/podscope-{}.scope", sb.id)
        );
        let summary = SandboxSummary::of(&sb);
        assert_eq!(status.summary(), summary);
        let mut d = to_dict(&summary).unwrap();
        assert_eq!(from_dict::<SandboxSummary>(None, &d).unwrap(), summary);
        // A newer daemon's extra key is fine; a missing one is an error.
        d.insert("colour".into(), ov("blue".into()));
        assert!(from_dict::<SandboxSummary>(None, &d).is_ok());
        d.remove("cgroup");
        let e = from_dict::<SandboxSummary>(None, &d).unwrap_err();
        assert_eq!(e.to_string(), "cgroup: missing");
        d.insert("cgroup".into(), ov(Value::U32(1)));
        let e = from_dict::<SandboxSummary>(None, &d).unwrap_err();
        assert!(
            e.to_string().starts_with("cgroup: expected a string"),
            "{e}"
        );
    }

    #[test]
    fn runtime_info_round_trips() {
        let info = RuntimeInfo {
            sandboxes: 3,
            ready: 1,
            recovered: 2,
            recovery_usec: 1234,
            quarantined: vec![Quarantined {
                dir: "ab".into(),
                moved_to: "/var/lib/podscope/quarantine/ab".into(),
                reason: "bad json".into(),
            }],
            orphans_stopped: vec!["podscope-x.scope".into()],
            network_teardowns_owed: 0,
            state_dir: "/var/lib/podscope".into(),
            runtime_handlers: vec!["crun".into(), "runc".into()],
            runtimes_unavailable: vec![],
            handler_features: vec![HandlerFeatures {
                name: "crun".into(),
                recursive_read_only_mounts: true,
                user_namespaces: false,
                why_not: vec!["user namespaces: no idmapped mounts".into()],
            }],
            containers: 3,
            containers_running: 1,
            waits_in_flight: 0,
            descriptors_limit: 1_048_576,
            descriptors_open: 2214,
            descriptors_peak: 2219,
            descriptors_reserved: 31,
            descriptors_containers: 2200,
            bus_calls_max: 64,
            bus_calls_in_flight: 3,
            bus_calls_peak: 64,
            bus_calls_waited: 852,
            bus_refusals_retried: 0,
            bus_calls_failed: 0,
            os: "linux".into(),
            architecture: "amd64".into(),
            variant: String::new(),
            cgroup_layout: "v2".into(),
            cgroup_advice: String::new(),
            oomd_memory_pressure_limit: "60.00%".into(),
            cdi_spec_dirs: vec!["/etc/cdi".into(), "/var/run/cdi".into()],
            cdi_kinds: vec!["nvidia.com/gpu".into()],
            cdi_devices: vec!["nvidia.com/gpu=0".into(), "nvidia.com/gpu=all".into()],
            cdi_spec_errors: vec!["/etc/cdi/x.yaml: it defines no device".into()],
        };
        let d = to_dict(&info).unwrap();
        assert_eq!(d["descriptors_limit"].value_signature().to_string(), "t");
        assert_eq!(d["bus_calls_max"].value_signature().to_string(), "u");
        assert_eq!(d["quarantined"].value_signature().to_string(), "a(sss)");
        assert_eq!(
            d["handler_features"].value_signature().to_string(),
            "a(sbbas)"
        );
        assert_eq!(from_dict::<RuntimeInfo>(None, &d).unwrap(), info);
    }

    impl PodMetadata {
        fn into_config_default(self) -> SandboxConfig {
            CreateOptions::default().into_config(self)
        }
    }
}
