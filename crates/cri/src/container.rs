//! The CRI container calls, translated: CreateContainerRequest → the
//! daemon's `ContainerConfig` (its errors renamed to CRI's field paths),
//! its statuses and listings back into CRI's messages, container stats
//! from the unit's cgroup, and GetContainerEvents from the daemon's
//! container signals. No state of its own.

use crate::calls::{detached, now_ns, Cri};
use crate::convert::container::{
    config_from_request, container_status, filter_from, invalid, resources_from, stats_of,
};
use crate::errors::{is_not_found, status_of};
use crate::stats::{self};
use cri_api::v1 as cri;
use podscope_api::container::{ContainerFilter, ContainerOptions, ContainerSummary};
use podscope_api::domain::container::ContainerState;
use podscope_api::domain::id::Id;
use podscope_api::domain::ContainerId;
use std::collections::HashMap;
use tonic::Status;

impl Cri {
    pub(super) async fn create_container(
        &self,
        req: cri::CreateContainerRequest,
    ) -> Result<String, Status> {
        let pod = req.pod_sandbox_id.clone();
        if pod.is_empty() {
            return Err(invalid("pod_sandbox_id", "must not be empty"));
        }
        let config = config_from_request(&req)?;
        let (name, attempt, image, options) = ContainerOptions::from_config(&config);
        let (id, _) = self
            .daemon
            .rpc(|m| {
                let (pod, name, image, options) = (&pod, &name, &image, &options);
                async move { m.create_container(pod, name, attempt, image, options).await }
            })
            .await?;
        Ok(id)
    }

    /// Start, Stop, Remove: run to completion even if the client goes.
    pub(super) async fn container_verb(
        self: std::sync::Arc<Self>,
        verb: &'static str,
        id: String,
        timeout: i64,
    ) -> Result<(), Status> {
        if id.is_empty() {
            return Err(invalid("container_id", "must not be empty"));
        }
        if verb != "start" && crate::calls::cannot_name(ContainerId::KIND, &id) {
            return Ok(());
        }
        detached(async move {
            let r = self
                .daemon
                .call(|m| {
                    let id = &id;
                    async move {
                        match verb {
                            "start" => m.start_container(id).await,
                            "stop" => m.stop_container(id, timeout).await,
                            _ => m.remove_container(id).await,
                        }
                    }
                })
                .await;
            match r {
                // Stop and Remove of what is gone are done, as CRI says.
                Err(e) if verb != "start" && is_not_found(&e) => Ok(()),
                r => r.map_err(|e| status_of(&e)),
            }
        })
        .await
    }

    pub(super) async fn list_containers(
        &self,
        f: &cri::ContainerFilter,
    ) -> Result<Vec<ContainerSummary>, Status> {
        let filter = filter_from(f)?;
        let fr = &filter;
        self.daemon
            .rpc(|m| async move { m.list_containers(fr).await })
            .await
    }

    pub(super) async fn container_status(
        &self,
        id: &str,
        verbose: bool,
    ) -> Result<cri::ContainerStatusResponse, Status> {
        if id.is_empty() {
            return Err(invalid("container_id", "must not be empty"));
        }
        let (s, d) = self
            .daemon
            .rpc(|m| async move { m.container_status_with_dict(id).await })
            .await?;
        let mut info = HashMap::new();
        if verbose {
            info.insert("info".to_owned(), podscope_api::dict::dict_json(&d));
        }
        Ok(cri::ContainerStatusResponse {
            status: Some(container_status(&s)),
            info,
        })
    }

    pub(super) async fn exec_sync(
        &self,
        req: cri::ExecSyncRequest,
    ) -> Result<cri::ExecSyncResponse, Status> {
        if req.container_id.is_empty() {
            return Err(invalid("container_id", "must not be empty"));
        }
        if req.cmd.is_empty() {
            return Err(invalid("cmd", "must not be empty"));
        }
        let timeout_ms = u64::try_from(req.timeout).unwrap_or(0).saturating_mul(1000);
        let (id, cmd) = (&req.container_id, &req.cmd);
        let r = self
            .daemon
            .long_rpc(|m| async move { m.exec_sync(id, cmd, timeout_ms).await })
            .await?;
        Ok(cri::ExecSyncResponse {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit_code,
        })
    }

