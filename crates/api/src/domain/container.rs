//! A container's configuration as the caller gave it (CRI's
//! `ContainerConfig`, flattened), its validation, and the container record
//! a checkpoint holds. Validation stops what cannot be carried or would
//! reach outside the container (paths that climb, control characters,
//! oversized input); everything else is CRI's to decide and the OCI
//! runtime's to refuse, with its own message.

use super::cdi;
use super::config::{
    NamespaceMode, ANNOTATIONS_MAX, ANNOTATIONS_TOTAL_MAX, LABELS_MAX, LABELS_TOTAL_MAX,
};
use super::id::{ContainerId, SandboxId};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Container names: kubelet's are DNS labels; other clients (critest)
/// append UUIDs. Names never become paths or unit names.
pub const NAME_MAX: usize = 253;
const IMAGE_MAX: usize = 4096;
const PATH_MAX: usize = 4096;
/// argv and environment: the kernel's own limit on one exec is 2 MiB
/// (a quarter of the stack rlimit); a container asking for more could
/// never start.
pub const ARGV_ENV_TOTAL_MAX: usize = 2 * 1024 * 1024;
const ARGS_MAX: usize = 65_536;
const MOUNTS_MAX: usize = 1024;
const DEVICES_MAX: usize = 1024;

/// Where a container is in its life, as CRI names the states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    /// Made, not started: its unit does not exist yet.
    #[default]
    Created,
    /// Its unit runs the container's main process.
    Running,
    /// The main process ended (or never started); `exit_code` says how.
    Exited,
    /// Its end could not be learned (its unit vanished while the daemon
    /// was down and nothing recorded the exit).
    Unknown,
}

impl ContainerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerState::Created => "created",
            ContainerState::Running => "running",
            ContainerState::Exited => "exited",
            ContainerState::Unknown => "unknown",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "created" => Ok(ContainerState::Created),
            "running" => Ok(ContainerState::Running),
            "exited" => Ok(ContainerState::Exited),
            "unknown" => Ok(ContainerState::Unknown),
            _ => Err(Error::invalid(
                "state",
                format!("{s:?} is not created, running, exited or unknown"),
            )),
        }
    }
}

/// CRI's mount propagation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Propagation {
    /// rprivate: nothing crosses.
    #[default]
    Private,
    /// rslave: host mounts appear in the container.
    HostToContainer,
    /// rshared: both ways (privileged containers only, as kubelet enforces).
    Bidirectional,
}

impl Propagation {
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Private => "private",
            Propagation::HostToContainer => "hosttocontainer",
            Propagation::Bidirectional => "bidirectional",
        }
    }
}

/// CRI's `SupplementalGroupsPolicy`: which groups besides the primary one
/// a container's process gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupsPolicy {
    /// The groups the image's /etc/group gives the user, then
    /// `supplemental_groups` (the default).
    #[default]
    Merge,
    /// `supplemental_groups` only: the image has no say.
    Strict,
}

/// A seccomp or AppArmor profile choice, as CRI's `SecurityProfile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    /// None asked for (CRI's nil profile): for seccomp no profile, as
    /// kubelet means it; for AppArmor the runtime's default where AppArmor
    /// is on and podscope's default profile is loaded, as containerd and
    /// CRI-O apply theirs, else none.
    #[default]
    Unset,
    /// No profile (CRI's `Unconfined`).
    Unconfined,
    /// The runtime's default profile.
    RuntimeDefault,
    /// A profile from a file on the node (`localhost_ref`; for AppArmor
    /// the name of a loaded profile).
    Localhost,
}

impl ProfileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileKind::Unset => "unset",
            ProfileKind::Unconfined => "unconfined",
            ProfileKind::RuntimeDefault => "runtimedefault",
            ProfileKind::Localhost => "localhost",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Profile {
    pub kind: ProfileKind,
    /// The profile's path on the node (Localhost only).
    pub localhost_ref: String,
}

/// A host path mounted into the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerMount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
    /// `rro`: submounts read-only too (mount_setattr's AT_RECURSIVE).
    pub recursive_read_only: bool,
    /// An image volume: the image (a name or id in the store) mounted
    /// read-only in place of a host path, or its `image_sub_path`.
    pub image: String,
    pub image_sub_path: String,
    pub propagation: Propagation,
    /// CRI's `selinux_relabel`: the host path is to take the container's
    /// file label (recorded; relabelled only where SELinux is on: see
    /// ARCHITECTURE.md's "Not yet").
    pub selinux_relabel: bool,
}

/// A host device made available in the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerDevice {
    pub container_path: String,
    pub host_path: String,
    /// cgroup permissions: any of "r", "w", "m" ("rwm" when empty).
    pub permissions: String,
}

/// One hugepage limit (`page_size` as CRI names it: "2MB", "1GB").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HugepageLimit {
    pub page_size: String,
    pub limit: u64,
}

