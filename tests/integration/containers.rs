//! Containers against the real systemd, crun and runc: each one a transient
//! service in its pod's slice, its output in the CRI log file, its exit as
//! systemd recorded it.

use podscope_api::container::{ContainerFilter, ContainerOptions, Resources, Security};
use podscope_api::domain::container::ContainerState;
use podscope_api::domain::NamespaceMode;
use podscope_api::image::PullOptions;
use podscope_api::CreateOptions;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::Duration;

/// The busybox image critest's specs run (served by the harness registry
/// through its docker.io mirror).
pub const BUSYBOX: &str = "docker.io/library/busybox:latest";

pub async fn pull_busybox(m: &Client) {
    m.pull_image(BUSYBOX, &PullOptions::default())
        .await
        .unwrap_or_else(|e| panic!("pull {BUSYBOX}: {e}"));
}

/// A ready pod (pod network, `handler` its runtime) with a log directory
/// of its own; (id, log directory).
pub async fn log_pod(m: &Client, prefix: &str, handler: &str) -> (String, String) {
    let logs = format!("/var/log/pods/{}", uniq(prefix));
    let o = CreateOptions {
        log_directory: Some(logs.clone()),
        runtime_handler: (!handler.is_empty()).then(|| handler.to_owned()),
        ..Default::default()
    };
    (create_started(m, prefix, o).await, logs)
}

pub fn sh_cmd(script: &str) -> ContainerOptions {
    ContainerOptions {
        command: vec!["/bin/sh".into(), "-c".into(), script.into()],
        ..Default::default()
    }
}

/// Create and start; the container's id.
pub async fn run(m: &Client, pod: &str, name: &str, o: ContainerOptions) -> String {
    let (id, _) = m
        .create_container(pod, name, 0, BUSYBOX, &o)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    m.start_container(&id)
        .await
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    id
}

/// A started container that ignores SIGTERM (only SIGKILL ends it), once
/// it has written its first line to `<logs>/stubborn.log`; its id.
pub async fn run_ignoring_term(m: &Client, pod: &str, logs: &str) -> String {
    let id = run(
        m,
        pod,
        "stubborn",
        ContainerOptions {
            log_path: "stubborn.log".into(),
            ..sh_cmd("trap '' TERM; echo ready; while :; do sleep 0.1; done")
        },
    )
    .await;
    wait_lines(&format!("{logs}/stubborn.log"), 1, Duration::from_secs(10)).await;
    id
}

