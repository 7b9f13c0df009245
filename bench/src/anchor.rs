//! The anchor: container figures taken on a reference runtime run beside
//! podscope in the harness, Debian's containerd 1.6 with runc
//! (tests/harness/anchor/containerd.sh), so that podscope's own are read
//! against the same machine on the same day. The measurements take only
//! a CRI endpoint and a runtime handler ([`Target`]): the same code
//! measures podscope (unix:///run/podscope/cri.sock, with crun and with
//! runc) in the same run (`containers.rs` drives them and compares).
//!
//! - critest's benchmark mode: the container lifecycle (CreateContainer,
//!   StartContainer, StopContainer, RemoveContainer) and the pod lifecycle
//!   on a pod network (RunPodSandbox, StopPodSandbox), p50 of its
//!   per-operation durations (its JSON output);
//! - ExecSync `true`: `crictl exec -s <id> true` minus `crictl version`,
//!   p50 of wall times (how clients.rs takes crictl's figures);
//! - what a pod with one running container costs outside the container's
//!   own processes: the processes the runtime keeps for it (for containerd
//!   the shim and the pause process, for podscope the pod's init), their
//!   RSS, and their number per running container;
//! - 100 containers in 25 pods started by 4 concurrent clients (tonic
//!   clients in this process, one connection each): containers started per
//!   second, their pods' RunPodSandbox included;
//! - a cold pull of the bench's 52 MiB image (images.rs pushes it) with
//!   `crictl pull`.

use super::{ms, pct, rss_pss, Table};
use cri_api::v1 as cri;
use cri_api::v1::image_service_client::ImageServiceClient;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// The anchor's start/stop script, from the repository (the bench's cwd).
const SCRIPT: &str = "tests/harness/anchor/containerd.sh";
/// The image the containers run: critest's default, so critest's own
/// benchmark and ours run the same one.
pub const IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.29-2";
/// The bench's big image (images.rs builds and pushes it).
pub const BIG: &str = "127.0.0.1:5000/bench/big:latest";
const BIG_MANIFEST: &str = "http://127.0.0.1:5000/v2/bench/big/manifests/latest";

/// A CRI runtime to measure.
#[derive(Clone)]
pub struct Target {
    /// Its rows read "<name>: <figure>".
    pub name: String,
    /// Its CRI socket (runtime and image services).
    pub socket: PathBuf,
    /// The cgroup parent of the pods made here ("" leaves the runtime's
    /// default; containerd's systemd driver wants a slice).
    pub cgroup_parent: String,
    /// RunPodSandbox's runtime_handler (and critest's -runtime-handler);
    /// "" is the runtime's default.
    pub runtime_handler: String,
}

impl Target {
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub fn row(&self, figure: &str) -> String {
        format!("{}: {figure}", self.name)
    }

    /// podscope's CRI frontend with pods on `handler` (crun or runc).
    pub fn podscope(handler: &str) -> Target {
        Target {
            name: format!("podscope + {handler}"),
            socket: PathBuf::from(super::CRI_SOCKET),
            cgroup_parent: String::new(),
            runtime_handler: handler.into(),
        }
    }
}

/// One runtime's figures, for the comparisons (`containers.rs`).
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// critest's container benchmark, p50 of each operation and of
    /// CreateContainer + StartContainer per sample.
    pub create: Duration,
    pub start: Duration,
    pub create_start: Duration,
    pub stop: Duration,
    pub remove: Duration,
    /// critest's pod benchmark (pod network).
    pub run_pod: Duration,
    pub stop_pod: Duration,
    /// ExecSync `true` (crictl exec -s minus crictl version), p50.
    pub exec: Duration,
    /// A pod with one running container, outside the container: the
    /// runtime's processes' RSS and PSS (KiB, mean per pod), their names.
    pub pod_rss_kib: f64,
    pub pod_pss_kib: f64,
    pub pod_processes: String,
    /// 100 containers in 25 pods by 4 clients: containers started per
    /// second.
    pub start_rate: f64,
}

/// Start the containerd anchor: its target.
pub fn start_containerd() -> Target {
    start_containerd_from(None, "containerd 1.6 + runc")
}

