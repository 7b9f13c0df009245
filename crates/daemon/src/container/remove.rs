//! RemoveContainer: stopped first if it runs, its unit stopped (crun
//! deletes its state in ExecStopPost; runc's is deleted here) and forgotten, its root
//! unmounted, its layers released, its bundle and record deleted. No
//! failed unit is left behind.

use super::*;

impl<S: SystemdClient + Clone> Containers<S> {
    pub async fn remove(&self, entry: &Arc<ContainerEntry>) -> Result<ContainerId> {
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!(
                "no container with id {}",
                entry.id
            )));
        }
        let c = entry.snapshot();
        let ctx = || format!("container {} ({}): remove", c.id, c.config.name);
        self.stop_locked(entry, 0).await?;
        let unit = c.unit();
        self.systemd
            .stop_unit(&unit, self.settings.stop_timeout())
            .await
            .with_context(ctx)?;
        self.systemd.reset_failed(&unit).await.with_context(ctx)?;
        if let Err(e) = self.delete_runtime_state(&c).await {
            warn!(container_id = %c.id, "{}: the runtime's state: {e}", ctx());
        }
        if let Some(RuntimeKind::Runc) = self
            .settings
            .runtime(&c.runtime_handler)
            .and_then(|(_, h)| h.kind())
        {
            self.run_poststop_hooks(&c).await;
        }
        if !c.resources.hugepage_limits.is_empty() {
            // At worst an empty cgroup is left: not worth a Remove that
            // cannot finish.
            if let Err(e) =
                hugetlb::remove(&self.hostns, &self.hugetlb_layout, &c.cgroup_path()).await
            {
                warn!(container_id = %c.id, "{}: its hugetlb cgroup: {e}", ctx());
            }
        }
        if let Err(e) = self.remove_cpuacct(&c).await {
            warn!(container_id = %c.id, "{}: its cpuacct cgroup: {e}", ctx());
        }
        if c.started_at == 0 {
            // Never started (or its start failed): the OOM watch may have
            // made the unit's memory cgroup for a unit systemd never had,
            // so systemd will not remove it.
            if let Some(dir) = oom::memory_dir(self.oom_layout, &c.cgroup_path()) {
                if let Err(e) = self.hostns.remove_dir(&dir).await {
                    warn!(container_id = %c.id, "{}: its memory cgroup: {e}", ctx());
                }
            }
        }
        failpoint::hit(failpoint::CTR_REMOVE_UNIT_GONE);
        // A created container has readers only if a start failed half way.
        if let Some(live) = self.live.lock().unwrap().remove(&c.id) {
            let _ = live.end.send(End::Drain);
        }
        self.release_at_init(&c).await;
        rootfs::unmount(&self.hostns, &rootfs::Dirs::of(&self.bundle(&c.id)))
            .await
            .with_context(ctx)?;
        failpoint::hit(failpoint::CTR_REMOVE_UNMOUNTED);
        let run_dir = self.run_dir(&c.id);
        if let Err(e) = std::fs::remove_dir_all(&run_dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                warn!(container_id = %c.id, "container {}: remove {}: {e}", c.id, run_dir.display());
            }
        }
        self.store.delete(&c.id).with_context(ctx)?;
        failpoint::hit(failpoint::CTR_REMOVE_DONE);
        entry.mark_removed();
        self.registry.remove(&c.id);
        self.wakers.lock().unwrap().remove(&c.id);
        // Its layers go in a collection unless an image still has them.
        if self.images.release_layers(c.id.as_str()) {
            let images = self.images.clone();
            tokio::spawn(async move { images.collect_garbage().await });
        }
        info!(
            event = podscope_sys::logging::event::CONTAINER_REMOVED,
            container_id = %c.id,
            sandbox_id = %c.pod_id,
            "container {} ({}) removed",
            c.id,
            c.config.name
        );
        self.emit(Event::ContainerRemoved(c.id.clone(), c.pod_id.clone()));
        Ok(c.id)
    }

    /// The runtime's state of the container, once its unit has stopped.
    /// runc's is deleted here always (its unit has no `ExecStopPost=`:
    /// `unit::properties`). crun's unit deletes it in `ExecStopPost=`, but
    /// that runs in the unit's cgroup, inside the pod's, and can die there:
    /// kubelet, cleaning up a pod's slice alongside its RemoveContainer,
    /// SIGKILLs every process in it. So what is left is deleted here; the
    /// common case (crun) costs a stat.
    async fn delete_runtime_state(&self, c: &Container) -> Result<()> {
        let Some((_, handler)) = self.settings.runtime(&c.runtime_handler) else {
            return Ok(());
        };
        let dir = runtime::state_dir(handler, c.id.as_str());
        if dir.as_ref().is_some_and(|d| !d.exists()) {
            return Ok(());
        }
        match (handler.kind(), dir) {
            // runc's own delete, run here, would write to the cgroup file
            // system, which the daemon sees read-only; with every process
            // gone (systemd stopped the unit), what it would do is remove
            // the cgroups it made where systemd does not (freezer, cpuset,
            // net_cls, perf_event on v1), then its state.
            (Some(RuntimeKind::Runc), Some(dir)) => {
                let state = std::fs::read(dir.join("state.json")).unwrap_or_default();
                self.hostns
                    .remove_dirs(&runtime::runc_cgroups(&state))
                    .await?;
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| Error::io(format!("remove {}", dir.display()), e))
            }
            _ => {
                warn!(container_id = %c.id,
                    "container {}: its runtime state outlived the unit's ExecStopPost: deleting it", c.id);
                runtime::delete(handler, c.id.as_str(), self.settings.stop_timeout()).await
            }
        }
    }

    /// runc's poststop hooks (a CDI spec's), which its delete would run
    /// and the daemon's own removal of its state (above) does not: each
    /// as a oneshot unit, in the host's namespaces as the runtime runs
    /// hooks, the container's state (OCI's, `stopped`) on its stdin, and
    /// its timeout (else the stop timeout) as the unit's. crun's run in
    /// its ExecStopPost's delete. A hook that fails is logged and the
    /// removal goes on, as a runtime's delete goes on past one.
    async fn run_poststop_hooks(&self, c: &Container) {
        let bundle = self.bundle(&c.id);
        let Ok(text) = std::fs::read(bundle.join("config.json")) else {
            return;
        };
        let Ok(spec) = serde_json::from_slice::<podscope_oci::spec::Spec>(&text) else {
            return;
        };
        let hooks = spec.hooks.map(|h| h.poststop).unwrap_or_default();
        if hooks.is_empty() {
            return;
        }
        let state = serde_json::json!({
            "ociVersion": spec.oci_version,
            "id": c.id.as_str(),
            "status": "stopped",
            "bundle": bundle.display().to_string(),
            "annotations": spec.annotations,
        })
        .to_string();
        for (n, h) in hooks.iter().enumerate() {
            let unit = format!("podscope-ctr-{}-poststop-{n}.service", c.id.short());
            let timeout = h
                .timeout
                .and_then(|t| u64::try_from(t).ok())
                .map_or(self.settings.stop_timeout(), Duration::from_secs);
            let argv = if h.args.is_empty() {
                vec![h.path.clone()]
            } else {
                h.args.clone()
            };
            let props = vec![
                (
                    "Description",
                    Prop::Str(format!(
                        "podscope container {}: poststop hook {}",
                        c.id.short(),
                        h.path
                    )),
                ),
                ("Type", Prop::Str("oneshot".into())),
                ("CollectMode", Prop::Str("inactive-or-failed".into())),
                (
                    "ExecStart",
                    Prop::Exec(vec![crate::systemd::ExecCommand {
                        path: h.path.clone(),
                        argv,
                        ignore_failure: false,
                    }]),
                ),
                ("Environment", Prop::Strs(h.env.clone())),
                ("StandardInput", Prop::Str("data".into())),
                ("StandardInputData", Prop::Bytes(state.clone().into_bytes())),
                ("TimeoutStartUSec", Prop::U64(timeout.as_micros() as u64)),
            ];
            match self
                .systemd
                .start_transient(&unit, props, timeout + Duration::from_secs(5))
                .await
            {
                Ok(()) => {
                    info!(container_id = %c.id, "container {}: poststop hook {} ran", c.id, h.path)
                }
                Err(e) => {
                    warn!(container_id = %c.id, "container {}: poststop hook {}: {e}", c.id, h.path)
                }
            }
        }
    }

    /// Remove the container's cgroup in a cpuacct hierarchy apart from
    /// cpu (`cpuacct`), once its processes are gone; nothing where there
    /// is none (gone already is fine: runc deletes the one it made).
    pub(super) async fn remove_cpuacct(&self, c: &Container) -> Result<()> {
        match &self.cpuacct_root {
            Some(root) => {
                self.hostns
                    .remove_dir(&cpuacct::dir(root, &c.cgroup_path()))
                    .await
            }
            None => Ok(()),
        }
    }
}
