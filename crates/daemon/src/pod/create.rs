//! Create: validate, reserve the name, checkpoint, then the namespace, the
//! network (CNI ADD) and the pod's files. A failure undoes exactly what was
//! done.

use super::*;

impl<S: SystemdClient> Pods<S> {
    /// Validate, reserve the name, persist, set up the network and the
    /// pod's files: the sandbox is Created.
    pub async fn create(&self, config: SandboxConfig) -> Result<Arc<Entry>> {
        let mut laps = Laps::start();
        config.validate()?;
        if !self.settings.handler_known(&config.runtime_handler) {
            return Err(Error::invalid(
                "runtime_handler",
                format!(
                    "unknown runtime handler {:?} (configured: {:?})",
                    config.runtime_handler,
                    self.settings.runtimes.keys().cloned().collect::<Vec<_>>()
                ),
            ));
        }
        if config.user_namespace.is_some() {
            // Refused here, by name, rather than at the first container's
            // start: kubelet sends hostUsers: false pods only to handlers
            // that advertise user namespaces, other clients may not ask.
            let (name, handler) = self
                .settings
                .runtime(&config.runtime_handler)
                .expect("handler_known above");
            let f = crate::host::features::of(name, handler).await;
            if !f.user_namespaces {
                let why = f.why_not.iter().find(|w| w.starts_with("user namespaces"));
                return Err(Error::invalid(
                    "user_namespace",
                    format!(
                        "runtime handler {name} cannot run pods in user namespaces here ({})",
                        why.map_or("it does not say why", String::as_str)
                    ),
                ));
            }
        }
        // The pod is a slice: kubelet's (its cgroup parent), else one of
        // its own in the default slice, holding its scope and containers.
        let id = SandboxId::random();
        let slice = match config.cgroup_parent.as_str() {
            "" => slice::pod_slice(&self.settings.default_slice, id.as_str())?,
            parent => slice::slice_for_cgroup_parent(parent, &self.settings.default_slice)?,
        };
        let key = config.key();
        self.registry.reserve(&key)?;
        let mut sandbox = Sandbox::new(id, config, slice, now_usec());
        let id = sandbox.id.clone();
        let pod = format!("{}/{}", key.namespace, key.name);
        if let Err(e) = self.store.save(&sandbox) {
            self.registry.release(&key);
            let _ = self.store.delete(&id);
            return Err(e.context(format!("create sandbox {pod}")));
        }
        failpoint::hit(failpoint::CREATE_SAVED);
        let mut timings = CreateTimings {
            checkpoint: laps.lap(),
            ..Default::default()
        };
        if let Err(e) = self.create_steps(&mut sandbox, &mut timings.netns).await {
            // Undo exactly what was done; each undo step is idempotent.
            if let Err(de) = self.detach_network(&id).await {
                tracing::error!(sandbox_id = %id, "sandbox {id}: create failed and its network teardown too: {de}");
            }
            if sandbox.has_netns() {
                let _ = self
                    .systemd
                    .stop_unit(&sandbox.netns_unit(), self.settings.stop_timeout())
                    .await;
            }
            let _ = files::remove(&self.settings.run_dir, &id);
            let _ = self.store.delete(&id);
            self.registry.release(&key);
            return Err(e);
        }
        let entry = Entry::new(sandbox);
        self.registry.insert(entry.clone());
        failpoint::hit(failpoint::CREATE_DONE);
        timings.total = laps.total();
        timings.log(&id, &pod);
        self.emit(Event::Created(id));
        Ok(entry)
    }

    /// Create's steps after the first checkpoint: namespace, network, files.
    /// `t_netns` gets the time the netns unit took to start.
    async fn create_steps(
        &self,
        sb: &mut Sandbox,
        t_netns: &mut std::time::Duration,
    ) -> Result<()> {
        let id = sb.id.clone();
        if sb.has_netns() {
            sb.network = self.create_network(sb, t_netns).await?;
        }
        let (resolv, hostname) = files::write(&self.settings.run_dir, sb)
            .with_context(|| format!("sandbox {id}: create: pod files"))?;
        failpoint::hit(failpoint::CREATE_FILES_WRITTEN);
        sb.resolv_conf_path = resolv;
        sb.hostname_path = hostname;
        self.store
            .save(sb)
            .with_context(|| format!("sandbox {id}: create: save checkpoint"))
    }

    /// The pod's namespace, pinned by its netns unit, with CNI ADD done in
    /// it. The daemon makes the namespace and runs ADD while the unit pins
    /// it (the unit's process costs a cgroup migration that ADD need not
    /// wait for); without the handoff, the unit makes it first.
    async fn create_network(
        &self,
        sb: &Sandbox,
        t_netns: &mut std::time::Duration,
    ) -> Result<PodNetwork> {
        let id = &sb.id;
        let unit = sb.netns_unit();
        let start_unit = || async {
            let t = Instant::now();
            let r = self
                .systemd
                .start_unit(&unit, self.settings.start_timeout())
                .await
                .with_context(|| format!("sandbox {id}: create: start {unit}"));
            (r, t.elapsed())
        };
        // The namespace made here and offered to the unit, when the handoff
        // is served and the daemon may make namespaces (a drop-in can take
        // that away); else the unit makes it before ADD.
        let made = self.handoffs.get().and_then(|handoffs| {
            let offered = HeldNetns::create()
                .and_then(|held| handoffs.offer(id.as_str(), &held).map(|o| (held, o)));
            offered
                .map_err(|e| warn!(sandbox_id = %id, "sandbox {id}: cannot make its network namespace in podscoped ({e}); {unit} makes it"))
                .ok()
        });
        let Some((held, offer)) = made else {
            let (r, t) = start_unit().await;
            *t_netns = t;
            r?;
            return self.attach_network(sb, None).await;
        };
        let ((pinned, t), added) =
            tokio::join!(start_unit(), self.attach_network(sb, Some(held.path())));
        drop(offer);
        *t_netns = t;
        match (pinned, added) {
            (Ok(()), Ok(net)) if held.is_pinned_at(&sb.netns_path()) => Ok(net),
            (Ok(()), Ok(_)) => {
                // The helper pinned a namespace of its own (it could not
                // reach the daemon in time): move the network there.
                warn!(sandbox_id = %id, "sandbox {id}: {unit} did not take the namespace handed to it; setting the network up again in the one it pinned");
                self.detach_network_in(id, Some(held.path())).await?;
                self.attach_network(sb, None).await
            }
            (Err(e), Ok(_)) => {
                // Undo ADD while the namespace is still held.
                if let Err(de) = self.detach_network_in(id, Some(held.path())).await {
                    tracing::error!(sandbox_id = %id, "sandbox {id}: undoing ADD after the namespace unit failed: {de}");
                }
                Err(e)
            }
            // ADD undid itself; the caller stops the unit.
            (_, Err(e)) => Err(e),
        }
    }
}
