//! Crash points for the kill-at-every-step tests: at each step boundary of
//! Create, Start, Stop, Remove and the network reconciliation, and of a
//! pull and an image's removal, a build
//! with the `failpoints` feature kills its own daemon with SIGKILL when
//! `PODSCOPE_FAILPOINT` names that point, exactly as `kill -9` would at
//! that moment. Only the integration tests build with the feature (see
//! tests/harness/run-integration.sh); in every other build `hit` is empty
//! and the variable is never read.

/// Every failpoint, in the order an operation reaches them. The driver of
/// the kill-at-every-step test (tests/support/src/failpoints.rs) runs
/// each one and counts those it saw fire.
pub const ALL: &[&str] = &[
    CREATE_SAVED,
    CREATE_ATTACHMENT_SAVED,
    CREATE_ADDED,
    CREATE_NETWORK_RECORDED,
    CREATE_FILES_WRITTEN,
    CREATE_DONE,
    START_NETWORK_READY,
    START_INIT_SPAWNED,
    START_SCOPE_MADE,
    START_DONE,
    START_MACHINE_REGISTERED,
    STOP_MACHINE_UNREGISTERED,
    STOP_SCOPE_STOPPED,
    STOP_DEL_RAN,
    STOP_DELETED,
    STOP_DONE,
    REMOVE_STOPPED,
    REMOVE_FILES_REMOVED,
    REMOVE_DONE,
    RECONCILE_DELETED,
    RECONCILE_NETNS_STOPPED,
];

/// The image store's, for the same test of pulls and removals (a driver
/// of their own: tests/support/src/failpoints.rs, `run_images`).
pub const IMAGES: &[&str] = &[
    PULL_LAYER_COMMITTED,
    PULL_BLOBS_WRITTEN,
    PULL_RECORDED,
    IMAGE_RECORD_DELETED,
    GC_LAYER_TRASHED,
];

/// The container verbs' (their driver: `run_containers` in the same file).
pub const CONTAINERS: &[&str] = &[
    CTR_CREATE_DIRS_MADE,
    CTR_CREATE_DONE,
    CTR_START_LOGS_READY,
    CTR_START_ROOTFS_MOUNTED,
    CTR_START_UNIT_STARTED,
    CTR_START_DONE,
    CTR_STOP_SIGNALLED,
    CTR_STOP_DONE,
    CTR_CHECKPOINT_FROZEN,
    CTR_REMOVE_UNIT_GONE,
    CTR_REMOVE_UNMOUNTED,
    CTR_REMOVE_DONE,
];

/// The bundle (config.json, the overlay's directories) made, no checkpoint.
pub const CTR_CREATE_DIRS_MADE: &str = "ctr-create.dirs-made";
/// Created: the checkpoint saved.
pub const CTR_CREATE_DONE: &str = "ctr-create.done";
/// Pipes made and held by the pod's init, the log file open; no unit yet.
pub const CTR_START_LOGS_READY: &str = "ctr-start.logs-ready";
/// The overlay mounted on the container's root.
pub const CTR_START_ROOTFS_MOUNTED: &str = "ctr-start.rootfs-mounted";
/// The unit runs the container; the record still says created.
pub const CTR_START_UNIT_STARTED: &str = "ctr-start.unit-started";
/// Running recorded.
pub const CTR_START_DONE: &str = "ctr-start.done";
/// The stop signal sent, the exit not yet recorded.
pub const CTR_STOP_SIGNALLED: &str = "ctr-stop.signalled";
/// The exit recorded.
pub const CTR_STOP_DONE: &str = "ctr-stop.done";
/// A checkpoint's container paused (its cgroup frozen) and its temporary
/// archive made; the dump not yet run.
pub const CTR_CHECKPOINT_FROZEN: &str = "ctr-checkpoint.frozen";
/// The unit stopped and reset; the root still mounted, the record there.
pub const CTR_REMOVE_UNIT_GONE: &str = "ctr-remove.unit-gone";
/// The root unmounted; the record there.
pub const CTR_REMOVE_UNMOUNTED: &str = "ctr-remove.unmounted";
/// The record and the bundle deleted.
pub const CTR_REMOVE_DONE: &str = "ctr-remove.done";

