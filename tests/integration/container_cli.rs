//! podscopectl's container commands against the real daemon: container
//! create --start, ps, ps -a -q, inspect, logs, logs -f, exec, container
//! stop, container rm.

use crate::containers::*;
use podscope_api::domain::container::ContainerState;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_creates_lists_inspects_logs_execs_stops_and_removes_containers() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-cli", "").await;

    let id = sh(&format!(
        "podscopectl container create {pod} web {BUSYBOX} --log-path web/0.log \
         --label role=web --memory 67108864 --start -- \
         sh -c \"echo one; echo two >&2; trap 'exit 0' TERM; while :; do sleep 0.1; done\""
    ))
    .trim()
    .to_owned();
    assert_eq!(id.len(), 64, "create prints the id: {id:?}");
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.name.as_str(), s.pod_id.as_str()),
        (ContainerState::Running, "web", pod.as_str())
    );
    assert_eq!(s.labels.get("role").map(String::as_str), Some("web"));
    assert_eq!(s.resources.memory_limit_in_bytes, 64 << 20);

    // ps: running ones, a table.
    let table = sh(&format!("podscopectl ps --pod {pod}"));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "CONTAINER",
            "IMAGE",
            "CREATED",
            "STATE",
            "NAME",
            "ATTEMPT",
            "POD"
        ]
    );
    let row = table
        .lines()
        .find(|l| l.starts_with(&id[..12]))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(
        cells.contains(&"running") && cells.contains(&"web"),
        "{row}"
    );

    // A second container that exits at once: ps hides it, ps -a -q shows it.
    let done = sh(&format!(
        "podscopectl container create {pod} done {BUSYBOX} --log-path done/0.log --start -- true"
    ))
    .trim()
    .to_owned();
    wait_container(&m, &done, ContainerState::Exited, Duration::from_secs(20)).await;
    let running = sh(&format!("podscopectl ps -q --pod {pod}"));
    assert_eq!(running.lines().collect::<Vec<_>>(), [id.as_str()]);
    let mut all: Vec<String> = sh(&format!("podscopectl ps -a -q --pod {pod}"))
        .lines()
        .map(str::to_owned)
        .collect();
    all.sort();
    let mut want = vec![id.clone(), done.clone()];
    want.sort();
    assert_eq!(all, want);

    // inspect: the status as JSON.
    let json: serde_json::Value =
        serde_json::from_str(&sh(&format!("podscopectl inspect {}", &id[..16]))).unwrap();
    assert_eq!(json["id"], id.as_str());
    assert_eq!(json["state"], "running");
    assert_eq!(json["log_path"], format!("{logs}/web/0.log").as_str());
    assert_eq!(json["main_pid"], s.main_pid);

    // logs: the text of both streams, without the CRI framing.
    wait_lines(&format!("{logs}/web/0.log"), 1, Duration::from_secs(10)).await;
    let t0 = Instant::now();
    loop {
        let out = sh(&format!("podscopectl logs {id}"));
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        if lines == ["one", "two"] {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "logs: {out:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // exec: output through, exit status passed on.
    let (rc, out, err) = sh_out(&format!(
        "podscopectl exec {id} -- sh -c 'echo in-container; echo oops >&2; exit 5'"
    ));
    assert_eq!(
        (rc, out.as_str(), err.as_str()),
        (5, "in-container\n", "oops\n")
    );
    let (rc, _, _) = sh_out(&format!("podscopectl exec {id} true"));
    assert_eq!(rc, 0);

    // container stop, then rm.
    sh(&format!("podscopectl container stop -t 5 {id}"));
    let s = m.container_status(&id).await.unwrap();
    assert_eq!((s.state, s.exit_code), (ContainerState::Exited, 0), "{s:?}");
    sh(&format!("podscopectl container rm {id} {done}"));
    for c in [&id, &done] {
        assert_eq!(
            kind(m.container_status(c).await.unwrap_err()),
            ErrorKind::NotFound
        );
        assert_eq!(container_traces(c), Vec::<String>::new());
    }
    assert_eq!(sh(&format!("podscopectl ps -a -q --pod {pod}")), "");
    let (rc, _, err) = sh_out(&format!("podscopectl container rm {id}"));
    assert_eq!(rc, 1, "removing it again fails: {err}");
    assert!(err.starts_with("podscopectl: "), "{err}");
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_logs_follow_returns_once_the_container_ended_with_every_line() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-cli-f", "").await;
    let id = sh(&format!(
        "podscopectl container create {pod} f {BUSYBOX} --log-path f/0.log --start -- \
         sh -c 'i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo \"f $i\"; sleep 0.1; done'"
    ))
    .trim()
    .to_owned();
    let t0 = Instant::now();
    let follow = tokio::task::spawn_blocking({
        let id = id.clone();
        move || sh_out(&format!("timeout 60 podscopectl logs -f {id}"))
    });
    let (rc, out, err) = follow.await.unwrap();
    let took = t0.elapsed();
    assert_eq!(rc, 0, "logs -f failed: {err}");
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.state, ContainerState::Exited, "logs -f returned early");
    assert!(
        took >= Duration::from_secs(2),
        "it followed while the container ran: {took:?}"
    );
    let want: Vec<String> = (1..=30).map(|i| format!("f {i}")).collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
    m.remove(&pod).await.unwrap();
}
