//! What a hostile local user can do with the calls open to everyone: each
//! abuse runs as `nobody` against the real daemon, and the test asserts
//! what it costs the daemon and everyone else.

use futures_util::StreamExt;
use podscope_api::domain::config::{ANNOTATIONS_TOTAL_MAX, LABELS_TOTAL_MAX};
use podscope_test_support::harness::*;
use podscope_test_support::leftovers;
use std::time::Duration;

/// The bench binary doubles as the hostile caller (`as-caller …`).
fn caller() -> String {
    podscope_test_support::harness::built("podscope-bench")
        .display()
        .to_string()
}

fn daemon_rss_kib() -> u64 {
    let pid = sh("systemctl show -P MainPID podscoped").trim().to_owned();
    let s = sh(&format!("cat /proc/{pid}/smaps_rollup"));
    s.lines()
        .find(|l| l.starts_with("Rss:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("Rss in smaps_rollup")
}

/// Creates whose options fill the largest message the system bus carries
/// (32 MiB) are refused without being copied, and the memory they took
/// goes back to the system.
#[tokio::test(flavor = "multi_thread")]
async fn huge_arguments_are_refused_and_their_memory_given_back() {
    let (m, _) = manager().await;
    let idle = daemon_rss_kib();
    let (rc, out, err) = as_nobody(&format!("{} as-caller big-args 20 4", caller()));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        out.trim(),
        "20 org.podscope.Sandbox1.Error.InvalidArgument",
        "every huge Create is refused as invalid"
    );
    let after = daemon_rss_kib();
    assert!(
        after <= idle + 8 * 1024,
        "RSS went from {idle} KiB to {after} KiB and stayed there"
    );
    assert!(m.list(&by_name("big")).await.unwrap().is_empty());
}

/// 1000 pods with labels and annotations at their limits: List, the
/// object tree and crictl's list still fit one message each, for anyone;
/// annotations reach root only, through Status.
#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_pods_at_the_limits_still_list() {
    let crictl = crictl();
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let tag = uniq("full");
    let mut o = host_net();
    let mut labels = string_map(&[("tag", &tag)]);
    for i in 0.. {
        let (k, v) = (format!("label-{i:04}"), "l".repeat(200));
        if labels.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() + k.len() + v.len()
            > LABELS_TOTAL_MAX
        {
            break;
        }
        labels.insert(k, v);
    }
    let mut annotations = std::collections::BTreeMap::new();
    for i in 0..4 {
        let k = format!("secret-{i}");
        let v = "s".repeat(ANNOTATIONS_TOTAL_MAX / 4 - k.len());
        annotations.insert(k, v);
    }
    o.labels = Some(labels.clone());
    o.annotations = Some(annotations.clone());
    let creates = (0..1000).map(|i| {
        let (m, o, tag) = (m.clone(), o.clone(), tag.clone());
        async move { m.create(&pod(&format!("{tag}-{i}")), &o).await.unwrap().0 }
    });
    let ids: Vec<String> = futures_util::stream::iter(creates)
        .buffer_unordered(16)
        .collect()
        .await;

    let mine = ListFilter {
        labels: Some(string_map(&[("tag", &tag)])),
        ..Default::default()
    };
    let list = m.list(&mine).await.unwrap();
    assert_eq!(list.len(), 1000);
    assert_eq!(list[0].labels, labels);
    // Root's List carries annotations within its budget: as many pods
    // with all of theirs as fit, the others saying what they left out.
    use podscope_api::list_budget::ANNOTATIONS_BUDGET;
    let (full, left_out): (Vec<_>, Vec<_>) = list.iter().partition(|s| s.annotations_left_out == 0);
    assert_eq!(full.len(), ANNOTATIONS_BUDGET / ANNOTATIONS_TOTAL_MAX);
    assert!(full.iter().all(|s| s.annotations == annotations));
    assert!(left_out.iter().all(
        |s| s.annotations.is_empty() && s.annotations_left_out == ANNOTATIONS_TOTAL_MAX as u64
    ));

    let busctl = |args: &str| as_nobody(&format!("busctl --system {args} | wc -c"));
    let (rc, out, err) = busctl(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager List a{sv} 0",
    );
    assert_eq!(rc, 0, "List as nobody: {err}");
    let listed: usize = out.trim().parse().unwrap();
    assert!(listed > 1000 * LABELS_TOTAL_MAX, "{listed} bytes listed");
    let (rc, _, err) = busctl(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.freedesktop.DBus.ObjectManager GetManagedObjects",
    );
    assert_eq!(rc, 0, "GetManagedObjects as nobody: {err}");
    let (rc, out, err) = sh_out(&format!(
        "{crictl} --runtime-endpoint unix:///run/podscope/cri.sock pods -q --label tag={tag} | wc -l"
    ));
    assert_eq!((rc, out.trim()), (0, "1000"), "crictl pods: {err}");

    // Status: everything for root; no annotations for anyone else.
    let st = m.status(&ids[0]).await.unwrap();
    assert_eq!(st.annotations, annotations);
    assert!(!st.annotations_hidden);
    let (rc, out, err) = as_nobody(&format!(
        "busctl --system call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Status s {}",
        ids[0]
    ));
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("\"annotations_hidden\" b true") && !out.contains("sss"),
        "nobody's Status hides the annotations: {}",
        &out[..out.len().min(2000)]
    );
    let (rc, out, err) = as_nobody(&format!("podscopectl status {}", ids[0]));
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("(shown to root only)"), "{out}");

    let removes = ids.into_iter().map(|id| {
        let m = m.clone();
        async move { m.remove(&id).await.unwrap() }
    });
    futures_util::stream::iter(removes)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// With polkit stalled, one user's flood of mutating calls holds at most
