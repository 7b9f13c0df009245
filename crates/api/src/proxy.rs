//! The zbus proxies of the two interfaces: the transport level, with typed
//! arguments and the raw `a{sv}` replies. `Client` decodes those; tests that
//! send hostile input use `inner().call` on these.

use super::container::{ContainerFilter, ContainerOptions, Resources as ContainerResources};
use super::image::{ImageFilter, PullOptions};
use super::sandbox::{CreateOptions, ListFilter, Resources};
use super::Dict;
use std::collections::HashMap;
use zbus::proxy;
use zbus::zvariant::OwnedObjectPath;

/// (type, status, reason, message), as the wire has it.
pub type ConditionTuple = (String, bool, String, String);

#[proxy(
    interface = "org.podscope.Sandbox1.Manager",
    default_service = "org.podscope.Sandbox1",
    default_path = "/org/podscope/Sandbox1"
)]
pub trait Manager {
    fn create(
        &self,
        name: &str,
        namespace: &str,
        uid: &str,
        attempt: u32,
        options: &CreateOptions,
    ) -> zbus::Result<(String, OwnedObjectPath)>;
    fn start(&self, id: &str) -> zbus::Result<()>;
    fn stop(&self, id: &str) -> zbus::Result<()>;
    fn remove(&self, id: &str) -> zbus::Result<()>;
    /// (exit_status, finished_at, reason); blocks until the pod stops.
    fn wait(&self, id: &str) -> zbus::Result<(u32, u64, String)>;
    fn update_resources(&self, id: &str, resources: &Resources) -> zbus::Result<()>;
    /// (os, architecture, variant)
    fn platform(&self) -> zbus::Result<(String, String, String)>;
    fn status(&self, id: &str) -> zbus::Result<Dict>;
    fn list(&self, filter: &ListFilter) -> zbus::Result<Vec<Dict>>;
    fn version(&self) -> zbus::Result<(String, String, String)>;
    fn runtime_status(&self) -> zbus::Result<(Vec<ConditionTuple>, Dict)>;

    fn create_container(
        &self,
        pod_id: &str,
        name: &str,
        attempt: u32,
        image: &str,
        options: &ContainerOptions,
    ) -> zbus::Result<(String, OwnedObjectPath)>;
    fn start_container(&self, id: &str) -> zbus::Result<()>;
    fn stop_container(&self, id: &str, timeout: i64) -> zbus::Result<()>;
    fn remove_container(&self, id: &str) -> zbus::Result<()>;
    fn container_status(&self, id: &str) -> zbus::Result<Dict>;
    fn list_containers(&self, filter: &ContainerFilter) -> zbus::Result<Vec<Dict>>;
    fn update_container_resources(
        &self,
        id: &str,
        resources: &ContainerResources,
    ) -> zbus::Result<()>;
    fn reopen_container_log(&self, id: &str) -> zbus::Result<()>;
    fn checkpoint_container(
        &self,
        id: &str,
        location: &str,
        options: &crate::container::CheckpointOptions,
    ) -> zbus::Result<()>;
    /// (exit_code, stdout, stderr)
    fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout_ms: u64,
    ) -> zbus::Result<(i32, Vec<u8>, Vec<u8>)>;

    fn exec(
        &self,
        id: &str,
        cmd: &[String],
        options: &crate::exec::ExecOptions,
        stdio: &[zbus::zvariant::Fd<'_>],
        control: zbus::zvariant::Fd<'_>,
    ) -> zbus::Result<()>;

    fn attach(
        &self,
        id: &str,
        options: &crate::exec::ExecOptions,
        stdio: &[zbus::zvariant::Fd<'_>],
        control: zbus::zvariant::Fd<'_>,
    ) -> zbus::Result<()>;

    fn port_forward(&self, id: &str, port: u16) -> zbus::Result<zbus::zvariant::OwnedFd>;

    #[zbus(signal)]
    fn container_created(&self, id: String, path: OwnedObjectPath) -> zbus::Result<()>;
    #[zbus(signal)]
    fn container_state_changed(
        &self,
        id: String,
        path: OwnedObjectPath,
        state: String,
    ) -> zbus::Result<()>;
    #[zbus(signal)]
    fn container_removed(&self, id: String, path: OwnedObjectPath) -> zbus::Result<()>;

    #[zbus(signal)]
    fn sandbox_created(&self, id: String, path: OwnedObjectPath) -> zbus::Result<()>;
    #[zbus(signal)]
    fn sandbox_state_changed(
        &self,
        id: String,
        path: OwnedObjectPath,
        state: String,
    ) -> zbus::Result<()>;
    #[zbus(signal)]
    fn sandbox_removed(&self, id: String, path: OwnedObjectPath) -> zbus::Result<()>;
}

#[proxy(
    interface = "org.podscope.Sandbox1.Images",
    default_service = "org.podscope.Sandbox1",
    default_path = "/org/podscope/Sandbox1"
)]
pub trait Images {
    fn pull(&self, reference: &str, options: &PullOptions) -> zbus::Result<Dict>;
    fn list(&self, filter: &ImageFilter) -> zbus::Result<Vec<Dict>>;
    /// (image, info)
    fn status(&self, image: &str) -> zbus::Result<(Dict, Dict)>;
    fn remove(&self, image: &str) -> zbus::Result<()>;
    fn fs_info(&self) -> zbus::Result<Dict>;

    #[zbus(signal)]
    fn pull_progress(
        &self,
        reference: String,
        bytes_done: u64,
        bytes_total: u64,
        layers_done: u32,
        layers_total: u32,
    ) -> zbus::Result<()>;
}

#[proxy(
    interface = "org.podscope.Sandbox1.Sandbox",
    default_service = "org.podscope.Sandbox1"
)]
pub trait Sandbox {
    fn start(&self) -> zbus::Result<()>;
    fn stop(&self) -> zbus::Result<()>;
    fn remove(&self) -> zbus::Result<()>;
    #[zbus(property)]
    fn id(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn name(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn unit(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn init_pid(&self) -> zbus::Result<u32>;
    #[zbus(property)]
    fn reason(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn labels(&self) -> zbus::Result<HashMap<String, String>>;
    #[zbus(property, name = "IPs")]
    fn ips(&self) -> zbus::Result<Vec<String>>;
    #[zbus(property)]
    fn netns_path(&self) -> zbus::Result<String>;
}

#[proxy(
    interface = "org.podscope.Sandbox1.Container",
    default_service = "org.podscope.Sandbox1"
)]
pub trait Container {
    fn start(&self) -> zbus::Result<()>;
    fn stop(&self, timeout: i64) -> zbus::Result<()>;
    fn remove(&self) -> zbus::Result<()>;
    fn checkpoint(
        &self,
        location: &str,
        options: &crate::container::CheckpointOptions,
    ) -> zbus::Result<()>;
    #[zbus(property)]
    fn id(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn name(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn pod_id(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn unit(&self) -> zbus::Result<String>;
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> zbus::Result<u32>;
    #[zbus(property)]
    fn exit_code(&self) -> zbus::Result<i32>;
    #[zbus(property)]
    fn reason(&self) -> zbus::Result<String>;
}

/// A system-bus connection whose method calls give up after `timeout`
/// instead of waiting forever for a peer that never answers.
pub async fn system_connection(timeout: std::time::Duration) -> zbus::Result<zbus::Connection> {
    zbus::connection::Builder::system()?
        .method_timeout(timeout)
        .build()
        .await
}
