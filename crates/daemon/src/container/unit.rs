//! A container's unit: the transient service `podscope-ctr-<id>.service` in
//! its pod's slice, running the OCI runtime. Pure: the property list and
//! the runtime's command lines.
//!
//! systemd is the container's only supervisor. The runtime's `create` is
//! `ExecStart=` (`Type=forking`): it leaves the container's process alone
//! in the unit's cgroup, blocked before it runs anything, and exits; systemd
//! takes that process as the unit's main process. The daemon then runs the
//! runtime's `start` (`runtime.rs`): only then does the container run, so
//! even one that exits at once has its exit recorded in `ExecMainStatus`.
//! (`run -d` with
//! `PIDFile=` loses a container quicker than systemd reading its PID
//! file: the start fails and the status is gone.) `RemainAfterExit=` keeps
//! a container that exited 0 loaded, and a failed unit stays loaded
//! anyway, until RemoveContainer resets it: that is how an exit while the
//! daemon is down is still known. crun deletes its state in
//! `ExecStopPost=`; runc's state the daemon deletes at RemoveContainer
//! (`properties` says why). systemd owns the cgroup: the limits are unit
//! properties, devices a strict allow list; the runtime manages none.

use crate::systemd::{ExecCommand, Prop};
use podscope_config::{RuntimeHandler, RuntimeKind};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

/// The runtime's global options: its state directory, and for crun its
/// cgroup manager off (the unit's cgroup is systemd's; crun refuses the
/// v1-hybrid layout otherwise).
pub fn global_args(h: &RuntimeHandler) -> Vec<String> {
    let mut v = Vec::new();
    if !h.root.as_os_str().is_empty() {
        v.push(format!("--root={}", h.root.display()));
    }
    if h.kind() == Some(RuntimeKind::Crun) {
        v.push("--cgroup-manager=disabled".into());
    }
    v
}

fn argv0(h: &RuntimeHandler) -> String {
    h.path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| h.path.display().to_string())
}

/// `<runtime> [global] <verb> <args...>` as an exec line.
pub fn command(h: &RuntimeHandler, verb: &[&str], ignore_failure: bool) -> ExecCommand {
    let mut argv = vec![argv0(h)];
    argv.extend(global_args(h));
    argv.extend(verb.iter().map(|s| s.to_string()));
    ExecCommand {
        path: h.path.display().to_string(),
        argv,
        ignore_failure,
    }
}

/// The standard container devices: what the runtime creates in /dev
/// (mknod, so "m" too) and a terminal needs.
pub const STANDARD_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "char-pts",
];

/// What the unit is made from.
pub struct UnitSpec<'a> {
    pub description: String,
    pub slice: &'a str,
    pub runtime: &'a RuntimeHandler,
    pub id: &'a str,
    pub bundle: &'a Path,
    /// The runtime's error log (its messages, not the container's output).
    pub runtime_log: &'a Path,
    /// Where a TTY container's runtime sends the pty's master.
    pub console_socket: Option<&'a Path>,
    pub stop_signal: i32,
    pub stdin: Option<Arc<OwnedFd>>,
    pub stdout: Option<Arc<OwnedFd>>,
    pub stderr: Option<Arc<OwnedFd>>,
    /// Devices beyond the standard ones: (host path, permissions).
    pub devices: Vec<(String, String)>,
    pub privileged: bool,
    pub start_timeout_usec: u64,
    pub stop_timeout_usec: u64,
    /// MemoryMax, CPU quota and weight, cpusets.
    pub limits: Vec<(&'static str, Prop)>,
    /// A restore from a checkpoint: the runtime's `restore --detach` in
    /// place of `create` (the daemon runs no `start`).
    pub restore: Option<Restoring<'a>>,
}

/// Where a restore's CRIU images are, its work directory and the PID file
/// the runtime writes (systemd takes the main PID from it).
pub struct Restoring<'a> {
    pub images: &'a Path,
    pub work: &'a Path,
    pub pid_file: &'a Path,
}

