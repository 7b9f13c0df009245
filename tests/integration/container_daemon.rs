//! Containers across the daemon: restarted, stopped for seconds, killed
//! with SIGKILL while containers write; an exit while it is down; recovery
//! of running containers after a kill.

use crate::containers::*;
use podscope_api::container::{ContainerFilter, ContainerOptions, Mount};
use podscope_api::domain::container::ContainerState;
use podscope_test_support::harness::*;
use std::time::{Duration, Instant};

/// How the daemon goes away (and comes back) under a writing container.
enum Outage {
    /// `systemctl restart podscoped`.
    Restart,
    /// `systemctl stop podscoped`, seconds of nothing, `systemctl start`.
    StopThenStart,
    /// `systemctl kill -s KILL podscoped` (systemd restarts it).
    Kill,
}

/// SIGKILL to podscoped; back once systemd has restarted it
/// (Restart=on-failure): a new main process, active.
fn kill_daemon_and_wait_for_the_next() {
    let main_pid = || sh("systemctl show -P MainPID podscoped").trim().to_owned();
    let old = main_pid();
    sh("systemctl kill -s KILL podscoped");
    wait_until(Duration::from_secs(20), || {
        let now = main_pid();
        now != old && now != "0" && sh_out("systemctl is-active podscoped").1.trim() == "active"
    });
}

