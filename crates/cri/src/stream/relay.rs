//! One exec, from the frontend's side: the pipes made here (it has no
//! privileges, so the descriptors are all it can give), podscoped asked to
//! run the command with them (fd passing over D-Bus), and the bytes
//! relayed between the pipes, or the terminal's master the runtime made,
//! and the client's streams. Dropping the session closes the control
//! socket, which is podscoped's sign to kill the command.

use crate::daemon::Daemon;
use bytes::{Bytes, BytesMut};
use podscope_api::exec::{next_event, EventReader, ExecEvent, ExecOptions};
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// A stream toward the client.
pub trait Output: Send {
    fn write(&mut self, data: Bytes) -> impl Future<Output = std::io::Result<()>> + Send;
    fn close(&mut self) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Failed(String),
}

/// The client's side of one exec or attach.
pub struct ClientIo<O: Output> {
    pub stdin: Option<mpsc::Receiver<Bytes>>,
    pub stdout: Option<O>,
    pub stderr: Option<O>,
    pub resize: Option<mpsc::Receiver<Bytes>>,
    pub tty: bool,
}

/// Reads from a pipe or the terminal at most this much at a time.
const READ_MAX: usize = 128 * 1024;
/// Once the command has ended, its output has this long to drain.
const DRAIN: Duration = Duration::from_secs(10);

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
    // 1 MiB (the unprivileged maximum) rather than 64 KiB: fewer, larger
    // reads and frames for a command that writes a lot. Best effort.
    // SAFETY: F_SETPIPE_SZ on a pipe we own.
    unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    Ok((r, w))
}

/// Run `cmd` in `container_id`, relaying `io`, until it ends.
pub async fn exec<O: Output + 'static>(
    daemon: &Daemon,
    container_id: &str,
    cmd: &[String],
    io: ClientIo<O>,
) -> Outcome {
    match run(daemon, container_id, Some(cmd), io).await {
        Ok(o) => o,
        Err(e) => Outcome::Failed(e),
    }
}

/// Attach `io` to `container_id`'s streams until they end or the client
/// leaves.
pub async fn attach<O: Output + 'static>(
    daemon: &Daemon,
    container_id: &str,
    io: ClientIo<O>,
) -> Outcome {
    match run(daemon, container_id, None, io).await {
        Ok(o) => o,
        Err(e) => Outcome::Failed(e),
    }
}

