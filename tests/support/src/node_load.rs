//! A full node's load through the CRI, as kubelet makes it: `pods` pods
//! with `per_pod` containers each, created by `clients` gRPC clients at
//! once (each with its own connection and every `clients`-th pod), then
//! drained: every pod stopped and removed by as many clients at once.
//!
//! One source for `make load` (tests/load/main.rs, which includes this
//! file and asserts on what it returns) and `make bench`'s full-node rows
//! (`fullnode.rs`), which run it against containerd 1.6, containerd 2.3
//! and podscope in the same run. It takes only a CRI endpoint.
//!
//! Every call is timed and its outcome kept. With `Retry::Unavailable`
//! (the rounds with a daemon restarted in the middle) a call that fails
//! with UNAVAILABLE is made again, as kubelet would, and its effect is
//! made sure of: a retried CreateContainer that finds its name taken
//! looks the container up; a retried StartContainer that finds it
//! running counts as done. Anything else is a failure.

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic::Code;

/// The image every container runs (critest's; pulled before a burst).
pub const IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.29-2";
/// kubelet's default maxPods, and the containers and clients the issue's
/// node had.
pub const FULL_NODE: Shape = Shape {
    pods: 110,
    per_pod: 4,
    clients: 8,
    annotation_bytes: 0,
};
/// The annotation a pod of `Shape::annotation_bytes` carries (as kubectl's
/// last-applied-configuration of a large pod spec would).
pub const BIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub pods: usize,
    pub per_pod: usize,
    pub clients: usize,
    /// Bytes of annotations (keys and values) each pod carries, in one
    /// `BIG_ANNOTATION`; 0 for none.
    pub annotation_bytes: usize,
}

/// A CRI runtime: its socket, the cgroup parent of the pods made there
/// ("" for its default) and the runtime handler ("" for its default).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub socket: PathBuf,
    pub cgroup_parent: String,
    pub runtime_handler: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Any failure is final.
    Never,
    /// UNAVAILABLE is retried (every 100 ms, for up to a minute).
    Unavailable,
}

/// One CRI call.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: &'static str,
    pub took: Duration,
    /// Ok, or the code and message it failed with (the last try's).
    pub outcome: Result<(), (Code, String)>,
    /// The failures that were retried before it.
    pub retried: Vec<(Code, String)>,
}

/// A pod made by a burst: its name, its id, its containers' ids.
#[derive(Debug, Clone)]
pub struct PodRun {
    pub name: String,
    pub id: String,
    pub containers: Vec<String>,
}

/// What one burst did.
#[derive(Debug, Default)]
pub struct Burst {
    pub took: Duration,
    pub calls: Vec<Call>,
    pub pods: Vec<PodRun>,
}

impl Burst {
    pub fn failures(&self) -> Vec<&Call> {
        self.calls.iter().filter(|c| c.outcome.is_err()).collect()
    }

    /// Calls that failed at least once and then succeeded.
    pub fn retried(&self) -> Vec<&Call> {
        self.calls
            .iter()
            .filter(|c| !c.retried.is_empty() && c.outcome.is_ok())
            .collect()
    }

    /// Every failure, final or retried, with its code.
    pub fn codes(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for c in &self.calls {
            for (code, _) in c.retried.iter().chain(c.outcome.as_ref().err()) {
                *out.entry(format!("{code:?}")).or_default() += 1;
            }
        }
        out
    }

    pub fn containers_running(&self) -> usize {
        self.pods.iter().map(|p| p.containers.len()).sum()
    }

    /// p50 and p99 of each method's successful calls.
    pub fn latencies(&self) -> BTreeMap<&'static str, (Duration, Duration)> {
        let mut by: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
        for c in self.calls.iter().filter(|c| c.outcome.is_ok()) {
            by.entry(c.method).or_default().push(c.took);
        }
        by.into_iter()
            .map(|(m, mut v)| {
                v.sort();
                let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
                (m, (at(0.5), at(0.99)))
            })
            .collect()
    }
}

pub async fn client(ep: &Endpoint) -> RuntimeServiceClient<Channel> {
    let channel = cri_api::channel(&ep.socket)
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", ep.socket.display()));
    RuntimeServiceClient::new(channel)
}

