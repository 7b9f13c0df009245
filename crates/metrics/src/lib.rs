//! podscope's metrics, pure: no socket, no file, no clock.
//!
//! - `catalog`: every family podscoped and podscope-cri expose, declared
//!   once (name, type, help, label names, buckets, which process); the
//!   documents and the merge read the same list.
//! - `registry`: the values, by family and label values: a short-held
//!   lock per family, and a bound on the label sets a family may grow to
//!   (past it, new ones fold into one whose values are all `other`).
//! - `snapshot`: the values at one moment, serialisable (podscope-cri
//!   hands its own to podscoped as JSON), and the merge of two.
//! - `exposition`: a snapshot as the Prometheus text format, version
//!   0.0.4.

pub mod catalog;
pub mod exposition;
pub mod registry;
pub mod snapshot;

#[cfg(test)]
mod documented;

pub use catalog::{Family, Kind, Process};
pub use registry::Registry;
pub use snapshot::{GateFigures, ProcessFigures, Sample, Snapshot, Value};

/// The Content-Type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The value every label of a folded label set takes (`registry`), and
/// the label value callers give what they do not know by name (an
/// unknown method, a registry past the bound).
pub const OTHER: &str = "other";
