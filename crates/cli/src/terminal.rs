//! The caller's end of an Exec or Attach on this machine (podscopectl).
//! An exec's command gets only pipes and sockets of the caller's
//! (podscoped refuses anything else): a stream of ours that is one goes as
//! it is, any other (a terminal, a file, a directory) through a pipe of
//! ours, copied by a thread (`ExecStreams`). On a terminal the local
//! terminal is put in raw mode, its size follows SIGWINCH, and what is
//! typed is relayed so that ctrl-p ctrl-q can detach (as docker's and
//! crictl's attach do).

use podscope_api::exec::{next_event, ControlMessage, EventReader, ExecEvent, ExecOptions};
use podscope_api::Client;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// ctrl-p then ctrl-q.
const DETACH: [u8; 2] = [0x10, 0x11];

/// What a session ended with: the command's status, or a detach.
pub enum End {
    Exited(i32),
    Detached,
}

/// Run `cmd` (Exec) or attach (None) to container `id`.
pub async fn session(
    m: &Client,
    id: &str,
    cmd: Option<&[String]>,
    stdin: bool,
    tty: bool,
) -> Result<End, String> {
    let stdin_fd = std::io::stdin();
    if tty && !is_terminal(stdin_fd.as_raw_fd()) {
        return Err("-t needs a terminal on stdin".into());
    }
    // On a terminal the typing goes through a pipe of ours (for the
    // detach keys); otherwise the caller's stdin goes as it is.
    let relay = if tty && stdin {
        Some(podscope_sys::pipe::pipe().map_err(|e| format!("pipe: {e}"))?)
    } else {
        None
    };
    let is_exec = cmd.is_some();
    // An exec's terminal is made by the runtime and its master sent back;
    // an attach writes into our descriptors whatever the container is.
    let opts = ExecOptions {
        tty: tty && is_exec,
        stdin,
        stdout: true,
        stderr: !tty,
        timeout_ms: 0,
    };
    let out = std::io::stdout();
    let err = std::io::stderr();
    let mut given: Vec<BorrowedFd<'_>> = Vec::new();
    if !opts.tty {
        if stdin {
            given.push(match &relay {
                Some((r, _)) => r.as_fd(),
                None => stdin_fd.as_fd(),
            });
        }
        given.push(out.as_fd());
        if opts.stderr {
            given.push(err.as_fd());
        }
    }
    // An exec's command gets pipes and sockets only; an attach's streams
    // are the daemon's to copy into, as they are.
    let mut streams = ExecStreams::default();
    if is_exec && !opts.tty {
        let mut fds = given.iter().copied();
        let ours: Vec<OwnedFd> = [
            (stdin, Relay::In),
            (true, Relay::Out),
            (opts.stderr, Relay::Out),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, how)| streams.give(fds.next().expect("one per stream"), how))
        .collect::<std::io::Result<_>>()
        .map_err(|e| format!("relay the exec's streams: {e}"))?;
        streams.given = ours;
    }
    let given: Vec<BorrowedFd<'_>> = if streams.given.is_empty() {
        given
    } else {
        streams.given.iter().map(|f| f.as_fd()).collect()
    };
    let (mine, theirs) =
        std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    match cmd {
        Some(cmd) => m.exec(id, cmd, &opts, &given, theirs.as_fd()).await,
        None => m.attach(id, &opts, &given, theirs.as_fd()).await,
    }
    .map_err(|e| podscope_api::errors::classify(&e).1)?;
    drop(theirs);
    drop(given);
    // Our copies of the pipes' far ends: the output's end comes when the
    // command's side closes.
    streams.given.clear();
    let relay_write = relay.map(|(r, w)| {
        drop(r);
        w
    });
    mine.set_nonblocking(true).map_err(|e| e.to_string())?;
    let writer = mine.try_clone().map_err(|e| e.to_string())?;
    let control = tokio::net::UnixStream::from_std(mine).map_err(|e| e.to_string())?;
    let mut events = EventReader::default();

    let raw = if tty {
        Some(RawMode::enter(stdin_fd.as_raw_fd())?)
    } else {
        None
    };
    let (detach_tx, mut detached) = tokio::sync::oneshot::channel::<()>();
    let mut master: Option<std::sync::Arc<OwnedFd>> = None;
    if opts.tty {
        match next_event(&control, &mut events).await {
            Ok(Some((ExecEvent::Terminal, Some(fd)))) => master = Some(std::sync::Arc::new(fd)),
            Ok(Some((ev, _))) => return finish(ev, raw),
            Ok(None) => return Err("podscoped closed the session".into()),
            Err(e) => return Err(e.to_string()),
        }
    }
    // Sizes: ours to the exec's terminal, or as lines to the daemon.
    let size = {
        let master = master.clone();
        let writer = writer.try_clone().map_err(|e| e.to_string())?;
        move || {
            let Some((w, h)) = window_size(0) else { return };
            match &master {
                Some(m) => set_size(m.as_raw_fd(), w, h),
                None => {
                    let line = ControlMessage::Resize {
                        width: w,
                        height: h,
                    }
                    .line();
                    let _ = (&writer).write_all(&line);
                }
            }
        }
    };
    if tty {
        size();
        tokio::spawn(async move {
            let Ok(mut s) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            else {
                return;
            };
            while s.recv().await.is_some() {
                size();
            }
        });
        // Typing, watched for the detach keys, into the terminal's
        // master or our pipe (a thread: stdin stays blocking, as the
        // shell that shares it expects).
        let sink: Option<OwnedFd> = match (&master, relay_write) {
            (Some(m), _) if stdin => {
                Some(m.as_fd().try_clone_to_owned().map_err(|e| e.to_string())?)
            }
            (None, Some(w)) => Some(w),
            _ => None,
        };
        if let Some(sink) = sink {
            std::thread::spawn(move || type_into(sink, detach_tx));
        }
    }
    if let Some(m) = &master {
        // The terminal's output to ours (EIO: every slave closed).
        let m = m.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            let mut out = std::io::stdout();
            let mut f = std::fs::File::from(m.as_fd().try_clone_to_owned().expect("dup"));
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 || out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
        });
    }
    let ev = tokio::select! {
        e = next_event(&control, &mut events) => e,
        _ = &mut detached => {
            drop(raw);
            return Ok(End::Detached);
        }
    };
    match ev {
        Ok(Some((ev, _))) => {
            // What the terminal still holds comes out first.
            if master.is_some() {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            // And what our pipes still hold.
            let copiers = std::mem::take(&mut streams.copiers);
            let _ = tokio::task::spawn_blocking(move || {
                for c in copiers {
                    let _ = c.join();
                }
            })
            .await;
            finish(ev, raw)
        }
        Ok(None) => Err("podscoped closed the session".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Which way a relayed stream goes.
#[derive(Clone, Copy)]
enum Relay {
    /// Our stdin into the command.
    In,
    /// The command's output to ours.
    Out,
}

/// An exec's streams as the daemon will hand them to the command.
#[derive(Default)]
struct ExecStreams {
    /// What goes to the daemon, in order.
    given: Vec<OwnedFd>,
    /// The threads copying the command's output to ours (ended by the
    /// pipe's end); the one copying our stdin is not waited for.
    copiers: Vec<std::thread::JoinHandle<()>>,
}

impl ExecStreams {
    /// `fd` itself when it is a pipe or a socket, else a pipe of ours
    /// whose other end a thread copies to or from it.
    fn give(&mut self, fd: BorrowedFd<'_>, how: Relay) -> std::io::Result<OwnedFd> {
        if pipe_or_socket(fd)? {
            return fd.try_clone_to_owned();
        }
        let (r, w) = podscope_sys::pipe::pipe()?;
        let ours = std::fs::File::from(fd.try_clone_to_owned()?);
        match how {
            Relay::In => {
                std::thread::spawn(move || copy(ours, std::fs::File::from(w)));
                Ok(r)
            }
            Relay::Out => {
                let reader = std::fs::File::from(r);
                self.copiers
                    .push(std::thread::spawn(move || copy(reader, ours)));
                Ok(w)
            }
        }
    }
}

fn pipe_or_socket(fd: BorrowedFd<'_>) -> std::io::Result<bool> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::File::from(fd.try_clone_to_owned()?)
        .metadata()?
        .file_type();
    Ok(t.is_fifo() || t.is_socket())
}

/// Copy until the end, or an error either side (a directory as stdin
/// reads as an error: the command sees its input end).
fn copy(mut from: std::fs::File, mut to: std::fs::File) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

fn finish(ev: ExecEvent, raw: Option<RawMode>) -> Result<End, String> {
    drop(raw);
    match ev {
        ExecEvent::Exited { exit_code } => Ok(End::Exited(exit_code)),
        ExecEvent::Failed { message, .. } => Err(message),
        ExecEvent::Terminal => Err("a second terminal".into()),
    }
}

/// Copy what is typed into `sink` until stdin ends or ctrl-p ctrl-q.
fn type_into(sink: OwnedFd, detach: tokio::sync::oneshot::Sender<()>) {
    let mut sink = std::fs::File::from(sink);
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 4096];
    let mut held = false;
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut out = Vec::with_capacity(n + 1);
        for &b in &buf[..n] {
            if held {
                held = false;
                if b == DETACH[1] {
                    let _ = detach.send(());
                    return;
                }
                out.push(DETACH[0]);
            }
            if b == DETACH[0] {
                held = true;
            } else {
                out.push(b);
            }
        }
        if sink.write_all(&out).is_err() {
            return;
        }
    }
}

fn is_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty on any descriptor number is harmless.
    unsafe { libc::isatty(fd) == 1 }
}

fn window_size(fd: RawFd) -> Option<(u16, u16)> {
    // SAFETY: TIOCGWINSZ writes one winsize into ours.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    (unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0)
        .then_some((ws.ws_col, ws.ws_row))
}

fn set_size(fd: RawFd, width: u16, height: u16) {
    let ws = libc::winsize {
        ws_row: height,
        ws_col: width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer.
    unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &ws) };
}

/// The local terminal in raw mode until dropped.
struct RawMode {
    fd: RawFd,
    saved: libc::termios,
}

impl RawMode {
    fn enter(fd: RawFd) -> Result<Self, String> {
        // SAFETY: tcgetattr/tcsetattr on our own terminal with valid
        // termios structures.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) != 0 {
                return Err(format!("terminal: {}", std::io::Error::last_os_error()));
            }
            let saved = t;
            libc::cfmakeraw(&mut t);
            if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
                return Err(format!("terminal: {}", std::io::Error::last_os_error()));
            }
            Ok(RawMode { fd, saved })
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restoring the attributes read at entry.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}
