//! The typed client of `org.podscope.Sandbox1.Manager`, used by
//! podscopectl, the CRI frontend, the bench and the integration tests.
//! Replies are decoded here, once: a reply missing a key, or with a key of
//! the wrong type, is an error naming it, never a silent "" or 0.

use super::container::{
    ContainerFilter, ContainerOptions, ContainerStatus, ContainerSummary, ExecResult,
    Resources as ContainerResources,
};
use super::image::{ImageFilter, ImageFsInfo, ImageInfo, ImageSummary, PullOptions};
use super::proxy::{ImagesProxy, ManagerProxy};
use super::sandbox::{
    Condition, CreateOptions, Exit, ListFilter, Platform, PodMetadata, Resources, RuntimeInfo,
    SandboxStatus, SandboxSummary, Version,
};
use super::{from_dict, Dict};
use serde::de::DeserializeOwned;
use zbus::zvariant::OwnedObjectPath;

#[derive(Clone, Debug)]
pub struct Client {
    proxy: ManagerProxy<'static>,
    images: ImagesProxy<'static>,
}

/// A reply that does not match the contract, as a call failure.
fn decode<T: DeserializeOwned>(method: &str, d: &Dict) -> zbus::Result<T> {
    from_dict(None, d).map_err(|e| zbus::Error::Failure(format!("{method} reply: {e}")))
}

impl Client {
    pub async fn new(conn: &zbus::Connection) -> zbus::Result<Self> {
        let proxy = ManagerProxy::builder(conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        Self::from_proxy(proxy).await
    }

    /// A client on the connection of `proxy` (the Images proxy beside it
    /// costs no round trip: it caches no properties).
    pub async fn from_proxy(proxy: ManagerProxy<'static>) -> zbus::Result<Self> {
        let images = ImagesProxy::builder(proxy.inner().connection())
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        Ok(Client { proxy, images })
    }

    pub fn images_proxy(&self) -> &ImagesProxy<'static> {
        &self.images
    }

