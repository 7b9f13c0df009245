//! Exec's contract: its options (an `a{sv}`), and what the daemon says on
//! the control socket the caller hands it.
//!
//! `Exec` answers as soon as the command's unit is started; the session
//! then lives on the control socket (one end of a socketpair the caller
//! made): the daemon writes one JSON line per event, the terminal's master
//! riding on its `terminal` line (SCM_RIGHTS), and the caller closing its
//! end is the hang-up that kills the command. So no D-Bus call stays
//! pending for as long as a shell runs, and a caller that dies takes its
//! commands with it.

use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use zbus::zvariant::{SerializeDict, Type};

/// Exec's `options`.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct ExecOptions {
    /// A terminal: the runtime makes it in the container, and its master
    /// comes back on the control socket; `stdio` is then empty.
    pub tty: bool,
    /// Which of the command's standard streams are given, in this order,
    /// in `stdio` (without a terminal). The others are /dev/null.
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    /// Killed after this long; 0 is never.
    pub timeout_ms: u64,
}

impl ExecOptions {
    /// How many descriptors `stdio` must hold.
    pub fn stdio_count(&self) -> usize {
        if self.tty {
            0
        } else {
            usize::from(self.stdin) + usize::from(self.stdout) + usize::from(self.stderr)
        }
    }
}

/// One line on the control socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ExecEvent {
    /// The terminal's master rides on this line.
    Terminal,
    /// The command ended: its status, or 128 + the signal that killed it.
    Exited { exit_code: i32 },
    /// It could not run, or was killed for the timeout or a hang-up: the
    /// D-Bus error name and message, as a failed call would carry them.
    Failed { name: String, message: String },
}

/// What the caller may say on the control socket (one JSON line each):
/// an attacher's terminal size, which the daemon applies to the
/// container's terminal (an exec's caller holds its terminal's master and
/// sizes it itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ControlMessage {
    Resize { width: u16, height: u16 },
}

impl ControlMessage {
    pub fn line(&self) -> Vec<u8> {
        let mut l = serde_json::to_vec(self).expect("a message serialises");
        l.push(b'\n');
        l
    }
}

/// Lines are short; anything longer is not the daemon speaking.
pub const LINE_MAX: usize = 64 * 1024;

/// Write one event (and the terminal's master with it), blocking.
pub fn send_event(
    sock: BorrowedFd<'_>,
    ev: &ExecEvent,
    fd: Option<&OwnedFd>,
) -> std::io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let mut line = serde_json::to_vec(ev).expect("an event serialises");
    line.push(b'\n');
    let fds: Vec<RawFd> = fd.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    let mut sent = 0;
    while sent < line.len() {
        let iov = [std::io::IoSlice::new(&line[sent..])];
        let c = if sent == 0 { cmsgs } else { &[] };
        match sendmsg::<()>(sock.as_raw_fd(), &iov, c, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(n) => sent += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                let mut p = [libc::pollfd {
                    fd: sock.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                // SAFETY: one valid pollfd. A reader that stays away for
                // a second loses the line.
                if unsafe { libc::poll(p.as_mut_ptr(), 1, 1000) } <= 0 {
                    return Err(std::io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads events from the caller's end of the control socket.
#[derive(Default)]
pub struct EventReader {
    buf: Vec<u8>,
    fds: Vec<OwnedFd>,
}

impl EventReader {
    /// The next complete event in what was read so far, with the
    /// descriptor that came with a `terminal` line.
    pub fn next_event(&mut self) -> std::io::Result<Option<(ExecEvent, Option<OwnedFd>)>> {
        let Some(nl) = self.buf.iter().position(|&b| b == b'\n') else {
            if self.buf.len() > LINE_MAX {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "exec control: a line longer than 64 KiB",
                ));
            }
            return Ok(None);
        };
        let line: Vec<u8> = self.buf.drain(..=nl).collect();
        let ev: ExecEvent = serde_json::from_slice(&line[..nl]).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("exec control: {e}"),
            )
        })?;
        let fd = if ev == ExecEvent::Terminal && !self.fds.is_empty() {
            Some(self.fds.remove(0))
        } else {
            None
        };
        Ok(Some((ev, fd)))
    }

    /// One non-blocking read: false at the end of the stream.
    pub fn read_some(&mut self, sock: RawFd) -> std::io::Result<bool> {
        use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
        let mut chunk = [0u8; 4096];
        let mut iov = [std::io::IoSliceMut::new(&mut chunk)];
        let mut cspace = nix::cmsg_space!([RawFd; 2]);
        let msg = recvmsg::<()>(
            sock,
            &mut iov,
            Some(&mut cspace),
            MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
        )
        .map_err(std::io::Error::from)?;
        let n = msg.bytes;
        for c in msg.cmsgs().map_err(std::io::Error::from)? {
            if let ControlMessageOwned::ScmRights(fds) = c {
                for fd in fds {
                    // SAFETY: a descriptor the kernel just gave us.
                    self.fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }
}

/// Read the next event from a tokio unix stream (the caller's end).
pub async fn next_event(
    sock: &tokio::net::UnixStream,
    reader: &mut EventReader,
) -> std::io::Result<Option<(ExecEvent, Option<OwnedFd>)>> {
    loop {
        if let Some(ev) = reader.next_event()? {
            return Ok(Some(ev));
        }
        sock.readable().await?;
        match sock.try_io(tokio::io::Interest::READABLE, || {
            reader.read_some(sock.as_raw_fd())
        }) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{from_dict, to_dict};

    #[test]
    fn options_survive_the_bus() {
        let o = ExecOptions {
            tty: false,
            stdin: true,
            stdout: true,
            stderr: false,
            timeout_ms: 5,
        };
        let back: ExecOptions = from_dict(None, &to_dict(&o).unwrap()).unwrap();
        assert_eq!(back, o);
        assert_eq!(o.stdio_count(), 2);
        let tty = ExecOptions {
            tty: true,
            stdin: true,
            stdout: true,
            ..Default::default()
        };
        assert_eq!(tty.stdio_count(), 0);
    }

    #[test]
    fn events_and_the_terminal_cross_a_socketpair() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsFd;
        let (r, _w) = nix::unistd::pipe().unwrap();
        send_event(a.as_fd(), &ExecEvent::Terminal, Some(&r)).unwrap();
        send_event(a.as_fd(), &ExecEvent::Exited { exit_code: 3 }, None).unwrap();
        drop(a);
        let mut rd = EventReader::default();
        let mut got = Vec::new();
        b.set_nonblocking(true).unwrap();
        while rd.read_some(b.as_raw_fd()).unwrap() {}
        while let Some((ev, fd)) = rd.next_event().unwrap() {
            got.push((ev, fd.is_some()));
        }
        assert_eq!(
            got,
            vec![
                (ExecEvent::Terminal, true),
                (ExecEvent::Exited { exit_code: 3 }, false)
            ]
        );
    }

    #[test]
    fn a_garbled_line_is_an_error() {
        let mut rd = EventReader {
            buf: b"{\"event\":\"nope\"}\n".to_vec(),
            fds: vec![],
        };
        assert!(rd.next_event().is_err());
    }
}
