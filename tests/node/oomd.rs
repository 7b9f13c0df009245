//! systemd-oomd for the pod slices podscope makes: with
//! `oomd_memory_pressure_limit` set, a pod under memory pressure loses the
//! container that reclaims most, killed by systemd-oomd, and podscope
//! reports that exit as oomd's (reason OomdKilled), not as a bare 137.

use crate::cri::{container_config, pod_config};
use crate::{ensure, sh, wait_for, Crictl, Outcome};
use std::time::Duration;

const CONFIG: &str = "/etc/podscope/podscope.toml";
const OOMD_DROPIN: &str = "/etc/systemd/oomd.conf.d/node-suite.conf";
/// The pod slices' limit: low, so that a throttled container's stall
/// passes it within seconds.
const LIMIT: &str = "10%";

pub fn kills_under_pressure() -> Outcome {
    let shipped = std::fs::read_to_string(CONFIG).map_err(|e| format!("{CONFIG}: {e}"))?;
    // oomd acts after the pressure stayed above the limit this long (30 s
    // by default): 2 s here.
    sh(&format!(
        "mkdir -p /etc/systemd/oomd.conf.d && printf '[OOM]\\nDefaultMemoryPressureDurationSec=2s\\n' > {OOMD_DROPIN} \
         && systemctl restart systemd-oomd.service"
    ))?;
    std::fs::write(
        CONFIG,
        format!("{shipped}\noomd_memory_pressure_limit = \"{LIMIT}\"\n"),
    )
    .map_err(|e| format!("{CONFIG}: {e}"))?;
    let r = sh("systemctl restart podscoped.service").and_then(|_| under_pressure());
    // As shipped again, whatever was found.
    let restored = std::fs::write(CONFIG, shipped)
        .map_err(|e| format!("{CONFIG}: {e}"))
        .and_then(|_| {
            sh(&format!(
                "rm -f {OOMD_DROPIN} && systemctl restart podscoped.service systemd-oomd.service"
            ))
        });
    r.and(restored.map(|_| ()))
}

fn under_pressure() -> Outcome {
    let c = Crictl::new();
    let info = c.run(&["info"])?;
    ensure!(
        info.contains("\"oomd_memory_pressure_limit\": \"10.00%\""),
        "crictl info does not show the limit: {info}"
    );
    // A pod of podscope's own slice: no cgroup parent.
    let mut pod = pod_config("oomd");
    pod["linux"]
        .as_object_mut()
        .unwrap()
        .remove("cgroup_parent");
    let pod_id = c.runp(&pod, "crun")?;
    let r = (|| {
        let slice = format!("podscope-{pod_id}.slice");
        let shown = sh(&format!(
            "systemctl show -P ManagedOOMMemoryPressure {slice}; systemctl show -P ManagedOOMMemoryPressureLimit {slice}"
        ))?;
        // systemctl shows the limit as the bus carries it: 10% of 2^32.
        ensure!(
            shown.split_whitespace().collect::<Vec<_>>() == ["kill", "429496730"],
            "{slice}: ManagedOOMMemoryPressure and its limit are {shown:?}"
        );
        // Throttled at memory.high far below what it takes, far from its
        // memory.max: it stalls (memory pressure), the kernel never kills.
        // A file read over and over beside the growing heap keeps the
        // kernel reclaiming: oomd kills only where reclaim goes on (a
        // heap alone, without swap, soon leaves nothing to scan).
        let mut ctr = container_config(
            "squeezed",
            "dd if=/dev/zero of=/churn bs=1M count=48 2>/dev/null; \
             while true; do cat /churn > /dev/null; done & tail /dev/zero",
        );
        ctr["linux"]["resources"] = serde_json::json!({
            "memory_limit_in_bytes": 536870912,
            "unified": { "memory.high": "16777216" }
        });
        let squeezed = c.run_container(&pod_id, &ctr, &pod)?;
        let calm = c.run_container(&pod_id, &container_config("calm", "sleep 3600"), &pod)?;
        let exited = wait_for(Duration::from_secs(120), || {
            c.inspect(&squeezed)
                .ok()
                .filter(|v| v["status"]["state"] == "CONTAINER_EXITED")
        });
        let Some(v) = exited else {
            let psi = sh(&format!(
                "cat /sys/fs/cgroup/podscope.slice/{slice}/memory.pressure"
            ))
            .unwrap_or_default();
            return Err(format!("the squeezed container was not killed within 120 s (the slice's memory.pressure: {psi})"));
        };
        let st = &v["status"];
        ensure!(
            st["reason"] == "OomdKilled" && st["exitCode"] == 137,
            "the squeezed container ended with {} {}: {}",
            st["exitCode"],
            st["reason"],
            st["message"]
        );
        let message = st["message"].as_str().unwrap_or_default();
        ensure!(
            message.contains("systemd-oomd")
                && message.contains(&slice)
                && message.contains("10.00%"),
            "the message does not say who killed it and why: {message}"
        );
        // oomd's own word in the journal, and podscope's naming the pod.
        let oomd_said = sh(&format!(
            "journalctl -u systemd-oomd --no-pager -o cat | grep -F 'podscope-ctr-{squeezed}' || true"
        ))?;
        ensure!(
            oomd_said.contains("memory pressure"),
            "systemd-oomd's journal does not name the container: {oomd_said}"
        );
        let podscope_said = sh(&format!(
            "journalctl -u podscoped --no-pager -o cat CONTAINER_ID={squeezed} | grep -F systemd-oomd || true"
        ))?;
        ensure!(
            podscope_said.contains("of pod node/oomd killed by systemd-oomd"),
            "podscoped's journal does not say which pod lost the container: {podscope_said}"
        );
        // Only the one that reclaimed: the other runs on.
        let (state, _) = c.state(&calm)?;
        ensure!(
            state == "CONTAINER_RUNNING",
            "the calm container is {state}"
        );
        Ok(())
    })();
    r.and(c.remove_pod(&pod_id))
}
