//! The OCI runtime-spec v1.0.2 `config.json`: the subset runc 1.1 and
//! crun 1.8 read for a Linux container, plus the two seccomp errno fields
//! (`defaultErrnoRet`, `errnoRet`) both runtimes already honour.
//!
//! Field names on the wire are the spec's, word for word. Empty lists and
//! maps, `None`s and `false` flags the spec marks optional are left out when
//! writing, so the file holds what podscope decided and nothing else; fields
//! the spec requires (`user`, `cwd`, `uid`/`gid`, `allow`, ...) are always
//! written. Reading is tolerant: a missing field is its default and an
//! unknown one is ignored, so a config.json from another writer still reads.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The spec version podscope writes.
pub const OCI_VERSION: &str = "1.0.2";

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The whole `config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    pub oci_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<Root>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linux: Option<Linux>,
    /// Programs the runtime runs around the container's life (CDI specs
    /// bring them; podscope adds none of its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Hooks>,
}

impl Spec {
    /// An empty spec of the version podscope writes.
    pub fn new() -> Spec {
        Spec {
            oci_version: OCI_VERSION.to_owned(),
            ..Spec::default()
        }
    }
}

/// The runtime's hooks, by the point in the container's life they run at
/// (runtime-spec 1.0.2 config.md#posix-platform-hooks; `prestart` is the
/// deprecated name runc and crun still run, with `createRuntime`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Hooks {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prestart: Vec<Hook>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub create_runtime: Vec<Hook>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub create_container: Vec<Hook>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub start_container: Vec<Hook>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub poststart: Vec<Hook>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub poststop: Vec<Hook>,
}

/// One hook: an absolute path, its argv (argv[0] included), its
/// environment, and the seconds it may take.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Hook {
    pub path: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
}

/// The container's process.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Process {
    #[serde(skip_serializing_if = "is_false")]
    pub terminal: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console_size: Option<ConsoleSize>,
    pub user: User,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    pub cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<LinuxCapabilities>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rlimits: Vec<PosixRlimit>,
    #[serde(skip_serializing_if = "is_false")]
    pub no_new_privileges: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apparmor_profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selinux_label: Option<String>,
}

/// The terminal's size, when `terminal` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsoleSize {
    pub height: u32,
    pub width: u32,
}

/// Who the process runs as. `uid` and `gid` are required by the spec, so
/// they are written even when 0.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_gids: Vec<u32>,
}

/// The five capability sets, as `CAP_*` names.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxCapabilities {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bounding: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub effective: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inheritable: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permitted: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ambient: Vec<String>,
}

/// One `setrlimit`: `type_` is the `RLIMIT_*` name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PosixRlimit {
    #[serde(rename = "type")]
    pub type_: String,
    pub hard: u64,
    pub soft: u64,
}

/// The root filesystem, relative to the bundle or absolute.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Root {
    pub path: String,
    #[serde(skip_serializing_if = "is_false")]
    pub readonly: bool,
}

/// One mount, made in order after the root.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Mount {
    pub destination: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Mount {
    /// Its destination's path components: mounts are made parents first.
    pub fn depth(&self) -> usize {
        self.destination
            .split('/')
            .filter(|c| !c.is_empty())
            .count()
    }
}

/// An environment entry's key (`KEY` of `KEY=VALUE`; all of it without `=`).
pub fn env_key(e: &str) -> &str {
    e.split_once('=').map_or(e, |(k, _)| k)
}

/// `KEY=VALUE` into `env`, replacing the key's entry in place if it is
/// there (Docker's rule, and CDI's).
pub fn set_env(env: &mut Vec<String>, kv: &str) {
    let key = env_key(kv);
    match env.iter_mut().find(|e| env_key(e) == key) {
        Some(e) => kv.clone_into(e),
        None => env.push(kv.to_owned()),
    }
}

/// The Linux-specific part.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Linux {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<LinuxResources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroups_path: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<LinuxNamespace>,
    /// A new user namespace's mappings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uid_mappings: Vec<LinuxIdMapping>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gid_mappings: Vec<LinuxIdMapping>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<LinuxDevice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<LinuxSeccomp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs_propagation: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub masked_paths: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readonly_paths: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intel_rdt: Option<LinuxIntelRdt>,
}

/// Intel RDT: the resctrl group the container joins and the schemata it
/// writes there (a CDI spec's `intelRdt`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LinuxIntelRdt {
    #[serde(rename = "closID", skip_serializing_if = "Option::is_none")]
    pub clos_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l3_cache_schema: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_bw_schema: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schemata: Vec<String>,
    #[serde(rename = "enableMonitoring", skip_serializing_if = "is_false")]
    pub enable_monitoring: bool,
}

/// Ids `container_id..+size` in the container are `host_id..+size` on
/// the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxIdMapping {
    #[serde(rename = "containerID")]
    pub container_id: u32,
    #[serde(rename = "hostID")]
    pub host_id: u32,
    pub size: u32,
}

/// A namespace to create (no `path`) or to join (`path`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxNamespace {
    #[serde(rename = "type")]
    pub type_: NamespaceType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// The namespace kinds, spelled as the spec spells them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum NamespaceType {
    #[default]
    Pid,
    Network,
    Mount,
    Ipc,
    Uts,
    User,
    Cgroup,
}

/// A device node the runtime creates in the container's `/dev`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LinuxDevice {
    pub path: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub major: i64,
    pub minor: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_mode: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

/// The container's cgroup limits.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LinuxResources {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<LinuxDeviceCgroup>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<LinuxMemory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<LinuxCpu>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<LinuxPids>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hugepage_limits: Vec<LinuxHugepageLimit>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unified: BTreeMap<String, String>,
}

/// One device cgroup rule; `None` major/minor/type mean "any".
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxDeviceCgroup {
    pub allow: bool,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minor: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
}

/// Memory limits in bytes (-1 = unlimited, as the spec has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxMemory {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<i64>,
}

/// CPU weight (as v1 shares), CFS quota/period and cpuset.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxCpu {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mems: Option<String>,
}

/// The pids limit (required by the spec when `pids` is present).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxPids {
    pub limit: i64,
}

/// A hugetlb limit for one page size ("2MB", "1GB").
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LinuxHugepageLimit {
    pub page_size: String,
    pub limit: u64,
}

/// A seccomp filter: `SCMP_ACT_*` actions, `SCMP_ARCH_*` architectures,
/// `SECCOMP_FILTER_FLAG_*` flags.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LinuxSeccomp {
    pub default_action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_errno_ret: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syscalls: Vec<LinuxSyscall>,
}

/// One rule: `action` for the named syscalls when every arg matches.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LinuxSyscall {
    pub names: Vec<String>,
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno_ret: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<LinuxSeccompArg>,
}

/// One argument comparison (`SCMP_CMP_*`); `value_two` is only meaningful
/// for `SCMP_CMP_MASKED_EQ` (the value the masked argument must equal).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LinuxSeccompArg {
    pub index: u32,
    pub value: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub value_two: u64,
    pub op: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn full() -> Spec {
        Spec {
            oci_version: OCI_VERSION.into(),
            process: Some(Process {
                terminal: true,
                console_size: Some(ConsoleSize {
                    height: 24,
                    width: 80,
                }),
                user: User {
                    uid: 1000,
                    gid: 1000,
                    umask: Some(0o022),
                    additional_gids: vec![1000, 50000],
                },
                args: vec!["sh".into(), "-c".into(), "true".into()],
                env: vec!["PATH=/bin".into()],
                cwd: "/".into(),
                capabilities: Some(LinuxCapabilities {
                    bounding: vec!["CAP_CHOWN".into()],
                    effective: vec!["CAP_CHOWN".into()],
                    inheritable: vec![],
                    permitted: vec!["CAP_CHOWN".into()],
                    ambient: vec![],
                }),
                rlimits: vec![PosixRlimit {
                    type_: "RLIMIT_NOFILE".into(),
                    hard: 1024,
                    soft: 1024,
                }],
                no_new_privileges: true,
                apparmor_profile: Some("cri-containerd.apparmor.d".into()),
                oom_score_adj: Some(-997),
                selinux_label: Some("system_u:system_r:container_t:s0".into()),
            }),
            root: Some(Root {
                path: "rootfs".into(),
                readonly: true,
            }),
            hostname: Some("pod".into()),
            mounts: vec![Mount {
                destination: "/proc".into(),
                type_: Some("proc".into()),
                source: Some("proc".into()),
                options: vec!["nosuid".into()],
            }],
            annotations: [(
                "io.kubernetes.cri.container-type".into(),
                "container".into(),
            )]
            .into_iter()
            .collect(),
            linux: Some(Linux {
                sysctl: [("net.ipv4.ip_forward".into(), "1".into())]
                    .into_iter()
                    .collect(),
                resources: Some(LinuxResources {
                    devices: vec![LinuxDeviceCgroup {
                        allow: false,
                        type_: None,
                        major: None,
                        minor: None,
                        access: Some("rwm".into()),
                    }],
                    memory: Some(LinuxMemory {
                        limit: Some(1 << 30),
                        reservation: None,
                        swap: Some(-1),
                    }),
                    cpu: Some(LinuxCpu {
                        shares: Some(1024),
                        quota: Some(50_000),
                        period: Some(100_000),
                        cpus: Some("0-1".into()),
                        mems: None,
                    }),
                    pids: Some(LinuxPids { limit: 100 }),
                    hugepage_limits: vec![LinuxHugepageLimit {
                        page_size: "2MB".into(),
                        limit: 0,
                    }],
                    unified: [("memory.high".into(), "max".into())].into_iter().collect(),
                }),
                cgroups_path: Some("pod.slice:podscope:abc".into()),
                namespaces: vec![
                    LinuxNamespace {
                        type_: NamespaceType::Network,
                        path: Some("/run/netns/podscope-abc".into()),
                    },
                    LinuxNamespace {
                        type_: NamespaceType::Mount,
                        path: None,
                    },
                ],
                uid_mappings: vec![LinuxIdMapping {
                    container_id: 0,
                    host_id: 65536,
                    size: 65536,
                }],
                gid_mappings: vec![LinuxIdMapping {
                    container_id: 0,
                    host_id: 65536,
                    size: 65536,
                }],
                devices: vec![LinuxDevice {
                    path: "/dev/fuse".into(),
                    type_: "c".into(),
                    major: 10,
                    minor: 229,
                    file_mode: Some(0o666),
                    uid: Some(0),
                    gid: Some(0),
                }],
                seccomp: Some(LinuxSeccomp {
                    default_action: "SCMP_ACT_ERRNO".into(),
                    default_errno_ret: Some(1),
                    architectures: vec!["SCMP_ARCH_X86_64".into()],
                    flags: vec!["SECCOMP_FILTER_FLAG_SPEC_ALLOW".into()],
                    syscalls: vec![LinuxSyscall {
                        names: vec!["clone".into()],
                        action: "SCMP_ACT_ALLOW".into(),
                        errno_ret: None,
                        args: vec![LinuxSeccompArg {
                            index: 0,
                            value: 2_114_060_288,
                            value_two: 0,
                            op: "SCMP_CMP_MASKED_EQ".into(),
                        }],
                    }],
                }),
                rootfs_propagation: Some("rslave".into()),
                masked_paths: vec!["/proc/kcore".into()],
                readonly_paths: vec!["/proc/sys".into()],
                mount_label: Some("system_u:object_r:container_file_t:s0".into()),
                intel_rdt: Some(LinuxIntelRdt {
                    clos_id: Some("gpu".into()),
                    schemata: vec!["L3:0=ff".into()],
                    ..Default::default()
                }),
            }),
            hooks: Some(Hooks {
                create_container: vec![Hook {
                    path: "/usr/bin/nvidia-cdi-hook".into(),
                    args: vec!["nvidia-cdi-hook".into(), "update-ldcache".into()],
                    env: vec![],
                    timeout: Some(5),
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn round_trip() {
        let spec = full();
        let text = serde_json::to_string(&spec).unwrap();
        let back: Spec = serde_json::from_str(&text).unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn wire_names_are_the_specs() {
        let v = serde_json::to_value(full()).unwrap();
        let p = &v["process"];
        assert_eq!(v["ociVersion"], "1.0.2");
        assert_eq!(p["consoleSize"], json!({"height": 24, "width": 80}));
        assert_eq!(p["noNewPrivileges"], true);
        assert_eq!(p["oomScoreAdj"], -997);
        assert_eq!(p["apparmorProfile"], "cri-containerd.apparmor.d");
        assert!(p["selinuxLabel"].is_string());
        assert_eq!(p["user"]["additionalGids"], json!([1000, 50000]));
        assert_eq!(p["user"]["umask"], 18);
        assert_eq!(p["rlimits"][0]["type"], "RLIMIT_NOFILE");
        assert!(p["capabilities"].get("inheritable").is_none());
        let l = &v["linux"];
        assert_eq!(l["cgroupsPath"], "pod.slice:podscope:abc");
        assert_eq!(l["maskedPaths"], json!(["/proc/kcore"]));
        assert_eq!(l["readonlyPaths"], json!(["/proc/sys"]));
        assert_eq!(l["rootfsPropagation"], "rslave");
        assert!(l["mountLabel"].is_string());
        assert_eq!(
            l["namespaces"][0],
            json!({"type": "network", "path": "/run/netns/podscope-abc"})
        );
        assert_eq!(l["namespaces"][1], json!({"type": "mount"}));
        assert_eq!(
            l["uidMappings"],
            json!([{"containerID": 0, "hostID": 65536, "size": 65536}])
        );
        assert_eq!(l["devices"][0]["fileMode"], 0o666);
        assert_eq!(l["devices"][0]["type"], "c");
        let r = &l["resources"];
        assert_eq!(r["devices"][0], json!({"allow": false, "access": "rwm"}));
        assert_eq!(
            r["hugepageLimits"][0],
            json!({"pageSize": "2MB", "limit": 0})
        );
        assert_eq!(r["memory"], json!({"limit": 1073741824, "swap": -1}));
        assert_eq!(r["pids"], json!({"limit": 100}));
        let s = &l["seccomp"];
        assert_eq!(s["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(s["defaultErrnoRet"], 1);
        // valueTwo is left out when 0.
        assert_eq!(
            s["syscalls"][0]["args"][0],
            json!({"index": 0, "value": 2114060288u64, "op": "SCMP_CMP_MASKED_EQ"})
        );
        assert_eq!(
            l["intelRdt"],
            json!({"closID": "gpu", "schemata": ["L3:0=ff"]})
        );
        assert_eq!(
            v["hooks"],
            json!({"createContainer": [{"path": "/usr/bin/nvidia-cdi-hook",
                "args": ["nvidia-cdi-hook", "update-ldcache"], "timeout": 5}]})
        );
    }

    #[test]
    fn minimal_spec_has_only_what_was_set() {
        let spec = Spec {
            process: Some(Process {
                args: vec!["sleep".into(), "1".into()],
                cwd: "/".into(),
                ..Process::default()
            }),
            root: Some(Root {
                path: "rootfs".into(),
                readonly: false,
            }),
            linux: Some(Linux::default()),
            ..Spec::new()
        };
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            v,
            json!({
                "ociVersion": "1.0.2",
                "process": {
                    "user": {"uid": 0, "gid": 0},
                    "args": ["sleep", "1"],
                    "cwd": "/"
                },
                "root": {"path": "rootfs"},
                "linux": {}
            })
        );
        let text = serde_json::to_string(&spec).unwrap();
        assert!(!text.contains("null"), "{text}");
        assert!(!text.contains("[]"), "{text}");
    }

    #[test]
    fn errno_fields_and_value_two_when_set() {
        let rule = LinuxSyscall {
            names: vec!["clone3".into()],
            action: "SCMP_ACT_ERRNO".into(),
            errno_ret: Some(38),
            args: vec![LinuxSeccompArg {
                index: 1,
                value: 0xff,
                value_two: 4,
                op: "SCMP_CMP_MASKED_EQ".into(),
            }],
        };
        let v = serde_json::to_value(&rule).unwrap();
        assert_eq!(v["errnoRet"], 38);
        assert_eq!(v["args"][0]["valueTwo"], 4);
    }

    #[test]
    fn namespace_types_are_lowercase() {
        let all = [
            (NamespaceType::Pid, "pid"),
            (NamespaceType::Network, "network"),
            (NamespaceType::Mount, "mount"),
            (NamespaceType::Ipc, "ipc"),
            (NamespaceType::Uts, "uts"),
            (NamespaceType::User, "user"),
            (NamespaceType::Cgroup, "cgroup"),
        ];
        for (t, name) in all {
            assert_eq!(serde_json::to_value(t).unwrap(), Value::from(name));
            let back: NamespaceType = serde_json::from_value(Value::from(name)).unwrap();
            assert_eq!(back, t);
        }
        assert!(serde_json::from_value::<NamespaceType>(json!("time")).is_err());
    }

    #[test]
    fn reads_tolerantly() {
        // Missing fields default, unknown ones (hooks, windows) are ignored.
        let v = json!({
            "ociVersion": "1.0.2-dev",
            "process": {"user": {"uid": 5, "gid": 6}, "cwd": "/", "commandLine": "x"},
            "hooks": {"prestart": []},
            "linux": {"namespaces": [{"type": "pid"}], "intelRdt": {}}
        });
        let spec: Spec = serde_json::from_value(v).unwrap();
        assert_eq!(spec.oci_version, "1.0.2-dev");
        let p = spec.process.unwrap();
        assert_eq!((p.user.uid, p.user.gid), (5, 6));
        assert!(p.args.is_empty() && !p.terminal);
        assert_eq!(spec.linux.unwrap().namespaces[0].type_, NamespaceType::Pid);
    }
}
