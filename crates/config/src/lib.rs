//! `/etc/podscope/podscope.toml`: every key optional, unknown keys rejected
//! (a typo should not silently fall back to a default). Defaults are
//! documented in `packaging/podscope.toml` (installed as the default
//! /etc/podscope/podscope.toml).

mod command_line;

pub use command_line::{CommandLine, Spec as CommandLineSpec, DEFAULT_CONFIG_PATH};
use podscope_api::domain::slice::validate_slice_name;
use podscope_api::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which OCI runtime a handler runs, for the flags each takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// crun: run with `--cgroup-manager=disabled`, as the guest of the
    /// container's unit, whose cgroup systemd owns.
    Crun,
    /// runc: given the unit's own cgroup as `cgroupsPath`.
    Runc,
}

impl RuntimeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Crun => "crun",
            RuntimeKind::Runc => "runc",
        }
    }
}

/// One OCI runtime handler: what a RuntimeClass's `handler` names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeHandler {
    /// The runtime binary.
    pub path: PathBuf,
    /// Which runtime it is; by default the binary's file name says
    /// ("crun" or "runc").
    #[serde(default)]
    pub kind: Option<RuntimeKind>,
    /// Its state directory (`--root`); empty means the runtime's own
    /// default (/run/crun, /run/runc), where `crun list` and `runc list`
    /// look.
    #[serde(default)]
    pub root: PathBuf,
}

impl RuntimeHandler {
    pub fn kind(&self) -> Option<RuntimeKind> {
        self.kind
            .or_else(|| match self.path.file_name().and_then(|n| n.to_str()) {
                Some(n) if n.starts_with("crun") => Some(RuntimeKind::Crun),
                Some(n) if n.starts_with("runc") => Some(RuntimeKind::Runc),
                _ => None,
            })
    }
}

fn default_runtimes() -> BTreeMap<String, RuntimeHandler> {
    let h = |p: &str| RuntimeHandler {
        path: p.into(),
        kind: None,
        root: PathBuf::new(),
    };
    BTreeMap::from([
        ("crun".to_owned(), h("/usr/bin/crun")),
        ("runc".to_owned(), h("/usr/bin/runc")),
    ])
}

/// One layer's uncompressed tar stream at most (`layer_max_bytes`,
/// `layer_max_entries`): far beyond any real image's layer, far below what
/// fills a node's disk or the daemon's memory with entries.
pub const DEFAULT_LAYER_MAX_BYTES: u64 = 64 << 30;
pub const DEFAULT_LAYER_MAX_ENTRIES: u64 = 2_000_000;

