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
            && slice::is_own_pod_slice(&self.settings.default_slice, sb.id.as_str(), &sb.slice)
        {
            if let Err(e) = self
                .systemd
                .stop_unit(&sb.slice, self.settings.stop_timeout())
                .await
            {
                warn!(sandbox_id = %id, "sandbox {id}: stop its slice {}: {e}", sb.slice);
            }
            // systemd removes the slice's cgroups in the hierarchies it
            // manages; runc makes it in the v1 hierarchies systemd does
            // not (cpuset, freezer, net_cls, perf_event, hugetlb), and the
            // daemon in a cpuacct one apart from cpu (`container::cpuacct`):
            // those are left, empty, for the daemon to remove.
            let left = v1_leftovers(&slice::slice_cgroup_path(&sb.slice));
            if let (Some(hostns), false) = (self.hostns.get(), left.is_empty()) {
                if let Err(e) = hostns.remove_dirs(&left).await {
                    warn!(sandbox_id = %id, "sandbox {id}: its slice's cgroups: {e}");
                }
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
        info!(event = podscope_sys::logging::event::REMOVED, sandbox_id = %id, "sandbox {id} removed");
        self.emit(Event::Removed(id.clone()));
        Ok(id)
    }
}

/// The directories of `cgroup_path` (a slice's, below the hierarchies'
/// roots) that exist in cgroup v1 hierarchies, as the daemon sees them.
fn v1_leftovers(cgroup_path: &str) -> Vec<std::path::PathBuf> {
    let rel = cgroup_path.trim_start_matches('/');
    let root = std::path::Path::new("/sys/fs/cgroup");
    // A pure cgroup v2 node has no v1 hierarchies (its root is the unified
    // one, with cgroup.controllers).
    if root.join("cgroup.controllers").exists() {
        return Vec::new();
    }
    let Ok(hierarchies) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    hierarchies
        .flatten()
        // The unified hierarchy and systemd's own are systemd's alone.
        .filter(|h| !matches!(h.file_name().to_str(), Some("unified" | "systemd")))
        .map(|h| h.path().join(rel))
        .filter(|d| d.is_dir())
        .collect()
}
