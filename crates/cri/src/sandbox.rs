//! The CRI pod sandbox calls, translated: RunPodSandbox (Create then
//! Start, joining a retry's pod), Stop and Remove (idempotent), listings
//! and pod stats. The messages' conversion is `convert::sandbox`.

use crate::calls::{cannot_name, detached, required_id, Cri};
use crate::convert;
use crate::errors::{is_already_exists, is_not_found, status_of};
use crate::stats::{self, PodRef};
use cri_api::v1 as cri;
use podscope_api::domain::container::ContainerState;
use podscope_api::domain::id::Id;
use podscope_api::domain::{NetworkMode, SandboxConfig, SandboxId, State};
use podscope_api::{CreateOptions, ListFilter, SandboxSummary};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;
use tracing::warn;

#[derive(Clone, Copy)]
pub(crate) enum Teardown {
    Stop,
    Remove,
}

impl Cri {
    /// Create then Start. A Create that finds the same pod (same name,
    /// namespace, uid and attempt) already made — a retry after the
    /// client's deadline — joins it instead of making a second one.
    pub(crate) async fn run_pod_sandbox(&self, config: SandboxConfig) -> Result<String, Status> {
        if !config.log_directory.is_empty() {
            std::fs::create_dir_all(&config.log_directory).map_err(|e| {
                Status::internal(format!(
                    "config.log_directory: cannot create {}: {e}",
                    config.log_directory
                ))
            })?;
        }
        let (meta, options) = CreateOptions::from_config(&config);
        let deadline = Instant::now() + Duration::from_secs(300);
        let c = &config;
        loop {
            let (meta, opts) = (&meta, &options);
            let created = self
                .daemon
                .call(|m| async move { m.create(meta, opts).await })
                .await;
            match created {
                Ok((id, _)) => {
                    let idr = &id;
                    if let Err(e) = self
                        .daemon
                        .call(|m| async move { m.start(idr).await })
                        .await
                    {
                        let status = status_of(&e);
                        // Leave nothing half-made behind the error.
                        if let Err(re) = self
                            .daemon
                            .call(|m| async move { m.remove(idr).await })
                            .await
                        {
                            warn!(sandbox_id = %id, "CRI RunPodSandbox: start failed and removing the sandbox failed too: {re}");
                        }
                        return Err(status);
                    }
                    return Ok(id);
                }
                Err(e) if is_already_exists(&e) => {
                    if let Some(id) = self.existing(c).await? {
                        // Joins an in-flight Start (the daemon serialises
                        // per sandbox) or returns at once if it is ready.
                        let idr = &id;
                        self.daemon
                            .rpc(|m| async move { m.start(idr).await })
                            .await?;
                        return Ok(id);
                    }
                    // The other Create has not finished (or just failed):
                    // look again shortly.
                    if Instant::now() > deadline {
                        return Err(status_of(&e));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(status_of(&e)),
            }
        }
    }

    /// The live sandbox with the same key as `config`, if the daemon has
    /// finished creating it; a stopped one is an error (a new attempt is
    /// needed).
    pub(crate) async fn existing(&self, config: &SandboxConfig) -> Result<Option<String>, Status> {
        let filter = ListFilter {
            name: Some(config.name.clone()),
            namespace: Some(config.namespace.clone()),
            ..Default::default()
        };
        let f = &filter;
        let found = self.daemon.rpc(|m| async move { m.list(f).await }).await?;
        let Some(d) = found
            .into_iter()
            .find(|d| d.uid == config.uid && d.attempt == config.attempt)
        else {
            return Ok(None);
        };
        let id = d.id;
        if d.state == State::NotReady {
            return Err(Status::already_exists(format!(
                "sandbox {id} for {}/{} uid {} attempt {} exists and is stopped; use a new attempt",
                config.namespace, config.name, config.uid, config.attempt
            )));
        }
        Ok(Some(id))
    }

    /// Stop or Remove, run to completion even if the client hangs up; an
    /// id the daemon does not know is already done, as the CRI contract says,
    /// and so is one no pod could have (critest's UUIDs).
    pub(crate) async fn teardown(
        self: Arc<Self>,
        what: Teardown,
        id: String,
    ) -> Result<(), Status> {
        if id.is_empty() {
            return required_id(&id);
        }
        if cannot_name(SandboxId::KIND, &id) {
            return Ok(());
        }
        detached(async move {
            let r = self
                .daemon
                .call(|m| {
                    let id = &id;
                    async move {
                        match what {
                            Teardown::Stop => m.stop(id).await,
                            Teardown::Remove => m.remove(id).await,
                        }
                    }
                })
                .await;
            match r {
                Err(e) if is_not_found(&e) => Ok(()),
                r => r.map_err(|e| status_of(&e)),
            }
        })
        .await
    }

    pub(crate) async fn list(
        &self,
        q: convert::sandbox::ListQuery,
    ) -> Result<Vec<SandboxSummary>, Status> {
        let filter = &q.filter;
        let mut all = self
            .daemon
            .rpc(|m| async move { m.list(filter).await })
            .await?;
        if q.only_not_ready {
            all.retain(|d| d.state != State::Ready);
        }
        Ok(all)
    }

    pub(crate) fn pod_stats(
        &self,
        mounts: &stats::Mounts,
        d: &SandboxSummary,
        containers: &[podscope_api::container::ContainerSummary],
        timestamp: i64,
    ) -> cri::PodSandboxStats {
        let pod = PodRef {
            id: &d.id,
            // The pod as a whole where kubelet gave it a slice of its own
            // (kubelet's /stats/summary takes a pod's CPU and memory from
            // here with PodAndContainerStatsFromCRI); else its scope.
            cgroup: stats::pod_slice_cgroup(&d.cgroup, &d.uid).unwrap_or(&d.cgroup),
            init_pid: d.init_pid,
            pod_network: d.network == NetworkMode::Pod,
        };
        let pod_sandbox = convert::sandbox::pod_sandbox(d);
        let mut linux = stats::linux_stats(mounts, &pod, &self.rates, timestamp);
        if let Some(l) = linux.as_mut() {
            l.containers = containers
                .iter()
                .filter(|c| c.pod_id == d.id && c.state != ContainerState::Exited)
                .map(|c| crate::convert::container::stats_of(mounts, &self.rates, c, timestamp))
                .collect();
        }
        cri::PodSandboxStats {
            attributes: Some(cri::PodSandboxAttributes {
                id: d.id.clone(),
                metadata: pod_sandbox.metadata,
                labels: pod_sandbox.labels,
                annotations: pod_sandbox.annotations,
            }),
            linux,
            windows: None,
        }
    }
}
