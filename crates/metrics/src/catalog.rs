//! Every metric family podscope exposes, declared once. The name says
//! the unit (`_seconds`, `_bytes`) and a counter ends in `_total`, as
//! Prometheus' conventions have them; the help is what podscoped(8)'s
//! METRICS section says of it (a test holds the page to this list).

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// The word the text format's `# TYPE` line takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Which process counts a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Process {
    /// podscoped.
    Daemon,
    /// podscope-cri: served on its root-only socket, merged by podscoped.
    Cri,
    /// Both, each its own series with the label `process`.
    Both,
}

/// One family: its name, type, help, label names (in order), a
/// histogram's upper bounds, and who counts it.
#[derive(Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    pub labels: &'static [&'static str],
    pub buckets: &'static [f64],
    pub process: Process,
}

/// The `process` label's values (families of `Process::Both`).
pub const PROCESS_DAEMON: &str = "podscoped";
pub const PROCESS_CRI: &str = "podscope-cri";

/// A call answered over a socket or a bus: from half a millisecond (a
/// List from the index) to two minutes (a pod's stop with its timeout).
pub const CALL_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0,
];
/// An image pull: a layer already there to a large image on a slow link.
pub const PULL_SECONDS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
/// One CNI ADD or DEL through the whole chain.
pub const CNI_SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

macro_rules! family {
    ($id:ident, $name:literal, $kind:ident, $process:ident, [$($label:literal),*], $buckets:expr, $help:literal) => {
        pub const $id: Family = Family {
            name: $name,
            kind: Kind::$kind,
            help: $help,
            labels: &[$($label),*],
            buckets: $buckets,
            process: Process::$process,
        };
    };
}

// podscope-cri.
family!(CRI_CALLS, "podscope_cri_calls_total", Counter, Cri, ["method", "code"], &[],
    "CRI calls answered by podscope-cri, by CRI method and gRPC status code (the code's name, as grpc-go spells it: OK, NotFound, DeadlineExceeded; Canceled when the client hung up first).");
family!(CRI_CALL_DURATION, "podscope_cri_call_duration_seconds", Histogram, Cri, ["method"], CALL_SECONDS,
    "Time from a CRI call's arrival to its answer (to the first message of a streaming call), by CRI method.");
family!(CRI_UP, "podscope_cri_up", Gauge, Daemon, [], &[],
    "1 when podscope-cri answered this scrape with its own families, 0 when it is not running (it is socket-activated) or did not answer in time.");

// podscoped: its callers and its callees.
family!(BUS_CALLS, "podscope_bus_calls_total", Counter, Daemon, ["method"], &[],
    "D-Bus method calls to podscoped, counted as they arrive, by method (its name in the interface XML; a name it does not have counts as other).");
family!(BUS_CALL_ERRORS, "podscope_bus_call_errors_total", Counter, Daemon, ["method", "error"], &[],
    "podscoped's method calls answered with an error, by method and error (the D-Bus error name's last part: AccessDenied, NotFound, LimitsExceeded...).");
family!(
    SYSTEMD_CALLS,
    "podscope_systemd_calls_total",
    Counter,
    Daemon,
    ["method"],
    &[],
    "Calls podscoped made to systemd's manager and units, by D-Bus method (a scrape makes none)."
);

// What the node runs.
family!(
    PODS,
    "podscope_pods",
    Gauge,
    Daemon,
    ["state", "handler"],
    &[],
    "Pod sandboxes podscoped has, by state (created, ready, notready) and runtime handler."
);
family!(CONTAINERS, "podscope_containers", Gauge, Daemon, ["state", "handler"], &[],
    "Containers podscoped has, by state (created, running, exited) and their pod's runtime handler.");

// Images.
family!(
    IMAGE_PULLS,
    "podscope_image_pulls_total",
    Counter,
    Daemon,
    ["registry"],
    &[],
    "Image pulls finished, whatever their outcome, by the image's registry."
);
family!(IMAGE_PULL_FAILURES, "podscope_image_pull_failures_total", Counter, Daemon, ["registry", "reason"], &[],
    "Image pulls that failed, by the image's registry and the error's kind (NotFound, RegistryUnavailable, Unauthorized, InvalidArgument...).");
