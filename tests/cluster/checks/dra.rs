//! Dynamic Resource Allocation end to end: a DRA driver
//! (podscope-test-devices' podscope-dra-driver, a kubelet plugin) on ONE
//! node registers with kubelet and publishes that node's ResourceSlice; a
//! DeviceClass selects its devices and a pod claims one through a
//! ResourceClaimTemplate. The scheduler must place the pod on the node with
//! the devices; kubelet has the driver prepare the claim (a CDI spec in
//! /var/run/cdi) and hands podscope the CDI name; the container sees the
//! device node, the variables and the mount the spec gives. Once the pod is
//! deleted the claim is unprepared (its spec removed) and released
//! (deleted with its pod), and the driver stopped leaves no slice.

use super::{container, IDLE};
use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::node::Node;
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::{json, Value};
use std::time::Duration;

/// The driver's name, its DeviceClass's and its CDI vendor.
const DRIVER: &str = "dra.example.com";
/// The driver's unit on its node (podscope-test-*: not podscope's own, which
/// the last check looks for).
const UNIT: &str = "podscope-test-dra-driver";
/// Where the driver writes its CDI specs on the node (the nodes' /run is
/// each their own, so this is the node's, as on a machine of its own).
const CDI_DIR: &str = "/var/run/cdi";
/// What the driver's spec gives a container (podscope-dra-driver's cdi.rs):
/// a character device with tun's numbers, in hex as stat's %t:%T shows them.
const DEVICE_NODE: &str = "/dev/dra-example";
const DEVICE_NUMBERS: &str = "a:c8";
const MOUNT: &str = "/dra-example";

/// The container's view, printed at its start (the logs keep it): the
/// device node's type and numbers, the variables, the mounted file, and
/// whether it opens for reading and writing (its device cgroup allows it;
/// `<>` would make a file where there is none, hence the -c first). Then it
/// idles.
const SHOW: &str = "stat -c 'node=%F %t:%T' /dev/dra-example; \
    echo \"env=$DRA_EXAMPLE_DEVICE $DRA_EXAMPLE_CLAIM\"; \
    echo \"file=$(cat /dra-example/info)\"; \
    if [ -c /dev/dra-example ] && (exec 3<>/dev/dra-example); then echo open=yes; else echo open=no; fi; \
    echo shown";