/// its share of pending checks; the rest are refused at once, and root is
/// not held up at all.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_checks_is_capped_per_user_and_root_goes_first() {
    with_config("polkit_timeout_ms = 4000\n", || async {
        let (m, _) = manager().await;
        let id = create_started(&m, "checks", host_net()).await;
        let victim = create_started(&m, "checks", host_net()).await;
        let stalled = StalledPolkit::new();
        let cmd = format!(
            "bash -c 'for i in $(seq 40); do dbus-send --system --print-reply \
                 --reply-timeout=60000 --dest=org.podscope.Sandbox1 /org/podscope/Sandbox1 \
                 org.podscope.Sandbox1.Manager.Stop string:{id} 2>&1 & done; wait'"
        );
        let flood = std::thread::spawn(move || as_nobody(&cmd));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // Root's call needs no polkit: answered while the flood waits.
        m.stop(&victim).await.unwrap();
        let (_, out, _) = flood.join().unwrap();
        drop(stalled);
        let count = |what: &str| out.lines().filter(|l| l.contains(what)).count();
        assert_eq!(
            count("LimitsExceeded"),
            40 - 16,
            "past 16 pending checks a user is refused at once: {out}"
        );
        assert_eq!(count("polkit did not answer"), 16, "{out}");
        assert_eq!(m.status(&id).await.unwrap().state, State::Ready);
        m.remove(&id).await.unwrap();
        m.remove(&victim).await.unwrap();
    })
    .await;
}

