//! Exec: a command run in a running container, as the OCI runtime's
//! `exec` does it. One path for both callers: ExecSync (the daemon's own
//! pipes, output captured and capped, killed at the timeout) and the
//! streaming Exec (the caller's pipes, or a terminal the runtime makes in
//! the container, killed when the caller hangs up).
//!
//! The daemon cannot run the runtime itself: its own sandbox (capability
//! bounding set, no_new_privs, seccomp, a mount namespace of its own)
//! would be the command's too. So the exec is a transient oneshot service
//! in the pod's slice, started by systemd as the container was, its
//! standard streams the descriptors given. Its main process is
//! podscope-init `--exec-wait`, which runs the runtime's `exec --detach`
//! and waits for the command alone: the runtime exits once the command
//! runs, and the unit ends when the command does (what it left in the
//! background goes with the unit's cgroup). `AddRef=` keeps the unit, and
//! with it the command's exit status, until the daemon has read it (or its
//! bus connection goes, which ends the reference too). Everything the
//! command starts is in that unit's cgroup, so one KillUnit ends it all.

use super::*;
use podscope_api::exec::{send_event, ExecEvent};
use std::os::fd::OwnedFd;

/// Each of stdout and stderr is kept up to this; the rest is read and
/// dropped (so the command never blocks on a full pipe). Both fit one D-Bus
/// reply (the system bus takes 32 MiB a message).
pub const OUTPUT_MAX: usize = 8 * 1024 * 1024;

