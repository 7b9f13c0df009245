//! A small CNI runtime (spec 0.4.0, 1.0.0 and 1.1.0 configs): choose the
//! network from the conf dir (reloaded when its files change), run its
//! plugin chain for ADD/DEL/CHECK, and STATUS/GC for 1.1.0 configs.
//!
//! - `config`: conflist loading, validation, selection, plugin lookup.
//! - `exec`: one plugin run (env, stdin, timeout, error object).
//! - `result`: the addresses read from a result.
//! - `cache`: attachments on disk, so DEL needs neither the conf dir nor the
//!   namespace.

pub mod cache;
pub mod config;
pub mod exec;
pub mod netns;
pub mod result;

pub use cache::{Attachment, AttachmentStore};
pub use config::{NetworkConfigList, NotReady};
use exec::{Command, Invocation};
use podscope_api::error::{Error, ErrorKind, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The interface every pod gets.
pub const POD_IFNAME: &str = "eth0";

#[derive(Debug, Clone)]
pub struct CniSettings {
    pub conf_dir: PathBuf,
    pub bin_dirs: Vec<PathBuf>,
    /// The network to use; empty = the lexically first valid config.
    pub network: String,
    pub plugin_timeout: Duration,
}

impl From<&podscope_config::Settings> for CniSettings {
    fn from(s: &podscope_config::Settings) -> Self {
        CniSettings {
            conf_dir: s.cni_conf_dir.clone(),
            bin_dirs: s.cni_bin_dirs.clone(),
            network: s.cni_network.clone(),
            plugin_timeout: Duration::from_millis(s.cni_plugin_timeout_ms),
        }
    }
}

/// A conf dir's files as (path, mtime, size, inode): when this changes, the
/// config is parsed again.
type Fingerprint = Vec<(PathBuf, SystemTime, u64, u64)>;
/// The chosen network, or why there is none.
type Loaded = std::result::Result<Arc<NetworkConfigList>, NotReady>;

pub struct Cni {
    pub settings: CniSettings,
    loaded: Mutex<Option<(Fingerprint, Loaded)>>,
    /// The last STATUS run: for which loaded network, when, and what it
    /// said.
    status: Mutex<Option<StatusRun>>,
    /// Held by the one caller running STATUS. Callers with no answer for
    /// the network yet queue behind it and read its result; callers with
    /// an old answer take that one rather than wait.
    status_run: tokio::sync::Mutex<()>,
    /// `STATUS_TTL`; tests that flip a plugin's answer set 0.
    pub(crate) status_ttl: Duration,
}

/// How long a STATUS answer stands. RuntimeStatus is open to every local
/// user and kubelet asks every few seconds: without this, each call would
/// start one process per plugin.
pub const STATUS_TTL: Duration = Duration::from_secs(3);

#[derive(Clone)]
struct StatusRun {
    /// The network it ran for (a new one, when the conf dir changed, is
    /// asked afresh).
    list: Arc<NetworkConfigList>,
    at: std::time::Instant,
    result: std::result::Result<(), String>,
}

/// What ADD did, for the caller's records and timing logs.
#[derive(Debug)]
pub struct Added {
    pub result: Value,
    pub plugin_times: PluginTimes,
}

/// How long each plugin of a chain ran (spawn to exit), in the order run:
/// the log says which plugin a slow attach or detach was waiting on.
#[derive(Debug, Default, Clone)]
pub struct PluginTimes(pub Vec<(String, Duration)>);

impl PluginTimes {
    pub fn total(&self) -> Duration {
        self.0.iter().map(|(_, d)| *d).sum()
    }
    fn push(&mut self, plugin: &str, d: Duration) {
        self.0.push((plugin.to_owned(), d));
    }
}

/// `bridge=24133 portmap=3210 loopback=3901` (µs): one journal field that
/// a shell loop or the benchmark can split.
impl std::fmt::Display for PluginTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, d)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{name}={}", d.as_micros())?;
        }
        Ok(())
    }
}

