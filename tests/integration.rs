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
#[path = "cases/containers.rs"]
mod containers;
#[path = "cases/cri.rs"]
mod cri;
#[path = "cases/failpoints.rs"]
mod failpoints;
#[path = "cases/images.rs"]
mod images;
#[path = "cases/lifecycle.rs"]
mod lifecycle;
#[path = "cases/network.rs"]
mod network;
#[path = "cases/races.rs"]
mod races;
#[path = "cases/recovery.rs"]
mod recovery;
#[path = "cases/validation.rs"]
mod validation;
