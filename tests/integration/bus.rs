//! The D-Bus surface as clients see it: the shipped interface XML against
//! live introspection, signals, the ObjectManager and the per-sandbox objects.

use futures_util::StreamExt;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn interface_xml_matches_live_introspection() {
    let (m, conn) = manager().await;
    let (id, path) = m
        .create(
            &pod_in(&uniq("xml"), "default", "u1", 0),
            &CreateOptions::default(),
        )
        .await
        .unwrap();
    let live_mgr = introspect(&conn, "/org/podscope/Sandbox1").await;
    let live_sb = introspect(&conn, path.as_str()).await;
    let shipped = std::fs::read_to_string("/usr/share/dbus-1/interfaces/org.podscope.Sandbox1.xml")
        .expect("make install ships the interface XML");
    for iface in [
        "org.podscope.Sandbox1.Manager",
        "org.podscope.Sandbox1.Images",
        "org.podscope.Sandbox1.Sandbox",
    ] {
        let want = interface_tags(&shipped, iface);
        let live = interface_tags(
            if iface.ends_with("Sandbox") {
                &live_sb
            } else {
                &live_mgr
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
async fn signals_announce_create_state_changes_and_remove() {
    let (m, conn) = manager().await;
    let mut created = m.proxy().receive_sandbox_created().await.unwrap();
    let mut changed = m.proxy().receive_sandbox_state_changed().await.unwrap();
    let mut removed = m.proxy().receive_sandbox_removed().await.unwrap();
    let (id, path) = m
        .create(&pod(&uniq("sig")), &CreateOptions::default())
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
    // ...and, in the same signal, every other property that changed.
    let st = m.status(&id).await.unwrap();
    assert_ne!(st.init_pid, 0);
    assert_eq!(
        sb.cached_init_pid().unwrap(),
        Some(st.init_pid),
        "PropertiesChanged carries InitPid with State"
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
        .create(&pod(&uniq("om")), &CreateOptions::default())
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
async fn sandbox_object_methods_drive_the_lifecycle() {
    let (m, conn) = manager().await;
    let (id, path) = m
        .create(&pod(&uniq("objm")), &CreateOptions::default())
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
