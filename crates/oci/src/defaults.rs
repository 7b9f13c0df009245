//! What every container gets unless CRI says otherwise: containerd 1.6's
//! defaults for runc (`oci/spec.go`, `oci/mounts.go`, and the CRI plugin's
//! `pkg/cri/opts/spec_linux.go`), so a pod behaves here as it does there.

use super::spec::{LinuxDeviceCgroup, Mount, PosixRlimit};

/// The `PATH` a container gets when neither the image nor CRI sets one.
pub const DEFAULT_PATH_ENV: &str =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// Paths the runtime hides (a bind of /dev/null over a file, an empty
/// read-only tmpfs over a directory): host hardware, kernel memory and
/// keyrings, and timing data that leaks other tenants' activity.
/// `/sys/devices/virtual/powercap` hides the RAPL energy counters (a power
/// side channel, CVE-2020-8694), as the last 1.6 releases do. Kubelet sends
/// the same list as the security context's `masked_paths` for the default
/// proc mount; a privileged container gets none.
pub fn masked_paths() -> Vec<String> {
    strings(&[
        "/proc/acpi",
        "/proc/asound",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/sys/firmware",
        "/sys/devices/virtual/powercap",
        "/proc/scsi",
    ])
}

/// Paths remounted read-only: the host-wide knobs under /proc that a
/// namespace does not isolate (`/proc/sys` outside the namespaced sysctls,
/// which the runtime sets before this applies), and the SysRq trigger.
pub fn readonly_paths() -> Vec<String> {
    strings(&[
        "/proc/bus",
        "/proc/fs",
        "/proc/irq",
        "/proc/sys",
        "/proc/sysrq-trigger",
    ])
}

fn mount(destination: &str, type_: &str, source: &str, options: &[&str]) -> Mount {
    Mount {
        destination: destination.to_owned(),
        type_: Some(type_.to_owned()),
        source: Some(source.to_owned()),
        options: strings(options),
    }
}

/// The filesystems every container has, in mount order: its own proc (for
/// its PID namespace), a small /dev tmpfs the runtime fills with the
/// standard nodes, a private devpts instance (gid 5 is `tty`), its IPC
/// namespace's mqueue, sysfs read-only, and its cgroup read-only (Docker's
/// behaviour; with a cgroup namespace it shows the container's own).
///
/// Not here: `/dev/shm`, which is the pod's and bind-mounted by the caller
/// so the pod's containers share it, and `/run`, which containerd's CRI
/// plugin leaves to the image.
pub fn mounts() -> Vec<Mount> {
    vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        ),
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        ),
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        ),
        mount(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", "ro"],
        ),
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            &["nosuid", "noexec", "nodev", "relatime", "ro"],
        ),
    ]
}

fn allow_char(major: i64, minor: Option<i64>) -> LinuxDeviceCgroup {
    LinuxDeviceCgroup {
        allow: true,
        type_: Some("c".to_owned()),
        major: Some(major),
        minor,
        access: Some("rwm".to_owned()),
    }
}

/// The device cgroup rules: deny every device, then allow the character
/// devices every program expects (null, zero, full, random, urandom, tty,
/// ptmx, and the pty slaves, major 136). Devices CRI passes through are
/// appended by the caller. runc and crun add the same standard devices
/// themselves; writing them out keeps the rules visible in config.json and
/// independent of the runtime. No /dev/console (5:1): neither runc nor
/// crun allows it by default, and a container's console is its pty.
pub fn devices_allowed() -> Vec<LinuxDeviceCgroup> {
    vec![
        LinuxDeviceCgroup {
            allow: false,
            type_: None,
            major: None,
            minor: None,
            access: Some("rwm".to_owned()),
        },
        allow_char(1, Some(3)), // /dev/null
        allow_char(1, Some(5)), // /dev/zero
        allow_char(1, Some(7)), // /dev/full
        allow_char(1, Some(8)), // /dev/random
        allow_char(1, Some(9)), // /dev/urandom
        allow_char(5, Some(0)), // /dev/tty
        allow_char(5, Some(2)), // /dev/ptmx
        allow_char(136, None),  // /dev/pts/*
    ]
}

