//! podscope-init: the one process in each pod's scope.
//!
//! Run by podscoped (see `init_spawn`). It joins the pod's network namespace
//! (pinned by podscope-netns@<id>.service; `--netns`), enters new UTS/IPC
//! namespaces (and a PID namespace when the pod shares one), sets the
//! hostname, then forks the long-lived init, which reaps children and exits
//! on SIGTERM.
//!
//! In a pod that shares its PID namespace the init is every container's
//! PID 1, and `/proc/1/{root,cwd,fd,environ,mem,exe}` are in the containers'
//! reach. So before it reports ready the init leaves the host behind: it
//! takes a mount namespace of its own whose root is an empty, read-only
//! tmpfs (as a pause container's image root holds nothing), drops to uid and
//! gid 65535 (the pause image's) with no capability, no supplementary group
//! and no_new_privs, and makes itself not dumpable, so that only a process
//! with CAP_SYS_PTRACE may open those files at all, and then finds nothing
//! of the host in them. The descriptors it holds for the daemon are opened
//! before (the hold socket is bound while its path is still in view).
//! The spawner prints that init's PID once it is ready and exits, so the
//! init is reparented to PID 1 and podscoped never has to reap it.
//!
//! On `--hold-socket PATH` it also holds descriptors for the daemon: the
//! read ends of its containers' log pipes, so that a container's write
//! never meets a pipe with no reader while podscoped is down (see
//! `pod::holder` for the protocol).
//!
//! With `--exec-wait PIDFILE [--join-cgroup PROCS] -- RUNTIME...` it is
//! instead the main process of an exec's unit (see `container::exec`): it runs the OCI runtime's
//! detached exec as a child subreaper, so the command the runtime starts,
//! whose parent exits at once, becomes its child; it then waits for that
//! command alone and exits with its status (128 + the signal that killed
//! it). The runtime's own wait would last until every process the command
//! left in the background ended too, and systemd, were it the reaper,
//! loses the status of a command that ends before it reads the PID file.
//!
//! Deliberately libc-only and allocation-light: it runs once per pod, and
//! its footprint is the pod's overhead.

use std::ffi::CString;
use std::io::Write;
use std::process::exit;

struct Opts {
    hold_socket: Option<String>,
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
        "podscope-init: {msg}\nusage: podscope-init --id ID (--netns PATH | --host-network) [--hostname NAME] [--host-ipc] [--pid-namespace] [--sysctl /proc/sys/PATH=VALUE]... --hold-socket PATH"
    );
    exit(2)
}

fn parse_args() -> Opts {
    let mut o = Opts {
        hold_socket: None,
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
            "--hold-socket" => {
                o.hold_socket = Some(
                    args.next()
                        .unwrap_or_else(|| usage("--hold-socket needs a path")),
                )
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

/// The uid and gid the init runs as once it is ready: the pause image's,
/// owned by nothing on a node, so that no file of the host is the init's and
/// a container process of another uid cannot signal or trace it.
const INIT_ID: libc::uid_t = 65535;

/// Leave the host's file system behind: a mount namespace of our own whose
/// root is an empty read-only tmpfs mounted over `dir` (the pod's directory:
/// it exists, and the mount is seen by no one else), the old root detached.
fn empty_root(dir: &str) {
    let c = CString::new(dir).unwrap_or_else(|_| usage("a path contains NUL"));
    // SAFETY: mount-namespace calls with valid C strings; results checked.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            die("unshare the mount namespace");
        }
        // Nothing done here may reach the namespace it was copied from.
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            die("make the mounts private");
        }
        if libc::mount(
            c"podscope-init".as_ptr(),
            c.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"size=4k,nr_inodes=4,mode=0555".as_ptr().cast(),
        ) != 0
        {
            die(&format!("mount an empty root on {dir}"));
        }
        if libc::chdir(c.as_ptr()) != 0 {
            die("enter the empty root");
        }
        // pivot_root(".", "."): the old root is stacked on the new one and
        // detached at once (no directory for it is needed: the tmpfs is
        // read-only and empty).
        if libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) != 0 {
            die("pivot_root to the empty root");
        }
        if libc::umount2(c".".as_ptr(), libc::MNT_DETACH) != 0 {
            die("detach the old root");
        }
        if libc::chdir(c"/".as_ptr()) != 0 {
            die("chdir /");
        }
    }
}

