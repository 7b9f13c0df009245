//! `/org/podscope/Sandbox1`, interface `org.podscope.Sandbox1.Manager`:
//! the entry point for creating, driving and inspecting sandboxes.

use super::errors::BusError;
use super::Service;
use crate::pod::ListFilter;
use podscope_api::container::{
    ContainerFilter, ContainerOptions, ContainerStatus, ContainerSummary,
};
use podscope_api::error::Error;
use podscope_api::{
    self, dict::owned_arg, from_dict, Condition, CreateOptions, DictArg, PodMetadata, RuntimeInfo,
    SandboxStatus, SandboxSummary,
};
use std::sync::Arc;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedObjectPath};

pub struct Manager {
    pub service: Arc<Service>,
}

/// List's filter as the lifecycle's query; the id prefix is checked here.
pub(crate) fn list_filter(filter: &DictArg<'_>) -> Result<ListFilter, Error> {
    let f: podscope_api::ListFilter = from_dict(Some("filter"), filter)?;
    if let Some(p) = &f.id {
        podscope_api::domain::id::validate_prefix(p).map_err(|e| e.context("filter"))?;
    }
    Ok(ListFilter {
        id_prefix: f.id,
        state: f.state,
        labels: f.labels.unwrap_or_default(),
        namespace: f.namespace,
        name: f.name,
    })
}

#[interface(name = "org.podscope.Sandbox1.Manager")]
impl Manager {
    // Create a sandbox (state "created"). Options: see dbus/org.podscope.Sandbox1.xml.
    #[zbus(out_args("id", "path"))]
    async fn create(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        name: &str,
        namespace: &str,
        uid: &str,
        attempt: u32,
        options: DictArg<'_>,
    ) -> Result<(String, OwnedObjectPath), BusError> {
        // Decoded here, from the message itself: nothing a caller sent is
        // copied before it is known to fit (`dict::STRING_MAX`).
        let options: CreateOptions = from_dict(None, &options)?;
        let meta = PodMetadata {
            name: owned_arg("name", name)?,
            namespace: owned_arg("namespace", namespace)?,
            uid: owned_arg("uid", uid)?,
            attempt,
        };
        self.service.create(&hdr, meta, options).await
    }

    async fn start(&self, #[zbus(header)] hdr: Header<'_>, id: &str) -> Result<(), BusError> {
        self.service.start(&hdr, id).await
    }

    async fn stop(&self, #[zbus(header)] hdr: Header<'_>, id: &str) -> Result<(), BusError> {
        self.service.stop(&hdr, id).await
    }

    async fn remove(&self, #[zbus(header)] hdr: Header<'_>, id: &str) -> Result<(), BusError> {
        self.service.remove(&hdr, id).await
    }

    // Block until the sandbox leaves ready: (exit_status, finished_at, reason).
    #[zbus(out_args("exit_status", "finished_at", "reason"))]
    async fn wait(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
    ) -> Result<(u32, u64, String), BusError> {
        let exit = self.service.wait(&hdr, id).await?;
        Ok((exit.status, exit.finished_at, exit.reason))
    }

    // New pod-level resources (the keys of Create's "resources").
    async fn update_resources(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        resources: DictArg<'_>,
    ) -> Result<(), BusError> {
        let r: podscope_api::Resources = from_dict(Some("resources"), &resources)?;
        self.service.update_resources(&hdr, id, r.into()).await
    }

    #[zbus(out_args("os", "architecture", "variant"))]
    fn platform(&self) -> (String, String, String) {
        let p = podscope_api::domain::platform::host();
        (p.os.into(), p.architecture.into(), p.variant.into())
    }

    #[zbus(out_args("status"))]
    async fn status(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
    ) -> Result<SandboxStatus, BusError> {
        self.service.status(&hdr, id).await
    }

    #[zbus(out_args("sandboxes"))]
    async fn list(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        filter: DictArg<'_>,
    ) -> Result<Vec<SandboxSummary>, BusError> {
        let f = list_filter(&filter)?;
        let root = self.service.auth.caller_uid(&hdr).await? == 0;
        let all = self
            .service
            .pods
            .list(&f)
            .iter()
            .map(|e| e.with(SandboxSummary::of))
            .collect();
        Ok(podscope_api::list_budget::for_caller(all, root))
    }

    #[zbus(out_args("runtime_name", "runtime_version", "api_version"))]
    fn version(&self) -> (String, String, String) {
        (
            "podscope".into(),
            env!("CARGO_PKG_VERSION").into(),
            podscope_api::API_VERSION.into(),
        )
    }

    // Ready conditions as (type, status, reason, message), plus counters.
    #[zbus(out_args("conditions", "info"))]
    async fn runtime_status(&self) -> (Vec<Condition>, RuntimeInfo) {
        self.service.runtime_status().await
    }

    // Make a container in a ready pod (state "created"). Options: see the
    // interface XML.
    #[zbus(out_args("id", "path"))]
    #[allow(clippy::too_many_arguments)]
    async fn create_container(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        pod_id: &str,
        name: &str,
        attempt: u32,
        image: &str,
        options: DictArg<'_>,
    ) -> Result<(String, OwnedObjectPath), BusError> {
        let options: ContainerOptions = from_dict(Some("options"), &options)?;
        let config = options.into_config(
            owned_arg("name", name)?,
            attempt,
            owned_arg("image", image)?,
        );
        self.service.create_container(&hdr, pod_id, config).await
    }

