//! `runtime.v1.RuntimeService`: each call checked, traced and handed to
//! its verb (`sandbox`, `container`), RuntimeStatus and the runtime's
//! config answered here. Streaming (Exec, Attach, PortForward) answers
//! with the streaming server's URL.

use crate::calls::{detached, now_ns, required_id, traced, unimplemented, Cri, Streamed};
use crate::convert;
use crate::sandbox::Teardown;
use crate::stats;
use cri_api::v1 as cri;
use cri_api::v1::runtime_service_server::RuntimeService;
use podscope_api::domain::State;
use podscope_api::HandlerFeatures;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tracing::debug;

/// CRI's `VersionResponse.version`: the kubelet runtime API version.
const KUBELET_API_VERSION: &str = "0.1.0";

/// The CRI service over a shared `Cri` (mutating calls run in tasks that
/// own a reference, so a client hanging up never cuts them short).
#[derive(Clone)]
pub struct RuntimeApi(pub Arc<Cri>);

#[tonic::async_trait]
impl RuntimeService for RuntimeApi {
    async fn version(
        &self,
        _req: Request<cri::VersionRequest>,
    ) -> Result<Response<cri::VersionResponse>, Status> {
        traced("Version", "", async {
            let v = self
                .0
                .daemon
                .rpc(|m| async move { m.version().await })
                .await?;
            Ok(cri::VersionResponse {
                version: KUBELET_API_VERSION.into(),
                runtime_name: v.runtime_name,
                runtime_version: v.runtime_version,
                runtime_api_version: v.api_version,
            })
        })
        .await
    }

    async fn run_pod_sandbox(
        &self,
        req: Request<cri::RunPodSandboxRequest>,
    ) -> Result<Response<cri::RunPodSandboxResponse>, Status> {
        let req = req.into_inner();
        let label = req
            .config
            .as_ref()
            .and_then(|c| c.metadata.as_ref())
            .map(|m| format!("{}/{}", m.namespace, m.name))
            .unwrap_or_default();
        let frontend = self.0.clone();
        traced("RunPodSandbox", &label, async move {
            let config = convert::sandbox::config_from_request(&req)?;
            let id = detached(async move { frontend.run_pod_sandbox(config).await }).await?;
            Ok(cri::RunPodSandboxResponse { pod_sandbox_id: id })
        })
        .await
    }

    async fn stop_pod_sandbox(
        &self,
        req: Request<cri::StopPodSandboxRequest>,
    ) -> Result<Response<cri::StopPodSandboxResponse>, Status> {
        let id = req.into_inner().pod_sandbox_id;
        let frontend = self.0.clone();
        traced("StopPodSandbox", &id.clone(), async move {
            frontend.teardown(Teardown::Stop, id).await?;
            Ok(cri::StopPodSandboxResponse {})
        })
        .await
    }

    async fn remove_pod_sandbox(
        &self,
        req: Request<cri::RemovePodSandboxRequest>,
    ) -> Result<Response<cri::RemovePodSandboxResponse>, Status> {
        let id = req.into_inner().pod_sandbox_id;
        let frontend = self.0.clone();
        traced("RemovePodSandbox", &id.clone(), async move {
            frontend.teardown(Teardown::Remove, id).await?;
            Ok(cri::RemovePodSandboxResponse {})
        })
        .await
    }

    async fn pod_sandbox_status(
        &self,
        req: Request<cri::PodSandboxStatusRequest>,
    ) -> Result<Response<cri::PodSandboxStatusResponse>, Status> {
        let req = req.into_inner();
        let id = req.pod_sandbox_id.clone();
        traced("PodSandboxStatus", &id, async {
            required_id(&id)?;
            let idr = id.as_str();
            let (s, d) = self
                .0
                .daemon
                .rpc(|m| async move { m.status_with_dict(idr).await })
                .await?;
            let mut info = HashMap::new();
            if req.verbose {
                info.insert("info".to_owned(), podscope_api::dict::dict_json(&d));
            }
            // Evented PLEG reads the pod's containers from here.
            let mut containers_statuses = Vec::new();
            let filter = cri::ContainerFilter {
                pod_sandbox_id: s.id.clone(),
                ..Default::default()
            };
            for c in self.0.list_containers(&filter).await? {
                if let Ok(st) = self.0.container_status(&c.id, false).await {
                    containers_statuses.extend(st.status);
                }
            }
            Ok(cri::PodSandboxStatusResponse {
                status: Some(convert::sandbox::sandbox_status(&s)),
                info,
                containers_statuses,
                timestamp: now_ns(),
            })
        })
        .await
    }

