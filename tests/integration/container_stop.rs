//! Stopping containers: the stop signal first (SIGTERM, or the image's
//! StopSignal), SIGKILL at the timeout; a pod's Stop stops its containers
//! and its Remove removes them.

use crate::containers::*;
use podscope_api::container::ContainerOptions;
use podscope_api::domain::container::ContainerState;
use podscope_api::image::PullOptions;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::{Duration, Instant};

/// An image whose config says `StopSignal: SIGUSR1` (tests/images/build.sh).
const STOPSIGNAL_IMAGE: &str = "127.0.0.1:5000/podscope-test/stopsignal:latest";

async fn sigterm_first_then_sigkill_at_the_timeout(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-stop", handler).await;

    // One that exits on SIGTERM: ends at once, with its own code.
    let polite = run(
        &m,
        &pod,
        "polite",
        ContainerOptions {
            log_path: "polite.log".into(),
            ..sh_cmd("trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.1; done")
        },
    )
    .await;
    wait_lines(&format!("{logs}/polite.log"), 1, Duration::from_secs(10)).await;
    let t0 = Instant::now();
    m.stop_container(&polite, 30).await.unwrap();
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "SIGTERM came first: {took:?}"
    );
    let s = m.container_status(&polite).await.unwrap();
    assert_eq!(
        (s.state, s.exit_code, s.reason.as_str()),
        (ContainerState::Exited, 7, "Error"),
        "{s:?}"
    );
    assert_eq!(
        whole_lines(&strict_records(&format!("{logs}/polite.log")), "stdout"),
        ["ready", "got TERM"]
    );

    // One that ignores SIGTERM: SIGKILL after the timeout, exit 137.
    let stubborn = run_ignoring_term(&m, &pod, &logs).await;
    let t0 = Instant::now();
    m.stop_container(&stubborn, 2).await.unwrap();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(6),
        "SIGKILL came at the 2 s timeout: {took:?}"
    );
    let s = m.container_status(&stubborn).await.unwrap();
    assert_eq!(
        (s.state, s.exit_code, s.reason.as_str()),
        (ContainerState::Exited, 137, "Error"),
        "{s:?}"
    );
    assert!(!pid_alive(s.main_pid) || s.main_pid == 0);
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_sends_sigterm_first_and_sigkill_at_the_timeout_crun() {
    sigterm_first_then_sigkill_at_the_timeout("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_sends_sigterm_first_and_sigkill_at_the_timeout_runc() {
    sigterm_first_then_sigkill_at_the_timeout("runc").await;
}

/// A Stop just after the Start, before the program has set its handler
/// (critest stops that soon): the container's process is the init of its
/// PID namespace, so the kernel drops the signal; it is sent again once
/// the handler is there, and the program ends on it rather than by
/// SIGKILL at the timeout.
async fn a_stop_before_the_handler_is_set_is_not_lost(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-early-stop", handler).await;
    let id = run(
        &m,
        &pod,
        "early",
        ContainerOptions {
            log_path: "early.log".into(),
            ..sh_cmd("sleep 1; trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.1; done")
        },
    )
    .await;
    m.stop_container(&id, 60).await.unwrap();
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.exit_code, s.reason.as_str()),
        (ContainerState::Exited, 0, "Completed"),
        "ended by its own handler, not SIGKILLed at the timeout: {s:?}"
    );
    assert_eq!(
        whole_lines(&strict_records(&format!("{logs}/early.log")), "stdout"),
        ["ready", "got TERM"]
    );
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_before_the_handler_is_set_is_not_lost_crun() {
    a_stop_before_the_handler_is_set_is_not_lost("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_before_the_handler_is_set_is_not_lost_runc() {
    a_stop_before_the_handler_is_set_is_not_lost("runc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_sends_the_images_stop_signal() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    m.pull_image(STOPSIGNAL_IMAGE, &PullOptions::default())
        .await
        .unwrap_or_else(|e| panic!("pull {STOPSIGNAL_IMAGE}: {e}"));
    let (pod, logs) = log_pod(&m, "ctr-stopsig", "").await;
    let o = ContainerOptions {
        log_path: "sig.log".into(),
        ..sh_cmd(
            "trap 'echo got USR1; exit 0' USR1; trap 'echo got TERM; exit 9' TERM; \
             echo ready; while :; do sleep 0.1; done",
        )
    };
    let id = run_image(&m, &pod, "sig", STOPSIGNAL_IMAGE, o).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        unit_prop(&s.unit, "KillSignal"),
        libc::SIGUSR1.to_string(),
        "the unit's KillSignal is the image's StopSignal"
    );
    wait_lines(&format!("{logs}/sig.log"), 1, Duration::from_secs(10)).await;
    let t0 = Instant::now();
    m.stop_container(&id, 30).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.exit_code, s.reason.as_str()),
        (ContainerState::Exited, 0, "Completed"),
        "{s:?}"
    );
    assert_eq!(
        whole_lines(&strict_records(&format!("{logs}/sig.log")), "stdout"),
        ["ready", "got USR1"]
    );
    m.remove(&pod).await.unwrap();
    m.remove_image(STOPSIGNAL_IMAGE).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_a_pod_stops_its_containers_and_removing_it_removes_them() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-podstop", "").await;
    let a = run(
        &m,
        &pod,
        "a",
        sh_cmd("trap 'exit 0' TERM; while :; do sleep 0.1; done"),
    )
    .await;
    let b = run(
        &m,
        &pod,
        "b",
        sh_cmd("trap '' TERM; while :; do sleep 0.1; done"),
    )
    .await;
    let created = m
        .create_container(&pod, "c", 0, BUSYBOX, &sh_cmd("true"))
        .await
        .unwrap()
        .0;
    let mut running = Vec::new();
    for id in [&a, &b] {
        let s = m.container_status(id).await.unwrap();
        assert_eq!(s.state, ContainerState::Running);
        running.push(s);
    }

    m.stop(&pod).await.unwrap();
    for s in &running {
        let now = m.container_status(&s.id).await.unwrap();
        assert_eq!(
            now.state,
            ContainerState::Exited,
            "stopping the pod stopped {}: {now:?}",
            s.name
        );
        assert!(now.finished_at > 0, "{now:?}");
        assert!(!pid_alive(s.main_pid), "{}'s process is gone", s.name);
        let sub = unit_prop(&s.unit, "SubState");
        assert!(
            matches!(sub.as_str(), "exited" | "failed" | "dead"),
            "{}: {sub}",
            s.unit
        );
    }
    assert_eq!(
        m.status(&pod).await.unwrap().state,
        State::NotReady,
        "the pod stopped after them"
    );

    m.remove(&pod).await.unwrap();
    for id in [&a, &b, &created] {
        assert_eq!(
            kind(m.container_status(id).await.unwrap_err()),
            ErrorKind::NotFound
        );
        assert_eq!(container_traces(id), Vec::<String>::new(), "{id}");
        assert!(
            !std::path::Path::new(&bundle_dir(id)).exists(),
            "{id}'s bundle is gone"
        );
    }
    for s in &running {
        assert_eq!(
            sh_status(&format!("systemctl status {} >/dev/null 2>&1", s.unit)),
            4,
            "{} is gone",
            s.unit
        );
    }
}
