//! crictl, as a node operator runs it, against podscope-cri's socket; the
//! pod and container configs are the CRI's JSON (what `crictl runp` and
//! `crictl create` read).

use serde_json::{json, Value};
use std::process::Command;

pub const ENDPOINT: &str = "unix:///run/podscope/cri.sock";
/// The image the cases run (busybox, from the node's registry through
/// registries.conf's docker.io mirror).
pub const IMAGE: &str = "docker.io/library/busybox:latest";

pub struct Crictl {
    bin: String,
}

impl Crictl {
    pub fn new() -> Self {
        Crictl {
            bin: std::env::var("CRICTL").expect("CRICTL= names crictl"),
        }
    }

    /// crictl 1.36 (in-vm.sh puts it on PATH as crictl-1.36).
    pub fn v1_36() -> Self {
        Crictl {
            bin: "crictl-1.36".into(),
        }
    }

    /// crictl ARGS: its stdout, or its stderr as the error.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.bin)
            .args(["--runtime-endpoint", ENDPOINT, "--image-endpoint", ENDPOINT])
            .args(["--timeout", "60s"])
            .args(args)
            .output()
            .map_err(|e| format!("crictl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "crictl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn file(v: &Value) -> Result<tempfile_path::Path, String> {
        write_config(v)
    }

    /// A pod from its config; its id.
    pub fn runp(&self, pod: &Value, handler: &str) -> Result<String, String> {
        let p = Self::file(pod)?;
        self.run(&["runp", "--runtime", handler, p.as_str()])
    }

    /// A container created (and started) in `pod`; its id.
    pub fn run_container(&self, pod_id: &str, ctr: &Value, pod: &Value) -> Result<String, String> {
        let (c, p) = (Self::file(ctr)?, Self::file(pod)?);
        let id = self.run(&["create", pod_id, c.as_str(), p.as_str()])?;
        self.run(&["start", &id])?;
        Ok(id)
    }

    pub fn inspect(&self, id: &str) -> Result<Value, String> {
        let out = self.run(&["inspect", id])?;
        serde_json::from_str(&out).map_err(|e| format!("crictl inspect {id}: {e}"))
    }

    /// The container's state (CONTAINER_RUNNING, ...) and reason.
    pub fn state(&self, id: &str) -> Result<(String, String), String> {
        let v = self.inspect(id)?;
        Ok((
            v["status"]["state"].as_str().unwrap_or("").into(),
            v["status"]["reason"].as_str().unwrap_or("").into(),
        ))
    }

    /// `crictl exec -s` a command: its stdout.
    pub fn exec(&self, id: &str, cmd: &[&str]) -> Result<String, String> {
        let mut args = vec!["exec", "-s", id];
        args.extend_from_slice(cmd);
        self.run(&args)
    }

    /// Stop and remove the pod (and its containers).
    pub fn remove_pod(&self, pod_id: &str) -> Result<(), String> {
        self.run(&["stopp", pod_id])?;
        self.run(&["rmp", pod_id])?;
        Ok(())
    }
}

impl Default for Crictl {
    fn default() -> Self {
        Self::new()
    }
}

/// A config written for crictl to read; removed when dropped.
pub fn write_config(v: &Value) -> Result<tempfile_path::Path, String> {
    tempfile_path::Path::with(&v.to_string())
}

/// A pod config: name, a uid of its own, the systemd slice kubelet gives a
/// best-effort pod.
pub fn pod_config(name: &str) -> Value {
    let uid = format!("{name}-{}", std::process::id());
    json!({
        "metadata": { "name": name, "namespace": "node", "uid": uid },
        "log_directory": format!("/var/log/pods/node_{name}_{uid}"),
        "linux": {
            "cgroup_parent": format!("kubepods-besteffort-pod{}.slice", uid.replace('-', "_")),
            "security_context": { "namespace_options": { "network": 0 } }
        }
    })
}

/// A container config running `cmd` (sh -c) in busybox.
pub fn container_config(name: &str, cmd: &str) -> Value {
    json!({
        "metadata": { "name": name },
        "image": { "image": IMAGE },
        "command": ["sh", "-c", cmd],
        "log_path": format!("{name}.log"),
        "linux": { "resources": {} }
    })
}

/// Config files for crictl: written to /run, removed on drop.
pub mod tempfile_path {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);

    pub struct Path(std::path::PathBuf);

    impl Path {
        pub fn with(text: &str) -> Result<Self, String> {
            let p = std::path::PathBuf::from(format!(
                "/run/node-suite-{}-{}.json",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(Path(p))
        }

        pub fn as_str(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for Path {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}
