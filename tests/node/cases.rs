//! The node suite's cases, in the order they run.

use crate::cri::{container_config, pod_config};
use crate::{ensure, sh, wait_for, Crictl, Outcome};
use std::time::Duration;

/// A case: its name, and what it runs.
pub type Case = (&'static str, fn() -> Outcome);

/// The case every other needs first (the image they run).
pub const PULL: &str = "pull from the node's registry";

pub const ALL: &[Case] = &[
    (
        "the node boots systemd on cgroup v2",
        the_node_is_systemd_on_cgroup_v2,
    ),
    (PULL, pull),
    (
        "crun: limits in the v2 files, unified, cgroup namespace, update",
        || limits("crun"),
    ),
    (
        "runc: limits in the v2 files, unified, cgroup namespace, update",
        || limits("runc"),
    ),
    (
        "a privileged container keeps the host's cgroup namespace",
        privileged_cgroupns,
    ),
    (
        "unified: bad keys and values are named errors",
        unified_refusals,
    ),
    (
        "crun: a CDI device's nodes, as its spec allows them (v2's device filter)",
        || cdi_device("crun"),
    ),
    (
        "runc: a CDI device's nodes, as its spec allows them (v2's device filter)",
        || cdi_device("runc"),
    ),
    ("crun: OOMKilled through memory.events", || {
        oom_killed("crun")
    }),
    ("runc: OOMKilled through memory.events", || {
        oom_killed("runc")
    }),
    (
        "critest 1.36: the specs only v2 answers (OOM, stats, exec)",
        crate::critest::v2_specs,
    ),
    (
        "AppArmor: podscope-default for RuntimeDefault and for none, crun and runc",
        apparmor_default,
    ),
    (
        "critest 1.36: the 9 AppArmor specs",
        crate::critest::apparmor_specs,
    ),
    (
        "streams: exec -it on a terminal, attach -i, port-forward",
        crate::daemon::streams,
    ),
    (
        "logs across systemctl restart podscoped",
        crate::daemon::logs_across_restart,
    ),
    (
        "podscoped killed with SIGKILL mid-start, recovered",
        crate::daemon::killed_mid_start,
    ),
    (
        "systemd-oomd kills under a pod's memory pressure: OomdKilled",
        crate::oomd::kills_under_pressure,
    ),
    (
        "kubelet 1.26: static pods, probes, OOM restart, stats",
        || crate::kubelet::static_pods("1.26"),
    ),
    (
        "kubelet 1.36: static pods, probes, OOM restart, stats, PSI",
        || crate::kubelet::static_pods("1.36"),
    ),
    (
        "checkpoint: crictl checkpoint --export, the archive, the restore counting on",
        crate::checkpoint::crictl_checkpoint_and_restore,
    ),
    (
        "checkpoint: kubelet 1.36's checkpoint API",
        crate::checkpoint::kubelet_checkpoint,
    ),
    ("nothing left behind", nothing_left),
];

fn the_node_is_systemd_on_cgroup_v2() -> Outcome {
    let pid1 = std::fs::read_to_string("/proc/1/comm").map_err(|e| e.to_string())?;
    ensure!(pid1.trim() == "systemd", "PID 1 is {pid1}");
    let fs = sh("stat -f -c %T /sys/fs/cgroup")?;
    ensure!(fs.trim() == "cgroup2fs", "/sys/fs/cgroup is {fs}");
    let controllers = sh("cat /sys/fs/cgroup/cgroup.controllers")?;
    for c in ["cpuset", "cpu", "io", "memory", "hugetlb", "pids"] {
        ensure!(
            controllers.split_whitespace().any(|x| x == c),
            "no {c} controller: {controllers}"
        );
    }
    // podscope as its package left it: the CRI socket activated, podscoped
    // answering (D-Bus activation), both units active.
    let v = Crictl::new().run(&["version"])?;
    ensure!(v.contains("RuntimeName:  podscope"), "{v}");
    // And says which layout it found, with nothing to advise on v2.
    let info = Crictl::new().run(&["info"])?;
    ensure!(
        info.contains("\"cgroup_layout\": \"v2\"") && info.contains("\"cgroup_advice\": \"\""),
        "crictl info does not say the node is v2: {info}"
    );
    for unit in [
        "podscope-cri.socket",
        "podscope-cri.service",
        "podscoped.service",
    ] {
        let s = sh(&format!("systemctl is-active {unit} || true"))?;
        ensure!(s.trim() == "active", "{unit} is {}", s.trim());
    }
    Ok(())
}

/// Issue 41, finding 6: a container that asked for RuntimeDefault, or for
/// no profile, ran unconfined on a node with AppArmor on. podscoped.service
/// loads podscope-default at start (ExecStartPre, apparmor_parser); each
/// container's process and its execs are confined by it, and one asking
/// for Unconfined is not. On crun and runc.
fn apparmor_default() -> Outcome {
    let enabled = sh("cat /sys/module/apparmor/parameters/enabled")?;
    ensure!(
        enabled.trim() == "Y",
        "AppArmor is not on in the node: {enabled}"
    );
    let loaded = sh("cat /sys/kernel/security/apparmor/profiles")?;
    ensure!(
        loaded.lines().any(|l| l == "podscope-default (enforce)"),
        "podscope-default is not loaded:\n{loaded}"
    );
    for handler in ["crun", "runc"] {
        in_pod(&format!("apparmor-{handler}"), handler, |c, pod, pod_id| {
            // The container's own process says what confines it (PID 1 of
            // the pod's shared PID namespace is the pod's init).
            let idle = "cat /proc/self/attr/current > /tmp/own-label; \
                        trap 'exit 0' TERM; while :; do sleep 1; done";
            for (name, profile, want) in [
                ("asked", Some(0), "podscope-default (enforce)"),
                ("none", None, "podscope-default (enforce)"),
                ("unconfined", Some(1), "unconfined"),
            ] {
                let mut ctr = container_config(name, idle);
                if let Some(t) = profile {
                    ctr["linux"]["security_context"] = serde_json::json!({
                        "apparmor": { "profile_type": t }
                    });
                }
                let id = c.run_container(pod_id, &ctr, pod)?;
                let own = c.exec(&id, &["cat", "/tmp/own-label"])?;
                let exec = c.exec(&id, &["cat", "/proc/self/attr/current"])?;
                ensure!(
                    own.trim() == want && exec.trim() == want,
                    "{handler} {name}: the container's process is {own:?}, its exec {exec:?}, not {want:?}"
                );
            }
            Ok(())
        })?;
    }
    Ok(())
}

fn pull() -> Outcome {
    let c = Crictl::new();
    c.run(&["pull", crate::cri::IMAGE])?;
    let images = c.run(&["images", "-q"])?;
    ensure!(!images.is_empty(), "no image listed after the pull");
    Ok(())
}

/// Run `case` with a pod of its own (`name`, on `handler`), removed after
/// it whatever the case found; a failed removal fails the case too.
fn in_pod(
    name: &str,
    handler: &str,
    case: impl FnOnce(&Crictl, &serde_json::Value, &str) -> Outcome,
) -> Outcome {
    let c = Crictl::new();
    let pod = pod_config(name);
    let pod_id = c.runp(&pod, handler)?;
    let r = case(&c, &pod, &pod_id);
    let removed = c.remove_pod(&pod_id);
    r.and(removed)
}

/// The cgroup directory of a container's unit.
fn container_cgroup(id: &str) -> Result<String, String> {
    let cg = sh(&format!(
        "systemctl show -P ControlGroup podscope-ctr-{id}.service"
    ))?;
    ensure!(
        !cg.trim().is_empty(),
        "podscope-ctr-{id}.service has no cgroup"
    );
    Ok(format!("/sys/fs/cgroup{}", cg.trim()))
}

fn read(dir: &str, file: &str) -> Result<String, String> {
    std::fs::read_to_string(format!("{dir}/{file}"))
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{dir}/{file}: {e}"))
}

fn limits(handler: &str) -> Outcome {
    in_pod(&format!("limits-{handler}"), handler, |c, pod, pod_id| {
        let mut ctr = container_config("limited", "cat /proc/self/cgroup; exec sleep 3600");
        ctr["linux"]["resources"] = serde_json::json!({
            "memory_limit_in_bytes": 67108864,
            "cpu_period": 100000,
            "cpu_quota": 50000,
            "cpu_shares": 512,
            "cpuset_cpus": "1",
            "hugepage_limits": [{ "page_size": "2MB", "limit": 4194304 }],
            // What kubelet 1.36 sends on v2: memory.oom.group always,
            // memory.swap.max with swap (KEP-2400), memory.min and
            // memory.high with MemoryQoS; and a pids limit.
            "unified": {
                "memory.oom.group": "1",
                "memory.high": "50331648",
                "memory.min": "8388608",
                "memory.swap.max": "0",
                "pids.max": "64"
            }
        });
        let id = c.run_container(pod_id, &ctr, pod)?;
        let cg = container_cgroup(&id)?;
        let want = [
            ("memory.max", "67108864"),
            ("cpu.max", "50000 100000"),
            // runc's and the CRI's conversion of 512 shares.
            ("cpu.weight", "20"),
            ("cpuset.cpus", "1"),
            ("hugetlb.2MB.max", "4194304"),
            ("pids.max", "64"),
            ("memory.oom.group", "1"),
            ("memory.high", "50331648"),
            ("memory.min", "8388608"),
            ("memory.swap.max", "0"),
        ];
        for (file, value) in want {
            let got = read(&cg, file)?;
            ensure!(got == value, "{file} is {got}, not {value} ({cg})");
        }
        // A cgroup namespace of its own: its cgroup is its root, for its
        // own process and for an exec's.
        let own = wait_for(Duration::from_secs(20), || {
            c.run(&["logs", &id]).ok().filter(|s| !s.is_empty())
        })
        .unwrap_or_default();
        ensure!(
            own.trim() == "0::/",
            "/proc/self/cgroup in the container reads {own}"
        );
        let exec = c.exec(&id, &["cat", "/proc/self/cgroup"])?;
        ensure!(
            exec.trim() == "0::/",
            "/proc/self/cgroup in an exec reads {exec}"
        );
        // Pressure (PSI) in the CRI's stats, as crictl 1.36 (whose CRI
        // has the fields) shows them, for the container and its pod.
        let stats = sh(&format!(
            "crictl-1.36 --runtime-endpoint {e} stats -o json --id {id}; crictl-1.36 --runtime-endpoint {e} statsp -o json --id {pod_id}",
            e = crate::cri::ENDPOINT
        ))?;
        ensure!(
            stats.matches("\"psi\"").count() >= 4,
            "no PSI in crictl stats and statsp: {stats}"
        );
        // An exec cut at its timeout leaves no command behind, though it
        // ran in the container's cgroup, out of its unit's reach.
        let cut = c.run(&["exec", "-s", "--timeout", "2", &id, "sleep", "61"]);
        ensure!(
            cut.is_err(),
            "an exec of sleep 61 with a 2 s timeout ended well"
        );
        let gone = wait_for(Duration::from_secs(10), || {
            sh("pgrep -f 'sleep 6[1]' || true")
                .ok()
                .filter(|p| p.trim().is_empty())
        });
        ensure!(gone.is_some(), "the exec's command outlived its timeout");
        // UpdateContainerResources changes the files.
        c.run(&[
            "update",
            "--memory",
            "100663296",
            "--cpu-quota",
            "20000",
            "--cpu-share",
            "1024",
            "--cpuset-cpus",
            "0",
            &id,
        ])?;
        for (file, value) in [
            ("memory.max", "100663296"),
            ("cpu.max", "20000 100000"),
            ("cpu.weight", "39"),
            ("cpuset.cpus", "0"),
            // An update is the whole set, as kubelet sends it: what it
            // does not name goes back to none.
            ("pids.max", "max"),
            ("memory.high", "max"),
        ] {
            let got = read(&cg, file)?;
            ensure!(got == value, "after update, {file} is {got}, not {value}");
        }
        Ok(())
    })
}

/// A privileged container keeps the host's cgroup namespace, as
/// containerd and CRI-O give it: its /proc/self/cgroup names its unit.
fn privileged_cgroupns() -> Outcome {
    let c = Crictl::new();
    let mut pod = pod_config("privileged");
    pod["linux"]["security_context"]["privileged"] = serde_json::json!(true);
    let pod_id = c.runp(&pod, "crun")?;
    let r = (|| {
        let mut ctr = container_config("host-cgroupns", "cat /proc/self/cgroup; exec sleep 3600");
        ctr["linux"]["security_context"] = serde_json::json!({ "privileged": true });
        let id = c.run_container(&pod_id, &ctr, &pod)?;
        let seen = wait_for(Duration::from_secs(20), || {
            c.run(&["logs", &id]).ok().filter(|s| !s.is_empty())
        })
        .unwrap_or_default();
        ensure!(
            seen.trim().starts_with("0::/kubepods.slice/")
                && seen.trim().ends_with(&format!("podscope-ctr-{id}.service")),
            "/proc/self/cgroup in a privileged container reads {seen}"
        );
        Ok(())
    })();
    r.and(c.remove_pod(&pod_id))
}

/// A key of no controller the node enables is refused at create, a value
/// the kernel refuses at start: InvalidArgument, the key named, and
/// nothing running.
fn unified_refusals() -> Outcome {
    in_pod("unified-bad", "crun", |c, pod, pod_id| {
        let mut ctr = container_config("bad-key", "sleep 3600");
        ctr["linux"]["resources"]["unified"] = serde_json::json!({ "nosuch.file": "1" });
        let e = c.run_container(pod_id, &ctr, pod).unwrap_err();
        ensure!(
            e.contains("InvalidArgument") && e.contains("nosuch.file"),
            "a key of no controller: {e}"
        );
        let listed = c.run(&["ps", "-a", "-q", "--pod", pod_id])?;
        ensure!(
            listed.is_empty(),
            "the refused create left containers: {listed}"
        );
        let mut ctr = container_config("bad-value", "sleep 3600");
        ctr["linux"]["resources"]["unified"] = serde_json::json!({ "memory.oom.group": "7" });
        let e = c.run_container(pod_id, &ctr, pod).unwrap_err();
        ensure!(
            e.contains("InvalidArgument")
                && e.contains("memory.oom.group")
                && e.contains("Invalid argument"),
            "a value the kernel refuses: {e}"
        );
        let running = c.run(&["ps", "-q", "--pod", pod_id])?;
        ensure!(
            running.is_empty(),
            "a container runs after the refusal: {running}"
        );
        Ok(())
    })
}

/// A CDI device (CRI's CDI_devices) on cgroup v2, where the device cgroup
/// is a BPF program systemd attaches from the unit's DeviceAllow= (and runc
/// from config.json's rules): a node of /dev/fuse's numbers opens
/// read-write, one of /dev/loop-control's the spec grants `r` opens for
/// reading only (neither is allowed by default). The spec and its nodes
/// are removed after.
fn cdi_device(handler: &str) -> Outcome {
    let dir = format!("/run/node-suite-cdi-{handler}");
    let spec = format!("/var/run/cdi/node-suite-{handler}.json");
    let made = sh(&format!(
        "mkdir -p {dir} /var/run/cdi && mknod -m 0666 {dir}/fuse c 10 229 && \
         mknod -m 0666 {dir}/loopctl c 10 237"
    ))
    .and_then(|_| {
        let text = serde_json::json!({
            "cdiVersion": "0.6.0",
            "kind": format!("node-suite.example/{handler}"),
            "devices": [{
                "name": "dev0",
                "containerEdits": {
                    "env": ["NODE_SUITE_DEV=dev0"],
                    "deviceNodes": [
                        {"path": "/dev/example-rw", "hostPath": format!("{dir}/fuse")},
                        {"path": "/dev/example-ro", "hostPath": format!("{dir}/loopctl"),
                         "permissions": "r"}
                    ]
                }
            }]
        });
        std::fs::write(&spec, text.to_string()).map_err(|e| format!("{spec}: {e}"))
    });
    let r = made.and_then(|()| {
        in_pod(&format!("cdi-{handler}"), handler, |c, pod, pod_id| {
            let mut ctr = container_config(
                "cdi",
                "(exec 3<>/dev/example-rw) && echo rw=ok; \
                 (exec 3</dev/example-ro) && echo ro-read=ok; \
                 (exec 3<>/dev/example-ro) 2>/dev/null || echo ro-write=denied; \
                 echo env=$NODE_SUITE_DEV",
            );
            ctr["CDI_devices"] =
                serde_json::json!([{ "name": format!("node-suite.example/{handler}=dev0") }]);
            let id = c.run_container(pod_id, &ctr, pod)?;
            let exited = wait_for(Duration::from_secs(60), || {
                c.state(&id).ok().filter(|(s, _)| s == "CONTAINER_EXITED")
            });
            ensure!(exited.is_some(), "{id} did not exit within 60 s");
            let out = c.run(&["logs", &id])?;
            let lines: Vec<&str> = out.lines().collect();
            ensure!(
                lines == ["rw=ok", "ro-read=ok", "ro-write=denied", "env=dev0"],
                "{handler}: the container saw {lines:?}"
            );
            Ok(())
        })
    });
    let cleaned = sh(&format!("rm -rf {dir} {spec}")).map(drop);
    r.and(cleaned)
}

fn oom_killed(handler: &str) -> Outcome {
    in_pod(&format!("oom-{handler}"), handler, |c, pod, pod_id| {
        // Two processes: with memory.oom.group (kubelet's default on v2)
        // the whole container goes, the sleeper too.
        let mut ctr = container_config("hog", "sleep 3600 & tail /dev/zero");
        ctr["linux"]["resources"] = serde_json::json!({
            "memory_limit_in_bytes": 33554432,
            "unified": { "memory.oom.group": "1" }
        });
        let id = c.run_container(pod_id, &ctr, pod)?;
        let state = wait_for(Duration::from_secs(60), || {
            c.state(&id).ok().filter(|(s, _)| s == "CONTAINER_EXITED")
        });
        let Some((_, reason)) = state else {
            return Err(format!("{id} did not exit within 60 s"));
        };
        ensure!(reason == "OOMKilled", "{id} exited with reason {reason:?}");
        Ok(())
    })
}

fn nothing_left() -> Outcome {
    // kubelet's pod slices (cgroup_parent) are kubelet's to remove.
    let list = "systemctl list-units --all --plain --no-legend 'podscope-*' 'kubepods-*' | grep -v '^podscope-cri\\|^podscope\\.slice\\|^podscoped\\|^kubepods-.*\\.slice' || true";
    let units = sh(list)?;
    ensure!(units.trim().is_empty(), "units left: {units}");
    let pods = Crictl::new().run(&["pods", "-q"])?;
    ensure!(pods.is_empty(), "pods left: {pods}");
    Ok(())
}
