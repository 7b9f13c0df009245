//! The CRI container messages in the daemon's terms and back:
//! CreateContainerRequest → `ContainerConfig` (its errors renamed to CRI's
//! field paths), resources, states, statuses, listings, filters and
//! stats. Pure: no call.

use crate::pressure;
use crate::stats::{self, CpuRates};
use cri_api::v1 as cri;
use podscope_api::container::{ContainerFilter, ContainerStatus, ContainerSummary};
use podscope_api::domain::container::ContainerState;
use podscope_api::domain::container::{
    ContainerConfig, ContainerDevice, ContainerMount, ContainerResources, GroupsPolicy,
    HugepageLimit, Profile, ProfileKind, Propagation, SecurityContext,
};
use podscope_api::domain::NamespaceMode;
use tonic::Status;

pub(crate) fn invalid(field: &str, why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {why}"))
}

/// CRI's `SecurityProfile`, or the deprecated profile path that older
/// kubelets (and kubelet alongside the new field) send.
fn profile(p: Option<&cri::SecurityProfile>, legacy: &str, field: &str) -> Result<Profile, Status> {
    if let Some(p) = p {
        let kind = match cri::security_profile::ProfileType::try_from(p.profile_type) {
            Ok(cri::security_profile::ProfileType::RuntimeDefault) => ProfileKind::RuntimeDefault,
            Ok(cri::security_profile::ProfileType::Unconfined) => ProfileKind::Unconfined,
            Ok(cri::security_profile::ProfileType::Localhost) => ProfileKind::Localhost,
            Err(_) => {
                return Err(invalid(
                    field,
                    format!("{} is not a profile type", p.profile_type),
                ))
            }
        };
        return Ok(Profile {
            kind,
            localhost_ref: p.localhost_ref.clone(),
        });
    }
    Ok(match legacy {
        "" => Profile::default(),
        "unconfined" => Profile {
            kind: ProfileKind::Unconfined,
            localhost_ref: String::new(),
        },
        "runtime/default" | "docker/default" => Profile {
            kind: ProfileKind::RuntimeDefault,
            localhost_ref: String::new(),
        },
        // "localhost/<absolute path>", as containerd reads it.
        l if l.starts_with("localhost/") => Profile {
            kind: ProfileKind::Localhost,
            localhost_ref: l["localhost/".len()..].to_owned(),
        },
        other => return Err(invalid(field, format!("{other:?} is not a profile"))),
    })
}

/// CRI's SELinuxOption as the daemon's (nil: nothing asked for).
pub fn selinux_of(o: Option<&cri::SeLinuxOption>) -> podscope_api::domain::selinux::SeLinuxOptions {
    o.map(|o| podscope_api::domain::selinux::SeLinuxOptions {
        user: o.user.clone(),
        role: o.role.clone(),
        type_: o.r#type.clone(),
        level: o.level.clone(),
    })
    .unwrap_or_default()
}

fn uid_of(field: &str, v: Option<&cri::Int64Value>) -> Result<Option<u32>, Status> {
    v.map(|v| {
        u32::try_from(v.value)
            .map_err(|_| invalid(field, format!("{} is not a uid or gid", v.value)))
    })
    .transpose()
}

