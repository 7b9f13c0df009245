//! CPU accounting where systemd keeps none per unit: a cgroup v1 `cpuacct`
//! hierarchy mounted apart from `cpu` (as on the machines podscope is
//! built on; a comounted `cpu,cpuacct` or cgroup v2 needs nothing here).
//!
//! There systemd realises a unit's `cpu` cgroup for CPUAccounting= but
//! leaves its processes in cpuacct's root, so the pod slice's
//! `cpuacct.usage`, which kubelet (through cAdvisor) reports as the pod's
//! CPU, counts nothing of its containers. runc joins `cpuacct` at its
//! `cgroupsPath` itself; for crun, whose cgroup manager is off, the daemon
//! does what runc would: it makes the unit's cgroup in that hierarchy and
//! moves the container's process in between the runtime's create and
//! start (as for hugetlb), so everything it runs is counted, and removes it
//! with the container. The directory is made, and its `cgroup.procs`
//! opened, in the host's mount namespace (the daemon's view of the cgroup
//! file system is read-only); the move is a write to that descriptor.

use crate::host::hostns::HostNs;
use podscope_api::error::Result;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Where `cpuacct` is a hierarchy of its own: its mount point, from
/// `/proc/self/mountinfo`; None when it is comounted with `cpu`, on
/// cgroup v2, or absent.
pub fn layout() -> Option<PathBuf> {
    apart(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// The mount point of a v1 hierarchy holding `cpuacct` but not `cpu`, in a
/// mountinfo text. Pure, for the unit tests.
pub fn apart(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut r = right.split_whitespace();
        if r.next()? != "cgroup" {
            return None;
        }
        let options = r.nth(1)?;
        let controllers: Vec<&str> = options.split(',').collect();
        (controllers.contains(&"cpuacct") && !controllers.contains(&"cpu"))
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))
            .flatten()
    })
}

/// The unit's cgroup in that hierarchy.
pub fn dir(root: &Path, cgroup_path: &str) -> PathBuf {
    root.join(cgroup_path.trim_matches('/'))
}

/// Make the unit's cgroup (and those above it) and open its
/// `cgroup.procs`: what `join` writes to.
pub async fn prepare(hostns: &HostNs, root: &Path, cgroup_path: &str) -> Result<OwnedFd> {
    hostns
        .open_in_new_dir(&dir(root, cgroup_path), "cgroup.procs")
        .await
}

/// Move `pid` (the container's process, not yet started) into the cgroup
/// `procs` was opened for.
pub fn join(procs: &OwnedFd, pid: u32) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::from(procs.try_clone()?);
    f.write_all(pid.to_string().as_bytes())
}

/// `prepare` and `join` at once, for a process already there (a start
/// finished at recovery).
pub async fn enter(hostns: &HostNs, root: &Path, cgroup_path: &str, pid: u32) -> Result<()> {
    let procs = prepare(hostns, root, cgroup_path).await?;
    join(&procs, pid).map_err(|e| {
        podscope_api::error::Error::io(
            format!("move {pid} into {}", dir(root, cgroup_path).display()),
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines of these machines' mountinfo (cgroup v1 hybrid, cpu and
    // cpuacct apart) and of a comounted node.
    const APART: &str = "\
35 26 0:30 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
36 26 0:31 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
40 26 0:35 / /sys/fs/cgroup/cpu rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu
41 26 0:36 / /sys/fs/cgroup/cpuacct rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpuacct
42 26 0:37 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,memory
";
    const COMOUNTED: &str = "\
40 26 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
42 26 0:37 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,memory
";
    const V2: &str =
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

    #[test]
    fn cpuacct_apart_from_cpu_is_found() {
        assert_eq!(apart(APART), Some(PathBuf::from("/sys/fs/cgroup/cpuacct")));
        assert_eq!(apart(COMOUNTED), None);
        assert_eq!(apart(V2), None);
        assert_eq!(apart(""), None);
    }

    #[test]
    fn the_units_cgroup_is_its_path_in_the_hierarchy() {
        assert_eq!(
            dir(
                Path::new("/sys/fs/cgroup/cpuacct"),
                "/kubepods.slice/kubepods-pod1.slice/podscope-ctr-c.service"
            ),
            PathBuf::from(
                "/sys/fs/cgroup/cpuacct/kubepods.slice/kubepods-pod1.slice/podscope-ctr-c.service"
            )
        );
    }
}