/// CRI's `LinuxContainerResources`. Zero or empty is "not set".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerResources {
    pub cpu_period: u64,
    pub cpu_quota: u64,
    pub cpu_shares: u64,
    pub memory_limit_in_bytes: u64,
    pub memory_swap_limit_in_bytes: u64,
    pub oom_score_adj: i64,
    pub cpuset_cpus: String,
    pub cpuset_mems: String,
    pub hugepage_limits: Vec<HugepageLimit>,
    pub unified: BTreeMap<String, String>,
}

impl ContainerResources {
    /// The pod-level resource fields, to reuse their checks and systemd
    /// conversion.
    pub fn as_pod_resources(&self) -> super::Resources {
        super::Resources {
            cpu_period: self.cpu_period,
            cpu_quota: self.cpu_quota,
            cpu_shares: self.cpu_shares,
            memory_limit_in_bytes: self.memory_limit_in_bytes,
            pids_limit: 0,
        }
    }

    pub fn validate(&self, field: &str) -> Result<()> {
        self.as_pod_resources().validate(field)?;
        if !(-1000..=1000).contains(&self.oom_score_adj) {
            return Err(Error::invalid(
                &format!("{field}.oom_score_adj"),
                format!("{} is outside -1000..=1000", self.oom_score_adj),
            ));
        }
        for (name, v) in [
            ("cpuset_cpus", &self.cpuset_cpus),
            ("cpuset_mems", &self.cpuset_mems),
        ] {
            if !v
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b',' || b == b'-')
            {
                return Err(Error::invalid(
                    &format!("{field}.{name}"),
                    format!("{v:?} is not a CPU or node list like \"0-3,5\""),
                ));
            }
        }
        for (i, h) in self.hugepage_limits.iter().enumerate() {
            if !is_page_size(&h.page_size) {
                return Err(Error::invalid(
                    &format!("{field}.hugepage_limits[{i}].page_size"),
                    format!(
                        "{:?} is not a page size like \"2MB\" or \"1GB\"",
                        h.page_size
                    ),
                ));
            }
        }
        for k in self.unified.keys() {
            if k.is_empty() || k.contains('/') || k.starts_with('.') {
                return Err(Error::invalid(
                    &format!("{field}.unified"),
                    format!("{k:?} is not a cgroup file name"),
                ));
            }
        }
        Ok(())
    }
}

fn is_page_size(s: &str) -> bool {
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[digits.len()..];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && matches!(unit, "KB" | "MB" | "GB" | "TB" | "PB" | "kB")
}

/// CRI's `LinuxContainerSecurityContext`, flattened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SecurityContext {
    pub privileged: bool,
    pub capabilities_add: Vec<String>,
    pub capabilities_drop: Vec<String>,
    pub run_as_user: Option<u32>,
    pub run_as_username: String,
    pub run_as_group: Option<u32>,
    pub supplemental_groups: Vec<u32>,
    pub supplemental_groups_policy: GroupsPolicy,
    pub readonly_rootfs: bool,
    pub no_new_privs: bool,
    /// None: the runtime's defaults; an empty list: none.
    pub masked_paths: Option<Vec<String>>,
    pub readonly_paths: Option<Vec<String>>,
    pub seccomp: Profile,
    pub apparmor: Profile,
    /// The container's PID namespace: its own (CRI's default), the pod's
    /// or the node's. `Target` (an ephemeral container joining another
    /// container's) is `pid_target`.
    pub pid_namespace: NamespaceMode,
    /// A container whose PID namespace this one joins ("" for none).
    pub pid_target: String,
    /// SELinux labels asked for (over the pod's).
    pub selinux: super::selinux::SeLinuxOptions,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerConfig {
    pub name: String,
    pub attempt: u32,
    /// The image as the caller named it (an id, a tag or a digest).
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    /// `KEY=VALUE`, in order: a later key overrides an earlier one.
    pub envs: Vec<String>,
    pub mounts: Vec<ContainerMount>,
    pub devices: Vec<ContainerDevice>,
    /// CDI devices by qualified name (`vendor/class=name`), resolved
    /// against the node's CDI spec files at Create; the
    /// `cdi.k8s.io/` annotations name more (`cdi_requested`).
    pub cdi_devices: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The log file, relative to the pod's log directory ("" for none).
    pub log_path: String,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
    pub resources: ContainerResources,
    pub security: SecurityContext,
}

/// What makes a container unique in its pod: kubelet never asks for two
/// with the same name and attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContainerKey {
    pub pod: SandboxId,
    pub name: String,
    pub attempt: u32,
}

