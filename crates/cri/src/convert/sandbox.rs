//! CRI messages to and from the daemon's terms, with no I/O: a
//! `RunPodSandboxRequest` becomes a validated `SandboxConfig` (the daemon's
//! own validation, errors renamed to the CRI field paths), the daemon's
//! `SandboxStatus` and `SandboxSummary` become `PodSandboxStatus` and
//! `PodSandbox`.

use cri_api::v1 as cri;
use podscope_api::domain::{
    DnsConfig, IdMapping, NamespaceMode, NetworkMode, PortMapping, Protocol, Resources,
    SandboxConfig, State, UserNamespace,
};
use podscope_api::{SandboxStatus, SandboxSummary};
use std::collections::{BTreeMap, HashMap};
use tonic::Status;

fn invalid(field: &str, why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {why}"))
}

/// The daemon's field names (as its validation reports them) and the CRI
/// paths a client knows them by.
const FIELD_PATHS: &[(&str, &str)] = &[
    ("name", "config.metadata.name"),
    ("namespace", "config.metadata.namespace"),
    ("uid", "config.metadata.uid"),
    ("hostname", "config.hostname"),
    ("log_directory", "config.log_directory"),
    ("labels", "config.labels"),
    ("annotations", "config.annotations"),
    ("runtime_handler", "runtime_handler"),
    ("cgroup_parent", "config.linux.cgroup_parent"),
    ("resources", "config.linux.resources"),
    ("overhead", "config.linux.overhead"),
    ("dns", "config.dns_config"),
    ("port_mappings", "config.port_mappings"),
    ("sysctls", "config.linux.sysctls"),
];

/// Rename the leading field of a daemon validation message
/// (`"hostname: ..."`, `"resources.cpu_quota: ..."`, `"port_mappings[0]..."`).
fn cri_message(msg: &str) -> String {
    let end = msg.find([':', '.', '[']).unwrap_or(msg.len());
    let (head, rest) = msg.split_at(end);
    match FIELD_PATHS.iter().find(|(f, _)| *f == head) {
        Some((_, path)) => format!("{path}{rest}"),
        None => msg.to_owned(),
    }
}

fn btree(m: &HashMap<String, String>) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn non_negative(field: &str, v: i64) -> Result<u64, Status> {
    u64::try_from(v).map_err(|_| invalid(field, format!("{v} is negative")))
}

pub(crate) fn resources(
    field: &str,
    r: &cri::LinuxContainerResources,
) -> Result<Resources, Status> {
    Ok(Resources {
        cpu_period: non_negative(&format!("{field}.cpu_period"), r.cpu_period)?,
        // CRI sends -1 (or 0) for "no quota".
        cpu_quota: r.cpu_quota.max(0) as u64,
        cpu_shares: non_negative(&format!("{field}.cpu_shares"), r.cpu_shares)?,
        memory_limit_in_bytes: non_negative(
            &format!("{field}.memory_limit_in_bytes"),
            r.memory_limit_in_bytes,
        )?,
        pids_limit: 0,
    })
}

fn port(field: &str, v: i32) -> Result<u32, Status> {
    u32::try_from(v).map_err(|_| invalid(field, format!("{v} is negative")))
}

fn port_mappings(pms: &[cri::PortMapping]) -> Result<Vec<PortMapping>, Status> {
    pms.iter()
        .enumerate()
        .map(|(i, pm)| {
            let field = format!("config.port_mappings[{i}]");
            let protocol = match cri::Protocol::try_from(pm.protocol) {
                Ok(cri::Protocol::Tcp) => Protocol::Tcp,
                Ok(cri::Protocol::Udp) => Protocol::Udp,
                Ok(cri::Protocol::Sctp) => Protocol::Sctp,
                Err(_) => {
                    return Err(invalid(
                        &format!("{field}.protocol"),
                        format!("{} is not TCP, UDP or SCTP", pm.protocol),
                    ))
                }
            };
            Ok(PortMapping {
                protocol,
                container_port: port(&format!("{field}.container_port"), pm.container_port)?,
                host_port: port(&format!("{field}.host_port"), pm.host_port)?,
                host_ip: pm.host_ip.clone(),
            })
        })
        .collect()
}

