//! UpdateContainerResources: new limits as unit properties
//! (SetUnitProperties), so `systemctl show` tells the truth, hugepage
//! limits in the cgroup (`hugetlb`), and recorded.

use super::*;
use podscope_api::domain::container::ContainerResources;

impl<S: SystemdClient + Clone> Containers<S> {
    /// A memory limit below what the container uses now is refused by
    /// name, the container left as it was: the kernel would reclaim what
    /// it can and OOM-kill the container for the rest (kubelet itself
    /// defers such a resize, as the CRI's in-place resize asks).
    fn check_memory_not_below_usage(
        &self,
        c: &podscope_api::domain::Container,
        resources: &ContainerResources,
    ) -> Result<()> {
        let limit = resources.memory_limit_in_bytes;
        if limit == 0 {
            return Ok(());
        }
        let Some(dir) = oom::memory_dir(self.oom_layout, &c.cgroup_path()) else {
            return Ok(());
        };
        // The working set, as kubelet counts it: usage less the inactive
        // page cache, which the kernel gives back without a kill.
        let (file, inactive) = match self.oom_layout {
            oom::Layout::V1 => ("memory.usage_in_bytes", "total_inactive_file"),
            _ => ("memory.current", "inactive_file"),
        };
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let usage = read(file).and_then(|s| s.trim().parse::<u64>().ok());
        let cache = read("memory.stat")
            .and_then(|s| {
                s.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == inactive).then(|| v.trim().parse::<u64>().ok())?
                })
            })
            .unwrap_or(0);
        match usage.map(|u| u.saturating_sub(cache)) {
            Some(used) if used > limit => Err(Error::invalid(
                "resources.memory_limit_in_bytes",
                format!(
                    "{limit} is below the working set of container {} ({used} bytes): the kernel would OOM-kill it",
                    c.id
                ),
            )),
            _ => Ok(()),
        }
    }

    pub async fn update_resources(
        &self,
        entry: &Arc<ContainerEntry>,
        resources: ContainerResources,
    ) -> Result<()> {
        resources.validate("resources")?;
        let unified = unified::plan(&resources.unified)?;
        unified::check_keys(
            &resources.unified,
            std::path::Path::new(unified::CGROUP_V2_ROOT),
        )?;
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!(
                "no container with id {}",
                entry.id
            )));
        }
        let c = entry.snapshot();
        if matches!(c.state, ContainerState::Exited | ContainerState::Unknown) {
            return Err(Error::invalid_state(format!(
                "container {} has exited; its resources cannot change",
                c.id
            )));
        }
        if c.state == ContainerState::Running {
            self.check_memory_not_below_usage(&c, &resources)?;
            // Every limit, those no longer wanted reset to none.
            let mut props: Vec<(&'static str, Prop)> =
                podscope_api::domain::resources::scope_property_updates(
                    &resources.as_pod_resources(),
                    &Default::default(),
                )
                .into_iter()
                .filter(|(k, _)| *k != "TasksMax")
                .map(|(k, v)| (k, Prop::U64(v)))
                .collect();
            let have: Vec<&'static str> = props.iter().map(|(k, _)| *k).collect();
            props.extend(
                start::limit_properties(&resources)
                    .into_iter()
                    .filter(|(k, _)| !have.contains(k)),
            );
            // unified's properties over the rest; those it set before and
            // no longer does, reset.
            let mut props = unified::merged(props, &unified);
            let before = unified::plan(&c.resources.unified).unwrap_or_default();
            let resets: Vec<_> = unified::resets(&before, &unified)
                .into_iter()
                .filter(|(k, _)| !props.iter().any(|(p, _)| p == k))
                .collect();
            props.extend(resets);
            let unit = c.unit();
            self.systemd
                .set_properties(&unit, props)
                .await
                .with_context(|| format!("container {}: update resources of {unit}", c.id))?;
            unified::write_files(&self.hostns, &c.cgroup_path(), &unified)
                .await
                .map_err(|e| e.context(format!("container {}: update resources", c.id)))?;
            let hugepages =
                hugetlb::update(&c.resources.hugepage_limits, &resources.hugepage_limits);
            if !hugepages.is_empty() {
                hugetlb::apply(
                    &self.hostns,
                    &self.hugetlb_layout,
                    &c.cgroup_path(),
                    &hugepages,
                    // Moved in, should the container have had no limit
                    // (and no hugetlb cgroup) before.
                    &hugetlb::unit_pids(&c.cgroup_path()),
                    &format!("container {}: update resources", c.id),
                )
                .await?;
            }
        }
        let mut next = c.clone();
        next.resources = resources;
        self.persist(entry, next)
            .with_context(|| format!("container {}: update resources: save checkpoint", c.id))?;
        info!(container_id = %c.id, "container {}: resources updated", c.id);
        self.emit(Event::ContainerChanged(c.id.clone(), c.state));
        Ok(())
    }
}
