//! The caller's deadline on the CRI socket (podscope-cri(8), "Calls cut
//! short"): DEADLINE_EXCEEDED whoever notices it, the work of a mutating
//! call ended whole in podscoped, no wait left on the bus; a timeout of zero
//! does nothing, a malformed one is INTERNAL as grpc-go's servers answer it.
//!
//! The calls are written out by hand with h2, one connection each: tonic's
//! client keeps the deadline too and, when its own timer fires first,
//! answers CANCELLED itself, which would hide the frontend's answer.

use crate::containers::*;
use cri_api::v1 as cri;
use podscope_api::domain::container::ContainerState;
use podscope_test_support::harness::*;
use prost::Message;
use std::time::Duration;
use tonic::Code;

pub const SOCKET: &str = "/run/podscope/cri.sock";

/// What the frontend answered one call.
#[derive(Debug)]
pub struct Answer {
    pub http: u16,
    pub code: Code,
    pub message: String,
    /// The response message's bytes (gRPC's length prefix taken off).
    pub body: Vec<u8>,
}

/// One unary call (`path`: /runtime.v1.RuntimeService/Version, say) on a
/// connection of its own to `socket`, with `grpc-timeout` as given.
pub async fn unary(
    socket: &str,
    path: &str,
    msg: &impl Message,
    grpc_timeout: Option<&str>,
) -> Answer {
    let io = tokio::net::UnixStream::connect(socket)
        .await
        .unwrap_or_else(|e| panic!("connect to {socket}: {e}"));
    let (client, conn) = h2::client::handshake(io).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut client = client.ready().await.expect("a stream");
    let mut req = http::Request::post(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = grpc_timeout {
        req = req.header("grpc-timeout", t);
    }
    let (response, mut send) = client
        .send_request(req.body(()).unwrap(), false)
        .expect("request sent");
    let payload = msg.encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend((payload.len() as u32).to_be_bytes());
    framed.extend(payload);
    send.send_data(framed.into(), true).expect("message sent");
    let response = response.await.expect("an answer");
    let http = response.status().as_u16();
    let (parts, mut body) = response.into_parts();
    // Trailers-only: the status is in the headers.
    if let Some(s) = tonic::Status::from_header_map(&parts.headers) {
        return Answer {
            http,
            code: s.code(),
            message: s.message().to_owned(),
            body: Vec::new(),
        };
    }
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("the answer's data");
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
    let s = tonic::Status::from_header_map(&trailers)
        .unwrap_or_else(|| panic!("no grpc-status in the answer to {path}: {trailers:?}"));
    Answer {
        http,
        code: s.code(),
        message: s.message().to_owned(),
        body: data.get(5..).unwrap_or_default().to_vec(),
    }
}

const RUNTIME: &str = "/runtime.v1.RuntimeService";

/// A frontend of this test's own (`--listen`), so that its figures count
/// this test's calls alone; stopped when dropped.
struct OwnFrontend {
    socket: String,
    pid: String,
}

impl OwnFrontend {
    fn start(tag: &str) -> Self {
        let socket = format!("/run/podscope-test/{tag}.sock");
        let pid = sh(&format!(
            "rm -f {socket}; /usr/libexec/podscope/podscope-cri --listen {socket} >/dev/null 2>&1 & echo $!"
        ))
        .trim()
        .to_owned();
        wait_until(Duration::from_secs(10), || {
            std::path::Path::new(&socket).exists()
        });
        OwnFrontend { socket, pid }
    }

    /// Its calls to podscoped in flight now (Status verbose, "frontend").
    async fn calls_in_flight(&self) -> u64 {
        let a = unary(
            &self.socket,
            &format!("{RUNTIME}/Status"),
            &cri::StatusRequest { verbose: true },
            None,
        )
        .await;
        assert_eq!(a.code, Code::Ok, "{a:?}");
        let st = cri::StatusResponse::decode(a.body.as_slice()).unwrap();
        let f: serde_json::Value = serde_json::from_str(&st.info["frontend"]).unwrap();
        f["daemon_calls_in_flight"].as_u64().unwrap()
    }
}

impl Drop for OwnFrontend {
    fn drop(&mut self) {
        sh(&format!(
            "kill {} 2>/dev/null; rm -f {}",
            self.pid, self.socket
        ));
    }
}

/// A Stop whose grace period outlives the caller's deadline: the caller
/// gets DEADLINE_EXCEEDED while the container is still in its grace
/// period, the stop goes on in podscoped to its end (SIGKILL at the grace
/// period's end: exit 137), and kubelet's retry of it succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_past_the_callers_deadline_is_deadline_exceeded_and_ends_whole() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "cri-dl-stop", "").await;
    let stubborn = run_ignoring_term(&m, &pod, &logs).await;
    let stop = cri::StopContainerRequest {
        container_id: stubborn.clone(),
        timeout: 8,
    };
    let a = unary(
        SOCKET,
        &format!("{RUNTIME}/StopContainer"),
        &stop,
        Some("1S"),
    )
    .await;
    assert_eq!((a.http, a.code), (200, Code::DeadlineExceeded), "{a:?}");
    assert!(a.message.contains("deadline"), "{a:?}");
    let s = m.container_status(&stubborn).await.unwrap();
    assert_ne!(
        s.state,
        ContainerState::Exited,
        "the answer came within the grace period: {s:?}"
    );
    wait_container(
        &m,
        &stubborn,
        ContainerState::Exited,
        Duration::from_secs(60),
    )
    .await;
    let s = m.container_status(&stubborn).await.unwrap();
    assert_eq!(
        (s.exit_code, s.reason.as_str()),
        (137, "Error"),
        "killed at the grace period's end: {s:?}"
    );
    let retry = unary(
        SOCKET,
        &format!("{RUNTIME}/StopContainer"),
        &stop,
        Some("2M"),
    )
    .await;
    assert_eq!(retry.code, Code::Ok, "{retry:?}");
    m.remove(&pod).await.unwrap();
}