fn namespace_mode(field: &str, v: i32) -> Result<NamespaceMode, Status> {
    match cri::NamespaceMode::try_from(v) {
        Ok(cri::NamespaceMode::Pod) => Ok(NamespaceMode::Pod),
        Ok(cri::NamespaceMode::Container) => Ok(NamespaceMode::Container),
        Ok(cri::NamespaceMode::Node) => Ok(NamespaceMode::Node),
        Ok(cri::NamespaceMode::Target) => Err(invalid(
            field,
            "TARGET is for containers, not pod sandboxes",
        )),
        Err(_) => Err(invalid(field, format!("{v} is not a namespace mode"))),
    }
}

fn namespace_options(c: &mut SandboxConfig, o: &cri::NamespaceOption) -> Result<(), Status> {
    const F: &str = "config.linux.security_context.namespace_options";
    c.network = match namespace_mode(&format!("{F}.network"), o.network)? {
        NamespaceMode::Node => NetworkMode::Host,
        _ => NetworkMode::Pod,
    };
    c.pid_namespace = namespace_mode(&format!("{F}.pid"), o.pid)?;
    c.ipc_namespace = match namespace_mode(&format!("{F}.ipc"), o.ipc)? {
        NamespaceMode::Node => NamespaceMode::Node,
        _ => NamespaceMode::Pod,
    };
    if let Some(u) = &o.userns_options {
        let field = format!("{F}.userns_options");
        c.user_namespace = match cri::NamespaceMode::try_from(u.mode) {
            Ok(cri::NamespaceMode::Node) => None,
            Ok(cri::NamespaceMode::Pod) => {
                let list = |v: &[cri::IdMapping]| {
                    v.iter()
                        .map(|m| IdMapping {
                            container_id: m.container_id,
                            host_id: m.host_id,
                            length: m.length,
                        })
                        .collect()
                };
                let ns = UserNamespace {
                    uids: list(&u.uids),
                    gids: list(&u.gids),
                };
                // The rules, named by the CRI's fields (the domain's say
                // user_namespace.uids).
                ns.validate().map_err(|e| {
                    let msg = e.to_string();
                    Status::invalid_argument(cri_message(&msg.replacen(
                        "user_namespace.",
                        &format!("{field}."),
                        1,
                    )))
                })?;
                Some(ns)
            }
            Ok(m) => {
                return Err(invalid(
                    &format!("{field}.mode"),
                    format!(
                        "{}: a pod's user namespace is the node's (NODE) or its own (POD)",
                        m.as_str_name()
                    ),
                ))
            }
            Err(_) => {
                return Err(invalid(
                    &format!("{field}.mode"),
                    format!("{} is not a namespace mode", u.mode),
                ))
            }
        };
    }
    Ok(())
}

/// RunPodSandbox's request as a validated config: every error names the
/// CRI field, and nothing half-validated goes to the daemon.
pub fn config_from_request(req: &cri::RunPodSandboxRequest) -> Result<SandboxConfig, Status> {
    let config = req
        .config
        .as_ref()
        .ok_or_else(|| invalid("config", "required"))?;
    let md = config
        .metadata
        .as_ref()
        .ok_or_else(|| invalid("config.metadata", "required"))?;
    let mut c = SandboxConfig {
        name: md.name.clone(),
        namespace: md.namespace.clone(),
        uid: md.uid.clone(),
        attempt: md.attempt,
        hostname: config.hostname.clone(),
        log_directory: config.log_directory.clone(),
        labels: btree(&config.labels),
        annotations: btree(&config.annotations),
        runtime_handler: req.runtime_handler.clone(),
        port_mappings: port_mappings(&config.port_mappings)?,
        ..Default::default()
    };
    // Kubelet's default for a pod that says nothing is a pod-wide IPC and
    // network namespace and a per-container PID namespace.
    c.ipc_namespace = NamespaceMode::Pod;
    if let Some(dns) = &config.dns_config {
        c.dns = DnsConfig {
            servers: dns.servers.clone(),
            searches: dns.searches.clone(),
            options: dns.options.clone(),
        };
    }
    if let Some(linux) = &config.linux {
        c.cgroup_parent = linux.cgroup_parent.clone();
        c.sysctls = btree(&linux.sysctls);
        if let Some(r) = &linux.resources {
            c.resources = resources("config.linux.resources", r)?;
        }
        if let Some(r) = &linux.overhead {
            c.overhead = resources("config.linux.overhead", r)?;
        }
        if let Some(o) = linux
            .security_context
            .as_ref()
            .and_then(|s| s.namespace_options.as_ref())
        {
            namespace_options(&mut c, o)?;
        }
        c.selinux = super::container::selinux_of(
            linux
                .security_context
                .as_ref()
                .and_then(|s| s.selinux_options.as_ref()),
        );
    }
    c.validate()
        .map_err(|e| Status::invalid_argument(cri_message(&e.to_string())))?;
    Ok(c)
}