/// A container writing numbered lines through `outage`: it keeps running
/// (same main process, its unit active) and, once stopped, its log holds
/// every line once, in order. Returns what the log held.
async fn lines_survive(outage: Outage) -> Numbered {
    let _cleanup = Cleanup::new();
    let _back = DaemonBack;
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-outage", "").await;
    let o = ContainerOptions {
        log_path: "w/0.log".into(),
        ..sh_cmd(NUMBERED_WRITER)
    };
    let id = run(&m, &pod, "writer", o).await;
    let path = format!("{logs}/w/0.log");
    let s = m.container_status(&id).await.unwrap();
    let pid = s.main_pid;
    wait_lines(&path, 500, Duration::from_secs(20)).await;
    drop(m);
    match outage {
        Outage::Restart => daemon("restart"),
        Outage::StopThenStart => {
            daemon("stop");
            // Nothing reads the pipes now: the container writes on until
            // the pipe is full, then blocks in write(2); it never dies of
            // it (no EPIPE: the pod's init holds a read end).
            wait_until(Duration::from_secs(20), || {
                std::fs::read_to_string(format!("/proc/{pid}/wchan"))
                    .is_ok_and(|w| w.trim().ends_with("pipe_write"))
            });
            std::thread::sleep(Duration::from_secs(1));
            assert!(
                pid_alive(pid),
                "the container died while podscoped was stopped"
            );
            assert_eq!(unit_prop(&s.unit, "ActiveState"), "active");
            assert_eq!(unit_prop(&s.unit, "MainPID"), pid.to_string());
            daemon("start");
        }
        Outage::Kill => {
            kill_daemon_and_wait_for_the_next();
        }
    }
    let (m, _c) = manager().await;
    let at = stdout_lines(&path);
    // Reading again: the log grows past what it held when the daemon came back.
    wait_lines(&path, at + 500, Duration::from_secs(20)).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.main_pid),
        (ContainerState::Running, pid),
        "{s:?}"
    );
    assert!(pid_alive(pid));
    m.stop_container(&id, 10).await.unwrap();
    let s = m.container_status(&id).await.unwrap();
    assert_eq!((s.state, s.exit_code), (ContainerState::Exited, 0), "{s:?}");
    let recs = strict_records(&path);
    let n = numbered(&whole_lines(&recs, "stdout"), "n");
    assert!(
        n.numbers.len() > 1000,
        "only {} lines were logged",
        n.numbers.len()
    );
    assert!(n.duplicated.is_empty(), "duplicated: {:?}", n.duplicated);
    assert!(
        n.out_of_order.is_empty(),
        "out of order: {:?}",
        n.out_of_order
    );
    m.remove(&pod).await.unwrap();
    n
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_restart_loses_and_repeats_no_line_of_a_writing_container() {
    let n = lines_survive(Outage::Restart).await;
    assert!(
        n.missing.is_empty() && n.malformed.is_empty(),
        "missing {:?}, malformed {:?}",
        n.missing,
        n.malformed
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_stopped_for_seconds_loses_no_line_and_the_container_runs_on() {
    let n = lines_survive(Outage::StopThenStart).await;
    assert!(
        n.missing.is_empty() && n.malformed.is_empty(),
        "missing {:?}, malformed {:?}",
        n.missing,
        n.malformed
    );
}

/// SIGKILL gives the daemon no time to write the unfinished line it holds
/// in memory (what it had read of a line whose end had not come yet): that
/// one line may be lost, or logged without its start. Nothing else may be.
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_killed_with_sigkill_loses_at_most_one_partial_line() {
    let n = lines_survive(Outage::Kill).await;
    assert!(
        n.missing.len() <= 1 && n.malformed.len() <= 1,
        "more than one line lost: missing {:?}, malformed {:?}",
        n.missing,
        n.malformed
    );
    // A line logged without its start is the rest of the missing one.
    if let Some(bad) = n.malformed.first() {
        assert_eq!(
            n.missing.len(),
            1,
            "a broken line {bad:?} with none missing"
        );
        // The end of `n <i> <64 dots>`: [[ ]<digits>][ ]<dots>.
        let rest = bad.strip_prefix(' ').unwrap_or(bad);
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        let rest = rest.strip_prefix(' ').unwrap_or(rest);
        assert!(
            rest.len() <= 64 && rest.chars().all(|c| c == '.'),
            "the broken line is the end of a numbered line: {bad:?}"
        );
    }
}

async fn an_exit_while_the_daemon_is_down_is_recorded_at_its_start(handler: &str) {
    let _cleanup = Cleanup::new();
    let _back = DaemonBack;
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-down-exit", handler).await;
    // The container exits with 3 when the test says so (a file in a
    // directory it mounts), not on a timer.
    let trigger = format!("/run/podscope-test/{}", uniq("trigger"));
    std::fs::create_dir_all(&trigger).unwrap();
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _gone = Gone(trigger.clone());
    let o = ContainerOptions {
        log_path: "down/0.log".into(),
        mounts: vec![Mount {
            container_path: "/trigger".into(),
            host_path: trigger.clone(),
            ..Default::default()
        }],
        ..sh_cmd(
            "echo waiting; while [ ! -e /trigger/go ]; do sleep 0.05; done; echo leaving; exit 3",
        )
    };
    let id = run(&m, &pod, "down", o).await;
    let before = m.container_status(&id).await.unwrap();
    assert_eq!(before.state, ContainerState::Running);
    drop(m);
    daemon("stop");
    std::fs::write(format!("{trigger}/go"), "").unwrap();
    wait_until(Duration::from_secs(20), || {
        matches!(
            unit_prop(&before.unit, "SubState").as_str(),
            "exited" | "failed" | "dead"
        )
    });
    assert_eq!(unit_prop(&before.unit, "ExecMainStatus"), "3");
    let exited_by = podscope_api::domain::sandbox::now_usec();
    std::thread::sleep(Duration::from_millis(1100));
    daemon("start");
    let (m, _c) = manager().await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.exit_code, s.reason.as_str()),
        (ContainerState::Exited, 3, "Error"),
        "{s:?}"
    );
    assert!(
        s.finished_at > s.started_at && s.finished_at <= exited_by,
        "finished_at is when it exited, not when the daemon came back: {s:?} (exited by {exited_by})"
    );
    let recs = strict_records(&format!("{logs}/down/0.log"));
    assert_eq!(
        whole_lines(&recs, "stdout"),
        ["waiting", "leaving"],
        "its output while the daemon was down reached the log"
    );
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exit_while_the_daemon_is_down_is_recorded_at_its_start_crun() {
    an_exit_while_the_daemon_is_down_is_recorded_at_its_start("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exit_while_the_daemon_is_down_is_recorded_at_its_start_runc() {
    an_exit_while_the_daemon_is_down_is_recorded_at_its_start("runc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn running_containers_are_recovered_after_a_sigkill_of_the_daemon() {
    let _cleanup = Cleanup::new();
    let _back = DaemonBack;
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let ticker = "trap 'exit 0' TERM; i=0; while :; do i=$((i+1)); echo \"t $i\"; sleep 0.1; done";
    let mut ctrs = Vec::new();
    for handler in ["crun", "runc"] {
        let (pod, logs) = log_pod(&m, &format!("ctr-recover-{handler}"), handler).await;
        let o = ContainerOptions {
            log_path: "t/0.log".into(),
            ..sh_cmd(ticker)
        };
        let id = run(&m, &pod, "ticker", o).await;
        let s = m.container_status(&id).await.unwrap();
        ctrs.push((pod, id, format!("{logs}/t/0.log"), s));
    }
    drop(m);
    kill_daemon_and_wait_for_the_next();
    let (m, _c) = manager().await;
    let listed = m
        .list_containers(&ContainerFilter {
            state: Some(ContainerState::Running),
            ..Default::default()
        })
        .await
        .unwrap();
    for (pod, id, path, before) in &ctrs {
        let row = listed
            .iter()
            .find(|c| &c.id == id)
            .unwrap_or_else(|| panic!("{id} is not listed running after the kill"));
        assert_eq!(&row.pod_id, pod);
        let s = m.container_status(id).await.unwrap();
        assert_eq!(
            (s.state, s.main_pid),
            (ContainerState::Running, before.main_pid),
            "{s:?}"
        );
        assert!(pid_alive(before.main_pid));
        let at = stdout_lines(path);
        wait_lines(path, at + 5, Duration::from_secs(10)).await;
    }
    for (pod, id, path, before) in &ctrs {
        let t0 = Instant::now();
        m.stop_container(id, 10).await.unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let s = m.container_status(id).await.unwrap();
        assert_eq!(
            (s.state, s.exit_code, s.reason.as_str()),
            (ContainerState::Exited, 0, "Completed"),
            "{s:?}"
        );
        let n = numbered(&whole_lines(&strict_records(path), "stdout"), "t");
        assert!(
            n.missing.len() <= 1 && n.duplicated.is_empty(),
            "missing {:?}, duplicated {:?}",
            n.missing,
            n.duplicated
        );
        m.remove_container(id).await.unwrap();
        assert_eq!(container_traces(id), Vec::<String>::new());
        assert!(!std::path::Path::new(&bundle_dir(id)).exists());
        assert_eq!(
            sh_status(&format!("systemctl status {} >/dev/null 2>&1", before.unit)),
            4
        );
        m.remove(pod).await.unwrap();
    }
}
