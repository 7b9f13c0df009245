//! A sandbox's configuration, as the caller gave it, and its validation.
//! Validation follows Kubernetes' own rules for the same fields, so that
//! anything kubelet sends passes and nonsense is stopped at the door with
//! the offending field named.

use super::network::{self, DnsConfig, PortMapping};
use super::resources::Resources;
use super::slice;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// CRI metadata (name, namespace, uid), label and annotation keys and
/// label values are opaque strings to a runtime: Kubernetes validates its
/// names before kubelet sends them, and other CRI clients (critest, crictl)
/// send mixed case, UUIDs and dots. podscope refuses only what it cannot
/// carry: empty, control characters, oversized, and in the metadata `;` and
/// `=`, which would inject arguments into the CNI plugins' `CNI_ARGS`
/// (`K8S_POD_NAME=…;…`, a format with no escaping). Nothing here is used
/// as a unit name or a path: those come from the sandbox id.
///
/// Kubernetes' longest object name (a DNS subdomain).
pub const METADATA_MAX: usize = 253;
/// Kubernetes' longest qualified name: a 253-byte prefix, `/`, 63 bytes.
pub const KEY_MAX: usize = 317;
/// Kubernetes allows 63; kubelet itself puts names of up to 253 in labels,
/// and other clients more.
pub const LABEL_VALUE_MAX: usize = 1024;
pub const LABELS_MAX: usize = 1024;
/// The total size of a pod's labels (keys and values). Labels travel in
/// every List entry and in the object's properties: at this bound, 1000
/// pods still fit one List reply under gRPC's 16 MiB and the bus's 32 MiB
/// (annotations, up to 256 KiB, travel in Status only).
pub const LABELS_TOTAL_MAX: usize = 8 * 1024;
const HOSTNAME_MAX: usize = 64;
const PATH_MAX: usize = 4096;
/// Kubernetes' limit on the total size of a pod's annotations.
pub const ANNOTATIONS_TOTAL_MAX: usize = 256 * 1024;
/// How many annotations a pod may carry (tiny ones fit 256 KiB by the
/// ten thousand; each costs a map entry in every copy of the record).
pub const ANNOTATIONS_MAX: usize = 1024;

/// Whether the pod gets its own network namespace or shares the host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    #[default]
    Pod,
    Host,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Pod => "pod",
            NetworkMode::Host => "host",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "pod" => Ok(NetworkMode::Pod),
            "host" => Ok(NetworkMode::Host),
            _ => Err(Error::invalid(
                "network",
                format!("{s:?} is not \"pod\" or \"host\""),
            )),
        }
    }
}

/// CRI's NamespaceMode for the pod's PID and IPC namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamespaceMode {
    /// One namespace shared by the whole pod (the init is its PID 1).
    Pod,
    /// Each container gets its own (CRI's default for PID).
    #[default]
    Container,
    /// The host's namespace.
    Node,
}

impl NamespaceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NamespaceMode::Pod => "pod",
            NamespaceMode::Container => "container",
            NamespaceMode::Node => "node",
        }
    }
    pub fn parse(field: &str, s: &str) -> Result<Self> {
        match s {
            "pod" => Ok(NamespaceMode::Pod),
            "container" => Ok(NamespaceMode::Container),
            "node" => Ok(NamespaceMode::Node),
            _ => Err(Error::invalid(
                field,
                format!("{s:?} is not \"pod\", \"container\" or \"node\""),
            )),
        }
    }
}

/// What makes a sandbox unique: kubelet never asks for two with the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub attempt: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxConfig {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    pub hostname: String,
    pub log_directory: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub network: NetworkMode,
    pub pid_namespace: NamespaceMode,
    /// Only Pod and Node make sense for IPC; Container is treated as Pod.
    pub ipc_namespace: NamespaceMode,
    pub runtime_handler: String,
    pub cgroup_parent: String,
    pub resources: Resources,
    pub overhead: Resources,
    /// Empty: the pod gets the host's resolv.conf.
    pub dns: DnsConfig,
    pub port_mappings: Vec<PortMapping>,
    pub sysctls: BTreeMap<String, String>,
    /// None: the node's user namespace (`hostUsers: true`).
    pub user_namespace: Option<super::userns::UserNamespace>,
    /// SELinux labels for the pod's containers (each container's own over
    /// these).
    pub selinux: super::selinux::SeLinuxOptions,
}

