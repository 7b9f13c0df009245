//! Pods in `machinectl`: each ready pod is registered with systemd-machined
//! (`RegisterMachine`: class `container`, leader = the pod's init, which
//! machined follows to the pod's scope), and unregistered on Stop.
//! `machinectl list/status` then show it with its addresses (machined reads
//! them in the leader's network namespace); `machinectl terminate` stops
//! the scope, which the lifecycle sees as it sees `systemctl stop`.
//!
//! machined is optional: without it (systemd-container not installed) pods
//! work as before and the journal says so once.

use podscope_api::bus_gate::BusGate;
use podscope_api::domain::{machine, Sandbox};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::OnceCell;
use tracing::{info, warn};
use zbus::Connection;
use zbus_systemd::machine1::ManagerProxy;

const MACHINE_EXISTS: &str = "org.freedesktop.machine1.MachineExists";
const NO_SUCH_MACHINE: &str = "org.freedesktop.machine1.NoSuchMachine";
/// What the bus says when nothing provides the name or it cannot be
/// activated (not installed, masked, failing to start).
const ABSENT: [&str; 4] = [
    "org.freedesktop.DBus.Error.ServiceUnknown",
    "org.freedesktop.DBus.Error.NameHasNoOwner",
    "org.freedesktop.systemd1.UnitMasked",
    "org.freedesktop.systemd1.NoSuchUnit",
];
const SPAWN_ERRORS: &str = "org.freedesktop.DBus.Error.Spawn.";
const SERVICE: &str = "podscope";
const CLASS: &str = "container";

fn error_name(e: &zbus::Error) -> Option<&str> {
    match e {
        zbus::Error::MethodError(name, _, _) => Some(name.as_str()),
        zbus::Error::FDO(f) => match &**f {
            zbus::fdo::Error::ServiceUnknown(_) => Some(ABSENT[0]),
            zbus::fdo::Error::NameHasNoOwner(_) => Some(ABSENT[1]),
            _ => None,
        },
        _ => None,
    }
}

pub struct Machined {
    /// None: a lifecycle without machined (its unit tests).
    conn: Option<Connection>,
    /// Its calls take the daemon's bus permits as systemd's do.
    gate: Arc<BusGate>,
    proxy: OnceCell<ManagerProxy<'static>>,
    /// "machined is not available" has been logged.
    said_absent: AtomicBool,
}

impl Machined {
    pub fn new(conn: &Connection, gate: Arc<BusGate>) -> Self {
        Machined {
            conn: Some(conn.clone()),
            gate,
            proxy: OnceCell::new(),
            said_absent: AtomicBool::new(false),
        }
    }

    /// No machined at all: registering does nothing (for tests without a bus).
    pub fn disabled() -> Self {
        Machined {
            conn: None,
            gate: Arc::new(BusGate::new(podscope_api::bus_gate::DEFAULT_MAX)),
            proxy: OnceCell::new(),
            said_absent: AtomicBool::new(true),
        }
    }

    async fn proxy(&self) -> zbus::Result<&ManagerProxy<'static>> {
        self.proxy
            .get_or_try_init(|| async {
                let Some(conn) = &self.conn else {
                    return Err(zbus::fdo::Error::ServiceUnknown("no bus".into()).into());
                };
                ManagerProxy::builder(conn)
                    .cache_properties(zbus::proxy::CacheProperties::No)
                    .build()
                    .await
            })
            .await
    }

    /// One call under a permit of the daemon's bus gate; the gate's own
    /// failure (no permit in time) reads as a failed call, which is logged
    /// as machined's are: a pod runs whether or not machinectl lists it.
    async fn gated<T, F, Fut>(&self, what: &str, call: F) -> zbus::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = zbus::Result<T>>,
    {
        self.gate
            .call_soon(what, call)
            .await
            .unwrap_or_else(|e| Err(zbus::Error::Failure(e.to_string())))
    }

    fn absent(&self, e: &zbus::Error) -> bool {
        if !error_name(e).is_some_and(|n| ABSENT.contains(&n) || n.starts_with(SPAWN_ERRORS)) {
            return false;
        }
        if !self.said_absent.swap(true, Ordering::Relaxed) {
            info!("systemd-machined is not available ({e}): pods are not registered as machines (install systemd-container for machinectl)");
        }
        true
    }

    /// Register a ready pod; the name machined took, or "" when machined is
    /// absent or refused (logged: a pod runs whether or not machinectl
    /// lists it).
    pub async fn register(&self, sb: &Sandbox) -> String {
        let c = &sb.config;
        let id = machine::id(&c.uid, &sb.id).to_vec();
        let mut last = None;
        for name in machine::names(&c.namespace, &c.name, &sb.id) {
            let r = match self.proxy().await {
                Ok(p) => {
                    self.gated("RegisterMachine", || {
                        p.register_machine(
                            name.clone(),
                            id.clone(),
                            SERVICE.into(),
                            CLASS.into(),
                            sb.init_pid,
                            String::new(),
                        )
                    })
                    .await
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(_) => {
                    self.said_absent.store(false, Ordering::Relaxed);
                    return name;
                }
                Err(e) if self.absent(&e) => return String::new(),
                // Another pod has it: the next name carries our id.
                Err(e) if error_name(&e) == Some(MACHINE_EXISTS) => last = Some(e),
                Err(e) => {
                    last = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = last {
            warn!(sandbox_id = %sb.id, "sandbox {}: registering it with systemd-machined failed: {e}", sb.id);
        }
        String::new()
    }

    /// Unregister; a machine already gone (terminated, or its scope ended)
    /// is fine. The pod's processes are not touched.
    pub async fn unregister(&self, sb: &Sandbox) {
        if sb.machine.is_empty() {
            return;
        }
        let r = match self.proxy().await {
            Ok(p) => {
                self.gated("UnregisterMachine", || {
                    p.unregister_machine(sb.machine.clone())
                })
                .await
            }
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {}
            Err(e) if error_name(&e) == Some(NO_SUCH_MACHINE) || self.absent(&e) => {}
            Err(e) => {
                warn!(sandbox_id = %sb.id, machine = %sb.machine,
                      "sandbox {}: unregistering machine {} failed: {e}", sb.id, sb.machine)
            }
        }
    }

    /// Whether machined still knows the pod's machine (after a restart of
    /// podscoped or of machined).
    pub async fn is_registered(&self, sb: &Sandbox) -> bool {
        match self.proxy().await {
            Ok(p) => self
                .gated("GetMachine", || p.get_machine(sb.machine.clone()))
                .await
                .is_ok(),
            Err(_) => false,
        }
    }
}
