//! Create, Start, Stop and Remove against the real systemd: scopes, netns
//! units, namespaces, cgroups, listing, concurrency, and rollback of failed
//! steps.

use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::collections::HashMap;
use std::time::Duration;
use zbus::zvariant::Value;

#[tokio::test(flavor = "multi_thread")]
async fn lifecycle_create_start_stop_remove() {
    let (m, conn) = manager().await;
    let name = uniq("life");
    let (id, path) = m
        .create(
            &pod_in(&name, "team-a", "uid-1", 2),
            &CreateOptions {
                hostname: Some("life-host".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(id.len(), 64);
    assert_eq!(
        path.as_str(),
        format!("/org/podscope/Sandbox1/sandbox/{id}")
    );
    let st = m.status(&id).await.unwrap();
    assert_eq!(st.state, State::Created);
    assert_eq!(st.name, name);
    assert_eq!(st.attempt, 2);
    assert!(
        checkpoint_exists(&id),
        "Create persists a checkpoint before replying"
    );

    // Start by unique prefix.
    m.start(&id[..16]).await.unwrap();
    let st = m.status(&id).await.unwrap();
    assert_eq!(st.state, State::Ready);
    let unit = format!("podscope-{id}.scope");
    assert_eq!(st.unit, unit);
    assert_eq!(sh(&format!("systemctl is-active {unit}")).trim(), "active");
    let pid = st.init_pid;
    assert!(pid > 1);
    // The init is the scope's one process, in the pod's own slice under
    // podscope.slice (no cgroup parent was given).
    let slice = format!("podscope-{id}.slice");
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(
        cgroup.contains(&format!("/podscope.slice/{slice}/{unit}")),
        "{cgroup}"
    );
    assert_eq!(sh(&format!("systemctl show -P Slice {unit}")).trim(), slice);
    assert_eq!(
        sh(&format!("systemctl show -P Delegate {unit}")).trim(),
        "yes"
    );
    // New UTS (hostname set), IPC and network namespaces; no capabilities.
    assert_eq!(
        sh(&format!("nsenter -t {pid} -u hostname")).trim(),
        "life-host"
    );
    for ns in ["uts", "ipc", "net"] {
        assert_ne!(
            ns_of(pid, ns),
            ns_of(1, ns),
            "{ns} namespace should be the pod's own"
        );
    }
    assert_eq!(ns_of(pid, "pid"), ns_of(1, "pid"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("CapEff:\t0000000000000000"), "{status}");
    assert!(status.contains("CapBnd:\t0000000000000000"), "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    // The init is in the namespace pinned by the pod's netns unit.
    assert_eq!(st.netns_path, format!("/run/netns/podscope-{id}"));
    assert_eq!(
        sh(&format!("ip netns identify {pid}")).trim(),
        format!("podscope-{id}")
    );
    assert!(sh(&format!("nsenter -t {pid} -n ip -o link show lo")).contains("UP"));
    // The sandbox object shows the same.
    let sb = SandboxProxy::builder(&conn)
        .path(path.clone())
        .unwrap()
        .build()
        .await
        .unwrap();
    assert_eq!(sb.state().await.unwrap(), "ready");
    assert_eq!(sb.init_pid().await.unwrap(), pid);

    m.stop(&id).await.unwrap();
    assert_eq!(m.status(&id).await.unwrap().state, State::NotReady);
    assert!(!pid_alive(pid), "init must be gone after Stop");
    assert_ne!(sh_status(&format!("systemctl is-active --quiet {unit}")), 0);
    m.stop(&id).await.expect("Stop is idempotent");

    m.remove(&id).await.unwrap();
    assert_eq!(kind(m.status(&id).await.unwrap_err()), ErrorKind::NotFound);
    assert!(!checkpoint_exists(&id));
    assert!(!introspect(&conn, "/org/podscope/Sandbox1/sandbox")
        .await
        .contains(&id));
    assert_eq!(kind(m.remove(&id).await.unwrap_err()), ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_pod_network_namespace_is_a_unit() {
    let (m, _) = manager().await;
    let (id, _) = m
        .create(&pod(&uniq("netns")), &CreateOptions::default())
        .await
        .unwrap();
    let netns_unit = format!("podscope-netns@{id}.service");
    let netns = format!("/run/netns/podscope-{id}");
    // Create sets the namespace up, before the pod starts.
    assert_eq!(
        sh(&format!("systemctl is-active {netns_unit}")).trim(),
        "active"
    );
    assert!(std::path::Path::new(&netns).exists());
    assert!(sh("ip netns list").contains(&format!("podscope-{id}")));
    assert!(
        sh(&format!("ip -n podscope-{id} -o link show lo")).contains("UP"),
        "loopback is up"
    );
    let st = m.status(&id).await.unwrap();
    assert_eq!(st.netns_path, netns);
    assert_eq!(st.netns_unit, netns_unit);

    m.start(&id).await.unwrap();
    let scope = format!("podscope-{id}.scope");
    let units = sh("systemctl list-units --plain --no-legend 'podscope-*'");
    assert!(
        units.contains(&scope) && units.contains(&netns_unit),
        "side by side: {units}"
    );
    assert!(sh(&format!("systemctl show -P BindsTo {scope}")).contains(&netns_unit));
    assert!(sh(&format!("systemctl show -P After {scope}")).contains(&netns_unit));

    // Stopping the namespace takes the pod down.
    sh(&format!("systemctl stop {netns_unit}"));
    let st = wait_state(&m, &id, State::NotReady, Duration::from_secs(1)).await;
    assert_ne!(
        sh_status(&format!("systemctl is-active --quiet {scope}")),
        0
    );
    assert_eq!(st.netns_path, "");
    assert!(
        !std::path::Path::new(&netns).exists(),
        "the namespace is unpinned"
    );
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_and_remove_release_the_namespace() {
    let (m, _) = manager().await;
    let id = create_started(&m, "netns-stop", CreateOptions::default()).await;
    let netns_unit = format!("podscope-netns@{id}.service");
    m.stop(&id).await.unwrap();
    assert_ne!(
        sh_status(&format!("systemctl is-active --quiet {netns_unit}")),
        0
    );
    assert!(!std::path::Path::new(&format!("/run/netns/podscope-{id}")).exists());
    m.stop(&id).await.unwrap();
    m.remove(&id).await.unwrap();

    // Remove of a created (never started) pod releases it too.
    let (id, _) = m
        .create(&pod(&uniq("netns-rm")), &CreateOptions::default())
        .await
        .unwrap();
    m.remove(&id).await.unwrap();
    assert_ne!(
        sh_status(&format!(
            "systemctl is-active --quiet podscope-netns@{id}.service"
        )),
        0
    );
    assert!(!std::path::Path::new(&format!("/run/netns/podscope-{id}")).exists());

    // Host-network pods get none.
    let id = create_started(&m, "netns-host", host_net()).await;
    assert_ne!(
        sh_status(&format!(
            "systemctl is-active --quiet podscope-netns@{id}.service"
        )),
        0
    );
    assert!(!std::path::Path::new(&format!("/run/netns/podscope-{id}")).exists());
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_of_a_running_sandbox_stops_it_first() {
    let (m, _) = manager().await;
    let id = create_started(&m, "rmrun", CreateOptions::default()).await;
    let pid = m.status(&id).await.unwrap().init_pid;
    m.remove(&id).await.unwrap();
    assert!(!pid_alive(pid));
    assert_ne!(
        sh_status(&format!("systemctl is-active --quiet podscope-{id}.scope")),
        0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn scope_stopped_outside_podscope_is_noticed_within_a_second() {
    let (m, _) = manager().await;
    let id = create_started(&m, "ext", CreateOptions::default()).await;
    let unit = format!("podscope-{id}.scope");
    sh(&format!("systemctl stop {unit}"));
    let st = wait_state(&m, &id, State::NotReady, Duration::from_secs(1)).await;
    assert!(
        st.reason.clone().contains(&unit),
        "reason names the scope: {st:?}"
    );

    // The init killed: the scope empties, systemd drops it, we notice.
    let id2 = create_started(&m, "ext-kill", CreateOptions::default()).await;
    let pid = m.status(&id2).await.unwrap().init_pid;
    sh(&format!("kill -9 {pid}"));
    wait_state(&m, &id2, State::NotReady, Duration::from_secs(1)).await;
    // Stop after an external stop is still fine.
    m.stop(&id2).await.unwrap();
    m.remove(&id).await.unwrap();
    m.remove(&id2).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn resources_and_cgroup_parent_reach_the_scope() {
    let (m, _) = manager().await;
    let res: HashMap<&str, Value> = HashMap::from([
        ("cpu_period", Value::from(100_000i64)),
        ("cpu_quota", Value::from(50_000i64)),
        ("cpu_shares", Value::from(512i64)),
        ("memory_limit_in_bytes", Value::from(256i64 << 20)),
        ("pids_limit", Value::from(64i64)),
    ]);
    let overhead: HashMap<&str, Value> =
        HashMap::from([("memory_limit_in_bytes", Value::from(16u64 << 20))]);
    let uid = uniq("0c8a3f3e-1b2c");
    // Raw: integers of any D-Bus type are accepted, as documented.
    let (id, _) = create_raw(
        &m,
        &pod(&uniq("res")),
        opts(&[
            ("resources", Value::from(res)),
            ("overhead", Value::from(overhead)),
            (
                "cgroup_parent",
                Value::from(format!("/kubepods/burstable/pod{uid}")),
            ),
        ]),
    )
    .await
    .unwrap();
    m.start(&id).await.unwrap();
    let unit = format!("podscope-{id}.scope");
    let slice = format!("kubepods-burstable-pod{}.slice", uid.replace('-', "_"));
    let show = |p: &str| {
        sh(&format!("systemctl show -P {p} {unit}"))
            .trim()
            .to_owned()
    };
    assert_eq!(show("Slice"), slice);
    assert_eq!(show("MemoryMax"), (272u64 << 20).to_string());
    assert_eq!(show("CPUQuotaPerSecUSec"), "500ms");
    assert_eq!(
        show("CPUWeight"),
        podscope_api::domain::resources::shares_to_weight(512).to_string()
    );
    assert_eq!(show("TasksMax"), "64");
    // And the kernel enforces it (cgroup v1 memory controller on these hosts,
    // v2 elsewhere).
    let v1 = format!("/sys/fs/cgroup/memory/kubepods.slice/kubepods-burstable.slice/{slice}/{unit}/memory.limit_in_bytes");
    let v2 =
        format!("/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/{slice}/{unit}/memory.max");
    let limit = std::fs::read_to_string(&v1)
        .or_else(|_| std::fs::read_to_string(&v2))
        .expect("memory limit file");
    assert_eq!(limit.trim(), (272u64 << 20).to_string());

    // A systemd slice name is used as is.
    let id2 = create_started(
        &m,
        "res2",
        CreateOptions {
            cgroup_parent: Some("kubepods-besteffort.slice".into()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        sh(&format!("systemctl show -P Slice podscope-{id2}.scope")).trim(),
        "kubepods-besteffort.slice"
    );
    m.remove(&id).await.unwrap();
    m.remove(&id2).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_pid_namespace_makes_init_pid_1() {
    let (m, _) = manager().await;
    let id = create_started(
        &m,
        "pidns",
        CreateOptions {
            pid_namespace: Some(NamespaceMode::Pod),
            ..Default::default()
        },
    )
    .await;
    let pid = m.status(&id).await.unwrap().init_pid;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert!(
        nspid.trim_end().ends_with("\t1"),
        "init is PID 1 of its namespace: {nspid}"
    );
    // Orphans in the pod's PID namespace are reparented to the init, which
    // must reap them: leave one behind and look for zombies.
    sh(&format!(
        "nsenter -t {pid} -p sh -c 'sleep 1 >/dev/null 2>&1 & exit 0'"
    ));
    let orphan = sh(&format!("pgrep -P {pid} -x sleep"));
    assert!(
        !orphan.trim().is_empty(),
        "the orphan was reparented to the init"
    );
    wait_until(Duration::from_secs(3), || {
        sh_status(&format!("pgrep -P {pid}")) != 0
    });
    // SIGTERM (systemd's stop) still ends a namespace's PID 1.
    m.stop(&id).await.unwrap();
    assert!(!pid_alive(pid as u32));
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn host_network_shares_the_host_namespaces() {
    let (m, _) = manager().await;
    let id = create_started(
        &m,
        "hostnet",
        CreateOptions {
            ipc_namespace: Some(NamespaceMode::Node),
            ..host_net()
        },
    )
    .await;
    let st = m.status(&id).await.unwrap();
    let pid = st.init_pid;
    for ns in ["net", "uts", "ipc"] {
        assert_eq!(
            ns_of(pid, ns),
            ns_of(1, ns),
            "host-network pod shares the host {ns} namespace"
        );
    }
    assert_eq!(st.netns_path, "");
    assert_eq!(st.network, NetworkMode::Host);
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn ambiguous_prefix_is_an_error() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    // With 40 sandboxes, some pair shares a first hex digit.
    let mut ids = Vec::new();
    for i in 0..40 {
        let (id, _) = m
            .create(&pod(&uniq(&format!("amb{i}"))), &CreateOptions::default())
            .await
            .unwrap();
        ids.push(id);
    }
    let mut firsts: HashMap<char, usize> = HashMap::new();
    for id in &ids {
        *firsts.entry(id.chars().next().unwrap()).or_default() += 1;
    }
    let (c, _) = firsts.iter().find(|(_, n)| **n > 1).unwrap();
    let (k, msg) = classify(&m.status(&c.to_string()).await.unwrap_err());
    assert_eq!(k, ErrorKind::InvalidArgument);
    assert!(msg.contains("ambiguous"), "{msg}");
    for id in ids {
        m.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_and_concurrent_creates_yield_one_sandbox() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let name = uniq("dup");
    let (id, _) = m
        .create(&pod(&name), &CreateOptions::default())
        .await
        .unwrap();
    let (k, msg) = classify(
        &m.create(&pod(&name), &CreateOptions::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(k, ErrorKind::AlreadyExists);
    assert!(msg.contains(&id), "names the existing sandbox: {msg}");
    // Another attempt is a different sandbox.
    let (id1, _) = m
        .create(&pod_in(&name, "default", "u", 1), &CreateOptions::default())
        .await
        .unwrap();

    let name = uniq("race");
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let m = m.clone();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            m.create(&pod(&name), &CreateOptions::default()).await
        }));
    }
    let mut ok = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok((id, _)) => ok.push(id),
            Err(e) => assert_eq!(kind(e), ErrorKind::AlreadyExists),
        }
    }
    assert_eq!(ok.len(), 1, "exactly one of 50 concurrent Creates wins");
    let listed = m.list(&by_name(&name)).await.unwrap();
    assert_eq!(listed.len(), 1);
    for i in [id, id1, ok.pop().unwrap()] {
        m.remove(&i).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn operations_on_different_sandboxes_run_in_parallel() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(
            m.create(&pod(&uniq(&format!("par{i}"))), &CreateOptions::default())
                .await
                .unwrap()
                .0,
        );
    }
    let starts = ids.iter().map(|id| {
        let (m, id) = (m.clone(), id.clone());
        tokio::spawn(async move { m.start(&id).await })
    });
    for t in starts.collect::<Vec<_>>() {
        t.await.unwrap().unwrap();
    }
    for id in &ids {
        assert_eq!(m.status(id).await.unwrap().state, State::Ready);
    }
    let ready = m
        .list(&ListFilter {
            state: Some(State::Ready),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(ids
        .iter()
        .all(|id| ready.iter().any(|d| d.id.clone() == *id)));
    let removes = ids.iter().map(|id| {
        let (m, id) = (m.clone(), id.clone());
        tokio::spawn(async move { m.remove(&id).await })
    });
    for t in removes.collect::<Vec<_>>() {
        t.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn list_filters_by_label_state_and_prefix() {
    let (m, _) = manager().await;
    let tag = uniq("t");
    let a = create_started(&m, "la", labelled(&[("app", "web"), ("tag", &tag)])).await;
    let (b, _) = m
        .create(
            &pod(&uniq("lb")),
            &labelled(&[("app", "db"), ("tag", &tag)]),
        )
        .await
        .unwrap();
    let by_tag = || ListFilter {
        labels: Some(string_map(&[("tag", &tag)])),
        ..Default::default()
    };
    assert_eq!(m.list(&by_tag()).await.unwrap().len(), 2);
    let web = m
        .list(&ListFilter {
            labels: Some(string_map(&[("tag", &tag), ("app", "web")])),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(web.len(), 1);
    assert_eq!(web[0].id, a);
    let created = m
        .list(&ListFilter {
            state: Some(State::Created),
            ..by_tag()
        })
        .await
        .unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].id, b);
    let pre = m
        .list(&ListFilter {
            id: Some(a[..20].to_owned()),
            ..by_tag()
        })
        .await
        .unwrap();
    assert_eq!(pre.len(), 1);
    m.remove(&a).await.unwrap();
    m.remove(&b).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_sandbox_cannot_be_started_again() {
    let (m, _) = manager().await;
    let id = create_started(&m, "restart", CreateOptions::default()).await;
    m.start(&id)
        .await
        .expect("Start of a ready sandbox is a no-op");
    m.stop(&id).await.unwrap();
    let (k, msg) = classify(&m.start(&id).await.unwrap_err());
    assert_eq!(k, ErrorKind::InvalidState);
    assert!(msg.contains(&id), "{msg}");
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_scope_job_is_reported_and_rolled_back() {
    let (m, _) = manager().await;
    sh("systemctl mask podscope-test-masked.slice");
    let (id, _) = m
        .create(
            &pod(&uniq("masked")),
            &CreateOptions {
                cgroup_parent: Some("podscope-test-masked.slice".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let (k, msg) = classify(&m.start(&id).await.unwrap_err());
    sh("systemctl unmask podscope-test-masked.slice");
    assert_eq!(k, ErrorKind::SystemdFailed, "{msg}");
    assert!(
        msg.contains(&id) && msg.contains("create scope"),
        "names sandbox and step: {msg}"
    );
    assert!(msg.contains("masked"), "carries systemd's reason: {msg}");
    // A failed Start undoes everything: the network is released, the
    // namespace unpinned, and the sandbox is not ready, saying why.
    let st = m.status(&id).await.unwrap();
    assert_eq!(st.state, State::NotReady);
    assert!(st.reason.clone().starts_with("start failed: "), "{st:?}");
    assert!(st.ips.clone().is_empty());
    assert!(!std::path::Path::new(&format!("/run/netns/podscope-{id}")).exists());
    assert!(host_local_owner_ips("podscope-test", &id).is_empty());
    // The init spawned for it is gone, and so is any scope.
    wait_until(Duration::from_secs(2), || {
        sh_status(&format!("pgrep -f -- '--id {id}'")) != 0
    });
    assert_ne!(
        sh_status(&format!("systemctl is-active --quiet podscope-{id}.scope")),
        0
    );
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_init_undoes_the_network_and_leaves_the_sandbox_notready() {
    let (m, _) = manager().await;
    let (id, _) = m
        .create(&pod(&uniq("initfail")), &CreateOptions::default())
        .await
        .unwrap();
    assert_eq!(host_local_owner_ips("podscope-test", &id).len(), 1);
    with_config("init_path = \"/bin/false\"\n", || async {
        let (m, _) = manager().await;
        let (k, msg) = classify(&m.start(&id).await.unwrap_err());
        assert_eq!(k, ErrorKind::Internal, "{msg}");
        assert!(
            msg.contains(&id) && msg.contains("spawn podscope-init"),
            "{msg}"
        );
        let st = m.status(&id).await.unwrap();
        assert_eq!(st.state, State::NotReady);
        assert!(st.reason.clone().contains("spawn podscope-init"), "{st:?}");
        assert_ne!(
            sh_status(&format!("systemctl is-active --quiet podscope-{id}.scope")),
            0
        );
        assert!(
            host_local_owner_ips("podscope-test", &id).is_empty(),
            "address released"
        );
        assert!(
            !std::path::Path::new(&netns_path(&id)).exists(),
            "namespace released"
        );
    })
    .await;
    let (m, _) = manager().await;
    m.remove(&id).await.unwrap();
}

/// The pod's files live on /run (a tmpfs): after a reboot, or a Create cut
/// short after its checkpoint, Start writes them again.
#[tokio::test(flavor = "multi_thread")]
async fn start_writes_missing_pod_files() {
    let (m, _) = manager().await;
    let name = uniq("files");
    let (id, _) = m
        .create(&pod(&name), &CreateOptions::default())
        .await
        .unwrap();
    let dir = format!("/run/podscope/sandboxes/{id}");
    std::fs::remove_dir_all(&dir).unwrap();
    m.start(&id).await.unwrap();
    let st = m.status(&id).await.unwrap();
    assert_eq!(st.resolv_conf_path, format!("{dir}/resolv.conf"));
    assert!(std::path::Path::new(&st.resolv_conf_path).exists());
    assert_eq!(
        std::fs::read_to_string(&st.hostname_path).unwrap(),
        format!("{name}\n")
    );
    m.remove(&id).await.unwrap();
}
