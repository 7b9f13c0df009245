//! podscope: Kubernetes pod sandboxes as transient systemd scopes behind a
//! D-Bus service. See docs/ARCHITECTURE.md for the map.

pub mod api;
pub mod bus;
pub mod bus_gate;
pub mod cgroup_layout;
pub mod cni;
pub mod container;
pub mod cri;
pub mod descriptors;
pub mod domain;
pub mod error;
pub mod failpoint;
#[cfg(test)]
mod fuzz;
pub mod hostns;
pub mod idmap;
pub mod image;
pub mod logging;
pub mod oci;
pub mod pod;
pub mod registry;
pub mod settings;
pub mod store;
pub mod systemd;
pub mod terminal;

pub use error::{Error, ErrorKind, Result};
