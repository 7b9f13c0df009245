//! Registry settings from the file CRI-O, podman, skopeo and buildah
//! already share: `/etc/containers/registries.conf` and the drop-ins in
//! `registries.conf.d/` (containers-registries.conf(5), version 2), so a
//! mirror an admin set up for those tools works here unchanged.
//!
//! What is read: `unqualified-search-registries`, and each `[[registry]]`
//! with `prefix`, `location`, `insecure`, `blocked`,
//! `mirror-by-digest-only` and its `[[registry.mirror]]`s (`location`,
//! `insecure`, `pull-from-mirror`). Drop-ins are read in lexical order; a
//! `[[registry]]` with a prefix seen before replaces that one, other keys
//! replace what came before them. Keys this module does not use (aliases,
//! `short-name-mode`, `credential-helpers`) are accepted and ignored, as
//! the other readers of the file ignore what they do not know. Pure but
//! for `load`.

use podscope_api::error::{Error, Result};
use podscope_api::reference::{Reference, DOCKER_HUB};
use serde::Deserialize;
use std::path::Path;

pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";
pub const REGISTRIES_CONF_D: &str = "/etc/containers/registries.conf.d";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registries {
    pub search: Vec<String>,
    pub registries: Vec<Registry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Registry {
    #[serde(default)]
    pub prefix: String,
    #[serde(default)]
    pub location: String,
    #[serde(default)]
    pub insecure: bool,
    #[serde(default)]
    pub blocked: bool,
    #[serde(default)]
    pub mirror_by_digest_only: bool,
    #[serde(default, rename = "mirror")]
    pub mirrors: Vec<Mirror>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Mirror {
    pub location: String,
    #[serde(default)]
    pub insecure: bool,
    /// `all` (default), `digest-only` or `tag-only`.
    #[serde(default)]
    pub pull_from_mirror: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct File {
    unqualified_search_registries: Option<Vec<String>>,
    #[serde(default)]
    registry: Vec<Registry>,
    /// Version 1's tables: refused with a clear message.
    registries: Option<toml::Value>,
}

/// One place to pull from: a registry host and the repository path there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// `host[:port]` as written in the configuration (docker.io stays
    /// docker.io; the client knows its endpoint).
    pub domain: String,
    pub path: String,
    /// Plain HTTP or unverified TLS is allowed.
    pub insecure: bool,
    pub mirror: bool,
}

impl Source {
    pub fn endpoint_host(&self) -> &str {
        if self.domain == DOCKER_HUB {
            "registry-1.docker.io"
        } else {
            &self.domain
        }
    }
}

impl Registries {
    /// The main file, then each `*.conf` in the drop-in directory in
    /// lexical order. Missing files are no settings.
    pub fn load(main: &Path, dropins: &Path) -> Result<Registries> {
        let mut r = Registries::default();
        let read = |p: &Path| -> Result<Option<String>> {
            match std::fs::read_to_string(p) {
                Ok(t) => Ok(Some(t)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::io(format!("read {}", p.display()), e)),
            }
        };
        if let Some(text) = read(main)? {
            r.merge(&text)
                .map_err(|e| e.context(main.display().to_string()))?;
        }
        let mut names: Vec<_> = match std::fs::read_dir(dropins) {
            Ok(rd) => rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        for p in names {
            if let Some(text) = read(&p)? {
                r.merge(&text)
                    .map_err(|e| e.context(p.display().to_string()))?;
            }
        }
        Ok(r)
    }

    /// Lay one file over what is there.
    pub fn merge(&mut self, text: &str) -> Result<()> {
        let f: File = toml::from_str(text)
            .map_err(|e| Error::invalid("registries.conf", e.message().to_owned()))?;
        if f.registries.is_some() {
            return Err(Error::invalid(
                "registries.conf",
                "version 1 tables ([registries.search] and the like) are not read; \
                 use version 2 ([[registry]], unqualified-search-registries)",
            ));
        }
        if let Some(s) = f.unqualified_search_registries {
            self.search = s;
        }
        for mut reg in f.registry {
            if reg.prefix.is_empty() {
                reg.prefix = reg.location.clone();
            }
            if reg.prefix.is_empty() {
                return Err(Error::invalid(
                    "registries.conf",
                    "a [[registry]] needs a prefix or a location",
                ));
            }
            if reg.prefix.starts_with("*.") && !reg.location.is_empty() {
                return Err(Error::invalid(
                    "registries.conf",
                    format!(
                        "[[registry]] {:?}: a wildcard prefix takes no location",
                        reg.prefix
                    ),
                ));
            }
            for m in &reg.mirrors {
                if !matches!(
                    m.pull_from_mirror.as_str(),
                    "" | "all" | "digest-only" | "tag-only"
                ) {
                    return Err(Error::invalid(
                        "registries.conf",
                        format!(
                            "mirror {:?}: pull-from-mirror must be all, digest-only or tag-only",
                            m.location
                        ),
                    ));
                }
            }
            self.registries.retain(|r| r.prefix != reg.prefix);
            self.registries.push(reg);
        }
        Ok(())
    }

    /// The `[[registry]]` whose prefix matches `name` (`domain/path`)
    /// longest, as containers/image chooses.
    pub fn matching(&self, name: &str) -> Option<&Registry> {
        self.registries
            .iter()
            .filter(|r| prefix_matches(&r.prefix, name))
            .max_by_key(|r| r.prefix.len())
    }

    /// Where to pull `r` from, in order: mirrors first (those whose
    /// pull-from-mirror and mirror-by-digest-only admit this reference),
    /// then the registry itself. A blocked registry is an error.
    pub fn sources(&self, r: &Reference) -> Result<Vec<Source>> {
        let name = r.repository();
        let Some(reg) = self.matching(&name) else {
            return Ok(vec![Source {
                domain: r.domain.clone(),
                path: r.path.clone(),
                insecure: false,
                mirror: false,
            }]);
        };
        if reg.blocked {
            return Err(Error::new(
                podscope_api::error::ErrorKind::RegistryDenied,
                format!(
                    "{name}: registry blocked by [[registry]] prefix {:?} in registries.conf",
                    reg.prefix
                ),
            ));
        }
        let by_digest = r.digest.is_some();
        let rest = if reg.prefix.starts_with("*.") {
            None
        } else {
            Some(&name[reg.prefix.len()..])
        };
        let rewrite = |location: &str| -> Result<(String, String)> {
            let full = match rest {
                Some(rest) => format!("{location}{rest}"),
                None => name.clone(),
            };
            split_location(&full)
        };
        let mut out = Vec::new();
        for m in &reg.mirrors {
            let admitted = match m.pull_from_mirror.as_str() {
                "digest-only" => by_digest,
                "tag-only" => !by_digest,
                _ => by_digest || !reg.mirror_by_digest_only,
            };
            if admitted {
                let (domain, path) = rewrite(&m.location)?;
                out.push(Source {
                    domain,
                    path,
                    insecure: m.insecure,
                    mirror: true,
                });
            }
        }
        let (domain, path) = if reg.location.is_empty() {
            (r.domain.clone(), r.path.clone())
        } else {
            rewrite(&reg.location)?
        };
        out.push(Source {
            domain,
            path,
            insecure: reg.insecure,
            mirror: false,
        });
        Ok(out)
    }
}

/// `host[:port]/path...` → (host, path).
fn split_location(full: &str) -> Result<(String, String)> {
    match full.split_once('/') {
        Some((d, p)) if !d.is_empty() && !p.is_empty() => Ok((d.to_owned(), p.to_owned())),
        _ => Err(Error::invalid(
            "registries.conf",
            format!("{full:?} is not host/repository"),
        )),
    }
}

/// containers/image's rule: an exact name, or the prefix followed by
/// '/', or a `*.domain` wildcard matching the name's host.
fn prefix_matches(prefix: &str, name: &str) -> bool {
    if let Some(suffix) = prefix.strip_prefix("*.") {
        let host = name.split('/').next().unwrap_or("");
        return host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}"));
    }
    name == prefix || (name.starts_with(prefix) && name.as_bytes().get(prefix.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = r#"
unqualified-search-registries = ["docker.io"]
short-name-mode = "enforcing"

[[registry]]
prefix = "gcr.io"
location = "gcr.io"
[[registry.mirror]]
location = "127.0.0.1:5000/gcr.io"
insecure = true

[[registry]]
location = "docker.io"
mirror-by-digest-only = true
[[registry.mirror]]
location = "mirror.example.com/hub"

[[registry]]
prefix = "example.com/blocked"
location = "example.com/blocked"
blocked = true

[[registry]]
prefix = "*.corp.example"

[[registry]]
prefix = "old.example.com/team"
location = "new.example.com/team2"
insecure = true
[[registry.mirror]]
location = "tags.example.com/m"
pull-from-mirror = "tag-only"

[aliases]
"fedora" = "registry.fedoraproject.org/fedora"
"#;

    fn regs() -> Registries {
        let mut r = Registries::default();
        r.merge(CONF).unwrap();
        r
    }

    fn srcs(r: &Registries, s: &str) -> Vec<(String, String, bool)> {
        r.sources(&Reference::parse(s).unwrap())
            .unwrap()
            .into_iter()
            .map(|s| (s.domain, s.path, s.insecure))
            .collect()
    }

    #[test]
    fn mirrors_come_first_with_the_rest_of_the_name() {
        let r = regs();
        assert_eq!(r.search, vec!["docker.io"]);
        assert_eq!(
            srcs(&r, "gcr.io/k8s-staging-cri-tools/test-image-1:latest"),
            vec![
                (
                    "127.0.0.1:5000".into(),
                    "gcr.io/k8s-staging-cri-tools/test-image-1".into(),
                    true
                ),
                (
                    "gcr.io".into(),
                    "k8s-staging-cri-tools/test-image-1".into(),
                    false
                ),
            ]
        );
        // mirror-by-digest-only: a tag goes to the registry alone.
        assert_eq!(
            srcs(&r, "busybox"),
            vec![("docker.io".into(), "library/busybox".into(), false)]
        );
        let d = format!("busybox@sha256:{}", "1".repeat(64));
        assert_eq!(srcs(&r, &d)[0].1, "hub/library/busybox");
        // A location rewrites the prefix; tag-only mirrors skip digests.
        assert_eq!(
            srcs(&r, "old.example.com/team/app:v1"),
            vec![
                ("tags.example.com".into(), "m/app".into(), false),
                ("new.example.com".into(), "team2/app".into(), true),
            ]
        );
        let d = format!("old.example.com/team/app@sha256:{}", "1".repeat(64));
        assert_eq!(srcs(&r, &d).len(), 1);
        // Unmatched names go where they say; "gcr.io.evil" is not "gcr.io".
        assert_eq!(
            srcs(&r, "gcr.io.evil/x"),
            vec![("gcr.io.evil".into(), "x".into(), false)]
        );
        assert_eq!(srcs(&r, "a.corp.example/x")[0].0, "a.corp.example");
    }

    #[test]
    fn blocked_is_a_named_denial() {
        let e = regs()
            .sources(&Reference::parse("example.com/blocked/x").unwrap())
            .unwrap_err();
        assert_eq!(e.kind(), podscope_api::error::ErrorKind::RegistryDenied);
        assert!(e.to_string().contains("blocked"), "{e}");
        // Only below the prefix.
        assert!(regs()
            .sources(&Reference::parse("example.com/blockedx/y").unwrap())
            .is_ok());
    }

    #[test]
    fn dropins_replace_by_prefix() {
        let mut r = regs();
        r.merge("unqualified-search-registries = []\n[[registry]]\nprefix = \"gcr.io\"\nlocation = \"gcr.io\"\n")
            .unwrap();
        assert!(r.search.is_empty());
        assert_eq!(srcs(&r, "gcr.io/a/b").len(), 1, "the mirror is gone");
        assert_eq!(
            r.registries.iter().filter(|x| x.prefix == "gcr.io").count(),
            1
        );
    }

    #[test]
    fn bad_files_are_named_errors() {
        let mut r = Registries::default();
        for (text, why) in [
            ("[registries.search]\nregistries = []\n", "version 1"),
            ("[[registry]]\ninsecure = true\n", "prefix or a location"),
            ("[[registry]]\nprefix = \"*.x.com\"\nlocation = \"y\"\n", "wildcard"),
            (
                "[[registry]]\nlocation = \"a.com\"\n[[registry.mirror]]\nlocation = \"b.com/x\"\npull-from-mirror = \"some\"\n",
                "pull-from-mirror",
            ),
            ("unqualified-search-registries = 3\n", "registries.conf"),
        ] {
            let e = r.merge(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn load_reads_dropins_in_order() {
        let dir = podscope_test_support::TempDir::new();
        let main = dir.0.join("registries.conf");
        let d = dir.0.join("registries.conf.d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(&main, CONF).unwrap();
        std::fs::write(
            d.join("20-b.conf"),
            "unqualified-search-registries = [\"b.io\"]\n",
        )
        .unwrap();
        std::fs::write(
            d.join("10-a.conf"),
            "unqualified-search-registries = [\"a.io\"]\n",
        )
        .unwrap();
        std::fs::write(d.join("30-c.txt"), "garbage").unwrap();
        let r = Registries::load(&main, &d).unwrap();
        assert_eq!(r.search, vec!["b.io"]);
        assert_eq!(
            Registries::load(&dir.0.join("none"), &dir.0.join("none.d")).unwrap(),
            Registries::default()
        );
    }
}
