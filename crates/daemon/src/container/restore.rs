//! A restore, as CRI-O does one: a CreateContainer whose image is a
//! checkpoint archive's absolute path. Create checks the archive whole
//! (`archive::check`) before anything is made, takes the image it names
//! (which must be in the store: pulled first), makes the container's spec
//! for its new pod (its namespaces, cgroup, mounts and log are the new
//! pod's; its process is the dumped one's), and unpacks CRIU's images into
//! the bundle and the root file system's diff onto the new upper
//! directory. Start then runs the runtime's `restore --detach` as the
//! unit's `ExecStart=` in place of `create` (and no `start`): the restored
//! process is the unit's main process, its stdio the unit's new pipes (runc
//! hands CRIU the dumped pipes' keys from `descriptors.json` with its own
//! stdio as `inherit-fd`), so its output goes to its new log.

use super::*;
use std::os::fd::OwnedFd;

/// The bundle's directory of CRIU images to restore from.
pub const IMAGES: &str = "checkpoint";
/// CRIU's work directory (restore.log) for a restore.
pub const WORK: &str = "restore.work";

/// An archive checked, kept open for its unpacking.
pub struct Restore {
    pub path: PathBuf,
    pub file: std::fs::File,
    pub checked: archive::Checked,
    /// The image it was made from, as the store knows it.
    pub image: String,
}

impl Restore {
    /// The new spec (made for the new pod) with the dumped process.
    pub fn spec_for(&self, oci: &podscope_oci::spec::Spec) -> Vec<u8> {
        let mut v = serde_json::to_value(oci).expect("a spec serialises");
        if let (Some(dumped), Some(p)) = (
            archive::dumped_process(&self.checked.spec),
            v.get_mut("process").and_then(|p| p.as_object_mut()),
        ) {
            for k in ["args", "env", "cwd"] {
                if let Some(x) = dumped.get(k) {
                    p.insert(k.to_owned(), x.clone());
                }
            }
        }
        serde_json::to_vec_pretty(&v).expect("a spec serialises")
    }
}

impl<S: SystemdClient + Clone> Containers<S> {
    /// Open the archive as the host sees it (no link followed) and check
    /// it; its image must be here.
    pub(super) async fn open_archive(&self, image: &str) -> Result<Restore> {
        let path = PathBuf::from(image);
        let fd: OwnedFd = self.hostns.open_for_reading(&path).await.map_err(|e| {
            Error::invalid(
                "image",
                format!("{image}: the checkpoint archive cannot be read: {e}"),
            )
        })?;
        let mut file = std::fs::File::from(fd);
        let p = path.clone();
        let (file, checked) = tokio::task::spawn_blocking(move || {
            let c = archive::check(&mut file, &p);
            (file, c)
        })
        .await
        .map_err(|e| Error::internal(format!("{image}: check the archive: {e}")))?;
        let checked = checked?;
        let want = [
            &checked.config.rootfs_image_name,
            &checked.config.rootfs_image_ref,
            &checked.config.rootfs_image,
        ];
        let found = want
            .iter()
            .filter(|n| !n.is_empty())
            .find_map(|n| self.images.status(n).ok().map(|_| (*n).clone()));
        let image = found.ok_or_else(|| {
            Error::not_found(format!(
                "{image}: the checkpoint's image {} is not here: pull it first",
                want.iter()
                    .find(|n| !n.is_empty())
                    .map_or("", |n| n.as_str())
            ))
        })?;
        info!(
            archive = %path.display(),
            step = "restore-check",
            image = %image,
            images = checked.images,
            "checkpoint archive {} checked: container {} of image {image}, {} CRIU images",
            path.display(),
            checked.config.name,
            checked.images
        );
        Ok(Restore {
            path,
            file,
            checked,
            image,
        })
    }

    /// The pod's handler must restore with CRIU, and the container was not
    /// one with a terminal.
    pub(super) async fn can_restore(
        &self,
        handler_name: &str,
        handler: &podscope_config::RuntimeHandler,
        r: &Restore,
    ) -> Result<()> {
        let f = crate::host::features::of(handler_name, handler).await;
        if !f.checkpoint {
            return Err(Error::new(
                ErrorKind::RuntimeFailed,
                format!(
                    "{}: runtime handler {handler_name} cannot restore: {} (make the pod with a handler of runc)",
                    r.path.display(),
                    f.checkpoint_why_not
                ),
            ));
        }
        if r.checked.spec["process"]["terminal"].as_bool() == Some(true) {
            return Err(Error::invalid(
                "image",
                format!(
                    "{}: the container had a terminal, which podscope does not restore",
                    r.path.display()
                ),
            ));
        }
        Ok(())
    }

    /// CRIU's images into the bundle, the diff onto the new upper
    /// directory, its deletions as whiteouts.
    pub(super) async fn unpack_archive(&self, r: Restore, bundle: &Path) -> Result<()> {
        let images = bundle.join(IMAGES);
        std::fs::create_dir(&images)
            .map_err(|e| Error::io(format!("create {}", images.display()), e))?;
        let upper = rootfs::Dirs::of(bundle).upper;
        // A diff is bounded as an image layer is (podscope.toml's
        // layer_max_bytes, layer_max_entries).
        let limits = crate::image::unpack::Limits {
            max_bytes: self.settings.layer_max_bytes,
            max_entries: self.settings.layer_max_entries,
        };
        let Restore {
            path,
            mut file,
            checked,
            ..
        } = r;
        tokio::task::spawn_blocking(move || {
            archive::extract(&mut file, &path, &checked, &images, &upper, &limits)
        })
        .await
        .map_err(|e| Error::internal(format!("unpack the archive: {e}")))?
    }
}
