//! The node's cgroup layout, as podscope adapts to it and reports it
//! (RuntimeStatus, `podscopectl info`, CRI verbose Status): pure v2 (every
//! systemd-booted node of today's distributions, and what kubelet 1.35+
//! expects), the v1 hybrid (v1 controllers, systemd's own tree on a
//! cgroup2 mount beside them), or legacy v1.

use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupLayout {
    V2,
    Hybrid,
    V1,
}

const ROOT: &str = "/sys/fs/cgroup";
const HYBRID_UNIFIED: &str = "/sys/fs/cgroup/unified";

fn is_cgroup2(path: &str) -> bool {
    statfs(path).is_ok_and(|s| s.filesystem_type() == CGROUP2_SUPER_MAGIC)
}

/// Whether `dir` is a mounted cgroup v1 hierarchy. Asked of the mount, not
/// of a file in it: where a controller is not mounted, its directory under
/// /sys/fs/cgroup may be a plain one on the tmpfs, and what another agent
/// made there (kubelet makes its pods' cgroups in every hierarchy
/// /proc/cgroups lists, and writes into them) make it look like one.
pub fn is_cgroup1(dir: &Path) -> bool {
    statfs(dir).is_ok_and(|s| s.filesystem_type() == CGROUP_SUPER_MAGIC)
}

/// Read from the mounts (statfs of /sys/fs/cgroup and its `unified`).
pub fn detect() -> CgroupLayout {
    if is_cgroup2(ROOT) {
        CgroupLayout::V2
    } else if is_cgroup2(HYBRID_UNIFIED) {
        CgroupLayout::Hybrid
    } else {
        CgroupLayout::V1
    }
}

impl CgroupLayout {
    pub fn name(self) -> &'static str {
        match self {
            CgroupLayout::V2 => "v2",
            CgroupLayout::Hybrid => "v1-hybrid",
            CgroupLayout::V1 => "v1",
        }
    }

    /// What the node operator should know; empty on v2.
    pub fn advice(self) -> &'static str {
        match self {
            CgroupLayout::V2 => "",
            CgroupLayout::Hybrid | CgroupLayout::V1 => {
                "cgroup v1 is supported, v2 recommended: kubelet 1.35 and later refuse to start on v1 \
                 unless its configuration says failCgroupV1: false; on v1, unified is refused, \
                 containers share the host's cgroup namespace, and systemd-oomd does not run"
            }
        }
    }
}
