//! podscope restarted and stopped under a running cluster: restarts of
//! podscoped, podscope-cri and kubelet go unseen by the control plane; an
//! outage of podscope makes the node NotReady (runtime down) and Ready again,
//! its pods' containers the same throughout.

use super::{container, IDLE};
use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::node::Node;
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A pod held on NODE.
fn steady(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": NS, "labels": { "app": name } },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [container("main", IDLE), container("side", IDLE)],
        },
    })
}

/// What must not change: each container of the node's pods (id, restart
/// count) as the API server has them, and each pod's units on the node
/// (since when they are active).
#[derive(Debug, PartialEq)]
struct Seen {
    containers: BTreeMap<String, (String, u64)>,
    units: BTreeMap<String, String>,
}

fn seen(n: &Node) -> Seen {
    let mut containers = BTreeMap::new();
    let mut units = BTreeMap::new();
    for p in kubectl::list(
        "pods",
        &["--field-selector", &format!("spec.nodeName={}", n.name)],
    ) {
        if !p["metadata"]["deletionTimestamp"].is_null() || !kubectl::pod_ready(&p) {
            continue;
        }
        let pod = p["metadata"]["name"].as_str().unwrap();
        for s in p["status"]["containerStatuses"].as_array().unwrap() {
            containers.insert(
                format!("{pod}/{}", s["name"].as_str().unwrap()),
                (
                    s["containerID"].as_str().unwrap_or("").to_string(),
                    s["restartCount"].as_u64().unwrap(),
                ),
            );
        }
        for sandbox in n.sandboxes_of(p["metadata"]["uid"].as_str().unwrap()) {
            for unit in n.units_of(&sandbox) {
                let since = n.unit_property(&unit, "ActiveEnterTimestampMonotonic");
                units.insert(unit, since);
            }
        }
    }
    Seen { containers, units }
}

/// The node's Ready condition: (status, reason, message, last transition).
fn ready(n: &Node) -> (String, String, String, String) {
    let node: Value =
        serde_json::from_str(&kubectl::run(&["get", "node", &n.name, "-o", "json"])).unwrap();
    let r = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap();
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    (
        s("status"),
        s("reason"),
        s("message"),
        s("lastTransitionTime"),
    )
}

/// podscoped, podscope-cri and kubelet restarted on node1, one after the
/// other: the node stays Ready all along, and its pods' containers and
/// units are the same.
pub fn restarts(c: &Cluster) {
    let n = c.node("node1");
    kubectl::apply(&steady("steady1", &n.name));
    kubectl::wait_ready("steady1", 1, Duration::from_secs(60));
    let before = seen(n);
    let ready_before = ready(n);
    assert_eq!(ready_before.0, "True");
    for unit in ["podscoped", "podscope-cri", "kubelet"] {
        let pid = n.unit_property(unit, "MainPID");
        n.sh(&format!("systemctl restart {unit}"));
        assert_ne!(
            n.unit_property(unit, "MainPID"),
            pid,
            "{unit} was not restarted"
        );
        ok!(c.t0, "{unit} restarted on {}", n.name);
    }
    // kubelet answers again, and goes through a node status update and a
    // few relists of the pods before anything is looked at.
    n.sh("for i in $(seq 100); do curl -sf http://127.0.0.1:10248/healthz >/dev/null && exit 0; sleep 0.2; done; exit 1");
    let end = Instant::now() + Duration::from_secs(12);
    while Instant::now() < end {
        assert_eq!(
            ready(n),
            ready_before,
            "{}'s Ready condition changed",
            n.name
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_eq!(seen(n), before, "the pods on {} after the restarts", n.name);
    ok!(
        c.t0,
        "{} Ready throughout (since {}); {} containers and {} units the same",
        n.name,
        ready_before.3,
        before.containers.len(),
        before.units.len()
    );
    kubectl::run(&["delete", "pod", "-n", NS, "steady1", "--wait=false"]);
}

/// podscope stopped on node2 (the socket too, or kubelet's next call would
/// start it again): kubelet reports the node NotReady, runtime down; once
/// it is started again, Ready, and the pods' containers the same.
pub fn outage(c: &Cluster) {
    let n = c.node("node2");
    kubectl::apply(&steady("steady2", &n.name));
    kubectl::wait_ready("steady2", 1, Duration::from_secs(60));
    let before = seen(n);
    assert!(before.containers.contains_key("steady2/main"));
    let t = Instant::now();
    n.sh("systemctl stop podscope-cri.socket podscope-cri.service podscoped.service");
    let down = kubectl::wait(
        &format!("{} NotReady", n.name),
        Duration::from_secs(90),
        || {
            let r = ready(n);
            if r.0 == "False" {
                Ok(r)
            } else {
                Err(format!("{r:?}"))
            }
        },
    );
    assert!(
        down.2.contains("runtime"),
        "{} NotReady for another reason: {down:?}",
        n.name
    );
    ok!(
        c.t0,
        "podscope stopped on {}: NotReady after {:.1} s: {}",
        n.name,
        t.elapsed().as_secs_f64(),
        down.2
    );
    n.sh("systemctl start podscope-cri.socket podscoped.service");
    let up = Instant::now();
    kubectl::wait(
        &format!("{} Ready again", n.name),
        Duration::from_secs(90),
        || {
            let r = ready(n);
            if r.0 == "True" {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        },
    );
    let outage = t.elapsed();
    assert!(
        outage < Duration::from_secs(300),
        "the outage outlasted the pods' not-ready toleration: {outage:?}"
    );
    kubectl::wait_ready("steady2", 1, Duration::from_secs(60));
    assert_eq!(seen(n), before, "the pods on {} after the outage", n.name);
    ok!(c.t0, "podscope started on {}: Ready after {:.1} s ({:.1} s out in all); {} containers and {} units the same",
        n.name, up.elapsed().as_secs_f64(), outage.as_secs_f64(), before.containers.len(), before.units.len());
    kubectl::run(&["delete", "pod", "-n", NS, "steady2", "--wait=false"]);
}
