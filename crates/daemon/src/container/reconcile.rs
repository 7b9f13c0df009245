//! Keeping container records true: systemd's unit events while the daemon
//! runs, and recovery at its start, which rebuilds every container from its
//! checkpoint and its unit (an exit while the daemon was down is read from
//! the unit, which keeps it: RemainAfterExit=, or failed) and takes the
//! running ones' log pipes back from their pods' inits.

use super::*;
use std::os::fd::OwnedFd;

impl<S: SystemdClient + Clone> Containers<S> {
    /// A `podscope-*` unit changed: a container whose main process ended is
    /// Exited.
    pub async fn on_unit_event(&self, ev: UnitEvent) {
        let Some(id) = id_from_container_unit(&ev.unit) else {
            return;
        };
        // First the waiters that hold the lock (Stop).
        if let Some(w) = self.wakers.lock().unwrap().get(&id) {
            w.notify_waiters();
        }
        let running = ev.active_state.as_deref() == Some("active")
            && matches!(ev.sub_state.as_deref(), Some("running") | None);
        let starting = matches!(ev.active_state.as_deref(), Some("activating"))
            || matches!(
                ev.sub_state.as_deref(),
                Some("start" | "start-pre" | "start-post")
            );
        if running || starting {
            return;
        }
        let Some(entry) = self.registry.get(&id) else {
            return;
        };
        let _op = entry.op.lock().await;
        if entry.is_removed() || entry.with(|c| c.state) != ContainerState::Running {
            return;
        }
        if let Err(e) = self.observe_exit(&entry).await {
            warn!(container_id = %id, unit = %ev.unit, "container {id}: reading its exit: {e}");
        }
    }

    /// Load every container at daemon start (after the pods), and put each
    /// right with its unit.
    pub async fn recover(&self) -> Result<RecoveryReport> {
        let recovered = self.store.recover()?;
        let mut report = RecoveryReport {
            recovered: recovered.records.len(),
            quarantined: recovered.quarantined.clone(),
            ..Default::default()
        };
        for q in &recovered.quarantined {
            tracing::error!(
                "container checkpoint {} is damaged ({}); moved to {}",
                q.dir,
                q.reason,
                q.moved_to.display()
            );
        }
        let units = self.systemd.list_units("podscope-ctr-*.service").await?;
        // What each pod's init holds for its containers, asked once a pod.
        let mut held: HashMap<SandboxId, HashMap<String, Vec<OwnedFd>>> = HashMap::new();
        for record in recovered.records {
            let layers = record
                .layers
                .iter()
                .chain(record.volumes.iter().flat_map(|v| &v.layers))
                .filter_map(|l| podscope_api::reference::Digest::parse(l).ok())
                .collect();
            self.images.hold_layers(record.id.as_str(), layers);
            let id = record.id.clone();
            let pod = record.pod_id.clone();
            let entry = Entry::new(record);
            self.registry.insert(entry.clone());
            let _op = entry.op.lock().await;
            if !held.contains_key(&pod) {
                let sock = holder::socket_path(&self.pod_dir(&pod));
                let got = tokio::task::spawn_blocking(move || holder::take_all(&sock))
                    .await
                    .ok()
                    .and_then(|r| r.ok())
                    .unwrap_or_default();
                held.insert(pod.clone(), got.into_iter().collect());
            }
            let fds = held.get_mut(&pod).expect("inserted above");
            let state = entry.with(|c| c.state);
            let unit_known = units.contains_key(&entry.with(|c| c.unit()));
            let r = match (state, unit_known) {
                (ContainerState::Running, _) | (ContainerState::Created, true) => {
                    // A checkpoint the daemon's end cut short: thawed first.
                    self.recover_cut_short(&entry.snapshot()).await;
                    self.reattach(&entry, fds, &mut report).await
                }
                (ContainerState::Created, false) => self.reset_created(&entry).await,
                _ => Ok(()),
            };
            if let Err(e) = r {
                warn!(container_id = %id, "container {id}: recovery: {e}");
            }
        }
        // Units of containers no record names: what a Create cut short
        // before its checkpoint could not have made, so someone else's, or
        // a record lost. Stopped; their runtime state goes with them. A
        // record in quarantine/ (now or from an earlier start) is damaged,
        // not lost: its unit runs on until an operator removes it there.
        let mut held = self.store.quarantined_names();
        held.extend(report.quarantined.iter().map(|q| q.dir.clone()));
        for (unit, _) in units {
            let Some(id) = id_from_container_unit(&unit) else {
                continue;
            };
            if self.registry.get(&id).is_some() || held.contains(id.as_str()) {
                continue;
            }
            let _ = self
                .systemd
                .stop_unit(&unit, self.settings.stop_timeout())
                .await;
            let _ = self.systemd.reset_failed(&unit).await;
            report.orphans_stopped.push(unit);
        }
        // Execs whose caller went with the old daemon.
        if let Ok(execs) = self.systemd.list_units("podscope-exec-*.service").await {
            for unit in execs.keys() {
                let _ = self
                    .systemd
                    .stop_unit(unit, self.settings.stop_timeout())
                    .await;
                let _ = self.systemd.reset_failed(unit).await;
            }
        }
        info!(
            event = podscope_sys::logging::event::RECOVERED,
            containers = report.recovered,
            exited_while_down = report.exited_while_down,
            "recovered {} containers ({} ended while the daemon was down)",
            report.recovered,
            report.exited_while_down
        );
        *self.recovery.lock().unwrap() = report.clone();
        Ok(report)
    }

