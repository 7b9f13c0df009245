//! Pod stats for PodSandboxStats: CPU and memory from the scope's cgroup
//! (cgroups-rs, v1 and v2 alike), pressure (PSI) from its cgroup2
//! directory (pressure.rs), process count from its pids controller,
//! interface counters from the pod's network namespace as its init sees it
//! (`/proc/<pid>/net/dev`).

use super::pressure;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::cpuacct::CpuAcctController;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::pid::PidController;
use cgroups_rs::fs::{hierarchies, Cgroup, Hierarchy, Subsystem};
use cri_api::v1 as cri;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

fn u64v(value: u64) -> Option<cri::UInt64Value> {
    Some(cri::UInt64Value { value })
}

/// What one sample of a pod's cgroup says.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CgroupSample {
    pub cpu_usage_ns: u64,
    pub memory_usage: u64,
    pub memory_inactive_file: u64,
    pub memory_limit: Option<u64>,
    pub rss: u64,
    pub page_faults: u64,
    pub major_page_faults: u64,
    pub processes: u64,
    pub pressure: pressure::Pressure,
    /// Swap in use, and its limit (None: none), where the kernel accounts
    /// it (v2's memory.swap.*, v1's memsw less memory).
    pub swap: Option<(u64, Option<u64>)>,
    /// CPU in user and kernel mode, ns (v2's and the hybrid layout's
    /// `cpu.stat`; v1's `cpuacct.stat`, in ticks of USER_HZ).
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    /// CFS bandwidth: periods, throttled periods, throttled ns; None
    /// where the cgroup has no cpu controller.
    pub throttling: Option<Throttling>,
    /// Page cache and memory-mapped files, bytes.
    pub memory_cache: u64,
    pub mapped_file: u64,
    /// OOM kills inside the cgroup (v2's `memory.events`, v1's
    /// `memory.oom_control`).
    pub oom_kills: u64,
    /// Processes (not threads: `processes` is the pids controller's
    /// count of tasks) in the cgroup itself (its cgroup2 directory).
    pub procs: u64,
}

/// CFS bandwidth control's counters, from the cpu controller's `cpu.stat`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Throttling {
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_ns: u64,
}

/// One `key value` line of a flat keyed file (`cpu.stat`,
/// `memory.events`, `cpuacct.stat`).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// User and kernel CPU from a v2 `cpu.stat`, ns.
fn v2_cpu_modes_ns(cpu_stat: &str) -> (u64, u64) {
    let ns = |k| keyed(cpu_stat, k).unwrap_or(0).saturating_mul(1000);
    (ns("user_usec"), ns("system_usec"))
}

/// Throttling from a `cpu.stat`: v2 counts µs (`throttled_usec`), v1 ns
/// (`throttled_time`); None without `nr_periods` (no cpu controller).
pub fn parse_throttling(cpu_stat: &str) -> Option<Throttling> {
    Some(Throttling {
        periods: keyed(cpu_stat, "nr_periods")?,
        throttled_periods: keyed(cpu_stat, "nr_throttled").unwrap_or(0),
        throttled_ns: keyed(cpu_stat, "throttled_usec")
            .map(|us| us.saturating_mul(1000))
            .or_else(|| keyed(cpu_stat, "throttled_time"))
            .unwrap_or(0),
    })
}

/// USER_HZ: the unit of v1's `cpuacct.stat`.
fn user_hz() -> u64 {
    // SAFETY: sysconf reads a constant of the C library.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

impl CgroupSample {
    /// Kubelet's working set: usage less the inactive file cache it can
    /// reclaim without pressure.
    pub fn working_set(&self) -> u64 {
        self.memory_usage.saturating_sub(self.memory_inactive_file)
    }
}

/// `usage_usec` from a v2 `cpu.stat`, in ns.
fn v2_cpu_usage_ns(cpu_stat: &str) -> u64 {
    cpu_stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |us| us.saturating_mul(1000))
}

/// Where the hybrid layout mounts cgroup2.
const HYBRID_UNIFIED: &str = "/sys/fs/cgroup/unified";

