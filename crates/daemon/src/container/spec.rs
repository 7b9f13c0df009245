//! The OCI runtime spec (config.json) of a container, from its CRI config,
//! its image's config and its pod. Pure: the caller reads what it needs
//! from the system (the image's passwd, a Localhost seccomp profile, host
//! devices) and passes it in.
//!
//! The rules are CRI's, as containerd 1.6 applies them for runc, so a pod
//! behaves the same on either runtime: the command merged with the image's
//! Entrypoint and Cmd, the environment overridden by key, the pod's
//! namespaces joined by path, the pod's /etc files and /dev/shm bound in,
//! the default capabilities, masked and read-only paths unless privileged.

use crate::image::manifest::RunConfig;
use podscope_api::domain::container::{ContainerConfig, ProfileKind, Propagation};
use podscope_api::domain::{NamespaceMode, UserNamespace};
use podscope_api::error::{Error, Result};
use podscope_config::RuntimeKind;
use podscope_oci::spec::{
    env_key, set_env, Linux, LinuxCapabilities, LinuxDevice, LinuxDeviceCgroup, LinuxIdMapping,
    LinuxNamespace, LinuxResources, LinuxSeccomp, Mount, NamespaceType, Process, Root, Spec, User,
    OCI_VERSION,
};
use podscope_oci::{caps, defaults, user::Resolved};

/// The container's root directory, relative to its bundle.
pub const ROOTFS: &str = "rootfs";

/// What the container takes from its pod.
#[derive(Debug, Clone, Default)]
pub struct PodView {
    /// The pod's network namespace (None: the host's).
    pub netns_path: Option<String>,
    /// The pod's init: its IPC, UTS (and PID) namespaces are joined by
    /// `/proc/<pid>/ns/*`.
    pub init_pid: u32,
    pub host_ipc: bool,
    pub pid_mode: NamespaceMode,
    pub hostname: String,
    /// Files under the pod's run directory, bound over the container's.
    pub hostname_file: String,
    pub resolv_conf: String,
    pub hosts: String,
    /// The pod's /dev/shm (a tmpfs); the host's for a host-IPC pod.
    pub shm: String,
    /// The pod's user namespace (None: the node's).
    pub user_namespace: Option<UserNamespace>,
}

/// Everything `build` needs beyond the container's config.
pub struct Input<'a> {
    pub config: &'a ContainerConfig,
    pub image: &'a RunConfig,
    /// The container's capabilities (CRI's add and drop applied, within
    /// what the node has: `capabilities`).
    pub capabilities: Vec<String>,
    pub user: Resolved,
    pub pod: &'a PodView,
    pub runtime: RuntimeKind,
    /// The unit's control group, for runc's `cgroupsPath`.
    pub cgroup_path: String,
    /// The container's seccomp filter: None for unconfined.
    pub seccomp: Option<LinuxSeccomp>,
    /// The AppArmor profile its processes are confined by (`apparmor::choose`):
    /// None for none.
    pub apparmor_profile: Option<String>,
    /// The SELinux (process, mount) labels, where SELinux is on
    /// (`SeLinuxOptions::labels`): None for none.
    pub selinux: Option<(String, String)>,
    /// The host PID of the container whose PID namespace this one joins.
    pub pid_target: Option<u32>,
    /// The host's devices, for a privileged container (all of them, as
    /// containerd gives it).
    pub host_devices: Vec<LinuxDevice>,
    /// Devices CRI asked for: (host device as found, container path,
    /// permissions).
    pub devices: Vec<(LinuxDevice, String, String)>,
    /// The lowest oom_score_adj the runtime may set (`oom_score_floor`).
    pub oom_score_floor: Option<i32>,
    /// The node's cgroups are v2: a non-privileged container gets a
    /// cgroup namespace of its own.
    pub cgroup_v2: bool,
    /// Where the image volumes are mounted (`rootfs::Dirs::volumes`): the
    /// i-th mount's at `<volumes>/<i>`.
    pub volumes: std::path::PathBuf,
}

/// The argv: CRI's command and args merged with the image's Entrypoint and
/// Cmd (Docker's rules, as containerd applies them): a command replaces
/// the Entrypoint and drops the Cmd; args alone replace the Cmd.
pub fn argv(config: &ContainerConfig, image: &RunConfig) -> Result<Vec<String>> {
    let mut command = config.command.clone();
    let mut args = config.args.clone();
    if command.is_empty() {
        if args.is_empty() {
            args = image.cmd.clone();
        }
        // `[""]` is how an image says "no entrypoint".
        if !(image.entrypoint.len() == 1 && image.entrypoint[0].is_empty()) {
            command = image.entrypoint.clone();
        }
    }
    command.extend(args);
    if command.is_empty() {
        return Err(Error::invalid(
            "command",
            "no command: neither the container config nor the image gives one",
        ));
    }
    Ok(command)
}

