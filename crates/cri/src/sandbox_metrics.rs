//! The CRI's metrics (KEP-2371): `ListMetricDescriptors` and
//! `ListPodSandboxMetrics`, which kubelet's `PodAndContainerStatsFromCRI`
//! turns into its `/metrics/cadvisor` answer in place of cAdvisor's.
//!
//! kubelet (1.36) asks for the descriptors once, at its start, and makes
//! each one a Prometheus family whose label keys are the descriptor's;
//! at every scrape it asks for the metrics and passes each through as
//! `float64(value)` with its label values, dropping one whose values do
//! not match its keys in number. So:
//!
//! - the families are cAdvisor's names, types and label keys (`FAMILIES`),
//!   with kubelet's own labels (`container`, `id`, `image`, `namespace`,
//!   `pod`: CRI-O's and containerd's set; cAdvisor's `name`, its internal
//!   alias, left out as both have) first, then the family's own (`cpu`,
//!   `interface`);
//! - a value is a whole number (the CRI's `UInt64Value`): seconds are
//!   floored, as CRI-O and containerd do, so a counter in seconds never
//!   runs ahead of the time it counts and stays monotonic;
//! - the pod's own families (its network namespace's interfaces, and where
//!   kubelet gave it a slice of its own the slice's cgroup families, the
//!   whole pod's) are the pod's metrics, with `container` empty as
//!   cAdvisor labels a pod's cgroup; the rest are each running
//!   container's.
//!
//! One call is two bus calls, side by side, whatever the number of pods
//! (the ready pods and the running containers), then one pass over each
//! container's cgroup files (`stats::read_cgroup`, the mounts read once per
//! call) and each pod's `/proc/<init>/net/dev`, off the async workers.

use crate::calls::Cri;
use crate::stats::{self, CgroupSample, InterfaceCounters, Mounts};
use cri_api::v1 as cri;
use podscope_api::container::{ContainerFilter, ContainerSummary};
use podscope_api::domain::container::ContainerState;
use podscope_api::domain::{NetworkMode, State};
use podscope_api::{ListFilter, SandboxSummary};
use std::collections::HashMap;
use tonic::Status;

/// How a family's value behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// One metric family: its name, help, type and the labels it has beyond
/// `BASE_LABELS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub extra: &'static [&'static str],
}

/// The labels every family has, in this order.
pub const BASE_LABELS: [&str; 5] = ["container", "id", "image", "namespace", "pod"];

const fn family(
    name: &'static str,
    help: &'static str,
    kind: Kind,
    extra: &'static [&'static str],
) -> Family {
    Family {
        name,
        help,
        kind,
        extra,
    }
}

use Kind::{Counter, Gauge};

