//! `/org/podscope/Sandbox1/sandbox/<id>`: one object per sandbox, exposing
//! its record as properties (with PropertiesChanged) and the per-sandbox
//! lifecycle methods.

use super::errors::BusError;
use super::polkit::{self, pod_details, Detail, Verb};
use super::{sandbox_path, Service};
use crate::pod::Exit;
use crate::state::index::Entry;
use podscope_api::domain::Resources;
use podscope_api::error::{Error, Result};
use podscope_api::{CreateOptions, PodMetadata, SandboxStatus};
use podscope_sys::descriptors::cost;
use std::collections::HashMap;
use std::sync::Arc;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::{Interface, SignalEmitter};
use zbus::zvariant::OwnedObjectPath;
use zbus::zvariant::Value;

pub struct SandboxObject {
    pub entry: Arc<Entry>,
    pub service: Arc<Service>,
}

#[interface(name = "org.podscope.Sandbox1.Sandbox")]
impl SandboxObject {
    async fn start(&self, #[zbus(header)] hdr: Header<'_>) -> Result<(), BusError> {
        self.service.start(&hdr, self.entry.id.as_str()).await
    }
    async fn stop(&self, #[zbus(header)] hdr: Header<'_>) -> Result<(), BusError> {
        self.service.stop(&hdr, self.entry.id.as_str()).await
    }
    async fn remove(&self, #[zbus(header)] hdr: Header<'_>) -> Result<(), BusError> {
        self.service.remove(&hdr, self.entry.id.as_str()).await
    }

