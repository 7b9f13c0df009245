//! kubectl, as a user types it: every call a `kubectl` process against the
//! cluster's API server (KUBECONFIG, KUBECTL from run-cluster.sh), objects
//! in and out as JSON.

use serde_json::Value;
use std::io::Write;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The namespace every object of the checks lives in (deleted at the end).
pub const NS: &str = "checks";

pub fn command() -> Command {
    let mut c = Command::new(std::env::var("KUBECTL").expect("KUBECTL names kubectl"));
    c.env(
        "KUBECONFIG",
        std::env::var("KUBECONFIG").expect("KUBECONFIG names the admin's kubeconfig"),
    );
    c
}

fn describe(args: &[&str]) -> String {
    format!("kubectl {}", args.join(" "))
}

/// `kubectl ARGS`: its output, whatever its status.
pub fn output(args: &[&str]) -> Output {
    command()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", describe(args)))
}

/// `kubectl ARGS`, which must succeed: its standard output.
pub fn run(args: &[&str]) -> String {
    let o = output(args);
    assert!(
        o.status.success(),
        "{} failed ({}): {}{}",
        describe(args),
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl ARGS` with INPUT on its standard input, which must succeed.
pub fn run_with_input(args: &[&str], input: &[u8]) -> String {
    let mut child = command()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", describe(args)));
    child.stdin.take().unwrap().write_all(input).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{} failed ({}): {}",
        describe(args),
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl ARGS` left running (port-forward, logs -f), its output piped.
pub fn spawn(args: &[&str]) -> Child {
    command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", describe(args)))
}

/// `kubectl apply` of one object.
pub fn apply(object: &Value) {
    run_with_input(&["apply", "-f", "-"], object.to_string().as_bytes());
}

/// An object of the checks' namespace (`kind` as kubectl names it), or
/// None when it is not there.
pub fn get(kind: &str, name: &str) -> Option<Value> {
    let o = output(&["get", kind, name, "-n", NS, "-o", "json"]);
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("NotFound"), "kubectl get {kind} {name}: {err}");
        return None;
    }
    Some(serde_json::from_slice(&o.stdout).expect("kubectl's JSON"))
}

/// The items of `kubectl get KIND ARGS -o json` (in the checks' namespace
/// unless ARGS name another or all).
pub fn list(kind: &str, args: &[&str]) -> Vec<Value> {
    let mut a = vec!["get", kind, "-o", "json"];
    if !args.iter().any(|x| x.starts_with("-n") || *x == "-A") {
        a.extend(["-n", NS]);
    }
    a.extend(args);
    let v: Value = serde_json::from_str(&run(&a)).expect("kubectl's JSON");
    v["items"].as_array().cloned().unwrap_or_default()
}

/// The pods of the checks' namespace with label `app=APP`.
pub fn pods(app: &str) -> Vec<Value> {
    list("pods", &["-l", &format!("app={app}")])
}

/// Poll F (every 0.5 s) until it gives Some, for at most TIMEOUT; the
/// panic names WHAT and what F saw, each change with its time.
pub fn wait<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    // What was seen, each change of it with its time: a wait that fails
    // tells the story, not only its last moment.
    let mut seen: Vec<(Duration, String)> = Vec::new();
    loop {
        match f() {
            Ok(v) => return v,
            Err(now) => {
                if seen.last().is_none_or(|(_, last)| *last != now) {
                    seen.push((start.elapsed(), now));
                }
                if start.elapsed() > timeout {
                    let story: Vec<String> = seen
                        .iter()
                        .rev()
                        .take(WAIT_STORY)
                        .rev()
                        .map(|(t, s)| format!("  [{:5.1} s] {s}", t.as_secs_f64()))
                        .collect();
                    panic!(
                        "{what}: not within {timeout:?}; seen ({} changes, the last {}):\n{}",
                        seen.len(),
                        story.len(),
                        story.join("\n")
                    )
                }
                std::thread::sleep(Duration::from_millis(500))
            }
        }
    }
}

/// How many of a failed wait's changes it prints.
const WAIT_STORY: usize = 8;

/// Whether the pod's Ready condition is True.
pub fn pod_ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Wait until every pod with `app=APP` is Ready, and there are N of them
/// (none terminating): the pods.
pub fn wait_ready(app: &str, n: usize, timeout: Duration) -> Vec<Value> {
    wait(&format!("{n} pods of {app} Ready"), timeout, || {
        let ps: Vec<Value> = pods(app)
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        let ready = ps.iter().filter(|p| pod_ready(p)).count();
        if ps.len() == n && ready == n {
            Ok(ps)
        } else {
            Err(format!(
                "{} pods, {ready} ready: {}",
                ps.len(),
                summary(&ps)
            ))
        }
    })
}

/// name@node phase for each pod, for messages.
pub fn summary(ps: &[Value]) -> String {
    ps.iter()
        .map(|p| {
            format!(
                "{}@{} {}",
                p["metadata"]["name"].as_str().unwrap_or("?"),
                p["spec"]["nodeName"].as_str().unwrap_or("-"),
                p["status"]["phase"].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The events of the checks' namespace about object NAME: "reason: message".
pub fn events_of(name: &str) -> Vec<String> {
    list(
        "events",
        &["--field-selector", &format!("involvedObject.name={name}")],
    )
    .iter()
    .map(|e| {
        format!(
            "{}: {}",
            e["reason"].as_str().unwrap_or(""),
            e["message"].as_str().unwrap_or("")
        )
    })
    .collect()
}
