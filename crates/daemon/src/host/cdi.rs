//! The node's CDI spec directories as the daemon keeps them: one
//! `podscope_cdi::SpecCache`, looked at again by every CreateContainer
//! that asks for a device and by every RuntimeStatus (a stat per file when
//! nothing changed), and what changed logged by file name. Everything is
//! read beneath `/proc/1/root`: the daemon's own mount namespace has a
//! private /tmp and no /home, and the runtime that makes the container
//! sees PID 1's.

use podscope_api::domain::cdi::DeviceName;
use podscope_api::error::{Error, Result};
use podscope_cdi::{Change, Limits, RealHost, Report, Resolved, SpecCache};
use podscope_config::Settings;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tracing::{info, warn};

/// PID 1's view of the file system.
const HOST_ROOT: &str = "/proc/1/root";

#[derive(Clone)]
pub struct CdiSpecs {
    cache: Arc<Mutex<SpecCache>>,
    host: Arc<RealHost>,
}

impl CdiSpecs {
    pub fn new(settings: &Settings) -> CdiSpecs {
        CdiSpecs {
            cache: Arc::new(Mutex::new(SpecCache::new(
                settings.cdi_spec_dirs.clone(),
                HOST_ROOT.into(),
                Limits::default(),
            ))),
            host: Arc::new(RealHost {
                root: PathBuf::from(HOST_ROOT),
            }),
        }
    }

    /// The devices `names`, their edits checked against the host, from
    /// the spec files as they are now. An InvalidArgument names the
    /// device that could not be given and why.
    pub async fn resolve(&self, names: Vec<DeviceName>) -> Result<Resolved> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut cache = this.cache.lock().unwrap_or_else(|p| p.into_inner());
            log(cache.refresh());
            cache
                .resolve(&names, this.host.as_ref())
                .map_err(|e| Error::invalid("cdi_devices", e.to_string()))
        })
        .await
        .map_err(|e| Error::internal(format!("CDI resolution: {e}")))?
    }

    /// What the directories hold now.
    pub async fn report(&self) -> Report {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut cache = this.cache.lock().unwrap_or_else(|p| p.into_inner());
            log(cache.refresh());
            cache.report()
        })
        .await
        .unwrap_or_default()
    }
}

fn log(changes: Vec<Change>) {
    for c in changes {
        match c {
            Change::Read {
                file,
                kind,
                devices,
            } => info!(
                cdi_spec = %file.display(),
                "CDI spec {}: kind {kind}, {devices} devices",
                file.display()
            ),
            Change::Removed { file } => info!(
                cdi_spec = %file.display(),
                "CDI spec {}: removed",
                file.display()
            ),
            Change::Refused { file, why } => warn!(
                cdi_spec = %file.display(),
                "CDI spec {}: {why}; its devices are refused",
                file.display()
            ),
            Change::Listing { path, why } => warn!(
                cdi_spec = %path.display(),
                "CDI spec directory: {}: {why}",
                path.display()
            ),
        }
    }
}
