//! The kubelet figures (issues 23 and 33): a real kubelet (standalone,
//! `tests/e2e/kubelet.sh`) drives its generation's anchor and then
//! podscope, in the same run, with the same 11 static pods of one
//! container: kubelet 1.26 on Debian's containerd 1.6 + runc, then
//! kubelet 1.36 on containerd 2.3 + runc (Kubernetes 1.36 supports no
//! containerd 1.x). kubelet's own view is the measure:
//!
//! - its `/metrics` (`kubelet_runtime_operations_duration_seconds`): the
//!   mean of each CRI call it made, for the pod's start (RunPodSandbox,
//!   CreateContainer, StartContainer) and its end (StopContainer,
//!   StopPodSandbox, RemovePodSandbox);
//! - a manifest written until `/pods` reports the pod Running, one pod at
//!   a time: with the generic PLEG (its 1 s relist sets it) on both, and
//!   with the EventedPLEG gate (GetContainerEvents) on podscope and on the
//!   anchors that serve it (containerd 2.x; 1.6 lacks it); a kubelet that
//!   gave up on the events and fell back to relisting is said in the row;
//! - the manifests removed until the runtime lists no sandbox of them
//!   (kubelet's own loops: its garbage collection removes the sandboxes);
//! - the runtime's memory with the 11 pods running: its daemons and every
//!   process it keeps per pod outside the containers.

use super::anchor::{self, Target};
use super::containers::{field_p50, journal_after, journal_cursor, steps_p50};
use super::{daemon_pid, ms, pct, rss_pss, sh, Table};
use cri_api::v1 as cri;
use podscope_test_support::kubelet_client::{runtime_operations, simple_pod, Kubelet};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Static pods per run.
const PODS: usize = 11;
/// Their namespace.
const NS: &str = "bench";
/// The feature gate of kubelet's Evented PLEG (alpha and off by default in
/// 1.26 and in 1.36 alike).
const EVENTED: &str = "EventedPLEG=true";

/// A kubelet generation and the anchor it is measured against.
pub struct Generation {
    /// "1.26": its section `kubelet-1.26`, its rows "kubelet 1.26: ...".
    pub version: &'static str,
    /// The variable naming its binary (`make bench` sets both).
    kubelet_var: &'static str,
    /// The anchor's short name in the rows.
    anchor: &'static str,
    /// Starts the anchor (stopped with `anchor::stop_containerd`).
    start_anchor: fn() -> Target,
    /// Does the anchor serve GetContainerEvents? containerd 1.6 does not
    /// (kubelet would retry, then relist: nothing to measure).
    anchor_events: bool,
}

/// Oldest first, as a node upgrades.
pub const GENERATIONS: [Generation; 2] = [
    Generation {
        version: "1.26",
        kubelet_var: "KUBELET",
        anchor: "containerd 1.6",
        start_anchor: anchor::start_containerd,
        anchor_events: false,
    },
    Generation {
        version: "1.36",
        kubelet_var: "KUBELET_1_36",
        anchor: "containerd 2.3",
        start_anchor: anchor::start_containerd_2_3,
        anchor_events: true,
    },
];

impl Generation {
    fn kubelet(&self) -> String {
        std::env::var(self.kubelet_var).unwrap_or_else(|_| {
            panic!(
                "{} is not set: the kubelet section runs kubelet {} (make bench sets it)",
                self.kubelet_var, self.version
            )
        })
    }

    /// "kubelet 1.36: `figure`".
    fn row(&self, figure: &str) -> String {
        format!("kubelet {}: {figure}", self.version)
    }
}

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
    /// With EventedPLEG: kubelet gave up on the runtime's events and
    /// relisted instead (its journal says so).
    fell_back: bool,
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

    /// Manifest -> Running, p50, and a note when an EventedPLEG kubelet
    /// fell back to relisting (then it is the generic PLEG's figure).
    fn running_p50(&self) -> String {
        let note = if self.fell_back {
            " (kubelet fell back to relisting: no events)"
        } else {
            ""
        };
        format!("{}{note}", ms(p50(&self.running)))
    }
}

fn p50(v: &[Duration]) -> Duration {
    pct(&mut v.to_vec(), 0.5)
}

/// Every run of one generation: the anchor's, then podscope's.
struct Runs {
    theirs: Run,
    theirs_evented: Option<Run>,
    ours: Run,
    ours_evented: Run,
}