/// Start containerd 2.3 as the anchor (the script's same names: one of
/// the two runs at a time): the binaries unpacked into the directory
/// `CONTAINERD_2_3` names (`make bench` sets it).
pub fn start_containerd_2_3() -> Target {
    let dir = PathBuf::from(
        std::env::var_os("CONTAINERD_2_3")
            .unwrap_or_else(|| panic!("CONTAINERD_2_3 is not set (make bench sets it)")),
    );
    let bin = dir.join("containerd");
    assert!(bin.is_file(), "{} does not exist", bin.display());
    start_containerd_from(Some(&bin), "containerd 2.3 + runc")
}

fn start_containerd_from(binary: Option<&Path>, name: &str) -> Target {
    script_with("start", binary);
    let env = script("env");
    let var = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{SCRIPT} env printed no {k}"))
            .to_owned()
    };
    Target {
        name: name.into(),
        socket: PathBuf::from(
            var("ANCHOR_ENDPOINT")
                .strip_prefix("unix://")
                .expect("a unix:// endpoint"),
        ),
        cgroup_parent: var("ANCHOR_SLICE"),
        runtime_handler: String::new(),
    }
}

/// The anchor's containerd process (its unit's main process).
pub fn containerd_pid() -> u32 {
    let env = script("env");
    let unit = env
        .lines()
        .find_map(|l| l.strip_prefix("ANCHOR_UNIT="))
        .unwrap_or_else(|| panic!("{SCRIPT} env printed no ANCHOR_UNIT"));
    super::sh(&format!("systemctl show -P MainPID {unit}"))
        .trim()
        .parse()
        .expect("containerd's pid")
}

/// Stop the anchor: nothing of it stays.
pub fn stop_containerd() {
    script("stop");
}

/// `containerd.sh VERB`: its stdout; its stderr passes through.
fn script(verb: &str) -> String {
    script_with(verb, None)
}