/// The machine's cgroup mounts, read once per stats request:
/// `hierarchies::auto()` parses /proc/self/mountinfo every time, which a
/// ListPodSandboxStats of a thousand pods would otherwise do a thousand
/// times.
#[derive(Debug, Clone)]
pub struct Mounts {
    v2: bool,
    root: PathBuf,
    subsystems: Vec<Subsystem>,
}

impl Mounts {
    pub fn read() -> Self {
        let h = hierarchies::auto();
        Mounts {
            v2: h.v2(),
            root: h.root(),
            subsystems: h.subsystems(),
        }
    }
}

impl Hierarchy for Mounts {
    fn subsystems(&self) -> Vec<Subsystem> {
        self.subsystems.clone()
    }
    fn root(&self) -> PathBuf {
        self.root.clone()
    }
    fn root_control_group(&self) -> Cgroup {
        Cgroup::load(Box::new(self.clone()), "")
    }
    fn parent_control_group(&self, path: &str) -> Cgroup {
        let parent = Path::new(path).parent().unwrap_or(Path::new(""));
        Cgroup::load(Box::new(self.clone()), parent)
    }
    fn v2(&self) -> bool {
        self.v2
    }
}

/// v2's `memory.swap.current` and `memory.swap.max` ("max": no limit;
/// kubelet's NoSwap writes 0). None where swap is not accounted.
fn v2_swap(dir: &Path) -> Option<(u64, Option<u64>)> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let usage = read("memory.swap.current")?.trim().parse().ok()?;
    let limit = read("memory.swap.max").and_then(|m| m.trim().parse().ok());
    Some((usage, limit))
}

/// The CRI's swap figures: in use, and what is left under the limit.
pub fn swap_usage(s: &CgroupSample, timestamp: i64) -> Option<cri::SwapUsage> {
    let (usage, limit) = s.swap?;
    Some(cri::SwapUsage {
        timestamp,
        swap_usage_bytes: u64v(usage),
        swap_available_bytes: limit.and_then(|l| u64v(l.saturating_sub(usage))),
    })
}

/// Read the control group at `path` (below the hierarchy's root, as the
/// daemon reports it); None when it is gone.
pub fn read_cgroup(mounts: &Mounts, path: &str) -> Option<CgroupSample> {
    let cg = Cgroup::load(Box::new(mounts.clone()), path.trim_start_matches('/'));
    if !cg.exists() {
        return None;
    }
    let mut s = CgroupSample::default();
    // PSI lives in the cgroup2 directory: the hierarchy itself on v2, the
    // hybrid layout's unified mount beside the v1 controllers.
    let unified = if cg.v2() {
        mounts.root.join(path.trim_start_matches('/'))
    } else {
        Path::new(HYBRID_UNIFIED).join(path.trim_start_matches('/'))
    };
    s.pressure = pressure::read(&unified);
    s.procs = count_procs(&unified);
    if cg.v2() {
        if let Some(cpu) = cg.controller_of::<CpuController>() {
            let stat = cpu.cpu().stat;
            s.cpu_usage_ns = v2_cpu_usage_ns(&stat);
            (s.cpu_user_ns, s.cpu_system_ns) = v2_cpu_modes_ns(&stat);
            s.throttling = parse_throttling(&stat);
        }
    } else {
        if let Ok(stat) = std::fs::read_to_string(format!("{HYBRID_UNIFIED}{path}/cpu.stat")) {
            // Hybrid layout: cgroup2's cpu.stat has usage whatever
            // controllers are enabled, while systemd does not always
            // realise the v1 cpuacct cgroup (it does not when cpu and
            // cpuacct are mounted apart).
            s.cpu_usage_ns = v2_cpu_usage_ns(&stat);
            (s.cpu_user_ns, s.cpu_system_ns) = v2_cpu_modes_ns(&stat);
        } else if let Some(acct) = cg.controller_of::<CpuAcctController>() {
            let a = acct.cpuacct();
            s.cpu_usage_ns = a.usage;
            let tick = 1_000_000_000 / user_hz();
            s.cpu_user_ns = keyed(&a.stat, "user").unwrap_or(0).saturating_mul(tick);
            s.cpu_system_ns = keyed(&a.stat, "system").unwrap_or(0).saturating_mul(tick);
        }
        // v1's bandwidth counters live in the cpu controller's own cpu.stat.
        if let Some(cpu) = cg.controller_of::<CpuController>() {
            s.throttling = parse_throttling(&cpu.cpu().stat);
        }
    }
    if let Some(mem) = cg.controller_of::<MemController>() {
        let m = mem.memory_stat();
        s.memory_usage = m.usage_in_bytes;
        let raw = &m.stat.raw;
        let get = |k: &str| raw.get(k).copied().unwrap_or(0);
        if cg.v2() {
            s.memory_inactive_file = get("inactive_file");
            s.rss = get("anon");
            s.page_faults = get("pgfault");
            s.major_page_faults = get("pgmajfault");
            s.memory_cache = get("file");
            s.mapped_file = get("file_mapped");
            s.oom_kills = std::fs::read_to_string(unified.join("memory.events"))
                .ok()
                .and_then(|t| keyed(&t, "oom_kill"))
                .unwrap_or(0);
        } else {
            s.memory_inactive_file = get("total_inactive_file");
            s.rss = get("total_rss");
            s.page_faults = get("total_pgfault");
            s.major_page_faults = get("total_pgmajfault");
            s.memory_cache = get("total_cache");
            s.mapped_file = get("total_mapped_file");
            s.oom_kills = m.oom_control.oom_kill;
        }
        // v1 reports "no limit" as a huge page-rounded number, v2 as max.
        s.memory_limit = u64::try_from(m.limit_in_bytes)
            .ok()
            .filter(|&l| l > 0 && l < (1 << 62));
        s.swap = if cg.v2() {
            v2_swap(&unified)
        } else {
            // memsw counts memory and swap together; absent (0) without
            // swap accounting.
            let sw = mem.memswap();
            (sw.usage_in_bytes > 0).then(|| {
                let limit = u64::try_from(sw.limit_in_bytes)
                    .ok()
                    .filter(|&l| l > 0 && l < (1 << 62))
                    .zip(s.memory_limit)
                    .map(|(both, mem)| both.saturating_sub(mem));
                (sw.usage_in_bytes.saturating_sub(s.memory_usage), limit)
            })
        };
    }
    if let Some(pids) = cg.controller_of::<PidController>() {
        s.processes = pids.get_pid_current().unwrap_or(0);
    }
    Some(s)
}

