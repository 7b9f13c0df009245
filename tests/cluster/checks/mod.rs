//! The checks, in the order they run, each with objects of its own names.
//! Two are left for later ones: the Deployment `web` (deployment) and the
//! DaemonSet `everywhere` (workloads), which the drain evicts and spares;
//! the last check deletes everything and looks at what is left.

mod bad_input;
mod deployment;
mod dra;
mod drain;
mod nodes;
mod restarts;
mod streaming;
mod workloads;

use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::Cluster;
pub use podscope_test_support::cluster::{container, daemonset, pod, setup, IDLE, IMAGE};

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
    ("dra-claim-on-the-node-with-the-device", dra::claim_a_device),
    ("drain-a-node", drain::drain),
    ("restarts-unseen-by-the-control-plane", restarts::restarts),
    ("runtime-outage-notready-and-back", restarts::outage),
    ("bad-input-named-nothing-left", bad_input::bad_input),
    ("nothing-left-on-the-nodes", nothing_left),
];

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
        podscope_test_support::ok!(
            c.t0,
            "{}: no sandbox, unit, network namespace or lease left",
            n.name
        );
    }
}
