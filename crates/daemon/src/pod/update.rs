//! UpdateResources: new pod-level limits, live on a ready scope.

use super::*;

impl<S: SystemdClient> Pods<S> {
    /// New pod-level resources: applied to a ready pod's scope at once
    /// (SetUnitProperties), kept for Start in a created one, and recorded.
    pub async fn update_resources(
        &self,
        entry: &Arc<Entry>,
        resources: Resources,
    ) -> Result<Arc<Entry>> {
        resources.validate("resources")?;
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {}", entry.id)));
        }
        let sb = entry.snapshot();
        if sb.state == State::NotReady {
            return Err(Error::invalid_state(format!(
                "sandbox {} is stopped; its resources cannot change",
                sb.id
            )));
        }
        if sb.state == State::Ready {
            let unit = sb.unit();
            let props = podscope_api::domain::resources::scope_property_updates(
                &resources,
                &sb.config.overhead,
            )
            .into_iter()
            .map(|(k, v)| (k, Prop::U64(v)))
            .collect();
            self.systemd
                .set_properties(&unit, props)
                .await
                .with_context(|| format!("sandbox {}: update resources of {unit}", sb.id))?;
        }
        let mut next = sb.clone();
        next.config.resources = resources;
        self.persist(entry, next)
            .with_context(|| format!("sandbox {}: update resources: save checkpoint", sb.id))?;
        info!(sandbox_id = %sb.id, "sandbox {}: resources updated", sb.id);
        self.emit(Event::Changed(sb.id.clone()));
        Ok(entry.clone())
    }
}
