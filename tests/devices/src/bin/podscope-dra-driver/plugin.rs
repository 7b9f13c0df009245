//! The kubelet plugin: the registration kubelet's plugin watcher asks for,
//! the DRA service kubelet calls to prepare and unprepare claims, and the
//! driver's life from the sockets bound to its ResourceSlice deleted.

use crate::api::{Api, ClaimError};
use crate::{cdi, say, Args};
use podscope_test_devices::dra::v1 as dra;
use podscope_test_devices::pluginregistration::v1 as reg;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status};

/// The gRPC service kubelet 1.36 picks for NodePrepareResources (its
/// `<proto package's last part>.<service>` naming, the plugin's
/// supported_versions).
const DRA_SERVICE: &str = "v1.DRAPlugin";
/// How long kubelet has to register the plugin once its socket is there
/// (its plugin watcher sees a new socket at once).
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a claim kubelet asks to prepare may stay unreadable: the Node
/// authorizer's graph learns that a pod of this node uses it from the
/// pod's status, which it may not have seen when kubelet asks.
const CLAIM_READ_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn run(args: Args) -> Result<(), String> {
    let api = Arc::new(Api::from_kubeconfig(&args.kubeconfig)?);
    let devices = args.device_names();
    cdi::make_devices(&args.state_dir, &args.node, &devices)?;
    say!(
        "devices {} (c {}:{}) under {}",
        devices.join(", "),
        cdi::MAJOR,
        cdi::MINOR,
        args.state_dir.display()
    );

    let registry = args.kubelet_dir.join("plugins_registry");
    if !registry.is_dir() {
        return Err(format!(
            "{} is not there: kubelet makes it at its start (is kubelet running, with --root-dir {}?)",
            registry.display(),
            args.kubelet_dir.display()
        ));
    }
    let plugin_dir = args.kubelet_dir.join("plugins").join(&args.driver);
    std::fs::create_dir_all(&plugin_dir)
        .map_err(|e| format!("mkdir {}: {e}", plugin_dir.display()))?;
    let dra_socket = plugin_dir.join("dra.sock");
    let reg_socket = registry.join(format!("{}-reg.sock", args.driver));

    let (stop_tx, stop) = watch::channel(false);
    let (status_tx, mut status) = watch::channel(None::<reg::RegistrationStatus>);
    let args = Arc::new(args);

    // The DRA service first: kubelet connects to it as soon as it has
    // registered the plugin.
    let dra_server = dra::dra_plugin_server::DraPluginServer::new(Driver {
        args: args.clone(),
        api: api.clone(),
    });
    let dra_task = tokio::spawn(serve(
        bind(&dra_socket)?,
        tonic::transport::Server::builder().add_service(dra_server),
        stop.clone(),
    ));
    let reg_server = reg::registration_server::RegistrationServer::new(Registration {
        driver: args.driver.clone(),
        endpoint: dra_socket.clone(),
        status: status_tx,
    });
    let reg_task = tokio::spawn(serve(
        bind(&reg_socket)?,
        tonic::transport::Server::builder().add_service(reg_server),
        stop.clone(),
    ));
    say!(
        "serving {DRA_SERVICE} on {}, registration on {}",
        dra_socket.display(),
        reg_socket.display()
    );

    let mut published = false;
    let result = async {
        let registered =
            tokio::time::timeout(REGISTRATION_TIMEOUT, status.wait_for(|s| s.is_some()))
                .await
                .map_err(|_| {
                    format!(
                        "kubelet did not register the plugin within {REGISTRATION_TIMEOUT:?} \
                 (no GetInfo and NotifyRegistrationStatus on {})",
                        reg_socket.display()
                    )
                })?
                .map_err(|_| "the registration service ended".to_string())?
                .clone()
                .unwrap();
        if !registered.plugin_registered {
            return Err(format!("kubelet refused the plugin: {}", registered.error));
        }
        say!("registered with kubelet as {} ({DRA_SERVICE})", args.driver);
        api.publish_slice(&resource_slice(&args, &devices)).await?;
        published = true;
        say!(
            "published ResourceSlice {} (pool {}, devices {})",
            args.slice_name(),
            args.node,
            devices.join(", ")
        );
        signalled().await
    }
    .await;

    // Unregistered first (kubelet sees the socket go), then nothing of the
    // driver left for the scheduler to allocate.
    let mut left = Vec::new();
    let _ = std::fs::remove_file(&reg_socket);
    if published {
        if let Err(e) = api.delete_slice(&args.slice_name()).await {
            left.push(e);
        }
    }
    let _ = stop_tx.send(true);
    for task in [reg_task, dra_task] {
        if let Ok(Err(e)) = task.await {
            left.push(e);
        }
    }
    let _ = std::fs::remove_file(&dra_socket);
    let _ = std::fs::remove_dir(&plugin_dir);
    result?;
    if !left.is_empty() {
        return Err(left.join("; "));
    }
    say!(
        "stopped: ResourceSlice {} deleted, sockets removed",
        args.slice_name()
    );
    Ok(())
}

/// SIGTERM (systemctl stop) or SIGINT.
async fn signalled() -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?;
    tokio::select! {
        _ = term.recv() => say!("SIGTERM"),
        _ = int.recv() => say!("SIGINT"),
    }
    Ok(())
}

/// A unix socket at PATH, a stale one from an earlier run replaced.
fn bind(path: &Path) -> Result<UnixListener, String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("remove {}: {e}", path.display()))
        }
        _ => {}
    }
    UnixListener::bind(path).map_err(|e| format!("bind {}: {e}", path.display()))
}

