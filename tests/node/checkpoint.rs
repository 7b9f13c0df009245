//! Checkpoint and restore where CRIU works (Debian 12's criu 3.17 on the
//! node's kernel 6.1): crictl 1.36's `checkpoint --export` of a counting
//! container on runc, the archive's files as checkpointctl reads them, the
//! restore into another pod (crictl create with the archive as the image)
//! counting on from where it was into its own new log; a container in its
//! pod's PID namespace refused by name; `podscopectl container checkpoint
//! --stop` leaving the stopped container's unit and journal to inspect; and
//! kubelet 1.36's checkpoint API leaving its archive under
//! /var/lib/kubelet/checkpoints.

use crate::cri::{container_config, pod_config, Crictl};
use crate::{ensure, sh, wait_for, Outcome};
use serde_json::json;
use std::time::Duration;

const COUNTER: &str = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.2; done";
const DIR: &str = "/var/lib/podscope-node-checkpoints";
const CONFIG: &str = "/etc/podscope/podscope.toml";
/// Where the kubelet case leaves a copy of its archive: in-vm.sh's
/// directory, which run-node.sh reads off the disk.
const KEPT: &str = "/var/lib/podscope-node/kubelet-checkpoint.tar";

/// The numbers a counter wrote to its CRI log (`<time> stdout F <n>`).
fn counted(log: &str) -> Vec<u64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

fn wait_counted(log: &str, n: usize) -> Result<Vec<u64>, String> {
    wait_for(Duration::from_secs(60), || {
        let v = counted(log);
        (v.len() >= n).then_some(v)
    })
    .ok_or_else(|| format!("{log} has fewer than {n} numbers: {:?}", counted(log)))
}

/// A counter with a PID namespace of its own (CRI's CONTAINER mode).
fn counter(name: &str) -> serde_json::Value {
    let mut c = container_config(name, COUNTER);
    c["linux"]["security_context"] = json!({ "namespace_options": { "pid": 1 } });
    c
}

fn log_of(pod: &serde_json::Value, name: &str) -> String {
    format!("{}/{name}.log", pod["log_directory"].as_str().unwrap_or(""))
}