// Each family once, by what it measures; `FAMILIES` lists them all.
const CPU_USAGE: Family = family(
    "container_cpu_usage_seconds_total",
    "Cumulative cpu time consumed in seconds.",
    Counter,
    &["cpu"],
);
const CPU_USER: Family = family(
    "container_cpu_user_seconds_total",
    "Cumulative user cpu time consumed in seconds.",
    Counter,
    &[],
);
const CPU_SYSTEM: Family = family(
    "container_cpu_system_seconds_total",
    "Cumulative system cpu time consumed in seconds.",
    Counter,
    &[],
);
const CFS_PERIODS: Family = family(
    "container_cpu_cfs_periods_total",
    "Number of elapsed enforcement period intervals.",
    Counter,
    &[],
);
const CFS_THROTTLED_PERIODS: Family = family(
    "container_cpu_cfs_throttled_periods_total",
    "Number of throttled period intervals.",
    Counter,
    &[],
);
const CFS_THROTTLED_SECONDS: Family = family(
    "container_cpu_cfs_throttled_seconds_total",
    "Total time duration the container has been throttled.",
    Counter,
    &[],
);
const MEMORY_USAGE: Family = family(
    "container_memory_usage_bytes",
    "Current memory usage in bytes, including all memory regardless of when it was accessed",
    Gauge,
    &[],
);
const MEMORY_WORKING_SET: Family = family(
    "container_memory_working_set_bytes",
    "Current working set in bytes.",
    Gauge,
    &[],
);
const MEMORY_RSS: Family = family("container_memory_rss", "Size of RSS in bytes.", Gauge, &[]);
const MEMORY_CACHE: Family = family(
    "container_memory_cache",
    "Number of bytes of page cache memory.",
    Gauge,
    &[],
);
const MEMORY_MAPPED_FILE: Family = family(
    "container_memory_mapped_file",
    "Size of memory mapped files in bytes.",
    Gauge,
    &[],
);
const MEMORY_SWAP: Family = family(
    "container_memory_swap",
    "Container swap usage in bytes.",
    Gauge,
    &[],
);
const SPEC_MEMORY_LIMIT: Family = family(
    "container_spec_memory_limit_bytes",
    "Memory limit for the container.",
    Gauge,
    &[],
);
const OOM_EVENTS: Family = family(
    "container_oom_events_total",
    "Count of out of memory events observed for the container",
    Counter,
    &[],
);
const PROCESSES: Family = family(
    "container_processes",
    "Number of processes running inside the container.",
    Gauge,
    &[],
);
const THREADS: Family = family(
    "container_threads",
    "Number of threads running inside the container",
    Gauge,
    &[],
);
const FS_USAGE: Family = family(
    "container_fs_usage_bytes",
    "Number of bytes that are consumed by the container on this filesystem.",
    Gauge,
    &[],
);
const START_TIME: Family = family(
    "container_start_time_seconds",
    "Start time of the container since unix epoch in seconds.",
    Gauge,
    &[],
);
const LAST_SEEN: Family = family(
    "container_last_seen",
    "Last time a container was seen by the exporter",
    Gauge,
    &[],
);
const PSI_CPU_STALLED: Family = family(
    "container_pressure_cpu_stalled_seconds_total",
    "Total time duration no tasks in the container could make progress due to CPU congestion.",
    Counter,
    &[],
);
const PSI_CPU_WAITING: Family = family(
    "container_pressure_cpu_waiting_seconds_total",
    "Total time duration tasks in the container have waited due to CPU congestion.",
    Counter,
    &[],
);
const PSI_MEMORY_STALLED: Family = family(
    "container_pressure_memory_stalled_seconds_total",
    "Total time duration no tasks in the container could make progress due to memory congestion.",
    Counter,
    &[],
);
const PSI_MEMORY_WAITING: Family = family(
    "container_pressure_memory_waiting_seconds_total",
    "Total time duration tasks in the container have waited due to memory congestion.",
    Counter,
    &[],
);
const PSI_IO_STALLED: Family = family(
    "container_pressure_io_stalled_seconds_total",
    "Total time duration no tasks in the container could make progress due to IO congestion.",
    Counter,
    &[],
);
const PSI_IO_WAITING: Family = family(
    "container_pressure_io_waiting_seconds_total",
    "Total time duration tasks in the container have waited due to IO congestion.",
    Counter,
    &[],
);
const IFACE: &[&str] = &["interface"];
const NET_RX_BYTES: Family = family(
    "container_network_receive_bytes_total",
    "Cumulative count of bytes received",
    Counter,
    IFACE,
);
const NET_RX_PACKETS: Family = family(
    "container_network_receive_packets_total",
    "Cumulative count of packets received",
    Counter,
    IFACE,
);
const NET_RX_ERRORS: Family = family(
    "container_network_receive_errors_total",
    "Cumulative count of errors encountered while receiving",
    Counter,
    IFACE,
);
const NET_RX_DROPPED: Family = family(
    "container_network_receive_packets_dropped_total",
    "Cumulative count of packets dropped while receiving",
    Counter,
    IFACE,
);
const NET_TX_BYTES: Family = family(
    "container_network_transmit_bytes_total",
    "Cumulative count of bytes transmitted",
    Counter,
    IFACE,
);
const NET_TX_PACKETS: Family = family(
    "container_network_transmit_packets_total",
    "Cumulative count of packets transmitted",
    Counter,
    IFACE,
);
const NET_TX_ERRORS: Family = family(
    "container_network_transmit_errors_total",
    "Cumulative count of errors encountered while transmitting",
    Counter,
    IFACE,
);
const NET_TX_DROPPED: Family = family(
    "container_network_transmit_packets_dropped_total",
    "Cumulative count of packets dropped while transmitting",
    Counter,
    IFACE,
);

