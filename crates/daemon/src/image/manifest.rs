//! The documents a pull reads: OCI image indexes and manifests, Docker
//! schema 2 manifest lists and manifests (the same shapes under other
//! media types), and the image config. Only the fields podscope uses are
//! typed; the bytes stay as fetched (their digest is what names them).
//! Pure.

use podscope_api::domain::platform::Platform;
use podscope_api::error::{Error, Result};
use podscope_api::reference::Digest;
use serde::{Deserialize, Serialize};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_SCHEMA1: &str = "application/vnd.docker.distribution.manifest.v1";

/// What the manifests endpoint is asked for, best first.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// Largest manifest or index accepted (containerd's and distribution's
/// limit is 4 MiB); configs may be larger, up to `CONFIG_MAX`.
pub const MANIFEST_MAX: u64 = 4 << 20;
pub const CONFIG_MAX: u64 = 8 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: Digest,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<PlatformSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct PlatformSpec {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub variant: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    #[serde(default)]
    schema_version: u32,
    #[serde(default)]
    media_type: String,
    #[serde(default)]
    manifests: Option<serde_json::Value>,
    #[serde(default)]
    layers: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Index {
    pub manifests: Vec<Descriptor>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// A fetched manifests-endpoint document.
#[derive(Debug, Clone)]
pub enum Document {
    Index(Index),
    Manifest(Manifest),
}

/// Decide what `body` is from the Content-Type the registry sent and the
/// document's own mediaType (either may be missing; they must not
/// disagree on the kind).
pub fn parse_document(content_type: &str, body: &[u8]) -> Result<Document> {
    let probe: Probe = serde_json::from_slice(body)
        .map_err(|e| Error::invalid("manifest", format!("not a JSON manifest: {e}")))?;
    let ct = content_type.split(';').next().unwrap_or("").trim();
    let kind = if !probe.media_type.is_empty() {
        probe.media_type.as_str()
    } else if !ct.is_empty() && ct != "application/json" && ct != "text/plain" {
        ct
    } else if probe.manifests.is_some() {
        OCI_INDEX
    } else if probe.layers.is_some() {
        OCI_MANIFEST
    } else {
        ""
    };
    if kind.starts_with(DOCKER_SCHEMA1) || probe.schema_version == 1 {
        return Err(Error::invalid(
            "manifest",
            "Docker schema 1 manifests are not supported (deprecated since 2017); push the image again with a current tool",
        ));
    }
    match kind {
        OCI_INDEX | DOCKER_LIST => Ok(Document::Index(
            serde_json::from_slice(body).map_err(|e| Error::invalid("index", e.to_string()))?,
        )),
        OCI_MANIFEST | DOCKER_MANIFEST => Ok(Document::Manifest(
            serde_json::from_slice(body).map_err(|e| Error::invalid("manifest", e.to_string()))?,
        )),
        other => Err(Error::invalid(
            "manifest",
            format!("unsupported media type {other:?}"),
        )),
    }
}

/// The layer media types a pull unpacks, and how each is compressed.
pub fn layer_compression(media_type: &str) -> Result<Compression> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar" => Ok(Compression::None),
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Ok(Compression::Gzip),
        "application/vnd.oci.image.layer.v1.tar+zstd"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd" => Ok(Compression::Zstd),
        other => Err(Error::invalid(
            "manifest",
            format!("unsupported layer media type {other:?}"),
        )),
    }
}

/// Choose the entry of an index for `host`. Rules (containerd's default
/// matcher): os and architecture must be equal; an entry's variant must be
/// the host's, or absent, or — on arm — an older one the host also runs
/// (v7 runs v6 and v5; arm64 v8 is arm64 without a variant). amd64 entries
/// with a micro-architecture variant (v2, v3, v4) are not chosen: podscope
/// does not probe the CPU for them, and v1 (or none) runs everywhere. The
/// exact variant wins over an older one, which wins over none; among
/// equals, the first in the index.
pub fn choose<'a>(index: &'a Index, host: &Platform) -> Option<&'a Descriptor> {
    let rank = |d: &Descriptor| -> Option<u32> {
        let p = d.platform.as_ref()?;
        if p.os != host.os || p.architecture != host.architecture {
            return None;
        }
        let v = normal_variant(&p.architecture, &p.variant);
        let h = normal_variant(host.architecture, host.variant);
        if v == h {
            return Some(3);
        }
        if v.is_empty() {
            return Some(1);
        }
        if host.architecture == "arm" {
            let num = |s: &str| s.strip_prefix('v').and_then(|n| n.parse::<u32>().ok());
            if let (Some(a), Some(b)) = (num(&v), num(&h)) {
                if a < b {
                    return Some(2);
                }
            }
        }
        None
    };
    let mut best: Option<(u32, &Descriptor)> = None;
    for d in &index.manifests {
        if let Some(r) = rank(d) {
            if best.is_none_or(|(b, _)| r > b) {
                best = Some((r, d));
            }
        }
    }
    best.map(|(_, d)| d)
}

fn normal_variant(arch: &str, variant: &str) -> String {
    match (arch, variant) {
        ("arm64", "v8") | ("amd64", "v1") => String::new(),
        _ => variant.to_owned(),
    }
}

/// The image config, as far as podscope reads it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ImageConfig {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub variant: String,
    #[serde(default)]
    pub created: Option<String>,
    #[serde(default)]
    pub config: Option<RunConfig>,
    pub rootfs: RootFs,
}