/// The environment: the image's, then the config's, a later key replacing
/// an earlier one in place; PATH and HOSTNAME when missing.
pub fn env(config: &ContainerConfig, image: &RunConfig, hostname: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in image.env.iter().chain(&config.envs) {
        set_env(&mut out, e);
    }
    if !out.iter().any(|e| env_key(e) == "PATH") {
        out.insert(0, defaults::DEFAULT_PATH_ENV.to_owned());
    }
    if !hostname.is_empty() && !out.iter().any(|e| env_key(e) == "HOSTNAME") {
        out.push(format!("HOSTNAME={hostname}"));
    }
    out
}

fn bind(destination: &str, source: &str, readonly: bool, propagation: &str) -> Mount {
    Mount {
        destination: destination.to_owned(),
        type_: Some("bind".into()),
        source: Some(source.to_owned()),
        options: vec![
            "rbind".into(),
            propagation.to_owned(),
            if readonly { "ro" } else { "rw" }.into(),
        ],
    }
}

pub fn build(input: &Input<'_>) -> Result<Spec> {
    let c = input.config;
    let s = &c.security;
    let pod = input.pod;
    let privileged = s.privileged;

    let capabilities = input.capabilities.clone();
    let process = Process {
        terminal: c.tty,
        user: User {
            uid: input.user.uid,
            gid: input.user.gid,
            additional_gids: input.user.spec_additional_gids(),
            ..Default::default()
        },
        args: argv(c, input.image)?,
        env: env(c, input.image, &pod.hostname),
        cwd: match (&c.working_dir, &input.image.working_dir) {
            (w, _) if !w.is_empty() => w.clone(),
            (_, Some(w)) if !w.is_empty() => w.clone(),
            _ => "/".into(),
        },
        capabilities: Some(LinuxCapabilities {
            bounding: capabilities.clone(),
            effective: capabilities.clone(),
            permitted: capabilities,
            ..Default::default()
        }),
        no_new_privileges: s.no_new_privs,
        apparmor_profile: input.apparmor_profile.clone(),
        selinux_label: input.selinux.as_ref().map(|(p, _)| p.clone()),
        oom_score_adj: (c.resources.oom_score_adj != 0).then(|| {
            let adj = c.resources.oom_score_adj as i32;
            input.oom_score_floor.map_or(adj, |floor| adj.max(floor))
        }),
        ..Default::default()
    };

    // Mounts: the defaults, the pod's files and shm, then CRI's, parents
    // first. A CRI mount replaces a default or pod mount at the same place
    // (kubelet binds its own /etc/hosts).
    let mut mounts = defaults::mounts();
    if privileged {
        // A privileged container's /sys is writable, as the node's.
        for m in &mut mounts {
            if m.destination == "/sys" || m.destination == "/sys/fs/cgroup" {
                m.options.retain(|o| o != "ro");
                m.options.push("rw".into());
            }
        }
    }
    let pod_file = |dest: &str, src: &str| {
        (!src.is_empty()).then(|| bind(dest, src, s.readonly_rootfs, "rprivate"))
    };
    mounts.extend(
        [
            pod_file("/etc/hostname", &pod.hostname_file),
            pod_file("/etc/resolv.conf", &pod.resolv_conf),
            pod_file("/etc/hosts", &pod.hosts),
        ]
        .into_iter()
        .flatten(),
    );
    if !pod.shm.is_empty() {
        mounts.push(Mount {
            options: vec![
                "rbind".into(),
                "rprivate".into(),
                "rw".into(),
                "nosuid".into(),
                "nodev".into(),
                "noexec".into(),
            ],
            ..bind("/dev/shm", &pod.shm, false, "rprivate")
        });
    }
    let mut rootfs_propagation = None;
    let mut cri_mounts: Vec<Mount> = Vec::new();
    for (i, m) in c.mounts.iter().enumerate() {
        if !m.image.is_empty() {
            // An image volume: read-only and nothing in it runs, as
            // Kubernetes says of them.
            let dir = input.volumes.join(i.to_string()).join(&m.image_sub_path);
            let mut mount = bind(
                &m.container_path,
                &dir.display().to_string(),
                true,
                "rprivate",
            );
            mount
                .options
                .extend(["nosuid", "nodev", "noexec"].map(String::from));
            cri_mounts.push(mount);
            continue;
        }
        let propagation = match m.propagation {
            Propagation::Private => "rprivate",
            Propagation::HostToContainer => {
                if rootfs_propagation.is_none() {
                    rootfs_propagation = Some("rslave".to_owned());
                }
                "rslave"
            }
            Propagation::Bidirectional => {
                rootfs_propagation = Some("rshared".to_owned());
                "rshared"
            }
        };
        let mut mount = bind(&m.container_path, &m.host_path, m.readonly, propagation);
        if m.recursive_read_only {
            // The runtime makes the whole tree read-only after the bind
            // (mount_setattr with AT_RECURSIVE); "ro" stays for the top.
            mount.options.push("rro".into());
        }
        cri_mounts.push(mount);
    }
    mounts.retain(|m| !cri_mounts.iter().any(|c| c.destination == m.destination));
    cri_mounts.sort_by_key(Mount::depth);
    mounts.extend(cri_mounts);
    if pod.user_namespace.is_some() {
        // In a pod's user namespace, what the node binds in is idmapped
        // through it (the runtime uses the container's mapping): root's
        // files on the node are root's in the container, and what its root
        // writes there is root's on the node, as without one. Image
        // volumes are overlays of idmapped layers already (overlayfs
        // cannot be idmapped again).
        let image_volumes: Vec<&str> = c
            .mounts
            .iter()
            .filter(|m| !m.image.is_empty())
            .map(|m| m.container_path.as_str())
            .collect();
        for m in &mut mounts {
            if m.type_.as_deref() == Some("bind")
                && !image_volumes.contains(&m.destination.as_str())
            {
                m.options.push("idmap".into());
            }
        }
    }

    // Namespaces: a mount namespace of its own; the pod's network, IPC and
    // UTS; PID as CRI says.
    let ns = |type_, path: Option<String>| LinuxNamespace { type_, path };
    let init_ns = |what: &str| Some(format!("/proc/{}/ns/{what}", pod.init_pid));
    let mut namespaces = vec![ns(NamespaceType::Mount, None)];
    // The pod's user namespace: made by the runtime for each container
    // with the pod's mapping (the namespaces it joins stay the node's).
    let (uid_mappings, gid_mappings) = match &pod.user_namespace {
        Some(u) => {
            namespaces.push(ns(NamespaceType::User, None));
            let oci = |v: &[podscope_api::domain::IdMapping]| {
                v.iter()
                    .map(|m| LinuxIdMapping {
                        container_id: m.container_id,
                        host_id: m.host_id,
                        size: m.length,
                    })
                    .collect::<Vec<_>>()
            };
            (oci(&u.uids), oci(&u.gids))
        }
        None => (Vec::new(), Vec::new()),
    };
    if let Some(p) = &pod.netns_path {
        namespaces.push(ns(NamespaceType::Network, Some(p.clone())));
    }
    if !pod.host_ipc {
        namespaces.push(ns(NamespaceType::Ipc, init_ns("ipc")));
    }
    namespaces.push(ns(NamespaceType::Uts, init_ns("uts")));
    // On cgroup v2, its own cgroup namespace, rooted at its unit's cgroup
    // (/proc/self/cgroup reads "0::/"), as containerd and CRI-O give
    // every non-privileged container (KEP-2254); privileged, the host's.
    // On v1 the host's, as theirs.
    if input.cgroup_v2 && !privileged {
        namespaces.push(ns(NamespaceType::Cgroup, None));
    }
    match (input.pid_target, s.pid_namespace) {
        (Some(pid), _) => {
            namespaces.push(ns(NamespaceType::Pid, Some(format!("/proc/{pid}/ns/pid"))))
        }
        (None, NamespaceMode::Node) => {}
        // The pod's shared namespace, if it has one: a pod without one
        // has its init in the host's, which a container asking for the
        // pod's must not end up in. It gets one of its own.
        (None, NamespaceMode::Pod) if pod.pid_mode == NamespaceMode::Pod => {
            namespaces.push(ns(NamespaceType::Pid, init_ns("pid")))
        }
        (None, NamespaceMode::Pod) => namespaces.push(ns(NamespaceType::Pid, None)),
        (None, NamespaceMode::Container) => namespaces.push(ns(NamespaceType::Pid, None)),
    }

    // Devices: the host's for a privileged container, then CRI's; the
    // cgroup allow list (enforced by the unit's DevicePolicy=, and by runc
    // too) matches.
    let mut devices = if privileged {
        input.host_devices.clone()
    } else {
        Vec::new()
    };
    let mut allowed = defaults::devices_allowed();
    if privileged {
        allowed = vec![LinuxDeviceCgroup {
            allow: true,
            access: Some("rwm".into()),
            ..Default::default()
        }];
    }
    for (dev, path, perms) in &input.devices {
        let perms = if perms.is_empty() {
            "rwm"
        } else {
            perms.as_str()
        };
        devices.retain(|d| d.path != *path);
        devices.push(LinuxDevice {
            path: path.clone(),
            ..dev.clone()
        });
        if !privileged {
            allowed.push(LinuxDeviceCgroup {
                allow: true,
                type_: Some(dev.type_.clone()),
                major: Some(dev.major),
                minor: Some(dev.minor),
                access: Some(perms.to_owned()),
            });
        }
    }

    let (masked_paths, readonly_paths) = if privileged {
        (Vec::new(), Vec::new())
    } else {
        (
            s.masked_paths
                .clone()
                .unwrap_or_else(defaults::masked_paths),
            s.readonly_paths
                .clone()
                .unwrap_or_else(defaults::readonly_paths),
        )
    };

    let (cgroups_path, resources) = match input.runtime {
        // crun runs with its cgroup manager off: systemd owns the cgroup
        // and enforces devices through the unit.
        RuntimeKind::Crun => (None, None),
        // runc joins the unit's cgroup by path; it writes the devices list
        // it is given there, so it gets the unit's.
        RuntimeKind::Runc => (
            Some(input.cgroup_path.clone()),
            Some(LinuxResources {
                devices: allowed.clone(),
                ..Default::default()
            }),
        ),
    };

    let mut annotations = std::collections::BTreeMap::new();
    annotations.insert(
        "io.kubernetes.cri.container-name".to_owned(),
        c.name.clone(),
    );
    Ok(Spec {
        oci_version: OCI_VERSION.into(),
        process: Some(process),
        root: Some(Root {
            path: ROOTFS.into(),
            readonly: s.readonly_rootfs,
        }),
        hostname: None,
        mounts,
        annotations,
        linux: Some(Linux {
            resources,
            cgroups_path,
            namespaces,
            uid_mappings,
            gid_mappings,
            devices,
            seccomp: if privileged {
                None
            } else {
                input.seccomp.clone()
            },
            rootfs_propagation,
            masked_paths,
            readonly_paths,
            mount_label: input.selinux.as_ref().map(|(_, m)| m.clone()),
            ..Default::default()
        }),
        hooks: None,
    })
}