/// Every family podscope answers, as ListMetricDescriptors lists them.
pub const FAMILIES: &[Family] = &[
    CPU_USAGE,
    CPU_USER,
    CPU_SYSTEM,
    CFS_PERIODS,
    CFS_THROTTLED_PERIODS,
    CFS_THROTTLED_SECONDS,
    MEMORY_USAGE,
    MEMORY_WORKING_SET,
    MEMORY_RSS,
    MEMORY_CACHE,
    MEMORY_MAPPED_FILE,
    MEMORY_SWAP,
    SPEC_MEMORY_LIMIT,
    OOM_EVENTS,
    PROCESSES,
    THREADS,
    FS_USAGE,
    START_TIME,
    LAST_SEEN,
    PSI_CPU_STALLED,
    PSI_CPU_WAITING,
    PSI_MEMORY_STALLED,
    PSI_MEMORY_WAITING,
    PSI_IO_STALLED,
    PSI_IO_WAITING,
    NET_RX_BYTES,
    NET_RX_PACKETS,
    NET_RX_ERRORS,
    NET_RX_DROPPED,
    NET_TX_BYTES,
    NET_TX_PACKETS,
    NET_TX_ERRORS,
    NET_TX_DROPPED,
];

/// ListMetricDescriptors' answer.
pub fn descriptors() -> Vec<cri::MetricDescriptor> {
    FAMILIES
        .iter()
        .map(|f| cri::MetricDescriptor {
            name: f.name.to_owned(),
            help: f.help.to_owned(),
            label_keys: BASE_LABELS
                .iter()
                .chain(f.extra)
                .map(|k| (*k).to_owned())
                .collect(),
        })
        .collect()
}

/// Whole seconds in `ns` nanoseconds, floored.
pub fn seconds_of_ns(ns: u64) -> u64 {
    ns / 1_000_000_000
}

/// Whole seconds in `us` microseconds, floored.
pub fn seconds_of_us(us: u64) -> u64 {
    us / 1_000_000
}

/// The values of `BASE_LABELS` for one pod or container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub container: String,
    pub id: String,
    pub image: String,
    pub namespace: String,
    pub pod: String,
}

impl Base {
    /// A pod's own series: no container, no image, as cAdvisor labels a
    /// pod's cgroup.
    pub fn pod(d: &SandboxSummary) -> Base {
        Base {
            container: String::new(),
            id: d.id.clone(),
            image: String::new(),
            namespace: d.namespace.clone(),
            pod: d.name.clone(),
        }
    }

    pub fn container(c: &ContainerSummary, d: &SandboxSummary) -> Base {
        Base {
            container: c.name.clone(),
            id: c.id.clone(),
            image: c.image.clone(),
            namespace: d.namespace.clone(),
            pod: d.name.clone(),
        }
    }
}

/// Metrics of one pod or container, each checked against its family.
struct Out<'a> {
    base: &'a Base,
    metrics: Vec<cri::Metric>,
}