/// How long the runtime has to hand over a terminal's master.
const TERMINAL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The command's standard streams: descriptors (None = /dev/null), or a
/// terminal the runtime makes.
#[derive(Debug, Default)]
pub struct ExecIo {
    pub tty: bool,
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

/// A started exec: its unit's job runs until the command ends.
pub struct RunningExec {
    unit: String,
    /// Says what and where, for errors and logs.
    what: String,
    container_id: ContainerId,
    handler_name: String,
    job: tokio::task::JoinHandle<Result<()>>,
    terminal: Option<tokio::task::JoinHandle<std::io::Result<OwnedFd>>>,
    files: Vec<PathBuf>,
    runtime_log: PathBuf,
    /// Where the runtime wrote the command's PID.
    pid_file: PathBuf,
    started: std::time::Instant,
    /// From the call to the unit's start being asked (the process file
    /// written, the terminal's socket bound).
    prepare: Duration,
}

/// Why an exec was ended before its command was.
enum Cut {
    Timeout(Duration),
    HangUp,
}

impl<S: SystemdClient + Clone> Containers<S> {
    /// Start `cmd` in the container with `io`.
    pub async fn start_exec(
        &self,
        entry: &Arc<ContainerEntry>,
        cmd: Vec<String>,
        io: ExecIo,
    ) -> Result<RunningExec> {
        let started = std::time::Instant::now();
        if cmd.is_empty() {
            return Err(Error::invalid("cmd", "must not be empty"));
        }
        if cmd.iter().any(|a| a.contains('\0')) {
            return Err(Error::invalid("cmd", "contains a NUL byte"));
        }
        let c = entry.snapshot();
        if c.state != ContainerState::Running || entry.is_removed() {
            return Err(Error::invalid_state(format!(
                "container {} is {}, not running: nothing to exec in",
                c.id,
                c.state.as_str()
            )));
        }
        let pod = self
            .pods
            .get(&c.pod_id)
            .ok_or_else(|| Error::not_found(format!("sandbox {} is gone", c.pod_id)))?;
        let (handler_name, handler) = self.runtime_of(&pod.snapshot())?;
        let what = format!("container {} ({}): exec {:?}", c.id, c.config.name, cmd[0]);
        let xid = podscope_api::domain::ContainerId::random().as_str()[..16].to_owned();
        let unit = format!("podscope-exec-{}-{xid}.service", c.id.short());
        let dir = self.run_dir(&c.id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("{what}: {}", dir.display()), e))?;
        // The container's own process (user, groups, environment,
        // capabilities, working directory, no_new_privs) with `cmd` as its
        // argv, as containerd hands runc an exec: a bare `crun exec`
        // would run as root.
        let process_file = dir.join(format!("exec-{xid}.json"));
        self.write_exec_process(&c, &cmd, io.tty, &process_file)
            .with_context(|| what.clone())?;
        let runtime_log = dir.join(format!("exec-{xid}.log"));
        let mut files = vec![process_file.clone(), runtime_log.clone()];
        let terminal = if io.tty {
            // Not beside the others: a socket's path must fit sun_path.
            let sockets = self.settings.run_dir.join("exec");
            let _ = std::fs::create_dir_all(&sockets);
            let path = sockets.join(format!("{xid}.sock"));
            let l = tokio::net::UnixListener::bind(&path)
                .map_err(|e| Error::io(format!("{what}: listen on {}", path.display()), e));
            let l = match l {
                Ok(l) => l,
                Err(e) => {
                    remove_files(&files);
                    return Err(e);
                }
            };
            files.push(path.clone());
            Some((path, l))
        } else {
            None
        };
        let pid_file = dir.join(format!("exec-{xid}.pid"));
        files.push(pid_file.clone());
        let pid_arg = pid_file.display().to_string();
        let log_arg = format!("--log={}", runtime_log.display());
        let process_arg = process_file.display().to_string();
        let mut args = vec![
            log_arg.as_str(),
            "exec",
            "--detach",
            "--pid-file",
            &pid_arg,
            "--process",
            &process_arg,
        ];
        let console = terminal.as_ref().map(|(p, _)| p.display().to_string());
        if let Some(c) = &console {
            args.extend(["--console-socket", c]);
        }
        args.push(c.id.as_str());
        let stdio = |fd: Option<OwnedFd>| match fd {
            Some(fd) => Prop::Fd(Arc::new(fd)),
            None => Prop::Str("null".into()),
        };
        let (in_name, out_name, err_name) = (
            if io.stdin.is_some() {
                "StandardInputFileDescriptor"
            } else {
                "StandardInput"
            },
            if io.stdout.is_some() {
                "StandardOutputFileDescriptor"
            } else {
                "StandardOutput"
            },
            if io.stderr.is_some() {
                "StandardErrorFileDescriptor"
            } else {
                "StandardError"
            },
        );
        // The command in the container's cgroup, as runc puts it itself:
        // crun, managing no cgroup, would leave it in the exec's unit,
        // outside the container's limits and (v2) its cgroup namespace's
        // root. On v1 each controller is a hierarchy of its own: not done.
        let join = (self.cgroup_v2 && handler.kind() == Some(RuntimeKind::Crun)).then(|| {
            format!(
                "{}/{}/cgroup.procs",
                unified::CGROUP_V2_ROOT,
                c.cgroup_path().trim_start_matches('/')
            )
        });
        let props = vec![
            (
                "Description",
                Prop::Str(format!(
                    "podscope exec in container {}/{} ({})",
                    c.pod_name,
                    c.config.name,
                    c.id.short()
                )),
            ),
            ("Slice", Prop::Str(c.slice.clone())),
            ("Type", Prop::Str("oneshot".into())),
            ("AddRef", Prop::Bool(true)),
            (
                "ExecStart",
                Prop::Exec(vec![exec_wait(
                    &self.settings.init_path,
                    &pid_arg,
                    join.as_deref(),
                    unit::command(handler, &args, false),
                )]),
            ),
            (in_name, stdio(io.stdin)),
            (out_name, stdio(io.stdout)),
            (err_name, stdio(io.stderr)),
            // The timeout is ours; systemd's start timeout must not cut a
            // long command (kubelet's probes, a debug shell) short first.
            ("TimeoutStartUSec", Prop::U64(u64::MAX)),
            ("KillMode", Prop::Str("control-group".into())),
        ];
        let systemd = self.systemd.clone();
        let job_unit = unit.clone();
        // The job ends when the command does (a oneshot's start); a year
        // stands for never, the caller's timeout is applied in `finish`.
        let job = tokio::spawn(async move {
            systemd
                .start_transient(&job_unit, props, Duration::from_secs(365 * 24 * 3600))
                .await
        });
        let terminal = terminal.map(|(_, l)| tokio::spawn(super::start::receive_console(l)));
        Ok(RunningExec {
            unit,
            what,
            container_id: c.id.clone(),
            handler_name: handler_name.to_owned(),
            job,
            terminal,
            files,
            runtime_log,
            pid_file,
            started,
            prepare: started.elapsed(),
        })
    }

