//! What a node's operator does to a running podscope, on v2: streams
//! (exec on a terminal, attach, port-forward), `systemctl restart
//! podscoped` under a container writing its log, and podscoped killed with
//! SIGKILL in the middle of a start.

use crate::cri::{container_config, pod_config};
use crate::{ensure, sh, wait_for, Crictl, Outcome};
use std::time::Duration;

/// `crictl exec -it` on a real terminal (script(1) gives it one), attach
/// with stdin, port-forward to a server in the pod.
pub fn streams() -> Outcome {
    let c = Crictl::new();
    let pod = pod_config("streams");
    let pod_id = c.runp(&pod, "crun")?;
    let r = (|| {
        let mut server = container_config(
            "server",
            "mkdir -p /www && echo hello-through-the-forward > /www/index.html && exec httpd -f -p 8080 -h /www",
        );
        server["linux"]["resources"] = serde_json::json!({});
        let server = c.run_container(&pod_id, &server, &pod)?;
        // One line read and answered, then it ends, and so does the attach.
        let mut echo = container_config("echo", "read l; echo got:$l");
        echo["stdin"] = serde_json::json!(true);
        echo["stdin_once"] = serde_json::json!(true);
        let echo = c.run_container(&pod_id, &echo, &pod)?;

        // exec -it: a terminal inside, the container's cgroup as its root.
        let crictl = std::env::var("CRICTL").map_err(|_| "CRICTL is not set")?;
        let endpoint = crate::cri::ENDPOINT;
        let tty = sh(&format!(
            "script -qec \"{crictl} --runtime-endpoint {endpoint} exec -it {server} sh -c 'tty; cat /proc/self/cgroup'\" /dev/null"
        ))?;
        ensure!(
            tty.contains("/dev/pts/") && tty.contains("0::/"),
            "exec -it: no terminal or not in the container's cgroup namespace: {tty}"
        );

        // attach -i: what is typed reaches the container, its answer comes back.
        let attached = sh(&format!(
            "(echo hello; sleep 1) | timeout 30 {crictl} --runtime-endpoint {endpoint} attach -i {echo} || true"
        ))?;
        ensure!(
            attached.contains("got:hello"),
            "attach -i: the container's answer did not come back: {attached}"
        );

        // port-forward from the node's loopback into the pod.
        let forwarded = sh(&format!(
            "{crictl} --runtime-endpoint {endpoint} port-forward {pod_id} 18080:8080 >/dev/null 2>&1 & pf=$!; \
             for i in $(seq 50); do curl -sf http://127.0.0.1:18080/index.html && break; sleep 0.2; done; kill $pf"
        ))?;
        ensure!(
            forwarded.contains("hello-through-the-forward"),
            "port-forward: {forwarded}"
        );
        Ok(())
    })();
    r.and(c.remove_pod(&pod_id))
}

/// The numbers of a counter's log lines (CRI log format: time, stream,
/// tag, text).
fn counted(c: &Crictl, id: &str) -> Result<Vec<u64>, String> {
    Ok(c.run(&["logs", id])?
        .lines()
        .filter_map(|l| l.strip_prefix("line ")?.trim().parse().ok())
        .collect())
}

/// A container writing its log while podscoped restarts: no line lost or
/// doubled, and lines after the restart.
pub fn logs_across_restart() -> Outcome {
    let c = Crictl::new();
    let pod = pod_config("logs-restart");
    let pod_id = c.runp(&pod, "crun")?;
    let r = (|| {
        let id = c.run_container(
            &pod_id,
            &container_config(
                "count",
                "i=0; while true; do i=$((i+1)); echo \"line $i\"; usleep 200000; done",
            ),
            &pod,
        )?;
        let before = wait_for(Duration::from_secs(30), || {
            counted(&c, &id)
                .ok()
                .filter(|n| n.len() >= 5)
                .map(|n| n.len())
        })
        .ok_or("the counter wrote nothing within 30 s")?;
        sh("systemctl restart podscoped.service")?;
        let after = wait_for(Duration::from_secs(30), || {
            counted(&c, &id).ok().filter(|n| n.len() >= before + 15)
        })
        .ok_or("no lines after the restart within 30 s")?;
        let expected: Vec<u64> = (1..=after.len() as u64).collect();
        ensure!(
            after == expected,
            "lines lost or doubled across the restart: {after:?}"
        );
        let (state, _) = c.state(&id)?;
        ensure!(
            state == "CONTAINER_RUNNING",
            "the counter is {state} after the restart"
        );
        Ok(())
    })();
    r.and(c.remove_pod(&pod_id))
}

/// podscoped killed with SIGKILL while a pod and then a container start:
/// after its restart each is whole or gone, and removing them leaves
/// nothing.
pub fn killed_mid_start() -> Outcome {
    let c = Crictl::new();
    let kill_soon = |ms: u64| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            sh("systemctl kill -s KILL podscoped.service")
        })
    };
    // A pod's start cut short.
    let pod = pod_config("killed");
    let killer = kill_soon(300);
    let ran = c.runp(&pod, "crun");
    killer.join().map_err(|_| "the killer panicked")??;
    // podscoped comes back on the next call (D-Bus activation).
    let pods = wait_for(Duration::from_secs(60), || {
        c.run(&["pods", "--name", "killed", "-q"]).ok()
    })
    .ok_or("podscoped did not answer after the kill")?;
    let pods: Vec<&str> = pods.lines().collect();
    if let Ok(id) = &ran {
        ensure!(
            pods.contains(&id.as_str()),
            "the pod {id} podscope answered for is gone"
        );
        let scope = sh(&format!("systemctl is-active podscope-{id}.scope || true"))?;
        ensure!(
            scope.trim() == "active",
            "the pod {id} it answered for has its scope {scope}"
        );
    }
    for id in &pods {
        let st = c.run(&["inspectp", id])?;
        ensure!(
            st.contains("SANDBOX_READY") || st.contains("SANDBOX_NOTREADY"),
            "pod {id} after the kill: {st}"
        );
    }
    // A container's start cut short, in a pod made whole.
    let pod = pod_config("killed-ctr");
    let pod_id = c.runp(&pod, "crun")?;
    let r = (|| {
        let f = crate::cri::write_config(&container_config("victim", "sleep 3600"))?;
        let p = crate::cri::write_config(&pod)?;
        let id = c.run(&["create", &pod_id, f.as_str(), p.as_str()])?;
        let killer = kill_soon(150);
        let started = c.run(&["start", &id]);
        killer.join().map_err(|_| "the killer panicked")??;
        let state = wait_for(Duration::from_secs(60), || c.state(&id).ok())
            .ok_or("podscoped did not answer after the kill")?;
        match started {
            Ok(_) => ensure!(state.0 == "CONTAINER_RUNNING", "started, then {state:?}"),
            Err(_) => ensure!(
                ["CONTAINER_CREATED", "CONTAINER_RUNNING", "CONTAINER_EXITED"]
                    .contains(&state.0.as_str()),
                "after a start cut short: {state:?}"
            ),
        }
        Ok(())
    })();
    let mut removed = c.remove_pod(&pod_id);
    for id in pods {
        removed = removed.and(c.remove_pod(id));
    }
    r.and(removed)
}