pub async fn wait_container(m: &Client, id: &str, want: ContainerState, timeout: Duration) {
    let t0 = std::time::Instant::now();
    loop {
        let s = m.container_status(id).await.unwrap();
        if s.state == want {
            return;
        }
        assert!(
            t0.elapsed() < timeout,
            "container {id} is {:?}, not {want:?}, after {timeout:?}: {s:?}",
            s.state
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The CRI log file's records as (stream, tag, text).
pub fn log_records(path: &str) -> Vec<(String, String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let ts = parts.next().unwrap();
            assert!(
                ts.ends_with('Z') && ts.contains('T'),
                "timestamp {ts:?} in {l:?}"
            );
            (
                parts.next().unwrap_or("").to_owned(),
                parts.next().unwrap_or("").to_owned(),
                parts.next().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

async fn exits_are_recorded_with_their_output(handler: &str) {
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-exit", handler).await;
    let o = ContainerOptions {
        log_path: "exit/0.log".into(),
        ..sh_cmd("echo hello; echo oops >&2; printf 'no newline'; exit 3")
    };
    let id = run(&m, &pod, "exit", o).await;
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!((s.exit_code, s.reason.as_str()), (3, "Error"), "{s:?}");
    assert!(s.finished_at >= s.started_at && s.started_at > 0, "{s:?}");
    assert_eq!(s.log_path, format!("{logs}/exit/0.log"));
    let recs = log_records(&s.log_path);
    assert!(
        recs.contains(&("stdout".into(), "F".into(), "hello".into())),
        "{recs:?}"
    );
    assert!(
        recs.contains(&("stderr".into(), "F".into(), "oops".into())),
        "{recs:?}"
    );
    assert!(
        recs.contains(&("stdout".into(), "F".into(), "no newline".into())),
        "{recs:?}"
    );
    // systemd says the same, and keeps the failed unit until removal.
    let show = sh(&format!(
        "systemctl show {} -p Result -p ExecMainStatus",
        s.unit
    ));
    assert!(show.contains("ExecMainStatus=3"), "{show}");
    m.remove_container(&id).await.unwrap();
    assert_eq!(
        sh_status(&format!("systemctl status {} >/dev/null 2>&1", s.unit)),
        4,
        "no unit is left behind"
    );
    m.remove(&pod).await.unwrap();
}

/// A container whose process is not root's: the runtime's start (run by
/// the daemon, whose own sandbox is narrow) must still reach it, and an
/// exec runs as the same user.
async fn a_container_of_another_user_starts_and_execs_as_it(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-user", handler).await;
    let o = ContainerOptions {
        log_path: "user/0.log".into(),
        security: Security {
            run_as_user: Some(1000),
            run_as_group: Some(1000),
            ..Default::default()
        },
        ..sh_cmd("id -u; trap 'exit 0' TERM; while :; do sleep 0.1; done")
    };
    let id = run(&m, &pod, "user", o).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.state, ContainerState::Running, "{s:?}");
    wait_lines(&format!("{logs}/user/0.log"), 1, Duration::from_secs(10)).await;
    assert_eq!(
        whole_lines(&strict_records(&format!("{logs}/user/0.log")), "stdout"),
        vec!["1000".to_owned()]
    );
    let out = m
        .exec_sync(&id, &["id".into(), "-u".into()], 10_000)
        .await
        .unwrap();
    assert_eq!(
        (out.exit_code, String::from_utf8_lossy(&out.stdout).trim()),
        (0, "1000")
    );
    m.stop_container(&id, 10).await.unwrap();
    m.remove(&pod).await.unwrap();
}

#[tokio::test]
async fn a_container_of_another_user_starts_and_execs_as_it_crun() {
    a_container_of_another_user_starts_and_execs_as_it("crun").await;
}

#[tokio::test]
async fn a_container_of_another_user_starts_and_execs_as_it_runc() {
    a_container_of_another_user_starts_and_execs_as_it("runc").await;
}

#[tokio::test]
async fn exits_are_recorded_with_their_output_crun() {
    exits_are_recorded_with_their_output("crun").await;
}

#[tokio::test]
async fn exits_are_recorded_with_their_output_runc() {
    exits_are_recorded_with_their_output("runc").await;
}

/// RemoveContainer leaves nothing of the runtime's: not its state
/// directory, and for runc not the v1 cgroups it made where systemd does
/// not. In a pod's shared PID namespace (crictl's default, and kubelet's
/// for `shareProcessNamespace`), runc's own `delete` in the unit's
/// ExecStopPost kills every process of the cgroup, itself among them, so
/// the daemon finishes the job.
async fn removal_leaves_no_runtime_state(handler: &str, pid: NamespaceMode) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let pod = create_started(
        &m,
        "ctr-state",
        CreateOptions {
            runtime_handler: Some(handler.to_owned()),
            pid_namespace: Some(pid),
            ..Default::default()
        },
    )
    .await;
    let o = ContainerOptions {
        security: Security {
            pid_namespace: pid,
            ..Default::default()
        },
        ..sh_cmd("exec sleep 600")
    };
    let id = run(&m, &pod, "sleeper", o).await;
    let state = format!("/run/{handler}/{id}");
    assert!(
        std::path::Path::new(&state).is_dir(),
        "{state} while it runs"
    );
    let cgroups: Vec<String> = match std::fs::read(format!("{state}/state.json")) {
        Ok(json) => {
            let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
            v["cgroup_paths"]
                .as_object()
                .unwrap()
                .values()
                .map(|d| d.as_str().unwrap().to_owned())
                .collect()
        }
        Err(_) => Vec::new(),
    };
    assert_eq!(
        cgroups.is_empty(),
        handler == "crun",
        "runc's state names its cgroups: {cgroups:?}"
    );
    m.stop_container(&id, 0).await.unwrap();
    m.remove_container(&id).await.unwrap();
    assert!(
        !std::path::Path::new(&state).exists(),
        "{state} outlived RemoveContainer"
    );
    let left: Vec<&String> = cgroups
        .iter()
        .filter(|d| std::path::Path::new(d).exists())
        .collect();
    assert!(left.is_empty(), "cgroups left: {left:?}");
    m.remove(&pod).await.unwrap();
    // The pod's slice goes with it from every hierarchy, those runc made
    // it in (freezer, cpuset, net_cls, perf_event) among them.
    let slices = sh(&format!(
        "find /sys/fs/cgroup -mindepth 2 -type d -name 'podscope-{pod}.slice'"
    ));
    assert!(
        slices.trim().is_empty(),
        "the pod's slice outlived it: {slices}"
    );
}

/// A pod's Remove removes its containers, and their objects leave the bus
/// with them (they stayed exported, each with its record in memory).
#[tokio::test(flavor = "multi_thread")]
async fn a_pods_remove_takes_its_containers_objects_off_the_bus() {
    let _cleanup = Cleanup::new();
    let (m, conn) = manager().await;
    pull_busybox(&m).await;
    let pod = create_started(&m, "objects", host_net()).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(run(&m, &pod, &format!("c{i}"), sh_cmd("exec sleep 600")).await);
    }
    let exported = |id: &str| {
        let conn = conn.clone();
        let path =
            podscope_api::container_path(&podscope_api::domain::ContainerId::parse(id).unwrap());
        async move {
            conn.call_method(
                Some(podscope_api::BUS_NAME),
                path.as_str(),
                Some("org.freedesktop.DBus.Properties"),
                "GetAll",
                &(podscope_api::CONTAINER_INTERFACE,),
            )
            .await
            .is_ok()
        }
    };
    for id in &ids {
        assert!(exported(id).await, "{id} is exported while it runs");
    }
    m.stop(&pod).await.unwrap();
    m.remove(&pod).await.unwrap();
    let t0 = std::time::Instant::now();
    for id in &ids {
        while exported(id).await {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "container {id} is still exported after its pod's Remove"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn removal_leaves_no_runtime_state_crun() {
    removal_leaves_no_runtime_state("crun", NamespaceMode::Container).await;
    removal_leaves_no_runtime_state("crun", NamespaceMode::Pod).await;
}

#[tokio::test]
async fn removal_leaves_no_runtime_state_runc() {
    removal_leaves_no_runtime_state("runc", NamespaceMode::Container).await;
    removal_leaves_no_runtime_state("runc", NamespaceMode::Pod).await;
}

#[tokio::test]
async fn a_running_container_is_a_unit_in_its_pods_slice() {
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-run", "").await;
    let o = ContainerOptions {
        resources: Resources {
            memory_limit_in_bytes: 64 << 20,
            ..Default::default()
        },
        ..sh_cmd("trap 'exit 0' TERM; while true; do sleep 0.1; done")
    };
    let id = run(&m, &pod, "runner", o).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.state, ContainerState::Running);
    let pod_status = m.status(&pod).await.unwrap();
    let show = sh(&format!(
        "systemctl show {} -p MainPID -p Slice -p MemoryMax -p ActiveState",
        s.unit
    ));
    assert!(show.contains(&format!("MainPID={}", s.main_pid)), "{show}");
    assert!(
        show.contains(&format!("Slice={}", pod_status.slice)),
        "{show}"
    );
    assert!(
        show.contains(&format!("MemoryMax={}", 64u64 << 20)),
        "{show}"
    );
    assert!(
        pod_status.slice.starts_with("podscope-") && pod_status.slice.ends_with(".slice"),
        "a pod without a cgroup parent has a slice of its own: {}",
        pod_status.slice
    );
    // The container joined the pod's network namespace.
    assert_eq!(ns_of(s.main_pid, "net"), ns_of(pod_status.init_pid, "net"));
    let out = m
        .exec_sync(
            &id,
            &[
                "/bin/sh".into(),
                "-c".into(),
                "echo hi; echo err >&2; exit 7".into(),
            ],
            10_000,
        )
        .await
        .unwrap();
    assert_eq!(
        (out.exit_code, out.stdout.as_slice(), out.stderr.as_slice()),
        (7, &b"hi\n"[..], &b"err\n"[..])
    );
    m.stop_container(&id, 10).await.unwrap();
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.exit_code, s.reason.as_str()),
        (ContainerState::Exited, 0, "Completed")
    );
    let listed = m
        .list_containers(&ContainerFilter {
            pod_id: Some(pod.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    // Removing the pod removes its containers.
    m.remove(&pod).await.unwrap();
    assert_eq!(
        kind(m.container_status(&id).await.unwrap_err()),
        ErrorKind::NotFound
    );
}

#[tokio::test]
async fn a_container_needs_a_ready_pod_and_a_present_image() {
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-bad", "").await;
    let e = m
        .create_container(&pod, "x", 0, "registry.example/not/here:1", &sh_cmd("true"))
        .await
        .unwrap_err();
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::NotFound, "{msg}");
    assert!(msg.contains("not/here"), "{msg}");
    let e = m
        .create_container(
            &pod,
            "x",
            0,
            BUSYBOX,
            &ContainerOptions {
                security: Security {
                    run_as_username: "nobody-here".into(),
                    ..Default::default()
                },
                ..sh_cmd("true")
            },
        )
        .await
        .unwrap_err();
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.contains("nobody-here"), "{msg}");
    // A command not in the image: the runtime's own words.
    let (id, _) = m
        .create_container(
            &pod,
            "nocmd",
            0,
            BUSYBOX,
            &ContainerOptions {
                command: vec!["/bin/not-there".into()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let (k, msg) = classify(&m.start_container(&id).await.unwrap_err());
    assert_eq!(k, ErrorKind::RuntimeFailed, "{msg}");
    assert!(msg.contains("not-there"), "{msg}");
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.reason.as_str()),
        (ContainerState::Exited, "StartError")
    );
    m.stop(&pod).await.unwrap();
    let (k, msg) = classify(
        &m.create_container(&pod, "late", 0, BUSYBOX, &sh_cmd("true"))
            .await
            .unwrap_err(),
    );
    assert_eq!(k, ErrorKind::InvalidState, "{msg}");
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn container_interface_xml_matches_live_introspection() {
    let (m, conn) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-xml", "").await;
    let (_, path) = m
        .create_container(&pod, "xml", 0, BUSYBOX, &sh_cmd("true"))
        .await
        .unwrap();
    let live = introspect(&conn, path.as_str()).await;
    let shipped = std::fs::read_to_string("/usr/share/dbus-1/interfaces/org.podscope.Sandbox1.xml")
        .expect("make install ships the interface XML");
    let iface = podscope_api::CONTAINER_INTERFACE;
    let want = interface_tags(&shipped, iface);
    assert!(!want.is_empty(), "{iface} missing from the shipped XML");
    assert_eq!(
        want,
        interface_tags(&live, iface),
        "dbus/org.podscope.Sandbox1.xml differs from the live {iface}"
    );
    m.remove(&pod).await.unwrap();
}

// ---- helpers shared by the container_* test files ----

/// One record of a CRI log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub ts: String,
    pub stream: String,
    pub tag: String,
    pub text: String,
}

/// `2026-11-25T03:41:48.123456789Z`: RFC 3339, UTC, nine fractional digits
/// (what kubelet's parser takes).
pub fn is_rfc3339_nano(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() == 30
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            29 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// The records of a CRI log file (none if it is missing), every line
/// checked: `<RFC3339Nano> stdout|stderr F|P <text>`. Panics naming the
/// first line that is not a record.
pub fn strict_records(path: &str) -> Vec<Record> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{path}: its last record has no newline"
    );
    parse_records(path, &text)
}

/// The records of a log file a container is still writing: its whole
/// lines only. A reader racing the writer's write(2) can see part of it
/// (Linux copies a write into the page cache page by page, with no lock a
/// read waits for), so the tail after the last newline is not judged yet.
pub fn live_records(path: &str) -> Vec<Record> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let whole = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&bytes[..0], |i| &bytes[..=i]);
    parse_records(path, &String::from_utf8_lossy(whole))
}

fn parse_records(path: &str, text: &str) -> Vec<Record> {
    text.lines()
        .enumerate()
        .map(|(n, l)| {
            let mut p = l.splitn(4, ' ');
            let (ts, stream, tag) = (
                p.next().unwrap_or(""),
                p.next().unwrap_or(""),
                p.next().unwrap_or(""),
            );
            let text = p.next();
            assert!(
                is_rfc3339_nano(ts)
                    && matches!(stream, "stdout" | "stderr")
                    && matches!(tag, "F" | "P")
                    && text.is_some(),
                "{path}:{}: not a CRI log record: {l:?}",
                n + 1
            );
            Record {
                ts: ts.into(),
                stream: stream.into(),
                tag: tag.into(),
                text: text.unwrap_or("").into(),
            }
        })
        .collect()
}

/// The whole lines of one stream: each run of P records joined to the F
/// that ends it. A run of P records with no F yet is left out.
pub fn whole_lines(recs: &[Record], stream: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut part = String::new();
    for r in recs.iter().filter(|r| r.stream == stream) {
        part.push_str(&r.text);
        if r.tag == "F" {
            out.push(std::mem::take(&mut part));
        }
    }
    out
}

/// What a log of numbered lines (`<prefix> <n> ...`, n from 1) holds.
#[derive(Debug, Default)]
pub struct Numbered {
    /// The numbers in the order they were logged.
    pub numbers: Vec<u64>,
    /// Lines that are not `<prefix> <n> ...`.
    pub malformed: Vec<String>,
    /// Numbers below the highest that never came.
    pub missing: Vec<u64>,
    /// Numbers logged more than once.
    pub duplicated: Vec<u64>,
    /// Numbers logged after a higher one.
    pub out_of_order: Vec<u64>,
}

pub fn numbered(lines: &[String], prefix: &str) -> Numbered {
    let mut n = Numbered::default();
    for l in lines {
        let mut w = l.split(' ');
        match (w.next(), w.next().and_then(|x| x.parse::<u64>().ok())) {
            (Some(p), Some(k)) if p == prefix => n.numbers.push(k),
            _ => n.malformed.push(l.clone()),
        }
    }
    let max = n.numbers.iter().copied().max().unwrap_or(0);
    let mut seen = vec![0u32; max as usize + 1];
    let mut high = 0;
    for &k in &n.numbers {
        seen[k as usize] += 1;
        if k < high {
            n.out_of_order.push(k);
        }
        high = high.max(k);
    }
    n.missing = (1..=max).filter(|k| seen[*k as usize] == 0).collect();
    n.duplicated = (1..=max).filter(|k| seen[*k as usize] > 1).collect();
    n
}

/// A shell that writes numbered lines (`n <i> <padding>`) to stdout as
/// fast as it can, pausing 20 ms every 50 lines, until SIGTERM (then exit 0).
pub const NUMBERED_WRITER: &str = "trap 'exit 0' TERM; i=0; while :; do i=$((i+1)); \
     echo \"n $i ................................................................\"; \
     [ $((i % 50)) -eq 0 ] && sleep 0.02; done";

/// How many whole stdout lines the log at `path`, maybe still being
/// written, holds.
pub fn stdout_lines(path: &str) -> usize {
    whole_lines(&live_records(path), "stdout").len()
}

/// Wait until the log at `path` holds at least `n` whole stdout lines.
pub async fn wait_lines(path: &str, n: usize, timeout: Duration) {
    let t0 = std::time::Instant::now();
    loop {
        let have = stdout_lines(path);
        if have >= n {
            return;
        }
        assert!(
            t0.elapsed() < timeout,
            "{path} has {have} stdout lines, not {n}, after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Create from `image` and start; the container's id.
pub async fn run_image(
    m: &Client,
    pod: &str,
    name: &str,
    image: &str,
    o: ContainerOptions,
) -> String {
    let (id, _) = m
        .create_container(pod, name, 0, image, &o)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    m.start_container(&id)
        .await
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    id
}

/// `systemctl show -P <prop> <unit>`, trimmed.
pub fn unit_prop(unit: &str, prop: &str) -> String {
    sh(&format!("systemctl show -P {prop} {unit}"))
        .trim()
        .to_owned()
}

/// Where container `id` is still on the node, besides its record and
/// bundle: its unit (loaded, in any state), a mount naming it, its runtime
/// directory. Empty when there is nothing.
pub fn container_traces(id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let units = sh("systemctl list-units --all --plain --no-legend --no-pager 'podscope-ctr-*'");
    out.extend(
        units
            .lines()
            .filter(|l| l.contains(id))
            .map(|l| format!("unit: {l}")),
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    out.extend(
        mounts
            .lines()
            .filter(|l| l.contains(id))
            .map(|l| format!("mount: {l}")),
    );
    let run = format!("/run/podscope/containers/{id}");
    if std::path::Path::new(&run).exists() {
        out.push(format!("run directory: {run}"));
    }
    out
}

/// Everything of containers on the node: units `podscope-ctr-*` and
/// `podscope-exec-*`, mounts under a container's bundle, runtime
/// directories and bundles. For "a failed call changed nothing".
pub fn all_container_traces() -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let units = sh(
        "systemctl list-units --all --plain --no-legend --no-pager 'podscope-ctr-*' 'podscope-exec-*'",
    );
    out.extend(
        units
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(|u| format!("unit {u}")),
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    out.extend(
        mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|p| p.starts_with("/var/lib/podscope/containers/"))
            .map(|p| format!("mount {p}")),
    );
    for dir in ["/run/podscope/containers", "/var/lib/podscope/containers"] {
        if let Ok(rd) = std::fs::read_dir(dir) {
            out.extend(
                rd.flatten()
                    .map(|e| format!("{dir}/{}", e.file_name().to_string_lossy())),
            );
        }
    }
    out
}

/// The bundle of container `id` (its checkpoint, config.json and root).
pub fn bundle_dir(id: &str) -> String {
    format!("/var/lib/podscope/containers/{id}")
}
