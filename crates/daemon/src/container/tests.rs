//! The container verbs' decisions against a fake systemd (no root, no
//! bus, no runtime): how an exit is read, how Stop escalates, what recovery
//! makes of each record and unit, what Remove leaves. The harness tests
//! (tests/integration/containers*.rs, failpoints) run the same paths for real.

use super::*;
use crate::pod::machined::Machined;
use crate::systemd::fake::FakeSystemd;
use crate::systemd::ServiceStatus;
use podscope_api::domain::container::{ContainerConfig, ContainerResources};
use podscope_api::domain::sandbox::now_usec;

struct Rig {
    c: Containers<Arc<FakeSystemd>>,
    systemd: Arc<FakeSystemd>,
    events: mpsc::UnboundedReceiver<Event>,
    _dir: podscope_test_support::TempDir,
}

fn rig() -> Rig {
    let dir = podscope_test_support::TempDir::new();
    let settings = Settings::parse(&format!(
        "state_dir = \"{0}/state\"\nrun_dir = \"{0}/run\"\nimage_dir = \"{0}/images\"\nstop_timeout_ms = 2000\n",
        dir.0.display()
    ))
    .unwrap();
    let systemd = Arc::new(FakeSystemd::default());
    let (tx, events) = mpsc::unbounded_channel();
    let pods = Arc::new(
        Pods::new(
            settings.clone(),
            crate::state::checkpoint::Store::open(&settings.state_dir).unwrap(),
            systemd.clone(),
            Machined::disabled(),
            tx.clone(),
        )
        .unwrap(),
    );
    let images = crate::image::Images::open((&settings).into()).unwrap();
    let c = Containers::new(
        settings,
        systemd.clone(),
        pods,
        images,
        HostNs::in_place(),
        tx,
    )
    .unwrap();
    Rig {
        c,
        systemd,
        events,
        _dir: dir,
    }
}

fn record(state: ContainerState) -> Container {
    Container {
        id: ContainerId::random(),
        pod_id: SandboxId::random(),
        pod_name: "ns/pod".into(),
        config: ContainerConfig {
            name: "web".into(),
            image: "busybox".into(),
            ..Default::default()
        },
        state,
        created_at: now_usec(),
        started_at: if state == ContainerState::Created {
            0
        } else {
            now_usec()
        },
        exit: Default::default(),
        image_id: "sha256:ab".into(),
        image_ref: "sha256:ab".into(),
        image_name: "busybox".into(),
        layers: vec![],
        runtime_handler: "crun".into(),
        slice: "podscope-x.slice".into(),
        log_path: String::new(),
        main_pid: if state == ContainerState::Running {
            4242
        } else {
            0
        },
        resources: Default::default(),
        oom_killed: false,
        stop_signal: libc::SIGTERM,
        user: None,
        cdi: Default::default(),
        volumes: vec![],
        restored_from: String::new(),
    }
}

/// Save records as a previous daemon left them, then recover.
async fn recovered(r: &Rig, records: &[Container]) -> RecoveryReport {
    for c in records {
        r.c.store.save(c).unwrap();
    }
    r.c.recover().await.unwrap()
}

fn exited(code: i32, status: i32) -> ServiceStatus {
    ServiceStatus {
        active_state: "failed".into(),
        sub_state: "failed".into(),
        result: "exit-code".into(),
        main_pid: 0,
        exec_main_code: code,
        exec_main_status: status,
        exec_main_start_usec: 1,
        exec_main_exit_usec: 2_000_000,
    }
}

fn set_service(r: &Rig, c: &Container, s: ServiceStatus) {
    r.systemd
        .units
        .lock()
        .unwrap()
        .insert(c.unit(), s.active_state.clone());
    r.systemd.services.lock().unwrap().insert(c.unit(), s);
}

#[tokio::test]
async fn an_exit_while_the_daemon_was_down_is_read_from_the_unit() {
    let r = rig();
    let (a, b, gone) = (
        record(ContainerState::Running),
        record(ContainerState::Running),
        record(ContainerState::Running),
    );
    set_service(&r, &a, exited(1, 3));
    // Killed by SIGKILL, with an OOM seen before the daemon went down.
    let mut b = b;
    b.oom_killed = true;
    set_service(&r, &b, exited(2, 9));
    let report = recovered(&r, &[a.clone(), b.clone(), gone.clone()]).await;
    assert_eq!((report.recovered, report.exited_while_down), (3, 3));
    let got = |c: &Container| r.c.get(&c.id).unwrap().snapshot();
    let a = got(&a);
    assert_eq!(
        (a.state, a.exit.code, a.exit.reason.as_str()),
        (ContainerState::Exited, 3, "Error")
    );
    assert_eq!(a.exit.finished_at, 2_000_000);
    let b = got(&b);
    assert_eq!((b.exit.code, b.exit.reason.as_str()), (137, "OOMKilled"));
    // Its unit gone without a trace: the end is unknown, as containerd
    // reports a lost task.
    let gone = got(&gone);
    assert_eq!(
        (gone.state, gone.exit.code, gone.exit.reason.as_str()),
        (ContainerState::Unknown, 255, "Unknown")
    );
    // Saved: a second start reads the same.
    let on_disk = r.c.store.recover().unwrap().records;
    assert!(on_disk.iter().all(|c| c.state != ContainerState::Running));
}