fn drop_privileges() {
    // SAFETY: prctl/capset/set*id with valid arguments; failures are checked.
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
        if libc::setgroups(0, std::ptr::null()) != 0 {
            die("drop supplementary groups");
        }
        if libc::setresgid(INIT_ID, INIT_ID, INIT_ID) != 0 {
            die("set gid");
        }
        // Leaving uid 0 clears the permitted and effective sets too.
        if libc::setresuid(INIT_ID, INIT_ID, INIT_ID) != 0 {
            die("set uid");
        }
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
        // Set last: a change of ids resets it to fs.suid_dumpable. Not
        // dumpable, /proc/<pid>/ of the init is root's and ptrace-guarded.
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            die("set not dumpable");
        }
    }
}

/// The most holdings and the most descriptors in one (the daemon's side
/// says the same: `pod::holder`).
const MAX_HOLDINGS: usize = 4096;
const MAX_FDS: usize = 3;
const NAME_MAX: usize = 128;

/// What the init holds for the daemon.
struct Holdings {
    items: Vec<(Vec<u8>, Vec<libc::c_int>)>,
}

impl Holdings {
    fn close(fds: &[libc::c_int]) {
        for &fd in fds {
            // SAFETY: descriptors this process received and owns.
            unsafe { libc::close(fd) };
        }
    }

    fn hold(&mut self, name: &[u8], fds: Vec<libc::c_int>) -> Result<(), &'static str> {
        if let Some(i) = self.items.iter().position(|(n, _)| n == name) {
            Self::close(&self.items[i].1);
            self.items[i].1 = fds;
            return Ok(());
        }
        if self.items.len() >= MAX_HOLDINGS {
            Self::close(&fds);
            return Err("too many holdings");
        }
        self.items.push((name.to_vec(), fds));
        Ok(())
    }

    fn release(&mut self, name: &[u8]) {
        if let Some(i) = self.items.iter().position(|(n, _)| n == name) {
            let (_, fds) = self.items.swap_remove(i);
            Self::close(&fds);
        }
    }
}

/// Listen on `path` (root's alone: the daemon is the only client).
fn listen_hold_socket(path: &str) -> libc::c_int {
    // SAFETY: socket/bind/listen on a sockaddr_un we fill; results checked.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        );
        if fd < 0 {
            die("hold socket");
        }
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_bytes();
        if bytes.len() >= addr.sun_path.len() {
            usage("--hold-socket: path too long");
        }
        for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        let c = CString::new(path).unwrap_or_else(|_| usage("--hold-socket: NUL in path"));
        libc::unlink(c.as_ptr());
        let old = libc::umask(0o077);
        let r = libc::bind(
            fd,
            (&addr as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        );
        libc::umask(old);
        if r != 0 {
            die(&format!("bind {path}"));
        }
        if libc::listen(fd, 16) != 0 {
            die("listen");
        }
        fd
    }
}

/// Receive one request: its bytes and the descriptors with it.
fn recv_request(fd: libc::c_int) -> Option<(Vec<u8>, Vec<libc::c_int>)> {
    // SAFETY: recvmsg into buffers we own; the control data is walked with
    // the CMSG macros within its length.
    unsafe {
        let mut buf = [0u8; 1 + NAME_MAX];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut cbuf = [0u64; 16];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf);
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n <= 0 {
            return None;
        }
        let mut fds = Vec::new();
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const libc::c_int;
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<libc::c_int>();
                for i in 0..count {
                    fds.push(*data.add(i));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        Some((buf[..n as usize].to_vec(), fds))
    }
}

