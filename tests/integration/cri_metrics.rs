//! The CRI's metrics (KEP-2371, what kubelet's PodAndContainerStatsFromCRI
//! serves as /metrics/cadvisor): ListMetricDescriptors through the CRI
//! client kubelet's bindings make (crictl 1.29 has no `metricdescs`),
//! ListPodSandboxMetrics through it and through crictl's `metricsp`, for a
//! pod whose containers burn CPU and sit idle and whose network carries
//! the test's own traffic.

use crate::containers::{log_pod, pull_busybox, run, sh_cmd};
use crate::cri::{runtime, SOCKET};
use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use podscope_test_support::harness::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

async fn descriptors(c: &mut RuntimeServiceClient<Channel>) -> HashMap<String, Vec<String>> {
    c.list_metric_descriptors(cri::ListMetricDescriptorsRequest {})
        .await
        .expect("ListMetricDescriptors")
        .into_inner()
        .descriptors
        .into_iter()
        .map(|d| (d.name, d.label_keys))
        .collect()
}

async fn all_metrics(c: &mut RuntimeServiceClient<Channel>) -> Vec<cri::PodSandboxMetrics> {
    c.list_pod_sandbox_metrics(cri::ListPodSandboxMetricsRequest {})
        .await
        .expect("ListPodSandboxMetrics")
        .into_inner()
        .pod_metrics
}

async fn pod_metrics(c: &mut RuntimeServiceClient<Channel>, pod: &str) -> cri::PodSandboxMetrics {
    all_metrics(c)
        .await
        .into_iter()
        .find(|p| p.pod_sandbox_id == pod)
        .unwrap_or_else(|| panic!("ListPodSandboxMetrics has no pod {pod}"))
}

/// The value of `name` whose label values end with `tail`.
fn value(metrics: &[cri::Metric], name: &str, tail: &[&str]) -> Option<u64> {
    metrics
        .iter()
        .find(|m| {
            m.name == name
                && m.label_values
                    .ends_with(&tail.iter().map(|t| t.to_string()).collect::<Vec<_>>())
        })
        .map(|m| m.value.as_ref().expect("a metric has a value").value)
}

fn container<'a>(p: &'a cri::PodSandboxMetrics, id: &str) -> &'a [cri::Metric] {
    &p.container_metrics
        .iter()
        .find(|c| c.container_id == id)
        .unwrap_or_else(|| panic!("no metrics for container {id}: {p:#?}"))
        .metrics
}

/// The working set as the cgroup says it now: usage less inactive file
/// cache (v2's memory.current and memory.stat, or v1's memory controller).
fn cgroup_working_set(cgroup: &str) -> u64 {
    let read = |p: String| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let stat = |text: &str, key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} in memory.stat"))
            .trim()
            .parse()
            .unwrap()
    };
    let v2 = format!("/sys/fs/cgroup{cgroup}");
    if Path::new(&format!("{v2}/memory.current")).exists() {
        let usage: u64 = read(format!("{v2}/memory.current")).trim().parse().unwrap();
        usage.saturating_sub(stat(&read(format!("{v2}/memory.stat")), "inactive_file"))
    } else {
        let v1 = format!("/sys/fs/cgroup/memory{cgroup}");
        let usage: u64 = read(format!("{v1}/memory.usage_in_bytes"))
            .trim()
            .parse()
            .unwrap();
        usage.saturating_sub(stat(
            &read(format!("{v1}/memory.stat")),
            "total_inactive_file",
        ))
    }
}

