//! What real clients send and use: opaque CRI metadata over D-Bus.

use crate::common::*;
use podscope::client::{dict_str, dict_strs};
use std::collections::HashMap;
use zbus::zvariant::Value;

/// Names, namespaces, uids, labels and annotations are opaque: what
/// critest and other clients send passes and comes back unchanged, while
/// unit names, paths and the hostname come from the id or are made valid.
#[tokio::test(flavor = "multi_thread")]
async fn cri_metadata_is_opaque_over_dbus() {
    let (m, _) = manager().await;
    let name = format!("{}-PodSandbox for Test.1 ü", uniq("opaque"));
    let namespace = "cri-test.Namespace_7D4C";
    let uid = "7D4C1E0A-2B7F-4C3E-9A55-0C0FFEE00001";
    let labels: HashMap<&str, &str> = [
        ("Mixed Key/with space", "value: 'quoted', ü"),
        ("empty", ""),
    ]
    .into();
    let annotations: HashMap<&str, &str> =
        [("example.com/config", "{\n  \"json\": true\n}\n")].into();
    let (id, _) = m
        .create(
            &name,
            namespace,
            uid,
            0,
            opts(&[
                ("labels", Value::from(labels.clone())),
                ("annotations", Value::from(annotations.clone())),
            ]),
        )
        .await
        .unwrap();
    m.start(&id).await.unwrap();
    let st = m.status(&id).await.unwrap();
    assert_eq!(
        (
            dict_str(&st, "name"),
            dict_str(&st, "namespace"),
            dict_str(&st, "uid")
        ),
        (name.clone(), namespace.to_owned(), uid.to_owned())
    );
    assert_eq!(dict_str(&st, "state"), "ready");
    assert_eq!(dict_str(&st, "unit"), format!("podscope-{id}.scope"));
    assert_eq!(
        sh(&format!(
            "systemctl show -P ActiveState podscope-{id}.scope"
        )),
        "active\n"
    );
    let st_labels: HashMap<String, String> = st["labels"].clone().try_into().unwrap();
    let want: HashMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(st_labels, want);
    let st_ann: HashMap<String, String> = st["annotations"].clone().try_into().unwrap();
    assert_eq!(
        st_ann["example.com/config"],
        annotations["example.com/config"]
    );
    // The hostname file: the name made a DNS label.
    let hostname = std::fs::read_to_string(dict_str(&st, "hostname_path")).unwrap();
    let label = hostname.trim_end();
    assert!(label.ends_with("-podsandbox-for-test.1"), "{label:?}");
    assert!(label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'));
    // The CNI plugins get the metadata as sent, one argument each.
    let attachment = std::fs::read_to_string(attachment_path(&id)).unwrap();
    assert!(
        attachment.contains(&format!("K8S_POD_NAMESPACE={namespace}")),
        "{attachment}"
    );
    assert!(attachment.contains(&format!("K8S_POD_UID={uid}")));
    // Filters match the exact strings.
    let found = m
        .list(opts(&[("name", Value::from(name.clone()))]))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(dict_strs(&st, "ips").len(), 1, "a pod-network IP");
    m.remove(&id).await.unwrap();
}