/// ROUTER's services on LISTENER until STOP turns true. Every connection
/// goes through podscope-cri's authority rewrite: kubelet's plugin watcher
/// dials the registration socket by its path, and grpc-go then sends the
/// path, percent-encoded, as `:authority`, which the h2 crate under tonic
/// refuses (the CRI socket's problem with crictl, see crates/cri's
/// authority.rs). Seen without it: kubelet 1.36's GetInfo failed with
/// "stream terminated by RST_STREAM with error code: PROTOCOL_ERROR" and
/// the plugin was never registered. (kubelet dials the DRA socket itself
/// as `unix:PATH`, whose authority is `localhost`; one server for both.)
async fn serve(
    listener: UnixListener,
    router: tonic::transport::server::Router,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener)
        .map(|conn| conn.map(podscope_cri::authority::Rewriting::new));
    router
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
        .map_err(|e| format!("gRPC server: {e}"))
}

/// The node's ResourceSlice: one pool, the node's, all of its devices in
/// this one slice.
fn resource_slice(args: &Args, devices: &[String]) -> serde_json::Value {
    let devices: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| json!({ "name": d, "attributes": { "index": { "int": i } } }))
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": { "name": args.slice_name() },
        "spec": {
            "driver": args.driver,
            "nodeName": args.node,
            "pool": { "name": args.node, "generation": 1, "resourceSliceCount": 1 },
            "devices": devices,
        },
    })
}

/// pluginregistration's Registration: what the plugin is and where.
struct Registration {
    driver: String,
    endpoint: PathBuf,
    status: watch::Sender<Option<reg::RegistrationStatus>>,
}

#[tonic::async_trait]
impl reg::registration_server::Registration for Registration {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        say!("kubelet asked for the plugin's info");
        Ok(Response::new(reg::PluginInfo {
            r#type: "DRAPlugin".into(),
            name: self.driver.clone(),
            endpoint: self.endpoint.to_string_lossy().into_owned(),
            supported_versions: vec![DRA_SERVICE.into()],
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        say!(
            "kubelet's registration status: registered {}{}",
            status.plugin_registered,
            if status.error.is_empty() {
                String::new()
            } else {
                format!(", error {}", status.error)
            }
        );
        self.status.send_replace(Some(status));
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

/// The DRA service.
struct Driver {
    args: Arc<Args>,
    api: Arc<Api>,
}

impl Driver {
    /// One claim prepared: its devices of this driver in a CDI spec of
    /// their own, and kubelet's answer naming them.
    async fn prepare(&self, claim: &dra::Claim) -> Result<Vec<dra::Device>, String> {
        let deadline = tokio::time::Instant::now() + CLAIM_READ_TIMEOUT;
        let object = loop {
            match self.api.claim(&claim.namespace, &claim.name).await {
                Ok(o) => break o,
                Err(ClaimError::Retry(e)) if tokio::time::Instant::now() < deadline => {
                    say!("{e}; again in 0.5 s");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(ClaimError::Retry(e) | ClaimError::Fatal(e)) => return Err(e),
            }
        };
        let a = &self.args;
        let devices = cdi::allocated(&object, &claim.uid, &a.driver, &a.node)?;
        let path = cdi::spec_path(&a.cdi_dir, &a.driver, &claim.uid);
        cdi::write_spec(
            &path,
            &cdi::spec(&a.driver, &claim.uid, &a.state_dir, &devices),
        )?;
        let answer: Vec<dra::Device> = devices
            .iter()
            .map(|d| dra::Device {
                request_names: vec![d.request.clone()],
                pool_name: a.node.clone(),
                device_name: d.device.clone(),
                cdi_device_ids: vec![cdi::qualified_name(&a.driver, &claim.uid, &d.device)],
                // Not a device shared between claims (consumable capacity).
                share_id: None,
            })
            .collect();
        say!(
            "prepared claim {}/{} ({}): {} in {}",
            claim.namespace,
            claim.name,
            claim.uid,
            answer
                .iter()
                .map(|d| format!("{} as {}", d.device_name, d.cdi_device_ids.join(",")))
                .collect::<Vec<_>>()
                .join(", "),
            path.display()
        );
        Ok(answer)
    }
}

#[tonic::async_trait]
impl dra::dra_plugin_server::DraPlugin for Driver {
    async fn node_prepare_resources(
        &self,
        request: Request<dra::NodePrepareResourcesRequest>,
    ) -> Result<Response<dra::NodePrepareResourcesResponse>, Status> {
        let mut claims = HashMap::new();
        for claim in request.into_inner().claims {
            let answer = match self.prepare(&claim).await {
                Ok(devices) => dra::NodePrepareResourceResponse {
                    devices,
                    error: String::new(),
                },
                Err(error) => {
                    say!(
                        "claim {}/{} ({}) not prepared: {error}",
                        claim.namespace,
                        claim.name,
                        claim.uid
                    );
                    dra::NodePrepareResourceResponse {
                        devices: Vec::new(),
                        error,
                    }
                }
            };
            claims.insert(claim.uid, answer);
        }
        Ok(Response::new(dra::NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<dra::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<dra::NodeUnprepareResourcesResponse>, Status> {
        let mut claims = HashMap::new();
        for claim in request.into_inner().claims {
            let path = cdi::spec_path(&self.args.cdi_dir, &self.args.driver, &claim.uid);
            let error = match cdi::remove_spec(&path) {
                Ok(()) => {
                    say!(
                        "unprepared claim {}/{} ({}): {} removed",
                        claim.namespace,
                        claim.name,
                        claim.uid,
                        path.display()
                    );
                    String::new()
                }
                Err(e) => {
                    say!("claim {} not unprepared: {e}", claim.uid);
                    e
                }
            };
            claims.insert(claim.uid, dra::NodeUnprepareResourceResponse { error });
        }
        Ok(Response::new(dra::NodeUnprepareResourcesResponse {
            claims,
        }))
    }
}