family!(
    IMAGE_PULL_BYTES,
    "podscope_image_pull_bytes_total",
    Counter,
    Daemon,
    ["registry"],
    &[],
    "Compressed bytes of layers fetched by pulls that succeeded, by the image's registry."
);
family!(
    IMAGE_PULL_DURATION,
    "podscope_image_pull_duration_seconds",
    Histogram,
    Daemon,
    ["registry"],
    PULL_SECONDS,
    "Time an image pull took, whatever its outcome, by the image's registry."
);

// Networks.
family!(CNI_DURATION, "podscope_cni_operation_duration_seconds", Histogram, Daemon, ["operation"], CNI_SECONDS,
    "Time a CNI ADD or DEL took through the network's whole plugin chain, by operation (ADD, DEL); failed ones too.");
family!(
    CNI_FAILURES,
    "podscope_cni_operation_failures_total",
    Counter,
    Daemon,
    ["operation"],
    &[],
    "CNI ADDs and DELs that failed, by operation."
);

// Containers' ends.
family!(OOM_KILLS, "podscope_container_oom_kills_total", Counter, Daemon, ["kind"], &[],
    "Containers ended by an out-of-memory kill, by who killed: kernel (the cgroup's OOM killer) or systemd-oomd (memory pressure).");

// Recovery at start.
family!(
    RECOVERY_ORPHANS,
    "podscope_recovery_orphans_stopped",
    Gauge,
    Daemon,
    ["kind"],
    &[],
    "Units found with no record at podscoped's last start and stopped, by kind (pod, container)."
);
family!(RECOVERY_QUARANTINED, "podscope_recovery_records_quarantined", Gauge, Daemon, ["kind"], &[],
    "Records found unreadable at podscoped's last start and moved to quarantine/, by kind (pod, container).");

// Bounds.
family!(
    DESCRIPTORS_RESERVED,
    "podscope_descriptor_budget_reserved",
    Gauge,
    Daemon,
    [],
    &[],
    "File descriptors promised to podscoped's calls in flight (the descriptor budget)."
);
family!(DESCRIPTORS_REFUSALS, "podscope_descriptor_budget_refusals_total", Counter, Daemon, [], &[],
    "Calls podscoped refused before their first step because too few file descriptors were left (LimitsExceeded).");
family!(BUS_GATE_SLOTS, "podscope_bus_gate_slots", Gauge, Both, ["process"], &[],
    "Calls a process may have in flight at once on its bus connection (podscoped: bus_calls_max, to systemd, machined and polkit; podscope-cri: daemon_calls_max, to podscoped, per connection).");
family!(
    BUS_GATE_IN_FLIGHT,
    "podscope_bus_gate_in_flight",
    Gauge,
    Both,
    ["process"],
    &[],
    "Calls in flight through the bus gate now."
);
family!(
    BUS_GATE_PEAK,
    "podscope_bus_gate_peak",
    Gauge,
    Both,
    ["process"],
    &[],
    "The most calls in flight through the bus gate at once since the process started."
);
family!(
    BUS_GATE_WAITS,
    "podscope_bus_gate_waits_total",
    Counter,
    Both,
    ["process"],
    &[],
    "Calls that waited for a slot of the bus gate."
);
family!(
    BUS_GATE_RETRIES,
    "podscope_bus_gate_refusals_retried_total",
    Counter,
    Both,
    ["process"],
    &[],
    "Calls the bus refused (its limit on pending replies) and the gate sent again."
);
family!(BUS_GATE_GAVE_UP, "podscope_bus_gate_gave_up_total", Counter, Both, ["process"], &[],
    "Calls that failed Busy: no slot of the gate by their deadline, or refused by the bus throughout.");

