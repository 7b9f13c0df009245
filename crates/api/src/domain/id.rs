//! Sandbox and container ids: 64 random lowercase hex characters. Anywhere an id is
//! accepted, a unique prefix of one is too (see [`resolve_prefix`]).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

pub const ID_LEN: usize = 64;

/// What every kind of id has: sandboxes and containers are named alike,
/// and the registry and prefix lookup serve both.
pub trait Id:
    Clone + Eq + Ord + std::hash::Hash + fmt::Display + fmt::Debug + Send + Sync + 'static
{
    /// "sandbox" or "container", for messages.
    const KIND: &'static str;
    /// Parse a full id (exactly 64 lowercase hex characters).
    fn parse(s: &str) -> Result<Self>;
    fn as_str(&self) -> &str;
    /// The first 12 characters, as listings show them.
    fn short(&self) -> &str {
        &self.as_str()[..12]
    }
}

/// One id type per kind of object, so a container id is never taken for a
/// sandbox's.
macro_rules! define_id {
    ($name:ident, $kind:literal) => {
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// A new random id from the kernel's CSPRNG.
            pub fn random() -> Self {
                $name(random_hex())
            }

            /// Parse a full id (exactly 64 lowercase hex characters).
            pub fn parse(s: &str) -> Result<Self> {
                if s.len() != ID_LEN || !is_lower_hex(s) {
                    return Err(Error::invalid(
                        "id",
                        format!("{s:?} is not a {} id (64 lowercase hex characters)", $kind),
                    ));
                }
                Ok($name(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The first 12 characters, as listings show them.
            pub fn short(&self) -> &str {
                &self.0[..12]
            }
        }

        impl Id for $name {
            const KIND: &'static str = $kind;
            fn parse(s: &str) -> Result<Self> {
                $name::parse(s)
            }
            fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(s: String) -> Result<Self> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.short())
            }
        }
    };
}

define_id!(SandboxId, "sandbox");
define_id!(ContainerId, "container");

fn random_hex() -> String {
    let mut bytes = [0u8; ID_LEN / 2];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: the pointer and length describe the unfilled part of `bytes`.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            panic!("getrandom failed: {}", std::io::Error::last_os_error());
        }
    }
    hex(&bytes)
}

pub fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// Check the shape of an id or id prefix given by a caller.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    validate_prefix_of("sandbox", prefix)
}

/// `validate_prefix` for an id of `kind` ("sandbox", "container").
pub fn validate_prefix_of(kind: &str, prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        return Err(Error::invalid("id", "empty id"));
    }
    if prefix.len() > ID_LEN || !is_lower_hex(prefix) {
        return Err(Error::invalid(
            "id",
            format!(
                "{prefix:?} is not a {kind} id or id prefix (lowercase hex, at most 64 characters)"
            ),
        ));
    }
    Ok(())
}

/// Resolve `prefix` against the sorted set of known ids. A full id is looked
/// up directly; a shorter prefix must match exactly one id.
pub fn resolve_prefix<'a, T: Id, I>(prefix: &str, sorted_ids: I) -> Result<T>
where
    I: IntoIterator<Item = &'a T>,
{
    validate_prefix_of(T::KIND, prefix)?;
    let mut found: Option<&T> = None;
    for id in sorted_ids {
        if id.as_str().starts_with(prefix) {
            if let Some(first) = found {
                return Err(Error::invalid(
                    "id",
                    format!(
                        "id prefix {prefix:?} is ambiguous: it matches {} and {} at least",
                        first.short(),
                        id.short()
                    ),
                ));
            }
            found = Some(id);
            if prefix.len() == ID_LEN {
                break;
            }
        }
    }
    found
        .cloned()
        .ok_or_else(|| Error::not_found(format!("no {} with id {prefix}", T::KIND)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn id(c: char, tail: &str) -> SandboxId {
        let mut s: String = std::iter::repeat_n(c, ID_LEN - tail.len()).collect();
        s.push_str(tail);
        SandboxId::parse(&s).unwrap()
    }

    #[test]
    fn random_ids_are_well_formed_and_distinct() {
        let a = SandboxId::random();
        let b = SandboxId::random();
        assert_eq!(a.as_str().len(), 64);
        assert!(is_lower_hex(a.as_str()));
        assert_ne!(a, b);
        SandboxId::parse(a.as_str()).unwrap();
    }

    #[test]
    fn parse_rejects_bad_ids() {
        for bad in ["", "abc", &"A".repeat(64), &"g".repeat(64), &"a".repeat(65)] {
            let e = SandboxId::parse(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().starts_with("id: "), "{e}");
        }
    }

    #[test]
    fn prefix_resolution() {
        let ids = vec![id('a', "1"), id('a', "2"), id('b', "0")];
        assert_eq!(resolve_prefix("b", &ids).unwrap(), ids[2]);
        assert_eq!(resolve_prefix(ids[0].as_str(), &ids).unwrap(), ids[0]);
        let amb = resolve_prefix("aaa", &ids).unwrap_err();
        assert_eq!(amb.kind(), ErrorKind::InvalidArgument);
        assert!(amb.to_string().contains("ambiguous"), "{amb}");
        assert_eq!(
            resolve_prefix("c", &ids).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            resolve_prefix("", &ids).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            resolve_prefix("xyz", &ids).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}