/// CreateContainerRequest's config as the daemon's.
pub fn config_from_request(req: &cri::CreateContainerRequest) -> Result<ContainerConfig, Status> {
    let c = req
        .config
        .as_ref()
        .ok_or_else(|| invalid("config", "missing"))?;
    let meta = c
        .metadata
        .as_ref()
        .ok_or_else(|| invalid("config.metadata", "missing"))?;
    let image = c
        .image
        .as_ref()
        .map(|i| i.image.clone())
        .filter(|i| !i.is_empty())
        .ok_or_else(|| invalid("config.image.image", "must not be empty"))?;
    let linux = c.linux.clone().unwrap_or_default();
    let r = linux.resources.unwrap_or_default();
    let sc = linux.security_context.unwrap_or_default();
    const SC: &str = "config.linux.security_context";
    let caps = sc.capabilities.clone().unwrap_or_default();
    let ns = sc.namespace_options.clone().unwrap_or_default();
    let pid_namespace = match cri::NamespaceMode::try_from(ns.pid) {
        Ok(cri::NamespaceMode::Pod) => NamespaceMode::Pod,
        Ok(cri::NamespaceMode::Node) => NamespaceMode::Node,
        Ok(cri::NamespaceMode::Container) | Ok(cri::NamespaceMode::Target) => {
            NamespaceMode::Container
        }
        Err(_) => {
            return Err(invalid(
                &format!("{SC}.namespace_options.pid"),
                format!("{} is not a mode", ns.pid),
            ))
        }
    };
    let pid_target = if cri::NamespaceMode::try_from(ns.pid) == Ok(cri::NamespaceMode::Target) {
        if ns.target_id.is_empty() {
            return Err(invalid(
                &format!("{SC}.namespace_options.target_id"),
                "TARGET needs a target_id",
            ));
        }
        ns.target_id.clone()
    } else {
        String::new()
    };
    let propagation = |i: usize, v: i32| match cri::MountPropagation::try_from(v) {
        Ok(cri::MountPropagation::PropagationPrivate) => Ok(Propagation::Private),
        Ok(cri::MountPropagation::PropagationHostToContainer) => Ok(Propagation::HostToContainer),
        Ok(cri::MountPropagation::PropagationBidirectional) => Ok(Propagation::Bidirectional),
        Err(_) => Err(invalid(
            &format!("config.mounts[{i}].propagation"),
            format!("{v} is not a propagation"),
        )),
    };
    let mut mounts = Vec::new();
    for (i, m) in c.mounts.iter().enumerate() {
        mounts.push(ContainerMount {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            readonly: m.readonly,
            recursive_read_only: m.recursive_read_only,
            propagation: propagation(i, m.propagation)?,
            image: m
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            image_sub_path: m.image_sub_path.clone(),
            selinux_relabel: m.selinux_relabel,
        });
    }
    let paths = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    // kubelet 1.26 still fills the deprecated profile strings beside the
    // new fields; older clients only those.
    #[allow(deprecated)]
    let (legacy_seccomp, legacy_apparmor) =
        (sc.seccomp_profile_path.clone(), sc.apparmor_profile.clone());
    // The CRI carries an environment value as bytes (cri-api 0.36); the
    // OCI spec's env is JSON strings, so a value that is not UTF-8 is
    // refused by name rather than mangled.
    let envs = c
        .envs
        .iter()
        .map(|kv| match std::str::from_utf8(&kv.value) {
            Ok(v) => Ok(format!("{}={v}", kv.key)),
            Err(e) => Err(invalid(
                "config.envs",
                format!("the value of {:?} is not UTF-8 ({e})", kv.key),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let config = ContainerConfig {
        name: meta.name.clone(),
        attempt: meta.attempt,
        image,
        command: c.command.clone(),
        args: c.args.clone(),
        working_dir: c.working_dir.clone(),
        envs,
        mounts,
        devices: c
            .devices
            .iter()
            .map(|d| ContainerDevice {
                container_path: d.container_path.clone(),
                host_path: d.host_path.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        // kubelet fills CDI_devices from device plugins' Allocate answers
        // and from DRA's NodePrepareResources; the daemon resolves them.
        cdi_devices: c.cdi_devices.iter().map(|d| d.name.clone()).collect(),
        labels: c.labels.clone().into_iter().collect(),
        annotations: c.annotations.clone().into_iter().collect(),
        log_path: c.log_path.clone(),
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        resources: resources_from(&r)?,
        security: SecurityContext {
            privileged: sc.privileged,
            capabilities_add: caps.add_capabilities.clone(),
            capabilities_drop: caps.drop_capabilities.clone(),
            run_as_user: uid_of(&format!("{SC}.run_as_user"), sc.run_as_user.as_ref())?,
            run_as_username: sc.run_as_username.clone(),
            run_as_group: uid_of(&format!("{SC}.run_as_group"), sc.run_as_group.as_ref())?,
            supplemental_groups: sc
                .supplemental_groups
                .iter()
                .map(|g| {
                    u32::try_from(*g).map_err(|_| {
                        invalid(
                            &format!("{SC}.supplemental_groups"),
                            format!("{g} is not a gid"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            supplemental_groups_policy: match cri::SupplementalGroupsPolicy::try_from(
                sc.supplemental_groups_policy,
            ) {
                Ok(cri::SupplementalGroupsPolicy::Merge) => GroupsPolicy::Merge,
                Ok(cri::SupplementalGroupsPolicy::Strict) => GroupsPolicy::Strict,
                Err(_) => {
                    return Err(invalid(
                        &format!("{SC}.supplemental_groups_policy"),
                        format!(
                            "{} is not a policy (Merge 0, Strict 1)",
                            sc.supplemental_groups_policy
                        ),
                    ))
                }
            },
            readonly_rootfs: sc.readonly_rootfs,
            no_new_privs: sc.no_new_privs,
            masked_paths: paths(&sc.masked_paths),
            readonly_paths: paths(&sc.readonly_paths),
            seccomp: profile(
                sc.seccomp.as_ref(),
                &legacy_seccomp,
                &format!("{SC}.seccomp"),
            )?,
            apparmor: profile(
                sc.apparmor.as_ref(),
                &legacy_apparmor,
                &format!("{SC}.apparmor"),
            )?,
            pid_namespace,
            pid_target,
            selinux: selinux_of(sc.selinux_options.as_ref()),
        },
    };
    config
        .validate()
        .map_err(|e| Status::invalid_argument(format!("config.{e}")))?;
    Ok(config)
}

/// CRI's `LinuxContainerResources` as the daemon's.
pub fn resources_from(r: &cri::LinuxContainerResources) -> Result<ContainerResources, Status> {
    let non_negative = |field: &str, v: i64| {
        u64::try_from(v).or_else(|_| {
            if v == -1 {
                Ok(0)
            } else {
                Err(invalid(field, format!("{v} is negative")))
            }
        })
    };
    Ok(ContainerResources {
        cpu_period: non_negative("resources.cpu_period", r.cpu_period)?,
        cpu_quota: if r.cpu_quota < 0 {
            0
        } else {
            r.cpu_quota as u64
        },
        cpu_shares: non_negative("resources.cpu_shares", r.cpu_shares)?,
        memory_limit_in_bytes: non_negative(
            "resources.memory_limit_in_bytes",
            r.memory_limit_in_bytes,
        )?,
        memory_swap_limit_in_bytes: non_negative(
            "resources.memory_swap_limit_in_bytes",
            r.memory_swap_limit_in_bytes,
        )?,
        oom_score_adj: r.oom_score_adj,
        cpuset_cpus: r.cpuset_cpus.clone(),
        cpuset_mems: r.cpuset_mems.clone(),
        hugepage_limits: r
            .hugepage_limits
            .iter()
            .map(|h| HugepageLimit {
                page_size: h.page_size.clone(),
                limit: h.limit,
            })
            .collect(),
        unified: r.unified.clone().into_iter().collect(),
    })
}

fn resources_to(r: &podscope_api::container::Resources) -> cri::LinuxContainerResources {
    cri::LinuxContainerResources {
        cpu_period: r.cpu_period as i64,
        cpu_quota: r.cpu_quota as i64,
        cpu_shares: r.cpu_shares as i64,
        memory_limit_in_bytes: r.memory_limit_in_bytes as i64,
        memory_swap_limit_in_bytes: r.memory_swap_limit_in_bytes as i64,
        oom_score_adj: r.oom_score_adj,
        cpuset_cpus: r.cpuset_cpus.clone(),
        cpuset_mems: r.cpuset_mems.clone(),
        hugepage_limits: r
            .hugepage_limits
            .iter()
            .map(|h| cri::HugepageLimit {
                page_size: h.page_size.clone(),
                limit: h.limit,
            })
            .collect(),
        unified: r.unified.clone().into_iter().collect(),
    }
}

pub fn state_of(s: ContainerState) -> cri::ContainerState {
    match s {
        ContainerState::Created => cri::ContainerState::ContainerCreated,
        ContainerState::Running => cri::ContainerState::ContainerRunning,
        ContainerState::Exited => cri::ContainerState::ContainerExited,
        ContainerState::Unknown => cri::ContainerState::ContainerUnknown,
    }
}

fn state_from(v: i32) -> Result<ContainerState, Status> {
    match cri::ContainerState::try_from(v) {
        Ok(cri::ContainerState::ContainerCreated) => Ok(ContainerState::Created),
        Ok(cri::ContainerState::ContainerRunning) => Ok(ContainerState::Running),
        Ok(cri::ContainerState::ContainerExited) => Ok(ContainerState::Exited),
        Ok(cri::ContainerState::ContainerUnknown) => Ok(ContainerState::Unknown),
        Err(_) => Err(invalid(
            "filter.state",
            format!("{v} is not a container state"),
        )),
    }
}

fn ns(usec: u64) -> i64 {
    (usec as i64).saturating_mul(1000)
}

pub fn container(s: &ContainerSummary) -> cri::Container {
    cri::Container {
        id: s.id.clone(),
        pod_sandbox_id: s.pod_id.clone(),
        metadata: Some(cri::ContainerMetadata {
            name: s.name.clone(),
            attempt: s.attempt,
        }),
        image: Some(cri::ImageSpec {
            image: s.image.clone(),
            ..Default::default()
        }),
        // The image's id, as containerd lists it: kubelet's image garbage
        // collection takes a listed container's image_ref as the id of an
        // image in use, and removes the images whose id no container
        // names (ContainerStatus's image_ref, which kubelet shows as
        // imageID, is the repo digest).
        image_ref: s.image_id.clone(),
        state: state_of(s.state) as i32,
        created_at: ns(s.created_at),
        labels: s.labels.clone().into_iter().collect(),
        annotations: podscope_api::list_budget::shown(
            &s.annotations,
            s.annotations_left_out,
            "ContainerStatus",
        ),
        image_id: s.image_id.clone(),
    }
}

pub fn container_status(s: &ContainerStatus) -> cri::ContainerStatus {
    let propagation = |p: Propagation| match p {
        Propagation::Private => cri::MountPropagation::PropagationPrivate,
        Propagation::HostToContainer => cri::MountPropagation::PropagationHostToContainer,
        Propagation::Bidirectional => cri::MountPropagation::PropagationBidirectional,
    } as i32;
    cri::ContainerStatus {
        id: s.id.clone(),
        metadata: Some(cri::ContainerMetadata {
            name: s.name.clone(),
            attempt: s.attempt,
        }),
        state: state_of(s.state) as i32,
        created_at: ns(s.created_at),
        started_at: ns(s.started_at),
        finished_at: ns(s.finished_at),
        exit_code: s.exit_code,
        image: Some(cri::ImageSpec {
            image: s.image.clone(),
            ..Default::default()
        }),
        image_ref: s.image_ref.clone(),
        reason: s.reason.clone(),
        message: s.message.clone(),
        labels: s.labels.clone().into_iter().collect(),
        annotations: s.annotations.clone().into_iter().collect(),
        mounts: s
            .mounts
            .iter()
            .map(|m| cri::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.clone(),
                readonly: m.readonly,
                recursive_read_only: m.recursive_read_only,
                propagation: propagation(m.propagation),
                image: (!m.image.is_empty()).then(|| cri::ImageSpec {
                    image: m.image.clone(),
                    ..Default::default()
                }),
                image_sub_path: m.image_sub_path.clone(),
                ..Default::default()
            })
            .collect(),
        log_path: s.log_path.clone(),
        // Empty groups: a container made before podscope recorded who it
        // runs as (every known user has its gid among them).
        user: (!s.supplemental_groups.is_empty()).then(|| cri::ContainerUser {
            linux: Some(cri::LinuxContainerUser {
                uid: s.uid.into(),
                gid: s.gid.into(),
                supplemental_groups: s.supplemental_groups.iter().map(|&g| g.into()).collect(),
            }),
        }),
        resources: Some(cri::ContainerResources {
            linux: Some(resources_to(&s.resources)),
            windows: None,
        }),
        image_id: s.image_id.clone(),
        // The runtime's default: the image's STOPSIGNAL, else SIGTERM.
        stop_signal: cri::Signal::RuntimeDefault as i32,
    }
}

/// ListContainers' filter as the daemon's, plus what it cannot filter
/// itself.
pub fn filter_from(f: &cri::ContainerFilter) -> Result<ContainerFilter, Status> {
    let prefix = |field: &str, v: &str| -> Result<Option<String>, Status> {
        if v.is_empty() {
            return Ok(None);
        }
        podscope_api::domain::id::validate_prefix_of("container", v)
            .map_err(|e| invalid(field, e))?;
        Ok(Some(v.to_owned()))
    };
    Ok(ContainerFilter {
        id: prefix("filter.id", &f.id)?,
        pod_id: prefix("filter.pod_sandbox_id", &f.pod_sandbox_id)?,
        state: f.state.as_ref().map(|s| state_from(s.state)).transpose()?,
        labels: (!f.label_selector.is_empty())
            .then(|| f.label_selector.clone().into_iter().collect()),
    })
}

/// A container's stats from its unit's cgroup and its writable layer;
/// None when its cgroup is gone (not running).
pub fn stats_of(
    mounts: &stats::Mounts,
    rates: &CpuRates,
    s: &ContainerSummary,
    timestamp: i64,
) -> cri::ContainerStats {
    let sample = if s.state == ContainerState::Running {
        stats::read_cgroup(mounts, &s.cgroup)
    } else {
        None
    };
    let u64v = |value| Some(cri::UInt64Value { value });
    let (bytes, inodes) =
        podscope_sys::usage::usage_of(std::path::Path::new(&s.upper_dir)).unwrap_or((0, 0));
    let c = container(s);
    cri::ContainerStats {
        attributes: Some(cri::ContainerAttributes {
            id: s.id.clone(),
            metadata: c.metadata,
            labels: c.labels,
            annotations: c.annotations,
        }),
        cpu: Some(cri::CpuUsage {
            timestamp,
            usage_core_nano_seconds: sample.as_ref().and_then(|x| u64v(x.cpu_usage_ns)),
            usage_nano_cores: sample
                .as_ref()
                .and_then(|x| rates.rate(&s.id, timestamp, x.cpu_usage_ns))
                .and_then(u64v),
            psi: sample
                .as_ref()
                .and_then(|x| pressure::to_cri(x.pressure.cpu)),
        }),
        memory: Some(cri::MemoryUsage {
            timestamp,
            working_set_bytes: sample.as_ref().and_then(|x| u64v(x.working_set())),
            available_bytes: sample
                .as_ref()
                .and_then(|x| x.memory_limit.map(|l| l.saturating_sub(x.working_set())))
                .and_then(u64v),
            usage_bytes: sample.as_ref().and_then(|x| u64v(x.memory_usage)),
            rss_bytes: sample.as_ref().and_then(|x| u64v(x.rss)),
            page_faults: sample.as_ref().and_then(|x| u64v(x.page_faults)),
            major_page_faults: sample.as_ref().and_then(|x| u64v(x.major_page_faults)),
            psi: sample
                .as_ref()
                .and_then(|x| pressure::to_cri(x.pressure.memory)),
        }),
        io: sample
            .as_ref()
            .and_then(|x| pressure::io_usage(&x.pressure, timestamp)),
        writable_layer: Some(cri::FilesystemUsage {
            timestamp,
            fs_id: Some(cri::FilesystemIdentifier {
                mountpoint: s.upper_dir.clone(),
            }),
            used_bytes: u64v(bytes),
            inodes_used: u64v(inodes),
        }),
        swap: sample
            .as_ref()
            .and_then(|x| stats::swap_usage(x, timestamp)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(c: cri::ContainerConfig) -> cri::CreateContainerRequest {
        cri::CreateContainerRequest {
            pod_sandbox_id: "ab".into(),
            config: Some(c),
            sandbox_config: None,
        }
    }

    fn base() -> cri::ContainerConfig {
        cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata {
                name: "web".into(),
                attempt: 1,
            }),
            image: Some(cri::ImageSpec {
                image: "busybox".into(),
                ..Default::default()
            }),
            command: vec!["sleep".into()],
            envs: vec![cri::KeyValue {
                key: "A".into(),
                value: "1=2".into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_request_becomes_the_daemons_config() {
        let mut c = base();
        c.linux = Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: 1 << 26,
                cpu_quota: -1,
                ..Default::default()
            }),
            security_context: Some(cri::LinuxContainerSecurityContext {
                run_as_user: Some(cri::Int64Value { value: 1000 }),
                #[allow(deprecated)]
                seccomp_profile_path: "runtime/default".into(),
                namespace_options: Some(cri::NamespaceOption {
                    pid: cri::NamespaceMode::Pod as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        });
        let cfg = config_from_request(&request(c)).unwrap();
        assert_eq!(
            (cfg.name.as_str(), cfg.attempt, cfg.image.as_str()),
            ("web", 1, "busybox")
        );
        assert_eq!(cfg.envs, ["A=1=2"]);
        assert_eq!(cfg.resources.memory_limit_in_bytes, 1 << 26);
        assert_eq!(cfg.resources.cpu_quota, 0);
        assert_eq!(cfg.security.run_as_user, Some(1000));
        assert_eq!(cfg.security.seccomp.kind, ProfileKind::RuntimeDefault);
        assert_eq!(cfg.security.pid_namespace, NamespaceMode::Pod);
        assert_eq!(cfg.security.masked_paths, None);
    }

    #[test]
    fn an_env_value_that_is_not_utf8_is_refused_by_name() {
        let mut c = base();
        c.envs.push(cri::KeyValue {
            key: "BIN".into(),
            value: vec![b'a', 0xff],
        });
        let e = config_from_request(&request(c)).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message()
                .starts_with("config.envs: the value of \"BIN\" is not UTF-8"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn bad_requests_name_their_field() {
        let mut c = base();
        c.image = None;
        assert!(config_from_request(&request(c))
            .unwrap_err()
            .message()
            .starts_with("config.image.image"));
        let mut c = base();
        c.linux = Some(cri::LinuxContainerConfig {
            security_context: Some(cri::LinuxContainerSecurityContext {
                run_as_user: Some(cri::Int64Value { value: -5 }),
                ..Default::default()
            }),
            ..Default::default()
        });
        let e = config_from_request(&request(c)).unwrap_err();
        assert!(e.message().contains("run_as_user"), "{}", e.message());
        let mut c = base();
        c.mounts = vec![cri::Mount {
            container_path: "/x".into(),
            host_path: "/srv/../etc".into(),
            ..Default::default()
        }];
        let e = config_from_request(&request(c)).unwrap_err();
        assert!(
            e.message().starts_with("config.mounts[0].host_path"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn legacy_profile_paths() {
        assert_eq!(
            profile(None, "localhost//var/lib/p.json", "f")
                .unwrap()
                .localhost_ref,
            "/var/lib/p.json"
        );
        assert_eq!(
            profile(None, "docker/default", "f").unwrap().kind,
            ProfileKind::RuntimeDefault
        );
        assert!(profile(None, "weird", "f").is_err());
        // Nil is "none asked for" (AppArmor's default where it is on),
        // not Unconfined, which must be said.
        assert_eq!(profile(None, "", "f").unwrap().kind, ProfileKind::Unset);
        assert_eq!(
            profile(None, "unconfined", "f").unwrap().kind,
            ProfileKind::Unconfined
        );
        // critest's AppArmor specs: the new field wins over the old one.
        let new = cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::Localhost as i32,
            localhost_ref: "localhost/cri-validate-apparmor-test-deny-write".into(),
        };
        let p = profile(Some(&new), "localhost/non-existent-profile", "f").unwrap();
        // SELinuxOption, part by part; nil is nothing asked for.
        let o = cri::SeLinuxOption {
            user: "u".into(),
            role: "r".into(),
            r#type: "t".into(),
            level: "s0:c1".into(),
        };
        let d = selinux_of(Some(&o));
        assert_eq!(
            (
                d.user.as_str(),
                d.role.as_str(),
                d.type_.as_str(),
                d.level.as_str()
            ),
            ("u", "r", "t", "s0:c1")
        );
        assert!(selinux_of(None).is_empty());
        assert_eq!(p.kind, ProfileKind::Localhost);
        assert_eq!(
            p.localhost_ref,
            "localhost/cri-validate-apparmor-test-deny-write"
        );
    }
}
