//! A checkpoint archive: the files CRI-O writes for CheckpointContainer and
//! kubelet's checkpoint API, so that `checkpointctl` and CRI-O read
//! podscope's and podscope reads theirs. An uncompressed tar of:
//!
//! - `checkpoint/`: CRIU's images, as the runtime's `checkpoint
//!   --image-path` left them (with runc's `descriptors.json`, which names
//!   the pipes that were the container's stdio);
//! - `config.dump`: what the container was (`ConfigDump`: its id, name,
//!   image, runtime, times);
//! - `spec.dump`: its OCI spec, with CRI-O's annotations (which
//!   checkpointctl reads the pod and container names from);
//! - `rootfs-diff.tar`: its writable layer's files; `deleted.files`: the
//!   paths its writable layer deleted (a JSON list);
//! - `dump.log`: CRIU's own log of the dump;
//! - `podscope.seal`: podscope's own, last: the seal of all the rest under
//!   the node's checkpoint key (`podscope_oci::checkpoint_seal`).
//!
//! Reading one is reading hostile input: sizes are bounded, the images are
//! plain files in one directory, the root file system's diff goes through
//! the layer unpacker (`image::unpack`, confined to the new upper
//! directory), and a deleted path is a whiteout made beneath it. And a
//! restore runs CRIU as root on the images, which say what the restored
//! process may do: so only a sealed archive is restored, the seal checked
//! over the bytes the restore itself read (a file changed between the
//! check and the unpacking fails it).

use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstatat, Mode, SFlag};
use podscope_api::error::{Error, Result};
use podscope_oci::checkpoint_seal::{Sealer, SEAL_LEN, SEAL_MEMBER};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

pub const IMAGES_DIR: &str = "checkpoint";
pub const CONFIG_DUMP: &str = "config.dump";
pub const SPEC_DUMP: &str = "spec.dump";
pub const ROOTFS_DIFF: &str = "rootfs-diff.tar";
pub const DELETED_FILES: &str = "deleted.files";
pub const DUMP_LOG: &str = "dump.log";
/// CRIU's figures of the dump (freezing, frozen, memory dump and write
/// times, pages): `checkpointctl inspect --stats` reads them.
pub const STATS_DUMP: &str = "stats-dump";

/// The largest config.dump, spec.dump or deleted.files read.
const SMALL_FILE_MAX: u64 = 4 << 20;
/// The most CRIU image files restored (a container with thousands of
/// processes has a few per process).
const IMAGES_MAX: usize = 100_000;

/// `config.dump` (CRI-O's `metadata.ContainerConfig`, as checkpointctl's
/// library reads it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigDump {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "rootfsImage", default)]
    pub rootfs_image: String,
    #[serde(rename = "rootfsImageRef", default)]
    pub rootfs_image_ref: String,
    #[serde(rename = "rootfsImageName", default)]
    pub rootfs_image_name: String,
    #[serde(rename = "runtime", default)]
    pub runtime: String,
    #[serde(rename = "createdTime", default)]
    pub created_time: String,
    #[serde(rename = "checkpointedTime", default)]
    pub checkpointed_time: String,
    #[serde(rename = "restoredTime", default)]
    pub restored_time: String,
    #[serde(default)]
    pub restored: bool,
}

/// Go's zero time, which Go's JSON writes for a time not set.
pub const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// The CRI-O annotations checkpointctl reads a CRI-O archive's container
/// and pod from (`io.container.manager` = "cri-o" says which engine's
/// annotations to read), added to the spec that goes into `spec.dump`.
pub struct Names<'a> {
    pub container: &'a str,
    pub attempt: u32,
    pub pod_namespace: &'a str,
    pub pod_name: &'a str,
    pub pod_id: &'a str,
    pub created: &'a str,
    pub ip: Option<&'a str>,
}

pub fn annotate_spec(spec: &mut serde_json::Value, n: &Names<'_>) {
    let Some(obj) = spec.as_object_mut() else {
        return;
    };
    let ann = obj
        .entry("annotations")
        .or_insert_with(|| serde_json::json!({}));
    let Some(ann) = ann.as_object_mut() else {
        return;
    };
    let mut put = |k: &str, v: String| {
        ann.insert(k.to_owned(), serde_json::Value::String(v));
    };
    put("io.container.manager", "cri-o".into());
    put(
        "io.kubernetes.cri-o.Metadata",
        serde_json::json!({"name": n.container, "attempt": n.attempt}).to_string(),
    );
    put("io.kubernetes.cri-o.Created", n.created.to_owned());
    put("io.kubernetes.pod.namespace", n.pod_namespace.to_owned());
    put("io.kubernetes.pod.name", n.pod_name.to_owned());
    put("io.kubernetes.cri-o.SandboxID", n.pod_id.to_owned());
    put("io.kubernetes.cri-o.ContainerName", n.container.to_owned());
    if let Some(ip) = n.ip {
        put("io.kubernetes.cri-o.IP.0", ip.to_owned());
    }
    // Who wrote it, for an operator reading the archive.
    put("io.podscope.checkpoint", "podscoped".into());
}

