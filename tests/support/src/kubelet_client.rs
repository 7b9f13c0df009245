//! A real kubelet (Kubernetes 1.26 or 1.36, standalone) as `make e2e` and the
//! bench's kubelet section drive it: started and stopped as a unit of the
//! harness's systemd by `tests/e2e/kubelet.sh`, fed static pods through
//! its manifest directory, and read through its own read-only endpoints
//! (`/pods`, `/stats/summary`, `/metrics`): kubelet's view, not the
//! runtime's. Self-contained: `tests/e2e` includes this file as it is.

#![allow(dead_code)]

use serde::{Deserialize, Deserializer};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The start/stop script, from the repository (the working directory).
const SCRIPT: &str = "tests/e2e/kubelet.sh";

/// The node name kubelet is given: static pods are `<name>-<node>`.
pub const NODE: &str = "e2e-node";

/// A running kubelet, as `kubelet.sh env` describes it.
pub struct Kubelet {
    /// Its read-only port's base URL.
    base: String,
    /// The static pod directory.
    pub manifests: PathBuf,
    http: reqwest::Client,
}

/// `kubelet.sh VERB ARGS...` with `env` set: its stdout (its stderr
/// passes through).
fn script(verb: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(SCRIPT)
        .arg(verb)
        .args(args)
        .envs(env.iter().copied())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {SCRIPT} (from the repository): {e}"));
    assert!(out.status.success(), "{SCRIPT} {verb} {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Kubelet {
    /// Start kubelet on the CRI `endpoint` with these feature gates
    /// ("" for none); returns once it answers.
    pub fn start(endpoint: &str, feature_gates: &str) -> Kubelet {
        script("start", &[endpoint], &[("FEATURE_GATES", feature_gates)]);
        Kubelet::attach()
    }

    /// [`Kubelet::start`] with the kubelet binary at `kubelet` rather than
    /// the one KUBELET names: a caller that runs several generations in
    /// one process names each without changing its own environment.
    pub fn start_binary(kubelet: &str, endpoint: &str, feature_gates: &str) -> Kubelet {
        script(
            "start",
            &[endpoint],
            &[("KUBELET", kubelet), ("FEATURE_GATES", feature_gates)],
        );
        Kubelet::attach()
    }

    /// The kubelet already running.
    pub fn attach() -> Kubelet {
        let env = script("env", &[], &[]);
        let var = |k: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{SCRIPT} env printed no {k}"))
                .to_owned()
        };
        Kubelet {
            base: var("KUBELET_RO"),
            manifests: PathBuf::from(var("KUBELET_MANIFESTS")),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("an HTTP client"),
        }
    }

    /// `systemctl restart kubelet`, then wait until it answers again.
    pub fn restart(&self) {
        script("restart", &[], &[]);
    }

    /// Stop kubelet and start it again with these feature gates ("" for
    /// none), its pods left running; returns once it answers.
    pub fn restart_with_gates(&self, feature_gates: &str) {
        script("regate", &[], &[("FEATURE_GATES", feature_gates)]);
    }

    /// Stop kubelet and remove its manifests (the pods it ran stay, for
    /// the caller to judge and remove).
    pub fn stop(self) {
        script("stop", &[], &[]);
    }

    /// Write the static pod `name` (a Pod object; JSON is YAML to
    /// kubelet), atomically: kubelet never reads half a file.
    pub fn write_manifest(&self, name: &str, pod: &serde_json::Value) {
        let tmp = self.manifests.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(pod).unwrap())
            .unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
        std::fs::rename(&tmp, self.manifests.join(format!("{name}.json"))).unwrap();
    }

    pub fn remove_manifest(&self, name: &str) {
        std::fs::remove_file(self.manifests.join(format!("{name}.json")))
            .unwrap_or_else(|e| panic!("remove the manifest {name}: {e}"));
    }

    async fn get(&self, path: &str) -> reqwest::Result<reqwest::Response> {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await?
            .error_for_status()
    }

    /// GET `path`, decoded from JSON.
    async fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        self.try_json(path).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// GET `path`, decoded from JSON; what went wrong, for a caller that
    /// waits through kubelet's own restarts.
    async fn try_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        let body = match self.get(path).await {
            Ok(r) => r.bytes().await,
            Err(e) => Err(e),
        }
        .map_err(|e| format!("kubelet {path}: {e}"))?;
        serde_json::from_slice(&body).map_err(|e| format!("kubelet {path}: {e}"))
    }

    /// The static pod `name`, or why kubelet did not answer.
    pub async fn try_pod(&self, name: &str) -> Result<Option<Pod>, String> {
        let full = format!("{name}-{NODE}");
        let list: PodList = self.try_json("/pods").await?;
        Ok(list.items.into_iter().find(|p| p.metadata.name == full))
    }

    /// `/stats/summary`, or why kubelet did not answer.
    pub async fn try_summary(&self) -> Result<Summary, String> {
        self.try_json("/stats/summary").await
    }

    /// `/pods`: the pods kubelet knows, with the status it holds for each
    /// (a standalone kubelet puts its status manager's view in them).
    pub async fn pods(&self) -> Vec<Pod> {
        let list: PodList = self.json("/pods").await;
        list.items
    }

    /// The static pod `name` on this node, if kubelet has it.
    pub async fn pod(&self, name: &str) -> Option<Pod> {
        let full = format!("{name}-{NODE}");
        self.pods()
            .await
            .into_iter()
            .find(|p| p.metadata.name == full)
    }

    /// `/stats/summary`.
    pub async fn summary(&self) -> Summary {
        self.json("/stats/summary").await
    }

    /// `/metrics`, as text.
    pub async fn metrics(&self) -> String {
        self.get("/metrics")
            .await
            .unwrap_or_else(|e| panic!("kubelet /metrics: {e}"))
            .text()
            .await
            .unwrap_or_else(|e| panic!("kubelet /metrics: {e}"))
    }

    /// `/metrics/cadvisor`, as text: cAdvisor's families, or the runtime's
    /// (ListPodSandboxMetrics) with `PodAndContainerStatsFromCRI`.
    pub async fn cadvisor_metrics(&self) -> String {
        self.get("/metrics/cadvisor")
            .await
            .unwrap_or_else(|e| panic!("kubelet /metrics/cadvisor: {e}"))
            .text()
            .await
            .unwrap_or_else(|e| panic!("kubelet /metrics/cadvisor: {e}"))
    }

    /// Poll `/pods` every 25 ms until `done` holds for the pod `name` (None
    /// when kubelet has no such pod), at most `limit`: the pod as it then
    /// was, and how long it took. (Each `/pods` costs kubelet the encoding
    /// of every pod: polled faster, kubelet's own work is what slows.)
    pub async fn wait_pod(
        &self,
        name: &str,
        limit: Duration,
        what: &str,
        done: impl Fn(Option<&Pod>) -> bool,
    ) -> (Option<Pod>, Duration) {
        let t0 = Instant::now();
        loop {
            let pod = self.pod(name).await;
            if done(pod.as_ref()) {
                return (pod, t0.elapsed());
            }
            assert!(
                t0.elapsed() < limit,
                "{name}: not {what} after {limit:?}; kubelet says: {pod:#?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// A static pod of one container running `command` in `image`, in the
/// namespace `namespace`, stopped at once when removed.
pub fn simple_pod(name: &str, namespace: &str, image: &str, command: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": "main", "image": image, "command": command }]
        }
    })
}

