//! `/org/podscope/Sandbox1`, interface `org.podscope.Sandbox1.Manager`:
//! the entry point for creating, driving and inspecting sandboxes.

use super::errors::BusError;
use super::options::{self, status_dict, summary_dict, Dict};
use super::Service;
use crate::domain::State;
use crate::error::Error;
use crate::lifecycle::ListFilter;
use std::collections::HashMap;
use std::sync::Arc;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value};

pub const INTERFACE: &str = "org.podscope.Sandbox1.Manager";
pub const API_VERSION: &str = "v1";

pub struct Manager {
    pub service: Arc<Service>,
}

fn list_filter(filter: &Dict) -> Result<ListFilter, Error> {
    let mut f = ListFilter::default();
    for (k, v) in filter {
        let v: &Value<'_> = v;
        let field = format!("filter.{k}");
        match k.as_str() {
            "id" => {
                let p = options::get_str(&field, v)?;
                crate::domain::id::validate_prefix(&p).map_err(|e| e.context("filter"))?;
                f.id_prefix = Some(p);
            }
            "state" => {
                let s = options::get_str(&field, v)?;
                f.state = Some(State::parse(&s).ok_or_else(|| {
                    Error::invalid(
                        &field,
                        format!("{s:?} is not one of created, ready, notready"),
                    )
                })?);
            }
            "labels" => f.labels = options::get_string_map(&field, v)?,
            "namespace" => f.namespace = Some(options::get_str(&field, v)?),
            "name" => f.name = Some(options::get_str(&field, v)?),
            _ => {
                return Err(Error::invalid(
                    &field,
                    "unknown filter (known: id, state, labels, namespace, name)",
                ))
            }
        }
    }
    Ok(f)
}

#[interface(name = "org.podscope.Sandbox1.Manager")]
impl Manager {
    // Create a sandbox (state "created"). Options: see dbus/org.podscope.Sandbox1.xml.
    #[zbus(out_args("id", "path"))]
    async fn create(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        name: String,
        namespace: String,
        uid: String,
        attempt: u32,
        options: Dict,
    ) -> Result<(String, OwnedObjectPath), BusError> {
        self.service
            .create(&hdr, name, namespace, uid, attempt, options)
            .await
    }

    async fn start(&self, #[zbus(header)] hdr: Header<'_>, id: String) -> Result<(), BusError> {
        self.service.start(&hdr, &id).await
    }

    async fn stop(&self, #[zbus(header)] hdr: Header<'_>, id: String) -> Result<(), BusError> {
        self.service.stop(&hdr, &id).await
    }

    async fn remove(&self, #[zbus(header)] hdr: Header<'_>, id: String) -> Result<(), BusError> {
        self.service.remove(&hdr, &id).await
    }

    // Block until the sandbox leaves ready: (exit_status, finished_at, reason).
    #[zbus(out_args("exit_status", "finished_at", "reason"))]
    async fn wait(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: String,
    ) -> Result<(u32, u64, String), BusError> {
        let exit = self.service.wait(&hdr, &id).await?;
        Ok((exit.status, exit.finished_at, exit.reason))
    }

    // New pod-level resources (the keys of Create's "resources").
    async fn update_resources(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        id: String,
        resources: Dict,
    ) -> Result<(), BusError> {
        let r = options::resources_from_dict("resources", &resources)?;
        self.service.update_resources(&hdr, &id, r).await
    }

    #[zbus(out_args("os", "architecture", "variant"))]
    fn platform(&self) -> (String, String, String) {
        let p = crate::domain::platform::host();
        (p.os.into(), p.architecture.into(), p.variant.into())
    }

    #[zbus(out_args("status"))]
    async fn status(&self, id: String) -> Result<Dict, BusError> {
        let entry = self.service.lifecycle.resolve(&id)?;
        Ok(entry.with(status_dict))
    }

    #[zbus(out_args("sandboxes"))]
    async fn list(&self, filter: Dict) -> Result<Vec<Dict>, BusError> {
        let f = list_filter(&filter)?;
        Ok(self
            .service
            .lifecycle
            .list(&f)
            .iter()
            .map(|e| e.with(summary_dict))
            .collect())
    }

    #[zbus(out_args("runtime_name", "runtime_version", "api_version"))]
    fn version(&self) -> (String, String, String) {
        (
            "podscope".into(),
            env!("CARGO_PKG_VERSION").into(),
            API_VERSION.into(),
        )
    }

    // Ready conditions as (type, status, reason, message), plus counters.
    #[zbus(out_args("conditions", "info"))]
    async fn runtime_status(&self) -> (Vec<(String, bool, String, String)>, Dict) {
        self.service.runtime_status().await
    }

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

pub fn info_value<'a>(v: impl Into<Value<'a>>) -> OwnedValue {
    v.into().try_to_owned().expect("plain values have no fds")
}

pub type Info = HashMap<String, OwnedValue>;
