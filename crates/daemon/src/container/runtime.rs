//! The OCI runtime run by the daemon itself, for the verbs that need
//! nothing of a container's sandbox: `start`, which only opens the exec
//! FIFO that `create` (the unit's `ExecStart=`, under systemd) left the
//! container's process waiting on, so that it runs; `state`; and `delete`
//! when the unit's `ExecStopPost=` did not get to it.
//!
//! It was the unit's `ExecStartPost=`; systemd forks that into the unit's
//! cgroup, a second cgroup migration on every start (each one waits for an
//! RCU grace period without cgroup2's `favordynmods`). Run here, a start
//! took 14 ms less (mean of 15, in the harness: `systemd-run` of `crun
//! create` with the start as `ExecStartPost=`, or run after the job). It
//! runs in the daemon's sandbox, which suits a verb that only opens a FIFO
//! and checks the process with kill(pid, 0) (CAP_KILL, for a process of
//! another user, is in the daemon's bounding set for this).

use podscope_api::error::{Error, ErrorKind, Result};
use podscope_config::{RuntimeHandler, RuntimeKind};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Its messages beyond this are dropped.
const STDERR_MAX: u64 = 64 * 1024;

/// `<runtime> [global] --log=<log> start <id>`: Ok once the container
/// runs; the runtime's own words otherwise.
pub async fn start(h: &RuntimeHandler, log: &Path, id: &str, timeout: Duration) -> Result<()> {
    let mut args = super::unit::global_args(h);
    args.extend([
        format!("--log={}", log.display()),
        "start".into(),
        id.into(),
    ]);
    let name = h.path.display().to_string();
    let mut child = tokio::process::Command::new(&h.path)
        .args(&args)
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::new(ErrorKind::RuntimeFailed, format!("cannot run {name}: {e}")))?;
    let mut err = child.stderr.take().expect("piped").take(STDERR_MAX);
    let read_err = async {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b).await;
        b
    };
    let (status, said) =
        match tokio::time::timeout(timeout, async { tokio::join!(child.wait(), read_err) }).await {
            Ok((status, said)) => (status, said),
            Err(_) => {
                let _ = child.kill().await;
                return Err(Error::timeout(format!(
                    "{name} start {id} did not return in {} s; killed",
                    timeout.as_secs()
                )));
            }
        };
    let status = status.map_err(|e| Error::io(format!("wait for {name} start {id}"), e))?;
    if status.success() {
        return Ok(());
    }
    let logged = std::fs::read_to_string(log).unwrap_or_default();
    let said = super::start::runtime_message(&logged)
        .or_else(|| super::start::runtime_message(&String::from_utf8_lossy(&said)))
        .unwrap_or_else(|| format!("exited with {status}"));
    Err(Error::new(ErrorKind::RuntimeFailed, said))
}

/// `<runtime> [global] state <id>`: the container's status as the runtime
/// knows it (`created`, `running`, `stopped`, `paused`).
pub async fn status(h: &RuntimeHandler, id: &str, timeout: Duration) -> Result<String> {
    let out = output(h, &["state", id], timeout).await?;
    let name = h.path.display();
    let v: serde_json::Value = serde_json::from_slice(&out).map_err(|e| {
        Error::new(
            ErrorKind::RuntimeFailed,
            format!("{name} state {id}: not JSON: {e}"),
        )
    })?;
    Ok(v.get("status")
        .and_then(|s| s.as_str())
        .unwrap_or_default()
        .to_owned())
}

/// `<runtime> [global] delete -f <id>`: the container's state gone.
pub async fn delete(h: &RuntimeHandler, id: &str, timeout: Duration) -> Result<()> {
    output(h, &["delete", "-f", id], timeout).await.map(drop)
}

