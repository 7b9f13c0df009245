//! What of podscope's is on the node, held against the daemon's records:
//! units, namespaces, network attachments and IP leases, mounts, bundles,
//! runtime state, cgroups. Each finding is a line saying what and why.
//! One source for the kill-at-every-step driver (`failpoints.rs`) and the
//! full-node load (`tests/load`), which include this file.

use crate::harness::sh;
use podscope_api::domain::State;
use podscope_api::{Client, ListFilter};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every pod's object on the node (scopes, netns units, pinned
/// namespaces, network attachments, `network`'s host-local leases, pod
/// slices, pod files, inits) checked against the daemon's records.
pub async fn pods(m: &Client, network: &str) -> Vec<String> {
    let mut records = BTreeMap::new();
    for s in m.list(&ListFilter::default()).await.unwrap() {
        if let Ok(st) = m.status(&s.id).await {
            records.insert(s.id.clone(), st);
        }
    }
    let state = |id: &str| records.get(id).map(|s| s.state);
    let mut found = Vec::new();
    let active = |pattern: &str| -> BTreeSet<String> {
        sh(&format!(
            "systemctl list-units --plain --no-legend --state=active '{pattern}'"
        ))
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
    };
    let scopes = active("podscope-*.scope");
    let netns_units = active("podscope-netns@*.service");
    for unit in &scopes {
        let id = unit
            .trim_start_matches("podscope-")
            .trim_end_matches(".scope");
        if state(id) != Some(State::Ready) {
            found.push(format!(
                "scope {unit} without a ready record ({:?})",
                state(id)
            ));
        }
    }
    for unit in &netns_units {
        let id = unit
            .trim_start_matches("podscope-netns@")
            .trim_end_matches(".service");
        if !matches!(state(id), Some(State::Created | State::Ready)) {
            found.push(format!("{unit} without a live record ({:?})", state(id)));
        }
    }
    for id in dir_names("/run/netns", "podscope-") {
        if !netns_units.contains(&format!("podscope-netns@{id}.service")) {
            found.push(format!(
                "namespace /run/netns/podscope-{id} not pinned by its unit"
            ));
        }
    }
    for file in dir_names("/var/lib/podscope/networks", "") {
        let id = file.trim_end_matches(".json");
        match records.get(id) {
            Some(st) if st.state != State::NotReady && st.network_attached => {}
            other => found.push(format!(
                "attachment {file} without an attached live record ({:?})",
                other.map(|s| s.state)
            )),
        }
    }
    for (ip, owner) in host_local_owners(network) {
        if !Path::new(&format!("/var/lib/podscope/networks/{owner}.json")).exists() {
            found.push(format!("IP lease {ip} of {owner} without an attachment"));
        }
    }
    // A pod without a cgroup parent has a slice of its own, stopped when
    // the pod is removed.
    for unit in sh("systemctl list-units --all --plain --no-legend 'podscope-*.slice'")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
    {
        let id = unit
            .trim_start_matches("podscope-")
            .trim_end_matches(".slice");
        if id.len() == 64 && !records.contains_key(id) {
            found.push(format!("slice {unit} without a record"));
        }
    }
    for id in dir_names("/run/podscope/sandboxes", "") {
        if !records.contains_key(&id) {
            found.push(format!(
                "pod files /run/podscope/sandboxes/{id} without a record"
            ));
        }
    }
    for line in sh("pgrep -a podscope-init || true").lines() {
        let id = line
            .split_whitespace()
            .skip_while(|w| *w != "--id")
            .nth(1)
            .unwrap_or("");
        if state(id) != Some(State::Ready) {
            found.push(format!("podscope-init without a ready record: {line}"));
        }
    }
    for (id, st) in &records {
        if st.state == State::Ready {
            for f in [&st.resolv_conf_path, &st.hostname_path] {
                if f.is_empty() || !Path::new(f).exists() {
                    found.push(format!("ready pod {id} lacks its file {f:?}"));
                }
            }
            if !scopes.contains(&format!("podscope-{id}.scope")) {
                found.push(format!("ready pod {id} has no active scope"));
            }
        }
        if st.network_attached
            && !Path::new(&format!("/var/lib/podscope/networks/{id}.json")).exists()
        {
            found.push(format!("pod {id} says attached but has no attachment"));
        }
    }
    found
}

