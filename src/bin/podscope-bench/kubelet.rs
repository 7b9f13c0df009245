//! The kubelet figures (issue 23): the same real kubelet (1.26,
//! standalone, `tests/e2e/kubelet.sh`) drives the anchor, containerd 1.6 +
//! runc, and then podscope, in the same run, with the same 11 static pods
//! of one container; kubelet's own view is the measure:
//!
//! - its `/metrics` (`kubelet_runtime_operations_duration_seconds`): the
//!   mean of each CRI call it made, for the pod's start (RunPodSandbox,
//!   CreateContainer, StartContainer) and its end (StopContainer,
//!   StopPodSandbox, RemovePodSandbox);
//! - a manifest written until `/pods` reports the pod Running, one pod at
//!   a time: with the generic PLEG (its 1 s relist sets it) on both, and
//!   with the EventedPLEG gate on podscope (GetContainerEvents, which
//!   containerd 1.6 lacks);
//! - the manifests removed until the runtime lists no sandbox of them
//!   (kubelet's own loops: its garbage collection removes the sandboxes);
//! - the runtime's memory with the 11 pods running: its daemons and every
//!   process it keeps per pod outside the containers.

use super::anchor::{self, Target};
use super::containers::{field_p50, journal_after, journal_cursor, steps_p50};
use super::kubelet_client::{runtime_operations, simple_pod, Kubelet};
use super::{daemon_pid, ms, pct, rss_pss, sh, Table};
use cri_api::v1 as cri;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Static pods per run.
const PODS: usize = 11;
/// Their namespace.
const NS: &str = "bench";

/// What one kubelet run measured on one runtime.
#[derive(Default)]
struct Run {
    /// Manifest written -> Running, per pod.
    running: Vec<Duration>,
    /// Manifests removed -> sandbox gone, per pod.
    gone: Vec<Duration>,
    /// kubelet's runtime operations: (seconds in all, calls).
    ops: HashMap<String, (f64, u64)>,
    /// The runtime's processes with the pods running: RSS and PSS in KiB,
    /// their names.
    rss_kib: u64,
    pss_kib: u64,
    processes: String,
}

impl Run {
    /// The mean of kubelet's calls of `op`.
    fn mean(&self, op: &str) -> Duration {
        let (sum, n) = self
            .ops
            .get(op)
            .copied()
            .unwrap_or_else(|| panic!("kubelet made no {op} call: {:?}", self.ops));
        Duration::from_secs_f64(sum / n as f64)
    }

    /// The sum of the means of `ops`, and each mean with its number of
    /// calls.
    fn sum_of_means(&self, ops: &[&str]) -> (Duration, String) {
        let means: Vec<Duration> = ops.iter().map(|o| self.mean(o)).collect();
        let parts: Vec<String> = ops
            .iter()
            .zip(&means)
            .map(|(o, d)| format!("{} ×{}", ms(*d), self.ops[*o].1))
            .collect();
        (means.iter().sum(), parts.join(" + "))
    }
}

