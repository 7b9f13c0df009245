//! The systemd1 client: transient scopes, job waiting, unit state events.
//!
//! One dispatcher per daemon subscribes to systemd's signals *before* any
//! job is queued (see `jobs`), and turns unit signals for `podscope-*`
//! units into [`UnitEvent`]s for the lifecycle to reconcile.

pub mod client;
pub mod events;
#[cfg(test)]
pub(crate) mod fake;
pub mod jobs;
pub mod unit_path;

use events::UnitEvents;
use futures_util::StreamExt;
use jobs::JobTracker;
use podscope_api::bus_gate::BusGate;
use podscope_api::error::{Error, Result};
use podscope_api::errors::BUS_NO_REPLY;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};
use zbus::{Connection, MatchRule, MessageStream};
use zbus_systemd::systemd1::{ManagerProxy, UnitProxy};

pub use client::SystemdClient;

const SYSTEMD: &str = "org.freedesktop.systemd1";
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";
/// How often a unit whose StartTransientUnit got no reply is looked at.
const LOOK_AGAIN: Duration = Duration::from_millis(50);
/// Only units with this prefix are tracked.
const UNIT_PREFIX: &str = "podscope-";
/// How many of systemd's signals each subscription holds before zbus's
/// reader waits for its dispatcher (none is dropped). The dispatchers take
/// each in microseconds and never wait on the bus, so the queues stay far
/// shallower than this even in a full node's burst (six to seven thousand
/// signals in 15 s). The queue is a ring allocated whole, 120 bytes a slot,
/// and its writes walk all of it: its capacity becomes resident however
/// shallow it stays (4096 made 1.4 MiB of the daemon's memory over three
/// subscriptions, most of its growth after its first full-node bursts).
const SIGNAL_QUEUE: usize = 1024;

/// Something happened to a `podscope-*` unit: its ActiveState or SubState
/// changed (`Some`) or systemd dropped it (`None`).
#[derive(Debug, Clone)]
pub struct UnitEvent {
    pub unit: String,
    pub active_state: Option<String>,
    /// The SubState when the signal carried it (a service whose main
    /// process exited stays "active" with RemainAfterExit=, "exited").
    pub sub_state: Option<String>,
}

/// A service's state and how its main process ended, as systemd reports
/// them (`ExecMain*` of org.freedesktop.systemd1.Service).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceStatus {
    pub active_state: String,
    pub sub_state: String,
    /// "success", "exit-code", "signal", "oom-kill", "timeout", ...
    pub result: String,
    pub main_pid: u32,
    /// CLD_EXITED (1), CLD_KILLED (2), CLD_DUMPED (3); 0 while it runs.
    pub exec_main_code: i32,
    /// The exit status, or the signal for CLD_KILLED/CLD_DUMPED.
    pub exec_main_status: i32,
    /// µs since the epoch; 0 while it runs.
    pub exec_main_start_usec: u64,
    pub exec_main_exit_usec: u64,
}

impl ServiceStatus {
    /// Whether the main process has ended (or never ran).
    pub fn main_exited(&self) -> bool {
        self.exec_main_code != 0
            || matches!(self.sub_state.as_str(), "exited" | "failed" | "dead")
            || matches!(self.active_state.as_str(), "inactive" | "failed")
    }

    /// The exit code as a shell reports it: the status, or 128 + signal.
    pub fn exit_code(&self) -> i32 {
        match self.exec_main_code {
            2 | 3 => 128 + self.exec_main_status,
            _ => self.exec_main_status,
        }
    }
}

/// One `ExecStart=`-style command line: the binary, its argv (argv[0]
/// included) and whether a failure is ignored (systemd's `-` prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecCommand {
    pub path: String,
    pub argv: Vec<String>,
    pub ignore_failure: bool,
}

/// `call`, counted as one call to systemd's `method` (the metrics'
/// `podscope_systemd_calls_total`): each one made, a repeat too.
fn counted<T>(method: &'static str, call: T) -> T {
    crate::metrics::systemd_call(method);
    call
}

