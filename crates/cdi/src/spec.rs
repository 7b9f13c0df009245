//! One CDI spec file, as SPEC.md v1.1.0 of cncf-tags/container-device-interface
//! defines it: `cdiVersion`, `kind`, `devices` (each a name and its
//! container edits) and the spec-level `containerEdits` made once whenever
//! any of its devices is asked for. Read from YAML (`.yaml`) or JSON
//! (`.json`), then checked whole: a file with one bad part is in error as a
//! whole, so no half of a vendor's intent is applied.
//!
//! Reading is tolerant of fields it does not know (a newer minor version's
//! additions, vendors' extras), as the reference library's is; the
//! `cdiVersion` must be one this reader was written for.

use podscope_api::domain::cdi::{check_device, parse_kind};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// The oldest and newest `cdiVersion` read (0.3.0 is the oldest the
/// reference library still reads; 1.1.0 the newest published).
pub const VERSION_MIN: (u64, u64, u64) = (0, 3, 0);
pub const VERSION_MAX: (u64, u64, u64) = (1, 1, 0);

/// The hook names a spec may use: the OCI runtime spec's points, and the
/// deprecated `prestart` runc and crun still run.
pub const HOOK_NAMES: &[&str] = &[
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

/// The file, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecFile {
    pub cdi_version: String,
    pub kind: String,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub devices: Vec<Device>,
    #[serde(default)]
    pub container_edits: ContainerEdits,
}

/// One device of a spec: its name (unqualified) and its own edits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub name: String,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub container_edits: ContainerEdits,
}

/// The changes a device (or its spec) makes to a container's OCI spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerEdits {
    /// `KEY=VALUE`, replacing the container's own by key.
    pub env: Vec<String>,
    pub device_nodes: Vec<DeviceNode>,
    pub hooks: Vec<Hook>,
    pub mounts: Vec<Mount>,
    pub intel_rdt: Option<IntelRdt>,
    pub additional_gids: Vec<u32>,
    pub net_devices: Vec<NetDevice>,
}

/// A device node made in the container. Only `path` is required: the host
/// node is `hostPath` (else `path`), and its type, numbers and mode are
/// read from it when the spec does not give them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceNode {
    pub path: String,
    #[serde(default)]
    pub host_path: Option<String>,
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub major: Option<i64>,
    #[serde(default)]
    pub minor: Option<i64>,
    #[serde(default)]
    pub file_mode: Option<u32>,
    /// cgroup access, any of `r`, `w`, `m` (`rwm` when absent).
    #[serde(default)]
    pub permissions: Option<String>,
    #[serde(default)]
    pub uid: Option<u32>,
    #[serde(default)]
    pub gid: Option<u32>,
}

/// A mount: by default a bind of `hostPath` (the options say how).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub host_path: String,
    pub container_path: String,
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub options: Vec<String>,
}

impl Mount {
    /// A bind mount, whose host path must exist: no type and no
    /// filesystem named, or `bind`/`rbind` among the options.
    pub fn is_bind(&self) -> bool {
        matches!(self.type_.as_deref(), None | Some("" | "bind" | "none"))
            || self.options.iter().any(|o| o == "bind" || o == "rbind")
    }
}

/// A hook the runtime runs, at `hookName`'s point.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    pub hook_name: String,
    pub path: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub timeout: Option<i64>,
}

/// Intel RDT (spec 0.7.0; `schemata` and `enableMonitoring` 1.0.0).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IntelRdt {
    #[serde(rename = "closID")]
    pub clos_id: Option<String>,
    pub l3_cache_schema: Option<String>,
    pub mem_bw_schema: Option<String>,
    pub schemata: Vec<String>,
    pub enable_monitoring: bool,
}

/// A network device moved into the container (spec 1.0.0).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetDevice {
    pub host_interface_name: String,
    pub name: String,
}

/// What a file is written in, from its name: the CDI directories hold
/// `.json` and `.yaml` files; anything else in them is not a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    pub fn of(file_name: &str) -> Option<Format> {
        if file_name.starts_with('.') {
            // Writers stage a file as a dot file, then rename it in.
            return None;
        }
        match file_name.rsplit_once('.') {
            Some((_, "json")) => Some(Format::Json),
            Some((_, "yaml")) => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// Just the kind, read from a file that did not parse whole, so its error
/// can be told to whoever asks for a device of that kind.
#[derive(Deserialize)]
struct KindOnly {
    kind: String,
}

/// A file that could not be used: why, and its kind when that much read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub kind: Option<String>,
    pub why: String,
}