// Serialize: for the test that holds the documents to the keys.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
    /// The OCI runtimes, by handler name (kubelet's RuntimeClass
    /// `handler`). A table given replaces the defaults whole.
    pub runtimes: BTreeMap<String, RuntimeHandler>,
    /// The handler of pods that name none (no RuntimeClass).
    pub default_runtime: String,
    /// The size of each pod's /dev/shm (a tmpfs), as tmpfs' `size=`.
    pub pod_shm_size: String,
    /// Pods' log directories beneath this one are a plain caller's to ask
    /// for, and are opened beneath it without following a symbolic link;
    /// one elsewhere takes the privileged action (`SandboxConfig::privileges`).
    pub log_root: PathBuf,
    /// Localhost seccomp profiles beneath this directory are a plain
    /// caller's to name; one elsewhere takes the privileged action.
    pub seccomp_profile_root: PathBuf,
    /// Upper bound for starting a pod (init + scope job).
    pub start_timeout_ms: u64,
    /// Upper bound for stopping a pod's scope before it is killed.
    pub stop_timeout_ms: u64,
    /// CNI network config lists (`.conflist`, `.conf`, `.json`).
    pub cni_conf_dir: PathBuf,
    /// Where CNI plugins are looked up, in order.
    pub cni_bin_dirs: Vec<PathBuf>,
    /// The CDI spec directories, lowest priority first: a later one wins a
    /// device both define (CDI's `/etc/cdi`, then `/var/run/cdi`).
    pub cdi_spec_dirs: Vec<PathBuf>,
    /// The CNI network to use; empty = the lexically first valid config.
    pub cni_network: String,
    /// A CNI plugin still running after this long is killed and its step fails.
    pub cni_plugin_timeout_ms: u64,
    /// A polkit check still unanswered after this long is a denial (a
    /// stalled polkitd or agent must not keep calls pending forever); the
    /// limit for a caller that allows interactive authorization (someone
    /// typing a password) is ten times as long.
    pub polkit_timeout_ms: u64,
    /// podscoped's calls to systemd, systemd-machined and polkit in flight
    /// at once; more wait their turn. Under the bus's own limit on one
    /// connection's pending calls (dbus-daemon's max_replies_per_connection,
    /// 128 on Debian), which fails every call beyond it.
    pub bus_calls_max: u32,
    /// podscope-cri's calls to podscoped in flight at once, on each of its
    /// two bus connections; more wait their turn (the same bus limit).
    pub daemon_calls_max: u32,
    /// The image store (blobs, unpacked layers, image records).
    pub image_dir: PathBuf,
    /// Connecting to a registry takes at most this long.
    pub pull_connect_timeout_ms: u64,
    /// A registry that sends nothing for this long, on any request or in
    /// the middle of a blob, hangs: the pull fails with RegistryUnavailable.
    pub pull_stall_timeout_ms: u64,
    /// Layers of one pull fetched at once.
    pub max_concurrent_downloads: u32,
    /// One layer's uncompressed tar stream may hold at most this many
    /// bytes and entries; a layer beyond either fails its pull, named, and
    /// leaves nothing in the store.
    pub layer_max_bytes: u64,
    pub layer_max_entries: u64,
    /// The CRI streaming server (exec, attach, port-forward) listens on
    /// this address (podscope-cri reads these)...
    pub stream_address: std::net::IpAddr,
    /// ...and port; 0 is one the kernel picks at each start.
    pub stream_port: u16,
    /// A streaming session with no traffic either way for this long is
    /// closed.
    pub stream_idle_timeout_ms: u64,
    /// TLS for the streaming server: a PEM certificate chain and its PEM
    /// key, both or neither (empty: plain HTTP).
    pub stream_tls_cert: PathBuf,
    pub stream_tls_key: PathBuf,
    /// systemd-oomd for the pod slices podscope makes: a memory pressure
    /// limit ("60%") given to each as `ManagedOOMMemoryPressure=kill`;
    /// empty (the default) leaves them to the kernel's OOM killer alone.
    pub oomd_memory_pressure_limit: String,
    /// The metrics endpoint (Prometheus' text format at `/metrics`,
    /// unauthenticated): `host:port`, the host an IP address or
    /// `localhost`; `:port` alone is loopback's. Empty (the default): off.
    pub metrics_address: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            state_dir: "/var/lib/podscope".into(),
            run_dir: "/run/podscope".into(),
            init_path: PathBuf::new(),
            default_slice: "podscope.slice".into(),
            runtimes: default_runtimes(),
            default_runtime: "crun".into(),
            pod_shm_size: "64m".into(),
            log_root: "/var/log/pods".into(),
            seccomp_profile_root: "/var/lib/kubelet/seccomp".into(),
            start_timeout_ms: 10_000,
            stop_timeout_ms: 10_000,
            cni_conf_dir: "/etc/cni/net.d".into(),
            cni_bin_dirs: vec![
                "/opt/cni/bin".into(),
                "/usr/lib/cni".into(),
                "/usr/libexec/cni".into(),
            ],
            cdi_spec_dirs: vec!["/etc/cdi".into(), "/var/run/cdi".into()],
            cni_network: String::new(),
            cni_plugin_timeout_ms: 60_000,
            polkit_timeout_ms: 25_000,
            bus_calls_max: podscope_api::bus_gate::DEFAULT_MAX as u32,
            daemon_calls_max: podscope_api::bus_gate::DEFAULT_MAX as u32,
            image_dir: "/var/lib/podscope/images".into(),
            pull_connect_timeout_ms: 30_000,
            pull_stall_timeout_ms: 60_000,
            max_concurrent_downloads: 3,
            layer_max_bytes: DEFAULT_LAYER_MAX_BYTES,
            layer_max_entries: DEFAULT_LAYER_MAX_ENTRIES,
            stream_address: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            stream_port: 0,
            stream_idle_timeout_ms: 4 * 3600 * 1000,
            stream_tls_cert: PathBuf::new(),
            stream_tls_key: PathBuf::new(),
            oomd_memory_pressure_limit: String::new(),
            metrics_address: String::new(),
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
            ("stream_idle_timeout_ms", s.stream_idle_timeout_ms),
            (
                "max_concurrent_downloads",
                u64::from(s.max_concurrent_downloads),
            ),
            ("bus_calls_max", u64::from(s.bus_calls_max)),
            ("layer_max_bytes", s.layer_max_bytes),
            ("layer_max_entries", s.layer_max_entries),
            ("daemon_calls_max", u64::from(s.daemon_calls_max)),
        ] {
            if v == 0 {
                return Err(Error::invalid(name, "must be greater than 0"));
            }
        }
        for (i, d) in s.cdi_spec_dirs.iter().enumerate() {
            if !d.is_absolute() {
                return Err(Error::invalid(
                    &format!("cdi_spec_dirs[{i}]"),
                    format!("{} is not an absolute path", d.display()),
                ));
            }
        }
        for (name, h) in &s.runtimes {
            let field = format!("runtimes.{name}");
            if name.is_empty()
                || name.len() > 63
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            {
                return Err(Error::invalid(
                    &field,
                    "a handler name is lowercase letters, digits, '-' and '.' (a RuntimeClass handler)",
                ));
            }
            if !h.path.is_absolute() {
                return Err(Error::invalid(&format!("{field}.path"), "must be absolute"));
            }
            if h.kind().is_none() {
                return Err(Error::invalid(
                    &format!("{field}.kind"),
                    format!(
                        "{} is neither crun nor runc by name: say which with kind = \"crun\" or \"runc\"",
                        h.path.display()
                    ),
                ));
            }
        }
        if !s.runtimes.contains_key(&s.default_runtime) {
            return Err(Error::invalid(
                "default_runtime",
                format!(
                    "{:?} is not a configured runtime ({})",
                    s.default_runtime,
                    s.runtimes.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let size = s
            .pod_shm_size
            .trim_end_matches(['k', 'm', 'g', 'K', 'M', 'G']);
        if size.is_empty() || !size.bytes().all(|b| b.is_ascii_digit()) || size.starts_with('0') {
            return Err(Error::invalid(
                "pod_shm_size",
                format!("{:?} is not a size like \"64m\"", s.pod_shm_size),
            ));
        }
        match (
            s.stream_tls_cert.as_os_str().is_empty(),
            s.stream_tls_key.as_os_str().is_empty(),
        ) {
            (true, true) => {}
            (false, true) => {
                return Err(Error::invalid(
                    "stream_tls_key",
                    "stream_tls_cert is set: name its key too",
                ))
            }
            (true, false) => {
                return Err(Error::invalid(
                    "stream_tls_cert",
                    "stream_tls_key is set: name its certificate too",
                ))
            }
            (false, false) => {
                for (name, p) in [
                    ("stream_tls_cert", &s.stream_tls_cert),
                    ("stream_tls_key", &s.stream_tls_key),
                ] {
                    if !p.is_absolute() {
                        return Err(Error::invalid(name, "must be absolute"));
                    }
                }
            }
        }
        for (name, p) in [
            ("log_root", &s.log_root),
            ("seccomp_profile_root", &s.seccomp_profile_root),
        ] {
            let text = p.to_str().unwrap_or("");
            if !p.is_absolute() || text == "/" || text.split('/').any(|c| c == "..") {
                return Err(Error::invalid(
                    name,
                    format!("{} is not an absolute directory below /", p.display()),
                ));
            }
        }
        podscope_api::domain::oomd::parse_limit(&s.oomd_memory_pressure_limit)?;
        parse_metrics_address(&s.metrics_address)?;
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
    /// The pod slices' memory pressure limit for systemd-oomd, in
    /// permyriad; None when off (parse has checked it).
    pub fn oomd_limit(&self) -> Option<u32> {
        podscope_api::domain::oomd::parse_limit(&self.oomd_memory_pressure_limit)
            .ok()
            .flatten()
    }

    /// Where the metrics endpoint listens; None when it is off (parse has
    /// checked it).
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        parse_metrics_address(&self.metrics_address).ok().flatten()
    }

    pub fn stop_timeout(&self) -> Duration {
        Duration::from_millis(self.stop_timeout_ms)
    }

    pub fn handler_known(&self, handler: &str) -> bool {
        handler.is_empty() || self.runtimes.contains_key(handler)
    }

    /// The handler a pod's `runtime_handler` names ("" is the default).
    pub fn runtime(&self, handler: &str) -> Option<(&str, &RuntimeHandler)> {
        let name = if handler.is_empty() {
            self.default_runtime.as_str()
        } else {
            handler
        };
        self.runtimes
            .get_key_value(name)
            .map(|(k, v)| (k.as_str(), v))
    }
}

/// `metrics_address`: empty is off; else `host:port` with an IP address
/// (`[...]` for IPv6) or `localhost` as the host, or `:port` for
/// loopback, and a port other than 0 (a scrape config names it).
fn parse_metrics_address(text: &str) -> Result<Option<std::net::SocketAddr>> {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    if text.is_empty() {
        return Ok(None);
    }
    let bad = |why: &str| Error::invalid("metrics_address", format!("{text:?}: {why}"));
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| bad("not host:port (\"127.0.0.1:9101\", \"[::1]:9101\", \":9101\")"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| bad("the port is not a number from 1 to 65535"))?;
    if port == 0 {
        return Err(bad("the port is 0: name the one a scrape config will name"));
    }
    let ip = match host {
        "" | "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(h)
            .parse::<IpAddr>()
            .map_err(|_| bad("the host is not an IP address or localhost"))?,
    };
    if matches!(ip, IpAddr::V6(_)) && !host.starts_with('[') {
        return Err(bad("an IPv6 address goes in brackets: \"[::1]:9101\""));
    }
    Ok(Some(SocketAddr::new(ip, port)))
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
        assert!(s.handler_known("crun"));
        assert!(s.handler_known("runc"));
        assert!(!s.handler_known("kata"));
        let (name, crun) = s.runtime("").unwrap();
        assert_eq!((name, crun.kind()), ("crun", Some(RuntimeKind::Crun)));
        assert_eq!(s.runtime("runc").unwrap().1.kind(), Some(RuntimeKind::Runc));
        assert_eq!(s.pod_shm_size, "64m");
        assert!(s.init_path.ends_with("podscope-init"));
        assert_eq!(s.cni_conf_dir, Path::new("/etc/cni/net.d"));
        assert_eq!(s.cni_bin_dirs.len(), 3);
        assert_eq!(s.image_dir, Path::new("/var/lib/podscope/images"));
        assert_eq!(s.max_concurrent_downloads, 3);
    }

    #[test]
    fn keys_are_read_and_checked() {
        let s = Settings::parse(
            "stop_timeout_ms = 500\ndefault_runtime = \"fast\"\n[runtimes.fast]\npath = \"/opt/crun-1.19\"\n[runtimes.kata]\npath = \"/opt/kata/runtime\"\nkind = \"runc\"\n",
        )
        .unwrap();
        assert_eq!(s.stop_timeout(), Duration::from_millis(500));
        assert!(s.handler_known("kata"));
        assert!(!s.handler_known("runc"), "a table replaces the defaults");
        assert_eq!(s.runtime("").unwrap().0, "fast");
        assert_eq!(s.runtime("kata").unwrap().1.kind(), Some(RuntimeKind::Runc));
        assert_eq!(s.oomd_limit(), None, "systemd-oomd is off by default");
        let oomd = Settings::parse("oomd_memory_pressure_limit = \"60%\"").unwrap();
        assert_eq!(oomd.oomd_limit(), Some(6000));
        assert_eq!(
            s.metrics_address(),
            None,
            "the metrics endpoint is off by default"
        );
        for (text, want) in [
            (":9101", "127.0.0.1:9101"),
            ("localhost:9101", "127.0.0.1:9101"),
            ("0.0.0.0:9101", "0.0.0.0:9101"),
            ("[::1]:9101", "[::1]:9101"),
        ] {
            let m = Settings::parse(&format!("metrics_address = {text:?}")).unwrap();
            assert_eq!(m.metrics_address().unwrap().to_string(), want);
        }
        for (bad, field) in [
            ("default_runtime = \"kata\"", "default_runtime"),
            ("[runtimes.x]\npath = \"/usr/bin/youki\"", "runtimes.x.kind"),
            ("[runtimes.x]\npath = \"crun\"", "runtimes.x.path"),
            ("[runtimes.X]\npath = \"/usr/bin/crun\"", "runtimes.X"),
            ("pod_shm_size = \"lots\"", "pod_shm_size"),
            ("log_root = \"var/log\"", "log_root"),
            ("log_root = \"/\"", "log_root"),
            (
                "seccomp_profile_root = \"/a/../etc\"",
                "seccomp_profile_root",
            ),
            (
                "oomd_memory_pressure_limit = \"60\"",
                "oomd_memory_pressure_limit",
            ),
            (
                "oomd_memory_pressure_limit = \"100%\"",
                "oomd_memory_pressure_limit",
            ),
            ("stream_tls_cert = \"/etc/c.pem\"", "stream_tls_key"),
            ("stream_tls_key = \"/etc/k.pem\"", "stream_tls_cert"),
            ("metrics_address = \"9101\"", "metrics_address"),
            ("metrics_address = \"node:9101\"", "metrics_address"),
            ("metrics_address = \"127.0.0.1:0\"", "metrics_address"),
            ("metrics_address = \"127.0.0.1:99999\"", "metrics_address"),
            ("metrics_address = \"::1:9101\"", "metrics_address"),
            (
                "stream_tls_cert = \"c.pem\"\nstream_tls_key = \"/etc/k.pem\"",
                "stream_tls_cert",
            ),
        ] {
            let e = Settings::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(field), "{bad}: {e}");
        }
        let e = Settings::parse("stop_timeut_ms = 5").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        assert!(Settings::parse("default_slice = \"nope\"").is_err());
        assert!(Settings::parse("start_timeout_ms = 0").is_err());
        assert!(Settings::parse("max_concurrent_downloads = 0").is_err());
    }

    /// Every key Settings takes, listed from the struct itself, is in
    /// podscope.toml(5) and in the shipped podscope.toml, whose commented
    /// line shows the default (an example where the default is empty).
    #[test]
    fn every_key_is_documented_with_its_default() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
        let (man, shipped) = (read("man/podscope.toml.5"), read("packaging/podscope.toml"));
        let defaults = serde_json::to_value(Settings::default()).unwrap();
        let defaults = defaults.as_object().unwrap();
        // The man page's entries: the words of its .B and .BR lines.
        let man_words: std::collections::BTreeSet<&str> = man
            .lines()
            .filter(|l| l.starts_with(".B ") || l.starts_with(".BR ") || l.starts_with(".BI "))
            .flat_map(|l| l.split([' ', '"', '[', ']']))
            .collect();
        // The shipped file's commented settings: `#key = value` at the top
        // level, `#[runtimes.NAME]` and its `#field = value` lines.
        let mut top = serde_json::Map::new();
        let mut runtimes = serde_json::Map::new();
        let mut table: Option<String> = None;
        for line in shipped.lines() {
            let Some(l) = line.strip_prefix('#') else {
                table = None;
                continue;
            };
            if let Some(name) = l
                .strip_prefix("[runtimes.")
                .and_then(|n| n.strip_suffix(']'))
            {
                table = Some(name.to_owned());
                runtimes.insert(name.to_owned(), serde_json::json!({}));
                continue;
            }
            if !l.starts_with(|c: char| c.is_ascii_lowercase()) {
                table = None;
                continue;
            }
            let parsed: toml::Table = toml::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            let (k, v) = parsed.into_iter().next().unwrap();
            let v = serde_json::to_value(v).unwrap();
            match &table {
                Some(t) => {
                    runtimes[t].as_object_mut().unwrap().insert(k, v);
                }
                None => {
                    top.insert(k, v);
                }
            }
        }
        for (key, default) in defaults {
            assert!(
                man_words.contains(key.as_str()),
                "{key} is not in podscope.toml(5)"
            );
            if key == "runtimes" {
                for (name, fields) in &runtimes {
                    for (f, v) in fields.as_object().unwrap() {
                        assert_eq!(&default[name][f], v, "podscope.toml: runtimes.{name}.{f}");
                    }
                }
                assert_eq!(
                    runtimes.keys().collect::<Vec<_>>(),
                    default.as_object().unwrap().keys().collect::<Vec<_>>(),
                    "podscope.toml: the default runtimes"
                );
                continue;
            }
            let shown = top
                .get(key)
                .unwrap_or_else(|| panic!("{key} is not in the shipped podscope.toml"));
            if default != "" {
                assert_eq!(
                    shown, default,
                    "podscope.toml shows another default for {key}"
                );
            }
        }
        for field in ["path", "kind", "root"] {
            assert!(
                man_words.contains(field),
                "runtimes.NAME.{field} is not in podscope.toml(5)"
            );
        }
        for key in top.keys() {
            assert!(
                defaults.contains_key(key),
                "podscope.toml shows {key}, which is no key"
            );
        }
    }
}
