//! Hugepage limits, which systemd has no unit property for.
//!
//! The runtime's cgroup manager is off (crun) or told the unit's path
//! (runc), so the daemon writes the limits itself, the same way for both:
//!
//! - v1 (a `hugetlb` hierarchy of its own, as on hybrid nodes): systemd
//!   makes no cgroup for the unit there. The daemon makes one at the
//!   unit's path, writes `hugetlb.<size>.limit_in_bytes`, and moves the
//!   container's process into it between the runtime's create and start,
//!   so everything it runs is inside. runc, which joins every hierarchy at
//!   its `cgroupsPath`, finds that directory and joins it too. Removed with
//!   the container.
//! - v2 (`hugetlb` in the unified hierarchy): the unit's own cgroup, with
//!   `hugetlb` enabled in the `cgroup.subtree_control` of every cgroup above
//!   it, and `hugetlb.<size>.max` written.
//!
//! The cgroup file system is read-only in the daemon's sandbox: the writes
//! go through the host's mount namespace (`HostNs`).

use crate::host::hostns::HostNs;
use podscope_api::domain::container::HugepageLimit;
use podscope_api::error::{Result, ResultExt};
use std::path::{Path, PathBuf};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Where the node's hugetlb controller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// A v1 hierarchy, mounted at this directory.
    V1(PathBuf),
    /// The unified hierarchy, mounted at this directory.
    V2(PathBuf),
    /// No hugetlb controller (a kernel without hugepages).
    None,
}

pub fn layout() -> Layout {
    layout_at(Path::new(CGROUP_ROOT))
}

/// The layout under `root` (/sys/fs/cgroup but in the unit tests).
fn layout_at(root: &Path) -> Layout {
    let holds = |dir: &Path| {
        std::fs::read_to_string(dir.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "hugetlb"))
    };
    if crate::host::cgroup_layout::is_cgroup1(&root.join("hugetlb")) {
        Layout::V1(root.join("hugetlb"))
    } else if holds(root) {
        Layout::V2(root.to_path_buf())
    } else if holds(&root.join("unified")) {
        Layout::V2(root.join("unified"))
    } else {
        Layout::None
    }
}

/// One step of applying the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Make this directory and those above it (existing ones are fine).
    Mkdir(PathBuf),
    /// Write this to a control file.
    Write(PathBuf, String),
}

/// What applying `limits` to the container whose unit's cgroup is
/// `cgroup_path` (below the hierarchy's root) takes; `pids`, its processes
/// (v1 moves them: its process before it starts, or all of them in an
/// update). Pure, for the unit tests.
pub fn plan(
    layout: &Layout,
    cgroup_path: &str,
    limits: &[HugepageLimit],
    pids: &[u32],
) -> Vec<Step> {
    let rel = cgroup_path.trim_matches('/');
    let mut steps = Vec::new();
    if limits.is_empty() {
        return steps;
    }
    match layout {
        Layout::V1(root) => {
            let dir = root.join(rel);
            steps.push(Step::Mkdir(dir.clone()));
            for l in limits {
                steps.push(Step::Write(
                    dir.join(format!("hugetlb.{}.limit_in_bytes", l.page_size)),
                    value(l.limit, "-1"),
                ));
            }
            for pid in pids.iter().filter(|p| **p > 0) {
                steps.push(Step::Write(dir.join("cgroup.procs"), pid.to_string()));
            }
        }
        Layout::V2(root) => {
            // Enabled from the root down to the unit's parent.
            let mut dir = root.clone();
            let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
            for part in &parts {
                steps.push(Step::Write(
                    dir.join("cgroup.subtree_control"),
                    "+hugetlb".into(),
                ));
                dir.push(part);
            }
            for l in limits {
                steps.push(Step::Write(
                    dir.join(format!("hugetlb.{}.max", l.page_size)),
                    value(l.limit, "max"),
                ));
            }
        }
        Layout::None => {}
    }
    steps
}