    /// Run `cmd` in the container, its output captured; `timeout` zero is
    /// none.
    pub async fn exec_sync(
        &self,
        entry: &Arc<ContainerEntry>,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput> {
        let io = |e: std::io::Error| Error::io(format!("container {}: exec: pipes", entry.id), e);
        let (out_r, out_w) = podscope_sys::pipe::pipe().map_err(io)?;
        let (err_r, err_w) = podscope_sys::pipe::pipe().map_err(io)?;
        let stdout = tokio::spawn(collect(out_r));
        let stderr = tokio::spawn(collect(err_r));
        let run = self
            .start_exec(
                entry,
                cmd,
                ExecIo {
                    tty: false,
                    stdin: None,
                    stdout: Some(out_w),
                    stderr: Some(err_w),
                },
            )
            .await;
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                stdout.abort();
                stderr.abort();
                return Err(e);
            }
        };
        let limit = if timeout.is_zero() {
            None
        } else {
            Some(timeout)
        };
        let code = self.finish_exec(run, limit, std::future::pending()).await;
        match code {
            Ok(exit_code) => Ok(ExecOutput {
                exit_code,
                stdout: stdout.await.unwrap_or_default(),
                stderr: stderr.await.unwrap_or_default(),
            }),
            Err(e) => {
                stdout.abort();
                stderr.abort();
                Err(e)
            }
        }
    }

    /// The streaming Exec's life after its start: the terminal's master
    /// and the end go to `control`; the caller closing it kills the
    /// command. Never fails: what went wrong is the last event.
    pub async fn supervise_exec(
        &self,
        mut run: RunningExec,
        control: OwnedFd,
        timeout: Option<Duration>,
    ) {
        let control = match tokio_control(control) {
            Ok(c) => c,
            Err(e) => {
                warn!(container_id = %run.container_id, "{}: control socket: {e}", run.what);
                let _ = self
                    .finish_exec(run, Some(Duration::ZERO), std::future::pending())
                    .await;
                return;
            }
        };
        let (hung_up_tx, hung_up) = tokio::sync::oneshot::channel::<()>();
        let watch = {
            let control = control.clone();
            tokio::spawn(async move {
                hang_up(&control).await;
                let _ = hung_up_tx.send(());
            })
        };
        let mut hung_up = hung_up;
        // A oneshot is not to be awaited again once it answered.
        let mut gone = false;
        if let Some(term) = run.terminal.take() {
            tokio::select! {
                t = tokio::time::timeout(TERMINAL_TIMEOUT, term) => {
                    let master = match t {
                        Ok(Ok(Ok(fd))) => Ok(fd),
                        Ok(Ok(Err(e))) => Err(e.to_string()),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err("the runtime sent no terminal".to_owned()),
                    };
                    match master {
                        Ok(fd) => {
                            tell(&control, &ExecEvent::Terminal, Some(&fd));
                        }
                        Err(e) => {
                            // The job's end says more (the runtime's own
                            // words) if it has ended; else this is why.
                            if !run.job.is_finished() {
                                warn!(container_id = %run.container_id, "{}: terminal: {e}", run.what);
                            }
                        }
                    }
                }
                _ = &mut hung_up => gone = true,
            }
        }
        let end = self
            .finish_exec(run, timeout, async move {
                if !gone {
                    let _ = hung_up.await;
                }
            })
            .await;
        let ev = match end {
            Ok(exit_code) => ExecEvent::Exited { exit_code },
            Err(e) => ExecEvent::Failed {
                name: podscope_api::errors::error_name(e.kind()).to_owned(),
                message: e.to_string(),
            },
        };
        tell(&control, &ev, None);
        watch.abort();
    }

    /// Wait for the command's end, or cut it short at `timeout` or when
    /// `cut` resolves; then read its status and let the unit go.
    async fn finish_exec(
        &self,
        mut run: RunningExec,
        timeout: Option<Duration>,
        cut: impl std::future::Future<Output = ()>,
    ) -> Result<i32> {
        let deadline = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let outcome: std::result::Result<Result<()>, Cut> = tokio::select! {
            r = &mut run.job => Ok(r.unwrap_or_else(|e| Err(Error::internal(format!("exec task: {e}"))))),
            _ = deadline => Err(Cut::Timeout(timeout.unwrap_or_default())),
            _ = cut => Err(Cut::HangUp),
        };
        let unit = run.unit.clone();
        let ran = run.started.elapsed();
        let result: Result<i32> = match outcome {
            Ok(job) => {
                let failed = job.err();
                match self.systemd.service_status(&unit).await {
                    Ok(Some(st)) if st.main_exited() => {
                        let said = std::fs::read_to_string(&run.runtime_log).unwrap_or_default();
                        match super::start::runtime_message(&said) {
                            // The runtime itself failed (no such binary in
                            // the image, a bad working directory).
                            Some(m) if st.exit_code() != 0 => Err(Error::new(
                                ErrorKind::RuntimeFailed,
                                format!("{}: runtime {}: {m}", run.what, run.handler_name),
                            )),
                            _ => Ok(st.exit_code()),
                        }
                    }
                    Ok(_) => {
                        Err(failed
                            .map(|e| e.context(run.what.clone()))
                            .unwrap_or_else(|| {
                                Error::internal(format!(
                                    "{}: its unit {unit} went away before its exit status was read",
                                    run.what
                                ))
                            }))
                    }
                    Err(e) => Err(e.context(run.what.clone())),
                }
            }
            Err(cut) => {
                // The command first: it is in the container's cgroup (runc
                // puts it there, and podscope-init for crun on v2), out of
                // the unit's reach; then the unit, with what is left in it.
                if let Some(pid) = std::fs::read_to_string(&run.pid_file)
                    .ok()
                    .and_then(|t| t.trim().parse::<i32>().ok())
                    .filter(|p| *p > 1)
                {
                    // SAFETY: a signal to a PID the runtime wrote for this
                    // exec, which podscope-init (its reaper) still waits for.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                let _ = self.systemd.kill_unit(&unit, libc::SIGKILL).await;
                let _ = self
                    .systemd
                    .stop_unit(&unit, self.settings.stop_timeout())
                    .await;
                run.job.abort();
                Err(match cut {
                    Cut::Timeout(t) => Error::timeout(format!(
                        "{}: did not finish within {} ms",
                        run.what,
                        t.as_millis()
                    )),
                    Cut::HangUp => {
                        Error::internal(format!("{}: killed: its caller hung up", run.what))
                    }
                })
            }
        };
        let read = run.started.elapsed();
        if let Some(t) = run.terminal.take() {
            t.abort();
        }
        let _ = self.systemd.reset_failed(&unit).await;
        self.systemd.unref(&unit).await;
        remove_files(&run.files);
        let total = run.started.elapsed();
        // Where an exec's time goes, as a start's: the process file, the
        // unit's job (systemd, podscope-init, the runtime, the command),
        // its status read, and the unit let go.
        debug!(
            event = podscope_sys::logging::event::EXEC_ENDED,
            container_id = %run.container_id,
            unit = %unit,
            elapsed_us = total.as_micros() as u64,
            prepare_us = run.prepare.as_micros() as u64,
            job_us = (ran - run.prepare).as_micros() as u64,
            status_us = (read - ran).as_micros() as u64,
            release_us = (total - read).as_micros() as u64,
            "{} ({}) ended in {} µs: {:?}",
            run.what,
            run.handler_name,
            total.as_micros(),
            result.as_ref().map_err(|e| e.to_string())
        );
        result
    }

    /// The exec's process.json: the container's process with `cmd`.
    fn write_exec_process(
        &self,
        c: &Container,
        cmd: &[String],
        tty: bool,
        path: &Path,
    ) -> Result<()> {
        let bundle = self.bundle(&c.id);
        let text = std::fs::read(bundle.join("config.json"))
            .map_err(|e| Error::io("read its config.json", e))?;
        let spec: podscope_oci::spec::Spec = serde_json::from_slice(&text)
            .map_err(|e| Error::internal(format!("its config.json: {e}")))?;
        let mut process = spec.process.unwrap_or_default();
        process.args = cmd.to_vec();
        process.terminal = tty;
        process.console_size = None;
        if tty && !process.env.iter().any(|e| e.starts_with("TERM=")) {
            // As containerd and CRI-O do for a terminal.
            process.env.push("TERM=xterm".into());
        }
        let json = serde_json::to_vec(&process).expect("a process serialises");
        std::fs::write(path, json).map_err(|e| Error::io(format!("write {}", path.display()), e))
    }
}