/// Where the runtime keeps a container's state: under the handler's
/// `--root`, else the runtime's own default for root; None for a runtime
/// of a kind not known.
pub fn state_dir(h: &RuntimeHandler, id: &str) -> Option<PathBuf> {
    let root = if h.root.as_os_str().is_empty() {
        PathBuf::from(match h.kind()? {
            RuntimeKind::Crun => "/run/crun",
            RuntimeKind::Runc => "/run/runc",
        })
    } else {
        h.root.clone()
    };
    Some(root.join(id))
}

/// The cgroups runc made for a container, from its `state.json`
/// (`cgroup_paths`: one per v1 hierarchy, the same directory for those
/// mounted together, or the v2 one), each once.
pub fn runc_cgroups(state_json: &[u8]) -> Vec<PathBuf> {
    let v: serde_json::Value = serde_json::from_slice(state_json).unwrap_or_default();
    let mut dirs: Vec<PathBuf> = v
        .get("cgroup_paths")
        .and_then(|p| p.as_object())
        .map(|paths| {
            paths
                .values()
                .filter_map(|d| d.as_str())
                .filter(|d| d.starts_with("/sys/fs/cgroup/"))
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// `<runtime> [global] <verb...>`, its stdout once it succeeded; what it
/// said on stderr otherwise.
async fn output(h: &RuntimeHandler, verb: &[&str], timeout: Duration) -> Result<Vec<u8>> {
    let mut args = super::unit::global_args(h);
    args.extend(verb.iter().map(|s| s.to_string()));
    let name = format!("{} {}", h.path.display(), verb.join(" "));
    let run = tokio::process::Command::new(&h.path)
        .args(&args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| Error::timeout(format!("{name} did not return")))?
        .map_err(|e| Error::new(ErrorKind::RuntimeFailed, format!("cannot run {name}: {e}")))?;
    if !out.status.success() {
        return Err(Error::new(
            ErrorKind::RuntimeFailed,
            format!("{name}: {}", String::from_utf8_lossy(&out.stderr).trim()),
        ));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_under_the_root_or_the_runtimes_default() {
        let h = |path: &str, root: &str| RuntimeHandler {
            path: path.into(),
            kind: None,
            root: root.into(),
        };
        assert_eq!(
            state_dir(&h("/usr/bin/crun", ""), "c1"),
            Some(PathBuf::from("/run/crun/c1"))
        );
        assert_eq!(
            state_dir(&h("/usr/sbin/runc", ""), "c1"),
            Some(PathBuf::from("/run/runc/c1"))
        );
        assert_eq!(
            state_dir(&h("/usr/sbin/runc", "/run/podscope/runc"), "c1"),
            Some(PathBuf::from("/run/podscope/runc/c1"))
        );
        assert_eq!(state_dir(&h("/opt/kata/runtime", ""), "c1"), None);
    }

    #[test]
    fn runcs_cgroups_are_read_from_its_state() {
        // runc 1.1's state.json on a v1 hybrid node (shortened).
        let state = br#"{"id":"c1","cgroup_paths":{
            "":"/sys/fs/cgroup/unified/p.slice/c1.service",
            "freezer":"/sys/fs/cgroup/freezer/p.slice/c1.service",
            "net_cls":"/sys/fs/cgroup/net_cls,net_prio/p.slice/c1.service",
            "net_prio":"/sys/fs/cgroup/net_cls,net_prio/p.slice/c1.service",
            "name=systemd":"/sys/fs/cgroup/systemd/p.slice/c1.service",
            "odd":"/etc/passwd"}}"#;
        assert_eq!(
            runc_cgroups(state),
            [
                "/sys/fs/cgroup/freezer/p.slice/c1.service",
                "/sys/fs/cgroup/net_cls,net_prio/p.slice/c1.service",
                "/sys/fs/cgroup/systemd/p.slice/c1.service",
                "/sys/fs/cgroup/unified/p.slice/c1.service",
            ]
            .map(PathBuf::from)
        );
        assert!(runc_cgroups(b"not json").is_empty());
        assert!(runc_cgroups(b"{}").is_empty());
    }
}