    /// A URL on the streaming server for this exec, once the container is
    /// known to be running (the client learns of a bad id here, not after
    /// its upgrade).
    pub(super) async fn exec(&self, req: cri::ExecRequest) -> Result<cri::ExecResponse, Status> {
        if req.container_id.is_empty() {
            return Err(invalid("container_id", "must not be empty"));
        }
        if req.cmd.is_empty() {
            return Err(invalid("cmd", "must not be empty"));
        }
        streams_asked(req.stdin, req.stdout, req.stderr, req.tty)?;
        self.running(&req.container_id).await?;
        let url = self
            .stream
            .url(super::stream::tokens::Request::Exec(req))
            .map_err(|_| in_flight())?;
        Ok(cri::ExecResponse { url })
    }

    /// A URL on the streaming server for an attach to a running container.
    pub(super) async fn attach(
        &self,
        req: cri::AttachRequest,
    ) -> Result<cri::AttachResponse, Status> {
        if req.container_id.is_empty() {
            return Err(invalid("container_id", "must not be empty"));
        }
        streams_asked(req.stdin, req.stdout, req.stderr, req.tty)?;
        self.running(&req.container_id).await?;
        let url = self
            .stream
            .url(super::stream::tokens::Request::Attach(req))
            .map_err(|_| in_flight())?;
        Ok(cri::AttachResponse { url })
    }

    /// A URL on the streaming server for port-forwarding into a ready pod.
    pub(super) async fn port_forward(
        &self,
        req: cri::PortForwardRequest,
    ) -> Result<cri::PortForwardResponse, Status> {
        if req.pod_sandbox_id.is_empty() {
            return Err(invalid("pod_sandbox_id", "must not be empty"));
        }
        if let Some(p) = req.port.iter().find(|p| !(1..=65535).contains(*p)) {
            return Err(invalid("port", format!("{p} is not a TCP port")));
        }
        let id = &req.pod_sandbox_id;
        let s = self
            .daemon
            .rpc(|m| async move { m.status(id).await })
            .await?;
        if s.state != podscope_api::domain::State::Ready {
            return Err(Status::failed_precondition(format!(
                "sandbox {} is {}, not ready",
                s.id,
                s.state.as_str()
            )));
        }
        let mut req = req;
        req.pod_sandbox_id = s.id;
        let url = self
            .stream
            .url(super::stream::tokens::Request::PortForward(req))
            .map_err(|_| in_flight())?;
        Ok(cri::PortForwardResponse { url })
    }

    /// NotFound for an unknown container, FailedPrecondition for one that
    /// is not running.
    async fn running(&self, id: &str) -> Result<(), Status> {
        let s = self
            .daemon
            .rpc(|m| async move { m.container_status(id).await })
            .await?;
        if s.state != podscope_api::domain::container::ContainerState::Running {
            return Err(Status::failed_precondition(format!(
                "container {} is {}, not running",
                s.id,
                s.state.as_str()
            )));
        }
        Ok(())
    }

    pub(super) async fn update_container_resources(
        &self,
        req: cri::UpdateContainerResourcesRequest,
    ) -> Result<(), Status> {
        let r = resources_from(&req.linux.unwrap_or_default())?;
        let wire: podscope_api::container::Resources = r.into();
        let (id, w) = (&req.container_id, &wire);
        self.daemon
            .rpc(|m| async move { m.update_container_resources(id, w).await })
            .await
    }

    /// CheckpointContainer: the archive at `location` (kubelet's under
    /// /var/lib/kubelet/checkpoints), the container left running. A dump
    /// takes as long as the container's memory: on the connection for long
    /// calls, bounded by the caller's deadline.
    pub(super) async fn checkpoint_container(
        &self,
        req: cri::CheckpointContainerRequest,
    ) -> Result<(), Status> {
        if req.container_id.is_empty() {
            return Err(invalid("container_id", "must not be empty"));
        }
        if req.location.is_empty() {
            return Err(invalid("location", "must not be empty"));
        }
        if req.timeout < 0 {
            return Err(invalid("timeout", "must not be negative"));
        }
        let options = podscope_api::container::CheckpointOptions {
            timeout_ms: (req.timeout as u64).saturating_mul(1000),
            stop: false,
        };
        let (id, location, o) = (&req.container_id, &req.location, &options);
        self.daemon
            .long_rpc(|m| async move { m.checkpoint_container(id, location, o).await })
            .await
    }

    pub(super) async fn reopen_container_log(&self, id: &str) -> Result<(), Status> {
        self.daemon
            .rpc(|m| async move { m.reopen_container_log(id).await })
            .await
    }

