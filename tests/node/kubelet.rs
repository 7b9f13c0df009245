//! kubelet on the node: standalone (static pods), `--cgroup-driver=systemd`
//! as every systemd node runs it, started by `tests/e2e/kubelet.sh` (the
//! harness's script, here on a booted systemd), both generations: 1.26
//! and 1.36 (which starts on cgroup v2 without `failCgroupV1`). Read
//! through kubelet's own endpoints (`/pods`, `/stats/summary`), and the
//! pod's slice through systemd and its cgroup files.

use crate::{ensure, sh, Outcome};
use podscope_test_support::kubelet_client::{Kubelet, Pod, PodStats};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const NS: &str = "node";
const IMAGE: &str = crate::cri::IMAGE;
const CRI: &str = crate::cri::ENDPOINT;

/// An HTTP server whose readiness is an HTTP probe kubelet sends to the
/// pod's IP and whose liveness is an exec probe (ExecSync), beside a
/// container that spends CPU; Burstable.
fn web() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web", "namespace": NS },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "server", "image": IMAGE,
                    "command": ["sh", "-c", "mkdir -p /www && echo ok > /www/ready && exec httpd -f -p 8080 -h /www"],
                    "readinessProbe": {
                        "httpGet": { "path": "/ready", "port": 8080 },
                        "periodSeconds": 2, "failureThreshold": 1, "timeoutSeconds": 10
                    },
                    "livenessProbe": {
                        "exec": { "command": ["sh", "-c", "test -e /www/ready"] },
                        "periodSeconds": 3, "failureThreshold": 1, "timeoutSeconds": 20
                    },
                    "resources": {
                        "requests": { "cpu": "50m", "memory": "16Mi" },
                        "limits": { "cpu": "500m", "memory": "64Mi" }
                    }
                },
                {
                    "name": "spin", "image": IMAGE,
                    "command": ["sh", "-c", "while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done"]
                }
            ]
        }
    })
}

/// A container over its memory limit: OOM-killed (the whole cgroup, as
/// kubelet on v2 asks with memory.oom.group), restarted.
fn hog() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "hog", "namespace": NS },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "hog", "image": IMAGE,
                "command": ["sh", "-c", "sleep 1; tail /dev/zero"],
                "resources": { "limits": { "cpu": "200m", "memory": "32Mi" } }
            }]
        }
    })
}

/// kubelet `version` ("1.26" or "1.36") with its static pods: running,
/// probed, OOM-restarted (1.36), its stats, the pod's slice; stopped after
/// it whatever was found, every pod it left removed.
pub fn static_pods(version: &str) -> Outcome {
    let bin = std::env::var(format!("KUBELET_{}", version.replace('.', "_")))
        .map_err(|_| format!("KUBELET_{version} is not set"))?;
    // kubelet.sh reads KUBELET; the suite is one thread here.
    std::env::set_var("KUBELET", &bin);
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let k = match std::panic::catch_unwind(|| Kubelet::start(CRI, "")) {
        Ok(k) => k,
        Err(p) => {
            // What it may have left running, for the next case.
            let _ = sh("tests/e2e/kubelet.sh stop");
            return Err(crate::panic_message(p));
        }
    };
    let t0 = Instant::now();
    k.write_manifest("web", &web());
    // The OOM restart once, with the kubelet of today: each kubelet waits
    // for its pods in the VM's time.
    let oom = version != "1.26";
    if oom {
        k.write_manifest("hog", &hog());
    }
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(checks(&k, version, oom, t0))
    }))
    .unwrap_or_else(|p| Err(crate::panic_message(p)));
    k.stop();
    found
}