/// What a container's writable layer holds: its files as a tar (into
/// `out`), and the paths it deleted (its whiteouts: 0/0 character devices).
/// Walked by descriptor, each directory and file opened beneath the one
/// before without following a link: the container runs meanwhile and may
/// swap a directory for a symbolic link. Bounded as a layer is (`limits`,
/// podscope.toml's layer_max_bytes and layer_max_entries): a container
/// that fills its layer (sparse files count whole) cannot fill the disk
/// with its diff, and a restore would refuse a larger one anyway.
pub fn rootfs_diff(
    upper: &Path,
    out: File,
    limits: &crate::image::unpack::Limits,
) -> Result<Vec<String>> {
    let root = open_dir_nofollow(None, upper.as_os_str().as_bytes())
        .map_err(|e| Error::io(format!("open {}", upper.display()), e))?;
    let mut b = tar::Builder::new(out);
    let mut deleted = Vec::new();
    let mut left = Budget {
        bytes: limits.max_bytes,
        entries: limits.max_entries,
    };
    walk(&mut b, &root, PathBuf::new(), &mut deleted, 0, &mut left).map_err(|e| {
        if e.kind() == io::ErrorKind::FileTooLarge {
            Error::invalid(
                "container",
                format!(
                    "its writable layer {}: {e} (podscope.toml's layer_max_bytes {}, \
                     layer_max_entries {}, which a restore holds it to too)",
                    upper.display(),
                    limits.max_bytes,
                    limits.max_entries
                ),
            )
        } else {
            Error::io(format!("read {}", upper.display()), e)
        }
    })?;
    b.into_inner()
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io("write rootfs-diff.tar", e))?;
    deleted.sort();
    Ok(deleted)
}