fn fingerprint(dir: &Path) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    config::config_files(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| {
            let m = std::fs::metadata(&p).ok()?;
            Some((p, m.modified().ok()?, m.len(), m.ino()))
        })
        .collect()
}

/// What one plugin gets on stdin: its own config with the list's name and
/// version, `prevResult` when there is one, and the runtimeConfig values of
/// the capabilities it declares.
pub fn plugin_stdin(
    list: &NetworkConfigList,
    plugin: &config::PluginConfig,
    prev_result: Option<&Value>,
    capability_args: &Map<String, Value>,
    extra: Option<(&str, Value)>,
) -> Vec<u8> {
    let mut conf = plugin.raw.clone();
    conf.insert("name".into(), list.name.clone().into());
    conf.insert("cniVersion".into(), list.cni_version.clone().into());
    if let Some(prev) = prev_result {
        conf.insert("prevResult".into(), prev.clone());
    }
    let mut runtime = Map::new();
    for cap in plugin.capabilities() {
        if let Some(v) = capability_args.get(cap) {
            runtime.insert(cap.to_owned(), v.clone());
        }
    }
    if !runtime.is_empty() {
        conf.insert("runtimeConfig".into(), Value::Object(runtime));
    }
    if let Some((k, v)) = extra {
        conf.insert(k.to_owned(), v);
    }
    serde_json::to_vec(&conf).expect("JSON values serialize")
}

fn net_err(msg: String) -> Error {
    Error::new(ErrorKind::NetworkFailed, msg)
}

impl Cni {
    pub fn new(settings: CniSettings) -> Self {
        Cni {
            settings,
            loaded: Mutex::new(None),
            status: Mutex::new(None),
            status_run: tokio::sync::Mutex::new(()),
            status_ttl: STATUS_TTL,
        }
    }

    /// The network to attach pods to, with its plugins present. Cheap when
    /// nothing changed (a readdir and a few stats), so it is asked on every
    /// Create and every status query: a config that appears or is fixed is
    /// used at once, without a restart.
    pub fn network(&self) -> std::result::Result<Arc<NetworkConfigList>, NotReady> {
        let fp = fingerprint(&self.settings.conf_dir);
        let list = {
            let mut cached = self.loaded.lock().unwrap();
            match &*cached {
                Some((old, r)) if *old == fp => r.clone(),
                _ => {
                    let r = config::select(&self.settings.conf_dir, &self.settings.network)
                        .map(Arc::new);
                    *cached = Some((fp, r.clone()));
                    r
                }
            }
        }?;
        config::resolve_plugins(&list, &self.settings.bin_dirs)?;
        Ok(list)
    }

    /// NetworkReady: the config and its plugins are usable, and for 1.1.0
    /// configs every plugin answers STATUS: at most one run at a time, its
    /// answer kept for `STATUS_TTL` or until the config changes. When the
    /// answer is old, the caller that finds it so runs STATUS again while
    /// the others take the old answer: a burst of calls waits on no plugin.
    pub async fn readiness(&self) -> std::result::Result<Arc<NetworkConfigList>, NotReady> {
        let list = self.network()?;
        if list.supports_status_and_gc() {
            let result = self.status_answer(&list).await;
            if let Err(e) = result {
                return Err(NotReady {
                    reason: "NetworkPluginNotReady",
                    message: format!("network {:?}: STATUS: {e}", list.name),
                });
            }
        }
        Ok(list)
    }

