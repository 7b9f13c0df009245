//! `/org/podscope/Sandbox1/sandbox/<id>`: one object per sandbox, exposing
//! its record as properties (with PropertiesChanged) and the per-sandbox
//! lifecycle methods.

use super::errors::BusError;
use super::Service;
use crate::registry::Entry;
use std::collections::HashMap;
use std::sync::Arc;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::{Interface, SignalEmitter};
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
        super::properties_changed(emitter, <Self as Interface>::name(), changed).await
    }
}
