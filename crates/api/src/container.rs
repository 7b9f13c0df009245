//! The container dictionaries of `org.podscope.Sandbox1.Manager`, one Rust
//! type each, read and written as the sandbox ones are (see `sandbox`):
//! inputs deny unknown keys and default absent ones; replies require every
//! key and ignore new ones.

use crate::domain::container::{
    self as dc, ContainerState, GroupsPolicy, Profile, ProfileKind, Propagation,
};
use crate::domain::NamespaceMode;
use crate::mirror::mirror;
use serde::Deserialize;
use std::collections::BTreeMap;
use zbus::zvariant::{SerializeDict, Type};

/// A host path mounted into the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct Mount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
    /// Read-only all the way down, submounts too (`rro`): needs `readonly`
    /// and private propagation, and a handler that can.
    pub recursive_read_only: bool,
    pub propagation: Propagation,
    /// An image volume: the image (name or id) in place of `host_path`,
    /// and the directory of it to mount ("" for its root).
    pub image: String,
    pub image_sub_path: String,
    /// The host path is to take the container's SELinux file label.
    pub selinux_relabel: bool,
}

mirror!(
    Mount,
    dc::ContainerMount,
    [
        container_path,
        host_path,
        readonly,
        recursive_read_only,
        propagation,
        image,
        image_sub_path,
        selinux_relabel,
    ]
);

/// A host device in the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct Device {
    pub container_path: String,
    pub host_path: String,
    pub permissions: String,
}

mirror!(
    Device,
    dc::ContainerDevice,
    [container_path, host_path, permissions]
);

#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct HugepageLimit {
    pub page_size: String,
    pub limit: u64,
}

mirror!(HugepageLimit, dc::HugepageLimit, [page_size, limit]);

/// A container's limits: CreateContainer's `resources`,
/// UpdateContainerResources' argument, ContainerStatus' copy. Absent or
/// zero is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct Resources {
    pub cpu_period: u64,
    /// CRI sends -1 (or 0) for "no quota".
    #[serde(deserialize_with = "super::dict::negative_is_zero")]
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

mirror!(
    Resources,
    dc::ContainerResources,
    [
        cpu_period,
        cpu_quota,
        cpu_shares,
        memory_limit_in_bytes,
        memory_swap_limit_in_bytes,
        oom_score_adj,
        cpuset_cpus,
        cpuset_mems,
        unified,
    ],
    wire [hugepage_limits] => {
        hugepage_limits: hugepage_limits.into_iter().map(Into::into).collect(),
    },
    domain [hugepage_limits] => {
        hugepage_limits: hugepage_limits.into_iter().map(Into::into).collect(),
    }
);

/// CRI's security context. `masked_paths`/`readonly_paths` absent: the
/// runtime's defaults; given empty: none.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct Security {
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
    pub masked_paths: Option<Vec<String>>,
    pub readonly_paths: Option<Vec<String>>,
    pub seccomp: ProfileKind,
    pub seccomp_localhost_ref: String,
    pub apparmor: ProfileKind,
    pub apparmor_localhost_ref: String,
    pub pid_namespace: NamespaceMode,
    pub pid_target: String,
    /// SELinux labels (over the pod's); each "" for the default.
    pub selinux_user: String,
    pub selinux_role: String,
    pub selinux_type: String,
    pub selinux_level: String,
}

mirror!(
    Security,
    dc::SecurityContext,
    [
        privileged,
        capabilities_add,
        capabilities_drop,
        run_as_user,
        run_as_username,
        run_as_group,
        supplemental_groups,
        supplemental_groups_policy,
        readonly_rootfs,
        no_new_privs,
        masked_paths,
        readonly_paths,
        pid_namespace,
        pid_target,
    ],
    wire [
        seccomp,
        seccomp_localhost_ref,
        apparmor,
        apparmor_localhost_ref,
        selinux_user,
        selinux_role,
        selinux_type,
        selinux_level,
    ] => {
        seccomp: Profile { kind: seccomp, localhost_ref: seccomp_localhost_ref },
        apparmor: Profile { kind: apparmor, localhost_ref: apparmor_localhost_ref },
        selinux: crate::domain::selinux::SeLinuxOptions {
            user: selinux_user,
            role: selinux_role,
            type_: selinux_type,
            level: selinux_level,
        },
    },
    domain [seccomp, apparmor, selinux] => {
        seccomp: seccomp.kind,
        seccomp_localhost_ref: seccomp.localhost_ref,
        apparmor: apparmor.kind,
        apparmor_localhost_ref: apparmor.localhost_ref,
        selinux_user: selinux.user,
        selinux_role: selinux.role,
        selinux_type: selinux.type_,
        selinux_level: selinux.level,
    }
);

