//! podscope-netns: creates and removes a pod's network namespace, pinned at
//! /run/netns/podscope-<id> (the iproute2 convention, so `ip netns` sees it).
//! Run by `podscope-netns@<id>.service`: `add` on start, `del` on stop; and
//! by podscoped.service before the daemon starts: `prepare`.
//! `add` pins the namespace podscoped handed off for the pod (it made it
//! and runs CNI ADD in it meanwhile: see `podscoped::cni::netns`), else a new one.
//!
//! A separate short-lived process on purpose: unshare(CLONE_NEWNET) must not
//! run in the multi-threaded daemon, and a unit makes the namespace visible
//! to and controllable by systemd.

use podscope_api::domain::sandbox::{netns_path_of, NETNS_DIR};
use podscope_api::domain::SandboxId;
use std::ffi::CString;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::exit;

fn die(what: &str) -> ! {
    let err = std::io::Error::last_os_error();
    let _ = writeln!(std::io::stderr(), "podscope-netns: {what}: {err}");
    exit(1)
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in paths")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// mount(2) without data; false on failure (errno is left for the caller).
fn mount(src: &CString, target: &CString, flags: libc::c_ulong) -> bool {
    let none = cstr("none");
    // SAFETY: valid C strings; a null data pointer is allowed.
    unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            none.as_ptr(),
            flags,
            std::ptr::null(),
        ) == 0
    }
}

/// Make /run/netns a shared mount point, so that namespaces pinned in it are
/// seen from every mount namespace (what `ip netns add` does too).
fn prepare_dir() {
    let dir = cstr(NETNS_DIR);
    let none = cstr("none");
    // SAFETY: mkdir with a valid C string.
    if unsafe { libc::mkdir(dir.as_ptr(), 0o755) } != 0 && errno() != libc::EEXIST {
        die("create /run/netns");
    }
    if mount(&none, &dir, libc::MS_SHARED | libc::MS_REC) {
        return;
    }
    if errno() != libc::EINVAL {
        die("make /run/netns shared");
    }
    // Not a mount point yet: bind it onto itself first.
    if !mount(&dir, &dir, libc::MS_BIND | libc::MS_REC) {
        die("bind-mount /run/netns");
    }
    if !mount(&none, &dir, libc::MS_SHARED | libc::MS_REC) {
        die("make /run/netns shared");
    }
}

/// Join PID 1's mount namespace. systemd runs even a fully privileged
/// `ExecStartPre=+` in a mount namespace of the service's own when it has
/// PrivateTmp=, and a mount made there would never reach the host.
fn enter_host_mounts() {
    let host = cstr("/proc/1/ns/mnt");
    // SAFETY: open/setns/close on a path we name; this process has one
    // thread, as setns(CLONE_NEWNS) requires.
    unsafe {
        let fd = libc::open(host.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            die("open /proc/1/ns/mnt");
        }
        if libc::setns(fd, libc::CLONE_NEWNS) != 0 {
            die("join the host's mount namespace");
        }
        libc::close(fd);
    }
}

fn add(id: &str, path: &str) {
    prepare_dir();
    let p = cstr(path);
    // SAFETY: open/close with a valid C string.
    unsafe {
        let fd = libc::open(
            p.as_ptr(),
            libc::O_RDONLY | libc::O_CREAT | libc::O_CLOEXEC,
            0o444,
        );
        if fd < 0 {
            die(&format!("create {path}"));
        }
        libc::close(fd);
    }
    let fail = |what: &str| -> ! {
        // SAFETY: unlink with a valid C string.
        let _ = unsafe { libc::unlink(p.as_ptr()) };
        die(what)
    };
    // The namespace podscoped made for the pod (and runs CNI ADD in), else
    // one of our own.
    let handed = podscoped::cni::netns::take_handoff(id);
    let source = match &handed {
        Some(ns) => format!("/proc/self/fd/{}", ns.as_raw_fd()),
        None => {
            // SAFETY: single-threaded; unshare changes only this process.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                fail("unshare network namespace");
            }
            // Its error is the last OS error, which `die` prints.
            if podscoped::cni::netns::loopback_up().is_err() {
                fail("bring loopback up");
            }
            "/proc/self/ns/net".to_owned()
        }
    };
    if !mount(&cstr(&source), &p, libc::MS_BIND) {
        fail(&format!("pin the namespace at {path}"));
    }
}

/// Idempotent: a namespace that is already gone is fine.
fn del(path: &str) {
    let p = cstr(path);
    // SAFETY: umount2/unlink with a valid C string.
    unsafe {
        if libc::umount2(p.as_ptr(), libc::MNT_DETACH) != 0
            && !matches!(errno(), libc::EINVAL | libc::ENOENT)
        {
            die(&format!("unmount {path}"));
        }
        if libc::unlink(p.as_ptr()) != 0 && errno() != libc::ENOENT {
            die(&format!("remove {path}"));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (verb, id) = match args.as_slice() {
        // Before podscoped's own mount namespace is made: /run/netns must
        // already be a shared mount point then, or pins made later (in the
        // host's namespace) never reach the daemon's on a host whose `/` is
        // not shared (systemd in a container, kind-style nodes, nspawn).
        [v] if v == "prepare" => {
            enter_host_mounts();
            prepare_dir();
            return;
        }
        [v, id] if v == "add" || v == "del" => (v.as_str(), id.as_str()),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "usage: podscope-netns add|del ID | podscope-netns prepare"
            );
            exit(2)
        }
    };
    let path = match SandboxId::parse(id) {
        Ok(id) => netns_path_of(&id),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "podscope-netns: {e}");
            exit(2)
        }
    };
    match verb {
        "add" => add(id, &path),
        _ => del(&path),
    }
}
