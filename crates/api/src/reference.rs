//! Image references as kubelet and containerd spell them: the Docker
//! reference grammar (distribution's `reference` package), normalised so
//! that `busybox` is `docker.io/library/busybox:latest`. Pure.

use crate::error::{Error, Result};
use std::fmt;

pub const DOCKER_HUB: &str = "docker.io";
/// Longest repository name (domain and path), as distribution's grammar.
const NAME_MAX: usize = 255;
const TAG_MAX: usize = 128;

/// A content digest, `algorithm:hex`. Only sha256 and sha512 are accepted
/// (the OCI image spec's registered algorithms).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    pub fn parse(s: &str) -> Result<Digest> {
        let (alg, hex) = s
            .split_once(':')
            .ok_or_else(|| Error::invalid("digest", format!("{s:?} is not algorithm:hex")))?;
        let len = match alg {
            "sha256" => 64,
            "sha512" => 128,
            _ => {
                return Err(Error::invalid(
                    "digest",
                    format!("{s:?}: unsupported algorithm {alg:?} (sha256 or sha512)"),
                ))
            }
        };
        if hex.len() != len || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(Error::invalid(
                "digest",
                format!("{s:?}: {alg} needs {len} lowercase hex digits"),
            ));
        }
        Ok(Digest(s.to_owned()))
    }

    /// A sha256 digest of bytes already hashed.
    pub fn sha256_of_hex(hex: &str) -> Digest {
        Digest(format!("sha256:{hex}"))
    }

    pub fn sha256(bytes: &[u8]) -> Digest {
        use sha2::Digest as _;
        Digest::sha256_of_hex(&hex(&sha2::Sha256::digest(bytes)))
    }

    pub fn algorithm(&self) -> &str {
        self.0.split_once(':').map(|(a, _)| a).unwrap_or("")
    }
    pub fn hex(&self) -> &str {
        self.0.split_once(':').map(|(_, h)| h).unwrap_or("")
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A hash of the algorithm a digest names (every one `Digest::parse`
/// takes: the image spec's sha256 and sha512), fed as bytes come.
pub enum Digester {
    Sha256(sha2::Sha256),
    Sha512(sha2::Sha512),
}

impl Digester {
    pub fn for_digest(d: &Digest) -> Digester {
        use sha2::Digest as _;
        match d.algorithm() {
            "sha512" => Digester::Sha512(sha2::Sha512::new()),
            _ => Digester::Sha256(sha2::Sha256::new()),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        match self {
            Digester::Sha256(h) => h.update(bytes),
            Digester::Sha512(h) => h.update(bytes),
        }
    }

    pub fn finish(self) -> Digest {
        use sha2::Digest as _;
        match self {
            Digester::Sha256(h) => Digest(format!("sha256:{}", hex(&h.finalize()))),
            Digester::Sha512(h) => Digest(format!("sha512:{}", hex(&h.finalize()))),
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// A normalised reference: always a domain, `library/` for Docker Hub's
/// one-component names, and a tag (`latest` when neither tag nor digest
/// was given).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// Registry host (with port), e.g. `docker.io`, `127.0.0.1:5000`.
    pub domain: String,
    /// Repository path within the registry, e.g. `library/busybox`.
    pub path: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl Reference {
    /// Parse and normalise. A reference with a digest keeps its tag only
    /// for display; what is pulled is the digest.
    pub fn parse(input: &str) -> Result<Reference> {
        let bad = |why: &str| Error::invalid("image", format!("{input:?}: {why}"));
        if input.is_empty() {
            return Err(bad("empty reference"));
        }
        let (rest, digest) = match input.split_once('@') {
            Some((r, d)) => (r, Some(Digest::parse(d).map_err(|e| e.context("image"))?)),
            None => (input, None),
        };
        // A ':' after the last '/' starts the tag; one before it is a port.
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].find(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(t) = tag {
            if !valid_tag(t) {
                return Err(bad("invalid tag (letters, digits, '_', '.', '-'; at most 128, not starting with '.' or '-')"));
            }
        }
        if name.len() > NAME_MAX {
            return Err(bad("repository name longer than 255 characters"));
        }
        let (domain, path) = split_domain(name);
        if domain.is_empty() && path.is_empty() {
            return Err(bad("empty repository name"));
        }
        if !valid_domain(&domain) {
            return Err(bad("invalid registry host"));
        }
        if path.is_empty() {
            return Err(bad("no repository path"));
        }
        for comp in path.split('/') {
            if comp.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(bad("repository name must be lowercase"));
            }
            if !valid_path_component(comp) {
                return Err(bad("invalid repository path component"));
            }
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_owned()),
            (None, None) => Some("latest".to_owned()),
            (None, Some(_)) => None,
        };
        Ok(Reference {
            domain,
            path,
            tag,
            digest,
        })
    }

    /// `domain/path`.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// `domain/path:tag`, when there is a tag and no digest (what CRI lists
    /// as a repo tag).
    pub fn tagged(&self) -> Option<String> {
        match (&self.tag, &self.digest) {
            (Some(t), None) => Some(format!("{}:{t}", self.repository())),
            _ => None,
        }
    }

    /// `domain/path@digest`.
    pub fn with_digest(&self, d: &Digest) -> String {
        format!("{}@{d}", self.repository())
    }

    /// What to ask the registry's manifests endpoint for.
    pub fn manifest_ref(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => "latest".into(),
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.repository())?;
        if let Some(d) = &self.digest {
            write!(f, "@{d}")
        } else if let Some(t) = &self.tag {
            write!(f, ":{t}")
        } else {
            Ok(())
        }
    }
}

/// The first component is a registry host when it has a '.' or ':' or is
/// `localhost` (distribution's rule); otherwise the name is Docker Hub's.
fn split_domain(name: &str) -> (String, String) {
    let (domain, path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_owned(), rest.to_owned())
        }
        _ => (DOCKER_HUB.to_owned(), name.to_owned()),
    };
    let domain = if domain == "index.docker.io" {
        DOCKER_HUB.to_owned()
    } else {
        domain
    };
    let path = if domain == DOCKER_HUB && !path.contains('/') && !path.is_empty() {
        format!("library/{path}")
    } else {
        path
    };
    (domain, path)
}

fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= TAG_MAX
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn valid_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

fn alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// host[:port], host being DNS labels or an IPv6 literal in brackets.
fn valid_domain(d: &str) -> bool {
    let (host, port) = if let Some(rest) = d.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, p)) => {
                if h.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                ("x", p.strip_prefix(':'))
            }
            None => return false,
        }
    } else {
        match d.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (d, None),
        }
    };
    if let Some(p) = port {
        if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    !host.is_empty()
        && host.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// An image id as callers may give it: `sha256:<64 hex>`, or the bare hex
/// (as crictl prints it), or a prefix of it of at least 3 digits.
pub fn id_prefix(s: &str) -> Option<&str> {
    let hex = s.strip_prefix("sha256:").unwrap_or(s);
    (hex.len() >= 3
        && hex.len() <= 64
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    .then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        Reference::parse(s).unwrap().to_string()
    }

    #[test]
    fn normalises_as_kubelet_expects() {
        assert_eq!(norm("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(norm("busybox:1.36"), "docker.io/library/busybox:1.36");
        assert_eq!(norm("foo/bar"), "docker.io/foo/bar:latest");
        assert_eq!(
            norm("index.docker.io/library/busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            norm("registry.k8s.io/e2e-test-images/busybox:1.29-2"),
            "registry.k8s.io/e2e-test-images/busybox:1.29-2"
        );
        assert_eq!(
            norm("localhost/img"),
            "localhost/img:latest",
            "localhost is a registry"
        );
        assert_eq!(norm("127.0.0.1:5000/a/b"), "127.0.0.1:5000/a/b:latest");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("gcr.io/x/y@{d}")).unwrap();
        assert_eq!(r.tag, None);
        assert_eq!(r.manifest_ref(), d);
        assert_eq!(r.tagged(), None);
        let r = Reference::parse(&format!("gcr.io/x/y:t@{d}")).unwrap();
        assert_eq!(r.manifest_ref(), d, "the digest wins");
        assert_eq!(r.to_string(), format!("gcr.io/x/y@{d}"));
        assert_eq!(
            Reference::parse("a.b:5000/c:v1").unwrap().tagged().unwrap(),
            "a.b:5000/c:v1"
        );
        assert_eq!(norm("[::1]:5000/x"), "[::1]:5000/x:latest");
    }

    #[test]
    fn rejects_bad_references_by_name() {
        for (input, why) in [
            ("", "empty"),
            ("Busybox", "lowercase"),
            ("busybox:", "tag"),
            ("busybox:-x", "tag"),
            ("a//b", "path component"),
            ("a/b_", "path component"),
            ("busybox@sha256:abc", "64"),
            ("busybox@md5:aaaa", "unsupported algorithm"),
            ("exa mple.com/x", "registry host"),
            ("a b", "path component"),
            ("example.com:port/x", "registry host"),
            ("example.com/", "no repository path"),
        ] {
            let e = Reference::parse(input).unwrap_err().to_string();
            assert!(e.contains(why), "{input:?}: {e}");
            assert!(e.starts_with("image"), "{e}");
        }
        let long = format!("x/{}", "a".repeat(300));
        assert!(Reference::parse(&long).is_err());
    }

    #[test]
    fn separators_follow_the_grammar() {
        for ok in ["a", "a.b", "a_b", "a__b", "a-b", "a---b", "a1.b2"] {
            assert!(valid_path_component(ok), "{ok}");
        }
        for bad in ["a..b", "a___b", "-a", "a-", "a.-b", ".a"] {
            assert!(!valid_path_component(bad), "{bad}");
        }
    }

    #[test]
    fn ids() {
        let hex = "ab".repeat(32);
        assert_eq!(id_prefix(&format!("sha256:{hex}")), Some(hex.as_str()));
        assert_eq!(id_prefix("abc"), Some("abc"));
        assert_eq!(id_prefix("ab"), None);
        assert_eq!(id_prefix("busybox"), None);
        assert_eq!(Digest::sha256(b"").hex().len(), 64);
    }
}
