//! A container's root: an overlay of its image's layers (the store's
//! unpacked lower directories, shared by every container of the image)
//! under an upper directory of its own, removed with the container.
//!
//!     <state_dir>/containers/<id>/   the bundle: config.json, the checkpoint
//!         rootfs/                    the overlay's mount point
//!         upper/ work/               the container's writes
//!
//! The overlay is mounted in the host's mount namespace (where the OCI
//! runtime, started by systemd, looks), naming the lower layers by their
//! short links relative to the store's `l/`, so that a stack of 240 layers
//! fits a page of mount options (what overlayfs on Debian 12's 6.1 kernel
//! takes; `lowerdir+=`, which lifts the limit, came with 6.8).

use crate::host::hostns::HostNs;
use crate::host::idmap::MappedUserNs;
use crate::image::ImageStore;
use podscope_api::domain::container::{ContainerMount, ImageVolume};
use podscope_api::error::{Error, IoResultExt, Result};
use podscope_api::reference::Digest;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

pub struct Dirs {
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    /// Image volumes: the i-th mount's image at `volumes/<i>`.
    pub volumes: PathBuf,
}

impl Dirs {
    pub fn of(bundle: &Path) -> Dirs {
        Dirs {
            bundle: bundle.to_owned(),
            rootfs: bundle.join(super::spec::ROOTFS),
            upper: bundle.join("upper"),
            work: bundle.join("work"),
            volumes: bundle.join("volumes"),
        }
    }

    /// Make the mount point and the overlay's directories (the bundle
    /// exists: the store made it).
    pub fn make(&self) -> Result<()> {
        for (d, mode) in [
            (&self.rootfs, 0o755),
            (&self.upper, 0o755),
            (&self.work, 0o700),
        ] {
            std::fs::DirBuilder::new()
                .mode(mode)
                .create(d)
                .io_context(format!("create {}", d.display()))?;
        }
        Ok(())
    }

    /// Whether something is mounted on the root (its device differs from
    /// the bundle's).
    pub fn is_mounted(&self) -> bool {
        mounted_on(&self.bundle, &self.rootfs)
    }
}

/// Whether `dir`'s device differs from `base`'s: something is mounted there.
fn mounted_on(base: &Path, dir: &Path) -> bool {
    match (std::fs::metadata(base), std::fs::metadata(dir)) {
        (Ok(b), Ok(r)) => b.dev() != r.dev(),
        _ => false,
    }
}

/// Mount each image volume read-only at `volumes/<mount>`, and check that
/// its sub path is a directory of the image reached through no symlink (a
/// link would be followed on the host when the runtime binds it).
pub async fn mount_volumes(
    hostns: &HostNs,
    store: &ImageStore,
    volumes: &[ImageVolume],
    mounts: &[ContainerMount],
    dirs: &Dirs,
    idmap: Option<&Idmapped<'_>>,
) -> Result<()> {
    for v in volumes {
        let dir = dirs.volumes.join(v.mount.to_string());
        let field = format!("mounts[{}]", v.mount);
        if !mounted_on(&dirs.bundle, &dir) {
            std::fs::create_dir_all(&dir).io_context(format!("create {}", dir.display()))?;
            let mut lowers = Vec::with_capacity(v.layers.len() + 1);
            for l in v.layers.iter().rev() {
                lowers.push(store.short_link(&Digest::parse(l)?)?);
            }
            // An overlay with no upper directory (read-only) needs two
            // lower ones: empty ones for an image of one layer or none.
            for n in lowers.len()..2 {
                let empty = dirs.volumes.join(format!("empty{n}"));
                std::fs::create_dir_all(&empty)
                    .io_context(format!("create {}", empty.display()))?;
                lowers.push(empty.display().to_string());
            }
            hostns
                .mount_overlay_readonly(&store.links_dir(), &lowers, &dir, idmap.map(|i| i.ns))
                .await
                .map_err(|e| e.context(format!("{field}: image volume {}", v.image_id)))?;
        }
        let sub = mounts
            .get(v.mount)
            .map_or("", |m| m.image_sub_path.as_str());
        let mut at = dir.clone();
        for part in Path::new(sub).components() {
            at.push(part);
            let meta = std::fs::symlink_metadata(&at);
            match meta {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(Error::invalid(
                        &format!("{field}.image_sub_path"),
                        format!("{sub:?} crosses a symbolic link in image {}", v.image_id),
                    ))
                }
                Ok(_) => {}
                Err(_) => {
                    return Err(Error::invalid(
                        &format!("{field}.image_sub_path"),
                        format!("{sub:?} is not in image {}", v.image_id),
                    ))
                }
            }
        }
        if !at.is_dir() {
            return Err(Error::invalid(
                &format!("{field}.image_sub_path"),
                format!("{sub:?} is not a directory in image {}", v.image_id),
            ));
        }
    }
    Ok(())
}