fn open_dir_nofollow(dir: Option<&OwnedFd>, name: &[u8]) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::other("NUL in a name"))?;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: openat with a valid C string; the result is checked.
    let fd = unsafe {
        libc::openat(
            at,
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Deeper than this is no container's file system.
const DEPTH_MAX: usize = 256;

/// What a diff may still take.
struct Budget {
    bytes: u64,
    entries: u64,
}

impl Budget {
    /// One entry of `bytes`, or FileTooLarge saying which bound it passed.
    fn take(&mut self, path: &Path, bytes: u64) -> io::Result<()> {
        let over = |what: String| io::Error::new(io::ErrorKind::FileTooLarge, what);
        self.entries = self.entries.checked_sub(1).ok_or_else(|| {
            over(format!(
                "has more entries than the bound, at {}",
                path.display()
            ))
        })?;
        self.bytes = self.bytes.checked_sub(bytes).ok_or_else(|| {
            over(format!(
                "holds more bytes than the bound, at {}",
                path.display()
            ))
        })?;
        Ok(())
    }
}

fn walk(
    b: &mut tar::Builder<File>,
    dir: &OwnedFd,
    rel: PathBuf,
    deleted: &mut Vec<String>,
    depth: usize,
    left: &mut Budget,
) -> io::Result<()> {
    if depth > DEPTH_MAX {
        return Err(io::Error::other(format!(
            "{} is deeper than {DEPTH_MAX} directories",
            rel.display()
        )));
    }
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    {
        let dup = dir.try_clone()?;
        let mut d = nix::dir::Dir::from_fd(std::os::fd::IntoRawFd::into_raw_fd(dup))
            .map_err(io::Error::from)?;
        for e in d.iter() {
            let e = e.map_err(io::Error::from)?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            names.push(std::ffi::OsStr::from_bytes(n).to_owned());
        }
    }
    names.sort();
    for name in names {
        let path = rel.join(&name);
        let st = match fstatat(
            Some(dir.as_raw_fd()),
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            // Deleted meanwhile: the container runs.
            Err(nix::errno::Errno::ENOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        let mut h = tar::Header::new_gnu();
        h.set_mode(st.st_mode & 0o7777);
        h.set_uid(st.st_uid as u64);
        h.set_gid(st.st_gid as u64);
        h.set_mtime(st.st_mtime.max(0) as u64);
        h.set_size(0);
        if kind == SFlag::S_IFCHR && st.st_rdev == 0 {
            deleted.push(format!("/{}", path.display()));
            continue;
        }
        let size = if kind == SFlag::S_IFREG {
            st.st_size.max(0) as u64
        } else {
            0
        };
        left.take(&path, size)?;
        match kind {
            SFlag::S_IFDIR => {
                h.set_entry_type(tar::EntryType::Directory);
                b.append_data(&mut h, &path, io::empty())?;
                let sub = match open_dir_nofollow(Some(dir), name.as_bytes()) {
                    Ok(d) => d,
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                    Err(e) => return Err(e),
                };
                walk(b, &sub, path, deleted, depth + 1, left)?;
            }
            SFlag::S_IFREG => {
                let c = std::ffi::CString::new(name.as_bytes())
                    .map_err(|_| io::Error::other("NUL in a name"))?;
                // SAFETY: openat with a valid C string; checked below.
                let fd = unsafe {
                    libc::openat(
                        dir.as_raw_fd(),
                        c.as_ptr(),
                        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
                    )
                };
                if fd < 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() == Some(libc::ENOENT) {
                        continue;
                    }
                    return Err(e);
                }
                // SAFETY: a new descriptor we own.
                let f = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
                let m = f.metadata()?;
                if !m.is_file() {
                    continue;
                }
                // No more than the size counted (it may grow meanwhile).
                let len = m.len().min(size);
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(len);
                // What the file holds now, padded if it shrank.
                let data = f.take(len).chain(io::repeat(0)).take(len);
                b.append_data(&mut h, &path, data)?;
            }
            SFlag::S_IFLNK => {
                let target = nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name.as_os_str())
                    .map_err(io::Error::from)?;
                h.set_entry_type(tar::EntryType::Symlink);
                b.append_link(&mut h, &path, Path::new(&target))?;
            }
            SFlag::S_IFCHR | SFlag::S_IFBLK | SFlag::S_IFIFO => {
                h.set_entry_type(match kind {
                    SFlag::S_IFCHR => tar::EntryType::Char,
                    SFlag::S_IFBLK => tar::EntryType::Block,
                    _ => tar::EntryType::Fifo,
                });
                let (maj, min) = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
                h.set_device_major(maj)?;
                h.set_device_minor(min)?;
                b.append_data(&mut h, &path, io::empty())?;
            }
            // Sockets are the running processes' (CRIU has them).
            _ => {}
        }
    }
    Ok(())
}

/// An archive being written, each member counted into its seal.
struct Writer<'a> {
    b: tar::Builder<&'a mut File>,
    sealer: Sealer,
}

impl Writer<'_> {
    fn append(
        &mut self,
        name: &str,
        t: tar::EntryType,
        mode: u32,
        len: u64,
        data: impl Read,
    ) -> io::Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(t);
        h.set_mode(mode);
        h.set_size(len);
        h.set_mtime(now_secs());
        self.sealer
            .member(name.trim_end_matches('/'), t.as_byte(), len);
        let data = self.sealer.reader(data.take(len));
        self.b.append_data(&mut h, name, data)
    }

    /// Append the file at `path` under `name`.
    fn file(&mut self, name: &str, path: &Path) -> io::Result<()> {
        let f = File::open(path)?;
        let len = f.metadata()?.len();
        self.append(name, tar::EntryType::Regular, 0o600, len, f)
    }

    fn bytes(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        self.append(
            name,
            tar::EntryType::Regular,
            0o600,
            data.len() as u64,
            data,
        )
    }

    /// The seal, last.
    fn seal(self) -> io::Result<()> {
        let Writer { mut b, sealer } = self;
        let seal = sealer.finish();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o600);
        h.set_size(seal.len() as u64);
        h.set_mtime(now_secs());
        b.append_data(&mut h, SEAL_MEMBER, seal.as_bytes())?;
        let out = b.into_inner()?;
        out.flush()?;
        out.sync_all()
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What goes into an archive besides the images.
pub struct Contents<'a> {
    pub config_dump: &'a ConfigDump,
    pub spec_dump: &'a serde_json::Value,
    /// CRIU's images directory (`--image-path`).
    pub images: &'a Path,
    /// rootfs-diff.tar, made already (`rootfs_diff`).
    pub rootfs_diff: &'a Path,
    pub deleted: &'a [String],
    /// CRIU's dump.log, when there is one.
    pub dump_log: Option<&'a Path>,
    /// CRIU's stats-dump (in its work directory), when there is one.
    pub stats_dump: Option<&'a Path>,
}

