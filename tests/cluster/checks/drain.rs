//! `kubectl drain`: a node's pods evicted, the Deployment's pods made
//! again on the other node, and nothing of the evicted ones left on the
//! drained node.

use podscope_test_support::cluster::kubectl;
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::Value;
use std::time::Duration;

pub fn drain(c: &Cluster) {
    let drained = c.node("node2");
    let other = c.node("node1");
    let before: Vec<Value> = kubectl::pods("web")
        .into_iter()
        .filter(|p| p["spec"]["nodeName"] == drained.name.as_str())
        .collect();
    assert!(
        !before.is_empty(),
        "no web pod on {} to evict",
        drained.name
    );
    let sandboxes: Vec<(String, String)> = before
        .iter()
        .map(|p| {
            let s = drained.sandboxes_of(p["metadata"]["uid"].as_str().unwrap());
            assert_eq!(s.len(), 1, "{}: {s:?}", p["metadata"]["name"]);
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                s[0].clone(),
            )
        })
        .collect();

    kubectl::run(&[
        "drain",
        &drained.name,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=120s",
    ]);
    let web = kubectl::wait_ready("web", 4, Duration::from_secs(120));
    for p in &web {
        assert_eq!(
            p["spec"]["nodeName"],
            other.name.as_str(),
            "after the drain: {}",
            kubectl::summary(&web)
        );
    }
    ok!(
        c.t0,
        "drained {}: web's {} pods there evicted, all 4 now on {}",
        drained.name,
        before.len(),
        other.name
    );

    // Only the DaemonSet's pod stays on the drained node.
    let left: Vec<Value> = kubectl::list(
        "pods",
        &[
            "-A",
            "--field-selector",
            &format!("spec.nodeName={}", drained.name),
        ],
    )
    .into_iter()
    .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
    .collect();
    assert!(
        left.iter()
            .all(|p| p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"),
        "pods on the drained {}: {}",
        drained.name,
        kubectl::summary(&left)
    );
    for (name, sandbox) in &sandboxes {
        drained.wait_nothing_left_of(sandbox, name);
    }
    let running = drained.crictl("ps -q");
    let ds_only = running.lines().count();
    assert_eq!(
        ds_only,
        left.len(),
        "containers running on the drained {}: {running}",
        drained.name
    );
    ok!(c.t0, "nothing of the evicted pods on {}: their units, network namespaces and leases gone; {ds_only} container(s) left, the DaemonSet's", drained.name);
    kubectl::run(&["uncordon", &drained.name]);
}
