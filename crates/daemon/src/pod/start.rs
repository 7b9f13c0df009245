//! Start: the network checked, podscope-init spawned, the transient scope
//! made around it: Ready. The pod is then registered with machined off
//! the caller's path.

use super::*;

impl<S: SystemdClient> Pods<S> {
    /// Spawn the init and put it in a new transient scope: Ready.
    pub async fn start(self: &Arc<Self>, entry: &Arc<Entry>) -> Result<Arc<Entry>> {
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {}", entry.id)));
        }
        let sb = entry.snapshot();
        let ctx = |step: &str| format!("sandbox {}: start: {step}", sb.id);
        match sb.state {
            State::Ready => return Ok(entry.clone()),
            State::NotReady => {
                return Err(Error::invalid_state(format!(
                    "sandbox {} is stopped; a stopped sandbox cannot be started again (create a new attempt)",
                    sb.id
                )))
            }
            State::Created => {}
        }
        let laps = Laps::start();
        match self.start_steps(&sb).await {
            Ok((next, mut timings)) => {
                let unit = next.unit();
                let pid = next.init_pid;
                if let Err(e) = self.persist(entry, next) {
                    let e = e.context(ctx("save checkpoint"));
                    self.fail_start(entry, &e).await;
                    return Err(e);
                }
                failpoint::hit(failpoint::START_DONE);
                timings.total = laps.total();
                timings.log(&sb.id, &unit, pid);
                self.emit(Event::Changed(sb.id.clone()));
                // machinectl's view is not the pod's: RunPodSandbox does
                // not wait for it (machined is activated on the first pod
                // after 30 s without one, 0.2-0.5 s on a busy node). The
                // task takes the pod's lock after this Start lets go of it,
                // so a Stop either finds the machine recorded or comes
                // first and the task finds the pod no longer Ready.
                let (pods, entry2) = (self.clone(), entry.clone());
                tokio::spawn(async move { pods.register_machine(&entry2).await });
                Ok(entry.clone())
            }
            Err(e) => {
                self.fail_start(entry, &e).await;
                Err(e)
            }
        }
    }

    /// Start's steps; returns the Ready record and when each step was done.
    /// Undoes its own init and scope.
    async fn start_steps(&self, sb: &Sandbox) -> Result<(Sandbox, StartTimings)> {
        let mut laps = Laps::start();
        let mut timings = StartTimings::default();
        let ctx = |step: &str| format!("sandbox {}: start: {step}", sb.id);
        let unit = sb.unit();
        let mut next = sb.clone();
        if sb.has_netns() {
            if !std::path::Path::new(&sb.netns_path()).exists() {
                // The namespace unit was stopped since Create: bring it back.
                // (A pinned namespace means the unit is up: no bus round-trip.)
                let netns = sb.netns_unit();
                self.systemd
                    .start_unit(&netns, self.settings.start_timeout())
                    .await
                    .with_context(|| ctx(&format!("start {netns}")))?;
                if sb.network.attached {
                    // A new namespace (after a reboot, say): the old
                    // attachment's interfaces went with the old one.
                    self.detach_network(&sb.id).await?;
                    next.network = PodNetwork::default();
                }
            }
            if !next.network.attached {
                // Create's ADD was cut short by a restart and undone since.
                next.network = self.attach_network(sb, None).await?;
            }
        }
        // Create wrote them, but /run is a tmpfs (a reboot) and a Create
        // can be cut short after its checkpoint: write them again.
        let missing = |p: &str| p.is_empty() || !std::path::Path::new(p).exists();
        if missing(&next.resolv_conf_path) || missing(&next.hostname_path) {
            let (resolv, hostname) =
                files::write(&self.settings.run_dir, &next).with_context(|| ctx("pod files"))?;
            next.resolv_conf_path = resolv;
            next.hostname_path = hostname;
        }
        timings.network = laps.lap();
        failpoint::hit(failpoint::START_NETWORK_READY);
        let hold_socket = holder::socket_path(&files::dir_of(&self.settings.run_dir, &next.id));
        let init = init_spawn::spawn_init(
            &self.settings.init_path,
            &next,
            &hold_socket,
            self.settings.start_timeout(),
        )
        .await
        .with_context(|| ctx("spawn podscope-init"))?;
        let pid = init.pid;
        timings.init = laps.lap();
        failpoint::hit(failpoint::START_INIT_SPAWNED);
        // Its PID goes to systemd only while the pidfd says it is the
        // init's: a PID of a dead init may already name another process.
        if !init.alive() {
            return Err(Error::internal(format!(
                "{}: podscope-init (PID {pid}) exited before its scope was made",
                ctx("spawn podscope-init")
            )));
        }
        let props = self.scope_properties(&next, pid);
        if let Err(e) = self
            .systemd
            .start_transient(&unit, props, self.settings.start_timeout())
            .await
        {
            // Undo: the init is ours alone until the scope holds it.
            debug!(pid, "killing podscope-init after a failed start");
            init.kill();
            let _ = self
                .systemd
                .stop_unit(&unit, self.settings.stop_timeout())
                .await;
            return Err(e.context(ctx("create scope")));
        }
        self.hand_to_oomd(&next).await?;
        timings.scope = laps.lap();
        failpoint::hit(failpoint::START_SCOPE_MADE);
        next.mark_ready(pid, now_usec());
        Ok((next, timings))
    }

    /// A Start that failed leaves nothing running: no scope, no network, no
    /// namespace. The sandbox is NotReady (terminal, as for any stopped
    /// pod); kubelet removes it and makes a new attempt.
    async fn fail_start(&self, entry: &Entry, cause: &Error) {
        let reason = format!("start failed: {cause}");
        // The scope may exist when only the final checkpoint failed.
        if let Err(e) = self
            .stop_scope(&entry.id, &scope_unit_name(&entry.id))
            .await
        {
            warn!(sandbox_id = %entry.id, "sandbox {}: cleaning up after a failed start: {e}", entry.id);
        }
        if let Err(e) = self.stop_locked(entry, &reason).await {
            warn!(sandbox_id = %entry.id, "sandbox {}: cleaning up after a failed start: {e}", entry.id);
        }
    }

    /// With `oomd_memory_pressure_limit` set, the pod's own slice (one
    /// podscope made, not kubelet's) is given to systemd-oomd: it exists
    /// now that the scope is in it. A slice systemd will not configure
    /// fails the start, as a limit the operator asked for must not be
    /// silently missing.
    async fn hand_to_oomd(&self, sb: &Sandbox) -> Result<()> {
        let Some(limit) = self.settings.oomd_limit() else {
            return Ok(());
        };
        if !slice::is_own_pod_slice(&self.settings.default_slice, sb.id.as_str(), &sb.slice) {
            return Ok(());
        }
        self.systemd
            .set_properties(
                &sb.slice,
                vec![
                    ("ManagedOOMMemoryPressure", Prop::Str("kill".into())),
                    (
                        "ManagedOOMMemoryPressureLimit",
                        Prop::U32(oomd::dbus_limit(limit)),
                    ),
                ],
            )
            .await
            .map_err(|e| {
                e.context(format!(
                    "sandbox {}: start: hand its slice {} to systemd-oomd (limit {})",
                    sb.id,
                    sb.slice,
                    oomd::percent(limit)
                ))
            })
    }

    fn scope_properties(&self, sb: &Sandbox, pid: u32) -> Vec<(&'static str, Prop)> {
        let c = &sb.config;
        let mut props = vec![
            ("PIDs", Prop::Pids(vec![pid])),
            ("Slice", Prop::Str(sb.slice.clone())),
            (
                "Description",
                Prop::Str(format!(
                    "podscope pod {}/{} ({})",
                    c.namespace,
                    c.name,
                    sb.id.short()
                )),
            ),
            ("Delegate", Prop::Bool(true)),
            ("CollectMode", Prop::Str("inactive-or-failed".into())),
            ("CPUAccounting", Prop::Bool(true)),
            ("MemoryAccounting", Prop::Bool(true)),
            ("TasksAccounting", Prop::Bool(true)),
            (
                "TimeoutStopUSec",
                Prop::U64(self.settings.stop_timeout_ms * 1000),
            ),
        ];
        if sb.has_netns() {
            // The pod lives and dies with its network namespace.
            let netns = sb.netns_unit();
            props.push(("BindsTo", Prop::Strs(vec![netns.clone()])));
            props.push(("After", Prop::Strs(vec![netns])));
        }
        for (k, v) in podscope_api::domain::resources::scope_properties(&c.resources, &c.overhead) {
            props.push((k, Prop::U64(v)));
        }
        props
    }
}
