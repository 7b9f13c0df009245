//! `make e2e`: a real kubelet (1.26, then 1.36; standalone, static pods) drives
//! podscope, in the harness, and every check reads kubelet's own view
//! (`/pods`, `/stats/summary`, the files under `/var/log/pods`) and
//! systemd's (`systemctl`, `machinectl`), with podscope's D-Bus view to
//! find the units. Run inside the harness by `tests/e2e/run-e2e.sh`, one
//! scenario after another on one kubelet: its loops (PLEG's relist,
//! back-off, log rotation, garbage collection) are the slow part, so the
//! pods are all written at the start and each check waits only for what
//! it needs.

use podscope_test_support::harness::{
    crictl, manager, sh, sh_out, string_map, Client, ListFilter, NetworkMode, SandboxStatus, State,
};
use podscope_test_support::kubelet_client::{Kubelet, Pod};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NS: &str = "e2e";
/// critest's busybox (every applet), served through the harness mirror.
const IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.29-2";
const CRI: &str = "unix:///run/podscope/cri.sock";
/// Lines the logger writes, at about 50 a second: through two daemon
/// restarts and several rotations.
const LOG_LINES: u32 = 3000;
/// The host-network pod's port, on the node's (the harness's) loopback.
const HOSTNET_PORT: u16 = 18080;
/// kubelet's labels on every sandbox and container.
const UID_LABEL: &str = "io.kubernetes.pod.uid";

fn elapsed(t0: Instant) -> String {
    format!("{:6.1} s", t0.elapsed().as_secs_f64())
}

/// One check done: printed as it passes, so a failure's place is plain.
macro_rules! ok {
    ($t0:expr, $($arg:tt)*) => {
        println!("e2e: [{}] ok: {}", elapsed($t0), format!($($arg)*))
    };
}

// (After `ok!`, which it uses.)
mod cri_metrics;
mod devices;

// ---- the pods ----

fn pod(name: &str, grace: u32, containers: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": NS },
        "spec": {
            "terminationGracePeriodSeconds": grace,
            "containers": containers,
        }
    })
}

fn sh_c(script: &str) -> Value {
    json!(["sh", "-c", script])
}

/// Two containers sharing the pod network: an HTTP server, whose
/// readiness is an HTTP probe kubelet sends to the pod's IP and whose
/// liveness is an exec probe (ExecSync), and a client fetching from it
/// over loopback; before them, an init container that writes the server's
/// files into a volume (an emptyDir kubelet makes) they share. Burstable
/// (limits above requests).
fn web() -> Value {
    let mut p = pod(
        "web",
        2,
        json!([
            {
                "name": "server",
                "image": IMAGE,
                "command": ["httpd", "-f", "-p", "8080", "-h", "/www"],
                "volumeMounts": [{ "name": "www", "mountPath": "/www" }],
                // Quick to react (one failure is enough); timeouts longer
                // than a busy CI machine or podscoped's restart can make a
                // call take, so that only the checks' own doing fails them.
                "readinessProbe": {
                    "httpGet": { "path": "/ready", "port": 8080 },
                    "periodSeconds": 1, "failureThreshold": 1, "timeoutSeconds": 5
                },
                "livenessProbe": {
                    "exec": { "command": ["sh", "-c", "test ! -e /tmp/unhealthy"] },
                    "periodSeconds": 1, "failureThreshold": 1, "timeoutSeconds": 10
                },
                "resources": {
                    "requests": { "cpu": "50m", "memory": "16Mi" },
                    "limits": { "cpu": "250m", "memory": "64Mi" }
                }
            },
            {
                "name": "client",
                "image": IMAGE,
                "command": sh_c("while true; do wget -qO- http://127.0.0.1:8080/index.html; sleep 1; done"),
            }
        ]),
    );
    p["spec"]["initContainers"] = json!([{
        "name": "setup",
        "image": IMAGE,
        "command": sh_c("echo hello-from-server > /www/index.html && echo ok > /www/ready"),
        "volumeMounts": [{ "name": "www", "mountPath": "/www" }],
    }]);
    p["spec"]["volumes"] = json!([{ "name": "www", "emptyDir": {} }]);
    p
}

/// A pod on the node's network, as the control plane's static pods are:
/// no namespace of its own, its server on the node's loopback.
fn hostnet() -> Value {
    let mut p = pod(
        "hostnet",
        1,
        json!([{
            "name": "server",
            "image": IMAGE,
            "command": sh_c(&format!(
                "mkdir -p /www && echo hello-from-the-node > /www/index.html && \
                 exec httpd -f -p 127.0.0.1:{HOSTNET_PORT} -h /www"
            )),
        }]),
    );
    p["spec"]["hostNetwork"] = json!(true);
    p
}

/// A container that fails at once, leaving a termination message where
/// kubelet mounted the file for it: kubelet restarts it with back-off.
fn crash() -> Value {
    pod(
        "crash",
        1,
        json!([{
            "name": "fail",
            "image": IMAGE,
            "command": sh_c("echo failing; echo crashed-on-purpose > /dev/termination-log; exit 3")
        }]),
    )
}

/// A container over its memory limit: OOM-killed, restarted. Guaranteed
/// (limits alone are also its requests), so kubelet also asks for an
/// oom_score_adj of -997.
fn oom() -> Value {
    pod(
        "oom",
        1,
        json!([{
            "name": "hog",
            "image": IMAGE,
            "command": sh_c("tail /dev/zero"),
            "resources": { "limits": { "cpu": "100m", "memory": "32Mi" } }
        }]),
    )
}