/// A container of a pod with a user namespace of its own: its layers are
/// idmapped through `ns`, and what the pod's root writes belongs to
/// `root` (uid, gid) on the node.
pub struct Idmapped<'a> {
    pub ns: &'a MappedUserNs,
    pub root: (u32, u32),
}

/// Mount the overlay of `layers` (bottom first, as the image lists them)
/// on the container's root.
pub async fn mount(
    hostns: &HostNs,
    store: &ImageStore,
    layers: &[Digest],
    dirs: &Dirs,
    idmap: Option<&Idmapped<'_>>,
) -> Result<()> {
    if dirs.is_mounted() {
        return Ok(());
    }
    let mut lowers = Vec::with_capacity(layers.len().max(1));
    for chain in layers.iter().rev() {
        lowers.push(store.short_link(chain)?);
    }
    if lowers.is_empty() {
        // An image of no layers: overlayfs needs a lower directory.
        let empty = dirs.bundle.join("empty");
        std::fs::create_dir_all(&empty).io_context(format!("create {}", empty.display()))?;
        lowers.push(empty.display().to_string());
    }
    if let Some(i) = idmap {
        // The upper directory is the root of the container's tree: the
        // pod's root owns it, and the runtime, already in the pod's user
        // namespace when it opens the root, must reach it through the
        // bundle (traverse only: `open_to_traverse` says what that opens).
        let (uid, gid) = i.root;
        std::os::unix::fs::chown(&dirs.upper, Some(uid), Some(gid))
            .io_context(format!("chown {} to {uid}:{gid}", dirs.upper.display()))?;
        open_to_traverse(&dirs.bundle)?;
    }
    hostns
        .mount_overlay(
            &store.links_dir(),
            &lowers,
            &dirs.upper,
            &dirs.work,
            &dirs.rootfs,
            idmap.map(|i| i.ns),
        )
        .await
}

/// Let other users traverse the bundle and the two directories above it
/// (the containers' and the state directory; containerd's bundles are
/// 0711 for the same reason): the runtime opens the root as the pod's
/// root, an unprivileged id on the node. No directory becomes listable,
/// the checkpoint and config stay 0600 and the image store 0700; what a
/// local user who knows a container's id can read is that container's
/// root, as its processes show it (its world-readable files), as with
/// containerd. The daemon makes the two private again at its next start.
fn open_to_traverse(bundle: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for dir in bundle.ancestors().take(3) {
        let mode = std::fs::metadata(dir)
            .io_context(format!("stat {}", dir.display()))?
            .permissions()
            .mode()
            & 0o7777;
        if mode & 0o011 != 0o011 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011))
                .io_context(format!("let others traverse {}", dir.display()))?;
        }
    }
    Ok(())
}

pub async fn unmount(hostns: &HostNs, dirs: &Dirs) -> Result<()> {
    // The image volumes first: each an overlay of its own.
    if let Ok(entries) = std::fs::read_dir(&dirs.volumes) {
        for e in entries.flatten() {
            if e.file_name()
                .to_string_lossy()
                .ends_with(crate::host::hostns::IDMAPPED_LOWERS)
            {
                hostns.release_idmapped_lowers(&e.path()).await?;
            } else if mounted_on(&dirs.bundle, &e.path()) {
                hostns.unmount(&e.path()).await?;
            }
        }
    }
    // Idmapped layers a Start cut short left bound (a killed daemon): the
    // bundle's removal would walk into them (same device) and delete the
    // shared layers' files.
    hostns
        .release_idmapped_lowers(&crate::host::hostns::idmapped_lowers_of(&dirs.rootfs))
        .await?;
    hostns.unmount(&dirs.rootfs).await?;
    if dirs.is_mounted() {
        return Err(Error::internal(format!(
            "{} is still mounted after its unmount",
            dirs.rootfs.display()
        )));
    }
    Ok(())
}