impl SpecFile {
    /// Parse and check `bytes` as `format`.
    pub fn parse(bytes: &[u8], format: Format) -> Result<SpecFile, Refused> {
        let parsed: Result<SpecFile, String> = match format {
            Format::Json => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
            Format::Yaml => serde_yaml::from_slice(bytes).map_err(|e| e.to_string()),
        };
        let spec = parsed.map_err(|why| {
            let kind = match format {
                Format::Json => serde_json::from_slice::<KindOnly>(bytes).ok(),
                Format::Yaml => serde_yaml::from_slice::<KindOnly>(bytes).ok(),
            }
            .map(|k| k.kind);
            Refused { kind, why }
        })?;
        spec.check().map_err(|why| Refused {
            kind: Some(spec.kind.clone()),
            why,
        })?;
        Ok(spec)
    }

    /// The rules SPEC.md gives a valid file.
    fn check(&self) -> Result<(), String> {
        let v = parse_version(&self.cdi_version)?;
        if v < VERSION_MIN || v > VERSION_MAX {
            return Err(format!(
                "cdiVersion {} is not one podscope reads ({}.{}.{} to {}.{}.{})",
                self.cdi_version,
                VERSION_MIN.0,
                VERSION_MIN.1,
                VERSION_MIN.2,
                VERSION_MAX.0,
                VERSION_MAX.1,
                VERSION_MAX.2
            ));
        }
        parse_kind(&self.kind)?;
        if self.devices.is_empty() {
            return Err("it defines no device".into());
        }
        let mut names = BTreeSet::new();
        for d in &self.devices {
            check_device(&d.name)?;
            if !names.insert(d.name.as_str()) {
                return Err(format!("device {:?} is defined twice", d.name));
            }
            check_edits(&d.container_edits).map_err(|e| format!("device {:?}: {e}", d.name))?;
        }
        check_edits(&self.container_edits).map_err(|e| format!("containerEdits: {e}"))
    }
}

/// `MAJOR.MINOR.PATCH`, numbers only (SemVer without pre-release parts:
/// every published CDI version is such).
fn parse_version(v: &str) -> Result<(u64, u64, u64), String> {
    let bad = || format!("cdiVersion {v:?} is not a version (MAJOR.MINOR.PATCH)");
    let mut parts = v.split('.').map(|p| p.parse::<u64>().map_err(|_| bad()));
    let (Some(a), Some(b), Some(c), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    Ok((a?, b?, c?))
}

fn absolute(what: &str, p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err(format!("{what} {p:?} is not an absolute path"));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(format!("{what} {p:?} climbs with .."));
    }
    if p.chars().any(char::is_control) {
        return Err(format!("{what} {p:?} holds control characters"));
    }
    Ok(())
}

fn check_env(what: &str, env: &[String]) -> Result<(), String> {
    for e in env {
        match e.split_once('=') {
            Some((k, _)) if !k.is_empty() && !e.contains('\0') => {}
            _ => return Err(format!("{what} {e:?} is not KEY=VALUE")),
        }
    }
    Ok(())
}

