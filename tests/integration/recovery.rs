//! Daemon restarts and kills at any step: recovery from checkpoints, orphan
//! units, quarantined records, interrupted Starts.

use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_without_a_record_is_stopped_at_recovery() {
    let orphan = "cd".repeat(32);
    let unit = format!("podscope-netns@{orphan}.service");
    daemon("stop");
    sh(&format!("systemctl start {unit}"));
    daemon("start");
    let (m, _) = manager().await;
    assert_ne!(sh_status(&format!("systemctl is-active --quiet {unit}")), 0);
    assert!(!std::path::Path::new(&format!("/run/netns/podscope-{orphan}")).exists());
    let (_, info, _) = m.runtime_status().await.unwrap();
    let orphans = info.orphans_stopped.clone();
    assert!(orphans.contains(&unit), "{orphans:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_recovers_every_sandbox_and_leaves_pods_running() {
    let (m, _) = manager().await;
    let (created, _) = m
        .create(&pod(&uniq("rc-c")), &CreateOptions::default())
        .await
        .unwrap();
    let ready = create_started(&m, "rc-r", CreateOptions::default()).await;
    let stopped = create_started(&m, "rc-s", CreateOptions::default()).await;
    m.stop(&stopped).await.unwrap();
    let pid = m.status(&ready).await.unwrap().init_pid;
    let invocation = sh(&format!(
        "systemctl show -P InvocationID podscope-{ready}.scope"
    ));

    daemon("restart");
    let (m, _) = manager().await;
    for (id, state) in [
        (&created, State::Created),
        (&ready, State::Ready),
        (&stopped, State::NotReady),
    ] {
        assert_eq!(m.status(id).await.unwrap().state, state, "{id}");
    }
    assert_eq!(m.status(&ready).await.unwrap().init_pid, pid);
    assert!(pid_alive(pid as u32), "the pod survived the daemon restart");
    assert_eq!(
        sh(&format!(
            "systemctl show -P InvocationID podscope-{ready}.scope"
        )),
        invocation
    );

    // A pod that ends while the daemon is down is NotReady afterwards.
    daemon("stop");
    sh(&format!("systemctl stop podscope-{ready}.scope"));
    daemon("start");
    let (m, _) = manager().await;
    let st = m.status(&ready).await.unwrap();
    assert_eq!(st.state, State::NotReady);
    assert!(st.reason.clone().contains("not running"), "{st:?}");
    for id in [created, ready, stopped] {
        m.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_operation_loses_nothing_and_leaks_no_scope() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let tag = uniq("k9");
    // Clients create and start pods as fast as they can; the daemon is
    // killed under them.
    let mut tasks = Vec::new();
    for c in 0..4 {
        let m = m.clone();
        let tag = tag.clone();
        tasks.push(tokio::spawn(async move {
            let mut created = Vec::new();
            let mut started = Vec::new();
            for i in 0..1000 {
                let o = labelled(&[("tag", &tag)]);
                let Ok((id, _)) = m.create(&pod(&format!("{tag}-{c}-{i}")), &o).await else {
                    break;
                };
                created.push(id.clone());
                if m.start(&id).await.is_err() {
                    break;
                }
                started.push(id);
            }
            (created, started)
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    sh("systemctl kill -s KILL podscoped");
    let mut created = Vec::new();
    let mut started = Vec::new();
    for t in tasks {
        let (c, s) = t.await.unwrap();
        created.extend(c);
        started.extend(s);
    }
    assert!(
        created.len() >= 4,
        "the clients got going before the kill ({})",
        created.len()
    );
    // Restart=on-failure brings it back; D-Bus activation would too.
    let (m, _) = manager().await;
    for id in &created {
        m.status(id)
            .await
            .unwrap_or_else(|e| panic!("sandbox {id} reported created was lost: {e}"));
    }
    for id in &started {
        assert_eq!(m.status(id).await.unwrap().state, State::Ready, "{id}");
    }
    // Every podscope scope belongs to a recorded, ready sandbox.
    let ready: Vec<String> = m
        .list(&ListFilter {
            state: Some(State::Ready),
            ..Default::default()
        })
        .await
        .unwrap()
        .iter()
        .map(|d| d.id.clone())
        .collect();
    for unit in
        sh("systemctl list-units --plain --no-legend --state=active 'podscope-*.scope'").lines()
    {
        let unit = unit.split_whitespace().next().unwrap();
        let id = unit
            .trim_start_matches("podscope-")
            .trim_end_matches(".scope");
        assert!(
            ready.iter().any(|r| r == id),
            "scope {unit} has no ready sandbox record"
        );
    }
    remove_tagged(&m, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_checkpoints_are_quarantined_and_the_rest_recovered() {
    let (m, _) = manager().await;
    let good = create_started(&m, "q-good", CreateOptions::default()).await;
    // Started: a scope, a netns unit and a network attachment, which
    // outlive its record's quarantine.
    let bad = create_started(&m, "q-bad", CreateOptions::default()).await;
    let (trunc, _) = m
        .create(&pod(&uniq("q-trunc")), &CreateOptions::default())
        .await
        .unwrap();
    daemon("stop");
    let ck = |id: &str| format!("/var/lib/podscope/sandboxes/{id}/checkpoint");
    let mut bytes = std::fs::read(ck(&bad)).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0x20;
    std::fs::write(ck(&bad), bytes).unwrap();
    let bytes = std::fs::read(ck(&trunc)).unwrap();
    std::fs::write(ck(&trunc), &bytes[..bytes.len() / 2]).unwrap();
    daemon("start");

    let (m, _) = manager().await;
    assert_eq!(m.status(&good).await.unwrap().state, State::Ready);
    for id in [&bad, &trunc] {
        assert_eq!(kind(m.status(id).await.unwrap_err()), ErrorKind::NotFound);
        assert!(!std::path::Path::new(&ck(id)).exists());
    }
    let (_, info, _) = m.runtime_status().await.unwrap();
    for id in [&bad, &trunc] {
        let entry = info
            .quarantined
            .iter()
            .find(|q| &q.dir == id)
            .expect("quarantine reported");
        assert!(entry.reason.contains("sha256 mismatch"), "{entry:?}");
        assert!(
            std::path::Path::new(&entry.moved_to)
                .join("checkpoint")
                .exists(),
            "moved aside, not deleted"
        );
    }
    let log = sh("journalctl -u podscoped -o cat --no-pager -n 200");
    assert!(
        log.contains(&format!("corrupt checkpoint of {bad} quarantined")),
        "{log}"
    );
    // A quarantined pod is left for an operator, across restarts too: its
    // units run and its network attachment is held (its DEL would stop
    // the netns unit and, bound to it, the scope).
    let units = [
        format!("podscope-{bad}.scope"),
        format!("podscope-netns@{bad}.service"),
    ];
    let active = |u: &str| sh_status(&format!("systemctl is-active --quiet {u}")) == 0;
    // Checked once the start's network reconciliation (which paid such a
    // DEL before) has run.
    let reconciled = || {
        let pid = sh("systemctl show -p MainPID --value podscoped");
        wait_until(Duration::from_secs(30), || {
            sh(&format!("journalctl _PID={} -o cat --no-pager", pid.trim()))
                .contains("network reconciliation done")
        });
    };
    for _ in 0..2 {
        reconciled();
        for u in &units {
            assert!(active(u), "{u} of the quarantined pod stopped");
        }
        assert!(std::path::Path::new(&attachment_path(&bad)).exists());
        daemon("restart");
        let _ = manager().await;
    }
    // Once the operator has removed them, the next start cleans up: units,
    // slice, network attachment, pod files.
    sh(&format!(
        "rm -rf /var/lib/podscope/quarantine/{bad}.* /var/lib/podscope/quarantine/{trunc}.*"
    ));
    daemon("restart");
    let (m, _) = manager().await;
    let gone = |p: String| !std::path::Path::new(&p).exists();
    wait_until(Duration::from_secs(10), || {
        units.iter().all(|u| !active(u))
            && !active(&format!("podscope-{bad}.slice"))
            && gone(attachment_path(&bad))
            && gone(format!("/run/podscope/sandboxes/{bad}"))
            && gone(format!("/run/podscope/sandboxes/{trunc}"))
    });
    m.remove(&good).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn scope_without_a_record_is_stopped_at_recovery() {
    let orphan = "ab".repeat(32);
    let unit = format!("podscope-{orphan}.scope");
    daemon("stop");
    sh(&format!(
        "systemd-run --quiet --scope --unit={unit} --collect sleep 600 >/dev/null 2>&1 &"
    ));
    wait_until(Duration::from_secs(5), || {
        sh_status(&format!("systemctl is-active --quiet {unit}")) == 0
    });
    daemon("start");
    let (m, _) = manager().await;
    assert_ne!(
        sh_status(&format!("systemctl is-active --quiet {unit}")),
        0,
        "orphan scope stopped"
    );
    let (_, info, _) = m.runtime_status().await.unwrap();
    let orphans = info.orphans_stopped.clone();
    assert!(orphans.contains(&unit), "{orphans:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_killed_during_start_leaves_no_half_started_pod() {
    with_config(&slow_init_config(), || async {
        let (m, id) = start_interrupted_by("k9start", || {
            sh("systemctl kill -s KILL podscoped");
        })
        .await;
        assert_eq!(
            m.status(&id).await.unwrap().state,
            State::Created,
            "the record survived"
        );
        assert_ne!(
            sh_status(&format!("systemctl is-active --quiet podscope-{id}.scope")),
            0
        );
        wait_until(Duration::from_secs(5), || {
            sh_status(&format!("pgrep -f -- '--id {id}'")) != 0
        });
        // The interrupted Start can simply be retried.
        m.start(&id).await.unwrap();
        m.remove(&id).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_during_start_lets_the_start_finish() {
    with_config(&slow_init_config(), || async {
        let (m, id) = start_interrupted_by("drain", || daemon("restart")).await;
        assert_eq!(
            m.status(&id).await.unwrap().state,
            State::Ready,
            "the Start in flight finished"
        );
        assert_eq!(
            sh(&format!("systemctl is-active podscope-{id}.scope")).trim(),
            "active"
        );
        m.remove(&id).await.unwrap();
    })
    .await;
}

/// A sandbox whose (slow) Start is in flight when `interrupt` hits the
/// daemon; a fresh client and the sandbox's id afterwards.
async fn start_interrupted_by(prefix: &str, interrupt: impl FnOnce()) -> (Client, String) {
    let (m, _) = manager().await;
    let (id, _) = m
        .create(&pod(&uniq(prefix)), &CreateOptions::default())
        .await
        .unwrap();
    start_in_background_slowly(&id);
    interrupt();
    (manager().await.0, id)
}
