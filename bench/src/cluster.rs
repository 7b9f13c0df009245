//! `make bench`'s cluster section (run-cluster.sh bench): the same two nodes
//! and control plane, first on podscope, then on containerd 2.3.4
//! (`node.sh containerd`), each measured from kubectl's side as a user
//! sees it:
//! - a Deployment scaled from 0 to 20 beside a DaemonSet's pod per node:
//!   until all are Ready, and each pod's time from its creation to Running,
//!   split at its binding to a node, as kubectl's watch sees them;
//! - `kubectl exec <pod> -- true`, p50 of 20;
//! - `kubectl logs` of 100 MiB a container wrote, the median of 3 reads;
//! - the runtime's memory on the nodes with the 20 pods running: its
//!   daemons and everything it runs per pod outside the containers.
//!
//! `podscope-bench cluster RUNTIME` writes STATE/bench-RUNTIME.json;
//! `podscope-bench cluster-table` prints podscope's figures against
//! containerd's. Both run in the control plane's network namespace, as the
//! checks do (podscope-test-support's `cluster`).

use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::node::Node;
use podscope_test_support::cluster::{container, daemonset, setup, Cluster, IDLE};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Read;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PODS: usize = 20;
const EXECS: usize = 20;
const LOG_BYTES: u64 = 100 << 20;
const LOG_READS: usize = 3;

fn results_path(runtime: &str) -> String {
    format!("{}/bench-{runtime}.json", std::env::var("STATE").unwrap())
}

/// The section on `runtime` (podscope, then containerd), on the cluster
/// the environment names.
pub fn run_on(runtime: &str) {
    let c = Cluster {
        nodes: Node::all(),
        t0: Instant::now(),
    };
    setup(&c);
    run(&c, runtime);
}

fn run(c: &Cluster, runtime: &str) {
    // A node of a cluster runs pods before a Deployment comes: a
    // DaemonSet's (kube-proxy's, the network add-on's). One here per node
    // while the Deployment scales, so neither runtime is measured on its
    // first pod ever (the image's first pull, kubelet's QoS slice's first
    // pod slice, machined's activation), then gone before the memory is read.
    kubectl::apply(&daemonset(
        "node-agent",
        json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [container("main", IDLE)],
        }),
    ));
    kubectl::wait_ready("node-agent", c.nodes.len(), Duration::from_secs(120));
    kubectl::apply(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "bench", "namespace": NS },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": "bench" } },
            "template": {
                "metadata": { "labels": { "app": "bench" } },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [container("main", IDLE)],
                },
            },
        },
    }));
    let up = scale_up();
    // Foreground: the delete returns once the DaemonSet's pods are gone.
    kubectl::run(&[
        "delete",
        "-n",
        NS,
        "daemonset/node-agent",
        "--cascade=foreground",
        "--timeout=120s",
    ]);
    let (rss, pss) = c
        .nodes
        .iter()
        .map(|n| runtime_memory(n, runtime))
        .fold((0, 0), |(r, p), (r2, p2)| (r + r2, p + p2));
    let exec = exec_p50();
    let logs = logs_rate();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p = |v: &[Duration], q: f64| {
        let mut v = v.to_vec();
        v.sort();
        ms(pct(&v, q))
    };
    let result = json!({
        "runtime": runtime,
        "version": c.nodes.iter().map(|n| node_runtime(&n.name)).collect::<Vec<_>>(),
        "all_ready_ms": ms(up.all_ready),
        "all_created_ms": ms(up.all_created),
        "create_to_running_p50_ms": p(&up.create_to_running, 0.5),
        "create_to_running_p99_ms": p(&up.create_to_running, 0.99),
        "create_to_bound_p50_ms": p(&up.create_to_bound, 0.5),
        "bound_to_running_p50_ms": p(&up.bound_to_running, 0.5),
        "bound_to_running_p99_ms": p(&up.bound_to_running, 0.99),
        "exec_p50_ms": ms(exec),
        "logs_mib_per_s": logs,
        "memory_rss_kib": rss,
        "memory_pss_kib": pss,
    });
    println!("cluster bench: {runtime}: {result}");
    std::fs::write(results_path(runtime), result.to_string()).unwrap();
    kubectl::run(&["delete", "namespace", NS, "--timeout=120s"]);
}

