//! The node suite (`make node`): run inside a booted Debian 12 node
//! (tests/node/run-node.sh), systemd as PID 1 on pure cgroup v2, podscope
//! installed from its .deb. It proves what the v1 harness cannot: the v2
//! files a container's limits land in, `unified`, a private cgroup
//! namespace, OOM through memory.events, stats from v2 files, kubelet on v2.
//!
//! Driven with crictl (the real client) and read back from the cgroup
//! files and systemd. Each case prints one line; the first failure of a
//! case ends it, the suite goes on to the next and fails at the end.

use std::process::Command;
use std::time::{Duration, Instant};

mod cases;
mod checkpoint;
mod cri;
mod critest;
mod daemon;
mod kubelet;
mod oomd;

pub use cri::Crictl;

/// A case's failure: what was expected and what was found.
pub type Outcome = Result<(), String>;

/// Fail the case unless `cond`, with the message.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// A shell command's stdout; an error with its stderr if it failed.
pub fn sh(cmd: &str) -> Result<String, String> {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{cmd}` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Wait until `f` gives Some, up to `within`.
pub fn wait_for<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What a panic said (a tool's client asserts as it reads).
pub fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".into())
}

/// The most a case may take (the slowest, a kubelet's, takes about a
/// minute under TCG): past it the case is taken as hung. NODE_CASE_LIMIT
/// (seconds) sets another.
fn case_limit() -> Duration {
    let secs = std::env::var("NODE_CASE_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok());
    Duration::from_secs(secs.unwrap_or(240))
}
/// How often a running case says it still runs, so the console tells a
/// slow node from a frozen one.
const HEARTBEAT: Duration = Duration::from_secs(60);

/// Run a case on a thread of its own and watch it: a line every
/// HEARTBEAT while it runs, and past its limit what the node was doing
/// (processes, systemd's jobs, podscope's journal), then the suite ends
/// there: a hung case's thread would stand in the next ones' way, and
/// in-vm.sh then keeps the whole journal.
fn watched(name: &'static str, case: fn() -> Outcome) -> Outcome {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(case).unwrap_or_else(|p| Err(panic_message(p)));
        let _ = tx.send(r);
    });
    let (t, limit) = (Instant::now(), case_limit());
    loop {
        match rx.recv_timeout(HEARTBEAT.min(limit)) {
            Ok(r) => return r,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err("the case's thread ended without an outcome".into())
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        if t.elapsed() < limit {
            println!(
                "node-suite:   ({name}: still running at {:.0} s; load {})",
                t.elapsed().as_secs_f64(),
                load.split(' ').take(3).collect::<Vec<_>>().join(" ")
            );
            continue;
        }
        println!(
            "node-suite: FAILED {name}: did not finish within {} s; what the node was doing:",
            limit.as_secs()
        );
        for cmd in [
            "ps -e -o pid,ppid,stat,etimes,wchan:24,args --forest | grep -v ' \\[' | cut -c1-200 | tail -n 60",
            "systemctl list-jobs --no-pager | tail -n 20",
            "systemctl list-units --no-pager --no-legend 'podscope*' | tail -n 30",
            "journalctl -b --no-pager -o short-monotonic -n 80 -u podscoped.service -u podscope-cri.service",
        ] {
            println!("node-suite:   | $ {cmd}");
            let out = Command::new("timeout")
                .args(["20", "sh", "-c", cmd])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
                .unwrap_or_else(|e| e.to_string());
            for line in out.lines() {
                println!("node-suite:   | {line}");
            }
        }
        println!("node-suite: the suite ends at the hung case (its thread would stand in the way of the rest)");
        std::process::exit(1);
    }
}

fn main() {
    let t0 = Instant::now();
    let mut failed = Vec::new();
    let mut ran = 0;
    // NODE_FOCUS (make node NODE_FOCUS='oomd|streams'): only the cases
    // whose name holds one of its words, and the pull they need, for
    // working on some; make check runs them all.
    let focus = std::env::var("NODE_FOCUS").unwrap_or_default();
    for (name, case) in cases::ALL {
        if !focus.split('|').any(|w| name.contains(w)) && *name != cases::PULL {
            continue;
        }
        let t = Instant::now();
        ran += 1;
        match watched(name, *case) {
            Ok(()) => println!("node-suite: ok {name} ({:.1} s)", t.elapsed().as_secs_f64()),
            Err(why) => {
                // Every line of it: run-node.sh shows the node-suite lines.
                let mut lines = why.lines();
                println!("node-suite: FAILED {name}: {}", lines.next().unwrap_or(""));
                for line in lines {
                    println!("node-suite:   | {line}");
                }
                failed.push(*name);
            }
        }
    }
    println!(
        "node-suite: {} of {ran} cases passed in {:.1} s{}",
        ran - failed.len(),
        t0.elapsed().as_secs_f64(),
        if failed.is_empty() {
            String::new()
        } else {
            format!("; failed: {}", failed.join(", "))
        }
    );
    // A focus that matched nothing proves nothing.
    std::process::exit(if failed.is_empty() && ran > 0 { 0 } else { 1 });
}