/// Lines of the cgroup2 directory's `cgroup.procs`: the processes in
/// the cgroup itself, as cAdvisor counts them (a container's are in its
/// unit's cgroup; a slice has none of its own).
fn count_procs(dir: &Path) -> u64 {
    std::fs::read(dir.join("cgroup.procs"))
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .unwrap_or(0)
}

/// One interface's counters from `/proc/<pid>/net/dev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// Parse `/proc/net/dev` (two header lines, then `name: 16 counters`).
pub fn parse_net_dev(text: &str) -> Vec<InterfaceCounters> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let n: Vec<u64> = rest
                .split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect();
            (n.len() >= 16).then(|| InterfaceCounters {
                name: name.trim().to_owned(),
                rx_bytes: n[0],
                rx_packets: n[1],
                rx_errors: n[2],
                rx_dropped: n[3],
                tx_bytes: n[8],
                tx_packets: n[9],
                tx_errors: n[10],
                tx_dropped: n[11],
            })
        })
        .collect()
}

fn network_usage(init_pid: u32, timestamp: i64) -> Option<cri::NetworkUsage> {
    let text = std::fs::read_to_string(format!("/proc/{init_pid}/net/dev")).ok()?;
    let usage = |c: &InterfaceCounters| cri::NetworkInterfaceUsage {
        name: c.name.clone(),
        rx_bytes: u64v(c.rx_bytes),
        rx_errors: u64v(c.rx_errors),
        tx_bytes: u64v(c.tx_bytes),
        tx_errors: u64v(c.tx_errors),
    };
    let ifaces: Vec<InterfaceCounters> = parse_net_dev(&text)
        .into_iter()
        .filter(|c| c.name != "lo")
        .collect();
    // CNI's convention: the pod's interface is eth0.
    let default = ifaces
        .iter()
        .find(|c| c.name == "eth0")
        .or_else(|| ifaces.first());
    Some(cri::NetworkUsage {
        timestamp,
        default_interface: default.map(usage),
        interfaces: ifaces.iter().map(usage).collect(),
    })
}

