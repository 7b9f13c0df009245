//! Workloads as the controllers run them, and pods' ends as kubelet reports
//! them: a Job, a DaemonSet, a crash loop, an OOM kill, a delete's grace
//! period and a preStop hook. The objects are made at once; each is then
//! checked from kubectl and on its node.

use super::{container, pod, IDLE, IMAGE};
use podscope_test_support::cluster::kubectl::{self, NS};
use podscope_test_support::cluster::node::Node;
use podscope_test_support::cluster::Cluster;
use podscope_test_support::ok;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Where the preStop pod's hook and container write, on its node.
const PRESTOP_DIR: &str = "/var/lib/cluster-checks/prestop";
/// The grace period `kubectl delete --grace-period` gives the stubborn pod.
const GRACE: u64 = 4;

pub fn workloads(c: &Cluster) {
    kubectl::apply(&json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": { "name": "once", "namespace": NS },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": { "labels": { "app": "once" } },
                "spec": { "restartPolicy": "Never", "containers": [container("main", "echo job-done")] },
            },
        },
    }));
    kubectl::apply(&super::daemonset(
        "everywhere",
        json!({ "terminationGracePeriodSeconds": 5, "containers": [container("main", IDLE)] }),
    ));
    kubectl::apply(&pod(
        "crash",
        json!({
            "restartPolicy": "Always",
            "containers": [container("main", "echo crash-run; sleep 4; exit 3")],
        }),
    ));
    kubectl::apply(&pod(
        "oom",
        json!({
            "restartPolicy": "Never",
            "containers": [{
                "name": "hog", "image": IMAGE, "command": ["tail", "/dev/zero"],
                "resources": { "limits": { "memory": "32Mi", "cpu": "200m" } },
            }],
        }),
    ));
    kubectl::apply(&pod(
        "stubborn",
        json!({
            "terminationGracePeriodSeconds": 60,
            "containers": [container("main",
                "trap 'echo ignored-term' TERM; while true; do sleep 1 & wait $!; done")],
        }),
    ));
    kubectl::apply(&pod(
        "prestop",
        json!({
            "terminationGracePeriodSeconds": 20,
            "volumes": [{ "name": "out", "hostPath": { "path": PRESTOP_DIR, "type": "DirectoryOrCreate" } }],
            "containers": [{
                "name": "main", "image": IMAGE,
                "command": ["sh", "-c", "trap 'echo term >> /out/events; exit 0' TERM; \
                    while true; do sleep 1 & wait $!; done"],
                "volumeMounts": [{ "name": "out", "mountPath": "/out" }],
                "lifecycle": { "preStop": { "exec": { "command": ["sh", "-c",
                    "echo prestop >> /out/events; sleep 2"] } } },
            }],
        }),
    ));

    job(c);
    daemonset(c);
    crash_loop(c);
    oom_killed(c);
    delete_with_grace_period(c);
    prestop_hook(c);
    // The DaemonSet stays (the drain leaves its pods); the rest go.
    kubectl::run(&[
        "delete",
        "-n",
        NS,
        "job/once",
        "pod/crash",
        "pod/oom",
        "--wait=false",
    ]);
}

fn node_of<'a>(c: &'a Cluster, p: &Value) -> &'a Node {
    c.node(p["spec"]["nodeName"].as_str().expect("a scheduled pod"))
}

/// The containers crictl lists for a pod on its node, as JSON.
fn containers_on_node(n: &Node, p: &Value) -> Vec<Value> {
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let v: Value = serde_json::from_str(&n.crictl(&format!(
        "ps -a -o json --label io.kubernetes.pod.uid={uid}"
    )))
    .unwrap();
    v["containers"].as_array().cloned().unwrap_or_default()
}

/// The container as crictl inspects it, None once kubelet has removed it
/// (its garbage collection of dead containers runs when it will).
fn try_inspect(n: &Node, container: &Value) -> Option<Value> {
    let (ok, out, _) = n.sh_status(&format!(
        "{} inspect {}",
        podscope_test_support::cluster::node::CRICTL,
        container["id"].as_str().unwrap()
    ));
    ok.then(|| serde_json::from_str(&out).unwrap())
}

fn inspect(n: &Node, container: &Value) -> Value {
    serde_json::from_str(&n.crictl(&format!("inspect {}", container["id"].as_str().unwrap())))
        .unwrap()
}

fn job(c: &Cluster) {
    kubectl::run(&[
        "wait",
        "-n",
        NS,
        "--for=condition=Complete",
        "job/once",
        "--timeout=90s",
    ]);
    let p = kubectl::pods("once").remove(0);
    assert_eq!(p["status"]["phase"], "Succeeded", "the job's pod");
    assert_eq!(
        kubectl::run(&["logs", "-n", NS, "job/once"]).trim(),
        "job-done"
    );
    let n = node_of(c, &p);
    let cs = containers_on_node(n, &p);
    assert_eq!(cs.len(), 1, "the job's containers on {}: {cs:?}", n.name);
    let i = inspect(n, &cs[0]);
    assert_eq!(i["status"]["state"], "CONTAINER_EXITED");
    assert_eq!(i["status"]["exitCode"], 0);
    ok!(
        c.t0,
        "job once Complete; its container exited 0 on {}",
        n.name
    );
}