    #[zbus(property(emits_changed_signal = "const"))]
    fn id(&self) -> String {
        self.entry.id.to_string()
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn name(&self) -> String {
        self.entry.with(|s| s.config.name.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn namespace(&self) -> String {
        self.entry.with(|s| s.config.namespace.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn uid(&self) -> String {
        self.entry.with(|s| s.config.uid.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn attempt(&self) -> u32 {
        self.entry.with(|s| s.config.attempt)
    }
    #[zbus(property)]
    fn state(&self) -> String {
        self.entry.with(|s| s.state.as_str().to_owned())
    }
    // µs since the epoch.
    #[zbus(property(emits_changed_signal = "const"))]
    fn created_at(&self) -> u64 {
        self.entry.with(|s| s.created_at)
    }
    #[zbus(property)]
    fn started_at(&self) -> u64 {
        self.entry.with(|s| s.started_at)
    }
    #[zbus(property)]
    fn finished_at(&self) -> u64 {
        self.entry.with(|s| s.finished_at)
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn unit(&self) -> String {
        self.entry.with(|s| s.unit())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn slice(&self) -> String {
        self.entry.with(|s| s.slice.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn hostname(&self) -> String {
        self.entry.with(|s| s.config.hostname.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn log_directory(&self) -> String {
        self.entry.with(|s| s.config.log_directory.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn labels(&self) -> HashMap<String, String> {
        self.entry
            .with(|s| s.config.labels.clone().into_iter().collect())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn runtime_handler(&self) -> String {
        self.entry.with(|s| s.config.runtime_handler.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn network_mode(&self) -> String {
        self.entry.with(|s| s.config.network.as_str().to_owned())
    }
    #[zbus(property)]
    fn netns_path(&self) -> String {
        self.entry.with(|s| s.live_netns_path())
    }
    #[zbus(property, name = "IPs")]
    fn ips(&self) -> Vec<String> {
        self.entry.with(|s| s.network.ips.clone())
    }
    #[zbus(property)]
    fn init_pid(&self) -> u32 {
        self.entry.with(|s| s.init_pid)
    }
    // Why the sandbox stopped when nobody asked it to; empty otherwise.
    #[zbus(property)]
    fn reason(&self) -> String {
        self.entry.with(|s| s.reason.clone())
    }
}

impl SandboxObject {
    /// One PropertiesChanged with every property that is not "const" (the
    /// names as the declarations above give them).
    pub async fn emit_changes(&self, emitter: &SignalEmitter<'_>) -> zbus::Result<()> {
        let changed: HashMap<&str, Value<'_>> = HashMap::from([
            ("State", self.state().into()),
            ("StartedAt", self.started_at().into()),
            ("FinishedAt", self.finished_at().into()),
            ("InitPid", self.init_pid().into()),
            ("NetnsPath", self.netns_path().into()),
            ("Reason", self.reason().into()),
            ("IPs", self.ips().into()),
        ]);
        super::properties::properties_changed(emitter, <Self as Interface>::name(), changed).await
    }
}

/// The sandbox verbs, which the Manager (by id) and each Sandbox object
/// answer.
impl Service {
    /// Resolve `id` (a prefix is checked and looked up here, once), then the
    /// polkit check for `verb` on that sandbox, whose full id the rules see
    /// with its namespace and name (`polkit_details`), so a site may grant a
    /// group one namespace only. The operation then acts on the entry
    /// resolved here. A malformed or unknown id fails before polkit is
    /// asked: reading is open to everyone, so that says nothing new.
    async fn authorize(&self, hdr: &Header<'_>, verb: Verb, id: &str) -> Result<Arc<Entry>> {
        let entry = self.pods.resolve(id)?;
        let full = entry.id.to_string();
        // A port forward into a pod of the host's network reaches the
        // host's own loopback services: as privileged as that pod was.
        let privileges = match verb {
            Verb::PortForward => entry.with(|sb| sb.config.host_namespaces()),
            _ => Vec::new(),
        };
        let action = polkit::action_for(&privileges);
        self.auth
            .check(hdr, action, verb, || {
                let mut d = entry
                    .with(|sb| pod_details(verb, &sb.config.namespace, &sb.config.name, &full));
                if verb == Verb::PortForward {
                    d.push((Detail::Privileges, privileges.join(", ")));
                }
                d
            })
            .await?;
        Ok(entry)
    }

    pub async fn create(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        meta: PodMetadata,
        options: CreateOptions,
    ) -> Result<(String, OwnedObjectPath), BusError> {
        // Validate, then authorize: polkit is asked only about a pod that
        // could be made.
        let config = options.into_config(meta);
        config.validate()?;
        // Host namespaces, host ports or a chosen cgroup parent need the
        // privileged action: a rule granting one namespace's pods does not
        // grant those.
        let privileges = config.privileges(&self.containers.settings.log_root);
        let action = polkit::action_for(&privileges);
        self.auth
            .check(hdr, action, Verb::Create, || {
                let mut d = pod_details(Verb::Create, &config.namespace, &config.name, "");
                d.push((Detail::Privileges, privileges.join(", ")));
                d
            })
            .await?;
        let fds = self.fds.reserve(
            &format!("sandbox {}/{}: create", config.namespace, config.name),
            cost::POD_CREATE,
        )?;
        let this = self.clone();
        let out = self
            .detached(async move {
                let _fds = fds;
                let entry = this.pods.create(config).await?;
                let path = sandbox_path(&entry.id);
                let obj = SandboxObject {
                    entry: entry.clone(),
                    service: this.clone(),
                };
                this.export(&path, obj).await?;
                Ok((entry.id.to_string(), path))
            })
            .await?;
        Ok(out)
    }

    pub async fn start(self: &Arc<Self>, hdr: &Header<'_>, id: &str) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::Start, id).await?;
        let fds = self
            .fds
            .reserve(&format!("sandbox {}: start", entry.id), cost::POD_START)?;
        let this = self.clone();
        self.detached(async move {
            let _fds = fds;
            this.pods.start(&entry).await.map(drop)
        })
        .await?;
        Ok(())
    }

    pub async fn stop(self: &Arc<Self>, hdr: &Header<'_>, id: &str) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::Stop, id).await?;
        let this = self.clone();
        self.detached(async move { this.pods.stop(&entry).await.map(drop) })
            .await?;
        Ok(())
    }

    pub async fn remove(self: &Arc<Self>, hdr: &Header<'_>, id: &str) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::Remove, id).await?;
        let this = self.clone();
        self.detached(async move {
            let id = this.pods.remove(&entry).await?;
            let path = sandbox_path(&id);
            this.unexport::<SandboxObject>(&path, &format!("sandbox {id}"))
                .await;
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// Status, with the annotations for root's callers only: they can hold
    /// secrets, and reading is open to every local user. (A polkit check
    /// here would hand the flood of an open read call on to polkitd.)
    pub async fn status(&self, hdr: &Header<'_>, id: &str) -> Result<SandboxStatus, BusError> {
        let entry = self.pods.resolve(id)?;
        let status = entry.with(SandboxStatus::of);
        Ok(if self.auth.caller_uid(hdr).await? == 0 {
            status
        } else {
            status.without_annotations()
        })
    }

    /// Wait until the sandbox leaves READY. Ends early, unanswered, when
    /// the caller disconnects.
    pub async fn wait(&self, hdr: &Header<'_>, id: &str) -> Result<Exit, BusError> {
        let uid = self.auth.caller_uid(hdr).await?;
        let _slot = self.waiters.acquire(uid, true)?;
        let Some(caller) = hdr.sender() else {
            return Ok(self.pods.wait(id).await?);
        };
        tokio::select! {
            exit = self.pods.wait(id) => Ok(exit?),
            _ = self.callers.gone(caller) => {
                tracing::debug!(caller = %caller, "Wait({id}): the caller left");
                Err(Error::internal("the caller disconnected").into())
            }
        }
    }

    pub async fn update_resources(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        resources: Resources,
    ) -> Result<(), BusError> {
        let entry = self.authorize(hdr, Verb::UpdateResources, id).await?;
        let this = self.clone();
        self.detached(async move {
            this.pods
                .update_resources(&entry, resources)
                .await
                .map(drop)
        })
        .await?;
        Ok(())
    }

    pub async fn port_forward(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        port: u16,
    ) -> Result<std::os::fd::OwnedFd, BusError> {
        let entry = self.authorize(hdr, Verb::PortForward, id).await?;
        let fds = self.fds.reserve(
            &format!("sandbox {}: port forward", entry.id),
            cost::PORT_FORWARD,
        )?;
        let this = self.clone();
        let fd = self
            .detached(async move {
                let _fds = fds;
                this.pods.port_forward(&entry, port).await
            })
            .await?;
        Ok(fd)
    }
}
