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

/// The bundle's directory of CRIU images to restore from (not
/// "checkpoint": that is the container's record, `state::checkpoint`).
pub const IMAGES: &str = "criu-images";
/// CRIU's work directory (restore.log) for a restore.
pub const WORK: &str = "restore.work";
/// The CRIU configuration file of a restore, in the bundle: runc hands it
/// to CRIU when the spec's `org.criu.config` annotation names it.
pub const CRIU_CONF: &str = "criu-restore.conf";
/// The annotation by which runc takes a container's CRIU configuration
/// file (in place of /etc/criu/runc.conf).
const CRIU_CONF_ANNOTATION: &str = "org.criu.config";
/// runc's own CRIU configuration file, copied into a restore's.
const RUNC_CRIU_CONF: &str = "/etc/criu/runc.conf";

/// An archive checked, kept open for its unpacking.
pub struct Restore {
    pub path: PathBuf,
    pub file: std::fs::File,
    pub checked: archive::Checked,
    /// The image it was made from, as the store knows it.
    pub image: String,
}

impl Restore {
    /// The new spec (made for the new pod) with the dumped process, and
    /// the annotation that names the restore's CRIU configuration file
    /// (`criu_conf`, written by `write_criu_conf`).
    pub fn spec_for(&self, oci: &podscope_oci::spec::Spec, criu_conf: &Path) -> Vec<u8> {
        let mut v = serde_json::to_value(oci).expect("a spec serialises");
        v["annotations"][CRIU_CONF_ANNOTATION] = criu_conf.display().to_string().into();
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

/// The restore's CRIU configuration: runc's own file's lines, then the
/// new container's cgroup as CRIU's `cgroup-root`. CRIU puts the restored
/// processes into the cgroups they were dumped from unless told another
/// root: that is the dumped container's unit (still running, or gone), not
/// the new one's. runc 1.1 tells CRIU the new root on cgroup v1 only (from
/// 1.2 on v2 as well); this file tells it on both.
pub fn criu_conf(runc_conf: &str, cgroup: &str) -> String {
    let mut s = String::new();
    for l in runc_conf.lines() {
        let t = l.trim_start();
        // Ours is the last word on the cgroup root.
        if t.starts_with("cgroup-root") || t.starts_with("--cgroup-root") {
            continue;
        }
        s.push_str(l);
        s.push('\n');
    }
    s.push_str(&format!("cgroup-root {cgroup}\n"));
    s
}

/// `criu_conf` written beside the spec.
pub fn write_criu_conf(path: &Path, cgroup: &str) -> Result<()> {
    let runc = std::fs::read_to_string(RUNC_CRIU_CONF).unwrap_or_default();
    std::fs::write(path, criu_conf(&runc, cgroup))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

impl<S: SystemdClient + Clone> Containers<S> {
    /// A writable layer's diff, made or unpacked, is bounded as an image
    /// layer is (podscope.toml's layer_max_bytes, layer_max_entries).
    pub(super) fn layer_limits(&self) -> crate::image::unpack::Limits {
        (&self.settings).into()
    }

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
    /// directory, its deletions as whiteouts; the archive's seal checked
    /// with the node's checkpoint key over what was read.
    pub(super) async fn unpack_archive(&self, r: Restore, bundle: &Path) -> Result<()> {
        let images = bundle.join(IMAGES);
        std::fs::create_dir(&images)
            .map_err(|e| Error::io(format!("create {}", images.display()), e))?;
        let upper = rootfs::Dirs::of(bundle).upper;
        let limits = self.layer_limits();
        let key = super::checkpoint_key::load_or_create(&self.settings.state_dir)?;
        let Restore {
            path,
            mut file,
            checked,
            ..
        } = r;
        tokio::task::spawn_blocking(move || {
            let sealer = podscope_oci::checkpoint_seal::Sealer::new(&key);
            archive::extract(&mut file, &path, &checked, &images, &upper, &limits, sealer)
        })
        .await
        .map_err(|e| Error::internal(format!("unpack the archive: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criu_conf_keeps_runcs_lines_and_names_the_new_cgroup_last() {
        let runc = "tcp-established\ncgroup-root /elsewhere\n# a comment\n";
        assert_eq!(
            criu_conf(runc, "/pod.slice/podscope-ctr-abc.service"),
            "tcp-established\n# a comment\ncgroup-root /pod.slice/podscope-ctr-abc.service\n"
        );
        assert_eq!(criu_conf("", "/x"), "cgroup-root /x\n");
    }
}
