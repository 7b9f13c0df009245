//! `LinuxContainerResources.unified`: cgroup v2 files by name, as kubelet
//! sends them on a v2 node (`memory.oom.group=1` for every container,
//! `memory.swap.max` for swap, `memory.min`/`memory.high` for MemoryQoS)
//! and as a pod spec may carry them.
//!
//! A key systemd manages for the unit (memory.min/low/high/max,
//! memory.swap.max, pids.max, cpu.weight, cpu.max, cpuset.cpus/mems) is
//! its unit property (MemoryHigh=, ...): written as a file, systemd would
//! put its own value back the next time it applies the unit's cgroup
//! settings (any SetUnitProperties), and `systemctl show` would not tell.
//! Every other key is written to the file in the container's cgroup, after
//! the runtime has created the container and before its process runs the
//! command (runc's own cgroup manager writes them at the same point).
//! A value a unit property cannot take, or a key of no controller this
//! node enables, is refused at CreateContainer; a value the kernel
//! refuses, at StartContainer or UpdateContainerResources, with the key
//! and the kernel's word.

use crate::systemd::Prop;
use podscope_api::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// systemd's "infinity" for the memory and tasks properties.
const INFINITY: u64 = u64::MAX;

/// What `unified` becomes: unit properties, and files to write.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub properties: Vec<(&'static str, Prop)>,
    pub files: Vec<(String, String)>,
}

fn refused(key: &str, value: &str, why: impl std::fmt::Display) -> Error {
    Error::invalid(
        &format!("resources.unified[{key:?}]"),
        format!("{value:?}: {why}"),
    )
}

/// Bytes or "max".
fn bytes(key: &str, value: &str) -> Result<u64> {
    let v = value.trim();
    if v == "max" {
        return Ok(INFINITY);
    }
    v.parse::<u64>()
        .map_err(|_| refused(key, value, "not a number of bytes or \"max\""))
}

/// Split `unified` into unit properties and files. Pure: no system is
/// asked (`check_keys` does that).
pub fn plan(unified: &BTreeMap<String, String>) -> Result<Plan> {
    let mut p = Plan::default();
    for (key, value) in unified {
        let prop = |name: &'static str, v: u64| (name, Prop::U64(v));
        match key.as_str() {
            "memory.min" => p.properties.push(prop("MemoryMin", bytes(key, value)?)),
            "memory.low" => p.properties.push(prop("MemoryLow", bytes(key, value)?)),
            "memory.high" => p.properties.push(prop("MemoryHigh", bytes(key, value)?)),
            "memory.max" => p.properties.push(prop("MemoryMax", bytes(key, value)?)),
            "memory.swap.max" => p.properties.push(prop("MemorySwapMax", bytes(key, value)?)),
            "pids.max" => p.properties.push(prop("TasksMax", bytes(key, value)?)),
            "cpu.weight" => {
                let w = value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|w| (1..=10000).contains(w))
                    .ok_or_else(|| refused(key, value, "not a weight in 1..=10000"))?;
                p.properties.push(prop("CPUWeight", w));
            }
            "cpu.max" => {
                // "QUOTA PERIOD" or "max PERIOD", the period optional.
                let mut it = value.split_whitespace();
                let quota = it.next().unwrap_or("");
                let period = match it.next() {
                    Some(s) => s.parse::<u64>().ok().filter(|p| *p > 0),
                    None => Some(100_000),
                };
                let (Some(period), None) = (period, it.next()) else {
                    return Err(refused(
                        key,
                        value,
                        "not \"QUOTA PERIOD\" or \"max PERIOD\"",
                    ));
                };
                let per_sec = if quota == "max" {
                    INFINITY
                } else {
                    let q = quota
                        .parse::<u64>()
                        .ok()
                        .filter(|q| *q > 0)
                        .ok_or_else(|| {
                            refused(key, value, "the quota is not a number or \"max\"")
                        })?;
                    q.saturating_mul(1_000_000) / period
                };
                p.properties.push(prop("CPUQuotaPerSecUSec", per_sec));
                p.properties.push(prop("CPUQuotaPeriodUSec", period));
            }
            "cpuset.cpus" | "cpuset.mems" => {
                let mask = super::unit::cpu_mask(value)
                    .ok_or_else(|| refused(key, value, "not a list like \"0-3,5\""))?;
                let name = if key == "cpuset.cpus" {
                    "AllowedCPUs"
                } else {
                    "AllowedMemoryNodes"
                };
                p.properties.push((name, Prop::Bytes(mask)));
            }
            _ => p.files.push((key.clone(), value.clone())),
        }
    }
    Ok(p)
}