fn daemonset(c: &Cluster) {
    let ps = kubectl::wait_ready("everywhere", c.nodes.len(), Duration::from_secs(90));
    for n in &c.nodes {
        let p = ps
            .iter()
            .find(|p| p["spec"]["nodeName"] == n.name.as_str())
            .unwrap_or_else(|| {
                panic!("no everywhere pod on {}: {}", n.name, kubectl::summary(&ps))
            });
        let sandboxes = n.sandboxes_of(p["metadata"]["uid"].as_str().unwrap());
        assert_eq!(sandboxes.len(), 1);
        let scope = format!("podscope-{}.scope", sandboxes[0]);
        assert_eq!(
            n.unit_property(&scope, "ActiveState"),
            "active",
            "{scope} on {}",
            n.name
        );
    }
    ok!(
        c.t0,
        "daemonset everywhere: a pod on each node, its scope active there"
    );
}

fn crash_loop(c: &Cluster) {
    // kubelet keeps one dead container per name: as soon as a container
    // has died, it removes the one before. The status names that removed
    // one as the last state for as long as it shows the dead container as
    // the current state (terminated, not yet waiting: kubelet 1.36 shows
    // the back-off as the waiting reason only when a sync of the pod falls
    // within it, 10 to 15 s after the error), and `--previous` then has
    // nothing to read, whatever the runtime. The container lives 4 s, so
    // each restart gives a window where the last state is the container
    // kept (while its successor runs, or while the status says waiting);
    // the status and the logs are taken again until they agree. The
    // back-off is kubelet's BackOff event or the waiting reason.
    let (p, previous) = kubectl::wait("crash in CrashLoopBackOff", Duration::from_secs(90), || {
        let p = kubectl::get("pod", "crash").ok_or_else(|| "no pod".to_string())?;
        let s = &p["status"]["containerStatuses"][0];
        let backoff = s["state"]["waiting"]["reason"] == "CrashLoopBackOff"
            || kubectl::events_of("crash")
                .iter()
                .any(|e| e.starts_with("BackOff: Back-off restarting failed container main"));
        if !(s["restartCount"].as_u64().unwrap_or(0) >= 1
            && backoff
            && s["lastState"]["terminated"]["exitCode"] == 3)
        {
            return Err(s.to_string());
        }
        let o = kubectl::output(&["logs", "--previous", "-n", NS, "crash"]);
        let previous = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if o.status.success() && previous == "crash-run" {
            Ok((p, previous))
        } else {
            Err(format!(
                "logs --previous: {previous} {}",
                String::from_utf8_lossy(&o.stderr)
            ))
        }
    });
    let s = &p["status"]["containerStatuses"][0];
    let n = node_of(c, &p);
    let exited: Vec<Value> = containers_on_node(n, &p)
        .iter()
        .filter_map(|ct| try_inspect(n, ct))
        .filter(|i| i["status"]["state"] == "CONTAINER_EXITED")
        .collect();
    assert!(
        !exited.is_empty() && exited.iter().all(|i| i["status"]["exitCode"] == 3),
        "crash's containers on {}: {exited:?}",
        n.name
    );
    ok!(c.t0, "crash: CrashLoopBackOff, {} restarts, last exit code 3, logs --previous '{previous}'; {} exited container(s) with 3 on {}",
        s["restartCount"], exited.len(), n.name);
}

fn oom_killed(c: &Cluster) {
    let p = kubectl::wait("oom Failed", Duration::from_secs(90), || {
        let p = kubectl::get("pod", "oom").ok_or_else(|| "no pod".to_string())?;
        if p["status"]["phase"] == "Failed" {
            Ok(p)
        } else {
            Err(p["status"].to_string())
        }
    });
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(t["reason"], "OOMKilled", "oom's status: {t}");
    assert_eq!(t["exitCode"], 137);
    let n = node_of(c, &p);
    let i = inspect(n, &containers_on_node(n, &p)[0]);
    assert_eq!(
        i["status"]["reason"], "OOMKilled",
        "on {}: {}",
        n.name, i["status"]
    );
    ok!(
        c.t0,
        "oom: OOMKilled, exit code 137, pod Failed; crictl on {} says OOMKilled",
        n.name
    );
}

/// `kubectl delete --grace-period=4` of a pod that ignores TERM: it is
/// killed once the 4 s are over (not at once, and not after its spec's 60).
fn delete_with_grace_period(c: &Cluster) {
    let p = kubectl::wait_ready("stubborn", 1, Duration::from_secs(60)).remove(0);
    let n = node_of(c, &p);
    let id = containers_on_node(n, &p)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let t = Instant::now();
    kubectl::run(&[
        "delete",
        "pod",
        "-n",
        NS,
        "stubborn",
        &format!("--grace-period={GRACE}"),
    ]);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(GRACE) && took < Duration::from_secs(GRACE + 15),
        "delete --grace-period={GRACE} took {took:?}"
    );
    let journal = n.sh(&format!(
        "journalctl -u podscoped --no-pager -o cat | grep '{id}'"
    ));
    assert!(
        journal.contains("exited: code 137"),
        "stubborn's container on {}: {journal}",
        n.name
    );
    ok!(
        c.t0,
        "delete --grace-period={GRACE}: TERM ignored, killed (137) on {} after {:.1} s",
        n.name,
        took.as_secs_f64()
    );
}

/// A preStop hook runs before TERM, both within the grace period.
fn prestop_hook(c: &Cluster) {
    let p = kubectl::wait_ready("prestop", 1, Duration::from_secs(60)).remove(0);
    let n = node_of(c, &p);
    kubectl::run(&["delete", "pod", "-n", NS, "prestop"]);
    let events = n.sh(&format!("cat {PRESTOP_DIR}/events"));
    assert_eq!(
        events.lines().collect::<Vec<_>>(),
        ["prestop", "term"],
        "on {}",
        n.name
    );
    ok!(c.t0, "preStop hook ran, then TERM, on {}", n.name);
}