/// An exec (`cmd`) or an attach (None).
async fn run<O: Output + 'static>(
    daemon: &Daemon,
    container_id: &str,
    cmd: Option<&[String]>,
    io: ClientIo<O>,
) -> Result<Outcome, String> {
    let ClientIo {
        stdin,
        stdout,
        stderr,
        resize,
        tty: client_tty,
    } = io;
    // An attach always goes over pipes: the container's terminal is the
    // daemon's, which sizes it from the control socket.
    let tty = client_tty && cmd.is_some();
    let opts = ExecOptions {
        tty,
        stdin: stdin.is_some(),
        stdout: stdout.is_some(),
        stderr: stderr.is_some() && !client_tty,
        timeout_ms: 0,
    };
    let pipes = |on: bool| -> Result<Option<(OwnedFd, OwnedFd)>, String> {
        if on && !tty {
            pipe().map(Some).map_err(|e| format!("pipe: {e}"))
        } else {
            Ok(None)
        }
    };
    let in_p = pipes(opts.stdin)?;
    let out_p = pipes(opts.stdout)?;
    let err_p = pipes(opts.stderr)?;
    let (mine, theirs) =
        std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    {
        // Theirs: the read end of stdin, the write ends of the outputs.
        let mut given = Vec::new();
        if let Some((r, _)) = &in_p {
            given.push(r.as_fd());
        }
        if let Some((_, w)) = &out_p {
            given.push(w.as_fd());
        }
        if let Some((_, w)) = &err_p {
            given.push(w.as_fd());
        }
        let ctl = theirs.as_fd();
        let opts = &opts;
        let given = &given;
        match cmd {
            Some(cmd) => {
                daemon
                    .call(|m| async move { m.exec(container_id, cmd, opts, given, ctl).await })
                    .await
            }
            None => {
                daemon
                    .call(|m| async move { m.attach(container_id, opts, given, ctl).await })
                    .await
            }
        }
        .map_err(|e| podscope_api::errors::classify(&e).1)?;
    }
    drop(theirs);
    let in_w = in_p.map(|(_, w)| w);
    let out_r = out_p.map(|(r, _)| r);
    let err_r = err_p.map(|(r, _)| r);
    mine.set_nonblocking(true)
        .map_err(|e| format!("control socket: {e}"))?;
    // A duplicate to write the resize lines with; the events are read
    // through the tokio stream, which stays open as long as this session.
    let control_writer = ControlWriter(
        mine.try_clone()
            .map_err(|e| format!("control socket: {e}"))?
            .into(),
    );
    let control =
        tokio::net::UnixStream::from_std(mine).map_err(|e| format!("control socket: {e}"))?;
    let mut events = EventReader::default();

    let mut tasks = tokio::task::JoinSet::new();
    let mut writers = tokio::task::JoinSet::new();
    if tty {
        let master = match next_event(&control, &mut events).await {
            Ok(Some((ExecEvent::Terminal, Some(fd)))) => fd,
            Ok(Some((ExecEvent::Terminal, None))) => {
                return Err("the daemon sent a terminal without its descriptor".into())
            }
            Ok(Some((ev, _))) => return Ok(outcome_of(ev)),
            Ok(None) => return Err("podscoped closed the exec's control socket".into()),
            Err(e) => return Err(format!("exec control: {e}")),
        };
        let master =
            std::sync::Arc::new(Terminal::new(master).map_err(|e| format!("terminal: {e}"))?);
        if let Some(out) = stdout {
            writers.spawn(pump(TerminalReader(master.clone()), out));
        }
        if let Some(stdin) = stdin {
            let m = master.clone();
            tasks.spawn(async move {
                let mut stdin = stdin;
                while let Some(b) = stdin.recv().await {
                    if m.write_all(&b).await.is_err() {
                        break;
                    }
                }
            });
        }
        if let Some(resize) = resize {
            let m = master.clone();
            tasks.spawn(resize_loop(resize, move |w, h| m.resize(w, h)));
        }
    } else {
        if let (Some(r), Some(out)) = (out_r, stdout) {
            writers.spawn(pump(
                PipeReader::new(r).map_err(|e| format!("pipe: {e}"))?,
                out,
            ));
        }
        if let (Some(r), Some(out)) = (err_r, stderr) {
            writers.spawn(pump(
                PipeReader::new(r).map_err(|e| format!("pipe: {e}"))?,
                out,
            ));
        }
        if let (Some(w), Some(stdin)) = (in_w, stdin) {
            tasks.spawn(async move {
                let Ok(mut w) = tokio::net::unix::pipe::Sender::from_owned_fd(w) else {
                    return;
                };
                let mut stdin = stdin;
                while let Some(b) = stdin.recv().await {
                    if w.write_all(&b).await.is_err() {
                        break;
                    }
                }
                // The client's FIN: the command's stdin ends.
            });
        }
        if let (Some(resize), true) = (resize, client_tty) {
            // An attacher's sizes go to the daemon, one line each.
            let ctl = control_writer;
            tasks.spawn(async move {
                let (tx, mut rx) = mpsc::channel::<(u16, u16)>(4);
                let parse = tokio::spawn(resize_loop(resize, move |w, h| {
                    let _ = tx.try_send((w, h));
                }));
                let mut ctl = ctl;
                while let Some((width, height)) = rx.recv().await {
                    let line = podscope_api::exec::ControlMessage::Resize { width, height }.line();
                    if ctl.write_all(&line).await.is_err() {
                        break;
                    }
                }
                parse.abort();
            });
        }
    }
    let outcome = loop {
        match next_event(&control, &mut events).await {
            Ok(Some((ExecEvent::Terminal, _))) => {}
            Ok(Some((ev, _))) => break outcome_of(ev),
            Ok(None) => break Outcome::Failed("podscoped closed the exec's control socket".into()),
            Err(e) => break Outcome::Failed(format!("exec control: {e}")),
        }
    };
    // The output that is still in the pipes or the terminal goes out.
    let _ = tokio::time::timeout(DRAIN, async {
        while writers.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    Ok(outcome)
}

/// Writes lines to the control socket. A line is small and the daemon
/// reads them as they come; a full socket is waited out.
struct ControlWriter(OwnedFd);

impl ControlWriter {
    async fn write_all(&mut self, mut b: &[u8]) -> std::io::Result<()> {
        use nix::sys::socket::{send, MsgFlags};
        while !b.is_empty() {
            match send(
                self.0.as_raw_fd(),
                b,
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(n) => b = &b[n..],
                Err(nix::errno::Errno::EAGAIN) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

fn outcome_of(ev: ExecEvent) -> Outcome {
    match ev {
        ExecEvent::Exited { exit_code } => Outcome::Exited(exit_code),
        ExecEvent::Failed { message, .. } => Outcome::Failed(message),
        ExecEvent::Terminal => Outcome::Failed("a second terminal".into()),
    }
}

/// Something the command's output is read from.
trait Source: Send + 'static {
    /// Wait until a read would not block (so that the buffer is allocated
    /// only once there is something to put in it).
    fn readable(&self) -> impl Future<Output = std::io::Result<()>> + Send;
    fn read(&mut self, buf: &mut BytesMut) -> impl Future<Output = std::io::Result<usize>> + Send;
}

struct PipeReader(tokio::net::unix::pipe::Receiver);

impl PipeReader {
    fn new(fd: OwnedFd) -> std::io::Result<Self> {
        Ok(PipeReader(tokio::net::unix::pipe::Receiver::from_owned_fd(
            fd,
        )?))
    }
}

impl Source for PipeReader {
    async fn readable(&self) -> std::io::Result<()> {
        self.0.readable().await
    }
    async fn read(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        self.0.read_buf(buf).await
    }
}

/// Copy `src` to `out` until its end, then close `out`. The buffer is
/// taken when the first bytes are there, not before: a session that
/// idles (a shell at its prompt) holds none.
async fn pump<S: Source, O: Output>(mut src: S, mut out: O) {
    let mut buf = BytesMut::new();
    loop {
        if buf.capacity() < READ_MAX / 2 {
            if src.readable().await.is_err() {
                break;
            }
            buf.reserve(READ_MAX);
        }
        match src.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let chunk = buf.split().freeze();
                if out.write(chunk).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = out.close().await;
}

/// The terminal's master: read and written without blocking, resized.
struct Terminal(AsyncFd<OwnedFd>);

impl Terminal {
    fn new(fd: OwnedFd) -> std::io::Result<Self> {
        podscope_sys::pipe::set_nonblocking(&fd)?;
        // SAFETY: the AsyncFd owns the OwnedFd, open and the same for its
        // whole life.
        unsafe { AsyncFd::register(fd) }
            .map(Terminal)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    async fn write_all(&self, mut b: &[u8]) -> std::io::Result<()> {
        while !b.is_empty() {
            let mut g = self.0.writable().await?;
            match g.try_io(|fd| {
                nix::unistd::write(fd.get_ref().as_fd(), b).map_err(std::io::Error::from)
            }) {
                Ok(Ok(n)) => b = &b[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    fn resize(&self, width: u16, height: u16) {
        let ws = libc::winsize {
            ws_row: height,
            ws_col: width,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer.
        unsafe { libc::ioctl(self.0.get_ref().as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    }
}

struct TerminalReader(std::sync::Arc<Terminal>);

impl Source for TerminalReader {
    async fn readable(&self) -> std::io::Result<()> {
        // The guard is dropped as it is: read() clears the readiness when
        // it meets EAGAIN.
        self.0 .0.readable().await.map(drop)
    }
    async fn read(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        loop {
            let mut g = self.0 .0.readable().await?;
            let spare = buf.spare_capacity_mut();
            let r = g.try_io(|fd| {
                // SAFETY: reading into the buffer's spare capacity.
                let n = unsafe {
                    libc::read(
                        fd.get_ref().as_raw_fd(),
                        spare.as_mut_ptr().cast(),
                        spare.len(),
                    )
                };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match r {
                Ok(Ok(n)) => {
                    // SAFETY: the kernel wrote n bytes there.
                    unsafe { buf.set_len(buf.len() + n) };
                    return Ok(n);
                }
                // Every slave closed: the terminal's end.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
    }
}

/// Terminal sizes as client-go sends them: JSON objects one after another
/// (`{"Width":80,"Height":24}`), split across frames as it happens.
async fn resize_loop(mut rx: mpsc::Receiver<Bytes>, apply: impl Fn(u16, u16) + Send + 'static) {
    let mut pending: Vec<u8> = Vec::new();
    while let Some(b) = rx.recv().await {
        pending.extend_from_slice(&b);
        let (sizes, used) = parse_sizes(&pending);
        pending.drain(..used);
        for (w, h) in sizes {
            if w > 0 && h > 0 {
                apply(w, h);
            }
        }
        if pending.len() > 4096 {
            // Not sizes: stop listening rather than buffer.
            return;
        }
    }
}

#[derive(serde::Deserialize)]
struct TerminalSize {
    #[serde(alias = "width")]
    #[serde(rename = "Width")]
    width: u16,
    #[serde(alias = "height")]
    #[serde(rename = "Height")]
    height: u16,
}

/// The complete sizes at the front of `b`, and how many bytes they took.
fn parse_sizes(b: &[u8]) -> (Vec<(u16, u16)>, usize) {
    let mut out = Vec::new();
    let mut it = serde_json::Deserializer::from_slice(b).into_iter::<TerminalSize>();
    let mut used = 0;
    loop {
        match it.next() {
            Some(Ok(s)) => {
                out.push((s.width, s.height));
                used = it.byte_offset();
            }
            Some(Err(e)) if e.is_eof() => break,
            Some(Err(_)) => {
                // A value that is not a size: skip past it.
                used = b.len();
                break;
            }
            None => {
                used = b.len();
                break;
            }
        }
    }
    (out, used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_split_and_packed() {
        let (s, used) = parse_sizes(b"{\"Width\":80,\"Height\":24}\n{\"Width\":100,");
        assert_eq!(s, vec![(80, 24)]);
        assert_eq!(used, 24);
        let (s, _) = parse_sizes(b"{\"width\":1,\"height\":2}{\"Width\":3,\"Height\":4}\n");
        assert_eq!(s, vec![(1, 2), (3, 4)]);
    }
}
