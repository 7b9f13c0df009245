//! A node of the cluster as its operator sees it: a shell in its
//! namespaces (nsenter into its systemd, from run-cluster.sh's NODE_PID_*),
//! `systemctl`, `journalctl` and crictl 1.36 on podscope's socket.

use std::process::Command;

/// crictl 1.36 where harness.sh binds it inside a node.
pub const CRICTL: &str = "/usr/local/lib/podscope-test/bin/crictl_1_36";
/// The CNI network node.sh writes: its leases are host-local's files.
const LEASES: &str = "/var/lib/cni/networks/podscope-cluster";

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pid: u32,
}

impl Node {
    /// The nodes run-cluster.sh booted (NODES, NODE_PID_<name>).
    pub fn all() -> Vec<Node> {
        std::env::var("NODES")
            .expect("NODES names the nodes")
            .split_whitespace()
            .map(|name| Node {
                name: name.to_string(),
                pid: std::env::var(format!("NODE_PID_{name}"))
                    .unwrap_or_else(|_| panic!("NODE_PID_{name} is not set"))
                    .parse()
                    .expect("a PID"),
            })
            .collect()
    }

    /// SCRIPT run by sh in the node's namespaces: its status, stdout and
    /// stderr.
    pub fn sh_status(&self, script: &str) -> (bool, String, String) {
        let o = Command::new("nsenter")
            .args(["-t", &self.pid.to_string(), "-a", "sh", "-c", script])
            .output()
            .unwrap_or_else(|e| panic!("nsenter into {}: {e}", self.name));
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// SCRIPT in the node, which must succeed: its standard output.
    pub fn sh(&self, script: &str) -> String {
        let (ok, out, err) = self.sh_status(script);
        assert!(ok, "on {}: `{script}` failed: {out}{err}", self.name);
        out
    }

    /// crictl 1.36 on the node's podscope (its /etc/crictl.yaml, node.sh's).
    pub fn crictl(&self, args: &str) -> String {
        self.sh(&format!("{CRICTL} {args}"))
    }

    /// `systemctl show -P PROPERTY UNIT` on the node.
    pub fn unit_property(&self, unit: &str, property: &str) -> String {
        self.sh(&format!("systemctl show -P {property} {unit}"))
            .trim()
            .to_string()
    }

    /// The podscope sandboxes of a Kubernetes pod (by its UID) on the node.
    pub fn sandboxes_of(&self, pod_uid: &str) -> Vec<String> {
        self.crictl(&format!("pods -q --label io.kubernetes.pod.uid={pod_uid}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// podscope's units that name sandbox ID (its slice, scope, network
    /// namespace unit, and its containers' services through their slice),
    /// loaded in the node's systemd.
    pub fn units_of(&self, sandbox: &str) -> Vec<String> {
        let out = self.sh(&format!(
            "systemctl list-units --all --plain --no-legend 'podscope*{sandbox}*'; \
             systemctl list-units --all --plain --no-legend --type=service 'podscope-ctr-*' \
               | awk '{{print $1}}' | while read -r u; do \
                 systemctl show -P Slice \"$u\" | grep -q {sandbox} && echo \"$u\"; done; true"
        ));
        out.lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect()
    }

    /// The pod network namespaces podscope holds on the node (/run/netns).
    pub fn netns(&self) -> Vec<String> {
        self.sh("ls /run/netns 2>/dev/null; true")
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// The addresses host-local has leased on the node to sandbox ID (a
    /// lease file holds the sandbox's id).
    pub fn leases_of(&self, sandbox: &str) -> Vec<String> {
        self.sh(&format!("grep -l {sandbox} {LEASES}/* 2>/dev/null; true"))
            .split_whitespace()
            .map(|f| f.rsplit('/').next().unwrap_or(f).to_string())
            .collect()
    }

    /// What of sandbox ID is still on the node: its units, its network
    /// namespace, its address leases (empty once it is stopped).
    pub fn remains_of(&self, sandbox: &str) -> Vec<String> {
        let mut left = self.units_of(sandbox);
        left.extend(
            self.netns()
                .into_iter()
                .filter(|n| n.contains(sandbox))
                .map(|n| format!("/run/netns/{n}")),
        );
        left.extend(
            self.leases_of(sandbox)
                .into_iter()
                .map(|ip| format!("lease {ip}")),
        );
        left
    }

    /// Wait (60 s at most) until nothing of sandbox ID is left on the node
    /// (`remains_of`); WHAT names it in the panic.
    pub fn wait_nothing_left_of(&self, sandbox: &str, what: &str) {
        super::kubectl::wait(
            &format!("{what}'s units, netns and lease gone from {}", self.name),
            std::time::Duration::from_secs(60),
            || {
                let remains = self.remains_of(sandbox);
                if remains.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{remains:?}"))
                }
            },
        );
    }

    /// The sandbox's state as crictl shows it (SANDBOX_READY or
    /// SANDBOX_NOTREADY), None once it is removed.
    pub fn sandbox_state(&self, sandbox: &str) -> Option<String> {
        let (ok, out, _) = self.sh_status(&format!(
            "{CRICTL} inspectp -o go-template --template '{{{{.status.state}}}}' {sandbox}"
        ));
        ok.then(|| out.trim().to_string())
    }
}
