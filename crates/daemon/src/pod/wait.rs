//! Wait: block until a sandbox leaves Ready.

use super::*;

impl<S: SystemdClient> Pods<S> {
    /// Block until the sandbox is no longer ready (or never will be: a
    /// created one waits for its Start and then its end). Answers at once
    /// for a stopped sandbox; NotFound if it is removed before it stopped.
    pub async fn wait(&self, id: &str) -> Result<Exit> {
        let entry = self.resolve(id)?;
        let mut changes = entry.changes();
        loop {
            if let Some(exit) = entry.with(Exit::of) {
                return Ok(exit);
            }
            if entry.is_removed() || changes.changed().await.is_err() {
                return Err(Error::not_found(format!(
                    "sandbox {} was removed while waited for",
                    entry.id
                )));
            }
        }
    }
}
