//! D-Bus activation, calls queued while the daemon starts, callers that
//! hang up, and a daemon that cannot start.

use podscope_test_support::harness::*;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn dbus_activation_starts_the_daemon() {
    daemon("stop");
    assert_ne!(sh_status("systemctl is-active --quiet podscoped"), 0);
    let out = sh("busctl call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Version");
    assert!(out.contains("\"podscope\""), "{out}");
    assert_eq!(sh("systemctl is-active podscoped").trim(), "active");
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_queued_by_activation_are_answered() {
    // A call that arrives while the daemon is down is queued by dbus-daemon
    // and delivered the instant the restarted daemon takes its name. It
    // used to be lost now and then (the object server was not listening
    // yet); repeat the race to catch a regression.
    let (m, _) = manager().await;
    let tag = uniq("queued");
    for i in 0..8 {
        m.create(&pod(&format!("{tag}-{i}")), &labelled(&[("tag", &tag)]))
            .await
            .unwrap();
    }
    for round in 0..15 {
        let pid: u32 = sh("systemctl show -P MainPID podscoped")
            .trim()
            .parse()
            .unwrap();
        let owner = || {
            sh_out("busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus GetNameOwner s org.podscope.Sandbox1").1
        };
        let old_owner = owner();
        sh("systemctl reset-failed podscoped 2>/dev/null; systemctl kill -s KILL podscoped");
        // systemctl kill only sends the signal: call once the old daemon is
        // really gone, and once the bus has noticed (until it processes the
        // hang-up, dbus-daemon still routes calls to the dead connection).
        wait_until(Duration::from_secs(5), || !pid_alive(pid));
        wait_until(Duration::from_secs(5), || owner() != old_owner);
        let conn = system_connection(Duration::from_secs(10)).await.unwrap();
        let m = Client::new(&conn).await.unwrap();
        m.version().await.unwrap_or_else(|e| {
            let (_, journal, _) = sh_out(
                "journalctl -u podscoped -o short-precise --no-pager -n 40; systemctl status --no-pager podscoped",
            );
            panic!("round {round}: call queued during activation not answered: {e}\n{journal}")
        });
    }
    let (m, _) = manager().await;
    remove_tagged(&m, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_hanging_up_does_not_cancel_the_operation() {
    with_config(&slow_init_config(), || async {
        let (m, _) = manager().await;
        let (id, _) = m.create(&pod(&uniq("hang")), &CreateOptions::default()).await.unwrap();
        // busctl is killed 300 ms into a Start that takes over a second.
        let rc = sh_status(&format!(
            "timeout -s KILL 0.3 busctl call --timeout=30 org.podscope.Sandbox1 /org/podscope/Sandbox1 \
             org.podscope.Sandbox1.Manager Start s {id}"
        ));
        assert_ne!(rc, 0, "the caller was killed mid-call");
        wait_state(&m, &id, State::Ready, Duration::from_secs(5)).await;
        assert_eq!(sh(&format!("systemctl is-active podscope-{id}.scope")).trim(), "active");
        m.remove(&id).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_config_stops_the_daemon_with_a_named_error() {
    daemon("stop");
    std::fs::write("/etc/podscope/podscope.toml", "stop_timeut_ms = 5\n").unwrap();
    let rc = sh_status("systemctl reset-failed podscoped; systemctl start podscoped");
    restore_config();
    assert_ne!(rc, 0, "podscoped must refuse a config with an unknown key");
    // EX_CONFIG, which the unit does not retry: no restart loop.
    let show = sh("systemctl show -p ExecMainStatus -p NRestarts -p Result podscoped");
    assert!(show.contains("ExecMainStatus=78"), "{show}");
    assert!(show.contains("NRestarts=0"), "{show}");
    // The failing daemon's last words may reach the journal a moment later.
    wait_until(Duration::from_secs(5), || {
        sh("journalctl -u podscoped -o cat --no-pager -n 400").contains("stop_timeut_ms")
    });
    daemon("start");
}

/// kill -9 again and again, each time followed at once by a call (a client
/// that retries, as the CRI frontend and kubelet do): every call is
/// answered by the restarted daemon, never failed by dbus-daemon's
/// activation timeout. With systemd's default start rate limit the third
/// or so crash left the unit failed, unrestarted, and the call waiting for
/// dbus-daemon's 25 s timeout.
#[tokio::test(flavor = "multi_thread")]
async fn repeated_crashes_never_leave_a_caller_waiting_for_activation() {
    let (m, _) = manager().await;
    let id = create_started(&m, "crashes", host_net()).await;
    let restarts = || -> u32 {
        sh("systemctl show -P NRestarts podscoped")
            .trim()
            .parse()
            .unwrap()
    };
    let before = restarts();
    for _ in 0..8 {
        let pid = sh("systemctl show -P MainPID podscoped").trim().to_owned();
        sh(&format!("kill -9 {pid}"));
        loop {
            match m.list(&by_name("never")).await {
                Ok(_) => break,
                Err(e) => {
                    let (_, msg) = classify(&e);
                    assert!(
                        !msg.contains("Failed to activate"),
                        "a call failed on activation: {msg}"
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(restarts() - before, 8, "each crash restarted the daemon");
    assert_eq!(m.status(&id).await.unwrap().state, State::Ready);
    m.remove(&id).await.unwrap();
}
