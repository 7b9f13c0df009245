//! Pod network namespaces held by the daemon itself, and the handoff that
//! lets `podscope-netns@<id>.service` pin the very namespace the daemon
//! made.
//!
//! Why: every process systemd starts for a unit is moved into the unit's
//! cgroup, and on a node without cgroup2's `favordynmods` a lone move waits
//! for an RCU grace period (~8 ms on a small VM, plus the exec). Create and
//! Stop used to run that unit process *before* CNI ADD and *after* DEL, so
//! its cost added to the plugins'. With the namespace held open by the
//! daemon, ADD and DEL run in it (at `/proc/<daemon>/fd/<fd>`) while the
//! unit pins or unpins it at the same time. The order CNI sees is the same:
//! ADD into a namespace that exists, DEL while it still exists.
//!
//! The unit's helper gets the namespace over a unix socket (SCM_RIGHTS):
//! opening `/proc/<daemon>/fd/<fd>` would need a ptrace capability the
//! helper does not have (the daemon holds more capabilities than it).

use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Where `podscope-netns add <id>` asks the daemon for the namespace to
/// pin: it sends the id and a newline, and gets the namespace's descriptor
/// (SCM_RIGHTS) with one byte, or the byte alone when none is offered.
/// Without an answer the helper makes a new namespace (an admin starting the
/// unit, or Start bringing a namespace back after a reboot).
pub const HANDOFF_SOCKET: &str = "/run/podscope/netns-handoff.sock";
/// How long the helper waits for the daemon's answer.
const HANDOFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

const NSFS_MAGIC: libc::c_long = 0x6e73_6673;
/// ioctl(NS_GET_NSTYPE) from linux/nsfs.h: _IO(0xb7, 0x3).
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

/// Whether `fd` is a network namespace.
fn is_netns(fd: &impl AsRawFd) -> bool {
    // SAFETY: fstatfs/ioctl on a descriptor we hold, into a zeroed struct.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::fstatfs(fd.as_raw_fd(), &mut st) == 0
            && st.f_type as libc::c_long == NSFS_MAGIC
            && libc::ioctl(fd.as_raw_fd(), NS_GET_NSTYPE as _) == libc::CLONE_NEWNET
    }
}

/// Bring `lo` up in the calling thread's network namespace.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket/ioctl on a zeroed ifreq we own; the socket is closed
    // by OwnedFd.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let sock = OwnedFd::from_raw_fd(fd);
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) < 0 {
            return Err(io::Error::last_os_error());
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A network namespace the daemon holds open: it lives as long as this
/// does, whatever happens to any pin, and the daemon's children (CNI
/// plugins) reach it at `path()`.
#[derive(Debug)]
pub struct HeldNetns(std::fs::File);

impl HeldNetns {
    /// A new namespace with loopback up, made in a thread of its own (the
    /// thread's namespace changes and the thread ends; the daemon's other
    /// threads never see it).
    pub fn create() -> io::Result<HeldNetns> {
        std::thread::Builder::new()
            .name("podscope-netns".into())
            .spawn(|| {
                // SAFETY: unshare affects only this thread's network namespace.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                loopback_up()?;
                std::fs::File::open("/proc/thread-self/ns/net").map(HeldNetns)
            })?
            .join()
            .map_err(|_| io::Error::other("the namespace thread panicked"))?
    }

    pub fn path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.0.as_raw_fd())
    }

    /// Whether `pin` pins this very namespace.
    pub fn is_pinned_at(&self, pin: &str) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.0.metadata(), std::fs::metadata(pin)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    fn dup(&self) -> io::Result<OwnedFd> {
        self.0.as_fd().try_clone_to_owned()
    }
}

/// The daemon's end of the handoff: namespaces offered by sandbox id, and
/// the listener that gives them to the helper that asks.
#[derive(Default)]
pub struct Handoffs {
    offered: Mutex<HashMap<String, OwnedFd>>,
}

