//! ReopenContainerLog: after kubelet rotated the log file (renamed it), a
//! new one at the container's log path takes the next records. A container
//! that is not running has no writer: answered at once (cri-o #6297 hung
//! there).

use super::*;

impl<S: SystemdClient + Clone> Containers<S> {
    pub async fn reopen_log(&self, entry: &Arc<ContainerEntry>) -> Result<()> {
        if entry.is_removed() {
            return Err(Error::not_found(format!(
                "no container with id {}",
                entry.id
            )));
        }
        let (path, running) =
            entry.with(|c| (c.log_path.clone(), c.state == ContainerState::Running));
        if !running || path.is_empty() {
            return Ok(());
        }
        let Some(log) = self
            .live
            .lock()
            .unwrap()
            .get(&entry.id)
            .map(|l| l.log.clone())
        else {
            return Ok(());
        };
        let fd = self
            .hostns
            .open_log(&self.settings.log_root, Path::new(&path))
            .await
            .map_err(|e| e.context(format!("container {}: reopen its log", entry.id)))?;
        log.reopen(std::fs::File::from(fd));
        debug!(container_id = %entry.id, "container {}: log reopened at {path}", entry.id);
        Ok(())
    }
}
