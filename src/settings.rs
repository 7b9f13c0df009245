//! `/etc/podscope/podscope.toml`: every key optional, unknown keys rejected
//! (a typo should not silently fall back to a default). Defaults are
//! documented in `packaging/podscope.toml` (installed as the default
//! /etc/podscope/podscope.toml).

use crate::domain::slice::validate_slice_name;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const DEFAULT_CONFIG_PATH: &str = "/etc/podscope/podscope.toml";

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Persistent state (checkpoints).
    pub state_dir: PathBuf,
    /// Runtime files (per-sandbox resolv.conf, hostname, ...).
    pub run_dir: PathBuf,
    /// The podscope-init binary; empty = next to podscoped.
    pub init_path: PathBuf,
    /// Slice for pods without a cgroup parent.
    pub default_slice: String,
    /// Runtime handlers accepted in `runtime_handler` (the empty handler is
    /// always accepted and means the default).
    pub runtime_handlers: Vec<String>,
    /// Upper bound for starting a pod (init + scope job).
    pub start_timeout_ms: u64,
    /// Upper bound for stopping a pod's scope before it is killed.
    pub stop_timeout_ms: u64,
    /// CNI network config lists (`.conflist`, `.conf`, `.json`).
    pub cni_conf_dir: PathBuf,
    /// Where CNI plugins are looked up, in order.
    pub cni_bin_dirs: Vec<PathBuf>,
    /// The CNI network to use; empty = the lexically first valid config.
    pub cni_network: String,
    /// A CNI plugin still running after this long is killed and its step fails.
    pub cni_plugin_timeout_ms: u64,
    /// A polkit check still unanswered after this long is a denial (a
    /// stalled polkitd or agent must not keep calls pending forever); the
    /// limit for a caller that allows interactive authorization (someone
    /// typing a password) is ten times as long.
    pub polkit_timeout_ms: u64,
    /// The image store (blobs, unpacked layers, image records).
    pub image_dir: PathBuf,
    /// Connecting to a registry takes at most this long.
    pub pull_connect_timeout_ms: u64,
    /// A registry that sends nothing for this long, on any request or in
    /// the middle of a blob, hangs: the pull fails with RegistryUnavailable.
    pub pull_stall_timeout_ms: u64,
    /// Layers of one pull fetched at once.
    pub max_concurrent_downloads: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            state_dir: "/var/lib/podscope".into(),
            run_dir: "/run/podscope".into(),
            init_path: PathBuf::new(),
            default_slice: "podscope.slice".into(),
            runtime_handlers: vec!["podscope".into()],
            start_timeout_ms: 10_000,
            stop_timeout_ms: 10_000,
            cni_conf_dir: "/etc/cni/net.d".into(),
            cni_bin_dirs: vec![
                "/opt/cni/bin".into(),
                "/usr/lib/cni".into(),
                "/usr/libexec/cni".into(),
            ],
            cni_network: String::new(),
            cni_plugin_timeout_ms: 60_000,
            polkit_timeout_ms: 25_000,
            image_dir: "/var/lib/podscope/images".into(),
            pull_connect_timeout_ms: 30_000,
            pull_stall_timeout_ms: 60_000,
            max_concurrent_downloads: 3,
        }
    }
}

impl Settings {
    /// Load `path`; a missing file means all defaults.
    pub fn load(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
        };
        Self::parse(&text).map_err(|e| e.context(format!("config {}", path.display())))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let mut s: Settings =
            toml::from_str(text).map_err(|e| Error::invalid("config", e.message().to_owned()))?;
        validate_slice_name(&s.default_slice).map_err(|e| e.context("default_slice"))?;
        for (name, v) in [
            ("start_timeout_ms", s.start_timeout_ms),
            ("stop_timeout_ms", s.stop_timeout_ms),
            ("cni_plugin_timeout_ms", s.cni_plugin_timeout_ms),
            ("polkit_timeout_ms", s.polkit_timeout_ms),
            ("pull_connect_timeout_ms", s.pull_connect_timeout_ms),
            ("pull_stall_timeout_ms", s.pull_stall_timeout_ms),
            (
                "max_concurrent_downloads",
                u64::from(s.max_concurrent_downloads),
            ),
        ] {
            if v == 0 {
                return Err(Error::invalid(name, "must be greater than 0"));
            }
        }
        if s.init_path.as_os_str().is_empty() {
            s.init_path = std::env::current_exe()
                .ok()
                .and_then(|p| p.parent().map(|d| d.join("podscope-init")))
                .unwrap_or_else(|| "/usr/libexec/podscope/podscope-init".into());
        }
        Ok(s)
    }

    pub fn start_timeout(&self) -> Duration {
        Duration::from_millis(self.start_timeout_ms)
    }
    pub fn stop_timeout(&self) -> Duration {
        Duration::from_millis(self.stop_timeout_ms)
    }

    pub fn cni(&self) -> crate::cni::CniSettings {
        crate::cni::CniSettings {
            conf_dir: self.cni_conf_dir.clone(),
            bin_dirs: self.cni_bin_dirs.clone(),
            network: self.cni_network.clone(),
            plugin_timeout: Duration::from_millis(self.cni_plugin_timeout_ms),
        }
    }

    pub fn images(&self) -> crate::image::ImageSettings {
        let mut i = crate::image::ImageSettings::with_store(self.image_dir.clone());
        i.max_concurrent_downloads = self.max_concurrent_downloads as usize;
        i.timeouts = crate::image::client::Timeouts {
            connect: Duration::from_millis(self.pull_connect_timeout_ms),
            stall: Duration::from_millis(self.pull_stall_timeout_ms),
        };
        i
    }

    pub fn handler_known(&self, handler: &str) -> bool {
        handler.is_empty() || self.runtime_handlers.iter().any(|h| h == handler)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_defaults() {
        let s = Settings::parse("").unwrap();
        assert_eq!(s.state_dir, Path::new("/var/lib/podscope"));
        assert_eq!(s.default_slice, "podscope.slice");
        assert!(s.handler_known(""));
        assert!(s.handler_known("podscope"));
        assert!(!s.handler_known("kata"));
        assert!(s.init_path.ends_with("podscope-init"));
        assert_eq!(s.cni().conf_dir, Path::new("/etc/cni/net.d"));
        assert_eq!(s.cni_bin_dirs.len(), 3);
        let i = s.images();
        assert_eq!(i.store_dir, Path::new("/var/lib/podscope/images"));
        assert_eq!(i.max_concurrent_downloads, 3);
        assert_eq!(
            i.registries_conf,
            Path::new("/etc/containers/registries.conf")
        );
    }

    #[test]
    fn keys_are_read_and_checked() {
        let s =
            Settings::parse("stop_timeout_ms = 500\nruntime_handlers = [\"a\", \"b\"]\n").unwrap();
        assert_eq!(s.stop_timeout(), Duration::from_millis(500));
        assert!(s.handler_known("b"));
        let e = Settings::parse("stop_timeut_ms = 5").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        assert!(Settings::parse("default_slice = \"nope\"").is_err());
        assert!(Settings::parse("start_timeout_ms = 0").is_err());
        assert!(Settings::parse("max_concurrent_downloads = 0").is_err());
        let s = Settings::parse("pull_stall_timeout_ms = 2000\nimage_dir = \"/srv/img\"").unwrap();
        assert_eq!(s.images().timeouts.stall, Duration::from_secs(2));
        assert_eq!(s.images().store_dir, Path::new("/srv/img"));
    }
}
