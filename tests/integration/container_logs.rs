//! Container logs: the CRI log format, long lines cut into parts, the last
//! line finished at the end, ReopenContainerLog after a rotation, and a
//! log directory that cannot be written.

use crate::containers::*;
use podscope_api::container::ContainerOptions;
use podscope_api::domain::container::ContainerState;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn logs_are_cri_records_long_lines_cut_into_parts_and_the_last_line_finished() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-logfmt", "").await;
    let o = ContainerOptions {
        log_path: "fmt/0.log".into(),
        ..sh_cmd(
            "echo out-1; echo err-1 >&2; head -c 40000 /dev/zero | tr '\\0' x; echo; \
             echo 'with  two spaces '; printf 'tail without newline'",
        )
    };
    let id = run(&m, &pod, "fmt", o).await;
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let path = format!("{logs}/fmt/0.log");
    // Every line is a record (strict_records panics on any other).
    let recs = strict_records(&path);
    let out: Vec<(&str, usize)> = recs
        .iter()
        .filter(|r| r.stream == "stdout")
        .map(|r| (r.tag.as_str(), r.text.len()))
        .collect();
    assert_eq!(
        out,
        [
            ("F", 5),
            ("P", 16384),
            ("P", 16384),
            ("F", 40000 - 2 * 16384),
            ("F", 17),
            ("F", 20),
        ],
        "stdout records (tag, length)"
    );
    assert_eq!(
        whole_lines(&recs, "stdout"),
        [
            "out-1".to_owned(),
            "x".repeat(40000),
            "with  two spaces ".to_owned(),
            "tail without newline".to_owned(),
        ]
    );
    let err: Vec<(&str, &str)> = recs
        .iter()
        .filter(|r| r.stream == "stderr")
        .map(|r| (r.tag.as_str(), r.text.as_str()))
        .collect();
    assert_eq!(err, [("F", "err-1")]);
    // Timestamps never go back within a stream.
    for stream in ["stdout", "stderr"] {
        let ts: Vec<&str> = recs
            .iter()
            .filter(|r| r.stream == stream)
            .map(|r| r.ts.as_str())
            .collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{stream}: {ts:?}");
    }
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn reopen_after_a_rotation_sends_new_lines_to_a_new_file_losing_and_repeating_none() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-reopen", "").await;
    let o = ContainerOptions {
        log_path: "rot/0.log".into(),
        ..sh_cmd(NUMBERED_WRITER)
    };
    let id = run(&m, &pod, "rot", o).await;
    let path = format!("{logs}/rot/0.log");
    let rotated = format!("{path}.1");
    wait_lines(&path, 300, Duration::from_secs(20)).await;

    // What kubelet does: rename, then ask for a new file.
    std::fs::rename(&path, &rotated).unwrap();
    m.reopen_container_log(&id).await.unwrap();
    assert!(
        std::path::Path::new(&path).exists(),
        "ReopenContainerLog made a new file at {path}"
    );
    wait_lines(&path, 300, Duration::from_secs(20)).await;
    m.stop_container(&id, 10).await.unwrap();
    let s = m.container_status(&id).await.unwrap();
    assert_eq!((s.state, s.exit_code), (ContainerState::Exited, 0), "{s:?}");

    let old = whole_lines(&strict_records(&rotated), "stdout");
    let new = whole_lines(&strict_records(&path), "stdout");
    let (o, n) = (numbered(&old, "n"), numbered(&new, "n"));
    assert!(
        o.malformed.is_empty() && n.malformed.is_empty(),
        "{:?} {:?}",
        o.malformed,
        n.malformed
    );
    assert_eq!(o.numbers.first(), Some(&1), "the rotated file starts at 1");
    let (last_old, first_new) = (*o.numbers.last().unwrap(), n.numbers[0]);
    assert_eq!(
        first_new,
        last_old + 1,
        "the new file takes up where the rotated one ends"
    );
    let all: Vec<String> = old.iter().chain(new.iter()).cloned().collect();
    let both = numbered(&all, "n");
    assert!(
        both.missing.is_empty() && both.duplicated.is_empty() && both.out_of_order.is_empty(),
        "missing {:?}, duplicated {:?}, out of order {:?}",
        both.missing,
        both.duplicated,
        both.out_of_order
    );
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn reopen_of_an_exited_container_answers_at_once() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ctr-reopen-x", "").await;
    let o = ContainerOptions {
        log_path: "x/0.log".into(),
        ..sh_cmd("echo done")
    };
    let id = run(&m, &pod, "x", o).await;
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let path = format!("{logs}/x/0.log");
    std::fs::rename(&path, format!("{path}.1")).unwrap();
    let t0 = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), m.reopen_container_log(&id))
        .await
        .expect("ReopenContainerLog of an exited container hangs")
        .unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t0.elapsed()
    );
    m.remove(&pod).await.unwrap();
}

/// A read-only file system mounted at a path until dropped.
struct ReadOnlyDir(String);

impl ReadOnlyDir {
    fn new(path: &str) -> Self {
        std::fs::create_dir_all(path).unwrap();
        sh(&format!(
            "mount -t tmpfs -o ro,size=1m podscope-test-ro {path}"
        ));
        ReadOnlyDir(path.to_owned())
    }
}

impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        sh_status(&format!("umount {0} && rmdir {0}", self.0));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_directory_that_cannot_be_written_fails_the_start_naming_it() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let dir = format!("/run/podscope-test/{}", uniq("ro-logs"));
    let _ro = ReadOnlyDir::new(&dir);
    let o = podscope_api::CreateOptions {
        log_directory: Some(dir.clone()),
        ..Default::default()
    };
    let pod = create_started(&m, "ctr-rolog", o).await;
    let (id, _) = m
        .create_container(
            &pod,
            "ro",
            0,
            BUSYBOX,
            &ContainerOptions {
                log_path: "ro/0.log".into(),
                ..sh_cmd("echo never")
            },
        )
        .await
        .unwrap();
    let e = m.start_container(&id).await.unwrap_err();
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    assert!(
        msg.contains(&format!("{dir}/ro/0.log")) && msg.contains("cannot be written"),
        "the error names the log file and why: {msg}"
    );
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(
        (s.state, s.reason.as_str()),
        (ContainerState::Exited, "StartError"),
        "{s:?}"
    );
    // Nothing of it runs or is mounted (its runtime directory is the
    // business of container_errors' tests).
    let left: Vec<String> = container_traces(&id)
        .into_iter()
        .filter(|t| !t.starts_with("run directory"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
    m.remove(&pod).await.unwrap();
}