impl Out<'_> {
    fn push(&mut self, f: Family, extra: &[&str], value: u64) {
        debug_assert_eq!(f.extra.len(), extra.len(), "{}: label values", f.name);
        let b = self.base;
        let mut label_values = Vec::with_capacity(BASE_LABELS.len() + extra.len());
        label_values.extend(
            [&b.container, &b.id, &b.image, &b.namespace, &b.pod]
                .into_iter()
                .cloned(),
        );
        label_values.extend(extra.iter().map(|v| (*v).to_owned()));
        self.metrics.push(cri::Metric {
            name: f.name.to_owned(),
            // Gathered live: the CRI's 0 ("not cached").
            timestamp: 0,
            metric_type: match f.kind {
                Counter => cri::MetricType::Counter,
                Gauge => cri::MetricType::Gauge,
            } as i32,
            label_values,
            value: Some(cri::UInt64Value { value }),
        });
    }
}

/// What a container's metrics are made of, read before they are made.
pub struct ContainerSample {
    pub cgroup: CgroupSample,
    /// The writable layer's bytes, where it could be measured.
    pub layer: Option<u64>,
    /// µs since the epoch.
    pub created_at: u64,
}

/// A running container's metrics (pure: the sample is taken by the caller).
pub fn container_metrics(base: &Base, s: &ContainerSample, now_s: u64) -> Vec<cri::Metric> {
    let c = &s.cgroup;
    let mut o = Out {
        base,
        metrics: Vec::with_capacity(FAMILIES.len()),
    };
    o.push(CPU_USAGE, &["total"], seconds_of_ns(c.cpu_usage_ns));
    o.push(CPU_USER, &[], seconds_of_ns(c.cpu_user_ns));
    o.push(CPU_SYSTEM, &[], seconds_of_ns(c.cpu_system_ns));
    if let Some(t) = c.throttling {
        o.push(CFS_PERIODS, &[], t.periods);
        o.push(CFS_THROTTLED_PERIODS, &[], t.throttled_periods);
        o.push(CFS_THROTTLED_SECONDS, &[], seconds_of_ns(t.throttled_ns));
    }
    o.push(MEMORY_USAGE, &[], c.memory_usage);
    o.push(MEMORY_WORKING_SET, &[], c.working_set());
    o.push(MEMORY_RSS, &[], c.rss);
    o.push(MEMORY_CACHE, &[], c.memory_cache);
    o.push(MEMORY_MAPPED_FILE, &[], c.mapped_file);
    // 0 where the kernel does not account swap, as cAdvisor says.
    o.push(MEMORY_SWAP, &[], c.swap.map_or(0, |(used, _)| used));
    // 0: no limit, as cAdvisor says.
    o.push(SPEC_MEMORY_LIMIT, &[], c.memory_limit.unwrap_or(0));
    o.push(OOM_EVENTS, &[], c.oom_kills);
    o.push(PROCESSES, &[], c.procs);
    o.push(THREADS, &[], c.processes);
    if let Some(bytes) = s.layer {
        // The writable layer's, as CRI-O reports it (cAdvisor's is per
        // device, which a layer is not).
        o.push(FS_USAGE, &[], bytes);
    }
    o.push(START_TIME, &[], seconds_of_us(s.created_at));
    o.push(LAST_SEEN, &[], now_s);
    // PSI where the kernel keeps it (the cgroup2 directory: v2, or the
    // hybrid layout's unified mount); `full` of CPU 0 before Linux 5.13.
    let p = &c.pressure;
    for (r, stalled, waiting) in [
        (p.cpu, PSI_CPU_STALLED, PSI_CPU_WAITING),
        (p.memory, PSI_MEMORY_STALLED, PSI_MEMORY_WAITING),
        (p.io, PSI_IO_STALLED, PSI_IO_WAITING),
    ] {
        if let Some(r) = r {
            let full = r.full.map_or(0, |f| f.total_us);
            o.push(stalled, &[], seconds_of_us(full));
            o.push(waiting, &[], seconds_of_us(r.some.total_us));
        }
    }
    o.metrics
}

