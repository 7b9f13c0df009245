//! The dictionaries of `org.podscope.Sandbox1.Images`, one Rust type each
//! (the same rules as `sandbox`: inputs deny unknown keys, outputs need
//! every key and ignore new ones).

use serde::Deserialize;
use zbus::zvariant::{SerializeDict, Type};

/// Pull's `options`: the registry credentials, as CRI's AuthConfig has
/// them. Absent: the auth files (containers-auth.json(5)), else anonymous.
#[derive(Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct PullOptions {
    pub username: Option<String>,
    pub password: Option<String>,
    /// base64 of `username:password`.
    pub auth: Option<String>,
    /// An OAuth2 refresh token for the registry's token service.
    pub identity_token: Option<String>,
    /// A bearer token sent as is.
    pub registry_token: Option<String>,
}

impl std::fmt::Debug for PullOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PullOptions {{ username: {:?}, .. }}", self.username)
    }
}

/// List's `filter`.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
#[serde(default, deny_unknown_fields)]
pub struct ImageFilter {
    /// Only the image this name (tag, digest or id) resolves to.
    pub image: Option<String>,
}

/// One image, as List, Status and Pull return it.
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct ImageSummary {
    /// `sha256:<config digest>`.
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    /// Config plus compressed layers, in bytes.
    pub size: u64,
    /// The config's User as written ("1002", "www-data:1004", "").
    pub user: String,
    /// The user's numeric uid, -1 when it is a name or not set.
    pub uid: i64,
    /// The user's name, "" when it is a number or not set.
    pub username: String,
    pub pinned: bool,
}

/// Status's second answer: where the image came from and what it is made of.
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct ImageInfo {
    /// The platform manifest's digest.
    pub manifest: String,
    /// The index's digest when the image was pulled through one, else "".
    pub index: String,
    /// os/architecture[/variant] from the config.
    pub platform: String,
    /// Chain ids of the layers, bottom first.
    pub layers: Vec<String>,
    /// Each layer's directory in the store (overlayfs lower directories).
    pub layer_dirs: Vec<String>,
    /// The config document, as pulled; "" for a caller that is not root
    /// (its environment and history may hold secrets).
    pub config: String,
    /// Unix time in nanoseconds.
    pub pulled_at: u64,
}

impl ImageInfo {
    /// The document CRI's verbose ImageStatus carries under "info" and
    /// `podscopectl inspecti` prints: the config as `imageSpec`, as
    /// containerd's.
    pub fn to_json(&self) -> serde_json::Value {
        let config: serde_json::Value =
            serde_json::from_str(&self.config).unwrap_or(serde_json::Value::Null);
        serde_json::json!({
            "manifest": self.manifest,
            "index": self.index,
            "platform": self.platform,
            "chainIDs": self.layers,
            "layerDirs": self.layer_dirs,
            "pulledAt": self.pulled_at,
            "imageSpec": config,
        })
    }
}

/// FsInfo's answer: the image store's filesystem use.
#[derive(Debug, Clone, PartialEq, Eq, SerializeDict, Deserialize, Type)]
#[zvariant(signature = "a{sv}")]
pub struct ImageFsInfo {
    pub mountpoint: String,
    pub used_bytes: u64,
    pub inodes_used: u64,
    pub images: u32,
    /// The containers' writable layers: where they are (`mountpoint` when
    /// on the images' filesystem), their bytes and inodes.
    pub containers_mountpoint: String,
    pub containers_used_bytes: u64,
    pub containers_inodes_used: u64,
    /// Unix time in nanoseconds of the reading.
    pub timestamp: u64,
}