/// kubelet's pod: metadata, its log directory (made here first, as
/// kubelet makes it), the cgroup parent.
pub fn pod_config(ep: &Endpoint, prefix: &str, i: usize) -> cri::PodSandboxConfig {
    let name = format!("{prefix}-{i}");
    let uid = format!("{prefix}-uid-{i}");
    let log_directory = format!("/var/log/pods/load_{name}_{uid}");
    std::fs::create_dir_all(&log_directory)
        .unwrap_or_else(|e| panic!("create {log_directory}: {e}"));
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name,
            uid,
            namespace: "load".into(),
            attempt: 0,
        }),
        hostname: format!("{prefix}-{i}"),
        log_directory,
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: ep.cgroup_parent.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A container that runs until it is stopped, with a log file.
pub fn container_config(j: usize) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: format!("c{j}"),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: IMAGE.into(),
            ..Default::default()
        }),
        command: vec!["sleep".into(), "3600".into()],
        log_path: format!("c{j}.log"),
        linux: Some(cri::LinuxContainerConfig::default()),
        ..Default::default()
    }
}

/// One call, timed, retried on UNAVAILABLE when asked; `f` is told
/// whether it is a retry (and then decides whether a failure means the
/// earlier try did it).
async fn timed<T, F, Fut>(
    calls: &mut Vec<Call>,
    method: &'static str,
    retry: Retry,
    mut f: F,
) -> Option<T>
where
    F: FnMut(bool) -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let t0 = Instant::now();
    let mut retried = Vec::new();
    loop {
        match f(!retried.is_empty()).await {
            Ok(v) => {
                calls.push(Call {
                    method,
                    took: t0.elapsed(),
                    outcome: Ok(()),
                    retried,
                });
                return Some(v);
            }
            Err(s)
                if retry == Retry::Unavailable
                    && s.code() == Code::Unavailable
                    && t0.elapsed() < Duration::from_secs(60) =>
            {
                retried.push((s.code(), s.message().to_owned()));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(s) => {
                calls.push(Call {
                    method,
                    took: t0.elapsed(),
                    outcome: Err((s.code(), s.message().to_owned())),
                    retried,
                });
                return None;
            }
        }
    }
}