/// `containerd.sh VERB` with `CONTAINERD=binary` when given.
fn script_with(verb: &str, binary: Option<&Path>) -> String {
    let mut cmd = Command::new(SCRIPT);
    if let Some(b) = binary {
        cmd.env("CONTAINERD", b);
    }
    let out = cmd
        .arg(verb)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {SCRIPT} (from the repository): {e}"));
    assert!(out.status.success(), "{SCRIPT} {verb} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// crictl and critest, from CRICTL and CRITEST (the Makefile defaults them
/// to ../shared/tools). Missing tools fail the bench: a table without their
/// rows would look complete.
pub struct Tools {
    pub(crate) crictl: PathBuf,
    pub(crate) critest: PathBuf,
}

impl Tools {
    /// crictl's path, for commands a shell pipes.
    pub fn crictl_path(&self) -> &Path {
        &self.crictl
    }

    pub fn from_env() -> Tools {
        let get = |var: &str| {
            let p = PathBuf::from(
                std::env::var_os(var)
                    .unwrap_or_else(|| panic!("{var} is not set (make bench sets it)")),
            );
            assert!(p.is_file(), "{var}={} does not exist", p.display());
            p
        };
        Tools {
            crictl: get("CRICTL"),
            critest: get("CRITEST"),
        }
    }

    /// Wall time of one crictl call against the target; its stdout.
    pub fn crictl(&self, target: &Target, args: &[&str]) -> (Duration, String) {
        let ep = target.endpoint();
        let t0 = Instant::now();
        let out = Command::new(&self.crictl)
            .args(["--runtime-endpoint", &ep, "--image-endpoint", &ep])
            .args(["--timeout", "300s"])
            .args(args)
            .output()
            .expect("run crictl");
        let took = t0.elapsed();
        assert!(
            out.status.success(),
            "crictl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (took, String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

async fn channel(target: &Target) -> Channel {
    cri_api::channel(&target.socket)
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", target.socket.display()))
}

pub async fn runtime_client(target: &Target) -> RuntimeServiceClient<Channel> {
    RuntimeServiceClient::new(channel(target).await)
}

pub async fn image_client(target: &Target) -> ImageServiceClient<Channel> {
    ImageServiceClient::new(channel(target).await)
}

pub async fn pull(img: &mut ImageServiceClient<Channel>, image: &str) {
    img.pull_image(cri::PullImageRequest {
        image: Some(cri::ImageSpec {
            image: image.into(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("pull {image}: {e}"));
}

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "podscope-bench-anchor-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn p50_ns(ns: &[u64]) -> Duration {
    let mut v: Vec<Duration> = ns.iter().map(|n| Duration::from_nanos(*n)).collect();
    pct(&mut v, 0.5)
}

/// critest's per-operation durations from one of its benchmark files:
/// operation name -> ns per sample.
fn benchmark_file(path: &Path) -> HashMap<String, Vec<u64>> {
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("critest wrote no {}: {e}", path.display())),
    )
    .unwrap();
    let names: Vec<String> = data["operationsNames"]
        .as_array()
        .expect("operationsNames")
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    let mut ops: HashMap<String, Vec<u64>> = HashMap::new();
    for p in data["datapoints"].as_array().expect("datapoints") {
        for (name, d) in names
            .iter()
            .zip(p["operationsDurationsNs"].as_array().unwrap())
        {
            ops.entry(name.clone())
                .or_default()
                .push(d.as_u64().unwrap());
        }
    }
    ops
}

/// critest -benchmark: its container lifecycle (a pod per sample, the
/// default container, `top`, stopped with critest's 60 s grace period) and
/// its pod lifecycle (pod network), 20 samples each, one client, on the
/// target's runtime handler.
pub fn critest_benchmarks(target: &Target, tools: &Tools, t: &mut Table, f: &mut Figures) {
    let n = 20;
    let dir = tempdir("critest");
    let params = dir.join("params.yaml");
    std::fs::write(
        &params,
        format!(
            "containersNumber: {n}\ncontainersNumberParallel: 1\ncontainerBenchmarkTimeoutSeconds: 600\n\
             podsNumber: {n}\npodsNumberParallel: 1\npodBenchmarkTimeoutSeconds: 300\n"
        ),
    )
    .unwrap();
    let ep = target.endpoint();
    let mut critest = Command::new(&tools.critest);
    if !target.runtime_handler.is_empty() {
        critest.arg(format!("-runtime-handler={}", target.runtime_handler));
    }
    let out = critest
        .args(["--runtime-endpoint", &ep, "--image-endpoint", &ep])
        .arg("-benchmark")
        .arg(format!("-benchmarking-params-file={}", params.display()))
        .arg(format!("-benchmarking-output-dir={}", dir.display()))
        .args([
            // critest adds its own focus "benchmark" (ORed): the other
            // benchmarks are left out here.
            "--ginkgo.focus=basic operations on Container|lifecycle of PodSandbox",
            "--ginkgo.skip=container from scratch|operations on Image|listing Image",
            "--ginkgo.no-color",
        ])
        .output()
        .expect("run critest");
    assert!(
        out.status.success(),
        "critest -benchmark on {}:\n{}\n{}",
        target.name,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let containers = benchmark_file(&dir.join("container_benchmark_data.json"));
    let pods = benchmark_file(&dir.join("pod_benchmark_data.json"));
    for (ops, op, figure) in [
        (&containers, "CreateContainer", "CreateContainer"),
        (&containers, "StartContainer", "StartContainer"),
        (&containers, "StopContainer", "StopContainer"),
        (&containers, "RemoveContainer", "RemoveContainer"),
        (&pods, "CreatePod", "RunPodSandbox, pod net"),
        (&pods, "StopPod", "StopPodSandbox, pod net"),
    ] {
        let samples = ops
            .get(op)
            .unwrap_or_else(|| panic!("critest reported no {op}"));
        t.add(
            &target.row(&format!("critest {figure} p50 ({} samples)", samples.len())),
            "report",
            ms(p50_ns(samples)),
            None,
        );
    }
    let op = |ops: &HashMap<String, Vec<u64>>, name: &str| p50_ns(&ops[name]);
    f.create = op(&containers, "CreateContainer");
    f.start = op(&containers, "StartContainer");
    f.stop = op(&containers, "StopContainer");
    f.remove = op(&containers, "RemoveContainer");
    f.run_pod = op(&pods, "CreatePod");
    f.stop_pod = op(&pods, "StopPod");
    // Create and Start of the same sample, added.
    let both: Vec<u64> = containers["CreateContainer"]
        .iter()
        .zip(&containers["StartContainer"])
        .map(|(c, s)| c + s)
        .collect();
    f.create_start = p50_ns(&both);
    let _ = std::fs::remove_dir_all(&dir);
}

/// RunPodSandbox of `config` on `target`'s runtime handler: its id.
pub async fn run_pod(
    rt: &mut RuntimeServiceClient<Channel>,
    target: &Target,
    config: &cri::PodSandboxConfig,
) -> String {
    let name = config.metadata.as_ref().map_or("", |m| m.name.as_str());
    rt.run_pod_sandbox(cri::RunPodSandboxRequest {
        config: Some(config.clone()),
        runtime_handler: target.runtime_handler.clone(),
    })
    .await
    .unwrap_or_else(|e| panic!("RunPodSandbox {name}: {e}"))
    .into_inner()
    .pod_sandbox_id
}

/// ContainerStatus, verbose: its `info` document (podscope's names the
/// unit and its cgroup).
pub async fn verbose_info(rt: &mut RuntimeServiceClient<Channel>, id: &str) -> serde_json::Value {
    let st = rt
        .container_status(cri::ContainerStatusRequest {
            container_id: id.to_owned(),
            verbose: true,
        })
        .await
        .unwrap_or_else(|e| panic!("ContainerStatus {id}: {e}"))
        .into_inner();
    st.info
        .get("info")
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or_default()
}

pub fn pod_config(target: &Target, name: &str) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "bench-anchor".into(),
            attempt: 0,
        }),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: target.cgroup_parent.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The default container of our own pods: `sleep 3600` in critest's image.
pub fn container_config(name: &str) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: name.into(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: IMAGE.into(),
            ..Default::default()
        }),
        command: vec!["sleep".into(), "3600".into()],
        linux: Some(cri::LinuxContainerConfig::default()),
        ..Default::default()
    }
}

/// A pod (pod network) with `n` running containers: (pod id, container ids).
pub async fn pod_with_containers(
    rt: &mut RuntimeServiceClient<Channel>,
    target: &Target,
    name: &str,
    n: usize,
) -> (String, Vec<String>) {
    let config = pod_config(target, name);
    let pod = run_pod(rt, target, &config).await;
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        ids.push(run_container(rt, &pod, &config, container_config(&format!("c{i}"))).await);
    }
    (pod, ids)
}

/// CreateContainer and StartContainer: the container's id.
pub async fn run_container(
    rt: &mut RuntimeServiceClient<Channel>,
    pod: &str,
    pod_config: &cri::PodSandboxConfig,
    config: cri::ContainerConfig,
) -> String {
    let pod_name = pod_config
        .metadata
        .as_ref()
        .map_or("", |m| m.name.as_str())
        .to_owned();
    let id = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.to_owned(),
            config: Some(config),
            sandbox_config: Some(pod_config.clone()),
        })
        .await
        .unwrap_or_else(|e| panic!("CreateContainer in {pod_name}: {e}"))
        .into_inner()
        .container_id;
    rt.start_container(cri::StartContainerRequest {
        container_id: id.clone(),
    })
    .await
    .unwrap_or_else(|e| panic!("StartContainer in {pod_name}: {e}"));
    id
}

