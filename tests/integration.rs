//! Integration tests against a real systemd, system bus and polkit: run
//! inside the harness (tests/harness, `make check`), as root, with podscope
//! installed by `make install`. Each test makes its own uniquely named
//! sandboxes; tests that restart the daemon leave it running. The tests
//! are in `cases/`, one file per area; `common/` has the shared helpers.

#[path = "cases/abuse.rs"]
mod abuse;
#[path = "cases/activation.rs"]
mod activation;
#[path = "cases/authorization.rs"]
mod authorization;
#[path = "cases/bus.rs"]
mod bus;
#[path = "cases/cli.rs"]
mod cli;
#[path = "cases/clients.rs"]
mod clients;
mod common;
#[path = "cases/container_cli.rs"]
mod container_cli;
#[path = "cases/container_daemon.rs"]
mod container_daemon;
#[path = "cases/container_devices.rs"]
mod container_devices;
#[path = "cases/container_errors.rs"]
mod container_errors;
#[path = "cases/container_events.rs"]
mod container_events;
#[path = "cases/container_images.rs"]
mod container_images;
#[path = "cases/container_limits.rs"]
mod container_limits;
#[path = "cases/container_logs.rs"]
mod container_logs;
#[path = "cases/container_stop.rs"]
mod container_stop;
#[path = "cases/containers.rs"]
mod containers;
#[path = "cases/cri.rs"]
mod cri;
#[path = "cases/cri_deadlines.rs"]
mod cri_deadlines;
#[path = "cases/failpoints.rs"]
mod failpoints;
#[path = "cases/images.rs"]
mod images;
// What is on the node against the records: shared with make bench's
// failpoints driver and make load (by path), used by failpoints and abuse.
#[path = "cases/isolation.rs"]
mod isolation;
#[path = "../src/bin/podscope-bench/leftovers.rs"]
#[allow(dead_code)]
mod leftovers;
#[path = "cases/lifecycle.rs"]
mod lifecycle;
#[path = "cases/network.rs"]
mod network;
#[path = "cases/races.rs"]
mod races;
#[path = "cases/recovery.rs"]
mod recovery;
#[path = "cases/streaming.rs"]
mod streaming;
#[path = "cases/user_namespaces.rs"]
mod user_namespaces;
#[path = "cases/validation.rs"]
mod validation;
