//! The checks, in the order they run, each with objects of its own names.
//! Two are left for later ones: the Deployment `web` (deployment) and the
//! DaemonSet `everywhere` (workloads), which the drain evicts and spares;
//! the last check deletes everything and looks at what is left.

mod bad_input;
mod deployment;
mod drain;
mod nodes;
mod restarts;
mod streaming;
mod workloads;

use crate::kubectl::{self, NS};
use crate::Cluster;
use serde_json::{json, Value};

pub type Check = fn(&Cluster);

pub const ALL: &[(&str, Check)] = &[
    ("nodes-ready-as-podscope", nodes::ready_as_podscope),
    (
        "runtime-class-per-handler",
        nodes::runtime_class_per_handler,
    ),
    ("deployment-across-nodes", deployment::across_nodes),
    ("streams-through-the-api-server", streaming::streams),
    ("workloads-and-pod-ends", workloads::workloads),
    ("drain-a-node", drain::drain),
    ("restarts-unseen-by-the-control-plane", restarts::restarts),
    ("runtime-outage-notready-and-back", restarts::outage),
    ("bad-input-named-nothing-left", bad_input::bad_input),
    ("nothing-left-on-the-nodes", nothing_left),
];

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

/// The checks' namespace deleted: once kubelet has collected the pods'
/// sandboxes (its garbage collection, every minute), nothing of any pod
/// on either node: no sandbox, unit, network namespace or lease.
fn nothing_left(c: &Cluster) {
    kubectl::run(&["delete", "namespace", NS, "--timeout=120s"]);
    for n in &c.nodes {
        kubectl::wait(
            &format!("every sandbox removed from {}", n.name),
            std::time::Duration::from_secs(150),
            || {
                let left = n.crictl("pods -q");
                if left.trim().is_empty() {
                    Ok(())
                } else {
                    Err(left)
                }
            },
        );
        let units = n.sh("systemctl list-units --all --plain --no-legend 'podscope-*' | grep -v -e podscope-cri -e podscope-test; true");
        assert!(
            units.trim().is_empty(),
            "podscope units left on {}: {units}",
            n.name
        );
        assert!(
            n.netns().is_empty(),
            "network namespaces left on {}: {:?}",
            n.name,
            n.netns()
        );
        let leases = n.sh(
            "ls /var/lib/cni/networks/podscope-cluster 2>/dev/null | grep -E '^[0-9.]+$'; true",
        );
        assert!(
            leases.trim().is_empty(),
            "leases left on {}: {leases}",
            n.name
        );
        crate::ok!(
            c.t0,
            "{}: no sandbox, unit, network namespace or lease left",
            n.name
        );
    }
}