async fn checks(k: &Kubelet, version: &str, oom: bool, t0: Instant) -> Outcome {
    let within = Duration::from_secs(150);
    let web = wait(k, "web", within, "running and ready", |p| {
        p.running() && p.ready()
    })
    .await?;
    let restarts = sh("systemctl show -P NRestarts kubelet")?;
    println!(
        "node-suite:   kubelet {version}: web running and ready at {:.1} s (kubelet restarted {} times by its unit)",
        t0.elapsed().as_secs_f64(),
        restarts.trim()
    );
    let ids = |p: &Pod| -> Result<String, String> {
        p.container("server")
            .and_then(|c| c.id())
            .map(str::to_owned)
            .ok_or_else(|| format!("web's server has no container id: {p:#?}"))
    };
    let server = ids(&web)?;
    if oom {
        let hog = wait(k, "hog", within, "OOM-killed and restarted", |p| {
            p.container("hog").is_some_and(|c| {
                c.restart_count >= 1
                    && c.last_state
                        .terminated
                        .as_ref()
                        .is_some_and(|t| t.reason == "OOMKilled" && t.exit_code == 137)
            })
        })
        .await?;
        println!(
            "node-suite:   kubelet {version}: hog OOMKilled (137), restarted {} times, at {:.1} s",
            hog.container("hog").unwrap().restart_count,
            t0.elapsed().as_secs_f64()
        );
    }

    // Probes went on passing: the liveness probe (an exec every 3 s)
    // never restarted the server.
    let web = k.try_pod("web").await?.ok_or("web is gone")?;
    let s = web.container("server").ok_or("no server")?;
    ensure!(
        s.restart_count == 0 && s.ready && ids(&web)? == server,
        "the server was restarted or is not ready: {s:#?}"
    );

    // The pod's slice as systemd and the cgroup files show it: kubelet's
    // name for it (the systemd driver), the server's unit in it, with the
    // limits kubelet asked for.
    let slice = format!(
        "kubepods-burstable-pod{}.slice",
        web.metadata.uid.replace('-', "_")
    );
    let unit = format!("podscope-ctr-{server}.service");
    let cgroup = sh(&format!("systemctl show -P ControlGroup {unit}"))?;
    ensure!(
        cgroup.trim().starts_with(&format!(
            "/kubepods.slice/kubepods-burstable.slice/{slice}/"
        )),
        "the server's unit {unit} is in {cgroup}, not under kubelet's {slice}"
    );
    let dir = format!("/sys/fs/cgroup{}", cgroup.trim());
    let max = sh(&format!("cat {dir}/memory.max {dir}/cpu.max"))?;
    ensure!(
        max.split_whitespace().collect::<Vec<_>>() == ["67108864", "50000", "100000"],
        "the server's memory.max and cpu.max: {max}"
    );

    // /stats/summary: the pod's own CPU and memory (read by kubelet from
    // its slice), each container's; PSI where kubelet reports it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let summary = k.try_summary().await?;
        let stats = summary
            .pods
            .iter()
            .find(|p| p.pod_ref.name == web.metadata.name && p.pod_ref.namespace == NS);
        let verdict = match stats {
            Some(p) => stats_complete(p, version),
            None => Err("web is not in /stats/summary".into()),
        };
        match verdict {
            Ok(line) => {
                println!("node-suite:   kubelet {version}: /stats/summary: {line}");
                break;
            }
            Err(why) if Instant::now() > deadline => {
                return Err(format!("{why}; kubelet's summary of web: {stats:#?}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(2)).await,
        }
    }
    Ok(())
}

/// The pod's and its containers' CPU and memory above zero, and on 1.36
/// their CPU and memory pressure: a line saying so, or what is missing.
fn stats_complete(p: &PodStats, version: &str) -> Result<String, String> {
    let cpu = p
        .cpu
        .as_ref()
        .and_then(|c| c.usage_core_nano_seconds)
        .unwrap_or(0);
    let mem = p
        .memory
        .as_ref()
        .and_then(|m| m.working_set_bytes)
        .unwrap_or(0);
    if cpu == 0 || mem == 0 {
        return Err(format!("the pod's CPU {cpu} ns, working set {mem} bytes"));
    }
    for c in &p.containers {
        let ccpu = c
            .cpu
            .as_ref()
            .and_then(|c| c.usage_core_nano_seconds)
            .unwrap_or(0);
        let cmem = c
            .memory
            .as_ref()
            .and_then(|m| m.working_set_bytes)
            .unwrap_or(0);
        if ccpu == 0 || cmem == 0 {
            return Err(format!(
                "{}: CPU {ccpu} ns, working set {cmem} bytes",
                c.name
            ));
        }
    }
    if p.containers.len() != 2 {
        return Err(format!(
            "{} containers in the pod's stats",
            p.containers.len()
        ));
    }
    let mut line = format!(
        "pod CPU {} ms, working set {} KiB",
        cpu / 1_000_000,
        mem >> 10
    );
    if version != "1.26" {
        let psi = |what: &str, psi: Option<&podscope_test_support::kubelet_client::Psi>| {
            psi.and_then(|p| p.some.as_ref())
                .and_then(|s| s.total)
                .ok_or_else(|| format!("no {what} PSI"))
        };
        let cpu_psi = psi("pod CPU", p.cpu.as_ref().and_then(|c| c.psi.as_ref()))?;
        psi("pod memory", p.memory.as_ref().and_then(|c| c.psi.as_ref()))?;
        for c in &p.containers {
            psi(&c.name, c.cpu.as_ref().and_then(|c| c.psi.as_ref()))?;
        }
        line += &format!("; PSI for the pod and its containers (pod CPU some {cpu_psi} us)");
    }
    Ok(line)
}

/// Poll `/pods` until `done` holds for the static pod `name`.
async fn wait(
    k: &Kubelet,
    name: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&Pod) -> bool,
) -> Result<Pod, String> {
    let end = Instant::now() + within;
    loop {
        // kubelet 1.26 exits once at its first start on a fresh v2 node
        // ("root container [kubepods] doesn't exist", kubernetes#122955)
        // and its unit restarts it, as kubeadm's does: an answer missed
        // meanwhile is asked again.
        let pod = k.try_pod(name).await;
        if let Ok(Some(p)) = pod.as_ref() {
            if done(p) {
                return Ok(p.clone());
            }
        }
        if Instant::now() > end {
            return Err(format!(
                "{name} not {what} within {within:?}; kubelet says: {pod:#?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
