//! What goes from kubectl through the API server and kubelet to podscope's
//! streaming server: exec on a terminal and with stdin, logs -f, attach,
//! port-forward, and cp (tar over exec) both ways.

use super::IMAGE;
use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub fn streams(c: &Cluster) {
    kubectl::apply(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "talk", "namespace": NS, "labels": { "app": "talk" } },
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [
                // A web page on 8080, for port-forward.
                { "name": "main", "image": IMAGE, "command": ["sh", "-c",
                    "mkdir -p /www && echo talk-page > /www/index.html && httpd -p 8080 -h /www; \
                     trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"] },
                // Numbered lines, five a second.
                { "name": "logger", "image": IMAGE, "command": ["sh", "-c",
                    "trap 'exit 0' TERM; i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.2 & wait $!; done"] },
                // What it reads on its stdin, answered on its stdout (attach).
                { "name": "echo", "image": IMAGE, "stdin": true, "command": ["sh", "-c",
                    "trap 'exit 0' TERM; while read -r l; do echo \"got:$l\"; done"] },
            ],
        },
    }));
    let p = kubectl::wait_ready("talk", 1, Duration::from_secs(60)).remove(0);
    let node = p["spec"]["nodeName"].as_str().unwrap().to_string();
    ok!(c.t0, "pod talk Ready on {node}");

    exec_on_a_terminal(c);
    exec_with_stdin(c);
    logs_follow(c);
    attach(c);
    port_forward(c);
    copy_both_ways(c);
    kubectl::run(&["delete", "pod", "-n", NS, "talk", "--wait=false"]);
    shared_pid_namespace_shows_nothing_of_the_host(c);
}

/// Issue 41, finding 1, under kubelet: in a pod with
/// `shareProcessNamespace: true` the pod's init is PID 1 of every
/// container, and none of its files opens for the container's root (it
/// read the host's /etc/shadow through /proc/1/root).
fn shared_pid_namespace_shows_nothing_of_the_host(c: &Cluster) {
    kubectl::apply(&super::pod(
        "shared-pid",
        json!({
            "shareProcessNamespace": true,
            "terminationGracePeriodSeconds": 5,
            "containers": [super::container("main", super::IDLE)],
        }),
    ));
    kubectl::wait_ready("shared-pid", 1, Duration::from_secs(60));
    let out = kubectl::run(&[
        "exec", "-n", NS, "shared-pid", "--", "sh", "-c",
        "tr '\\0' ' ' < /proc/1/cmdline; echo; \
         probe() { if \"$@\" >/dev/null 2>&1; then echo \"$2 opened\"; else echo \"$2 denied\"; fi; }; \
         probe cat /proc/1/root/etc/shadow; probe ls /proc/1/cwd/; \
         probe cat /proc/1/environ; probe cat /proc/1/exe",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("podscope-init"),
        "PID 1 of the shared namespace is the pod's init: {out}"
    );
    assert_eq!(
        lines[1..],
        [
            "/proc/1/root/etc/shadow denied",
            "/proc/1/cwd/ denied",
            "/proc/1/environ denied",
            "/proc/1/exe denied"
        ],
        "the init's files open for none of the pod's containers: {out}"
    );
    kubectl::run(&["delete", "pod", "-n", NS, "shared-pid", "--wait=false"]);
    ok!(
        c.t0,
        "shareProcessNamespace: the pod's init shows nothing of the host"
    );
}

/// `kubectl exec -it` on a real terminal (script(1)'s pty, 27x91): the
/// container's shell has a terminal of that size, and its exit status
/// comes back.
fn exec_on_a_terminal(c: &Cluster) {
    let cmd = format!(
        "stty cols 91 rows 27; exec {} exec -it -n {NS} talk -c main -- sh",
        std::env::var("KUBECTL").unwrap()
    );
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1)");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    // One line at a time once the shell is there: what a terminal's user
    // types.
    let reader = spawn_reader(child.stdout.take().unwrap());
    wait_for_output(&reader, "# ", Duration::from_secs(20), "exec -it's prompt");
    stdin.write_all(b"tty; stty size; exit 7\n").unwrap();
    let out = wait_for_output(
        &reader,
        "27 91",
        Duration::from_secs(20),
        "exec -it's answer",
    );
    let status = child.wait().unwrap();
    assert!(out.contains("/dev/pts/"), "exec -it: no terminal: {out}");
    assert_eq!(
        status.code(),
        Some(7),
        "exec -it's exit status; output: {out}"
    );
    ok!(
        c.t0,
        "kubectl exec -it: a terminal (/dev/pts), 27x91, exit status 7 back"
    );
}

/// `kubectl exec -i` with stdin from a pipe: every byte through, EOF ends it.
fn exec_with_stdin(c: &Cluster) {
    let input: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let sum = kubectl::run_with_input(
        &["exec", "-i", "-n", NS, "talk", "-c", "main", "--", "md5sum"],
        &input,
    );
    assert_eq!(
        sum.split_whitespace().next(),
        Some(md5(&input).as_str()),
        "exec -i md5sum"
    );
    ok!(
        c.t0,
        "kubectl exec -i: 200000 bytes of stdin through, EOF ended it"
    );
}