/// Wait is open to everyone and blocks: one user gets 64 of them at once.
#[tokio::test(flavor = "multi_thread")]
async fn waits_are_capped_per_user() {
    let (m, _) = manager().await;
    let id = create_started(&m, "waits", host_net()).await;
    let caller = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .args([&caller(), "as-caller", "waits", &id, "70"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut waiting = 0;
    for _ in 0..100 {
        waiting = m.runtime_status().await.unwrap().1.waits_in_flight;
        if waiting >= 64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(waiting, 64);
    // Root is not held back by nobody's share.
    let root_wait = tokio::spawn({
        let m = m.clone();
        let id = id.clone();
        async move { m.wait(&id).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    m.stop(&id).await.unwrap();
    assert_eq!(root_wait.await.unwrap().unwrap().status, 0);
    let out = caller.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["6 org.podscope.Sandbox1.Error.LimitsExceeded", "64 ok"],
        "{out}"
    );
    m.remove(&id).await.unwrap();
}

fn daemon_fds() -> usize {
    let pid = sh("systemctl show -P MainPID podscoped").trim().to_owned();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// 100 connections of nobody's, each with 100 List calls written and no
/// reply ever read: the replies wait in dbus-daemon, not in the daemon,
/// and root's pods are made, started, stopped and removed meanwhile, by
/// the daemon's own calls to systemd, each once.
#[tokio::test(flavor = "multi_thread")]
async fn callers_that_never_read_their_replies_hold_up_no_one() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let (fds, rss) = (daemon_fds(), daemon_rss_kib());
    let mut caller = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .args([&caller(), "as-caller", "silent", "100", "100", "60000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(caller.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "100 silent", "the bus took every connection");
    let tag = uniq("unread");
    let creates = (0..8).map(|i| {
        let (m, tag) = (m.clone(), tag.clone());
        async move {
            let (id, _) = m
                .create(&pod(&format!("{tag}-{i}")), &host_net())
                .await
                .unwrap();
            m.start(&id).await.unwrap();
            id
        }
    });
    let ids = futures_util::future::join_all(creates).await;
    for id in &ids {
        assert_eq!(m.status(id).await.unwrap().state, State::Ready);
        assert_eq!(
            sh(&format!("systemctl is-active podscope-{id}.scope || true")).trim(),
            "active"
        );
    }
    for id in &ids {
        m.stop(id).await.unwrap();
        m.remove(id).await.unwrap();
    }
    let left = leftovers::pods(&m, "podscope-test").await;
    assert!(left.is_empty(), "{left:#?}");
    // The 10000 unread replies are dbus-daemon's to hold.
    assert_eq!(daemon_fds(), fds);
    let after = daemon_rss_kib();
    assert!(
        after <= rss + 8 * 1024,
        "RSS went from {rss} KiB to {after} KiB"
    );
    caller.kill().unwrap();
    let _ = caller.wait();
    m.version().await.unwrap();
}

/// A caller that sends 40 Creates and Starts at once and is gone 300 ms
/// later: every call the daemon took is carried out to its end (its own
/// task) and none twice: each pod once, created or ready, each ready one
/// with its one scope, nothing without a record; another caller is
/// answered all the while, and everything is removed after.
#[tokio::test(flavor = "multi_thread")]
async fn a_caller_that_hangs_up_mid_burst_loses_and_doubles_nothing() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let tag = uniq("hangup");
    let caller = std::process::Command::new(caller())
        .args(["as-caller", "hang-up", &tag, "40", "300"])
        .spawn()
        .unwrap();
    // Answered while the burst runs.
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_millis(600) {
        m.version().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(caller.wait_with_output().unwrap().status.success());
    // Until what the daemon took has settled: the same pods in the same
    // states twice, a second apart.
    let snapshot = || async {
        let mut v: Vec<(String, String, State)> = m
            .list(&ListFilter::default())
            .await
            .unwrap()
            .into_iter()
            .filter(|s| s.name.starts_with(&tag))
            .map(|s| (s.name, s.id, s.state))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let mut last = snapshot().await;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = snapshot().await;
        if now == last {
            break;
        }
        last = now;
    }
    assert!(!last.is_empty(), "no Create got through before the hang-up");
    let mut names: Vec<&String> = last.iter().map(|(n, _, _)| n).collect();
    names.dedup();
    assert_eq!(names.len(), last.len(), "a pod made twice: {last:?}");
    for (name, id, state) in &last {
        assert!(
            matches!(state, State::Created | State::Ready),
            "{name}: {state:?}"
        );
        let scope = sh(&format!("systemctl is-active podscope-{id}.scope || true"));
        assert_eq!(
            scope.trim() == "active",
            *state == State::Ready,
            "{name} is {state:?}, its scope {}",
            scope.trim()
        );
    }
    let left = leftovers::pods(&m, "podscope-test").await;
    assert!(left.is_empty(), "{left:#?}");
    for (_, id, _) in &last {
        m.remove(id).await.unwrap();
    }
    let left = leftovers::pods(&m, "podscope-test").await;
    assert!(left.is_empty(), "{left:#?}");
}
