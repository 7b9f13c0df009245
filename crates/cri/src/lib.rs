//! podscope-cri: the CRI v1 gRPC frontend. A thin, stateless translator:
//! each CRI call becomes calls to `org.podscope.Sandbox1`, every answer and
//! error is translated back, and nothing is kept that a restart could lose.
//! The D-Bus contract (podscope-api) is all it shares with the daemon.
//!
//! From the socket down: `server` (the socket and the gRPC server),
//! `authority` (any client's HTTP/2 `:authority` made one h2 accepts),
//! `deadline` (the caller's gRPC deadline, answered DEADLINE_EXCEEDED),
//! `service` and `image` (the two gRPC services), `sandbox` and
//! `container` (the verbs), `calls` (what every call uses), `convert`
//! (CRI ⇄ daemon terms, pure), `stats` and `pressure` (cgroup and
//! interface counters, PSI), `daemon` (the bus connections), `errors`
//! (D-Bus → gRPC codes), `stream` (the streaming server: exec, attach,
//! port-forward).

pub mod authority;
pub mod calls;
pub mod container;
pub mod convert;
pub mod daemon;
pub mod deadline;
pub mod errors;
#[cfg(test)]
mod fuzz;
pub mod image;
pub mod metrics;
pub mod pressure;
pub mod sandbox;
pub mod sandbox_metrics;
pub mod server;
pub mod service;
pub mod stats;
pub mod stream;
