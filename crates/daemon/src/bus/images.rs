//! `/org/podscope/Sandbox1`, interface `org.podscope.Sandbox1.Images`: the
//! image store. Pull and Remove are authorized like the pod verbs
//! (`org.podscope.Sandbox1.manage`, with `verb` and `image` as polkit
//! details); reading is open.

use super::errors::BusError;
use super::polkit::{self, Detail, Verb};
use super::Service;
use crate::image::auth::Credentials;
use crate::image::pull::{now_ns, Progress};
use crate::image::ImageRecord;
use podscope_api::image::{ImageFilter, ImageFsInfo, ImageInfo, ImageSummary, PullOptions};
use podscope_api::{dict::owned_arg, from_dict, DictArg};
use podscope_sys::descriptors::cost;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;

pub struct ImagesObject {
    pub service: Arc<Service>,
}

/// How often a pull in progress says so on the bus.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

fn details(verb: Verb, image: &str) -> Vec<(Detail, String)> {
    vec![
        (Detail::Verb, verb.as_str().to_owned()),
        (Detail::Image, image.to_owned()),
    ]
}

#[interface(name = "org.podscope.Sandbox1.Images")]
impl ImagesObject {
    /// Pull an image (a tag, or a digest) into the store; its summary.
    #[zbus(out_args("image"))]
    async fn pull(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        reference: &str,
        options: DictArg<'_>,
    ) -> Result<ImageSummary, BusError> {
        let options: PullOptions = from_dict(Some("options"), &options)?;
        let reference = owned_arg("reference", reference)?;
        let creds = Credentials::try_from(&options)?;
        // A reference that cannot be pulled is refused before polkit.
        podscope_api::reference::Reference::parse(&reference)?;
        let svc = &self.service;
        svc.auth
            .check(&hdr, polkit::ACTION_MANAGE, Verb::Pull, || {
                details(Verb::Pull, &reference)
            })
            .await?;
        let fds = svc.fds.reserve(&format!("pull {reference}"), cost::PULL)?;
        let images = Arc::clone(&svc.images);
        let progress = Arc::new(Progress::default());
        let emitter = emitter.to_owned();
        let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<()>();
        let watched = Arc::clone(&progress);
        let name = reference.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PROGRESS_EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = &mut done_rx => break,
                    _ = tick.tick() => {
                        let _ = ImagesObject::pull_progress(
                            &emitter,
                            &name,
                            watched.bytes_done.load(Ordering::Relaxed),
                            watched.bytes_total.load(Ordering::Relaxed),
                            watched.layers_done.load(Ordering::Relaxed),
                            watched.layers_total.load(Ordering::Relaxed),
                        ).await;
                    }
                }
            }
        });
        let r = svc
            .detached(async move {
                let _fds = fds;
                images
                    .pull(&reference, Some(creds).filter(|c| !c.is_empty()), progress)
                    .await
            })
            .await;
        let _ = done_tx.send(());
        Ok(r?.record.summary())
    }

    #[zbus(out_args("images"))]
    async fn list(&self, filter: DictArg<'_>) -> Result<Vec<ImageSummary>, BusError> {
        let f: ImageFilter = from_dict(Some("filter"), &filter)?;
        let images = &self.service.images;
        Ok(match f.image {
            Some(name) => images
                .store
                .lookup(&name)?
                .iter()
                .map(ImageRecord::summary)
                .collect(),
            None => images
                .store
                .list()
                .iter()
                .map(ImageRecord::summary)
                .collect(),
        })
    }

    /// An image by id (or a unique prefix), tag or digest: its summary and
    /// what it is made of. NotFound when the store has no such image.
    /// The config document goes to root's callers only: reading is open
    /// to every local user, and a private image's environment and build
    /// history (its ENV lines) may hold secrets.
    #[zbus(out_args("image", "info"))]
    async fn status(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        image: &str,
    ) -> Result<(ImageSummary, ImageInfo), BusError> {
        let images = &self.service.images;
        let r = images.status(&owned_arg("image", image)?)?;
        let config = if self.service.auth.caller_uid(&hdr).await? == 0 {
            images
                .store
                .read_blob(&r.id)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        };
        let info = ImageInfo {
            manifest: r.manifest.to_string(),
            index: r.index.as_ref().map(|d| d.to_string()).unwrap_or_default(),
            platform: r.platform.clone(),
            layers: r.layers.iter().map(|l| l.chain_id.to_string()).collect(),
            layer_dirs: r
                .layers
                .iter()
                .map(|l| images.store.layer_root(&l.chain_id).display().to_string())
                .collect(),
            config,
            pulled_at: r.pulled_at,
        };
        Ok((r.summary(), info))
    }

    /// Remove an image by id, tag or digest. Its layers go unless another
    /// image uses them.
    async fn remove(&self, #[zbus(header)] hdr: Header<'_>, image: &str) -> Result<(), BusError> {
        let svc = &self.service;
        let name = owned_arg("image", image)?;
        // Unknown names fail before polkit: reading is open anyway.
        let rec = svc.images.status(&name)?;
        svc.auth
            .check(&hdr, polkit::ACTION_MANAGE, Verb::RemoveImage, || {
                details(Verb::RemoveImage, &rec.id.to_string())
            })
            .await?;
        let images = Arc::clone(&svc.images);
        let id = rec.id.to_string();
        svc.detached(async move { images.remove(&id).await.map(|_| ()) })
            .await?;
        Ok(())
    }

    #[zbus(out_args("info"))]
    async fn fs_info(&self) -> Result<ImageFsInfo, BusError> {
        let images = &self.service.images;
        let u = images.fs_usage().await?;
        let (dir, bytes, inodes) = self.service.containers.writable_usage().await;
        // kubelet compares the two mountpoints as strings: different ones
        // are a split disk to it (its eviction then refuses to run without
        // KubeletSeparateDiskGC). So the images' own, as containerd
        // answers, unless the containers are on another filesystem.
        let same_fs = |a: &str, b: &std::path::Path| {
            use std::os::unix::fs::MetadataExt;
            match (std::fs::metadata(a), std::fs::metadata(b)) {
                (Ok(x), Ok(y)) => x.dev() == y.dev(),
                _ => true,
            }
        };
        let containers_mountpoint = if same_fs(&u.mountpoint, &dir) {
            u.mountpoint.clone()
        } else {
            dir.display().to_string()
        };
        Ok(ImageFsInfo {
            mountpoint: u.mountpoint,
            used_bytes: u.used_bytes,
            inodes_used: u.inodes_used,
            images: images.store.len() as u32,
            containers_mountpoint,
            containers_used_bytes: bytes,
            containers_inodes_used: inodes,
            timestamp: now_ns(),
        })
    }

    /// A pull in progress, every half second: compressed bytes fetched of
    /// the layers' total, and layers done.
    #[zbus(signal)]
    pub async fn pull_progress(
        emitter: &SignalEmitter<'_>,
        reference: &str,
        bytes_done: u64,
        bytes_total: u64,
        layers_done: u32,
        layers_total: u32,
    ) -> zbus::Result<()>;
}
