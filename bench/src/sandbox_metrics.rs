//! ListPodSandboxMetrics on a full node (issue 44): kubelet's 110 pods
//! with 4 running containers each (`node_load`, as the fullnode section
//! makes them), on containerd 2.3 (the CRI call's first containerd, 2.2,
//! has it; the anchor of this run) and then podscope, by the same code.
//! Each side is first checked to answer metrics for all 110 pods and their
//! containers (a runtime that answers fast with less would measure
//! nothing); then 50 calls one after another (or what a minute holds, 5
//! at least), p50 and p99 of each, and
//! whether every metric's label values match its descriptor's keys (what
//! kubelet needs to serve it: a metric that does not match is dropped).

use super::anchor::{self, Target};
use super::{ms, pct, Table};
use cri_api::v1 as cri;
use podscope_test_support::node_load::{self, Endpoint, Retry, FULL_NODE};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Calls timed on each side: 50, or as many as a minute holds, 5 at
/// least (containerd 2.3 takes some 11 s a call here: its collection is
/// rate-limited to 10 pods a second).
const CALLS: usize = 50;
const CALLS_MIN: usize = 5;
const CALLS_TIME: Duration = Duration::from_secs(60);

struct Measured {
    calls: usize,
    p50: Duration,
    p99: Duration,
    metrics_per_call: usize,
    /// Metrics whose label values do not match their descriptor's keys,
    /// or that name no descriptor.
    mismatched: usize,
}

/// Wait (at most a minute: a runtime may sample in the background) until
/// one answer has every pod with metrics for each of its containers.
async fn wait_complete(
    rt: &mut cri_api::v1::runtime_service_client::RuntimeServiceClient<tonic::transport::Channel>,
    target: &Target,
    pods: &[node_load::PodRun],
) -> cri::ListPodSandboxMetricsResponse {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = rt
            .list_pod_sandbox_metrics(cri::ListPodSandboxMetricsRequest {})
            .await
            .unwrap_or_else(|e| panic!("{}: ListPodSandboxMetrics: {e}", target.name))
            .into_inner();
        let by_pod: HashMap<&str, &cri::PodSandboxMetrics> = r
            .pod_metrics
            .iter()
            .map(|p| (p.pod_sandbox_id.as_str(), p))
            .collect();
        let missing: Vec<&str> = pods
            .iter()
            .filter(|p| {
                let Some(m) = by_pod.get(p.id.as_str()) else {
                    return true;
                };
                let with: HashSet<&str> = m
                    .container_metrics
                    .iter()
                    .filter(|c| !c.metrics.is_empty())
                    .map(|c| c.container_id.as_str())
                    .collect();
                !p.containers.iter().all(|c| with.contains(c.as_str()))
            })
            .map(|p| p.id.as_str())
            .collect();
        if missing.is_empty() {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{}: ListPodSandboxMetrics lacks {} of {} pods (or their containers' metrics) after a minute",
            target.name,
            missing.len(),
            pods.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn measure(target: &Target, t: &mut Table) -> Measured {
    let ep = Endpoint {
        socket: target.socket.clone(),
        cgroup_parent: target.cgroup_parent.clone(),
        runtime_handler: target.runtime_handler.clone(),
    };
    let mut img = anchor::image_client(target).await;
    anchor::pull(&mut img, node_load::IMAGE).await;
    let made = node_load::create(&ep, "bench-metrics", FULL_NODE, Retry::Never).await;
    assert!(
        made.failures().is_empty() && made.pods.len() == FULL_NODE.pods,
        "{}: the full node was not made: {:?}",
        target.name,
        made.codes()
    );
    let mut rt = anchor::runtime_client(target).await;
    let descs: HashMap<String, usize> = rt
        .list_metric_descriptors(cri::ListMetricDescriptorsRequest {})
        .await
        .unwrap_or_else(|e| panic!("{}: ListMetricDescriptors: {e}", target.name))
        .into_inner()
        .descriptors
        .into_iter()
        .map(|d| (d.name, d.label_keys.len()))
        .collect();
    let complete = wait_complete(&mut rt, target, &made.pods).await;
    let all = complete.pod_metrics.iter().flat_map(|p| {
        p.metrics
            .iter()
            .chain(p.container_metrics.iter().flat_map(|c| c.metrics.iter()))
    });
    let (mut count, mut mismatched) = (0, 0);
    for m in all {
        count += 1;
        if descs.get(&m.name) != Some(&m.label_values.len()) {
            mismatched += 1;
        }
    }
    let mut took = Vec::with_capacity(CALLS);
    let timing = Instant::now();
    while took.len() < CALLS && (took.len() < CALLS_MIN || timing.elapsed() < CALLS_TIME) {
        let t0 = Instant::now();
        rt.list_pod_sandbox_metrics(cri::ListPodSandboxMetricsRequest {})
            .await
            .unwrap_or_else(|e| panic!("{}: ListPodSandboxMetrics: {e}", target.name));
        took.push(t0.elapsed());
    }
    let drain = node_load::drain(&ep, &made.pods, FULL_NODE.clients, Retry::Never).await;
    assert!(drain.failures().is_empty(), "{}: drain failed", target.name);
    let m = Measured {
        calls: took.len(),
        p50: pct(&mut took, 0.5),
        p99: pct(&mut took, 0.99),
        metrics_per_call: count,
        mismatched,
    };
    t.add(
        &target.row(&format!(
            "ListPodSandboxMetrics, {} pods x {} containers: p50 / p99",
            FULL_NODE.pods, FULL_NODE.per_pod
        )),
        "report",
        format!(
            "{} / {} ({} calls; {} metrics a call, {} descriptors)",
            ms(m.p50),
            ms(m.p99),
            m.calls,
            m.metrics_per_call,
            descs.len()
        ),
        None,
    );
    m
}

pub async fn run(t: &mut Table) {
    let c23 = anchor::start_containerd_2_3();
    let theirs = measure(&c23, t).await;
    anchor::stop_containerd();
    let podscope = Target::podscope("crun");
    let ours = measure(&podscope, t).await;
    for (target, m) in [(&c23, &theirs), (&podscope, &ours)] {
        t.add(
            &target.row(
                "ListPodSandboxMetrics: metrics whose label values match no descriptor's keys",
            ),
            if target.name == podscope.name {
                "0"
            } else {
                "report"
            },
            format!("{} of {}", m.mismatched, m.metrics_per_call),
            (target.name == podscope.name).then_some(m.mismatched == 0),
        );
    }
    let r = ours.p50.as_secs_f64() / theirs.p50.as_secs_f64();
    t.add(
        "ListPodSandboxMetrics p50, 110 pods: podscope / containerd 2.3",
        "<= 1.00",
        format!("{r:.2} ({} / {})", ms(ours.p50), ms(theirs.p50)),
        Some(r <= 1.0),
    );
}
