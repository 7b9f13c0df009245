//! Images: pulls from OCI registries into a local store, for the D-Bus
//! `Images` interface and the CRI ImageService.
//!
//! `reference` (names as kubelet normalises them), `registries`
//! (registries.conf v2: mirrors, blocked, insecure), `auth` (CRI
//! credentials, auth.json files, challenges), `client` (the Distribution
//! API), `manifest` (indexes, manifests, configs, the platform choice),
//! `unpack` (a layer into an overlayfs lower directory, safely), `store`
//! (blobs, layers, records, GC) and `pull` (the steps of one pull).

pub mod auth;
pub mod client;
pub mod manifest;
pub mod pull;
pub mod registries;
pub mod store;
pub mod unpack;

use podscope_api::error::{Error, Result};
use podscope_api::reference::Digest;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
pub use store::{ImageRecord, ImageStore};

/// What a pull is configured with (podscope.toml's own keys, and where
/// the shared files are).
#[derive(Debug, Clone)]
pub struct ImageSettings {
    pub store_dir: PathBuf,
    pub registries_conf: PathBuf,
    pub registries_conf_d: PathBuf,
    pub auth_files: Vec<PathBuf>,
    pub max_concurrent_downloads: usize,
    pub timeouts: client::Timeouts,
    pub layer_limits: unpack::Limits,
}

impl From<&podscope_config::Settings> for ImageSettings {
    fn from(s: &podscope_config::Settings) -> Self {
        let mut i = ImageSettings::with_store(s.image_dir.clone());
        i.max_concurrent_downloads = s.max_concurrent_downloads as usize;
        i.layer_limits = s.into();
        i.timeouts = client::Timeouts {
            connect: Duration::from_millis(s.pull_connect_timeout_ms),
            stall: Duration::from_millis(s.pull_stall_timeout_ms),
        };
        i
    }
}

impl ImageSettings {
    pub fn with_store(store_dir: PathBuf) -> Self {
        ImageSettings {
            store_dir,
            registries_conf: registries::REGISTRIES_CONF.into(),
            registries_conf_d: registries::REGISTRIES_CONF_D.into(),
            auth_files: auth::default_files(),
            max_concurrent_downloads: 3,
            timeouts: client::Timeouts {
                connect: Duration::from_secs(30),
                stall: Duration::from_secs(60),
            },
            layer_limits: unpack::Limits::default(),
        }
    }
}

pub struct Images {
    pub store: ImageStore,
    client: client::RegistryClient,
    settings: ImageSettings,
    /// One lock per layer being fetched, by chain id.
    layer_locks: Mutex<HashMap<String, std::sync::Weak<tokio::sync::Mutex<()>>>>,
    /// Pulls hold it shared; garbage collection alone, so it never takes
    /// a layer a pull has fetched but not yet recorded.
    gc_lock: tokio::sync::RwLock<()>,
    /// Layers containers use, by container: kept by every collection.
    held: Mutex<HashMap<String, Vec<Digest>>>,
}

/// CRI's ImageFsInfo, for the store's filesystem.
#[derive(Debug, Clone)]
pub struct FsUsage {
    pub mountpoint: String,
    pub used_bytes: u64,
    pub inodes_used: u64,
}

impl Images {
    pub fn open(settings: ImageSettings) -> Result<Arc<Self>> {
        let store = ImageStore::open(&settings.store_dir)
            .map_err(|e| e.context(format!("image store {}", settings.store_dir.display())))?;
        Ok(Arc::new(Images {
            store,
            client: client::RegistryClient::new(&settings.timeouts)?,
            settings,
            layer_locks: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            gc_lock: tokio::sync::RwLock::new(()),
        }))
    }

    pub fn settings(&self) -> &ImageSettings {
        &self.settings
    }

    /// registries.conf as it is now: read at each pull, so an admin's
    /// edit needs no restart (as CRI-O and podman read it per pull).
    pub fn registries(&self) -> Result<registries::Registries> {
        registries::Registries::load(
            &self.settings.registries_conf,
            &self.settings.registries_conf_d,
        )
    }

