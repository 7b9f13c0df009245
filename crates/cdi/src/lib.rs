//! podscope's Container Device Interface (cncf-tags/container-device-interface,
//! SPEC.md v1.1.0): the node's spec files read and kept fresh (`cache`),
//! each file's format and rules (`spec`), the edits of the devices asked for
//! checked against the host and applied to a container's OCI spec (`edits`),
//! and why a device could not be given (`error`). The device names are
//! podscope-api's (`domain::cdi`), which the CRI frontend and the CLI check
//! too; this crate is the daemon's.
//!
//! Written for podscope rather than taken from the `container-device-interface`
//! crate: that one edits `oci-spec` 0.10's types (podscope writes its own),
//! needs Rust 1.86 (podscope builds with 1.85), and brings a command-line
//! parser, a JSON-schema validator with an HTTP client and a second TLS
//! stack; what podscope needs of it is a reader and a few merge rules
//! (docs/ARCHITECTURE.md says more).

pub mod cache;
pub mod edits;
pub mod error;
pub mod spec;

pub use cache::{Change, Limits, Report, Resolved, SpecCache};
pub use edits::{Applied, Edits, Host, RealHost};
pub use error::CdiError;

/// The spec directories CDI names: `/etc/cdi` (what an operator or a
/// package installs), then `/var/run/cdi` (what drivers write as devices
/// come and go), which wins a device both define.
pub const DEFAULT_SPEC_DIRS: &[&str] = &["/etc/cdi", "/var/run/cdi"];