#[derive(Clone)]
pub struct Systemd {
    conn: Connection,
    manager: ManagerProxy<'static>,
    /// Every call to systemd takes one of its permits (`bus_gate`).
    gate: Arc<BusGate>,
    jobs: Arc<JobTracker>,
    lost: Arc<Notify>,
}

/// A unit property value: systemd's transient-unit properties come in a
/// few D-Bus types; this keeps callers free of zvariant.
#[derive(Debug, Clone)]
pub enum Prop {
    Str(String),
    U64(u64),
    U32(u32),
    I32(i32),
    Bool(bool),
    Pids(Vec<u32>),
    Strs(Vec<String>),
    /// `ay`: AllowedCPUs= and AllowedMemoryNodes= as bit masks.
    Bytes(Vec<u8>),
    /// `a(ss)`: DeviceAllow= (path, permissions), Environment-like pairs.
    Pairs(Vec<(String, String)>),
    /// `a(sasb)`: ExecStart=, ExecStopPost=.
    Exec(Vec<ExecCommand>),
    /// `h`: StandardOutputFileDescriptor= and the like. Shared so a
    /// property list can be cloned; systemd gets its own duplicate.
    Fd(std::sync::Arc<std::os::fd::OwnedFd>),
}

impl PartialEq for Prop {
    fn eq(&self, other: &Prop) -> bool {
        use std::os::fd::AsRawFd;
        match (self, other) {
            (Prop::Str(a), Prop::Str(b)) => a == b,
            (Prop::U64(a), Prop::U64(b)) => a == b,
            (Prop::U32(a), Prop::U32(b)) => a == b,
            (Prop::I32(a), Prop::I32(b)) => a == b,
            (Prop::Bool(a), Prop::Bool(b)) => a == b,
            (Prop::Pids(a), Prop::Pids(b)) => a == b,
            (Prop::Strs(a), Prop::Strs(b)) => a == b,
            (Prop::Bytes(a), Prop::Bytes(b)) => a == b,
            (Prop::Pairs(a), Prop::Pairs(b)) => a == b,
            (Prop::Exec(a), Prop::Exec(b)) => a == b,
            (Prop::Fd(a), Prop::Fd(b)) => a.as_raw_fd() == b.as_raw_fd(),
            _ => false,
        }
    }
}

impl Prop {
    fn into_value(self) -> zbus::Result<OwnedValue> {
        use std::os::fd::AsFd;
        let v = match self {
            Prop::Str(s) => Value::from(s),
            Prop::U64(n) => Value::from(n),
            Prop::U32(n) => Value::from(n),
            Prop::I32(n) => Value::from(n),
            Prop::Bool(b) => Value::from(b),
            Prop::Pids(p) => Value::from(p),
            Prop::Strs(s) => Value::from(s),
            Prop::Bytes(b) => Value::from(b),
            Prop::Pairs(p) => Value::from(p),
            Prop::Exec(cmds) => Value::from(
                cmds.into_iter()
                    .map(|c| (c.path, c.argv, c.ignore_failure))
                    .collect::<Vec<_>>(),
            ),
            // Duplicated here: the message owns its copy.
            Prop::Fd(fd) => {
                return Ok(Value::from(zbus::zvariant::Fd::from(fd.as_fd())).try_to_owned()?)
            }
        };
        Ok(v.try_into_owned()?)
    }
}

fn props_to_values(props: Vec<(&str, Prop)>) -> zbus::Result<Vec<(String, OwnedValue)>> {
    props
        .into_iter()
        .map(|(k, v)| Ok((k.to_owned(), v.into_value()?)))
        .collect()
}

fn is_no_such_unit(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _) if name.as_str() == NO_SUCH_UNIT)
}

fn is_unit_exists(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _) if name.as_str() == UNIT_EXISTS)
}

/// No reply came: the call may or may not have been carried out.
fn is_no_reply(e: &zbus::Error) -> bool {
    match e {
        zbus::Error::MethodError(name, _, _) => name.as_str() == BUS_NO_REPLY,
        zbus::Error::FDO(f) => matches!(**f, zbus::fdo::Error::NoReply(_)),
        zbus::Error::InputOutput(io) => io.kind() == std::io::ErrorKind::TimedOut,
        _ => false,
    }
}

