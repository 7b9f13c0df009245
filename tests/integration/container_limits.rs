//! Memory limits: a container over its limit is OOM-killed and says so, a
//! container whose child is OOM-killed runs on, and
//! UpdateContainerResources moves the unit's limits.

use crate::containers::*;
use podscope_api::container::{ContainerOptions, Resources};
use podscope_api::domain::container::ContainerState;
use podscope_test_support::harness::*;
use std::time::Duration;

const LIMIT: u64 = 32 << 20;

/// A shell that holds 96 MiB in a variable: three times the limit.
const HOG: &str = "x=$(head -c 100663296 /dev/zero | tr '\\0' a); echo \"held ${#x}\"";

fn limited(script: &str) -> ContainerOptions {
    ContainerOptions {
        log_path: "oom/0.log".into(),
        resources: Resources {
            memory_limit_in_bytes: LIMIT,
            ..Default::default()
        },
        ..sh_cmd(script)
    }
}

async fn a_container_over_its_memory_limit_ends_oom_killed(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-oom", handler).await;
    let id = run(&m, &pod, "hog", limited(&format!("echo start; {HOG}"))).await;
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(30)).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.exit_code, s.reason.as_str(), s.oom_killed),
        (137, "OOMKilled", true),
        "{s:?}"
    );
    let lines = whole_lines(&strict_records(&format!("{logs}/oom/0.log")), "stdout");
    assert_eq!(lines, ["start"], "it never got to hold the memory");
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_over_its_memory_limit_ends_oom_killed_with_137_crun() {
    a_container_over_its_memory_limit_ends_oom_killed("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_over_its_memory_limit_ends_oom_killed_with_137_runc() {
    a_container_over_its_memory_limit_ends_oom_killed("runc").await;
}

async fn a_container_whose_child_is_oom_killed_keeps_running(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-oom-child", handler).await;
    // The child shell is the one that grows: the kernel kills it, the
    // container's own process goes on. The child grows alone, by doubling a
    // variable: with HOG's pipeline, `tr` went on writing into the pipe
    // while the killed child's memory was still being freed, and the
    // kernel, out of memory again, once killed the parent too (seen in CI).
    let script = "trap 'exit 0' TERM; sh -c 'x=a; while :; do x=$x$x; done'; \
                  echo \"child $?\"; while :; do sleep 0.1; done";
    let id = run(&m, &pod, "parent", limited(script)).await;
    let pid = m.container_status(&id).await.unwrap().main_pid;
    let path = format!("{logs}/oom/0.log");
    let t0 = std::time::Instant::now();
    while !whole_lines(&live_records(&path), "stdout")
        .iter()
        .any(|l| l.starts_with("child "))
    {
        if t0.elapsed() > Duration::from_secs(30) {
            panic!(
                "the child never ended; the container: {:?}; its log: {:?}",
                m.container_status(&id).await,
                std::fs::read_to_string(&path)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        whole_lines(&strict_records(&path), "stdout"),
        ["child 137"],
        "the child was killed (SIGKILL), not the container"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.main_pid),
        (ContainerState::Running, pid),
        "{s:?}"
    );
    assert!(pid_alive(pid));
    assert_eq!(unit_prop(&s.unit, "ActiveState"), "active");
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_whose_child_is_oom_killed_keeps_running_crun() {
    a_container_whose_child_is_oom_killed_keeps_running("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_whose_child_is_oom_killed_keeps_running_runc() {
    a_container_whose_child_is_oom_killed_keeps_running("runc").await;
}

/// The memory limit the kernel enforces on a container's cgroup, as
/// systemd wrote it (cgroup v1's memory.limit_in_bytes or v2's memory.max).
fn kernel_memory_limit(cgroup: &str) -> String {
    let v1 = format!("/sys/fs/cgroup/memory{cgroup}/memory.limit_in_bytes");
    let v2 = format!("/sys/fs/cgroup{cgroup}/memory.max");
    std::fs::read_to_string(&v1)
        .or_else(|_| std::fs::read_to_string(&v2))
        .unwrap_or_else(|e| panic!("neither {v1} nor {v2}: {e}"))
        .trim()
        .to_owned()
}

/// No limit in the kernel's words: v2's "max", v1's largest page multiple.
fn unlimited(v: &str) -> bool {
    v == "max" || v.parse::<u64>().is_ok_and(|n| n >= 1 << 62)
}

#[tokio::test(flavor = "multi_thread")]
async fn update_container_resources_moves_memory_max_and_removing_the_limit_resets_it() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-update", "").await;
    let o = ContainerOptions {
        resources: Resources {
            memory_limit_in_bytes: 64 << 20,
            ..Default::default()
        },
        ..sh_cmd("trap 'exit 0' TERM; while :; do sleep 0.1; done")
    };
    let id = run(&m, &pod, "upd", o).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(unit_prop(&s.unit, "MemoryMax"), (64u64 << 20).to_string());
    assert_eq!(kernel_memory_limit(&s.cgroup), (64u64 << 20).to_string());

    let more = Resources {
        memory_limit_in_bytes: 128 << 20,
        ..Default::default()
    };
    m.update_container_resources(&id, &more).await.unwrap();
    assert_eq!(unit_prop(&s.unit, "MemoryMax"), (128u64 << 20).to_string());
    assert_eq!(kernel_memory_limit(&s.cgroup), (128u64 << 20).to_string());
    assert_eq!(
        m.container_status(&id)
            .await
            .unwrap()
            .resources
            .memory_limit_in_bytes,
        128 << 20
    );

    m.update_container_resources(&id, &Resources::default())
        .await
        .unwrap();
    assert_eq!(unit_prop(&s.unit, "MemoryMax"), "infinity");
    let k = kernel_memory_limit(&s.cgroup);
    assert!(unlimited(&k), "the cgroup still has a limit: {k}");
    assert_eq!(
        m.container_status(&id)
            .await
            .unwrap()
            .resources
            .memory_limit_in_bytes,
        0
    );
    assert_eq!(
        m.container_status(&id).await.unwrap().state,
        ContainerState::Running
    );
    m.remove(&pod).await.unwrap();
}

/// A resize below what the container holds is a named error and changes
/// nothing: the limit, the record and the container stay as they were.
#[tokio::test(flavor = "multi_thread")]
async fn a_memory_resize_below_the_working_set_is_refused_by_name() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-shrink", "").await;
    let o = ContainerOptions {
        resources: Resources {
            memory_limit_in_bytes: 256 << 20,
            ..Default::default()
        },
        log_path: "shrink/0.log".into(),
        // 48 MiB held in a variable, then "held" said and a long wait.
        ..sh_cmd("x=$(head -c 50331648 /dev/zero | tr '\\0' a); echo held; sleep 600; echo ${#x}")
    };
    let id = run(&m, &pod, "shrink", o).await;
    let s = m.container_status(&id).await.unwrap();
    wait_until(Duration::from_secs(30), || {
        std::fs::read_to_string(&s.log_path).is_ok_and(|l| l.contains("held"))
    });
    let less = Resources {
        memory_limit_in_bytes: 16 << 20,
        ..Default::default()
    };
    let e = m
        .update_container_resources(&id, &less)
        .await
        .expect_err("a limit below the working set");
    let (k, msg) = classify(&e);
    assert_eq!(k, podscope_api::ErrorKind::InvalidArgument, "{msg}");
    assert!(
        msg.contains("resources.memory_limit_in_bytes") && msg.contains("below the working set"),
        "{msg}"
    );
    assert_eq!(unit_prop(&s.unit, "MemoryMax"), (256u64 << 20).to_string());
    let after = m.container_status(&id).await.unwrap();
    assert_eq!(after.resources.memory_limit_in_bytes, 256 << 20);
    assert_eq!(after.state, ContainerState::Running);
    m.remove(&pod).await.unwrap();
}

/// The hugepage limit the kernel enforces on a container (cgroup v1's
/// hugetlb hierarchy, where these machines have it, or v2's unit cgroup),
/// and whether `pid` is in that cgroup.
fn kernel_hugepage_limit(cgroup: &str, size: &str) -> Option<String> {
    let v1 = format!("/sys/fs/cgroup/hugetlb{cgroup}/hugetlb.{size}.limit_in_bytes");
    let v2 = format!("/sys/fs/cgroup{cgroup}/hugetlb.{size}.max");
    std::fs::read_to_string(&v1)
        .or_else(|_| std::fs::read_to_string(&v2))
        .ok()
        .map(|s| s.trim().to_owned())
}

fn hugetlb_cgroup_of(pid: u32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            (ctl.split(',').any(|c| c == "hugetlb") || ctl.is_empty()).then(|| path.to_owned())
        })
        .unwrap_or_default()
}

