//! Stop: the scope, then CNI DEL and the namespace's unit together: NotReady.

use super::*;

impl<S: SystemdClient> Lifecycle<S> {
    /// Stop the scope: NotReady. Idempotent.
    pub async fn stop(&self, entry: &Arc<Entry>) -> Result<Arc<Entry>> {
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {}", entry.id)));
        }
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
            self.stop_scope(&sb.id, &unit).await?;
        }
        let t_scope = laps.lap();
        // DEL runs in the namespace, as plugins that move host devices in
        // and out need; the daemon holds it open meanwhile, so its pin can
        // be released at the same time (the netns unit's stop is a process
        // systemd starts: a cgroup migration and an exec, ~10-20 ms on a
        // small node, no longer added to DEL's time).
        let held = if owes_del && sb.has_netns() {
            HeldNetns::open(&sb.netns_path())
        } else {
            None
        };
        let del = async {
            let t = Instant::now();
            let r = if owes_del {
                self.detach_network_in(&sb.id, held.as_ref().map(HeldNetns::path))
                    .await
            } else {
                Ok(())
            };
            (r, t.elapsed())
        };
        let unpin = async {
            let t = Instant::now();
            let r = if sb.has_netns() {
                let netns = sb.netns_unit();
                self.systemd
                    .stop_unit(&netns, self.settings.stop_timeout())
                    .await
                    .with_context(|| format!("sandbox {}: stop: stop {netns}", sb.id))
            } else {
                Ok(())
            };
            (r, t.elapsed())
        };
        let ((net, t_del), (unpinned, t_unpin)) = tokio::join!(del, unpin);
        drop(held);
        unpinned?;
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
