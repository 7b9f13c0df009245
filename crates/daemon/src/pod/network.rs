//! The pod-network steps of the lifecycle: CNI ADD into the pod's
//! namespace, DEL from the cached attachment, and the reconciliation that
//! pays every DEL still owed after a crash.
//!
//! The attachment file is the single record of "a DEL is owed": it is
//! written before ADD and removed only after a DEL succeeded.

use super::{Event, Pods};
use crate::cni::{self, Attachment};
use crate::systemd::SystemdClient;
use podscope_api::domain::network::{capability_args, cni_args};
use podscope_api::domain::sandbox::{netns_unit_name, now_usec, PodNetwork};
use podscope_api::domain::{Sandbox, SandboxId, State};
use podscope_api::error::{Result, ResultExt};
use podscope_sys::failpoint;
use podscope_sys::logging::event;
use std::time::Instant;
use tracing::{error, info, warn};

impl<S: SystemdClient> Pods<S> {
    /// CNI ADD for `sb` (its namespace is up). On failure the ADD is undone
    /// with DEL before the error returns; a DEL that fails too leaves the
    /// attachment on disk for reconciliation. `netns`: where the plugins
    /// find the namespace when not at its pin (one the daemon holds); the
    /// attachment records the pin, for later DELs.
    pub(super) async fn attach_network(
        &self,
        sb: &Sandbox,
        netns: Option<String>,
    ) -> Result<PodNetwork> {
        let t0 = Instant::now();
        let ctx = || format!("sandbox {}: network setup", sb.id);
        // A previous ADD for this sandbox that never finished (daemon killed
        // mid-way): release what it took before taking more.
        if self.attachments.exists(&sb.id) {
            self.detach_network(&sb.id)
                .await
                .with_context(|| format!("{}: undo an earlier interrupted ADD", ctx()))?;
        }
        let list = self
            .cni
            .network()
            .map_err(|nr| nr.into_error().context(ctx()))?;
        let c = &sb.config;
        let cgroup_path = sb.cgroup_path();
        let mut att = Attachment {
            container_id: sb.id.to_string(),
            ifname: cni::POD_IFNAME.to_owned(),
            netns: sb.netns_path(),
            args: cni_args(&c.namespace, &c.name, sb.id.as_str(), &c.uid),
            capability_args: capability_args(
                &c.port_mappings,
                &c.dns,
                &c.annotations,
                &cgroup_path,
            )?,
            config: list.to_json(),
            result: None,
            last_error: String::new(),
        };
        let _no_gc = self.gc_lock.read().await;
        self.attachments.save(&att).with_context(ctx)?;
        failpoint::hit(failpoint::CREATE_ATTACHMENT_SAVED);
        let t_add = Instant::now();
        let mut run = att.clone();
        if let Some(path) = &netns {
            run.netns = path.clone();
        }
        let added = match self.cni.add(&run).await {
            Ok(a) => a,
            Err(e) => {
                // The spec's cleanup for a failed ADD: DEL the whole chain.
                if let Err(de) = self.detach_network_in(&sb.id, netns).await {
                    error!(sandbox_id = %sb.id, "sandbox {}: undoing the failed ADD failed too: {de}", sb.id);
                }
                return Err(e.context(ctx()));
            }
        };
        let add_time = t_add.elapsed();
        failpoint::hit(failpoint::CREATE_ADDED);
        let mut result = added.result;
        if let Some(path) = &netns {
            // Recorded as if ADD had run at the pin, where CHECK and DEL
            // will find the namespace.
            cni::result::move_sandbox(&mut result, path, &att.netns);
        }
        att.result = Some(result);
        if let Err(e) = self.attachments.save(&att) {
            let _ = self.detach_network(&sb.id).await;
            return Err(e.context(ctx()));
        }
        failpoint::hit(failpoint::CREATE_NETWORK_RECORDED);
        let result = att.result.as_ref().expect("just set");
        let net = PodNetwork {
            attached: true,
            name: list.name.clone(),
            ips: cni::result::pod_ips(result),
            error: String::new(),
        };
        let total = t0.elapsed();
        let plugin_time = added.plugin_times.total();
        info!(event = event::NETWORK_ATTACHED, sandbox_id = %sb.id, network = %list.name, ips = %net.ips.join(","),
              cni_us = add_time.as_micros() as u64,
              plugin_us = plugin_time.as_micros() as u64,
              plugins_us = %added.plugin_times,
              overhead_us = (total - plugin_time).as_micros() as u64,
              "sandbox {}: network {} attached ({}) in {} µs, {} µs in plugins",
              sb.id, list.name, net.ips.join(", "), total.as_micros(), plugin_time.as_micros());
        Ok(net)
    }

