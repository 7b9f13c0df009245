//! Pods that cannot run: a RuntimeClass whose handler the nodes lack, an
//! image that does not exist, a volume that cannot be mounted. The cause is
//! named in the pod's events or status as kubelet reports podscope's error,
//! and once the pod is deleted nothing of it is left on its node.

use super::{container, pod, IDLE, IMAGE};
use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::{json, Value};
use std::time::Duration;

const NO_HANDLER: &str = "no-such-handler";
const NO_IMAGE: &str = "registry.k8s.io/e2e-test-images/no-such-image:1.0";
const NO_SUB_PATH: &str = "no/such/dir";

pub fn bad_input(c: &Cluster) {
    kubectl::apply(&json!({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": { "name": "missing" }, "handler": NO_HANDLER,
    }));
    kubectl::apply(&pod(
        "bad-handler",
        json!({
            "runtimeClassName": "missing",
            "containers": [container("main", IDLE)],
        }),
    ));
    kubectl::apply(&pod(
        "bad-image",
        json!({
            "containers": [{ "name": "main", "image": NO_IMAGE }],
        }),
    ));
    // An image volume (GA in 1.36) with a sub path its image does not have.
    kubectl::apply(&pod(
        "bad-volume",
        json!({
            "volumes": [{ "name": "img", "image": { "reference": IMAGE, "pullPolicy": "IfNotPresent" } }],
            "containers": [{
                "name": "main", "image": IMAGE, "command": ["sh", "-c", IDLE],
                "volumeMounts": [{ "name": "img", "mountPath": "/img", "subPath": NO_SUB_PATH }],
            }],
        }),
    ));

    let named = |pod: &str,
                 what: &str,
                 f: &dyn Fn(&Value, &[String]) -> Option<String>|
     -> (Value, String) {
        kubectl::wait(
            &format!("{pod}: {what} named"),
            Duration::from_secs(90),
            || {
                let p = kubectl::get("pod", pod).ok_or_else(|| "no pod".to_string())?;
                let events = kubectl::events_of(pod);
                match f(&p, &events) {
                    Some(m) => Ok((p, m)),
                    None => Err(format!("status {} events {events:?}", p["status"])),
                }
            },
        )
    };
    let event_naming = |want: &'static str| {
        move |_: &Value, events: &[String]| events.iter().find(|e| e.contains(want)).cloned()
    };
    let waiting_naming = |want: &'static str| {
        move |p: &Value, _: &[String]| {
            let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
            let m = format!("{}: {}", w["reason"].as_str()?, w["message"].as_str()?);
            m.contains(want).then_some(m)
        }
    };

    let (p, m) = named(
        "bad-handler",
        "the missing handler",
        &event_naming(NO_HANDLER),
    );
    ok!(c.t0, "bad-handler: {m}");
    cleaned_up(c, "bad-handler", &p);
    let (p, m) = named(
        "bad-image",
        "the missing image",
        &waiting_naming("no-such-image"),
    );
    assert!(
        m.starts_with("ErrImagePull") || m.starts_with("ImagePullBackOff"),
        "{m}"
    );
    ok!(c.t0, "bad-image: {m}");
    cleaned_up(c, "bad-image", &p);
    let (p, m) = named(
        "bad-volume",
        "the missing sub path",
        &waiting_naming(NO_SUB_PATH),
    );
    assert!(m.starts_with("CreateContainerError"), "{m}");
    ok!(c.t0, "bad-volume: {m}");
    cleaned_up(c, "bad-volume", &p);
    kubectl::run(&["delete", "runtimeclass", "missing"]);
}

/// The pod deleted: no sandbox of it left on its node (none ran, or
/// kubelet removed it), no unit, network namespace or lease.
fn cleaned_up(c: &Cluster, name: &str, p: &Value) {
    let node = c.node(p["spec"]["nodeName"].as_str().unwrap());
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let sandboxes = node.sandboxes_of(uid);
    kubectl::run(&["delete", "pod", "-n", NS, name, "--grace-period=1"]);
    for s in &sandboxes {
        node.wait_nothing_left_of(s, name);
    }
    assert!(
        node.crictl(&format!("ps -a -q --label io.kubernetes.pod.uid={uid}"))
            .trim()
            .is_empty(),
        "{name}'s containers on {}",
        node.name
    );
    ok!(
        c.t0,
        "{name} deleted: nothing of it running on {} ({} sandbox(es) stopped, no container)",
        node.name,
        sandboxes.len()
    );
}
