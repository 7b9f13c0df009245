//! CNI network configuration: loading and validating `.conflist` (and
//! single-plugin `.conf`/`.json`) files, choosing the network, and finding
//! its plugin binaries.
//!
//! The plugin configurations are kept as raw JSON: every plugin has its own
//! keys, and they must reach the plugin exactly as the admin wrote them.

use podscope_api::error::{Error, ErrorKind, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Spec versions whose configs we accept. 0.3.x results have the same shape
/// as 0.4.0 (CHECK and DEL's prevResult are 0.4.0 additions); STATUS and GC
/// are 1.1.0's.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// File name endings libcni reads, in the same way.
const EXTENSIONS: &[&str] = &["conflist", "conf", "json"];

#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfigList {
    pub name: String,
    pub cni_version: String,
    pub disable_check: bool,
    pub disable_gc: bool,
    pub plugins: Vec<PluginConfig>,
    /// The file it came from (for messages).
    pub source: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    pub plugin_type: String,
    /// The plugin's object as written (without name/cniVersion injected).
    pub raw: Map<String, Value>,
}

impl PluginConfig {
    /// Capabilities the plugin declares it wants in `runtimeConfig`.
    pub fn capabilities(&self) -> impl Iterator<Item = &str> {
        self.raw
            .get("capabilities")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(_, on)| on.as_bool() == Some(true))
            .map(|(k, _)| k.as_str())
    }
}

/// Ordering of "major.minor.patch" strings; unparsable parts count as 0.
pub fn version_at_least(v: &str, want: &str) -> bool {
    let parse = |s: &str| -> Vec<u32> { s.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    parse(v) >= parse(want)
}

impl NetworkConfigList {
    /// The spec's rules for `version >= 0.4.0` (CHECK, prevResult on DEL).
    pub fn supports_check(&self) -> bool {
        version_at_least(&self.cni_version, "0.4.0")
    }
    pub fn supports_status_and_gc(&self) -> bool {
        version_at_least(&self.cni_version, "1.1.0")
    }

    /// Parse a config file's bytes. `.conflist` is a list; `.conf`/`.json`
    /// hold one plugin's config (an object with `type`), or a list.
    pub fn parse(bytes: &[u8], source: &Path) -> Result<Self> {
        let bad = |why: String| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("CNI config {}: {why}", source.display()),
            )
        };
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("invalid JSON: {e}")))?;
        let Value::Object(obj) = v else {
            return Err(bad("not a JSON object".into()));
        };
        let str_key = |k: &str| -> Result<String> {
            match obj.get(k) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(bad(format!("{k:?} is not a string"))),
                None => Err(bad(format!("{k:?} is missing"))),
            }
        };
        let bool_key = |k: &str| -> Result<bool> {
            match obj.get(k) {
                None => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(bad(format!("{k:?} is not a boolean"))),
            }
        };
        let name = str_key("name")?;
        validate_network_name(&name).map_err(&bad)?;
        let cni_version = str_key("cniVersion")?;
        if !SUPPORTED_VERSIONS.contains(&cni_version.as_str()) {
            return Err(bad(format!(
                "cniVersion {cni_version:?} is not supported (supported: {})",
                SUPPORTED_VERSIONS.join(", ")
            )));
        }
        let plugin_objs: Vec<Map<String, Value>> = match obj.get("plugins") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, p)| match p {
                    Value::Object(m) => Ok(m.clone()),
                    _ => Err(bad(format!("plugins[{i}] is not an object"))),
                })
                .collect::<Result<_>>()?,
            Some(_) => return Err(bad("\"plugins\" is not an array".into())),
            // A single plugin's config (.conf): the object is the plugin.
            None if obj.contains_key("type") => {
                let mut m = obj.clone();
                m.remove("name");
                m.remove("cniVersion");
                vec![m]
            }
            None => return Err(bad("neither \"plugins\" nor \"type\" is present".into())),
        };
        if plugin_objs.is_empty() {
            return Err(bad("\"plugins\" is empty".into()));
        }
        let mut plugins = Vec::with_capacity(plugin_objs.len());
        for (i, raw) in plugin_objs.into_iter().enumerate() {
            let plugin_type = match raw.get("type") {
                Some(Value::String(t)) => t.clone(),
                _ => return Err(bad(format!("plugins[{i}].type is missing or not a string"))),
            };
            validate_plugin_type(&plugin_type)
                .map_err(|why| bad(format!("plugins[{i}].type: {why}")))?;
            if let Some(c) = raw.get("capabilities") {
                if !c.is_object() {
                    return Err(bad(format!("plugins[{i}].capabilities is not an object")));
                }
            }
            plugins.push(PluginConfig { plugin_type, raw });
        }
        Ok(NetworkConfigList {
            name,
            cni_version,
            disable_check: bool_key("disableCheck")?,
            disable_gc: bool_key("disableGC")?,
            plugins,
            source: source.to_owned(),
        })
    }

    /// The list as JSON, to cache beside an attachment: DEL must use the
    /// config the ADD used, even after the file changed or vanished.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("cniVersion".into(), self.cni_version.clone().into());
        o.insert("name".into(), self.name.clone().into());
        if self.disable_check {
            o.insert("disableCheck".into(), true.into());
        }
        if self.disable_gc {
            o.insert("disableGC".into(), true.into());
        }
        o.insert(
            "plugins".into(),
            Value::Array(
                self.plugins
                    .iter()
                    .map(|p| Value::Object(p.raw.clone()))
                    .collect(),
            ),
        );
        Value::Object(o)
    }
}