/// `kubelet_runtime_operations_duration_seconds`: (sum in seconds, count)
/// per operation_type, from a `/metrics` text.
pub fn runtime_operations(metrics: &str) -> HashMap<String, (f64, u64)> {
    let mut ops: HashMap<String, (f64, u64)> = HashMap::new();
    for line in metrics.lines() {
        let (series, value) = match line.rsplit_once(' ') {
            Some(x) if !line.starts_with('#') => x,
            _ => continue,
        };
        let (name, labels) = match series.split_once('{') {
            Some(x) => x,
            None => continue,
        };
        let op = labels
            .split(',')
            .find_map(|l| l.strip_prefix("operation_type=\""))
            .and_then(|l| l.strip_suffix('"').or_else(|| l.strip_suffix("\"}")));
        let Some(op) = op else { continue };
        let entry = ops.entry(op.to_owned()).or_default();
        match name {
            "kubelet_runtime_operations_duration_seconds_sum" => {
                entry.0 = value.parse().unwrap_or(0.0)
            }
            "kubelet_runtime_operations_duration_seconds_count" => {
                entry.1 = value.parse().unwrap_or(0)
            }
            _ => {}
        }
    }
    ops.retain(|_, (_, n)| *n > 0);
    ops
}

/// kubelet writes `null` for an empty list or map.
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Deserialize)]
struct PodList {
    #[serde(default, deserialize_with = "nullable")]
    items: Vec<Pod>,
}