/// A pod's own metrics: its network namespace's interfaces but loopback,
/// as its init sees them.
pub fn pod_metrics(base: &Base, interfaces: &[InterfaceCounters]) -> Vec<cri::Metric> {
    let mut o = Out {
        base,
        metrics: Vec::with_capacity(8 * interfaces.len()),
    };
    for i in interfaces.iter().filter(|i| i.name != "lo") {
        let n = [i.name.as_str()];
        o.push(NET_RX_BYTES, &n, i.rx_bytes);
        o.push(NET_RX_PACKETS, &n, i.rx_packets);
        o.push(NET_RX_ERRORS, &n, i.rx_errors);
        o.push(NET_RX_DROPPED, &n, i.rx_dropped);
        o.push(NET_TX_BYTES, &n, i.tx_bytes);
        o.push(NET_TX_PACKETS, &n, i.tx_packets);
        o.push(NET_TX_ERRORS, &n, i.tx_errors);
        o.push(NET_TX_DROPPED, &n, i.tx_dropped);
    }
    o.metrics
}

/// Every ready pod's metrics and its running containers', from one
/// sample of each; a container whose cgroup is gone (it stopped between
/// the listing and now) has none.
pub fn sample_all(
    pods: &[SandboxSummary],
    containers: &[ContainerSummary],
    now_s: u64,
) -> Vec<cri::PodSandboxMetrics> {
    let mounts = Mounts::read();
    let mut by_pod: HashMap<&str, Vec<&ContainerSummary>> = HashMap::new();
    for c in containers {
        by_pod.entry(c.pod_id.as_str()).or_default().push(c);
    }
    pods.iter()
        .map(|d| {
            let interfaces = if d.network == NetworkMode::Pod && d.init_pid > 0 {
                std::fs::read_to_string(format!("/proc/{}/net/dev", d.init_pid))
                    .map(|t| stats::parse_net_dev(&t))
                    .unwrap_or_default()
            } else {
                // A host-network pod's interfaces are the node's, not its own.
                Vec::new()
            };
            let per_container = by_pod
                .get(d.id.as_str())
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let cgroup = stats::read_cgroup(&mounts, &c.cgroup)?;
                    let sample = ContainerSample {
                        cgroup,
                        layer: podscope_sys::usage::usage_of(std::path::Path::new(&c.upper_dir))
                            .ok()
                            .map(|(bytes, _inodes)| bytes),
                        created_at: c.created_at,
                    };
                    Some(cri::ContainerMetrics {
                        container_id: c.id.clone(),
                        metrics: container_metrics(&Base::container(c, d), &sample, now_s),
                    })
                })
                .collect();
            let base = Base::pod(d);
            let mut metrics = pod_metrics(&base, &interfaces);
            if let Some(slice) = stats::pod_slice_cgroup(&d.cgroup, &d.uid) {
                if let Some(cgroup) = stats::read_cgroup(&mounts, slice) {
                    let sample = ContainerSample {
                        cgroup,
                        layer: None,
                        created_at: d.created_at,
                    };
                    // A pod's processes are its containers' (cAdvisor
                    // counts a slice's own: none).
                    metrics.extend(
                        container_metrics(&base, &sample, now_s)
                            .into_iter()
                            .filter(|m| m.name != PROCESSES.name && m.name != THREADS.name),
                    );
                }
            }
            cri::PodSandboxMetrics {
                pod_sandbox_id: d.id.clone(),
                metrics,
                container_metrics: per_container,
            }
        })
        .collect()
}