/// `kubectl logs -f` sees lines written after it started.
fn logs_follow(c: &Cluster) {
    let last = |s: &str| -> u64 {
        s.lines()
            .rev()
            .find_map(|l| l.strip_prefix("line-")?.parse().ok())
            .unwrap_or(0)
    };
    let before = last(&kubectl::run(&[
        "logs", "-n", NS, "talk", "-c", "logger", "--tail=1",
    ]));
    let mut child = kubectl::spawn(&["logs", "-f", "-n", NS, "talk", "-c", "logger"]);
    let reader = spawn_reader(child.stdout.take().unwrap());
    let want = format!("line-{}", before + 10);
    let out = wait_for_output(&reader, &want, Duration::from_secs(20), "logs -f");
    child.kill().ok();
    child.wait().ok();
    let seen = last(&out);
    assert!(
        seen >= before + 10,
        "logs -f: up to line-{seen}, line-{before} before it started"
    );
    ok!(
        c.t0,
        "kubectl logs -f: followed from line-{before} to line-{seen} as they were written"
    );
}

/// `kubectl attach -i`: what is typed reaches the container's stdin, its
/// answer comes back.
fn attach(c: &Cluster) {
    let mut child = kubectl::command()
        .args(["attach", "-i", "-n", NS, "talk", "-c", "echo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = spawn_reader(child.stdout.take().unwrap());
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    // Until attached, a line may go nowhere: say it again until answered.
    let end = Instant::now() + Duration::from_secs(20);
    let mut out = String::new();
    while !out.contains("got:hello-attach") {
        assert!(Instant::now() < end, "attach: no answer: {out}");
        stdin.write_all(b"hello-attach\n").unwrap();
        if let Ok(s) = reader.recv_timeout(Duration::from_millis(500)) {
            out.push_str(&s);
        }
    }
    drop(stdin);
    child.kill().ok();
    child.wait().ok();
    ok!(
        c.t0,
        "kubectl attach -i: a line typed in, the container's answer out"
    );
}

/// `kubectl port-forward`: the pod's 8080 on the control plane's loopback.
fn port_forward(c: &Cluster) {
    let mut child = kubectl::spawn(&["port-forward", "-n", NS, "pod/talk", "18080:8080"]);
    let reader = spawn_reader(child.stdout.take().unwrap());
    wait_for_output(
        &reader,
        "Forwarding from",
        Duration::from_secs(20),
        "port-forward",
    );
    let page = Command::new("curl")
        .args(["-sf", "--max-time", "10", "http://127.0.0.1:18080/"])
        .output()
        .unwrap();
    child.kill().ok();
    child.wait().ok();
    assert!(
        page.status.success(),
        "curl through port-forward: {:?}",
        page
    );
    assert_eq!(String::from_utf8_lossy(&page.stdout).trim(), "talk-page");
    ok!(
        c.t0,
        "kubectl port-forward: the pod's page through 127.0.0.1:18080"
    );
}

/// `kubectl cp` in and out: the same bytes.
fn copy_both_ways(c: &Cluster) {
    let dir = std::env::var("STATE").unwrap() + "/cp";
    std::fs::create_dir_all(&dir).unwrap();
    let data: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let local = format!("{dir}/in");
    std::fs::write(&local, &data).unwrap();
    kubectl::run(&["cp", &local, &format!("{NS}/talk:/tmp/in"), "-c", "main"]);
    let sum = kubectl::run(&[
        "exec", "-n", NS, "talk", "-c", "main", "--", "md5sum", "/tmp/in",
    ]);
    assert_eq!(
        sum.split_whitespace().next(),
        Some(md5(&data).as_str()),
        "cp into the pod"
    );
    kubectl::run(&[
        "exec",
        "-n",
        NS,
        "talk",
        "-c",
        "main",
        "--",
        "sh",
        "-c",
        "head -c 777777 /dev/urandom > /tmp/out",
    ]);
    let inside = kubectl::run(&[
        "exec", "-n", NS, "talk", "-c", "main", "--", "md5sum", "/tmp/out",
    ]);
    let back = format!("{dir}/out");
    kubectl::run(&["cp", &format!("{NS}/talk:/tmp/out"), &back, "-c", "main"]);
    let got = std::fs::read(&back).unwrap();
    assert_eq!(got.len(), 777_777, "cp out of the pod: size");
    assert_eq!(
        inside.split_whitespace().next(),
        Some(md5(&got).as_str()),
        "cp out of the pod"
    );
    ok!(
        c.t0,
        "kubectl cp: 1000000 bytes in, 777777 out, the same on both sides"
    );
}

fn md5(data: &[u8]) -> String {
    let mut child = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A thread reading R, sending what it reads in chunks.
fn spawn_reader(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        loop {
            let mut buf = Vec::new();
            match r.fill_buf() {
                Ok([]) | Err(_) => break,
                Ok(b) => buf.extend_from_slice(b),
            }
            r.consume(buf.len());
            if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                break;
            }
        }
    });
    rx
}

/// What the reader gives, until it holds WANT: all of it.
fn wait_for_output(
    rx: &mpsc::Receiver<String>,
    want: &str,
    timeout: Duration,
    what: &str,
) -> String {
    let end = Instant::now() + timeout;
    let mut out = String::new();
    while !out.contains(want) {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(s) => out.push_str(&s),
            Err(_) => panic!("{what}: {want:?} not seen within {timeout:?}; got: {out}"),
        }
    }
    out
}
