//! Stop: the scope, then CNI DEL, then the namespace unpinned and its unit
//! stopped: NotReady.

use super::*;

impl<S: SystemdClient> Pods<S> {
    /// Stop the pod's containers, then its scope: NotReady. Idempotent.
    pub async fn stop(&self, entry: &Arc<Entry>) -> Result<Arc<Entry>> {
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {}", entry.id)));
        }
        let _gate = entry.members.write().await;
        self.stop_members(&entry.snapshot()).await?;
        self.stop_locked(entry, "").await?;
        Ok(entry.clone())
    }

    /// Scope, then network (CNI DEL), then namespace. A failed DEL still
    /// lets the namespace go (DEL works without it), leaves the sandbox
    /// NotReady with the DEL still owed, and fails the call; the next Stop
    /// retries it.
    pub(super) async fn stop_locked(&self, entry: &Entry, reason: &str) -> Result<()> {
        let sb = entry.snapshot();
        let owes_del = self.attachments.exists(&sb.id);
        if sb.state == State::NotReady && !owes_del {
            return Ok(());
        }
        let mut laps = Laps::start();
        let unit = sb.unit();
        if sb.state == State::Ready {
            // Before the scope goes, so machined never shows a dead pod.
            self.machined.unregister(&sb).await;
            failpoint::hit(failpoint::STOP_MACHINE_UNREGISTERED);
            self.stop_scope(&sb.id, &unit).await?;
            failpoint::hit(failpoint::STOP_SCOPE_STOPPED);
        }
        let t_scope = laps.lap();
        // DEL runs in the namespace, as plugins that move host devices in
        // and out need, and the pin is released only after it: were the
        // daemon killed during DEL, the DEL owed at its next start would
        // otherwise find the namespace gone.
        let net = if owes_del {
            self.detach_network(&sb.id).await
        } else {
            Ok(())
        };
        let t_del = laps.lap();
        if sb.has_netns() {
            let netns = sb.netns_unit();
            let ctx = || format!("sandbox {}: stop: stop {netns}", sb.id);
            match self.hostns.get() {
                // Unpinned here, then the unit's stop is queued, not waited
                // for: its ExecStop (`podscope-netns del`, which then finds
                // nothing to do) is a process forked into the unit's cgroup,
                // about 15 ms that Stop's caller need not wait for. The
                // namespace is gone when Stop answers either way.
                Some(hostns) => {
                    hostns
                        .unpin(std::path::Path::new(&sb.netns_path()))
                        .await
                        .with_context(ctx)?;
                    self.systemd.queue_stop(&netns).await.with_context(ctx)?;
                }
                None => self
                    .systemd
                    .stop_unit(&netns, self.settings.stop_timeout())
                    .await
                    .with_context(ctx)?,
            }
        }
        let t_unpin = laps.lap();
        failpoint::hit(failpoint::STOP_DELETED);
        let mut next = sb.clone();
        next.mark_not_ready(reason, now_usec());
        match &net {
            Ok(()) => next.network_detached(),
            Err(e) => next.network_teardown_failed(e.to_string()),
        }
        self.persist(entry, next)
            .with_context(|| format!("sandbox {}: stop: save checkpoint", sb.id))?;
        StopTimings {
            scope: t_scope,
            network: t_del,
            netns: t_unpin,
            total: laps.total(),
        }
        .log(&sb.id, &unit);
        failpoint::hit(failpoint::STOP_DONE);
        self.emit(Event::Changed(sb.id.clone()));
        net
    }

    /// Stop a scope; past the timeout, SIGKILL everything in it and wait once more.
    pub(super) async fn stop_scope(&self, id: &SandboxId, unit: &str) -> Result<()> {
        match self
            .systemd
            .stop_unit(unit, self.settings.stop_timeout())
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::Timeout => {
                warn!(sandbox_id = %id, unit = %unit, "sandbox {id}: {unit} did not stop in time; killing it");
                self.systemd.kill_unit(unit, libc::SIGKILL).await?;
                self.systemd
                    .stop_unit(unit, self.settings.stop_timeout())
                    .await
                    .with_context(|| format!("sandbox {id}: stop scope after SIGKILL"))
            }
            Err(e) => Err(e.context(format!("sandbox {id}: stop scope"))),
        }
    }
}