fn send_reply(fd: libc::c_int, msg: &[u8], fds: &[libc::c_int]) {
    // SAFETY: sendmsg of our buffers; the control block holds `fds`.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: msg.as_ptr() as *mut libc::c_void,
            iov_len: msg.len(),
        };
        let mut cbuf = [0u64; 8];
        let mut hdr: libc::msghdr = std::mem::zeroed();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        if !fds.is_empty() {
            let len = libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) as usize;
            hdr.msg_control = cbuf.as_mut_ptr().cast();
            hdr.msg_controllen = len;
            let c = libc::CMSG_FIRSTHDR(&hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as usize;
            let data = libc::CMSG_DATA(c) as *mut libc::c_int;
            for (i, f) in fds.iter().enumerate() {
                *data.add(i) = *f;
            }
        }
        libc::sendmsg(fd, &hdr, libc::MSG_NOSIGNAL);
    }
}

/// Serve one client until it hangs up (or stalls 5 s).
fn serve_client(client: libc::c_int, holdings: &mut Holdings) {
    // SAFETY: a socket option on our client socket.
    unsafe {
        let tv = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        libc::setsockopt(
            client,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    while let Some((req, fds)) = recv_request(client) {
        let (op, name) = (req[0], &req[1..]);
        match op {
            b'H' if !name.is_empty() && !fds.is_empty() && fds.len() <= MAX_FDS => {
                match holdings.hold(name, fds) {
                    Ok(()) => send_reply(client, b"K", &[]),
                    Err(e) => send_reply(client, format!("N{e}").as_bytes(), &[]),
                }
            }
            b'D' if !name.is_empty() => {
                Holdings::close(&fds);
                holdings.release(name);
                send_reply(client, b"K", &[]);
            }
            b'G' => {
                Holdings::close(&fds);
                for (n, held) in &holdings.items {
                    let mut m = Vec::with_capacity(1 + n.len());
                    m.push(b'F');
                    m.extend_from_slice(n);
                    send_reply(client, &m, held);
                }
                send_reply(client, b"E", &[]);
            }
            _ => {
                Holdings::close(&fds);
                send_reply(client, b"Nbad request", &[]);
            }
        }
    }
}

/// The init proper: never returns.
fn run_init(ready_fd: libc::c_int, hold_socket: &str) -> ! {
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
        // Made while root may still write the pod's directory and the path
        // is in view; the listening socket outlives both.
        let listener = listen_hold_socket(hold_socket);
        let sigfd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        if sigfd < 0 {
            die("signalfd");
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null < 0 {
            die("open /dev/null");
        }
        // stderr stays the spawner's until the last step that may fail.
        for fd in 0..2 {
            libc::dup2(null, fd);
        }
        // main() checked that the socket is in a directory below /.
        let pod_dir = hold_socket.rsplit_once('/').map_or("/", |(d, _)| d);
        empty_root(pod_dir);
        drop_privileges();
        libc::dup2(null, 2);
        if null > 2 {
            libc::close(null);
        }
        if libc::write(ready_fd, b"1".as_ptr().cast(), 1) != 1 {
            exit(1);
        }
        libc::close(ready_fd);
        let mut holdings = Holdings { items: Vec::new() };
        let mut fds = [
            libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: listener,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                continue;
            }
            if fds[0].revents & libc::POLLIN != 0 {
                let mut info: libc::signalfd_siginfo = std::mem::zeroed();
                let n = libc::read(
                    sigfd,
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    std::mem::size_of::<libc::signalfd_siginfo>(),
                );
                if n > 0 {
                    match info.ssi_signo as libc::c_int {
                        libc::SIGCHLD => {
                            while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
                        }
                        libc::SIGTERM | libc::SIGINT | libc::SIGQUIT => exit(0),
                        _ => {}
                    }
                }
            }
            if fds[1].revents & libc::POLLIN != 0 {
                let client = libc::accept4(
                    fds[1].fd,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                );
                if client >= 0 {
                    serve_client(client, &mut holdings);
                    libc::close(client);
                }
            }
        }
    }
}

/// `--exec-wait PIDFILE [--join-cgroup PROCS] -- RUNTIME ARGS...`: see
/// the module's comment. With `--join-cgroup` it first moves itself into
/// the cgroup whose `cgroup.procs` that is (the container's), so the
/// runtime and the command start there: a runtime that manages no cgroup
/// (crun with its manager off) would leave the command in the exec's unit,
/// outside the container's limits and its cgroup namespace's root.
fn exec_wait(pidfile: &str, join: Option<&str>, argv: &[String]) -> ! {
    if argv.is_empty() {
        usage("--exec-wait needs a runtime command after --");
    }
    if let Some(procs) = join {
        if let Err(e) = std::fs::write(procs, b"0") {
            let _ = writeln!(
                std::io::stderr(),
                "podscope-init: join the container's cgroup ({procs}): {e}"
            );
            exit(1);
        }
    }
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_str()).unwrap_or_else(|_| usage("an argument contains NUL")))
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // The status as a shell reports it.
    fn code(st: libc::c_int) -> i32 {
        if libc::WIFEXITED(st) {
            libc::WEXITSTATUS(st)
        } else if libc::WIFSIGNALED(st) {
            128 + libc::WTERMSIG(st)
        } else {
            1
        }
    }
    // SAFETY: single-threaded; fork/exec/waitpid used as documented.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            die("become a child subreaper");
        }
        let runtime = libc::fork();
        if runtime < 0 {
            die("fork");
        }
        if runtime == 0 {
            libc::execv(ptrs[0], ptrs.as_ptr());
            die(&format!("exec {}", argv[0]));
        }
        let mut st = 0;
        while libc::waitpid(runtime, &mut st, 0) < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                die("wait for the runtime");
            }
        }
        if code(st) != 0 {
            // The runtime failed (its --log says why): its status is ours.
            exit(code(st));
        }
        let pid: libc::pid_t = match std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            Some(p) if p > 0 => p,
            _ => die(&format!("the runtime wrote no PID to {pidfile}")),
        };
        loop {
            let w = libc::waitpid(-1, &mut st, 0);
            if w == pid {
                exit(code(st));
            }
            if w < 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Not ours after all: nothing to wait for.
                    _ => die(&format!(
                        "the command (PID {pid}) is not this process's child"
                    )),
                }
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("--exec-wait") {
        let pidfile = args
            .next()
            .unwrap_or_else(|| usage("--exec-wait needs a PID file"));
        let mut join = None;
        match args.next().as_deref() {
            Some("--") => {}
            Some("--join-cgroup") => {
                join = Some(
                    args.next()
                        .unwrap_or_else(|| usage("--join-cgroup needs a cgroup.procs file")),
                );
                if args.next().as_deref() != Some("--") {
                    usage("--exec-wait PIDFILE [--join-cgroup PROCS] -- RUNTIME ARGS...");
                }
            }
            _ => usage("--exec-wait PIDFILE [--join-cgroup PROCS] -- RUNTIME ARGS..."),
        }
        exec_wait(&pidfile, join.as_deref(), &args.collect::<Vec<_>>());
    }
    let o = parse_args();
    // The pod's network namespace is made (and loopback brought up) by
    // podscope-netns@<id>.service; the init only joins it.
    if o.host_network == o.netns.is_some() {
        usage("exactly one of --netns and --host-network is needed");
    }
    let hold_socket = match &o.hold_socket {
        Some(p) if p.starts_with('/') && p.rfind('/') > Some(0) => p.clone(),
        _ => usage("--hold-socket needs an absolute path below /"),
    };
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
            run_init(fds[1], &hold_socket);
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