fn node_runtime(name: &str) -> String {
    let n: Value =
        serde_json::from_str(&kubectl::run(&["get", "node", name, "-o", "json"])).unwrap();
    n["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What kubectl's watch saw of a scale-up: the time until the last pod
/// was Ready, and each pod's times from its creation (first seen, made by
/// the ReplicaSet) to bound to a node (the scheduler's part) and from
/// there to Running (the node's: kubelet and the runtime).
struct ScaleUp {
    all_ready: Duration,
    /// The scale command until the last pod was created.
    all_created: Duration,
    create_to_running: Vec<Duration>,
    create_to_bound: Vec<Duration>,
    bound_to_running: Vec<Duration>,
}

/// Scale `bench` from 0 to PODS while kubectl watches its pods.
fn scale_up() -> ScaleUp {
    let mut watch = kubectl::spawn(&[
        "get",
        "pods",
        "-n",
        NS,
        "-l",
        "app=bench",
        "-w",
        "-o",
        "json",
    ]);
    let out = watch.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<(Instant, Value)>();
    std::thread::spawn(move || {
        for v in serde_json::Deserializer::from_reader(out).into_iter::<Value>() {
            let Ok(v) = v else { break };
            if tx.send((Instant::now(), v)).is_err() {
                break;
            }
        }
    });
    // The watch's first answer (no pod yet) before the clock starts.
    std::thread::sleep(Duration::from_secs(1));
    let t0 = Instant::now();
    kubectl::run(&[
        "scale",
        "-n",
        NS,
        "deployment/bench",
        &format!("--replicas={PODS}"),
    ]);
    let mut seen: HashMap<String, Instant> = HashMap::new();
    let mut bound: HashMap<String, Instant> = HashMap::new();
    let mut running: HashMap<String, Instant> = HashMap::new();
    let mut ready: HashMap<String, Instant> = HashMap::new();
    let end = t0 + Duration::from_secs(300);
    while ready.len() < PODS {
        let (at, p) = rx
            .recv_timeout(end.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("{} of {PODS} pods Ready within 300 s", ready.len()));
        let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
        seen.entry(name.clone()).or_insert(at);
        if p["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        {
            bound.entry(name.clone()).or_insert(at);
        }
        if p["status"]["phase"] == "Running" {
            running.entry(name.clone()).or_insert(at);
        }
        if kubectl::pod_ready(&p) {
            ready.entry(name).or_insert(at);
        }
    }
    watch.kill().ok();
    watch.wait().ok();
    let since = |to: &HashMap<String, Instant>, from: &HashMap<String, Instant>| -> Vec<Duration> {
        to.iter()
            .map(|(name, at)| at.duration_since(*from.get(name).unwrap_or(&seen[name])))
            .collect()
    };
    ScaleUp {
        all_ready: ready.values().max().unwrap().duration_since(t0),
        all_created: seen.values().max().unwrap().duration_since(t0),
        create_to_running: since(&running, &seen),
        create_to_bound: since(&bound, &seen),
        bound_to_running: since(&running, &bound),
    }
}

/// `kubectl exec <pod> -- true`, the p50 of EXECS.
fn exec_p50() -> Duration {
    let pod = kubectl::pods("bench")[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let mut times: Vec<Duration> = (0..EXECS)
        .map(|_| {
            let t = Instant::now();
            kubectl::run(&["exec", "-n", NS, &pod, "--", "true"]);
            t.elapsed()
        })
        .collect();
    times.sort();
    pct(&times, 0.5)
}

/// A container writes LOG_BYTES in lines of 1 KiB, then "END": the rate
/// (MiB/s) at which `kubectl logs` reads it all back.
fn logs_rate() -> f64 {
    kubectl::apply(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "logbench", "namespace": NS, "labels": { "app": "logbench" } },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [container("main", &format!(
                "yes \"$(head -c 1023 /dev/zero | tr '\\0' x)\" | head -c {LOG_BYTES}; echo END; {}",
                IDLE))],
        },
    }));
    kubectl::wait("logbench's END", Duration::from_secs(300), || {
        let o = kubectl::output(&["logs", "-n", NS, "logbench", "--tail=1"]);
        let last = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if last == "END" {
            Ok(())
        } else {
            Err(last.chars().take(20).collect())
        }
    });
    // The median of three reads: one read is a few seconds of kubelet,
    // the API server and kubectl on busy cores.
    let mut rates: Vec<f64> = (0..LOG_READS)
        .map(|_| {
            let t = Instant::now();
            let mut child = kubectl::spawn(&["logs", "-n", NS, "logbench"]);
            let mut out = child.stdout.take().unwrap();
            let mut buf = vec![0u8; 1 << 20];
            let mut bytes = 0u64;
            loop {
                let n = out.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                bytes += n as u64;
            }
            child.wait().unwrap();
            let took = t.elapsed();
            assert!(bytes > LOG_BYTES, "kubectl logs gave {bytes} bytes");
            bytes as f64 / (1 << 20) as f64 / took.as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[LOG_READS / 2]
}

/// RSS and PSS (KiB) of the runtime's processes on the node: podscope's two
/// daemons and each pod's init; containerd, its shims and their pause
/// processes.
fn runtime_memory(n: &Node, runtime: &str) -> (u64, u64) {
    let pids = match runtime {
        "podscope" => "systemctl show -P MainPID podscoped podscope-cri; pgrep -x podscope-init",
        // (containerd-shim-runc-v2's name, as the kernel keeps 15 bytes.)
        _ => {
            "systemctl show -P MainPID containerd-anchor; pgrep -x containerd-shim; pgrep -x pause"
        }
    };
    let out = n.sh(&format!(
        "for p in $({{ {pids}; }} | sort -u); do [ \"$p\" != 0 ] && cat /proc/$p/smaps_rollup; done 2>/dev/null \
         | awk '/^Rss:/ {{ r += $2 }} /^Pss:/ {{ p += $2 }} END {{ print r, p }}'"
    ));
    let mut f = out
        .split_whitespace()
        .map(|x| x.parse::<u64>().unwrap_or(0));
    (f.next().unwrap_or(0), f.next().unwrap_or(0))
}

/// podscope's figures against containerd's, with the targets.
pub fn table() {
    let read = |r: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(results_path(r))
                .unwrap_or_else(|e| panic!("{}: {e}", results_path(r))),
        )
        .unwrap()
    };
    let (p, c) = (read("podscope"), read("containerd"));
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap();
    println!(
        "\ncluster (2 nodes, kubelet 1.36): podscope ({}) against containerd ({})",
        p["version"], c["version"]
    );
    println!(
        "{:<58} {:<26} {:<44} verdict",
        "figure", "target", "measured"
    );
    let row = |name: &str, target: &str, measured: String, ok: Option<bool>| {
        let v = match ok {
            Some(true) => "ok",
            Some(false) => "MISSED",
            None => "-",
        };
        println!("{name:<58} {target:<26} {measured:<44} {v}");
    };
    let ratio = |k: &str| f(&p, k) / f(&c, k);
    let ms = |k: &str| format!("{:.0} ms / {:.0} ms = {:.2}x", f(&p, k), f(&c, k), ratio(k));
    row(
        "Deployment 0 -> 20 pods, until all Ready",
        "<= 0.6x containerd 2.3",
        ms("all_ready_ms"),
        Some(ratio("all_ready_ms") <= 0.6),
    );
    // Where the time goes: the control plane's part (the ReplicaSet
    // making the pods, the scheduler binding them) is the same for both.
    for (k, label) in [
        (
            "all_created_ms",
            "  the last pod created (ReplicaSet), after",
        ),
        (
            "create_to_running_p50_ms",
            "  each pod's creation -> Running, p50",
        ),
        (
            "create_to_running_p99_ms",
            "  each pod's creation -> Running, p99",
        ),
        (
            "create_to_bound_p50_ms",
            "    creation -> bound to its node (scheduler), p50",
        ),
        (
            "bound_to_running_p50_ms",
            "    bound -> Running (kubelet + runtime), p50",
        ),
        (
            "bound_to_running_p99_ms",
            "    bound -> Running (kubelet + runtime), p99",
        ),
    ] {
        row(label, "report", ms(k), None);
    }
    row(
        "kubectl exec <pod> -- true, p50",
        "<= containerd 2.3",
        ms("exec_p50_ms"),
        Some(ratio("exec_p50_ms") <= 1.0),
    );
    row(
        "kubectl logs of 100 MiB, rate",
        ">= containerd 2.3",
        format!(
            "{:.0} MiB/s / {:.0} MiB/s = {:.2}x",
            f(&p, "logs_mib_per_s"),
            f(&c, "logs_mib_per_s"),
            ratio("logs_mib_per_s")
        ),
        Some(ratio("logs_mib_per_s") >= 1.0),
    );
    row(
        "runtime memory, 2 nodes, 20 pods, RSS (PSS)",
        "<= 0.2x containerd 2.3",
        format!(
            "{:.1} MiB ({:.1}) / {:.1} MiB ({:.1}) = {:.2}x",
            f(&p, "memory_rss_kib") / 1024.0,
            f(&p, "memory_pss_kib") / 1024.0,
            f(&c, "memory_rss_kib") / 1024.0,
            f(&c, "memory_pss_kib") / 1024.0,
            ratio("memory_rss_kib")
        ),
        Some(ratio("memory_rss_kib") <= 0.2),
    );
}
