//! What real clients send and use: opaque CRI metadata over D-Bus.

use podscope_test_support::harness::*;
use std::time::Duration;

/// Names, namespaces, uids, labels and annotations are opaque: what
/// critest and other clients send passes and comes back unchanged, while
/// unit names, paths and the hostname come from the id or are made valid.
#[tokio::test(flavor = "multi_thread")]
async fn cri_metadata_is_opaque_over_dbus() {
    let (m, _) = manager().await;
    let name = format!("{}-PodSandbox for Test.1 ü", uniq("opaque"));
    let namespace = "cri-test.Namespace_7D4C";
    let uid = "7D4C1E0A-2B7F-4C3E-9A55-0C0FFEE00001";
    let labels = string_map(&[
        ("Mixed Key/with space", "value: 'quoted', ü"),
        ("empty", ""),
    ]);
    let annotations = string_map(&[("example.com/config", "{\n  \"json\": true\n}\n")]);
    let (id, _) = m
        .create(
            &pod_in(&name, namespace, uid, 0),
            &CreateOptions {
                labels: Some(labels.clone()),
                annotations: Some(annotations.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    m.start(&id).await.unwrap();
    let st = m.status(&id).await.unwrap();
    assert_eq!(
        (st.name.clone(), st.namespace.clone(), st.uid.clone()),
        (name.clone(), namespace.to_owned(), uid.to_owned())
    );
    assert_eq!(st.state, State::Ready);
    assert_eq!(st.unit, format!("podscope-{id}.scope"));
    assert_eq!(
        sh(&format!(
            "systemctl show -P ActiveState podscope-{id}.scope"
        )),
        "active\n"
    );
    assert_eq!(st.labels, labels);
    assert_eq!(
        st.annotations["example.com/config"],
        annotations["example.com/config"]
    );
    // The hostname file: the name made a DNS label.
    let hostname = std::fs::read_to_string(st.hostname_path.clone()).unwrap();
    let label = hostname.trim_end();
    assert!(label.ends_with("-podsandbox-for-test.1"), "{label:?}");
    assert!(label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'));
    // The pod's UTS namespace says the same.
    assert_eq!(
        sh(&format!("nsenter -t {} -u hostname", st.init_pid)).trim(),
        label,
        "the pod's hostname is its name, as its hostname file says"
    );
    // The CNI plugins get the metadata as sent, one argument each.
    let attachment = std::fs::read_to_string(attachment_path(&id)).unwrap();
    assert!(
        attachment.contains(&format!("K8S_POD_NAMESPACE={namespace}")),
        "{attachment}"
    );
    assert!(attachment.contains(&format!("K8S_POD_UID={uid}")));
    // Filters match the exact strings.
    let found = m
        .list(&ListFilter {
            name: Some(name.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(st.ips.clone().len(), 1, "a pod-network IP");
    m.remove(&id).await.unwrap();
}

fn machines() -> String {
    sh("machinectl list --no-legend --no-pager")
}

/// A ready pod is a machine: listed with its address, terminated like a
/// `systemctl stop`, unregistered on Stop.
#[tokio::test(flavor = "multi_thread")]
async fn ready_pods_are_machines() {
    let (m, _) = manager().await;
    let name = uniq("Machine.Pod");
    let uid = "0c8a3f3e-1b2c-4d5e-8f90-a1b2c3d4e5f6";
    let (id, _) = m
        .create(
            &pod_in(&name, "machined-ns", uid, 0),
            &CreateOptions::default(),
        )
        .await
        .unwrap();
    m.start(&id).await.unwrap();
    let st = wait_machine(&m, &id).await;
    let machine = st.machine.clone();
    assert_eq!(
        machine,
        format!("machined-ns-{}", name.to_lowercase().replace('.', "-"))
    );
    let ip = st.ips.clone()[0].clone();
    let status = sh(&format!("machinectl status --no-pager {machine}"));
    assert!(
        status.contains(&format!("Leader: {}", st.init_pid)),
        "{status}"
    );
    assert!(status.contains("class container"), "{status}");
    assert!(
        status.contains(&ip),
        "machined reads the pod's address: {status}"
    );
    assert!(status.contains(&format!("podscope-{id}.scope")), "{status}");
    // The uid (a UUID) is the machine id.
    assert_eq!(
        sh(&format!("busctl get-property org.freedesktop.machine1 $(busctl call org.freedesktop.machine1 /org/freedesktop/machine1 org.freedesktop.machine1.Manager GetMachine s {machine} | cut -d'\"' -f2) org.freedesktop.machine1.Machine Id")),
        "ay 16 12 138 63 62 27 44 77 94 143 144 161 178 195 212 229 246\n"
    );
    // Stop unregisters.
    m.stop(&id).await.unwrap();
    assert!(!machines().contains(&machine), "{}", machines());
    assert_eq!(m.status(&id).await.unwrap().machine, "");
    m.remove(&id).await.unwrap();

    // machinectl terminate is a stop from outside: not ready, with a reason.
    let (id, _) = m
        .create(
            &pod_in(&name, "machined-ns", uid, 1),
            &CreateOptions::default(),
        )
        .await
        .unwrap();
    m.start(&id).await.unwrap();
    let machine = wait_machine(&m, &id).await.machine;
    assert!(machines().contains(&machine));
    assert_eq!(sh_status(&format!("machinectl terminate {machine}")), 0);
    let st = wait_state(&m, &id, State::NotReady, Duration::from_secs(10)).await;
    assert!(st.reason.clone().contains("outside podscope"), "{st:?}");
    m.remove(&id).await.unwrap();
}

/// Two pods whose names become the same machine name: the second gets the
/// name with its id.
#[tokio::test(flavor = "multi_thread")]
async fn machine_names_stay_unique() {
    let (m, _) = manager().await;
    let base = uniq("twin");
    let mut ids = Vec::new();
    for name in [format!("{base}.a"), format!("{base}-a")] {
        let (id, _) = m
            .create(&pod_in(&name, "ns", "u", 0), &CreateOptions::default())
            .await
            .unwrap();
        m.start(&id).await.unwrap();
        // The first has its name before the second asks for it.
        wait_machine(&m, &id).await;
        ids.push(id);
    }
    let first = wait_machine(&m, &ids[0]).await.machine;
    let second = wait_machine(&m, &ids[1]).await.machine;
    assert_eq!(first, format!("ns-{}-a", base.to_lowercase()));
    assert_eq!(second, format!("{first}-{}", &ids[1][..12]));
    for id in ids {
        m.remove(&id).await.unwrap();
    }
}

/// Wait: many waiters, answered when the pod stops (0 for a Stop), at once
/// for a stopped pod, 1 with the reason when the scope was stopped
/// outside; a waiter that hangs up leaves nothing behind.
#[tokio::test(flavor = "multi_thread")]
async fn wait_returns_when_the_pod_stops() {
    let (m, _) = manager().await;
    let id = create_started(&m, "wait", host_net()).await;
    let conn = system_connection(Duration::from_secs(60)).await.unwrap();
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let (conn, id) = (conn.clone(), id.clone());
            tokio::spawn(async move {
                let m = Client::new(&conn).await.unwrap();
                m.wait(&id).await
            })
        })
        .collect();
    // A waiter that hangs up: busctl killed by its timeout.
    let (rc, _, err) = sh_out(&format!(
        "busctl --timeout=1 call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Wait s {id}"
    ));
    assert_ne!(rc, 0, "Wait returned while the pod is ready");
    assert!(
        err.contains("Connection timed out") || err.contains("timeout"),
        "{err}"
    );
    // busctl is gone: its Wait ends; ours go on.
    let in_flight = || async {
        let (_, info, _) = m.runtime_status().await.unwrap();
        info.waits_in_flight
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while in_flight().await != 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} waits in flight",
            in_flight().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "a waiter returned early"
    );
    m.stop(&id).await.unwrap();
    let stopped_at = m.status(&id).await.unwrap().finished_at;
    for w in waiters {
        let exit = w.await.unwrap().unwrap();
        assert_eq!(
            (exit.status, exit.finished_at, exit.reason.as_str()),
            (0, stopped_at, "")
        );
    }
    assert_eq!(in_flight().await, 0);
    // Stopped already: at once.
    assert_eq!(m.wait(&id).await.unwrap().status, 0);
    m.remove(&id).await.unwrap();
    let (k, msg) = classify(&m.wait(&id).await.unwrap_err());
    assert_eq!(k, podscope_api::ErrorKind::NotFound, "{msg}");

    // Ended outside podscope: 1, and the reason.
    let id = create_started(&m, "wait-out", host_net()).await;
    let waiter = {
        let (conn, id) = (conn.clone(), id.clone());
        tokio::spawn(async move {
            let m = Client::new(&conn).await.unwrap();
            m.wait(&id).await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sh_status(&format!("systemctl stop podscope-{id}.scope")), 0);
    let exit = waiter.await.unwrap().unwrap();
    assert_eq!(exit.status, 1);
    assert!(exit.reason.contains("outside podscope"), "{}", exit.reason);
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn platform_names_the_node() {
    let (m, _) = manager().await;
    let p = m.platform().await.unwrap();
    let (arch, variant) = (p.architecture, p.variant);
    assert_eq!(p.os, "linux");
    let want = match std::env::consts::ARCH {
        "x86_64" => ("amd64", ""),
        "aarch64" => ("arm64", "v8"),
        other => panic!("no expectation for {other}"),
    };
    assert_eq!((arch.as_str(), variant.as_str()), want);
    let (_, info, _) = m.runtime_status().await.unwrap();
    assert_eq!(
        (
            info.os.clone(),
            info.architecture.clone(),
            info.variant.clone()
        ),
        (p.os.clone(), arch, variant)
    );
}

/// UpdateResources changes a ready pod's scope (systemctl show), is kept in
/// Status, resets a limit left out, and is refused for a stopped pod.
#[tokio::test(flavor = "multi_thread")]
async fn update_resources_changes_the_running_pod() {
    let (m, _) = manager().await;
    let res = |mem: u64, quota: u64, pids: u64| Resources {
        memory_limit_in_bytes: mem,
        cpu_quota: quota,
        cpu_period: if quota > 0 { 100_000 } else { 0 },
        pids_limit: pids,
        ..Default::default()
    };
    let (id, _) = m
        .create(
            &pod(&uniq("upd")),
            &CreateOptions {
                resources: Some(res(64 << 20, 0, 0)),
                ..host_net()
            },
        )
        .await
        .unwrap();
    // Created: recorded, applied by Start.
    m.update_resources(&id, &res(96 << 20, 0, 0)).await.unwrap();
    m.start(&id).await.unwrap();
    let show = |p: &str| sh(&format!("systemctl show -P {p} podscope-{id}.scope"));
    assert_eq!(show("MemoryMax"), format!("{}\n", 96u64 << 20));
    m.update_resources(&id, &res(128 << 20, 50_000, 42))
        .await
        .unwrap();
    assert_eq!(show("MemoryMax"), format!("{}\n", 128u64 << 20));
    assert_eq!(show("CPUQuotaPerSecUSec"), "500ms\n");
    assert_eq!(show("TasksMax"), "42\n");
    let st = m.status(&id).await.unwrap();
    let r = st.resources;
    assert_eq!(
        (r.memory_limit_in_bytes, r.cpu_quota, r.pids_limit),
        (128 << 20, 50_000, 42)
    );
    // Left out: no limit any more.
    m.update_resources(&id, &res(0, 0, 42)).await.unwrap();
    assert_eq!(show("MemoryMax"), "infinity\n");
    assert_eq!(show("CPUQuotaPerSecUSec"), "infinity\n");
    // Bad values are named; a stopped pod is InvalidState.
    let (k, msg) = classify(&m.update_resources(&id, &res(4096, 0, 0)).await.unwrap_err());
    assert_eq!(k, podscope_api::ErrorKind::InvalidArgument);
    assert!(msg.starts_with("resources.memory_limit_in_bytes"), "{msg}");
    m.stop(&id).await.unwrap();
    let (k, _) = classify(&m.update_resources(&id, &res(0, 0, 1)).await.unwrap_err());
    assert_eq!(k, podscope_api::ErrorKind::InvalidState);
    m.remove(&id).await.unwrap();
}

/// Without machined (systemd-container not installed: its bus name cannot
/// be activated), pods work and the journal says so once.
#[tokio::test(flavor = "multi_thread")]
async fn pods_work_without_machined() {
    const ACTIVATION: &str = "/usr/share/dbus-1/system-services/org.freedesktop.machine1.service";
    const HIDDEN: &str = "/run/podscope-test/machine1.service";
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            sh(&format!("mv {HIDDEN} {ACTIVATION}; busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig"));
        }
    }
    sh(&format!("mkdir -p /run/podscope-test && mv {ACTIVATION} {HIDDEN} && busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig && systemctl stop systemd-machined"));
    let _restore = Restore;
    daemon("restart");
    let since = sh("date '+%Y-%m-%d %H:%M:%S.%N' | cut -c1-26");
    let (m, _) = manager().await;
    let mut ids = Vec::new();
    for i in 0..2 {
        let id = create_started(&m, &format!("nomachined{i}"), CreateOptions::default()).await;
        let st = m.status(&id).await.unwrap();
        assert_eq!(st.state, State::Ready);
        assert_eq!(st.machine, "");
        ids.push(id);
    }
    // Registration follows Start's answer: said by then, and not again.
    let said = || {
        sh(&format!(
            "journalctl -u podscoped --since '{}' --no-pager -o cat | grep -c 'systemd-machined is not available' || true",
            since.trim()
        ))
    };
    wait_until(Duration::from_secs(10), || said().trim() != "0");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(said().trim(), "1", "said once");
    for id in ids {
        m.stop(&id).await.unwrap();
        m.remove(&id).await.unwrap();
    }
}

/// podscopectl drives the new verbs: update, wait, and shows the machine
/// and the platform.
#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_update_wait_machine_and_platform() {
    let id = sh(&format!(
        "podscopectl create {} --namespace cli --host-network --start",
        uniq("cli")
    ))
    .trim()
    .to_owned();
    assert_eq!(
        sh(&format!(
            "podscopectl update {id} --memory 67108864 --pids-limit 7"
        )),
        ""
    );
    assert_eq!(
        sh(&format!(
            "systemctl show -P MemoryMax,TasksMax podscope-{id}.scope"
        )),
        "67108864\n7\n"
    );
    // (machined registers the pod just after Start answers.)
    let mut status = String::new();
    wait_until(Duration::from_secs(10), || {
        status = sh(&format!("podscopectl status {id}"));
        status.contains("Machine: ")
    });
    assert!(status.contains("Machine: cli-cli-"), "{status}");
    assert!(sh("podscopectl info").contains("Platform: linux/"));
    let waiter = std::process::Command::new("podscopectl")
        .args(["wait", &id])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sh(&format!("podscopectl stop {id}"));
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("exit status 0, finished "), "{text}");
    sh(&format!("podscopectl rm {id}"));
}