    /// CNI DEL from the cached attachment, then forget it. Nothing cached:
    /// nothing owed. On failure the error is written into the attachment
    /// (it stays for a retry).
    pub(super) async fn detach_network(&self, id: &SandboxId) -> Result<()> {
        self.detach_network_in(id, None).await
    }

    /// `detach_network`, with the plugins given `netns` (a held namespace's
    /// path) instead of the cached one.
    pub(super) async fn detach_network_in(
        &self,
        id: &SandboxId,
        netns: Option<String>,
    ) -> Result<()> {
        let Some(mut att) = self
            .attachments
            .load(id)
            .with_context(|| format!("sandbox {id}: network teardown"))?
        else {
            return Ok(());
        };
        let t0 = Instant::now();
        let mut run = att.clone();
        if let Some(path) = netns {
            run.netns = path;
        }
        match self.cni.del(&run).await {
            Ok(plugin_times) => {
                failpoint::hit(failpoint::STOP_DEL_RAN);
                self.attachments
                    .delete(id)
                    .with_context(|| format!("sandbox {id}: network teardown"))?;
                info!(event = event::NETWORK_DETACHED, sandbox_id = %id, cni_us = t0.elapsed().as_micros() as u64,
                      plugin_us = plugin_times.total().as_micros() as u64,
                      plugins_us = %plugin_times,
                      "sandbox {id}: network detached");
                Ok(())
            }
            Err(e) => {
                att.last_error = e.to_string();
                if let Err(se) = self.attachments.save(&att) {
                    warn!(sandbox_id = %id, "sandbox {id}: recording the teardown failure: {se}");
                }
                Err(e.context(format!("sandbox {id}: network teardown")))
            }
        }
    }

