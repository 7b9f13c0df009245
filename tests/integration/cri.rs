//! The CRI frontend, driven by a gRPC client built from the same bindings
//! kubelet's protocol comes from, through /run/podscope/cri.sock (socket
//! activation by podscope-cri.socket, as installed).

use cri_api::v1 as cri;
use cri_api::v1::image_service_client::ImageServiceClient;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use podscope_test_support::harness::*;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic::Code;

pub(crate) const SOCKET: &str = "/run/podscope/cri.sock";

async fn clients_at(path: &str) -> (RuntimeServiceClient<Channel>, ImageServiceClient<Channel>) {
    let ch = cri_api::channel(Path::new(path))
        .await
        .unwrap_or_else(|e| panic!("connect to {path}: {e}"));
    (
        RuntimeServiceClient::new(ch.clone()),
        ImageServiceClient::new(ch),
    )
}

pub(crate) async fn runtime() -> RuntimeServiceClient<Channel> {
    clients_at(SOCKET).await.0
}

pub fn pod_config(name: &str, host_network: bool) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "cri-test".into(),
            attempt: 0,
        }),
        hostname: name.into(),
        log_directory: format!("/var/log/pods/cri-test_{name}_uid-{name}"),
        dns_config: Some(cri::DnsConfig {
            servers: vec!["10.96.0.10".into()],
            searches: vec!["cri-test.svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        }),
        port_mappings: Vec::new(),
        labels: HashMap::from([("app".into(), "web".into()), ("pod".into(), name.into())]),
        annotations: HashMap::from([("note".into(), "from the CRI test".into())]),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: String::new(),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: if host_network {
                        cri::NamespaceMode::Node
                    } else {
                        cri::NamespaceMode::Pod
                    } as i32,
                    pid: cri::NamespaceMode::Container as i32,
                    ipc: cri::NamespaceMode::Pod as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            sysctls: HashMap::new(),
            overhead: None,
            resources: Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: 256 << 20,
                cpu_quota: -1,
                ..Default::default()
            }),
        }),
        windows: None,
    }
}

pub fn run_request(config: cri::PodSandboxConfig) -> cri::RunPodSandboxRequest {
    cri::RunPodSandboxRequest {
        config: Some(config),
        runtime_handler: String::new(),
    }
}

async fn run(c: &mut RuntimeServiceClient<Channel>, name: &str, host: bool) -> String {
    c.run_pod_sandbox(run_request(pod_config(name, host)))
        .await
        .unwrap_or_else(|e| panic!("RunPodSandbox {name}: {e:?}"))
        .into_inner()
        .pod_sandbox_id
}

async fn status(c: &mut RuntimeServiceClient<Channel>, id: &str) -> cri::PodSandboxStatusResponse {
    c.pod_sandbox_status(cri::PodSandboxStatusRequest {
        pod_sandbox_id: id.into(),
        verbose: true,
    })
    .await
    .unwrap()
    .into_inner()
}