    /// The transport underneath, for calls with flags or raw arguments.
    pub fn proxy(&self) -> &ManagerProxy<'static> {
        &self.proxy
    }

    pub async fn create(
        &self,
        meta: &PodMetadata,
        options: &CreateOptions,
    ) -> zbus::Result<(String, OwnedObjectPath)> {
        self.proxy
            .create(
                &meta.name,
                &meta.namespace,
                &meta.uid,
                meta.attempt,
                options,
            )
            .await
    }

    pub async fn start(&self, id: &str) -> zbus::Result<()> {
        self.proxy.start(id).await
    }

    pub async fn stop(&self, id: &str) -> zbus::Result<()> {
        self.proxy.stop(id).await
    }

    pub async fn remove(&self, id: &str) -> zbus::Result<()> {
        self.proxy.remove(id).await
    }

    pub async fn wait(&self, id: &str) -> zbus::Result<Exit> {
        let (status, finished_at, reason) = self.proxy.wait(id).await?;
        Ok(Exit {
            status,
            finished_at,
            reason,
        })
    }

    pub async fn update_resources(&self, id: &str, r: &Resources) -> zbus::Result<()> {
        self.proxy.update_resources(id, r).await
    }

    pub async fn platform(&self) -> zbus::Result<Platform> {
        let (os, architecture, variant) = self.proxy.platform().await?;
        Ok(Platform {
            os,
            architecture,
            variant,
        })
    }

    pub async fn status(&self, id: &str) -> zbus::Result<SandboxStatus> {
        decode("Status", &self.proxy.status(id).await?)
    }

    /// Status with the raw dictionary beside it (CRI's verbose info).
    pub async fn status_with_dict(&self, id: &str) -> zbus::Result<(SandboxStatus, Dict)> {
        let d = self.proxy.status(id).await?;
        Ok((decode("Status", &d)?, d))
    }

    pub async fn list(&self, filter: &ListFilter) -> zbus::Result<Vec<SandboxSummary>> {
        self.proxy
            .list(filter)
            .await?
            .iter()
            .map(|d| decode("List", d))
            .collect()
    }

    pub async fn version(&self) -> zbus::Result<Version> {
        let (runtime_name, runtime_version, api_version) = self.proxy.version().await?;
        Ok(Version {
            runtime_name,
            runtime_version,
            api_version,
        })
    }

    /// RuntimeStatus: conditions, decoded info and the raw info.
    pub async fn runtime_status(&self) -> zbus::Result<(Vec<Condition>, RuntimeInfo, Dict)> {
        let (conditions, d) = self.proxy.runtime_status().await?;
        let conditions = conditions
            .into_iter()
            .map(|(kind, status, reason, message)| Condition {
                kind,
                status,
                reason,
                message,
            })
            .collect();
        Ok((conditions, decode("RuntimeStatus", &d)?, d))
    }

    pub async fn create_container(
        &self,
        pod_id: &str,
        name: &str,
        attempt: u32,
        image: &str,
        options: &ContainerOptions,
    ) -> zbus::Result<(String, OwnedObjectPath)> {
        self.proxy
            .create_container(pod_id, name, attempt, image, options)
            .await
    }

    pub async fn start_container(&self, id: &str) -> zbus::Result<()> {
        self.proxy.start_container(id).await
    }

    pub async fn stop_container(&self, id: &str, timeout_secs: i64) -> zbus::Result<()> {
        self.proxy.stop_container(id, timeout_secs).await
    }

    pub async fn remove_container(&self, id: &str) -> zbus::Result<()> {
        self.proxy.remove_container(id).await
    }

    pub async fn container_status(&self, id: &str) -> zbus::Result<ContainerStatus> {
        decode("ContainerStatus", &self.proxy.container_status(id).await?)
    }

    /// ContainerStatus with the raw dictionary beside it (CRI's verbose info).
    pub async fn container_status_with_dict(
        &self,
        id: &str,
    ) -> zbus::Result<(ContainerStatus, Dict)> {
        let d = self.proxy.container_status(id).await?;
        Ok((decode("ContainerStatus", &d)?, d))
    }

    pub async fn list_containers(
        &self,
        filter: &ContainerFilter,
    ) -> zbus::Result<Vec<ContainerSummary>> {
        self.proxy
            .list_containers(filter)
            .await?
            .iter()
            .map(|d| decode("ListContainers", d))
            .collect()
    }

    pub async fn update_container_resources(
        &self,
        id: &str,
        r: &ContainerResources,
    ) -> zbus::Result<()> {
        self.proxy.update_container_resources(id, r).await
    }

    pub async fn reopen_container_log(&self, id: &str) -> zbus::Result<()> {
        self.proxy.reopen_container_log(id).await
    }

    /// The container's memory and files into the archive `location` (a
    /// path the daemon writes as root; it must not exist).
    pub async fn checkpoint_container(
        &self,
        id: &str,
        location: &str,
        options: &crate::container::CheckpointOptions,
    ) -> zbus::Result<()> {
        self.proxy.checkpoint_container(id, location, options).await
    }

    pub async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout_ms: u64,
    ) -> zbus::Result<ExecResult> {
        let (exit_code, stdout, stderr) = self.proxy.exec_sync(id, cmd, timeout_ms).await?;
        Ok(ExecResult {
            exit_code,
            stdout,
            stderr,
        })
    }

    /// Start `cmd` in a container with these descriptors (see api::exec);
    /// the session then lives on `control`'s peer.
    pub async fn exec(
        &self,
        id: &str,
        cmd: &[String],
        options: &crate::exec::ExecOptions,
        stdio: &[std::os::fd::BorrowedFd<'_>],
        control: std::os::fd::BorrowedFd<'_>,
    ) -> zbus::Result<()> {
        let stdio: Vec<zbus::zvariant::Fd<'_>> =
            stdio.iter().map(|f| zbus::zvariant::Fd::from(*f)).collect();
        self.proxy
            .exec(id, cmd, options, &stdio, zbus::zvariant::Fd::from(control))
            .await
    }

    /// Join a running container's streams with these descriptors (see
    /// api::exec); the session then lives on `control`'s peer.
    pub async fn attach(
        &self,
        id: &str,
        options: &crate::exec::ExecOptions,
        stdio: &[std::os::fd::BorrowedFd<'_>],
        control: std::os::fd::BorrowedFd<'_>,
    ) -> zbus::Result<()> {
        let stdio: Vec<zbus::zvariant::Fd<'_>> =
            stdio.iter().map(|f| zbus::zvariant::Fd::from(*f)).collect();
        self.proxy
            .attach(id, options, &stdio, zbus::zvariant::Fd::from(control))
            .await
    }

    /// A socket connected to localhost:`port` in the pod's namespace.
    pub async fn port_forward(&self, id: &str, port: u16) -> zbus::Result<std::os::fd::OwnedFd> {
        Ok(self.proxy.port_forward(id, port).await?.into())
    }

    pub async fn pull_image(
        &self,
        reference: &str,
        options: &PullOptions,
    ) -> zbus::Result<ImageSummary> {
        decode("Pull", &self.images.pull(reference, options).await?)
    }

    pub async fn list_images(&self, filter: &ImageFilter) -> zbus::Result<Vec<ImageSummary>> {
        self.images
            .list(filter)
            .await?
            .iter()
            .map(|d| decode("List", d))
            .collect()
    }

    pub async fn image_status(&self, image: &str) -> zbus::Result<(ImageSummary, ImageInfo)> {
        let (s, i) = self.images.status(image).await?;
        Ok((decode("Status", &s)?, decode("Status", &i)?))
    }

    pub async fn remove_image(&self, image: &str) -> zbus::Result<()> {
        self.images.remove(image).await
    }

    pub async fn image_fs_info(&self) -> zbus::Result<ImageFsInfo> {
        decode("FsInfo", &self.images.fs_info().await?)
    }
}