/// Every container's object on the node (units, bundles, root mounts,
/// runtime state, exec units) checked against the daemon's records.
pub async fn containers(m: &Client) -> Vec<String> {
    use podscope_api::domain::container::ContainerState as S;
    let mut records = BTreeMap::new();
    for c in m
        .list_containers(&Default::default())
        .await
        .unwrap_or_default()
    {
        if let Ok(st) = m.container_status(&c.id).await {
            records.insert(c.id.clone(), st);
        }
    }
    let mut found = Vec::new();
    let units: BTreeMap<String, String> =
        sh("systemctl list-units --all --plain --no-legend 'podscope-ctr-*'")
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let unit = w.next()?.to_owned();
                let active = w.nth(1)?.to_owned();
                Some((unit, active))
            })
            .collect();
    for (unit, active) in &units {
        let id = unit
            .trim_start_matches("podscope-ctr-")
            .trim_end_matches(".service");
        match records.get(id) {
            None => found.push(format!("unit {unit} ({active}) without a record")),
            Some(st) if st.state == S::Created && active == "active" => {
                found.push(format!("unit {unit} active for a created record"))
            }
            _ => {}
        }
    }
    for (id, st) in &records {
        let unit = format!("podscope-ctr-{id}.service");
        if st.state == S::Running {
            let pid = sh(&format!("systemctl show -P MainPID {unit}"));
            if pid.trim() != st.main_pid.to_string() {
                found.push(format!(
                    "running {id}: its unit's main PID is {} not {}",
                    pid.trim(),
                    st.main_pid
                ));
            }
        }
        let mounted = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .contains(&format!("/containers/{id}/rootfs"));
        if st.state == S::Created && mounted {
            found.push(format!("created {id} has its root mounted"));
        }
        if st.state == S::Running && !mounted {
            found.push(format!("running {id} has no root mounted"));
        }
        // Running in the record, and in truth: not a process `create`
        // left waiting for a `start` that never came (the pods here use
        // crun, whose state is in /run/crun, or runc for a checkpoint).
        if st.state == S::Running {
            let said = sh(&format!(
                "crun state {id} 2>/dev/null || runc state {id} 2>&1"
            ));
            let status = serde_json::from_str::<serde_json::Value>(&said)
                .ok()
                .and_then(|v| v.get("status")?.as_str().map(str::to_owned));
            match status.as_deref() {
                Some("created") => {
                    found.push(format!("running {id} was never started (state: created)"))
                }
                // Frozen (a checkpoint cut short, not thawed).
                Some("paused") => found.push(format!("running {id} is paused (frozen)")),
                _ => {}
            }
        }
    }
    for id in dir_names("/var/lib/podscope/containers", "") {
        if !records.contains_key(&id) {
            found.push(format!("bundle {id} without a record"));
        }
    }
    for line in std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
    {
        if let Some(rest) = line.split_whitespace().nth(4) {
            if let Some(id) = rest
                .strip_prefix("/var/lib/podscope/containers/")
                .and_then(|r| r.strip_suffix("/rootfs"))
            {
                if !records.contains_key(id) {
                    found.push(format!("root of {id} mounted without a record"));
                }
            }
        }
    }
    for dir in ["/run/podscope/containers", "/run/crun", "/run/runc"] {
        for id in dir_names(dir, "") {
            if id.len() == 64 && !records.contains_key(&id) {
                found.push(format!("{dir}/{id} without a record"));
            }
        }
    }
    let execs = sh("systemctl list-units --all --plain --no-legend 'podscope-exec-*'");
    if !execs.trim().is_empty() {
        found.push(format!("exec units left: {}", execs.trim()));
    }
    found
}

/// (address, owner id) of host-local's leases on `network`.
pub fn host_local_owners(network: &str) -> Vec<(String, String)> {
    dir_names(&format!("/var/lib/cni/networks/{network}"), "")
        .into_iter()
        .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
        .filter_map(|ip| {
            let text =
                std::fs::read_to_string(format!("/var/lib/cni/networks/{network}/{ip}")).ok()?;
            Some((ip, text.lines().next()?.trim().to_owned()))
        })
        .collect()
}

/// Names in `dir` starting with `prefix`, the prefix cut off.
pub fn dir_names(dir: &str, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix(prefix))
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The cgroup directories of podscope's pods and containers
/// (`podscope-*` below `podscope.slice`) in every hierarchy.
pub fn cgroup_dirs() -> BTreeSet<String> {
    sh("find /sys/fs/cgroup -mindepth 2 -type d -path '*/podscope.slice/*' -name 'podscope-*' 2>/dev/null || true")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Cgroup directories of podscope's pods and containers in any hierarchy,
/// but those in `before`, for none of which the daemon has a record: what
/// systemd, the runtime or the daemon made and left. (Hierarchies systemd
/// does not manage, such as perf_event on these hybrid machines, are
/// mounted inside the harness only and keep what an earlier run left.)
pub async fn cgroups(m: &Client, before: &BTreeSet<String>) -> Vec<String> {
    let mut ids: BTreeSet<String> = BTreeSet::new();
    for s in m.list(&ListFilter::default()).await.unwrap_or_default() {
        ids.insert(s.id);
    }
    for c in m
        .list_containers(&Default::default())
        .await
        .unwrap_or_default()
    {
        ids.insert(c.id);
    }
    let mut found = Vec::new();
    for dir in cgroup_dirs().difference(before) {
        let name = dir.rsplit('/').next().unwrap_or("");
        let id = name
            .trim_start_matches("podscope-ctr-")
            .trim_start_matches("podscope-exec-")
            .trim_start_matches("podscope-")
            .split('.')
            .next()
            .unwrap_or("");
        if !ids.contains(id) {
            found.push(format!("cgroup {dir} without a record"));
        }
    }
    found
}
