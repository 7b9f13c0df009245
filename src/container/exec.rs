//! ExecSync: a command run in a running container, as the OCI runtime's
//! `exec` does it, its output captured (capped) and its exit code
//! returned; killed at the timeout.
//!
//! The daemon cannot run the runtime itself: its own sandbox (capability
//! bounding set, no_new_privs, seccomp, a mount namespace of its own)
//! would be the command's too. So the exec is a transient oneshot service
//! in the pod's slice, started by systemd as the container was, its output
//! on pipes the daemon reads. `AddRef=` keeps the unit, and with it the
//! command's exit status, until the daemon has read it (or its bus
//! connection goes, which ends the reference too).

use super::*;
use std::os::fd::OwnedFd;

/// Each of stdout and stderr is kept up to this; the rest is read and
/// dropped (so the command never blocks on a full pipe). Both fit one D-Bus
/// reply (the system bus takes 32 MiB a message).
pub const OUTPUT_MAX: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl<S: SystemdClient + Clone> Containers<S> {
    /// Run `cmd` in the container; `timeout` zero is none.
    pub async fn exec_sync(
        &self,
        entry: &Arc<ContainerEntry>,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput> {
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
        let ctx = || format!("container {} ({}): exec", c.id, c.config.name);
        let io = |e: std::io::Error| Error::io(format!("{}: pipes", ctx()), e);
        let (out_r, out_w) = logs::pipe().map_err(io)?;
        let (err_r, err_w) = logs::pipe().map_err(io)?;
        let stdout = tokio::spawn(collect(out_r));
        let stderr = tokio::spawn(collect(err_r));
        let unit = format!(
            "podscope-exec-{}-{}.service",
            c.id.short(),
            &crate::domain::ContainerId::random().as_str()[..16]
        );
        // The container's own process (user, groups, environment,
        // capabilities, working directory, no_new_privs) with `cmd` as its
        // argv, as containerd hands runc an exec: a bare `crun exec`
        // would run as root.
        let process_file = self.exec_process_file(&c, &cmd)?;
        let process_arg = process_file.display().to_string();
        let args = vec!["exec", "--process", &process_arg, c.id.as_str()];
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
                Prop::Exec(vec![unit::command(handler, &args, false)]),
            ),
            ("StandardInput", Prop::Str("null".into())),
            ("StandardOutputFileDescriptor", Prop::Fd(Arc::new(out_w))),
            ("StandardErrorFileDescriptor", Prop::Fd(Arc::new(err_w))),
            // The timeout is ours; systemd's start timeout must not cut a
            // long command (kubelet's probes, a debug shell) short first.
            ("TimeoutStartUSec", Prop::U64(u64::MAX)),
            ("KillMode", Prop::Str("control-group".into())),
        ];
        let limit = if timeout.is_zero() {
            Duration::from_secs(365 * 24 * 3600)
        } else {
            timeout
        };
        let t0 = std::time::Instant::now();
        let started = self.systemd.start_transient(&unit, props, limit).await;
        let result: Option<Error> = match started {
            Ok(()) => None,
            // The command failed (a non-zero exit fails a oneshot's job):
            // the exit status says how, if the unit was made at all.
            Err(e) if e.kind() == ErrorKind::SystemdFailed => {
                match self.systemd.service_status(&unit).await {
                    Ok(Some(_)) => None,
                    _ => Some(e.context(ctx())),
                }
            }
            Err(e) if e.kind() == ErrorKind::Timeout => Some(Error::timeout(format!(
                "{}: {:?} did not finish within {} ms",
                ctx(),
                cmd[0],
                timeout.as_millis()
            ))),
            Err(e) => Some(e.context(ctx())),
        };
        let _ = std::fs::remove_file(&process_file);
        let status = match result {
            Some(e) => {
                // Killed with everything it started (all of it is in the
                // exec unit's cgroup).
                let _ = self.systemd.kill_unit(&unit, libc::SIGKILL).await;
                let _ = self
                    .systemd
                    .stop_unit(&unit, self.settings.stop_timeout())
                    .await;
                let _ = self.systemd.reset_failed(&unit).await;
                self.systemd.unref(&unit).await;
                stdout.abort();
                stderr.abort();
                return Err(e);
            }
            None => self.systemd.service_status(&unit).await,
        };
        let _ = self.systemd.reset_failed(&unit).await;
        self.systemd.unref(&unit).await;
        let st = status.with_context(ctx)?.ok_or_else(|| {
            Error::internal(format!(
                "{}: its unit {unit} went away before its exit status was read",
                ctx()
            ))
        })?;
        let out = ExecOutput {
            exit_code: st.exit_code(),
            stdout: stdout.await.unwrap_or_default(),
            stderr: stderr.await.unwrap_or_default(),
        };
        debug!(
            container_id = %c.id,
            exit_code = out.exit_code,
            elapsed_us = t0.elapsed().as_micros() as u64,
            "container {}: exec {:?} ({handler_name}) exited {} in {} µs",
            c.id,
            cmd[0],
            out.exit_code,
            t0.elapsed().as_micros()
        );
        Ok(out)
    }
}

impl<S: SystemdClient + Clone> Containers<S> {
    /// The exec's process.json, in the container's run directory.
    fn exec_process_file(&self, c: &Container, cmd: &[String]) -> Result<PathBuf> {
        let ctx = || format!("container {}: exec", c.id);
        let bundle = self.bundle(&c.id);
        let text = std::fs::read(bundle.join("config.json"))
            .map_err(|e| Error::io(format!("{}: read its config.json", ctx()), e))?;
        let spec: crate::oci::spec::Spec = serde_json::from_slice(&text)
            .map_err(|e| Error::internal(format!("{}: its config.json: {e}", ctx())))?;
        let mut process = spec.process.unwrap_or_default();
        process.args = cmd.to_vec();
        process.terminal = false;
        process.console_size = None;
        let dir = self.run_dir(&c.id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("{}: {}", ctx(), dir.display()), e))?;
        let path = dir.join(format!(
            "exec-{}.json",
            &crate::domain::ContainerId::random().as_str()[..16]
        ));
        let json = serde_json::to_vec(&process).expect("a process serialises");
        std::fs::write(&path, json)
            .map_err(|e| Error::io(format!("{}: write {}", ctx(), path.display()), e))?;
        Ok(path)
    }
}

/// Read a pipe to its end (every writer gone: the unit's end closes
/// systemd's copy), keeping at most OUTPUT_MAX bytes.
async fn collect(fd: OwnedFd) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Ok(()) = logs::set_nonblocking(&fd) else {
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
