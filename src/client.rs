//! Client-side proxies for `org.podscope.Sandbox1`, used by podscopectl,
//! the benchmarks and the integration tests (and later the CRI frontend).

use crate::bus::errors::kind_of;
use crate::error::{Error, ErrorKind};
use std::collections::HashMap;
use zbus::proxy;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

pub type Dict = HashMap<String, OwnedValue>;
/// (type, status, reason, message)
pub type Condition = (String, bool, String, String);

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
        options: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<(String, OwnedObjectPath)>;
    fn start(&self, id: &str) -> zbus::Result<()>;
    fn stop(&self, id: &str) -> zbus::Result<()>;
    fn remove(&self, id: &str) -> zbus::Result<()>;
    /// (exit_status, finished_at, reason); blocks until the pod stops.
    fn wait(&self, id: &str) -> zbus::Result<(u32, u64, String)>;
    fn update_resources(&self, id: &str, resources: HashMap<&str, Value<'_>>) -> zbus::Result<()>;
    /// (os, architecture, variant)
    fn platform(&self) -> zbus::Result<(String, String, String)>;
    fn status(&self, id: &str) -> zbus::Result<Dict>;
    fn list(&self, filter: HashMap<&str, Value<'_>>) -> zbus::Result<Vec<Dict>>;
    fn version(&self) -> zbus::Result<(String, String, String)>;
    fn runtime_status(&self) -> zbus::Result<(Vec<Condition>, Dict)>;

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

/// A system-bus connection whose method calls give up after `timeout`
/// instead of waiting forever for a peer that never answers.
pub async fn system_connection(timeout: std::time::Duration) -> zbus::Result<zbus::Connection> {
    zbus::connection::Builder::system()?
        .method_timeout(timeout)
        .build()
        .await
}

/// A D-Bus call's failure as (kind, message): the daemon's named error, or
/// Internal for transport problems.
pub fn classify(e: &zbus::Error) -> (ErrorKind, String) {
    match e {
        zbus::Error::MethodError(name, desc, _) => (
            kind_of(name.as_str()).unwrap_or(ErrorKind::Internal),
            desc.clone().unwrap_or_else(|| name.to_string()),
        ),
        zbus::Error::FDO(f) => match f.as_ref() {
            zbus::fdo::Error::AccessDenied(m) => (ErrorKind::AccessDenied, m.clone()),
            other => (ErrorKind::Internal, other.to_string()),
        },
        other => (ErrorKind::Internal, other.to_string()),
    }
}

pub fn to_error(e: zbus::Error) -> Error {
    let (kind, msg) = classify(&e);
    Error::new(kind, msg)
}

/// Typed accessors for Status dictionaries.
pub fn dict_str(d: &Dict, key: &str) -> String {
    d.get(key)
        .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
        .unwrap_or_default()
}

pub fn dict_u64(d: &Dict, key: &str) -> u64 {
    match d.get(key).map(|v| &**v) {
        Some(Value::U64(n)) => *n,
        Some(Value::U32(n)) => u64::from(*n),
        _ => 0,
    }
}

pub fn dict_map(d: &Dict, key: &str) -> HashMap<String, String> {
    d.get(key)
        .and_then(|v| HashMap::<String, String>::try_from(v.try_clone().ok()?).ok())
        .unwrap_or_default()
}

pub fn dict_strs(d: &Dict, key: &str) -> Vec<String> {
    d.get(key)
        .and_then(|v| Vec::<String>::try_from(v.try_clone().ok()?).ok())
        .unwrap_or_default()
}

pub fn dict_bool(d: &Dict, key: &str) -> bool {
    matches!(d.get(key).map(|v| &**v), Some(Value::Bool(true)))
}