pub fn crictl_checkpoint_and_restore() -> Outcome {
    sh(&format!("rm -rf {DIR} && mkdir -p {DIR}"))?;
    let c = Crictl::v1_36();
    let pod_a = pod_config("ckpt-a");
    let a = c.runp(&pod_a, "runc")?;
    let r = (|| {
        let id = c.run_container(&a, &counter("counter"), &pod_a)?;
        let before = wait_counted(&log_of(&pod_a, "counter"), 5)?;
        let archive = format!("{DIR}/counter.tar");
        c.run(&["checkpoint", &format!("--export={archive}"), &id])?;
        // Left running, as CRI's checkpoint leaves it, and thawed: it
        // goes on counting (it was paused for the dump and the archive).
        let (state, _) = c.state(&id)?;
        ensure!(
            state == "CONTAINER_RUNNING",
            "after the checkpoint it is {state}"
        );
        let n = counted(&log_of(&pod_a, "counter")).len();
        wait_counted(&log_of(&pod_a, "counter"), n + 2)
            .map_err(|e| format!("after the checkpoint it does not count on: {e}"))?;
        // What checkpointctl reads: the images, config.dump, spec.dump (the
        // engine's annotations), the root's diff and its deletions.
        let list = sh(&format!("tar -tf {archive}"))?;
        for want in [
            "checkpoint/",
            "checkpoint/pages-1.img",
            "checkpoint/descriptors.json",
            "config.dump",
            "spec.dump",
            "rootfs-diff.tar",
            "deleted.files",
            "dump.log",
            "stats-dump",
        ] {
            ensure!(
                list.lines().any(|l| l == want),
                "the archive has no {want}:\n{list}"
            );
        }
        let config: serde_json::Value =
            serde_json::from_str(&sh(&format!("tar -xOf {archive} config.dump"))?)
                .map_err(|e| e.to_string())?;
        ensure!(
            config["rootfsImageName"] == crate::cri::IMAGE && config["name"] == "counter",
            "config.dump: {config}"
        );
        let spec: serde_json::Value =
            serde_json::from_str(&sh(&format!("tar -xOf {archive} spec.dump"))?)
                .map_err(|e| e.to_string())?;
        ensure!(
            spec["annotations"]["io.container.manager"] == "cri-o"
                && spec["annotations"]["io.kubernetes.pod.name"] == "ckpt-a",
            "spec.dump's annotations: {}",
            spec["annotations"]
        );
        // The journal says what was done, with its figures.
        let j = sh(&format!(
            "journalctl -u podscoped --no-pager -o cat EVENT=container-checkpointed CONTAINER_ID={id}"
        ))?;
        ensure!(j.contains(&archive), "no container-checkpointed entry: {j}");
        let last_before = *before.last().unwrap_or(&0);
        // Restored in another pod, from the archive as its image.
        let pod_b = pod_config("ckpt-b");
        let b = c.runp(&pod_b, "runc")?;
        let r = (|| {
            let mut restored = counter("restored");
            restored["image"]["image"] = json!(archive);
            let rid = c.run_container(&b, &restored, &pod_b)?;
            let after = wait_counted(&log_of(&pod_b, "restored"), 3)?;
            ensure!(
                after[0] > last_before && after.windows(2).all(|w| w[1] == w[0] + 1),
                "the restored counter does not go on from {last_before}: {after:?}"
            );
            // Its unit's main process is the restored one, in the unit's
            // own cgroup (not the dumped container's).
            let unit = format!("podscope-ctr-{rid}.service");
            let main = sh(&format!("systemctl show -P MainPID {unit}"))?;
            let comm = sh(&format!("cat /proc/{}/comm", main.trim()))?;
            ensure!(comm.trim() == "sh", "the unit's main process is {comm}");
            let cgroup = sh(&format!("systemctl show -P ControlGroup {unit}"))?;
            let procs = sh(&format!("cat /sys/fs/cgroup{}/cgroup.procs", cgroup.trim()))?;
            ensure!(
                procs.lines().any(|p| p == main.trim()),
                "the restored process {} is not in {unit}'s cgroup {} ({procs:?}); it is in {:?}",
                main.trim(),
                cgroup.trim(),
                sh(&format!("cat /proc/{}/cgroup", main.trim()))
            );
            println!(
                "node-suite:   restored counter went on at {} (last logged before the dump {last_before})",
                after[0]
            );
            Ok(())
        })();
        r.and(c.remove_pod(&b))?;

        // The pod's own PID namespace (CRI's default POD mode): refused.
        let shared = c.run_container(&a, &container_config("shared", "sleep 600"), &pod_a)?;
        match c.run(&["checkpoint", &format!("--export={DIR}/shared.tar"), &shared]) {
            Ok(o) => {
                return Err(format!(
                    "a container in its pod's PID namespace was checkpointed: {o}"
                ))
            }
            Err(e) => ensure!(e.contains("PID namespace"), "{e}"),
        }
        ensure!(
            !std::path::Path::new(&format!("{DIR}/shared.tar")).exists(),
            "the refused checkpoint left a file"
        );

        // podscopectl's --stop: the container stopped once dumped, its unit
        // and its journal there to inspect until it is removed.
        let stopped = c.run_container(&a, &counter("stopped"), &pod_a)?;
        wait_counted(&log_of(&pod_a, "stopped"), 2)?;
        sh(&format!(
            "podscopectl container checkpoint --stop {stopped} {DIR}/stopped.tar"
        ))?;
        let exited = wait_for(Duration::from_secs(30), || {
            c.state(&stopped)
                .ok()
                .filter(|(s, _)| s == "CONTAINER_EXITED")
        });
        ensure!(exited.is_some(), "--stop left it {:?}", c.state(&stopped));
        let unit = format!("podscope-ctr-{stopped}.service");
        let load = sh(&format!("systemctl show -P LoadState {unit}"))?;
        ensure!(load.trim() == "loaded", "{unit} is {load} after the dump");
        let journal = sh(&format!("journalctl -u {unit} --no-pager -o cat | wc -l"))?;
        ensure!(journal.trim() != "0", "{unit} has no journal");
        Ok(())
    })();
    let removed = c.remove_pod(&a);
    let _ = sh(&format!("rm -rf {DIR}"));
    r.and(removed)
}