    /// STATUS's answer for `list`, run again only when it is missing or old.
    async fn status_answer(
        &self,
        list: &Arc<NetworkConfigList>,
    ) -> std::result::Result<(), String> {
        let last = || {
            self.status
                .lock()
                .unwrap()
                .clone()
                .filter(|r| Arc::ptr_eq(&r.list, list))
        };
        let run = match last() {
            Some(r) if r.at.elapsed() < self.status_ttl => return r.result,
            // Old: refresh it unless someone is, and answer with it then.
            Some(r) => match self.status_run.try_lock() {
                Ok(run) => run,
                Err(_) => return r.result,
            },
            // None yet for this network: wait for the run under way, if
            // any, and read its answer.
            None => {
                let run = self.status_run.lock().await;
                if let Some(r) = last().filter(|r| r.at.elapsed() < self.status_ttl) {
                    return r.result;
                }
                run
            }
        };
        let result = self.status(list).await.map_err(|e| e.to_string());
        *self.status.lock().unwrap() = Some(StatusRun {
            list: list.clone(),
            at: std::time::Instant::now(),
            result: result.clone(),
        });
        drop(run);
        result
    }

    fn invocation<'a>(&'a self, command: Command, att: &'a Attachment) -> Invocation<'a> {
        Invocation {
            command,
            container_id: &att.container_id,
            netns: &att.netns,
            ifname: &att.ifname,
            args: &att.args,
            bin_dirs: &self.settings.bin_dirs,
            timeout: self.settings.plugin_timeout,
        }
    }