impl SandboxConfig {
    pub fn key(&self) -> PodKey {
        PodKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            attempt: self.attempt,
        }
    }

    /// What this pod would take from the host beyond a pod of its own: host
    /// network, IPC or PID namespace, published host ports, a cgroup parent
    /// of its choosing, a log directory outside `log_root` (the daemon
    /// makes it and writes there as root). Empty for a plain pod. Non-root
    /// callers need polkit's privileged action for any of these.
    pub fn privileges(&self, log_root: &Path) -> Vec<String> {
        let mut p = self.host_namespaces();
        if !self.log_directory.is_empty() && !Path::new(&self.log_directory).starts_with(log_root) {
            p.push(format!(
                "log directory {} outside {}",
                self.log_directory,
                log_root.display()
            ));
        }
        for pm in self.port_mappings.iter().filter(|pm| pm.host_port > 0) {
            p.push(format!(
                "host port {}/{}",
                pm.host_port,
                pm.protocol.as_str()
            ));
        }
        if !self.cgroup_parent.is_empty() {
            p.push(format!("cgroup parent {}", self.cgroup_parent));
        }
        p
    }

    /// The pod's privileges that every process in it shares: the host's
    /// namespaces, and host ids its user namespace maps. A call that runs
    /// a process in such a pod (a container's start, an exec, an attach, a
    /// port forward) is as privileged as making the pod was.
    pub fn host_namespaces(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.network == NetworkMode::Host {
            p.push("host network".to_owned());
        }
        if self.ipc_namespace == NamespaceMode::Node {
            p.push("host IPC".to_owned());
        }
        if self.pid_namespace == NamespaceMode::Node {
            p.push("host PID".to_owned());
        }
        // The caller picks the node's ids its processes run as: ids that
        // may be a user's of the node.
        if let Some(u) = self.user_namespace.as_ref().and_then(|u| u.uids.first()) {
            p.push(format!(
                "user namespace on host ids {}-{}",
                u.host_id,
                u.host_id as u64 + u.length as u64 - 1
            ));
        }
        p
    }

    /// Validate every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        validate_metadata("name", &self.name)?;
        self.selinux.validate("selinux")?;
        validate_metadata("namespace", &self.namespace)?;
        validate_metadata("uid", &self.uid)?;
        if !self.hostname.is_empty() {
            validate_hostname(&self.hostname)?;
        }
        if !self.log_directory.is_empty() {
            validate_abs_path("log_directory", &self.log_directory)?;
        }
        validate_labels(&self.labels)?;
        validate_annotations(&self.annotations)?;
        if !self.runtime_handler.is_empty() {
            validate_token("runtime_handler", &self.runtime_handler, 63)?;
        }
        slice::slice_for_cgroup_parent(&self.cgroup_parent, "podscope.slice")?;
        self.resources.validate("resources")?;
        self.overhead.validate("overhead")?;
        self.dns.validate()?;
        network::validate_port_mappings(&self.port_mappings)?;
        network::validate_sysctls(
            &self.sysctls,
            self.network == NetworkMode::Host,
            self.ipc_namespace == NamespaceMode::Node,
        )?;
        network::bandwidth(&self.annotations)?;
        if let Some(u) = &self.user_namespace {
            u.validate()?;
            // The node's namespaces belong to the node's user namespace:
            // a pod's root would not own them (Kubernetes refuses the
            // same; podscope advertises no user_namespaces_host_network).
            let host = [
                (self.network == NetworkMode::Host, "network"),
                (self.pid_namespace == NamespaceMode::Node, "PID"),
                (self.ipc_namespace == NamespaceMode::Node, "IPC"),
            ];
            if let Some((_, which)) = host.iter().find(|(on, _)| *on) {
                return Err(Error::invalid(
                    "user_namespace",
                    format!("a pod with a user namespace of its own cannot use the node's {which} namespace"),
                ));
            }
        }
        Ok(())
    }
}

