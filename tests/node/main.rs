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
mod cri;

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

fn main() {
    let t0 = Instant::now();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, case) in cases::ALL {
        let t = Instant::now();
        ran += 1;
        match case() {
            Ok(()) => println!("node-suite: ok {name} ({:.1} s)", t.elapsed().as_secs_f64()),
            Err(why) => {
                println!("node-suite: FAILED {name}: {why}");
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
    std::process::exit(if failed.is_empty() { 0 } else { 1 });
}
