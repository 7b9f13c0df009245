//! Attach: a client joins a running container's stdin, stdout and stderr
//! (or its terminal), beside the log file and any other attacher.
//!
//! The caller's descriptors (pipes the frontend made) are fed from the
//! container's log tap (`logs::Tap`: a slow attacher is dropped, never
//! waited for) and feed the container's stdin (a duplicate of its write
//! end, or of its terminal's master). The session lives on the control
//! socket as an exec's does: the caller's terminal sizes come in as lines,
//! the end goes out as `exited` (0: the container's streams ended), and
//! the caller closing it detaches. With `stdin_once`, the first attacher
//! with stdin closes the container's stdin when it lets go of it.

use super::exec::{hang_up_or, tell, tokio_control, ExecIo};
use super::*;
use crate::api::exec::{ControlMessage, ExecEvent};
use std::os::fd::{AsRawFd, OwnedFd};
use tokio::io::AsyncWriteExt;

/// Once the container's streams ended, attachers have this long to take
/// what is queued for them.
const DRAIN: Duration = Duration::from_secs(10);

impl<S: SystemdClient + Clone> Containers<S> {
    /// Join the container's streams with `io`; the session then lives on
    /// `control` (in a task of its own).
    pub async fn attach(
        self: &Arc<Self>,
        entry: &Arc<ContainerEntry>,
        io: ExecIo,
        control: OwnedFd,
    ) -> Result<()> {
        let c = entry.snapshot();
        if c.state != ContainerState::Running || entry.is_removed() {
            return Err(Error::invalid_state(format!(
                "container {} is {}, not running: nothing to attach to",
                c.id,
                c.state.as_str()
            )));
        }
        if io.stdin.is_some() && !c.config.stdin {
            return Err(Error::invalid(
                "stdin",
                format!("container {} was created without stdin", c.id),
            ));
        }
        let what = format!("container {} ({}): attach", c.id, c.config.name);
        let dup = |fd: &Option<OwnedFd>| fd.as_ref().and_then(|f| f.try_clone().ok());
        let (tap, mut end, input, terminal) = {
            let live = self.live.lock().unwrap();
            let Some(l) = live.get(&c.id) else {
                return Err(Error::invalid_state(format!(
                    "{what}: the daemon reads none of its streams"
                )));
            };
            let input = if c.config.tty {
                dup(&l.tty)
            } else {
                dup(&l.stdin)
            };
            (l.tap.clone(), l.end.subscribe(), input, dup(&l.tty))
        };
        let control =
            tokio_control(control).map_err(|e| Error::io(format!("{what}: control socket"), e))?;
        let mut tapped = Vec::new();
        let mut writers = tokio::task::JoinSet::new();
        // A terminal has one stream: the caller's stderr gets nothing.
        let outputs = if c.config.tty {
            vec![(io.stdout, logs::Stream::Stdout)]
        } else {
            vec![
                (io.stdout, logs::Stream::Stdout),
                (io.stderr, logs::Stream::Stderr),
            ]
        };
        for (fd, stream) in outputs {
            let Some(fd) = fd else { continue };
            let (id, rx) = tap.attach(stream);
            tapped.push(id);
            writers.spawn(feed_pipe(rx, fd));
        }
        let stdin_task = match (io.stdin, input) {
            (Some(from), Some(to)) => Some(tokio::spawn(copy_stdin(from, to))),
            _ => None,
        };
        let stdin_once = c.config.stdin_once && stdin_task.is_some();
        let this = self.clone();
        let id = c.id.clone();
        tokio::spawn(async move {
            let resize = |m: ControlMessage| match m {
                ControlMessage::Resize { width, height } => {
                    if let Some(t) = &terminal {
                        set_size(t, width, height);
                    }
                }
            };
            let mut stdin_task = stdin_task;
            let ended = async {
                let _ = end.wait_for(|e| *e != End::Running).await;
            };
            let stdin_done = async {
                match stdin_task.as_mut() {
                    Some(t) => {
                        let _ = t.await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = hang_up_or(&control, resize) => {}
                _ = ended => {}
                _ = async {
                    stdin_done.await;
                    if stdin_once {
                        // The first attacher's stdin ended: so does the
                        // container's.
                        this.close_stdin(&id).await;
                    }
                    std::future::pending::<()>().await
                } => {}
            }
            if let Some(t) = stdin_task {
                t.abort();
            }
            if stdin_once {
                this.close_stdin(&id).await;
            }
            for t in tapped {
                tap.detach(t);
            }
            let _ = tokio::time::timeout(DRAIN, async {
                while writers.join_next().await.is_some() {}
            })
            .await;
            tell(&control, &ExecEvent::Exited { exit_code: 0 }, None);
        });
        Ok(())
    }

    /// stdin_once: every write end of the container's stdin goes (the
    /// daemon's, the pod's init's), so the container reads its end.
    async fn close_stdin(&self, id: &ContainerId) {
        let had = self
            .live
            .lock()
            .unwrap()
            .get_mut(id)
            .and_then(|l| l.stdin.take());
        if had.is_none() {
            return;
        }
        drop(had);
        if let Some(entry) = self.registry.get(id) {
            let c = entry.snapshot();
            self.release_holding(&c, format!("{}-stdin", Self::holding(id)))
                .await;
        }
    }
}

/// An attacher's copy of a stream, into its pipe, until the tap lets go.
async fn feed_pipe(mut rx: tokio::sync::mpsc::Receiver<bytes::Bytes>, fd: OwnedFd) {
    let Ok(mut w) = tokio::net::unix::pipe::Sender::from_owned_fd(fd) else {
        return;
    };
    while let Some(b) = rx.recv().await {
        if w.write_all(&b).await.is_err() {
            return;
        }
    }
}

/// The attacher's stdin into the container's (a pipe or the terminal).
async fn copy_stdin(from: OwnedFd, to: OwnedFd) {
    use tokio::io::AsyncReadExt;
    let Ok(mut r) = tokio::net::unix::pipe::Receiver::from_owned_fd(from) else {
        return;
    };
    if logs::set_nonblocking(&to).is_err() {
        return;
    }
    let Ok(to) = logs::async_fd_rw(to) else {
        return;
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut data = &buf[..n];
        while !data.is_empty() {
            let Ok(mut g) = to.writable().await else {
                return;
            };
            // SAFETY: writing from our buffer to a descriptor we own.
            let w =
                unsafe { libc::write(to.get_ref().as_raw_fd(), data.as_ptr().cast(), data.len()) };
            if w < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    g.clear_ready();
                    continue;
                }
                return;
            }
            data = &data[w as usize..];
        }
    }
}

fn set_size(t: &OwnedFd, width: u16, height: u16) {
    if width == 0 || height == 0 {
        return;
    }
    let ws = libc::winsize {
        ws_row: height,
        ws_col: width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer.
    unsafe { libc::ioctl(t.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
}
