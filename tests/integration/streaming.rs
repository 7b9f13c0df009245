//! The CRI streaming server, driven by crictl (client-go's SPDY executor,
//! as kubelet's proxy and critest use it) and by raw HTTP for what no
//! client would send: exec with and without a terminal, stdin, exit codes,
//! a client that hangs up, tokens that serve once.

use crate::containers::{log_pod, pull_busybox, run, sh_cmd};
use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use podscope_test_support::harness::*;
use std::io::{Read, Write};
use std::time::Duration;

const EP: &str = "unix:///run/podscope/cri.sock";

fn crictl_cmd(args: &str) -> String {
    format!(
        "{} --runtime-endpoint {EP} --image-endpoint {EP} {args}",
        crictl()
    )
}

/// No exec's unit and no exec socket left behind.
fn no_exec_left() {
    wait_until(Duration::from_secs(10), || {
        sh("systemctl list-units --all --plain --no-legend 'podscope-exec-*' | wc -l").trim() == "0"
    });
    let left = sh("ls /run/podscope/exec 2>/dev/null | wc -l");
    assert_eq!(
        left.trim(),
        "0",
        "exec sockets left: {}",
        sh("ls -l /run/podscope/exec")
    );
}

/// A running busybox container (`sleep`) in a pod of its own.
async fn sleeper(m: &Client, prefix: &str, handler: &str) -> (String, String) {
    pull_busybox(m).await;
    let (pod, _) = log_pod(m, prefix, handler).await;
    let id = run(m, &pod, "sleeper", sh_cmd("exec sleep 3600")).await;
    (pod, id)
}

async fn crictl_exec_relays_output_stdin_and_exit_codes(handler: &str) {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sx", handler).await;
    let (rc, out, err) = sh_out(&crictl_cmd(&format!("exec {id} echo hello")));
    assert_eq!((rc, out.as_str()), (0, "hello\n"), "{err}");

    let (rc, out, err) = sh_out(&crictl_cmd(&format!(
        "exec {id} sh -c 'echo out; echo err >&2; exit 3'"
    )));
    assert_ne!(rc, 0);
    assert_eq!(out, "out\n");
    assert!(err.contains("err\n"), "{err}");
    assert!(err.contains("command terminated with exit code 3"), "{err}");

    let (rc, out, err) = sh_out(&format!(
        "printf 'one\\ntwo\\n' | {}",
        crictl_cmd(&format!("exec -i {id} sh -c 'cat; echo done'"))
    ));
    assert_eq!((rc, out.as_str()), (0, "one\ntwo\ndone\n"), "{err}");

    // A binary the image does not have: the runtime's own words.
    let (rc, _, err) = sh_out(&crictl_cmd(&format!("exec {id} no-such-binary")));
    assert_ne!(rc, 0);
    assert!(err.contains("no-such-binary"), "{err}");
    assert!(err.contains("not found"), "{err}");
    assert!(
        err.contains(&format!(
            "runtime {}",
            if handler.is_empty() { "crun" } else { handler }
        )),
        "{err}"
    );

    no_exec_left();
    m.remove(&pod).await.unwrap();
}

#[tokio::test]
async fn crictl_exec_relays_output_stdin_and_exit_codes_crun() {
    crictl_exec_relays_output_stdin_and_exit_codes("crun").await;
}

#[tokio::test]
async fn crictl_exec_relays_output_stdin_and_exit_codes_runc() {
    crictl_exec_relays_output_stdin_and_exit_codes("runc").await;
}

