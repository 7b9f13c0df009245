//! The lifecycle's decisions and rollbacks against a fake systemd (no root,
//! no bus): what it asks systemd to do, what it records, what it leaves.
//! The harness tests run the same paths against the real systemd.

use super::*;
use crate::systemd::fake::FakeSystemd;
use podscope_api::domain::NetworkMode;
use std::collections::HashSet;
use std::path::PathBuf;

struct Rig {
    lc: Pods<Arc<FakeSystemd>>,
    systemd: Arc<FakeSystemd>,
    store: Store,
    dir: PathBuf,
    events: mpsc::UnboundedReceiver<Event>,
}

impl Rig {
    fn entry(&self, sb: &Sandbox) -> Arc<Entry> {
        self.lc.resolve(sb.id.as_str()).unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn rig(tag: &str) -> Rig {
    let dir = std::env::temp_dir().join(format!("podscope-lifecycle-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let settings = Settings {
        state_dir: dir.join("state"),
        run_dir: dir.join("run"),
        cni_conf_dir: dir.join("cni"),
        ..Settings::default()
    };
    let systemd = Arc::new(FakeSystemd::default());
    let (tx, events) = mpsc::unbounded_channel();
    let lc = Pods::new(
        settings,
        Store::open(&dir.join("state")).unwrap(),
        systemd.clone(),
        Machined::disabled(),
        tx,
    )
    .unwrap();
    Rig {
        lc,
        systemd,
        store: Store::open(&dir.join("state")).unwrap(),
        dir,
        events,
    }
}

fn sandbox(name: &str, network: NetworkMode, state: State) -> Sandbox {
    let config = SandboxConfig {
        name: name.into(),
        namespace: "ns".into(),
        uid: "u".into(),
        network,
        ..Default::default()
    };
    let mut sb = Sandbox::new(SandboxId::random(), config, "podscope.slice".into(), 1);
    match state {
        State::Created => {}
        State::Ready => sb.mark_ready(4242, 2),
        State::NotReady => sb.mark_not_ready("", 3),
    }
    sb
}

/// A checkpointed sandbox, recovered, with its scope active when Ready.
async fn recovered(r: &Rig, network: NetworkMode, state: State) -> Sandbox {
    let sb = sandbox("pod", network, state);
    r.store.save(&sb).unwrap();
    if state == State::Ready {
        r.systemd.set_active(&sb.unit());
    }
    r.lc.recover().await.unwrap();
    sb
}

#[tokio::test]
async fn recovery_finishes_what_was_cut_short_and_stops_orphans() {
    let r = rig("recover");
    let dead = sandbox("dead", NetworkMode::Pod, State::Ready);
    let cut = sandbox("cut", NetworkMode::Host, State::Created);
    let alive = sandbox("alive", NetworkMode::Host, State::Ready);
    let stopped = sandbox("stopped", NetworkMode::Pod, State::NotReady);
    for sb in [&dead, &cut, &alive, &stopped] {
        r.store.save(sb).unwrap();
    }
    r.systemd.set_active(&dead.netns_unit());
    r.systemd.set_active(&cut.unit());
    r.systemd.set_active(&alive.unit());
    r.systemd.set_active(&stopped.netns_unit());
    let orphan = scope_unit_name(&SandboxId::random());
    r.systemd.set_active(&orphan);

    let report = r.lc.recover().await.unwrap();
    assert_eq!(report.recovered, 4);
    assert_eq!(report.orphans_stopped, vec![orphan.clone()]);
    let stops: HashSet<String> = r
        .systemd
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("stop "))
        .collect();
    let want: HashSet<String> = [dead.netns_unit(), cut.unit(), stopped.netns_unit(), orphan]
        .iter()
        .map(|u| format!("stop {u}"))
        .collect();
    assert_eq!(stops, want);
    // The dead pod is NotReady, in memory and on disk, with why.
    let got = r.lc.get(&dead.id).unwrap().snapshot();
    assert_eq!(got.state, State::NotReady);
    assert!(got.reason.contains("not running"), "{}", got.reason);
    let on_disk = r.store.recover().unwrap();
    let saved = on_disk.records.iter().find(|s| s.id == dead.id).unwrap();
    assert_eq!(saved.state, State::NotReady);
    assert_eq!(r.lc.get(&alive.id).unwrap().with(|s| s.state), State::Ready);
}

#[tokio::test]
async fn a_netns_unit_that_fails_to_start_rolls_create_back() {
    let r = rig("create-fail");
    r.systemd
        .fail("start podscope-netns@", ErrorKind::SystemdFailed, 0);
    let config = sandbox("web", NetworkMode::Pod, State::Created).config;
    let e = r.lc.create(config.clone()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::SystemdFailed);
    assert!(
        e.to_string().contains("create: start podscope-netns@"),
        "{e}"
    );
    // Nothing is left: no record, no checkpoint, no pod files, the unit
    // stopped, and the name free again.
    assert_eq!(r.lc.count(), 0);
    assert!(r.store.recover().unwrap().records.is_empty());
    let run = std::fs::read_dir(r.dir.join("run/sandboxes"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(run, 0, "pod files removed");
    let calls = r.systemd.calls();
    let started = calls.iter().find(|c| c.starts_with("start ")).unwrap();
    let unit = started.trim_start_matches("start ");
    assert!(calls.contains(&format!("stop {unit}")), "{calls:?}");
    // The unit starts but CNI has no config: NetworkFailed, unit stopped.
    r.systemd.fail.lock().unwrap().clear();
    let e = r.lc.create(config.clone()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NetworkFailed, "{e}");
    assert!(e.to_string().contains("NoNetworkConfig"), "{e}");
    assert!(
        r.systemd.units.lock().unwrap().is_empty(),
        "netns unit stopped"
    );
    assert_eq!(r.lc.count(), 0);
    // The name was released each time: the same pod can be made.
    let entry =
        r.lc.create(SandboxConfig {
            network: NetworkMode::Host,
            ..config
        })
        .await
        .unwrap();
    assert_eq!(entry.with(|s| s.state), State::Created);
    assert_eq!(r.store.recover().unwrap().records.len(), 1);
}

#[tokio::test]
async fn stop_records_not_ready_and_a_failed_scope_stop_changes_nothing() {
    let mut r = rig("stop");
    let sb = recovered(&r, NetworkMode::Host, State::Ready).await;
    let scope = sb.unit();
    // systemd refuses: the pod is still ready, in memory and on disk.
    r.systemd
        .fail(&format!("stop {scope}"), ErrorKind::SystemdFailed, 1);
    let e = r.lc.stop(&r.entry(&sb)).await.unwrap_err();
    assert!(e.to_string().contains("stop scope"), "{e}");
    assert_eq!(r.lc.get(&sb.id).unwrap().with(|s| s.state), State::Ready);
    assert_eq!(r.store.recover().unwrap().records[0].state, State::Ready);
    // A scope that does not stop in time is killed, then stopped.
    r.systemd
        .fail(&format!("stop {scope}"), ErrorKind::Timeout, 1);
    r.lc.stop(&r.entry(&sb)).await.unwrap();
    let calls = r.systemd.calls();
    let tail: Vec<&str> = calls
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            format!("stop {scope}"),
            format!("kill {scope} {}", libc::SIGKILL),
            format!("stop {scope}")
        ]
    );
    let got = r.lc.get(&sb.id).unwrap().snapshot();
    assert_eq!(
        (got.state, got.init_pid, got.reason.as_str()),
        (State::NotReady, 0, "")
    );
    assert!(got.finished_at > 0);
    assert_eq!(r.store.recover().unwrap().records[0].state, State::NotReady);
    assert!(matches!(r.events.try_recv(), Ok(Event::Changed(id)) if id == sb.id));
    // Idempotent: nothing more is asked of systemd.
    let n = r.systemd.calls().len();
    r.lc.stop(&r.entry(&sb)).await.unwrap();
    assert_eq!(r.systemd.calls().len(), n);
}

#[tokio::test]
async fn update_resources_applies_live_and_keeps_the_record_when_systemd_refuses() {
    let r = rig("update");
    let sb = recovered(&r, NetworkMode::Host, State::Ready).await;
    let mut res = podscope_api::domain::Resources {
        memory_limit_in_bytes: 64 << 20,
        ..Default::default()
    };
    r.lc.update_resources(&r.entry(&sb), res).await.unwrap();
    let set = r.systemd.calls().pop().unwrap();
    assert!(set.starts_with(&format!("set {} ", sb.unit())), "{set}");
    assert!(set.contains("MemoryMax"), "{set}");
    let recorded = |r: &Rig| r.lc.get(&sb.id).unwrap().with(|s| s.config.resources);
    assert_eq!(recorded(&r), res);
    r.systemd.fail("set ", ErrorKind::SystemdFailed, 1);
    res.memory_limit_in_bytes = 128 << 20;
    let e = r.lc.update_resources(&r.entry(&sb), res).await.unwrap_err();
    assert!(e.to_string().contains("update resources"), "{e}");
    assert_eq!(recorded(&r).memory_limit_in_bytes, 64 << 20);
}

#[tokio::test]
async fn a_scope_gone_outside_podscope_makes_the_pod_not_ready() {
    let r = rig("unit-event");
    let sb = recovered(&r, NetworkMode::Host, State::Ready).await;
    // A stale event (the scope is still active) changes nothing.
    let event = |state: Option<&str>| UnitEvent {
        unit: sb.unit(),
        active_state: state.map(str::to_owned),
        sub_state: None,
    };
    r.lc.on_unit_event(event(Some("deactivating"))).await;
    assert_eq!(r.lc.get(&sb.id).unwrap().with(|s| s.state), State::Ready);
    r.systemd.units.lock().unwrap().clear();
    r.lc.on_unit_event(event(None)).await;
    let got = r.lc.get(&sb.id).unwrap().snapshot();
    assert_eq!(got.state, State::NotReady);
    assert_eq!(
        got.reason,
        format!("scope {} was stopped outside podscope", sb.unit())
    );
    let exit = r.lc.wait(sb.id.as_str()).await.unwrap();
    assert_eq!(exit.status, 1);
}

#[test]
fn list_filter_matches_all_given_fields() {
    let mut sb = Sandbox::new(
        SandboxId::random(),
        SandboxConfig {
            name: "a".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            labels: [("app".to_string(), "web".to_string())].into(),
            ..Default::default()
        },
        String::new(),
        0,
    );
    sb.state = State::Ready;
    assert!(ListFilter::default().matches(&sb));
    let f = ListFilter {
        id_prefix: Some(sb.id.as_str()[..5].to_owned()),
        state: Some(State::Ready),
        labels: [("app".to_string(), "web".to_string())].into(),
        namespace: Some("ns".into()),
        name: Some("a".into()),
    };
    assert!(f.matches(&sb));
    sb.state = State::NotReady;
    assert!(!f.matches(&sb));
    sb.state = State::Ready;
    sb.config.labels.insert("app".into(), "db".into());
    assert!(!f.matches(&sb));
}

#[tokio::test]
async fn recovery_keeps_the_namespace_of_a_pod_that_owes_a_del() {
    let r = rig("owed-del");
    let owing = sandbox("owing", NetworkMode::Pod, State::NotReady);
    let dead = sandbox("dead", NetworkMode::Pod, State::Ready);
    let orphan = SandboxId::random();
    for sb in [&owing, &dead] {
        r.store.save(sb).unwrap();
    }
    let networks = r.dir.join("state/networks");
    for id in [&owing.id, &dead.id, &orphan] {
        r.systemd
            .set_active(&podscope_api::domain::sandbox::netns_unit_name(id));
        // What recovery looks at is that an attachment exists.
        std::fs::write(networks.join(format!("{id}.json")), "{}").unwrap();
    }
    let report = r.lc.recover().await.unwrap();
    assert!(report.orphans_stopped.is_empty(), "{report:?}");
    let stops: Vec<String> = r
        .systemd
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("stop "))
        .collect();
    assert!(stops.is_empty(), "DEL first, then the namespace: {stops:?}");
    assert_eq!(
        r.lc.get(&dead.id).unwrap().with(|s| s.state),
        State::NotReady
    );
}

#[tokio::test]
async fn a_removed_sandbox_is_never_written_back() {
    let r = rig("removed");
    let sb = recovered(&r, NetworkMode::Host, State::Created).await;
    let entry = r.lc.get(&sb.id).unwrap();
    r.lc.remove(&r.entry(&sb)).await.unwrap();
    // A step that finishes after the Remove (a reconciliation's DEL) saves
    // what it holds: nothing may come back.
    let mut late = sb.clone();
    late.network_detached();
    r.lc.persist(&entry, late).unwrap();
    assert!(r.store.recover().unwrap().records.is_empty());
    assert!(r.lc.get(&sb.id).is_none());
}

#[tokio::test]
async fn orphans_are_stopped_together_not_one_by_one() {
    let r = rig("orphans");
    let orphans: Vec<String> = (0..4)
        .map(|_| scope_unit_name(&SandboxId::random()))
        .collect();
    for u in &orphans {
        r.systemd.set_active(u);
    }
    let report = r.lc.recover().await.unwrap();
    assert_eq!(report.orphans_stopped.len(), 4);
    assert!(r.systemd.units.lock().unwrap().is_empty());
    let most = r
        .systemd
        .most_stopping
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(most > 1, "the stops overlapped ({most} at most)");
}

#[tokio::test]
async fn a_record_that_cannot_be_saved_does_not_stop_recovery() {
    let r = rig("save-fails");
    let dead = sandbox("dead", NetworkMode::Host, State::Ready);
    let alive = sandbox("alive", NetworkMode::Host, State::Ready);
    r.store.save(&dead).unwrap();
    r.store.save(&alive).unwrap();
    r.systemd.set_active(&alive.unit());
    // Saving the dead pod's new record fails (its temp file is a directory).
    std::fs::create_dir(
        r.dir
            .join(format!("state/sandboxes/{}/checkpoint.tmp", dead.id)),
    )
    .unwrap();
    let report = r.lc.recover().await.unwrap();
    assert_eq!(report.recovered, 2);
    assert_eq!(
        r.lc.get(&dead.id).unwrap().with(|s| s.state),
        State::NotReady
    );
    assert_eq!(r.lc.get(&alive.id).unwrap().with(|s| s.state), State::Ready);
}

#[tokio::test]
async fn gc_has_no_valid_set_while_an_attachment_is_unreadable() {
    let r = rig("gc-valid");
    let id = SandboxId::random();
    let att = crate::cni::Attachment {
        container_id: id.to_string(),
        ifname: "eth0".into(),
        netns: String::new(),
        args: String::new(),
        capability_args: Default::default(),
        config: serde_json::json!({}),
        result: None,
        last_error: String::new(),
    };
    r.lc.attachments.save(&att).unwrap();
    assert_eq!(
        r.lc.valid_attachments().unwrap(),
        [(id.to_string(), "eth0".to_owned())]
    );
    let other = SandboxId::random();
    std::fs::write(
        r.dir.join(format!("state/networks/{other}.json")),
        "half a fi",
    )
    .unwrap();
    let e = r.lc.valid_attachments().unwrap_err();
    assert!(e.to_string().contains(other.as_str()), "{e}");
}