/// A limit as the control file takes it; `UNLIMITED` as `none` says.
fn value(limit: u64, none: &str) -> String {
    if limit == UNLIMITED {
        none.to_owned()
    } else {
        limit.to_string()
    }
}

/// A limit that lifts an earlier one (UpdateContainerResources without a
/// page size it had before).
pub const UNLIMITED: u64 = u64::MAX;

/// The limits an update writes: `new`, and every page size `old` limited
/// that `new` does not, lifted.
pub fn update(old: &[HugepageLimit], new: &[HugepageLimit]) -> Vec<HugepageLimit> {
    let mut all = new.to_vec();
    for o in old {
        if !new.iter().any(|n| n.page_size == o.page_size) {
            all.push(HugepageLimit {
                page_size: o.page_size.clone(),
                limit: UNLIMITED,
            });
        }
    }
    all
}

/// Whether the node can hold a container to `limits`. Without a hugetlb
/// controller nothing can, but kubelet asks for a limit of 0 on every page
/// size the kernel knows whether or not the controller is there (its way
/// of saying "none requested"): those, and lifted ones, are no request and
/// are let through, as runc does. A page size the pod asked for is
/// refused, with its size: the limit would not be kept.
fn enforceable(layout: &Layout, limits: &[HugepageLimit]) -> Result<()> {
    if *layout != Layout::None {
        return Ok(());
    }
    match limits
        .iter()
        .find(|l| l.limit != 0 && l.limit != UNLIMITED)
    {
        Some(l) => Err(podscope_api::error::Error::invalid(
            "resources.hugepage_limits",
            format!(
                "{} pages up to {} bytes asked for, but this node has no hugetlb cgroup controller to hold the container to it",
                l.page_size, l.limit
            ),
        )),
        None => Ok(()),
    }
}

/// Apply `limits` (see `plan`); `what` names the container in errors.
pub async fn apply(
    hostns: &HostNs,
    layout: &Layout,
    cgroup_path: &str,
    limits: &[HugepageLimit],
    pids: &[u32],
    what: &str,
) -> Result<()> {
    enforceable(layout, limits)?;
    for step in plan(layout, cgroup_path, limits, pids) {
        match step {
            Step::Mkdir(dir) => hostns.create_dir_all(&dir).await,
            Step::Write(path, data) => hostns.write(&path, data.as_bytes()).await,
        }
        .with_context(|| format!("{what}: hugepage limits"))?;
    }
    Ok(())
}

