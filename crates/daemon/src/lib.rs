//! podscoped: Kubernetes pod sandboxes as transient systemd scopes behind
//! the D-Bus service org.podscope.Sandbox1. `serve` assembles the daemon;
//! `bus/` holds one file per D-Bus object; `pod/` and `container/` one file
//! per verb. See docs/ARCHITECTURE.md for the map.

pub mod bus;
pub mod cni;
pub mod container;
#[cfg(test)]
mod fuzz;
pub mod host;
pub mod image;
pub mod metrics;
pub mod pod;
pub mod serve;
pub mod state;
pub mod systemd;