/// The exec's main process: podscope-init waiting, as a child subreaper,
/// for the command the runtime's detached exec starts (see its `--exec-wait`).
fn exec_wait(
    init: &Path,
    pid_file: &str,
    join_cgroup: Option<&str>,
    runtime: crate::systemd::ExecCommand,
) -> crate::systemd::ExecCommand {
    let mut argv = vec![
        "podscope-init".to_owned(),
        "--exec-wait".to_owned(),
        pid_file.to_owned(),
    ];
    if let Some(procs) = join_cgroup {
        argv.extend(["--join-cgroup".to_owned(), procs.to_owned()]);
    }
    argv.extend(["--".to_owned(), runtime.path]);
    argv.extend(runtime.argv.into_iter().skip(1));
    crate::systemd::ExecCommand {
        path: init.display().to_string(),
        argv,
        ignore_failure: false,
    }
}

fn remove_files(files: &[PathBuf]) {
    for f in files {
        let _ = std::fs::remove_file(f);
    }
}

/// The daemon's end of the control socket, shared by the hang-up watch and
/// the event writer.
pub(super) type Control = Arc<tokio::net::UnixStream>;

pub(super) fn tokio_control(fd: OwnedFd) -> std::io::Result<Control> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    Ok(Arc::new(tokio::net::UnixStream::from_std(s)?))
}

