//! Pod resources (CRI `LinuxContainerResources` for the sandbox, plus the
//! runtime class overhead) and their conversion into systemd scope
//! properties.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The kernel's CFS period bounds (1 ms .. 1 s), in microseconds.
const CFS_PERIOD_MIN: u64 = 1_000;
const CFS_PERIOD_MAX: u64 = 1_000_000;
const DEFAULT_CFS_PERIOD: u64 = 100_000;
const SHARES_MIN: u64 = 2;
const SHARES_MAX: u64 = 262_144;
/// Below this a pod's init cannot even be loaded; such a limit is a mistake.
const MEMORY_MIN: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resources {
    /// CFS period in µs; 0 = default (100 ms).
    pub cpu_period: u64,
    /// CFS quota in µs per period; 0 = unlimited.
    pub cpu_quota: u64,
    /// cgroup v1 cpu shares; 0 = unset.
    pub cpu_shares: u64,
    /// Bytes; 0 = unlimited.
    pub memory_limit_in_bytes: u64,
    /// Tasks; 0 = unset.
    pub pids_limit: u64,
}

impl Resources {
    pub fn is_empty(&self) -> bool {
        *self == Resources::default()
    }

    /// Check ranges; `field` names the option ("resources" or "overhead").
    pub fn validate(&self, field: &str) -> Result<()> {
        if self.cpu_period != 0 && !(CFS_PERIOD_MIN..=CFS_PERIOD_MAX).contains(&self.cpu_period) {
            return Err(Error::invalid(
                &format!("{field}.cpu_period"),
                format!(
                    "{} µs is outside {CFS_PERIOD_MIN}..={CFS_PERIOD_MAX}",
                    self.cpu_period
                ),
            ));
        }
        if self.cpu_quota != 0 && self.cpu_quota < CFS_PERIOD_MIN {
            return Err(Error::invalid(
                &format!("{field}.cpu_quota"),
                format!(
                    "{} µs is below the minimum of {CFS_PERIOD_MIN}",
                    self.cpu_quota
                ),
            ));
        }
        if self.cpu_shares != 0 && !(SHARES_MIN..=SHARES_MAX).contains(&self.cpu_shares) {
            return Err(Error::invalid(
                &format!("{field}.cpu_shares"),
                format!("{} is outside {SHARES_MIN}..={SHARES_MAX}", self.cpu_shares),
            ));
        }
        if self.memory_limit_in_bytes != 0 && self.memory_limit_in_bytes < MEMORY_MIN {
            return Err(Error::invalid(
                &format!("{field}.memory_limit_in_bytes"),
                format!(
                    "{} bytes is below the minimum of 1 MiB",
                    self.memory_limit_in_bytes
                ),
            ));
        }
        if self.pids_limit > i64::MAX as u64 {
            return Err(Error::invalid(&format!("{field}.pids_limit"), "too large"));
        }
        Ok(())
    }

    /// CPU time allowed per second of wall time, in µs (systemd's
    /// `CPUQuotaPerSecUSec`), or None when unlimited.
    fn quota_per_sec_usec(&self) -> Option<u64> {
        if self.cpu_quota == 0 {
            return None;
        }
        let period = if self.cpu_period == 0 {
            DEFAULT_CFS_PERIOD
        } else {
            self.cpu_period
        };
        Some(self.cpu_quota.saturating_mul(1_000_000) / period)
    }
}

/// cgroup v1 shares to cgroup v2 / systemd `CPUWeight`, the conversion runc
/// and crun use, so a pod gets the same weight under any runtime.
pub fn shares_to_weight(shares: u64) -> u64 {
    let shares = shares.clamp(SHARES_MIN, SHARES_MAX);
    1 + ((shares - 2) * 9999) / 262_142
}

/// The systemd properties for a pod with `resources` plus `overhead`.
/// Overhead only adds to a limit the pod has: an unlimited pod stays
/// unlimited.
pub fn scope_properties(resources: &Resources, overhead: &Resources) -> Vec<(&'static str, u64)> {
    let mut props = Vec::new();
    if resources.memory_limit_in_bytes > 0 {
        props.push((
            "MemoryMax",
            resources
                .memory_limit_in_bytes
                .saturating_add(overhead.memory_limit_in_bytes),
        ));
    }
    if let Some(q) = resources.quota_per_sec_usec() {
        props.push((
            "CPUQuotaPerSecUSec",
            q.saturating_add(overhead.quota_per_sec_usec().unwrap_or(0)),
        ));
    }
    if resources.cpu_shares > 0 {
        props.push((
            "CPUWeight",
            shares_to_weight(resources.cpu_shares.saturating_add(overhead.cpu_shares)),
        ));
    }
    if resources.pids_limit > 0 {
        props.push((
            "TasksMax",
            resources.pids_limit.saturating_add(overhead.pids_limit),
        ));
    }
    props
}