/// The pod's user namespace as the CRI says it: its own (POD) with the
/// mappings, or the node's.
fn userns_status(s: &SandboxStatus) -> cri::UserNamespace {
    let list = |v: &[podscope_api::sandbox::IdMapping]| {
        v.iter()
            .map(|m| cri::IdMapping {
                container_id: m.container_id,
                host_id: m.host_id,
                length: m.length,
            })
            .collect()
    };
    if s.uid_mappings.is_empty() {
        return cri::UserNamespace {
            mode: cri::NamespaceMode::Node as i32,
            ..Default::default()
        };
    }
    cri::UserNamespace {
        mode: cri::NamespaceMode::Pod as i32,
        uids: list(&s.uid_mappings),
        gids: list(&s.gid_mappings),
    }
}

pub fn state_of(state: State) -> cri::PodSandboxState {
    // CRI has no "created": a sandbox that is not running is not ready.
    if state == State::Ready {
        cri::PodSandboxState::SandboxReady
    } else {
        cri::PodSandboxState::SandboxNotready
    }
}

pub fn metadata_of(s: &SandboxSummary) -> cri::PodSandboxMetadata {
    cri::PodSandboxMetadata {
        name: s.name.clone(),
        uid: s.uid.clone(),
        namespace: s.namespace.clone(),
        attempt: s.attempt,
    }
}

/// The daemon keeps µs since the epoch; CRI wants ns.
fn ns_of_usec(usec: u64) -> i64 {
    (usec as i64).saturating_mul(1000)
}