impl Cri {
    /// ListPodSandboxMetrics: the ready pods and the running containers
    /// asked for side by side (one round trip's wait), then sampled off
    /// the async workers.
    pub(crate) async fn pod_sandbox_metrics(&self) -> Result<Vec<cri::PodSandboxMetrics>, Status> {
        let pods_filter = ListFilter {
            state: Some(State::Ready),
            ..Default::default()
        };
        let containers_filter = ContainerFilter {
            state: Some(ContainerState::Running),
            ..Default::default()
        };
        let (pf, cf) = (&pods_filter, &containers_filter);
        let (pods, containers) = tokio::try_join!(
            self.daemon.rpc(|m| async move { m.list(pf).await }),
            self.daemon
                .rpc(|m| async move { m.list_containers(cf).await }),
        )?;
        let now_s = u64::try_from(crate::calls::now_ns()).unwrap_or(0) / 1_000_000_000;
        tokio::task::spawn_blocking(move || sample_all(&pods, &containers, now_s))
            .await
            .map_err(|e| Status::internal(format!("ListPodSandboxMetrics: sampling failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pressure::{Pressure, Resource, Stall};
    use std::collections::HashSet;

    #[test]
    fn every_family_is_named_as_prometheus_wants_once() {
        let mut seen = HashSet::new();
        for f in FAMILIES {
            assert!(seen.insert(f.name), "{} twice", f.name);
            assert!(f.name.starts_with("container_"), "{}", f.name);
            // Counters end in _total; seconds and bytes say so.
            assert!(
                podscope_metrics::catalog::conventional_name(f.name, f.kind == Counter),
                "{}",
                f.name
            );
            assert!(!f.help.is_empty(), "{}", f.name);
        }
        let d = descriptors();
        assert_eq!(d.len(), FAMILIES.len());
        let cpu = d
            .iter()
            .find(|d| d.name == "container_cpu_usage_seconds_total")
            .unwrap();
        assert_eq!(
            cpu.label_keys,
            ["container", "id", "image", "namespace", "pod", "cpu"]
        );
        let rx = d
            .iter()
            .find(|d| d.name == "container_network_receive_bytes_total")
            .unwrap();
        assert_eq!(rx.label_keys.last().unwrap(), "interface");
    }

    #[test]
    fn seconds_are_floored() {
        assert_eq!(seconds_of_ns(0), 0);
        assert_eq!(seconds_of_ns(999_999_999), 0);
        assert_eq!(seconds_of_ns(1_000_000_000), 1);
        assert_eq!(seconds_of_ns(2_500_000_000), 2);
        assert_eq!(seconds_of_us(1_999_999), 1);
        assert_eq!(seconds_of_us(u64::MAX), u64::MAX / 1_000_000);
    }

    fn keys_of(name: &str) -> Vec<String> {
        descriptors()
            .into_iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name}: no descriptor"))
            .label_keys
    }

    fn base() -> Base {
        Base {
            container: "app".into(),
            id: "c1".into(),
            image: "busybox".into(),
            namespace: "ns".into(),
            pod: "web".into(),
        }
    }

    #[test]
    fn a_containers_metrics_match_their_descriptors() {
        let stall = |us| Stall {
            total_us: us,
            ..Default::default()
        };
        let s = ContainerSample {
            cgroup: CgroupSample {
                cpu_usage_ns: 3_700_000_000,
                cpu_user_ns: 2_100_000_000,
                cpu_system_ns: 1_600_000_000,
                throttling: Some(stats::Throttling {
                    periods: 10,
                    throttled_periods: 4,
                    throttled_ns: 1_200_000_000,
                }),
                memory_usage: 100 << 20,
                memory_inactive_file: 30 << 20,
                memory_limit: Some(256 << 20),
                rss: 60 << 20,
                memory_cache: 35 << 20,
                processes: 7,
                procs: 2,
                oom_kills: 1,
                pressure: Pressure {
                    cpu: Some(Resource {
                        some: stall(4_000_000),
                        full: None,
                    }),
                    memory: None,
                    io: Some(Resource {
                        some: stall(2_500_000),
                        full: Some(stall(1_000_000)),
                    }),
                },
                ..Default::default()
            },
            layer: Some(4096),
            created_at: 1_700_000_000_123_456,
        };
        let m = container_metrics(&base(), &s, 1_700_000_100);
        let value = |name: &str| {
            let x: Vec<&cri::Metric> = m.iter().filter(|x| x.name == name).collect();
            assert_eq!(x.len(), 1, "{name}: {x:?}");
            x[0].value.as_ref().unwrap().value
        };
        for x in &m {
            assert_eq!(x.label_values.len(), keys_of(&x.name).len(), "{}", x.name);
            assert_eq!(x.label_values[..5], ["app", "c1", "busybox", "ns", "web"]);
            assert_eq!(x.timestamp, 0);
        }
        assert_eq!(value("container_cpu_usage_seconds_total"), 3);
        let cpu = m
            .iter()
            .find(|x| x.name == "container_cpu_usage_seconds_total")
            .unwrap();
        assert_eq!(cpu.label_values[5], "total");
        assert_eq!(cpu.metric_type, cri::MetricType::Counter as i32);
        assert_eq!(value("container_cpu_user_seconds_total"), 2);
        assert_eq!(value("container_cpu_cfs_throttled_periods_total"), 4);
        assert_eq!(value("container_cpu_cfs_throttled_seconds_total"), 1);
        assert_eq!(value("container_memory_working_set_bytes"), 70 << 20);
        assert_eq!(value("container_memory_rss"), 60 << 20);
        assert_eq!(value("container_spec_memory_limit_bytes"), 256 << 20);
        assert_eq!(value("container_memory_swap"), 0);
        assert_eq!(value("container_processes"), 2);
        assert_eq!(value("container_threads"), 7);
        assert_eq!(value("container_oom_events_total"), 1);
        assert_eq!(value("container_fs_usage_bytes"), 4096);
        assert_eq!(value("container_start_time_seconds"), 1_700_000_000);
        assert_eq!(value("container_last_seen"), 1_700_000_100);
        // CPU pressure without `full` (before Linux 5.13): stalled 0.
        assert_eq!(value("container_pressure_cpu_waiting_seconds_total"), 4);
        assert_eq!(value("container_pressure_cpu_stalled_seconds_total"), 0);
        assert_eq!(value("container_pressure_io_stalled_seconds_total"), 1);
        // No memory pressure file: no memory pressure family.
        assert!(!m
            .iter()
            .any(|x| x.name.starts_with("container_pressure_memory")));
        let ws = m
            .iter()
            .find(|x| x.name == "container_memory_working_set_bytes")
            .unwrap();
        assert_eq!(ws.metric_type, cri::MetricType::Gauge as i32);
    }

    #[test]
    fn no_cpu_controller_no_throttling_families() {
        let s = ContainerSample {
            cgroup: CgroupSample::default(),
            layer: None,
            created_at: 0,
        };
        let m = container_metrics(&base(), &s, 0);
        assert!(!m.iter().any(|x| x.name.contains("cfs")));
        assert!(!m.iter().any(|x| x.name.starts_with("container_fs_")));
    }

    #[test]
    fn a_pods_network_is_per_interface_without_loopback() {
        let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:     140       2    0    0    0     0          0         0      140       2    0    0    0     0       0          0\n  eth0:    1500      12    3    4    0     0          0         0      900       8    1    2    0     0       0          0\n  net1:      10       1    0    0    0     0          0         0       20       2    0    0    0     0       0          0\n";
        let mut b = base();
        b.container.clear();
        b.image.clear();
        let m = pod_metrics(&b, &stats::parse_net_dev(text));
        assert_eq!(m.len(), 16, "8 families, 2 interfaces");
        for x in &m {
            assert_eq!(x.label_values.len(), keys_of(&x.name).len(), "{}", x.name);
            assert_eq!(x.label_values[0], "", "a pod's series has no container");
        }
        let get = |name: &str, iface: &str| {
            m.iter()
                .find(|x| x.name == name && x.label_values[5] == iface)
                .unwrap()
                .value
                .as_ref()
                .unwrap()
                .value
        };
        assert_eq!(get("container_network_receive_bytes_total", "eth0"), 1500);
        assert_eq!(get("container_network_receive_packets_total", "eth0"), 12);
        assert_eq!(
            get("container_network_receive_packets_dropped_total", "eth0"),
            4
        );
        assert_eq!(
            get("container_network_transmit_packets_dropped_total", "eth0"),
            2
        );
        assert_eq!(get("container_network_transmit_bytes_total", "net1"), 20);
    }
}
