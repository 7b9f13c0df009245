//! Keeping records true while the daemon runs: systemd's unit events and
//! machined restarts.

use super::*;

impl<S: SystemdClient> Pods<S> {
    /// After recovery: every Ready pod registered with machined again where
    /// machined lost it (it restarted, or was installed, while podscoped
    /// was down). Each pod under its lock; a pod that stopped meanwhile is
    /// left alone.
    pub async fn reconcile_machines(&self) {
        for entry in self.list(&ListFilter {
            state: Some(State::Ready),
            ..Default::default()
        }) {
            let _op = entry.op.lock().await;
            let sb = entry.snapshot();
            if entry.is_removed() || sb.state != State::Ready {
                continue;
            }
            if !sb.machine.is_empty() && self.machined.is_registered(&sb).await {
                continue;
            }
            if self.record_machine(&entry, &sb).await {
                info!(sandbox_id = %sb.id, machine = %entry.with(|s| s.machine.clone()),
                      "sandbox {}: registered with systemd-machined again", sb.id);
                self.emit(Event::Changed(sb.id.clone()));
            }
        }
    }

    /// A pod Start just made Ready, registered with machined (Start's own
    /// caller does not wait for it). Under the pod's lock: a pod stopped
    /// or removed in the meantime is left alone. No signal: the pod's
    /// state is the same, and its machine is in Status, not a property.
    pub(super) async fn register_machine(&self, entry: &Entry) {
        let _op = entry.op.lock().await;
        let sb = entry.snapshot();
        if entry.is_removed() || sb.state != State::Ready || !sb.machine.is_empty() {
            return;
        }
        let t0 = std::time::Instant::now();
        let recorded = self.record_machine(entry, &sb).await;
        failpoint::hit(failpoint::START_MACHINE_REGISTERED);
        if recorded {
            info!(event = podscope_sys::logging::event::MACHINE_REGISTERED, sandbox_id = %sb.id,
                  machine = %entry.with(|s| s.machine.clone()),
                  machine_us = t0.elapsed().as_micros() as u64,
                  "sandbox {}: registered with systemd-machined", sb.id);
        }
    }

    /// Register `sb` and record the name machined took with the pod's
    /// checkpoint, so Stop knows what to unregister even after a daemon
    /// restart; whether the name changed. The caller holds the pod's lock.
    async fn record_machine(&self, entry: &Entry, sb: &Sandbox) -> bool {
        let mut next = sb.clone();
        next.machine = self.machined.register(sb).await;
        if next.machine == sb.machine {
            return false;
        }
        if let Err(e) = self.persist(entry, next) {
            // machined forgets the machine with its scope all the same.
            warn!(sandbox_id = %sb.id, "sandbox {}: record its machine: {e}", sb.id);
            return false;
        }
        true
    }

    /// A `podscope-*` unit changed or went away: a Ready sandbox whose scope
    /// is no longer active becomes NotReady.
    pub async fn on_unit_event(&self, ev: UnitEvent) {
        let Some(id) = id_from_scope_unit(&ev.unit) else {
            return;
        };
        if matches!(&ev.active_state, Some(s) if is_active(s)) {
            return;
        }
        let Some(entry) = self.registry.get(&id) else {
            return;
        };
        // Lock before looking at the state: an event that arrives while Start
        // is still finishing must be judged after Start has recorded "ready".
        let _op = entry.op.lock().await;
        if entry.is_removed() || entry.with(|s| s.state) != State::Ready {
            return;
        }
        // Confirm with systemd: events can be stale by the time we run.
        let state = match self.systemd.active_state(&ev.unit).await {
            Ok(s) => s,
            Err(e) => {
                warn!(sandbox_id = %id, unit = %ev.unit, "sandbox {id}: cannot read state of {}: {e}", ev.unit);
                return;
            }
        };
        if state.as_deref().is_some_and(is_active) {
            return;
        }
        let reason = format!(
            "scope {} {} outside podscope",
            ev.unit,
            match state.as_deref() {
                None => "was stopped".to_owned(),
                Some(s) => format!("became {s}"),
            }
        );
        info!(sandbox_id = %id, unit = %ev.unit, "sandbox {id} is not ready: {reason}");
        if let Err(e) = self.stop_locked(&entry, &reason).await {
            warn!(sandbox_id = %id, unit = %ev.unit, "sandbox {id}: marking it not ready failed: {e}");
        }
    }
}
