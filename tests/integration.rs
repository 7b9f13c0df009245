//! Integration tests against a real systemd, system bus and polkit: run
//! inside the harness (tests/harness, `make check`), as root, with podscope
//! installed by `make install`. Each test makes its own uniquely named
//! sandboxes; tests that restart the daemon leave it running.

#[path = "cases/authorization.rs"]
mod authorization;
#[path = "cases/clients.rs"]
mod clients;
mod common;
#[path = "cases/cri.rs"]
mod cri;
#[path = "cases/network.rs"]
mod network;

use common::*;
use futures_util::StreamExt;
use podscope::client::{classify, dict_str, dict_strs, dict_u64, SandboxProxy};
use podscope::ErrorKind;
use std::collections::HashMap;
use std::time::Duration;
use zbus::zvariant::Value;

#[tokio::test(flavor = "multi_thread")]
async fn interface_xml_matches_live_introspection() {
    let (m, conn) = manager().await;
    let (id, path) = m
        .create(&uniq("xml"), "default", "u1", 0, HashMap::new())
        .await
        .unwrap();
    let live_mgr = introspect(&conn, "/org/podscope/Sandbox1").await;
    let live_sb = introspect(&conn, path.as_str()).await;
    let shipped = std::fs::read_to_string("/usr/share/dbus-1/interfaces/org.podscope.Sandbox1.xml")
        .expect("make install ships the interface XML");
    for iface in [
        "org.podscope.Sandbox1.Manager",
        "org.podscope.Sandbox1.Sandbox",
    ] {
        let want = interface_tags(&shipped, iface);
        let live = interface_tags(
            if iface.ends_with("Manager") {
                &live_mgr
            } else {
                &live_sb
            },
            iface,
        );
        assert!(!want.is_empty(), "{iface} missing from the shipped XML");
        assert_eq!(
            want, live,
            "dbus/org.podscope.Sandbox1.xml differs from the live {iface}"
        );
    }
    // The standard interfaces are there too.
    assert!(live_mgr.contains("org.freedesktop.DBus.ObjectManager"));
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn lifecycle_create_start_stop_remove() {
    let (m, conn) = manager().await;
    let name = uniq("life");
    let (id, path) = m
        .create(
            &name,
            "team-a",
            "uid-1",
            2,
            opts(&[("hostname", Value::from("life-host"))]),
        )
        .await
        .unwrap();
    assert_eq!(id.len(), 64);
    assert_eq!(
        path.as_str(),
        format!("/org/podscope/Sandbox1/sandbox/{id}")
    );
    let st = m.status(&id).await.unwrap();
    assert_eq!(dict_str(&st, "state"), "created");
    assert_eq!(dict_str(&st, "name"), name);
    assert_eq!(dict_u64(&st, "attempt"), 2);
    assert!(
        checkpoint_exists(&id),
        "Create persists a checkpoint before replying"
    );

    // Start by unique prefix.
    m.start(&id[..16]).await.unwrap();
    let st = m.status(&id).await.unwrap();
    assert_eq!(dict_str(&st, "state"), "ready");
    let unit = format!("podscope-{id}.scope");
    assert_eq!(dict_str(&st, "unit"), unit);
    assert_eq!(sh(&format!("systemctl is-active {unit}")).trim(), "active");
    let pid = dict_u64(&st, "init_pid") as u32;
    assert!(pid > 1);
    // The init is the scope's one process, in podscope.slice.
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(
        cgroup.contains(&format!("/podscope.slice/{unit}")),
        "{cgroup}"
    );
    assert_eq!(
        sh(&format!("systemctl show -P Slice {unit}")).trim(),
        "podscope.slice"
    );
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
    assert_eq!(
        dict_str(&st, "netns_path"),
        format!("/run/netns/podscope-{id}")
    );
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
    assert_eq!(dict_str(&m.status(&id).await.unwrap(), "state"), "notready");
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
        .create(&uniq("netns"), "default", "u", 0, HashMap::new())
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
    assert_eq!(dict_str(&st, "netns_path"), netns);
    assert_eq!(dict_str(&st, "netns_unit"), netns_unit);

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
    let st = wait_state(&m, &id, "notready", Duration::from_secs(1)).await;
    assert_ne!(
        sh_status(&format!("systemctl is-active --quiet {scope}")),
        0
    );
    assert_eq!(dict_str(&st, "netns_path"), "");
    assert!(
        !std::path::Path::new(&netns).exists(),
        "the namespace is unpinned"
    );
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_and_remove_release_the_namespace() {
    let (m, _) = manager().await;
    let id = create_started(&m, "netns-stop", HashMap::new()).await;
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
        .create(&uniq("netns-rm"), "default", "u", 0, HashMap::new())
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
    let id = create_started(&m, "netns-host", opts(&[("network", Value::from("host"))])).await;
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
async fn a_namespace_without_a_record_is_stopped_at_recovery() {
    let orphan = "cd".repeat(32);
    let unit = format!("podscope-netns@{orphan}.service");
    daemon("stop");
    sh(&format!("systemctl start {unit}"));
    daemon("start");
    let (m, _) = manager().await;
    assert_ne!(sh_status(&format!("systemctl is-active --quiet {unit}")), 0);
    assert!(!std::path::Path::new(&format!("/run/netns/podscope-{orphan}")).exists());
    let (_, info) = m.runtime_status().await.unwrap();
    let orphans = <Vec<String>>::try_from(info["orphans_stopped"].try_clone().unwrap()).unwrap();
    assert!(orphans.contains(&unit), "{orphans:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_of_a_running_sandbox_stops_it_first() {
    let (m, _) = manager().await;
    let id = create_started(&m, "rmrun", HashMap::new()).await;
    let pid = dict_u64(&m.status(&id).await.unwrap(), "init_pid") as u32;
    m.remove(&id).await.unwrap();
    assert!(!pid_alive(pid));
    assert_ne!(
        sh_status(&format!("systemctl is-active --quiet podscope-{id}.scope")),
        0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn signals_announce_create_state_changes_and_remove() {
    let (m, conn) = manager().await;
    let mut created = m.receive_sandbox_created().await.unwrap();
    let mut changed = m.receive_sandbox_state_changed().await.unwrap();
    let mut removed = m.receive_sandbox_removed().await.unwrap();
    let (id, path) = m
        .create(&uniq("sig"), "default", "u", 0, HashMap::new())
        .await
        .unwrap();
    let sb = SandboxProxy::builder(&conn)
        .path(path.clone())
        .unwrap()
        .cache_properties(zbus::proxy::CacheProperties::Yes)
        .build()
        .await
        .unwrap();
    let mut state_changes = sb.receive_state_changed().await;
    assert_eq!(
        state_changes.next().await.unwrap().get().await.unwrap(),
        "created"
    );

    let c = next_signal(&mut created, |s| {
        s.args().map(|a| a.id == id).unwrap_or(false)
    })
    .await;
    assert_eq!(c.args().unwrap().path, path);

    m.start(&id).await.unwrap();
    next_signal(&mut changed, |s| {
        s.args()
            .map(|a| a.id == id && a.state == "ready")
            .unwrap_or(false)
    })
    .await;
    let v = tokio::time::timeout(Duration::from_secs(5), state_changes.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        v.get().await.unwrap(),
        "ready",
        "PropertiesChanged carries the new State"
    );

    m.stop(&id).await.unwrap();
    next_signal(&mut changed, |s| {
        s.args()
            .map(|a| a.id == id && a.state == "notready")
            .unwrap_or(false)
    })
    .await;
    m.remove(&id).await.unwrap();
    next_signal(&mut removed, |s| {
        s.args().map(|a| a.id == id).unwrap_or(false)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn object_manager_lists_every_sandbox() {
    let (m, conn) = manager().await;
    let (id, path) = m
        .create(&uniq("om"), "default", "u", 0, HashMap::new())
        .await
        .unwrap();
    let om = zbus::fdo::ObjectManagerProxy::builder(&conn)
        .destination("org.podscope.Sandbox1")
        .unwrap()
        .path("/org/podscope/Sandbox1")
        .unwrap()
        .build()
        .await
        .unwrap();
    let objects = om.get_managed_objects().await.unwrap();
    let ifaces = objects
        .iter()
        .find(|(p, _)| p.as_str() == path.as_str())
        .map(|(_, i)| i)
        .expect("sandbox object listed by GetManagedObjects");
    let props = ifaces
        .iter()
        .find(|(n, _)| n.as_str() == "org.podscope.Sandbox1.Sandbox")
        .map(|(_, p)| p)
        .unwrap();
    assert_eq!(
        String::try_from(props["Id"].try_clone().unwrap()).unwrap(),
        id
    );
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn scope_stopped_outside_podscope_is_noticed_within_a_second() {
    let (m, _) = manager().await;
    let id = create_started(&m, "ext", HashMap::new()).await;
    let unit = format!("podscope-{id}.scope");
    sh(&format!("systemctl stop {unit}"));
    let st = wait_state(&m, &id, "notready", Duration::from_secs(1)).await;
    assert!(
        dict_str(&st, "reason").contains(&unit),
        "reason names the scope: {st:?}"
    );

    // The init killed: the scope empties, systemd drops it, we notice.
    let id2 = create_started(&m, "ext-kill", HashMap::new()).await;
    let pid = dict_u64(&m.status(&id2).await.unwrap(), "init_pid");
    sh(&format!("kill -9 {pid}"));
    wait_state(&m, &id2, "notready", Duration::from_secs(1)).await;
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
    let id = create_started(
        &m,
        "res",
        opts(&[
            ("resources", Value::from(res)),
            ("overhead", Value::from(overhead)),
            (
                "cgroup_parent",
                Value::from(format!("/kubepods/burstable/pod{uid}")),
            ),
        ]),
    )
    .await;
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
        podscope::domain::resources::shares_to_weight(512).to_string()
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
        opts(&[("cgroup_parent", Value::from("kubepods-besteffort.slice"))]),
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
    let id = create_started(&m, "pidns", opts(&[("pid_namespace", Value::from("pod"))])).await;
    let pid = dict_u64(&m.status(&id).await.unwrap(), "init_pid");
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
        opts(&[
            ("network", Value::from("host")),
            ("ipc_namespace", Value::from("node")),
        ]),
    )
    .await;
    let st = m.status(&id).await.unwrap();
    let pid = dict_u64(&st, "init_pid") as u32;
    for ns in ["net", "uts", "ipc"] {
        assert_eq!(
            ns_of(pid, ns),
            ns_of(1, ns),
            "host-network pod shares the host {ns} namespace"
        );
    }
    assert_eq!(dict_str(&st, "netns_path"), "");
    assert_eq!(dict_str(&st, "network"), "host");
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_named_errors_and_changes_nothing() {
    let (m, _) = manager().await;
    let before = m.list(HashMap::new()).await.unwrap().len();
    let dirs_before = state_dirs();
    // (name, namespace, uid, options, field the error must name)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        HashMap<&'static str, Value<'static>>,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        ("tab\tname", "default", "u", HashMap::new(), "name:"),
        ("", "default", "u", HashMap::new(), "name:"),
        ("ok", "line\nbreak", "u", HashMap::new(), "namespace:"),
        ("ok", "default", "", HashMap::new(), "uid:"),
        ("ok", "default", "u;IP=10.88.0.99", HashMap::new(), "uid:"),
        (
            "ok",
            "default",
            "u",
            opts(&[("hostnam", Value::from("x"))]),
            "hostnam:",
        ),
        (
            "ok",
            "default",
            "u",
            opts(&[("hostname", Value::from(5u32))]),
            "hostname:",
        ),
        (
            "ok",
            "default",
            "u",
            opts(&[("labels", Value::from("x"))]),
            "labels:",
        ),
        (
            "ok",
            "default",
            "u",
            opts(&[("network", Value::from("bridge"))]),
            "network:",
        ),
        (
            "ok",
            "default",
            "u",
            opts(&[("cgroup_parent", Value::from("relative/path"))]),
            "cgroup_parent:",
        ),
        (
            "ok",
            "default",
            "u",
            opts(&[("runtime_handler", Value::from("kata"))]),
            "runtime_handler:",
        ),
        (
            "ok",
            "default",
            "u",
            opts(&[("log_directory", Value::from("var/log"))]),
            "log_directory:",
        ),
    ];
    for (name, ns, uid, o, field) in cases {
        let e = m.create(name, ns, uid, 0, o).await.unwrap_err();
        let (k, msg) = classify(&e);
        assert_eq!(k, ErrorKind::InvalidArgument, "{name}/{ns}/{uid}: {msg}");
        assert!(msg.starts_with(field), "error should name {field}: {msg}");
    }
    // Ids: malformed, unknown, ambiguous.
    let e = m.status("not-hex!").await.unwrap_err();
    assert_eq!(kind(e), ErrorKind::InvalidArgument);
    let unknown = "f".repeat(64);
    for e in [
        m.status(&unknown).await.unwrap_err(),
        m.start(&unknown).await.unwrap_err(),
        m.stop(&unknown).await.unwrap_err(),
        m.remove(&unknown).await.unwrap_err(),
    ] {
        let (k, msg) = classify(&e);
        assert_eq!(k, ErrorKind::NotFound, "{msg}");
        assert!(msg.contains(&unknown), "names the id: {msg}");
    }
    assert_eq!(m.list(HashMap::new()).await.unwrap().len(), before);
    assert_eq!(
        state_dirs(),
        dirs_before,
        "rejected calls leave no state behind"
    );
    // Bad list filters too.
    let e = m
        .list(opts(&[("colour", Value::from("x"))]))
        .await
        .unwrap_err();
    assert_eq!(kind(e), ErrorKind::InvalidArgument);
    let e = m
        .list(opts(&[("state", Value::from("running"))]))
        .await
        .unwrap_err();
    assert_eq!(kind(e), ErrorKind::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread")]
async fn ambiguous_prefix_is_an_error() {
    let (m, _) = manager().await;
    // With 40 sandboxes, some pair shares a first hex digit.
    let mut ids = Vec::new();
    for i in 0..40 {
        let (id, _) = m
            .create(&uniq(&format!("amb{i}")), "default", "u", 0, HashMap::new())
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
    let (m, _) = manager().await;
    let name = uniq("dup");
    let (id, _) = m
        .create(&name, "default", "u", 0, HashMap::new())
        .await
        .unwrap();
    let (k, msg) = classify(
        &m.create(&name, "default", "u", 0, HashMap::new())
            .await
            .unwrap_err(),
    );
    assert_eq!(k, ErrorKind::AlreadyExists);
    assert!(msg.contains(&id), "names the existing sandbox: {msg}");
    // Another attempt is a different sandbox.
    let (id1, _) = m
        .create(&name, "default", "u", 1, HashMap::new())
        .await
        .unwrap();

    let name = uniq("race");
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let m = m.clone();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            m.create(&name, "default", "u", 0, HashMap::new()).await
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
    let listed = m
        .list(opts(&[("name", Value::from(name.clone()))]))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    for i in [id, id1, ok.pop().unwrap()] {
        m.remove(&i).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn operations_on_different_sandboxes_run_in_parallel() {
    let (m, _) = manager().await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(
            m.create(&uniq(&format!("par{i}")), "default", "u", 0, HashMap::new())
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
        assert_eq!(dict_str(&m.status(id).await.unwrap(), "state"), "ready");
    }
    let ready = m
        .list(opts(&[("state", Value::from("ready"))]))
        .await
        .unwrap();
    assert!(ids
        .iter()
        .all(|id| ready.iter().any(|d| dict_str(d, "id") == *id)));
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
    let labels = |app: &str| {
        Value::from(HashMap::from([
            ("app", app.to_owned()),
            ("tag", tag.clone()),
        ]))
    };
    let a = create_started(&m, "la", opts(&[("labels", labels("web"))])).await;
    let (b, _) = m
        .create(
            &uniq("lb"),
            "default",
            "u",
            0,
            opts(&[("labels", labels("db"))]),
        )
        .await
        .unwrap();
    let by_tag = |extra: Vec<(&'static str, Value<'static>)>| {
        let mut f = opts(&[("labels", Value::from(HashMap::from([("tag", tag.clone())])))]);
        f.extend(extra);
        f
    };
    assert_eq!(m.list(by_tag(vec![])).await.unwrap().len(), 2);
    let web = m
        .list(opts(&[(
            "labels",
            Value::from(HashMap::from([("tag", tag.clone()), ("app", "web".into())])),
        )]))
        .await
        .unwrap();
    assert_eq!(web.len(), 1);
    assert_eq!(dict_str(&web[0], "id"), a);
    let created = m
        .list(by_tag(vec![("state", Value::from("created"))]))
        .await
        .unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(dict_str(&created[0], "id"), b);
    let pre = m
        .list(by_tag(vec![("id", Value::from(a[..20].to_owned()))]))
        .await
        .unwrap();
    assert_eq!(pre.len(), 1);
    m.remove(&a).await.unwrap();
    m.remove(&b).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_sandbox_cannot_be_started_again() {
    let (m, _) = manager().await;
    let id = create_started(&m, "restart", HashMap::new()).await;
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
async fn sandbox_object_methods_drive_the_lifecycle() {
    let (m, conn) = manager().await;
    let (id, path) = m
        .create(&uniq("objm"), "default", "u", 0, HashMap::new())
        .await
        .unwrap();
    let sb = SandboxProxy::builder(&conn)
        .path(path)
        .unwrap()
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .unwrap();
    sb.start().await.unwrap();
    assert_eq!(sb.state().await.unwrap(), "ready");
    sb.stop().await.unwrap();
    assert_eq!(sb.state().await.unwrap(), "notready");
    sb.remove().await.unwrap();
    assert_eq!(kind(m.status(&id).await.unwrap_err()), ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_recovers_every_sandbox_and_leaves_pods_running() {
    let (m, _) = manager().await;
    let (created, _) = m
        .create(&uniq("rc-c"), "default", "u", 0, HashMap::new())
        .await
        .unwrap();
    let ready = create_started(&m, "rc-r", HashMap::new()).await;
    let stopped = create_started(&m, "rc-s", HashMap::new()).await;
    m.stop(&stopped).await.unwrap();
    let pid = dict_u64(&m.status(&ready).await.unwrap(), "init_pid");
    let invocation = sh(&format!(
        "systemctl show -P InvocationID podscope-{ready}.scope"
    ));

    daemon("restart");
    let (m, _) = manager().await;
    for (id, state) in [
        (&created, "created"),
        (&ready, "ready"),
        (&stopped, "notready"),
    ] {
        assert_eq!(
            dict_str(&m.status(id).await.unwrap(), "state"),
            state,
            "{id}"
        );
    }
    assert_eq!(dict_u64(&m.status(&ready).await.unwrap(), "init_pid"), pid);
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
    assert_eq!(dict_str(&st, "state"), "notready");
    assert!(dict_str(&st, "reason").contains("not running"), "{st:?}");
    for id in [created, ready, stopped] {
        m.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_operation_loses_nothing_and_leaks_no_scope() {
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
                let o = opts(&[("labels", Value::from(HashMap::from([("tag", tag.clone())])))]);
                let Ok((id, _)) = m
                    .create(&format!("{tag}-{c}-{i}"), "default", "u", 0, o)
                    .await
                else {
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
        assert_eq!(
            dict_str(&m.status(id).await.unwrap(), "state"),
            "ready",
            "{id}"
        );
    }
    // Every podscope scope belongs to a recorded, ready sandbox.
    let ready: Vec<String> = m
        .list(opts(&[("state", Value::from("ready"))]))
        .await
        .unwrap()
        .iter()
        .map(|d| dict_str(d, "id"))
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
    for d in m
        .list(opts(&[(
            "labels",
            Value::from(HashMap::from([("tag", tag.clone())])),
        )]))
        .await
        .unwrap()
    {
        m.remove(&dict_str(&d, "id")).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_checkpoints_are_quarantined_and_the_rest_recovered() {
    let (m, _) = manager().await;
    let good = create_started(&m, "q-good", HashMap::new()).await;
    let (bad, _) = m
        .create(&uniq("q-bad"), "default", "u", 0, HashMap::new())
        .await
        .unwrap();
    let (trunc, _) = m
        .create(&uniq("q-trunc"), "default", "u", 0, HashMap::new())
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
    assert_eq!(dict_str(&m.status(&good).await.unwrap(), "state"), "ready");
    for id in [&bad, &trunc] {
        assert_eq!(kind(m.status(id).await.unwrap_err()), ErrorKind::NotFound);
        assert!(!std::path::Path::new(&ck(id)).exists());
    }
    let (_, info) = m.runtime_status().await.unwrap();
    let q = <Vec<(String, String, String)>>::try_from(info["quarantined"].try_clone().unwrap())
        .unwrap();
    for id in [&bad, &trunc] {
        let entry = q
            .iter()
            .find(|(d, _, _)| d == id)
            .expect("quarantine reported");
        assert!(entry.2.contains("sha256 mismatch"), "{entry:?}");
        assert!(
            std::path::Path::new(&entry.1).join("checkpoint").exists(),
            "moved aside, not deleted"
        );
    }
    let log = sh("journalctl -u podscoped -o cat --no-pager -n 200");
    assert!(
        log.contains(&format!("corrupt checkpoint of {bad} quarantined")),
        "{log}"
    );
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
    let (_, info) = m.runtime_status().await.unwrap();
    let orphans = <Vec<String>>::try_from(info["orphans_stopped"].try_clone().unwrap()).unwrap();
    assert!(orphans.contains(&unit), "{orphans:?}");
}

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
    let labelled = || opts(&[("labels", Value::from(HashMap::from([("tag", tag.clone())])))]);
    for i in 0..8 {
        m.create(&format!("{tag}-{i}"), "default", "u", 0, labelled())
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
        let conn = podscope::client::system_connection(Duration::from_secs(10))
            .await
            .unwrap();
        let m = podscope::client::ManagerProxy::new(&conn).await.unwrap();
        m.version().await.unwrap_or_else(|e| {
            let (_, journal, _) = sh_out(
                "journalctl -u podscoped -o short-precise --no-pager -n 40; systemctl status --no-pager podscoped",
            );
            panic!("round {round}: call queued during activation not answered: {e}\n{journal}")
        });
    }
    let (m, _) = manager().await;
    for d in m.list(labelled()).await.unwrap() {
        m.remove(&dict_str(&d, "id")).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_hanging_up_does_not_cancel_the_operation() {
    with_config(&slow_init_config(), || async {
        let (m, _) = manager().await;
        let (id, _) = m.create(&uniq("hang"), "default", "u", 0, HashMap::new()).await.unwrap();
        // busctl is killed 300 ms into a Start that takes over a second.
        let rc = sh_status(&format!(
            "timeout -s KILL 0.3 busctl call --timeout=30 org.podscope.Sandbox1 /org/podscope/Sandbox1 \
             org.podscope.Sandbox1.Manager Start s {id}"
        ));
        assert_ne!(rc, 0, "the caller was killed mid-call");
        wait_state(&m, &id, "ready", Duration::from_secs(5)).await;
        assert_eq!(sh(&format!("systemctl is-active podscope-{id}.scope")).trim(), "active");
        m.remove(&id).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_killed_during_start_leaves_no_half_started_pod() {
    with_config(&slow_init_config(), || async {
        let (m, _) = manager().await;
        let (id, _) = m
            .create(&uniq("k9start"), "default", "u", 0, HashMap::new())
            .await
            .unwrap();
        start_in_background_slowly(&id);
        sh("systemctl kill -s KILL podscoped");
        let (m, _) = manager().await;
        assert_eq!(
            dict_str(&m.status(&id).await.unwrap(), "state"),
            "created",
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
        let (m, _) = manager().await;
        let (id, _) = m
            .create(&uniq("drain"), "default", "u", 0, HashMap::new())
            .await
            .unwrap();
        start_in_background_slowly(&id);
        daemon("restart");
        let (m, _) = manager().await;
        assert_eq!(
            dict_str(&m.status(&id).await.unwrap(), "state"),
            "ready",
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

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_scope_job_is_reported_and_rolled_back() {
    let (m, _) = manager().await;
    sh("systemctl mask podscope-test-masked.slice");
    let (id, _) = m
        .create(
            &uniq("masked"),
            "default",
            "u",
            0,
            opts(&[("cgroup_parent", Value::from("podscope-test-masked.slice"))]),
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
    assert_eq!(dict_str(&st, "state"), "notready");
    assert!(
        dict_str(&st, "reason").starts_with("start failed: "),
        "{st:?}"
    );
    assert!(dict_strs(&st, "ips").is_empty());
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
async fn unprivileged_callers_may_read_but_not_manage() {
    let (m, _) = manager().await;
    let id = create_started(&m, "polkit", HashMap::new()).await;
    let as_nobody = |args: &str| as_nobody(&format!("busctl {args}"));
    let (rc, _, err) = as_nobody(&format!(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Stop s {id}"
    ));
    assert_ne!(rc, 0);
    assert!(err.contains("denied") || err.contains("Access"), "{err}");
    assert_eq!(
        dict_str(&m.status(&id).await.unwrap(), "state"),
        "ready",
        "denied call changed nothing"
    );
    let (rc, _, err) = as_nobody(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Create sssua{sv} evil default u 0 0",
    );
    assert_ne!(rc, 0, "{err}");
    let (rc, out, err) = as_nobody(&format!(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Status s {id}"
    ));
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("ready"));
    let (rc, out, _) = as_nobody(&format!(
        "get-property org.podscope.Sandbox1 /org/podscope/Sandbox1/sandbox/{id} org.podscope.Sandbox1.Sandbox State"
    ));
    assert_eq!(rc, 0);
    assert!(out.contains("ready"));
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_init_undoes_the_network_and_leaves_the_sandbox_notready() {
    let (m, _) = manager().await;
    let (id, _) = m
        .create(&uniq("initfail"), "default", "u", 0, HashMap::new())
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
        assert_eq!(dict_str(&st, "state"), "notready");
        assert!(
            dict_str(&st, "reason").contains("spawn podscope-init"),
            "{st:?}"
        );
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

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_config_stops_the_daemon_with_a_named_error() {
    daemon("stop");
    std::fs::write("/etc/podscope/podscope.toml", "stop_timeut_ms = 5\n").unwrap();
    let rc = sh_status("systemctl reset-failed podscoped; systemctl start podscoped");
    restore_config();
    assert_ne!(rc, 0, "podscoped must refuse a config with an unknown key");
    // The failing daemon's last words may reach the journal a moment later.
    wait_until(Duration::from_secs(5), || {
        sh("journalctl -u podscoped -o cat --no-pager -n 400").contains("stop_timeut_ms")
    });
    daemon("start");
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_status_line_and_journal_fields() {
    let (m, _) = manager().await;
    let id = create_started(&m, "journal", HashMap::new()).await;
    wait_until(Duration::from_secs(8), || {
        sh("systemctl show -P StatusText podscoped").contains("ready")
    });
    assert!(sh("systemctl show -P StatusText podscoped").contains("sandboxes"));
    assert_eq!(sh("systemctl show -P Type podscoped").trim(), "notify");
    let j = sh(&format!(
        "journalctl -u podscoped SANDBOX_ID={id} -o json --no-pager"
    ));
    assert!(
        j.contains(&format!("sandbox {id} started in podscope-{id}.scope")),
        "journal has SANDBOX_ID entries: {j}"
    );
    assert!(
        j.contains(&format!("\"UNIT\":\"podscope-{id}.scope\"")),
        "{j}"
    );
    let (name, version, api) = m.version().await.unwrap();
    assert_eq!((name.as_str(), api.as_str()), ("podscope", "v1"));
    assert!(!version.is_empty());
    let (conds, _) = m.runtime_status().await.unwrap();
    assert!(conds.iter().any(|c| c.0 == "RuntimeReady" && c.1));
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_shows_readable_tables() {
    let id = sh(&format!(
        "podscopectl create {} --label app=ctl --hostname ctl --start",
        uniq("ctl")
    ))
    .trim()
    .to_owned();
    let list = sh("podscopectl list --label app=ctl");
    let header = list.lines().next().unwrap();
    for col in ["ID", "POD", "STATE", "CREATED", "UNIT"] {
        assert!(header.contains(col), "{list}");
    }
    assert!(list.contains(&id[..12]) && list.contains("ready"), "{list}");
    assert!(list.contains("1 sandboxes listed."), "{list}");
    let status = sh(&format!("podscopectl status {}", &id[..12]));
    assert!(
        status.contains("State: ready") && status.contains("app=ctl"),
        "{status}"
    );
    assert!(
        status.contains(&format!("systemctl status podscope-{id}.scope")),
        "{status}"
    );
    let (rc, _, err) = sh_out("podscopectl status ffffffffffff");
    assert_eq!(rc, 1);
    assert!(err.contains("no sandbox with id ffffffffffff"), "{err}");
    sh(&format!("podscopectl stop {id} && podscopectl rm {id}"));
    assert!(!sh("podscopectl list").contains(&id[..12]));
}