/// The part of a Pod object the tests read.
#[derive(Debug, Clone, Deserialize)]
pub struct Pod {
    pub metadata: Meta,
    #[serde(default)]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Meta {
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default, deserialize_with = "nullable")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default)]
    pub phase: String,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<Condition>,
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub container_statuses: Vec<ContainerStatus>,
    #[serde(default, deserialize_with = "nullable")]
    pub init_container_statuses: Vec<ContainerStatus>,
    pub qos_class: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    pub name: String,
    #[serde(default)]
    pub state: ContainerState,
    #[serde(default)]
    pub last_state: ContainerState,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub restart_count: u32,
    #[serde(default)]
    pub image: String,
    #[serde(rename = "imageID", default)]
    pub image_id: String,
    #[serde(rename = "containerID")]
    pub container_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContainerState {
    pub running: Option<Running>,
    pub waiting: Option<Waiting>,
    pub terminated: Option<Terminated>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Running {
    pub started_at: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Waiting {
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Terminated {
    pub exit_code: i32,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(rename = "containerID")]
    pub container_id: Option<String>,
}

impl Pod {
    /// A pod condition's status ("True", "False"), if kubelet set it.
    pub fn condition(&self, kind: &str) -> Option<&str> {
        self.status
            .conditions
            .iter()
            .find(|c| c.kind == kind)
            .map(|c| c.status.as_str())
    }

    pub fn ready(&self) -> bool {
        self.condition("Ready") == Some("True")
    }

    pub fn running(&self) -> bool {
        self.status.phase == "Running"
            && !self.status.container_statuses.is_empty()
            && self
                .status
                .container_statuses
                .iter()
                .all(|c| c.state.running.is_some())
    }

    pub fn container(&self, name: &str) -> Option<&ContainerStatus> {
        self.status
            .container_statuses
            .iter()
            .find(|c| c.name == name)
    }
}

impl ContainerStatus {
    /// The runtime's container id, without kubelet's `<runtime>://`.
    pub fn id(&self) -> Option<&str> {
        self.container_id
            .as_deref()
            .map(|id| id.split_once("://").map_or(id, |(_, id)| id))
    }
}

/// The part of `/stats/summary` the tests read.
#[derive(Debug, Deserialize)]
pub struct Summary {
    pub node: NodeStats,
    #[serde(default, deserialize_with = "nullable")]
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Deserialize)]
pub struct NodeStats {
    #[serde(rename = "nodeName")]
    pub node_name: String,
    pub runtime: Option<RuntimeStats>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    pub image_fs: Option<FsStats>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodRef,
    pub cpu: Option<CpuStats>,
    pub memory: Option<MemoryStats>,
    #[serde(default, deserialize_with = "nullable")]
    pub containers: Vec<ContainerStats>,
}

#[derive(Debug, Deserialize)]
pub struct PodRef {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    pub cpu: Option<CpuStats>,
    pub memory: Option<MemoryStats>,
    pub rootfs: Option<FsStats>,
    pub logs: Option<FsStats>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub usage_core_nano_seconds: Option<u64>,
    /// Pressure stall information (kubelet 1.34+ on cgroup v2).
    pub psi: Option<Psi>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub working_set_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    pub psi: Option<Psi>,
}

/// One resource's pressure: the share of time some or all of the tasks
/// stalled on it.
#[derive(Debug, Deserialize)]
pub struct Psi {
    pub some: Option<PsiData>,
    pub full: Option<PsiData>,
}

#[derive(Debug, Deserialize)]
pub struct PsiData {
    /// Microseconds stalled, in all.
    pub total: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    pub used_bytes: Option<u64>,
    pub capacity_bytes: Option<u64>,
}
