//! One pull: reference → sources (registries.conf's mirrors, then the
//! registry) → manifest (the host's entry of an index) → config → the
//! layers not yet in the store, several at a time, each streamed through
//! its digest check and decompressor straight into the unpacker (never
//! whole in memory, never written compressed) → sync → record.
//!
//! Work is shared: a layer is fetched under a lock of its chain id, so a
//! second pull of the same image waits for the first one's layers instead
//! of fetching them again, and finds them present.

use super::auth::Credentials;
use super::client::{transport_error, Session};
use super::manifest::{self, Compression, Descriptor, Document};
use super::registries::Source;
use super::store::{ImageRecord, LayerInfo, LayerRef};
use super::unpack;
use super::Images;
use podscope_api::error::{Error, ErrorKind, Result};
use podscope_api::reference::{Digester, Reference};
use std::io::Read;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tracing::info;

/// A pull's progress, read by whoever reports it (the bus's signal).
#[derive(Debug, Default)]
pub struct Progress {
    pub bytes_done: AtomicU64,
    pub bytes_total: AtomicU64,
    pub layers_done: AtomicU32,
    pub layers_total: AtomicU32,
}

/// A pull's outcome for the journal and the caller.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub record: ImageRecord,
    /// Layers fetched by this pull (the others were present).
    pub fetched_layers: usize,
    pub fetched_bytes: u64,
    pub source: String,
}

impl Images {
    /// Pull `reference` (a CRI image name, normalised here), counted in
    /// the metrics by the image's registry.
    pub async fn pull(
        self: &Arc<Self>,
        reference: &str,
        creds: Option<Credentials>,
        progress: Arc<Progress>,
    ) -> Result<Pulled> {
        let started = Instant::now();
        let mut registry = String::new();
        let r = match Reference::parse(reference) {
            Ok(r) => {
                registry = r.domain.clone();
                self.pull_parsed(&r, creds, progress).await
            }
            Err(e) => Err(e),
        };
        let outcome = match &r {
            Ok(p) => Ok(p.fetched_bytes),
            Err(e) => {
                let name = podscope_api::errors::error_name(e.kind());
                Err(name.rsplit('.').next().unwrap_or(name))
            }
        };
        crate::metrics::image_pull(&registry, started.elapsed(), outcome);
        r
    }

    async fn pull_parsed(
        self: &Arc<Self>,
        r: &Reference,
        creds: Option<Credentials>,
        progress: Arc<Progress>,
    ) -> Result<Pulled> {
        let r = r.clone();
        let started = Instant::now();
        // Held from here: no garbage collection takes what this pull
        // finds present and is about to name in a record.
        let _gc = self.gc_lock.read().await;
        // A digest already present needs no registry.
        if let Some(d) = &r.digest {
            if let Some(rec) = self.store.by_manifest(d) {
                let mut rec2 = rec.clone();
                rec2.repo_tags.clear();
                rec2.repo_digests = vec![r.with_digest(d)];
                let record = self.store.put(rec2)?;
                return Ok(Pulled {
                    record,
                    fetched_layers: 0,
                    fetched_bytes: 0,
                    source: "store".into(),
                });
            }
        }
        let registries = self.registries()?;
        let sources = registries.sources(&r)?;
        let mut failures: Vec<Error> = Vec::new();
        for source in &sources {
            // The caller's credentials are for the image's registry (a
            // pull secret): a mirror on another host gets those of the
            // auth files for itself, never them.
            let given = creds
                .clone()
                .filter(|c| !c.is_empty() && source.domain == r.domain);
            let creds = given.or_else(|| {
                super::auth::from_files(
                    &self.settings.auth_files,
                    &format!("{}/{}", source.domain, source.path),
                )
            });
            match self.pull_from(&r, source, creds, &progress).await {
                Ok(p) => {
                    info!(
                        EVENT = podscope_sys::logging::event::IMAGE_PULLED,
                        IMAGE = %r,
                        IMAGE_ID = %p.record.id,
                        REGISTRY = %source.domain,
                        LAYERS_FETCHED = p.fetched_layers,
                        BYTES_FETCHED = p.fetched_bytes,
                        ELAPSED_MS = started.elapsed().as_millis() as u64,
                        "pulled {r} ({}) from {}/{}: {} of {} layers fetched, {} bytes, in {} ms",
                        p.record.id,
                        source.domain,
                        source.path,
                        p.fetched_layers,
                        p.record.layers.len(),
                        p.fetched_bytes,
                        started.elapsed().as_millis()
                    );
                    return Ok(p);
                }
                Err(e) => {
                    tracing::warn!(
                        IMAGE = %r,
                        REGISTRY = %source.domain,
                        "pull {r} from {}/{}{}: {e}",
                        source.domain,
                        source.path,
                        if source.mirror { " (mirror)" } else { "" }
                    );
                    // Every source is tried: a mirror's bad answer (a
                    // 400, a broken copy) says nothing of the registry's.
                    failures.push(e);
                }
            }
        }
        Err(combine(&r, failures))
    }