pub async fn remove_pods(rt: &mut RuntimeServiceClient<Channel>, pods: &[String]) {
    for pod in pods {
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: pod.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("StopPodSandbox: {e}"));
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest {
            pod_sandbox_id: pod.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("RemovePodSandbox: {e}"));
    }
}

/// ExecSync `true` as crictl users see it: `crictl exec -s <id> true`
/// minus `crictl version` (crictl's own start, connection and one call),
/// p50 of 20 each, interleaved.
pub async fn exec_sync(target: &Target, tools: &Tools, t: &mut Table, f: &mut Figures) {
    let mut rt = runtime_client(target).await;
    let (pod, ctrs) = pod_with_containers(&mut rt, target, "anchor-exec", 1).await;
    let (mut exec, mut version) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        version.push(tools.crictl(target, &["version"]).0);
        exec.push(tools.crictl(target, &["exec", "-s", &ctrs[0], "true"]).0);
    }
    let base = pct(&mut version, 0.5);
    let e50 = pct(&mut exec, 0.5);
    t.add(
        &target.row("ExecSync `true` p50 (crictl exec -s minus crictl version)"),
        "report",
        format!(
            "{} ({} - {})",
            ms(e50.saturating_sub(base)),
            ms(e50),
            ms(base)
        ),
        None,
    );
    f.exec = e50.saturating_sub(base);
    remove_pods(&mut rt, &[pod]).await;
}