pub async fn run(t: &mut Table) {
    let containerd = anchor::start_containerd();
    // podscope's default runtime handler (crun), as kubelet names none.
    let podscope = Target {
        name: "podscope".into(),
        ..Target::podscope("")
    };
    for target in [&containerd, &podscope] {
        let mut img = anchor::image_client(target).await;
        anchor::pull(&mut img, anchor::IMAGE).await;
    }
    let theirs = measure(&containerd, "", true).await;
    let cursor = journal_cursor();
    let ours = measure(&podscope, "", true).await;
    breakdown(&cursor, t);
    let evented = measure(&podscope, "EventedPLEG=true", false).await;
    anchor::stop_containerd();
    // The store as the section found it (the images section wants it
    // empty).
    let mut img = anchor::image_client(&podscope).await;
    img.remove_image(cri::RemoveImageRequest {
        image: Some(cri::ImageSpec {
            image: anchor::IMAGE.into(),
            ..Default::default()
        }),
    })
    .await
    .unwrap_or_else(|e| panic!("remove {}: {e}", anchor::IMAGE));

    let start = ["run_podsandbox", "create_container", "start_container"];
    let (o, od) = ours.sum_of_means(&start);
    let (c, cd) = theirs.sum_of_means(&start);
    ratio(
        t,
        "kubelet: run_podsandbox + create_container + start_container, mean (its /metrics)",
        (o, &od),
        (c, &cd),
        0.4,
    );
    let end = ["stop_container", "stop_podsandbox", "remove_podsandbox"];
    let (o, od) = ours.sum_of_means(&end);
    let (c, cd) = theirs.sum_of_means(&end);
    ratio(
        t,
        "kubelet: stop_container + stop_podsandbox + remove_podsandbox, mean (its /metrics)",
        (o, &od),
        (c, &cd),
        0.5,
    );
    let p50 = |v: &[Duration]| pct(&mut v.to_vec(), 0.5);
    let max = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    t.add(
        &format!("kubelet: manifest written -> Running, p50 of {PODS}, generic PLEG"),
        "report",
        format!(
            "podscope {} / containerd {}",
            ms(p50(&ours.running)),
            ms(p50(&theirs.running))
        ),
        None,
    );
    let r = p50(&evented.running).as_secs_f64() / p50(&theirs.running).as_secs_f64();
    t.add(
        &format!(
            "kubelet: manifest written -> Running, p50 of {PODS}, podscope with EventedPLEG / containerd generic"
        ),
        "<= 0.5x containerd",
        format!(
            "{} / {} = {r:.2}x",
            ms(p50(&evented.running)),
            ms(p50(&theirs.running))
        ),
        Some(r <= 0.5),
    );
    t.add(
        &format!("kubelet: manifests removed -> sandbox gone, p50 (max) of {PODS}"),
        "report",
        format!(
            "podscope {:.1} s ({:.1}) / containerd {:.1} s ({:.1})",
            p50(&ours.gone).as_secs_f64(),
            max(&ours.gone).as_secs_f64(),
            p50(&theirs.gone).as_secs_f64(),
            max(&theirs.gone).as_secs_f64()
        ),
        None,
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    let r = ours.rss_kib as f64 / theirs.rss_kib as f64;
    t.add(
        &format!(
            "kubelet: runtime memory with {PODS} static pods (daemons + per pod outside the containers), RSS"
        ),
        "<= 0.2x containerd",
        format!(
            "{:.1} MiB ({}; PSS {:.1}) / {:.1} MiB ({}; PSS {:.1}) = {r:.2}x",
            mib(ours.rss_kib),
            ours.processes,
            mib(ours.pss_kib),
            mib(theirs.rss_kib),
            theirs.processes,
            mib(theirs.pss_kib)
        ),
        Some(r <= 0.2),
    );
}

/// Where podscope's time went under kubelet, from the daemon's journal
/// since `cursor`: RunPodSandbox's Create (its CNI ADD, in the plugins)
/// and Start, and StartContainer's steps.
fn breakdown(cursor: &str, t: &mut Table) {
    use podscope::logging::event;
    let created = journal_after(cursor, event::CREATED);
    let attached = journal_after(cursor, event::NETWORK_ATTACHED);
    let started = journal_after(cursor, event::STARTED);
    t.add(
        &format!(
            "kubelet on podscope: RunPodSandbox, daemon-measured p50 ({} pods): Create (CNI ADD in the plugins) + Start (init, scope, machined)",
            created.len()
        ),
        "report",
        format!(
            "{} ({}) + {} ({}, {}, {})",
            field_p50(&created, "ELAPSED_US"),
            field_p50(&attached, "PLUGIN_US"),
            field_p50(&started, "TOTAL_US"),
            field_p50(&started, "INIT_US"),
            field_p50(&started, "SCOPE_US"),
            field_p50(&started, "MACHINE_US"),
        ),
        None,
    );
    let containers = journal_after(cursor, event::CONTAINER_STARTED);
    t.add(
        &format!(
            "kubelet on podscope: StartContainer, daemon-measured p50 ({} containers)",
            containers.len()
        ),
        "report",
        steps_p50(&containers),
        None,
    );
}

/// A ratio row: ours / theirs against `max` (lower is better), each with
/// its parts.
fn ratio(t: &mut Table, figure: &str, ours: (Duration, &str), theirs: (Duration, &str), max: f64) {
    let r = ours.0.as_secs_f64() / theirs.0.as_secs_f64();
    t.add(
        figure,
        &format!("<= {max:.1}x containerd"),
        format!(
            "{} ({}) / {} ({}) = {r:.2}x",
            ms(ours.0),
            ours.1,
            ms(theirs.0),
            theirs.1
        ),
        Some(r <= max),
    );
}

/// The bench's static pod `i`: one container that ends at once on SIGTERM
/// (so that StopContainer measures the runtime, not a grace period).
fn bench_pod(i: usize) -> (String, serde_json::Value) {
    let name = format!("bench-{i}");
    let pod = simple_pod(
        &name,
        NS,
        anchor::IMAGE,
        &["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"],
    );
    (name, pod)
}

/// One kubelet run on `target`: the pods written one at a time, each
/// until Running; with `full`, the memory with all of them running, then
/// the manifests removed until the sandboxes are gone, and kubelet's
/// metrics.
async fn measure(target: &Target, gates: &str, full: bool) -> Run {
    let k = Kubelet::start(&target.endpoint(), gates);
    let label = if gates.is_empty() {
        target.name.clone()
    } else {
        format!("{} ({gates})", target.name)
    };
    let mut run = Run::default();
    for i in 0..PODS {
        let (name, pod) = bench_pod(i);
        k.write_manifest(&name, &pod);
        let (_, took) = k
            .wait_pod(&name, Duration::from_secs(120), "running", |p| {
                p.is_some_and(|p| p.running())
            })
            .await;
        run.running.push(took);
    }
    eprintln!(
        "bench: kubelet on {label}: manifest -> Running {:?}",
        run.running.iter().map(|d| ms(*d)).collect::<Vec<_>>()
    );
    if full {
        // The shims and inits settled (first-touch pages, lazy work).
        tokio::time::sleep(Duration::from_secs(2)).await;
        memory(target, &mut run).await;
        removal(&k, target, &mut run).await;
        run.ops = runtime_operations(&k.metrics().await);
    }
    k.stop();
    run
}

/// The bench pods' sandboxes and their containers on the target.
async fn bench_pods(target: &Target) -> Vec<(String, Vec<String>)> {
    let mut rt = anchor::runtime_client(target).await;
    let labels: HashMap<String, String> =
        [("io.kubernetes.pod.namespace".into(), NS.into())].into();
    let sandboxes = rt
        .list_pod_sandbox(cri::ListPodSandboxRequest {
            filter: Some(cri::PodSandboxFilter {
                label_selector: labels,
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    let mut out = Vec::new();
    for s in sandboxes {
        let ctrs = rt
            .list_containers(cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    pod_sandbox_id: s.id.clone(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap()
            .into_inner()
            .containers
            .into_iter()
            .map(|c| c.id)
            .collect();
        out.push((s.id, ctrs));
    }
    out
}

/// The runtime's memory with the pods running: its daemons (containerd;
/// podscoped and podscope-cri) and the processes it keeps per pod.
async fn memory(target: &Target, run: &mut Run) {
    let pods = bench_pods(target).await;
    assert_eq!(
        pods.len(),
        PODS,
        "{}: bench sandboxes {pods:?}",
        target.name
    );
    let mut rt = anchor::runtime_client(target).await;
    let mut pids: Vec<u32> = anchor::runtime_processes(&mut rt, &pods)
        .await
        .into_iter()
        .flatten()
        .collect();
    if target.socket == std::path::Path::new(super::CRI_SOCKET) {
        pids.push(daemon_pid());
        let cri: u32 = sh("systemctl show -P MainPID podscope-cri")
            .trim()
            .parse()
            .unwrap();
        assert!(cri > 0, "podscope-cri is not running");
        pids.push(cri);
    } else {
        pids.push(anchor::containerd_pid());
    }
    for pid in &pids {
        let (r, p) = rss_pss(*pid);
        run.rss_kib += r;
        run.pss_kib += p;
    }
    let all = anchor::processes();
    let mut counts: Vec<(String, usize)> = Vec::new();
    for pid in &pids {
        let comm = all.get(pid).map(|p| p.comm.clone()).unwrap_or_default();
        match counts.iter_mut().find(|(c, _)| *c == comm) {
            Some((_, n)) => *n += 1,
            None => counts.push((comm, 1)),
        }
    }
    run.processes = counts
        .iter()
        .map(|(c, n)| {
            if *n > 1 {
                format!("{n} {c}")
            } else {
                c.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" + ");
}

/// Every manifest removed at once: how long until each pod's sandbox is no
/// longer listed.
async fn removal(k: &Kubelet, target: &Target, run: &mut Run) {
    let pods = bench_pods(target).await;
    let t0 = Instant::now();
    for i in 0..PODS {
        k.remove_manifest(&bench_pod(i).0);
    }
    let mut left: Vec<String> = pods.into_iter().map(|(s, _)| s).collect();
    while !left.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "{}: sandboxes not removed 240 s after their manifests: {left:?}",
            target.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let listed: Vec<String> = bench_pods(target)
            .await
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        let took = t0.elapsed();
        left.retain(|s| {
            let still = listed.contains(s);
            if !still {
                run.gone.push(took);
            }
            still
        });
    }
}
