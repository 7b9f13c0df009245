//! Integration tests against a real systemd, system bus and polkit: run
//! inside the harness (tests/harness, `make check`), as root, with podscope
//! installed by `make install`. Each test makes its own uniquely named
//! sandboxes; tests that restart the daemon leave it running. One file per
//! area beside this one; the helpers they share with the other suites and
//! the bench are podscope-test-support's (`harness`, `leftovers`, the
//! failpoint driver).

mod abuse;
mod activation;
mod authorization;
mod bus;
mod cdi;
mod checkpoint;
mod cli;
mod clients;
mod container_cli;
mod container_daemon;
mod container_devices;
mod container_errors;
mod container_events;
mod container_images;
mod container_limits;
mod container_logs;
mod container_stop;
mod containers;
mod cri;
mod cri_deadlines;
mod cri_metrics;
mod failpoints;
mod images;
// What is on the node against the records: shared with make bench's
// failpoints driver and make load (by path), used by failpoints and abuse.
mod isolation;
mod lifecycle;
mod metrics;
mod network;
mod races;
mod recovery;
mod streaming;
mod user_namespaces;
mod validation;