/// A process seen in /proc: parent, name, command line.
pub struct Proc {
    pub ppid: u32,
    pub comm: String,
    pub cmdline: String,
}

pub fn processes() -> HashMap<u32, Proc> {
    let mut all = HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = stat[stat.find('(').map_or(0, |o| o + 1)..close].to_owned();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        all.insert(
            pid,
            Proc {
                ppid,
                comm,
                cmdline,
            },
        );
    }
    all
}

/// The pid in a verbose status's "info" document, where the runtime gives
/// one: containerd's `pid` (pause, or the container's process), podscope's
/// `init_pid` (the pod's init) or `main_pid` (the container's process).
pub fn info_pid(info: &HashMap<String, String>) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(info.get("info")?).ok()?;
    ["pid", "init_pid", "main_pid"]
        .iter()
        .find_map(|k| v[*k].as_u64())
        .map(|p| p as u32)
        .filter(|p| *p > 0)
}

/// The processes a runtime keeps for each pod besides its containers' own:
/// those whose command line names the pod or one of its containers (a
/// shim's `-id <pod>`, a pod init's `--id <pod>`) and the pid the pod's
/// status reports (containerd's pause), less every container process and
/// its descendants. Per pod, in the order of `pods`.
pub async fn runtime_processes(
    rt: &mut RuntimeServiceClient<Channel>,
    pods: &[(String, Vec<String>)],
) -> Vec<Vec<u32>> {
    let mut sandbox_pids = Vec::new();
    let mut container_pids = HashSet::new();
    for (pod, ctrs) in pods {
        let st = rt
            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: pod.clone(),
                verbose: true,
            })
            .await
            .unwrap()
            .into_inner();
        sandbox_pids.push(info_pid(&st.info));
        for c in ctrs {
            let st = rt
                .container_status(cri::ContainerStatusRequest {
                    container_id: c.clone(),
                    verbose: true,
                })
                .await
                .unwrap()
                .into_inner();
            if let Some(pid) = info_pid(&st.info) {
                container_pids.insert(pid);
            }
        }
    }
    let all = processes();
    let in_container = |mut pid: u32| {
        // Up the parent chain: a container's process or a descendant of one.
        for _ in 0..64 {
            if container_pids.contains(&pid) {
                return true;
            }
            match all.get(&pid) {
                Some(p) if p.ppid > 1 => pid = p.ppid,
                _ => return false,
            }
        }
        false
    };
    let me = std::process::id();
    pods.iter()
        .zip(sandbox_pids)
        .map(|((pod, ctrs), sandbox)| {
            let mut found: Vec<u32> = all
                .iter()
                .filter(|(pid, p)| {
                    **pid != me
                        && (Some(**pid) == sandbox
                            || p.cmdline.contains(pod.as_str())
                            || ctrs.iter().any(|c| p.cmdline.contains(c.as_str())))
                })
                .map(|(pid, _)| *pid)
                .filter(|pid| !in_container(*pid))
                .collect();
            found.sort();
            found
        })
        .collect()
}

/// The names of `pids` (each once, sorted), for a row's label.
pub fn names(pids: &[u32]) -> String {
    let all = processes();
    let mut n: Vec<String> = pids
        .iter()
        .filter_map(|p| all.get(p).map(|p| p.comm.clone()))
        .collect();
    n.sort();
    n.dedup();
    n.join(" + ")
}

