//! The cluster of make cluster (tests/cluster/run-cluster.sh boots it), as
//! its checks and make bench's cluster section drive it: the nodes (`node`,
//! each a harness entered by its PID), kubectl in the control plane's
//! namespace (`kubectl`), and the objects both make.

pub mod kubectl;
pub mod node;

use kubectl::NS;
use node::Node;
use serde_json::{json, Value};
use std::time::Instant;

/// The time since T0, as each line shows it.
pub fn elapsed(t0: Instant) -> String {
    format!("{:6.1} s", t0.elapsed().as_secs_f64())
}

/// One thing seen to hold: printed as it passes, so a failure's place is plain.
#[macro_export]
macro_rules! ok {
    ($t0:expr, $($arg:tt)*) => {
        println!("cluster: [{}] ok: {}", $crate::cluster::elapsed($t0), format!($($arg)*))
    };
}

/// What every check is given: the nodes, and the run's start.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub t0: Instant,
}

impl Cluster {
    pub fn node(&self, name: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }
}

/// busybox with every applet (critest's), from each node's test registry.
pub const IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.29-2";

/// The checks' namespace, made once.
pub fn setup(c: &Cluster) {
    kubectl::apply(&json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NS }
    }));
    // The namespace's default service account, which every pod mounts a
    // token of, is made by the controller manager: pods wait for it.
    kubectl::wait(
        "the namespace's default service account",
        std::time::Duration::from_secs(60),
        || kubectl::get("serviceaccount", "default").ok_or_else(|| "not yet".to_string()),
    );
    crate::ok!(c.t0, "namespace {NS} with its service account");
}

/// A container of IMAGE running SCRIPT in sh, which ends at once on TERM
/// (a shell waiting on `sleep` would not see it for a second).
pub fn container(name: &str, script: &str) -> Value {
    json!({
        "name": name,
        "image": IMAGE,
        "command": ["sh", "-c", script],
    })
}

/// A pod of the checks' namespace labelled `app=NAME`.
pub fn pod(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": NS, "labels": { "app": name } },
        "spec": spec,
    })
}

/// A DaemonSet of the checks' namespace whose pods, labelled `app=NAME`,
/// have SPEC.
pub fn daemonset(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": { "name": name, "namespace": NS },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": { "metadata": { "labels": { "app": name } }, "spec": spec },
        },
    })
}

/// A shell that idles until TERM.
pub const IDLE: &str = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done";