    /// Pay the DELs owed after a restart: attachments whose ADD never
    /// completed, of sandboxes that are not ready, or of sandboxes that no
    /// longer exist. Then GC (1.1.0 networks) with what is left as the valid
    /// attachments. Runs after the bus name is taken, each sandbox under its
    /// operation lock, so a slow or hanging plugin never delays startup.
    pub async fn reconcile_networks(&self) {
        // Only what recovery found: an attachment written since belongs to a
        // Create in flight, which must not be mistaken for a leftover.
        let ids = std::mem::take(&mut *self.recovered_attachments.lock().unwrap());
        let looked_at = ids.len();
        for id in ids {
            let entry = self.registry.get(&id);
            let _op = match &entry {
                Some(e) => Some(e.op.lock().await),
                None => None,
            };
            let att = match self.attachments.load(&id) {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) => {
                    error!(sandbox_id = %id, "network reconciliation: {e}");
                    continue;
                }
            };
            let live = entry
                .as_ref()
                .and_then(|e| (!e.is_removed()).then(|| e.with(|s| (s.state, s.network.attached))));
            let owed = match live {
                None => true,
                Some((state, attached)) => {
                    state == State::NotReady || !attached || att.result.is_none()
                }
            };
            if !owed {
                // A pod that stayed up while podscoped was away: CHECK that its
                // network is still what ADD made (0.4.0+ configs).
                if let Some(e) = &entry {
                    if e.with(|s| s.state) == State::Ready {
                        self.check_network(e, &att).await;
                    }
                }
                continue;
            }
            warn!(sandbox_id = %id, "sandbox {id}: network attachment without a live sandbox: running CNI DEL");
            match self.detach_network(&id).await {
                Ok(()) => {
                    failpoint::hit(failpoint::RECONCILE_DELETED);
                    // Recovery kept the namespace for this DEL; a sandbox
                    // that is not ready (or gone) has no use for it now.
                    let keep_netns = live.is_some_and(|(state, _)| state != State::NotReady);
                    if !keep_netns {
                        let unit = netns_unit_name(&id);
                        if let Err(e) = self
                            .systemd
                            .stop_unit(&unit, self.settings.stop_timeout())
                            .await
                        {
                            warn!(sandbox_id = %id, unit = %unit, "sandbox {id}: stopping {unit} after its DEL: {e}");
                        }
                    }
                    failpoint::hit(failpoint::RECONCILE_NETNS_STOPPED);
                    if let Some(e) = &entry {
                        let mut next = e.snapshot();
                        next.network = PodNetwork::default();
                        if next.state == State::NotReady && next.finished_at == 0 {
                            next.finished_at = now_usec();
                        }
                        match self.persist(e, next) {
                            Ok(()) => self.emit(Event::Changed(id.clone())),
                            Err(pe) => warn!(sandbox_id = %id, "sandbox {id}: {pe}"),
                        }
                    }
                }
                Err(e) => {
                    error!(sandbox_id = %id, "sandbox {id}: CNI DEL at reconciliation failed (kept for the next start): {e}")
                }
            }
        }
        self.gc().await;
        // Said even when there was nothing to do: an operator (and a test)
        // knows the owed DELs of this start have had their turn.
        info!("network reconciliation done ({looked_at} attachments looked at)");
    }

    /// CNI GC of the current network (1.1.0 configs): every attachment on
    /// disk is valid, including those of ADDs in flight (their file is
    /// written first, and ADDs wait while GC runs).
    /// GC's valid set: (container id, interface) of every attachment. One
    /// that cannot be read may still be a live pod's, so then there is no
    /// valid set and GC must not run (it would release that pod's address).
    pub(super) fn valid_attachments(&self) -> Result<Vec<(String, String)>> {
        let mut kept = Vec::new();
        for id in self.attachments.ids()? {
            match self.attachments.load(&id) {
                Ok(Some(a)) => kept.push((a.container_id, a.ifname)),
                Ok(None) => {}
                Err(e) => {
                    return Err(e.context(format!(
                        "attachment of sandbox {id} unreadable; its addresses must not be released"
                    )))
                }
            }
        }
        Ok(kept)
    }

    async fn gc(&self) {
        let _exclusive = self.gc_lock.write().await;
        let kept = match self.valid_attachments() {
            Ok(kept) => kept,
            Err(e) => {
                warn!("CNI GC skipped: {e}");
                return;
            }
        };
        match self.cni.network() {
            Ok(list) => match self.cni.gc(&list, &kept).await {
                Ok(true) => {
                    info!(network = %list.name, valid = kept.len(), "CNI GC of network {} done ({} attachments kept)", list.name, kept.len())
                }
                Ok(false) => {}
                Err(e) => warn!(network = %list.name, "CNI GC: {e}"),
            },
            Err(nr) => info!(
                "no CNI GC: network not ready ({}): {}",
                nr.reason, nr.message
            ),
        }
    }

    /// CNI CHECK of a ready pod; a failure is recorded in the sandbox's
    /// network error (shown by Status) and logged, and nothing is torn down:
    /// deciding to replace the pod is kubelet's call.
    async fn check_network(&self, entry: &crate::state::index::Entry, att: &Attachment) {
        let id = &entry.id;
        let error = match self.cni.check(att).await {
            Ok(true) => {
                info!(sandbox_id = %id, "sandbox {id}: CNI CHECK passed");
                String::new()
            }
            Ok(false) => return,
            Err(e) => {
                warn!(sandbox_id = %id, "sandbox {id}: CNI CHECK failed: {e}");
                format!("CHECK after restart: {e}")
            }
        };
        let mut next = entry.snapshot();
        if next.network.error != error {
            next.network.error = error;
            match self.persist(entry, next) {
                Ok(()) => self.emit(Event::Changed(id.clone())),
                Err(e) => warn!(sandbox_id = %id, "sandbox {id}: {e}"),
            }
        }
    }

    /// How many attachments still owe a DEL (for the runtime status).
    pub fn attachments_owed(&self) -> usize {
        self.attachments
            .ids()
            .map(|ids| {
                ids.iter()
                    .filter(|id| {
                        self.registry
                            .get(id)
                            .is_none_or(|e| e.with(|s| s.state == State::NotReady))
                    })
                    .count()
            })
            .unwrap_or(0)
    }
}
