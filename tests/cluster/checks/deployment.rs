//! A Deployment spread over both nodes: traffic between pods of different
//! nodes, and a rolling update that leaves nothing of the old pods.

use super::IMAGE;
use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::{json, Value};
use std::time::Duration;

const REPLICAS: usize = 4;

/// An HTTP server answering with its pod's name, on 8080.
fn web(version: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web", "namespace": NS },
        "spec": {
            "replicas": REPLICAS,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    // As many on each node (a skew of one at most) of
                    // those that take pods (a drained node does not).
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
                        "labelSelector": { "matchLabels": { "app": "web" } },
                    }],
                    "containers": [{
                        "name": "httpd", "image": IMAGE,
                        "env": [{ "name": "VERSION", "value": version }],
                        "command": ["sh", "-c",
                            "mkdir -p /www && hostname > /www/index.html && httpd -p 8080 -h /www; \
                             trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"],
                        "readinessProbe": { "tcpSocket": { "port": 8080 }, "periodSeconds": 1 },
                    }],
                },
            },
        },
    })
}

struct Old {
    name: String,
    node: String,
    sandbox: String,
}

pub fn across_nodes(c: &Cluster) {
    kubectl::apply(&web("1"));
    let pods = kubectl::wait_ready("web", REPLICAS, Duration::from_secs(120));
    for n in &c.nodes {
        let here = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == n.name.as_str())
            .count();
        assert_eq!(
            here,
            REPLICAS / c.nodes.len(),
            "web's pods on {}: {}",
            n.name,
            kubectl::summary(&pods)
        );
    }
    ok!(
        c.t0,
        "deployment web: {REPLICAS} pods Ready, spread: {}",
        kubectl::summary(&pods)
    );

    // Each node's pod fetches from a pod of the other node, by pod IP.
    for from in &pods {
        let to = pods
            .iter()
            .find(|p| p["spec"]["nodeName"] != from["spec"]["nodeName"])
            .unwrap();
        let (from_name, to_name) = (name(from), name(to));
        let ip = to["status"]["podIP"].as_str().unwrap();
        // (Debian's busybox wget crashes on -T: timeout bounds it.)
        let got = kubectl::run(&[
            "exec",
            "-n",
            NS,
            from_name,
            "--",
            "timeout",
            "5",
            "wget",
            "-qO-",
            &format!("http://{ip}:8080/"),
        ]);
        assert_eq!(
            got.trim(),
            to_name,
            "{from_name} fetching from {to_name} at {ip}"
        );
        ok!(
            c.t0,
            "{from_name} ({}) reached {to_name} ({}) at {ip}",
            from["spec"]["nodeName"],
            to["spec"]["nodeName"]
        );
    }

    // The rolling update: every pod replaced, and on the nodes nothing of
    // the old ones but their stopped sandboxes (kubelet's garbage
    // collection removes those; the last check sees them gone).
    let old: Vec<Old> = pods
        .iter()
        .map(|p| {
            let node = p["spec"]["nodeName"].as_str().unwrap().to_string();
            let sandboxes = c
                .node(&node)
                .sandboxes_of(p["metadata"]["uid"].as_str().unwrap());
            assert_eq!(sandboxes.len(), 1, "{}'s sandboxes: {sandboxes:?}", name(p));
            Old {
                name: name(p).to_string(),
                node,
                sandbox: sandboxes[0].clone(),
            }
        })
        .collect();
    for o in &old {
        let remains = c.node(&o.node).remains_of(&o.sandbox);
        assert!(
            remains.iter().any(|r| r.ends_with(".scope")),
            "{}'s units before the update: {remains:?}",
            o.name
        );
    }
    kubectl::apply(&web("2"));
    kubectl::run(&[
        "rollout",
        "status",
        "-n",
        NS,
        "deployment/web",
        "--timeout=180s",
    ]);
    let new = kubectl::wait_ready("web", REPLICAS, Duration::from_secs(60));
    for p in &new {
        assert!(
            !old.iter().any(|o| o.name == name(p)),
            "{} was not replaced",
            name(p)
        );
        assert_eq!(p["spec"]["containers"][0]["env"][0]["value"], "2");
    }
    ok!(c.t0, "rolled out: {}", kubectl::summary(&new));
    for o in &old {
        let node = c.node(&o.node);
        node.wait_nothing_left_of(&o.sandbox, &o.name);
        let state = node.sandbox_state(&o.sandbox);
        assert!(
            state.as_deref().is_none_or(|s| s == "SANDBOX_NOTREADY"),
            "{}'s sandbox {} on {}: {state:?}",
            o.name,
            o.sandbox,
            o.node
        );
    }
    ok!(
        c.t0,
        "the old pods' units, network namespaces and leases are gone from their nodes"
    );
}

fn name(p: &Value) -> &str {
    p["metadata"]["name"].as_str().unwrap()
}