/// One layer unpacked and in the store; the others, the blobs and the
/// record not yet.
pub const PULL_LAYER_COMMITTED: &str = "pull.layer-committed";
/// Every layer and blob in the store; no record.
pub const PULL_BLOBS_WRITTEN: &str = "pull.blobs-written";
/// The record saved; the caller not yet answered.
pub const PULL_RECORDED: &str = "pull.recorded";
/// Remove deleted the record; its layers not yet collected.
pub const IMAGE_RECORD_DELETED: &str = "remove-image.record-deleted";
/// The garbage collection moved a layer into tmp/, not yet deleted.
pub const GC_LAYER_TRASHED: &str = "gc.layer-trashed";

pub const CREATE_SAVED: &str = "create.saved";
pub const CREATE_ATTACHMENT_SAVED: &str = "create.attachment-saved";
pub const CREATE_ADDED: &str = "create.added";
pub const CREATE_NETWORK_RECORDED: &str = "create.network-recorded";
pub const CREATE_FILES_WRITTEN: &str = "create.files-written";
pub const CREATE_DONE: &str = "create.done";
pub const START_NETWORK_READY: &str = "start.network-ready";
pub const START_INIT_SPAWNED: &str = "start.init-spawned";
pub const START_SCOPE_MADE: &str = "start.scope-made";
pub const START_MACHINE_REGISTERED: &str = "start.machine-registered";
pub const START_DONE: &str = "start.done";
pub const STOP_MACHINE_UNREGISTERED: &str = "stop.machine-unregistered";
pub const STOP_SCOPE_STOPPED: &str = "stop.scope-stopped";
/// DEL succeeded, its attachment not yet forgotten (any DEL: Stop's is
/// the one the driver reaches).
pub const STOP_DEL_RAN: &str = "stop.del-ran";
/// DEL done and the namespace's unit stopped; not yet recorded.
pub const STOP_DELETED: &str = "stop.deleted";
pub const STOP_DONE: &str = "stop.done";
pub const REMOVE_STOPPED: &str = "remove.stopped";
pub const REMOVE_FILES_REMOVED: &str = "remove.files-removed";
pub const REMOVE_DONE: &str = "remove.done";
pub const RECONCILE_DELETED: &str = "reconcile.deleted";
pub const RECONCILE_NETNS_STOPPED: &str = "reconcile.netns-stopped";

/// The environment variable naming the failpoint to die at.
pub const ENV: &str = "PODSCOPE_FAILPOINT";

/// What the daemon logs just before it kills itself at a failpoint (the
/// driver looks for it, to know the kill was the failpoint's).
pub fn hit_message(name: &str) -> String {
    format!("failpoint {name} reached: killing podscoped with SIGKILL")
}

/// Die here, with SIGKILL, if `PODSCOPE_FAILPOINT` names `name`.
#[cfg(feature = "failpoints")]
pub fn hit(name: &'static str) {
    static ARMED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var(ENV).ok());
    if armed.as_deref() == Some(name) {
        tracing::error!(failpoint = name, "{}", hit_message(name));
        // SAFETY: kill(2) on our own PID; nothing after it runs.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// Without the `failpoints` feature: nothing, and nothing is read.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &'static str) {}

#[cfg(test)]
mod tests {
    #[test]
    fn failpoint_names_are_unique_and_say_their_operation() {
        let mut seen = std::collections::HashSet::new();
        for name in super::ALL {
            assert!(seen.insert(name), "{name} listed twice");
            let (op, step) = name.split_once('.').expect("operation.step");
            assert!(
                ["create", "start", "stop", "remove", "reconcile"].contains(&op),
                "{name}"
            );
            assert!(!step.is_empty(), "{name}");
        }
        for name in super::IMAGES {
            assert!(seen.insert(name), "{name} listed twice");
            let (op, _) = name.split_once('.').expect("operation.step");
            assert!(["pull", "remove-image", "gc"].contains(&op), "{name}");
        }
        for name in super::CONTAINERS {
            assert!(seen.insert(name), "{name} listed twice");
            let (op, _) = name.split_once('.').expect("operation.step");
            assert!(
                [
                    "ctr-create",
                    "ctr-start",
                    "ctr-stop",
                    "ctr-checkpoint",
                    "ctr-remove"
                ]
                .contains(&op),
                "{name}"
            );
        }
    }
}