    async fn start_container(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
    ) -> Result<(), BusError> {
        self.service.start_container(&hdr, id).await
    }

    // The stop signal, then SIGKILL after `timeout` seconds (0: at once).
    async fn stop_container(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        timeout: i64,
    ) -> Result<(), BusError> {
        self.service.stop_container(&hdr, id, timeout).await
    }

    async fn remove_container(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
    ) -> Result<(), BusError> {
        self.service.remove_container(&hdr, id).await
    }

    #[zbus(out_args("status"))]
    async fn container_status(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
    ) -> Result<ContainerStatus, BusError> {
        self.service.container_status(&hdr, id).await
    }

    #[zbus(out_args("containers"))]
    async fn list_containers(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        filter: DictArg<'_>,
    ) -> Result<Vec<ContainerSummary>, BusError> {
        let f: ContainerFilter = from_dict(Some("filter"), &filter)?;
        self.service.list_containers(&hdr, f).await
    }

    async fn update_container_resources(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        resources: DictArg<'_>,
    ) -> Result<(), BusError> {
        let r: podscope_api::container::Resources = from_dict(Some("resources"), &resources)?;
        self.service
            .update_container_resources(&hdr, id, r.into())
            .await
    }

    async fn reopen_container_log(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
    ) -> Result<(), BusError> {
        self.service.reopen_container_log(&hdr, id).await
    }

    // The container's memory (CRIU, through its runtime) and files into a
    // checkpoint archive at `location`, which must not exist; the container
    // keeps running unless options' `stop`.
    async fn checkpoint_container(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        location: &str,
        options: DictArg<'_>,
    ) -> Result<(), BusError> {
        let options: podscope_api::container::CheckpointOptions =
            from_dict(Some("options"), &options)?;
        self.service
            .checkpoint_container(&hdr, id, owned_arg("location", location)?, options)
            .await
    }

    // Run `cmd` in a running container: (exit_code, stdout, stderr), each
    // output capped at 8 MiB; `timeout_ms` 0 is none.
    #[zbus(out_args("exit_code", "stdout", "stderr"))]
    async fn exec_sync(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        cmd: Vec<String>,
        timeout_ms: u64,
    ) -> Result<(i32, Vec<u8>, Vec<u8>), BusError> {
        let r = self.service.exec_sync(&hdr, id, cmd, timeout_ms).await?;
        Ok((r.exit_code, r.stdout, r.stderr))
    }

    // Start `cmd` in a running container with the caller's descriptors
    // (`stdio`: the streams `options` names, in order) or a terminal; the
    // session goes on over `control` (see api::exec). Answers once the
    // command's unit is started.
    async fn exec(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        cmd: Vec<String>,
        options: DictArg<'_>,
        stdio: Vec<zbus::zvariant::OwnedFd>,
        control: zbus::zvariant::OwnedFd,
    ) -> Result<(), BusError> {
        let o: podscope_api::exec::ExecOptions = from_dict(Some("options"), &options)?;
        let stdio = stdio.into_iter().map(std::os::fd::OwnedFd::from).collect();
        self.service
            .exec(&hdr, id, cmd, o, stdio, control.into())
            .await
    }

    // Join a running container's stdin, stdout and stderr (or its
    // terminal) with the caller's descriptors, as Exec takes them; the
    // session goes on over `control`.
    async fn attach(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        options: DictArg<'_>,
        stdio: Vec<zbus::zvariant::OwnedFd>,
        control: zbus::zvariant::OwnedFd,
    ) -> Result<(), BusError> {
        let o: podscope_api::exec::ExecOptions = from_dict(Some("options"), &options)?;
        let stdio = stdio.into_iter().map(std::os::fd::OwnedFd::from).collect();
        self.service
            .attach(&hdr, id, o, stdio, control.into())
            .await
    }

    // A TCP connection to localhost:port inside the pod's network
    // namespace (the host's for a host-network pod), handed over connected.
    #[zbus(out_args("socket"))]
    async fn port_forward(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: &str,
        port: u16,
    ) -> Result<zbus::zvariant::OwnedFd, BusError> {
        let fd = self.service.port_forward(&hdr, id, port).await?;
        Ok(fd.into())
    }

    #[zbus(signal)]
    pub async fn container_created(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    pub async fn container_state_changed(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
        state: &str,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    pub async fn container_removed(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    pub async fn sandbox_created(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    pub async fn sandbox_state_changed(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
        state: &str,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    pub async fn sandbox_removed(
        emitter: &SignalEmitter<'_>,
        id: &str,
        path: ObjectPath<'_>,
    ) -> zbus::Result<()>;
}

#[cfg(test)]
mod tests {
    use zbus::object_server::Interface;

    /// The attribute above and the proxy spell the interface name again;
    /// they must agree with the contract's.
    #[test]
    fn interface_names_match_the_contract() {
        assert_eq!(
            super::Manager::name().as_str(),
            podscope_api::MANAGER_INTERFACE
        );
        assert_eq!(
            crate::bus::sandbox::SandboxObject::name().as_str(),
            podscope_api::SANDBOX_INTERFACE
        );
        use zbus::proxy::Defaults;
        assert_eq!(
            podscope_api::proxy::ManagerProxy::INTERFACE
                .as_ref()
                .map(|i| i.as_str()),
            Some(podscope_api::MANAGER_INTERFACE)
        );
    }
}
