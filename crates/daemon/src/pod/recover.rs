//! Recovery at daemon start: checkpoints against the units systemd has.

use super::*;

/// What recovery does to one recorded sandbox, from its recorded state and
/// what systemd says of its units. Pure, so the whole matrix is tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryPlan {
    /// Ready, but its scope ended while the daemon was away.
    pub mark_not_ready: bool,
    /// Created or NotReady with a running scope: a Start or Stop was cut
    /// short and its caller got no answer; finish it the safe way.
    pub stop_scope: bool,
    /// A sandbox that is not ready holds no network namespace, unless a
    /// CNI DEL is owed: DEL runs in the namespace (host-device and SR-IOV
    /// plugins move devices back out of it), so the namespace stays until
    /// the reconciliation's DEL is done, which then stops the unit.
    pub stop_netns: bool,
}

pub fn recovery_plan(
    state: State,
    scope_active: bool,
    netns_active: bool,
    owes_del: bool,
) -> RecoveryPlan {
    let mark_not_ready = state == State::Ready && !scope_active;
    let ends_not_ready = state == State::NotReady || mark_not_ready;
    RecoveryPlan {
        mark_not_ready,
        stop_scope: state != State::Ready && scope_active,
        stop_netns: ends_not_ready && netns_active && !owes_del,
    }
}

impl<S: SystemdClient> Pods<S> {
    /// Load checkpoints and reconcile them with systemd. Called once, before
    /// the bus name is taken.
    pub async fn recover(&self) -> Result<RecoveryReport> {
        let t0 = Instant::now();
        let recovered = self.store.recover()?;
        // A record in quarantine/ (this start's or an earlier one's, or one
        // this start could not move there) is damaged, not gone: its units
        // are left running and its network attachment is held, not paid
        // (the DEL would stop the netns unit, and the scope bound to it),
        // until an operator removes it.
        let mut held = self.store.quarantined_names();
        held.extend(recovered.quarantined.iter().map(|q| q.dir.clone()));
        *self.recovered_attachments.lock().unwrap() = self
            .attachments
            .ids()?
            .into_iter()
            .filter(|id| !held.contains(id.as_str()))
            .collect();
        for q in &recovered.quarantined {
            tracing::error!(sandbox_dir = %q.dir, moved_to = %q.moved_to.display(), reason = %q.reason,
                            "corrupt checkpoint of {} quarantined to {}: {}", q.dir, q.moved_to.display(), q.reason);
        }
        let units = self.systemd.list_units("podscope-*.scope").await?;
        let netns_units = self.systemd.list_units("podscope-netns@*.service").await?;
        let mut report = RecoveryReport {
            recovered: recovered.records.len(),
            quarantined: recovered.quarantined.clone(),
            incomplete: recovered.incomplete.len(),
            ..Default::default()
        };
        let mut known = std::collections::HashSet::new();
        let mut known_netns = std::collections::HashSet::new();
        let mut known_slices = std::collections::HashSet::new();
        let mut known_ids = std::collections::HashSet::new();
        for mut sb in recovered.records {
            let unit = sb.unit();
            known.insert(unit.clone());
            known_slices.insert(sb.slice.clone());
            known_ids.insert(sb.id.to_string());
            let netns = sb.netns_unit();
            let active = |units: &HashMap<String, String>, u: &str| {
                units.get(u).is_some_and(|s| is_active(s))
            };
            let owes_del = self.attachments.exists(&sb.id);
            let plan = recovery_plan(
                sb.state,
                active(&units, &unit),
                active(&netns_units, &netns),
                owes_del,
            );
            let mut changed = false;
            if plan.mark_not_ready {
                sb.mark_not_ready("scope ended while podscoped was not running", now_usec());
                info!(sandbox_id = %sb.id, unit = %unit, "sandbox {}: scope ended while podscoped was down; not ready", sb.id);
                changed = true;
            }
            if sb.network.attached && !owes_del {
                // The attachment is written before ADD and removed only
                // after a DEL: without it, a DEL finished just before the
                // daemon died and the record had not caught up.
                info!(sandbox_id = %sb.id, "sandbox {}: its network was detached before podscoped stopped; recorded now", sb.id);
                sb.network_detached();
                changed = true;
            }
            // Not fatal: the next start decides the same from the old
            // record, and the other pods must be served meanwhile.
            if changed {
                if let Err(e) = self.store.save(&sb) {
                    tracing::error!(sandbox_id = %sb.id, "sandbox {}: recording what recovery found: {e}", sb.id);
                }
            }
            if plan.stop_scope {
                warn!(sandbox_id = %sb.id, unit = %unit, state = %sb.state,
                      "sandbox {}: scope {unit} running but sandbox is {}: stopping the scope", sb.id, sb.state);
                self.recovery_stop(&sb.id, &unit).await;
            }
            if plan.stop_netns {
                warn!(sandbox_id = %sb.id, unit = %netns, "sandbox {} is not ready: stopping {netns}", sb.id);
                self.recovery_stop(&sb.id, &netns).await;
            }
            known_netns.insert(netns);
            self.registry.insert(Entry::new(sb));
        }
        let mut orphans = self
            .stop_orphans(&units, &known, &held, id_from_scope_unit)
            .await;
        orphans.extend(
            self.stop_orphans(&netns_units, &known_netns, &held, id_from_netns_unit)
                .await,
        );
        // What else a pod whose record is gone leaves (one quarantined
        // before, since removed from quarantine/ by an operator): its own
        // slice, and its files under run_dir. A held pod keeps both.
        let default_slice = &self.settings.default_slice;
        let slices = self
            .systemd
            .list_units(&slice::pod_slices_pattern(default_slice))
            .await?;
        orphans.extend(
            self.stop_orphans(&slices, &known_slices, &held, |unit| {
                SandboxId::parse(slice::id_of_pod_slice(default_slice, unit)?).ok()
            })
            .await,
        );
        let gone = |id: &str| !known_ids.contains(id) && !held.contains(id);
        let files = std::fs::read_dir(self.settings.run_dir.join("sandboxes"));
        for name in files.into_iter().flatten().flatten() {
            let Some(id) = name
                .file_name()
                .to_str()
                .and_then(|s| SandboxId::parse(s).ok())
            else {
                continue;
            };
            if gone(id.as_str()) {
                warn!(sandbox_id = %id, "sandbox {id}: its files have no record: removing them");
                if let Err(e) = files::remove(&self.settings.run_dir, &id) {
                    warn!(sandbox_id = %id, "sandbox {id}: {e}");
                }
            }
        }
        report.orphans_stopped = orphans;
        report.duration_usec = t0.elapsed().as_micros() as u64;
        info!(
            event = podscope_sys::logging::event::RECOVERED,
            recovered = report.recovered,
            quarantined = report.quarantined.len(),
            incomplete = report.incomplete,
            orphans = report.orphans_stopped.len(),
            elapsed_us = report.duration_usec,
            "recovered {} sandboxes in {} µs ({} quarantined, {} orphan scopes stopped)",
            report.recovered,
            report.duration_usec,
            report.quarantined.len(),
            report.orphans_stopped.len()
        );
        *self.recovery.lock().unwrap() = report.clone();
        Ok(report)
    }