/// Send `bytes` from the node to a listener in the pod's network
/// namespace, which reads them all.
fn traffic_into(pod: &str, ip: &str, bytes: usize) {
    let listener = in_netns(&netns_path(pod), || {
        std::net::TcpListener::bind("0.0.0.0:7100").expect("bind in the pod")
    });
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut n = 0;
        let mut buf = [0u8; 65536];
        loop {
            match s.read(&mut buf).unwrap() {
                0 => return n,
                k => n += k,
            }
        }
    });
    let mut c = std::net::TcpStream::connect_timeout(
        &format!("{ip}:7100").parse().unwrap(),
        Duration::from_secs(5),
    )
    .expect("connect to the pod");
    c.write_all(&vec![7u8; bytes]).unwrap();
    drop(c);
    assert_eq!(reader.join().unwrap(), bytes, "the pod read it all");
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_metrics_match_their_descriptors_and_follow_cgroups_and_network() {
    let (m, _conn) = manager().await;
    pull_busybox(&m).await;
    let (pod, _logs) = log_pod(&m, "metrics", "").await;
    let burn = run(&m, &pod, "burn", sh_cmd("while :; do :; done")).await;
    let idle = run(&m, &pod, "idle", sh_cmd("exec sleep 100000")).await;
    let mut c = runtime().await;

    // Every metric names a descriptor and has a value per label key; a
    // container's base labels are its name, id, image and its pod's.
    let descs = descriptors(&mut c).await;
    for f in [
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
        "container_network_receive_bytes_total",
        "container_processes",
    ] {
        assert!(descs.contains_key(f), "no descriptor {f}: {descs:?}");
    }
    let all = all_metrics(&mut c).await;
    let p = all
        .iter()
        .find(|p| p.pod_sandbox_id == pod)
        .unwrap_or_else(|| panic!("no metrics for {pod}"));
    let st = m.status(&pod).await.unwrap();
    for x in all.iter().flat_map(|p| {
        p.metrics
            .iter()
            .chain(p.container_metrics.iter().flat_map(|c| c.metrics.iter()))
    }) {
        let keys = descs
            .get(&x.name)
            .unwrap_or_else(|| panic!("{} has no descriptor", x.name));
        assert_eq!(
            x.label_values.len(),
            keys.len(),
            "{}: values {:?} for keys {keys:?}",
            x.name,
            x.label_values
        );
    }
    let keys = &descs["container_cpu_usage_seconds_total"];
    let labels: HashMap<&str, &str> = keys
        .iter()
        .map(String::as_str)
        .zip(
            container(p, &burn)
                .iter()
                .find(|x| x.name == "container_cpu_usage_seconds_total")
                .unwrap()
                .label_values
                .iter()
                .map(String::as_str),
        )
        .collect();
    assert_eq!(labels["container"], "burn");
    assert_eq!(labels["id"], burn);
    assert_eq!(labels["pod"], st.name);
    assert_eq!(labels["namespace"], st.namespace);
    assert_eq!(labels["cpu"], "total");
    assert!(labels["image"].contains("busybox"), "{labels:?}");
    let processes = value(container(p, &idle), "container_processes", &[]).unwrap();
    assert_eq!(processes, 1, "idle's one sleep");

    // The burning container's CPU counter rises (whole seconds: by 2, to
    // see it move past the floor).
    let cpu = |p: &cri::PodSandboxMetrics| {
        value(
            container(p, &burn),
            "container_cpu_usage_seconds_total",
            &["total"],
        )
        .unwrap()
    };
    let first = cpu(p);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = cpu(&pod_metrics(&mut c, &pod).await);
        if now >= first + 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "burn's CPU stuck at {now} s (from {first} s)"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The idle container's working set is what its cgroup says, read
    // before and after (an idle sleep's memory hardly moves).
    let cg = m.container_status(&idle).await.unwrap().cgroup;
    let before = cgroup_working_set(&cg);
    let said = value(
        container(&pod_metrics(&mut c, &pod).await, &idle),
        "container_memory_working_set_bytes",
        &[],
    )
    .unwrap();
    let after = cgroup_working_set(&cg);
    let slack = 256 << 10;
    assert!(
        said + slack >= before.min(after) && said <= before.max(after) + slack,
        "working set {said} not within [{before}, {after}] ± {slack}"
    );
    assert!(said > 0);

    // The pod's network: eth0's counters rise by at least what the test
    // sent into it; a pod series has no container.
    let net = |p: &cri::PodSandboxMetrics, name: &str| value(&p.metrics, name, &["eth0"]);
    let rx0 = net(
        &pod_metrics(&mut c, &pod).await,
        "container_network_receive_bytes_total",
    )
    .expect("eth0's receive counter");
    let sent = 256 << 10;
    traffic_into(&pod, &st.ips[0], sent);
    let after_traffic = pod_metrics(&mut c, &pod).await;
    let rx1 = net(&after_traffic, "container_network_receive_bytes_total").unwrap();
    let tx_packets = net(&after_traffic, "container_network_transmit_packets_total").unwrap();
    assert!(
        rx1 >= rx0 + sent as u64,
        "eth0 received {rx0} → {rx1}, sent {sent}"
    );
    assert!(tx_packets > 0, "the pod acknowledged what it received");
    assert!(after_traffic
        .metrics
        .iter()
        .all(|x| x.label_values[0].is_empty() && x.label_values[1] == pod));

    // crictl's metricsp (a real client's request and decoding) lists the
    // same pod and containers.
    let json: serde_json::Value = serde_json::from_str(&sh(&format!(
        "{} --runtime-endpoint unix://{SOCKET} metricsp -o json",
        crictl()
    )))
    .expect("crictl metricsp -o json");
    let listed = json["podMetrics"]
        .as_array()
        .unwrap_or_else(|| panic!("no podMetrics: {json}"))
        .iter()
        .find(|p| p["podSandboxId"] == pod.as_str())
        .unwrap_or_else(|| panic!("crictl metricsp lacks {pod}: {json}"));
    let ids: Vec<&str> = listed["containerMetrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["containerId"].as_str())
        .collect();
    assert!(
        ids.contains(&burn.as_str()) && ids.contains(&idle.as_str()),
        "{ids:?}"
    );

    // A stopped pod's metrics go, with its containers'.
    m.stop(&pod).await.unwrap();
    let left = all_metrics(&mut c).await;
    assert!(
        !left.iter().any(|p| p.pod_sandbox_id == pod),
        "a stopped pod still has metrics"
    );
    assert!(!left
        .iter()
        .flat_map(|p| &p.container_metrics)
        .any(|c| c.container_id == burn || c.container_id == idle));
    m.remove(&pod).await.unwrap();
}
