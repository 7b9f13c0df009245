//! The pod's init as the second holder of its containers' pipes.
//!
//! A container's stdout and stderr are pipes whose read ends the daemon
//! reads. Were the daemon the only holder, a container writing while it is
//! down would get EPIPE (and SIGPIPE) the moment its pipe had no reader.
//! systemd's file descriptor store would hold them across a restart, but
//! systemd 252 empties it when the unit stops (`FileDescriptorStorePreserve=`
//! came in 254), and an admin's `systemctl stop podscoped` must kill no
//! container and lose no line. So the pod's own init, which outlives the
//! daemon and is there anyway, holds a copy of each read end (and of a TTY
//! container's terminal, and of a stdin pipe's write end); the daemon takes
//! them back at start. Data written meanwhile waits in the pipe (1 MiB),
//! after which the container's writes block until the daemon reads again.
//!
//! The protocol, over a SOCK_SEQPACKET socket the init listens on at
//! `<run_dir>/sandboxes/<pod id>/init.sock` (root's alone):
//!
//!     H<name> + fds   hold these under <name> (replacing)  -> K
//!     D<name>         close what <name> holds               -> K
//!     G               every holding: F<name> + fds ..., then E
//!
//! `N<text>` answers a request it could not do.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most descriptors one holding carries (stdin, stdout, stderr).
pub const MAX_FDS: usize = 3;
/// Longest holding name.
pub const NAME_MAX: usize = 128;
const TIMEOUT: Duration = Duration::from_secs(5);

pub fn socket_path(pod_dir: &Path) -> PathBuf {
    pod_dir.join("init.sock")
}

fn connect(sock: &Path) -> io::Result<OwnedFd> {
    // SAFETY: socket(2); the fd is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let addr = nix::sys::socket::UnixAddr::new(sock).map_err(io::Error::from)?;
    nix::sys::socket::connect(fd.as_raw_fd(), &addr).map_err(io::Error::from)?;
    // A stalled init must not hold the daemon.
    let s = UnixStream::from(fd);
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    Ok(s.into())
}

fn send(sock: RawFd, msg: &[u8], fds: &[RawFd]) -> io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let iov = [io::IoSlice::new(msg)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    sendmsg::<()>(sock, &iov, cmsgs, MsgFlags::empty(), None).map_err(io::Error::from)?;
    Ok(())
}

/// One message and the descriptors that came with it.
fn recv(sock: RawFd) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut buf = vec![0u8; 1 + NAME_MAX + 64];
    let mut cspace = nix::cmsg_space!([RawFd; MAX_FDS]);
    let mut iov = [io::IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(
        sock,
        &mut iov,
        Some(&mut cspace),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    let mut fds = Vec::new();
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(v) = c {
            // SAFETY: descriptors the kernel just installed for us.
            fds.extend(v.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
        }
    }
    let n = msg.bytes;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the init hung up",
        ));
    }
    buf.truncate(n);
    Ok((buf, fds))
}

fn answer(sock: RawFd) -> io::Result<()> {
    let (m, _) = recv(sock)?;
    match m.first() {
        Some(b'K') => Ok(()),
        Some(b'N') => Err(io::Error::other(format!(
            "the pod's init refused: {}",
            String::from_utf8_lossy(&m[1..])
        ))),
        _ => Err(io::Error::other(
            "the pod's init gave an answer it should not",
        )),
    }
}

fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.len() > NAME_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad holding name",
        ));
    }
    Ok(())
}

/// Have the init hold `fds` under `name`.
pub fn hold(sock: &Path, name: &str, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    check_name(name)?;
    if fds.is_empty() || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "1 to 3 descriptors",
        ));
    }
    let s = connect(sock)?;
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    send(s.as_raw_fd(), format!("H{name}").as_bytes(), &raw)?;
    answer(s.as_raw_fd())
}

/// Have the init close what it holds under `name` (nothing held is fine).
pub fn release(sock: &Path, name: &str) -> io::Result<()> {
    check_name(name)?;
    let s = connect(sock)?;
    send(s.as_raw_fd(), format!("D{name}").as_bytes(), &[])?;
    answer(s.as_raw_fd())
}

/// Everything the init holds, by name (copies: it keeps holding them).
pub fn take_all(sock: &Path) -> io::Result<Vec<(String, Vec<OwnedFd>)>> {
    let s = connect(sock)?;
    send(s.as_raw_fd(), b"G", &[])?;
    let mut out = Vec::new();
    loop {
        let (m, fds) = recv(s.as_raw_fd())?;
        match m.first() {
            Some(b'F') => out.push((String::from_utf8_lossy(&m[1..]).into_owned(), fds)),
            Some(b'E') => return Ok(out),
            _ => {
                return Err(io::Error::other(
                    "the pod's init gave an answer it should not",
                ))
            }
        }
    }
}
