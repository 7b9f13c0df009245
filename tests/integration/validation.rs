//! Bad input gets a named error and changes nothing.

use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::collections::HashMap;
use zbus::zvariant::Value;

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_named_errors_and_changes_nothing() {
    let (m, _) = manager().await;
    let before = m.list(&ListFilter::default()).await.unwrap().len();
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
        let e = create_raw(&m, &pod_in(name, ns, uid, 0), o)
            .await
            .unwrap_err();
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
    assert_eq!(m.list(&ListFilter::default()).await.unwrap().len(), before);
    assert_eq!(
        state_dirs(),
        dirs_before,
        "rejected calls leave no state behind"
    );
    // Bad list filters too.
    let e = list_raw(&m, opts(&[("colour", Value::from("x"))]))
        .await
        .unwrap_err();
    assert_eq!(kind(e), ErrorKind::InvalidArgument);
    let e = list_raw(&m, opts(&[("state", Value::from("running"))]))
        .await
        .unwrap_err();
    assert_eq!(kind(e), ErrorKind::InvalidArgument);
}
