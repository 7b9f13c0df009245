//! A pod's name and id as systemd-machined knows it (`machinectl list`).
//!
//! machined takes a machine name that is a valid host name of at most 64
//! characters (letters, digits, '-' and '.', no leading or trailing '-',
//! no empty label) and unique among its machines, and a 128-bit id.

use super::SandboxId;

/// machined's limit on a machine name (HOST_NAME_MAX).
pub const NAME_MAX: usize = 64;
/// Sandbox id characters in the fallback name: enough to be unique among
/// the pods of one node.
const ID_SUFFIX: usize = 12;

/// One part of the name: ASCII letters and digits kept (lowercased), every
/// run of anything else one '-', none at either end.
fn label_part(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// The names to try, in order: `<namespace>-<name>` when it fits, then the
/// same cut short with the sandbox id's first characters, unique even when
/// two pods' names differ only in what was replaced or cut (or a new
/// attempt of a pod starts before the old one is gone).
pub fn names(namespace: &str, name: &str, id: &SandboxId) -> Vec<String> {
    let parts: Vec<String> = [namespace, name]
        .iter()
        .map(|p| label_part(p))
        .filter(|p| !p.is_empty())
        .collect();
    let base = if parts.is_empty() {
        "pod".to_owned()
    } else {
        parts.join("-")
    };
    let suffix = &id.as_str()[..ID_SUFFIX];
    let room = NAME_MAX - 1 - ID_SUFFIX;
    let cut = base[..base.len().min(room)].trim_end_matches('-');
    let mut v = Vec::with_capacity(2);
    if base.len() <= NAME_MAX {
        v.push(base.clone());
    }
    v.push(format!("{cut}-{suffix}"));
    v
}

/// The machine id: the pod's uid when it is a UUID (as Kubernetes' are),
/// else the first 128 bits of the sandbox id.
pub fn id(uid: &str, sandbox: &SandboxId) -> [u8; 16] {
    let hex: String = if uid.len() == 36
        && uid
            .char_indices()
            .all(|(i, c)| matches!(i, 8 | 13 | 18 | 23) == (c == '-'))
    {
        uid.chars().filter(|c| *c != '-').collect()
    } else {
        uid.to_owned()
    };
    from_hex(&hex).unwrap_or_else(|| {
        from_hex(&sandbox.as_str()[..32]).expect("sandbox ids are lowercase hex")
    })
}

fn from_hex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// systemd's hostname_is_valid(), which machined applies to names.
    fn machined_accepts(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= NAME_MAX
            && s.split('.').all(|l| {
                !l.is_empty()
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
    }

    #[test]
    fn names_are_valid_and_fall_back_to_an_id_suffix() {
        let id = SandboxId::random();
        let short = &id.as_str()[..12];
        assert_eq!(
            names("default", "web-0", &id),
            vec!["default-web-0".to_owned(), format!("default-web-0-{short}")]
        );
        let n = names("cri-test.Namespace_1", "PodSandbox for Test ü", &id);
        assert_eq!(n[0], "cri-test-namespace-1-podsandbox-for-test");
        let long = names("kube-system", &"x".repeat(253), &id);
        assert_eq!(long.len(), 1, "too long for the plain form: {long:?}");
        assert!(long[0].ends_with(&format!("-{short}")));
        assert_eq!(long[0].len(), NAME_MAX);
        assert_eq!(
            names("", "ü", &id),
            vec!["pod".to_owned(), format!("pod-{short}")]
        );
        for (ns, name) in [
            ("a", "b"),
            ("--", "--"),
            ("ns", &format!("{}-x", "y".repeat(50))),
            (&"n".repeat(253), &"m".repeat(253)),
            ("UPPER", "MiXeD.Case"),
        ] {
            for candidate in names(ns, name, &id) {
                assert!(machined_accepts(&candidate), "{candidate:?}");
            }
        }
    }

    #[test]
    fn the_id_is_the_uid_when_it_is_a_uuid() {
        let sb = SandboxId::random();
        assert_eq!(
            id("0C8A3F3E-1B2C-4D5E-8F90-A1B2C3D4E5F6", &sb),
            [
                0x0c, 0x8a, 0x3f, 0x3e, 0x1b, 0x2c, 0x4d, 0x5e, 0x8f, 0x90, 0xa1, 0xb2, 0xc3, 0xd4,
                0xe5, 0xf6
            ]
        );
        assert_eq!(
            id("0c8a3f3e1b2c4d5e8f90a1b2c3d4e5f6", &sb),
            id("0c8a3f3e-1b2c-4d5e-8f90-a1b2c3d4e5f6", &sb)
        );
        let from_sandbox = from_hex(&sb.as_str()[..32]).unwrap();
        for not_uuid in [
            "u",
            "0c8a3f3e-1b2c-4d5e-8f90-a1b2c3d4e5fg",
            "0c8a3f3e1b2c-4d5e-8f90-a1b2c3d4e5f6-",
        ] {
            assert_eq!(id(not_uuid, &sb), from_sandbox, "{not_uuid}");
        }
    }
}