/// CreateContainer's `options`: everything but the pod, the name, the
/// attempt and the image.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct ContainerOptions {
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    /// `KEY=VALUE`, later ones replacing earlier ones.
    pub envs: Vec<String>,
    pub mounts: Vec<Mount>,
    pub devices: Vec<Device>,
    /// CDI devices by qualified name (`vendor/class=name`).
    pub cdi_devices: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Relative to the pod's log directory.
    pub log_path: String,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
    pub resources: Resources,
    pub security: Security,
}

impl ContainerOptions {
    /// The options of a config (clients that build a `ContainerConfig`
    /// first, like the CRI frontend).
    pub fn from_config(c: &dc::ContainerConfig) -> (String, u32, String, Self) {
        let c = c.clone();
        let opts = ContainerOptions {
            command: c.command,
            args: c.args,
            working_dir: c.working_dir,
            envs: c.envs,
            mounts: c.mounts.into_iter().map(Into::into).collect(),
            devices: c.devices.into_iter().map(Into::into).collect(),
            cdi_devices: c.cdi_devices,
            labels: c.labels,
            annotations: c.annotations,
            log_path: c.log_path,
            stdin: c.stdin,
            stdin_once: c.stdin_once,
            tty: c.tty,
            resources: c.resources.into(),
            security: c.security.into(),
        };
        (c.name, c.attempt, c.image, opts)
    }

    /// The config these options describe (not yet validated).
    pub fn into_config(self, name: String, attempt: u32, image: String) -> dc::ContainerConfig {
        dc::ContainerConfig {
            name,
            attempt,
            image,
            command: self.command,
            args: self.args,
            working_dir: self.working_dir,
            envs: self.envs,
            mounts: self.mounts.into_iter().map(Into::into).collect(),
            devices: self.devices.into_iter().map(Into::into).collect(),
            cdi_devices: self.cdi_devices,
            labels: self.labels,
            annotations: self.annotations,
            log_path: self.log_path,
            stdin: self.stdin,
            stdin_once: self.stdin_once,
            tty: self.tty,
            resources: self.resources.into(),
            security: self.security.into(),
        }
    }
}

/// CheckpointContainer's `options`.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointOptions {
    /// How long the dump may take, in ms; 0 for the daemon's stop timeout
    /// (`stop_timeout_ms`) and no less than a minute.
    pub timeout_ms: u64,
    /// Stop the container once its memory is dumped (CRI's checkpoint,
    /// kubelet's, leaves it running): its unit and journal stay until
    /// RemoveContainer.
    pub stop: bool,
}

/// An image that is a checkpoint archive to restore from (a CreateContainer
/// whose image is an absolute path, as CRI-O takes one): no image
/// reference begins with '/'.
pub fn is_checkpoint_archive(image: &str) -> bool {
    image.starts_with('/')
}

/// ListContainers' `filter`: every key given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct ContainerFilter {
    /// A prefix of the container's id.
    pub id: Option<String>,
    /// A prefix of its pod's id.
    pub pod_id: Option<String>,
    pub state: Option<ContainerState>,
    /// Subset match.
    pub labels: Option<BTreeMap<String, String>>,
}

/// One container as ListContainers returns it (CRI's `Container`).
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct ContainerSummary {
    pub id: String,
    pub pod_id: String,
    pub name: String,
    pub attempt: u32,
    pub state: ContainerState,
    /// µs since the epoch.
    pub created_at: u64,
    /// The image as the container was made from it, its id and its ref.
    pub image: String,
    pub image_id: String,
    pub image_ref: String,
    pub labels: BTreeMap<String, String>,
    /// Root's callers only, as for sandboxes; kubelet reads its own
    /// bookkeeping (hash, restart count) from them.
    pub annotations: BTreeMap<String, String>,
    pub annotations_hidden: bool,
    /// Bytes of annotations List left out, past its budget (`list_budget`).
    pub annotations_left_out: u64,
    pub unit: String,
    /// The unit's control group, below the hierarchy's root.
    pub cgroup: String,
    /// The container's writable layer (its overlay's upper directory).
    pub upper_dir: String,
}