    pub(super) async fn container_stats(
        &self,
        ids: Option<&str>,
        f: cri::ContainerStatsFilter,
    ) -> Result<Vec<cri::ContainerStats>, Status> {
        let filter = cri::ContainerFilter {
            id: ids.map(str::to_owned).unwrap_or(f.id),
            pod_sandbox_id: f.pod_sandbox_id,
            label_selector: f.label_selector,
            state: None,
        };
        let listed = self.list_containers(&filter).await?;
        let mounts = stats::Mounts::read();
        let ts = now_ns();
        Ok(listed
            .iter()
            .filter(|s| s.state != ContainerState::Exited)
            .map(|s| stats_of(&mounts, &self.rates, s, ts))
            .collect())
    }
}

/// Events for kubelet's Evented PLEG: each container signal of the daemon,
/// with the pod's status and its containers' statuses as they are now.
pub async fn events(
    cri: std::sync::Arc<Cri>,
) -> Result<tokio::sync::mpsc::Receiver<Result<cri::ContainerEventResponse, Status>>, Status> {
    use futures_util::StreamExt;
    // Subscribed before the call answers: an event right after it is the
    // caller's too.
    let client = cri.daemon.signals_client().await?;
    let proxy = client.proxy().clone();
    let (Ok(created), Ok(changed), Ok(removed)) = (
        proxy.receive_container_created().await,
        proxy.receive_container_state_changed().await,
        proxy.receive_container_removed().await,
    ) else {
        return Err(Status::unavailable(
            "cannot subscribe to the daemon's container signals",
        ));
    };
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    tokio::spawn(async move {
        enum Sig {
            Created(String),
            Changed(String, String),
            Removed(String),
        }
        let created =
            created.filter_map(|s| async move { s.args().ok().map(|a| Sig::Created(a.id)) });
        let changed = changed
            .filter_map(|s| async move { s.args().ok().map(|a| Sig::Changed(a.id, a.state)) });
        let removed =
            removed.filter_map(|s| async move { s.args().ok().map(|a| Sig::Removed(a.id)) });
        let mut all = std::pin::pin!(futures_util::stream::select(
            futures_util::stream::select(created, changed),
            removed
        ));
        // Pods of removed containers, remembered from their statuses.
        let mut pods: HashMap<String, String> = HashMap::new();
        while let Some(sig) = all.next().await {
            let (id, kind) = match sig {
                Sig::Created(id) => (id, cri::ContainerEventType::ContainerCreatedEvent),
                Sig::Changed(id, state) => match state.as_str() {
                    "running" => (id, cri::ContainerEventType::ContainerStartedEvent),
                    "exited" | "unknown" => (id, cri::ContainerEventType::ContainerStoppedEvent),
                    _ => continue,
                },
                Sig::Removed(id) => (id, cri::ContainerEventType::ContainerDeletedEvent),
            };
            let pod_id = match client.container_status(&id).await {
                Ok(s) => {
                    pods.insert(id.clone(), s.pod_id.clone());
                    Some(s.pod_id)
                }
                Err(_) => pods.remove(&id),
            };
            let (pod_status, statuses) = match &pod_id {
                Some(p) => {
                    let pod = client
                        .status(p)
                        .await
                        .ok()
                        .map(|s| crate::convert::sandbox::sandbox_status(&s));
                    let listed = client
                        .list_containers(&ContainerFilter {
                            pod_id: Some(p.clone()),
                            ..Default::default()
                        })
                        .await
                        .unwrap_or_default();
                    let mut statuses = Vec::new();
                    for c in listed {
                        if let Ok(s) = client.container_status(&c.id).await {
                            statuses.push(container_status(&s));
                        }
                    }
                    (pod, statuses)
                }
                None => (None, Vec::new()),
            };
            let ev = cri::ContainerEventResponse {
                container_id: id,
                container_event_type: kind as i32,
                created_at: now_ns(),
                pod_sandbox_status: pod_status,
                containers_statuses: statuses,
            };
            if tx.send(Ok(ev)).await.is_err() {
                return;
            }
        }
        let _ = tx
            .send(Err(Status::unavailable("the daemon's signals ended")))
            .await;
    });
    Ok(rx)
}

/// An exec's or attach's streams, as kubelet's streaming server checks
/// them: a terminal has no stderr, and one stream at least.
fn streams_asked(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> Result<(), Status> {
    if tty && stderr {
        return Err(invalid("stderr", "tty and stderr cannot both be true"));
    }
    if !stdin && !stdout && !stderr {
        return Err(invalid(
            "stdout",
            "one of stdin, stdout, or stderr must be set",
        ));
    }
    Ok(())
}

/// Kubelet's answer when 1000 streaming requests wait for their client.
fn in_flight() -> Status {
    Status::resource_exhausted("maximum number of in-flight requests exceeded")
}