/// 10 pods with one running container each: the runtime's processes per
/// pod, their RSS (and PSS), and their number per running container.
pub async fn footprint(target: &Target, t: &mut Table, f: &mut Figures) {
    let n = 10;
    let mut rt = runtime_client(target).await;
    let mut pods = Vec::new();
    for i in 0..n {
        pods.push(pod_with_containers(&mut rt, target, &format!("anchor-mem-{i}"), 1).await);
    }
    // Let the shims and pods settle (first-touch pages, lazy work).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let per_pod = runtime_processes(&mut rt, &pods).await;
    let (mut rss, mut pss, mut count) = (0u64, 0u64, 0usize);
    for pids in &per_pod {
        for pid in pids {
            let (r, p) = rss_pss(*pid);
            rss += r;
            pss += p;
        }
        count += pids.len();
    }
    let all: Vec<u32> = per_pod.iter().flatten().copied().collect();
    let what = names(&all);
    let mib = |kib: u64| kib as f64 / 1024.0 / n as f64;
    t.add(
        &target.row(&format!(
            "memory per pod outside its 1 running container ({what}), mean of {n}"
        )),
        "report",
        format!("{:.1} MiB RSS ({:.1} MiB PSS)", mib(rss), mib(pss)),
        None,
    );
    t.add(
        &target.row("processes per running container besides its own (1 per pod)"),
        "report",
        format!("{:.1} ({what})", count as f64 / n as f64),
        None,
    );
    f.pod_rss_kib = rss as f64 / n as f64;
    f.pod_pss_kib = pss as f64 / n as f64;
    f.pod_processes = what;
    let ids: Vec<String> = pods.into_iter().map(|(p, _)| p).collect();
    remove_pods(&mut rt, &ids).await;
}

/// 100 containers in 25 pods (pod network), started by 4 clients at once,
/// each with its own connection and its share of the pods (pod i to client
/// i mod 4): containers started per second, from the first RunPodSandbox
/// to the last StartContainer.
pub async fn concurrent_starts(target: &Target, t: &mut Table, f: &mut Figures) {
    let (pods_n, per_pod, clients) = (25usize, 4usize, 4usize);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let mut rt = runtime_client(&target).await;
            let mut mine = Vec::new();
            for i in (c..pods_n).step_by(clients) {
                mine.push(
                    pod_with_containers(&mut rt, &target, &format!("anchor-many-{i}"), per_pod)
                        .await,
                );
            }
            mine
        }));
    }
    let mut pods = Vec::new();
    for task in tasks {
        pods.extend(task.await.unwrap());
    }
    let took = t0.elapsed();
    let started = pods.iter().map(|(_, c)| c.len()).sum::<usize>();
    assert_eq!(started, pods_n * per_pod);
    let rate = started as f64 / took.as_secs_f64();
    f.start_rate = rate;
    t.add(
        &target.row(&format!(
            "{started} containers in {pods_n} pods by {clients} gRPC clients: started/s (RunPodSandbox included)"
        )),
        "report",
        format!("{rate:.1} /s ({:.1} s)", took.as_secs_f64()),
        None,
    );
    let mut rt = runtime_client(target).await;
    let per = runtime_processes(&mut rt, &pods).await;
    let count: usize = per.iter().map(Vec::len).sum();
    t.add(
        &target.row(&format!(
            "processes per running container besides its own ({per_pod} per pod)"
        )),
        "report",
        format!("{:.2}", count as f64 / started as f64),
        None,
    );
    let ids: Vec<String> = pods.into_iter().map(|(p, _)| p).collect();
    remove_pods(&mut rt, &ids).await;
}

/// Is the bench's big image in the harness registry? (images.rs pushes it.)
pub fn big_image_pushed() -> bool {
    Command::new("curl")
        .args(["-sf", "-o", "/dev/null", "-I"])
        .args([
            "-H",
            "Accept: application/vnd.oci.image.manifest.v1+json",
            BIG_MANIFEST,
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// The cold pull's row for `target`.
pub fn cold_pull_figure(target: &Target) -> String {
    target.row("cold pull of the bench's 52 MiB image (crictl pull), median of 3")
}

/// `crictl rmi` of the bench's big image (absent already is fine):
/// containerd's CRI RemoveImage collects its content and snapshots
/// synchronously; podscope's store collects after the call returns (the
/// caller waits for it).
pub fn forget_big(target: &Target, tools: &Tools) {
    let ep = target.endpoint();
    let _ = Command::new(&tools.crictl)
        .args([
            "--runtime-endpoint",
            &ep,
            "--image-endpoint",
            &ep,
            "rmi",
            BIG,
        ])
        .output();
}

/// One cold pull of the bench's big image with crictl: its wall time.
pub fn pull_big(target: &Target, tools: &Tools) -> Duration {
    tools.crictl(target, &["pull", BIG]).0
}