#[tokio::test]
async fn recovery_adopts_a_start_cut_short_and_stops_orphans() {
    let r = rig();
    // Its unit began, the record still says created.
    let started = record(ContainerState::Created);
    set_service(
        &r,
        &started,
        ServiceStatus {
            active_state: "active".into(),
            sub_state: "running".into(),
            main_pid: 777,
            exec_main_start_usec: 55,
            ..Default::default()
        },
    );
    let orphan = ContainerId::random();
    r.systemd
        .set_active(&podscope_api::domain::container::container_unit_name(
            &orphan,
        ));
    let plain = record(ContainerState::Created);
    let report = recovered(&r, &[started.clone(), plain.clone()]).await;
    let s = r.c.get(&started.id).unwrap().snapshot();
    assert_eq!(
        (s.state, s.main_pid, s.started_at),
        (ContainerState::Running, 777, 55)
    );
    assert_eq!(
        r.c.get(&plain.id).unwrap().with(|c| c.state),
        ContainerState::Created
    );
    let orphan_unit = podscope_api::domain::container::container_unit_name(&orphan);
    assert_eq!(report.orphans_stopped, vec![orphan_unit.clone()]);
    let calls = r.systemd.calls();
    assert!(calls.contains(&format!("stop {orphan_unit}")), "{calls:?}");
    assert!(calls.contains(&format!("reset {orphan_unit}")), "{calls:?}");
    assert!(
        !calls
            .iter()
            .any(|c| c.contains(&started.unit()) && c.starts_with("stop")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn stop_sends_the_stop_signal_then_kills_at_the_timeout() {
    let r = rig();
    let mut quick = record(ContainerState::Running);
    quick.stop_signal = libc::SIGQUIT;
    let stubborn = record(ContainerState::Running);
    let running = ServiceStatus {
        active_state: "active".into(),
        sub_state: "running".into(),
        main_pid: 4242,
        ..Default::default()
    };
    set_service(&r, &quick, running.clone());
    set_service(&r, &stubborn, running);
    recovered(&r, &[quick.clone(), stubborn.clone()]).await;
    // The fake's main process ends at the signal that is meant to end it.
    let watch = |c: Container, signal: i32, code: i32, status: i32| {
        let (sys, want) = (r.systemd.clone(), format!("{} {signal}", c.unit()));
        tokio::spawn(async move {
            loop {
                if sys.calls().iter().any(|x| x.ends_with(&want)) {
                    sys.services
                        .lock()
                        .unwrap()
                        .insert(c.unit(), exited(code, status));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let w = watch(quick.clone(), libc::SIGQUIT, 1, 0);
    r.c.stop(&r.c.get(&quick.id).unwrap(), 10).await.unwrap();
    w.await.unwrap();
    let q = r.c.get(&quick.id).unwrap().snapshot();
    assert_eq!(
        (q.state, q.exit.code, q.exit.reason.as_str()),
        (ContainerState::Exited, 0, "Completed")
    );
    assert!(r
        .systemd
        .calls()
        .contains(&format!("killmain {} {}", quick.unit(), libc::SIGQUIT)));
    // SIGTERM ignored: SIGKILL to all after 1 s.
    let w = watch(stubborn.clone(), libc::SIGKILL, 2, 9);
    let t0 = std::time::Instant::now();
    r.c.stop(&r.c.get(&stubborn.id).unwrap(), 1).await.unwrap();
    w.await.unwrap();
    assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
    let s = r.c.get(&stubborn.id).unwrap().snapshot();
    assert_eq!((s.exit.code, s.exit.reason.as_str()), (137, "Error"));
    let calls = r.systemd.calls();
    let term = calls
        .iter()
        .position(|c| *c == format!("killmain {} {}", stubborn.unit(), libc::SIGTERM));
    let kill = calls
        .iter()
        .position(|c| *c == format!("kill {} {}", stubborn.unit(), libc::SIGKILL));
    assert!(term.is_some() && kill.is_some() && term < kill, "{calls:?}");
    // A stopped container stops again at once.
    r.c.stop(&r.c.get(&stubborn.id).unwrap(), 1).await.unwrap();
}

#[tokio::test]
async fn remove_leaves_no_unit_no_bundle_and_says_so() {
    let mut r = rig();
    let c = record(ContainerState::Exited);
    set_service(&r, &c, exited(1, 1));
    recovered(&r, std::slice::from_ref(&c)).await;
    let bundle = r.c.bundle(&c.id);
    rootfs::Dirs::of(&bundle).make().unwrap();
    assert!(bundle.join("upper").is_dir());
    while r.events.try_recv().is_ok() {}
    let id = r.c.remove(&r.c.get(&c.id).unwrap()).await.unwrap();
    assert_eq!(id, c.id);
    assert!(!bundle.exists());
    assert!(r.c.get(&c.id).is_none());
    let calls = r.systemd.calls();
    assert!(calls.contains(&format!("stop {}", c.unit())), "{calls:?}");
    assert!(calls.contains(&format!("reset {}", c.unit())), "{calls:?}");
    assert!(r.systemd.units.lock().unwrap().get(&c.unit()).is_none());
    assert!(matches!(r.events.try_recv(), Ok(Event::ContainerRemoved(x, _)) if x == c.id));
    // Gone is gone.
    assert_eq!(
        r.c.resolve(c.id.as_str()).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // A bundle still mounted over is never deleted through the mount: the
    // store refuses (checked with a directory on another filesystem).
}

#[tokio::test]
async fn resources_of_a_running_container_are_unit_properties() {
    let r = rig();
    let c = record(ContainerState::Running);
    set_service(
        &r,
        &c,
        ServiceStatus {
            active_state: "active".into(),
            sub_state: "running".into(),
            main_pid: 4242,
            ..Default::default()
        },
    );
    recovered(&r, std::slice::from_ref(&c)).await;
    let e = r.c.get(&c.id).unwrap();
    let res = ContainerResources {
        memory_limit_in_bytes: 64 << 20,
        cpu_quota: 50_000,
        cpu_period: 100_000,
        ..Default::default()
    };
    r.c.update_resources(&e, res.clone()).await.unwrap();
    assert_eq!(e.with(|c| c.resources.clone()), res);
    let set = r
        .systemd
        .calls()
        .into_iter()
        .find(|x| x.starts_with(&format!("set {}", c.unit())))
        .unwrap();
    for p in [
        "MemoryMax",
        "CPUQuotaPerSecUSec",
        "CPUWeight",
        "CPUQuotaPeriodUSec",
    ] {
        assert!(set.contains(p), "{set}");
    }
    // Bad limits change nothing.
    let bad = ContainerResources {
        oom_score_adj: 5000,
        ..Default::default()
    };
    assert_eq!(
        r.c.update_resources(&e, bad).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(e.with(|c| c.resources.clone()), res);
}

#[tokio::test]
async fn a_unit_event_records_the_exit_and_announces_it() {
    let mut r = rig();
    let c = record(ContainerState::Running);
    let running = ServiceStatus {
        active_state: "active".into(),
        sub_state: "running".into(),
        main_pid: 4242,
        ..Default::default()
    };
    set_service(&r, &c, running);
    recovered(&r, std::slice::from_ref(&c)).await;
    while r.events.try_recv().is_ok() {}
    // A running event changes nothing.
    r.c.on_unit_event(UnitEvent {
        unit: c.unit(),
        active_state: Some("active".into()),
        sub_state: Some("running".into()),
    })
    .await;
    assert_eq!(
        r.c.get(&c.id).unwrap().with(|c| c.state),
        ContainerState::Running
    );
    // Exited 0 with RemainAfterExit: still "active", SubState "exited".
    set_service(
        &r,
        &c,
        ServiceStatus {
            active_state: "active".into(),
            sub_state: "exited".into(),
            result: "success".into(),
            exec_main_code: 1,
            exec_main_status: 0,
            exec_main_exit_usec: 9,
            ..Default::default()
        },
    );
    r.c.on_unit_event(UnitEvent {
        unit: c.unit(),
        active_state: None,
        sub_state: Some("exited".into()),
    })
    .await;
    let s = r.c.get(&c.id).unwrap().snapshot();
    assert_eq!(
        (
            s.state,
            s.exit.code,
            s.exit.reason.as_str(),
            s.exit.finished_at
        ),
        (ContainerState::Exited, 0, "Completed", 9)
    );
    assert!(
        matches!(r.events.try_recv(), Ok(Event::ContainerChanged(x, ContainerState::Exited)) if x == c.id)
    );
}