/// Numbered lines, odd ones to stderr, about 50 a second, then "done".
fn logger() -> Value {
    pod(
        "logger",
        1,
        json!([{
            "name": "count",
            "image": IMAGE,
            "command": sh_c(&format!(
                "i=0; while [ $i -lt {LOG_LINES} ]; do i=$((i+1)); \
                 if [ $((i % 2)) -eq 1 ]; then echo \"line $i\" >&2; else echo \"line $i\"; fi; \
                 usleep 20000; done; echo done; exec sleep 100000"
            )),
        }]),
    )
}

/// A pod whose manifest is edited (its label's value): a new pod for
/// kubelet.
fn edit(version: &str) -> Value {
    let mut p = pod(
        "edit",
        1,
        json!([{ "name": "main", "image": IMAGE, "command": ["sleep", "100000"] }]),
    );
    p["metadata"]["labels"] = json!({ "version": version });
    p
}

/// A pod whose manifest is removed.
/// An image volume (GA in 1.36): the test image's /etc, read-only, at
/// /vol in a container of the same image.
fn imgvol() -> Value {
    let mut p = pod(
        "imgvol",
        1,
        json!([{
            "name": "main",
            "image": IMAGE,
            "command": ["sleep", "100000"],
            "volumeMounts": [{ "name": "img", "mountPath": "/vol", "subPath": "etc" }],
        }]),
    );
    p["spec"]["volumes"] =
        json!([{ "name": "img", "image": { "reference": IMAGE, "pullPolicy": "IfNotPresent" } }]);
    p
}

fn gone() -> Value {
    pod(
        "gone",
        1,
        json!([{ "name": "main", "image": IMAGE, "command": ["sleep", "100000"] }]),
    )
}

// ---- podscope's and systemd's side ----

/// podscope's sandboxes of the pod with kubelet's uid `uid`.
async fn sandboxes(m: &Client, uid: &str) -> Vec<SandboxStatus> {
    let filter = ListFilter {
        labels: Some(string_map(&[(UID_LABEL, uid)])),
        ..Default::default()
    };
    let mut out = Vec::new();
    for s in m.list(&filter).await.unwrap() {
        if let Ok(st) = m.status(&s.id).await {
            out.push(st);
        }
    }
    out
}

/// The one ready sandbox of the pod `uid`.
async fn ready_sandbox(m: &Client, uid: &str) -> SandboxStatus {
    let mut ready: Vec<SandboxStatus> = sandboxes(m, uid)
        .await
        .into_iter()
        .filter(|s| s.state == State::Ready)
        .collect();
    assert_eq!(ready.len(), 1, "pod {uid}: ready sandboxes {ready:#?}");
    ready.remove(0)
}

fn systemctl_show(unit: &str, property: &str) -> String {
    sh(&format!("systemctl show -P {property} {unit}"))
        .trim()
        .to_owned()
}

fn unit_loaded(unit: &str) -> bool {
    systemctl_show(unit, "LoadState") == "loaded"
}

fn container_unit(id: &str) -> String {
    format!("podscope-ctr-{id}.service")
}

/// kubelet's slice for a pod: kubepods[-<qos>]-pod<uid>.slice.
fn pod_slice(pod: &Pod) -> String {
    let uid = pod.metadata.uid.replace('-', "_");
    match pod.status.qos_class.as_deref() {
        Some("Guaranteed") => format!("kubepods-pod{uid}.slice"),
        Some("Burstable") => format!("kubepods-burstable-pod{uid}.slice"),
        Some("BestEffort") => format!("kubepods-besteffort-pod{uid}.slice"),
        other => panic!("{}: QoS class {other:?}", pod.metadata.name),
    }
}

/// `crictl exec -s` (ExecSync) in the container `id`: its status and output.
fn exec(id: &str, script: &str) -> (i32, String) {
    let (rc, out, err) = sh_out(&format!(
        "{} --runtime-endpoint {CRI} exec -s {id} sh -c '{script}'",
        crictl()
    ));
    (rc, format!("{out}{err}"))
}

fn crictl_pods_all() -> String {
    sh(&format!("{} --runtime-endpoint {CRI} pods -q", crictl()))
}

// ---- the run ----

/// A pod about to be replaced or removed, as it was: kubelet's view, its
/// sandbox and its containers.
struct Replaced {
    pod: Pod,
    sandbox: SandboxStatus,
    containers: Vec<String>,
}

impl Replaced {
    async fn of(k: &Kubelet, m: &Client, name: &str) -> Replaced {
        let pod = k.pod(name).await.unwrap();
        let sandbox = ready_sandbox(m, &pod.metadata.uid).await;
        let containers = pod
            .status
            .container_statuses
            .iter()
            .map(|c| c.id().unwrap().to_owned())
            .collect();
        Replaced {
            pod,
            sandbox,
            containers,
        }
    }
}

/// (pod, container) -> (container id, restart count).
type Ids = BTreeMap<(String, String), (String, u32)>;

/// The containers of these pods as kubelet sees them.
async fn snapshot(k: &Kubelet, pods: &[&str]) -> Ids {
    let mut seen = BTreeMap::new();
    for name in pods {
        let p = k
            .pod(name)
            .await
            .unwrap_or_else(|| panic!("{name}: kubelet lost it"));
        assert!(p.running(), "{name}: not running: {:#?}", p.status);
        for c in &p.status.container_statuses {
            seen.insert(
                ((*name).to_owned(), c.name.clone()),
                (c.id().unwrap().to_owned(), c.restart_count),
            );
        }
    }
    seen
}

