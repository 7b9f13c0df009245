//! kubelet's device plugins, on kubelet 1.36 (issue 43): the test's device
//! plugin (`podscope-device-plugin`, tests/devices) registers
//! `example.com/dev` with kubelet and answers Allocate with CDI device
//! names only; two pods ask for one device each. What each container gets
//! (the device node, the env entries, the mount) is podscope's reading of
//! the CDI spec the plugin wrote in `/var/run/cdi` (one of podscope's
//! default spec directories; the harness's `/run` is a tmpfs of its own),
//! through CRI's `CDI_devices`.
//!
//! Not on kubelet 1.26: kubelet hands a device plugin's CDI names to the
//! runtime since 1.28 (DevicePluginCDIDevices, GA in 1.31), so 1.26 would
//! start these pods without their devices.

use super::{elapsed, exec, pod, systemctl_show, IMAGE};
use podscope_test_devices::device_plugin::{
    Device, CONTAINER_MOUNT, DEVICES, KIND_ENV, RESOURCE, SPEC_FILE,
};
use podscope_test_support::harness::{built, sh, sh_out};
use podscope_test_support::kubelet_client::Kubelet;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// The plugin's transient unit.
const UNIT: &str = "podscope-e2e-device-plugin.service";
/// Where the plugin writes its spec: a default of podscope's
/// `cdi_spec_dirs`.
const CDI_DIR: &str = "/var/run/cdi";
/// The devices' host side (nodes, mount sources). Under /run, which
/// podscoped sees (its /tmp is private).
const STATE_DIR: &str = "/run/podscope-e2e-devices";
/// kubelet's device manager's record: the devices each plugin listed
/// healthy, and what it allocated to each container.
const CHECKPOINT: &str = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";

/// The pods asking for a device each.
pub const PODS: [&str; 2] = ["dev-a", "dev-b"];

fn device_pod(name: &str) -> Value {
    pod(
        name,
        1,
        json!([{
            "name": "main",
            "image": IMAGE,
            "command": ["sleep", "100000"],
            "resources": { "limits": { RESOURCE: "1" } },
        }]),
    )
}

fn journal(unit: &str) -> String {
    sh_out(&format!("journalctl -u {unit} --no-pager -o cat")).1
}

/// kubelet's device manager checkpoint, if written yet.
fn checkpoint() -> Option<Value> {
    let text = std::fs::read(CHECKPOINT).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The devices of RESOURCE kubelet holds healthy, as its checkpoint has them.
fn registered(cp: &Value) -> BTreeSet<String> {
    cp["Data"]["RegisteredDevices"][RESOURCE]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_str().map(str::to_owned))
        .collect()
}

/// The devices kubelet allocated to the container `container` of the pod
/// `uid`: its checkpoint's entry (device ids per NUMA node, or a plain list
/// in older checkpoints).
fn allocated(cp: &Value, uid: &str, container: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for e in cp["Data"]["PodDeviceEntries"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if e["PodUID"] == uid && e["ContainerName"] == container && e["ResourceName"] == RESOURCE {
            let per_node: Vec<&Value> = match &e["DeviceIDs"] {
                Value::Object(m) => m.values().collect(),
                v => vec![v],
            };
            for list in per_node {
                ids.extend(
                    list.as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|d| d.as_str().map(str::to_owned)),
                );
            }
        }
    }
    ids
}

/// The device plugin, running and registered.
pub struct Plugin;

impl Plugin {
    /// Start the plugin as a transient unit (kubelet runs: kubelet removes
    /// every socket in its device plugin directory when it starts) and wait
    /// until kubelet holds both devices healthy. A plugin that fails (a
    /// registration kubelet refused, its socket unanswered) fails the test
    /// at once, with its reason.
    pub fn start(t0: Instant) -> Plugin {
        let bin = built("podscope-device-plugin");
        sh(&format!(
            "systemctl reset-failed {UNIT} 2>/dev/null; \
             systemd-run --quiet --unit={UNIT} --description='kubelet device plugin (podscope e2e)' \
             {} --cdi-dir {CDI_DIR} --state-dir {STATE_DIR}",
            bin.display()
        ));
        let want: BTreeSet<String> = DEVICES.iter().map(|d| d.id.to_owned()).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let cp = checkpoint();
            if cp.as_ref().is_some_and(|cp| registered(cp) == want) {
                break;
            }
            let state = systemctl_show(UNIT, "ActiveState");
            assert!(
                state == "active" || state == "activating",
                "the device plugin could not register ({UNIT} {state}); its journal:\n{}",
                journal(UNIT)
            );
            assert!(
                Instant::now() < deadline,
                "kubelet holds no healthy {RESOURCE} 60 s after the plugin started; its checkpoint: {cp:?}; \
                 the plugin's journal:\n{}\nkubelet on device plugins:\n{}",
                journal(UNIT),
                sh_out("journalctl -u kubelet --no-pager -o cat | grep -i 'device.plugin\\|devicemanager\\|example.com' | tail -n 30").1
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        ok!(
            t0,
            "device plugin: registered {RESOURCE} (v1beta1) with kubelet, which holds dev0 and dev1 healthy (its device manager's checkpoint)"
        );
        Plugin
    }

    /// Write the two pods' manifests.
    pub fn write_pods(&self, k: &Kubelet) {
        for name in PODS {
            k.write_manifest(name, &device_pod(name));
        }
    }

    /// Stop the plugin: it removes its spec, socket, nodes and mount
    /// sources.
    pub fn stop(self, t0: Instant) {
        sh(&format!("systemctl stop {UNIT}"));
        for left in [
            Path::new(CDI_DIR).join(SPEC_FILE),
            Path::new(STATE_DIR).to_path_buf(),
        ] {
            assert!(
                !left.exists(),
                "{} left by the device plugin",
                left.display()
            );
        }
        ok!(
            t0,
            "device plugin stopped, its CDI spec and devices removed"
        );
    }
}

/// One pod, once it runs: kubelet's allocation and the plugin's answer,
/// then what its container got of the device (node, env, mount); returns
/// the device's id.
async fn check_pod(k: &Kubelet, name: &str, t0: Instant) -> &'static str {
    let p = k
        .wait_pod(name, Duration::from_secs(90), "running", |p| {
            p.is_some_and(|p| p.running())
        })
        .await
        .0
        .unwrap();
    let id = p.container("main").unwrap().id().unwrap().to_owned();