/// Resolves when the caller's end is closed (or errs); what the caller
/// writes is dropped.
async fn hang_up(c: &Control) {
    hang_up_or(c, |_| {}).await
}

/// Resolves when the caller's end is closed (or errs, or says something
/// that is not a control message); each message it sends goes to `on`.
pub(super) async fn hang_up_or(c: &Control, on: impl Fn(podscope_api::exec::ControlMessage)) {
    let mut buf = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    loop {
        if c.readable().await.is_err() {
            return;
        }
        match c.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                line.extend_from_slice(&buf[..n]);
                while let Some(nl) = line.iter().position(|&b| b == b'\n') {
                    let l: Vec<u8> = line.drain(..=nl).collect();
                    match serde_json::from_slice(&l[..nl]) {
                        Ok(m) => on(m),
                        Err(_) => return,
                    }
                }
                if line.len() > podscope_api::exec::LINE_MAX {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Write an event (never blocks for long: lines are short, and a caller
/// that stopped reading its control socket loses the event).
pub(super) fn tell(c: &Control, ev: &ExecEvent, fd: Option<&OwnedFd>) {
    use std::os::fd::AsFd;
    let _ = send_event(c.as_fd(), ev, fd);
}

/// Read a pipe to its end (every writer gone: the unit's end closes
/// systemd's copy), keeping at most OUTPUT_MAX bytes.
async fn collect(fd: OwnedFd) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Ok(()) = podscope_sys::pipe::set_nonblocking(&fd) else {
        return Vec::new();
    };
    let file = std::fs::File::from(fd);
    let Ok(pipe) = tokio::net::unix::pipe::Receiver::from_file_unchecked(file) else {
        return Vec::new();
    };
    let mut pipe = pipe;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => {
                let room = OUTPUT_MAX - out.len();
                out.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}