pub fn properties(u: UnitSpec<'_>) -> Vec<(&'static str, Prop)> {
    let log = format!("--log={}", u.runtime_log.display());
    let bundle = u.bundle.display().to_string();
    let console = u.console_socket.map(|p| p.display().to_string());
    let restore = u.restore.as_ref().map(|r| {
        (
            r.images.display().to_string(),
            r.work.display().to_string(),
            r.pid_file.display().to_string(),
        )
    });
    let mut create: Vec<&str> = match &restore {
        None => vec![&log, "create", "--bundle", &bundle],
        Some((images, work, pid)) => vec![
            &log,
            "restore",
            "--detach",
            "--bundle",
            &bundle,
            "--image-path",
            images,
            "--work-path",
            work,
            "--pid-file",
            pid,
        ],
    };
    if let Some(c) = &console {
        create.extend(["--console-socket", c]);
    }
    create.push(u.id);
    let mut props = vec![
        ("Description", Prop::Str(u.description)),
        ("Slice", Prop::Str(u.slice.to_owned())),
        ("Type", Prop::Str("forking".into())),
        ("RemainAfterExit", Prop::Bool(true)),
        (
            "ExecStart",
            Prop::Exec(vec![command(u.runtime, &create, false)]),
        ),
        // The stop signal to the container's process, everything left in
        // its cgroup killed at the end; an OOM kill of one process does not
        // stop the others (runc under containerd behaves so).
        ("KillMode", Prop::Str("mixed".into())),
        ("KillSignal", Prop::I32(u.stop_signal)),
        ("OOMPolicy", Prop::Str("continue".into())),
        ("TimeoutStartUSec", Prop::U64(u.start_timeout_usec)),
        // Bounds `systemctl stop`'s SIGKILL and a hanging ExecStopPost
        // (systemd's default is 90 s); StopContainer brings its own grace.
        ("TimeoutStopUSec", Prop::U64(u.stop_timeout_usec)),
        ("CPUAccounting", Prop::Bool(true)),
        ("MemoryAccounting", Prop::Bool(true)),
        ("TasksAccounting", Prop::Bool(true)),
    ];
    if let Some((_, _, pid)) = &restore {
        props.push(("PIDFile", Prop::Str(pid.clone())));
    }
    // crun deletes its state as the unit stops. runc does not: its delete
    // runs in the unit's cgroup (systemd forks ExecStopPost= there), tries
    // to remove that cgroup, finds itself in it (EBUSY) and tries again
    // for 150 ms (10, 20, 40 and 80 ms apart) before it gives up, and
    // every stop waited for it (RemoveContainer took 166 ms). The daemon
    // deletes runc's state at RemoveContainer instead (`remove`), from
    // outside the cgroup, as it did already where the delete was killed.
    if u.runtime.kind() != Some(RuntimeKind::Runc) {
        props.push((
            "ExecStopPost",
            Prop::Exec(vec![command(
                u.runtime,
                &[&log, "delete", "-f", u.id],
                true,
            )]),
        ));
    }
    match u.stdin {
        Some(fd) => props.push(("StandardInputFileDescriptor", Prop::Fd(fd))),
        None => props.push(("StandardInput", Prop::Str("null".into()))),
    }
    if let Some(fd) = u.stdout {
        props.push(("StandardOutputFileDescriptor", Prop::Fd(fd)));
    }
    if let Some(fd) = u.stderr {
        props.push(("StandardErrorFileDescriptor", Prop::Fd(fd)));
    }
    if !u.privileged {
        let mut allow: Vec<(String, String)> = STANDARD_DEVICES
            .iter()
            .map(|d| ((*d).to_owned(), "rwm".to_owned()))
            .collect();
        allow.extend(u.devices.iter().map(|(p, perm)| {
            (
                p.clone(),
                if perm.is_empty() {
                    "rwm".into()
                } else {
                    perm.clone()
                },
            )
        }));
        props.push(("DevicePolicy", Prop::Str("strict".into())));
        props.push(("DeviceAllow", Prop::Pairs(allow)));
    }
    props.extend(u.limits);
    props
}