/// The spec: a network name is alphanumerics plus `_`, `.` and `-`.
fn validate_network_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "network name {name:?} is invalid (letters, digits, '_', '.', '-')"
        ))
    }
}

/// A plugin type is a file name in a bin dir: never a path.
fn validate_plugin_type(t: &str) -> std::result::Result<(), String> {
    if t.is_empty() || t == "." || t == ".." {
        return Err(format!("{t:?} is not a plugin name"));
    }
    if !t
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    {
        return Err(format!(
            "{t:?} is not a plugin name (letters, digits, '_', '.', '-')"
        ));
    }
    Ok(())
}

/// The config files of a conf dir, in the order they are considered.
pub fn config_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e))
                && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Why no network can be used; `reason` is CRI's CamelCase reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    pub reason: &'static str,
    pub message: String,
}

impl NotReady {
    pub fn into_error(self) -> Error {
        Error::new(
            ErrorKind::NetworkFailed,
            format!("network not ready ({}): {}", self.reason, self.message),
        )
    }
}

/// Choose the network from `dir`: the one named `wanted`, or else the
/// lexically first valid file. Invalid files are skipped but named when
/// nothing valid is left.
pub fn select(dir: &Path, wanted: &str) -> std::result::Result<NetworkConfigList, NotReady> {
    let files = match config_files(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(NotReady {
                reason: "NetworkConfigUnreadable",
                message: format!("cannot read CNI config dir {}: {e}", dir.display()),
            })
        }
    };
    let mut problems = Vec::new();
    for f in &files {
        let parsed = std::fs::read(f)
            .map_err(|e| format!("{}: {e}", f.display()))
            .and_then(|b| NetworkConfigList::parse(&b, f).map_err(|e| e.to_string()));
        match parsed {
            Ok(list) if wanted.is_empty() || list.name == wanted => return Ok(list),
            Ok(_) => {}
            Err(e) => problems.push(e),
        }
    }
    let what = if wanted.is_empty() {
        "no CNI network config".to_owned()
    } else {
        format!("no CNI network config named {wanted:?}")
    };
    if problems.is_empty() {
        Err(NotReady {
            reason: "NoNetworkConfig",
            message: format!("{what} in {}", dir.display()),
        })
    } else {
        Err(NotReady {
            reason: "NetworkConfigInvalid",
            message: format!(
                "{what} is valid in {}: {}",
                dir.display(),
                problems.join("; ")
            ),
        })
    }
}