    async fn list_pod_sandbox(
        &self,
        req: Request<cri::ListPodSandboxRequest>,
    ) -> Result<Response<cri::ListPodSandboxResponse>, Status> {
        let f = req.into_inner().filter.unwrap_or_default();
        traced("ListPodSandbox", &f.id.clone(), async {
            let q =
                convert::sandbox::list_query(&f.id, f.state.map(|s| s.state), &f.label_selector)?;
            let items = self
                .0
                .list(q)
                .await?
                .iter()
                .map(convert::sandbox::pod_sandbox)
                .collect();
            Ok(cri::ListPodSandboxResponse { items })
        })
        .await
    }

    async fn pod_sandbox_stats(
        &self,
        req: Request<cri::PodSandboxStatsRequest>,
    ) -> Result<Response<cri::PodSandboxStatsResponse>, Status> {
        let id = req.into_inner().pod_sandbox_id;
        traced("PodSandboxStats", &id, async {
            required_id(&id)?;
            let idr = id.as_str();
            let d = self
                .0
                .daemon
                .rpc(|m| async move { m.status(idr).await })
                .await?;
            if d.state != State::Ready {
                return Err(Status::failed_precondition(format!(
                    "sandbox {} is not ready: it has no processes to measure",
                    d.id
                )));
            }
            let containers = self
                .0
                .list_containers(&cri::ContainerFilter {
                    pod_sandbox_id: d.id.clone(),
                    ..Default::default()
                })
                .await?;
            Ok(cri::PodSandboxStatsResponse {
                stats: Some(self.0.pod_stats(
                    &stats::Mounts::read(),
                    &d.summary(),
                    &containers,
                    now_ns(),
                )),
            })
        })
        .await
    }

    async fn list_pod_sandbox_stats(
        &self,
        req: Request<cri::ListPodSandboxStatsRequest>,
    ) -> Result<Response<cri::ListPodSandboxStatsResponse>, Status> {
        let f = req.into_inner().filter.unwrap_or_default();
        traced("ListPodSandboxStats", &f.id.clone(), async {
            let q = convert::sandbox::list_query(
                &f.id,
                Some(cri::PodSandboxState::SandboxReady as i32),
                &f.label_selector,
            )?;
            let pods = self.0.list(q).await?;
            // One listing for every pod's containers.
            let containers = self.0.list_containers(&Default::default()).await?;
            let ts = now_ns();
            let mounts = stats::Mounts::read();
            let stats: Vec<cri::PodSandboxStats> = pods
                .iter()
                .map(|d| self.0.pod_stats(&mounts, d, &containers, ts))
                .collect();
            if f.id.is_empty() && f.label_selector.is_empty() {
                let live: HashSet<String> = pods.iter().map(|d| d.id.clone()).collect();
                self.0.rates.retain(&live);
            }
            Ok(cri::ListPodSandboxStatsResponse { stats })
        })
        .await
    }

