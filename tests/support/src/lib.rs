//! What podscope's suites (tests/) and its bench (bench/) share, so that
//! neither includes the other's files: the harness's helpers (`harness`),
//! what is left on a node against the records (`leftovers`), a full node's
//! load through the CRI (`node_load`), a kubelet's read-only API
//! (`kubelet_client`), the kill-at-every-step driver (`failpoints`), and
//! the unit tests' temporary directory (`TempDir`).

pub mod cluster;
pub mod failpoints;
pub mod fuzz;
pub mod harness;
pub mod kubelet_client;
pub mod leftovers;
pub mod node_load;
mod temp_dir;

pub use temp_dir::TempDir;