async fn list(
    c: &mut RuntimeServiceClient<Channel>,
    id: &str,
    state: Option<cri::PodSandboxState>,
    labels: &[(&str, &str)],
) -> Vec<String> {
    let filter = cri::PodSandboxFilter {
        id: id.into(),
        state: state.map(|s| cri::PodSandboxStateValue { state: s as i32 }),
        label_selector: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    c.list_pod_sandbox(cri::ListPodSandboxRequest {
        filter: Some(filter),
    })
    .await
    .unwrap()
    .into_inner()
    .items
    .into_iter()
    .map(|p| p.id)
    .collect()
}

async fn pod_stats(
    c: &mut RuntimeServiceClient<Channel>,
    id: &str,
) -> Result<cri::PodSandboxStats, tonic::Status> {
    let r = c
        .pod_sandbox_stats(cri::PodSandboxStatsRequest {
            pod_sandbox_id: id.into(),
        })
        .await?;
    Ok(r.into_inner().stats.expect("stats in a successful answer"))
}

async fn stop(c: &mut RuntimeServiceClient<Channel>, id: &str) -> Result<(), tonic::Status> {
    c.stop_pod_sandbox(cri::StopPodSandboxRequest {
        pod_sandbox_id: id.into(),
    })
    .await
    .map(|_| ())
}

async fn remove(c: &mut RuntimeServiceClient<Channel>, id: &str) -> Result<(), tonic::Status> {
    c.remove_pod_sandbox(cri::RemovePodSandboxRequest {
        pod_sandbox_id: id.into(),
    })
    .await
    .map(|_| ())
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_runtime_answers_version_status_config_and_image_fs() {
    let (mut c, mut img) = clients_at(SOCKET).await;
    let v = c
        .version(cri::VersionRequest {
            version: "v1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.runtime_name, "podscope");
    assert_eq!(v.runtime_api_version, "v1");
    assert_eq!(v.runtime_version, env!("CARGO_PKG_VERSION"));
    // The socket is the one systemd made, with the mode the unit sets.
    assert_eq!(
        sh("systemctl is-active podscope-cri.socket podscope-cri.service").trim(),
        "active\nactive"
    );
    assert_eq!(sh(&format!("stat -c %a {SOCKET}")).trim(), "660");

    let st = c
        .status(cri::StatusRequest { verbose: true })
        .await
        .unwrap()
        .into_inner();
    let conds = st.status.unwrap().conditions;
    for t in ["RuntimeReady", "NetworkReady"] {
        let cond = conds.iter().find(|x| x.r#type == t).unwrap();
        assert!(cond.status, "{t}: {cond:?}");
    }
    let handlers: Vec<&str> = st
        .runtime_handlers
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    // The harness's handlers: Debian's crun (the default, also as "")
    // and runc, and crun 1.27 as crun-userns, the one with idmapped
    // mounts.
    assert_eq!(handlers, ["", "crun", "crun-userns", "runc"]);
    let userns: Vec<bool> = st
        .runtime_handlers
        .iter()
        .map(|h| h.features.unwrap().user_namespaces)
        .collect();
    assert_eq!(userns, [false, false, true, false]);
    let info: serde_json::Value = serde_json::from_str(&st.info["info"]).unwrap();
    assert_eq!(info["state_dir"], "/var/lib/podscope");
    // Where the roots live, as containerd names it (critest reads it).
    let config: serde_json::Value = serde_json::from_str(&st.info["config"]).unwrap();
    assert_eq!(config["stateDir"], "/var/lib/podscope/containers");

    let rc = c
        .runtime_config(cri::RuntimeConfigRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        rc.linux.unwrap().cgroup_driver,
        cri::CgroupDriver::Systemd as i32
    );

    // An image in the store, so it has bytes to count (on tmpfs, as in
    // the harness, empty directories count none).
    img.pull_image(cri::PullImageRequest {
        image: Some(cri::ImageSpec {
            image: "busybox".into(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    let fs = img
        .image_fs_info(cri::ImageFsInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    let u = &fs.image_filesystems[0];
    assert_eq!(
        u.fs_id.as_ref().unwrap().mountpoint,
        "/var/lib/podscope/images"
    );
    let du: u64 = sh("du -sB1 /var/lib/podscope/images | cut -f1")
        .trim()
        .parse()
        .unwrap();
    let used = u.used_bytes.unwrap().value;
    // du is taken a moment later; the state directory barely changes.
    assert!(
        used > 0 && used.abs_diff(du) <= du / 2 + 65536,
        "{used} vs du {du}"
    );
    assert!(u.inodes_used.unwrap().value >= 2);
    // The containers' writable layers, on the images' filesystem: the
    // same mountpoint, or kubelet would take it for a split disk.
    let c = &fs.container_filesystems[0];
    assert_eq!(
        c.fs_id.as_ref().unwrap().mountpoint,
        "/var/lib/podscope/images"
    );
    assert!(c.used_bytes.is_some() && c.inodes_used.is_some(), "{c:?}");
    img.remove_image(cri::RemoveImageRequest {
        image: Some(cri::ImageSpec {
            image: "busybox".into(),
            ..Default::default()
        }),
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_pod_lifecycle_in_kubelet_order() {
    let mut c = runtime().await;
    let name = uniq("cri-life");
    let log_dir = format!("/var/log/pods/cri-test_{name}_uid-{name}");
    assert!(!Path::new(&log_dir).exists());
    let t0 = now_ns();
    let id = run(&mut c, &name, false).await;
    assert!(Path::new(&log_dir).is_dir(), "log_directory is created");

    let st = status(&mut c, &id).await;
    let s = st.status.unwrap();
    assert_eq!(s.id, id);
    assert_eq!(s.state, cri::PodSandboxState::SandboxReady as i32);
    let md = s.metadata.unwrap();
    assert_eq!(
        (md.name.as_str(), md.namespace.as_str()),
        (name.as_str(), "cri-test")
    );
    assert!(
        s.created_at >= t0 - 1_000_000_000 && s.created_at <= now_ns(),
        "ns since the epoch"
    );
    let ip = s.network.unwrap().ip;
    assert!(ip.starts_with("10.233.0."), "{ip}");
    let ns = s.linux.unwrap().namespaces.unwrap().options.unwrap();
    assert_eq!(ns.network, cri::NamespaceMode::Pod as i32);
    assert_eq!(ns.pid, cri::NamespaceMode::Container as i32);
    assert_eq!(s.labels["app"], "web");
    assert_eq!(s.annotations["note"], "from the CRI test");
    let info: serde_json::Value = serde_json::from_str(&st.info["info"]).unwrap();
    assert_eq!(info["unit"], format!("podscope-{id}.scope"));
    assert_eq!(info["dns"]["options"][0], "ndots:5");
    assert_eq!(
        sh(&format!("systemctl is-active podscope-{id}.scope")).trim(),
        "active"
    );
    // kubelet resized the pod (its own slice) and says so: recorded, and
    // the scope's limit follows, as RunPodSandbox's did.
    c.update_pod_sandbox_resources(cri::UpdatePodSandboxResourcesRequest {
        pod_sandbox_id: id.clone(),
        overhead: None,
        resources: Some(cri::LinuxContainerResources {
            memory_limit_in_bytes: 512 << 20,
            cpu_quota: -1,
            ..Default::default()
        }),
    })
    .await
    .unwrap();
    let info: serde_json::Value =
        serde_json::from_str(&status(&mut c, &id).await.info["info"]).unwrap();
    assert_eq!(info["resources"]["memory_limit_in_bytes"], 512u64 << 20);
    assert_eq!(
        sh(&format!("systemctl show -P MemoryMax podscope-{id}.scope")).trim(),
        (512u64 << 20).to_string()
    );

    // List with each filter.
    assert!(list(&mut c, "", None, &[]).await.contains(&id));
    assert_eq!(list(&mut c, &id[..12], None, &[]).await, vec![id.clone()]);
    let ready = list(&mut c, "", Some(cri::PodSandboxState::SandboxReady), &[]).await;
    assert!(ready.contains(&id));
    let notready = list(&mut c, "", Some(cri::PodSandboxState::SandboxNotready), &[]).await;
    assert!(!notready.contains(&id));
    assert_eq!(
        list(&mut c, "", None, &[("pod", &name)]).await,
        vec![id.clone()]
    );
    assert!(list(&mut c, "", None, &[("pod", &name), ("app", "db")])
        .await
        .is_empty());

    // Stats from the scope's cgroup and the pod's interfaces. The init
    // sleeps and was charged elsewhere before it joined the scope, so put a
    // worker into the scope that uses some CPU and 24 MiB of memory.
    let worker = sh("(sleep 0.5; exec python3 -c 'x = bytearray(24 << 20); [sum(range(300000)) for _ in range(20)]; import time; time.sleep(60)') >/dev/null 2>&1 & echo $!");
    sh(&format!(
        "busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 \
         org.freedesktop.systemd1.Manager AttachProcessesToUnit ssau podscope-{id}.scope / 1 {}",
        worker.trim()
    ));
    std::thread::sleep(Duration::from_millis(2500));
    let stats = pod_stats(&mut c, &id).await.unwrap();
    assert_eq!(stats.attributes.as_ref().unwrap().id, id);
    let linux = stats.linux.unwrap();
    let cpu = linux.cpu.unwrap();
    assert!(
        cpu.usage_core_nano_seconds.unwrap().value > 10_000_000,
        "{cpu:?}"
    );
    let mem = linux.memory.unwrap();
    assert!(mem.working_set_bytes.unwrap().value >= 24 << 20, "{mem:?}");
    // A 512 MiB limit (raised from 256 by UpdatePodSandboxResources
    // above), so what is left is reported.
    assert!(mem.available_bytes.unwrap().value <= 512 << 20);
    assert_eq!(linux.process.unwrap().process_count.unwrap().value, 2);
    let net = linux.network.unwrap();
    assert_eq!(net.default_interface.unwrap().name, "eth0");
    let all = c
        .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest {
            filter: Some(cri::PodSandboxStatsFilter {
                id: String::new(),
                label_selector: HashMap::from([("pod".into(), name.clone())]),
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .stats;
    assert_eq!(all.len(), 1);
    // A second sample: now there is a rate too.
    let cpu = all[0].linux.as_ref().unwrap().cpu.unwrap();
    assert!(cpu.usage_nano_cores.is_some(), "{cpu:?}");

    // Stop, stop again, remove, remove again, list empty.
    stop(&mut c, &id).await.unwrap();
    let s = status(&mut c, &id).await.status.unwrap();
    assert_eq!(s.state, cri::PodSandboxState::SandboxNotready as i32);
    assert!(!Path::new(&format!("/run/netns/podscope-{id}")).exists());
    assert!(
        list(&mut c, "", Some(cri::PodSandboxState::SandboxNotready), &[])
            .await
            .contains(&id)
    );
    let e = pod_stats(&mut c, &id).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    stop(&mut c, &id).await.unwrap();
    remove(&mut c, &id).await.unwrap();
    remove(&mut c, &id).await.unwrap();
    assert!(list(&mut c, &id, None, &[]).await.is_empty());
    let e = c
        .pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: id.clone(),
            verbose: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    // Stop and Remove of an id never seen are success, as CRI says.
    let unknown = podscope_api::domain::SandboxId::random()
        .as_str()
        .to_owned();
    stop(&mut c, &unknown).await.unwrap();
    remove(&mut c, &unknown).await.unwrap();
    // And of ids no pod, container or image could have (critest 1.36
    // passes UUIDs): nothing is there, so the call is done.
    let uuid = "df2ac263-6a3c-4c36-9d5e-4a1b2b1e7f00";
    stop(&mut c, uuid).await.unwrap();
    remove(&mut c, uuid).await.unwrap();
    c.stop_container(cri::StopContainerRequest {
        container_id: uuid.into(),
        timeout: 0,
    })
    .await
    .unwrap();
    c.remove_container(cri::RemoveContainerRequest {
        container_id: uuid.into(),
    })
    .await
    .unwrap();
    let (_, mut img) = clients_at(SOCKET).await;
    for name in [uuid, "Not A Reference!", "sha256:0123"] {
        img.remove_image(cri::RemoveImageRequest {
            image: Some(cri::ImageSpec {
                image: name.into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap_or_else(|e| panic!("RemoveImage {name:?}: {e:?}"));
    }
    // An empty id names nothing at all: still an invalid argument.
    let (code, _) = code_of(stop(&mut c, "").await);
    assert_eq!(code, Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_host_network_pod_has_no_address_and_no_namespace() {
    let mut c = runtime().await;
    let name = uniq("cri-host");
    let id = run(&mut c, &name, true).await;
    let s = status(&mut c, &id).await.status.unwrap();
    assert_eq!(s.state, cri::PodSandboxState::SandboxReady as i32);
    assert_eq!(s.network.unwrap().ip, "");
    let ns = s.linux.unwrap().namespaces.unwrap().options.unwrap();
    assert_eq!(ns.network, cri::NamespaceMode::Node as i32);
    assert!(!Path::new(&format!("/run/netns/podscope-{id}")).exists());
    let stats = pod_stats(&mut c, &id).await.unwrap();
    let linux = stats.linux.unwrap();
    assert!(
        linux.network.is_none(),
        "the host's interfaces are not the pod's"
    );
    assert!(linux.cpu.is_some());
    stop(&mut c, &id).await.unwrap();
    remove(&mut c, &id).await.unwrap();
}

fn code_of<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> (Code, String) {
    let e = r.unwrap_err();
    (e.code(), e.message().to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_errors_map_to_grpc_codes() {
    let mut c = runtime().await;
    let (m, _conn) = manager().await;

    // INVALID_ARGUMENT, named, before anything reaches the daemon.
    let before = m.list(&ListFilter::default()).await.unwrap().len();
    let mut cfg = pod_config(&uniq("cri-bad"), true);
    cfg.metadata = None;
    let (code, msg) = code_of(c.run_pod_sandbox(run_request(cfg)).await);
    assert_eq!(
        (code, msg.as_str()),
        (Code::InvalidArgument, "config.metadata: required")
    );
    let mut cfg = pod_config("", true);
    cfg.metadata.as_mut().unwrap().name = String::new();
    let (code, msg) = code_of(c.run_pod_sandbox(run_request(cfg)).await);
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.starts_with("config.metadata.name:"), "{msg}");
    let mut cfg = pod_config(&uniq("cri-big"), true);
    cfg.annotations
        .insert("huge".into(), "x".repeat(300 * 1024));
    let (code, msg) = code_of(c.run_pod_sandbox(run_request(cfg)).await);
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.starts_with("config.annotations"), "{msg}");
    let mut req = run_request(pod_config(&uniq("cri-rh"), true));
    req.runtime_handler = "no-such-handler".into();
    let (code, msg) = code_of(c.run_pod_sandbox(req).await);
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.contains("no-such-handler"), "{msg}");
    let (code, msg) = code_of(
        c.pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: "not an id".into(),
            verbose: false,
        })
        .await,
    );
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.starts_with("pod_sandbox_id:"), "{msg}");
    assert_eq!(m.list(&ListFilter::default()).await.unwrap().len(), before);

    // NOT_FOUND.
    let (code, _) = code_of(
        c.pod_sandbox_status(cri::PodSandboxStatusRequest {
            pod_sandbox_id: podscope_api::domain::SandboxId::random().as_str().into(),
            verbose: false,
        })
        .await,
    );
    assert_eq!(code, Code::NotFound);

    // ALREADY_EXISTS: the same pod and attempt, stopped.
    let name = uniq("cri-dup");
    let id = run(&mut c, &name, true).await;
    stop(&mut c, &id).await.unwrap();
    let (code, msg) = code_of(
        c.run_pod_sandbox(run_request(pod_config(&name, true)))
            .await,
    );
    assert_eq!(code, Code::AlreadyExists, "{msg}");
    assert!(msg.contains(&id), "{msg}");

    // FAILED_PRECONDITION: stats of a stopped pod.
    let (code, _) = code_of(pod_stats(&mut c, &id).await);
    assert_eq!(code, Code::FailedPrecondition);
    remove(&mut c, &id).await.unwrap();

    // NOT_FOUND from a streaming call, at the call, not at the upgrade.
    let (code, msg) = code_of(
        c.port_forward(cri::PortForwardRequest {
            pod_sandbox_id: id.clone(),
            port: vec![80],
        })
        .await,
    );
    assert_eq!(code, Code::NotFound, "{msg}");
    assert!(msg.contains(&id), "{msg}");
    // UNIMPLEMENTED, saying so (CRI v0.36's list streams).
    let (code, msg) = code_of(
        c.stream_pod_sandboxes(cri::StreamPodSandboxesRequest::default())
            .await,
    );
    assert_eq!(code, Code::Unimplemented);
    assert!(msg.contains("not implemented"), "{msg}");
    let (_, mut img) = clients_at(SOCKET).await;
    let (code, msg) = code_of(img.pull_image(cri::PullImageRequest::default()).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");

    // PERMISSION_DENIED: a frontend run by an unprivileged user is refused
    // by polkit on the daemon's side.
    let dir = "/run/podscope-test/cri-nobody";
    let sock = format!("{dir}/cri.sock");
    // A socket left by an earlier run would pass for the new server's.
    sh(&format!(
        "mkdir -p {dir} && chown nobody {dir} && rm -f {sock}"
    ));
    sh(&format!(
        "{AS_NOBODY} /usr/libexec/podscope/podscope-cri --listen {sock} >/dev/null 2>&1 & echo $! > {dir}/pid"
    ));
    wait_until(Duration::from_secs(10), || Path::new(&sock).exists());
    let (mut nobody, _) = clients_at(&sock).await;
    let mut cfg = pod_config(&uniq("cri-nobody"), true);
    cfg.log_directory = String::new();
    let (code, msg) = code_of(nobody.run_pod_sandbox(run_request(cfg)).await);
    sh(&format!("kill $(cat {dir}/pid)"));
    assert_eq!(code, Code::PermissionDenied, "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_plugin_failure_is_internal_and_leaves_nothing() {
    let log = fresh_fixture_log("cri-fail");
    let dir = cni_conf_dir(
        "cri-fail",
        &[(
            "10-fail.conflist",
            fixture_conflist("1.0.0", "cri-fail-net", "fail", "10.250.0.9/24", &log),
        )],
    );
    with_config(&cni_config(&dir, 5000), || async {
        let mut c = runtime().await;
        let (m, _conn) = manager().await;
        let name = uniq("cri-fail");
        let (code, msg) = code_of(
            c.run_pod_sandbox(run_request(pod_config(&name, false)))
                .await,
        );
        assert_eq!(code, Code::Internal, "{msg}");
        assert!(
            msg.contains("CNI error code"),
            "the plugin's words reach the client: {msg}"
        );
        let left = m.list(&by_name(&name)).await.unwrap();
        assert!(left.is_empty(), "half-made sandbox removed: {left:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_slow_calls_time_out_and_a_retry_joins_the_first_sandbox() {
    let log = fresh_fixture_log("cri-slow");
    let dir = cni_conf_dir(
        "cri-slow",
        &[(
            "10-slow.conflist",
            bridge_conflist(
                "cri-slow-net",
                "pscrislow0",
                "10.236.0.0/24",
                Some(&format!(r#""mode":"slow","delay":"3","log":"{log}""#)),
            ),
        )],
    );
    with_config(&cni_config(&dir, 30_000), || async {
        let mut c = runtime().await;
        let (m, _conn) = manager().await;
        let name = uniq("cri-retry");
        // The caller's deadline passes first (kubelet's): the frontend
        // answers DEADLINE_EXCEEDED (a client of our own, which keeps no
        // timer that could answer first)...
        let a = crate::cri_deadlines::unary(
            SOCKET,
            "/runtime.v1.RuntimeService/RunPodSandbox",
            &run_request(pod_config(&name, false)),
            Some("800m"),
        )
        .await;
        assert_eq!(a.code, Code::DeadlineExceeded, "{a:?}");
        // ...and its retry gets the sandbox the first call is still making.
        let t0 = Instant::now();
        let id = run(&mut c, &name, false).await;
        assert!(t0.elapsed() < Duration::from_secs(20));
        let all = m
            .list(&by_name(&name))
            .await
            .unwrap();
        assert_eq!(all.len(), 1, "one sandbox, not two: {all:?}");
        assert_eq!(all[0].id.clone(), id);
        assert_eq!(all[0].state, State::Ready);
        // DEADLINE_EXCEEDED from the frontend's own bound on a daemon call:
        // a frontend with a 1 s call timeout meets the 3 s plugin.
        let sock = "/run/podscope-test/cri-short.sock";
        sh(&format!(
            "rm -f {sock}; /usr/libexec/podscope/podscope-cri --listen {sock} --call-timeout 1 >/dev/null 2>&1 & \
             echo $! > /run/podscope-test/cri-short.pid"
        ));
        wait_until(Duration::from_secs(10), || Path::new(sock).exists());
        let (mut short, _) = clients_at(sock).await;
        let (code, msg) = code_of(
            short
                .run_pod_sandbox(run_request(pod_config(&uniq("cri-short"), false)))
                .await,
        );
        sh("kill $(cat /run/podscope-test/cri-short.pid)");
        assert_eq!(code, Code::DeadlineExceeded, "{msg}");
        stop(&mut c, &id).await.unwrap();
        remove(&mut c, &id).await.unwrap();
        // The abandoned one finishes in the daemon; clean it up too.
        tokio::time::sleep(Duration::from_secs(4)).await;
        for d in m
            .list(&ListFilter {
                namespace: Some("cri-test".into()),
                ..Default::default()
            })
            .await
            .unwrap()
        {
            if d.name.clone().starts_with("cri-short") {
                let _ = m.stop(&d.id.clone()).await;
                let _ = m.remove(&d.id.clone()).await;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_frontend_restart_leaves_pods_untouched() {
    let mut c = runtime().await;
    let (m, _conn) = manager().await;
    let id = run(&mut c, &uniq("cri-restart"), false).await;
    let pid = m.status(&id).await.unwrap().init_pid;
    let before = sh("systemctl show -P MainPID podscope-cri")
        .trim()
        .to_owned();
    sh("systemctl restart podscope-cri.service");
    let after = sh("systemctl show -P MainPID podscope-cri")
        .trim()
        .to_owned();
    assert_ne!(before, after, "a new frontend process");
    let mut c = runtime().await;
    let s = status(&mut c, &id).await.status.unwrap();
    assert_eq!(s.state, cri::PodSandboxState::SandboxReady as i32);
    assert_eq!(m.status(&id).await.unwrap().init_pid, pid);
    assert!(pid_alive(pid as u32));
    // Stopped entirely, the socket still answers: systemd starts it again.
    sh("systemctl stop podscope-cri.service");
    let mut c = runtime().await;
    let s = status(&mut c, &id).await.status.unwrap();
    assert_eq!(s.state, cri::PodSandboxState::SandboxReady as i32);
    stop(&mut c, &id).await.unwrap();
    remove(&mut c, &id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_follows_podscoped_restarts_and_says_unavailable_when_it_is_gone() {
    let mut c = runtime().await;
    let id = run(&mut c, &uniq("cri-daemon"), true).await;
    let frontend = sh("systemctl show -P MainPID podscope-cri")
        .trim()
        .to_owned();
    daemon("restart");
    let s = status(&mut c, &id).await.status.unwrap();
    assert_eq!(s.state, cri::PodSandboxState::SandboxReady as i32);
    assert_eq!(
        sh("systemctl show -P MainPID podscope-cri").trim(),
        frontend,
        "the same frontend process, reconnected by name"
    );
    // Gone and not activatable: UNAVAILABLE at once, not a hang.
    sh("systemctl stop podscoped && systemctl mask --runtime podscoped");
    let t0 = Instant::now();
    let r = c
        .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
        .await;
    sh("systemctl unmask --runtime podscoped");
    let (code, msg) = code_of(r);
    assert_eq!(code, Code::Unavailable, "{msg}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // Back again through activation.
    let s = status(&mut c, &id).await.status.unwrap();
    assert_eq!(s.state, cri::PodSandboxState::SandboxReady as i32);
    stop(&mut c, &id).await.unwrap();
    remove(&mut c, &id).await.unwrap();
}
