//! Pod networking against real CNI plugins (Debian's containernetworking-
//! plugins, in /usr/lib/cni) and the fixture plugin (tests/fixtures/cni),
//! inside the harness's own network namespace.

use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::Duration;
use zbus::zvariant::Value;

/// The network `make install` + the harness put in /etc/cni/net.d.
const TEST_NET: &str = "podscope-test";

fn network_ready(conditions: &[Condition]) -> (bool, String, String) {
    let c = conditions
        .iter()
        .find(|c| c.kind == "NetworkReady")
        .expect("a NetworkReady condition");
    (c.status, c.reason.clone(), c.message.clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_get_addresses_from_real_plugins_and_reach_each_other() {
    let (m, conn) = manager().await;
    let a = create_started(&m, "net-a", CreateOptions::default()).await;
    let b = create_started(&m, "net-b", CreateOptions::default()).await;
    let (sa, sb) = (m.status(&a).await.unwrap(), m.status(&b).await.unwrap());
    let (ipa, ipb) = (sa.ips.clone(), sb.ips.clone());
    assert_eq!(ipa.len(), 1, "{sa:?}");
    assert!(ipa[0].starts_with("10.233.0.") && ipb[0].starts_with("10.233.0."));
    assert_ne!(ipa, ipb, "distinct addresses");
    assert_eq!(sa.network_name, TEST_NET);
    assert!(sa.network_attached);
    // The property says the same, and the address is on the pod's eth0.
    let path = format!("/org/podscope/Sandbox1/sandbox/{a}");
    let obj = SandboxProxy::builder(&conn)
        .path(path.as_str())
        .unwrap()
        .build()
        .await
        .unwrap();
    assert_eq!(obj.ips().await.unwrap(), ipa);
    let addr = sh(&format!("ip -n podscope-{a} -o -4 addr show dev eth0"));
    assert!(addr.contains(&format!("{}/24", ipa[0])), "{addr}");
    // host-local holds both, keyed by sandbox id.
    assert_eq!(host_local_owner_ips(TEST_NET, &a), ipa);
    assert_eq!(host_local_owner_ips(TEST_NET, &b), ipb);

    // TCP from pod b to pod a, across the bridge.
    let listener = in_netns(&netns_path(&a), || {
        std::net::TcpListener::bind("0.0.0.0:7000").unwrap()
    });
    let target = format!("{}:7000", ipa[0]);
    let server = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(b"pong!").unwrap();
        (buf, peer.ip().to_string())
    });
    let reply = in_netns(&netns_path(&b), move || {
        let mut c =
            std::net::TcpStream::connect_timeout(&target.parse().unwrap(), Duration::from_secs(5))
                .unwrap();
        c.write_all(b"ping!").unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).unwrap();
        buf
    });
    let (got, peer) = server.join().unwrap();
    assert_eq!((&got, &reply), (b"ping!", b"pong!"));
    assert_eq!(peer, ipb[0], "the connection came from pod b's address");

    // Stop: DEL returns the addresses to the pool; the namespace is gone.
    for id in [&a, &b] {
        m.stop(id).await.unwrap();
        assert!(
            host_local_owner_ips(TEST_NET, id).is_empty(),
            "address of {id} released"
        );
        assert!(!std::path::Path::new(&netns_path(id)).exists());
        let st = m.status(id).await.unwrap();
        assert!(st.ips.clone().is_empty());
        assert!(!st.network_attached);
        m.stop(id).await.unwrap();
        m.remove(id).await.unwrap();
    }
    assert_eq!(
        sh(&format!(
            "ls /var/lib/podscope/networks/ | grep -c -e {a} -e {b} || true"
        ))
        .trim(),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn port_mappings_reach_the_portmap_plugin() {
    let (m, _) = manager().await;
    let pm: HashMap<&str, Value<'_>> = HashMap::from([
        ("protocol", "tcp".into()),
        ("container_port", Value::U32(80)),
        ("host_port", Value::U32(18080)),
    ]);
    let unpublished: HashMap<&str, Value<'_>> =
        HashMap::from([("container_port", Value::U32(9090))]);
    // Raw: a port mapping may leave keys out (protocol tcp, no host port).
    let (id, _) = create_raw(
        &m,
        &pod(&uniq("ports")),
        opts(&[("port_mappings", vec![pm, unpublished].into())]),
    )
    .await
    .unwrap();
    m.start(&id).await.unwrap();
    let st = m.status(&id).await.unwrap();
    let ip = st.ips.clone()[0].clone();
    let nat = sh("iptables-save -t nat");
    assert!(
        nat.lines()
            .any(|l| l.contains("--dport 18080") && l.contains(&format!("{ip}:80"))),
        "a DNAT rule from 18080 to {ip}:80:\n{nat}"
    );
    assert!(!nat.contains("9090"), "an unpublished port is not mapped");
    m.remove(&id).await.unwrap();
    let nat = sh("iptables-save -t nat");
    assert!(
        !nat.contains("--dport 18080"),
        "DEL removed the mapping:\n{nat}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dns_and_hostname_files_are_written_and_removed() {
    let (m, _) = manager().await;
    let dns = Dns {
        servers: vec!["10.96.0.10".into()],
        searches: vec![
            "default.svc.cluster.local".into(),
            "svc.cluster.local".into(),
        ],
        options: vec!["ndots:5".into()],
    };
    let name = uniq("dns");
    let (id, _) = m
        .create(
            &pod(&name),
            &CreateOptions {
                dns: Some(dns),
                hostname: Some("web-0".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let st = m.status(&id).await.unwrap();
    let resolv = st.resolv_conf_path.clone();
    assert_eq!(resolv, format!("/run/podscope/sandboxes/{id}/resolv.conf"));
    let text = std::fs::read_to_string(&resolv).unwrap();
    assert!(text.contains("nameserver 10.96.0.10\n"), "{text}");
    assert!(
        text.contains("search default.svc.cluster.local svc.cluster.local\n"),
        "{text}"
    );
    assert!(text.contains("options ndots:5\n"), "{text}");
    let hostname = st.hostname_path.clone();
    assert_eq!(std::fs::read_to_string(&hostname).unwrap(), "web-0\n");
    // Without a DNS config: the host's resolv.conf; host network: the
    // host's hostname.
    let (host, _) = m
        .create(&pod(&uniq("dns-host")), &host_net())
        .await
        .unwrap();
    let hs = m.status(&host).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(hs.resolv_conf_path.clone()).unwrap(),
        std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default()
    );
    assert_eq!(
        std::fs::read_to_string(hs.hostname_path.clone())
            .unwrap()
            .trim(),
        sh("hostname").trim()
    );
    for i in [&id, &host] {
        m.remove(i).await.unwrap();
        assert!(!std::path::Path::new(&format!("/run/podscope/sandboxes/{i}")).exists());
    }
    // A bad DNS config is refused by name.
    let bad = Dns {
        servers: vec!["not-an-ip".into()],
        ..Default::default()
    };
    let e = m
        .create(
            &pod(&uniq("dns-bad")),
            &CreateOptions {
                dns: Some(bad),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::InvalidArgument);
    assert!(msg.starts_with("dns.servers:"), "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sysctls_apply_inside_the_pod_and_others_are_refused() {
    let (m, _) = manager().await;
    let host_somaxconn = sh("cat /proc/sys/net/core/somaxconn");
    let host_shmmni = sh("cat /proc/sys/kernel/shmmni");
    let sysctls = string_map(&[("net.core.somaxconn", "1234"), ("kernel.shmmni", "2345")]);
    let id = create_started(
        &m,
        "sysctl",
        CreateOptions {
            sysctls: Some(sysctls),
            ipc_namespace: Some(NamespaceMode::Pod),
            ..Default::default()
        },
    )
    .await;
    let pid = m.status(&id).await.unwrap().init_pid;
    assert_eq!(
        sh(&format!(
            "nsenter -t {pid} --net cat /proc/sys/net/core/somaxconn"
        ))
        .trim(),
        "1234"
    );
    assert_eq!(
        sh(&format!(
            "nsenter -t {pid} --ipc cat /proc/sys/kernel/shmmni"
        ))
        .trim(),
        "2345"
    );
    assert_eq!(
        sh("cat /proc/sys/net/core/somaxconn"),
        host_somaxconn,
        "host untouched"
    );
    assert_eq!(
        sh("cat /proc/sys/kernel/shmmni"),
        host_shmmni,
        "host untouched"
    );
    m.remove(&id).await.unwrap();

    for (name, want) in [
        ("kernel.panic", "sysctls: kernel.panic is not namespaced"),
        ("vm.swappiness", "sysctls: vm.swappiness is not namespaced"),
    ] {
        let e = m
            .create(
                &pod(&uniq("sysctl-bad")),
                &CreateOptions {
                    sysctls: Some(string_map(&[(name, "1")])),
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        let (k, msg) = classify(&e);
        assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.starts_with(want), "{msg}");
    }
    let e = m
        .create(
            &pod(&uniq("sysctl-host")),
            &CreateOptions {
                sysctls: Some(string_map(&[("net.core.somaxconn", "1")])),
                ..host_net()
            },
        )
        .await
        .unwrap_err();
    assert!(classify(&e).1.contains("host's network namespace"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn network_readiness_follows_the_conf_dir_without_a_restart() {
    let dir = cni_conf_dir("ready", &[]);
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let (conds, _, _) = m.runtime_status().await.unwrap();
        let (ok, reason, msg) = network_ready(&conds);
        assert!(!ok);
        assert_eq!(reason, "NoNetworkConfig");
        assert!(msg.contains(&dir), "{msg}");
        // A pod-network pod cannot be made; a host-network one can.
        let e = m
            .create(&pod(&uniq("noconf")), &CreateOptions::default())
            .await
            .unwrap_err();
        let (k, msg) = classify(&e);
        assert_eq!(k, ErrorKind::NetworkFailed);
        assert!(msg.contains("NoNetworkConfig"), "{msg}");
        let host = create_started(&m, "noconf-host", host_net()).await;
        m.remove(&host).await.unwrap();

        std::fs::write(
            format!("{dir}/10-bad.conflist"),
            "{\"cniVersion\": \"1.0.0\", ",
        )
        .unwrap();
        let (ok, reason, msg) = network_ready(&m.runtime_status().await.unwrap().0);
        assert!(!ok);
        assert_eq!(reason, "NetworkConfigInvalid");
        assert!(
            msg.contains("10-bad.conflist") && msg.contains("invalid JSON"),
            "{msg}"
        );

        std::fs::write(
            format!("{dir}/10-bad.conflist"),
            r#"{"cniVersion":"1.0.0","name":"gone","plugins":[{"type":"no-such-plugin"}]}"#,
        )
        .unwrap();
        let (ok, reason, msg) = network_ready(&m.runtime_status().await.unwrap().0);
        assert!(!ok);
        assert_eq!(reason, "NetworkPluginMissing");
        assert!(msg.contains("no-such-plugin not found"), "{msg}");

        std::fs::write(
            format!("{dir}/10-bad.conflist"),
            bridge_conflist("ready-net", "podscope1", "10.240.0.0/24", None),
        )
        .unwrap();
        let (ok, reason, msg) = network_ready(&m.runtime_status().await.unwrap().0);
        assert!(ok, "{reason}: {msg}");
        assert!(msg.contains("ready-net"), "{msg}");
        let id = create_started(&m, "nowready", CreateOptions::default()).await;
        assert!(m.status(&id).await.unwrap().ips[0].starts_with("10.240.0."));
        m.remove(&id).await.unwrap();
    })
    .await;
}

/// What pod networking leaves on the node: pinned namespaces and cached
/// attachments.
fn network_leftovers() -> (String, String) {
    (
        sh("ls /run/netns | grep podscope- || true"),
        sh("ls /var/lib/podscope/networks"),
    )
}

/// Assert that a failed Create left nothing: no record, no namespace, no
/// addresses, no attachment.
async fn assert_nothing_left(m: &Client, name: &str, network: &str, before: (String, String)) {
    let listed = m.list(&by_name(name)).await.unwrap();
    assert!(listed.is_empty(), "no record of {name}");
    assert!(
        host_local_ips(network).is_empty(),
        "addresses released: {:?}",
        host_local_ips(network)
    );
    assert_eq!(
        network_leftovers(),
        before,
        "no namespace or attachment left"
    );
}

/// Create a pod-network pod on `network`, which must fail with
/// NetworkFailed and leave nothing behind; the error message.
async fn create_fails_cleanly(m: &Client, prefix: &str, network: &str) -> String {
    let name = uniq(prefix);
    let before = network_leftovers();
    let e = m
        .create(&pod(&name), &CreateOptions::default())
        .await
        .unwrap_err();
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::NetworkFailed, "{msg}");
    assert_nothing_left(m, &name, network, before).await;
    msg
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_plugin_is_named_and_the_add_rolled_back() {
    let log = fresh_fixture_log("fail");
    let dir = cni_conf_dir(
        "fail",
        &[(
            "10-fail.conflist",
            bridge_conflist(
                "fail-net",
                "podscope2",
                "10.241.0.0/24",
                Some(&format!(r#""mode":"fail","log":"{log}""#)),
            ),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let msg = create_fails_cleanly(&m, "cni-fail", "fail-net").await;
        assert!(
            msg.contains(
                "podscope-fixture: CNI error code 11: fixture refuses to add (mode=fail for "
            ),
            "the plugin's error word for word: {msg}"
        );
        assert!(msg.contains("CNI ADD on network \"fail-net\""), "{msg}");
        // bridge's ADD had taken an address: the DEL gave it back.
        let calls = fixture_calls("fail");
        assert!(calls.iter().any(|c| c.starts_with("ADD ")), "{calls:?}");
        assert!(
            calls.iter().any(|c| c.starts_with("DEL ")),
            "DEL after the failed ADD: {calls:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_plugin_is_killed_at_the_timeout() {
    let dir = cni_conf_dir(
        "hang",
        &[(
            "10-hang.conflist",
            bridge_conflist(
                "hang-net",
                "podscope3",
                "10.242.0.0/24",
                Some(r#""mode":"hang""#),
            ),
        )],
    );
    with_config(&cni_config(&dir, 700), || async {
        let (m, _) = manager().await;
        let t0 = std::time::Instant::now();
        let msg = create_fails_cleanly(&m, "cni-hang", "hang-net").await;
        assert!(
            msg.contains("podscope-fixture: ADD timed out after 700 ms; killed"),
            "{msg}"
        );
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert_ne!(
            sh_status("pgrep -f 'sleep 600'"),
            0,
            "the plugin and its child are gone"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_from_a_plugin_is_a_named_error() {
    let dir = cni_conf_dir(
        "garbage",
        &[(
            "10-g.conflist",
            bridge_conflist(
                "garbage-net",
                "podscope4",
                "10.243.0.0/24",
                Some(r#""mode":"garbage""#),
            ),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let msg = create_fails_cleanly(&m, "cni-garbage", "garbage-net").await;
        assert!(
            msg.contains("podscope-fixture: ADD printed output that is not a CNI result: \"this is not JSON\""),
            "{msg}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_retries_a_failed_del_and_remove_never_gets_stuck() {
    let log = fresh_fixture_log("faildel");
    let conflist = fixture_conflist("1.0.0", "faildel-net", "ok", "10.99.0.7/24", &log);
    let dir = cni_conf_dir("faildel", &[("10-f.conflist", conflist)]);
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let id = create_started(&m, "faildel", CreateOptions::default()).await;
        assert_eq!(m.status(&id).await.unwrap().ips, ["10.99.0.7"]);
        // The cached config is what DEL uses: make the cache say "faildel",
        // as if the plugin had started failing.
        set_cached_fixture_mode(&id, "ok", "faildel");
        let e = m.stop(&id).await.unwrap_err();
        let (k, msg) = classify(&e);
        assert_eq!(k, ErrorKind::NetworkFailed, "{msg}");
        assert!(
            msg.contains("CNI error code 12: fixture refuses to delete (mode=faildel)"),
            "{msg}"
        );
        let st = m.status(&id).await.unwrap();
        assert_eq!(st.state, State::NotReady);
        assert!(st.network_attached, "the DEL is still owed");
        assert!(st.network_error.clone().contains("code 12"));
        assert!(
            !std::path::Path::new(&netns_path(&id)).exists(),
            "the namespace went anyway"
        );
        // Repeated Stop retries the DEL; now it works.
        set_cached_fixture_mode(&id, "faildel", "ok");
        m.stop(&id).await.unwrap();
        let st = m.status(&id).await.unwrap();
        assert!(!st.network_attached);
        assert!(!std::path::Path::new(&attachment_path(&id)).exists());
        m.remove(&id).await.unwrap();

        // Plugins gone altogether: Remove still removes, the DEL stays owed
        // and is paid at the next start, once the plugin is back.
        let id = create_started(&m, "noplugin", CreateOptions::default()).await;
        let no_fixture = format!("cni_conf_dir = \"{dir}\"\ncni_bin_dirs = [\"/usr/lib/cni\"]\n");
        std::fs::write("/etc/podscope/podscope.toml", no_fixture).unwrap();
        daemon("restart");
        let (m, _) = manager().await;
        m.remove(&id).await.unwrap();
        assert!(m.status(&id).await.is_err(), "the record is gone");
        let (_, info, _) = m.runtime_status().await.unwrap();
        assert_eq!(info.network_teardowns_owed, 1);
        let dels_before = fixture_calls("faildel")
            .iter()
            .filter(|c| c.starts_with(&format!("DEL {id}")))
            .count();
        std::fs::write("/etc/podscope/podscope.toml", cni_config(&dir, 5000)).unwrap();
        daemon("restart");
        let (m, _) = manager().await;
        wait_until(Duration::from_secs(10), || {
            !std::path::Path::new(&attachment_path(&id)).exists()
        });
        let dels = fixture_calls("faildel")
            .iter()
            .filter(|c| c.starts_with(&format!("DEL {id}")))
            .count();
        assert_eq!(dels, dels_before + 1, "reconciliation ran the owed DEL");
        let (_, info, _) = m.runtime_status().await.unwrap();
        assert_eq!(info.network_teardowns_owed, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_killed_during_add_leaks_nothing() {
    let log = fresh_fixture_log("slow");
    let dir = cni_conf_dir(
        "slow",
        &[(
            "10-slow.conflist",
            bridge_conflist(
                "slow-net",
                "podscope5",
                "10.244.0.0/24",
                Some(&format!(r#""mode":"slow","delay":"30","log":"{log}""#)),
            ),
        )],
    );
    with_config(&cni_config(&dir, 60_000), || async {
        let (m, _) = manager().await;
        let name = uniq("killed-add");
        let before = network_leftovers();
        let create = {
            let name = name.clone();
            tokio::spawn(async move {
                let (m, _) = manager().await;
                m.create(&pod(&name), &CreateOptions::default()).await
            })
        };
        // bridge has taken an address; the fixture is sleeping in ADD.
        wait_until(Duration::from_secs(20), || {
            fixture_calls("slow").iter().any(|c| c.starts_with("ADD "))
        });
        assert_eq!(host_local_ips("slow-net").len(), 1);
        let pid = sh("systemctl show -P MainPID podscoped")
            .trim()
            .parse::<u32>()
            .unwrap();
        sh("systemctl kill -s KILL podscoped");
        wait_until(Duration::from_secs(5), || !pid_alive(pid));
        assert!(create.await.unwrap().is_err(), "the caller got no sandbox");
        // Restart with a quick plugin: reconciliation pays the DEL.
        std::fs::write(
            format!("{dir}/10-slow.conflist"),
            bridge_conflist(
                "slow-net",
                "podscope5",
                "10.244.0.0/24",
                Some(&format!(r#""mode":"pass","log":"{log}""#)),
            ),
        )
        .unwrap();
        daemon("restart");
        let (m2, _) = manager().await;
        wait_until(Duration::from_secs(10), || {
            host_local_ips("slow-net").is_empty()
        });
        let listed = m2.list(&by_name(&name)).await.unwrap();
        // The interrupted Create's record is kept (its caller may retry),
        // with no network: Start would set it up again.
        for s in &listed {
            let id = s.id.clone();
            let st = m2.status(&id).await.unwrap();
            assert_eq!(st.state, State::Created);
            assert!(!st.network_attached);
            m2.start(&id).await.unwrap();
            assert_eq!(
                host_local_owner_ips("slow-net", &id).len(),
                1,
                "Start attached it again"
            );
            m2.remove(&id).await.unwrap();
        }
        assert!(host_local_ips("slow-net").is_empty());
        assert_eq!(network_leftovers(), before);
        drop(m);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn status_and_gc_for_1_1_0_networks() {
    let log = fresh_fixture_log("gc");
    let conflist = |mode: &str| fixture_conflist("1.1.0", "gc-net", mode, "10.98.0.3/24", &log);
    let dir = cni_conf_dir("gc", &[("10-gc.conflist", conflist("ok"))]);
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let (ok, reason, msg) = network_ready(&m.runtime_status().await.unwrap().0);
        assert!(ok, "{reason}: {msg}");
        assert!(fixture_calls("gc").iter().any(|c| c.starts_with("STATUS ")));
        let id = create_started(&m, "gc", CreateOptions::default()).await;
        daemon("restart");
        let (m, _) = manager().await;
        // The first start (no pods) sent an empty list; this one names the pod.
        let want = format!(r#"{{"containerID":"{id}","ifname":"eth0"}}"#);
        wait_until(Duration::from_secs(10), || {
            fixture_calls("gc")
                .iter()
                .any(|c| c.starts_with("GC ") && c.contains(&want))
        });
        let gcs: Vec<String> = fixture_calls("gc")
            .into_iter()
            .filter(|c| c.starts_with("GC "))
            .collect();
        assert!(
            !gcs[0].contains(&want),
            "the first GC ran before the pod existed: {gcs:?}"
        );
        std::fs::write(format!("{dir}/10-gc.conflist"), conflist("statusfail")).unwrap();
        let (ok, reason, msg) = network_ready(&m.runtime_status().await.unwrap().0);
        assert!(!ok);
        assert_eq!(reason, "NetworkPluginNotReady");
        assert!(
            msg.contains("CNI error code 50: fixture is not ready (mode=statusfail)"),
            "{msg}"
        );
        m.remove(&id).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_network_pods_get_no_namespace_and_no_cni_call() {
    let log = fresh_fixture_log("hostnet");
    let dir = cni_conf_dir(
        "hostnet",
        &[(
            "10-h.conflist",
            fixture_conflist("1.0.0", "h", "ok", "10.97.0.2/24", &log),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let id = create_started(&m, "hostnet", host_net()).await;
        let st = m.status(&id).await.unwrap();
        assert!(st.ips.clone().is_empty());
        assert_eq!(st.netns_path, "");
        let pid = st.init_pid;
        assert_eq!(ns_of(pid, "net"), ns_of(1, "net"));
        assert_eq!(
            ns_of(pid, "uts"),
            ns_of(1, "uts"),
            "shares the host's UTS namespace"
        );
        m.remove(&id).await.unwrap();
        assert!(
            fixture_calls("hostnet").is_empty(),
            "no CNI call: {:?}",
            fixture_calls("hostnet")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ready_pods_are_checked_after_a_restart() {
    let log = fresh_fixture_log("check");
    let dir = cni_conf_dir(
        "check",
        &[(
            "10-c.conflist",
            fixture_conflist("1.0.0", "check-net", "ok", "10.96.5.5/24", &log),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let id = create_started(&m, "check", CreateOptions::default()).await;
        daemon("restart");
        wait_until(Duration::from_secs(10), || {
            fixture_calls("check")
                .iter()
                .any(|c| c.starts_with(&format!("CHECK {id}")))
        });
        let (m, _) = manager().await;
        assert_eq!(m.status(&id).await.unwrap().network_error, "");
        // The plugin now finds the network broken (the cache is what CHECK uses).
        set_cached_fixture_mode(&id, "ok", "checkfail");
        daemon("restart");
        let (m, _) = manager().await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !m
            .status(&id)
            .await
            .unwrap()
            .network_error
            .contains("code 13")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "CHECK failure not recorded"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let st = m.status(&id).await.unwrap();
        assert_eq!(
            st.state,
            State::Ready,
            "CHECK reports, it does not tear down"
        );
        assert!(
            st.network_error
                .clone()
                .contains("CNI error code 13: fixture finds the network broken (mode=checkfail)"),
            "{st:?}"
        );
        m.remove(&id).await.unwrap();
    })
    .await;
}

/// Stop runs DEL inside the pod's namespace while it still holds the pod's
/// interface (plugins that move host devices in and out need it), even
/// though its pin is released at the same time; afterwards it is gone.
#[tokio::test(flavor = "multi_thread")]
async fn stop_runs_del_in_the_live_namespace() {
    let log = fresh_fixture_log("delns");
    let dir = cni_conf_dir(
        "delns",
        &[(
            "10-delns.conflist",
            bridge_conflist(
                "delns-net",
                "podscope6",
                "10.246.0.0/24",
                Some(&format!(r#""mode":"pass","log":"{log}""#)),
            ),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let (id, _) = m
            .create(&pod(&uniq("delns")), &CreateOptions::default())
            .await
            .unwrap();
        m.start(&id).await.unwrap();
        m.stop(&id).await.unwrap();
        let probe: Vec<String> = fixture_calls("delns")
            .into_iter()
            .filter(|c| c.starts_with(&format!("NETNS-AT-DEL {id} ")))
            .collect();
        assert_eq!(probe.len(), 1, "{probe:?}");
        let fields: Vec<&str> = probe[0].split(' ').collect();
        assert_eq!(fields[2], "nsfs", "a namespace at DEL: {probe:?}");
        assert!(
            fields[3].contains("eth0@"),
            "the pod's veth still there: {probe:?}"
        );
        assert!(
            !std::path::Path::new(&netns_path(&id)).exists(),
            "pin released"
        );
        // Stop queues the netns unit's stop without waiting for it.
        wait_until(Duration::from_secs(5), || {
            sh(&format!(
                "systemctl is-active podscope-netns@{id}.service || true"
            )) == "inactive\n"
        });
        m.remove(&id).await.unwrap();
    })
    .await;
}

/// Create makes the pod's namespace itself and runs ADD in it while the
/// netns unit pins that very namespace (handed over the handoff socket);
/// when the unit's helper cannot reach the daemon it pins one of its own,
/// and the network is set up again there: the pod works either way.
#[tokio::test(flavor = "multi_thread")]
async fn the_netns_unit_pins_the_namespace_the_network_was_added_in() {
    let (m, _) = manager().await;
    let did_not_take = |id: &str| {
        sh(&format!(
            "journalctl -u podscoped SANDBOX_ID={id} --no-pager -o cat | grep -c 'did not take the namespace' || true"
        ))
        .trim()
        .to_owned()
    };
    let check_pod = |id: String, st: SandboxStatus| {
        let ip = st.ips.clone()[0].clone();
        let links = sh(&format!("ip -n podscope-{id} -o addr show dev eth0"));
        assert!(
            links.contains(&format!("{ip}/")),
            "the pinned namespace has the pod's address: {links}"
        );
    };
    let (id, _) = m
        .create(&pod(&uniq("handoff")), &CreateOptions::default())
        .await
        .unwrap();
    check_pod(id.clone(), m.status(&id).await.unwrap());
    assert_eq!(
        did_not_take(&id),
        "0",
        "the handed-off namespace was pinned"
    );
    // The cached result names the pin (ADD ran at /proc/<podscoped>/fd/N),
    // so the real bridge's CHECK after a restart passes.
    let att: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(attachment_path(&id)).unwrap()).unwrap();
    let sandboxes: Vec<&str> = att["result"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["sandbox"].as_str())
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(sandboxes, vec![netns_path(&id).as_str()], "{att}");
    m.start(&id).await.unwrap();
    daemon("restart");
    let (m, _) = manager().await;
    let log = || {
        sh(&format!(
            "journalctl -u podscoped SANDBOX_ID={id} --no-pager -o cat"
        ))
    };
    wait_until(Duration::from_secs(10), || log().contains("CNI CHECK"));
    assert!(log().contains("CNI CHECK passed"), "{}", log());
    assert_eq!(m.status(&id).await.unwrap().network_error, "");
    m.remove(&id).await.unwrap();

    // The socket gone: the helper makes its own namespace.
    sh("mv /run/podscope/netns-handoff.sock /run/podscope/netns-handoff.sock.away");
    let (id, _) = m
        .create(&pod(&uniq("nohandoff")), &CreateOptions::default())
        .await
        .unwrap();
    sh("mv /run/podscope/netns-handoff.sock.away /run/podscope/netns-handoff.sock");
    assert_eq!(did_not_take(&id), "1");
    check_pod(id.clone(), m.status(&id).await.unwrap());
    assert_eq!(
        host_local_owner_ips(TEST_NET, &id).len(),
        1,
        "the first ADD's address was given back"
    );
    m.start(&id).await.unwrap();
    m.stop(&id).await.unwrap();
    assert!(
        host_local_owner_ips(TEST_NET, &id).is_empty(),
        "no address left behind"
    );
    m.remove(&id).await.unwrap();
}

/// A pod whose scope ended while podscoped was down owes a DEL. Recovery
/// keeps its namespace until the reconciliation's DEL has run in it (as
/// host-device and SR-IOV plugins need), then releases it.
#[tokio::test(flavor = "multi_thread")]
async fn a_del_owed_at_restart_runs_in_the_namespace() {
    let log = fresh_fixture_log("owed");
    let dir = cni_conf_dir(
        "owed",
        &[(
            "10-owed.conflist",
            bridge_conflist(
                "owed-net",
                "podscope7",
                "10.247.0.0/24",
                Some(&format!(r#""mode":"pass","log":"{log}""#)),
            ),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let id = create_started(&m, "owed", CreateOptions::default()).await;
        daemon("stop");
        sh(&format!("systemctl stop podscope-{id}.scope"));
        daemon("start");
        let (m, _) = manager().await;
        wait_until(Duration::from_secs(10), || {
            !std::path::Path::new(&attachment_path(&id)).exists()
        });
        let probe: Vec<String> = fixture_calls("owed")
            .into_iter()
            .filter(|c| c.starts_with(&format!("NETNS-AT-DEL {id} ")))
            .collect();
        assert_eq!(probe.len(), 1, "{probe:?}");
        assert_eq!(
            probe[0].split(' ').nth(2),
            Some("nsfs"),
            "the DEL ran in the pod's namespace: {probe:?}"
        );
        wait_until(Duration::from_secs(5), || {
            sh(&format!(
                "systemctl is-active podscope-netns@{id}.service || true"
            )) == "inactive\n"
        });
        assert!(
            !std::path::Path::new(&netns_path(&id)).exists(),
            "pin released"
        );
        let st = m.status(&id).await.unwrap();
        assert_eq!(st.state, State::NotReady);
        assert!(!st.network_attached);
        m.remove(&id).await.unwrap();
    })
    .await;
}

/// RuntimeStatus is open to every local user, and asks 1.1.0 plugins for
/// STATUS: a flood of calls from `nobody` runs them once, not once a call.
#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_status_flood_runs_status_once() {
    let log = fresh_fixture_log("flood");
    let dir = cni_conf_dir(
        "flood",
        &[(
            "10-flood.conflist",
            fixture_conflist("1.1.0", "flood-net", "ok", "10.96.9.2/24", &log),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let (m, _) = manager().await;
        let statuses = || {
            fixture_calls("flood")
                .iter()
                .filter(|c| c.starts_with("STATUS "))
                .count()
        };
        // The daemon's own start may have asked once; the STATUS answer
        // stands for a few seconds from then.
        let before = statuses();
        let calls = "busctl --system call org.podscope.Sandbox1 /org/podscope/Sandbox1 \
                     org.podscope.Sandbox1.Manager RuntimeStatus >/dev/null";
        let (rc, out, err) = as_nobody(&format!(
            "bash -c 'for i in $(seq 40); do {calls} & done; wait'"
        ));
        assert_eq!(rc, 0, "{out}{err}");
        let ran = statuses() - before;
        assert!(ran <= 2, "{ran} STATUS runs for 40 calls");
        let (conds, _, _) = m.runtime_status().await.unwrap();
        assert!(network_ready(&conds).0);
    })
    .await;
}

/// On a host whose `/` is not shared (systemd in a container, kind-style
/// nodes), pins made in /run/netns after podscoped started must still reach
/// its mount namespace: podscoped.service makes /run/netns a shared mount
/// point before the daemon's namespace is made.
#[tokio::test(flavor = "multi_thread")]
async fn pod_networks_work_when_root_is_not_shared() {
    /// Puts `/` back as the harness booted it, whatever the test did.
    struct SharedAgain;
    impl Drop for SharedAgain {
        fn drop(&mut self) {
            sh("mount --make-rshared /");
            daemon("restart");
        }
    }
    daemon("stop");
    let _restore = SharedAgain;
    sh("mount --make-rprivate /");
    daemon("start");
    let (m, _) = manager().await;
    let pid = sh("systemctl show -P MainPID podscoped").trim().to_owned();
    let mounts = sh(&format!("cat /proc/{pid}/mountinfo"));
    let netns = mounts
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/run/netns"))
        .unwrap_or_else(|| {
            panic!("/run/netns is a mount point in podscoped's namespace: {mounts}")
        });
    assert!(
        netns.contains(" master:"),
        "podscoped's /run/netns receives the host's mounts: {netns}"
    );
    let id = create_started(&m, "private-root", CreateOptions::default()).await;
    let st = m.status(&id).await.unwrap();
    assert_eq!(st.state, State::Ready);
    assert_eq!(st.ips.len(), 1, "{st:?}");
    m.stop(&id).await.unwrap();
    m.remove(&id).await.unwrap();
}
