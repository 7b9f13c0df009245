//! The D-Bus service `org.podscope.Sandbox1`: one file per object
//! (`manager`, `sandbox`, `container`, `images`), each with the verbs it
//! answers; the daemon behind them (`service`); error replies, polkit, the
//! callers' watch and limits. The contract itself (names, dictionaries) is
//! podscope-api; the assembly is `crate::serve`.
//!
//! Every mutating call is authorized first, then runs in its own task: a
//! caller that hangs up never cancels a lifecycle step or its cleanup.

pub mod callers;
pub mod container;
#[cfg(test)]
mod documented;
pub mod errors;
pub mod images;
pub mod interface_xml;
pub mod limits;
pub mod manager;
pub mod polkit;
mod properties;
pub mod sandbox;
pub mod service;
pub mod signals;

pub use podscope_api::{sandbox_path, BUS_NAME, MANAGER_PATH};
pub use service::{Service, MAX_WAITERS, WAITERS_PER_UID};