/// Text fields: no control characters (they end up in logs, the journal and
/// JSON), at most `max` bytes.
fn check_text(field: &str, v: &str, max: usize, required: bool) -> Result<()> {
    if required && v.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if v.len() > max {
        return Err(Error::invalid(
            field,
            format!("{} bytes, more than {max}", v.len()),
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(Error::invalid(field, "contains control characters"));
    }
    Ok(())
}

/// An absolute path with no `..` component (a mount or device path: one
/// that climbs could name something other than what it seems to).
pub fn check_abs_path(field: &str, p: &str) -> Result<()> {
    check_text(field, p, PATH_MAX, true)?;
    if !p.starts_with('/') {
        return Err(Error::invalid(
            field,
            format!("{p:?} is not an absolute path"),
        ));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(Error::invalid(field, format!("{p:?} contains \"..\"")));
    }
    Ok(())
}

/// A relative path that stays below its base (the log path under the pod's
/// log directory, a sub path in an image volume).
fn check_rel_path(field: &str, p: &str, base: &str) -> Result<()> {
    check_text(field, p, PATH_MAX, false)?;
    if p.starts_with('/') {
        return Err(Error::invalid(
            field,
            format!("{p:?} must be relative to {base}"),
        ));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(Error::invalid(field, format!("{p:?} contains \"..\"")));
    }
    Ok(())
}

fn check_map(field: &str, m: &BTreeMap<String, String>, count: usize, total: usize) -> Result<()> {
    if m.len() > count {
        return Err(Error::invalid(
            field,
            format!("{} entries, more than {count}", m.len()),
        ));
    }
    let mut sum = 0;
    for (k, v) in m {
        check_text(&format!("{field} key"), k, super::config::KEY_MAX, true)?;
        if v.contains('\0') {
            return Err(Error::invalid(
                &format!("{field}[{k}]"),
                "contains a NUL byte",
            ));
        }
        sum += k.len() + v.len();
    }
    if sum > total {
        return Err(Error::invalid(
            field,
            format!("{sum} bytes in all, more than {total}"),
        ));
    }
    Ok(())
}

/// The privilege (polkit's detail `privileges`) of a checkpoint and of a
/// restore: the daemon writes, or reads, an archive at a path the caller
/// names, as root.
pub const CHECKPOINT_PRIVILEGE: &str = "checkpoint";

impl ContainerConfig {
    pub fn key(&self, pod: &SandboxId) -> ContainerKey {
        ContainerKey {
            pod: pod.clone(),
            name: self.name.clone(),
            attempt: self.attempt,
        }
    }

    /// Check everything that can be checked without the system; each error
    /// names its field as CRI spells it.
    pub fn validate(&self) -> Result<()> {
        check_text("name", &self.name, NAME_MAX, true)?;
        check_text("image", &self.image, IMAGE_MAX, true)?;
        if self.command.len() + self.args.len() > ARGS_MAX {
            return Err(Error::invalid(
                "args",
                format!("more than {ARGS_MAX} arguments"),
            ));
        }
        let mut total = 0;
        for (field, list) in [
            ("command", &self.command),
            ("args", &self.args),
            ("envs", &self.envs),
        ] {
            for (i, a) in list.iter().enumerate() {
                if a.contains('\0') {
                    return Err(Error::invalid(
                        &format!("{field}[{i}]"),
                        "contains a NUL byte",
                    ));
                }
                total += a.len() + 1;
            }
        }
        if total > ARGV_ENV_TOTAL_MAX {
            return Err(Error::invalid(
                "args",
                format!("command, args and envs hold {total} bytes, more than the {ARGV_ENV_TOTAL_MAX} one exec takes"),
            ));
        }
        for (i, e) in self.envs.iter().enumerate() {
            match e.split_once('=') {
                Some((k, _)) if !k.is_empty() => {}
                _ => {
                    return Err(Error::invalid(
                        &format!("envs[{i}]"),
                        format!("{:?} is not KEY=VALUE with a key", truncate(e, 40)),
                    ))
                }
            }
        }
        if !self.working_dir.is_empty() {
            check_abs_path("working_dir", &self.working_dir)?;
        }
        if self.mounts.len() > MOUNTS_MAX {
            return Err(Error::invalid("mounts", format!("more than {MOUNTS_MAX}")));
        }
        for (i, m) in self.mounts.iter().enumerate() {
            check_abs_path(&format!("mounts[{i}].container_path"), &m.container_path)?;
            if m.image.is_empty() {
                check_abs_path(&format!("mounts[{i}].host_path"), &m.host_path)?;
                if !m.image_sub_path.is_empty() {
                    return Err(Error::invalid(
                        &format!("mounts[{i}].image_sub_path"),
                        "a sub path is an image volume's: this mount names no image",
                    ));
                }
            } else {
                check_text(&format!("mounts[{i}].image"), &m.image, PATH_MAX, false)?;
                if !m.host_path.is_empty() {
                    return Err(Error::invalid(
                        &format!("mounts[{i}].host_path"),
                        format!(
                            "a mount is of a host path or of an image, not both (image {:?})",
                            m.image
                        ),
                    ));
                }
                if !m.image_sub_path.is_empty() {
                    check_rel_path(
                        &format!("mounts[{i}].image_sub_path"),
                        &m.image_sub_path,
                        "the image's root",
                    )?;
                }
            }
            if m.container_path == "/" {
                return Err(Error::invalid(
                    &format!("mounts[{i}].container_path"),
                    "a mount cannot replace the container's root",
                ));
            }
            // As the CRI says: rro is a read-only mount's, and a mount
            // that receives the host's new mounts would not keep them
            // read-only.
            if m.recursive_read_only && !m.readonly {
                return Err(Error::invalid(
                    &format!("mounts[{i}].recursive_read_only"),
                    "a recursive read-only mount must be readonly",
                ));
            }
            if m.recursive_read_only && m.propagation != Propagation::Private {
                return Err(Error::invalid(
                    &format!("mounts[{i}].recursive_read_only"),
                    format!(
                        "a recursive read-only mount needs private propagation, not {}",
                        m.propagation.as_str()
                    ),
                ));
            }
            if m.propagation == Propagation::Bidirectional && !self.security.privileged {
                return Err(Error::invalid(
                    &format!("mounts[{i}].propagation"),
                    "bidirectional propagation needs a privileged container",
                ));
            }
            // /proc and /sys hold the masked and read-only paths: a mount
            // there could undo them (unless privileged, where nothing is
            // masked anyway).
            if !self.security.privileged && under_kernel_fs(&m.container_path) {
                return Err(Error::invalid(
                    &format!("mounts[{i}].container_path"),
                    format!(
                        "{:?} is under /proc or /sys: only a privileged container may mount there",
                        m.container_path
                    ),
                ));
            }
        }
        if self.devices.len() > DEVICES_MAX {
            return Err(Error::invalid(
                "devices",
                format!("more than {DEVICES_MAX}"),
            ));
        }
        for (i, d) in self.devices.iter().enumerate() {
            check_abs_path(&format!("devices[{i}].container_path"), &d.container_path)?;
            check_abs_path(&format!("devices[{i}].host_path"), &d.host_path)?;
            if !d.host_path.starts_with("/dev/") {
                return Err(Error::invalid(
                    &format!("devices[{i}].host_path"),
                    format!("{:?} is not under /dev", d.host_path),
                ));
            }
            if !d.permissions.chars().all(|c| matches!(c, 'r' | 'w' | 'm')) {
                return Err(Error::invalid(
                    &format!("devices[{i}].permissions"),
                    format!("{:?} is not made of r, w and m", d.permissions),
                ));
            }
        }
        check_map("labels", &self.labels, LABELS_MAX, LABELS_TOTAL_MAX)?;
        check_map(
            "annotations",
            &self.annotations,
            ANNOTATIONS_MAX,
            ANNOTATIONS_TOTAL_MAX,
        )?;
        self.cdi_requested()?;
        check_rel_path("log_path", &self.log_path, "the pod's log directory")?;
        if self.stdin_once && !self.stdin {
            return Err(Error::invalid("stdin_once", "needs stdin"));
        }
        self.resources.validate("resources")?;
        let s = &self.security;
        for (field, caps) in [
            ("capabilities.add", &s.capabilities_add),
            ("capabilities.drop", &s.capabilities_drop),
        ] {
            for c in caps {
                if !c.eq_ignore_ascii_case("ALL") {
                    podscope_oci::caps::normalize(c).map_err(|e| Error::invalid(field, e))?;
                }
            }
        }
        check_text("run_as_username", &s.run_as_username, 256, false)?;
        if s.run_as_group.is_some() && s.run_as_user.is_none() && s.run_as_username.is_empty() {
            return Err(Error::invalid(
                "run_as_group",
                "run_as_group requires run_as_user or run_as_username",
            ));
        }
        for (field, paths) in [
            ("masked_paths", &s.masked_paths),
            ("readonly_paths", &s.readonly_paths),
        ] {
            for (i, p) in paths.iter().flatten().enumerate() {
                check_abs_path(&format!("{field}[{i}]"), p)?;
            }
        }
        for (field, p) in [("seccomp", &s.seccomp), ("apparmor", &s.apparmor)] {
            match p.kind {
                ProfileKind::Localhost if field == "seccomp" => {
                    check_abs_path(&format!("{field}.localhost_ref"), &p.localhost_ref)?
                }
                ProfileKind::Localhost => check_text(
                    &format!("{field}.localhost_ref"),
                    &p.localhost_ref,
                    PATH_MAX,
                    true,
                )?,
                _ if !p.localhost_ref.is_empty() => {
                    return Err(Error::invalid(
                        &format!("{field}.localhost_ref"),
                        format!("only for a Localhost profile, not {}", p.kind.as_str()),
                    ))
                }
                _ => {}
            }
        }
        if !s.pid_target.is_empty() {
            crate::domain::id::validate_prefix_of("container", &s.pid_target)
                .map_err(|e| e.context("pid_target"))?;
        }
        s.selinux.validate("selinux")?;
        Ok(())
    }

    /// The CDI devices asked for: `cdi_devices`, then the devices the
    /// `cdi.k8s.io/` annotations name (comma-separated, by key), each once,
    /// in that order. A name that is not `vendor/class=name` is an
    /// InvalidArgument naming it and where it was.
    pub fn cdi_requested(&self) -> Result<Vec<cdi::DeviceName>> {
        let mut out: Vec<cdi::DeviceName> = Vec::new();
        let mut add = |field: String, name: &str| -> Result<()> {
            let d = cdi::DeviceName::parse(name).map_err(|e| Error::invalid(&field, e))?;
            if !out.contains(&d) {
                out.push(d);
            }
            if out.len() > cdi::DEVICES_MAX {
                return Err(Error::invalid(
                    "cdi_devices",
                    format!("more than {} CDI devices", cdi::DEVICES_MAX),
                ));
            }
            Ok(())
        };
        for (i, name) in self.cdi_devices.iter().enumerate() {
            add(format!("cdi_devices[{i}]"), name)?;
        }
        for (key, value) in &self.annotations {
            if key.starts_with(cdi::ANNOTATION_PREFIX) {
                for name in value.split(',') {
                    add(format!("annotations[{key}]"), name.trim())?;
                }
            }
        }
        Ok(out)
    }

    /// What makes this container need the privileged polkit action: the
    /// node's devices, host paths and powers beyond the default set, fewer
    /// masked or read-only kernel paths than the default (an empty list
    /// leaves /proc/sys/kernel/core_pattern writable: a crash then runs a
    /// program as the host's root), a Localhost seccomp profile outside
    /// `seccomp_root` (read as root wherever it is).
    pub fn privileges(&self, seccomp_root: &Path) -> Vec<String> {
        let s = &self.security;
        let mut p = self.host_access();
        // A restore reads an archive the daemon opens as root, and what it
        // holds (memory, files) becomes the container's.
        if crate::container::is_checkpoint_archive(&self.image) {
            p.push(CHECKPOINT_PRIVILEGE.into());
        }
        if s.seccomp.kind == ProfileKind::Localhost
            && !Path::new(&s.seccomp.localhost_ref).starts_with(seccomp_root)
        {
            p.push(format!(
                "seccomp profile {} outside {}",
                s.seccomp.localhost_ref,
                seccomp_root.display()
            ));
        }
        p
    }

    /// The privileges every process of this container has: a call that runs
    /// one (Start, Exec, Attach) is as privileged as making it was.
    pub fn host_access(&self) -> Vec<String> {
        let s = &self.security;
        let mut p: Vec<String> = Vec::new();
        if s.privileged {
            p.push("privileged".into());
        }
        if !self.mounts.is_empty() {
            p.push("host paths".into());
        }
        if !self.devices.is_empty() {
            p.push("devices".into());
        }
        // A CDI spec's mounts and hooks are the node's, run with its rights:
        // a detail of its own, so a rule can grant devices by name without
        // host paths.
        if !self.cdi_devices.is_empty()
            || self
                .annotations
                .keys()
                .any(|k| k.starts_with(cdi::ANNOTATION_PREFIX))
        {
            p.push("CDI devices".into());
        }
        if s.capabilities_add.iter().any(|c| {
            c.eq_ignore_ascii_case("ALL")
                || podscope_oci::caps::normalize(c)
                    .map(|n| !podscope_oci::caps::DEFAULT.contains(&n.as_str()))
                    .unwrap_or(true)
        }) {
            p.push("added capabilities".into());
        }
        if s.pid_namespace == NamespaceMode::Node {
            p.push("host PID namespace".into());
        }
        let fewer = |asked: &Option<Vec<String>>, default: Vec<String>| {
            asked
                .as_ref()
                .is_some_and(|a| default.iter().any(|d| !a.contains(d)))
        };
        if fewer(&s.masked_paths, podscope_oci::defaults::masked_paths()) {
            p.push("unmasked kernel paths".into());
        }
        if fewer(&s.readonly_paths, podscope_oci::defaults::readonly_paths()) {
            p.push("writable kernel paths".into());
        }
        // An unconfined seccomp profile is not on the list: kubelet asks for
        // it by default, and capabilities still bound what it allows.
        p
    }
}

fn under_kernel_fs(p: &str) -> bool {
    ["/proc", "/sys"]
        .iter()
        .any(|top| p == *top || p.starts_with(&format!("{top}/")))
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// How the container's main process ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerExit {
    /// The exit status, or 128 + the signal that killed it (as a shell
    /// and CRI report it).
    pub code: i32,
    /// CRI's reason: "Completed", "Error", "OOMKilled", "StartError",
    /// "Unknown".
    pub reason: String,
    pub message: String,
    /// µs since the epoch.
    pub finished_at: u64,
}

/// The CDI devices a container was made with, as resolved at its Create:
/// their edits are in its config.json already (a spec file changed or
/// removed later changes nothing made); these are what its unit and its
/// status need.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CdiApplied {
    /// The qualified names, in the order applied.
    pub devices: Vec<String>,
    /// The spec files they came from.
    pub spec_files: Vec<String>,
    /// Their device nodes as the unit's `DeviceAllow=` takes them
    /// (`/dev/char/195:0`, `rw`): systemd parses the numbers, so the
    /// node's own path need not be where the daemon looks.
    pub device_allow: Vec<(String, String)>,
}

/// The record of a container: its configuration and what the daemon
/// learned while running it. This is what a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    pub id: ContainerId,
    pub pod_id: SandboxId,
    /// The pod's "namespace/name", for descriptions and the journal.
    #[serde(default)]
    pub pod_name: String,
    pub config: ContainerConfig,
    pub state: ContainerState,
    /// µs since the epoch.
    pub created_at: u64,
    pub started_at: u64,
    /// How it ended, once Exited (or Unknown).
    #[serde(default)]
    pub exit: ContainerExit,
    /// The image's id (its config digest) and the reference it was pulled
    /// by (a repo digest when the store has one).
    pub image_id: String,
    pub image_ref: String,
    /// The image's name as its status shows it: its first repository tag
    /// when it had one at creation (kubelet creates by image id; its pod
    /// status shows this name, as containerd gives it), else what the
    /// config named ("" in checkpoints older than this field).
    #[serde(default)]
    pub image_name: String,
    /// The image's layers (chain ids), bottom first: the image store keeps
    /// them while the container exists.
    #[serde(default)]
    pub layers: Vec<String>,
    /// The OCI runtime handler (from the pod's RuntimeClass).
    pub runtime_handler: String,
    /// The slice the container's unit is in: the pod's.
    pub slice: String,
    /// The full path of the CRI log file ("" for none).
    #[serde(default)]
    pub log_path: String,
    /// The main process's host PID while Running.
    #[serde(default)]
    pub main_pid: u32,
    /// The resources in force (Create's, then UpdateContainerResources').
    #[serde(default)]
    pub resources: ContainerResources,
    /// An OOM kill was seen in the container's cgroup while it ran.
    #[serde(default)]
    pub oom_killed: bool,
    /// The signal Stop sends first (the image's StopSignal, else SIGTERM).
    #[serde(default = "default_stop_signal")]
    pub stop_signal: i32,
    /// Who its process runs as, as resolved at Create (None in checkpoints
    /// older than this field).
    #[serde(default)]
    pub user: Option<ContainerUser>,
    /// The CDI devices it was made with, as resolved at Create.
    #[serde(default)]
    pub cdi: CdiApplied,
    /// Its image volumes' images, resolved at Create (their layers are
    /// held with its own).
    #[serde(default)]
    pub volumes: Vec<ImageVolume>,
    /// The checkpoint archive it was made from ("" for none): its Start is
    /// the runtime's restore from the images Create unpacked.
    #[serde(default)]
    pub restored_from: String,
}

