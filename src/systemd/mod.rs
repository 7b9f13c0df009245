//! The systemd1 client: transient scopes, job waiting, unit state events.
//!
//! One dispatcher per daemon subscribes to systemd's signals *before* any
//! job is queued (see `jobs`), and turns unit signals for `podscope-*`
//! units into [`UnitEvent`]s for the lifecycle to reconcile.

pub mod client;
pub mod jobs;
pub mod unit_path;

use crate::error::{Error, Result};
use futures_util::StreamExt;
use jobs::JobTracker;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};
use zbus::{Connection, MatchRule, MessageStream};
use zbus_systemd::systemd1::{ManagerProxy, UnitProxy};

pub use client::SystemdClient;

const SYSTEMD: &str = "org.freedesktop.systemd1";
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
/// Only units with this prefix are tracked.
const UNIT_PREFIX: &str = "podscope-";

/// Something happened to a `podscope-*` unit: its ActiveState changed
/// (`Some`) or systemd dropped it (`None`).
#[derive(Debug, Clone)]
pub struct UnitEvent {
    pub unit: String,
    pub active_state: Option<String>,
}

#[derive(Clone)]
pub struct Systemd {
    conn: Connection,
    manager: ManagerProxy<'static>,
    jobs: Arc<JobTracker>,
    lost: Arc<Notify>,
}

/// A scope property value: systemd's transient-unit properties come in a few
/// D-Bus types; this keeps callers free of zvariant.
#[derive(Debug, Clone, PartialEq)]
pub enum Prop {
    Str(String),
    U64(u64),
    Bool(bool),
    Pids(Vec<u32>),
    Strs(Vec<String>),
}

impl Prop {
    fn into_value(self) -> OwnedValue {
        let v = match self {
            Prop::Str(s) => Value::from(s),
            Prop::U64(n) => Value::from(n),
            Prop::Bool(b) => Value::from(b),
            Prop::Pids(p) => Value::from(p),
            Prop::Strs(s) => Value::from(s),
        };
        v.try_to_owned().expect("plain values have no fds")
    }
}

fn is_no_such_unit(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _) if name.as_str() == NO_SUCH_UNIT)
}

fn bus_err(step: &str, e: zbus::Error) -> Error {
    match e {
        zbus::Error::MethodError(name, desc, _) => Error::systemd(format!(
            "{step}: {}{}",
            name.as_str(),
            desc.map(|d| format!(": {d}")).unwrap_or_default()
        )),
        other => Error::systemd(format!("{step}: {other}")),
    }
}

impl Systemd {
    /// Connect, subscribe to systemd's signals and start the dispatcher.
    /// Unit events are sent on `events`.
    pub async fn connect(
        conn: &Connection,
        events: mpsc::UnboundedSender<UnitEvent>,
    ) -> Result<Self> {
        let manager = ManagerProxy::new(conn)
            .await
            .map_err(|e| bus_err("connect to systemd", e))?;
        let jobs = Arc::new(JobTracker::default());

        // Match rules first, Subscribe after: no signal can slip between.
        let rule = |member: &'static str| -> zbus::Result<MatchRule<'static>> {
            Ok(MatchRule::builder()
                .msg_type(zbus::message::Type::Signal)
                .sender(SYSTEMD)?
                .interface("org.freedesktop.systemd1.Manager")?
                .member(member)?
                .path("/org/freedesktop/systemd1")?
                .build())
        };
        let sub = |e| bus_err("subscribe to systemd signals", e);
        let job_removed =
            MessageStream::for_match_rule(rule("JobRemoved").map_err(sub)?, conn, Some(4096))
                .await
                .map_err(sub)?;
        let unit_removed =
            MessageStream::for_match_rule(rule("UnitRemoved").map_err(sub)?, conn, Some(4096))
                .await
                .map_err(sub)?;
        let props_rule = MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(SYSTEMD)
            .and_then(|r| r.interface("org.freedesktop.DBus.Properties"))
            .and_then(|r| r.member("PropertiesChanged"))
            .and_then(|r| r.path_namespace("/org/freedesktop/systemd1/unit"))
            .map_err(sub)?
            .build();
        let props_changed = MessageStream::for_match_rule(props_rule, conn, Some(4096))
            .await
            .map_err(sub)?;
        manager.subscribe().await.map_err(sub)?;

        let lost = Arc::new(Notify::new());
        tokio::spawn(dispatch_jobs(job_removed, jobs.clone(), lost.clone()));
        tokio::spawn(dispatch_unit_removed(unit_removed, events.clone()));
        tokio::spawn(dispatch_props(props_changed, events));

        Ok(Systemd {
            conn: conn.clone(),
            manager,
            jobs,
            lost,
        })
    }