/// The processes of the unit whose cgroup is `cgroup_path`, as systemd's
/// own hierarchy lists them: those an update moves on v1. (systemd's
/// hierarchy is `name=systemd` wherever hugetlb is a v1 controller.)
pub fn unit_pids(cgroup_path: &str) -> Vec<u32> {
    let procs = Path::new(CGROUP_ROOT)
        .join("systemd")
        .join(cgroup_path.trim_matches('/'))
        .join("cgroup.procs");
    std::fs::read_to_string(procs)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Remove the v1 cgroup `apply` made, once the container's processes are
/// gone; nothing to do on v2 (systemd removes the unit's cgroup) or when
/// it was never made.
pub async fn remove(hostns: &HostNs, layout: &Layout, cgroup_path: &str) -> Result<()> {
    if let Layout::V1(root) = layout {
        hostns
            .remove_dir(&root.join(cgroup_path.trim_matches('/')))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "/podscope.slice/podscope-p.slice/podscope-ctr-c.service";

    fn limits() -> Vec<HugepageLimit> {
        vec![
            HugepageLimit {
                page_size: "2MB".into(),
                limit: 4 << 20,
            },
            HugepageLimit {
                page_size: "1GB".into(),
                limit: 0,
            },
        ]
    }

    #[test]
    fn without_a_controller_only_kubelets_zero_limits_pass() {
        let zero = |size: &str| HugepageLimit {
            page_size: size.into(),
            limit: 0,
        };
        assert!(enforceable(&Layout::None, &[zero("2MB"), zero("1GB")]).is_ok());
        assert!(enforceable(&Layout::None, &[]).is_ok());
        let lifted = HugepageLimit {
            page_size: "2MB".into(),
            limit: UNLIMITED,
        };
        assert!(enforceable(&Layout::None, &[lifted]).is_ok());
        let e = enforceable(&Layout::None, &limits())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("resources.hugepage_limits") && e.contains("2MB") && e.contains("4194304"),
            "{e}"
        );
        assert!(enforceable(&Layout::V1("/sys/fs/cgroup/hugetlb".into()), &limits()).is_ok());
    }

    #[test]
    fn a_plain_directory_named_hugetlb_is_no_hierarchy() {
        // A node whose hugetlb controller is not mounted, with the files
        // kubelet writes into a directory of that name.
        let root = std::env::temp_dir().join(format!("podscope-hugetlb-{}", std::process::id()));
        std::fs::create_dir_all(root.join("hugetlb/kubepods.slice")).unwrap();
        std::fs::write(root.join("hugetlb/cgroup.procs"), "1\n").unwrap();
        let layout = layout_at(&root);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(layout, Layout::None);
    }

    #[test]
    fn v1_makes_the_units_cgroup_writes_the_limits_and_moves_the_process() {
        let root = PathBuf::from("/sys/fs/cgroup/hugetlb");
        let dir = root.join(PATH.trim_start_matches('/'));
        assert_eq!(
            plan(&Layout::V1(root), PATH, &limits(), &[42]),
            vec![
                Step::Mkdir(dir.clone()),
                Step::Write(dir.join("hugetlb.2MB.limit_in_bytes"), "4194304".into()),
                Step::Write(dir.join("hugetlb.1GB.limit_in_bytes"), "0".into()),
                Step::Write(dir.join("cgroup.procs"), "42".into()),
            ]
        );
    }

    #[test]
    fn v2_enables_the_controller_above_the_unit_and_writes_its_limits() {
        let root = PathBuf::from("/sys/fs/cgroup");
        let steps = plan(&Layout::V2(root.clone()), PATH, &limits(), &[42]);
        let enable = |d: &str| {
            Step::Write(
                root.join(d).join("cgroup.subtree_control"),
                "+hugetlb".into(),
            )
        };
        let unit = root.join(PATH.trim_start_matches('/'));
        assert_eq!(
            steps,
            vec![
                enable(""),
                enable("podscope.slice"),
                enable("podscope.slice/podscope-p.slice"),
                Step::Write(unit.join("hugetlb.2MB.max"), "4194304".into()),
                Step::Write(unit.join("hugetlb.1GB.max"), "0".into()),
            ]
        );
    }

    #[test]
    fn an_update_lifts_the_page_sizes_it_no_longer_limits() {
        let new = vec![limits()[0].clone()];
        let all = update(&limits(), &new);
        assert_eq!(all[0], limits()[0]);
        assert_eq!(all[1].page_size, "1GB");
        assert_eq!(all[1].limit, UNLIMITED);
        let root = PathBuf::from("/sys/fs/cgroup/hugetlb");
        let steps = plan(&Layout::V1(root.clone()), PATH, &all, &[]);
        let dir = root.join(PATH.trim_start_matches('/'));
        assert_eq!(
            steps.last(),
            Some(&Step::Write(
                dir.join("hugetlb.1GB.limit_in_bytes"),
                "-1".into()
            ))
        );
        // No process given, none moved.
        assert!(!steps
            .iter()
            .any(|s| matches!(s, Step::Write(p, _) if p.ends_with("cgroup.procs"))));
        let v2 = plan(
            &Layout::V2(PathBuf::from("/sys/fs/cgroup")),
            PATH,
            &all,
            &[7],
        );
        assert!(matches!(v2.last(), Some(Step::Write(_, v)) if v == "max"));
    }

    #[test]
    fn no_limits_no_steps() {
        let v1 = Layout::V1(PathBuf::from("/sys/fs/cgroup/hugetlb"));
        assert!(plan(&v1, PATH, &[], &[42]).is_empty());
    }
}