/// An image mounted read-only as a volume (CRI's `Mount.image`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageVolume {
    /// Its place in `config.mounts`.
    pub mount: usize,
    pub image_id: String,
    /// Its layers (chain ids), bottom first.
    pub layers: Vec<String>,
}

/// The identity a container's process was given: CRI's
/// `LinuxContainerUser`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerUser {
    pub uid: u32,
    pub gid: u32,
    /// Every group the process has, `gid` among them, sorted (the spec's
    /// `additionalGids`).
    pub supplemental_groups: Vec<u32>,
}

fn default_stop_signal() -> i32 {
    libc::SIGTERM
}

impl Container {
    pub fn unit(&self) -> String {
        container_unit_name(&self.id)
    }

    /// The unit's control group below the hierarchy's root.
    pub fn cgroup_path(&self) -> String {
        format!(
            "{}/{}",
            super::slice::slice_cgroup_path(&self.slice),
            self.unit()
        )
    }

    /// Ended: Exited with `exit`. The first end stands.
    pub fn mark_exited(&mut self, exit: ContainerExit) {
        if matches!(self.state, ContainerState::Exited | ContainerState::Unknown) {
            return;
        }
        self.state = if exit.reason == REASON_UNKNOWN {
            ContainerState::Unknown
        } else {
            ContainerState::Exited
        };
        self.main_pid = 0;
        self.exit = exit;
    }
}