pub fn claim_a_device(c: &Cluster) {
    // The last node: the scheduler's first choice must not pass by luck.
    let n = c.nodes.last().expect("a node");
    start_driver(n);
    with_driver_story(n, || {
        let slice = published_slice(n);
        ok!(
            c.t0,
            "{DRIVER} registered with kubelet on {} and published ResourceSlice {} (devices {})",
            n.name,
            slice["metadata"]["name"].as_str().unwrap_or("?"),
            device_names(&slice).join(", ")
        );
        objects();
        let p = kubectl::wait_ready("dra", 1, Duration::from_secs(90)).remove(0);
        assert_eq!(
            p["spec"]["nodeName"], n.name,
            "the pod went to the node without the devices"
        );
        let claim = claim_of(&p);
        let uid = claim["metadata"]["uid"].as_str().unwrap().to_string();
        let device = allocated_device(&claim, n);
        ok!(
            c.t0,
            "pod dra scheduled on {}, claim {} allocated {device} of pool {}",
            n.name,
            claim["metadata"]["name"].as_str().unwrap(),
            n.name
        );

        let spec_file = format!("{CDI_DIR}/{DRIVER}-{uid}.json");
        let spec: Value = serde_json::from_str(&n.sh(&format!("cat {spec_file}")))
            .unwrap_or_else(|e| panic!("{spec_file} on {}: {e}", n.name));
        assert_eq!(
            spec["devices"][0]["name"],
            format!("{uid}-{device}"),
            "{spec}"
        );
        let journal = driver_journal(n);
        assert!(
            journal.contains(&format!(
                "prepared claim {NS}/{}",
                claim["metadata"]["name"].as_str().unwrap()
            )),
            "kubelet's NodePrepareResources is not in the driver's journal:\n{journal}"
        );
        ok!(c.t0, "NodePrepareResources wrote {spec_file} on {}", n.name);

        let seen = container_view();
        let expect = [
            format!("node=character special file {DEVICE_NUMBERS}"),
            format!("env={device} {uid}"),
            format!("file={device} on {}", n.name),
            "open=yes".to_string(),
        ];
        for line in &expect {
            assert!(
                seen.lines().any(|l| l == line),
                "the container's view lacks {line:?}:\n{seen}"
            );
        }
        ok!(
            c.t0,
            "the container sees {DEVICE_NODE} (c {DEVICE_NUMBERS}, opens), the claim's variables and {MOUNT}/info"
        );
        // What podscope recorded: the CDI name kubelet passed in the
        // container's config (CDI_devices), in its verbose status.
        let cdi_name = format!("{DRIVER}/dev={uid}-{device}");
        let pod_uid = p["metadata"]["uid"].as_str().unwrap();
        let ids = n.crictl(&format!("ps -q --label io.kubernetes.pod.uid={pod_uid}"));
        let id = ids
            .split_whitespace()
            .next()
            .expect("the pod's container on its node");
        let inspect = n.crictl(&format!("inspect {id}"));
        assert!(
            inspect.contains(&cdi_name),
            "crictl inspect {id} on {} does not name {cdi_name}:\n{inspect}",
            n.name
        );
        ok!(
            c.t0,
            "crictl inspect on {}: the container made with {cdi_name}",
            n.name
        );

        kubectl::run(&["delete", "pod", "-n", NS, "dra", "--wait=false"]);
        let claim_name = claim["metadata"]["name"].as_str().unwrap().to_string();
        kubectl::wait(
            "the claim released and its CDI spec removed",
            Duration::from_secs(60),
            || {
                let claim_left = kubectl::get("resourceclaim", &claim_name).is_some();
                let spec_left = n.sh_status(&format!("test -e {spec_file}")).0;
                if claim_left || spec_left {
                    Err(format!(
                        "claim there: {claim_left}, spec there: {spec_left}"
                    ))
                } else {
                    Ok(())
                }
            },
        );
        ok!(
            c.t0,
            "pod deleted: claim {claim_name} gone, {spec_file} removed on {}",
            n.name
        );

        n.sh(&format!("systemctl stop {UNIT}"));
        kubectl::wait(
            "the driver's ResourceSlice deleted at its stop",
            Duration::from_secs(30),
            || match slices().as_slice() {
                [] => Ok(()),
                s => Err(format!("{} slices of {DRIVER}", s.len())),
            },
        );
        ok!(
            c.t0,
            "driver stopped on {}: no ResourceSlice of {DRIVER} left",
            n.name
        );
    });
    kubectl::run(&[
        "delete",
        "-n",
        NS,
        &format!("deviceclass/{DRIVER}"),
        "resourceclaimtemplate/dra-dev",
        "--wait=false",
    ]);
}

/// The driver as a unit of the node's systemd, as a vendor's plugin runs
/// under its node (as root, beside kubelet), with the node's kubeconfig.
fn start_driver(n: &Node) {
    let bin = podscope_test_support::harness::built("podscope-dra-driver");
    n.sh(&format!(
        "systemctl reset-failed {UNIT} 2>/dev/null; \
         systemd-run --quiet --unit={UNIT} --description='podscope-dra-driver (make cluster)' \
           {} --node {} --driver {DRIVER} --cdi-dir {CDI_DIR} \
           --kubeconfig /etc/kubernetes/kubelet.kubeconfig",
        bin.display(),
        n.name
    ));
}

/// F, and when it panics, the driver's journal and what kubelet said of
/// DRA on the node, before the panic goes on.
fn with_driver_story(n: &Node, f: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        eprintln!(
            "--- {UNIT} on {}: its journal ---\n{}",
            n.name,
            driver_journal(n)
        );
        let (_, kubelet, _) = n.sh_status(
            "journalctl -u kubelet --no-pager -o cat | grep -i -e dra -e 'plugin' -e 'resourceclaim' | tail -n 40",
        );
        eprintln!(
            "--- kubelet on {}: its lines on DRA and plugins ---\n{kubelet}",
            n.name
        );
        std::panic::resume_unwind(panic);
    }
}