/// An opaque string: not empty, at most `max` bytes, no control characters.
fn validate_text(field: &str, what: &str, s: &str, max: usize) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, format!("{what}must not be empty")));
    }
    if s.len() > max {
        return Err(Error::invalid(
            field,
            format!("{what}{} bytes, more than {max}", s.len()),
        ));
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(
            field,
            format!("{what}{s:?} contains the control character {:?}", c),
        ));
    }
    Ok(())
}

/// Name, namespace or uid: opaque, but never able to add a CNI argument.
fn validate_metadata(field: &str, s: &str) -> Result<()> {
    validate_text(field, "", s, METADATA_MAX)?;
    if let Some(c) = s.chars().find(|c| matches!(c, ';' | '=')) {
        return Err(Error::invalid(
            field,
            format!("{s:?} contains {c:?}, which cannot be passed to CNI plugins in CNI_ARGS"),
        ));
    }
    Ok(())
}

fn validate_token(field: &str, s: &str, max: usize) -> Result<()> {
    if s.len() > max {
        return Err(Error::invalid(
            field,
            format!("{} characters, more than {max}", s.len()),
        ));
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(Error::invalid(
            field,
            format!("{s:?} may hold only letters, digits, '-', '_' and '.'"),
        ));
    }
    Ok(())
}

fn validate_hostname(s: &str) -> Result<()> {
    if s.len() > HOSTNAME_MAX {
        return Err(Error::invalid(
            "hostname",
            format!("{} characters, more than {HOSTNAME_MAX}", s.len()),
        ));
    }
    let ok = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.']);
    if !ok {
        return Err(Error::invalid(
            "hostname",
            format!("{s:?} is not a valid host name"),
        ));
    }
    Ok(())
}

fn validate_abs_path(field: &str, s: &str) -> Result<()> {
    if s.len() > PATH_MAX {
        return Err(Error::invalid(
            field,
            format!("{} characters, more than {PATH_MAX}", s.len()),
        ));
    }
    if !s.starts_with('/') {
        return Err(Error::invalid(
            field,
            format!("{s:?} is not an absolute path"),
        ));
    }
    if s.contains('\0') {
        return Err(Error::invalid(field, "contains a NUL byte"));
    }
    if s.split('/').any(|c| c == "..") {
        return Err(Error::invalid(field, format!("{s:?} contains '..'")));
    }
    Ok(())
}

fn validate_labels(labels: &BTreeMap<String, String>) -> Result<()> {
    if labels.len() > LABELS_MAX {
        return Err(Error::invalid(
            "labels",
            format!("{} labels, more than {LABELS_MAX}", labels.len()),
        ));
    }
    for (k, v) in labels {
        validate_text("labels", "key ", k, KEY_MAX)?;
        if v.len() > LABEL_VALUE_MAX {
            return Err(Error::invalid(
                "labels",
                format!(
                    "value of {k:?}: {} bytes, more than {LABEL_VALUE_MAX}",
                    v.len()
                ),
            ));
        }
        if let Some(c) = v.chars().find(|c| c.is_control()) {
            return Err(Error::invalid(
                "labels",
                format!("value of {k:?} contains the control character {c:?}"),
            ));
        }
    }
    let total: usize = labels.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > LABELS_TOTAL_MAX {
        return Err(Error::invalid(
            "labels",
            format!("{total} bytes in all, more than {LABELS_TOTAL_MAX}"),
        ));
    }
    Ok(())
}