/// What the image says about running it (its config's `config`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RunConfig {
    #[serde(default)]
    pub user: Option<String>,
    /// `null` and absent are both "none".
    #[serde(default, deserialize_with = "null_is_empty")]
    pub entrypoint: Vec<String>,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub cmd: Vec<String>,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub env: Vec<String>,
    #[serde(default)]
    pub working_dir: Option<String>,
    /// A signal name ("SIGQUIT", "QUIT") or number ("3").
    #[serde(default)]
    pub stop_signal: Option<String>,
}

fn null_is_empty<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RootFs {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub diff_ids: Vec<Digest>,
}

pub fn parse_config(body: &[u8]) -> Result<ImageConfig> {
    let c: ImageConfig =
        serde_json::from_slice(body).map_err(|e| Error::invalid("image config", e.to_string()))?;
    if c.rootfs.kind != "layers" {
        return Err(Error::invalid(
            "image config",
            format!("rootfs.type is {:?}, not \"layers\"", c.rootfs.kind),
        ));
    }
    Ok(c)
}

/// The chain ids of a layer stack (OCI image spec: ChainID(L0) = DiffID(L0),
/// ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln))).
pub fn chain_ids(diff_ids: &[Digest]) -> Vec<Digest> {
    let mut out: Vec<Digest> = Vec::with_capacity(diff_ids.len());
    for d in diff_ids {
        let next = match out.last() {
            None => d.clone(),
            Some(prev) => Digest::sha256(format!("{prev} {d}").as_bytes()),
        };
        out.push(next);
    }
    out
}

/// CRI's uid and username from the config's `User`: "1002" → (Some(1002),
/// ""), "www-data:1004" → (None, "www-data"), "" → (None, "").
pub fn user_of(user: &str) -> (Option<i64>, String) {
    let name = user.split(':').next().unwrap_or("");
    if name.is_empty() {
        return (None, String::new());
    }
    match name.parse::<i64>() {
        Ok(uid) => (Some(uid), String::new()),
        Err(_) => (None, name.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: u8) -> Digest {
        Digest::parse(&format!("sha256:{}", format!("{n:02x}").repeat(32))).unwrap()
    }

    fn entry(n: u8, arch: &str, variant: &str) -> Descriptor {
        Descriptor {
            media_type: OCI_MANIFEST.into(),
            digest: d(n),
            size: 1,
            platform: Some(PlatformSpec {
                os: "linux".into(),
                architecture: arch.into(),
                variant: variant.into(),
            }),
            urls: vec![],
        }
    }

    fn host(arch: &'static str, variant: &'static str) -> Platform {
        Platform {
            os: "linux",
            architecture: arch,
            variant,
        }
    }

    #[test]
    fn platform_choice() {
        let idx = Index {
            manifests: vec![
                entry(1, "arm64", "v8"),
                entry(2, "amd64", "v3"),
                entry(3, "amd64", ""),
                entry(4, "arm", "v6"),
                entry(5, "arm", "v7"),
                entry(6, "amd64", ""),
            ],
        };
        assert_eq!(choose(&idx, &host("amd64", "")).unwrap().digest, d(3));
        assert_eq!(choose(&idx, &host("arm64", "v8")).unwrap().digest, d(1));
        assert_eq!(choose(&idx, &host("arm", "v7")).unwrap().digest, d(5));
        assert_eq!(choose(&idx, &host("arm", "v6")).unwrap().digest, d(4));
        assert!(choose(&idx, &host("s390x", "")).is_none());
        let only_v3 = Index {
            manifests: vec![entry(2, "amd64", "v3")],
        };
        assert!(choose(&only_v3, &host("amd64", "")).is_none());
        let older = Index {
            manifests: vec![entry(4, "arm", "v6"), entry(7, "arm", "")],
        };
        assert_eq!(choose(&older, &host("arm", "v7")).unwrap().digest, d(4));
    }

    #[test]
    fn documents_by_media_type() {
        let m = format!(
            r#"{{"schemaVersion":2,"mediaType":"{DOCKER_MANIFEST}","config":{{"mediaType":"x","digest":"{}","size":3}},"layers":[]}}"#,
            d(1)
        );
        assert!(matches!(
            parse_document("", m.as_bytes()).unwrap(),
            Document::Manifest(_)
        ));
        let i = r#"{"schemaVersion":2,"manifests":[]}"#;
        assert!(matches!(
            parse_document(OCI_INDEX, i.as_bytes()).unwrap(),
            Document::Index(_)
        ));
        assert!(matches!(
            parse_document("application/json", i.as_bytes()).unwrap(),
            Document::Index(_)
        ));
        let e = parse_document("", br#"{"schemaVersion":1,"fsLayers":[]}"#).unwrap_err();
        assert!(e.to_string().contains("schema 1"), "{e}");
        let e = parse_document("", b"<html>").unwrap_err();
        assert!(e.to_string().contains("not a JSON manifest"), "{e}");
    }

    #[test]
    fn chain_ids_follow_the_spec() {
        let ids = chain_ids(&[d(1), d(2)]);
        assert_eq!(ids[0], d(1));
        assert_eq!(
            ids[1],
            Digest::sha256(format!("{} {}", d(1), d(2)).as_bytes())
        );
    }

    #[test]
    fn users() {
        assert_eq!(user_of("1002"), (Some(1002), String::new()));
        assert_eq!(user_of("1003:1004"), (Some(1003), String::new()));
        assert_eq!(user_of("www-data"), (None, "www-data".into()));
        assert_eq!(user_of("www-data:1004"), (None, "www-data".into()));
        assert_eq!(user_of(""), (None, String::new()));
    }

    #[test]
    fn layer_types() {
        assert_eq!(
            layer_compression("application/vnd.oci.image.layer.v1.tar+zstd").unwrap(),
            Compression::Zstd
        );
        assert!(layer_compression("application/x-foo").is_err());
    }
}