/// Where `plugin` lives: the first bin dir holding an executable of that
/// name.
pub fn find_plugin(bin_dirs: &[PathBuf], plugin: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    bin_dirs.iter().map(|d| d.join(plugin)).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Every plugin of `list`, resolved; the error names the missing ones.
pub fn resolve_plugins(
    list: &NetworkConfigList,
    bin_dirs: &[PathBuf],
) -> std::result::Result<Vec<PathBuf>, NotReady> {
    let mut found = Vec::with_capacity(list.plugins.len());
    let mut missing = Vec::new();
    for p in &list.plugins {
        match find_plugin(bin_dirs, &p.plugin_type) {
            Some(path) => found.push(path),
            None => missing.push(p.plugin_type.as_str()),
        }
    }
    if missing.is_empty() {
        Ok(found)
    } else {
        Err(NotReady {
            reason: "NetworkPluginMissing",
            message: format!(
                "network {:?} ({}): CNI plugin{} {} not found in {}",
                list.name,
                list.source.display(),
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                bin_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<NetworkConfigList> {
        NetworkConfigList::parse(s.as_bytes(), Path::new("/etc/cni/net.d/x.conflist"))
    }

    const BRIDGE: &str = r#"{"cniVersion":"1.0.0","name":"podnet","plugins":[
        {"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","subnet":"10.88.0.0/16"}},
        {"type":"portmap","capabilities":{"portMappings":true,"other":false}}]}"#;

    #[test]
    fn conflist_parses_and_round_trips() {
        let l = parse(BRIDGE).unwrap();
        assert_eq!(l.name, "podnet");
        assert_eq!(l.plugins.len(), 2);
        assert_eq!(l.plugins[0].plugin_type, "bridge");
        assert_eq!(
            l.plugins[1].capabilities().collect::<Vec<_>>(),
            ["portMappings"]
        );
        assert!(l.supports_check() && !l.supports_status_and_gc());
        let again = NetworkConfigList::parse(
            l.to_json().to_string().as_bytes(),
            Path::new("/etc/cni/net.d/x.conflist"),
        )
        .unwrap();
        assert_eq!(again, l);
    }

    #[test]
    fn single_plugin_conf_becomes_a_list() {
        let l =
            parse(r#"{"cniVersion":"0.4.0","name":"n","type":"bridge","bridge":"b0"}"#).unwrap();
        assert_eq!(l.plugins.len(), 1);
        assert_eq!(l.plugins[0].raw.get("bridge"), Some(&Value::from("b0")));
        assert!(!l.plugins[0].raw.contains_key("name"));
    }

    #[test]
    fn bad_configs_are_named() {
        for (text, want) in [
            ("{", "invalid JSON"),
            ("[]", "not a JSON object"),
            (
                r#"{"cniVersion":"1.0.0","plugins":[]}"#,
                "\"name\" is missing",
            ),
            (
                r#"{"cniVersion":"9.9.9","name":"n","plugins":[{"type":"a"}]}"#,
                "not supported",
            ),
            (r#"{"cniVersion":"1.0.0","name":"n","plugins":[]}"#, "empty"),
            (
                r#"{"cniVersion":"1.0.0","name":"n w","plugins":[{"type":"a"}]}"#,
                "network name",
            ),
            (
                r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"../x"}]}"#,
                "plugins[0].type",
            ),
            (
                r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"a":1}]}"#,
                "plugins[0].type is missing",
            ),
            (r#"{"cniVersion":"1.0.0","name":"n"}"#, "neither"),
            (
                r#"{"cniVersion":"1.0.0","name":"n","disableCheck":"yes","plugins":[{"type":"a"}]}"#,
                "disableCheck",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(e.contains("x.conflist"), "{e}");
        }
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("1.1.0", "1.1.0"));
        assert!(version_at_least("1.0.0", "0.4.0"));
        assert!(!version_at_least("0.3.1", "0.4.0"));
        assert!(!version_at_least("1.0.0", "1.1.0"));
    }

    #[test]
    fn selection_skips_invalid_files_and_names_them() {
        let dir = std::env::temp_dir().join(format!("podscope-cni-sel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let nr = select(&dir, "").unwrap_err();
        assert_eq!(nr.reason, "NoNetworkConfig");
        assert_eq!(
            select(&dir.join("absent"), "").unwrap_err().reason,
            "NoNetworkConfig"
        );
        std::fs::write(dir.join("05-broken.conflist"), "{nope").unwrap();
        std::fs::write(dir.join("README"), "not a config").unwrap();
        let nr = select(&dir, "").unwrap_err();
        assert_eq!(nr.reason, "NetworkConfigInvalid");
        assert!(nr.message.contains("05-broken.conflist"), "{}", nr.message);
        std::fs::write(
            dir.join("20-b.conflist"),
            BRIDGE.replace("podnet", "second"),
        )
        .unwrap();
        std::fs::write(
            dir.join("10-a.conf"),
            r#"{"cniVersion":"1.0.0","name":"first","type":"loopback"}"#,
        )
        .unwrap();
        assert_eq!(select(&dir, "").unwrap().name, "first");
        assert_eq!(select(&dir, "second").unwrap().name, "second");
        assert_eq!(
            select(&dir, "third").unwrap_err().reason,
            "NetworkConfigInvalid"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_plugins_are_named() {
        let dir = std::env::temp_dir().join(format!("podscope-cni-bin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("bridge");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("portmap"), "not executable").unwrap();
        let l = parse(BRIDGE).unwrap();
        let nr = resolve_plugins(&l, &[PathBuf::from("/nonexistent"), dir.clone()]).unwrap_err();
        assert_eq!(nr.reason, "NetworkPluginMissing");
        assert!(
            nr.message.contains("plugin portmap not found"),
            "{}",
            nr.message
        );
        std::fs::set_permissions(dir.join("portmap"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let found = resolve_plugins(&l, std::slice::from_ref(&dir)).unwrap();
        assert_eq!(found, [dir.join("bridge"), dir.join("portmap")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
