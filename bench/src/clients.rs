//! Figures taken the way users and kubelet see them: crictl's wall time per
//! call minus `crictl version` (its own start-up, connection and Version
//! call), critest's pod lifecycle benchmark (one grpc-go client, as
//! kubelet), and what the `:authority` rewrite adds to a call.

use super::anchor::Tools;
use super::{ms, pct, Table};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ENDPOINT: &str = "unix:///run/podscope/cri.sock";

/// Wall time of one crictl call; its stdout.
fn crictl(tools: &Tools, args: &[&str]) -> (Duration, String) {
    let t0 = Instant::now();
    let out = Command::new(&tools.crictl)
        .args(["--runtime-endpoint", ENDPOINT, "--timeout", "60s"])
        .args(args)
        .output()
        .expect("run crictl");
    let took = t0.elapsed();
    assert!(
        out.status.success(),
        "crictl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (took, String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A pod config from tests/conformance with a name of its own.
fn pod_config(dir: &Path, template: &str, name: &str) -> String {
    let text = std::fs::read_to_string(format!("tests/conformance/{template}"))
        .expect("run from the repository (the harness does)");
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["metadata"]["name"] = name.into();
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, v.to_string()).unwrap();
    path.display().to_string()
}

pub fn crictl_calls(tools: &Tools, t: &mut Table) {
    let dir = tempdir("crictl");
    let n = 20;
    let mut version: Vec<Duration> = (0..n).map(|_| crictl(tools, &["version"]).0).collect();
    let base = pct(&mut version, 0.5);
    t.add(
        "crictl version p50 (the baseline)",
        "report",
        ms(base),
        None,
    );
    for (net, template, limit) in [
        ("host", "host-network.json", 15),
        ("pod", "pod-network.json", 45),
    ] {
        let (mut runp, mut stopp, mut rmp) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let config = pod_config(&dir, template, &format!("crictl-{net}-{i}"));
            let (took, id) = crictl(tools, &["runp", &config]);
            runp.push(took);
            stopp.push(crictl(tools, &["stopp", &id]).0);
            rmp.push(crictl(tools, &["rmp", &id]).0);
        }
        let less = |v: &mut Vec<Duration>| pct(v, 0.5).saturating_sub(base);
        t.add_within(
            &format!("crictl runp minus version p50, {net} net"),
            less(&mut runp),
            Duration::from_millis(limit),
        );
        t.add(
            &format!("crictl stopp minus version p50, {net} net"),
            "report",
            ms(less(&mut stopp)),
            None,
        );
        t.add(
            &format!("crictl rmp minus version p50, {net} net"),
            "report",
            ms(less(&mut rmp)),
            None,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("podscope-bench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// critest's pod lifecycle benchmark: RunPodSandbox, PodSandboxStatus,
/// StopPodSandbox, RemovePodSandbox per sample (pod network: critest asks
/// for no host namespaces); per-call durations and start/end of each
/// sample, from its JSON output.
struct Lifecycles {
    /// ns per sample, per operation, in critest's order.
    ops: Vec<Vec<u64>>,
    /// lifecycles per second over the whole run.
    rate: f64,
}

fn critest_lifecycles(tools: &Tools, pods: usize, parallel: usize) -> Lifecycles {
    let dir = tempdir(&format!("critest-{parallel}"));
    let params = dir.join("params.yaml");
    std::fs::write(
        &params,
        format!(
            "podsNumber: {pods}\npodsNumberParallel: {parallel}\npodBenchmarkTimeoutSeconds: 120\n"
        ),
    )
    .unwrap();
    let out = Command::new(&tools.critest)
        .args(["--runtime-endpoint", ENDPOINT, "--image-endpoint", ENDPOINT])
        .arg("-benchmark")
        .arg(format!("-benchmarking-params-file={}", params.display()))
        .arg(format!("-benchmarking-output-dir={}", dir.display()))
        .args([
            "--ginkgo.focus=benchmark about lifecycle of PodSandbox",
            // Selected with the focus by ginkgo (same top-level "PodSandbox").
            "--ginkgo.skip=container from scratch",
            "--ginkgo.no-color",
        ])
        .output()
        .expect("run critest");
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "critest -benchmark failed:\n{log}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("pod_benchmark_data.json"))
            .expect("critest wrote pod_benchmark_data.json"),
    )
    .unwrap();
    let points = data["datapoints"].as_array().expect("datapoints");
    // With parallel clients critest's collector can miss a few samples;
    // the rate counts the ones it kept, over their own time span.
    assert!(
        points.len() * 10 >= pods * 9,
        "critest kept {} of {pods} samples",
        points.len()
    );
    let n_ops = data["operationsNames"].as_array().map_or(0, Vec::len);
    let mut ops = vec![Vec::new(); n_ops];
    let (mut first, mut last) = (u64::MAX, 0u64);
    for p in points {
        for (i, d) in p["operationsDurationsNs"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            ops[i].push(d.as_u64().unwrap());
        }
        first = first.min(p["startTime"].as_u64().unwrap());
        last = last.max(p["endTime"].as_u64().unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Lifecycles {
        ops,
        rate: points.len() as f64 / ((last - first) as f64 / 1e9),
    }
}

pub fn critest_benchmark(tools: &Tools, t: &mut Table) {
    let seq = critest_lifecycles(tools, 50, 1);
    let p50 = |i: usize| {
        let mut v: Vec<Duration> = seq.ops[i]
            .iter()
            .map(|ns| Duration::from_nanos(*ns))
            .collect();
        pct(&mut v, 0.5)
    };
    // critest's order: CreatePod (RunPodSandbox), StatusPod, StopPod, RemovePod.
    for (i, row, limit) in [
        (
            0,
            "critest RunPodSandbox p50, pod net, sequential (containerd 88.6)",
            40,
        ),
        (2, "critest StopPodSandbox p50 (containerd 72.4)", 60),
        (3, "critest RemovePodSandbox p50 (containerd 18.8)", 5),
    ] {
        t.add_within(row, p50(i), Duration::from_millis(limit));
    }
    t.add(
        "critest PodSandboxStatus p50 (verbose)",
        "report",
        ms(p50(1)),
        None,
    );
    t.add(
        "critest lifecycles/s, sequential",
        "report",
        format!("{:.1} /s", seq.rate),
        None,
    );
    let par = critest_lifecycles(tools, 100, 4);
    t.add(
        "critest lifecycles/s, 4 clients (containerd 8.5)",
        ">= 25 /s",
        format!("{:.1} /s", par.rate),
        Some(par.rate >= 25.0),
    );
}

/// What the `:authority` rewrite costs per call, in-process: the header
/// block and message of one grpc-go unary call on an open connection
/// (decode with the connection's table, replace, re-encode, frame).
pub fn authority_rewrite(t: &mut Table) {
    use podscope_cri::authority::Rewriter;
    let headers: Vec<(&[u8], &[u8])> = vec![
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/runtime.v1.RuntimeService/PodSandboxStatus"),
        (b":authority", b"%2Frun%2Fpodscope%2Fcri.sock"),
        (b"content-type", b"application/grpc"),
        (b"user-agent", b"grpc-go/1.58.3"),
        (b"te", b"trailers"),
        (b"grpc-timeout", b"1999936u"),
    ];
    let frame = |kind: u8, flags: u8, stream: u32, payload: &[u8]| {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    };
    let mut enc = loona_hpack::Encoder::new();
    let mut rw = Rewriter::default();
    let mut out = Vec::with_capacity(4096);
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend(frame(0x4, 0, 0, &[]));
    rw.feed(&preface, &mut out).unwrap();
    let body = [0u8; 80];
    let mut samples = Vec::new();
    let calls_per_sample = 100;
    for s in 0..200u32 {
        // Each call: what the client's encoder makes of it on this
        // connection (mostly table references after the first).
        let calls: Vec<Vec<u8>> = (0..calls_per_sample)
            .map(|c| {
                let stream = 1 + 2 * (s * calls_per_sample + c);
                let mut bytes = frame(0x1, 0x4, stream, &enc.encode(headers.iter().copied()));
                bytes.extend(frame(0x0, 0x1, stream, &body));
                bytes
            })
            .collect();
        let t0 = Instant::now();
        for c in &calls {
            out.clear();
            rw.feed(c, &mut out).unwrap();
        }
        samples.push(t0.elapsed() / calls_per_sample);
    }
    assert_eq!(rw.replaced, 200 * u64::from(calls_per_sample));
    t.add_within(
        "authority rewrite per call p50 (in-process)",
        pct(&mut samples, 0.5),
        Duration::from_micros(100),
    );
}
