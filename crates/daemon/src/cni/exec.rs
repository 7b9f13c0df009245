//! Running one CNI plugin: the environment and stdin the spec gives, a
//! timeout after which the plugin's whole process group is killed, and the
//! spec's error object turned into a message that keeps code, msg and
//! details word for word.
//!
//! The environment is built for the child alone (`env_clear` + explicit
//! vars): the daemon's own environment is never touched.

use podscope_api::error::{Error, ErrorKind, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::warn;

/// Plugins (bridge, portmap) run iptables and ip; they get a plain PATH.
const PLUGIN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// No plugin's answer is this big; more is garbage and is cut off.
const OUTPUT_MAX: u64 = 4 << 20;
/// How long the output of an exited plugin may take to end (a process it
/// left behind holds the pipes) before its process group is killed.
const GRACE_MS: u64 = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
}

impl Command {
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Status => "STATUS",
            Command::Gc => "GC",
            Command::Version => "VERSION",
        }
    }
    /// Only these act on one attachment and get its container/netns/ifname.
    fn per_attachment(self) -> bool {
        matches!(self, Command::Add | Command::Del | Command::Check)
    }
}

/// Everything about a call except the plugin's stdin.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    pub command: Command,
    pub container_id: &'a str,
    /// Empty on DEL when the namespace is gone.
    pub netns: &'a str,
    pub ifname: &'a str,
    pub args: &'a str,
    pub bin_dirs: &'a [PathBuf],
    pub timeout: Duration,
}

/// What one plugin run produced.
#[derive(Debug)]
pub struct Output {
    /// The parsed stdout (ADD's result, VERSION's answer), if any.
    pub value: Option<Value>,
    pub elapsed: Duration,
}

pub fn env_for(inv: &Invocation<'_>) -> Vec<(&'static str, String)> {
    let path = inv
        .bin_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let mut env = vec![
        ("PATH", PLUGIN_PATH.to_owned()),
        ("CNI_COMMAND", inv.command.as_str().to_owned()),
        ("CNI_PATH", path),
    ];
    if inv.command.per_attachment() {
        env.push(("CNI_CONTAINERID", inv.container_id.to_owned()));
        env.push(("CNI_NETNS", inv.netns.to_owned()));
        env.push(("CNI_IFNAME", inv.ifname.to_owned()));
        env.push(("CNI_ARGS", inv.args.to_owned()));
    }
    env
}

fn plugin_name(bin: &Path) -> String {
    bin.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| bin.display().to_string())
}

/// Run `bin` with `stdin`; Ok only when it exited 0 and printed valid JSON
/// (or nothing).
pub async fn run(bin: &Path, inv: &Invocation<'_>, stdin: &[u8]) -> Result<Output> {
    let t0 = Instant::now();
    let name = plugin_name(bin);
    let fail = |msg: String| Error::new(ErrorKind::NetworkFailed, format!("{name}: {msg}"));
    let mut cmd = tokio::process::Command::new(bin);
    cmd.env_clear()
        .envs(env_for(inv))
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout kills what it started too.
        .process_group(0)
        .kill_on_drop(true);
    // ETXTBSY: the binary is being written (a plugin upgrade in progress, or
    // another thread's fork holding a write fd for a moment); try again.
    let mut attempt = 0;
    let mut child = loop {
        match cmd.spawn() {
            Ok(c) => break c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 5 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(10 * attempt)).await;
            }
            Err(e) => return Err(fail(format!("cannot run {}: {e}", bin.display()))),
        }
    };
    let pid = child.id().unwrap_or(0) as libc::pid_t;
    let mut input = child.stdin.take().expect("piped");
    let mut out = child.stdout.take().expect("piped").take(OUTPUT_MAX);
    let mut err = child.stderr.take().expect("piped").take(OUTPUT_MAX);
    let stdin = stdin.to_vec();
    let feed = tokio::spawn(async move {
        // A plugin that does not read its stdin is its own problem.
        let _ = input.write_all(&stdin).await;
        drop(input);
    });
    let read_out = tokio::spawn(async move {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b).await;
        b
    });
    let read_err = tokio::spawn(async move {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b).await;
        b
    });
    let status = match tokio::time::timeout(inv.timeout, child.wait()).await {
        Ok(s) => s.map_err(|e| fail(format!("wait: {e}")))?,
        Err(_) => {
            // SAFETY: kill(2) of the process group we created for the plugin
            // (never pid 0: that would be our own group).
            if pid > 0 {
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
            let _ = child.wait().await;
            feed.abort();
            read_out.abort();
            read_err.abort();
            return Err(fail(format!(
                "{} timed out after {} ms; killed",
                inv.command.as_str(),
                inv.timeout.as_millis()
            )));
        }
    };
    feed.abort();
    // The plugin has exited. A process it left behind (in its group) may
    // still hold the pipes open: after a grace period the group is killed,
    // which closes them, so what the plugin printed is still read and no
    // reader task or pipe outlives the run.
    let (mut read_out, mut read_err) = (read_out, read_err);
    let grace = Duration::from_millis(GRACE_MS);
    let mut drained =
        tokio::time::timeout(grace, async { tokio::join!(&mut read_out, &mut read_err) }).await;
    if drained.is_err() {
        warn!(plugin = %name, "{name}: {} left processes holding its output; killing its process group", inv.command.as_str());
        if pid > 0 {
            // SAFETY: as above, the plugin's own process group.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        drained =
            tokio::time::timeout(grace, async { tokio::join!(&mut read_out, &mut read_err) }).await;
    }
    let (stdout, stderr) = match drained {
        Ok((o, e)) => (o.unwrap_or_default(), e.unwrap_or_default()),
        // Held by something outside the group (it made its own session):
        // give up on the output rather than leak the readers.
        Err(_) => {
            read_out.abort();
            read_err.abort();
            (Vec::new(), Vec::new())
        }
    };
    let elapsed = t0.elapsed();
    if !status.success() {
        return Err(fail(plugin_error_message(&status, &stdout, &stderr)));
    }
    let value = plugin_output(inv.command.as_str(), &stdout).map_err(fail)?;
    Ok(Output { value, elapsed })
}

/// A successful plugin's stdout: a JSON object, or nothing at all.
pub fn plugin_output(command: &str, stdout: &[u8]) -> std::result::Result<Option<Value>, String> {
    let text = String::from_utf8_lossy(stdout);
    if text.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        Ok(_) | Err(_) => Err(format!(
            "{command} printed output that is not a CNI result: {}",
            excerpt(&text)
        )),
    }
}