    fn plugin_path(&self, plugin: &str) -> Result<PathBuf> {
        config::find_plugin(&self.settings.bin_dirs, plugin).ok_or_else(|| {
            net_err(format!(
                "{plugin}: CNI plugin not found in {}",
                self.settings
                    .bin_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":")
            ))
        })
    }

    /// ADD through the chain, each plugin getting the previous one's result.
    /// On failure nothing is undone here: the caller runs `del` (the spec's
    /// cleanup for a failed ADD) and decides what to keep.
    pub async fn add(&self, att: &Attachment) -> Result<Added> {
        let t0 = std::time::Instant::now();
        let r = self.add_chain(att).await;
        crate::metrics::cni_operation("ADD", t0.elapsed(), r.is_ok());
        r
    }

    async fn add_chain(&self, att: &Attachment) -> Result<Added> {
        let list = cached_list(att)?;
        let ctx = format!("CNI ADD on network {:?}", list.name);
        let mut prev: Option<Value> = None;
        let mut plugin_times = PluginTimes::default();
        for plugin in &list.plugins {
            let bin = self
                .plugin_path(&plugin.plugin_type)
                .map_err(|e| e.context(&ctx))?;
            let stdin = plugin_stdin(&list, plugin, prev.as_ref(), &att.capability_args, None);
            let out = exec::run(&bin, &self.invocation(Command::Add, att), &stdin)
                .await
                .map_err(|e| e.context(&ctx))?;
            plugin_times.push(&plugin.plugin_type, out.elapsed);
            let Some(v) = out.value else {
                return Err(net_err(format!(
                    "{ctx}: {}: ADD succeeded but printed no result",
                    plugin.plugin_type
                )));
            };
            prev = Some(v);
        }
        Ok(Added {
            result: prev.expect("a list has at least one plugin"),
            plugin_times,
        })
    }

    /// DEL through the chain in reverse, from the cached attachment. Keeps
    /// going past a failing plugin (the others still release what they
    /// hold) and reports every failure. A namespace that is gone is passed
    /// as empty, as the spec allows.
    pub async fn del(&self, att: &Attachment) -> Result<PluginTimes> {
        let t0 = std::time::Instant::now();
        let r = self.del_chain(att).await;
        crate::metrics::cni_operation("DEL", t0.elapsed(), r.is_ok());
        r
    }

    async fn del_chain(&self, att: &Attachment) -> Result<PluginTimes> {
        let list = cached_list(att)?;
        let mut att = att.clone();
        if !att.netns.is_empty() && !Path::new(&att.netns).exists() {
            att.netns.clear();
        }
        let prev = if list.supports_check() {
            att.result.as_ref()
        } else {
            None
        };
        let mut errors = Vec::new();
        let mut plugin_times = PluginTimes::default();
        for plugin in list.plugins.iter().rev() {
            let bin = match self.plugin_path(&plugin.plugin_type) {
                Ok(b) => b,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            let stdin = plugin_stdin(&list, plugin, prev, &att.capability_args, None);
            match exec::run(&bin, &self.invocation(Command::Del, &att), &stdin).await {
                Ok(out) => plugin_times.push(&plugin.plugin_type, out.elapsed),
                Err(e) => errors.push(e.to_string()),
            }
        }
        every_plugin_ok("DEL", &list, errors).map(|()| plugin_times)
    }

    /// CHECK the attachment against its cached result (0.4.0+, unless the
    /// config disables it; then Ok without running anything).
    pub async fn check(&self, att: &Attachment) -> Result<bool> {
        let list = cached_list(att)?;
        if !list.supports_check() || list.disable_check {
            return Ok(false);
        }
        let Some(result) = att.result.as_ref() else {
            return Err(net_err(format!(
                "CNI CHECK on network {:?}: the ADD never completed",
                list.name
            )));
        };
        let ctx = format!("CNI CHECK on network {:?}", list.name);
        for plugin in &list.plugins {
            let bin = self
                .plugin_path(&plugin.plugin_type)
                .map_err(|e| e.context(&ctx))?;
            let stdin = plugin_stdin(&list, plugin, Some(result), &att.capability_args, None);
            exec::run(&bin, &self.invocation(Command::Check, att), &stdin)
                .await
                .map_err(|e| e.context(&ctx))?;
        }
        Ok(true)
    }

    fn bare_invocation(&self, command: Command) -> Invocation<'_> {
        Invocation {
            command,
            container_id: "",
            netns: "",
            ifname: "",
            args: "",
            bin_dirs: &self.settings.bin_dirs,
            timeout: self.settings.plugin_timeout,
        }
    }

    /// STATUS (1.1.0): every plugin must say it is ready.
    pub async fn status(&self, list: &NetworkConfigList) -> Result<()> {
        for plugin in &list.plugins {
            let bin = self.plugin_path(&plugin.plugin_type)?;
            let stdin = plugin_stdin(list, plugin, None, &Map::new(), None);
            exec::run(&bin, &self.bare_invocation(Command::Status), &stdin).await?;
        }
        Ok(())
    }

    /// GC (1.1.0, unless disabled): plugins release whatever belongs to an
    /// attachment not in `valid` (container id, interface). Returns whether
    /// it ran.
    pub async fn gc(&self, list: &NetworkConfigList, valid: &[(String, String)]) -> Result<bool> {
        if !list.supports_status_and_gc() || list.disable_gc {
            return Ok(false);
        }
        let attachments: Vec<Value> = valid
            .iter()
            .map(|(id, ifname)| serde_json::json!({"containerID": id, "ifname": ifname}))
            .collect();
        let mut errors = Vec::new();
        for plugin in &list.plugins {
            let bin = match self.plugin_path(&plugin.plugin_type) {
                Ok(b) => b,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            let stdin = plugin_stdin(
                list,
                plugin,
                None,
                &Map::new(),
                Some((
                    "cni.dev/valid-attachments",
                    Value::Array(attachments.clone()),
                )),
            );
            if let Err(e) = exec::run(&bin, &self.bare_invocation(Command::Gc), &stdin).await {
                errors.push(e.to_string());
            }
        }
        every_plugin_ok("GC", list, errors).map(|()| true)
    }
}

/// For the commands that go on past a failing plugin (DEL, GC): Ok when
/// none failed, else one error naming every failure.
fn every_plugin_ok(command: &str, list: &NetworkConfigList, errors: Vec<String>) -> Result<()> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(net_err(format!(
            "CNI {command} on network {:?}: {}",
            list.name,
            errors.join("; ")
        )))
    }
}