    async fn status(
        &self,
        req: Request<cri::StatusRequest>,
    ) -> Result<Response<cri::StatusResponse>, Status> {
        let verbose = req.into_inner().verbose;
        traced("Status", "", async {
            let (conditions, info, raw) = self
                .0
                .daemon
                .rpc(|m| async move { m.runtime_status().await })
                .await?;
            let conditions = conditions
                .into_iter()
                .map(|c| cri::RuntimeCondition {
                    r#type: c.kind,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                })
                .collect();
            // "" is the default handler, with the default's features; the
            // daemon lists the default first.
            let handler = |name: String, f: &HandlerFeatures| cri::RuntimeHandler {
                name,
                features: Some(cri::RuntimeHandlerFeatures {
                    recursive_read_only_mounts: f.recursive_read_only_mounts,
                    user_namespaces: f.user_namespaces,
                }),
            };
            let mut handlers: Vec<cri::RuntimeHandler> = info
                .handler_features
                .first()
                .map(|f| handler(String::new(), f))
                .into_iter()
                .collect();
            handlers.extend(
                info.handler_features
                    .iter()
                    .map(|f| handler(f.name.clone(), f)),
            );
            let mut out_info = HashMap::new();
            if verbose {
                out_info.insert("info".to_owned(), podscope_api::dict::dict_json(&raw));
                out_info.insert("frontend".to_owned(), self.0.frontend_json());
                // Where containers' roots live, under containerd's key
                // and name: clients read it to learn which file system
                // the roots are on (critest probes it for idmapped
                // mounts before its user namespace specs).
                out_info.insert(
                    "config".to_owned(),
                    serde_json::json!({
                        "stateDir": format!("{}/containers", info.state_dir.trim_end_matches('/')),
                    })
                    .to_string(),
                );
            }
            Ok(cri::StatusResponse {
                status: Some(cri::RuntimeStatus { conditions }),
                info: out_info,
                runtime_handlers: handlers,
                features: Some(cri::RuntimeFeatures {
                    // Strict: the image's /etc/group is not read for
                    // the user's groups (oci::user).
                    supplemental_groups_policy: true,
                    user_namespaces_host_network: false,
                }),
            })
        })
        .await
    }

    async fn runtime_config(
        &self,
        _req: Request<cri::RuntimeConfigRequest>,
    ) -> Result<Response<cri::RuntimeConfigResponse>, Status> {
        traced("RuntimeConfig", "", async {
            Ok(cri::RuntimeConfigResponse {
                linux: Some(cri::LinuxRuntimeConfiguration {
                    cgroup_driver: cri::CgroupDriver::Systemd as i32,
                }),
            })
        })
        .await
    }

    async fn update_runtime_config(
        &self,
        req: Request<cri::UpdateRuntimeConfigRequest>,
    ) -> Result<Response<cri::UpdateRuntimeConfigResponse>, Status> {
        // Kubelet sends the node's pod CIDR here; podscope's addresses come
        // from the CNI config, so there is nothing to change.
        let cidr = req
            .into_inner()
            .runtime_config
            .and_then(|c| c.network_config)
            .map(|n| n.pod_cidr)
            .unwrap_or_default();
        traced("UpdateRuntimeConfig", "", async move {
            debug!("pod CIDR {cidr:?} noted; addresses come from the CNI config");
            Ok(cri::UpdateRuntimeConfigResponse {})
        })
        .await
    }

    async fn create_container(
        &self,
        req: Request<cri::CreateContainerRequest>,
    ) -> Result<Response<cri::CreateContainerResponse>, Status> {
        let req = req.into_inner();
        let label = req.pod_sandbox_id.clone();
        let frontend = self.0.clone();
        traced("CreateContainer", &label, async move {
            let id = detached(async move { frontend.create_container(req).await }).await?;
            Ok(cri::CreateContainerResponse { container_id: id })
        })
        .await
    }
    async fn start_container(
        &self,
        req: Request<cri::StartContainerRequest>,
    ) -> Result<Response<cri::StartContainerResponse>, Status> {
        let id = req.into_inner().container_id;
        let frontend = self.0.clone();
        traced("StartContainer", &id.clone(), async move {
            frontend.container_verb("start", id, 0).await?;
            Ok(cri::StartContainerResponse {})
        })
        .await
    }
    async fn stop_container(
        &self,
        req: Request<cri::StopContainerRequest>,
    ) -> Result<Response<cri::StopContainerResponse>, Status> {
        let req = req.into_inner();
        let frontend = self.0.clone();
        traced("StopContainer", &req.container_id.clone(), async move {
            frontend
                .container_verb("stop", req.container_id, req.timeout)
                .await?;
            Ok(cri::StopContainerResponse {})
        })
        .await
    }
    async fn remove_container(
        &self,
        req: Request<cri::RemoveContainerRequest>,
    ) -> Result<Response<cri::RemoveContainerResponse>, Status> {
        let id = req.into_inner().container_id;
        let frontend = self.0.clone();
        traced("RemoveContainer", &id.clone(), async move {
            frontend.container_verb("remove", id, 0).await?;
            Ok(cri::RemoveContainerResponse {})
        })
        .await
    }
    async fn list_containers(
        &self,
        req: Request<cri::ListContainersRequest>,
    ) -> Result<Response<cri::ListContainersResponse>, Status> {
        let f = req.into_inner().filter.unwrap_or_default();
        traced("ListContainers", &f.id.clone(), async {
            let containers = self
                .0
                .list_containers(&f)
                .await?
                .iter()
                .map(crate::convert::container::container)
                .collect();
            Ok(cri::ListContainersResponse { containers })
        })
        .await
    }
    async fn container_status(
        &self,
        req: Request<cri::ContainerStatusRequest>,
    ) -> Result<Response<cri::ContainerStatusResponse>, Status> {
        let req = req.into_inner();
        traced("ContainerStatus", &req.container_id.clone(), async {
            self.0
                .container_status(&req.container_id, req.verbose)
                .await
        })
        .await
    }
    async fn update_container_resources(
        &self,
        req: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Result<Response<cri::UpdateContainerResourcesResponse>, Status> {
        let req = req.into_inner();
        let frontend = self.0.clone();
        traced(
            "UpdateContainerResources",
            &req.container_id.clone(),
            async move {
                detached(async move { frontend.update_container_resources(req).await }).await?;
                Ok(cri::UpdateContainerResourcesResponse {})
            },
        )
        .await
    }
    async fn reopen_container_log(
        &self,
        req: Request<cri::ReopenContainerLogRequest>,
    ) -> Result<Response<cri::ReopenContainerLogResponse>, Status> {
        let id = req.into_inner().container_id;
        traced("ReopenContainerLog", &id.clone(), async {
            self.0.reopen_container_log(&id).await?;
            Ok(cri::ReopenContainerLogResponse {})
        })
        .await
    }
    async fn exec_sync(
        &self,
        req: Request<cri::ExecSyncRequest>,
    ) -> Result<Response<cri::ExecSyncResponse>, Status> {
        let req = req.into_inner();
        traced("ExecSync", &req.container_id.clone(), async {
            self.0.exec_sync(req).await
        })
        .await
    }
    async fn exec(
        &self,
        req: Request<cri::ExecRequest>,
    ) -> Result<Response<cri::ExecResponse>, Status> {
        let req = req.into_inner();
        traced("Exec", &req.container_id.clone(), async {
            self.0.exec(req).await
        })
        .await
    }
    async fn attach(
        &self,
        req: Request<cri::AttachRequest>,
    ) -> Result<Response<cri::AttachResponse>, Status> {
        let req = req.into_inner();
        traced("Attach", &req.container_id.clone(), async {
            self.0.attach(req).await
        })
        .await
    }
    async fn port_forward(
        &self,
        req: Request<cri::PortForwardRequest>,
    ) -> Result<Response<cri::PortForwardResponse>, Status> {
        let req = req.into_inner();
        traced("PortForward", &req.pod_sandbox_id.clone(), async {
            self.0.port_forward(req).await
        })
        .await
    }
    async fn container_stats(
        &self,
        req: Request<cri::ContainerStatsRequest>,
    ) -> Result<Response<cri::ContainerStatsResponse>, Status> {
        let id = req.into_inner().container_id;
        traced("ContainerStats", &id.clone(), async {
            if id.is_empty() {
                return Err(Status::invalid_argument("container_id: must not be empty"));
            }
            let stats = self
                .0
                .container_stats(Some(&id), Default::default())
                .await?
                .into_iter()
                .next()
                .ok_or_else(|| {
                    Status::not_found(format!("container {id} is not running or created"))
                })?;
            Ok(cri::ContainerStatsResponse { stats: Some(stats) })
        })
        .await
    }
    async fn list_container_stats(
        &self,
        req: Request<cri::ListContainerStatsRequest>,
    ) -> Result<Response<cri::ListContainerStatsResponse>, Status> {
        let f = req.into_inner().filter.unwrap_or_default();
        traced("ListContainerStats", &f.id.clone(), async {
            let stats = self.0.container_stats(None, f).await?;
            Ok(cri::ListContainerStatsResponse { stats })
        })
        .await
    }
    async fn checkpoint_container(
        &self,
        req: Request<cri::CheckpointContainerRequest>,
    ) -> Result<Response<cri::CheckpointContainerResponse>, Status> {
        let req = req.into_inner();
        let frontend = self.0.clone();
        traced(
            "CheckpointContainer",
            &req.container_id.clone(),
            async move {
                detached(async move { frontend.checkpoint_container(req).await }).await?;
                Ok(cri::CheckpointContainerResponse {})
            },
        )
        .await
    }

    type GetContainerEventsStream = Streamed<cri::ContainerEventResponse>;

    async fn get_container_events(
        &self,
        _: Request<cri::GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        let rx = crate::container::events(self.0.clone()).await?;
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
    async fn list_metric_descriptors(
        &self,
        _: Request<cri::ListMetricDescriptorsRequest>,
    ) -> Result<Response<cri::ListMetricDescriptorsResponse>, Status> {
        traced("ListMetricDescriptors", "", async {
            Ok(cri::ListMetricDescriptorsResponse {
                descriptors: crate::sandbox_metrics::descriptors(),
            })
        })
        .await
    }
    async fn list_pod_sandbox_metrics(
        &self,
        _: Request<cri::ListPodSandboxMetricsRequest>,
    ) -> Result<Response<cri::ListPodSandboxMetricsResponse>, Status> {
        traced("ListPodSandboxMetrics", "", async {
            Ok(cri::ListPodSandboxMetricsResponse {
                pod_metrics: self.0.pod_sandbox_metrics().await?,
            })
        })
        .await
    }
    /// kubelet has resized the pod's cgroup itself (its pod slice, which
    /// podscope's units sit in) and says so, best effort: the pod's new
    /// resources are recorded and given to its scope as at RunPodSandbox
    /// (UpdateResources on the bus). Overhead stays as created; a request
    /// without resources changes nothing.
    async fn update_pod_sandbox_resources(
        &self,
        req: Request<cri::UpdatePodSandboxResourcesRequest>,
    ) -> Result<Response<cri::UpdatePodSandboxResourcesResponse>, Status> {
        let req = req.into_inner();
        let id = req.pod_sandbox_id;
        let frontend = self.0.clone();
        traced("UpdatePodSandboxResources", &id.clone(), async move {
            let Some(r) = req.resources else {
                return Ok(cri::UpdatePodSandboxResourcesResponse {});
            };
            let wire: podscope_api::Resources =
                convert::sandbox::resources("resources", &r)?.into();
            let (id, w) = (&id, &wire);
            frontend
                .daemon
                .rpc(|m| async move { m.update_resources(id, w).await })
                .await?;
            Ok(cri::UpdatePodSandboxResourcesResponse {})
        })
        .await
    }

    // The List calls as streams (KEP-5825, kubelet's CRIListStreaming
    // gate, alpha): not offered yet, so kubelet uses the List calls.
    type StreamPodSandboxesStream = Streamed<cri::StreamPodSandboxesResponse>;
    async fn stream_pod_sandboxes(
        &self,
        _: Request<cri::StreamPodSandboxesRequest>,
    ) -> Result<Response<Self::StreamPodSandboxesStream>, Status> {
        Err(unimplemented("StreamPodSandboxes"))
    }
    type StreamContainersStream = Streamed<cri::StreamContainersResponse>;
    async fn stream_containers(
        &self,
        _: Request<cri::StreamContainersRequest>,
    ) -> Result<Response<Self::StreamContainersStream>, Status> {
        Err(unimplemented("StreamContainers"))
    }
    type StreamContainerStatsStream = Streamed<cri::StreamContainerStatsResponse>;
    async fn stream_container_stats(
        &self,
        _: Request<cri::StreamContainerStatsRequest>,
    ) -> Result<Response<Self::StreamContainerStatsStream>, Status> {
        Err(unimplemented("StreamContainerStats"))
    }
    type StreamPodSandboxStatsStream = Streamed<cri::StreamPodSandboxStatsResponse>;
    async fn stream_pod_sandbox_stats(
        &self,
        _: Request<cri::StreamPodSandboxStatsRequest>,
    ) -> Result<Response<Self::StreamPodSandboxStatsStream>, Status> {
        Err(unimplemented("StreamPodSandboxStats"))
    }
    type StreamPodSandboxMetricsStream = Streamed<cri::StreamPodSandboxMetricsResponse>;
    async fn stream_pod_sandbox_metrics(
        &self,
        _: Request<cri::StreamPodSandboxMetricsRequest>,
    ) -> Result<Response<Self::StreamPodSandboxMetricsStream>, Status> {
        Err(unimplemented("StreamPodSandboxMetrics"))
    }
}