/// The spec's error object ({code, msg, details}) word for word; anything
/// else the plugin said, quoted.
pub fn plugin_error_message(
    status: &std::process::ExitStatus,
    stdout: &[u8],
    stderr: &[u8],
) -> String {
    let how = match status.code() {
        Some(c) => format!("exit status {c}"),
        None => {
            use std::os::unix::process::ExitStatusExt;
            format!("killed by signal {}", status.signal().unwrap_or(0))
        }
    };
    if let Ok(Value::Object(e)) = serde_json::from_slice::<Value>(stdout) {
        if let Some(code) = e.get("code").and_then(Value::as_u64) {
            let msg = e.get("msg").and_then(Value::as_str).unwrap_or("");
            let mut s = format!("CNI error code {code}: {}", bounded(msg));
            if let Some(d) = e.get("details").and_then(Value::as_str) {
                if !d.is_empty() {
                    s.push_str(&format!(" ({})", bounded(d)));
                }
            }
            return s;
        }
    }
    let out = String::from_utf8_lossy(stdout);
    let err = String::from_utf8_lossy(stderr);
    let said = [out.trim(), err.trim()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(excerpt)
        .collect::<Vec<_>>()
        .join(" / ");
    if said.is_empty() {
        format!("{how}, no CNI error printed")
    } else {
        format!("{how}, no CNI error printed; output: {said}")
    }
}

/// The most of a plugin's `msg` or `details` kept (word for word up to
/// there): the message goes into the checkpoint, Status and the caller's
/// error, and a plugin may print megabytes.
pub const PLUGIN_TEXT_MAX: usize = 4096;

fn bounded(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= PLUGIN_TEXT_MAX {
        return s.into();
    }
    let mut end = PLUGIN_TEXT_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &s[..end], s.len() - end).into()
}