    /// A container that runs (or ran while the daemon was down): its
    /// pipes taken back from the pod's init and read again, its log file
    /// reopened, its OOM watch set again; an exit meanwhile recorded.
    async fn reattach(
        &self,
        entry: &ContainerEntry,
        held: &mut HashMap<String, Vec<OwnedFd>>,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let c = entry.snapshot();
        let status = self.systemd.service_status(&c.unit()).await?;
        let mut fds = held.remove(&Self::holding(&c.id)).unwrap_or_default();
        let tty = held.remove(&format!("{}-tty", Self::holding(&c.id)));
        let file = match c.log_path.as_str() {
            "" => None,
            p => match self
                .hostns
                .open_log(&self.settings.log_root, Path::new(p))
                .await
            {
                Ok(fd) => Some(std::fs::File::from(fd)),
                Err(e) => {
                    warn!(container_id = %c.id, "container {}: its log file: {e}", c.id);
                    None
                }
            },
        };
        let log = LogFile::new(file);
        let (tx, rx) = watch::channel(End::Running);
        let tap = Arc::new(logs::Tap::default());
        let mut readers = Vec::new();
        // stdin's write end: under its own name, or third with the
        // outputs (as daemons before attach held it).
        let mut stdin = held
            .remove(&format!("{}-stdin", Self::holding(&c.id)))
            .and_then(|mut v| v.pop());
        if fds.len() == 3 {
            stdin = fds.pop();
        }
        let tty_master = tty
            .as_ref()
            .and_then(|v| v.first())
            .and_then(|m| m.try_clone().ok());
        let mut streams = vec![logs::Stream::Stdout, logs::Stream::Stderr].into_iter();
        for fd in fds.into_iter().chain(tty.into_iter().flatten()) {
            let stream = streams.next().unwrap_or(logs::Stream::Stdout);
            if podscope_sys::pipe::set_nonblocking(&fd).is_ok() {
                readers.push(tokio::spawn(logs::read_stream(
                    fd,
                    stream,
                    log.clone(),
                    rx.clone(),
                    tap.clone(),
                )));
            }
        }
        if readers.is_empty() && c.state == ContainerState::Running {
            warn!(container_id = %c.id, "container {}: its pod's init held no log pipes: output from now on is lost", c.id);
        }
        let oom = oom::watch(&self.hostns, self.oom_layout, &c.cgroup_path())
            .await
            .unwrap_or_default();
        self.live.lock().unwrap().insert(
            c.id.clone(),
            Live {
                end: tx,
                log,
                readers,
                oom,
                stdin,
                tty: tty_master,
                tap,
            },
        );
        let mut next = c.clone();
        if c.state == ContainerState::Created {
            // A Start cut short after its unit began: the unit is the
            // truth, and the start is finished here if the runtime's
            // `start` had not run yet (its process still waits).
            match &status {
                Some(st) if st.main_pid != 0 || st.main_exited() => {
                    if st.main_pid != 0 {
                        if let Err(e) = self.finish_start(&c, st.main_pid).await {
                            warn!(container_id = %c.id, "container {}: recovery: {e}", c.id);
                            let _ = self
                                .systemd
                                .stop_unit(&c.unit(), self.settings.stop_timeout())
                                .await;
                            next.mark_exited(ContainerExit {
                                code: 128,
                                reason: podscope_api::domain::container::REASON_START_ERROR.into(),
                                message: e.to_string(),
                                finished_at: podscope_api::domain::sandbox::now_usec(),
                            });
                        }
                    }
                    if next.state == ContainerState::Created {
                        next.state = ContainerState::Running;
                        next.started_at = st.exec_main_start_usec;
                        next.main_pid = st.main_pid;
                    }
                }
                _ => {}
            }
        }
        if next != c {
            self.persist(entry, next)?;
        }
        if entry.with(|c| c.state) == ContainerState::Running && self.observe_exit(entry).await? {
            report.exited_while_down += 1;
        }
        Ok(())
    }

    /// The runtime's `start` of a container its `create` left waiting; one
    /// that runs (or ran) already is left alone. Without its runtime (the
    /// handler gone from the configuration) the unit is taken as it is.
    async fn finish_start(&self, c: &Container, main_pid: u32) -> Result<()> {
        let Some(pod) = self.pods.get(&c.pod_id) else {
            return Ok(());
        };
        let Ok((_, handler)) = self.runtime_of(&pod.snapshot()) else {
            return Ok(());
        };
        let timeout = self.settings.start_timeout();
        match runtime::status(handler, c.id.as_str(), timeout).await {
            Ok(s) if s == "created" => {
                // Counted in cpuacct as a start not cut short would have
                // made it (crun; runc joined at its create).
                if let (Some(root), Some(RuntimeKind::Crun)) = (&self.cpuacct_root, handler.kind())
                {
                    if let Err(e) =
                        cpuacct::enter(&self.hostns, root, &c.cgroup_path(), main_pid).await
                    {
                        warn!(container_id = %c.id, "container {}: its cpuacct cgroup: {e}", c.id);
                    }
                }
                let log = self.run_dir(&c.id).join("runtime.log");
                runtime::start(handler, &log, c.id.as_str(), timeout)
                    .await
                    .map_err(|e| e.context("finish its start"))?;
                info!(container_id = %c.id, "container {}: its start, cut short, finished", c.id);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A Created container whose Start was cut short before its unit: its
    /// root unmounted and its pipes dropped, so a Start can run again.
    async fn reset_created(&self, entry: &ContainerEntry) -> Result<()> {
        let c = entry.snapshot();
        let dirs = rootfs::Dirs::of(&self.bundle(&c.id));
        if dirs.is_mounted() {
            rootfs::unmount(&self.hostns, &dirs).await?;
        }
        self.release_at_init(&c).await;
        let _ = std::fs::remove_dir_all(self.run_dir(&c.id));
        Ok(())
    }
}