/// `limits` with `unified`'s properties put over them: a key in
/// `unified` wins over the structured field it overlaps (as runc does).
pub fn merged(mut limits: Vec<(&'static str, Prop)>, unified: &Plan) -> Vec<(&'static str, Prop)> {
    limits.retain(|(k, _)| !unified.properties.iter().any(|(u, _)| u == k));
    limits.extend(unified.properties.iter().cloned());
    limits
}

/// Whether the keys can be written on this node, asked of the cgroup
/// hierarchy at `cgroup_root` (/sys/fs/cgroup): it must be cgroup v2 (on
/// a v1 node the kernel has no such files; kubelet sends none there), a
/// key must name a controller the node enables (its root's
/// cgroup.controllers), and never `cgroup.*` (the cgroup's own
/// membership and mode, systemd's).
pub fn check_keys(unified: &BTreeMap<String, String>, cgroup_root: &Path) -> Result<()> {
    if unified.is_empty() {
        return Ok(());
    }
    let controllers = match std::fs::read_to_string(cgroup_root.join("cgroup.controllers")) {
        Ok(c) => c,
        Err(_) => {
            return Err(Error::invalid(
                "resources.unified",
                format!(
                    "this node's cgroups are v1 ({} is not the cgroup v2 hierarchy); unified keys ({}) need cgroup v2",
                    cgroup_root.display(),
                    unified.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ))
        }
    };
    for key in unified.keys() {
        let controller = key.split('.').next().unwrap_or("");
        if controller == "cgroup" {
            return Err(refused(
                key,
                &unified[key],
                "cgroup.* files are the cgroup's own (systemd's), not a resource",
            ));
        }
        if !key.contains('.') || !controllers.split_whitespace().any(|c| c == controller) {
            return Err(refused(
                key,
                &unified[key],
                format!(
                    "not a file of a controller this node enables (cgroup.controllers: {})",
                    controllers.trim()
                ),
            ));
        }
    }
    Ok(())
}

/// The cgroup v2 hierarchy (unified keys exist only there).
pub const CGROUP_V2_ROOT: &str = "/sys/fs/cgroup";

/// Write the plan's files into the cgroup at `cgroup_path` (under
/// CGROUP_V2_ROOT), in the host's mount namespace; the first refusal is
/// the error.
pub async fn write_files(
    hostns: &crate::host::hostns::HostNs,
    cgroup_path: &str,
    plan: &Plan,
) -> Result<()> {
    let dir = Path::new(CGROUP_V2_ROOT).join(cgroup_path.trim_start_matches('/'));
    for (key, value) in &plan.files {
        hostns
            .try_write(&dir.join(key), value.as_bytes())
            .await
            .map_err(|e| write_refused(key, value, &e))?;
    }
    Ok(())
}

/// The properties `old` set that `new` does not, back to systemd's
/// "none" (UpdateContainerResources takes a limit away).
pub fn resets(old: &Plan, new: &Plan) -> Vec<(&'static str, Prop)> {
    old.properties
        .iter()
        .filter(|(k, _)| !new.properties.iter().any(|(n, _)| n == k))
        .map(|(k, _)| {
            let none = match *k {
                "MemoryMin" | "MemoryLow" => Prop::U64(0),
                "AllowedCPUs" | "AllowedMemoryNodes" => Prop::Bytes(Vec::new()),
                _ => Prop::U64(INFINITY),
            };
            (*k, none)
        })
        .collect()
}

/// The kernel's refusal of one file's write, named.
pub fn write_refused(key: &str, value: &str, e: &std::io::Error) -> Error {
    let word = match e.raw_os_error() {
        Some(libc::ENOENT) => "no such file in the container's cgroup".to_string(),
        _ => format!("the kernel refused it ({e})"),
    };
    refused(key, value, word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn systemds_keys_become_properties_the_rest_files() {
        let p = plan(&map(&[
            ("memory.oom.group", "1"),
            ("memory.high", "50331648"),
            ("memory.min", "max"),
            ("memory.swap.max", "0"),
            ("cpu.max", "50000 100000"),
            ("cpu.weight", "20"),
            ("pids.max", "max"),
            ("cpu.idle", "1"),
        ]))
        .unwrap();
        assert_eq!(
            p.files,
            vec![
                ("cpu.idle".to_string(), "1".to_string()),
                ("memory.oom.group".to_string(), "1".to_string())
            ]
        );
        let get = |k: &str| p.properties.iter().find(|(n, _)| *n == k).map(|(_, v)| v);
        assert_eq!(get("MemoryHigh"), Some(&Prop::U64(50331648)));
        assert_eq!(get("MemoryMin"), Some(&Prop::U64(INFINITY)));
        assert_eq!(get("MemorySwapMax"), Some(&Prop::U64(0)));
        assert_eq!(get("CPUQuotaPerSecUSec"), Some(&Prop::U64(500_000)));
        assert_eq!(get("CPUQuotaPeriodUSec"), Some(&Prop::U64(100_000)));
        assert_eq!(get("CPUWeight"), Some(&Prop::U64(20)));
        assert_eq!(get("TasksMax"), Some(&Prop::U64(INFINITY)));
    }

    #[test]
    fn a_value_no_property_takes_is_named() {
        for (k, v) in [
            ("memory.high", "lots"),
            ("cpu.weight", "0"),
            ("cpu.max", "x 100000"),
            ("cpu.max", "1000 0"),
            ("cpuset.cpus", "a-b"),
        ] {
            let e = plan(&map(&[(k, v)])).unwrap_err();
            assert_eq!(
                e.kind(),
                podscope_api::error::ErrorKind::InvalidArgument,
                "{k}"
            );
            assert!(e.to_string().contains(k), "{e}");
        }
    }

    #[test]
    fn unified_wins_over_the_structured_field() {
        let p = plan(&map(&[("memory.max", "100")])).unwrap();
        let m = merged(
            vec![("MemoryMax", Prop::U64(5)), ("CPUWeight", Prop::U64(7))],
            &p,
        );
        assert_eq!(
            m,
            vec![("CPUWeight", Prop::U64(7)), ("MemoryMax", Prop::U64(100))]
        );
    }

    #[test]
    fn keys_are_checked_against_the_nodes_controllers() {
        let t = podscope_test_support::TempDir::new();
        // v1: no cgroup.controllers at the root.
        let e = check_keys(&map(&[("memory.high", "1")]), &t.0).unwrap_err();
        assert!(e.to_string().contains("need cgroup v2"), "{e}");
        assert!(check_keys(&BTreeMap::new(), &t.0).is_ok());
        std::fs::write(t.0.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        assert!(check_keys(&map(&[("memory.oom.group", "1"), ("cpu.idle", "1")]), &t.0).is_ok());
        for k in ["hugetlb.2MB.max", "cgroup.procs", "nodots"] {
            let e = check_keys(&map(&[(k, "1")]), &t.0).unwrap_err();
            assert_eq!(e.kind(), podscope_api::error::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains(k), "{e}");
        }
    }
}