    // kubelet's side, done before it created the container: the device it
    // allocated to this container, and the plugin's answer for it.
    let cp = checkpoint().unwrap_or_else(|| panic!("no {CHECKPOINT}"));
    let ids = allocated(&cp, &p.metadata.uid, "main");
    let d: Device = match Vec::from_iter(&ids)[..] {
        [one] => Device::by_id(one),
        _ => None,
    }
    .unwrap_or_else(|| {
        panic!("{name}: kubelet allocated {ids:?}, not one device of {RESOURCE}: {cp}")
    });
    let answer = format!("Allocate: {}", d.cdi_name());
    let plugin_log = journal(UNIT);
    assert!(
        plugin_log.lines().any(|l| l.ends_with(&answer)),
        "{name}: the plugin never answered {answer:?}:\n{plugin_log}"
    );
    ok!(
        t0,
        "{name}: kubelet allocated {} to its container, the device plugin answered {}",
        d.id,
        d.cdi_name()
    );

    // The env of the container's own process (an exec's may differ): the
    // device's entry and the spec's own, once each, and no other device's.
    let (rc, env) = exec(
        &id,
        "tr \"\\000\" \"\\n\" < /proc/1/environ | grep ^EXAMPLE_DEV",
    );
    // (crictl's output has blank lines of its own.)
    let mut env: Vec<&str> = env.lines().filter(|l| !l.is_empty()).collect();
    env.sort_unstable();
    let mut want = vec![d.env(), KIND_ENV.to_owned()];
    want.sort_unstable();
    assert_eq!(
        env, want,
        "{name} ({}): the EXAMPLE_DEV entries of its container's environment ({rc}): \
         the CDI device's env is not as its spec says",
        d.id
    );

    // The node: a character device with the device's numbers, opened for
    // writing, read as its driver reads; the other device's is not there.
    let node = d.container_path();
    let (rc, out) = exec(
        &id,
        &format!(
            "stat -c \"node=%F %t:%T\" {node}; echo x > {node} && echo write=ok; \
             echo read=$(head -c 4 {node} | wc -c); echo nodes=$(ls /dev | grep example- | xargs)"
        ),
    );
    let expect = [
        format!("node=character special file {:x}:{:x}", d.major, d.minor),
        "write=ok".to_owned(),
        // (/dev/zero's numbers read as zeros, /dev/null's as nothing.)
        format!("read={}", if (d.major, d.minor) == (1, 5) { 4 } else { 0 }),
        format!("nodes=example-{}", d.id),
    ];
    for line in &expect {
        assert!(
            out.lines().any(|l| l == line),
            "{name} ({}): no {line:?} in ({rc}):\n{out}",
            d.id
        );
    }

    // The mount: the device's directory, read-only.
    let (rc, out) = exec(
        &id,
        // (Ending in an echo: crictl shows no output of a command that fails.)
        &format!("cat {CONTAINER_MOUNT}/name; touch {CONTAINER_MOUNT}/x 2>&1; echo touch=$?"),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.first() == Some(&d.id)
            && out.contains("Read-only file system")
            && lines.contains(&"touch=1"),
        "{name} ({}): {CONTAINER_MOUNT} ({rc}):\n{out}",
        d.id
    );
    ok!(
        t0,
        "{name}: its container has {node} (c {}:{}, writable), EXAMPLE_DEV={} and the spec's own entry once, {CONTAINER_MOUNT}/name read-only: the CDI spec's edits",
        d.major,
        d.minor,
        d.id
    );
    d.id
}

/// Both pods: each has its device, and the two have different ones.
pub async fn check(k: &Kubelet, t0: Instant) {
    let t = Instant::now();
    let mut got = BTreeSet::new();
    for name in PODS {
        got.insert(check_pod(k, name, t0).await);
    }
    let all: BTreeSet<&str> = DEVICES.iter().map(|d| d.id).collect();
    assert_eq!(got, all, "the two pods' devices");
    ok!(
        t0,
        "devices: dev-a and dev-b got dev0 and dev1 between them ({})",
        elapsed(t).trim()
    );
}