#[tokio::main]
async fn main() {
    let t_all = Instant::now();
    // Both generations, one after the other, the same pods and checks:
    // a node upgrades its kubelet before anything else. kubelet.sh reads
    // KUBELET (the harness binds each at a path of its own).
    for (generation, var) in [("1.26", "KUBELET"), ("1.36", "KUBELET_1_36")] {
        let bin = std::env::var(var).unwrap_or_else(|_| {
            panic!(
                "{var} is not set: make e2e runs kubelet 1.26 and 1.36 (KUBELET=, KUBELET_1_36=)"
            )
        });
        println!("e2e: kubelet {generation} ({bin})");
        std::env::set_var("KUBELET", &bin);
        scenario(generation).await;
    }
    println!("e2e: both kubelets passed in {}", elapsed(t_all).trim());
}

/// Every pod and check on one kubelet, from its start to nothing left.
async fn scenario(generation: &str) {
    let t0 = Instant::now();
    let (m, _conn) = manager().await;
    // kubelet 1.36 starts with PodAndContainerStatsFromCRI, its
    // /metrics/cadvisor podscope's, and is restarted below without it
    // (cri_metrics.rs compares the two).
    let cri_metrics = generation != "1.26";
    let k = Kubelet::start(CRI, if cri_metrics { cri_metrics::GATE } else { "" });
    ok!(t0, "kubelet {generation} started on {CRI}");
    if generation != "1.26" {
        // RuntimeConfig: kubelet takes its cgroup driver from podscope
        // (kubelet 1.38 will not start without it).
        let said = sh("journalctl -u kubelet --no-pager -o cat");
        let line = said
            .lines()
            .find(|l| l.contains("Using cgroup driver setting received from the CRI runtime"))
            .unwrap_or_else(|| {
                panic!("kubelet {generation} did not take its cgroup driver from RuntimeConfig")
            });
        assert!(line.contains(r#"cgroupDriver="systemd""#), "{line}");
        ok!(
            t0,
            "kubelet {generation} took cgroupDriver systemd from podscope's RuntimeConfig"
        );
    }

    // Every pod at once: kubelet's loops run side by side.
    k.write_manifest("web", &web());
    k.write_manifest("crash", &crash());
    k.write_manifest("oom", &oom());
    k.write_manifest("logger", &logger());
    k.write_manifest("edit", &edit("1"));
    k.write_manifest("gone", &gone());
    k.write_manifest("hostnet", &hostnet());
    let image_volumes = generation != "1.26";
    if image_volumes {
        k.write_manifest("imgvol", &imgvol());
    }
    if cri_metrics {
        k.write_manifest("burn", &cri_metrics::burner());
    }

    let limit = Duration::from_secs(90);
    k.wait_pod("web", limit, "ready", |p| p.is_some_and(|p| p.ready()))
        .await;
    for name in ["logger", "edit", "gone", "hostnet"] {
        k.wait_pod(name, limit, "running", |p| p.is_some_and(|p| p.running()))
            .await;
    }
    ok!(t0, "web ready; logger, edit, gone and hostnet running");

    // The manifests edited and removed now, so that kubelet's garbage
    // collection runs while the rest is checked.
    let edit_old = Replaced::of(&k, &m, "edit").await;
    let gone = Replaced::of(&k, &m, "gone").await;
    k.write_manifest("edit", &edit("2"));
    k.remove_manifest("gone");

    check_web(&k, &m, t0).await;
    check_hostnet(&k, &m, t0).await;
    check_slices(&k, &m, t0).await;
    check_stats(&k, t0).await;
    check_edit(&k, &m, &edit_old, t0).await;
    check_gone_stopped(&k, &m, &gone.sandbox, t0).await;
    if image_volumes {
        check_image_volume(&k, &m, t0).await;
    }

    // podscoped restarted under running pods: kubelet restarts nothing.
    let watched = ["web", "logger", "edit"];
    let before = snapshot(&k, &watched).await;
    sh("systemctl restart podscoped");
    let (m, _conn) = manager().await;
    // Several of PLEG's relists (1 s) and probes against the new daemon.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = snapshot(&k, &watched).await;
    assert_eq!(
        before, after,
        "containers or restart counts changed across podscoped's restart"
    );
    assert!(
        k.pod("web").await.unwrap().ready(),
        "web not ready after podscoped's restart"
    );
    ok!(
        t0,
        "systemctl restart podscoped: kubelet restarted no container, web still ready"
    );

    // kubelet restarted: it adopts the running pods. kubelet 1.36's
    // /metrics/cadvisor, podscope's so far, is read first, and it comes
    // back without PodAndContainerStatsFromCRI (cAdvisor's).
    let sandboxes_before = crictl_pods_all();
    let served = if cri_metrics {
        k.wait_pod("burn", limit, "running", |p| p.is_some_and(|p| p.running()))
            .await;
        let served = cri_metrics::served(&k, &m, t0).await;
        k.restart_with_gates("");
        Some(served)
    } else {
        k.restart();
        None
    };
    for name in watched {
        k.wait_pod(name, limit, "running again in the new kubelet", |p| {
            p.is_some_and(|p| p.running())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = snapshot(&k, &watched).await;
    assert_eq!(
        before, after,
        "the restarted kubelet restarted or replaced containers"
    );
    for id in crictl_pods_all().lines() {
        assert!(
            sandboxes_before.contains(id),
            "the restarted kubelet made a new sandbox {id}"
        );
    }
    ok!(
        t0,
        "kubelet restarted: it adopted every running pod and restarted nothing"
    );
    if let Some(served) = served {
        cri_metrics::compare(&k, served, t0).await;
    }

    // kubelet's device plugins, on 1.36 (devices.rs: 1.26 hands the
    // runtime no CDI names). After kubelet's restart: a restarted kubelet
    // admits its running pods again, and whether a device's pod passes
    // before its plugin has registered again is kubelet's race, not
    // podscope's.
    let plugin = (generation != "1.26").then(|| {
        let plugin = devices::Plugin::start(t0);
        plugin.write_pods(&k);
        plugin
    });
    if plugin.is_some() {
        devices::check(&k, t0).await;
    }

    check_crash(&k, t0).await;
    check_oom(&k, t0).await;
    check_logs(&k, t0).await;
    check_garbage_collected(&m, &[&edit_old, &gone], t0).await;

    // Every manifest removed: every pod stops, and nothing of them is
    // left once they are removed.
    let mut all_pods = vec!["web", "crash", "oom", "logger", "edit", "hostnet"];
    if image_volumes {
        all_pods.push("imgvol");
    }
    if cri_metrics {
        all_pods.push("burn");
    }
    if plugin.is_some() {
        all_pods.extend(devices::PODS);
    }
    for name in &all_pods {
        k.remove_manifest(name);
    }
    for name in all_pods.iter().copied() {
        k.wait_pod(name, limit, "gone from kubelet", |p| p.is_none())
            .await;
    }
    let deadline = Instant::now() + limit;
    loop {
        let all = m.list(&ListFilter::default()).await.unwrap();
        if all.iter().all(|s| s.state != State::Ready) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a sandbox still ready with no manifest: {all:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ok!(t0, "every manifest removed: kubelet stopped every pod");
    if let Some(plugin) = plugin {
        plugin.stop(t0);
    }
    k.stop();
    let left = m.list(&ListFilter::default()).await.unwrap();
    assert!(left.is_empty(), "sandboxes left: {left:#?}");
    let units = sh(
        "systemctl list-units --all --plain --no-legend 'podscope-*.scope' \
                    'podscope-ctr-*' 'podscope-netns@*' 'kubepods*'",
    );
    assert!(units.trim().is_empty(), "units left: {units}");
    let netns = sh("ls /run/netns");
    assert!(
        !netns.contains("podscope-"),
        "network namespaces left: {netns}"
    );
    // Nor a container's bundle, or its state in the OCI runtime.
    for dir in ["/var/lib/podscope/containers", "/run/crun", "/run/runc"] {
        let ids: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.len() == 64)
            .collect();
        assert!(ids.is_empty(), "containers left in {dir}: {ids:?}");
    }
    ok!(
        t0,
        "kubelet stopped, its pods removed: no unit, namespace, sandbox, bundle or runtime state left"
    );
    println!("e2e: kubelet {generation} passed in {}", elapsed(t0).trim());
}

/// The two-container pod: probes, the shared network, the pod's IP as
/// kubelet, podscope and machined see it.
async fn check_web(k: &Kubelet, m: &Client, t0: Instant) {
    let p = k.pod("web").await.unwrap();
    let ip = p
        .status
        .pod_ip
        .clone()
        .unwrap_or_else(|| panic!("web has no pod IP in kubelet's status: {p:#?}"));
    let sb = ready_sandbox(m, &p.metadata.uid).await;
    assert_eq!(
        sb.ips,
        vec![ip.clone()],
        "podscope's and kubelet's pod IPs differ"
    );
    for c in ["server", "client"] {
        let s = p.container(c).unwrap();
        assert!(s.ready && s.state.running.is_some(), "{c}: {s:#?}");
        assert_eq!(s.image, IMAGE, "{c}: the image's name in kubelet's status");
        assert!(
            s.image_id.contains("@sha256:"),
            "{c}: imageID {}",
            s.image_id
        );
    }
    ok!(
        t0,
        "web: both containers running and ready (an HTTP readiness probe to {ip}:8080)"
    );
    let setup = p
        .status
        .init_container_statuses
        .first()
        .unwrap_or_else(|| panic!("web: no init container status: {p:#?}"));
    let done = setup.state.terminated.as_ref();
    assert!(
        setup.name == "setup" && done.is_some_and(|t| t.exit_code == 0 && t.reason == "Completed"),
        "web's init container: {setup:#?}"
    );
    ok!(
        t0,
        "web: its init container ran before them and completed (exit 0)"
    );

    // kubelet's image garbage collection keeps the images whose id a
    // listed container names (ListContainers' imageRef): the image in use
    // is among them, so kubelet would not remove it.
    let listed: Value = serde_json::from_str(&sh(&format!(
        "{} --runtime-endpoint {CRI} ps -o json --label {UID_LABEL}={}",
        crictl(),
        p.metadata.uid
    )))
    .unwrap();
    let images: Value = serde_json::from_str(&sh(&format!(
        "{} --image-endpoint {CRI} images -o json",
        crictl()
    )))
    .unwrap();
    let ids: Vec<&str> = images["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["id"].as_str())
        .collect();
    let refs: Vec<&str> = listed["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["imageRef"].as_str())
        .collect();
    assert!(
        refs.len() == 2 && refs.iter().all(|r| ids.contains(r)),
        "ListContainers' imageRefs {refs:?} are not image ids {ids:?}"
    );
    ok!(
        t0,
        "web: its containers' imageRef is the image's id (kubelet's image GC sees it in use)"
    );

    // The client reaches the server over the pod's loopback: its log,
    // where kubelet's log layout puts it.
    let client_log = format!(
        "/var/log/pods/{NS}_{}_{}/client/0.log",
        p.metadata.name, p.metadata.uid
    );
    podscope_test_support::harness::wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&client_log).is_ok_and(|s| s.contains("hello-from-server"))
    });
    ok!(
        t0,
        "web: the client fetched over the pod network what the init container wrote into the server's emptyDir volume ({client_log})"
    );

    // Readiness follows the HTTP probe both ways.
    let server = p.container("server").unwrap().id().unwrap().to_owned();
    let (rc, out) = exec(&server, "rm /www/ready");
    assert_eq!(rc, 0, "exec rm: {out}");
    k.wait_pod("web", Duration::from_secs(30), "unready", |p| {
        p.is_some_and(|p| !p.ready())
    })
    .await;
    let (rc, out) = exec(&server, "echo ok > /www/ready");
    assert_eq!(rc, 0, "exec echo: {out}");
    k.wait_pod("web", Duration::from_secs(30), "ready again", |p| {
        p.is_some_and(|p| p.ready())
    })
    .await;
    ok!(
        t0,
        "web: readiness follows the HTTP probe (unready without /ready, ready again with it)"
    );

    // The exec liveness probe fails: kubelet restarts the server.
    let (rc, out) = exec(&server, "touch /tmp/unhealthy");
    assert_eq!(rc, 0, "exec touch: {out}");
    k.wait_pod(
        "web",
        Duration::from_secs(60),
        "restarted by its liveness probe and ready",
        |p| {
            p.is_some_and(|p| {
                p.ready()
                    && p.container("server")
                        .is_some_and(|s| s.restart_count == 1 && s.id() != Some(server.as_str()))
            })
        },
    )
    .await;
    let p = k.pod("web").await.unwrap();
    let s = p.container("server").unwrap();
    let last = s
        .last_state
        .terminated
        .as_ref()
        .expect("server's last state");
    assert_eq!(
        last.container_id.as_deref().map(|i| i.ends_with(&server)),
        Some(true)
    );
    assert_eq!(p.container("client").unwrap().restart_count, 0);
    ok!(t0, "web: a failing exec liveness probe (ExecSync) restarted the server (exit {}), not the client", last.exit_code);

    // machined: the pod is a machine, led by its init, with its address.
    let sb = ready_sandbox(m, &p.metadata.uid).await;
    assert!(!sb.machine.is_empty(), "web is no machine");
    let show = sh(&format!(
        "machinectl show {} -p Leader -p Class -p Service -p State",
        sb.machine
    ));
    for want in [
        format!("Leader={}", sb.init_pid),
        "Class=container".into(),
        "Service=podscope".into(),
        "State=running".into(),
    ] {
        assert!(
            show.contains(&want),
            "machinectl show {}: {show}",
            sb.machine
        );
    }
    let status = sh(&format!("machinectl status {} --no-pager", sb.machine));
    assert!(
        status.contains(&ip),
        "machinectl status lacks {ip}: {status}"
    );
    ok!(
        t0,
        "web: machinectl shows machine {} (leader its init, address {ip})",
        sb.machine
    );
}

/// The host-network pod: no network namespace of its own, its server on
/// the node's loopback.
async fn check_hostnet(k: &Kubelet, m: &Client, t0: Instant) {
    let p = k.pod("hostnet").await.unwrap();
    let sb = ready_sandbox(m, &p.metadata.uid).await;
    assert_eq!(sb.network, NetworkMode::Host, "{sb:#?}");
    assert!(sb.netns_path.is_empty() && sb.ips.is_empty(), "{sb:#?}");
    let url = format!("http://127.0.0.1:{HOSTNET_PORT}/index.html");
    podscope_test_support::harness::wait_until(Duration::from_secs(20), || {
        sh_out(&format!("curl -sf {url}"))
            .1
            .contains("hello-from-the-node")
    });
    ok!(
        t0,
        "hostnet: a host-network pod, no namespace of its own, serving on the node's {url}"
    );
}

/// kubepods.slice -> QoS slice -> pod slice -> the units, with the
/// resources kubelet asked for as unit properties.
async fn check_slices(k: &Kubelet, m: &Client, t0: Instant) {
    for (name, qos, qos_slice) in [
        ("web", "Burstable", Some("kubepods-burstable.slice")),
        ("logger", "BestEffort", Some("kubepods-besteffort.slice")),
        ("oom", "Guaranteed", None),
    ] {
        let p = k
            .wait_pod(name, Duration::from_secs(30), "known", |p| {
                p.is_some_and(|p| p.status.qos_class.is_some())
            })
            .await
            .0
            .unwrap();
        assert_eq!(p.status.qos_class.as_deref(), Some(qos), "{name}");
        let slice = pod_slice(&p);
        let parent = qos_slice.unwrap_or("kubepods.slice");
        assert_eq!(systemctl_show(&slice, "Slice"), parent, "{slice}'s parent");
        if let Some(q) = qos_slice {
            assert_eq!(systemctl_show(q, "Slice"), "kubepods.slice", "{q}'s parent");
        }
        assert_eq!(systemctl_show("kubepods.slice", "Slice"), "-.slice");
        // The sandbox (in oom's case, through its restarts) and every
        // container of it sit in the pod's slice.
        let sb = sandboxes(m, &p.metadata.uid)
            .await
            .into_iter()
            .find(|s| s.state == State::Ready)
            .unwrap_or_else(|| panic!("{name}: no ready sandbox"));
        assert_eq!(sb.slice, slice, "{name}: podscope's slice");
        assert_eq!(systemctl_show(&sb.unit, "Slice"), slice, "{}", sb.unit);
        let containers = m
            .list_containers(&podscope_api::container::ContainerFilter {
                pod_id: Some(sb.id.clone()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(!containers.is_empty(), "{name}: no containers");
        for c in &containers {
            assert_eq!(systemctl_show(&c.unit, "Slice"), slice, "{}", c.unit);
        }
        let chain = match qos_slice {
            Some(q) => format!("kubepods.slice -> {q}"),
            None => "kubepods.slice".into(),
        };
        ok!(
            t0,
            "{name} ({qos}): {chain} -> {slice} -> {} and {} container unit(s)",
            sb.unit,
            containers.len()
        );
    }

    // The resources, as systemd shows them: the server's own (podscope's
    // unit properties) and the Guaranteed pod's slice (kubelet's).
    let p = k.pod("web").await.unwrap();
    let server = p.container("server").unwrap().id().unwrap().to_owned();
    let unit = container_unit(&server);
    assert_eq!(
        systemctl_show(&unit, "MemoryMax"),
        (64u64 << 20).to_string(),
        "{unit}"
    );
    assert_eq!(
        systemctl_show(&unit, "CPUQuotaPerSecUSec"),
        "250ms",
        "{unit}"
    );
    let oom = k.pod("oom").await.unwrap();
    let slice = pod_slice(&oom);
    let limit = (32u64 << 20).to_string();
    assert!(
        systemctl_show(&slice, "MemoryMax") == limit
            || systemctl_show(&slice, "MemoryLimit") == limit,
        "{slice}: no 32 MiB limit in systemctl show"
    );
    assert_eq!(
        systemctl_show(&slice, "CPUQuotaPerSecUSec"),
        "100ms",
        "{slice}"
    );
    ok!(
        t0,
        "resources in systemctl show: {unit} MemoryMax=64M CPUQuota=25%; {slice} 32M, 10%"
    );
}

/// `/stats/summary`: every running pod with its containers' CPU, memory,
/// root and log usage; the image filesystem from ImageFsInfo.
async fn check_stats(k: &Kubelet, t0: Instant) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = k.summary().await;
        let web = s
            .pods
            .iter()
            .find(|p| p.pod_ref.name == "web-e2e-node" && p.pod_ref.namespace == NS);
        let complete = web.is_some_and(|p| {
            let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
            names.contains(&"server")
                && names.contains(&"client")
                && p.memory
                    .as_ref()
                    .and_then(|m| m.working_set_bytes)
                    .unwrap_or(0)
                    > 0
                // The pod's own CPU, which kubelet reads from its slice's
                // cgroup (on these machines in a cpuacct hierarchy apart
                // from cpu, where podscope counts crun's containers).
                && p.cpu
                    .as_ref()
                    .and_then(|c| c.usage_core_nano_seconds)
                    .unwrap_or(0)
                    > 0
                && p.containers.iter().all(|c| {
                    c.cpu
                        .as_ref()
                        .and_then(|c| c.usage_core_nano_seconds)
                        .unwrap_or(0)
                        > 0
                        && c.memory
                            .as_ref()
                            .and_then(|m| m.working_set_bytes)
                            .unwrap_or(0)
                            > 0
                        && c.rootfs.as_ref().is_some_and(|r| r.used_bytes.is_some())
                        && c.logs.as_ref().is_some_and(|l| l.used_bytes.is_some())
                })
        });
        let image_fs = s
            .node
            .runtime
            .as_ref()
            .and_then(|r| r.image_fs.as_ref())
            .and_then(|f| f.capacity_bytes)
            .unwrap_or(0);
        if complete && image_fs > 0 {
            let w = web.unwrap();
            let client_logs = w
                .containers
                .iter()
                .find(|c| c.name == "client")
                .and_then(|c| c.logs.as_ref())
                .and_then(|l| l.used_bytes)
                .unwrap();
            assert!(
                client_logs > 0,
                "the client's log is empty in kubelet's stats"
            );
            ok!(t0, "stats/summary: web's CPU and memory, its containers' CPU, memory, root and logs ({client_logs} bytes); image fs {} GiB", image_fs >> 30);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kubelet's /stats/summary lacks web's figures or the image filesystem: {s:#?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The edited manifest: kubelet replaced the pod; the old one's scope,
/// network namespace and address lease are gone at once.
async fn check_edit(k: &Kubelet, m: &Client, old: &Replaced, t0: Instant) {
    let (old_sb, old) = (&old.sandbox, &old.pod);
    let new = k
        .wait_pod(
            "edit",
            Duration::from_secs(60),
            "replaced and running",
            |p| p.is_some_and(|p| p.metadata.uid != old.metadata.uid && p.running()),
        )
        .await
        .0
        .unwrap();
    assert_eq!(
        new.metadata.labels.get("version").map(String::as_str),
        Some("2")
    );
    let new_sb = ready_sandbox(m, &new.metadata.uid).await;
    assert_ne!(new_sb.id, old_sb.id);
    podscope_test_support::harness::wait_until(Duration::from_secs(30), || {
        !Path::new(&old_sb.netns_path).exists()
    });
    let st = m.status(&old_sb.id).await;
    if let Ok(st) = st {
        assert_ne!(st.state, State::Ready, "the old sandbox is still ready");
        assert!(
            !st.network_attached,
            "the old sandbox's network is still attached"
        );
    }
    assert_ne!(
        systemctl_show(&old_sb.unit, "ActiveState"),
        "active",
        "{}",
        old_sb.unit
    );
    assert_ne!(
        systemctl_show(&old_sb.netns_unit, "ActiveState"),
        "active",
        "{}",
        old_sb.netns_unit
    );
    let leases = podscope_test_support::harness::host_local_ips(&old_sb.network_name);
    for ip in &old_sb.ips {
        assert!(
            !leases.contains(ip),
            "the old pod's address {ip} is still leased: {leases:?}"
        );
    }
    ok!(
        t0,
        "edit: manifest edited, kubelet replaced the pod ({} -> {}); the old one's scope, namespace and lease ({}) are gone",
        &old.metadata.uid[..8],
        &new.metadata.uid[..8],
        old_sb.ips.join(",")
    );
}

/// The removed manifest: kubelet stopped the pod.
async fn check_gone_stopped(k: &Kubelet, m: &Client, sb: &SandboxStatus, t0: Instant) {
    k.wait_pod("gone", Duration::from_secs(60), "forgotten", |p| {
        p.is_none()
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match m.status(&sb.id).await {
            Ok(st) if st.state == State::Ready => {
                assert!(Instant::now() < deadline, "gone: its sandbox still ready");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ => break,
        }
    }
    assert_ne!(systemctl_show(&sb.unit, "ActiveState"), "active");
    ok!(t0, "gone: manifest removed, kubelet stopped the pod");
}

/// A container that exits non-zero: restarted with back-off; restart
/// count and last exit code in the pod status.
/// The image volume: the image's /etc (its sub path) at /vol, read-only
/// and noexec, an overlay of the image's layers on the node, gone with the
/// container.
async fn check_image_volume(k: &Kubelet, m: &Client, t0: Instant) {
    let p = k
        .wait_pod("imgvol", Duration::from_secs(90), "running", |p| {
            p.is_some_and(|p| p.running())
        })
        .await
        .0
        .unwrap();
    let id = p.container("main").unwrap().id().unwrap().to_owned();
    let (rc, out) = exec(&id, "head -n1 /vol/passwd");
    assert!(rc == 0 && out.starts_with("root:"), "{rc} {out}");
    let (rc, out) = exec(&id, "touch /vol/x");
    assert!(
        rc != 0 && out.contains("Read-only file system"),
        "{rc} {out}"
    );
    let (rc, out) = exec(&id, "grep \" /vol \" /proc/mounts");
    assert!(
        rc == 0 && out.contains("noexec") && out.contains("ro,"),
        "{rc} {out}"
    );
    let status = m.container_status(&id).await.unwrap();
    let mount = status
        .mounts
        .iter()
        .find(|mt| mt.container_path == "/vol")
        .unwrap_or_else(|| panic!("no /vol in {:#?}", status.mounts));
    assert!(
        !mount.image.is_empty() && mount.host_path.is_empty() && mount.image_sub_path == "etc",
        "{mount:#?}"
    );
    let on_node = sh(&format!(
        "findmnt -n -o FSTYPE,OPTIONS /var/lib/podscope/containers/{id}/volumes/0"
    ));
    assert!(
        on_node.starts_with("overlay") && on_node.contains("ro,"),
        "{on_node}"
    );
    ok!(
        t0,
        "imgvol: an image volume (sub path etc) read-only and noexec at /vol, a read-only overlay of the image on the node"
    );
}

async fn check_crash(k: &Kubelet, t0: Instant) {
    let p = k
        .wait_pod(
            "crash",
            Duration::from_secs(120),
            "restarted twice, in back-off",
            |p| {
                p.and_then(|p| p.container("fail")).is_some_and(|c| {
                    c.restart_count >= 2
                        && c.state
                            .waiting
                            .as_ref()
                            .is_some_and(|w| w.reason == "CrashLoopBackOff")
                        && c.last_state.terminated.is_some()
                })
            },
        )
        .await
        .0
        .unwrap();
    let c = p.container("fail").unwrap();
    let last = c.last_state.terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 3, "{c:#?}");
    assert_eq!(last.reason, "Error", "{c:#?}");
    assert_eq!(last.message.trim(), "crashed-on-purpose", "{c:#?}");
    ok!(
        t0,
        "crash: restarted {} times with back-off (CrashLoopBackOff), last exit 3 (Error) with its termination message",
        c.restart_count
    );
}

/// A container over its memory limit: OOMKilled, restarted.
async fn check_oom(k: &Kubelet, t0: Instant) {
    let p = k
        .wait_pod(
            "oom",
            Duration::from_secs(120),
            "OOM-killed and restarted",
            |p| {
                p.and_then(|p| p.container("hog")).is_some_and(|c| {
                    c.restart_count >= 1
                        && c.last_state
                            .terminated
                            .as_ref()
                            .is_some_and(|t| t.reason == "OOMKilled")
                })
            },
        )
        .await
        .0
        .unwrap();
    let c = p.container("hog").unwrap();
    let last = c.last_state.terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 137, "{c:#?}");
    ok!(
        t0,
        "oom: OOMKilled (exit 137) and restarted {} times",
        c.restart_count
    );
}

/// CRI log lines of one file: (stream, text), checking the format.
fn cri_lines(path: &Path, text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let mut f = l.splitn(4, ' ');
            let (ts, stream, tag, msg) = (
                f.next().unwrap_or(""),
                f.next().unwrap_or(""),
                f.next().unwrap_or(""),
                f.next().unwrap_or(""),
            );
            assert!(
                ts.len() >= 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
                "{}: not a CRI line: {l:?}",
                path.display()
            );
            assert!(
                stream == "stdout" || stream == "stderr",
                "{}: {l:?}",
                path.display()
            );
            assert_eq!(tag, "F", "{}: a partial line: {l:?}", path.display());
            (stream.to_owned(), msg.to_owned())
        })
        .collect()
}

/// kubelet's log files for one container: rotated by kubelet
/// (ReopenContainerLog), and every line there, once, in order.
async fn check_logs(k: &Kubelet, t0: Instant) {
    let p = k.pod("logger").await.unwrap();
    let dir = PathBuf::from(format!(
        "/var/log/pods/{NS}_{}_{}/count",
        p.metadata.name, p.metadata.uid
    ));
    let current = dir.join("0.log");
    podscope_test_support::harness::wait_until(Duration::from_secs(120), || {
        std::fs::read_to_string(&current).is_ok_and(|s| s.lines().any(|l| l.ends_with(" done")))
    });
    // Rotated files: 0.log.<time>[.gz]; their names sort by time.
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("0.log.")
        })
        .collect();
    rotated.sort();
    assert!(
        rotated.len() >= 2,
        "kubelet rotated {} times: {rotated:?}",
        rotated.len()
    );
    assert!(
        rotated
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "gz")),
        "kubelet compressed no rotated file: {rotated:?}"
    );
    let mut lines = Vec::new();
    for f in rotated.iter().chain(std::iter::once(&current)) {
        let raw = std::fs::read(f).unwrap();
        let text = if f.extension().is_some_and(|e| e == "gz") {
            let mut s = String::new();
            flate2::read::GzDecoder::new(&raw[..])
                .read_to_string(&mut s)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            s
        } else {
            String::from_utf8(raw).unwrap()
        };
        lines.extend(cri_lines(f, &text));
    }
    // Each stream in order (stdout and stderr are two pipes: across them
    // the order in the file is the readers', as with any runtime), and
    // every line once.
    let mut next = [2u32, 1u32]; // stdout has the even lines, stderr the odd
    let mut done = false;
    for (stream, msg) in &lines {
        if msg == "done" {
            done = true;
            continue;
        }
        let s = usize::from(stream == "stderr");
        assert_eq!(
            msg,
            &format!("line {}", next[s]),
            "{stream}: line {} is missing or out of order",
            next[s]
        );
        next[s] += 2;
    }
    assert!(done, "no \"done\" line");
    assert_eq!(
        (next[0] - 2) / 2 + (next[1] - 1) / 2,
        LOG_LINES,
        "lines in kubelet's files"
    );
    ok!(
        t0,
        "logger: {LOG_LINES} lines in {} files (rotated {} times by kubelet, through both restarts), none lost, none twice, streams kept",
        rotated.len() + 1,
        rotated.len()
    );
}

/// kubelet's garbage collection removed the old sandboxes: their records,
/// scopes and container units, and the removed pods' slices.
async fn check_garbage_collected(m: &Client, pods: &[&Replaced], t0: Instant) {
    // kubelet collects every minute (and once when it starts).
    let deadline = Instant::now() + Duration::from_secs(150);
    for p in pods {
        let sb = &p.sandbox;
        while m.status(&sb.id).await.is_ok() {
            assert!(
                Instant::now() < deadline,
                "{}: sandbox {} not removed by kubelet's garbage collection",
                p.pod.metadata.name,
                sb.id
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(!unit_loaded(&sb.unit), "{} still loaded", sb.unit);
        for id in &p.containers {
            let unit = container_unit(id);
            assert!(
                !unit_loaded(&unit),
                "{unit} still loaded after the garbage collection"
            );
        }
        // A slice's name always loads (systemd makes it on demand), so
        // gone is inactive and without a cgroup in any hierarchy: kubelet
        // removes its directories, which it cannot while podscope left
        // one of its own inside.
        let slice = pod_slice(&p.pod);
        let t = Instant::now();
        loop {
            let dirs = sh(&format!("find /sys/fs/cgroup -name {slice}"));
            if systemctl_show(&slice, "ActiveState") != "active" && dirs.trim().is_empty() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{slice} not removed: {}; its cgroups: {dirs}",
                systemctl_show(&slice, "ActiveState"),
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let left = crictl_pods_all();
    for p in pods {
        assert!(
            !left.contains(&p.sandbox.id),
            "crictl pods still lists {}: {left}",
            p.sandbox.id
        );
    }
    ok!(t0, "garbage collection: the edited and the removed pod's sandboxes, scopes, container units and slices are gone");
}
