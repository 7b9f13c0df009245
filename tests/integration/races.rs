//! Operations that meet: each pair below runs at once, in every order the
//! daemon may take them, and must end with one truthful record or none,
//! and nothing left on the node that no record accounts for.

use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::path::Path;
use std::time::Duration;

/// Nothing of sandbox `id` is left: no record (on disk either), scope,
/// namespace unit, pinned namespace or attachment.
async fn assert_gone(m: &Client, id: &str) {
    assert_eq!(
        kind(m.status(id).await.unwrap_err()),
        ErrorKind::NotFound,
        "{id} has no record"
    );
    assert!(!checkpoint_exists(id), "{id}: its checkpoint came back");
    wait_until(Duration::from_secs(10), || {
        !Path::new(&attachment_path(id)).exists()
    });
    for unit in [
        format!("podscope-{id}.scope"),
        format!("podscope-netns@{id}.service"),
    ] {
        assert_ne!(
            sh_status(&format!("systemctl is-active --quiet {unit}")),
            0,
            "{unit} still active"
        );
    }
    assert!(!Path::new(&netns_path(id)).exists(), "{id}: namespace left");
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_meets_the_reconciliation_whose_del_fails_once() {
    let log = fresh_fixture_log("race-del");
    let _ = std::fs::remove_file(format!("{log}.failed-once"));
    let conflist = fixture_conflist("1.0.0", "race-del-net", "ok", "10.95.0.4/24", &log);
    let dir = cni_conf_dir("race-del", &[("10-r.conflist", conflist)]);
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let id = create_started(&m, "race-del", CreateOptions::default()).await;
        // A Stop whose DEL fails leaves it owed: the next start's
        // reconciliation runs it, and its first try fails too.
        set_cached_fixture_mode(&id, "ok", "faildel");
        assert_eq!(
            kind(m.stop(&id).await.unwrap_err()),
            ErrorKind::NetworkFailed
        );
        set_cached_fixture_mode(&id, "faildel", "faildelonce");
        daemon("restart");
        // Remove at once, while the reconciliation holds or wants the pod.
        let (m, _) = manager().await;
        m.remove(&id).await.unwrap();
        assert_gone(&m, &id).await;
        let dels = fixture_calls("race-del")
            .iter()
            .filter(|c| c.starts_with(&format!("DEL {id}")))
            .count();
        // Stop's failed DEL, the failing one and the one that worked.
        assert_eq!(dels, 3, "{:#?}", fixture_calls("race-del"));
        // Nor does it come back from disk.
        daemon("restart");
        let (m, _) = manager().await;
        assert_gone(&m, &id).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_and_remove_together() {
    let (m, _) = manager().await;
    for round in 0..5 {
        let id = create_started(&m, &format!("race-sr{round}"), CreateOptions::default()).await;
        let (stop, remove) = tokio::join!(m.stop(&id), m.remove(&id));
        remove.unwrap();
        // Stop went first, or found the sandbox already removed.
        if let Err(e) = stop {
            assert_eq!(kind(e), ErrorKind::NotFound);
        }
        assert_gone(&m, &id).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_during_start() {
    with_config(&slow_init_config(), || async {
        let (m, _) = manager().await;
        let (id, _) = m
            .create(&pod(&uniq("race-rs")), &CreateOptions::default())
            .await
            .unwrap();
        start_in_background_slowly(&id);
        // Start holds the sandbox; Remove waits for it, then stops the
        // pod it started.
        m.remove(&id).await.unwrap();
        assert_gone(&m, &id).await;
        wait_until(Duration::from_secs(5), || {
            sh_status(&format!("pgrep -f -- '--id {id}'")) != 0
        });
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn create_of_the_same_key_during_remove() {
    let (m, _) = manager().await;
    let name = uniq("race-key");
    for _ in 0..5 {
        let (old, _) = m
            .create(&pod(&name), &CreateOptions::default())
            .await
            .unwrap();
        m.start(&old).await.unwrap();
        let (meta, options) = (pod(&name), CreateOptions::default());
        let (removed, created) = tokio::join!(m.remove(&old), m.create(&meta, &options));
        removed.unwrap();
        assert_gone(&m, &old).await;
        let listed = m.list(&by_name(&name)).await.unwrap();
        match created {
            // Remove had released the name: the new sandbox is whole.
            Ok((new, _)) => {
                assert_eq!(listed.len(), 1);
                assert_eq!(listed[0].id, new);
                m.start(&new).await.unwrap();
                m.remove(&new).await.unwrap();
            }
            Err(e) => {
                assert_eq!(kind(e), ErrorKind::AlreadyExists);
                assert!(listed.is_empty(), "{listed:?}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn list_and_status_during_remove() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let tag = uniq("race-ls");
    let mut ids = Vec::new();
    for i in 0..10 {
        let id = create_started(&m, &format!("{tag}-{i}"), labelled(&[("tag", &tag)])).await;
        ids.push(id);
    }
    let readers = {
        let (m, ids) = (m.clone(), ids.clone());
        tokio::spawn(async move {
            let mut answers = 0;
            loop {
                let listed = m.list(&ListFilter::default()).await.unwrap();
                let mut gone = 0;
                for id in &ids {
                    match m.status(id).await {
                        Ok(st) => assert_eq!(&st.id, id),
                        Err(e) => {
                            assert_eq!(kind(e), ErrorKind::NotFound);
                            gone += 1;
                        }
                    }
                }
                answers += 1;
                if gone == ids.len() && !listed.iter().any(|s| ids.contains(&s.id)) {
                    return answers;
                }
            }
        })
    };
    for id in &ids {
        m.remove(id).await.unwrap();
    }
    let answers = readers.await.unwrap();
    assert!(answers > 1, "the readers ran during the removals");
    for id in &ids {
        assert_gone(&m, id).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_unit_event_during_stop() {
    let (m, _) = manager().await;
    for round in 0..5 {
        let id = create_started(&m, &format!("race-ev{round}"), CreateOptions::default()).await;
        // systemd stops the scope (and says so) while Stop is at work;
        // when Stop is first the unit is gone and systemctl says so.
        let outside = {
            let id = id.clone();
            tokio::task::spawn_blocking(move || {
                sh_status(&format!("systemctl stop podscope-{id}.scope 2>/dev/null"))
            })
        };
        m.stop(&id).await.unwrap();
        outside.await.unwrap();
        let st = wait_state(&m, &id, State::NotReady, Duration::from_secs(5)).await;
        assert!(!st.network_attached);
        assert_eq!(st.init_pid, 0);
        for unit in [
            format!("podscope-{id}.scope"),
            format!("podscope-netns@{id}.service"),
        ] {
            assert_ne!(sh_status(&format!("systemctl is-active --quiet {unit}")), 0);
        }
        // Stopped once: a later event changes nothing.
        m.stop(&id).await.unwrap();
        m.remove(&id).await.unwrap();
        assert_gone(&m, &id).await;
    }
}
