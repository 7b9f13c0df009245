//! `make cluster`: a Kubernetes 1.36 control plane schedules onto two podscope
//! nodes (tests/cluster/run-cluster.sh boots them), and every check looks
//! from both sides: kubectl's view (objects, status, events, exec, logs,
//! port-forward, cp) and each node's (systemctl, crictl, its network
//! namespaces and leases). Run in the control plane's network namespace;
//! the checks run one after another, in the order below, and each prints
//! its time.
//!
//! CLUSTER_FOCUS=word|word runs only the checks whose name holds a word.
//! The cluster itself (its nodes, kubectl, the objects every check makes)
//! is podscope-test-support's `cluster`, which make bench's cluster section
//! (podscope-bench cluster) drives too.

mod checks;

use podscope_test_support::cluster::node::Node;
use podscope_test_support::cluster::{elapsed, Cluster};
use std::time::Instant;

fn main() {
    let cluster = Cluster {
        nodes: Node::all(),
        t0: Instant::now(),
    };
    let focus: Vec<String> = std::env::var("CLUSTER_FOCUS")
        .map(|f| f.split('|').map(str::to_string).collect())
        .unwrap_or_default();
    checks::setup(&cluster);
    for (name, check) in checks::ALL {
        if !focus.is_empty() && !focus.iter().any(|w| name.contains(w.as_str())) {
            continue;
        }
        let t = Instant::now();
        println!("cluster: [{}] check {name}", elapsed(cluster.t0));
        check(&cluster);
        println!(
            "cluster: [{}] check {name} passed in {:.1} s",
            elapsed(cluster.t0),
            t.elapsed().as_secs_f64()
        );
    }
    println!("cluster: [{}] all checks passed", elapsed(cluster.t0));
}