    async fn pull_from(
        self: &Arc<Self>,
        r: &Reference,
        source: &Source,
        creds: Option<Credentials>,
        progress: &Arc<Progress>,
    ) -> Result<Pulled> {
        let mut s = self.client.session(source, creds);
        let (ct, body, top) = s.manifest(&r.manifest_ref(), r.digest.as_ref()).await?;
        let (index, manifest_digest, manifest_body, m) = match manifest::parse_document(&ct, &body)?
        {
            Document::Manifest(m) => (None, top.clone(), body, m),
            Document::Index(idx) => {
                let host = podscope_api::domain::platform::host();
                let d = manifest::choose(&idx, &host).ok_or_else(|| {
                    let have: Vec<String> = idx
                        .manifests
                        .iter()
                        .filter_map(|d| d.platform.as_ref())
                        .map(|p| {
                            format!(
                                "{}/{}{}{}",
                                p.os,
                                p.architecture,
                                if p.variant.is_empty() { "" } else { "/" },
                                p.variant
                            )
                        })
                        .collect();
                    Error::not_found(format!(
                        "{r}: no image for {}/{} in its index (it has {})",
                        host.os,
                        host.architecture,
                        if have.is_empty() {
                            "none".to_owned()
                        } else {
                            have.join(", ")
                        }
                    ))
                })?;
                let (ct2, body2, md) = s.manifest(d.digest.as_str(), Some(&d.digest)).await?;
                match manifest::parse_document(&ct2, &body2)? {
                    Document::Manifest(m) => (Some((top.clone(), body)), md, body2, m),
                    Document::Index(_) => {
                        return Err(Error::invalid(
                            "manifest",
                            format!("{r}: an index inside an index"),
                        ))
                    }
                }
            }
        };
        let compressions: Vec<Compression> = m
            .layers
            .iter()
            .map(|l| manifest::layer_compression(&l.media_type))
            .collect::<Result<_>>()?;
        let config_body = match self.store.read_blob(&m.config.digest) {
            Some(b) => b,
            None => {
                s.small_blob(&m.config.digest, m.config.size, manifest::CONFIG_MAX)
                    .await?
            }
        };
        let config = manifest::parse_config(&config_body)?;
        if config.rootfs.diff_ids.len() != m.layers.len() {
            return Err(Error::invalid(
                "image config",
                format!(
                    "{r}: {} layers in the manifest, {} diff_ids in the config",
                    m.layers.len(),
                    config.rootfs.diff_ids.len()
                ),
            ));
        }
        let chains = manifest::chain_ids(&config.rootfs.diff_ids);
        let layers: Vec<LayerRef> = m
            .layers
            .iter()
            .zip(&config.rootfs.diff_ids)
            .zip(&chains)
            .map(|((l, diff), chain)| LayerRef {
                chain_id: chain.clone(),
                diff_id: diff.clone(),
                digest: l.digest.clone(),
                size: l.size,
                media_type: l.media_type.clone(),
            })
            .collect();
        progress
            .layers_total
            .store(layers.len() as u32, Ordering::Relaxed);
        progress
            .bytes_total
            .store(layers.iter().map(|l| l.size).sum(), Ordering::Relaxed);

        // The layers, a bounded number at a time.
        let sem = Arc::new(tokio::sync::Semaphore::new(
            self.settings.max_concurrent_downloads.max(1),
        ));
        let mut tasks = Vec::new();
        for ((layer, desc), comp) in layers.iter().zip(&m.layers).zip(compressions) {
            let this = Arc::clone(self);
            let session = s.detach();
            let layer = layer.clone();
            let desc = desc.clone();
            let progress = Arc::clone(progress);
            let sem = Arc::clone(&sem);
            let source = source.clone();
            tasks.push(tokio::spawn(async move {
                let lock = this.layer_lock(&layer.chain_id);
                let _held = lock.lock().await;
                if this.store.has_layer(&layer.chain_id) {
                    progress.bytes_done.fetch_add(layer.size, Ordering::Relaxed);
                    progress.layers_done.fetch_add(1, Ordering::Relaxed);
                    return Ok::<_, Error>(None);
                }
                let _permit = sem.acquire_owned().await.expect("never closed");
                let mut s = this.client.resume(&source, session);
                let bytes = this
                    .fetch_layer(&mut s, &layer, &desc, comp, &progress)
                    .await?;
                progress.layers_done.fetch_add(1, Ordering::Relaxed);
                Ok(Some(bytes))
            }));
        }
        let mut fetched_layers = 0;
        let mut fetched_bytes = 0;
        let mut first_err = None;
        for t in tasks {
            match t.await {
                Ok(Ok(Some(b))) => {
                    fetched_layers += 1;
                    fetched_bytes += b;
                }
                Ok(Ok(None)) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    first_err.get_or_insert(Error::internal(format!("layer task: {e}")));
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        if fetched_layers > 0 {
            podscope_sys::failpoint::hit(podscope_sys::failpoint::PULL_LAYER_COMMITTED);
        }

        // Blobs, a sync, then the record that names them.
        self.store.write_blob(&m.config.digest, &config_body)?;
        self.store.write_blob(&manifest_digest, &manifest_body)?;
        if let Some((d, b)) = &index {
            self.store.write_blob(d, b)?;
        }
        podscope_sys::failpoint::hit(podscope_sys::failpoint::PULL_BLOBS_WRITTEN);
        let store = Arc::clone(self);
        tokio::task::spawn_blocking(move || store.store.sync())
            .await
            .map_err(|e| Error::internal(format!("sync: {e}")))??;
        let user = config
            .config
            .as_ref()
            .and_then(|c| c.user.clone())
            .unwrap_or_default();
        let platform = format!(
            "{}/{}{}",
            config.os,
            config.architecture,
            if config.variant.is_empty() {
                String::new()
            } else {
                format!("/{}", config.variant)
            }
        );
        let repo_digest = r.with_digest(r.digest.as_ref().unwrap_or(&top));
        let record = ImageRecord {
            id: m.config.digest.clone(),
            repo_tags: r.tagged().into_iter().collect(),
            repo_digests: vec![repo_digest],
            manifest: manifest_digest,
            index: index.map(|(d, _)| d),
            config_size: m.config.size,
            size: m.config.size + layers.iter().map(|l| l.size).sum::<u64>(),
            layers,
            user,
            platform,
            pulled_at: now_ns(),
        };
        let record = self.store.put(record)?;
        podscope_sys::failpoint::hit(podscope_sys::failpoint::PULL_RECORDED);
        Ok(Pulled {
            record,
            fetched_layers,
            fetched_bytes,
            source: format!("{}/{}", source.domain, source.path),
        })
    }

    /// Stream one layer into a new directory under tmp/, checking its
    /// size and digest as it goes and its DiffID at the end, then make it
    /// the store's. Returns the compressed bytes fetched.
    async fn fetch_layer(
        &self,
        s: &mut Session<'_>,
        layer: &LayerRef,
        desc: &Descriptor,
        comp: Compression,
        progress: &Progress,
    ) -> Result<u64> {
        let started = Instant::now();
        let what = format!("layer {}", layer.digest);
        let registry = s.registry().to_owned();
        let mut resp = s.blob(&desc.digest).await?;
        let work = self.store.temp_dir("layer")?;
        let root = work.join("root");
        std::fs::create_dir(&root).map_err(|e| Error::io("create layer root", e))?;
        let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
        let unpack_root = root.clone();
        let want = desc.digest.clone();
        let limits = self.settings.layer_limits;
        let unpacker = tokio::task::spawn_blocking(move || {
            let mut reader = ChannelReader {
                rx,
                cur: bytes::Bytes::new(),
                hash: Digester::for_digest(&want),
                bytes: 0,
            };
            let out = unpack::unpack(&mut reader, &comp, &unpack_root, &limits);
            // Whatever follows the compressed stream is part of the blob.
            let drained = std::io::copy(&mut reader, &mut std::io::sink());
            (out, drained.map(|_| ()), reader.hash.finish(), reader.bytes)
        });
        let mut got: u64 = 0;
        let mut download_err = None;
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    got += c.len() as u64;
                    if got > desc.size {
                        download_err = Some(Error::new(
                            ErrorKind::RegistryUnavailable,
                            format!("registry {registry}: {what}: more than the {} bytes the manifest says", desc.size),
                        ));
                        break;
                    }
                    progress
                        .bytes_done
                        .fetch_add(c.len() as u64, Ordering::Relaxed);
                    if tx.send(c).await.is_err() {
                        break; // the unpacker stopped: its error says why
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    download_err = Some(transport_error(
                        &registry,
                        &format!("{what} after {got} of {} bytes", desc.size),
                        &e,
                    ));
                    break;
                }
            }
        }
        drop(tx);
        let (unpacked, drained, computed, streamed) = unpacker
            .await
            .map_err(|e| Error::internal(format!("unpack task: {e}")))?;
        let fail = |e: Error| {
            let _ = std::fs::remove_dir_all(&work);
            Err(e)
        };
        if let Some(e) = download_err {
            return fail(e);
        }
        if got < desc.size {
            return fail(Error::new(
                ErrorKind::RegistryUnavailable,
                format!(
                    "registry {registry}: {what}: the connection ended after {got} of {} bytes",
                    desc.size
                ),
            ));
        }
        let unpacked = match unpacked {
            Ok(u) => u,
            Err(e) => return fail(e.context(format!("{what} ({})", layer.media_type))),
        };
        if let Err(e) = drained {
            return fail(Error::io(format!("{what}: read"), e));
        }
        // Whatever the algorithm, before the layer is the store's (its
        // unpacked files go with `work` otherwise).
        if streamed != desc.size || computed != desc.digest {
            return fail(Error::new(
                ErrorKind::RegistryUnavailable,
                format!("registry {registry}: {what}: content does not match its digest (got {computed}, {streamed} bytes)"),
            ));
        }
        if unpacked.diff_id != layer.diff_id {
            return fail(Error::invalid(
                "image config",
                format!(
                    "{what}: uncompressed it is {}, the config says {}",
                    unpacked.diff_id, layer.diff_id
                ),
            ));
        }
        let info = LayerInfo {
            chain_id: layer.chain_id.clone(),
            diff_id: layer.diff_id.clone(),
            tar_bytes: unpacked.tar_bytes,
        };
        if let Err(e) = self.store.commit_layer(&work, &info) {
            return fail(e);
        }
        tracing::debug!(
            "layer {} ({} bytes, {} entries) in {} ms",
            layer.digest,
            got,
            unpacked.entries,
            started.elapsed().as_millis()
        );
        Ok(got)
    }
}

/// The unpacker's input: chunks from the download, hashed as read.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    cur: bytes::Bytes,
    hash: Digester,
    bytes: u64,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(c) => self.cur = c,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        let chunk = self.cur.split_to(n);
        buf[..n].copy_from_slice(&chunk);
        self.hash.update(&chunk);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// Every source failed: one error naming each, of the kind that says most
/// (a definite answer from some registry over "unreachable").
fn combine(r: &Reference, failures: Vec<Error>) -> Error {
    let rank = |k: ErrorKind| match k {
        ErrorKind::InvalidArgument => 5,
        ErrorKind::RegistryUnauthorized => 4,
        ErrorKind::RegistryDenied => 3,
        ErrorKind::NotFound => 2,
        ErrorKind::RegistryUnavailable => 1,
        _ => 0,
    };
    let kind = failures
        .iter()
        .map(|e| e.kind())
        .max_by_key(|k| rank(*k))
        .unwrap_or(ErrorKind::Internal);
    let msgs: Vec<String> = failures.iter().map(|e| e.to_string()).collect();
    Error::new(kind, format!("pull {r}: {}", msgs.join("; ")))
}

pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