/// Write the archive into `out`, sealed with `sealer` (the node's key),
/// and flush it to disk.
pub fn write(out: &mut File, c: &Contents<'_>, sealer: Sealer) -> io::Result<()> {
    let mut w = Writer {
        b: tar::Builder::new(out),
        sealer,
    };
    w.append(
        &format!("{IMAGES_DIR}/"),
        tar::EntryType::Directory,
        0o700,
        0,
        io::empty(),
    )?;
    let mut images: Vec<PathBuf> = std::fs::read_dir(c.images)?
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    images.sort();
    for p in images {
        let m = std::fs::symlink_metadata(&p)?;
        if !m.is_file() {
            continue;
        }
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name {
            w.file(&format!("{IMAGES_DIR}/{name}"), &p)?;
        }
    }
    w.bytes(
        CONFIG_DUMP,
        &serde_json::to_vec_pretty(c.config_dump).expect("serialises"),
    )?;
    w.bytes(
        SPEC_DUMP,
        &serde_json::to_vec_pretty(c.spec_dump).expect("serialises"),
    )?;
    w.file(ROOTFS_DIFF, c.rootfs_diff)?;
    w.bytes(
        DELETED_FILES,
        &serde_json::to_vec(c.deleted).expect("serialises"),
    )?;
    if let Some(log) = c.dump_log.filter(|p| p.is_file()) {
        w.file(DUMP_LOG, log)?;
    }
    if let Some(stats) = c.stats_dump.filter(|p| p.is_file()) {
        w.file(STATS_DUMP, stats)?;
    }
    w.seal()
}

/// What an archive says of itself, read before anything is made.
#[derive(Debug, Clone)]
pub struct Checked {
    pub config: ConfigDump,
    pub spec: serde_json::Value,
    pub deleted: Vec<String>,
    pub images: usize,
    pub has_rootfs_diff: bool,
    /// config.dump, spec.dump and deleted.files as read: the unpacking
    /// reads them again, and seals what it read only if it is this.
    read: Vec<(String, Vec<u8>)>,
}

fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::invalid(
        "image",
        format!(
            "{} is not a checkpoint archive podscope can restore: {why}",
            path.display()
        ),
    )
}