/// A file of the image as the container will see it (`rel` like
/// "etc/passwd"), read from the layers top down: the first layer that has
/// it, unless a higher one deleted it (a whiteout) or made its directory
/// opaque. Regular files only, at most `max` bytes. A symbolic link on the
/// way (an image's `etc -> /etc`) ends the search with nothing: followed
/// here it would name the host's file, not the container's.
pub fn image_file(store: &ImageStore, layers: &[Digest], rel: &str, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let rel = Path::new(rel);
    for chain in layers.iter().rev() {
        let root = store.layer_root(chain);
        // Each directory on the way, in this layer: absent sends the
        // search down a layer; a link or a file ends it.
        let mut absent = false;
        let mut prefix = PathBuf::new();
        for part in rel.parent().into_iter().flat_map(|p| p.components()) {
            prefix.push(part);
            match std::fs::symlink_metadata(root.join(&prefix)) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return None,
                Err(_) => {
                    absent = true;
                    break;
                }
            }
        }
        let p = root.join(rel);
        let found = if absent {
            Err(std::io::ErrorKind::NotFound.into())
        } else {
            std::fs::symlink_metadata(&p)
        };
        match found {
            Ok(m) if m.is_file() => {
                if m.len() > max {
                    return None;
                }
                let mut f = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&p)
                    .ok()?;
                let mut buf = Vec::new();
                f.by_ref().take(max + 1).read_to_end(&mut buf).ok()?;
                return (buf.len() as u64 <= max).then_some(buf);
            }
            // A whiteout (0/0 character device) or anything else hides it.
            Ok(m) if m.file_type().is_char_device() || !m.is_dir() => return None,
            Ok(_) => return None,
            Err(_) => {}
        }
        // An opaque parent hides the layers below.
        let mut dir = rel.parent();
        while let Some(d) = dir {
            if d.as_os_str().is_empty() {
                break;
            }
            if xattr_opaque(&root.join(d)) {
                return None;
            }
            dir = d.parent();
        }
    }
    None
}

/// Whether `rel` is a directory of the image, as the overlay of `layers`
/// (bottom first) shows it, reached through no symbolic link (a link
/// would be followed on the host when the runtime binds it). Err says why
/// not, worded to follow the path: "is not in", "crosses a symbolic link
/// in", "is not a directory in".
pub fn image_dir(
    store: &ImageStore,
    layers: &[Digest],
    rel: &str,
) -> std::result::Result<(), &'static str> {
    let mut prefix = PathBuf::new();
    for part in Path::new(rel).components() {
        prefix.push(part);
        match topmost(store, layers, &prefix) {
            Some(m) if m.file_type().is_symlink() => return Err("crosses a symbolic link in"),
            Some(m) if m.is_dir() => {}
            Some(_) => return Err("is not a directory in"),
            None => return Err("is not in"),
        }
    }
    Ok(())
}

/// What the overlay of `layers` shows at `rel`: the topmost layer's entry,
/// unless a whiteout or an opaque parent hides the lower ones.
fn topmost(store: &ImageStore, layers: &[Digest], rel: &Path) -> Option<std::fs::Metadata> {
    for chain in layers.iter().rev() {
        let root = store.layer_root(chain);
        match std::fs::symlink_metadata(root.join(rel)) {
            Ok(m) if m.file_type().is_char_device() && m.rdev() == 0 => return None,
            Ok(m) => return Some(m),
            Err(_) => {}
        }
        if rel.parent().is_some_and(|p| xattr_opaque(&root.join(p))) {
            return None;
        }
    }
    None
}