fn driver_journal(n: &Node) -> String {
    n.sh_status(&format!("journalctl -u {UNIT} --no-pager -o cat"))
        .1
}

/// The driver's ResourceSlices.
fn slices() -> Vec<Value> {
    kubectl::list("resourceslices", &["-A"])
        .into_iter()
        .filter(|s| s["spec"]["driver"] == DRIVER)
        .collect()
}

fn device_names(slice: &Value) -> Vec<String> {
    slice["spec"]["devices"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|d| d["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Wait until the driver has registered and published its slice: one, of
/// the node, with its two devices. A driver that exits fails the check at
/// once (its journal then says why).
fn published_slice(n: &Node) -> Value {
    let slice = kubectl::wait(
        &format!(
            "{DRIVER} registered on {} and its ResourceSlice published",
            n.name
        ),
        Duration::from_secs(75),
        || {
            let state = n.unit_property(&format!("{UNIT}.service"), "ActiveState");
            assert!(
                state == "active" || state == "activating",
                "{UNIT} on {} is {state}",
                n.name
            );
            match slices().as_slice() {
                [s] => Ok(s.clone()),
                s => Err(format!("{} slices of {DRIVER}, driver {state}", s.len())),
            }
        },
    );
    assert_eq!(slice["spec"]["nodeName"], n.name, "{slice}");
    assert_eq!(device_names(&slice), ["dev0", "dev1"], "{slice}");
    slice
}

/// The DeviceClass of the driver's devices, a claim template asking for
/// one, and a pod using it, left to the scheduler.
fn objects() {
    kubectl::apply(&json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": { "name": DRIVER },
        "spec": { "selectors": [{ "cel": { "expression": format!("device.driver == '{DRIVER}'") } }] },
    }));
    kubectl::apply(&json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": { "name": "dra-dev", "namespace": NS },
        "spec": { "spec": { "devices": { "requests": [
            { "name": "dev", "exactly": { "deviceClassName": DRIVER } },
        ] } } },
    }));
    let mut main = container("main", &format!("{SHOW}; {IDLE}"));
    main["resources"] = json!({ "claims": [{ "name": "dev" }] });
    kubectl::apply(&super::pod(
        "dra",
        json!({
            "terminationGracePeriodSeconds": 5,
            "resourceClaims": [{ "name": "dev", "resourceClaimTemplateName": "dra-dev" }],
            "containers": [main],
        }),
    ));
}

/// The claim made for the pod from the template.
fn claim_of(p: &Value) -> Value {
    let name = p["status"]["resourceClaimStatuses"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "dev"))
        .and_then(|s| s["resourceClaimName"].as_str())
        .unwrap_or_else(|| panic!("no claim in the pod's status: {}", p["status"]));
    kubectl::get("resourceclaim", name).unwrap_or_else(|| panic!("claim {name} not found"))
}

/// The one device the claim was allocated, of the node's pool, reserved
/// for the pod.
fn allocated_device(claim: &Value, n: &Node) -> String {
    let results = claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(results.len(), 1, "the claim's allocation: {claim}");
    let r = &results[0];
    assert_eq!(r["driver"], DRIVER, "{r}");
    assert_eq!(r["pool"], n.name, "{r}");
    let reserved = claim["status"]["reservedFor"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(reserved, 1, "the claim is reserved for the pod: {claim}");
    r["device"].as_str().unwrap().to_string()
}

/// What the container printed at its start.
fn container_view() -> String {
    kubectl::wait(
        "the container's view in its log",
        Duration::from_secs(30),
        || {
            let out = kubectl::output(&["logs", "-n", NS, "dra"]);
            let log = String::from_utf8_lossy(&out.stdout).into_owned();
            if log.lines().any(|l| l == "shown") {
                Ok(log)
            } else {
                Err(format!("{log}{}", String::from_utf8_lossy(&out.stderr)))
            }
        },
    )
}
