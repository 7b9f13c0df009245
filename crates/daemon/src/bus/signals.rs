//! The daemon's lifecycle events as D-Bus signals, in the order they
//! happened: each object's PropertiesChanged (one signal for all that
//! changed), then the Manager's SandboxStateChanged or
//! ContainerStateChanged.

use super::manager::Manager;
use super::sandbox::SandboxObject;
use super::{sandbox_path, MANAGER_PATH};
use crate::pod::{Event, Pods};
use podscope_api::domain::SandboxId;
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::warn;
use zbus::object_server::SignalEmitter;
use zbus::Connection;

/// Turn lifecycle events into D-Bus signals, in order.
pub async fn announce(
    conn: Connection,
    pods: Arc<Pods>,
    containers: Arc<crate::container::Containers>,
    mut events: mpsc::UnboundedReceiver<Event>,
) {
    let manager = SignalEmitter::new(&conn, MANAGER_PATH).expect("valid path");
    while let Some(ev) = events.recv().await {
        let r = match &ev {
            Event::Created(id) => {
                Manager::sandbox_created(&manager, id.as_str(), sandbox_path(id).as_ref()).await
            }
            Event::Removed(id) => {
                Manager::sandbox_removed(&manager, id.as_str(), sandbox_path(id).as_ref()).await
            }
            Event::Changed(id) => changed(&conn, &pods, &manager, id).await,
            Event::ContainerCreated(id) => {
                Manager::container_created(
                    &manager,
                    id.as_str(),
                    podscope_api::container_path(id).as_ref(),
                )
                .await
            }
            Event::ContainerRemoved(id, _) => {
                // Its object goes too, whoever removed it: RemoveContainer
                // has unexported it already, a pod's Remove (its members)
                // or recovery has not.
                let path = podscope_api::container_path(id);
                let _ = conn
                    .object_server()
                    .remove::<super::container::ContainerObject, _>(&path)
                    .await;
                Manager::container_removed(&manager, id.as_str(), path.as_ref()).await
            }
            Event::ContainerChanged(id, state) => {
                container_changed(&conn, &containers, &manager, id, *state).await
            }
        };
        if let Err(e) = r {
            warn!("emitting signal for {ev:?} failed: {e}");
        }
    }
}

/// A container's PropertiesChanged, then ContainerStateChanged.
async fn container_changed(
    conn: &Connection,
    containers: &crate::container::Containers,
    manager: &SignalEmitter<'_>,
    id: &podscope_api::domain::ContainerId,
    state: podscope_api::domain::container::ContainerState,
) -> zbus::Result<()> {
    if containers.get(id).is_none() {
        return Ok(());
    }
    let path = podscope_api::container_path(id);
    if let Ok(iface) = conn
        .object_server()
        .interface::<_, super::container::ContainerObject>(&path)
        .await
    {
        iface
            .get()
            .await
            .emit_changes(iface.signal_emitter())
            .await?;
    }
    Manager::container_state_changed(manager, id.as_str(), path.as_ref(), state.as_str()).await
}

/// PropertiesChanged for the properties that change (zbus's emitters, so
/// the list is the interface's own), then SandboxStateChanged.
async fn changed(
    conn: &Connection,
    pods: &Pods,
    manager: &SignalEmitter<'_>,
    id: &SandboxId,
) -> zbus::Result<()> {
    let Some(entry) = pods.get(id) else {
        return Ok(());
    };
    let state = entry.with(|sb| sb.state);
    let path = sandbox_path(id);
    // Not exported yet (a change during Create): nobody can watch it.
    if let Ok(iface) = conn
        .object_server()
        .interface::<_, SandboxObject>(&path)
        .await
    {
        iface
            .get()
            .await
            .emit_changes(iface.signal_emitter())
            .await?;
    }
    Manager::sandbox_state_changed(manager, id.as_str(), path.as_ref(), state.as_str()).await
}