/// The archive's member name, cleaned: "./x" is "x". None for one that
/// climbs out, is not UTF-8 or holds a NUL (a GNU long name may).
fn member(p: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(n) => {
                parts.push(n.to_str().filter(|n| !n.contains('\0'))?.to_owned())
            }
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

fn read_small(e: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut v = Vec::new();
    e.take(SMALL_FILE_MAX + 1).read_to_end(&mut v)?;
    if v.len() as u64 > SMALL_FILE_MAX {
        return Err(io::Error::other(format!(
            "larger than {SMALL_FILE_MAX} bytes"
        )));
    }
    Ok(v)
}

const NAME_REFUSED: &str = "a member's name climbs out, is not UTF-8 or holds a NUL";

/// tar's own error, which may quote the file's first bytes (a header's
/// fields), is not repeated: the file may be any the host has.
fn bad_tar(path: &Path, e: io::Error) -> Error {
    bad(
        path,
        format!("it is not a tar archive, or is cut short ({:?})", e.kind()),
    )
}

/// The seal this node's key does not match.
fn unsealed(path: &Path, why: &str) -> Error {
    bad(
        path,
        format!(
            "{why}: podscope restores only an archive sealed with this node's checkpoint \
             key, {} (one this node wrote, or a node given the same key), as a restore \
             runs its CRIU images as root",
            super::checkpoint_key::FILE
        ),
    )
}

/// Read the archive through once: its metadata parsed, every member's
/// name allowed, the whole of it there (a truncated archive fails here),
/// its seal last. The seal itself is checked by `extract`, over what it
/// reads.
pub fn check(file: &mut File, path: &Path) -> Result<Checked> {
    file.rewind().map_err(|e| Error::io("rewind", e))?;
    let mut a = tar::Archive::new(&mut *file);
    let mut config = None;
    let mut spec = None;
    let mut deleted = Vec::new();
    let mut images = 0;
    let mut images_dir = false;
    let mut has_rootfs_diff = false;
    let mut sealed = false;
    let mut read = Vec::new();
    let mut names = std::collections::HashSet::new();
    let entries = a.entries().map_err(|e| bad_tar(path, e))?;
    for e in entries {
        let mut e = e.map_err(|e| bad_tar(path, e))?;
        let name = e
            .path()
            .ok()
            .and_then(|p| member(&p))
            .ok_or_else(|| bad(path, NAME_REFUSED))?;
        if sealed {
            return Err(bad(path, format!("{name} follows its {SEAL_MEMBER}")));
        }
        // One of each: what is checked here is what is unpacked.
        if !names.insert(name.clone()) {
            return Err(bad(path, format!("it has {name} twice")));
        }
        let what = |e: io::Error| bad(path, format!("{name}: {e}"));
        match name.as_str() {
            CONFIG_DUMP => {
                let v = read_small(&mut e).map_err(what)?;
                config = Some(
                    serde_json::from_slice::<ConfigDump>(&v)
                        .map_err(|e| bad(path, format!("{CONFIG_DUMP}: {e}")))?,
                );
                read.push((name, v));
            }
            SPEC_DUMP => {
                let v = read_small(&mut e).map_err(what)?;
                spec = Some(
                    serde_json::from_slice::<serde_json::Value>(&v)
                        .map_err(|e| bad(path, format!("{SPEC_DUMP}: {e}")))?,
                );
                read.push((name, v));
            }
            DELETED_FILES => {
                let v = read_small(&mut e).map_err(what)?;
                deleted = serde_json::from_slice::<Vec<String>>(&v)
                    .map_err(|e| bad(path, format!("{DELETED_FILES}: {e}")))?;
                read.push((name, v));
            }
            SEAL_MEMBER => {
                sealed = true;
                io::copy(&mut e, &mut io::sink()).map_err(what)?;
            }
            ROOTFS_DIFF => {
                has_rootfs_diff = true;
                io::copy(&mut e, &mut io::sink()).map_err(what)?;
            }
            IMAGES_DIR => images_dir = true,
            n if n.starts_with("checkpoint/") => {
                let rest = &n[IMAGES_DIR.len() + 1..];
                let t = e.header().entry_type();
                if rest.contains('/') || !(t.is_file() || t.is_dir()) {
                    return Err(bad(
                        path,
                        format!("{n}: CRIU's images are plain files in {IMAGES_DIR}/"),
                    ));
                }
                images_dir = true;
                if t.is_file() {
                    images += 1;
                    if images > IMAGES_MAX {
                        return Err(bad(path, format!("more than {IMAGES_MAX} images")));
                    }
                }
                io::copy(&mut e, &mut io::sink()).map_err(what)?;
            }
            // Other engines' extra files (stats-dump, network.status,
            // bind.mounts, ...): read past.
            _ => {
                io::copy(&mut e, &mut io::sink()).map_err(what)?;
            }
        }
    }
    let config = config.ok_or_else(|| bad(path, format!("it has no {CONFIG_DUMP}")))?;
    let spec = spec.ok_or_else(|| bad(path, format!("it has no {SPEC_DUMP}")))?;
    if !images_dir || images == 0 {
        return Err(bad(path, format!("it has no CRIU images in {IMAGES_DIR}/")));
    }
    if config.rootfs_image_name.is_empty() && config.rootfs_image_ref.is_empty() {
        return Err(bad(
            path,
            format!("its {CONFIG_DUMP} names no image (rootfsImageName, rootfsImageRef)"),
        ));
    }
    for d in &deleted {
        clean_deleted(d).map_err(|why| bad(path, format!("{DELETED_FILES}: {why}")))?;
    }
    // Last, so that what is wrong with a foreign archive is said first.
    if !sealed {
        return Err(unsealed(path, &format!("it carries no {SEAL_MEMBER}")));
    }
    Ok(Checked {
        config,
        spec,
        deleted,
        images,
        has_rootfs_diff,
        read,
    })
}

/// A deleted path, relative and with no `..`.
fn clean_deleted(p: &str) -> std::result::Result<PathBuf, String> {
    let rel = crate::image::unpack::clean(Path::new(p))?;
    if rel.as_os_str().is_empty() {
        return Err(format!("{p:?} names the root"));
    }
    Ok(rel)
}

/// Extract the archive's CRIU images into `images` (an empty directory)
/// and its rootfs-diff.tar onto `upper` (the new container's empty upper
/// directory, through the layer unpacker), then make its deleted paths
/// whiteouts there; every member read counted into `sealer` (the node's
/// key), and the archive's seal checked against it at the end. Until it
/// is, what was unpacked is only in the new container's bundle, which a
/// failed create removes.
pub fn extract(
    file: &mut File,
    path: &Path,
    checked: &Checked,
    images: &Path,
    upper: &Path,
    limits: &crate::image::unpack::Limits,
    mut sealer: Sealer,
) -> Result<()> {
    file.rewind().map_err(|e| Error::io("rewind", e))?;
    let images_fd = open_dir_nofollow(None, images.as_os_str().as_bytes())
        .map_err(|e| Error::io(format!("open {}", images.display()), e))?;
    let mut a = tar::Archive::new(&mut *file);
    let entries = a.entries().map_err(|e| bad_tar(path, e))?;
    let mut seal = None;
    let mut names = std::collections::HashSet::new();
    for e in entries {
        let mut e = e.map_err(|e| bad_tar(path, e))?;
        let name = e
            .path()
            .ok()
            .and_then(|p| member(&p))
            .ok_or_else(|| bad(path, NAME_REFUSED))?;
        if seal.is_some() {
            return Err(bad(path, format!("{name} follows its {SEAL_MEMBER}")));
        }
        if !names.insert(name.clone()) {
            return Err(bad(path, format!("it has {name} twice")));
        }
        let what = |e: io::Error| bad(path, format!("{name}: {e}"));
        if name == SEAL_MEMBER {
            let mut v = Vec::new();
            (&mut e)
                .take(SEAL_LEN as u64 + 2)
                .read_to_end(&mut v)
                .map_err(what)?;
            seal = Some(v);
            continue;
        }
        let t = e.header().entry_type();
        sealer.member(&name, t.as_byte(), e.size());
        let mut e = sealer.reader(&mut e);
        if let Some((_, before)) = checked.read.iter().find(|(n, _)| *n == name) {
            let v = read_small(&mut e).map_err(what)?;
            if v != *before {
                return Err(bad(path, format!("{name} changed while it was read")));
            }
        } else if name == ROOTFS_DIFF {
            crate::image::unpack::unpack(
                &mut e,
                &crate::image::manifest::Compression::None,
                upper,
                limits,
            )
            .map_err(|err| err.context(format!("{}: {ROOTFS_DIFF}", path.display())))?;
            io::copy(&mut e, &mut io::sink()).map_err(what)?;
        } else if let Some(rest) = name
            .strip_prefix("checkpoint/")
            .filter(|r| !r.is_empty() && t.is_file())
        {
            let c = std::ffi::CString::new(rest)
                .map_err(|_| bad(path, format!("{name}: a NUL in its name")))?;
            // SAFETY: openat with a valid C string; checked below.
            let fd = unsafe {
                libc::openat(
                    images_fd.as_raw_fd(),
                    c.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o600,
                )
            };
            if fd < 0 {
                return Err(Error::io(
                    format!("write {}/{rest}", images.display()),
                    io::Error::last_os_error(),
                ));
            }
            // SAFETY: a new descriptor we own.
            let mut f = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            io::copy(&mut e, &mut f)
                .map_err(|err| Error::io(format!("write {}/{rest}", images.display()), err))?;
        } else {
            // The images' directory, other engines' extra files: sealed too.
            io::copy(&mut e, &mut io::sink()).map_err(what)?;
        }
    }
    let Some(seal) = seal else {
        return Err(unsealed(path, &format!("it carries no {SEAL_MEMBER}")));
    };
    // What check parsed, each read again here and sealed.
    if let Some((name, _)) = checked.read.iter().find(|(n, _)| !names.contains(n)) {
        return Err(bad(path, format!("{name} changed while it was read")));
    }
    if !sealer.verify(&seal) {
        return Err(unsealed(
            path,
            &format!("its {SEAL_MEMBER} is not this node's key's seal of it"),
        ));
    }
    whiteouts(upper, &checked.deleted)
}

/// Each deleted path a whiteout (a 0/0 character device) in `upper`,
/// its parent opened beneath `upper` (RESOLVE_IN_ROOT: what the diff made
/// there cannot lead out) and made when missing.
fn whiteouts(upper: &Path, deleted: &[String]) -> Result<()> {
    let root = open_dir_nofollow(None, upper.as_os_str().as_bytes())
        .map_err(|e| Error::io(format!("open {}", upper.display()), e))?;
    for d in deleted {
        let rel = clean_deleted(d).map_err(|why| Error::invalid("image", why))?;
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => (p.to_owned(), n.to_owned()),
            _ => continue,
        };
        let mut dir = root.try_clone().map_err(|e| Error::io("dup", e))?;
        for part in parent.components() {
            let Component::Normal(part) = part else {
                continue;
            };
            let _ = nix::sys::stat::mkdirat(
                Some(dir.as_raw_fd()),
                part,
                Mode::from_bits_truncate(0o755),
            );
            let how = OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
                .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            let fd = openat2(dir.as_raw_fd(), part, how).map_err(|e| {
                Error::io(
                    format!("{}: whiteout {d}", upper.display()),
                    io::Error::from(e),
                )
            })?;
            // SAFETY: a new descriptor we own.
            dir = unsafe { OwnedFd::from_raw_fd(fd) };
        }
        match nix::sys::stat::mknodat(
            Some(dir.as_raw_fd()),
            name.as_os_str(),
            SFlag::S_IFCHR,
            Mode::empty(),
            0,
        ) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => {
                return Err(Error::io(
                    format!("{}: whiteout {d}", upper.display()),
                    io::Error::from(e),
                ))
            }
        }
    }
    Ok(())
}

