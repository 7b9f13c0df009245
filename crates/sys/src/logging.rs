//! Logging to journald with structured fields (SANDBOX_ID, UNIT, ...) when
//! the journal is there, to stderr otherwise. `PODSCOPE_LOG` sets the filter
//! (tracing's EnvFilter syntax), default `info`.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

pub fn init(identifier: &str) {
    let filter = EnvFilter::try_from_env("PODSCOPE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    if libsystemd::logging::connected_to_journal() {
        if let Ok(layer) = tracing_journald::layer() {
            registry
                .with(
                    layer
                        .with_field_prefix(None)
                        .with_syslog_identifier(identifier.to_owned()),
                )
                .init();
            return;
        }
    }
    registry
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false),
        )
        .init();
}

/// The `EVENT=` field of the journal entries that carry a step's timings.
/// Tools (`make bench`, an operator's `journalctl EVENT=sandbox-started`)
/// match these, never the message wording, which may change.
pub mod event {
    pub const CREATED: &str = "sandbox-created";
    pub const STARTED: &str = "sandbox-started";
    pub const MACHINE_REGISTERED: &str = "machine-registered";
    pub const STOPPED: &str = "sandbox-stopped";
    pub const REMOVED: &str = "sandbox-removed";
    pub const NETWORK_ATTACHED: &str = "network-attached";
    pub const NETWORK_DETACHED: &str = "network-detached";
    pub const RECOVERED: &str = "recovered";
    pub const IMAGE_PULLED: &str = "image-pulled";
    pub const IMAGE_REMOVED: &str = "image-removed";
    pub const CONTAINER_CREATED: &str = "container-created";
    pub const CONTAINER_STARTED: &str = "container-started";
    pub const CONTAINER_STOPPED: &str = "container-stopped";
    pub const CONTAINER_EXITED: &str = "container-exited";
    pub const CONTAINER_REMOVED: &str = "container-removed";
    /// A checkpoint archive written (CheckpointContainer).
    pub const CONTAINER_CHECKPOINTED: &str = "container-checkpointed";
    /// A container restored from a checkpoint archive (its start).
    pub const CONTAINER_RESTORED: &str = "container-restored";
    /// An exec's end (at debug level: probes make many).
    pub const EXEC_ENDED: &str = "exec-ended";
}