/// The generations `selected`, one after another, each with its rows.
pub async fn run(t: &mut Table, selected: &[&Generation]) {
    // podscope's default runtime handler (crun), as kubelet names none.
    let podscope = Target {
        name: "podscope".into(),
        ..Target::podscope("")
    };
    for generation in selected {
        let runs = measure_generation(generation, &podscope, t).await;
        rows(t, generation, &runs);
    }
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
}

/// One generation's kubelet on its anchor, then on podscope (with the
/// breakdown of podscope's time); the anchor stopped after.
async fn measure_generation(g: &Generation, podscope: &Target, t: &mut Table) -> Runs {
    let kubelet = g.kubelet();
    let containerd = (g.start_anchor)();
    for target in [&containerd, podscope] {
        let mut img = anchor::image_client(target).await;
        anchor::pull(&mut img, anchor::IMAGE).await;
    }
    let theirs = measure(&kubelet, &containerd, "", true).await;
    let theirs_evented = if g.anchor_events {
        Some(measure(&kubelet, &containerd, EVENTED, false).await)
    } else {
        None
    };
    let cursor = journal_cursor();
    let ours = measure(&kubelet, podscope, "", true).await;
    breakdown(g, &cursor, t);
    let ours_evented = measure(&kubelet, podscope, EVENTED, false).await;
    anchor::stop_containerd();
    Runs {
        theirs,
        theirs_evented,
        ours,
        ours_evented,
    }
}

