//! The seal on a checkpoint archive podscope writes: an HMAC-SHA256, under
//! a key the node holds (and the nodes that share it), over every member
//! before it, in order. A restore runs CRIU as root on the archive's
//! images, and CRIU takes from them what the restored process is: its
//! user, capabilities, seccomp filter, mounts and namespaces. So a restore
//! trusts the archive's author with the host, and podscope restores only
//! archives a holder of the key made: one it wrote, or another node
//! sharing its key wrote (OPERATIONS.md, checkpoint and restore).
//!
//! Each member counts as its name's length (eight bytes, big-endian), its
//! name, its tar entry type, its size (eight bytes, big-endian) and then
//! exactly that many bytes: no two lists of members count alike (a name
//! holding what looks like the next member's header cannot stand for it).
//! The seal is the last member, named `SEAL_MEMBER`, holding the MAC in
//! hex.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{self, Read};

/// The archive member that holds the seal; nothing may follow it.
pub const SEAL_MEMBER: &str = "podscope.seal";
/// The key's length in bytes.
pub const KEY_LEN: usize = 32;
/// The seal member's size: the MAC in hex.
pub const SEAL_LEN: usize = 64;

/// The MAC of an archive being written or read, member by member.
pub struct Sealer {
    mac: Hmac<Sha256>,
    /// The bytes the member begun last still owes.
    left: u64,
    /// A member had more or fewer bytes than its size said: no seal
    /// verifies.
    broken: bool,
}

impl Sealer {
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        Sealer {
            mac: Hmac::new_from_slice(key).expect("HMAC takes a key of any length"),
            left: 0,
            broken: false,
        }
    }

    /// A member begins: its name, tar entry type and size. Its bytes
    /// follow, exactly `size` of them, through `update` or `reader`.
    pub fn member(&mut self, name: &str, entry_type: u8, size: u64) {
        self.broken |= self.left != 0;
        self.mac.update(&(name.len() as u64).to_be_bytes());
        self.mac.update(name.as_bytes());
        self.mac.update(&[entry_type]);
        self.mac.update(&size.to_be_bytes());
        self.left = size;
    }

    pub fn update(&mut self, data: &[u8]) {
        match self.left.checked_sub(data.len() as u64) {
            Some(left) => self.left = left,
            None => self.broken = true,
        }
        self.mac.update(data);
    }

    /// `inner`, each byte read from it counted.
    pub fn reader<R: Read>(&mut self, inner: R) -> SealingReader<'_, R> {
        SealingReader {
            inner,
            sealer: self,
        }
    }

    /// The seal: the MAC in lower-case hex (`SEAL_LEN` bytes).
    pub fn finish(self) -> String {
        self.mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `seal` (a seal member's bytes) is this archive's, compared
    /// in constant time.
    pub fn verify(self, seal: &[u8]) -> bool {
        let Some(mac) = unhex(seal) else {
            return false;
        };
        let whole = !self.broken && self.left == 0;
        self.mac.verify_slice(&mac).is_ok() && whole
    }
}

fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    let s = s.strip_suffix(b"\n").unwrap_or(s);
    if s.len() != SEAL_LEN {
        return None;
    }
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// A reader whose bytes are counted into a seal as they are read.
pub struct SealingReader<'a, R> {
    inner: R,
    sealer: &'a mut Sealer,
}

impl<R: Read> Read for SealingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sealer.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(key: &[u8; KEY_LEN], members: &[(&str, u8, &[u8])]) -> Sealer {
        let mut s = Sealer::new(key);
        for (name, t, data) in members {
            s.member(name, *t, data.len() as u64);
            let mut sink = Vec::new();
            s.reader(*data).read_to_end(&mut sink).unwrap();
        }
        s
    }

    #[test]
    fn a_seal_verifies_for_the_same_members_under_the_same_key_only() {
        let key = [7u8; KEY_LEN];
        let members: &[(&str, u8, &[u8])] = &[
            ("checkpoint/", b'5', b""),
            ("checkpoint/pages-1.img", b'0', b"memory"),
            ("spec.dump", b'0', b"{}"),
        ];
        let seal = sealed(&key, members).finish();
        assert_eq!(seal.len(), SEAL_LEN);
        assert!(sealed(&key, members).verify(seal.as_bytes()));
        assert!(sealed(&key, members).verify(format!("{seal}\n").as_bytes()));
        // Another key, a byte changed, a member's bytes moved to its name,
        // a member left out: each another seal.
        assert!(!sealed(&[8u8; KEY_LEN], members).verify(seal.as_bytes()));
        let changed: &[(&str, u8, &[u8])] = &[
            ("checkpoint/", b'5', b""),
            ("checkpoint/pages-1.img", b'0', b"memorY"),
            ("spec.dump", b'0', b"{}"),
        ];
        assert!(!sealed(&key, changed).verify(seal.as_bytes()));
        let moved: &[(&str, u8, &[u8])] = &[
            ("checkpoint/", b'5', b""),
            ("checkpoint/pages-1.imgm", b'0', b"emory"),
            ("spec.dump", b'0', b"{}"),
        ];
        assert!(!sealed(&key, moved).verify(seal.as_bytes()));
        assert!(!sealed(&key, &members[..2]).verify(seal.as_bytes()));
        // A member with fewer or more bytes than its size.
        let mut s = Sealer::new(&key);
        s.member("checkpoint/", b'5', 0);
        s.member("checkpoint/pages-1.img", b'0', 7);
        s.update(b"memory");
        s.member("spec.dump", b'0', 2);
        s.update(b"{}");
        assert!(!s.verify(seal.as_bytes()));
        let mut s = Sealer::new(&key);
        s.member("x", b'0', 1);
        s.update(b"xy");
        let over = s.finish();
        let mut s = Sealer::new(&key);
        s.member("x", b'0', 1);
        s.update(b"xy");
        assert!(!s.verify(over.as_bytes()));
        // Not a seal at all.
        assert!(!sealed(&key, members).verify(b""));
        assert!(!sealed(&key, members).verify(&[b'z'; SEAL_LEN]));
    }
}