async fn hugepage_limits_are_enforced_updated_and_removed(handler: &str) {
    use podscope_api::container::HugepageLimit;
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-hugetlb", handler).await;
    let limit = |size: &str, bytes: u64| HugepageLimit {
        page_size: size.into(),
        limit: bytes,
    };
    let o = ContainerOptions {
        resources: Resources {
            hugepage_limits: vec![limit("2MB", 4 << 20)],
            ..Default::default()
        },
        ..sh_cmd("trap 'exit 0' TERM; sleep 1000 & wait")
    };
    let id = run(&m, &pod, "huge", o).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        kernel_hugepage_limit(&s.cgroup, "2MB").as_deref(),
        Some("4194304")
    );
    // The container's process and the child it started are inside.
    assert_eq!(hugetlb_cgroup_of(s.main_pid), s.cgroup);
    let child =
        std::fs::read_to_string(format!("/proc/{}/task/{}/children", s.main_pid, s.main_pid))
            .unwrap();
    let child: u32 = child.split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(hugetlb_cgroup_of(child), s.cgroup);

    // Updated: 2MB raised, 1GB limited too; then 2MB alone, 1GB lifted.
    let more = Resources {
        hugepage_limits: vec![limit("2MB", 8 << 20), limit("1GB", 0)],
        ..Default::default()
    };
    m.update_container_resources(&id, &more).await.unwrap();
    assert_eq!(
        kernel_hugepage_limit(&s.cgroup, "2MB").as_deref(),
        Some("8388608")
    );
    assert_eq!(
        kernel_hugepage_limit(&s.cgroup, "1GB").as_deref(),
        Some("0")
    );
    m.update_container_resources(
        &id,
        &Resources {
            hugepage_limits: vec![limit("2MB", 8 << 20)],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let gb = kernel_hugepage_limit(&s.cgroup, "1GB").unwrap();
    assert!(unlimited(&gb), "1GB pages are still limited: {gb}");

    // Removed with the container: no hugetlb cgroup is left behind.
    m.stop_container(&id, 10).await.unwrap();
    m.remove_container(&id).await.unwrap();
    assert_eq!(kernel_hugepage_limit(&s.cgroup, "2MB"), None);
    assert!(!std::path::Path::new(&format!("/sys/fs/cgroup/hugetlb{}", s.cgroup)).exists());
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn hugepage_limits_are_enforced_updated_and_removed_crun() {
    hugepage_limits_are_enforced_updated_and_removed("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hugepage_limits_are_enforced_updated_and_removed_runc() {
    hugepage_limits_are_enforced_updated_and_removed("runc").await;
}

/// kubelet's scores: -997 for a Guaranteed pod's containers, up to 1000
/// for the others. Where the node cannot lower a score (no
/// CAP_SYS_RESOURCE in PID 1's bounding set, as on these machines) a
/// negative one is kept at PID 1's and the container still starts; where
/// it can, the score is the one asked for.
async fn oom_scores_kubelet_asks_for_start(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _logs) = log_pod(&m, "ctr-oom-score", handler).await;
    let status = std::fs::read_to_string("/proc/1/status").unwrap();
    let bounding = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    let can_lower = bounding & (1 << 24) != 0;
    let pid1: i64 = sh("cat /proc/1/oom_score_adj").trim().parse().unwrap();
    for (name, asked, want) in [
        (
            "guaranteed",
            -997i64,
            if can_lower { -997 } else { pid1.max(-997) },
        ),
        ("burstable", 500, 500),
    ] {
        let o = ContainerOptions {
            resources: Resources {
                oom_score_adj: asked,
                ..Default::default()
            },
            ..sh_cmd("exec sleep 1000")
        };
        let id = run(&m, &pod, name, o).await;
        let s = m.container_status(&id).await.unwrap();
        assert_eq!(s.state, ContainerState::Running, "{name}: {s:?}");
        let got: i64 = sh(&format!("cat /proc/{}/oom_score_adj", s.main_pid))
            .trim()
            .parse()
            .unwrap();
        assert_eq!(got, want, "{name}: asked {asked}");
    }
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn oom_scores_kubelet_asks_for_start_crun() {
    oom_scores_kubelet_asks_for_start("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oom_scores_kubelet_asks_for_start_runc() {
    oom_scores_kubelet_asks_for_start("runc").await;
}

/// The pod's CPU, as kubelet (cAdvisor) reads it from the pod slice's
/// cgroup, counts its containers: where `cpuacct` is a v1 hierarchy apart
/// from `cpu` (these machines) systemd puts no process in it, so podscope
/// (crun) or runc itself moves the container's process into the unit's
/// cgroup there; it is gone with the container, and the pod's own slice
/// there with the pod. Elsewhere the slice's own cgroup counts.
async fn a_pods_cpu_counts_its_containers(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _logs) = log_pod(&m, "ctr-cpuacct", handler).await;
    let slice = m.status(&pod).await.unwrap().slice;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let apart = mounts
        .lines()
        .any(|l| l.contains(" /sys/fs/cgroup/cpuacct ") && l.ends_with(" rw,cpuacct"));
    // A second of busy work, then asleep.
    let id = run(
        &m,
        &pod,
        "busy",
        sh_cmd("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 1000"),
    )
    .await;
    let unit_cgroup = m.container_status(&id).await.unwrap().cgroup;
    let slice_cgroup = unit_cgroup.rsplit_once('/').unwrap().0.to_owned();
    assert!(slice_cgroup.ends_with(&slice), "{slice_cgroup} vs {slice}");
    let usage = |cg: &str| -> u64 {
        let f = if apart {
            format!("/sys/fs/cgroup/cpuacct{cg}/cpuacct.usage")
        } else {
            format!("/sys/fs/cgroup{cg}/cpu.stat")
        };
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{f}: {e}"));
        if apart {
            text.trim().parse().unwrap()
        } else {
            text.lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .map(|v| v.trim().parse::<u64>().unwrap() * 1000)
                .unwrap()
        }
    };
    let t0 = std::time::Instant::now();
    while usage(&slice_cgroup) < 100_000_000 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the pod slice's CPU ({}) does not count the busy container",
            usage(&slice_cgroup)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(usage(&unit_cgroup) >= 100_000_000, "the unit's own cgroup");
    m.remove_container(&id).await.unwrap();
    if apart {
        let dir = format!("/sys/fs/cgroup/cpuacct{unit_cgroup}");
        assert!(
            !std::path::Path::new(&dir).exists(),
            "{dir} left after the container"
        );
    }
    m.remove(&pod).await.unwrap();
    if apart {
        let dir = format!("/sys/fs/cgroup/cpuacct{slice_cgroup}");
        assert!(
            !std::path::Path::new(&dir).exists(),
            "{dir} left after the pod"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pods_cpu_counts_its_containers_crun() {
    a_pods_cpu_counts_its_containers("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pods_cpu_counts_its_containers_runc() {
    a_pods_cpu_counts_its_containers("runc").await;
}