/// Everything the daemon knows of one container (CRI's ContainerStatus).
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct ContainerStatus {
    pub id: String,
    pub pod_id: String,
    pub pod_name: String,
    pub name: String,
    pub attempt: u32,
    pub state: ContainerState,
    /// µs since the epoch; 0 = not yet.
    pub created_at: u64,
    pub started_at: u64,
    pub finished_at: u64,
    pub exit_code: i32,
    /// "Completed", "Error", "OOMKilled", "StartError", "Unknown".
    pub reason: String,
    pub message: String,
    pub image: String,
    pub image_id: String,
    pub image_ref: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub annotations_hidden: bool,
    pub mounts: Vec<Mount>,
    pub log_path: String,
    pub resources: Resources,
    pub unit: String,
    pub cgroup: String,
    pub upper_dir: String,
    pub main_pid: u32,
    pub runtime_handler: String,
    pub oom_killed: bool,
    pub tty: bool,
    pub stdin: bool,
    pub privileged: bool,
    /// Who its process runs as: uid, gid and every group it has (gid
    /// among them, sorted); `supplemental_groups` empty when not known (a
    /// container made before podscope recorded it).
    pub uid: u32,
    pub gid: u32,
    pub supplemental_groups: Vec<u32>,
    /// The CDI devices it was made with (qualified names) and the spec
    /// files they came from, as resolved at its Create.
    pub cdi_devices: Vec<String>,
    pub cdi_spec_files: Vec<String>,
}

impl ContainerSummary {
    pub fn of(c: &dc::Container, upper_dir: String) -> Self {
        ContainerSummary {
            id: c.id.to_string(),
            pod_id: c.pod_id.to_string(),
            name: c.config.name.clone(),
            attempt: c.config.attempt,
            state: c.state,
            created_at: c.created_at,
            image: c.config.image.clone(),
            image_id: c.image_id.clone(),
            image_ref: c.image_ref.clone(),
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
            annotations_hidden: false,
            annotations_left_out: 0,
            unit: c.unit(),
            cgroup: c.cgroup_path(),
            upper_dir,
        }
    }
}

impl ContainerStatus {
    pub fn of(c: &dc::Container, upper_dir: String) -> Self {
        ContainerStatus {
            id: c.id.to_string(),
            pod_id: c.pod_id.to_string(),
            pod_name: c.pod_name.clone(),
            name: c.config.name.clone(),
            attempt: c.config.attempt,
            state: c.state,
            created_at: c.created_at,
            started_at: c.started_at,
            finished_at: c.exit.finished_at,
            exit_code: c.exit.code,
            reason: c.exit.reason.clone(),
            message: c.exit.message.clone(),
            image: if c.image_name.is_empty() {
                c.config.image.clone()
            } else {
                c.image_name.clone()
            },
            image_id: c.image_id.clone(),
            image_ref: c.image_ref.clone(),
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
            annotations_hidden: false,
            mounts: c.config.mounts.iter().cloned().map(Mount::from).collect(),
            log_path: c.log_path.clone(),
            resources: c.resources.clone().into(),
            unit: c.unit(),
            cgroup: c.cgroup_path(),
            upper_dir,
            main_pid: c.main_pid,
            runtime_handler: c.runtime_handler.clone(),
            oom_killed: c.oom_killed,
            tty: c.config.tty,
            stdin: c.config.stdin,
            privileged: c.config.security.privileged,
            uid: c.user.as_ref().map_or(0, |u| u.uid),
            gid: c.user.as_ref().map_or(0, |u| u.gid),
            supplemental_groups: c
                .user
                .as_ref()
                .map(|u| u.supplemental_groups.clone())
                .unwrap_or_default(),
            cdi_devices: c.cdi.devices.clone(),
            cdi_spec_files: c.cdi.spec_files.clone(),
        }
    }

    pub fn without_annotations(mut self) -> Self {
        self.annotations_hidden = true;
        self.annotations.clear();
        self
    }
}

/// ExecSync's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{from_dict, to_dict};

    #[test]
    fn options_survive_the_bus_and_name_bad_keys() {
        let opts = ContainerOptions {
            command: vec!["sleep".into()],
            args: vec!["60".into()],
            envs: vec!["A=1".into()],
            mounts: vec![Mount {
                container_path: "/data".into(),
                host_path: "/srv".into(),
                readonly: true,
                recursive_read_only: true,
                propagation: Propagation::HostToContainer,
                ..Default::default()
            }],
            resources: Resources {
                memory_limit_in_bytes: 1 << 26,
                oom_score_adj: -998,
                ..Default::default()
            },
            security: Security {
                run_as_user: Some(1000),
                masked_paths: Some(vec![]),
                seccomp: ProfileKind::RuntimeDefault,
                pid_namespace: NamespaceMode::Pod,
                ..Default::default()
            },
            ..Default::default()
        };
        let d = to_dict(&opts).unwrap();
        let back: ContainerOptions = from_dict(None, &d).unwrap();
        assert_eq!(back, opts);
        let config = back.into_config("web".into(), 2, "busybox".into());
        assert_eq!(config.security.run_as_user, Some(1000));
        assert_eq!(config.security.masked_paths, Some(vec![]));
        let (name, attempt, image, again) = ContainerOptions::from_config(&config);
        assert_eq!(
            (name.as_str(), attempt, image.as_str()),
            ("web", 2, "busybox")
        );
        assert_eq!(again, opts);
    }
}