/// One generation's rows: the start and stop paths and the memory against
/// the kubelet issue's targets, manifest -> Running as [`running_rows`]
/// says, removal reported.
fn rows(t: &mut Table, g: &Generation, r: &Runs) {
    let (ours, theirs) = (&r.ours, &r.theirs);
    let start = ["run_podsandbox", "create_container", "start_container"];
    ratio(
        t,
        &g.row("run_podsandbox + create_container + start_container, mean (its /metrics)"),
        g.anchor,
        ours.sum_of_means(&start),
        theirs.sum_of_means(&start),
        0.4,
    );
    let end = ["stop_container", "stop_podsandbox", "remove_podsandbox"];
    ratio(
        t,
        &g.row("stop_container + stop_podsandbox + remove_podsandbox, mean (its /metrics)"),
        g.anchor,
        ours.sum_of_means(&end),
        theirs.sum_of_means(&end),
        0.5,
    );
    running_rows(t, g, r);
    let max = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    t.add(
        &g.row(&format!(
            "manifests removed -> sandbox gone, p50 (max) of {PODS}"
        )),
        "report",
        format!(
            "podscope {:.1} s ({:.1}) / {} {:.1} s ({:.1})",
            p50(&ours.gone).as_secs_f64(),
            max(&ours.gone).as_secs_f64(),
            g.anchor,
            p50(&theirs.gone).as_secs_f64(),
            max(&theirs.gone).as_secs_f64()
        ),
        None,
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    let share = ours.rss_kib as f64 / theirs.rss_kib as f64;
    t.add(
        &g.row(&format!(
            "runtime memory with {PODS} static pods (daemons + per pod outside the containers), RSS"
        )),
        &format!("<= 0.2x {}", g.anchor),
        format!(
            "{:.1} MiB ({}; PSS {:.1}) / {:.1} MiB ({}; PSS {:.1}) = {share:.2}x",
            mib(ours.rss_kib),
            ours.processes,
            mib(ours.pss_kib),
            mib(theirs.rss_kib),
            theirs.processes,
            mib(theirs.pss_kib)
        ),
        Some(share <= 0.2),
    );
}

/// Manifest -> Running, reported with the generic PLEG on both. With
/// EventedPLEG: where the anchor serves events (containerd 2.3), like
/// against like, reported (issue 33 sets no target for it: kubelet 1.36's
/// generic PLEG no longer waits for a relist); where it does not
/// (containerd 1.6), podscope's events against the anchor's relisting,
/// held to the kubelet issue's 0.5x.
fn running_rows(t: &mut Table, g: &Generation, r: &Runs) {
    both_running(t, g, "generic PLEG", &r.ours, &r.theirs);
    let ours = &r.ours_evented;
    match &r.theirs_evented {
        Some(theirs) => both_running(t, g, "EventedPLEG on both", ours, theirs),
        None => {
            let theirs = &r.theirs;
            let ratio = p50_ratio(ours, theirs);
            t.add(
                &g.row(&format!(
                    "manifest written -> Running, p50 of {PODS}, podscope with EventedPLEG / {} generic",
                    g.anchor
                )),
                &format!("<= 0.5x {}", g.anchor),
                format!(
                    "{} / {} = {ratio:.2}x",
                    ours.running_p50(),
                    theirs.running_p50()
                ),
                Some(ratio <= 0.5 && !ours.fell_back),
            );
        }
    }
}

/// A reported manifest -> Running row: podscope's and the anchor's p50
/// under the same PLEG (`pleg`), and their ratio.
fn both_running(t: &mut Table, g: &Generation, pleg: &str, ours: &Run, theirs: &Run) {
    t.add(
        &g.row(&format!(
            "manifest written -> Running, p50 of {PODS}, {pleg}"
        )),
        "report",
        format!(
            "podscope {} / {} {} = {:.2}x",
            ours.running_p50(),
            g.anchor,
            theirs.running_p50(),
            p50_ratio(ours, theirs)
        ),
        None,
    );
}

/// Manifest -> Running, p50: ours / theirs.
fn p50_ratio(ours: &Run, theirs: &Run) -> f64 {
    p50(&ours.running).as_secs_f64() / p50(&theirs.running).as_secs_f64()
}

/// Where podscope's time went under kubelet, from the daemon's journal
/// since `cursor`: RunPodSandbox's Create (its CNI ADD, in the plugins)
/// and Start, and StartContainer's steps.
fn breakdown(g: &Generation, cursor: &str, t: &mut Table) {
    use podscope_sys::logging::event;
    let created = journal_after(cursor, event::CREATED);
    let attached = journal_after(cursor, event::NETWORK_ATTACHED);
    let started = journal_after(cursor, event::STARTED);
    let machines = journal_after(cursor, event::MACHINE_REGISTERED);
    t.add(
        &g.row(&format!(
            "podscope's RunPodSandbox, daemon-measured p50 ({} pods): Create (CNI ADD in the plugins) + Start (init, scope); machined after it",
            created.len()
        )),
        "report",
        format!(
            "{} ({}) + {} ({}, {}); {}",
            field_p50(&created, "ELAPSED_US"),
            field_p50(&attached, "PLUGIN_US"),
            field_p50(&started, "TOTAL_US"),
            field_p50(&started, "INIT_US"),
            field_p50(&started, "SCOPE_US"),
            field_p50(&machines, "MACHINE_US"),
        ),
        None,
    );
    let containers = journal_after(cursor, event::CONTAINER_STARTED);
    t.add(
        &g.row(&format!(
            "podscope's StartContainer, daemon-measured p50 ({} containers)",
            containers.len()
        )),
        "report",
        steps_p50(&containers),
        None,
    );
}

/// A ratio row: ours / theirs (the anchor's) against `max` (lower is
/// better), each with its parts.
fn ratio(
    t: &mut Table,
    figure: &str,
    anchor: &str,
    ours: (Duration, String),
    theirs: (Duration, String),
    max: f64,
) {
    let r = ours.0.as_secs_f64() / theirs.0.as_secs_f64();
    t.add(
        figure,
        &format!("<= {max:.1}x {anchor}"),
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

/// One run of the kubelet at `kubelet` on `target`: the pods written one
/// at a time, each until Running; with `full`, the memory with all of them
/// running, then the manifests removed until the sandboxes are gone, and
/// kubelet's metrics.
async fn measure(kubelet: &str, target: &Target, gates: &str, full: bool) -> Run {
    let k = Kubelet::start_binary(kubelet, &target.endpoint(), gates);
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
    if gates.contains(EVENTED) {
        run.fell_back = fell_back_to_relisting();
    }
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

/// Did the running kubelet give up on its Evented PLEG? When the runtime's
/// GetContainerEvents fails, kubelet retries a few times, then says so and
/// relists as the generic PLEG does: its figures would be the generic
/// PLEG's under the evented row's name.
fn fell_back_to_relisting() -> bool {
    let invocation = sh("systemctl show -P InvocationID kubelet");
    let said = sh(&format!(
        "journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID={}",
        invocation.trim()
    ));
    // kubelet says something at every start (--v=2): nothing means the
    // query is wrong, not that the events worked.
    assert!(
        !said.trim().is_empty(),
        "no journal of kubelet's invocation {}",
        invocation.trim()
    );
    let fell_back = said.contains("Fall back to Generic PLEG relisting");
    if fell_back || said.contains("Evented PLEG: Failed to get container events") {
        eprintln!("bench: kubelet's Evented PLEG got no events (fell back: {fell_back})");
    }
    fell_back
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