    /// Stop the active units in `units` that belong to no known sandbox.
    /// A unit whose record is quarantined is damaged, not absent: it is left
    /// running for an operator to decide.
    async fn stop_orphans(
        &self,
        units: &std::collections::HashMap<String, String>,
        known: &std::collections::HashSet<String>,
        quarantined: &std::collections::HashSet<String>,
        id_of: impl Fn(&str) -> Option<SandboxId>,
    ) -> Vec<String> {
        let mut stopped = Vec::new();
        for (unit, state) in units {
            if known.contains(unit) || !is_active(state) {
                continue;
            }
            let Some(id) = id_of(unit) else { continue };
            if quarantined.contains(id.as_str()) {
                warn!(sandbox_id = %id, unit = %unit, "{unit} of quarantined sandbox {id} left running");
                continue;
            }
            // A namespace whose DEL is owed stays until the reconciliation
            // has run DEL in it.
            if unit.starts_with("podscope-netns@") && self.attachments.exists(&id) {
                continue;
            }
            warn!(sandbox_id = %id, unit = %unit, "{unit} has no sandbox record: stopping it");
            stopped.push((id, unit.clone()));
        }
        // All at once: each may take up to the stop timeout (and a SIGKILL
        // round), and the daemon is not READY until they are done.
        futures_util::future::join_all(
            stopped
                .iter()
                .map(|(id, unit)| self.recovery_stop(id, unit)),
        )
        .await;
        stopped.into_iter().map(|(_, unit)| unit).collect()
    }

    /// Stop a unit during recovery. A failure is logged, not fatal: the
    /// daemon must come up to manage the other sandboxes.
    async fn recovery_stop(&self, id: &SandboxId, unit: &str) {
        let r = if unit.ends_with(".scope") {
            self.stop_scope(id, unit).await
        } else {
            self.systemd
                .stop_unit(unit, self.settings.stop_timeout())
                .await
        };
        if let Err(e) = r {
            tracing::error!(sandbox_id = %id, unit = %unit, "sandbox {id}: stopping {unit} at recovery failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::*;

    #[test]
    fn recovery_plan_covers_every_state_and_unit_combination() {
        // (recorded state, scope active, netns active) ->
        // (mark not ready, stop scope, stop netns), with no DEL owed.
        let table = [
            ((Created, false, false), (false, false, false)),
            ((Created, false, true), (false, false, false)),
            ((Created, true, false), (false, true, false)),
            ((Created, true, true), (false, true, false)),
            ((Ready, true, true), (false, false, false)),
            ((Ready, true, false), (false, false, false)),
            ((Ready, false, true), (true, false, true)),
            ((Ready, false, false), (true, false, false)),
            ((NotReady, false, false), (false, false, false)),
            ((NotReady, false, true), (false, false, true)),
            ((NotReady, true, false), (false, true, false)),
            ((NotReady, true, true), (false, true, true)),
        ];
        for ((state, scope, netns), (mark, stop_scope, stop_netns)) in table {
            let want = RecoveryPlan {
                mark_not_ready: mark,
                stop_scope,
                stop_netns,
            };
            assert_eq!(
                recovery_plan(state, scope, netns, false),
                want,
                "{state} scope={scope} netns={netns}"
            );
            // With a DEL owed the namespace always stays; nothing else
            // changes.
            assert_eq!(
                recovery_plan(state, scope, netns, true),
                RecoveryPlan {
                    stop_netns: false,
                    ..want
                },
                "{state} scope={scope} netns={netns}, DEL owed"
            );
        }
    }
}
