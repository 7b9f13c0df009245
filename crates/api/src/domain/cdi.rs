//! CDI device names: the Container Device Interface's `vendor/class=name`
//! (cncf-tags/container-device-interface, SPEC.md v1.1.0), as kubelet passes
//! them in CRI's `CDI_devices` and in `cdi.k8s.io/` annotations, and as
//! `podscopectl run --device` takes them. Pure: the spec files and what they
//! resolve to are podscope-cdi's, in the daemon.
//!
//! The rules are the reference parser's: a vendor and a class start with a
//! letter, end with a letter or digit, and hold letters, digits, `_`, `-`
//! and `.`; a device name starts and ends with a letter or digit and may
//! also hold `:`.

use std::fmt;

/// The annotation prefix of CDI's first path into the CRI (device plugins
/// before CRI had `CDI_devices`): `cdi.k8s.io/<plugin>_<id>` =
/// `vendor/class=name[,vendor/class=name...]`.
pub const ANNOTATION_PREFIX: &str = "cdi.k8s.io/";

/// The most CDI devices one container may ask for, its annotations' and
/// `cdi_devices` together (a node has a handful of accelerators; each
/// device is a spec lookup and its edits).
pub const DEVICES_MAX: usize = 128;

/// A qualified CDI device name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceName {
    pub vendor: String,
    pub class: String,
    pub name: String,
}

impl DeviceName {
    /// `vendor/class=name`, each part checked.
    pub fn parse(s: &str) -> Result<DeviceName, String> {
        let Some((kind, name)) = s.split_once('=') else {
            return Err(format!(
                "{s:?} is not a CDI device name (vendor/class=name)"
            ));
        };
        let (vendor, class) = parse_kind(kind).map_err(|e| format!("{s:?}: {e}"))?;
        check_device(name).map_err(|e| format!("{s:?}: {e}"))?;
        Ok(DeviceName {
            vendor,
            class,
            name: name.to_owned(),
        })
    }

    /// Its kind, `vendor/class`: what a spec file declares.
    pub fn kind(&self) -> String {
        format!("{}/{}", self.vendor, self.class)
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}={}", self.vendor, self.class, self.name)
    }
}

/// A spec file's `kind`, `vendor/class`, split and checked.
pub fn parse_kind(kind: &str) -> Result<(String, String), String> {
    let Some((vendor, class)) = kind.split_once('/') else {
        return Err(format!("kind {kind:?} is not vendor/class"));
    };
    check_vendor_or_class("vendor", vendor)?;
    check_vendor_or_class("class", class)?;
    Ok((vendor.to_owned(), class.to_owned()))
}

/// A device's name within its spec, checked.
pub fn check_device(name: &str) -> Result<(), String> {
    check_part(
        "device name",
        name,
        |c| matches!(c, 'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-' | '.' | ':'),
    )?;
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "device name {name:?} does not start with a letter or digit"
        ));
    }
    Ok(())
}

fn check_vendor_or_class(what: &str, v: &str) -> Result<(), String> {
    check_part(
        what,
        v,
        |c| matches!(c, 'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-' | '.'),
    )?;
    if !v.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!("{what} {v:?} does not start with a letter"));
    }
    Ok(())
}

/// Not empty, at most 253 bytes (a DNS name's length: a vendor is one),
/// only `allowed` characters, ending with a letter or digit.
fn check_part(what: &str, v: &str, allowed: impl Fn(char) -> bool) -> Result<(), String> {
    if v.is_empty() {
        return Err(format!("empty {what}"));
    }
    if v.len() > 253 {
        return Err(format!("{what} of {} bytes, more than 253", v.len()));
    }
    if let Some(c) = v.chars().find(|c| !allowed(*c)) {
        return Err(format!("{what} {v:?} holds {c:?}"));
    }
    if !v.ends_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(format!("{what} {v:?} does not end with a letter or digit"));
    }
    Ok(())
}

/// What `podscopectl run --device` reads as a CDI name rather than a host
/// path (podman's rule): it does not start with `/` and holds `=`.
pub fn looks_like_device_name(s: &str) -> bool {
    !s.starts_with('/') && s.contains('=')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_parse_and_print_back() {
        let d = DeviceName::parse("nvidia.com/gpu=0").unwrap();
        assert_eq!((d.vendor.as_str(), d.class.as_str()), ("nvidia.com", "gpu"));
        assert_eq!(d.name, "0");
        assert_eq!(d.kind(), "nvidia.com/gpu");
        assert_eq!(d.to_string(), "nvidia.com/gpu=0");
        for ok in [
            "vendor.com/class=name",
            "a/b=c",
            "example.com/dev=GPU-0a1b:MIG-1",
            "foo.bar.baz/foo-bar123.B_az=all",
        ] {
            assert!(DeviceName::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn names_that_are_not_qualified_say_why() {
        for (bad, why) in [
            ("gpu0", "not a CDI device name"),
            ("/dev/nvidia0", "not a CDI device name"),
            ("nvidia.com=0", "not vendor/class"),
            ("nvidia.com/=0", "empty class"),
            ("/gpu=0", "empty vendor"),
            ("nvidia.com/gpu=", "empty device name"),
            ("1vendor/gpu=0", "does not start with a letter"),
            ("vendor-/gpu=0", "does not end with a letter or digit"),
            ("vendor/gp u=0", "holds ' '"),
            ("vendor/a/b=0", "holds '/'"),
            ("vendor/gpu=-0", "does not start with a letter or digit"),
            ("vendor/gpu=0=1", "holds '='"),
            ("vendor/gpu=0\n", "holds '\\n'"),
        ] {
            let e = DeviceName::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let long = format!("{}/gpu=0", "v".repeat(254));
        assert!(DeviceName::parse(&long)
            .unwrap_err()
            .contains("more than 253"));
    }

    #[test]
    fn the_cli_tells_a_name_from_a_path() {
        assert!(looks_like_device_name("nvidia.com/gpu=all"));
        assert!(!looks_like_device_name("/dev/fuse"));
        assert!(!looks_like_device_name("/dev/weird=name"));
    }
}