/// containerd's default resource limits: 1024 open files, soft and hard.
/// Note that containerd's CRI plugin removes them from its containers
/// (`WithoutDefaultSecuritySettings`, containerd issue #515), which then
/// inherit the runtime's limits; whether podscope writes these is the
/// caller's choice.
pub fn rlimits() -> Vec<PosixRlimit> {
    vec![PosixRlimit {
        type_: "RLIMIT_NOFILE".to_owned(),
        hard: 1024,
        soft: 1024,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_paths_hide_host_internals() {
        let m = masked_paths();
        for p in [
            "/proc/acpi",
            "/proc/asound",
            "/proc/kcore",
            "/proc/keys",
            "/proc/latency_stats",
            "/proc/timer_list",
            "/proc/timer_stats",
            "/proc/sched_debug",
            "/proc/scsi",
            "/sys/firmware",
            "/sys/devices/virtual/powercap",
        ] {
            assert!(m.contains(&p.to_owned()), "{p}");
        }
        assert_eq!(m.len(), 11);
        // Readonly, not masked: a container may read its sysctls.
        assert!(!m.contains(&"/proc/sys".to_owned()));
    }

    #[test]
    fn readonly_paths_are_the_host_knobs() {
        assert_eq!(
            readonly_paths(),
            [
                "/proc/bus",
                "/proc/fs",
                "/proc/irq",
                "/proc/sys",
                "/proc/sysrq-trigger"
            ]
        );
        let masked = masked_paths();
        assert!(readonly_paths().iter().all(|p| !masked.contains(p)));
    }

    fn find(dest: &str) -> Mount {
        mounts()
            .into_iter()
            .find(|m| m.destination == dest)
            .unwrap_or_else(|| panic!("no {dest}"))
    }

    #[test]
    fn mounts_are_containerds() {
        let dests: Vec<String> = mounts().into_iter().map(|m| m.destination).collect();
        assert_eq!(
            dests,
            [
                "/proc",
                "/dev",
                "/dev/pts",
                "/dev/mqueue",
                "/sys",
                "/sys/fs/cgroup"
            ]
        );
        let dev = find("/dev");
        assert_eq!(dev.type_.as_deref(), Some("tmpfs"));
        assert_eq!(
            dev.options,
            ["nosuid", "strictatime", "mode=755", "size=65536k"]
        );
        let pts = find("/dev/pts");
        assert_eq!(pts.type_.as_deref(), Some("devpts"));
        for o in ["newinstance", "ptmxmode=0666", "mode=0620", "gid=5"] {
            assert!(pts.options.contains(&o.to_owned()), "{o}");
        }
        assert_eq!(find("/proc").type_.as_deref(), Some("proc"));
        assert_eq!(find("/dev/mqueue").type_.as_deref(), Some("mqueue"));
        let sys = find("/sys");
        assert_eq!(sys.type_.as_deref(), Some("sysfs"));
        assert!(sys.options.contains(&"ro".to_owned()));
        let cg = find("/sys/fs/cgroup");
        assert_eq!(cg.type_.as_deref(), Some("cgroup"));
        assert!(cg.options.contains(&"ro".to_owned()));
    }

    #[test]
    fn no_shm_and_no_run() {
        let dests: Vec<String> = mounts().into_iter().map(|m| m.destination).collect();
        assert!(!dests.contains(&"/dev/shm".to_owned()));
        assert!(!dests.contains(&"/run".to_owned()));
    }

    #[test]
    fn mounts_come_parent_first() {
        let m = mounts();
        for (i, a) in m.iter().enumerate() {
            for b in &m[i + 1..] {
                assert!(
                    !a.destination.starts_with(&format!("{}/", b.destination)),
                    "{} is mounted before its parent {}",
                    a.destination,
                    b.destination
                );
            }
        }
    }

    #[test]
    fn devices_deny_all_then_allow_the_standard_ones() {
        let d = devices_allowed();
        assert_eq!(
            d[0],
            LinuxDeviceCgroup {
                allow: false,
                access: Some("rwm".into()),
                ..LinuxDeviceCgroup::default()
            }
        );
        let allowed: Vec<(i64, Option<i64>)> = d[1..]
            .iter()
            .inspect(|r| {
                assert!(r.allow);
                assert_eq!(r.type_.as_deref(), Some("c"));
                assert_eq!(r.access.as_deref(), Some("rwm"));
            })
            .map(|r| (r.major.unwrap(), r.minor))
            .collect();
        for dev in [
            (1, Some(3)),
            (1, Some(5)),
            (1, Some(7)),
            (1, Some(8)),
            (1, Some(9)),
            (5, Some(0)),
            (5, Some(2)),
            (136, None),
        ] {
            assert!(allowed.contains(&dev), "{dev:?}");
        }
        assert_eq!(allowed.len(), 8);
    }

    #[test]
    fn rlimits_and_path() {
        assert_eq!(
            rlimits(),
            [PosixRlimit {
                type_: "RLIMIT_NOFILE".into(),
                hard: 1024,
                soft: 1024
            }]
        );
        assert!(DEFAULT_PATH_ENV.starts_with("PATH=/usr/local/sbin:"));
        assert!(DEFAULT_PATH_ENV.ends_with(":/sbin:/bin"));
    }
}