/// The container named `name` in `pod`, if there is one.
async fn find_container(
    rt: &mut RuntimeServiceClient<Channel>,
    pod: &str,
    name: &str,
) -> Result<String, tonic::Status> {
    let list = rt
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                pod_sandbox_id: pod.to_owned(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner();
    list.containers
        .into_iter()
        .find(|c| c.metadata.as_ref().is_some_and(|m| m.name == name))
        .map(|c| c.id)
        .ok_or_else(|| tonic::Status::not_found(format!("no container {name} in {pod}")))
}

/// Whether container `id` runs (a retried start that finds it so).
async fn running(rt: &mut RuntimeServiceClient<Channel>, id: &str) -> bool {
    rt.container_status(cri::ContainerStatusRequest {
        container_id: id.to_owned(),
        verbose: false,
    })
    .await
    .ok()
    .and_then(|r| r.into_inner().status)
    .is_some_and(|s| s.state == cri::ContainerState::ContainerRunning as i32)
}

/// One client's share of a create burst.
async fn create_share(
    ep: Endpoint,
    prefix: String,
    shape: Shape,
    share: usize,
    retry: Retry,
) -> (Vec<Call>, Vec<PodRun>) {
    let rt = client(&ep).await;
    let (mut calls, mut pods) = (Vec::new(), Vec::new());
    for i in (share..shape.pods).step_by(shape.clients) {
        let mut config = pod_config(&ep, &prefix, i);
        if shape.annotation_bytes > 0 {
            let value = "x".repeat(shape.annotation_bytes - BIG_ANNOTATION.len());
            config.annotations.insert(BIG_ANNOTATION.into(), value);
        }
        let name = config.metadata.as_ref().map(|m| m.name.clone()).unwrap();
        let pod = timed(&mut calls, "RunPodSandbox", retry, |_| {
            let mut rt = rt.clone();
            let req = cri::RunPodSandboxRequest {
                config: Some(config.clone()),
                runtime_handler: ep.runtime_handler.clone(),
            };
            async move { Ok(rt.run_pod_sandbox(req).await?.into_inner().pod_sandbox_id) }
        })
        .await;
        let Some(pod) = pod else { continue };
        let mut containers = Vec::new();
        for j in 0..shape.per_pod {
            let cname = format!("c{j}");
            let id = timed(&mut calls, "CreateContainer", retry, |again| {
                let mut rt = rt.clone();
                let req = cri::CreateContainerRequest {
                    pod_sandbox_id: pod.clone(),
                    config: Some(container_config(j)),
                    sandbox_config: Some(config.clone()),
                };
                let (pod, cname) = (pod.clone(), cname.clone());
                async move {
                    match rt.create_container(req).await {
                        Ok(r) => Ok(r.into_inner().container_id),
                        // The earlier try made it: the same name is taken.
                        Err(s) if again && s.code() == Code::AlreadyExists => {
                            find_container(&mut rt, &pod, &cname).await
                        }
                        Err(s) => Err(s),
                    }
                }
            })
            .await;
            let Some(id) = id else { continue };
            let started = timed(&mut calls, "StartContainer", retry, |again| {
                let mut rt = rt.clone();
                let id = id.clone();
                async move {
                    match rt
                        .start_container(cri::StartContainerRequest {
                            container_id: id.clone(),
                        })
                        .await
                    {
                        Ok(_) => Ok(()),
                        // The earlier try started it.
                        Err(s) if again && running(&mut rt, &id).await => {
                            let _ = s;
                            Ok(())
                        }
                        Err(s) => Err(s),
                    }
                }
            })
            .await;
            if started.is_some() {
                containers.push(id);
            }
        }
        pods.push(PodRun {
            name,
            id: pod,
            containers,
        });
    }
    (calls, pods)
}

/// `shape` pods made at once (names `<prefix>-<i>`), each with its
/// containers.
pub async fn create(ep: &Endpoint, prefix: &str, shape: Shape, retry: Retry) -> Burst {
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..shape.clients)
        .map(|share| {
            tokio::spawn(create_share(
                ep.clone(),
                prefix.to_owned(),
                shape,
                share,
                retry,
            ))
        })
        .collect();
    let mut burst = Burst::default();
    for t in tasks {
        let (calls, pods) = t.await.expect("a client's task");
        burst.calls.extend(calls);
        burst.pods.extend(pods);
    }
    burst.took = t0.elapsed();
    burst
}

/// Every pod of `pods` stopped and removed, `clients` at once.
pub async fn drain(ep: &Endpoint, pods: &[PodRun], clients: usize, retry: Retry) -> Burst {
    let t0 = Instant::now();
    let ids: Vec<String> = pods.iter().map(|p| p.id.clone()).collect();
    let tasks: Vec<_> = (0..clients)
        .map(|share| {
            let ep = ep.clone();
            let mine: Vec<String> = ids.iter().skip(share).step_by(clients).cloned().collect();
            tokio::spawn(async move {
                let rt = client(&ep).await;
                let mut calls = Vec::new();
                for id in mine {
                    for method in ["StopPodSandbox", "RemovePodSandbox"] {
                        timed(&mut calls, method, retry, |_| {
                            let mut rt = rt.clone();
                            let id = id.clone();
                            async move {
                                if method == "StopPodSandbox" {
                                    rt.stop_pod_sandbox(cri::StopPodSandboxRequest {
                                        pod_sandbox_id: id,
                                    })
                                    .await
                                    .map(drop)
                                } else {
                                    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest {
                                        pod_sandbox_id: id,
                                    })
                                    .await
                                    .map(drop)
                                }
                            }
                        })
                        .await;
                    }
                }
                calls
            })
        })
        .collect();
    let mut burst = Burst::default();
    for t in tasks {
        burst.calls.extend(t.await.expect("a client's task"));
    }
    burst.took = t0.elapsed();
    burst
}

/// A burst's figures in one line: time, calls, failures by code, p50/p99
/// of each method.
pub fn summary(b: &Burst) -> String {
    let lat: Vec<String> = b
        .latencies()
        .iter()
        .map(|(m, (p50, p99))| {
            format!(
                "{m} {:.1}/{:.1} ms",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            )
        })
        .collect();
    format!(
        "{:.1} s, {} calls, {} failed, {} retried (codes {:?}); p50/p99: {}",
        b.took.as_secs_f64(),
        b.calls.len(),
        b.failures().len(),
        b.retried().len(),
        b.codes(),
        lat.join(", ")
    )
}