    fn layer_lock(&self, chain: &Digest) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.layer_locks.lock().unwrap();
        locks.retain(|_, w| w.strong_count() > 0);
        if let Some(l) = locks.get(chain.hex()).and_then(|w| w.upgrade()) {
            return l;
        }
        let l = Arc::new(tokio::sync::Mutex::new(()));
        locks.insert(chain.hex().to_owned(), Arc::downgrade(&l));
        l
    }

    /// The image a caller names (id, prefix, tag or digest).
    pub fn status(&self, name: &str) -> Result<ImageRecord> {
        self.store
            .lookup(name)?
            .ok_or_else(|| Error::not_found(format!("image {name:?} is not in the store")))
    }

    /// How the image says to run it, from its config blob.
    pub fn run_config(&self, rec: &ImageRecord) -> Result<manifest::RunConfig> {
        let body = self.store.read_blob(&rec.id).ok_or_else(|| {
            Error::internal(format!(
                "image {}: its config blob is missing from the store",
                rec.id
            ))
        })?;
        Ok(manifest::parse_config(&body)
            .map_err(|e| e.context(format!("image {}", rec.id)))?
            .config
            .unwrap_or_default())
    }

    /// Remove the image a caller names; its layers go in the garbage
    /// collection that follows, unless another image (or, later, a
    /// container) uses them.
    pub async fn remove(self: &Arc<Self>, name: &str) -> Result<ImageRecord> {
        let rec = self.status(name)?;
        self.store.remove(&rec.id)?;
        podscope_sys::failpoint::hit(podscope_sys::failpoint::IMAGE_RECORD_DELETED);
        tracing::info!(
            EVENT = podscope_sys::logging::event::IMAGE_REMOVED,
            IMAGE_ID = %rec.id,
            "removed image {} ({})",
            rec.id,
            rec.repo_tags.join(", ")
        );
        let this = Arc::clone(self);
        tokio::spawn(async move { this.collect_garbage().await });
        Ok(rec)
    }

    /// Keep `layers` (chain ids) while `holder` (a container) uses them,
    /// whatever happens to the images that brought them.
    pub fn hold_layers(&self, holder: &str, layers: Vec<Digest>) {
        self.held.lock().unwrap().insert(holder.to_owned(), layers);
    }

    /// `holder` is gone: its layers go in the next collection unless an
    /// image or another container still uses them.
    pub fn release_layers(&self, holder: &str) -> bool {
        self.held.lock().unwrap().remove(holder).is_some()
    }

    /// Delete what no image or container uses, after the pulls in flight.
    pub async fn collect_garbage(self: &Arc<Self>) {
        let _alone = self.gc_lock.write().await;
        let this = Arc::clone(self);
        let keep: HashSet<Digest> = self
            .held
            .lock()
            .unwrap()
            .values()
            .flatten()
            .cloned()
            .collect();
        let r = tokio::task::spawn_blocking(move || this.store.collect_garbage(&keep)).await;
        match r {
            Ok(Ok(c)) if c.layers + c.blobs > 0 => {
                tracing::info!(
                    "image store: removed {} unused layers and {} blobs",
                    c.layers,
                    c.blobs
                )
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("image store: garbage collection: {e}"),
            Err(e) => tracing::warn!("image store: garbage collection task: {e}"),
        }
    }

    pub async fn fs_usage(&self) -> Result<FsUsage> {
        let root = self.settings.store_dir.clone();
        let r = root.clone();
        let (used_bytes, inodes_used) =
            tokio::task::spawn_blocking(move || podscope_sys::usage::usage_of(&r))
                .await
                .map_err(|e| Error::internal(format!("usage task: {e}")))?
                .map_err(|e| Error::io(format!("usage of {}", root.display()), e))?;
        Ok(FsUsage {
            mountpoint: root.display().to_string(),
            used_bytes,
            inodes_used,
        })
    }
}
impl ImageRecord {
    /// The image as List, Status and Pull return it over the bus.
    pub fn summary(&self) -> podscope_api::image::ImageSummary {
        let (uid, username) = manifest::user_of(&self.user);
        podscope_api::image::ImageSummary {
            id: self.id.to_string(),
            repo_tags: self.repo_tags.clone(),
            repo_digests: self.repo_digests.clone(),
            size: self.size,
            user: self.user.clone(),
            uid: uid.unwrap_or(-1),
            username,
            pinned: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// podscope.toml's image keys reach the store's settings.
    #[test]
    fn the_config_files_image_keys_reach_the_store() {
        let s = podscope_config::Settings::parse(
            "pull_stall_timeout_ms = 2000\nimage_dir = \"/srv/img\"",
        )
        .unwrap();
        let i = ImageSettings::from(&s);
        assert_eq!(i.timeouts.stall, Duration::from_secs(2));
        assert_eq!(i.store_dir, std::path::Path::new("/srv/img"));
        let defaults = ImageSettings::from(&podscope_config::Settings::default());
        assert_eq!(defaults.max_concurrent_downloads, 3);
        assert_eq!(
            defaults.registries_conf,
            std::path::Path::new("/etc/containers/registries.conf")
        );
    }
}