/// The config list an attachment was made with.
fn cached_list(att: &Attachment) -> Result<NetworkConfigList> {
    NetworkConfigList::parse(
        &serde_json::to_vec(&att.config).expect("JSON values serialize"),
        Path::new("(cached attachment config)"),
    )
    .map_err(|e| net_err(format!("attachment {}: {e}", att.container_id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Fixture {
        root: PathBuf,
        cni: Cni,
    }

    impl Fixture {
        fn new(tag: &str) -> Self {
            let root =
                std::env::temp_dir().join(format!("podscope-cni-rt-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(root.join("net.d")).unwrap();
            std::fs::create_dir_all(root.join("bin")).unwrap();
            let cni = Cni::new(CniSettings {
                conf_dir: root.join("net.d"),
                bin_dirs: vec![root.join("bin")],
                network: String::new(),
                plugin_timeout: Duration::from_secs(5),
            });
            Fixture { root, cni }
        }
        fn log(&self) -> PathBuf {
            self.root.join("log")
        }
        /// A plugin that appends "<name> <command> <stdin>" to the log and
        /// prints `out` (with $prev standing for stdin's prevResult marker).
        fn plugin(&self, name: &str, body: &str) {
            let p = self.root.join("bin").join(name);
            std::fs::write(
                &p,
                format!(
                    "#!/bin/sh\nin=$(cat)\necho \"{name} $CNI_COMMAND netns=$CNI_NETNS $in\" >> {log}\n{body}\n",
                    log = self.log().display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        fn conf(&self, file: &str, text: &str) {
            std::fs::write(self.root.join("net.d").join(file), text).unwrap();
        }
        fn log_lines(&self) -> Vec<String> {
            std::fs::read_to_string(self.log())
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect()
        }
        fn attachment(&self) -> Attachment {
            let list = self.cni.network().unwrap();
            Attachment {
                container_id: "abc".into(),
                ifname: POD_IFNAME.into(),
                netns: self.root.join("netns").display().to_string(),
                args: "IgnoreUnknown=1".into(),
                capability_args: serde_json::json!({"portMappings": [{"hostPort": 8080}]})
                    .as_object()
                    .unwrap()
                    .clone(),
                config: list.to_json(),
                result: None,
                last_error: String::new(),
            }
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    const TWO: &str = r#"{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"first"},{"type":"second","capabilities":{"portMappings":true}}]}"#;

    #[tokio::test]
    async fn add_chains_prev_result_and_del_runs_in_reverse() {
        let f = Fixture::new("chain");
        f.conf("10-net.conflist", TWO);
        f.plugin(
            "first",
            r#"[ "$CNI_COMMAND" = ADD ] && echo '{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/24"}],"mark":"from-first"}'; exit 0"#,
        );
        f.plugin(
            "second",
            r#"[ "$CNI_COMMAND" = ADD ] && printf '%s' "$in" | sed 's/.*"prevResult":\({[^}]*}[^}]*}\).*/\1/'; exit 0"#,
        );
        std::fs::write(f.root.join("netns"), "").unwrap();
        let mut att = f.attachment();
        let added = f.cni.add(&att).await.unwrap();
        assert_eq!(added.result["mark"], "from-first");
        let names = |t: &PluginTimes| t.0.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&added.plugin_times), ["first", "second"]);
        assert_eq!(result::pod_ips(&added.result), ["10.0.0.2"]);
        let log = f.log_lines();
        assert!(log[0].starts_with("first ADD"), "{log:?}");
        assert!(
            !log[0].contains("runtimeConfig"),
            "first declares no capability: {log:?}"
        );
        assert!(
            log[1].contains("\"runtimeConfig\":{\"portMappings\":[{\"hostPort\":8080}]}"),
            "{log:?}"
        );
        assert!(log[1].contains("\"name\":\"net\"") && log[1].contains("\"cniVersion\":\"1.0.0\""));
        att.result = Some(added.result);
        // The namespace is gone: DEL still runs, with CNI_NETNS empty.
        std::fs::remove_file(f.root.join("netns")).unwrap();
        let deleted = f.cni.del(&att).await.unwrap();
        assert_eq!(names(&deleted), ["second", "first"]);
        let log = f.log_lines();
        assert!(log[2].starts_with("second DEL netns= "), "{log:?}");
        assert!(log[3].starts_with("first DEL netns= "), "{log:?}");
        assert!(
            log[3].contains("\"prevResult\":{"),
            "DEL gets the cached result: {log:?}"
        );
    }

    #[test]
    fn plugin_times_are_one_splittable_field() {
        let t = PluginTimes(vec![
            ("bridge".into(), Duration::from_micros(24133)),
            ("loopback".into(), Duration::from_micros(3901)),
        ]);
        assert_eq!(t.to_string(), "bridge=24133 loopback=3901");
        assert_eq!(t.total(), Duration::from_micros(28034));
        assert_eq!(PluginTimes::default().to_string(), "");
    }

    #[tokio::test]
    async fn del_continues_past_failures_and_reports_them_all() {
        let f = Fixture::new("del");
        f.conf("10-net.conflist", TWO);
        f.plugin("first", r#"echo '{"code":7,"msg":"first broke"}'; exit 1"#);
        // "second" is missing altogether.
        let att = f.cni.network().map(|_| ()).unwrap_err();
        assert_eq!(att.reason, "NetworkPluginMissing");
        assert!(
            att.message.contains("plugin second not found"),
            "{}",
            att.message
        );
        let list = config::NetworkConfigList::parse(TWO.as_bytes(), Path::new("x")).unwrap();
        let att = Attachment {
            container_id: "abc".into(),
            ifname: "eth0".into(),
            netns: String::new(),
            args: String::new(),
            capability_args: Map::new(),
            config: list.to_json(),
            result: None,
            last_error: String::new(),
        };
        let e = f.cni.del(&att).await.unwrap_err().to_string();
        assert!(e.contains("second: CNI plugin not found"), "{e}");
        assert!(e.contains("first: CNI error code 7: first broke"), "{e}");
        assert_eq!(f.log_lines().len(), 1, "first still ran");
    }

    #[tokio::test]
    async fn config_changes_are_seen_without_a_restart() {
        let f = Fixture::new("reload");
        assert_eq!(f.cni.network().unwrap_err().reason, "NoNetworkConfig");
        f.conf("10-net.conflist", "{broken");
        assert_eq!(f.cni.network().unwrap_err().reason, "NetworkConfigInvalid");
        // Same size, new content: the mtime or inode tells.
        std::thread::sleep(Duration::from_millis(10));
        f.conf(
            "10-net.conflist",
            r#"{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"first"}]}"#,
        );
        assert_eq!(f.cni.network().unwrap_err().reason, "NetworkPluginMissing");
        f.plugin("first", "exit 0");
        assert_eq!(f.cni.network().unwrap().name, "net");
    }

    #[tokio::test]
    async fn status_and_gc_run_only_for_1_1_0() {
        let f = Fixture::new("gc");
        f.conf(
            "10-net.conflist",
            r#"{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"first"}]}"#,
        );
        f.plugin(
            "first",
            r#"[ "$CNI_COMMAND" = STATUS ] && [ -e "$(dirname "$0")/../down" ] && { echo '{"code":50,"msg":"plugin down"}'; exit 1; }; exit 0"#,
        );
        let mut f = f;
        f.cni.status_ttl = Duration::ZERO;
        assert!(f.cni.readiness().await.is_ok());
        std::fs::write(f.root.join("down"), "").unwrap();
        let nr = f.cni.readiness().await.unwrap_err();
        assert_eq!(nr.reason, "NetworkPluginNotReady");
        assert!(
            nr.message.contains("CNI error code 50: plugin down"),
            "{}",
            nr.message
        );
        let list = f.cni.network().unwrap();
        assert!(f
            .cni
            .gc(&list, &[("abc".into(), "eth0".into())])
            .await
            .unwrap());
        let log = f.log_lines();
        let gc = log.iter().find(|l| l.starts_with("first GC")).unwrap();
        assert!(
            gc.contains(r#""cni.dev/valid-attachments":[{"containerID":"abc","ifname":"eth0"}]"#),
            "{gc}"
        );
        let old = config::NetworkConfigList::parse(TWO.as_bytes(), Path::new("x")).unwrap();
        assert!(
            !f.cni.gc(&old, &[]).await.unwrap(),
            "1.0.0 configs have no GC"
        );
    }

    /// RuntimeStatus is open to every user: a flood of readiness checks
    /// runs STATUS once, and again only when its answer is old or the
    /// config changed.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_flood_of_readiness_checks_runs_status_once() {
        let mut f = Fixture::new("status-flood");
        let conf = |name: &str| {
            format!(r#"{{"cniVersion":"1.1.0","name":"{name}","plugins":[{{"type":"first"}}]}}"#)
        };
        f.conf("10-net.conflist", &conf("net"));
        f.plugin("first", "sleep 0.2; exit 0");
        let statuses = || {
            f.log_lines()
                .iter()
                .filter(|l| l.starts_with("first STATUS"))
                .count()
        };
        let flood = futures_util::future::join_all((0..40).map(|_| f.cni.readiness())).await;
        assert!(flood.iter().all(|r| r.is_ok()));
        assert_eq!(statuses(), 1, "one run for 40 concurrent checks");
        assert!(f.cni.readiness().await.is_ok());
        assert_eq!(statuses(), 1, "answered from the last run");
        f.conf("10-net.conflist", &conf("net2"));
        assert_eq!(f.cni.readiness().await.unwrap().name, "net2");
        assert_eq!(statuses(), 2, "a changed config is asked afresh");
        // An old answer: one caller asks again, the others take the old
        // answer at once instead of waiting on the plugin with it.
        f.cni.status_ttl = Duration::from_millis(300);
        let statuses = || {
            f.log_lines()
                .iter()
                .filter(|l| l.starts_with("first STATUS"))
                .count()
        };
        tokio::time::sleep(Duration::from_millis(400)).await;
        let first_done = std::sync::atomic::AtomicBool::new(false);
        let (first, rest) = tokio::join!(
            async {
                let r = f.cni.readiness().await;
                first_done.store(true, std::sync::atomic::Ordering::SeqCst);
                r
            },
            async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let rest = futures_util::future::join_all((0..10).map(|_| f.cni.readiness())).await;
                (rest, first_done.load(std::sync::atomic::Ordering::SeqCst))
            }
        );
        assert!(first.is_ok() && rest.0.iter().all(|r| r.is_ok()));
        assert!(!rest.1, "the others answered while the plugin still ran");
        assert_eq!(statuses(), 3, "one run for the old answer");
    }

    #[tokio::test]
    async fn check_uses_the_cached_result_and_honours_disable_check() {
        let f = Fixture::new("check");
        f.conf(
            "10-net.conflist",
            r#"{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"first"}]}"#,
        );
        f.plugin("first", r#"[ "$CNI_COMMAND" = CHECK ] && { echo '{"code":3,"msg":"veth gone"}'; exit 1; }; exit 0"#);
        let mut att = f.attachment();
        assert!(f
            .cni
            .check(&att)
            .await
            .unwrap_err()
            .to_string()
            .contains("never completed"));
        att.result = Some(serde_json::json!({"cniVersion":"1.0.0"}));
        let e = f.cni.check(&att).await.unwrap_err().to_string();
        assert!(e.contains("first: CNI error code 3: veth gone"), "{e}");
        att.config["disableCheck"] = true.into();
        assert!(!f.cni.check(&att).await.unwrap());
    }
}
