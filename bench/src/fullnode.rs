//! The full node's rows (issue 31): kubelet's 110 pods with 4 containers
//! each, created by 8 gRPC clients at once and then drained, on containerd
//! 1.6 (the anchor), containerd 2.3 and podscope, one after another in this
//! run, by the same code (`node_load`, which `make load` runs too): each
//! burst's time, p50/p99 of each call, the failures (target 0), and for
//! podscope the most calls it had in flight on the bus and the most
//! descriptors it held per running container. podscope's bursts are held
//! to half of containerd 1.6's time.

use super::anchor::{self, Target};
use super::Table;
use podscope_test_support::node_load::{self, Burst, Endpoint, Retry, FULL_NODE};
use std::time::Duration;

fn endpoint(t: &Target) -> Endpoint {
    Endpoint {
        socket: t.socket.clone(),
        cgroup_parent: t.cgroup_parent.clone(),
        runtime_handler: t.runtime_handler.clone(),
    }
}

/// One target's create and drain, with their rows; (create, drain).
async fn bursts(target: &Target, t: &mut Table) -> (Duration, Duration) {
    let ep = endpoint(target);
    let mut img = anchor::image_client(target).await;
    anchor::pull(&mut img, node_load::IMAGE).await;
    let shape = FULL_NODE;
    let what = format!(
        "{} pods x {} containers by {} clients",
        shape.pods, shape.per_pod, shape.clients
    );
    let create = node_load::create(&ep, "bench-full", shape, Retry::Never).await;
    row(
        t,
        target,
        &format!("create {what}"),
        &create,
        Some(shape.pods * shape.per_pod),
    );
    let drain = node_load::drain(&ep, &create.pods, shape.clients, Retry::Never).await;
    row(
        t,
        target,
        "drain (StopPodSandbox + RemovePodSandbox, 8 clients)",
        &drain,
        None,
    );
    (create.took, drain.took)
}

fn row(t: &mut Table, target: &Target, what: &str, b: &Burst, running: Option<usize>) {
    let lat: Vec<String> = b
        .latencies()
        .iter()
        .map(|(m, (p50, p99))| {
            format!(
                "{m} {:.0}/{:.0}",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            )
        })
        .collect();
    let ran = running
        .map(|n| format!("{} of {n} running, ", b.containers_running()))
        .unwrap_or_default();
    t.add(
        &target.row(&format!("{what}: time; p50/p99 ms per call")),
        "report",
        format!(
            "{:.1} s ({ran}{}",
            b.took.as_secs_f64(),
            lat.join(", ") + ")"
        ),
        None,
    );
    let failed = b.failures();
    t.add(
        &target.row(&format!("{what}: failed calls")),
        "0",
        if failed.is_empty() {
            "0".into()
        } else {
            format!("{} {:?}", failed.len(), b.codes())
        },
        Some(failed.is_empty() && running.is_none_or(|n| b.containers_running() == n)),
    );
}

pub async fn run(t: &mut Table) {
    let c16 = anchor::start_containerd();
    let (c16_create, c16_drain) = bursts(&c16, t).await;
    anchor::stop_containerd();
    let c23 = anchor::start_containerd_2_3();
    let (c23_create, c23_drain) = bursts(&c23, t).await;
    anchor::stop_containerd();

    let podscope = Target::podscope("crun");
    let m = podscope_test_support::harness::manager().await.0;
    let before = m.runtime_status().await.unwrap().1;
    let (create, drain) = bursts(&podscope, t).await;
    let after = m.runtime_status().await.unwrap().1;
    let containers = (FULL_NODE.pods * FULL_NODE.per_pod) as f64;
    t.add(
        &podscope.row("most calls in flight on the bus (bus_calls_max), over both bursts"),
        "<= bus_calls_max",
        format!(
            "{} of {} ({} waited for a slot, {} refusals retried)",
            after.bus_calls_peak,
            after.bus_calls_max,
            after.bus_calls_waited - before.bus_calls_waited,
            after.bus_refusals_retried - before.bus_refusals_retried
        ),
        Some(after.bus_calls_peak <= after.bus_calls_max && after.bus_calls_failed == 0),
    );
    t.add(
        &podscope.row("most descriptors open per running container (over the idle daemon's)"),
        "report",
        format!(
            "{:.2} ({} at most, {} idle)",
            after
                .descriptors_peak
                .saturating_sub(before.descriptors_open) as f64
                / containers,
            after.descriptors_peak,
            before.descriptors_open
        ),
        None,
    );
    for (what, ours, c16, c23) in [
        ("create", create, c16_create, c23_create),
        ("drain", drain, c16_drain, c23_drain),
    ] {
        let r = ours.as_secs_f64() / c16.as_secs_f64();
        t.add(
            &format!(
                "full node {what}: podscope / containerd 1.6 (containerd 2.3: {:.1} s)",
                c23.as_secs_f64()
            ),
            "<= 0.50",
            format!(
                "{r:.2} ({:.1} s / {:.1} s)",
                ours.as_secs_f64(),
                c16.as_secs_f64()
            ),
            Some(r <= 0.5),
        );
    }
}
