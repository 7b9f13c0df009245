//! Devices and terminals: a plain container has the standard devices and
//! no way to the host's disks, a CRI device is there under its own name,
//! and a TTY container gets a terminal whose output reaches its log.

use crate::containers::*;
use podscope_api::container::{ContainerOptions, Device};
use podscope_api::domain::container::ContainerState;
use podscope_test_support::harness::*;
use std::time::Duration;

/// The host's first disk (not a loop, RAM or zram device) as
/// (name, major, minor), from /sys/block.
fn host_disk() -> (String, u32, u32) {
    let mut disks: Vec<(String, u32, u32)> = std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if ["loop", "ram", "zram", "nbd", "sr"]
                .iter()
                .any(|p| name.starts_with(p))
            {
                return None;
            }
            let dev = std::fs::read_to_string(e.path().join("dev")).ok()?;
            let (a, b) = dev.trim().split_once(':')?;
            Some((name, a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    disks.sort();
    disks
        .into_iter()
        .next()
        .expect("the host has a disk under /sys/block")
}

/// A script that makes a node for the host's disk and tries to read it:
/// prints `mknod=<rc>` and `read=<rc>`, errors on stderr.
fn disk_probe() -> String {
    let (_, major, minor) = host_disk();
    format!(
        "mknod /tmp/disk b {major} {minor}; echo mknod=$?; \
         head -c 512 /tmp/disk >/dev/null; echo read=$?"
    )
}

/// The probe's verdict from its stdout and stderr: the disk could not be
/// read, and the kernel said EPERM (at mknod, or at open).
fn assert_disk_denied(out: &str, err: &str) {
    assert!(
        out.lines().any(|l| l.starts_with("read=") && l != "read=0"),
        "the host's disk was read: {out} {err}"
    );
    assert!(
        err.contains("Operation not permitted"),
        "denied with EPERM: {out} {err}"
    );
}

async fn a_plain_container_cannot_open_a_host_disk_but_has_the_standard_devices(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-dev", handler).await;
    let script = format!(
        "{}; echo x > /dev/null && echo null=ok; \
         echo zero=$(head -c 4 /dev/zero | wc -c); \
         echo urandom=$(head -c 4 /dev/urandom | wc -c); \
         echo full=$(echo x 2>&1 > /dev/full | grep -c 'No space')",
        disk_probe()
    );
    let o = ContainerOptions {
        log_path: "dev.log".into(),
        ..sh_cmd(&script)
    };
    let id = run(&m, &pod, "dev", o).await;
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let recs = strict_records(&format!("{logs}/dev.log"));
    let out = whole_lines(&recs, "stdout").join("\n");
    let err = whole_lines(&recs, "stderr").join("\n");
    assert_disk_denied(&out, &err);
    for want in ["null=ok", "zero=4", "urandom=4", "full=1"] {
        assert!(out.lines().any(|l| l == want), "{want} in {out} / {err}");
    }
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_container_cannot_open_a_host_disk_but_has_the_standard_devices_crun() {
    a_plain_container_cannot_open_a_host_disk_but_has_the_standard_devices("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_container_cannot_open_a_host_disk_but_has_the_standard_devices_runc() {
    a_plain_container_cannot_open_a_host_disk_but_has_the_standard_devices("runc").await;
}

/// ExecSync runs in the container as the container runs: a command
/// exec'd into a plain container is no freer with the host's devices.
async fn an_exec_in_a_plain_container_cannot_open_a_host_disk(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-dev-exec", handler).await;
    let id = run(
        &m,
        &pod,
        "dev",
        sh_cmd("trap 'exit 0' TERM; while :; do sleep 0.1; done"),
    )
    .await;
    let r = m
        .exec_sync(&id, &["/bin/sh".into(), "-c".into(), disk_probe()], 10_000)
        .await
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr),
    );
    assert_disk_denied(&out, &err);
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exec_in_a_plain_container_cannot_open_a_host_disk_crun() {
    an_exec_in_a_plain_container_cannot_open_a_host_disk("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exec_in_a_plain_container_cannot_open_a_host_disk_runc() {
    an_exec_in_a_plain_container_cannot_open_a_host_disk("runc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cri_device_is_there_under_its_container_path() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-mynull", "").await;
    let o = ContainerOptions {
        log_path: "mynull.log".into(),
        devices: vec![Device {
            container_path: "/dev/mynull".into(),
            host_path: "/dev/null".into(),
            permissions: "rwm".into(),
        }],
        ..sh_cmd(
            "stat -c 'type=%F major=%t minor=%T' /dev/mynull; \
             echo x > /dev/mynull && echo write=ok; \
             echo read=$(head -c 10 /dev/mynull | wc -c)",
        )
    };
    let id = run(&m, &pod, "mynull", o).await;
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let recs = strict_records(&format!("{logs}/mynull.log"));
    let out = whole_lines(&recs, "stdout");
    assert_eq!(
        out,
        [
            "type=character special file major=1 minor=3",
            "write=ok",
            "read=0"
        ],
        "stderr: {:?}",
        whole_lines(&recs, "stderr")
    );
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.exit_code, 0, "{s:?}");
    m.remove(&pod).await.unwrap();
}

async fn a_tty_container_gets_a_terminal_and_its_output_reaches_the_log(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-tty", handler).await;
    let o = ContainerOptions {
        log_path: "tty.log".into(),
        tty: true,
        // It exits at once: its output must not be lost with its terminal.
        ..sh_cmd("tty; [ -t 1 ] && echo stdout-is-a-tty; echo hello from tty")
    };
    let id = run(&m, &pod, "tty", o).await;
    let s = m.container_status(&id).await.unwrap();
    assert!(s.tty, "{s:?}");
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let recs = strict_records(&format!("{logs}/tty.log"));
    // A terminal ends lines with CR LF.
    let lines: Vec<String> = whole_lines(&recs, "stdout")
        .into_iter()
        .map(|l| l.trim_end_matches('\r').to_owned())
        .collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("/dev/pts/") && l.len() > "/dev/pts/".len()),
        "`tty` names a pseudo-terminal: {lines:?}"
    );
    assert_eq!(
        lines[1..],
        ["stdout-is-a-tty", "hello from tty"],
        "{lines:?}"
    );
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.exit_code, 0, "{s:?}");
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tty_container_gets_a_terminal_and_its_output_reaches_the_log_crun() {
    a_tty_container_gets_a_terminal_and_its_output_reaches_the_log("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tty_container_gets_a_terminal_and_its_output_reaches_the_log_runc() {
    a_tty_container_gets_a_terminal_and_its_output_reaches_the_log("runc").await;
}