fn excerpt(s: &str) -> String {
    const MAX: usize = 300;
    let s = s.trim();
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{:?}…", &s[..i]),
        None => format!("{s:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn inv(cmd: Command, timeout_ms: u64) -> Invocation<'static> {
        Invocation {
            command: cmd,
            container_id: "c1",
            netns: "/run/netns/x",
            ifname: "eth0",
            args: "IgnoreUnknown=1;K8S_POD_NAME=p",
            bin_dirs: &[],
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    fn dir(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("podscope-cni-exec-{tag}-{}", std::process::id()))
    }

    #[tokio::test]
    async fn env_and_stdin_reach_the_plugin_and_the_result_comes_back() {
        let d = dir("ok");
        let p = script(
            &d,
            "echoer",
            r#"in=$(cat); printf '{"cniVersion":"1.0.0","cmd":"%s","id":"%s","netns":"%s","if":"%s","args":"%s","home":"%s","len":%d}' "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" "$HOME" ${#in}"#,
        );
        let out = run(&p, &inv(Command::Add, 5000), b"{\"x\":1}")
            .await
            .unwrap();
        let v = out.value.unwrap();
        assert_eq!(v["cmd"], "ADD");
        assert_eq!(v["id"], "c1");
        assert_eq!(v["netns"], "/run/netns/x");
        assert_eq!(v["if"], "eth0");
        assert_eq!(v["args"], "IgnoreUnknown=1;K8S_POD_NAME=p");
        assert_eq!(v["home"], "", "the daemon's environment must not leak");
        assert_eq!(v["len"], 7);
        let _ = std::fs::remove_dir_all(d);
    }

    #[tokio::test]
    async fn status_and_gc_get_no_attachment_vars() {
        let e = env_for(&inv(Command::Gc, 1));
        assert!(e.iter().any(|(k, v)| *k == "CNI_COMMAND" && v == "GC"));
        assert!(!e
            .iter()
            .any(|(k, _)| *k == "CNI_CONTAINERID" || *k == "CNI_NETNS"));
    }

    #[tokio::test]
    async fn a_cni_error_is_kept_word_for_word() {
        let d = dir("err");
        let p = script(
            &d,
            "failer",
            r#"cat >/dev/null; echo '{"cniVersion":"1.0.0","code":11,"msg":"no IP addresses available in range set","details":"10.1.0.0/30 is full"}'; exit 1"#,
        );
        let e = run(&p, &inv(Command::Add, 5000), b"{}").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NetworkFailed);
        assert_eq!(
            e.to_string(),
            "failer: CNI error code 11: no IP addresses available in range set (10.1.0.0/30 is full)"
        );
        // A plugin that says megabytes: its words are kept up to a bound.
        let big = script(
            &d,
            "talker",
            r#"cat >/dev/null; printf '{"cniVersion":"1.0.0","code":11,"msg":"%s"}' "$(head -c 3000000 /dev/zero | tr '\0' x)"; exit 1"#,
        );
        let e = run(&big, &inv(Command::Add, 5000), b"{}")
            .await
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.len() < PLUGIN_TEXT_MAX + 100, "{} bytes", msg.len());
        assert!(
            msg.ends_with(&format!("… ({} more bytes)", 3_000_000 - PLUGIN_TEXT_MAX)),
            "{}",
            &msg[msg.len() - 40..]
        );
        let _ = std::fs::remove_dir_all(d);
    }

    /// A plugin that leaves a child holding its stdout: what it printed is
    /// still read, and the child is killed with its process group instead
    /// of keeping a reader task and two pipes alive.
    #[tokio::test]
    async fn a_child_left_holding_the_pipes_is_killed_and_the_output_kept() {
        let d = dir("leftover");
        let pidfile = d.join("sleeper.pid");
        let p = script(
            &d,
            "leaver",
            &format!(
                r#"cat >/dev/null; sleep 300 & echo $! > {}; echo '{{"cniVersion":"1.0.0"}}'; exit 0"#,
                pidfile.display()
            ),
        );
        let out = run(&p, &inv(Command::Add, 5000), b"{}").await.unwrap();
        assert_eq!(
            out.value,
            Some(serde_json::json!({"cniVersion": "1.0.0"})),
            "the plugin's own output"
        );
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed: gone, or a zombie until its new parent reaps it.
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false)
        };
        for _ in 0..100 {
            if !alive() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!alive(), "the sleeper the plugin left is killed");
        let _ = std::fs::remove_dir_all(d);
    }

    #[tokio::test]
    async fn garbage_and_silent_failures_are_named() {
        let d = dir("garbage");
        let g = script(&d, "garbage", "cat >/dev/null; echo 'hello, I am not JSON'");
        let e = run(&g, &inv(Command::Add, 5000), b"{}").await.unwrap_err();
        assert!(
            e.to_string()
                .contains("not a CNI result: \"hello, I am not JSON\""),
            "{e}"
        );
        let s = script(&d, "silent", "echo oops >&2; exit 3");
        let e = run(&s, &inv(Command::Del, 5000), b"{}").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "silent: exit status 3, no CNI error printed; output: \"oops\""
        );
        let missing = d.join("absent");
        let e = run(&missing, &inv(Command::Del, 5000), b"{}")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("cannot run"), "{e}");
        let _ = std::fs::remove_dir_all(d);
    }

    #[tokio::test]
    async fn a_hanging_plugin_and_its_children_are_killed() {
        let d = dir("hang");
        let pidfile = d.join("child.pid");
        let p = script(
            &d,
            "hang",
            &format!("sleep 600 & echo $! > {}; wait", pidfile.display()),
        );
        let t0 = Instant::now();
        let e = run(&p, &inv(Command::Add, 300), b"{}").await.unwrap_err();
        assert!(
            e.to_string().contains("ADD timed out after 300 ms; killed"),
            "{e}"
        );
        assert!(t0.elapsed() < Duration::from_secs(5));
        let child: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild is gone (or a zombie awaiting its reaper).
        let gone = (0..50).any(|_| {
            let st = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            if st.is_empty() || st.contains(") Z ") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
            false
        });
        assert!(gone, "sleep {child} survived the timeout");
        let _ = std::fs::remove_dir_all(d);
    }
}