impl Handoffs {
    /// Listen on HANDOFF_SOCKET (root only), replacing a stale socket.
    pub fn listen(self: &Arc<Self>) -> io::Result<()> {
        let path = Path::new(HANDOFF_SOCKET);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let _ = std::fs::remove_file(path);
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let this = Arc::clone(self);
        std::thread::Builder::new()
            .name("netns-handoff".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    if let Err(e) = this.answer(conn) {
                        tracing::warn!("netns handoff: {e}");
                    }
                }
            })?;
        Ok(())
    }

    /// Offer `ns` for sandbox `id` until the returned guard is dropped.
    pub fn offer(self: &Arc<Self>, id: &str, ns: &HeldNetns) -> io::Result<Offer> {
        self.offered
            .lock()
            .unwrap()
            .insert(id.to_owned(), ns.dup()?);
        Ok(Offer {
            handoffs: Arc::clone(self),
            id: id.to_owned(),
        })
    }

    /// One helper's request: from root only; a descriptor if one is offered.
    fn answer(&self, mut conn: std::os::unix::net::UnixStream) -> io::Result<()> {
        use std::io::{BufRead, Write};
        conn.set_read_timeout(Some(HANDOFF_TIMEOUT))?;
        conn.set_write_timeout(Some(HANDOFF_TIMEOUT))?;
        let peer = nix::sys::socket::getsockopt(&conn, nix::sys::socket::sockopt::PeerCredentials)
            .map_err(io::Error::from)?;
        if peer.uid() != 0 {
            return Err(io::Error::other(format!(
                "uid {} asked; root only",
                peer.uid()
            )));
        }
        let mut id = String::new();
        std::io::BufReader::new(conn.try_clone()?)
            .take(80)
            .read_line(&mut id)?;
        let offered = self.offered.lock().unwrap();
        let Some(fd) = offered.get(id.trim()) else {
            return conn.write_all(b"-");
        };
        let fds = [fd.as_raw_fd()];
        let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&fds)];
        nix::sys::socket::sendmsg::<()>(
            conn.as_raw_fd(),
            &[std::io::IoSlice::new(b"+")],
            &cmsg,
            nix::sys::socket::MsgFlags::empty(),
            None,
        )
        .map_err(io::Error::from)?;
        Ok(())
    }
}

/// Withdraws an offer when dropped.
pub struct Offer {
    handoffs: Arc<Handoffs>,
    id: String,
}

impl Drop for Offer {
    fn drop(&mut self) {
        self.handoffs.offered.lock().unwrap().remove(&self.id);
    }
}

/// For `podscope-netns add`: the namespace the daemon offers for `id`, if
/// it runs, offers one, and that is a network namespace.
pub fn take_handoff(id: &str) -> Option<OwnedFd> {
    use std::io::Write;
    let mut conn = std::os::unix::net::UnixStream::connect(HANDOFF_SOCKET).ok()?;
    conn.set_read_timeout(Some(HANDOFF_TIMEOUT)).ok()?;
    conn.set_write_timeout(Some(HANDOFF_TIMEOUT)).ok()?;
    conn.write_all(format!("{id}\n").as_bytes()).ok()?;
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = nix::sys::socket::recvmsg::<()>(
        conn.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .ok()?;
    let mut fd = None;
    for c in msg.cmsgs().ok()? {
        if let nix::sys::socket::ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: the kernel just gave us this descriptor.
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                fd.get_or_insert(owned);
            }
        }
    }
    fd.filter(is_netns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_network_namespaces_count() {
        let net = std::fs::File::open("/proc/self/ns/net").unwrap();
        assert!(is_netns(&net));
        let uts = std::fs::File::open("/proc/self/ns/uts").unwrap();
        assert!(
            !is_netns(&uts),
            "a UTS namespace is not a network namespace"
        );
        let plain = std::fs::File::open("/proc/self/status").unwrap();
        assert!(!is_netns(&plain));
        let held = HeldNetns(net);
        assert!(held
            .path()
            .starts_with(&format!("/proc/{}/fd/", std::process::id())));
        assert!(held.is_pinned_at("/proc/self/ns/net"));
        assert!(!held.is_pinned_at("/proc/self/ns/uts"));
    }
}