/// systemd's `AllowedCPUs=`/`AllowedMemoryNodes=` take a bit mask: "0-2,5"
/// is bits 0, 1, 2 and 5. None for a list that does not parse.
pub fn cpu_mask(list: &str) -> Option<Vec<u8>> {
    let mut bits: Vec<u8> = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let n = part.parse::<usize>().ok()?;
                (n, n)
            }
        };
        if a > b || b >= 8192 {
            return None;
        }
        for n in a..=b {
            if bits.len() <= n / 8 {
                bits.resize(n / 8 + 1, 0);
            }
            bits[n / 8] |= 1 << (n % 8);
        }
    }
    Some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crun() -> RuntimeHandler {
        RuntimeHandler {
            path: "/usr/bin/crun".into(),
            kind: None,
            root: Default::default(),
        }
    }

    fn spec<'a>(h: &'a RuntimeHandler) -> UnitSpec<'a> {
        UnitSpec {
            description: "d".into(),
            slice: "podscope-x.slice",
            runtime: h,
            id: "abc",
            bundle: Path::new("/var/lib/podscope/containers/abc"),
            runtime_log: Path::new("/run/podscope/containers/abc/runtime.log"),
            console_socket: None,
            stop_signal: 15,
            stdin: None,
            stdout: None,
            stderr: None,
            devices: vec![("/dev/fuse".into(), "rw".into())],
            privileged: false,
            start_timeout_usec: 1,
            stop_timeout_usec: 2,
            limits: vec![("MemoryMax", Prop::U64(1 << 26))],
            restore: None,
        }
    }

    fn get<'a>(props: &'a [(&'static str, Prop)], k: &str) -> Option<&'a Prop> {
        props.iter().find(|(n, _)| *n == k).map(|(_, v)| v)
    }

    #[test]
    fn crun_creates_without_a_cgroup_manager_and_the_daemon_starts() {
        let h = crun();
        let props = properties(spec(&h));
        let Some(Prop::Exec(create)) = get(&props, "ExecStart") else {
            panic!("no ExecStart")
        };
        assert_eq!(
            create[0].argv,
            [
                "crun",
                "--cgroup-manager=disabled",
                "--log=/run/podscope/containers/abc/runtime.log",
                "create",
                "--bundle",
                "/var/lib/podscope/containers/abc",
                "abc"
            ]
        );
        assert!(
            get(&props, "ExecStartPost").is_none(),
            "the daemon runs the start: no second fork into the unit's cgroup"
        );
        assert!(
            get(&props, "PIDFile").is_none(),
            "systemd takes the main PID from the cgroup"
        );
        let Some(Prop::Exec(post)) = get(&props, "ExecStopPost") else {
            panic!("no ExecStopPost")
        };
        assert!(post[0].ignore_failure);
        assert_eq!(post[0].argv[3..], ["delete", "-f", "abc"]);
        assert_eq!(get(&props, "Type"), Some(&Prop::Str("forking".into())));
        assert_eq!(get(&props, "RemainAfterExit"), Some(&Prop::Bool(true)));
        assert_eq!(
            get(&props, "OOMPolicy"),
            Some(&Prop::Str("continue".into()))
        );
        assert_eq!(
            get(&props, "StandardInput"),
            Some(&Prop::Str("null".into()))
        );
        let Some(Prop::Pairs(devs)) = get(&props, "DeviceAllow") else {
            panic!("no DeviceAllow")
        };
        assert!(devs.contains(&("/dev/fuse".into(), "rw".into())));
        assert!(devs.contains(&("/dev/null".into(), "rwm".into())));
        assert_eq!(get(&props, "MemoryMax"), Some(&Prop::U64(1 << 26)));
    }

    #[test]
    fn runc_keeps_its_cgroups_and_privileged_has_no_device_list() {
        let h = RuntimeHandler {
            path: "/usr/sbin/runc".into(),
            kind: None,
            root: "/run/podscope-runc".into(),
        };
        let mut s = spec(&h);
        s.privileged = true;
        s.console_socket = Some(Path::new("/run/c.sock"));
        let props = properties(s);
        let Some(Prop::Exec(start)) = get(&props, "ExecStart") else {
            panic!()
        };
        assert_eq!(start[0].argv[..2], ["runc", "--root=/run/podscope-runc"]);
        assert!(!start[0].argv.iter().any(|a| a.contains("cgroup-manager")));
        assert!(start[0]
            .argv
            .windows(2)
            .any(|w| w == ["--console-socket", "/run/c.sock"]));
        assert!(get(&props, "DevicePolicy").is_none());
        assert!(
            get(&props, "ExecStopPost").is_none(),
            "runc's delete in the unit's cgroup waits 150 ms on itself"
        );
    }

    #[test]
    fn a_restore_is_the_runtimes_restore_detached_with_its_pid_file() {
        let h = RuntimeHandler {
            path: "/usr/sbin/runc".into(),
            kind: None,
            root: Default::default(),
        };
        let mut s = spec(&h);
        s.restore = Some(Restoring {
            images: Path::new("/var/lib/podscope/containers/abc/criu-images"),
            work: Path::new("/run/podscope/containers/abc/restore.work"),
            pid_file: Path::new("/run/podscope/containers/abc/pid"),
        });
        let props = properties(s);
        let Some(Prop::Exec(start)) = get(&props, "ExecStart") else {
            panic!()
        };
        assert_eq!(
            start[0].argv[2..],
            [
                "restore",
                "--detach",
                "--bundle",
                "/var/lib/podscope/containers/abc",
                "--image-path",
                "/var/lib/podscope/containers/abc/criu-images",
                "--work-path",
                "/run/podscope/containers/abc/restore.work",
                "--pid-file",
                "/run/podscope/containers/abc/pid",
                "abc"
            ]
        );
        assert_eq!(
            get(&props, "PIDFile"),
            Some(&Prop::Str("/run/podscope/containers/abc/pid".into()))
        );
        assert_eq!(get(&props, "Type"), Some(&Prop::Str("forking".into())));
    }

    #[test]
    fn cpu_lists_become_masks() {
        assert_eq!(cpu_mask("0-2,5"), Some(vec![0b0010_0111]));
        assert_eq!(cpu_mask("9"), Some(vec![0, 0b10]));
        assert_eq!(cpu_mask(""), Some(vec![]));
        assert_eq!(cpu_mask("3-1"), None);
        assert_eq!(cpu_mask("x"), None);
    }
}
