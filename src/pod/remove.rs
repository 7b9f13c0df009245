//! Remove: stop if needed (containers first), remove the containers, then
//! delete all state.

use super::*;

impl<S: SystemdClient> Pods<S> {
    /// Stop if needed, then delete all state. Unknown ids are NotFound.
    pub async fn remove(&self, entry: &Arc<Entry>) -> Result<SandboxId> {
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {}", entry.id)));
        }
        let id = entry.id.clone();
        let _gate = entry.members.write().await;
        self.stop_members(&entry.snapshot()).await?;
        match self.stop_locked(entry, "").await {
            Ok(()) => {}
            // Plugins missing or failing must not make a pod unremovable:
            // the attachment stays on disk (with the error) and its DEL is
            // retried when podscoped next starts.
            Err(e) if e.kind() == ErrorKind::NetworkFailed => {
                tracing::error!(sandbox_id = %id,
                    "sandbox {id}: removed with its network teardown still owed (retried at the next daemon start): {e}");
            }
            Err(e) => return Err(e),
        }
        self.remove_members(&entry.snapshot()).await?;
        // A slice of its own (no cgroup parent) goes with the pod; systemd
        // keeps an empty slice loaded otherwise. kubelet's are kubelet's.
        let sb = entry.snapshot();
        if sb.config.cgroup_parent.is_empty()
            && slice::pod_slice(&self.settings.default_slice, sb.id.as_str())
                .ok()
                .as_deref()
                == Some(sb.slice.as_str())
        {
            if let Err(e) = self
                .systemd
                .stop_unit(&sb.slice, self.settings.stop_timeout())
                .await
            {
                warn!(sandbox_id = %id, "sandbox {id}: stop its slice {}: {e}", sb.slice);
            }
        }
        failpoint::hit(failpoint::REMOVE_STOPPED);
        // The files before the record: a crash in between leaves a record
        // (Remove is retried), never files that nothing owns.
        if let Err(e) = files::remove(&self.settings.run_dir, &id) {
            warn!(sandbox_id = %id, "sandbox {id}: {e}");
        }
        failpoint::hit(failpoint::REMOVE_FILES_REMOVED);
        self.store
            .delete(&id)
            .with_context(|| format!("sandbox {id}: remove: delete state"))?;
        failpoint::hit(failpoint::REMOVE_DONE);
        entry.mark_removed();
        self.registry.remove(&id);
        info!(event = crate::logging::event::REMOVED, sandbox_id = %id, "sandbox {id} removed");
        self.emit(Event::Removed(id.clone()));
        Ok(id)
    }
}
