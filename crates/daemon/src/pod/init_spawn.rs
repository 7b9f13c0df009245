//! Spawning a pod's `podscope-init`.
//!
//! The protocol with the binary: it sets up the namespaces, forks the real
//! init (which is reparented to PID 1 once the spawner exits, so podscoped
//! never has to reap it), waits until that init is ready, prints its host PID
//! on stdout, then waits for its stdin to close and exits 0; on failure it
//! prints the reason on stderr and exits non-zero.
//!
//! While the spawner lives, the init is its child, so the PID cannot be
//! reused even if the init dies: podscoped opens a pidfd for it then, and
//! only then lets the spawner go. Every later use of the init (the kill
//! after a failed Start, the check before its scope is made) goes through
//! that pidfd, never through a PID that may by then name another process.

use podscope_api::domain::{NamespaceMode, NetworkMode, Sandbox};
use podscope_api::error::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};

/// A pod's init: its host PID and a pidfd that names it for sure.
pub struct Init {
    pub pid: u32,
    pidfd: OwnedFd,
}

impl Init {
    /// Whether the init is still running (a pidfd polls readable once the
    /// process has exited).
    pub fn alive(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n == 0
    }

    /// SIGKILL the init, and nothing else whatever has become of its PID.
    pub fn kill(&self) {
        // SAFETY: pidfd_send_signal on a pidfd we own; no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) with no flags; the fd is owned from here on.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub fn init_args(sb: &Sandbox) -> Vec<String> {
    let c = &sb.config;
    let mut args = vec!["--id".to_owned(), sb.id.to_string()];
    if c.network == NetworkMode::Host {
        // Host network pods share the host's UTS namespace too, as kubelet expects.
        args.push("--host-network".into());
    } else {
        // The pod's own UTS namespace gets the name its hostname file
        // holds: the one asked for, else the pod's name as a DNS label.
        args.extend([
            "--netns".into(),
            sb.netns_path(),
            "--hostname".into(),
            crate::pod::files::pod_hostname(sb),
        ]);
    }
    if c.pid_namespace == NamespaceMode::Pod {
        args.push("--pid-namespace".into());
    }
    if c.ipc_namespace == NamespaceMode::Node {
        args.push("--host-ipc".into());
    }
    // Written by the init once it is in the pod's namespaces (validated as
    // namespaced ones by SandboxConfig::validate).
    for (name, value) in &c.sysctls {
        args.push("--sysctl".into());
        args.push(format!(
            "{}={value}",
            podscope_api::domain::network::sysctl_proc_path(name)
        ));
    }
    args
}

/// Start the init for `sb`; it holds descriptors for the daemon on
/// `hold_socket` (see `holder`).
pub async fn spawn_init(
    init_path: &Path,
    sb: &Sandbox,
    hold_socket: &Path,
    timeout: Duration,
) -> Result<Init> {
    let mut cmd = tokio::process::Command::new(init_path);
    cmd.args(init_args(sb))
        .arg("--hold-socket")
        .arg(hold_socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io(format!("spawn {}", init_path.display()), e))?;
    let stdin = child.stdin.take();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut stderr = child.stderr.take().expect("piped");
    let handshake = async {
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .await
            .map_err(|e| Error::io("read podscope-init's output", e))?;
        // The spawner waits for us: the PID is the init's while we look.
        let init = match line.trim().parse::<u32>().ok().filter(|p| *p > 1) {
            Some(pid) => Some(Init {
                pid,
                pidfd: pidfd_open(pid).map_err(|e| Error::io(format!("pidfd_open({pid})"), e))?,
            }),
            None => None,
        };
        drop(stdin);
        let status = child
            .wait()
            .await
            .map_err(|e| Error::io("wait for podscope-init", e))?;
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err).await;
        match init {
            Some(init) if status.success() => Ok(init),
            _ if !status.success() => Err(Error::internal(format!(
                "podscope-init failed ({status}): {}",
                err.trim()
            ))),
            _ => Err(Error::internal(format!(
                "podscope-init printed {:?}, not a PID",
                line.trim()
            ))),
        }
    };
    match tokio::time::timeout(timeout, handshake).await {
        Ok(r) => r,
        Err(_) => Err(Error::timeout(format!(
            "podscope-init did not report ready within {} ms",
            timeout.as_millis()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::domain::{SandboxConfig, SandboxId};

    fn sb(config: SandboxConfig) -> Sandbox {
        Sandbox::new(SandboxId::random(), config, String::new(), 0)
    }

    /// The pidfd names the process it was opened for: it says when that
    /// process is gone and kills only it.
    #[test]
    fn the_pidfd_follows_its_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let init = Init {
            pid: child.id(),
            pidfd: pidfd_open(child.id()).unwrap(),
        };
        assert!(init.alive());
        init.kill();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!init.alive(), "a reaped process is not alive");
        // Killing it again reaches nothing, whatever has its PID now.
        init.kill();
    }

    #[test]
    fn args_follow_the_namespace_options() {
        let s = sb(SandboxConfig {
            hostname: "h".into(),
            pid_namespace: NamespaceMode::Pod,
            ..Default::default()
        });
        let a = init_args(&s);
        let netns = s.netns_path();
        assert_eq!(
            &a[2..],
            [
                "--netns",
                netns.as_str(),
                "--hostname",
                "h",
                "--pid-namespace"
            ]
        );

        let s = sb(SandboxConfig {
            hostname: "ignored".into(),
            network: NetworkMode::Host,
            ipc_namespace: NamespaceMode::Node,
            ..Default::default()
        });
        assert_eq!(&init_args(&s)[2..], ["--host-network", "--host-ipc"]);

        // No hostname asked for: the pod's name, as its hostname file says.
        let s = sb(SandboxConfig {
            name: "Web_0".into(),
            ..Default::default()
        });
        assert_eq!(&init_args(&s)[4..6], ["--hostname", "web-0"]);
    }
}
