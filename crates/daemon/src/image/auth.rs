//! Registry credentials: what a caller passes (CRI's AuthConfig), what
//! containers-auth.json(5) files hold, and the registry's challenge
//! (`WWW-Authenticate`). Pure but for `from_files`.

use base64::Engine as _;
use std::path::PathBuf;

/// Credentials for one registry. `auth` is `base64(user:password)`;
/// `identity_token` is an OAuth2 refresh token, `registry_token` a bearer
/// token used as is.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
    pub identity_token: String,
    pub registry_token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a secret in a log line.
        write!(f, "Credentials {{ username: {:?}, .. }}", self.username)
    }
}

impl Credentials {
    pub fn is_empty(&self) -> bool {
        self.username.is_empty()
            && self.password.is_empty()
            && self.identity_token.is_empty()
            && self.registry_token.is_empty()
    }

    /// Fill username and password from an `auth` string (base64 of
    /// `user:password`) where they are not given.
    pub fn with_auth(mut self, auth: &str) -> Result<Self, String> {
        if auth.is_empty() || !self.username.is_empty() {
            return Ok(self);
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| format!("auth is not base64: {e}"))?;
        let text = String::from_utf8(raw).map_err(|_| "auth is not UTF-8".to_owned())?;
        let (u, p) = text
            .split_once(':')
            .ok_or_else(|| "auth is not base64 of user:password".to_owned())?;
        self.username = u.to_owned();
        self.password = p.to_owned();
        Ok(self)
    }

    pub fn basic(&self) -> Option<String> {
        (!self.username.is_empty()).then(|| {
            base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", self.username, self.password))
        })
    }
}

/// The auth files containers-auth.json(5) names for a process running as
/// root without a session (`/run/containers/0/auth.json`, then
/// `$XDG_CONFIG_HOME` = `/root/.config/containers/auth.json`, then Docker's
/// `/root/.docker/config.json`), and `/etc/containers/auth.json`, the
/// system-wide file CRI-O's `global_auth_file` points to on most distros.
pub fn default_files() -> Vec<PathBuf> {
    [
        "/run/containers/0/auth.json",
        "/etc/containers/auth.json",
        "/root/.config/containers/auth.json",
        "/root/.docker/config.json",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

#[derive(serde::Deserialize)]
struct AuthFile {
    #[serde(default)]
    auths: std::collections::HashMap<String, AuthEntry>,
}

#[derive(serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: String,
    #[serde(default)]
    identitytoken: String,
}

/// Credentials for `repository` (`domain/path`) from the first file with
/// a matching key: the most specific key wins (`host/ns/repo`, then
/// `host/ns`, then `host`; Docker Hub also as `https://index.docker.io/v1/`).
/// An unreadable or malformed file is skipped with a warning: it must not
/// stop pulls that need no credentials.
pub fn from_files(files: &[PathBuf], repository: &str) -> Option<Credentials> {
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        match lookup(&text, repository) {
            Ok(Some(c)) => return Some(c),
            Ok(None) => {}
            Err(e) => tracing::warn!("auth file {}: {e}; skipped", f.display()),
        }
    }
    None
}

pub fn lookup(text: &str, repository: &str) -> Result<Option<Credentials>, String> {
    let file: AuthFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    let mut name = repository;
    loop {
        keys.push(name.to_owned());
        match name.rsplit_once('/') {
            Some((head, _)) => name = head,
            None => break,
        }
    }
    if name == podscope_api::reference::DOCKER_HUB {
        keys.push("https://index.docker.io/v1/".into());
        keys.push("index.docker.io".into());
    }
    for k in keys {
        let entry = file.auths.get(&k).or_else(|| {
            // Docker writes keys with a scheme; match those by host.
            file.auths.iter().find_map(|(key, v)| {
                let bare = key
                    .trim_start_matches("https://")
                    .trim_start_matches("http://")
                    .trim_end_matches('/');
                (bare == k).then_some(v)
            })
        });
        if let Some(e) = entry {
            let c = Credentials {
                identity_token: e.identitytoken.clone(),
                ..Credentials::default()
            }
            .with_auth(&e.auth)?;
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// A parsed `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: String,
        scope: String,
    },
}

/// The first challenge podscope can answer (RFC 7235's syntax: a scheme,
/// then `key=value` or `key="quoted, value"` pairs).
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    match scheme.to_ascii_lowercase().as_str() {
        "basic" => Some(Challenge::Basic),
        "bearer" => {
            let params = parse_params(rest);
            let get = |k: &str| {
                params
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(k))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            let realm = get("realm");
            (!realm.is_empty()).then(|| Challenge::Bearer {
                realm,
                service: get("service"),
                scope: get("scope"),
            })
        }
        _ => None,
    }
}

fn parse_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i] == b' ' || b[i] == b',') {
            i += 1;
        }
        let ks = i;
        while i < b.len() && b[i] != b'=' {
            i += 1;
        }
        let key = s[ks..i].trim().to_owned();
        i += 1;
        let mut val = String::new();
        if i < b.len() && b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                val.push(b[i] as char);
                i += 1;
            }
            i += 1;
        } else {
            let vs = i.min(b.len());
            while i < b.len() && b[i] != b',' {
                i += 1;
            }
            val = s[vs..i.min(b.len())].trim().to_owned();
        }
        if !key.is_empty() {
            out.push((key, val));
        }
    }
    out
}

/// Pull's `options` as credentials: the fields as given, `auth` (base64
/// of `username:password`) unpacked over them.
impl TryFrom<&podscope_api::image::PullOptions> for Credentials {
    type Error = podscope_api::Error;

    fn try_from(o: &podscope_api::image::PullOptions) -> Result<Self, Self::Error> {
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        Credentials {
            username: s(&o.username),
            password: s(&o.password),
            identity_token: s(&o.identity_token),
            registry_token: s(&o.registry_token),
        }
        .with_auth(&s(&o.auth))
        .map_err(|e| podscope_api::Error::invalid("options.auth", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: "registry.docker.io".into(),
                scope: "repository:library/busybox:pull".into(),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Negotiate"), None);
        assert_eq!(
            parse_challenge(r#"Bearer realm=http://127.0.0.1/t, scope="a,b""#),
            Some(Challenge::Bearer {
                realm: "http://127.0.0.1/t".into(),
                service: String::new(),
                scope: "a,b".into(),
            })
        );
    }

    #[test]
    fn auth_strings() {
        let c = Credentials::default()
            .with_auth("dXNlcjpwYTpzcw==")
            .unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("user", "pa:ss")
        );
        assert!(Credentials::default().with_auth("!!").is_err());
        assert_eq!(c.basic().unwrap(), "dXNlcjpwYTpzcw==");
        assert!(!format!("{c:?}").contains("pa:ss"));
    }

    #[test]
    fn most_specific_key_wins() {
        let f = r#"{"auths":{
            "reg.example.com":{"auth":"YTpi"},
            "reg.example.com/team":{"auth":"Yzpk"},
            "https://index.docker.io/v1/":{"auth":"ZTpm"}}}"#;
        let u = |r: &str| lookup(f, r).unwrap().map(|c| c.username);
        assert_eq!(u("reg.example.com/team/app"), Some("c".into()));
        assert_eq!(u("reg.example.com/other/app"), Some("a".into()));
        assert_eq!(u("docker.io/library/busybox"), Some("e".into()));
        assert_eq!(u("other.example.com/x"), None);
        assert!(lookup("not json", "x/y").is_err());
    }
}