// The processes themselves.
family!(
    PROCESS_RSS,
    "podscope_process_resident_memory_bytes",
    Gauge,
    Both,
    ["process"],
    &[],
    "Resident memory of the process."
);
family!(
    PROCESS_CPU,
    "podscope_process_cpu_seconds_total",
    Counter,
    Both,
    ["process"],
    &[],
    "CPU time the process has used, user and system."
);
family!(
    PROCESS_OPEN_FDS,
    "podscope_process_open_fds",
    Gauge,
    Both,
    ["process"],
    &[],
    "File descriptors the process has open."
);
family!(
    PROCESS_MAX_FDS,
    "podscope_process_max_fds",
    Gauge,
    Both,
    ["process"],
    &[],
    "The process's limit on open file descriptors (its soft RLIMIT_NOFILE)."
);
family!(
    PROCESS_START_TIME,
    "podscope_process_start_time_seconds",
    Gauge,
    Both,
    ["process"],
    &[],
    "When the process started, in seconds since the Unix epoch."
);

/// Every family, in the order the exposition and podscoped(8) list them.
pub const ALL: &[&Family] = &[
    &CRI_CALLS,
    &CRI_CALL_DURATION,
    &CRI_UP,
    &BUS_CALLS,
    &BUS_CALL_ERRORS,
    &SYSTEMD_CALLS,
    &PODS,
    &CONTAINERS,
    &IMAGE_PULLS,
    &IMAGE_PULL_FAILURES,
    &IMAGE_PULL_BYTES,
    &IMAGE_PULL_DURATION,
    &CNI_DURATION,
    &CNI_FAILURES,
    &OOM_KILLS,
    &RECOVERY_ORPHANS,
    &RECOVERY_QUARANTINED,
    &DESCRIPTORS_RESERVED,
    &DESCRIPTORS_REFUSALS,
    &BUS_GATE_SLOTS,
    &BUS_GATE_IN_FLIGHT,
    &BUS_GATE_PEAK,
    &BUS_GATE_WAITS,
    &BUS_GATE_RETRIES,
    &BUS_GATE_GAVE_UP,
    &PROCESS_RSS,
    &PROCESS_CPU,
    &PROCESS_OPEN_FDS,
    &PROCESS_MAX_FDS,
    &PROCESS_START_TIME,
];

/// Prometheus' naming conventions as podscope holds its metric names to
/// them (its own families and the CRI's cAdvisor ones): lower case, digits
/// and `_`, and a counter's name, and only a counter's, ends in `_total`.
pub fn conventional_name(name: &str, counter: bool) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && name.ends_with("_total") == counter
}

/// The family named `name`.
pub fn by_name(name: &str) -> Option<&'static Family> {
    ALL.iter().copied().find(|f| f.name == name)
}

/// The families a process counts (`Both` are everyone's).
pub fn of(process: Process) -> impl Iterator<Item = &'static Family> {
    ALL.iter()
        .copied()
        .filter(move |f| f.process == process || f.process == Process::Both)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prometheus' conventions (metric and label names, units, _total),
    /// and nothing declared twice.
    #[test]
    fn names_follow_the_conventions_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for f in ALL {
            assert!(seen.insert(f.name), "{} twice", f.name);
            assert!(f.name.starts_with("podscope_"), "{}", f.name);
            assert!(
                conventional_name(f.name, f.kind == Kind::Counter),
                "{}: lower case, digits and _; a counter's name, and only a counter's, \
                 ends in _total",
                f.name
            );
            assert_eq!(
                !f.buckets.is_empty(),
                f.kind == Kind::Histogram,
                "{}: buckets are a histogram's",
                f.name
            );
            assert!(f.buckets.windows(2).all(|w| w[0] < w[1]), "{}", f.name);
            for l in f.labels {
                assert!(!l.starts_with("__") && *l != "le", "{}: {l}", f.name);
                assert!(l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
            }
            assert_eq!(
                f.labels.contains(&"process"),
                f.process == Process::Both,
                "{}: the families both processes count, and only those, say which",
                f.name
            );
            assert!(
                f.help.ends_with('.') && !f.help.contains('\n'),
                "{}",
                f.name
            );
            for unit in ["_ms", "_us", "_kb", "_mb", "_milliseconds", "_minutes"] {
                assert!(!f.name.contains(unit), "{}: base units only", f.name);
            }
        }
        assert_eq!(by_name("podscope_pods"), Some(&PODS));
        assert!(of(Process::Cri).any(|f| f.name == PROCESS_RSS.name));
        assert!(!of(Process::Cri).any(|f| f.name == PODS.name));
    }
}
