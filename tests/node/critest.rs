//! critest 1.36's specs whose answer on a cgroup v2 node comes from code
//! the v1 harness never runs: OOMKilled through memory.events, the
//! container stats read from v2 files, an exec on a terminal and an exec
//! cut at its timeout (crun's exec joins the container's cgroup through
//! podscope-init on v2). The whole suite runs in the harness (make
//! conformance); here only these, for the VM's time.

use crate::{ensure, Outcome};
use std::process::Command;

/// The specs, by the words of their names.
const FOCUS: &str =
    "OOMKilled reason|listing container stats|listing stats for|exec with tty=true|execSync with timeout";
/// How many specs that focus runs: the names matched, counted, so a
/// renamed spec fails here instead of silently dropping out.
const SPECS: usize = 8;

pub fn v2_specs() -> Outcome {
    run_focus(FOCUS, SPECS)
}

/// critest 1.36's AppArmor specs (three for the deprecated
/// apparmor_profile field, three for the structured one, three with both,
/// the new winning): a loaded Localhost profile that denies writes is
/// enforced, an auditing one lets the write through, an unloaded one is
/// refused at CreateContainer. critest loads its test profiles itself with
/// `sudo apparmor_parser` (the node has both packages).
pub fn apparmor_specs() -> Outcome {
    run_focus("AppArmor", 9)
}

/// Run the specs `focus` names; exactly `specs` of them must run, and pass.
fn run_focus(focus: &str, specs: usize) -> Outcome {
    let critest = std::env::var("CRITEST").map_err(|_| "CRITEST is not set")?;
    let endpoint = crate::cri::ENDPOINT;
    let out = Command::new(&critest)
        .args(["--runtime-endpoint", endpoint, "--image-endpoint", endpoint])
        .arg(format!("--ginkgo.focus={focus}"))
        .arg("--ginkgo.no-color")
        .output()
        .map_err(|e| format!("{critest}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ran = text.lines().find_map(|l| {
        l.strip_prefix("Ran ")?
            .split_whitespace()
            .next()?
            .parse::<usize>()
            .ok()
    });
    let tail: String = text
        .lines()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    ensure!(
        out.status.success()
            && ran == Some(specs)
            && text.contains(&format!("{specs} Passed | 0 Failed")),
        "critest ran {ran:?} of the {specs} specs of {focus:?} ({}):\n{tail}",
        out.status
    );
    Ok(())
}