/// An ExecSync whose command outlives the caller's deadline: the caller
/// gets DEADLINE_EXCEEDED, and the frontend is not left waiting on the bus
/// for the exec's answer.
#[tokio::test(flavor = "multi_thread")]
async fn an_exec_past_the_callers_deadline_leaves_no_call_waiting_on_the_bus() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "cri-dl-exec", "").await;
    let ctr = run(&m, &pod, "sleeper", sh_cmd("exec sleep 3600")).await;
    let front = OwnFrontend::start("cri-deadline-exec");
    assert_eq!(front.calls_in_flight().await, 0);
    let exec = cri::ExecSyncRequest {
        container_id: ctr.clone(),
        cmd: vec!["sleep".into(), "30".into()],
        timeout: 0,
    };
    let a = unary(
        &front.socket,
        &format!("{RUNTIME}/ExecSync"),
        &exec,
        Some("1500m"),
    )
    .await;
    assert_eq!(a.code, Code::DeadlineExceeded, "{a:?}");
    assert_eq!(
        front.calls_in_flight().await,
        0,
        "the exec's call to podscoped was let go at the deadline"
    );
    m.remove(&pod).await.unwrap();
}

/// A timeout of zero is a deadline already past: DEADLINE_EXCEEDED at once,
/// and nothing is done (no sandbox is made). A malformed timeout is INTERNAL
/// "malformed grpc-timeout" with HTTP status 400, as grpc-go's servers
/// answer it (internal/transport/http2_server.go, operateHeaders, with
/// decodeTimeout's rules); the connection serves on. A well-formed one is
/// served as without.
#[tokio::test(flavor = "multi_thread")]
async fn a_zero_timeout_does_nothing_and_a_malformed_one_is_internal() {
    let (m, _c) = manager().await;
    let name = uniq("cri-dl-zero");
    for t in ["0S", "0n", "00000000m"] {
        // A pod podscope would make (the CRI tests' own).
        let run = crate::cri::run_request(crate::cri::pod_config(&name, false));
        let a = unary(SOCKET, &format!("{RUNTIME}/RunPodSandbox"), &run, Some(t)).await;
        assert_eq!(a.code, Code::DeadlineExceeded, "{t}: {a:?}");
    }
    // Had a call begun, its sandbox would be listed by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let made = m.list(&by_name(&name)).await.unwrap();
    assert!(made.is_empty(), "nothing was made: {made:?}");

    let version = cri::VersionRequest {
        version: "v1".into(),
    };
    for t in [
        "abc",
        "1",
        "",
        "123456789S",
        "10x",
        "10s",
        "-1S",
        "+1S",
        "1.5S",
    ] {
        let a = unary(SOCKET, &format!("{RUNTIME}/Version"), &version, Some(t)).await;
        assert_eq!((a.http, a.code), (400, Code::Internal), "{t:?}: {a:?}");
        assert!(
            a.message.starts_with("malformed grpc-timeout: "),
            "{t:?}: {a:?}"
        );
    }
    for t in ["5S", "99999999H", "12345678u"] {
        let a = unary(SOCKET, &format!("{RUNTIME}/Version"), &version, Some(t)).await;
        assert_eq!(a.code, Code::Ok, "{t:?}: {a:?}");
        let v = cri::VersionResponse::decode(a.body.as_slice()).unwrap();
        assert_eq!(v.runtime_name, "podscope");
    }
}