/// `crictl exec -it` on a real terminal (script(1)): the runtime's pty in
/// the container (a controlling terminal, so job control and ^C work),
/// the client's size, and the shell's exit code.
#[tokio::test]
async fn crictl_exec_it_runs_on_a_real_terminal() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "st", "").await;
    let script = format!(
        "( sleep 1; printf 'tty; stty size; set -m && echo jobs-on\\r'; sleep 1; printf 'exit 5\\r'; sleep 1 ) \
         | script -qec \"stty cols 123 rows 45; {}\" /dev/null",
        crictl_cmd(&format!("exec -it {id} sh"))
    );
    let (_, out, err) = sh_out(&script);
    let all = format!("{out}{err}");
    assert!(all.contains("/dev/pts/0"), "{all}");
    assert!(all.contains("45 123"), "{all}");
    assert!(all.contains("jobs-on"), "{all}");
    assert!(all.contains("command terminated with exit code 5"), "{all}");
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// A client that goes away takes its command, and all it started, with it.
#[tokio::test]
async fn a_hung_up_exec_is_killed_with_all_it_started() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sh", "").await;
    let mut child = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec {}",
            crictl_cmd(&format!("exec {id} sh -c 'sleep 1001 & sleep 1002'"))
        ))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || {
        sh_status("pgrep -f 'sleep 100[1]' >/dev/null && pgrep -f 'sleep 100[2]' >/dev/null") == 0
    });
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until(Duration::from_secs(10), || {
        sh_status("pgrep -f 'sleep 100[12]' >/dev/null") != 0
    });
    no_exec_left();
    // The container itself is untouched.
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        s.state,
        podscope_api::domain::container::ContainerState::Running
    );
    m.remove(&pod).await.unwrap();
}

/// Unknown and stopped containers are refused at the Exec call, named.
#[tokio::test]
async fn exec_refuses_unknown_and_stopped_containers() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "su", "").await;
    let (rc, _, err) = sh_out(&crictl_cmd("exec 0123456789ab true"));
    assert_ne!(rc, 0);
    assert!(err.contains("NotFound"), "{err}");
    m.stop_container(&id, 0).await.unwrap();
    let (rc, _, err) = sh_out(&crictl_cmd(&format!("exec {id} true")));
    assert_ne!(rc, 0);
    assert!(
        err.contains("FailedPrecondition") && err.contains("not running"),
        "{err}"
    );
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

pub async fn cri_client() -> RuntimeServiceClient<tonic::transport::Channel> {
    let ch = cri_api::channel(std::path::Path::new("/run/podscope/cri.sock"))
        .await
        .unwrap();
    RuntimeServiceClient::new(ch)
}

