//! Spawning a pod's `podscope-init`.
//!
//! The protocol with the binary: it sets up the namespaces, forks the real
//! init (which is reparented to PID 1 once the spawner exits, so podscoped
//! never has to reap it), waits until that init is ready, prints its host PID
//! on stdout and exits 0; on failure it prints the reason on stderr and
//! exits non-zero.

use crate::domain::{NamespaceMode, NetworkMode, Sandbox};
use crate::error::{Error, Result};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

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
            crate::pod_files::pod_hostname(sb),
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
            crate::domain::network::sysctl_proc_path(name)
        ));
    }
    args
}

/// Start the init for `sb`; returns its host PID.
pub async fn spawn_init(init_path: &Path, sb: &Sandbox, timeout: Duration) -> Result<u32> {
    let mut cmd = tokio::process::Command::new(init_path);
    cmd.args(init_args(sb))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| Error::io(format!("spawn {}", init_path.display()), e))?;
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(r) => r.map_err(|e| Error::io("wait for podscope-init", e))?,
        Err(_) => {
            return Err(Error::timeout(format!(
                "podscope-init did not report ready within {} ms",
                timeout.as_millis()
            )))
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(Error::internal(format!(
            "podscope-init failed ({}): {}",
            out.status,
            stderr.trim()
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| {
            Error::internal(format!(
                "podscope-init printed {:?}, not a PID",
                stdout.trim()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SandboxConfig, SandboxId};

    fn sb(config: SandboxConfig) -> Sandbox {
        Sandbox::new(SandboxId::random(), config, String::new(), 0)
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