/// Keys as label keys; values are free text (JSON with newlines is common)
/// but for NUL, which no D-Bus string can hold.
fn validate_annotations(annotations: &BTreeMap<String, String>) -> Result<()> {
    if annotations.len() > ANNOTATIONS_MAX {
        return Err(Error::invalid(
            "annotations",
            format!(
                "{} annotations, more than {ANNOTATIONS_MAX}",
                annotations.len()
            ),
        ));
    }
    let mut total = 0usize;
    for (k, v) in annotations {
        validate_text("annotations", "key ", k, KEY_MAX)?;
        if v.contains('\0') {
            return Err(Error::invalid(
                "annotations",
                format!("value of {k:?} contains a NUL byte"),
            ));
        }
        total += k.len() + v.len();
    }
    if total > ANNOTATIONS_TOTAL_MAX {
        return Err(Error::invalid(
            "annotations",
            format!("{total} bytes in all, more than {ANNOTATIONS_TOTAL_MAX}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    pub fn valid() -> SandboxConfig {
        SandboxConfig {
            name: "web-0".into(),
            namespace: "default".into(),
            uid: "0c8a3f3e-1b2c-4d5e-8f90-a1b2c3d4e5f6".into(),
            attempt: 0,
            hostname: "web-0".into(),
            log_directory: "/var/log/pods/default_web-0_0c8a".into(),
            labels: [
                ("app".to_string(), "web".to_string()),
                ("io.kubernetes.pod.name".into(), "web-0".into()),
            ]
            .into(),
            annotations: [(
                "kubernetes.io/config.source".to_string(),
                "api server, with spaces".to_string(),
            )]
            .into(),
            ..Default::default()
        }
    }

    fn field_of(c: &SandboxConfig) -> String {
        let e = c.validate().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        e.to_string().split(':').next().unwrap().to_string()
    }

    #[test]
    fn valid_config_passes() {
        valid().validate().unwrap();
    }

    #[test]
    fn each_bad_field_is_named() {
        for field in ["name", "namespace", "uid"] {
            for bad in [
                String::new(),
                "a".repeat(METADATA_MAX + 1),
                "tab\there".into(),
                "nul\0".into(),
                "x;IP=10.0.0.9".into(),
                "a=b".into(),
            ] {
                let mut c = valid();
                match field {
                    "name" => c.name = bad.clone(),
                    "namespace" => c.namespace = bad.clone(),
                    _ => c.uid = bad.clone(),
                }
                assert_eq!(field_of(&c), field, "{bad:?}");
            }
        }

        let mut c = valid();
        c.hostname = "-bad".into();
        assert_eq!(field_of(&c), "hostname");

        let mut c = valid();
        c.log_directory = "relative/dir".into();
        assert_eq!(field_of(&c), "log_directory");
        c.log_directory = "/var/log/../etc".into();
        assert_eq!(field_of(&c), "log_directory");

        for (k, v) in [
            ("", "x".to_string()),
            ("new\nline", "x".into()),
            ("ok", "x".repeat(LABEL_VALUE_MAX + 1)),
            ("ok", "bell\u{7}".into()),
        ] {
            let mut c = valid();
            c.labels.insert(k.into(), v.clone());
            assert_eq!(field_of(&c), "labels", "{k:?}={v:?}");
        }
        let mut c = valid();
        c.labels.insert("k".repeat(KEY_MAX + 1), "x".into());
        assert_eq!(field_of(&c), "labels");
        let mut c = valid();
        for i in 0..9 {
            c.labels.insert(format!("k{i}"), "v".repeat(1000));
        }
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("bytes in all"));
        let mut c = valid();
        c.annotations.insert("a".into(), "nul\0".into());
        assert_eq!(field_of(&c), "annotations");

        let mut c = valid();
        c.annotations.insert("big".into(), "x".repeat(300 * 1024));
        assert_eq!(field_of(&c), "annotations");

        // Tiny ones fit the byte limit by the ten thousand; the count is
        // bounded too.
        let mut c = valid();
        c.annotations = (0..=ANNOTATIONS_MAX)
            .map(|i| (format!("a{i}"), String::new()))
            .collect();
        assert_eq!(field_of(&c), "annotations");
        c.annotations.pop_first();
        assert!(c.validate().is_ok());

        let mut c = valid();
        c.runtime_handler = "has space".into();
        assert_eq!(field_of(&c), "runtime_handler");

        let mut c = valid();
        c.cgroup_parent = "relative".into();
        assert_eq!(field_of(&c), "cgroup_parent");
    }

    #[test]
    fn host_access_is_named_as_privileges() {
        let logs = Path::new("/var/log/pods");
        assert!(valid().privileges(logs).is_empty());
        let mut c = valid();
        c.network = NetworkMode::Host;
        c.ipc_namespace = NamespaceMode::Node;
        c.pid_namespace = NamespaceMode::Node;
        c.cgroup_parent = "system.slice".into();
        c.port_mappings = vec![
            super::super::PortMapping {
                host_port: 80,
                container_port: 8080,
                ..Default::default()
            },
            // Not published: nothing taken from the host.
            super::super::PortMapping {
                container_port: 9090,
                ..Default::default()
            },
        ];
        assert_eq!(
            c.privileges(logs),
            [
                "host network",
                "host IPC",
                "host PID",
                "host port 80/tcp",
                "cgroup parent system.slice"
            ]
        );
        assert_eq!(
            c.host_namespaces(),
            ["host network", "host IPC", "host PID"],
            "what every process of the pod has"
        );
    }

    /// Issue 41, finding 2: a log directory anywhere was a plain caller's
    /// to ask for, and the daemon wrote there as root (/etc/cron.d).
    #[test]
    fn a_log_directory_outside_the_log_root_is_a_privilege() {
        let logs = Path::new("/var/log/pods");
        let mut c = valid();
        for inside in [
            "/var/log/pods",
            "/var/log/pods/ns_n_u",
            "/var/log/pods//a/./b",
        ] {
            c.log_directory = inside.into();
            assert!(c.privileges(logs).is_empty(), "{inside}");
        }
        for outside in ["/etc/x", "/var/log/podsx", "/var/log", "/tmp/critest"] {
            c.log_directory = outside.into();
            assert_eq!(
                c.privileges(logs),
                [format!("log directory {outside} outside /var/log/pods")],
                "{outside}"
            );
        }
    }

    #[test]
    fn cri_metadata_is_opaque() {
        // What critest, crictl and other clients send, and Kubernetes never would.
        let mut c = valid();
        c.name = "PodSandbox-for-create-test-7d4c1e0a-2b7f-4c3e-9a55-0c0ffee00001".into();
        c.namespace = "cri-test.Namespace_1".into();
        c.uid = "7D4C1E0A-2B7F-4C3E-9A55-0C0FFEE00001".into();
        c.labels.insert(
            "Mixed Case/and spaces".into(),
            "any value: ü, 'quotes'".into(),
        );
        c.labels.insert("empty".into(), String::new());
        c.annotations.insert(
            "kubectl.kubernetes.io/last-applied-configuration".into(),
            "{\n  \"kind\": \"Pod\"\n}\n".into(),
        );
        c.validate().unwrap();
        c.name = "n".repeat(METADATA_MAX);
        c.uid = "u".repeat(METADATA_MAX);
        c.labels
            .insert("k".repeat(KEY_MAX), "v".repeat(LABEL_VALUE_MAX));
        c.validate().unwrap();
    }

    #[test]
    fn modes_parse() {
        assert_eq!(NetworkMode::parse("host").unwrap(), NetworkMode::Host);
        assert!(NetworkMode::parse("bridge")
            .unwrap_err()
            .to_string()
            .starts_with("network:"));
        assert_eq!(
            NamespaceMode::parse("pid_namespace", "pod").unwrap(),
            NamespaceMode::Pod
        );
        assert!(NamespaceMode::parse("pid_namespace", "x").is_err());
    }
}
