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

const NAME_MAX: usize = 253;
const NAMESPACE_MAX: usize = 63;
const UID_MAX: usize = 128;
const HOSTNAME_MAX: usize = 64;
const PATH_MAX: usize = 4096;
const LABEL_VALUE_MAX: usize = 63;
const LABELS_MAX: usize = 1024;
/// Kubernetes' limit on the total size of a pod's annotations.
const ANNOTATIONS_TOTAL_MAX: usize = 256 * 1024;

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

    /// Validate every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        validate_dns_subdomain("name", &self.name, NAME_MAX)?;
        validate_dns_label("namespace", &self.namespace, NAMESPACE_MAX)?;
        validate_uid(&self.uid)?;
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
        Ok(())
    }
}

fn validate_dns_label(field: &str, s: &str, max: usize) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if s.len() > max {
        return Err(Error::invalid(
            field,
            format!("{} characters, more than {max}", s.len()),
        ));
    }
    let ok_chars = s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends = s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric();
    if !ok_chars || !ok_ends {
        return Err(Error::invalid(
            field,
            format!("{s:?} is not a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit)"),
        ));
    }
    Ok(())
}

fn validate_dns_subdomain(field: &str, s: &str, max: usize) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if s.len() > max {
        return Err(Error::invalid(
            field,
            format!("{} characters, more than {max}", s.len()),
        ));
    }
    for part in s.split('.') {
        if part.is_empty()
            || !part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            || !part.as_bytes()[0].is_ascii_alphanumeric()
            || !part.as_bytes()[part.len() - 1].is_ascii_alphanumeric()
        {
            return Err(Error::invalid(
                field,
                format!("{s:?} is not a DNS subdomain (lowercase letters, digits, '-' and '.')"),
            ));
        }
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

fn validate_uid(s: &str) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid("uid", "must not be empty"));
    }
    validate_token("uid", s, UID_MAX)
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

/// A Kubernetes qualified name: `[prefix/]name`, prefix a DNS subdomain,
/// name ≤ 63 alphanumerics with `-_.` inside.
fn validate_qualified_name(field: &str, key: &str) -> Result<()> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        validate_dns_subdomain(field, p, NAME_MAX).map_err(|_| {
            Error::invalid(field, format!("key {key:?} has an invalid prefix {p:?}"))
        })?;
    }
    if !is_label_value(name) || name.is_empty() {
        return Err(Error::invalid(
            field,
            format!("key {key:?} is not a qualified name (≤63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)"),
        ));
    }
    Ok(())
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= LABEL_VALUE_MAX
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

fn validate_labels(labels: &BTreeMap<String, String>) -> Result<()> {
    if labels.len() > LABELS_MAX {
        return Err(Error::invalid(
            "labels",
            format!("{} labels, more than {LABELS_MAX}", labels.len()),
        ));
    }
    for (k, v) in labels {
        validate_qualified_name("labels", k)?;
        if !is_label_value(v) {
            return Err(Error::invalid(
                "labels",
                format!("value {v:?} of {k:?} is not a label value (≤63 letters, digits, '-', '_', '.')"),
            ));
        }
    }
    Ok(())
}

fn validate_annotations(annotations: &BTreeMap<String, String>) -> Result<()> {
    let mut total = 0usize;
    for (k, v) in annotations {
        validate_qualified_name("annotations", k)?;
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
        let mut c = valid();
        c.name = "".into();
        assert_eq!(field_of(&c), "name");
        c.name = "Web".into();
        assert_eq!(field_of(&c), "name");
        c.name = "a".repeat(254);
        assert_eq!(field_of(&c), "name");
        c.name = "a..b".into();
        assert_eq!(field_of(&c), "name");

        let mut c = valid();
        c.namespace = "kube.system".into();
        assert_eq!(field_of(&c), "namespace");
        c.namespace = "a".repeat(64);
        assert_eq!(field_of(&c), "namespace");

        let mut c = valid();
        c.uid = "".into();
        assert_eq!(field_of(&c), "uid");
        c.uid = "a/b".into();
        assert_eq!(field_of(&c), "uid");

        let mut c = valid();
        c.hostname = "-bad".into();
        assert_eq!(field_of(&c), "hostname");

        let mut c = valid();
        c.log_directory = "relative/dir".into();
        assert_eq!(field_of(&c), "log_directory");
        c.log_directory = "/var/log/../etc".into();
        assert_eq!(field_of(&c), "log_directory");

        let mut c = valid();
        c.labels.insert("bad key!".into(), "x".into());
        assert_eq!(field_of(&c), "labels");
        let mut c = valid();
        c.labels.insert("ok".into(), "x".repeat(64));
        assert_eq!(field_of(&c), "labels");

        let mut c = valid();
        c.annotations.insert("big".into(), "x".repeat(300 * 1024));
        assert_eq!(field_of(&c), "annotations");

        let mut c = valid();
        c.runtime_handler = "has space".into();
        assert_eq!(field_of(&c), "runtime_handler");

        let mut c = valid();
        c.cgroup_parent = "relative".into();
        assert_eq!(field_of(&c), "cgroup_parent");
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