fn xattr_opaque(dir: &Path) -> bool {
    super::xattr::short(dir, c"trusted.overlay.opaque").is_some_and(|v| v == b"y")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::store::LayerInfo;

    fn layer(store: &ImageStore, n: u8, files: &[(&str, Option<&str>)]) -> Digest {
        let chain = Digest::sha256(&[n]);
        let work = store.temp_dir("layer").unwrap();
        for (path, content) in files {
            let p = work.join("root").join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            match content {
                // "->target": a symbolic link.
                Some(c) if c.starts_with("->") => std::os::unix::fs::symlink(&c[2..], &p).unwrap(),
                Some(c) => std::fs::write(&p, c).unwrap(),
                // A whiteout: a 0/0 character device.
                None => nix::sys::stat::mknod(
                    &p,
                    nix::sys::stat::SFlag::S_IFCHR,
                    nix::sys::stat::Mode::from_bits_truncate(0o600),
                    0,
                )
                .unwrap(),
            }
        }
        std::fs::create_dir_all(work.join("root")).unwrap();
        store
            .commit_layer(
                &work,
                &LayerInfo {
                    chain_id: chain.clone(),
                    diff_id: chain.clone(),
                    tar_bytes: 0,
                },
            )
            .unwrap();
        chain
    }

    #[test]
    fn image_dirs_follow_the_overlay_and_refuse_links() {
        let t = podscope_test_support::TempDir::new();
        let store = ImageStore::open(&t.0).unwrap();
        let base = layer(
            &store,
            1,
            &[
                ("usr/share/x", Some("x")),
                ("data/m", Some("m")),
                ("srv/real/f", Some("f")),
            ],
        );
        let top = layer(&store, 2, &[("data", None), ("srv/web", Some("->real"))]);
        let layers = vec![base, top];
        assert_eq!(image_dir(&store, &layers, "usr/share"), Ok(()));
        assert_eq!(image_dir(&store, &layers, "srv/real"), Ok(()));
        assert_eq!(
            image_dir(&store, &layers, "usr/share/x"),
            Err("is not a directory in")
        );
        assert_eq!(
            image_dir(&store, &layers, "data"),
            Err("is not in"),
            "deleted above"
        );
        assert_eq!(image_dir(&store, &layers, "nope/deeper"), Err("is not in"));
        assert_eq!(
            image_dir(&store, &layers, "srv/web"),
            Err("crosses a symbolic link in")
        );
    }

    #[test]
    fn image_files_are_read_top_down_and_whiteouts_hide_them() {
        let t = podscope_test_support::TempDir::new();
        let store = ImageStore::open(&t.0).unwrap();
        let base = layer(
            &store,
            1,
            &[
                ("etc/passwd", Some("root:x:0:0::/root:/bin/sh\n")),
                ("etc/group", Some("root:x:0:\n")),
            ],
        );
        let top = layer(
            &store,
            2,
            &[
                ("etc/passwd", Some("app:x:1000:1000::/app:/bin/sh\n")),
                ("etc/group", None),
            ],
        );
        let layers = vec![base.clone(), top];
        assert_eq!(
            image_file(&store, &layers, "etc/passwd", 1 << 20).unwrap(),
            b"app:x:1000:1000::/app:/bin/sh\n"
        );
        assert_eq!(
            image_file(&store, &layers, "etc/group", 1 << 20),
            None,
            "deleted above"
        );
        assert!(image_file(&store, std::slice::from_ref(&base), "etc/group", 1 << 20).is_some());
        assert_eq!(
            image_file(&store, &[base], "etc/passwd", 4),
            None,
            "too large"
        );
        assert_eq!(image_file(&store, &layers, "etc/shadow", 1 << 20), None);
    }

    /// Issue 41, finding 10, played by an image's author: a layer whose
    /// `etc` is a link to the host's /etc had the user lookup read the
    /// host's /etc/passwd (as root, in the daemon). Now a link on the way
    /// ends the lookup with nothing, in whichever layer it is.
    #[test]
    fn a_link_on_the_way_to_an_image_file_reads_nothing_of_the_hosts() {
        let t = podscope_test_support::TempDir::new();
        let store = ImageStore::open(&t.0).unwrap();
        let host = t.0.join("host-etc");
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(host.join("passwd"), "host:x:0:0::/:/bin/sh\n").unwrap();
        let base = layer(&store, 1, &[("etc/passwd", Some("app:x:1::/:/bin/sh\n"))]);
        let link = format!("->{}", host.display());
        let top = layer(&store, 2, &[("etc", Some(link.as_str()))]);
        assert_eq!(
            image_file(&store, &[base.clone(), top], "etc/passwd", 1 << 20),
            None
        );
        // A layer without the directory sends the search down, as before.
        let other = layer(&store, 3, &[("usr/x", Some("1"))]);
        assert_eq!(
            image_file(&store, &[base, other], "etc/passwd", 1 << 20).unwrap(),
            b"app:x:1::/:/bin/sh\n"
        );
    }

    #[test]
    fn short_links_name_each_layer_once() {
        let t = podscope_test_support::TempDir::new();
        let store = ImageStore::open(&t.0).unwrap();
        let a = layer(&store, 1, &[("a", Some("1"))]);
        let name = store.short_link(&a).unwrap();
        assert_eq!(name.len(), 16);
        assert_eq!(store.short_link(&a).unwrap(), name);
        let via = store.links_dir().join(&name).join("a");
        assert_eq!(std::fs::read_to_string(via).unwrap(), "1");
    }
}
