//! podscope-init: the one process in each pod's scope.
//!
//! Run by podscoped (see `init_spawn`). It joins the pod's network namespace
//! (pinned by podscope-netns@<id>.service; `--netns`), enters new UTS/IPC
//! namespaces (and a PID namespace when the pod shares one), sets the
//! hostname, then forks the long-lived init, which drops
//! every capability, sets no_new_privs, reaps children and exits on SIGTERM.
//! The spawner prints that init's PID once it is ready and exits, so the
//! init is reparented to PID 1 and podscoped never has to reap it.
//!
//! Deliberately libc-only and allocation-light: it runs once per pod, and
//! its footprint is the pod's overhead.

use std::ffi::CString;
use std::io::Write;
use std::process::exit;

struct Opts {
    hostname: Option<String>,
    netns: Option<String>,
    host_network: bool,
    host_ipc: bool,
    pid_namespace: bool,
    /// (/proc/sys path, value)
    sysctls: Vec<(String, String)>,
}

fn die(what: &str) -> ! {
    let err = std::io::Error::last_os_error();
    let _ = writeln!(std::io::stderr(), "podscope-init: {what}: {err}");
    exit(1)
}

fn usage(msg: &str) -> ! {
    let _ = writeln!(
        std::io::stderr(),
        "podscope-init: {msg}\nusage: podscope-init --id ID (--netns PATH | --host-network) [--hostname NAME] [--host-ipc] [--pid-namespace] [--sysctl /proc/sys/PATH=VALUE]..."
    );
    exit(2)
}

fn parse_args() -> Opts {
    let mut o = Opts {
        hostname: None,
        netns: None,
        host_network: false,
        host_ipc: false,
        pid_namespace: false,
        sysctls: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            // The id is only for `ps` and `systemctl status` readers.
            "--id" => {
                args.next().unwrap_or_else(|| usage("--id needs a value"));
            }
            "--hostname" => {
                o.hostname = Some(
                    args.next()
                        .unwrap_or_else(|| usage("--hostname needs a value")),
                )
            }
            "--netns" => {
                o.netns = Some(args.next().unwrap_or_else(|| usage("--netns needs a path")))
            }
            "--host-network" => o.host_network = true,
            "--host-ipc" => o.host_ipc = true,
            "--pid-namespace" => o.pid_namespace = true,
            "--sysctl" => {
                let kv = args
                    .next()
                    .unwrap_or_else(|| usage("--sysctl needs PATH=VALUE"));
                let (path, value) = kv
                    .split_once('=')
                    .unwrap_or_else(|| usage("--sysctl needs PATH=VALUE"));
                if !path.starts_with("/proc/sys/") || path.contains("/../") {
                    usage(&format!("--sysctl: {path:?} is not under /proc/sys"));
                }
                o.sysctls.push((path.to_owned(), value.to_owned()));
            }
            _ => usage(&format!("unknown argument {a:?}")),
        }
    }
    o
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn drop_privileges() {
    // SAFETY: prctl/capset with valid arguments; failures are checked.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            die("set no_new_privs");
        }
        // Empty the bounding set; EINVAL marks the end of known capabilities.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break;
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let hdr = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &hdr, data.as_ptr()) != 0 {
            die("drop capabilities");
        }
    }
}

/// The init proper: never returns.
fn run_init(ready_fd: libc::c_int) -> ! {
    // SAFETY: signal-mask, fd and wait calls on values we own.
    unsafe {
        libc::setsid();
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGHUP,
            libc::SIGCHLD,
        ] {
            libc::sigaddset(&mut set, s);
        }
        // Blocked rather than handled: as PID 1 of a namespace, a signal with
        // the default action would be dropped; a blocked one waits for us.
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        drop_privileges();
        if libc::chdir(c"/".as_ptr()) != 0 {
            die("chdir /");
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null < 0 {
            die("open /dev/null");
        }
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        if null > 2 {
            libc::close(null);
        }
        if libc::write(ready_fd, b"1".as_ptr().cast(), 1) != 1 {
            exit(1);
        }
        libc::close(ready_fd);
        loop {
            let sig = libc::sigwaitinfo(&set, std::ptr::null_mut());
            match sig {
                libc::SIGCHLD => {
                    while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
                }
                libc::SIGTERM | libc::SIGINT | libc::SIGQUIT => exit(0),
                _ => {}
            }
        }
    }
}

fn main() {
    let o = parse_args();
    // The pod's network namespace is made (and loopback brought up) by
    // podscope-netns@<id>.service; the init only joins it.
    if o.host_network == o.netns.is_some() {
        usage("exactly one of --netns and --host-network is needed");
    }
    let mut flags = 0;
    if !o.host_network {
        flags |= libc::CLONE_NEWUTS;
    }
    if !o.host_ipc {
        flags |= libc::CLONE_NEWIPC;
    }
    if o.pid_namespace {
        flags |= libc::CLONE_NEWPID;
    }
    // SAFETY: single-threaded here; unshare/sethostname/pipe/fork are used
    // as documented and every result is checked.
    unsafe {
        if let Some(path) = &o.netns {
            let c =
                CString::new(path.as_str()).unwrap_or_else(|_| usage("netns path contains NUL"));
            let fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                die(&format!("open network namespace {path}"));
            }
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                die(&format!("join network namespace {path}"));
            }
            libc::close(fd);
        }
        if flags != 0 && libc::unshare(flags) != 0 {
            die("unshare namespaces");
        }
        // Now in the pod's network and IPC namespaces: /proc/sys/net and the
        // IPC sysctls written here are the pod's own.
        for (path, value) in &o.sysctls {
            if let Err(e) = std::fs::write(path, value) {
                let _ = writeln!(
                    std::io::stderr(),
                    "podscope-init: set sysctl {path} = {value:?}: {e}"
                );
                exit(1);
            }
        }
        if !o.host_network {
            if let Some(h) = &o.hostname {
                let c = CString::new(h.as_str()).unwrap_or_else(|_| usage("hostname contains NUL"));
                if libc::sethostname(c.as_ptr(), h.len()) != 0 {
                    die("set hostname");
                }
            }
        }
        let mut fds = [0; 2];
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            die("pipe");
        }
        let pid = libc::fork();
        if pid < 0 {
            die("fork");
        }
        if pid == 0 {
            libc::close(fds[0]);
            run_init(fds[1]);
        }
        libc::close(fds[1]);
        let mut byte = 0u8;
        let n = libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
        if n != 1 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            let _ = writeln!(
                std::io::stderr(),
                "podscope-init: init exited before it was ready (wait status {status:#x})"
            );
            exit(1);
        }
        println!("{pid}");
        let _ = std::io::stdout().flush();
        // Stay until the caller closes our stdin: while we live, the init
        // is our child and its PID cannot be reused (a dead init stays a
        // zombie until we exit), so the caller can open a pidfd for it
        // that names the init for sure. With no reader (stdin at EOF) we
        // leave at once.
        let mut buf = [0u8; 64];
        while libc::read(0, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
    }
}