fn hash_map(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// A List summary as a CRI `PodSandbox`.
pub fn pod_sandbox(s: &SandboxSummary) -> cri::PodSandbox {
    cri::PodSandbox {
        id: s.id.clone(),
        metadata: Some(metadata_of(s)),
        state: state_of(s.state) as i32,
        created_at: ns_of_usec(s.created_at),
        labels: hash_map(&s.labels),
        // Within the daemon's List budget (a pod's can reach 256 KiB);
        // past it, one annotation says so and PodSandboxStatus has them.
        annotations: podscope_api::list_budget::shown(
            &s.annotations,
            s.annotations_left_out,
            "PodSandboxStatus",
        ),
        runtime_handler: s.runtime_handler.clone(),
    }
}

fn cri_namespace_mode(m: NamespaceMode) -> cri::NamespaceMode {
    match m {
        NamespaceMode::Pod => cri::NamespaceMode::Pod,
        NamespaceMode::Node => cri::NamespaceMode::Node,
        NamespaceMode::Container => cri::NamespaceMode::Container,
    }
}

fn cri_network_mode(m: NetworkMode) -> cri::NamespaceMode {
    match m {
        NetworkMode::Pod => cri::NamespaceMode::Pod,
        NetworkMode::Host => cri::NamespaceMode::Node,
    }
}

/// A Status as a CRI `PodSandboxStatus`.
pub fn sandbox_status(s: &SandboxStatus) -> cri::PodSandboxStatus {
    let mut ips = s.ips.iter().cloned();
    let network = ips.next().map(|ip| cri::PodSandboxNetworkStatus {
        ip,
        additional_ips: ips.map(|ip| cri::PodIp { ip }).collect(),
    });
    cri::PodSandboxStatus {
        id: s.id.clone(),
        metadata: Some(metadata_of(&s.summary())),
        state: state_of(s.state) as i32,
        created_at: ns_of_usec(s.created_at),
        network: Some(network.unwrap_or_default()),
        linux: Some(cri::LinuxPodSandboxStatus {
            namespaces: Some(cri::Namespace {
                options: Some(cri::NamespaceOption {
                    network: cri_network_mode(s.network) as i32,
                    pid: cri_namespace_mode(s.pid_namespace) as i32,
                    ipc: cri_namespace_mode(s.ipc_namespace) as i32,
                    userns_options: Some(userns_status(s)),
                    ..Default::default()
                }),
            }),
        }),
        labels: hash_map(&s.labels),
        annotations: hash_map(&s.annotations),
        runtime_handler: s.runtime_handler.clone(),
    }
}

/// What the daemon's List can filter on, plus whether only not-ready
/// sandboxes are wanted (CRI's NOTREADY covers the daemon's "created" and
/// "notready", which its filter cannot say in one go).
#[derive(Debug)]
pub struct ListQuery {
    pub filter: podscope_api::ListFilter,
    pub only_not_ready: bool,
}

pub fn list_query(
    id: &str,
    state: Option<i32>,
    labels: &HashMap<String, String>,
) -> Result<ListQuery, Status> {
    let mut filter = podscope_api::ListFilter::default();
    let mut only_not_ready = false;
    if !id.is_empty() {
        podscope_api::domain::id::validate_prefix(id)
            .map_err(|e| Status::invalid_argument(format!("filter.id: {e}")))?;
        filter.id = Some(id.to_owned());
    }
    match state.map(cri::PodSandboxState::try_from) {
        None => {}
        Some(Ok(cri::PodSandboxState::SandboxReady)) => filter.state = Some(State::Ready),
        Some(Ok(cri::PodSandboxState::SandboxNotready)) => only_not_ready = true,
        Some(Err(_)) => {
            return Err(invalid(
                "filter.state",
                format!(
                    "{} is not SANDBOX_READY or SANDBOX_NOTREADY",
                    state.unwrap_or(0)
                ),
            ))
        }
    }
    if !labels.is_empty() {
        filter.labels = Some(btree(labels));
    }
    Ok(ListQuery {
        filter,
        only_not_ready,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> cri::RunPodSandboxRequest {
        cri::RunPodSandboxRequest {
            config: Some(cri::PodSandboxConfig {
                metadata: Some(cri::PodSandboxMetadata {
                    name: "web-0".into(),
                    uid: "7c1a".into(),
                    namespace: "default".into(),
                    attempt: 2,
                }),
                hostname: "web-0".into(),
                log_directory: "/var/log/pods/default_web-0_7c1a".into(),
                dns_config: Some(cri::DnsConfig {
                    servers: vec!["10.96.0.10".into()],
                    searches: vec!["svc.cluster.local".into()],
                    options: vec!["ndots:5".into()],
                }),
                port_mappings: vec![cri::PortMapping {
                    protocol: cri::Protocol::Udp as i32,
                    container_port: 53,
                    host_port: 5353,
                    host_ip: String::new(),
                }],
                labels: HashMap::from([("app".into(), "web".into())]),
                annotations: HashMap::from([("a".into(), "b".into())]),
                linux: Some(cri::LinuxPodSandboxConfig {
                    cgroup_parent: "kubepods-besteffort.slice".into(),
                    security_context: Some(cri::LinuxSandboxSecurityContext {
                        namespace_options: Some(cri::NamespaceOption {
                            network: cri::NamespaceMode::Node as i32,
                            pid: cri::NamespaceMode::Pod as i32,
                            ipc: cri::NamespaceMode::Pod as i32,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    sysctls: HashMap::from([("kernel.shmmax".into(), "1024".into())]),
                    resources: Some(cri::LinuxContainerResources {
                        cpu_period: 100_000,
                        cpu_quota: -1,
                        cpu_shares: 2,
                        memory_limit_in_bytes: 1 << 28,
                        ..Default::default()
                    }),
                    overhead: None,
                }),
                windows: None,
            }),
            runtime_handler: "podscope".into(),
        }
    }

    #[test]
    fn every_supported_field_passes_through() {
        let c = config_from_request(&request()).unwrap();
        assert_eq!(
            (c.name.as_str(), c.namespace.as_str()),
            ("web-0", "default")
        );
        assert_eq!((c.uid.as_str(), c.attempt), ("7c1a", 2));
        assert_eq!(c.hostname, "web-0");
        assert_eq!(c.log_directory, "/var/log/pods/default_web-0_7c1a");
        assert_eq!(c.dns.options, ["ndots:5"]);
        assert_eq!(c.port_mappings[0].protocol, Protocol::Udp);
        assert_eq!(c.port_mappings[0].host_port, 5353);
        assert_eq!(c.labels["app"], "web");
        assert_eq!(c.annotations["a"], "b");
        assert_eq!(c.cgroup_parent, "kubepods-besteffort.slice");
        assert_eq!(c.network, NetworkMode::Host);
        assert_eq!(c.pid_namespace, NamespaceMode::Pod);
        assert_eq!(c.ipc_namespace, NamespaceMode::Pod);
        assert_eq!(c.sysctls["kernel.shmmax"], "1024");
        assert_eq!(c.resources.cpu_quota, 0);
        assert_eq!(c.resources.cpu_shares, 2);
        assert_eq!(c.resources.memory_limit_in_bytes, 1 << 28);
        assert_eq!(c.runtime_handler, "podscope");
    }

    /// critest's and kubelet's user namespaces: POD with the mappings,
    /// NODE none, CONTAINER and TARGET refused by name; the domain's rules
    /// (one mapping from 0) named too.
    #[test]
    fn user_namespace_modes() {
        let m = |container_id, host_id| cri::IdMapping {
            container_id,
            host_id,
            length: 100_000,
        };
        let with = |mode: cri::NamespaceMode, ids: Vec<cri::IdMapping>| {
            let mut r = request();
            let o = linux(&mut r)
                .security_context
                .as_mut()
                .unwrap()
                .namespace_options
                .as_mut()
                .unwrap();
            o.network = cri::NamespaceMode::Pod as i32;
            o.userns_options = Some(cri::UserNamespace {
                mode: mode as i32,
                uids: ids.clone(),
                gids: ids,
            });
            config_from_request(&r)
        };
        let c = with(cri::NamespaceMode::Pod, vec![m(0, 1000)]).unwrap();
        let u = c.user_namespace.unwrap();
        assert_eq!((u.uids[0].host_id, u.gids[0].length), (1000, 100_000));
        assert!(with(cri::NamespaceMode::Node, vec![])
            .unwrap()
            .user_namespace
            .is_none());
        for (mode, ids, words) in [
            (
                cri::NamespaceMode::Container,
                vec![],
                "userns_options.mode: CONTAINER",
            ),
            (
                cri::NamespaceMode::Target,
                vec![],
                "userns_options.mode: TARGET",
            ),
            (
                cri::NamespaceMode::Pod,
                vec![m(0, 1000), m(0, 2000)],
                "userns_options.uids: 2 mappings",
            ),
            (
                cri::NamespaceMode::Pod,
                vec![m(1, 1000)],
                "must map the pod's root",
            ),
        ] {
            let e = with(mode, ids).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            assert!(e.message().contains(words), "{words}: {}", e.message());
        }
    }

    fn config(r: &mut cri::RunPodSandboxRequest) -> &mut cri::PodSandboxConfig {
        r.config.as_mut().unwrap()
    }

    fn linux(r: &mut cri::RunPodSandboxRequest) -> &mut cri::LinuxPodSandboxConfig {
        config(r).linux.as_mut().unwrap()
    }

    fn resources(r: &mut cri::RunPodSandboxRequest) -> &mut cri::LinuxContainerResources {
        linux(r).resources.as_mut().unwrap()
    }

    fn error_of(f: impl FnOnce(&mut cri::RunPodSandboxRequest)) -> String {
        let mut r = request();
        f(&mut r);
        let e = config_from_request(&r).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        e.message().to_owned()
    }

    #[test]
    fn malformed_requests_name_the_cri_field() {
        for (want, msg) in [
            ("config:", error_of(|r| r.config = None)),
            ("config.metadata:", error_of(|r| config(r).metadata = None)),
            (
                "config.metadata.name:",
                error_of(|r| config(r).metadata.as_mut().unwrap().name = String::new()),
            ),
            (
                "config.metadata.namespace:",
                error_of(|r| config(r).metadata.as_mut().unwrap().namespace = "x".repeat(254)),
            ),
            (
                "config.hostname:",
                error_of(|r| config(r).hostname = "h".repeat(300)),
            ),
            (
                "config.log_directory:",
                error_of(|r| config(r).log_directory = "relative".into()),
            ),
            (
                "config.annotations:",
                error_of(|r| {
                    config(r)
                        .annotations
                        .insert("big".into(), "x".repeat(300 * 1024));
                }),
            ),
            (
                "config.port_mappings[0].container_port:",
                error_of(|r| config(r).port_mappings[0].container_port = -1),
            ),
            (
                "config.port_mappings[0].protocol:",
                error_of(|r| config(r).port_mappings[0].protocol = 9),
            ),
            (
                "config.linux.resources.memory_limit_in_bytes:",
                error_of(|r| resources(r).memory_limit_in_bytes = -5),
            ),
            (
                "config.linux.resources.cpu_period:",
                error_of(|r| resources(r).cpu_period = 10),
            ),
            (
                "config.linux.sysctls",
                error_of(|r| {
                    linux(r).sysctls.insert("kernel.panic".into(), "1".into());
                }),
            ),
            (
                "config.linux.security_context.namespace_options.pid:",
                error_of(|r| {
                    linux(r)
                        .security_context
                        .as_mut()
                        .and_then(|sc| sc.namespace_options.as_mut())
                        .unwrap()
                        .pid = cri::NamespaceMode::Target as i32
                }),
            ),
            (
                "runtime_handler:",
                error_of(|r| r.runtime_handler = "a b".into()),
            ),
        ] {
            assert!(msg.starts_with(want), "want {want:?}, got {msg:?}");
        }
    }

    fn status() -> SandboxStatus {
        let mut sb = podscope_api::domain::Sandbox::new(
            podscope_api::domain::SandboxId::parse(&"ab".repeat(32)).unwrap(),
            SandboxConfig {
                name: "web-0".into(),
                namespace: "default".into(),
                uid: "7c1a".into(),
                attempt: 2,
                labels: [("app".to_owned(), "web".to_owned())].into(),
                ..Default::default()
            },
            "podscope.slice".into(),
            1_700_000_000_000_000,
        );
        sb.state = State::Ready;
        sb.network.ips = vec!["10.233.0.2".into(), "fd00::2".into()];
        SandboxStatus::of(&sb)
    }

    #[test]
    fn status_becomes_pod_sandbox_status() {
        let s = sandbox_status(&status());
        assert_eq!(s.state, cri::PodSandboxState::SandboxReady as i32);
        assert_eq!(s.created_at, 1_700_000_000_000_000_000);
        assert_eq!(s.metadata.as_ref().unwrap().attempt, 2);
        let net = s.network.unwrap();
        assert_eq!(net.ip, "10.233.0.2");
        assert_eq!(net.additional_ips[0].ip, "fd00::2");
        let ns = s.linux.unwrap().namespaces.unwrap().options.unwrap();
        assert_eq!(ns.network, cri::NamespaceMode::Pod as i32);
        assert_eq!(ns.pid, cri::NamespaceMode::Container as i32);
        assert_eq!(s.labels["app"], "web");
        assert_eq!(
            state_of(State::Created),
            cri::PodSandboxState::SandboxNotready
        );
        let d = podscope_api::to_dict(&status()).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&podscope_api::dict::dict_json(&d)).unwrap();
        assert_eq!(json["ips"][1], "fd00::2");
        assert_eq!(json["labels"]["app"], "web");
        assert_eq!(json["attempt"], 2);
        assert_eq!(
            json["cgroup"],
            format!("/podscope.slice/podscope-{}.scope", "ab".repeat(32))
        );
    }

    #[test]
    fn list_filters_translate() {
        let q = list_query("ab12", Some(0), &HashMap::from([("a".into(), "b".into())])).unwrap();
        assert!(!q.only_not_ready);
        assert_eq!(q.filter.id.as_deref(), Some("ab12"));
        assert_eq!(q.filter.state, Some(State::Ready));
        assert_eq!(q.filter.labels.as_ref().unwrap()["a"], "b");
        let q = list_query("", Some(1), &HashMap::new()).unwrap();
        assert!(q.only_not_ready && q.filter == podscope_api::ListFilter::default());
        assert!(list_query("", Some(7), &HashMap::new())
            .unwrap_err()
            .message()
            .starts_with("filter.state:"));
        assert!(list_query("not hex!", None, &HashMap::new())
            .unwrap_err()
            .message()
            .starts_with("filter.id:"));
    }
}