    /// Resolves when the connection to systemd is gone: without its signals
    /// the daemon cannot track jobs or pods, so it should exit and be
    /// restarted.
    pub async fn connection_lost(&self) {
        self.lost.notified().await
    }

    /// StartTransientUnit and wait for the job; any result but "done" is an
    /// error carrying systemd's result.
    pub async fn start_transient(
        &self,
        unit: &str,
        props: Vec<(&str, Prop)>,
        timeout: Duration,
    ) -> Result<()> {
        let props: Vec<(String, OwnedValue)> = props
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into_value()))
            .collect();
        let job = self
            .manager
            .start_transient_unit(unit.to_owned(), "fail".into(), props, vec![])
            .await
            .map_err(|e| bus_err(&format!("StartTransientUnit {unit}"), e))?;
        self.wait_job(unit, "start", &job, timeout).await
    }

    /// Change a running unit's properties (not persisted by systemd: the
    /// unit is transient and podscope keeps its own record).
    pub async fn set_properties(&self, unit: &str, props: Vec<(&str, Prop)>) -> Result<()> {
        let props: Vec<(String, OwnedValue)> = props
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into_value()))
            .collect();
        self.manager
            .set_unit_properties(unit.to_owned(), true, props)
            .await
            .map_err(|e| bus_err(&format!("SetUnitProperties {unit}"), e))
    }

    /// Start a unit and wait for it to be up (already up is fine).
    pub async fn start_unit(&self, unit: &str, timeout: Duration) -> Result<()> {
        let job = self
            .manager
            .start_unit(unit.to_owned(), "replace".into())
            .await
            .map_err(|e| bus_err(&format!("StartUnit {unit}"), e))?;
        self.wait_job(unit, "start", &job, timeout).await
    }

    /// Stop a unit and wait for it to be down. A unit that does not exist is
    /// already stopped.
    pub async fn stop_unit(&self, unit: &str, timeout: Duration) -> Result<()> {
        let job = match self
            .manager
            .stop_unit(unit.to_owned(), "replace".into())
            .await
        {
            Ok(job) => job,
            Err(e) if is_no_such_unit(&e) => return Ok(()),
            Err(e) => return Err(bus_err(&format!("StopUnit {unit}"), e)),
        };
        self.wait_job(unit, "stop", &job, timeout).await
    }

    pub async fn kill_unit(&self, unit: &str, signal: i32) -> Result<()> {
        match self
            .manager
            .kill_unit(unit.to_owned(), "all".into(), signal)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if is_no_such_unit(&e) => Ok(()),
            Err(e) => Err(bus_err(&format!("KillUnit {unit}"), e)),
        }
    }

    async fn wait_job(
        &self,
        unit: &str,
        what: &str,
        job: &OwnedObjectPath,
        timeout: Duration,
    ) -> Result<()> {
        match self.jobs.wait(job.as_str(), timeout).await {
            Some(r) if r == "done" => Ok(()),
            Some(r) => Err(Error::systemd(format!(
                "{what} job for {unit} finished with result \"{r}\" (see journalctl -u {unit})"
            ))),
            None => Err(Error::timeout(format!(
                "{what} job for {unit} did not finish within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    /// The ActiveState of a unit, or None when systemd does not know it.
    pub async fn active_state(&self, unit: &str) -> Result<Option<String>> {
        let path = match self.manager.get_unit(unit.to_owned()).await {
            Ok(p) => p,
            Err(e) if is_no_such_unit(&e) => return Ok(None),
            Err(e) => return Err(bus_err(&format!("GetUnit {unit}"), e)),
        };
        let proxy = UnitProxy::builder(&self.conn)
            .path(path)
            .map_err(|e| bus_err("unit proxy", e))?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(|e| bus_err("unit proxy", e))?;
        match proxy.active_state().await {
            Ok(s) => Ok(Some(s)),
            Err(e) if is_no_such_unit(&e) => Ok(None),
            Err(e) => Err(bus_err(&format!("ActiveState of {unit}"), e)),
        }
    }

    /// Loaded units matching `pattern`, with their ActiveState.
    pub async fn list_units(&self, pattern: &str) -> Result<HashMap<String, String>> {
        let units = self
            .manager
            .list_units_by_patterns(vec![], vec![pattern.to_owned()])
            .await
            .map_err(|e| bus_err("ListUnitsByPatterns", e))?;
        Ok(units.into_iter().map(|u| (u.0, u.3)).collect())
    }
}

async fn dispatch_jobs(mut stream: MessageStream, jobs: Arc<JobTracker>, lost: Arc<Notify>) {
    while let Some(msg) = stream.next().await {
        let Ok(msg) = msg else { continue };
        let body = msg.body();
        if let Ok((_, job, unit, result)) =
            body.deserialize::<(u32, OwnedObjectPath, String, String)>()
        {
            if unit.starts_with(UNIT_PREFIX) {
                jobs.finished(job.as_str(), &result);
            }
        }
    }
    tracing::error!("systemd's signal stream ended: the system bus connection is gone");
    lost.notify_one();
}

async fn dispatch_unit_removed(
    mut stream: MessageStream,
    events: mpsc::UnboundedSender<UnitEvent>,
) {
    // A message that fails to arrive whole is skipped, not the end of the
    // stream: only the connection's end ends it (dispatch_jobs reports that).
    while let Some(msg) = stream.next().await {
        let msg = match msg {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("systemd UnitRemoved signal unreadable, skipped: {e}");
                continue;
            }
        };
        if let Ok((unit, _)) = msg.body().deserialize::<(String, OwnedObjectPath)>() {
            if unit.starts_with(UNIT_PREFIX)
                && events
                    .send(UnitEvent {
                        unit,
                        active_state: None,
                    })
                    .is_err()
            {
                return;
            }
        }
    }
}

async fn dispatch_props(mut stream: MessageStream, events: mpsc::UnboundedSender<UnitEvent>) {
    let prefix = format!(
        "{}{}",
        unit_path::UNIT_PATH_PREFIX,
        unit_path::escape_label(UNIT_PREFIX)
    );
    while let Some(msg) = stream.next().await {
        let Ok(msg) = msg else { continue };
        let header = msg.header();
        let Some(path) = header.path() else { continue };
        if !path.as_str().starts_with(&prefix) {
            continue;
        }
        let body = msg.body();
        let Ok((iface, changed, _)) =
            body.deserialize::<(String, HashMap<String, OwnedValue>, Vec<String>)>()
        else {
            continue;
        };
        if iface != "org.freedesktop.systemd1.Unit" {
            continue;
        }
        let Some(state) = changed
            .get("ActiveState")
            .and_then(|v| String::try_from(v.clone()).ok())
        else {
            continue;
        };
        if let Some(unit) = unit_path::unit_from_path(path.as_str()) {
            if events
                .send(UnitEvent {
                    unit,
                    active_state: Some(state),
                })
                .is_err()
            {
                return;
            }
        }
    }
}