/// systemd's "no limit" for each of the scope's limit properties
/// (infinity for MemoryMax, CPUQuotaPerSecUSec and TasksMax; "unset" for
/// CPUWeight).
const UNSET: u64 = u64::MAX;
/// Every limit property a pod's scope can have.
const LIMIT_PROPERTIES: [&str; 4] = ["MemoryMax", "CPUQuotaPerSecUSec", "CPUWeight", "TasksMax"];

/// The properties that take a running pod's scope to `resources` plus
/// `overhead` (UpdateResources): all four, a limit no longer wanted reset.
pub fn scope_property_updates(
    resources: &Resources,
    overhead: &Resources,
) -> Vec<(&'static str, u64)> {
    let set = scope_properties(resources, overhead);
    LIMIT_PROPERTIES
        .iter()
        .map(|name| {
            let v = set
                .iter()
                .find(|(n, _)| n == name)
                .map_or(UNSET, |(_, v)| *v);
            (*name, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn weight_conversion_matches_runc() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(shares_to_weight(0), 1);
        assert_eq!(shares_to_weight(1 << 40), 10_000);
    }

    #[test]
    fn properties_from_resources_and_overhead() {
        let r = Resources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 512,
            memory_limit_in_bytes: 256 << 20,
            pids_limit: 100,
        };
        let o = Resources {
            cpu_period: 0,
            cpu_quota: 10_000,
            cpu_shares: 512,
            memory_limit_in_bytes: 16 << 20,
            pids_limit: 10,
        };
        assert_eq!(
            scope_properties(&r, &o),
            vec![
                ("MemoryMax", 272 << 20),
                ("CPUQuotaPerSecUSec", 600_000),
                ("CPUWeight", shares_to_weight(1024)),
                ("TasksMax", 110),
            ]
        );
    }

    #[test]
    fn unlimited_pod_stays_unlimited_with_overhead() {
        let o = Resources {
            memory_limit_in_bytes: 16 << 20,
            cpu_quota: 10_000,
            ..Default::default()
        };
        assert!(scope_properties(&Resources::default(), &o).is_empty());
    }

    #[test]
    fn updates_reset_what_is_no_longer_limited() {
        let r = Resources {
            memory_limit_in_bytes: 64 << 20,
            pids_limit: 50,
            ..Default::default()
        };
        assert_eq!(
            scope_property_updates(&r, &Resources::default()),
            vec![
                ("MemoryMax", 64 << 20),
                ("CPUQuotaPerSecUSec", u64::MAX),
                ("CPUWeight", u64::MAX),
                ("TasksMax", 50),
            ]
        );
        let every = scope_property_updates(&Resources::default(), &Resources::default());
        assert!(every.iter().all(|(_, v)| *v == u64::MAX), "{every:?}");
        for (name, _) in scope_properties(
            &Resources {
                cpu_quota: 50_000,
                cpu_shares: 100,
                memory_limit_in_bytes: 64 << 20,
                pids_limit: 5,
                ..Default::default()
            },
            &Resources::default(),
        ) {
            assert!(
                LIMIT_PROPERTIES.contains(&name),
                "{name} is reset by updates too"
            );
        }
    }

    #[test]
    fn quota_uses_default_period() {
        let r = Resources {
            cpu_quota: 200_000,
            ..Default::default()
        };
        assert_eq!(
            scope_properties(&r, &Resources::default()),
            vec![("CPUQuotaPerSecUSec", 2_000_000)]
        );
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            (
                Resources {
                    cpu_period: 10,
                    ..Default::default()
                },
                "resources.cpu_period",
            ),
            (
                Resources {
                    cpu_quota: 5,
                    ..Default::default()
                },
                "resources.cpu_quota",
            ),
            (
                Resources {
                    cpu_shares: 1,
                    ..Default::default()
                },
                "resources.cpu_shares",
            ),
            (
                Resources {
                    memory_limit_in_bytes: 4096,
                    ..Default::default()
                },
                "resources.memory_limit_in_bytes",
            ),
        ];
        for (r, field) in cases {
            let e = r.validate("resources").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().starts_with(field), "{e}");
        }
        Resources::default().validate("resources").unwrap();
    }
}