/// kubelet 1.36's checkpoint API (KEP-2008, on since 1.30): POST
/// /checkpoint/{namespace}/{pod}/{container} on its port, anonymous here
/// (a standalone kubelet on loopback), answers with the archive it asked
/// the runtime for under /var/lib/kubelet/checkpoints.
pub fn kubelet_checkpoint() -> Outcome {
    let bin = std::env::var("KUBELET_1_36").map_err(|_| "KUBELET_1_36 is not set".to_owned())?;
    // A static pod has no runtime class here (no API server to name one):
    // it gets the default handler, crun, which cannot checkpoint. runc is
    // made the default, as an operator of a node that checkpoints does.
    let shipped = std::fs::read_to_string(CONFIG).map_err(|e| format!("{CONFIG}: {e}"))?;
    std::fs::write(CONFIG, format!("{shipped}\ndefault_runtime = \"runc\"\n"))
        .map_err(|e| format!("{CONFIG}: {e}"))?;
    let r = sh("systemctl restart podscoped.service").and_then(|_| kubelet_checkpoint_api(&bin));
    // As shipped again, whatever was found.
    let restored = std::fs::write(CONFIG, shipped)
        .map_err(|e| format!("{CONFIG}: {e}"))
        .and_then(|_| sh("systemctl restart podscoped.service"));
    r.and(restored.map(|_| ()))
}

fn kubelet_checkpoint_api(bin: &str) -> Outcome {
    sh(&format!(
        "KUBELET={bin} KUBELET_ANONYMOUS=true tests/e2e/kubelet.sh start {}",
        crate::cri::ENDPOINT
    ))?;
    let k = podscope_test_support::kubelet_client::Kubelet::attach();
    let r = (|| {
        k.write_manifest(
            "ckpt",
            &json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": "ckpt", "namespace": "node" },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "counter", "image": crate::cri::IMAGE,
                        "command": ["sh", "-c", COUNTER]
                    }]
                }
            }),
        );
        // The static pod's name has the node's (kubelet.sh's
        // --hostname-override) appended.
        let pod = format!("ckpt-{}", podscope_test_support::kubelet_client::NODE);
        let url = format!("https://127.0.0.1:10250/checkpoint/node/{pod}/counter");
        let answer = wait_for(Duration::from_secs(150), || {
            sh(&format!("curl -sk -X POST --max-time 60 {url}"))
                .ok()
                .filter(|a| a.contains("/var/lib/kubelet/checkpoints/"))
        })
        .ok_or_else(|| {
            format!(
                "kubelet's checkpoint API did not answer with an archive: {:?}",
                sh(&format!("curl -sk -X POST --max-time 60 {url}"))
            )
        })?;
        let v: serde_json::Value =
            serde_json::from_str(&answer).map_err(|e| format!("{answer}: {e}"))?;
        let archive = v["items"][0].as_str().unwrap_or("").to_owned();
        ensure!(
            std::path::Path::new(&archive).is_file(),
            "kubelet named {archive}, which is not there"
        );
        let list = sh(&format!("tar -tf {archive}"))?;
        ensure!(
            list.lines().any(|l| l == "config.dump") && list.contains("checkpoint/pages-"),
            "{archive}:\n{list}"
        );
        println!("node-suite:   kubelet 1.36 wrote {archive}");
        // Kept for run-node.sh to bring out (checkpointctl reads it there).
        sh(&format!("cp {archive} {KEPT}"))?;
        Ok(())
    })();
    k.stop();
    let _ = sh("rm -rf /var/lib/kubelet/checkpoints");
    r
}