/// The edits' own rules, before any host is looked at.
fn check_edits(e: &ContainerEdits) -> Result<(), String> {
    check_env("env", &e.env)?;
    for n in &e.device_nodes {
        absolute("deviceNodes path", &n.path)?;
        if let Some(h) = &n.host_path {
            absolute("deviceNodes hostPath", h)?;
        }
        if let Some(t) = &n.type_ {
            if !matches!(t.as_str(), "c" | "b" | "u" | "p") {
                return Err(format!(
                    "device node {}: type {t:?} is not c, b, u or p",
                    n.path
                ));
            }
        }
        if let Some(p) = &n.permissions {
            if p.is_empty() || !p.chars().all(|c| matches!(c, 'r' | 'w' | 'm')) {
                return Err(format!(
                    "device node {}: permissions {p:?} are not made of r, w and m",
                    n.path
                ));
            }
        }
        if n.major.is_some_and(|m| m < 0) || n.minor.is_some_and(|m| m < 0) {
            return Err(format!("device node {}: a negative number", n.path));
        }
    }
    for m in &e.mounts {
        absolute("mounts containerPath", &m.container_path)?;
        if m.host_path.is_empty() {
            return Err(format!("mount on {}: no hostPath", m.container_path));
        }
        if m.is_bind() {
            absolute("mounts hostPath", &m.host_path)?;
        }
    }
    for h in &e.hooks {
        if !HOOK_NAMES.contains(&h.hook_name.as_str()) {
            return Err(format!(
                "hook {}: hookName {:?} is not one of {}",
                h.path,
                h.hook_name,
                HOOK_NAMES.join(", ")
            ));
        }
        absolute("hook path", &h.path)?;
        check_env("hook env", &h.env)?;
        if h.timeout.is_some_and(|t| t <= 0) {
            return Err(format!("hook {}: timeout must be more than 0", h.path));
        }
    }
    for n in &e.net_devices {
        if n.host_interface_name.is_empty() || n.name.is_empty() {
            return Err("netDevices: hostInterfaceName and name are required".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
cdiVersion: "0.6.0"
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14
    options: [ro, nosuid, nodev, bind]
"#;

    #[test]
    fn nvidia_ctks_yaml_reads() {
        let s = SpecFile::parse(YAML.as_bytes(), Format::Yaml).unwrap();
        assert_eq!(s.kind, "nvidia.com/gpu");
        assert_eq!(s.devices.len(), 2);
        assert_eq!(s.container_edits.hooks[0].hook_name, "createContainer");
        assert!(s.container_edits.mounts[0].is_bind());
        assert_eq!(
            s.devices[0].container_edits.device_nodes[0].path,
            "/dev/nvidia0"
        );
    }

    #[test]
    fn json_reads_and_unknown_fields_are_ignored() {
        let j = r#"{"cdiVersion":"1.0.0","kind":"example.com/dev","futureField":1,
            "devices":[{"name":"dev0","containerEdits":{"env":["A=1"],
            "deviceNodes":[{"path":"/dev/x","type":"c","major":1,"minor":3,"fileMode":438,"uid":1000,"gid":1000}],
            "additionalGids":[44],"intelRdt":{"closID":"g"}}}]}"#;
        let s = SpecFile::parse(j.as_bytes(), Format::Json).unwrap();
        let n = &s.devices[0].container_edits.device_nodes[0];
        assert_eq!(
            (n.major, n.minor, n.file_mode, n.uid),
            (Some(1), Some(3), Some(0o666), Some(1000))
        );
        assert_eq!(s.devices[0].container_edits.additional_gids, [44]);
    }

    #[test]
    fn bad_files_say_why_and_keep_their_kind() {
        let cases = [
            ("cdiVersion: 2.0.0\nkind: a.com/b\ndevices: [{name: x}]", "not one podscope reads"),
            ("cdiVersion: 0.1\nkind: a.com/b\ndevices: [{name: x}]", "not a version"),
            ("cdiVersion: 0.6.0\nkind: a.com\ndevices: [{name: x}]", "not vendor/class"),
            ("cdiVersion: 0.6.0\nkind: a.com/b\ndevices: []", "defines no device"),
            ("cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: x}, {name: x}]", "defined twice"),
            ("cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: -x}]", "does not start"),
            (
                "cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: dev/x}]}}]",
                "not an absolute path",
            ),
            (
                "cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/x, type: z}]}}]",
                "is not c, b, u or p",
            ),
            (
                "cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/x, permissions: rwx}]}}]",
                "not made of r, w and m",
            ),
            (
                "cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: x}]\ncontainerEdits: {hooks: [{hookName: prestop, path: /bin/true}]}",
                "hookName \"prestop\"",
            ),
            (
                "cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: x}]\ncontainerEdits: {env: [NOEQUALS]}",
                "not KEY=VALUE",
            ),
            (
                "cdiVersion: 0.6.0\nkind: a.com/b\ndevices: [{name: x}]\ncontainerEdits: {mounts: [{hostPath: /a/../etc, containerPath: /x}]}",
                "climbs",
            ),
        ];
        for (text, why) in cases {
            let r = SpecFile::parse(text.as_bytes(), Format::Yaml).unwrap_err();
            assert!(r.why.contains(why), "{text}: {}", r.why);
        }
        // Not a spec at all: no kind to tell.
        let r = SpecFile::parse(b"[1, 2", Format::Yaml).unwrap_err();
        assert_eq!(r.kind, None);
        // A spec whose fields are of the wrong type: its kind still known.
        let r = SpecFile::parse(
            b"{\"cdiVersion\":\"0.6.0\",\"kind\":\"a.com/b\",\"devices\":7}",
            Format::Json,
        )
        .unwrap_err();
        assert_eq!(r.kind.as_deref(), Some("a.com/b"));
    }

    #[test]
    fn an_alias_bomb_is_refused_not_expanded() {
        let mut bomb = String::from(
            "cdiVersion: 0.6.0\nkind: a.com/b\na: &a [x, x, x, x, x, x, x, x, x, x]\n",
        );
        let mut prev = 'a';
        for c in 'b'..='k' {
            bomb.push_str(&format!("{c}: &{c} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
            prev = c;
        }
        // Ten levels of ten, 10^10 names if expanded: where a field takes
        // it, the first nested list is the wrong type; where none does, it
        // is skipped unexpanded. Either way the parse returns at once.
        bomb.push_str("devices: [{name: x}]\n");
        assert!(SpecFile::parse(bomb.as_bytes(), Format::Yaml).is_ok());
        bomb.push_str("containerEdits: {env: *k}\n");
        let r = SpecFile::parse(bomb.as_bytes(), Format::Yaml).unwrap_err();
        assert!(r.why.contains("expected a string"), "{}", r.why);
    }

    #[test]
    fn only_json_and_yaml_files_are_specs() {
        assert_eq!(Format::of("nvidia.yaml"), Some(Format::Yaml));
        assert_eq!(Format::of("vendor.json"), Some(Format::Json));
        for other in [
            "spec.yml",
            "spec.json.tmp",
            ".nvidia.yaml",
            "README",
            "x.JSON",
        ] {
            assert_eq!(Format::of(other), None, "{other}");
        }
    }
}