/// The previous CPU sample per pod, for `usage_nano_cores` (a rate). Only
/// a cache: after a restart the first answer just lacks the rate.
#[derive(Default)]
pub struct CpuRates(Mutex<HashMap<String, (i64, u64)>>);

impl CpuRates {
    pub fn rate(&self, id: &str, timestamp: i64, usage_ns: u64) -> Option<u64> {
        let mut m = self.0.lock().unwrap();
        let prev = m.insert(id.to_owned(), (timestamp, usage_ns));
        let (t0, u0) = prev?;
        let dt = u64::try_from(timestamp - t0).ok().filter(|&d| d > 0)?;
        let du = usage_ns.checked_sub(u0)?;
        Some((du as u128 * 1_000_000_000 / dt as u128) as u64)
    }

    /// Forget pods that are no longer listed.
    pub fn retain(&self, ids: &std::collections::HashSet<String>) {
        self.0.lock().unwrap().retain(|k, _| ids.contains(k));
    }
}

/// The control group that holds all of a pod, its init and its
/// containers: kubelet's pod slice (`kubepods-<qos>-pod<uid>.slice`, the
/// uid's `-` as `_`, or `pod<uid>` in a cgroupfs parent's name), in which
/// podscope puts the pod's scope and its containers' units; a pod in a
/// slice it shares (no cgroup parent: podscope's default) has only its
/// scope, which holds its init alone. None then.
pub fn pod_slice_cgroup<'a>(scope_cgroup: &'a str, uid: &str) -> Option<&'a str> {
    if uid.is_empty() {
        return None;
    }
    let (slice, _scope) = scope_cgroup.rsplit_once('/')?;
    let name = slice.rsplit('/').next()?;
    let own = name.ends_with(".slice")
        && (name.contains(&format!("pod{}", uid.replace('-', "_")))
            || name.contains(&format!("pod{uid}")));
    own.then_some(slice)
}

pub struct PodRef<'a> {
    pub id: &'a str,
    /// The scope's control group, from Status or List.
    pub cgroup: &'a str,
    pub init_pid: u32,
    pub pod_network: bool,
}

