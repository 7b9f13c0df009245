//! An OCI Distribution (Docker Registry HTTP API v2) client for pulls:
//! manifests and blobs of one repository, with the registry's own auth
//! dance (Basic, or a Bearer token from the challenge's realm, with the
//! caller's credentials or anonymously). Every failure names the
//! registry, the request and the HTTP status, with the registry's own
//! message, and is one of the registry kinds: unauthorized, denied,
//! unavailable (unreachable, hung, reset, 5xx), not found.

use super::auth::{parse_challenge, Challenge, Credentials};
use super::registries::Source;
use podscope_api::error::{Error, ErrorKind, Result};
use podscope_api::reference::Digest;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// The HTTP side shared by all pulls: connection pools, and which
/// insecure registries were found to speak plain HTTP.
pub struct RegistryClient {
    verified: reqwest::Client,
    /// For `insecure` registries: TLS without verification.
    unverified: reqwest::Client,
    plain_http: Mutex<HashSet<String>>,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub connect: Duration,
    /// No byte for this long on a request or a body: the registry hangs.
    pub stall: Duration,
}

impl RegistryClient {
    pub fn new(t: &Timeouts) -> Result<Self> {
        let build = |insecure: bool| {
            reqwest::Client::builder()
                .user_agent(concat!("podscope/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(t.connect)
                .read_timeout(t.stall)
                .tcp_nodelay(true)
                .danger_accept_invalid_certs(insecure)
                .build()
                .map_err(|e| Error::internal(format!("HTTP client: {e}")))
        };
        Ok(RegistryClient {
            verified: build(false)?,
            unverified: build(true)?,
            plain_http: Mutex::new(HashSet::new()),
        })
    }

    /// A session with one repository at one source.
    pub fn session<'a>(&'a self, source: &'a Source, creds: Option<Credentials>) -> Session<'a> {
        Session {
            client: self,
            source,
            creds,
            authorization: None,
        }
    }

    /// A session again from its detached state (in another task): the
    /// token already obtained is reused.
    pub fn resume<'a>(&'a self, source: &'a Source, d: Detached) -> Session<'a> {
        Session {
            client: self,
            source,
            creds: d.creds,
            authorization: d.authorization,
        }
    }
}

/// A session's credentials and token, to carry into another task.
pub struct Detached {
    creds: Option<Credentials>,
    authorization: Option<String>,
}

pub struct Session<'a> {
    client: &'a RegistryClient,
    source: &'a Source,
    creds: Option<Credentials>,
    /// The Authorization header value that worked (Basic or Bearer).
    authorization: Option<String>,
}

/// A registry answer of the kinds callers tell apart.
fn registry_error(
    kind: ErrorKind,
    registry: &str,
    what: &str,
    detail: impl std::fmt::Display,
) -> Error {
    Error::new(kind, format!("registry {registry}: {what}: {detail}"))
}

/// The first `errors[].message` of a registry's JSON error body, or the
/// start of the body.
fn error_detail(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Errs {
        errors: Vec<E>,
    }
    #[derive(serde::Deserialize)]
    struct E {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    if let Ok(e) = serde_json::from_slice::<Errs>(body) {
        if let Some(first) = e.errors.first() {
            return format!("{} {}", first.code, first.message)
                .trim()
                .to_owned();
        }
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    text.trim().to_owned()
}

/// Whether a transport failure may be a TLS handshake with a plain-HTTP
/// server (then an insecure registry is tried over http://).
fn maybe_plain_http(e: &reqwest::Error) -> bool {
    e.is_connect() || e.is_request()
}

pub fn transport_error(registry: &str, what: &str, e: &reqwest::Error) -> Error {
    let why = if e.is_timeout() {
        "no answer in time (the registry hangs)".to_owned()
    } else if e.is_connect() {
        format!("cannot connect: {}", chain(e))
    } else {
        chain(e)
    };
    registry_error(ErrorKind::RegistryUnavailable, registry, what, why)
}

/// An error with its sources, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

impl<'a> Session<'a> {
    pub fn registry(&self) -> &str {
        &self.source.domain
    }

    pub fn detach(&self) -> Detached {
        Detached {
            creds: self.creds.clone(),
            authorization: self.authorization.clone(),
        }
    }

    fn url(&self, scheme: &str, tail: &str) -> String {
        format!(
            "{scheme}://{}/v2/{}/{tail}",
            self.source.endpoint_host(),
            self.source.path
        )
    }

    fn http(&self) -> &reqwest::Client {
        if self.source.insecure {
            &self.client.unverified
        } else {
            &self.client.verified
        }
    }

    async fn send(&self, url: &str, accept: Option<&str>) -> reqwest::Result<reqwest::Response> {
        let mut req = self.http().get(url);
        if let Some(a) = accept {
            req = req.header(reqwest::header::ACCEPT, a);
        }
        if let Some(auth) = &self.authorization {
            req = req.header(reqwest::header::AUTHORIZATION, auth);
        }
        req.send().await
    }

    /// GET `tail` under the repository, answering one auth challenge. A
    /// non-2xx answer is an error of its kind; `what` names the request.
    pub async fn get(
        &mut self,
        tail: &str,
        accept: Option<&str>,
        what: &str,
    ) -> Result<reqwest::Response> {
        let reg = self.source.domain.clone();
        let plain = self.source.insecure && self.client.plain_http.lock().unwrap().contains(&reg);
        let mut scheme = if plain { "http" } else { "https" };
        let mut resp = match self.send(&self.url(scheme, tail), accept).await {
            Ok(r) => r,
            Err(e) if self.source.insecure && !plain && maybe_plain_http(&e) => {
                scheme = "http";
                let r = self
                    .send(&self.url(scheme, tail), accept)
                    .await
                    .map_err(|e2| transport_error(&reg, what, &e2))?;
                self.client.plain_http.lock().unwrap().insert(reg.clone());
                r
            }
            Err(e) => return Err(transport_error(&reg, what, &e)),
        };
        if resp.status() == reqwest::StatusCode::UNAUTHORIZED {
            let challenge = resp
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_challenge);
            let had = self.authorization.is_some();
            if let (Some(c), false) = (challenge, had) {
                self.authorization = Some(self.authorize(&c, what).await?);
                resp = self
                    .send(&self.url(scheme, tail), accept)
                    .await
                    .map_err(|e| transport_error(&reg, what, &e))?;
            }
        }
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let body = read_capped(resp, 4096).await;
        let detail = format!("HTTP {status}: {}", error_detail(&body));
        let kind = match status.as_u16() {
            401 => ErrorKind::RegistryUnauthorized,
            403 => ErrorKind::RegistryDenied,
            404 => ErrorKind::NotFound,
            408 | 429 | 500..=599 => ErrorKind::RegistryUnavailable,
            _ => ErrorKind::InvalidArgument,
        };
        let detail = if kind == ErrorKind::RegistryUnauthorized {
            match &self.creds {
                Some(c) if !c.is_empty() => {
                    format!("{detail} (credentials for {:?} refused)", c.username)
                }
                _ => format!("{detail} (no credentials given)"),
            }
        } else {
            detail
        };
        Err(registry_error(kind, &reg, what, detail))
    }

    /// The client for a token realm the registry named, which gets the
    /// caller's credentials: https, verified, unless the operator marked
    /// the registry insecure, which lets its realm be plain http or, on the
    /// registry's own host, unverified TLS. A realm on another host (Docker
    /// Hub's is auth.docker.io, as the token spec allows) is always
    /// verified; any other scheme is refused.
    fn realm_client(&self, realm: &str, what: &str) -> Result<&reqwest::Client> {
        let reg = &self.source.domain;
        let refuse = |why: String| registry_error(ErrorKind::RegistryUnauthorized, reg, what, why);
        let url = reqwest::Url::parse(realm)
            .map_err(|e| refuse(format!("the challenge's realm is not a URL: {e}")))?;
        let registry_host = self
            .source
            .endpoint_host()
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(self.source.endpoint_host(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let same_host = url
            .host_str()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
            == Some(registry_host);
        match url.scheme() {
            "https" if self.source.insecure && same_host => Ok(&self.client.unverified),
            "https" => Ok(&self.client.verified),
            "http" if self.source.insecure => Ok(&self.client.unverified),
            "http" => Err(refuse(format!(
                "the token realm {realm} is plain http: credentials and tokens go over \
                 https only (unless {reg} is marked insecure in registries.conf)"
            ))),
            other => Err(refuse(format!(
                "the token realm {realm} is {other}, not https"
            ))),
        }
    }

    /// Answer a challenge: Basic with the credentials, or a token from
    /// the realm (OAuth2 refresh for an identity token, else GET with
    /// Basic or anonymous), or the caller's own registry token.
    async fn authorize(&self, c: &Challenge, what: &str) -> Result<String> {
        let reg = &self.source.domain;
        let creds = self.creds.clone().unwrap_or_default();
        if !creds.registry_token.is_empty() {
            return Ok(format!("Bearer {}", creds.registry_token));
        }
        match c {
            Challenge::Basic => match creds.basic() {
                Some(b) => Ok(format!("Basic {b}")),
                None => Err(registry_error(
                    ErrorKind::RegistryUnauthorized,
                    reg,
                    what,
                    "HTTP 401 Unauthorized: the registry asks for a user name and password (no credentials given)",
                )),
            },
            Challenge::Bearer { realm, service, scope } => {
                let scope = if scope.is_empty() {
                    format!("repository:{}:pull", self.source.path)
                } else {
                    scope.clone()
                };
                let token_what = format!("token from {realm}");
                let http = self.realm_client(realm, &token_what)?;
                let resp = if !creds.identity_token.is_empty() {
                    http.post(realm)
                        .form(&[
                            ("grant_type", "refresh_token"),
                            ("refresh_token", creds.identity_token.as_str()),
                            ("service", service.as_str()),
                            ("scope", scope.as_str()),
                            ("client_id", "podscope"),
                        ])
                        .send()
                        .await
                } else {
                    let mut req = http
                        .get(realm)
                        .query(&[("service", service.as_str()), ("scope", scope.as_str())]);
                    if let Some(b) = creds.basic() {
                        req = req.header(reqwest::header::AUTHORIZATION, format!("Basic {b}"));
                    }
                    req.send().await
                }
                .map_err(|e| transport_error(reg, &token_what, &e))?;
                let status = resp.status();
                let body = read_capped(resp, 1 << 20).await;
                if !status.is_success() {
                    let kind = match status.as_u16() {
                        401 => ErrorKind::RegistryUnauthorized,
                        403 => ErrorKind::RegistryDenied,
                        500..=599 => ErrorKind::RegistryUnavailable,
                        _ => ErrorKind::RegistryUnauthorized,
                    };
                    return Err(registry_error(
                        kind,
                        reg,
                        &token_what,
                        format!("HTTP {status}: {}", error_detail(&body)),
                    ));
                }
                #[derive(serde::Deserialize)]
                struct Token {
                    #[serde(default)]
                    token: String,
                    #[serde(default)]
                    access_token: String,
                }
                let t: Token = serde_json::from_slice(&body).map_err(|e| {
                    registry_error(ErrorKind::RegistryUnavailable, reg, &token_what, format!("bad token answer: {e}"))
                })?;
                let token = if t.token.is_empty() { t.access_token } else { t.token };
                if token.is_empty() {
                    return Err(registry_error(
                        ErrorKind::RegistryUnavailable,
                        reg,
                        &token_what,
                        "the answer holds no token",
                    ));
                }
                Ok(format!("Bearer {token}"))
            }
        }
    }

    /// A manifest or index by tag or digest: (content type, bytes),
    /// at most `MANIFEST_MAX`, checked against the digest when asked by one.
    pub async fn manifest(
        &mut self,
        reference: &str,
        expect: Option<&Digest>,
    ) -> Result<(String, Vec<u8>, Digest)> {
        let what = format!("manifest {}:{reference}", self.source.path);
        let resp = self
            .get(
                &format!("manifests/{reference}"),
                Some(super::manifest::ACCEPT),
                &what,
            )
            .await?;
        let ct = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = self
            .read_small(resp, super::manifest::MANIFEST_MAX, &what)
            .await?;
        let got = Digest::sha256(&body);
        if let Some(want) = expect {
            verify_small(want, &body, &self.source.domain, &what)?;
            return Ok((ct, body, want.clone()));
        }
        Ok((ct, body, got))
    }

    /// A small blob (a config) read whole and verified.
    pub async fn small_blob(&mut self, d: &Digest, size: u64, limit: u64) -> Result<Vec<u8>> {
        let what = format!("blob {d}");
        if size > limit {
            return Err(Error::invalid(
                "manifest",
                format!("{what}: {size} bytes is over the limit of {limit}"),
            ));
        }
        let resp = self.get(&format!("blobs/{d}"), None, &what).await?;
        let body = self.read_small(resp, size, &what).await?;
        if body.len() as u64 != size {
            return Err(registry_error(
                ErrorKind::RegistryUnavailable,
                &self.source.domain,
                &what,
                format!("{} bytes where the manifest says {size}", body.len()),
            ));
        }
        verify_small(d, &body, &self.source.domain, &what)?;
        Ok(body)
    }

    /// A blob's response, to stream; the caller verifies it.
    pub async fn blob(&mut self, d: &Digest) -> Result<reqwest::Response> {
        self.get(&format!("blobs/{d}"), None, &format!("blob {d}"))
            .await
    }

    async fn read_small(
        &self,
        mut resp: reqwest::Response,
        limit: u64,
        what: &str,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    if (out.len() + c.len()) as u64 > limit {
                        return Err(registry_error(
                            ErrorKind::InvalidArgument,
                            &self.source.domain,
                            what,
                            format!("larger than {limit} bytes"),
                        ));
                    }
                    out.extend_from_slice(&c);
                }
                Ok(None) => return Ok(out),
                Err(e) => return Err(transport_error(&self.source.domain, what, &e)),
            }
        }
    }
}

fn verify_small(want: &Digest, body: &[u8], registry: &str, what: &str) -> Result<()> {
    let mut d = podscope_api::reference::Digester::for_digest(want);
    d.update(body);
    let got = d.finish();
    if got != *want {
        return Err(registry_error(
            ErrorKind::RegistryUnavailable,
            registry,
            what,
            format!("content does not match its digest (got {got})"),
        ));
    }
    Ok(())
}

async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while let Ok(Some(c)) = resp.chunk().await {
        out.extend_from_slice(&c[..c.len().min(cap - out.len())]);
        if out.len() >= cap {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_messages_are_kept() {
        assert_eq!(
            error_detail(br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#),
            "MANIFEST_UNKNOWN manifest unknown"
        );
        assert_eq!(error_detail(b"  plain text\n"), "plain text");
    }

    /// Issue 41, finding 11, played by a registry: credentials and refresh
    /// tokens went to whatever token realm the registry named, plain http
    /// included, and for an insecure registry the realm was fetched
    /// without TLS verification wherever it was. Now a realm is https and
    /// verified, unless the operator marked the registry insecure: then
    /// plain http is allowed, and unverified TLS on the registry's own
    /// host only.
    #[test]
    fn a_token_realm_is_https_unless_the_registry_is_insecure() {
        let client = RegistryClient::new(&Timeouts {
            connect: Duration::from_secs(1),
            stall: Duration::from_secs(1),
        })
        .unwrap();
        let source = |domain: &str, insecure: bool| Source {
            domain: domain.into(),
            path: "library/busybox".into(),
            insecure,
            mirror: false,
        };
        let verified = |c: &reqwest::Client| std::ptr::eq(c, &client.verified);
        let secure = source("docker.io", false);
        let s = client.session(&secure, None);
        assert!(verified(
            s.realm_client("https://auth.docker.io/token", "t").unwrap()
        ));
        for realm in ["http://auth.docker.io/token", "ftp://x/t", "not a url"] {
            let e = s.realm_client(realm, "token").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RegistryUnauthorized, "{realm}: {e}");
        }
        let e = s
            .realm_client("http://auth.docker.io/token", "token")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("is plain http: credentials and tokens go over https only"),
            "{e}"
        );
        let insecure = source("10.0.0.5:5000", true);
        let s = client.session(&insecure, None);
        assert!(s.realm_client("http://10.0.0.5:5001/token", "t").is_ok());
        assert!(!verified(
            s.realm_client("https://10.0.0.5:5001/token", "t").unwrap()
        ));
        assert!(
            verified(
                s.realm_client("https://auth.example.com/token", "t")
                    .unwrap()
            ),
            "another host's realm is verified even for an insecure registry"
        );
        let v6 = source("[fd00::1]:5000", true);
        let s = client.session(&v6, None);
        assert!(!verified(
            s.realm_client("https://[fd00::1]/token", "t").unwrap()
        ));
    }

    #[test]
    fn digests_are_checked() {
        let d = Digest::sha256(b"abc");
        assert!(verify_small(&d, b"abc", "r", "w").is_ok());
        // sha512 too (the FIPS 180-2 vector for "abc").
        let d512 = Digest::parse(
            "sha512:ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        )
        .unwrap();
        assert!(verify_small(&d512, b"abc", "r", "w").is_ok());
        assert!(verify_small(&d512, b"abd", "r", "w").is_err());
        let e = verify_small(&d, b"abd", "r", "blob x").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RegistryUnavailable);
        assert!(
            e.to_string()
                .starts_with("registry r: blob x: content does not match"),
            "{e}"
        );
    }
}