/// Send a request head to the streaming server; its status line.
fn status_of(url: &str, path: &str, protocols: &[&str]) -> String {
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut s = std::net::TcpStream::connect(&host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
    );
    for p in protocols {
        req.push_str(&format!("X-Stream-Protocol-Version: {p}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

/// A token serves one connection; a spent, forged or misrouted one gets
/// 404, all alike; a client with no protocol in common gets 403.
#[tokio::test]
async fn stream_tokens_serve_once_and_404_otherwise() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sk", "").await;
    let mut c = cri_client().await;
    let url = |c: &mut RuntimeServiceClient<_>| {
        let req = cri::ExecRequest {
            container_id: id.clone(),
            cmd: vec!["true".into()],
            stdout: true,
            ..Default::default()
        };
        let mut c = c.clone();
        async move { c.exec(req).await.unwrap().into_inner().url }
    };
    let u = url(&mut c).await;
    assert!(u.starts_with("http://127.0.0.1:"), "{u}");
    let path = format!("/exec/{}", u.rsplit('/').next().unwrap());
    assert_eq!(
        status_of(&u, &path, &["v4.channel.k8s.io"]),
        "HTTP/1.1 101 Switching Protocols"
    );
    assert_eq!(
        status_of(&u, &path, &["v4.channel.k8s.io"]),
        "HTTP/1.1 404 Not Found"
    );
    assert_eq!(
        status_of(&u, "/exec/AAAAAAAA", &["v4.channel.k8s.io"]),
        "HTTP/1.1 404 Not Found"
    );
    // An exec token on the attach route: refused, and spent.
    let u = url(&mut c).await;
    let token = u.rsplit('/').next().unwrap().to_owned();
    assert_eq!(
        status_of(&u, &format!("/attach/{token}"), &["v4.channel.k8s.io"]),
        "HTTP/1.1 404 Not Found"
    );
    assert_eq!(
        status_of(&u, &format!("/exec/{token}"), &["v4.channel.k8s.io"]),
        "HTTP/1.1 404 Not Found"
    );
    let u = url(&mut c).await;
    let path = format!("/exec/{}", u.rsplit('/').next().unwrap());
    assert_eq!(
        status_of(&u, &path, &["portforward.k8s.io"]),
        "HTTP/1.1 403 Forbidden"
    );
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// A container that counts, its log file's path.
async fn counter(m: &Client, prefix: &str) -> (String, String, String) {
    pull_busybox(m).await;
    let (pod, logs) = log_pod(m, prefix, "").await;
    let mut o = sh_cmd("i=0; while true; do echo line $i; i=$((i+1)); sleep 0.02; done");
    o.log_path = "counter.log".into();
    let id = run(m, &pod, "counter", o).await;
    (pod, id, format!("{logs}/counter.log"))
}

/// Two attachers at once each get the container's output, and the log file
/// keeps every line meanwhile and after they leave.
#[tokio::test]
async fn attachers_see_the_output_and_the_log_keeps_every_line() {
    let (m, _) = manager().await;
    let (pod, id, log) = counter(&m, "sa").await;
    let attach = || {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("exec {}", crictl_cmd(&format!("attach {id}"))))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (attach(), attach());
    tokio::time::sleep(Duration::from_secs(2)).await;
    for c in [&mut a, &mut b] {
        c.kill().unwrap();
    }
    for c in [a, b] {
        let out = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap();
        let lines: Vec<String> = out.lines().map(String::from).collect();
        assert!(
            lines.len() >= 10,
            "an attacher got {} lines: {out}",
            lines.len()
        );
        let n = crate::containers::numbered(&lines, "line");
        assert!(n.malformed.is_empty() && n.out_of_order.is_empty(), "{out}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    m.stop_container(&id, 0).await.unwrap();
    let recs = crate::containers::strict_records(&log);
    let lines = crate::containers::whole_lines(&recs, "stdout");
    let n = crate::containers::numbered(&lines, "line");
    assert!(lines.len() > 100, "{} lines logged", lines.len());
    assert!(
        n.missing.is_empty() && n.duplicated.is_empty() && n.out_of_order.is_empty(),
        "the log lost lines while attached: {:?}",
        (n.missing, n.duplicated)
    );
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// A container running `sh` on its stdin (with stdin_once, or a terminal).
fn shell(stdin_once: bool, tty: bool) -> podscope_api::container::ContainerOptions {
    podscope_api::container::ContainerOptions {
        command: vec!["sh".into()],
        stdin: true,
        stdin_once,
        tty,
        ..Default::default()
    }
}

/// stdin_once: the first attacher's stdin ending ends the container's
/// stdin, and `sh` with it; the attach ends with the container.
#[tokio::test]
async fn attach_with_stdin_once_closes_the_containers_stdin() {
    let (m, _) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "si", "").await;
    let id = run(&m, &pod, "shell", shell(true, false)).await;
    let (rc, out, err) = sh_out(&format!(
        "printf 'echo attached-$((40+2))\\n' | timeout 30 {}",
        crictl_cmd(&format!("attach -i {id}"))
    ));
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("attached-42"), "{out}{err}");
    crate::containers::wait_container(
        &m,
        &id,
        podscope_api::domain::container::ContainerState::Exited,
        Duration::from_secs(10),
    )
    .await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.exit_code, 0);
    m.remove(&pod).await.unwrap();
}

/// `crictl attach -it` to a terminal container, on a real terminal: what
/// is typed reaches the shell, its output comes back, and the client's
/// size reaches the container's terminal.
#[tokio::test]
async fn crictl_attach_it_runs_on_a_real_terminal() {
    let (m, _) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "sy", "").await;
    let id = run(&m, &pod, "term", shell(false, true)).await;
    let script = format!(
        "( sleep 1; printf 'echo attached-$((40+2)); stty size\\r'; sleep 1; printf 'exit 7\\r'; sleep 1 ) \
         | script -qec \"stty cols 99 rows 33; {}\" /dev/null",
        crictl_cmd(&format!("attach -it {id}"))
    );
    let (_, out, err) = sh_out(&script);
    let all = format!("{out}{err}");
    assert!(all.contains("attached-42"), "{all}");
    assert!(all.contains("33 99"), "{all}");
    crate::containers::wait_container(
        &m,
        &id,
        podscope_api::domain::container::ContainerState::Exited,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(m.container_status(&id).await.unwrap().exit_code, 7);
    m.remove(&pod).await.unwrap();
}

/// A pod serving `hello-pf` over HTTP on port 8080 (busybox httpd).
async fn web_pod(m: &Client, prefix: &str) -> String {
    pull_busybox(m).await;
    let (pod, _) = log_pod(m, prefix, "").await;
    run(
        m,
        &pod,
        "web",
        sh_cmd("mkdir -p /www && echo hello-pf > /www/index.html && exec httpd -f -p 8080 -h /www"),
    )
    .await;
    pod
}

/// A free local port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `crictl port-forward` in the background, ready once it says so.
fn forwarder(pod: &str, spec: &str) -> std::process::Child {
    forwarder_env("", pod, spec)
}

/// `forwarder`, with `env` (`NAME=value ...`) in crictl's environment.
fn forwarder_env(env: &str, pod: &str, spec: &str) -> std::process::Child {
    let mut c = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec env {env} {}",
            crictl_cmd(&format!("port-forward {pod} {spec}"))
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(
        line.contains("Forwarding from"),
        "crictl port-forward said {line:?}"
    );
    // It says more ("Handling connection for ..."): read on, or it dies of
    // SIGPIPE.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    c
}

/// crictl's port-forward reaches a port of the pod's namespace, several
/// connections at once over its one SPDY connection.
#[tokio::test]
async fn crictl_port_forward_reaches_the_pods_port() {
    let (m, _) = manager().await;
    let pod = web_pod(&m, "pf").await;
    let local = free_port();
    let mut fwd = forwarder(&pod, &format!("{local}:8080"));
    // The server may take a moment to listen after its container starts.
    wait_until(Duration::from_secs(10), || {
        sh_out(&format!("curl -sf http://127.0.0.1:{local}/")).1 == "hello-pf\n"
    });
    let (rc, out, err) = sh_out(&format!(
        "for i in 1 2 3 4 5 6 7 8; do curl -sf http://127.0.0.1:{local}/ & done; wait"
    ));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.matches("hello-pf").count(), 8, "{out}");
    fwd.kill().unwrap();
    fwd.wait().unwrap();
    m.remove(&pod).await.unwrap();
}

/// A port nobody listens on is told on the error stream, named, not a
/// hang.
#[tokio::test]
async fn port_forward_to_a_closed_port_says_so() {
    let (m, _) = manager().await;
    let pod = web_pod(&m, "pc").await;
    let local = free_port();
    let fwd = forwarder(&pod, &format!("{local}:9"));
    let (rc, _, _) = sh_out(&format!("curl -s --max-time 20 http://127.0.0.1:{local}/"));
    assert_ne!(rc, 0);
    // crictl 1.29 ends the whole forwarding on such an error.
    let out = fwd.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error forwarding port 9 to pod"), "{err}");
    assert!(err.contains("refused"), "{err}");
    m.remove(&pod).await.unwrap();
}

/// Python's `websockets` speaking to the streaming server: JSON out.
fn ws_client(args: &str) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/streaming/ws_client.py");
    let (rc, out, err) = sh_out(&format!("timeout 60 /usr/bin/python3 {script} {args}"));
    assert_eq!(rc, 0, "ws_client {args}: {out}{err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("ws_client said {out:?}: {e}"))
}

async fn exec_url(id: &str, cmd: &[&str], stdin: bool) -> String {
    let req = cri::ExecRequest {
        container_id: id.to_owned(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        stdin,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    cri_client().await.exec(req).await.unwrap().into_inner().url
}

/// Exec over WebSocket, as newer clients speak it: v5 (stdin and its end),
/// v4 (a non-zero exit as kubelet reports it) and base64 text frames.
#[tokio::test]
async fn websocket_exec_speaks_v5_v4_and_base64() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sw", "").await;

    let url = exec_url(&id, &["sh", "-c", "cat; echo done >&2"], true).await;
    let r = ws_client(&format!("exec {url} v5.channel.k8s.io 'typed text'"));
    assert_eq!(r["protocol"], "v5.channel.k8s.io");
    assert_eq!(r["first"], serde_json::json!([1, 0]), "{r}");
    assert_eq!(r["channels"]["1"], "typed text", "{r}");
    assert_eq!(r["channels"]["2"], "done\n", "{r}");
    let status: serde_json::Value =
        serde_json::from_str(r["channels"]["3"].as_str().unwrap()).unwrap();
    assert_eq!(status["status"], "Success", "{r}");

    let url = exec_url(&id, &["sh", "-c", "exit 3"], false).await;
    let r = ws_client(&format!("exec {url} v4.channel.k8s.io"));
    let status: serde_json::Value =
        serde_json::from_str(r["channels"]["3"].as_str().unwrap()).unwrap();
    assert_eq!(status["reason"], "NonZeroExitCode", "{r}");
    assert_eq!(status["details"]["causes"][0]["message"], "3", "{r}");

    let url = exec_url(&id, &["echo", "in base64"], false).await;
    let r = ws_client(&format!("exec {url} v4.base64.channel.k8s.io"));
    assert_eq!(r["channels"]["1"], "in base64\n", "{r}");
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// Port-forward over WebSocket: each channel announces its port, then the
/// pod's server answers on the data channel.
#[tokio::test]
async fn websocket_port_forward_reaches_the_pods_port() {
    let (m, _) = manager().await;
    let pod = web_pod(&m, "pw").await;
    let req = cri::PortForwardRequest {
        pod_sandbox_id: pod.clone(),
        port: vec![8080],
    };
    let mut c = cri_client().await;
    // The server may take a moment to listen after its container starts.
    let mut last = serde_json::Value::Null;
    for _ in 0..50 {
        let url = c.port_forward(req.clone()).await.unwrap().into_inner().url;
        last = ws_client(&format!(
            "portforward {url} v4.channel.k8s.io $'GET / HTTP/1.0\\r\\n\\r\\n'"
        ));
        if last["data"].as_str().unwrap_or("").contains("hello-pf") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        last["ports"],
        serde_json::json!([[0, 8080], [1, 8080]]),
        "{last}"
    );
    assert!(
        last["data"].as_str().unwrap().contains("hello-pf"),
        "{last}"
    );
    m.remove(&pod).await.unwrap();
}

/// podscopectl's exec with its own stdin (`-i`) and on a terminal (`-it`):
/// the caller's descriptors go to podscoped as they are, or the runtime's
/// terminal comes back and is relayed, sized like the caller's.
#[tokio::test]
async fn podscopectl_exec_i_and_it() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sp", "").await;
    let (rc, out, err) = sh_out(&format!(
        "echo piped | podscopectl exec -i {id} sh -c 'cat; echo to-stderr >&2; exit 4'"
    ));
    assert_eq!((rc, out.as_str()), (4, "piped\n"), "{err}");
    assert_eq!(err, "to-stderr\n");
    let (rc, out, err) = sh_out(&format!(
        "( sleep 1; printf 'tty; stty size\\r'; sleep 1; printf 'exit 6\\r'; sleep 1 ) \
         | script -qec \"stty cols 77 rows 22; podscopectl exec -it {id} sh\" /dev/null"
    ));
    assert_eq!(rc, 6, "{out}{err}");
    assert!(
        out.contains("/dev/pts/0") && out.contains("22 77"),
        "{out}{err}"
    );
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// podscopectl attach: the container's output on ours; on a terminal
/// container, ctrl-p ctrl-q detaches and leaves it running.
#[tokio::test]
async fn podscopectl_attach_follows_and_detaches() {
    let (m, _) = manager().await;
    let (pod, id, _) = counter(&m, "sq").await;
    let (_, out, _) = sh_out(&format!("timeout 2 podscopectl attach {id}"));
    let lines: Vec<String> = out.lines().map(String::from).collect();
    let n = crate::containers::numbered(&lines, "line");
    assert!(lines.len() >= 10 && n.malformed.is_empty(), "{out}");

    let term = run(&m, &pod, "term", shell(false, true)).await;
    let (rc, out, err) = sh_out(&format!(
        "( sleep 1; printf 'echo attached-$((40+2))\\r'; sleep 1; printf '\\020\\021'; sleep 1 ) \
         | script -qec \"podscopectl attach -i {term}\" /dev/null"
    ));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(
        out.contains("attached-42") && out.contains("detached"),
        "{out}{err}"
    );
    let s = m.container_status(&term).await.unwrap();
    assert_eq!(
        s.state,
        podscope_api::domain::container::ContainerState::Running
    );
    m.remove(&pod).await.unwrap();
}

/// podscope-cri's PID, RSS (KiB) and open descriptors.
pub fn frontend() -> (u32, u64, usize) {
    let pid: u32 = sh("systemctl show -p MainPID --value podscope-cri.service")
        .trim()
        .parse()
        .unwrap();
    assert_ne!(pid, 0, "podscope-cri is not running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    (pid, rss, fds)
}

/// Restarts podscope-cri on the shipped config when dropped.
struct FrontendConfig;

impl FrontendConfig {
    fn set(config: &str) -> Self {
        std::fs::write("/etc/podscope/podscope.toml", config).unwrap();
        sh("systemctl restart podscope-cri.service");
        FrontendConfig
    }
}

impl Drop for FrontendConfig {
    fn drop(&mut self) {
        restore_config();
        let _ = sh_out("systemctl restart podscope-cri.service");
    }
}

/// A session with no traffic for stream_idle_timeout_ms is closed, and
/// its command killed.
#[tokio::test]
async fn an_idle_stream_is_closed_at_its_timeout() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sl", "").await;
    let _config = FrontendConfig::set("stream_idle_timeout_ms = 1500\n");
    let t0 = std::time::Instant::now();
    let (rc, _, err) = sh_out(&crictl_cmd(&format!("exec {id} sleep 1003")));
    assert_ne!(rc, 0);
    assert!(err.contains("idle"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    wait_until(Duration::from_secs(10), || {
        sh_status("pgrep -f 'sleep 100[3]' >/dev/null") != 0
    });
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// 200 connections that never send a request: the server still serves,
/// and closes them at its head timeout; nothing stays open.
#[tokio::test]
async fn two_hundred_idle_connections_change_nothing() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sd", "").await;
    // Where the streaming server listens: an Exec's URL says.
    let url = exec_url(&id, &["true"], false).await;
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let (_, _, fds0) = frontend();
    let idle: Vec<std::net::TcpStream> = (0..200)
        .map(|_| std::net::TcpStream::connect(&host).unwrap())
        .collect();
    let (rc, out, err) = sh_out(&crictl_cmd(&format!("exec {id} echo served")));
    assert_eq!((rc, out.as_str()), (0, "served\n"), "{err}");
    // Each is closed by the server within its 10 s for the request head.
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(s.read(&mut b).unwrap_or(0), 0);
    }
    wait_until(Duration::from_secs(10), || frontend().2 <= fds0);
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// A client that stops reading: the command blocks on its full pipe, no
/// buffer grows (podscope-cri's RSS, podscoped's), and hanging up kills it.
#[tokio::test]
async fn a_client_that_stops_reading_blocks_the_command_not_memory() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sr", "").await;
    let url = exec_url(&id, &["cat", "/dev/zero"], false).await;
    let daemon_rss = || -> u64 {
        let pid = sh("systemctl show -p MainPID --value podscoped")
            .trim()
            .to_owned();
        sh(&format!("grep VmRSS /proc/{pid}/status"))
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let (_, rss0, _) = frontend();
    let drss0 = daemon_rss();
    // Upgrades, then never reads another byte.
    let script = format!(
        "import asyncio, websockets\n\
         async def main():\n\
         \x20   async with websockets.connect('ws://{}', subprotocols=['v4.channel.k8s.io'], max_size=None) as ws:\n\
         \x20       await asyncio.sleep(6)\n\
         asyncio.run(main())\n",
        url.trim_start_matches("http://")
    );
    std::fs::write("/run/podscope-test-stall.py", script).unwrap();
    let (rc, _, err) = sh_out("/usr/bin/python3 /run/podscope-test-stall.py");
    assert_eq!(rc, 0, "{err}");
    let (_, rss1, _) = frontend();
    let drss1 = daemon_rss();
    assert!(
        rss1 < rss0 + 16 * 1024,
        "podscope-cri grew from {rss0} to {rss1} KiB"
    );
    assert!(
        drss1 < drss0 + 16 * 1024,
        "podscoped grew from {drss0} to {drss1} KiB"
    );
    wait_until(Duration::from_secs(10), || {
        sh_status("pgrep -f 'cat /dev/[z]ero' >/dev/null") != 0
    });
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// 1000 sessions, half over SPDY (crictl), half over WebSocket, opened and
/// closed: podscope-cri's descriptors are where they were, its RSS about.
#[tokio::test]
async fn a_thousand_sessions_leave_no_trace_in_the_frontend() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "sn", "").await;
    let spdy = |n: usize| {
        let (rc, out, err) = sh_out(&format!(
            "for i in $(seq {n}); do {} || exit 1; done | wc -l",
            crictl_cmd(&format!("exec {id} echo x"))
        ));
        assert_eq!((rc, out.trim()), (0, n.to_string().as_str()), "{err}");
    };
    // Its gRPC connection counts in the frontend: made before the count.
    let mut c = cri_client().await;
    // Warm up: the allocator's and the runtime's first growth.
    spdy(20);
    let (_, rss0, fds0) = frontend();
    spdy(500);
    let mut urls = Vec::new();
    for _ in 0..500 {
        let req = cri::ExecRequest {
            container_id: id.clone(),
            cmd: vec!["echo".into(), "x".into()],
            stdout: true,
            ..Default::default()
        };
        urls.push(c.exec(req).await.unwrap().into_inner().url);
        if urls.len() == 100 {
            ws_many(&urls);
            urls.clear();
        }
    }
    // The last connections' ends are a moment behind the clients'.
    let t0 = std::time::Instant::now();
    while frontend().2 > fds0 && t0.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, rss1, fds1) = frontend();
    assert_eq!(fds1, fds0, "descriptors: {fds0} before, {fds1} after");
    assert!(
        rss1 < rss0 + 4 * 1024,
        "RSS: {rss0} KiB before, {rss1} KiB after"
    );
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// Python's websockets runs an exec at each URL, one after the other.
fn ws_many(urls: &[String]) {
    let list: Vec<String> = urls
        .iter()
        .map(|u| format!("'ws://{}'", u.trim_start_matches("http://")))
        .collect();
    let script = format!(
        "import asyncio, websockets\n\
         async def one(u):\n\
         \x20   async with websockets.connect(u, subprotocols=['v4.channel.k8s.io']) as ws:\n\
         \x20       got = b''\n\
         \x20       async for m in ws:\n\
         \x20           got += m\n\
         \x20       assert b'\\x01x\\n' in got, got\n\
         async def main():\n\
         \x20   for u in [{}]:\n\
         \x20       await one(u)\n\
         asyncio.run(main())\n",
        list.join(",")
    );
    std::fs::write("/run/podscope-test-many.py", script).unwrap();
    let (rc, out, err) = sh_out("/usr/bin/python3 /run/podscope-test-many.py");
    assert_eq!(rc, 0, "{out}{err}");
}

/// In a pod's shared PID namespace nothing but podscope ends an exec when
/// its container stops: the command must not outlive the container.
#[tokio::test]
async fn a_stopped_container_takes_its_execs_along() {
    use podscope_api::container::{ContainerOptions, Security};
    use podscope_api::domain::NamespaceMode;
    let (m, _) = manager().await;
    pull_busybox(&m).await;
    let pod = create_started(
        &m,
        "sv",
        podscope_api::CreateOptions {
            pid_namespace: Some(NamespaceMode::Pod),
            ..Default::default()
        },
    )
    .await;
    let id = run(
        &m,
        &pod,
        "shared",
        ContainerOptions {
            command: vec!["sleep".into(), "3600".into()],
            security: Security {
                pid_namespace: NamespaceMode::Pod,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let mut child = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec {}",
            crictl_cmd(&format!("exec {id} sleep 1005"))
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || {
        sh_status("pgrep -f 'sleep 100[5]' >/dev/null") == 0
    });
    m.stop_container(&id, 0).await.unwrap();
    wait_until(Duration::from_secs(10), || {
        sh_status("pgrep -f 'sleep 100[5]' >/dev/null") != 0
    });
    // The client is told, and goes.
    wait_until(Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
    no_exec_left();
    m.remove(&pod).await.unwrap();
}

/// With stream_tls_cert and stream_tls_key set, the streaming server
/// speaks only TLS: its URLs are https, crictl's exec (which skips the
/// server's verification) and port-forward (which verifies it: the
/// certificate names 127.0.0.1 and crictl is told to trust it) work
/// through it, a forged token still gets 404, and plain HTTP gets nothing.
/// A key that does not go with the certificate keeps podscope-cri from
/// starting, named in its journal.
#[tokio::test]
async fn tls_from_the_config_serves_crictl() {
    let (m, _) = manager().await;
    let (pod, id) = sleeper(&m, "st", "").await;
    let dir = "/etc/podscope/tls-test";
    let keypair = |name: &str| {
        sh(&format!(
            "mkdir -p {dir} && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
             -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout {dir}/{name}.key -out {dir}/{name}.pem 2>&1"
        ))
    };
    keypair("a");
    keypair("b");
    {
        let _config = FrontendConfig::set(&format!(
            "stream_tls_cert = \"{dir}/a.pem\"\nstream_tls_key = \"{dir}/a.key\"\n"
        ));
        let url = exec_url(&id, &["true"], false).await;
        assert!(url.starts_with("https://127.0.0.1:"), "{url}");
        let host = url
            .trim_start_matches("https://")
            .split('/')
            .next()
            .unwrap();

        let (rc, out, err) = sh_out(&crictl_cmd(&format!("exec {id} echo over-tls")));
        assert_eq!((rc, out.as_str()), (0, "over-tls\n"), "{err}");
        let (rc, out, err) = sh_out(&format!(
            "printf 'in\\n' | {}",
            crictl_cmd(&format!("exec -i {id} cat"))
        ));
        assert_eq!((rc, out.as_str()), (0, "in\n"), "{err}");

        let code = sh(&format!(
            "curl -sk -o /dev/null -w '%{{http_code}}' -X POST https://{host}/exec/AAAAAAAA"
        ));
        assert_eq!(code, "404");
        // Plain HTTP to it: no HTTP answer at all.
        let (rc, out, _) = sh_out(&format!(
            "curl -s --max-time 10 -o /dev/null -w '%{{http_code}}' http://{host}/exec/AAAAAAAA"
        ));
        assert!(
            rc != 0 && out != "404",
            "plain HTTP got {out:?} (curl {rc})"
        );

        let web = web_pod(&m, "stp").await;
        let local = free_port();
        let mut fwd = forwarder_env(
            &format!("SSL_CERT_FILE={dir}/a.pem"),
            &web,
            &format!("{local}:8080"),
        );
        wait_until(Duration::from_secs(10), || {
            sh_out(&format!("curl -sf http://127.0.0.1:{local}/")).1 == "hello-pf\n"
        });
        fwd.kill().unwrap();
        fwd.wait().unwrap();
        m.remove(&web).await.unwrap();
    }
    std::fs::write(
        "/etc/podscope/podscope.toml",
        format!("stream_tls_cert = \"{dir}/a.pem\"\nstream_tls_key = \"{dir}/b.key\"\n"),
    )
    .unwrap();
    let (rc, _, _) = sh_out("systemctl restart podscope-cri.service");
    assert_ne!(
        rc, 0,
        "podscope-cri started with a key of another certificate"
    );
    wait_until(Duration::from_secs(10), || {
        let said = sh("journalctl -u podscope-cri -o cat --no-pager -n 50");
        said.contains("stream_tls_key") && said.contains("b.key") && said.contains("a.pem")
    });
    restore_config();
    sh("systemctl reset-failed podscope-cri.service; systemctl restart podscope-cri.service");
    sh(&format!("rm -rf {dir}"));
    m.remove(&pod).await.unwrap();
}
