//! StopContainer: the stop signal to the container's main process (the
//! image's StopSignal, else SIGTERM), SIGKILL to everything in its unit
//! once the timeout has passed, and the exit recorded: Exited.

use super::*;
use std::time::Instant;

/// How often a waiting Stop looks at the unit even without a signal from
/// systemd (a signal lost with a reconnect must not hold it).
const RECHECK: Duration = Duration::from_millis(250);
/// How often a Stop whose signal was dropped looks for the handler.
const RESEND_CHECK: Duration = Duration::from_millis(50);
/// How long a SIGKILLed container may take to go.
const KILL_GRACE: Duration = Duration::from_secs(10);

impl<S: SystemdClient + Clone> Containers<S> {
    /// Stop a running container; one not running is stopped already.
    pub async fn stop(&self, entry: &Arc<ContainerEntry>, timeout_secs: i64) -> Result<()> {
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!(
                "no container with id {}",
                entry.id
            )));
        }
        self.stop_locked(entry, timeout_secs).await
    }

    pub(super) async fn stop_locked(
        &self,
        entry: &ContainerEntry,
        timeout_secs: i64,
    ) -> Result<()> {
        let c = entry.snapshot();
        if c.state != ContainerState::Running {
            return Ok(());
        }
        let t0 = Instant::now();
        let unit = c.unit();
        let ctx = || format!("container {} ({}): stop", c.id, c.config.name);
        let waker = self.waker(&c.id);
        let mut ended = false;
        if timeout_secs > 0 {
            let notified = waker.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let limit = tokio::time::Instant::now() + Duration::from_secs(timeout_secs as u64);
            // Sent before the program set its handler, the signal is
            // dropped (`signals`): sent again once it has one. Watched
            // whenever the process is its namespace's init, even if it
            // has a handler now: runc's init, a Go program, has one for
            // every signal until it execs the container's program, which
            // starts with none, and a signal that came in between is lost.
            let before = (c.main_pid != 0)
                .then(|| signals::disposition(c.main_pid, c.stop_signal))
                .flatten();
            self.systemd
                .kill_main(&unit, c.stop_signal)
                .await
                .with_context(ctx)?;
            failpoint::hit(failpoint::CTR_STOP_SIGNALLED);
            if let Some(d) = before.filter(|d| d.namespace_init) {
                ended = self
                    .resend_once_caught(&c, &unit, &waker, notified.as_mut(), limit, d.drops())
                    .await
                    .with_context(ctx)?;
            }
            if !ended {
                let rest = limit.saturating_duration_since(tokio::time::Instant::now());
                ended = self
                    .wait_for_exit(&unit, &waker, notified, rest)
                    .await
                    .with_context(ctx)?;
            }
        }
        if !ended {
            let notified = waker.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.systemd
                .kill_unit(&unit, libc::SIGKILL)
                .await
                .with_context(ctx)?;
            failpoint::hit(failpoint::CTR_STOP_SIGNALLED);
            if !self
                .wait_for_exit(&unit, &waker, notified, KILL_GRACE)
                .await
                .with_context(ctx)?
            {
                return Err(Error::timeout(format!(
                    "{}: its process is still there {} s after SIGKILL",
                    ctx(),
                    KILL_GRACE.as_secs()
                )));
            }
        }
        self.observe_exit(entry).await.with_context(ctx)?;
        failpoint::hit(failpoint::CTR_STOP_DONE);
        info!(
            event = podscope_sys::logging::event::CONTAINER_STOPPED,
            container_id = %c.id,
            sandbox_id = %c.pod_id,
            elapsed_us = t0.elapsed().as_micros() as u64,
            "container {} ({}) stopped in {} µs",
            c.id,
            c.config.name,
            t0.elapsed().as_micros()
        );
        Ok(())
    }

    /// A stop signal sent to a namespace's init: wait for it to end, and
    /// if it is seen without a handler (`dropped`: the signal was lost or
    /// will be), send the signal again, once, when it has one. True when
    /// it ended; false at `limit`, or once the signal went again (the
    /// caller waits for the rest). Until it is seen without a handler it
    /// is looked at as often as the plain wait looks at the unit.
    async fn resend_once_caught<'w>(
        &self,
        c: &Container,
        unit: &str,
        waker: &'w Notify,
        mut notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'w>>,
        limit: tokio::time::Instant,
        mut dropped: bool,
    ) -> Result<bool> {
        while tokio::time::Instant::now() < limit {
            let step = limit
                .saturating_duration_since(tokio::time::Instant::now())
                .min(if dropped { RESEND_CHECK } else { RECHECK });
            if self
                .wait_for_exit(unit, waker, notified.as_mut(), step)
                .await?
            {
                return Ok(true);
            }
            match signals::disposition(c.main_pid, c.stop_signal) {
                Some(d) if d.caught && dropped => {
                    debug!(
                        container_id = %c.id,
                        "container {} ({}): signal {} sent again, now that its process handles it",
                        c.id,
                        c.config.name,
                        c.stop_signal
                    );
                    self.systemd.kill_main(unit, c.stop_signal).await?;
                    return Ok(false);
                }
                // Gone, or no longer an init that drops it.
                None => return Ok(false),
                Some(d) if !d.namespace_init => return Ok(false),
                Some(d) => dropped |= !d.caught,
            }
        }
        Ok(false)
    }

    /// Wait until the unit's main process has ended, at most `limit`:
    /// woken by the unit's events, looking again every RECHECK anyway.
    async fn wait_for_exit<'w>(
        &self,
        unit: &str,
        waker: &'w Notify,
        mut notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'w>>,
        limit: Duration,
    ) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match self.systemd.service_status(unit).await? {
                None => return Ok(true),
                Some(s) if s.main_exited() => return Ok(true),
                Some(_) => {}
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            let _ = tokio::time::timeout((deadline - now).min(RECHECK), notified.as_mut()).await;
            notified.set(waker.notified());
            notified.as_mut().enable();
        }
    }

    /// A unit that must go now, whatever runs in it (a start that failed:
    /// a runtime that hangs in `create` would hang in its `delete` too, the
    /// unit's `ExecStopPost=`): SIGKILL to all of it, again for each
    /// process that follows, until systemd has it inactive, then its
    /// failure forgotten. At most the stop timeout.
    pub(super) async fn force_stop(&self, unit: &str) -> Result<()> {
        let deadline = tokio::time::Instant::now() + self.settings.stop_timeout();
        loop {
            let st = self.systemd.service_status(unit).await?;
            match &st {
                None => return Ok(()),
                Some(s) if s.active_state == "inactive" || s.active_state == "failed" => {
                    return self.systemd.reset_failed(unit).await;
                }
                // Nothing runs (an exit kept by RemainAfterExit=): a plain stop.
                Some(s) if s.active_state == "active" && s.main_exited() => {
                    self.systemd
                        .stop_unit(unit, self.settings.stop_timeout())
                        .await?;
                }
                Some(_) => self.systemd.kill_unit(unit, libc::SIGKILL).await?,
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::timeout(format!(
                    "{unit} is still {} {} ms after SIGKILL",
                    st.map(|s| s.sub_state).unwrap_or_default(),
                    self.settings.stop_timeout_ms
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