/// The annotations and process of the dumped spec that a restored
/// container keeps (its new spec is made for its new pod).
pub fn dumped_process(spec: &serde_json::Value) -> Option<serde_json::Value> {
    spec.get("process").cloned()
}

/// The tail of CRIU's log worth an error: its error lines, else its end.
pub fn log_tail(log: &str) -> String {
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Error") || l.contains("error"))
        .collect();
    let lines: Vec<&str> = if errors.is_empty() {
        log.lines().collect()
    } else {
        errors
    };
    let from = lines.len().saturating_sub(3);
    lines[from..].join(" | ")
}

/// Annotations of a map, for tests.
#[cfg(test)]
fn annotations(v: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    v["annotations"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [1; 32];

    fn tmp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("podscope-archive-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn sample(dir: &Path) -> PathBuf {
        let images = dir.join("images");
        std::fs::create_dir_all(&images).unwrap();
        std::fs::write(images.join("pages-1.img"), b"memory").unwrap();
        std::fs::write(images.join("descriptors.json"), b"[\"/dev/null\"]").unwrap();
        let upper = dir.join("upper");
        std::fs::create_dir_all(upper.join("etc")).unwrap();
        std::fs::write(upper.join("etc/new"), b"written").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", upper.join("link")).unwrap();
        let diff = dir.join("rootfs-diff.tar");
        let deleted =
            rootfs_diff(&upper, File::create(&diff).unwrap(), &Default::default()).unwrap();
        let mut spec = serde_json::json!({"process": {"args": ["sh"]}});
        annotate_spec(
            &mut spec,
            &Names {
                container: "counter",
                attempt: 0,
                pod_namespace: "default",
                pod_name: "p",
                pod_id: "abc",
                created: "2026-01-01T00:00:00Z",
                ip: None,
            },
        );
        let cfg = ConfigDump {
            id: "abc".into(),
            name: "counter".into(),
            rootfs_image_name: "busybox:latest".into(),
            rootfs_image_ref: "sha256:1".into(),
            ..Default::default()
        };
        let out = dir.join("a.tar");
        let mut f = File::create(&out).unwrap();
        write(
            &mut f,
            &Contents {
                config_dump: &cfg,
                spec_dump: &spec,
                images: &images,
                rootfs_diff: &diff,
                deleted: &deleted,
                dump_log: None,
                stats_dump: None,
            },
            Sealer::new(&KEY),
        )
        .unwrap();
        out
    }

    #[test]
    fn an_archive_written_reads_back_and_restores_into_an_upper_directory() {
        let dir = tmp("roundtrip");
        let out = sample(&dir);
        let mut f = File::open(&out).unwrap();
        let c = check(&mut f, &out).unwrap();
        assert_eq!(c.config.name, "counter");
        assert_eq!(c.images, 2);
        assert!(c.has_rootfs_diff);
        let ann = annotations(&c.spec);
        assert_eq!(ann["io.container.manager"], "cri-o");
        assert!(ann["io.kubernetes.cri-o.Metadata"].contains("\"counter\""));
        let (images, upper) = (dir.join("r-images"), dir.join("r-upper"));
        std::fs::create_dir_all(&images).unwrap();
        std::fs::create_dir_all(&upper).unwrap();
        extract(
            &mut f,
            &out,
            &c,
            &images,
            &upper,
            &Default::default(),
            Sealer::new(&KEY),
        )
        .unwrap();
        assert_eq!(
            std::fs::read(images.join("pages-1.img")).unwrap(),
            b"memory"
        );
        assert_eq!(std::fs::read(upper.join("etc/new")).unwrap(), b"written");
        assert_eq!(
            std::fs::read_link(upper.join("link")).unwrap(),
            Path::new("/etc/shadow")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_archive_sealed_with_another_key_or_changed_is_not_restored() {
        let dir = tmp("seal");
        let out = sample(&dir);
        let (images, upper) = (dir.join("r-images"), dir.join("r-upper"));
        let unpack = |path: &Path, key: &[u8; 32]| {
            let _ = std::fs::remove_dir_all(&images);
            let _ = std::fs::remove_dir_all(&upper);
            std::fs::create_dir_all(&images).unwrap();
            std::fs::create_dir_all(&upper).unwrap();
            let mut f = File::open(path).unwrap();
            let c = check(&mut f, path)?;
            extract(
                &mut f,
                path,
                &c,
                &images,
                &upper,
                &Default::default(),
                Sealer::new(key),
            )
        };
        let e = unpack(&out, &[2; 32]).unwrap_err().to_string();
        assert!(e.contains("is not this node's key's seal of it"), "{e}");
        // One byte of an image changed, the seal as it was.
        let mut bytes = std::fs::read(&out).unwrap();
        let at = bytes
            .windows(6)
            .position(|w| w == b"memory")
            .expect("the image's bytes");
        bytes[at] = b'M';
        let changed = dir.join("changed.tar");
        std::fs::write(&changed, &bytes).unwrap();
        let e = unpack(&changed, &KEY).unwrap_err().to_string();
        assert!(e.contains("is not this node's key's seal of it"), "{e}");
        unpack(&out, &KEY).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_writable_layer_past_the_layer_bounds_is_named() {
        let dir = tmp("bounds");
        let upper = dir.join("upper");
        std::fs::create_dir_all(&upper).unwrap();
        std::fs::write(upper.join("big"), vec![0u8; 4096]).unwrap();
        std::fs::write(upper.join("small"), b"x").unwrap();
        let diff = dir.join("rootfs-diff.tar");
        for (limits, named) in [
            (
                crate::image::unpack::Limits {
                    max_bytes: 4000,
                    max_entries: 100,
                },
                "more bytes",
            ),
            (
                crate::image::unpack::Limits {
                    max_bytes: 1 << 20,
                    max_entries: 1,
                },
                "more entries",
            ),
        ] {
            let e = rootfs_diff(&upper, File::create(&diff).unwrap(), &limits)
                .unwrap_err()
                .to_string();
            assert!(e.contains(named) && e.contains("layer_max_bytes"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_member_twice_or_a_name_with_a_nul_is_refused() {
        let dir = tmp("twice");
        let out = dir.join("twice.tar");
        let mut b = tar::Builder::new(File::create(&out).unwrap());
        for data in [&b"{}"[..], &b"{\"id\":\"x\"}"[..]] {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(data.len() as u64);
            b.append_data(&mut h, SPEC_DUMP, data).unwrap();
        }
        b.into_inner().unwrap();
        let e = check(&mut File::open(&out).unwrap(), &out).unwrap_err();
        assert!(e.to_string().contains("spec.dump twice"), "{e}");
        assert_eq!(member(Path::new("checkpoint/a\0b")), None);
        assert_eq!(
            member(Path::new("./checkpoint/a")).as_deref(),
            Some("checkpoint/a")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_truncated_or_foreign_archive_is_named() {
        let dir = tmp("bad");
        let out = sample(&dir);
        let len = std::fs::metadata(&out).unwrap().len();
        let cut = dir.join("cut.tar");
        std::fs::write(&cut, &std::fs::read(&out).unwrap()[..(len / 2) as usize]).unwrap();
        let e = check(&mut File::open(&cut).unwrap(), &cut).unwrap_err();
        assert!(e.to_string().contains("not a checkpoint archive"), "{e}");
        let junk = dir.join("junk");
        std::fs::write(&junk, b"not a tar at all").unwrap();
        let e = check(&mut File::open(&junk).unwrap(), &junk).unwrap_err();
        assert!(e.to_string().contains("not a checkpoint archive"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_image_path_outside_the_images_directory_is_refused() {
        let dir = tmp("escape");
        let out = dir.join("evil.tar");
        let mut b = tar::Builder::new(File::create(&out).unwrap());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "checkpoint/pages-1.img", "/etc/passwd")
            .unwrap();
        b.into_inner().unwrap();
        let e = check(&mut File::open(&out).unwrap(), &out).unwrap_err();
        assert!(e.to_string().contains("plain files"), "{e}");
        assert!(clean_deleted("/../../etc/passwd").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn criu_log_tail_keeps_the_errors() {
        let log = "(00.001) a\n(00.002) Error (criu/vdso.c:613): vdso: bad\n(00.003) end\n";
        assert_eq!(log_tail(log), "(00.002) Error (criu/vdso.c:613): vdso: bad");
    }
}
