//! The image figures: a cold pull of a ~50 MiB, 5-layer image against
//! `skopeo copy` of it in the same run, unpack throughput against `tar -x`
//! of the same layers, PullImage of a present image, the daemon's memory
//! during a pull, and ListImages with 200 images. The images are made
//! here from the machine's own files and pushed straight to the harness
//! registry (127.0.0.1:5000) with the Distribution API.

use super::{daemon_pid, ms, pct, rss_pss, sh, Table};
use cri_api::v1 as cri;
use cri_api::v1::image_service_client::ImageServiceClient;
use flate2::write::GzEncoder;
use podscope_api::image::PullOptions;
use podscope_api::reference::Digest;
use podscope_api::Client;
use podscoped::image::manifest::Compression;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const REGISTRY: &str = "http://127.0.0.1:5000";
const BIG: &str = "127.0.0.1:5000/bench/big:latest";
const WORK: &str = "/var/lib/podscope/bench-images";

struct Layer {
    gz: Vec<u8>,
    diff_id: Digest,
    tar_bytes: u64,
}

/// Files of /usr/lib (the machine's own: binaries, libraries, data, as an
/// image holds), tarred in sorted order into layers of `per` compressed
/// bytes, `n` of them.
fn make_layers(n: usize, per: usize) -> Vec<Layer> {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![PathBuf::from("/usr/lib")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries.into_iter().rev() {
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) if m.is_file() && m.len() < (8 << 20) => files.push(p),
                _ => {}
            }
        }
    }
    let mut layers = Vec::new();
    let mut it = files.into_iter();
    for _ in 0..n {
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        let mut tar_bytes = 0u64;
        let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
        {
            let mut w = HashWriter {
                inner: &mut gz,
                hash: &mut hasher,
                n: &mut tar_bytes,
            };
            let mut b = tar::Builder::new(&mut w);
            b.follow_symlinks(false);
            for p in it.by_ref() {
                let name = p.strip_prefix("/").unwrap();
                if b.append_path_with_name(&p, name).is_err() {
                    continue;
                }
                if b.get_ref().inner.get_ref().len() >= per {
                    break;
                }
            }
            b.finish().unwrap();
        }
        let gz = gz.finish().unwrap();
        let diff_id = Digest::sha256_of_hex(&podscope_api::reference::hex(
            &sha2::Digest::finalize(hasher),
        ));
        layers.push(Layer {
            gz,
            diff_id,
            tar_bytes,
        });
    }
    layers
}

/// One small file, as a layer.
fn small_layer() -> Layer {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_path("etc/bench").unwrap();
    h.set_size(5);
    h.set_mode(0o644);
    h.set_cksum();
    b.append(&h, b"bench".as_slice()).unwrap();
    let tar = b.into_inner().unwrap();
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    gz.write_all(&tar).unwrap();
    Layer {
        gz: gz.finish().unwrap(),
        diff_id: Digest::sha256(&tar),
        tar_bytes: tar.len() as u64,
    }
}

struct HashSink(sha2::Sha256);

impl Write for HashSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(&mut self.0, buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct HashWriter<'a, W: Write> {
    inner: &'a mut W,
    hash: &'a mut sha2::Sha256,
    n: &'a mut u64,
}

impl<W: Write> Write for HashWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let k = self.inner.write(buf)?;
        sha2::Digest::update(self.hash, &buf[..k]);
        *self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Push a blob with a monolithic upload (POST with ?digest=).
async fn push_blob(http: &reqwest::Client, repo: &str, bytes: Vec<u8>) -> Digest {
    let d = Digest::sha256(&bytes);
    let head = http
        .head(format!("{REGISTRY}/v2/{repo}/blobs/{d}"))
        .send()
        .await
        .unwrap();
    if head.status().is_success() {
        return d;
    }
    // An upload session, then its one PUT with the whole blob.
    let r = http
        .post(format!("{REGISTRY}/v2/{repo}/blobs/uploads/"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202, "start upload");
    let loc = r.headers()["location"].to_str().unwrap().to_owned();
    let url = if loc.starts_with("http") {
        loc
    } else {
        format!("{REGISTRY}{loc}")
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let r = http
        .put(format!("{url}{sep}digest={d}"))
        .header("Content-Type", "application/octet-stream")
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "push blob: {}", r.status());
    d
}

/// Push an image of `layers` (already pushed: digest, size, diff id) with
/// a config labelled `label`.
async fn push_image(
    http: &reqwest::Client,
    repo: &str,
    tag: &str,
    layers: &[(Digest, usize, Digest)],
    label: &str,
) {
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": {"bench": label}},
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.2.to_string()).collect::<Vec<_>>()},
    })
    .to_string()
    .into_bytes();
    let csize = config.len();
    let cd = push_blob(http, repo, config).await;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd.to_string(), "size": csize},
        "layers": layers.iter().map(|(d, s, _)| serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d.to_string(), "size": s})).collect::<Vec<_>>(),
    })
    .to_string();
    let r = http
        .put(format!("{REGISTRY}/v2/{repo}/manifests/{tag}"))
        .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "push manifest: {}", r.status());
}