/// A unit's object vanished between GetUnit and a call on it.
fn is_unknown_object(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _)
        if matches!(name.as_str(), "org.freedesktop.DBus.Error.UnknownObject" | "org.freedesktop.DBus.Error.UnknownMethod" | "org.freedesktop.DBus.Error.UnknownInterface"))
}

fn bus_err(step: &str, e: zbus::Error) -> Error {
    // The bus refused it (past the gate's retries) or systemd did not
    // answer: nothing says the call failed, a retry later may work.
    if podscope_api::bus_gate::refused_by_bus(&e) || is_no_reply(&e) {
        return Error::busy(format!("{step}: {e}"));
    }
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
        gate: Arc<BusGate>,
        events: Arc<UnitEvents>,
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
        let job_removed = MessageStream::for_match_rule(
            rule("JobRemoved").map_err(sub)?,
            conn,
            Some(SIGNAL_QUEUE),
        )
        .await
        .map_err(sub)?;
        let unit_removed = MessageStream::for_match_rule(
            rule("UnitRemoved").map_err(sub)?,
            conn,
            Some(SIGNAL_QUEUE),
        )
        .await
        .map_err(sub)?;
        // Only the Unit interface's changes (ActiveState, SubState): the
        // bus then drops the Service, Scope and Slice interfaces' for us,
        // half of what systemd says about every unit on a busy node.
        let props_rule = MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(SYSTEMD)
            .and_then(|r| r.interface("org.freedesktop.DBus.Properties"))
            .and_then(|r| r.member("PropertiesChanged"))
            .and_then(|r| r.path_namespace("/org/freedesktop/systemd1/unit"))
            .and_then(|r| r.arg(0, "org.freedesktop.systemd1.Unit"))
            .map_err(sub)?
            .build();
        let props_changed = MessageStream::for_match_rule(props_rule, conn, Some(SIGNAL_QUEUE))
            .await
            .map_err(sub)?;
        counted("Subscribe", manager.subscribe())
            .await
            .map_err(sub)?;

        let lost = Arc::new(Notify::new());
        tokio::spawn(dispatch_jobs(job_removed, jobs.clone(), lost.clone()));
        let weak = Arc::downgrade(&jobs);
        tokio::spawn(async move {
            while let Some(jobs) = weak.upgrade() {
                jobs.prune();
                drop(jobs);
                tokio::time::sleep(jobs::PRUNE_EVERY).await;
            }
        });
        tokio::spawn(dispatch_unit_removed(unit_removed, events.clone()));
        tokio::spawn(dispatch_props(props_changed, events));

        Ok(Systemd {
            conn: conn.clone(),
            manager,
            gate,
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
    /// error carrying systemd's result. A call that got no reply may have
    /// made the unit: systemd is asked whether it exists before the unit
    /// is started again, and one that does is waited for as the job would
    /// have been.
    pub async fn start_transient(
        &self,
        unit: &str,
        props: Vec<(&str, Prop)>,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let props = props_to_values(props)
            .map_err(|e| bus_err(&format!("StartTransientUnit {unit}: properties"), e))?;
        let step = format!("StartTransientUnit {unit}");
        // At most twice: again only after a first call got no reply and
        // the unit is not there.
        for again in [false, true] {
            let r = self
                .gate
                .call(&step, deadline, || {
                    counted(
                        "StartTransientUnit",
                        self.manager.start_transient_unit(
                            unit.to_owned(),
                            "fail".into(),
                            props.clone(),
                            vec![],
                        ),
                    )
                })
                .await?;
            match r {
                Ok(job) => {
                    return self
                        .wait_job(unit, "start", &job, deadline - tokio::time::Instant::now())
                        .await
                }
                // The first call's unit, there after all.
                Err(e) if (!again && is_no_reply(&e)) || (again && is_unit_exists(&e)) => {
                    tracing::warn!(unit, "{step}: {e}: looking for the unit");
                    if self.active_state(unit).await?.is_some() {
                        return self.wait_started(unit, deadline).await;
                    }
                    if again {
                        return Err(bus_err(&step, e));
                    }
                }
                Err(e) => return Err(bus_err(&step, e)),
            }
        }
        unreachable!("the second call returns")
    }

    /// A unit whose start job is not ours to wait for (its
    /// StartTransientUnit got no reply): up (active) or not by `deadline`.
    async fn wait_started(&self, unit: &str, deadline: tokio::time::Instant) -> Result<()> {
        loop {
            match self.active_state(unit).await?.as_deref() {
                Some("active") => return Ok(()),
                Some("activating") | Some("reloading") => {}
                // Its start job still queued (a busy systemd): not begun.
                Some("inactive") if self.has_job(unit).await? => {}
                state => {
                    return Err(Error::systemd(format!(
                        "start of {unit} (its StartTransientUnit got no reply) ended {} (see journalctl -u {unit})",
                        state.unwrap_or("with the unit gone")
                    )))
                }
            }
            if tokio::time::Instant::now() + LOOK_AGAIN > deadline {
                return Err(Error::timeout(format!(
                    "start of {unit} (its StartTransientUnit got no reply) did not finish in time"
                )));
            }
            tokio::time::sleep(LOOK_AGAIN).await;
        }
    }

    /// Change a running unit's properties (not persisted by systemd: the
    /// unit is transient and podscope keeps its own record).
    pub async fn set_properties(&self, unit: &str, props: Vec<(&str, Prop)>) -> Result<()> {
        let props = props_to_values(props)
            .map_err(|e| bus_err(&format!("SetUnitProperties {unit}: properties"), e))?;
        let step = format!("SetUnitProperties {unit}");
        self.gate
            .call_soon(&step, || {
                counted(
                    "SetUnitProperties",
                    self.manager
                        .set_unit_properties(unit.to_owned(), true, props.clone()),
                )
            })
            .await?
            .map_err(|e| bus_err(&step, e))
    }

    /// Start a unit and wait for it to be up (already up is fine).
    pub async fn start_unit(&self, unit: &str, timeout: Duration) -> Result<()> {
        // Starting a unit that is up already is a no-op: safe to repeat.
        let deadline = tokio::time::Instant::now() + timeout;
        let step = format!("StartUnit {unit}");
        let job = self
            .gate
            .call(&step, deadline, || {
                counted(
                    "StartUnit",
                    self.manager.start_unit(unit.to_owned(), "replace".into()),
                )
            })
            .await?
            .map_err(|e| bus_err(&step, e))?;
        self.wait_job(unit, "start", &job, deadline - tokio::time::Instant::now())
            .await
    }

    /// Stop a unit and wait for it to be down. A unit that does not exist is
    /// already stopped.
    pub async fn stop_unit(&self, unit: &str, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        match self.enqueue_stop(unit, deadline).await? {
            Some(job) => {
                self.wait_job(unit, "stop", &job, deadline - tokio::time::Instant::now())
                    .await
            }
            None => Ok(()),
        }
    }

    /// Stop a unit without waiting for its job: systemd finishes it. A
    /// unit that does not exist is already stopped.
    pub async fn queue_stop(&self, unit: &str) -> Result<()> {
        let deadline = tokio::time::Instant::now() + podscope_api::bus_gate::DEFAULT_WAIT;
        self.enqueue_stop(unit, deadline).await.map(drop)
    }

    /// StopUnit: its job, or None for a unit systemd does not know.
    /// Stopping is safe to repeat: a StopUnit with no reply is made again.
    async fn enqueue_stop(
        &self,
        unit: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Option<OwnedObjectPath>> {
        let step = format!("StopUnit {unit}");
        let mut again = true;
        loop {
            let r = self
                .gate
                .call(&step, deadline, || {
                    counted(
                        "StopUnit",
                        self.manager.stop_unit(unit.to_owned(), "replace".into()),
                    )
                })
                .await?;
            match r {
                Ok(job) => return Ok(Some(job)),
                Err(e) if is_no_such_unit(&e) => return Ok(None),
                Err(e) if is_no_reply(&e) && std::mem::take(&mut again) => {
                    tracing::warn!(unit, "{step}: {e}: asking again");
                }
                Err(e) => return Err(bus_err(&step, e)),
            }
        }
    }

    pub async fn kill_unit(&self, unit: &str, signal: i32) -> Result<()> {
        self.kill(unit, "all", signal).await
    }

    /// Signal the unit's main process only.
    pub async fn kill_main(&self, unit: &str, signal: i32) -> Result<()> {
        self.kill(unit, "main", signal).await
    }

    async fn kill(&self, unit: &str, whom: &str, signal: i32) -> Result<()> {
        let step = format!("KillUnit {unit}");
        match self
            .gate
            .call_soon(&step, || {
                counted(
                    "KillUnit",
                    self.manager.kill_unit(unit.to_owned(), whom.into(), signal),
                )
            })
            .await?
        {
            Ok(()) => Ok(()),
            Err(e) if is_no_such_unit(&e) => Ok(()),
            // No main process (it exited): nothing to signal.
            Err(zbus::Error::MethodError(name, _, _))
                if whom == "main" && name.as_str() == "org.freedesktop.DBus.Error.InvalidArgs" =>
            {
                Ok(())
            }
            Err(e) => Err(bus_err(&step, e)),
        }
    }

    /// Drop the reference `AddRef=` took (an exec's unit is collected).
    pub async fn unref(&self, unit: &str) {
        let step = format!("UnrefUnit {unit}");
        match self
            .gate
            .call_soon(&step, || {
                counted("UnrefUnit", self.manager.unref_unit(unit.to_owned()))
            })
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) if is_no_such_unit(&e) => {}
            Ok(Err(e)) => tracing::debug!("{step}: {e}"),
            Err(e) => tracing::debug!("{e}"),
        }
    }

    /// Forget a failed unit (its result and exit status go with it); a unit
    /// systemd does not know, or one not failed, is left as it is.
    pub async fn reset_failed(&self, unit: &str) -> Result<()> {
        let step = format!("ResetFailedUnit {unit}");
        match self
            .gate
            .call_soon(&step, || {
                counted(
                    "ResetFailedUnit",
                    self.manager.reset_failed_unit(unit.to_owned()),
                )
            })
            .await?
        {
            Ok(()) => Ok(()),
            Err(e) if is_no_such_unit(&e) => Ok(()),
            Err(e) => Err(bus_err(&step, e)),
        }
    }

    /// A service's state and exit status; None when systemd does not know
    /// the unit.
    pub async fn service_status(&self, unit: &str) -> Result<Option<ServiceStatus>> {
        let Some(path) = self.unit_path(unit).await? else {
            return Ok(None);
        };
        // Each property by itself, all at once: GetAll of a service is
        // some 250 properties (every Exec* array with it), ~2 ms of
        // systemd's time on a container's start path; these eight are a
        // few hundred bytes.
        // Eight calls in flight, each under a permit of its own.
        let step = format!("properties of {unit}");
        let get = |(iface, name): (&'static str, &'static str)| {
            let (path, step) = (&path, &step);
            async move {
                self.gate
                    .call_soon(step, || async {
                        counted("Get", ());
                        let reply = self
                            .conn
                            .call_method(
                                Some(SYSTEMD),
                                path,
                                Some("org.freedesktop.DBus.Properties"),
                                "Get",
                                &(iface, name),
                            )
                            .await?;
                        reply.body().deserialize::<OwnedValue>()
                    })
                    .await
            }
        };
        const UNIT: &str = "org.freedesktop.systemd1.Unit";
        const SERVICE: &str = "org.freedesktop.systemd1.Service";
        let replies = futures_util::future::join_all(
            [
                (UNIT, "ActiveState"),
                (UNIT, "SubState"),
                (SERVICE, "Result"),
                (SERVICE, "MainPID"),
                (SERVICE, "ExecMainCode"),
                (SERVICE, "ExecMainStatus"),
                (SERVICE, "ExecMainStartTimestamp"),
                (SERVICE, "ExecMainExitTimestamp"),
            ]
            .map(get),
        )
        .await;
        let mut values = Vec::with_capacity(replies.len());
        for r in replies {
            match r? {
                Ok(v) => values.push(v),
                Err(e) if is_no_such_unit(&e) || is_unknown_object(&e) => return Ok(None),
                Err(e) => return Err(bus_err(&step, e)),
            }
        }
        let [active, sub, result, pid, code, status, started, exited]: [OwnedValue; 8] = values
            .try_into()
            .expect("eight properties asked, eight values");
        let text = |v: OwnedValue| String::try_from(v).unwrap_or_default();
        Ok(Some(ServiceStatus {
            active_state: text(active),
            sub_state: text(sub),
            result: text(result),
            main_pid: u32::try_from(&pid).unwrap_or(0),
            exec_main_code: i32::try_from(&code).unwrap_or(0),
            exec_main_status: i32::try_from(&status).unwrap_or(0),
            exec_main_start_usec: u64::try_from(&started).unwrap_or(0),
            exec_main_exit_usec: u64::try_from(&exited).unwrap_or(0),
        }))
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
        let Some(proxy) = self.unit_proxy(unit).await? else {
            return Ok(None);
        };
        let step = format!("ActiveState of {unit}");
        match self
            .gate
            .call_soon(&step, || counted("Get", proxy.active_state()))
            .await?
        {
            Ok(s) => Ok(Some(s)),
            Err(e) if is_no_such_unit(&e) || is_unknown_object(&e) => Ok(None),
            Err(e) => Err(bus_err(&step, e)),
        }
    }

    /// Whether a job (a queued start, say) is pending for the unit.
    async fn has_job(&self, unit: &str) -> Result<bool> {
        let Some(proxy) = self.unit_proxy(unit).await? else {
            return Ok(false);
        };
        let step = format!("Job of {unit}");
        match self
            .gate
            .call_soon(&step, || counted("Get", proxy.job()))
            .await?
        {
            Ok((id, _)) => Ok(id != 0),
            Err(e) if is_no_such_unit(&e) || is_unknown_object(&e) => Ok(false),
            Err(e) => Err(bus_err(&step, e)),
        }
    }

    /// A proxy of the unit's object (its properties read afresh each
    /// time), or None when systemd does not know it.
    async fn unit_proxy(&self, unit: &str) -> Result<Option<UnitProxy<'static>>> {
        let Some(path) = self.unit_path(unit).await? else {
            return Ok(None);
        };
        let proxy = UnitProxy::builder(&self.conn)
            .path(path)
            .map_err(|e| bus_err("unit proxy", e))?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(|e| bus_err("unit proxy", e))?;
        Ok(Some(proxy))
    }

    /// GetUnit: the unit's object, or None when systemd does not know it.
    async fn unit_path(&self, unit: &str) -> Result<Option<OwnedObjectPath>> {
        let step = format!("GetUnit {unit}");
        match self
            .gate
            .call_soon(&step, || {
                counted("GetUnit", self.manager.get_unit(unit.to_owned()))
            })
            .await?
        {
            Ok(p) => Ok(Some(p)),
            Err(e) if is_no_such_unit(&e) => Ok(None),
            Err(e) => Err(bus_err(&step, e)),
        }
    }

    /// Loaded units matching `pattern`, with their ActiveState.
    pub async fn list_units(&self, pattern: &str) -> Result<HashMap<String, String>> {
        let units = self
            .gate
            .call_soon("ListUnitsByPatterns", || {
                counted(
                    "ListUnitsByPatterns",
                    self.manager
                        .list_units_by_patterns(vec![], vec![pattern.to_owned()]),
                )
            })
            .await?
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

async fn dispatch_unit_removed(mut stream: MessageStream, events: Arc<UnitEvents>) {
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
            if unit.starts_with(UNIT_PREFIX) {
                events.push(UnitEvent {
                    unit,
                    active_state: None,
                    sub_state: None,
                });
            }
        }
    }
}

async fn dispatch_props(mut stream: MessageStream, events: Arc<UnitEvents>) {
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
        let text = |k: &str| {
            changed
                .get(k)
                .and_then(|v| String::try_from(v.clone()).ok())
        };
        let (active, sub) = (text("ActiveState"), text("SubState"));
        if active.is_none() && sub.is_none() {
            continue;
        }
        if let Some(unit) = unit_path::unit_from_path(path.as_str()) {
            events.push(UnitEvent {
                unit,
                active_state: active,
                sub_state: sub,
            });
        }
    }
}