/// The container's capabilities: CRI's add and drop (containerd's rules),
/// kept to `host` (the node's bounding set; "ALL" is what the node has,
/// as containerd takes it, not every name the kernel knows).
pub fn capabilities(config: &ContainerConfig, host: &[String]) -> Result<Vec<String>> {
    let s = &config.security;
    let mut v = caps::effective(&s.capabilities_add, &s.capabilities_drop, s.privileged)
        .map_err(|e| Error::invalid("capabilities", e))?;
    v.retain(|c| host.contains(c));
    Ok(v)
}

/// The capabilities in a bounding set mask (`CapBnd` in /proc/<pid>/status).
pub fn caps_in_mask(mask: u64) -> Vec<String> {
    caps::ALL
        .iter()
        .filter(|c| caps::number(c).is_some_and(|n| n < 64 && mask & (1 << n) != 0))
        .map(|c| (*c).to_owned())
        .collect()
}

/// The bounding set of `pid` (PID 1's is what units get).
pub fn bounding_set(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// The lowest oom_score_adj a container's process may be given, from the
/// node's bounding set (PID 1's) and PID 1's own score: without
/// CAP_SYS_RESOURCE no process may lower its score below what it
/// inherited, and a unit's process inherits PID 1's, so the runtime's
/// write of a lower one (kubelet asks -997 for a Guaranteed pod's
/// containers) would fail the container's start. None when the node has
/// the capability. containerd's `restrict_oom_score_adj`, decided from the
/// node rather than by a setting.
pub fn oom_score_floor(bounding: u64, pid1_oom_score_adj: i32) -> Option<i32> {
    const CAP_SYS_RESOURCE: u32 = 24;
    (bounding & (1 << CAP_SYS_RESOURCE) == 0).then_some(pid1_oom_score_adj)
}

/// Whether `build` needs a seccomp profile loaded: the kind asked for, for
/// an unprivileged container (privileged ones run unconfined).
pub fn seccomp_kind(config: &ContainerConfig) -> Option<ProfileKind> {
    let s = &config.security;
    (!s.privileged && !matches!(s.seccomp.kind, ProfileKind::Unconfined | ProfileKind::Unset))
        .then_some(s.seccomp.kind)
}

/// A signal by name ("SIGQUIT", "QUIT", any case) or number.
pub fn parse_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let name = s.to_ascii_uppercase();
    let name = name.strip_prefix("SIG").unwrap_or(&name).to_owned();
    let table: &[(&str, i32)] = &[
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("ILL", libc::SIGILL),
        ("TRAP", libc::SIGTRAP),
        ("ABRT", libc::SIGABRT),
        ("BUS", libc::SIGBUS),
        ("FPE", libc::SIGFPE),
        ("KILL", libc::SIGKILL),
        ("USR1", libc::SIGUSR1),
        ("SEGV", libc::SIGSEGV),
        ("USR2", libc::SIGUSR2),
        ("PIPE", libc::SIGPIPE),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
        ("STKFLT", libc::SIGSTKFLT),
        ("CHLD", libc::SIGCHLD),
        ("CONT", libc::SIGCONT),
        ("STOP", libc::SIGSTOP),
        ("TSTP", libc::SIGTSTP),
        ("TTIN", libc::SIGTTIN),
        ("TTOU", libc::SIGTTOU),
        ("URG", libc::SIGURG),
        ("XCPU", libc::SIGXCPU),
        ("XFSZ", libc::SIGXFSZ),
        ("VTALRM", libc::SIGVTALRM),
        ("PROF", libc::SIGPROF),
        ("WINCH", libc::SIGWINCH),
        ("IO", libc::SIGIO),
        ("PWR", libc::SIGPWR),
        ("SYS", libc::SIGSYS),
    ];
    if let Some((_, n)) = table.iter().find(|(k, _)| *k == name) {
        return Some(*n);
    }
    // SIGRTMIN+n, as Docker accepts them.
    let rt = name.strip_prefix("RTMIN+")?.parse::<i32>().ok()?;
    let n = libc::SIGRTMIN() + rt;
    (n <= libc::SIGRTMAX()).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::domain::container::{ContainerMount, Profile};

    fn image() -> RunConfig {
        RunConfig {
            entrypoint: vec!["/entry".into()],
            cmd: vec!["serve".into(), "--port=80".into()],
            env: vec!["PATH=/bin".into(), "A=image".into()],
            ..Default::default()
        }
    }

    fn config() -> ContainerConfig {
        ContainerConfig {
            name: "web".into(),
            image: "busybox".into(),
            ..Default::default()
        }
    }

    fn pod() -> PodView {
        PodView {
            netns_path: Some("/run/netns/podscope-x".into()),
            init_pid: 42,
            pid_mode: NamespaceMode::Container,
            hostname: "web-pod".into(),
            hostname_file: "/run/podscope/sandboxes/x/hostname".into(),
            resolv_conf: "/run/podscope/sandboxes/x/resolv.conf".into(),
            hosts: "/run/podscope/sandboxes/x/hosts".into(),
            shm: "/run/podscope/sandboxes/x/shm".into(),
            ..Default::default()
        }
    }

    fn input<'a>(c: &'a ContainerConfig, img: &'a RunConfig, p: &'a PodView) -> Input<'a> {
        let all: Vec<String> = caps::ALL.iter().map(|c| (*c).to_owned()).collect();
        Input {
            config: c,
            image: img,
            capabilities: capabilities(c, &all).unwrap(),
            user: Resolved {
                uid: 0,
                gid: 0,
                additional_gids: vec![],
                home: None,
            },
            pod: p,
            runtime: RuntimeKind::Crun,
            cgroup_path: "/podscope.slice/podscope-ctr-x.service".into(),
            seccomp: Some(podscope_oci::seccomp::runtime_default(&[])),
            apparmor_profile: None,
            selinux: None,
            pid_target: None,
            host_devices: vec![],
            devices: vec![],
            oom_score_floor: None,
            cgroup_v2: false,
            volumes: "/bundle/volumes".into(),
        }
    }

    /// The AppArmor profile chosen (`apparmor::choose`) is the process's,
    /// in config.json as the runtimes read it; none, no key.
    #[test]
    fn the_apparmor_profile_reaches_config_json() {
        let (c, img, p) = (config(), image(), pod());
        let mut i = input(&c, &img, &p);
        i.apparmor_profile = Some("podscope-default".into());
        let json = serde_json::to_value(build(&i).unwrap()).unwrap();
        assert_eq!(json["process"]["apparmorProfile"], "podscope-default");
        let i = input(&c, &img, &p);
        let json = serde_json::to_value(build(&i).unwrap()).unwrap();
        assert!(json["process"].get("apparmorProfile").is_none());
    }

    /// Issue 41, finding 6: SELinux options were not even parsed. The
    /// labels (`SeLinuxOptions::labels`) are the process's selinuxLabel
    /// and the runtime's mountLabel; where SELinux is off, neither key.
    #[test]
    fn selinux_labels_reach_config_json() {
        let (c, img, p) = (config(), image(), pod());
        let mut i = input(&c, &img, &p);
        let opts = podscope_api::domain::selinux::SeLinuxOptions {
            level: "s0:c1,c2".into(),
            ..Default::default()
        };
        i.selinux = Some(opts.labels());
        let json = serde_json::to_value(build(&i).unwrap()).unwrap();
        assert_eq!(
            json["process"]["selinuxLabel"],
            "system_u:system_r:container_t:s0:c1,c2"
        );
        assert_eq!(
            json["linux"]["mountLabel"],
            "system_u:object_r:container_file_t:s0:c1,c2"
        );
        let json = serde_json::to_value(build(&input(&c, &img, &p)).unwrap()).unwrap();
        assert!(json["process"].get("selinuxLabel").is_none());
        assert!(json["linux"].get("mountLabel").is_none());
    }

    /// On cgroup v2 a container has a cgroup namespace of its own, unless
    /// privileged; on v1 never.
    #[test]
    fn a_cgroup_namespace_of_its_own_on_v2_unless_privileged() {
        let (mut c, img, p) = (config(), image(), pod());
        let has = |c: &ContainerConfig, v2: bool| {
            let mut i = input(c, &img, &p);
            i.cgroup_v2 = v2;
            build(&i)
                .unwrap()
                .linux
                .unwrap()
                .namespaces
                .iter()
                .any(|n| n.type_ == NamespaceType::Cgroup && n.path.is_none())
        };
        assert!(has(&c, true));
        assert!(!has(&c, false));
        c.security.privileged = true;
        assert!(!has(&c, true));
    }

    #[test]
    fn argv_follows_dockers_rules() {
        let img = image();
        let mut c = config();
        assert_eq!(argv(&c, &img).unwrap(), ["/entry", "serve", "--port=80"]);
        c.args = vec!["other".into()];
        assert_eq!(argv(&c, &img).unwrap(), ["/entry", "other"]);
        c.command = vec!["/bin/sh".into()];
        c.args = vec![];
        assert_eq!(
            argv(&c, &img).unwrap(),
            ["/bin/sh"],
            "a command drops the image's Cmd"
        );
        c.args = vec!["-c".into(), "true".into()];
        assert_eq!(argv(&c, &img).unwrap(), ["/bin/sh", "-c", "true"]);
        let none = RunConfig {
            entrypoint: vec!["".into()],
            ..Default::default()
        };
        let e = argv(&config(), &none).unwrap_err();
        assert!(e.to_string().starts_with("command: no command"), "{e}");
    }

    #[test]
    fn env_overrides_by_key_in_place() {
        let mut c = config();
        c.envs = vec!["A=config".into(), "B=2".into()];
        assert_eq!(
            env(&c, &image(), "h"),
            ["PATH=/bin", "A=config", "B=2", "HOSTNAME=h"]
        );
        let e = env(&config(), &RunConfig::default(), "");
        assert_eq!(e, [defaults::DEFAULT_PATH_ENV]);
    }

    #[test]
    fn a_plain_container_joins_its_pod_and_is_confined() {
        let (c, img, p) = (config(), image(), pod());
        let s = build(&input(&c, &img, &p)).unwrap();
        let l = s.linux.as_ref().unwrap();
        let kinds: Vec<_> = l
            .namespaces
            .iter()
            .map(|n| (n.type_, n.path.clone()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (NamespaceType::Mount, None),
                (NamespaceType::Network, Some("/run/netns/podscope-x".into())),
                (NamespaceType::Ipc, Some("/proc/42/ns/ipc".into())),
                (NamespaceType::Uts, Some("/proc/42/ns/uts".into())),
                (NamespaceType::Pid, None),
            ]
        );
        assert!(
            s.hostname.is_none(),
            "the pod's UTS namespace has its hostname"
        );
        assert!(l.seccomp.is_some());
        assert!(!l.masked_paths.is_empty() && !l.readonly_paths.is_empty());
        assert!(
            l.cgroups_path.is_none() && l.resources.is_none(),
            "crun manages no cgroup"
        );
        let caps = &s
            .process
            .as_ref()
            .unwrap()
            .capabilities
            .as_ref()
            .unwrap()
            .bounding;
        assert_eq!(caps.len(), caps::DEFAULT.len());
        let dests: Vec<_> = s.mounts.iter().map(|m| m.destination.as_str()).collect();
        for d in [
            "/proc",
            "/dev",
            "/etc/hostname",
            "/etc/resolv.conf",
            "/etc/hosts",
            "/dev/shm",
        ] {
            assert!(dests.contains(&d), "{d} in {dests:?}");
        }
        assert_eq!(s.root.as_ref().unwrap().path, ROOTFS);
    }

    #[test]
    fn privileged_gets_everything_and_runc_the_units_cgroup() {
        let (mut c, img, p) = (config(), image(), pod());
        c.security.privileged = true;
        c.security.seccomp = Profile {
            kind: ProfileKind::RuntimeDefault,
            ..Default::default()
        };
        let mut i = input(&c, &img, &p);
        i.runtime = RuntimeKind::Runc;
        i.host_devices = vec![LinuxDevice {
            path: "/dev/sda".into(),
            type_: "b".into(),
            major: 8,
            ..Default::default()
        }];
        let s = build(&i).unwrap();
        let l = s.linux.as_ref().unwrap();
        assert!(l.seccomp.is_none() && l.masked_paths.is_empty() && l.readonly_paths.is_empty());
        assert_eq!(l.devices.len(), 1);
        assert_eq!(
            l.cgroups_path.as_deref(),
            Some("/podscope.slice/podscope-ctr-x.service")
        );
        let allow = &l.resources.as_ref().unwrap().devices;
        assert_eq!(allow.len(), 1);
        assert!(allow[0].allow && allow[0].type_.is_none());
        let caps = &s
            .process
            .as_ref()
            .unwrap()
            .capabilities
            .as_ref()
            .unwrap()
            .bounding;
        assert_eq!(caps.len(), caps::ALL.len());
        let sys = s.mounts.iter().find(|m| m.destination == "/sys").unwrap();
        assert!(!sys.options.contains(&"ro".to_owned()));
    }

    #[test]
    fn cri_mounts_replace_pod_files_and_set_propagation() {
        let (mut c, img, p) = (config(), image(), pod());
        c.mounts = vec![
            ContainerMount {
                container_path: "/data/sub".into(),
                host_path: "/srv/sub".into(),
                readonly: true,
                recursive_read_only: true,
                ..Default::default()
            },
            ContainerMount {
                container_path: "/etc/hosts".into(),
                host_path: "/var/lib/kubelet/pods/u/etc-hosts".into(),
                ..Default::default()
            },
            ContainerMount {
                container_path: "/data".into(),
                host_path: "/srv".into(),
                readonly: true,
                propagation: Propagation::HostToContainer,
                ..Default::default()
            },
        ];
        let s = build(&input(&c, &img, &p)).unwrap();
        let hosts: Vec<_> = s
            .mounts
            .iter()
            .filter(|m| m.destination == "/etc/hosts")
            .collect();
        assert_eq!(hosts.len(), 1);
        assert_eq!(
            hosts[0].source.as_deref(),
            Some("/var/lib/kubelet/pods/u/etc-hosts")
        );
        let data = s
            .mounts
            .iter()
            .position(|m| m.destination == "/data")
            .unwrap();
        let sub = s
            .mounts
            .iter()
            .position(|m| m.destination == "/data/sub")
            .unwrap();
        assert!(data < sub, "parents first");
        assert_eq!(
            s.mounts[sub].options,
            ["rbind", "rprivate", "ro", "rro"],
            "rro after the bind's own options"
        );
        assert!(s.mounts[data].options.contains(&"ro".to_owned()));
        assert!(s.mounts[data].options.contains(&"rslave".to_owned()));
        assert!(!s.mounts[data].options.contains(&"rro".to_owned()));
        assert_eq!(
            s.linux.as_ref().unwrap().rootfs_propagation.as_deref(),
            Some("rslave")
        );
    }

    #[test]
    fn an_image_volume_binds_its_mount_read_only_and_noexec() {
        let (mut c, img, p) = (config(), image(), pod());
        c.mounts = vec![
            ContainerMount {
                container_path: "/logs".into(),
                host_path: "/srv/logs".into(),
                ..Default::default()
            },
            ContainerMount {
                container_path: "/models".into(),
                image: "registry.local/models:1".into(),
                image_sub_path: "v2".into(),
                ..Default::default()
            },
        ];
        let s = build(&input(&c, &img, &p)).unwrap();
        let m = s
            .mounts
            .iter()
            .find(|m| m.destination == "/models")
            .unwrap();
        assert_eq!(m.source.as_deref(), Some("/bundle/volumes/1/v2"));
        assert_eq!(
            m.options,
            ["rbind", "rprivate", "ro", "nosuid", "nodev", "noexec"]
        );
    }

    /// A pod's user namespace: one per container with the pod's mapping,
    /// and every bind from the node idmapped through it; image volumes
    /// (overlays of idmapped layers) and the kernel's file systems not.
    #[test]
    fn a_user_namespace_pod_idmaps_the_nodes_binds() {
        let (mut c, img, mut p) = (config(), image(), pod());
        let m = podscope_api::domain::IdMapping {
            container_id: 0,
            host_id: 65536,
            length: 65536,
        };
        p.user_namespace = Some(UserNamespace {
            uids: vec![m],
            gids: vec![m],
        });
        c.mounts = vec![
            ContainerMount {
                container_path: "/logs".into(),
                host_path: "/srv/logs".into(),
                ..Default::default()
            },
            ContainerMount {
                container_path: "/models".into(),
                image: "registry.local/models:1".into(),
                ..Default::default()
            },
        ];
        let s = build(&input(&c, &img, &p)).unwrap();
        let linux = s.linux.as_ref().unwrap();
        assert!(linux
            .namespaces
            .iter()
            .any(|n| n.type_ == NamespaceType::User && n.path.is_none()));
        let want = LinuxIdMapping {
            container_id: 0,
            host_id: 65536,
            size: 65536,
        };
        assert_eq!(
            (linux.uid_mappings.as_slice(), linux.gid_mappings.as_slice()),
            ([want].as_slice(), [want].as_slice())
        );
        let idmapped = |dest: &str| {
            let m = s.mounts.iter().find(|m| m.destination == dest).unwrap();
            m.options.iter().any(|o| o == "idmap")
        };
        for dest in [
            "/logs",
            "/etc/hosts",
            "/etc/resolv.conf",
            "/etc/hostname",
            "/dev/shm",
        ] {
            assert!(idmapped(dest), "{dest}");
        }
        for dest in ["/models", "/proc", "/dev"] {
            assert!(!idmapped(dest), "{dest}");
        }
        // Without one, nothing of it.
        p.user_namespace = None;
        let s = build(&input(&c, &img, &p)).unwrap();
        assert!(s.linux.unwrap().uid_mappings.is_empty());
        assert!(!s
            .mounts
            .iter()
            .any(|m| m.options.iter().any(|o| o == "idmap")));
    }

    #[test]
    fn pid_modes_and_host_ipc() {
        let (mut c, img, mut p) = (config(), image(), pod());
        p.host_ipc = true;
        p.netns_path = None;
        c.security.pid_namespace = NamespaceMode::Pod;
        // A pod without a shared PID namespace: the container's own, never
        // the init's (the host's).
        let s = build(&input(&c, &img, &p)).unwrap();
        let ns = &s.linux.as_ref().unwrap().namespaces;
        let pid = ns.iter().find(|n| n.type_ == NamespaceType::Pid).unwrap();
        assert_eq!(pid.path, None);
        p.pid_mode = NamespaceMode::Pod;
        let s = build(&input(&c, &img, &p)).unwrap();
        let ns = &s.linux.as_ref().unwrap().namespaces;
        assert!(!ns
            .iter()
            .any(|n| n.type_ == NamespaceType::Ipc || n.type_ == NamespaceType::Network));
        let pid = ns.iter().find(|n| n.type_ == NamespaceType::Pid).unwrap();
        assert_eq!(pid.path.as_deref(), Some("/proc/42/ns/pid"));
        c.security.pid_namespace = NamespaceMode::Node;
        let s = build(&input(&c, &img, &p)).unwrap();
        assert!(!s
            .linux
            .unwrap()
            .namespaces
            .iter()
            .any(|n| n.type_ == NamespaceType::Pid));
        let mut i = input(&c, &img, &p);
        i.pid_target = Some(77);
        let s = build(&i).unwrap();
        let pid = s
            .linux
            .unwrap()
            .namespaces
            .into_iter()
            .find(|n| n.type_ == NamespaceType::Pid)
            .unwrap();
        assert_eq!(pid.path.as_deref(), Some("/proc/77/ns/pid"));
    }

    #[test]
    fn devices_are_allowed_with_their_permissions() {
        let (c, img, p) = (config(), image(), pod());
        let mut i = input(&c, &img, &p);
        i.devices = vec![(
            LinuxDevice {
                path: "/dev/fuse".into(),
                type_: "c".into(),
                major: 10,
                minor: 229,
                ..Default::default()
            },
            "/dev/myfuse".into(),
            "rw".into(),
        )];
        let s = build(&i).unwrap();
        let l = s.linux.unwrap();
        assert_eq!(l.devices[0].path, "/dev/myfuse");
        assert_eq!((l.devices[0].major, l.devices[0].minor), (10, 229));
    }

    #[test]
    fn all_capabilities_are_the_nodes() {
        let mut c = config();
        c.security.privileged = true;
        // A node without CAP_SYS_RESOURCE (bit 24), as these machines.
        let host = caps_in_mask(bounding_set("CapBnd:\t000001fffeffffff\n").unwrap());
        assert!(!host.contains(&"CAP_SYS_RESOURCE".to_owned()));
        let got = capabilities(&c, &host).unwrap();
        assert_eq!(got.len(), caps::ALL.len() - 1);
        assert!(!got.contains(&"CAP_SYS_RESOURCE".to_owned()));
        c.security.privileged = false;
        assert_eq!(capabilities(&c, &host).unwrap().len(), caps::DEFAULT.len());
    }

    #[test]
    fn oom_score_is_kept_where_the_node_can_set_it() {
        // These machines: no CAP_SYS_RESOURCE, PID 1 at 0.
        let without = bounding_set("CapBnd:\t000001fffeffffff\n").unwrap();
        let with = bounding_set("CapBnd:\t000001ffffffffff\n").unwrap();
        assert_eq!(oom_score_floor(without, 0), Some(0));
        assert_eq!(oom_score_floor(with, 0), None);
        let (mut c, img, p) = (config(), image(), pod());
        let adj = |c: &ContainerConfig, floor| {
            let mut i = input(c, &img, &p);
            i.oom_score_floor = floor;
            build(&i).unwrap().process.unwrap().oom_score_adj
        };
        // kubelet's Guaranteed and BestEffort scores.
        c.resources.oom_score_adj = -997;
        assert_eq!(adj(&c, None), Some(-997));
        assert_eq!(adj(&c, Some(0)), Some(0));
        c.resources.oom_score_adj = 1000;
        assert_eq!(adj(&c, Some(0)), Some(1000));
        c.resources.oom_score_adj = 0;
        assert_eq!(adj(&c, Some(0)), None, "0 is inherited, not set");
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(parse_signal("SIGQUIT"), Some(libc::SIGQUIT));
        assert_eq!(parse_signal("term"), Some(libc::SIGTERM));
        assert_eq!(parse_signal("9"), Some(9));
        assert_eq!(parse_signal("SIGRTMIN+3"), Some(libc::SIGRTMIN() + 3));
        assert_eq!(parse_signal("NOPE"), None);
        assert_eq!(parse_signal("0"), None);
    }
}