/// The Linux part of a pod's stats; None when its cgroup is gone.
pub fn linux_stats(
    mounts: &Mounts,
    pod: &PodRef<'_>,
    rates: &CpuRates,
    timestamp: i64,
) -> Option<cri::LinuxPodSandboxStats> {
    let s = read_cgroup(mounts, pod.cgroup)?;
    let working_set = s.working_set();
    Some(cri::LinuxPodSandboxStats {
        cpu: Some(cri::CpuUsage {
            timestamp,
            usage_core_nano_seconds: u64v(s.cpu_usage_ns),
            usage_nano_cores: rates.rate(pod.id, timestamp, s.cpu_usage_ns).and_then(u64v),
            psi: pressure::to_cri(s.pressure.cpu),
        }),
        memory: Some(cri::MemoryUsage {
            timestamp,
            working_set_bytes: u64v(working_set),
            available_bytes: s
                .memory_limit
                .map(|l| l.saturating_sub(working_set))
                .and_then(u64v),
            usage_bytes: u64v(s.memory_usage),
            rss_bytes: u64v(s.rss),
            page_faults: u64v(s.page_faults),
            major_page_faults: u64v(s.major_page_faults),
            psi: pressure::to_cri(s.pressure.memory),
        }),
        io: pressure::io_usage(&s.pressure, timestamp),
        network: if pod.pod_network && pod.init_pid > 0 {
            network_usage(pod.init_pid, timestamp)
        } else {
            None
        },
        process: Some(cri::ProcessUsage {
            timestamp,
            process_count: u64v(s.processes),
        }),
        containers: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_on_v2_reads_usage_and_limit() {
        let dir = podscope_test_support::TempDir::new();
        assert_eq!(v2_swap(&dir.0), None, "not accounted");
        std::fs::write(dir.0.join("memory.swap.current"), "4096\n").unwrap();
        std::fs::write(dir.0.join("memory.swap.max"), "max\n").unwrap();
        assert_eq!(v2_swap(&dir.0), Some((4096, None)));
        // kubelet's NoSwap.
        std::fs::write(dir.0.join("memory.swap.max"), "0\n").unwrap();
        assert_eq!(v2_swap(&dir.0), Some((4096, Some(0))));
        let s = CgroupSample {
            swap: Some((4096, Some(1 << 20))),
            ..Default::default()
        };
        let u = swap_usage(&s, 7).unwrap();
        assert_eq!(u.swap_usage_bytes.unwrap().value, 4096);
        assert_eq!(u.swap_available_bytes.unwrap().value, (1 << 20) - 4096);
    }

    #[test]
    fn net_dev_is_parsed() {
        let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:     140       2    0    0    0     0          0         0      140       2    0    0    0     0       0          0\n  eth0:    1500      12    3    0    0     0          0         0      900       8    1    0    0     0       0          0\n";
        let c = parse_net_dev(text);
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[1],
            InterfaceCounters {
                name: "eth0".into(),
                rx_bytes: 1500,
                rx_packets: 12,
                rx_errors: 3,
                rx_dropped: 0,
                tx_bytes: 900,
                tx_packets: 8,
                tx_errors: 1,
                tx_dropped: 0,
            }
        );
    }

    #[test]
    fn cpu_rate_needs_two_samples() {
        let r = CpuRates::default();
        assert_eq!(r.rate("a", 1_000_000_000, 5_000), None);
        // 0.5 s of CPU over 1 s: half a core.
        assert_eq!(r.rate("a", 2_000_000_000, 500_005_000), Some(500_000_000));
        r.retain(&Default::default());
        assert_eq!(r.rate("a", 3_000_000_000, 600_000_000), None);
    }

    #[test]
    fn throttling_from_v1_and_v2_cpu_stat() {
        let v2 = "usage_usec 10\nuser_usec 7\nsystem_usec 3\nnr_periods 40\nnr_throttled 5\nthrottled_usec 2500\n";
        assert_eq!(
            parse_throttling(v2),
            Some(Throttling {
                periods: 40,
                throttled_periods: 5,
                throttled_ns: 2_500_000
            })
        );
        assert_eq!(v2_cpu_modes_ns(v2), (7000, 3000));
        let v1 = "nr_periods 9\nnr_throttled 2\nthrottled_time 123456\n";
        assert_eq!(parse_throttling(v1).unwrap().throttled_ns, 123456);
        // The hybrid layout's unified cpu.stat: no cpu controller there.
        assert_eq!(parse_throttling("usage_usec 1\nuser_usec 1\n"), None);
        assert_eq!(keyed("oom 1\noom_kill 4\n", "oom_kill"), Some(4));
        assert_eq!(keyed("oom_kill x\n", "oom_kill"), None);
    }

    #[test]
    fn a_pods_own_slice_is_kubelets() {
        let uid = "3d0b0385-7742-43b1-17a1-7e70b04d34e4";
        let scope = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3d0b0385_7742_43b1_17a1_7e70b04d34e4.slice/podscope-abc.scope";
        assert_eq!(
            pod_slice_cgroup(scope, uid),
            Some("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3d0b0385_7742_43b1_17a1_7e70b04d34e4.slice")
        );
        // A static pod's uid has no dashes.
        let scope = "/kubepods.slice/kubepods-podabc123.slice/podscope-1.scope";
        assert_eq!(
            pod_slice_cgroup(scope, "abc123"),
            Some("/kubepods.slice/kubepods-podabc123.slice")
        );
        // podscope's default slice is every pod's.
        assert_eq!(
            pod_slice_cgroup("/podscope.slice/podscope-1.scope", "abc123"),
            None
        );
        assert_eq!(
            pod_slice_cgroup(
                "/kubepods.slice/kubepods-podabc123.slice/podscope-1.scope",
                ""
            ),
            None
        );
        assert_eq!(
            pod_slice_cgroup(
                "/kubepods.slice/kubepods-podother.slice/podscope-1.scope",
                "abc123"
            ),
            None
        );
    }

    #[test]
    fn v2_usage_and_working_set() {
        assert_eq!(
            v2_cpu_usage_ns("usage_usec 1234\nuser_usec 1000\n"),
            1_234_000
        );
        let s = CgroupSample {
            memory_usage: 100,
            memory_inactive_file: 30,
            ..Default::default()
        };
        assert_eq!(s.working_set(), 70);
    }
}
