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
use podscope_api::exec::{ControlMessage, ExecEvent};
use std::os::fd::{AsRawFd, OwnedFd};

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
            writers.spawn_blocking(move || feed(rx, fd));
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stdin_task = match (io.stdin, input) {
            (Some(from), Some(to)) => {
                let stop = stop.clone();
                Some(tokio::task::spawn_blocking(move || {
                    copy_stdin(from, to, &stop)
                }))
            }
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
            // The copy notices within a poll's wait.
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            drop(stdin_task);
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

/// An attacher's copy of a stream, into its descriptor, until the tap
/// lets go. Blocking writes on a thread of the pool: the descriptor is the
/// caller's (a pipe, or podscopectl's own terminal, whose flags are not
/// ours to change).
fn feed(mut rx: tokio::sync::mpsc::Receiver<bytes::Bytes>, fd: OwnedFd) {
    while let Some(b) = rx.blocking_recv() {
        if write_all(&fd, &b).is_err() {
            return;
        }
    }
}

/// Write everything, waiting out a descriptor that is non-blocking.
fn write_all(fd: &OwnedFd, mut b: &[u8]) -> std::io::Result<()> {
    while !b.is_empty() {
        // SAFETY: writing from our buffer to a descriptor we own.
        let n = unsafe { libc::write(fd.as_raw_fd(), b.as_ptr().cast(), b.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::WouldBlock => {
                    wait_for(fd, libc::POLLOUT, 1000);
                }
                std::io::ErrorKind::Interrupted => {}
                _ => return Err(e),
            }
            continue;
        }
        b = &b[n as usize..];
    }
    Ok(())
}

/// poll(2) one descriptor; whether it is ready.
fn wait_for(fd: &OwnedFd, events: libc::c_short, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// The attacher's stdin into the container's (a pipe or the terminal),
/// until its end, an error, or `stop`.
fn copy_stdin(from: OwnedFd, to: OwnedFd, stop: &std::sync::atomic::AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if !wait_for(&from, libc::POLLIN, 200) {
            continue;
        }
        // SAFETY: reading into our buffer from a descriptor we own.
        let n = unsafe { libc::read(from.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            return;
        }
        if n < 0 {
            match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => continue,
                _ => return,
            }
        }
        if write_all(&to, &buf[..n as usize]).is_err() {
            return;
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