async fn forget(m: &Client, name: &str) {
    if let Ok((s, _)) = m.image_status(name).await {
        m.remove_image(&s.id).await.unwrap();
    }
}

/// Wait until the store holds no layer directories (the GC after Remove).
async fn store_empty() {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir("/var/lib/podscope/images/layers")
        .map(|d| d.count())
        .unwrap_or(0)
        > 0
    {
        assert!(Instant::now() < deadline, "the GC left layers");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    pct(&mut v, 0.5)
}

/// The bench's big image (~50 MiB in 5 gzip layers of /usr/lib's files),
/// pushed to the harness registry as `BIG`: its layers.
async fn push_big(http: &reqwest::Client) -> Vec<Layer> {
    let layers = make_layers(5, 10 << 20);
    let total: usize = layers.iter().map(|l| l.gz.len()).sum();
    let tar_total: u64 = layers.iter().map(|l| l.tar_bytes).sum();
    let mut pushed = Vec::new();
    for l in &layers {
        let d = push_blob(http, "bench/big", l.gz.clone()).await;
        pushed.push((d, l.gz.len(), l.diff_id.clone()));
    }
    push_image(http, "bench/big", "latest", &pushed, "big").await;
    eprintln!(
        "bench: images: {} layers, {:.1} MiB compressed, {:.1} MiB of tar",
        layers.len(),
        total as f64 / 1048576.0,
        tar_total as f64 / 1048576.0
    );
    layers
}

/// Push the big image unless the registry has it (the containers section
/// pulls it when run without the images section).
pub async fn ensure_big() {
    if !super::anchor::big_image_pushed() {
        push_big(&reqwest::Client::new()).await;
    }
}

pub async fn images(m: &Client, t: &mut Table) {
    let _ = std::fs::remove_dir_all(WORK);
    std::fs::create_dir_all(WORK).unwrap();
    let http = reqwest::Client::new();
    let layers = push_big(&http).await;
    let total: usize = layers.iter().map(|l| l.gz.len()).sum();
    let tar_total: u64 = layers.iter().map(|l| l.tar_bytes).sum();

    // Cold pulls, alternating with skopeo copies of the same image.
    forget(m, BIG).await;
    store_empty().await;
    let pid = daemon_pid();
    let (idle, _) = rss_pss(pid);
    let (mut ours, mut theirs, mut peak) = (Vec::new(), Vec::new(), idle);
    for _ in 0..3 {
        let dir = format!("{WORK}/skopeo");
        let _ = std::fs::remove_dir_all(&dir);
        let t0 = Instant::now();
        sh(&format!(
            "skopeo copy --quiet --src-tls-verify=false docker://{BIG} oci:{dir}:latest"
        ));
        theirs.push(t0.elapsed());
        let _ = std::fs::remove_dir_all(&dir);

        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d2 = done.clone();
        let sampler = std::thread::spawn(move || {
            let mut top = 0;
            while !d2.load(std::sync::atomic::Ordering::Relaxed) {
                top = top.max(rss_pss(pid).0);
                std::thread::sleep(Duration::from_millis(5));
            }
            top
        });
        let t0 = Instant::now();
        m.pull_image(BIG, &PullOptions::default()).await.unwrap();
        ours.push(t0.elapsed());
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        peak = peak.max(sampler.join().unwrap());
        forget(m, BIG).await;
        store_empty().await;
    }
    let (o, s) = (median(ours), median(theirs));
    let (pull_time, skopeo_time) = (o, s);
    let ratio = o.as_secs_f64() / s.as_secs_f64();
    t.add(
        &format!(
            "cold pull, {:.0} MiB in 5 layers, median of 3 / skopeo copy",
            total as f64 / 1048576.0
        ),
        "<= 1.0x skopeo",
        format!("{} / {} = {ratio:.2}x", ms(o), ms(s)),
        Some(ratio <= 1.0),
    );
    let grew = peak.saturating_sub(idle);
    t.add(
        "daemon RSS during the pull, above idle",
        "<= 24 MiB",
        format!(
            "{:.1} MiB (idle {:.1} MiB)",
            grew as f64 / 1024.0,
            idle as f64 / 1024.0
        ),
        Some(grew <= 24 * 1024),
    );

    // Unpack throughput: the store's unpacker against GNU tar, the same
    // compressed layers, one after another, on the same filesystem.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for (i, l) in layers.iter().enumerate() {
        let src = format!("{WORK}/layer-{i}.tar.gz");
        std::fs::write(&src, &l.gz).unwrap();
    }
    for round in 0..3 {
        let dir = PathBuf::from(format!("{WORK}/unpack-{round}"));
        let t0 = Instant::now();
        for (i, l) in layers.iter().enumerate() {
            let d = dir.join(i.to_string());
            std::fs::create_dir_all(&d).unwrap();
            let f = std::fs::File::open(format!("{WORK}/layer-{i}.tar.gz")).unwrap();
            let u = podscoped::image::unpack::unpack(
                std::io::BufReader::with_capacity(256 << 10, f),
                &Compression::Gzip,
                &d,
                &podscoped::image::unpack::Limits::default(),
            )
            .unwrap();
            assert_eq!(u.diff_id, l.diff_id);
        }
        ours.push(t0.elapsed());
        let _ = std::fs::remove_dir_all(&dir);
        let t0 = Instant::now();
        for i in 0..layers.len() {
            sh(&format!(
                "mkdir -p {0}/{i} && tar -xzf {WORK}/layer-{i}.tar.gz -C {0}/{i}",
                dir.display()
            ));
        }
        theirs.push(t0.elapsed());
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (o, s) = (median(ours), median(theirs));
    let tar_time = s;
    let mib = tar_total as f64 / 1048576.0;
    let (ro, rs) = (mib / o.as_secs_f64(), mib / s.as_secs_f64());
    t.add(
        "unpack throughput (5 gzip layers) / tar -xzf",
        ">= 0.8x tar",
        format!("{ro:.0} / {rs:.0} MiB/s = {:.2}x", ro / rs),
        Some(ro / rs >= 0.8),
    );

    // skopeo fetches and checks the blobs; the pull also makes them
    // usable. What the tools take for both:
    let both = skopeo_time + tar_time;
    t.add(
        "cold pull / (skopeo copy + tar -xzf of its layers)",
        "report",
        format!(
            "{} / {} = {:.2}x",
            ms(pull_time),
            ms(both),
            pull_time.as_secs_f64() / both.as_secs_f64()
        ),
        None,
    );

    // Where a pull's CPU goes, one thread, the same layers: inflating,
    // then inflating with the two digests (blob and DiffID), then all of
    // the unpack (above). skopeo does the blob digest and the write only.
    let (mut inflate, mut hashed) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let t0 = Instant::now();
        for l in &layers {
            let mut d = flate2::read::MultiGzDecoder::new(l.gz.as_slice());
            std::io::copy(&mut d, &mut std::io::sink()).unwrap();
        }
        inflate.push(t0.elapsed());
        let t0 = Instant::now();
        for l in &layers {
            let _ = Digest::sha256(&l.gz);
            let mut d = flate2::read::MultiGzDecoder::new(l.gz.as_slice());
            let mut h = HashSink(<sha2::Sha256 as sha2::Digest>::new());
            std::io::copy(&mut d, &mut h).unwrap();
        }
        hashed.push(t0.elapsed());
    }
    t.add(
        "pull CPU, one thread: inflate / + digests / whole unpack",
        "report",
        format!(
            "{} / {} / {}",
            ms(median(inflate)),
            ms(median(hashed)),
            ms(Duration::from_secs_f64(mib / ro))
        ),
        None,
    );

    // PullImage of a present image, through the CRI (a tag: the registry
    // is asked for the manifest, nothing else).
    m.pull_image(BIG, &PullOptions::default()).await.unwrap();
    let mut img = image_client().await;
    let req = || cri::PullImageRequest {
        image: Some(cri::ImageSpec {
            image: BIG.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut present = Vec::new();
    for _ in 0..50 {
        let t0 = Instant::now();
        img.pull_image(req()).await.unwrap();
        present.push(t0.elapsed());
    }
    t.add_within(
        "CRI PullImage of an image present, p50 (by tag)",
        pct(&mut present, 0.5),
        Duration::from_millis(20),
    );

    // ListImages with 200 images: small ones with one small layer, each
    // its own config.
    let small = small_layer();
    for i in 0..199 {
        let repo = format!("bench/many-{i}");
        let d = push_blob(&http, &repo, small.gz.clone()).await;
        let l = (d, small.gz.len(), small.diff_id.clone());
        push_image(
            &http,
            &repo,
            "latest",
            std::slice::from_ref(&l),
            &format!("many-{i}"),
        )
        .await;
        m.pull_image(
            &format!("127.0.0.1:5000/bench/many-{i}:latest"),
            &PullOptions::default(),
        )
        .await
        .unwrap();
    }
    let n = m.list_images(&Default::default()).await.unwrap().len();
    let mut list = Vec::new();
    for _ in 0..50 {
        let t0 = Instant::now();
        let l = img
            .list_images(cri::ListImagesRequest { filter: None })
            .await
            .unwrap()
            .into_inner()
            .images;
        list.push(t0.elapsed());
        assert_eq!(l.len(), n);
    }
    t.add_within(
        &format!("CRI ListImages p50, {n} images"),
        pct(&mut list, 0.5),
        Duration::from_millis(10),
    );
    for s in m.list_images(&Default::default()).await.unwrap() {
        m.remove_image(&s.id).await.unwrap();
    }
    let _ = std::fs::remove_dir_all(WORK);
}

async fn image_client() -> ImageServiceClient<tonic::transport::Channel> {
    let ch = cri_api::channel(Path::new(super::CRI_SOCKET))
        .await
        .expect("connect to the CRI socket");
    ImageServiceClient::new(ch)
}
