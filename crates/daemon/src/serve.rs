//! podscoped assembled: the system bus, systemd, the checkpoints, the
//! image store, the host's mount namespace, the pods and containers and
//! their recovery, every object exported, and only then the bus name.

use crate::bus::manager::Manager;
use crate::bus::polkit;
use crate::bus::sandbox::SandboxObject;
use crate::bus::{self, sandbox_path, Service, BUS_NAME, MANAGER_PATH};
use crate::pod::Pods;
use crate::state::checkpoint::Store;
use crate::systemd::Systemd;
use podscope_api::error::{Error, Result};
use podscope_config::Settings;
use podscope_sys::descriptors::Budget;
use std::sync::Arc;
use tokio::sync::mpsc;
use zbus::Connection;

/// Tasks handling systemd's unit events.
const UNIT_EVENT_HANDLERS: usize = 16;

/// Connect to the system bus, recover state, export every object, and only
/// then take the bus name: a caller never sees a half-recovered daemon.
pub async fn serve(settings: Settings) -> Result<(Connection, Arc<Service>)> {
    // Serving an interface through the Builder makes build() wait until the
    // object server's dispatch stream is in place. Without that, a call
    // queued by D-Bus activation, delivered the instant the name is granted,
    // can arrive before the stream exists and be dropped unanswered.
    let bus_err = |e: zbus::Error| Error::internal(format!("connect to the system bus: {e}"));
    let conn = zbus::connection::Builder::system()
        .and_then(|b| b.serve_at(MANAGER_PATH, zbus::fdo::ObjectManager))
        .map_err(bus_err)?
        .build()
        .await
        .map_err(bus_err)?;
    // Each call counted from the first, when there is an endpoint to read
    // the count: the counting stream gets every call's message (a pod's
    // annotations reach 256 KiB), a cost a daemon without metrics skips.
    if settings.metrics_address().is_some() {
        if let Err(e) = crate::metrics::bus_calls::count(&conn).await {
            tracing::warn!("metrics: bus calls will not be counted: {e}");
        }
    }
    let gate = Arc::new(podscope_api::bus_gate::BusGate::new(
        settings.bus_calls_max as usize,
    ));
    let unit_events = Arc::new(crate::systemd::events::UnitEvents::default());
    let systemd = Systemd::connect(&conn, gate.clone(), unit_events.clone()).await?;
    let store = Store::open(&settings.state_dir)?;
    let (event_tx, event_rx) = mpsc::unbounded_channel();
    let machined = crate::pod::machined::Machined::new(&conn, gate.clone());
    let images = crate::image::Images::open((&settings).into())?;
    let hostns = crate::host::hostns::HostNs::connect()?;
    let pods = Arc::new(Pods::new(
        settings.clone(),
        store,
        systemd.clone(),
        machined,
        event_tx.clone(),
    )?);
    let containers = Arc::new(crate::container::Containers::new(
        settings,
        systemd,
        pods.clone(),
        images.clone(),
        hostns.clone(),
        event_tx,
    )?);
    pods.set_members(containers.clone());
    pods.set_hostns(hostns);
    pods.recover().await?;
    containers.recover().await?;

    let service = Arc::new(Service {
        pods: pods.clone(),
        containers: containers.clone(),
        images,
        auth: polkit::Authorizer::new(
            &conn,
            gate.clone(),
            std::time::Duration::from_millis(pods.settings.polkit_timeout_ms),
        ),
        gate,
        conn: conn.clone(),
        inflight: tokio::sync::watch::Sender::new(0),
        done: Default::default(),
        callers: bus::callers::Callers::new(&conn),
        waiters: bus::limits::Limiter::new("Wait calls", bus::WAITERS_PER_UID, bus::MAX_WAITERS),
        fds: Arc::new(Budget::new(podscope_sys::descriptors::limit())),
    });
    let server = conn.object_server();
    let export = |e: zbus::Error| Error::internal(format!("export objects: {e}"));
    server
        .at(
            MANAGER_PATH,
            Manager {
                service: service.clone(),
            },
        )
        .await
        .map_err(export)?;
    server
        .at(
            MANAGER_PATH,
            bus::images::ImagesObject {
                service: service.clone(),
            },
        )
        .await
        .map_err(export)?;
    for entry in pods.list(&Default::default()) {
        let path = sandbox_path(&entry.id);
        server
            .at(
                &path,
                SandboxObject {
                    entry,
                    service: service.clone(),
                },
            )
            .await
            .map_err(export)?;
    }
    for entry in containers.list(&Default::default()) {
        let path = podscope_api::container_path(&entry.id);
        server
            .at(
                &path,
                bus::container::ContainerObject {
                    entry,
                    service: service.clone(),
                },
            )
            .await
            .map_err(export)?;
    }

    // A fixed number of handlers take the unit events (one queued per
    // unit at most: `systemd::events`); a handler waits for its object's
    // lock, so several run at once.
    for _ in 0..UNIT_EVENT_HANDLERS {
        let (lc, cs, events) = (pods.clone(), containers.clone(), unit_events.clone());
        tokio::spawn(async move {
            loop {
                let ev = events.next().await;
                if podscope_api::domain::container::id_from_container_unit(&ev.unit).is_some() {
                    cs.on_unit_event(ev).await
                } else {
                    lc.on_unit_event(ev).await
                }
            }
        });
    }
    tokio::spawn(bus::signals::announce(
        conn.clone(),
        pods.clone(),
        containers.clone(),
        event_rx,
    ));

    conn.request_name_with_flags(BUS_NAME, zbus::fdo::RequestNameFlags::DoNotQueue.into())
        .await
        .map_err(|e| Error::internal(format!("take bus name {BUS_NAME}: {e}")))?;
    pods.listen_for_handoffs();
    // CNI DELs owed since the last run: plugins may be slow, so this runs
    // while the daemon already serves (each sandbox under its own lock).
    let lc = pods.clone();
    tokio::spawn(async move { lc.reconcile_networks().await });
    // Ready pods that machined forgot (it restarted while we were down).
    let lc = pods.clone();
    tokio::spawn(async move { lc.reconcile_machines().await });
    Ok((conn, service))
}
