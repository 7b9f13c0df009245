//! The image store, under `image_dir` (default `/var/lib/podscope/images`):
//!
//! ```text
//! blobs/sha256/<hex>      manifests, indexes and configs, by digest
//! layers/<chain hex>/     one unpacked layer: root/ (an overlayfs lower
//!                         directory) and layer.json
//! records/<id hex>.json   one image: its names, manifest, config, layers
//! quarantine/             records that did not parse, for an operator
//! tmp/                    downloads and unpacks in progress (emptied at start)
//! ```
//!
//! Everything lands by rename from `tmp/` once complete: a layer directory
//! appears only unpacked and verified, a record only after its layers and
//! blobs are on disk and synced. A kill at any moment leaves complete
//! layers (a retried pull finds them) and no half record. Compressed layer
//! blobs are not kept: they are verified as they stream into the unpacker
//! and the unpacked layer is the one copy (as containers/storage does),
//! which halves the disk a node needs.

use podscope_api::error::{Error, IoResultExt, Result};
use podscope_api::reference::{id_prefix, Digest, Reference};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LayerRef {
    pub chain_id: Digest,
    pub diff_id: Digest,
    /// The compressed blob as the manifest names it.
    pub digest: Digest,
    pub size: u64,
    pub media_type: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ImageRecord {
    /// The config's digest: the image id CRI shows.
    pub id: Digest,
    /// `domain/path:tag`, each on one image only.
    pub repo_tags: Vec<String>,
    /// `domain/path@<manifest digest>` (the index's, when pulled by one).
    pub repo_digests: Vec<String>,
    pub manifest: Digest,
    #[serde(default)]
    pub index: Option<Digest>,
    pub config_size: u64,
    pub layers: Vec<LayerRef>,
    /// Config plus compressed layers: what a pull moves.
    pub size: u64,
    /// The config's User, as written.
    pub user: String,
    pub platform: String,
    /// Unix time in nanoseconds.
    pub pulled_at: u64,
}

impl ImageRecord {
    pub fn blobs(&self) -> impl Iterator<Item = &Digest> {
        [Some(&self.id), Some(&self.manifest), self.index.as_ref()]
            .into_iter()
            .flatten()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LayerInfo {
    pub chain_id: Digest,
    pub diff_id: Digest,
    pub tar_bytes: u64,
}

/// Hex characters of a chain id in its short link's name.
const SHORT_LINK_LEN: usize = 16;

pub struct ImageStore {
    root: PathBuf,
    records: Mutex<BTreeMap<String, ImageRecord>>,
}

/// What `collect_garbage` removed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Collected {
    pub layers: usize,
    pub blobs: usize,
}

fn fsync_dir(p: &Path) -> std::io::Result<()> {
    fs::File::open(p)?.sync_all()
}

impl ImageStore {
    /// Open (making the directories), empty `tmp/`, load the records;
    /// records that do not parse go to `quarantine/`, logged.
    pub fn open(root: &Path) -> Result<Self> {
        for d in [
            "",
            "blobs/sha256",
            "layers",
            "l",
            "records",
            "quarantine",
            "tmp",
        ] {
            let p = root.join(d);
            fs::create_dir_all(&p).io_context(format!("create {}", p.display()))?;
        }
        // Root's alone, as the rest of the state: the state directory is
        // open to traversal while a user-namespace pod's container is
        // started (rootfs::open_to_traverse), and layers hold whatever
        // files the images do. Overlays read their layers with the
        // daemon's credentials, so nothing else needs in.
        crate::state::files::private_dir(root)
            .io_context(format!("make {} private", root.display()))?;
        let tmp = root.join("tmp");
        for e in fs::read_dir(&tmp).io_context("read tmp")?.flatten() {
            let p = e.path();
            let r = if p.is_dir() && !p.is_symlink() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            if let Err(err) = r {
                tracing::warn!("image store: cannot remove {}: {err}", p.display());
            }
        }
        let mut records = BTreeMap::new();
        let dir = root.join("records");
        for e in fs::read_dir(&dir).io_context("read records")?.flatten() {
            let p = e.path();
            let parsed = fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<ImageRecord>(&b).map_err(|e| e.to_string()))
                .and_then(|r| {
                    let want = format!("{}.json", r.id.hex());
                    if p.file_name().is_some_and(|n| n.to_string_lossy() == want) {
                        Ok(r)
                    } else {
                        Err(format!("names image {} under another file name", r.id))
                    }
                });
            match parsed {
                Ok(r) => {
                    records.insert(r.id.hex().to_owned(), r);
                }
                Err(why) => {
                    let q = root.join("quarantine").join(e.file_name());
                    tracing::error!(
                        "image record {} is damaged ({why}); moved to {}",
                        p.display(),
                        q.display()
                    );
                    let _ = fs::rename(&p, &q);
                }
            }
        }
        Ok(ImageStore {
            root: root.to_owned(),
            records: Mutex::new(records),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A fresh directory under `tmp/` for work in progress.
    pub fn temp_dir(&self, what: &str) -> Result<PathBuf> {
        let p = self.root.join("tmp").join(format!(
            "{what}-{}",
            podscope_api::domain::SandboxId::random().short()
        ));
        fs::create_dir(&p).io_context(format!("create {}", p.display()))?;
        Ok(p)
    }

    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs").join(d.algorithm()).join(d.hex())
    }

    pub fn read_blob(&self, d: &Digest) -> Option<Vec<u8>> {
        fs::read(self.blob_path(d)).ok()
    }

    /// Store a small blob (already verified) by rename from tmp.
    pub fn write_blob(&self, d: &Digest, bytes: &[u8]) -> Result<()> {
        let dest = self.blob_path(d);
        if dest.exists() {
            return Ok(());
        }
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).io_context(format!("create {}", parent.display()))?;
        }
        // A name of its own per write: two pulls of the same blob at once
        // must not share (and rename away) one temporary file.
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self.root.join("tmp").join(format!("blob-{}-{n}", d.hex()));
        let mut f = fs::File::create(&tmp).io_context(format!("create {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .io_context(format!("write {}", tmp.display()))?;
        if let Err(e) = fs::rename(&tmp, &dest) {
            let _ = fs::remove_file(&tmp);
            return Err(e).io_context(format!("store blob {d}"));
        }
        Ok(())
    }

    pub fn layer_dir(&self, chain: &Digest) -> PathBuf {
        self.root.join("layers").join(chain.hex())
    }

    /// The directory an overlay mount takes as a lower layer.
    pub fn layer_root(&self, chain: &Digest) -> PathBuf {
        self.layer_dir(chain).join("root")
    }

    pub fn has_layer(&self, chain: &Digest) -> bool {
        self.layer_dir(chain).join("layer.json").is_file()
    }

    /// The directory holding the layers' short links (`l/`): overlay
    /// mounts change into it and name lower layers relative to it.
    pub fn links_dir(&self) -> PathBuf {
        self.root.join("l")
    }

    /// A layer's short name under `l/`: a symbolic link to its `root/`
    /// made when first asked for. 64-hex paths fill a page of overlay
    /// options at about 40 layers; 16-character relative names let a mount
    /// stack 240 (more than Docker's 125 and near overlayfs' own 500).
    pub fn short_link(&self, chain: &Digest) -> Result<String> {
        let name = chain.hex()[..SHORT_LINK_LEN].to_owned();
        let link = self.links_dir().join(&name);
        let target = PathBuf::from("../layers").join(chain.hex()).join("root");
        match fs::read_link(&link) {
            Ok(t) if t == target => return Ok(name),
            Ok(t) => {
                return Err(Error::internal(format!(
                    "layer {chain}: its short link {} names {} (two layers share a 64-bit prefix)",
                    link.display(),
                    t.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("read {}", link.display()), e)),
        }
        match std::os::unix::fs::symlink(&target, &link) {
            Ok(()) => Ok(name),
            // Another container made it first.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(name),
            Err(e) => Err(Error::io(format!("link {}", link.display()), e)),
        }
    }

    /// Make a finished layer (its `root/` unpacked in `work`, under tmp/)
    /// the store's, by rename.
    pub fn commit_layer(&self, work: &Path, info: &LayerInfo) -> Result<()> {
        let json = serde_json::to_vec(info).expect("layer info serialises");
        fs::write(work.join("layer.json"), json).io_context("write layer.json")?;
        let dest = self.layer_dir(&info.chain_id);
        match fs::rename(work, &dest) {
            Ok(()) => Ok(()),
            // Another pull finished the same layer first: keep that one.
            Err(e) if dest.join("layer.json").is_file() => {
                tracing::debug!("layer {} already present ({e})", info.chain_id);
                let _ = fs::remove_dir_all(work);
                Ok(())
            }
            Err(e) => Err(Error::io(format!("store layer {}", info.chain_id), e)),
        }
    }

    /// Flush what the pull wrote before its record names it (a power cut
    /// must not leave a record over a half-written layer).
    pub fn sync(&self) -> Result<()> {
        let f = fs::File::open(&self.root).io_context("open image store")?;
        // SAFETY: a valid fd.
        if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) } < 0 {
            return Err(Error::io(
                "syncfs image store",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    fn write_record(&self, r: &ImageRecord) -> Result<()> {
        let dir = self.root.join("records");
        let tmp = self
            .root
            .join("tmp")
            .join(format!("record-{}.json", r.id.hex()));
        let mut f = fs::File::create(&tmp).io_context(format!("create {}", tmp.display()))?;
        f.write_all(&serde_json::to_vec_pretty(r).expect("records serialise"))
            .and_then(|_| f.sync_all())
            .io_context(format!("write {}", tmp.display()))?;
        fs::rename(&tmp, dir.join(format!("{}.json", r.id.hex())))
            .io_context(format!("save image record {}", r.id))?;
        fsync_dir(&dir).io_context("fsync records")?;
        Ok(())
    }

    fn delete_record(&self, id: &Digest) -> Result<()> {
        let dir = self.root.join("records");
        match fs::remove_file(dir.join(format!("{}.json", id.hex()))) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("delete image record {id}"), e)),
        }
        fsync_dir(&dir).io_context("fsync records")?;
        Ok(())
    }

    /// Save `new` (merging names into an existing record of the same id)
    /// and take its tags off any other image: a tag names one image.
    /// Returns the record as saved.
    pub fn put(&self, new: ImageRecord) -> Result<ImageRecord> {
        let mut records = self.records.lock().unwrap();
        let mut merged = match records.get(new.id.hex()) {
            Some(old) => {
                let mut m = new.clone();
                m.repo_tags = union(&old.repo_tags, &new.repo_tags);
                m.repo_digests = union(&old.repo_digests, &new.repo_digests);
                m
            }
            None => new.clone(),
        };
        merged.repo_tags.sort();
        merged.repo_digests.sort();
        let mut changed = Vec::new();
        for (k, r) in records.iter() {
            if k == merged.id.hex() {
                continue;
            }
            if r.repo_tags.iter().any(|t| new.repo_tags.contains(t)) {
                let mut r2 = r.clone();
                r2.repo_tags.retain(|t| !new.repo_tags.contains(t));
                changed.push(r2);
            }
        }
        if records.get(merged.id.hex()) != Some(&merged) {
            self.write_record(&merged)?;
        }
        for r in changed {
            self.write_record(&r)?;
            records.insert(r.id.hex().to_owned(), r);
        }
        records.insert(merged.id.hex().to_owned(), merged.clone());
        Ok(merged)
    }

    pub fn list(&self) -> Vec<ImageRecord> {
        self.records.lock().unwrap().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.records.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An image by what a caller may name it with: its id (`sha256:…`, the
    /// bare hex, or a unique prefix of 3 or more digits), a tag, or a
    /// repo digest. A reference that does not parse and is no id is an
    /// InvalidArgument.
    pub fn lookup(&self, name: &str) -> Result<Option<ImageRecord>> {
        let records = self.records.lock().unwrap();
        if let Some(hex) = name.strip_prefix("sha256:") {
            if hex.len() == 64 {
                return Ok(records.get(hex).cloned());
            }
        }
        let by_ref = match Reference::parse(name) {
            Ok(r) => {
                let found = match (&r.digest, r.tagged()) {
                    (Some(d), _) => {
                        let want = r.with_digest(d);
                        records.values().find(|i| i.repo_digests.contains(&want))
                    }
                    (None, Some(t)) => records.values().find(|i| i.repo_tags.contains(&t)),
                    _ => None,
                };
                Ok(found.cloned())
            }
            Err(e) => Err(e),
        };
        match by_ref {
            Ok(Some(r)) => return Ok(Some(r)),
            Ok(None) if id_prefix(name).is_none() => return Ok(None),
            Err(e) if id_prefix(name).is_none() => return Err(e),
            _ => {}
        }
        let prefix = id_prefix(name).expect("checked");
        let mut hits = records
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix));
        match (hits.next(), hits.next()) {
            (Some((_, r)), None) => Ok(Some(r.clone())),
            (Some(_), Some(_)) => Err(Error::invalid(
                "image",
                format!("{name:?} is the prefix of more than one image id"),
            )),
            _ => Ok(None),
        }
    }

    /// The image with this manifest (or index) digest, if any: a pull by
    /// a digest already present needs no registry.
    pub fn by_manifest(&self, d: &Digest) -> Option<ImageRecord> {
        self.records
            .lock()
            .unwrap()
            .values()
            .find(|r| &r.manifest == d || r.index.as_ref() == Some(d))
            .cloned()
    }

    /// Remove an image's record. Its layers and blobs stay until
    /// `collect_garbage` finds nothing uses them.
    pub fn remove(&self, id: &Digest) -> Result<Option<ImageRecord>> {
        let mut records = self.records.lock().unwrap();
        let Some(r) = records.get(id.hex()).cloned() else {
            return Ok(None);
        };
        self.delete_record(id)?;
        records.remove(id.hex());
        Ok(Some(r))
    }

    /// Delete layers and blobs no image record names, nor `keep` (layers
    /// a container still has mounted). Each goes by rename into tmp/
    /// first, so a kill half way never leaves a half layer under its name.
    pub fn collect_garbage(&self, keep: &HashSet<Digest>) -> Result<Collected> {
        let (layers, blobs): (HashSet<String>, HashSet<String>) = {
            let records = self.records.lock().unwrap();
            let layers = records
                .values()
                .flat_map(|r| r.layers.iter().map(|l| l.chain_id.hex().to_owned()))
                .chain(keep.iter().map(|d| d.hex().to_owned()))
                .collect();
            let blobs = records
                .values()
                .flat_map(|r| r.blobs().map(|d| d.hex().to_owned()).collect::<Vec<_>>())
                .collect();
            (layers, blobs)
        };
        let mut out = Collected::default();
        for e in fs::read_dir(self.root.join("layers"))
            .io_context("read layers")?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if layers.contains(&name) {
                continue;
            }
            // A name of its own: a trash dir a failed deletion left must
            // not stop the same layer going again later.
            let trash = self.root.join("tmp").join(format!(
                "trash-{name}-{}",
                podscope_api::domain::SandboxId::random().short()
            ));
            if fs::rename(e.path(), &trash).is_ok() {
                podscope_sys::failpoint::hit(podscope_sys::failpoint::GC_LAYER_TRASHED);
                fs::remove_dir_all(&trash).io_context(format!("remove layer {name}"))?;
                out.layers += 1;
            }
        }
        // Short links whose layer went (here or earlier).
        for e in fs::read_dir(self.links_dir())
            .io_context("read l/")?
            .flatten()
        {
            let p = e.path();
            if fs::metadata(&p).is_err() {
                let _ = fs::remove_file(&p);
            }
        }
        for e in fs::read_dir(self.root.join("blobs/sha256"))
            .io_context("read blobs")?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if !blobs.contains(&name) {
                fs::remove_file(e.path()).io_context(format!("remove blob {name}"))?;
                out.blobs += 1;
            }
        }
        Ok(out)
    }
}

fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut v: Vec<String> = a.to_vec();
    for x in b {
        if !v.contains(x) {
            v.push(x.clone());
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_test_support::TempDir;

    fn dg(n: u8) -> Digest {
        Digest::parse(&format!("sha256:{}", format!("{n:02x}").repeat(32))).unwrap()
    }

    fn rec(id: u8, tags: &[&str]) -> ImageRecord {
        ImageRecord {
            id: dg(id),
            repo_tags: tags.iter().map(|s| s.to_string()).collect(),
            repo_digests: vec![format!("docker.io/library/x@{}", dg(id + 100))],
            manifest: dg(id + 100),
            index: None,
            config_size: 1,
            layers: vec![LayerRef {
                chain_id: dg(id + 50),
                diff_id: dg(id + 50),
                digest: dg(id + 60),
                size: 10,
                media_type: "x".into(),
            }],
            size: 11,
            user: String::new(),
            platform: "linux/amd64".into(),
            pulled_at: 1,
        }
    }

    #[test]
    fn tags_move_and_records_survive_a_reopen() {
        let dir = TempDir::new();
        let s = ImageStore::open(&dir.0).unwrap();
        s.put(rec(
            1,
            &["docker.io/library/x:latest", "docker.io/library/x:1"],
        ))
        .unwrap();
        s.put(rec(2, &["docker.io/library/x:latest"])).unwrap();
        let s = ImageStore::open(&dir.0).unwrap();
        assert_eq!(s.len(), 2);
        let one = s.lookup(&dg(1).to_string()).unwrap().unwrap();
        assert_eq!(
            one.repo_tags,
            vec!["docker.io/library/x:1"],
            "latest moved to image 2"
        );
        assert_eq!(s.lookup("x").unwrap().unwrap().id, dg(2), "x is x:latest");
        assert_eq!(
            s.lookup("docker.io/library/x:1").unwrap().unwrap().id,
            dg(1)
        );
        let by_digest = format!("x@{}", dg(101));
        assert_eq!(s.lookup(&by_digest).unwrap().unwrap().id, dg(1));
        assert_eq!(s.lookup("0101").unwrap().unwrap().id, dg(1), "id prefix");
        assert_eq!(s.lookup(dg(2).hex()).unwrap().unwrap().id, dg(2), "bare id");
        assert!(s.lookup("nothere").unwrap().is_none());
        assert!(s.lookup("Bad Name").is_err());
        assert_eq!(s.by_manifest(&dg(102)).unwrap().id, dg(2));
    }

    #[test]
    fn garbage_is_what_no_record_or_keeper_names() {
        let dir = TempDir::new();
        let s = ImageStore::open(&dir.0).unwrap();
        for n in [51u8, 52, 53] {
            let work = s.temp_dir("layer").unwrap();
            fs::create_dir(work.join("root")).unwrap();
            s.commit_layer(
                &work,
                &LayerInfo {
                    chain_id: dg(n),
                    diff_id: dg(n),
                    tar_bytes: 0,
                },
            )
            .unwrap();
        }
        s.write_blob(&dg(1), b"x").unwrap();
        s.write_blob(&dg(9), b"y").unwrap();
        s.put(rec(1, &["a.io/x:1"])).unwrap();
        let keep: HashSet<Digest> = [dg(53)].into();
        let c = s.collect_garbage(&keep).unwrap();
        assert_eq!(
            c,
            Collected {
                layers: 1,
                blobs: 1
            }
        );
        assert!(s.has_layer(&dg(51)) && s.has_layer(&dg(53)) && !s.has_layer(&dg(52)));
        s.remove(&dg(1)).unwrap();
        s.collect_garbage(&HashSet::new()).unwrap();
        assert!(!s.has_layer(&dg(51)));
        assert!(s.read_blob(&dg(1)).is_none());
    }

    #[test]
    fn damaged_records_are_quarantined_and_tmp_emptied() {
        let dir = TempDir::new();
        let s = ImageStore::open(&dir.0).unwrap();
        s.put(rec(1, &["a.io/x:1"])).unwrap();
        fs::write(
            dir.0.join("records").join(format!("{}.json", dg(2).hex())),
            b"{half",
        )
        .unwrap();
        fs::create_dir(dir.0.join("tmp/layer-x")).unwrap();
        let s = ImageStore::open(&dir.0).unwrap();
        assert_eq!(s.len(), 1);
        assert!(dir
            .0
            .join("quarantine")
            .join(format!("{}.json", dg(2).hex()))
            .exists());
        assert_eq!(fs::read_dir(dir.0.join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn usage_counts_files_and_dirs() {
        let root = TempDir::new();
        fs::create_dir_all(root.0.join("a/b")).unwrap();
        fs::write(root.0.join("a/b/f"), vec![1u8; 10_000]).unwrap();
        fs::hard_link(root.0.join("a/b/f"), root.0.join("a/g")).unwrap();
        let (bytes, inodes) = podscope_sys::usage::usage_of(&root.0).unwrap();
        assert_eq!(inodes, 4, "root, a, b, f (g is f)");
        assert!(
            (10_000..30_000).contains(&bytes),
            "f once, not twice: {bytes}"
        );
    }
}
