//! The nodes as the control plane sees them, and podscope's runtime
//! handlers as RuntimeClasses.

use super::{container, IDLE};
use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::{json, Value};
use std::time::Duration;

/// Both nodes Ready, with podscope's CRI name and version as the
/// container runtime (`kubectl get nodes -o wide`), and on each node its
/// units running.
pub fn ready_as_podscope(c: &Cluster) {
    let runtime = format!("podscope://{}", env!("CARGO_PKG_VERSION"));
    let wide = kubectl::run(&["get", "nodes", "-o", "wide"]);
    for n in &c.nodes {
        let node: Value =
            serde_json::from_str(&kubectl::run(&["get", "node", &n.name, "-o", "json"])).unwrap();
        let ready = node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .expect("a Ready condition");
        assert_eq!(ready["status"], "True", "{}: {ready}", n.name);
        assert_eq!(
            node["status"]["nodeInfo"]["containerRuntimeVersion"], runtime,
            "{}'s runtime",
            n.name
        );
        let row = wide
            .lines()
            .find(|l| l.split_whitespace().next() == Some(n.name.as_str()))
            .unwrap_or_else(|| panic!("{} not in kubectl get nodes -o wide:\n{wide}", n.name));
        assert!(row.contains(&runtime), "kubectl get nodes -o wide: {row}");
        for unit in [
            "podscoped.service",
            "podscope-cri.service",
            "kubelet.service",
        ] {
            assert_eq!(
                n.unit_property(unit, "ActiveState"),
                "active",
                "{unit} on {}",
                n.name
            );
        }
        let version = n.crictl("version");
        assert!(
            version.contains("RuntimeName:  podscope"),
            "crictl version on {}: {version}",
            n.name
        );
        ok!(
            c.t0,
            "{} Ready as {runtime}; podscoped, podscope-cri, kubelet active",
            n.name
        );
    }
}

/// The handlers podscope.toml lists on the nodes (harness.sh: Debian's
/// crun, the default, and runc; crun 1.27 as crun-userns).
const HANDLERS: &[&str] = &["crun", "runc", "crun-userns"];

/// A RuntimeClass per handler, and a pod of each running on it: the
/// sandbox's handler as crictl shows it on its node; the crun-userns pod
/// with `hostUsers: false`, its root a high id on the node.
pub fn runtime_class_per_handler(c: &Cluster) {
    for h in HANDLERS {
        kubectl::apply(&json!({
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": { "name": h }, "handler": h,
        }));
        let mut spec = json!({
            "runtimeClassName": h,
            "terminationGracePeriodSeconds": 5,
            "containers": [container("main", IDLE)],
        });
        if *h == "crun-userns" {
            spec["hostUsers"] = json!(false);
        }
        kubectl::apply(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": format!("rc-{h}"), "namespace": NS, "labels": { "app": format!("rc-{h}") } },
            "spec": spec,
        }));
    }
    for h in HANDLERS {
        let p = kubectl::wait_ready(&format!("rc-{h}"), 1, Duration::from_secs(90)).remove(0);
        let node = c.node(p["spec"]["nodeName"].as_str().unwrap());
        let uid = p["metadata"]["uid"].as_str().unwrap();
        let sandboxes = node.sandboxes_of(uid);
        assert_eq!(
            sandboxes.len(),
            1,
            "rc-{h}'s sandboxes on {}: {sandboxes:?}",
            node.name
        );
        let inspect: Value =
            serde_json::from_str(&node.crictl(&format!("inspectp {}", sandboxes[0]))).unwrap();
        assert_eq!(
            inspect["status"]["runtimeHandler"], *h,
            "rc-{h}'s sandbox on {}",
            node.name
        );
        let uid_map = kubectl::run(&[
            "exec",
            "-n",
            NS,
            &format!("rc-{h}"),
            "--",
            "cat",
            "/proc/self/uid_map",
        ]);
        let first: Vec<&str> = uid_map.split_whitespace().collect();
        if *h == "crun-userns" {
            assert!(
                first.len() == 3 && first[0] == "0" && first[1] != "0",
                "rc-{h} (hostUsers: false): uid_map {uid_map}"
            );
        } else {
            assert_eq!(first.get(1), Some(&"0"), "rc-{h}: uid_map {uid_map}");
        }
        ok!(
            c.t0,
            "RuntimeClass {h}: pod rc-{h} Running on {} with handler {h}, uid_map {}",
            node.name,
            uid_map.trim()
        );
    }
    for h in HANDLERS {
        kubectl::run(&[
            "delete",
            "pod",
            "-n",
            NS,
            &format!("rc-{h}"),
            "--wait=false",
        ]);
    }
}
