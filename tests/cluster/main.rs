//! `make cluster`: a Kubernetes 1.36 control plane schedules onto two podscope
//! nodes (tests/cluster/run-cluster.sh boots them), and every check looks
//! from both sides: kubectl's view (objects, status, events, exec, logs,
//! port-forward, cp) and each node's (systemctl, crictl, its network
//! namespaces and leases). Run in the control plane's network namespace;
//! the checks run one after another, in the order below, and each prints
//! its time.
//!
//! CLUSTER_FOCUS=word|word runs only the checks whose name holds a word.
//! `bench RUNTIME` and `bench-table` are make bench's cluster section
//! (bench.rs) instead.

mod bench;
mod checks;
mod kubectl;
mod node;

use node::Node;
use std::time::Instant;

/// The time since T0, as each line shows it.
pub fn elapsed(t0: Instant) -> String {
    format!("{:6.1} s", t0.elapsed().as_secs_f64())
}

/// One thing seen to hold: printed as it passes, so a failure's place is plain.
#[macro_export]
macro_rules! ok {
    ($t0:expr, $($arg:tt)*) => {
        println!("cluster: [{}] ok: {}", $crate::elapsed($t0), format!($($arg)*))
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

fn main() {
    let cluster = Cluster {
        nodes: Node::all(),
        t0: Instant::now(),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("bench") => {
            checks::setup(&cluster);
            return bench::run(&cluster, args.get(1).expect("cluster bench RUNTIME"));
        }
        Some("bench-table") => return bench::table(),
        _ => {}
    }
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