pub const REASON_COMPLETED: &str = "Completed";
pub const REASON_ERROR: &str = "Error";
pub const REASON_OOM_KILLED: &str = "OOMKilled";
pub const REASON_START_ERROR: &str = "StartError";
pub const REASON_UNKNOWN: &str = "Unknown";

/// CRI's reason for an exit: an OOM kill seen while it ran wins (as
/// containerd reports it, whatever the code), then the code.
pub fn exit_reason(code: i32, oom_killed: bool) -> &'static str {
    if oom_killed {
        REASON_OOM_KILLED
    } else if code == 0 {
        REASON_COMPLETED
    } else {
        REASON_ERROR
    }
}

pub fn container_unit_name(id: &ContainerId) -> String {
    format!("podscope-ctr-{id}.service")
}

/// Parse `podscope-ctr-<id>.service` back into an id.
pub fn id_from_container_unit(unit: &str) -> Option<ContainerId> {
    let id = unit
        .strip_prefix("podscope-ctr-")?
        .strip_suffix(".service")?;
    ContainerId::parse(id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn seccomp() -> &'static Path {
        Path::new("/var/lib/kubelet/seccomp")
    }

    /// Issue 41, findings 3 and 12: CreateContainer with empty masked and
    /// read-only paths left /proc/sys/kernel/core_pattern writable, and a
    /// Localhost seccomp profile was read as root from anywhere; both took
    /// plain `manage`.
    #[test]
    fn fewer_kernel_paths_hidden_or_a_profile_elsewhere_is_a_privilege() {
        let mut c = good();
        let masked = podscope_oci::defaults::masked_paths();
        let readonly = podscope_oci::defaults::readonly_paths();
        // The defaults, or more, are a plain container's.
        c.security.masked_paths = Some([masked.clone(), vec!["/proc/x".into()]].concat());
        c.security.readonly_paths = Some(readonly.clone());
        assert!(c.privileges(seccomp()).is_empty());
        c.security.masked_paths = Some(vec![]);
        c.security.readonly_paths = Some(readonly[1..].to_vec());
        assert_eq!(
            c.privileges(seccomp()),
            ["unmasked kernel paths", "writable kernel paths"]
        );
        assert_eq!(c.host_access(), c.privileges(seccomp()));
        let mut c = good();
        c.security.seccomp = Profile {
            kind: ProfileKind::Localhost,
            localhost_ref: "/var/lib/kubelet/seccomp/profiles/a.json".into(),
        };
        assert!(c.privileges(seccomp()).is_empty());
        c.security.seccomp.localhost_ref = "/etc/shadow".into();
        assert_eq!(
            c.privileges(seccomp()),
            ["seccomp profile /etc/shadow outside /var/lib/kubelet/seccomp"]
        );
        assert!(
            c.host_access().is_empty(),
            "the profile is read once, at create: a process run later has no more"
        );
    }

    fn good() -> ContainerConfig {
        ContainerConfig {
            name: "web".into(),
            image: "busybox".into(),
            command: vec!["sleep".into()],
            args: vec!["60".into()],
            envs: vec!["A=1".into(), "B=".into()],
            log_path: "web/0.log".into(),
            ..Default::default()
        }
    }

    fn err_of(c: &ContainerConfig) -> String {
        let e = c.validate().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        e.to_string()
    }

    #[test]
    fn a_plain_container_is_valid_and_unprivileged() {
        good().validate().unwrap();
        assert!(good().privileges(seccomp()).is_empty());
    }

    #[test]
    fn bad_fields_are_named() {
        let mut c = good();
        c.name = String::new();
        assert!(err_of(&c).starts_with("name:"));
        let mut c = good();
        c.image = String::new();
        assert!(err_of(&c).starts_with("image:"));
        let mut c = good();
        c.envs.push("=x".into());
        assert!(err_of(&c).starts_with("envs[2]:"));
        let mut c = good();
        c.log_path = "../../etc/passwd".into();
        assert!(err_of(&c).starts_with("log_path:"));
        let mut c = good();
        c.log_path = "/var/log/x".into();
        assert!(err_of(&c).starts_with("log_path:"));
        let mut c = good();
        c.working_dir = "relative".into();
        assert!(err_of(&c).starts_with("working_dir:"));
        let mut c = good();
        c.args = vec!["a\0b".into()];
        assert!(err_of(&c).starts_with("args[0]:"));
        let mut c = good();
        c.stdin_once = true;
        assert!(err_of(&c).starts_with("stdin_once:"));
    }

    #[test]
    fn mounts_cannot_climb_or_hide_masked_paths() {
        let mount = |cp: &str, hp: &str| ContainerMount {
            container_path: cp.into(),
            host_path: hp.into(),
            ..Default::default()
        };
        let mut c = good();
        c.mounts = vec![mount("/data", "/srv/../etc")];
        assert!(err_of(&c).starts_with("mounts[0].host_path:"));
        c.mounts = vec![mount("/data/../../x", "/srv")];
        assert!(err_of(&c).starts_with("mounts[0].container_path:"));
        c.mounts = vec![mount("/", "/srv")];
        assert!(err_of(&c).contains("root"));
        c.mounts = vec![mount("/proc/kcore", "/srv/x")];
        assert!(err_of(&c).contains("privileged"));
        c.security.privileged = true;
        c.validate().unwrap();
        c.security.privileged = false;
        c.mounts = vec![ContainerMount {
            propagation: Propagation::Bidirectional,
            ..mount("/data", "/srv")
        }];
        assert!(err_of(&c).contains("privileged"));
        c.mounts[0].propagation = Propagation::HostToContainer;
        c.validate().unwrap();
        assert_eq!(c.privileges(seccomp()), vec!["host paths"]);
    }

    #[test]
    fn an_image_volume_names_an_image_not_a_host_path() {
        let mut c = good();
        c.mounts = vec![ContainerMount {
            container_path: "/data".into(),
            image: "registry.local/data:1".into(),
            image_sub_path: "srv/www".into(),
            ..Default::default()
        }];
        c.validate().unwrap();
        c.mounts[0].image_sub_path = "../../etc".into();
        assert_eq!(
            err_of(&c),
            "mounts[0].image_sub_path: \"../../etc\" contains \"..\""
        );
        c.mounts[0].image_sub_path = "/srv".into();
        assert!(err_of(&c).contains("must be relative to the image's root"));
        c.mounts[0].image_sub_path = String::new();
        c.mounts[0].host_path = "/srv".into();
        assert!(
            err_of(&c).starts_with("mounts[0].host_path: a mount is of a host path or of an image")
        );
        c.mounts[0].image = String::new();
        c.mounts[0].image_sub_path = "x".into();
        assert!(err_of(&c).starts_with("mounts[0].image_sub_path: a sub path is an image volume's"));
    }

    #[test]
    fn a_recursive_read_only_mount_is_read_only_and_private() {
        let mut c = good();
        c.mounts = vec![ContainerMount {
            container_path: "/data".into(),
            host_path: "/srv".into(),
            recursive_read_only: true,
            ..Default::default()
        }];
        assert_eq!(
            err_of(&c),
            "mounts[0].recursive_read_only: a recursive read-only mount must be readonly"
        );
        c.mounts[0].readonly = true;
        c.validate().unwrap();
        c.mounts[0].propagation = Propagation::HostToContainer;
        assert_eq!(
            err_of(&c),
            "mounts[0].recursive_read_only: a recursive read-only mount needs private propagation, not hosttocontainer"
        );
    }

    #[test]
    fn security_checks() {
        let mut c = good();
        c.security.run_as_group = Some(5);
        assert!(err_of(&c).contains("requires run_as_user"));
        c.security.run_as_user = Some(1000);
        c.validate().unwrap();
        c.security.capabilities_add = vec!["NOT_A_CAP".into()];
        assert!(err_of(&c).starts_with("capabilities.add:"));
        c.security.capabilities_add = vec!["sys_admin".into()];
        c.validate().unwrap();
        assert_eq!(c.privileges(seccomp()), vec!["added capabilities"]);
        c.security.capabilities_add = vec!["CHOWN".into()];
        assert!(
            c.privileges(seccomp()).is_empty(),
            "a default capability adds nothing"
        );
        c.security.seccomp = Profile {
            kind: ProfileKind::Localhost,
            localhost_ref: "profile.json".into(),
        };
        assert!(err_of(&c).starts_with("seccomp.localhost_ref:"));
        c.security.seccomp.localhost_ref = "/var/lib/kubelet/seccomp/p.json".into();
        c.validate().unwrap();
    }

    #[test]
    fn cdi_devices_come_from_the_field_and_the_annotations_once_each() {
        let mut c = good();
        assert!(c.cdi_requested().unwrap().is_empty());
        assert!(c.privileges(seccomp()).is_empty());
        c.cdi_devices = vec!["example.com/dev=dev0".into()];
        c.annotations.insert(
            "cdi.k8s.io/example-plugin_abc".into(),
            "example.com/dev=dev1, example.com/dev=dev0".into(),
        );
        c.annotations.insert("cdi.k8s.io".into(), "not ours".into());
        let names: Vec<String> = c
            .cdi_requested()
            .unwrap()
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(names, ["example.com/dev=dev0", "example.com/dev=dev1"]);
        c.validate().unwrap();
        assert_eq!(c.privileges(seccomp()), vec!["CDI devices"]);

        c.cdi_devices = vec!["example.com/dev=dev0".into(), "gpu0".into()];
        let e = err_of(&c);
        assert!(
            e.starts_with("cdi_devices[1]:") && e.contains("\"gpu0\""),
            "{e}"
        );
        c.cdi_devices.clear();
        c.annotations
            .insert("cdi.k8s.io/p_1".into(), "example.com/dev=".into());
        assert!(err_of(&c).starts_with("annotations[cdi.k8s.io/p_1]:"));
        c.annotations.remove("cdi.k8s.io/p_1");
        c.cdi_devices = (0..=cdi::DEVICES_MAX)
            .map(|i| format!("example.com/dev=d{i}"))
            .collect();
        assert!(err_of(&c).contains("more than 128 CDI devices"));
    }

    #[test]
    fn devices_come_from_dev() {
        let mut c = good();
        c.devices = vec![ContainerDevice {
            container_path: "/dev/xda".into(),
            host_path: "/etc/passwd".into(),
            permissions: "rw".into(),
        }];
        assert!(err_of(&c).starts_with("devices[0].host_path:"));
        c.devices[0].host_path = "/dev/null".into();
        c.devices[0].permissions = "rwx".into();
        assert!(err_of(&c).starts_with("devices[0].permissions:"));
        c.devices[0].permissions = "rw".into();
        c.validate().unwrap();
    }

    #[test]
    fn resources_are_checked() {
        let mut c = good();
        c.resources.oom_score_adj = 2000;
        assert!(err_of(&c).starts_with("resources.oom_score_adj:"));
        c.resources.oom_score_adj = 0;
        c.resources.cpuset_cpus = "0-1;rm".into();
        assert!(err_of(&c).starts_with("resources.cpuset_cpus:"));
        c.resources.cpuset_cpus = "0-1,3".into();
        c.resources.hugepage_limits = vec![HugepageLimit {
            page_size: "2MB".into(),
            limit: 1 << 21,
        }];
        c.validate().unwrap();
        c.resources.hugepage_limits[0].page_size = "2 megs".into();
        assert!(err_of(&c).contains("page size"));
    }

    #[test]
    fn exits_and_names() {
        assert_eq!(exit_reason(0, false), "Completed");
        assert_eq!(exit_reason(137, false), "Error");
        assert_eq!(exit_reason(137, true), "OOMKilled");
        let id = ContainerId::random();
        let unit = container_unit_name(&id);
        assert_eq!(id_from_container_unit(&unit), Some(id));
        assert_eq!(id_from_container_unit("podscope-netns@x.service"), None);
    }
}
