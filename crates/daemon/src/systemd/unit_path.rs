//! systemd's object paths for units: `bus_label_escape` of the unit name
//! under `/org/freedesktop/systemd1/unit/` (every byte that is not an ASCII
//! letter or digit, and a leading digit, becomes `_xx`).

pub const UNIT_PATH_PREFIX: &str = "/org/freedesktop/systemd1/unit/";

pub fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for (i, b) in s.bytes().enumerate() {
        if b.is_ascii_alphabetic() || (b.is_ascii_digit() && i > 0) {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

pub fn unescape_label(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'_' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

pub fn unit_path(unit: &str) -> String {
    format!("{UNIT_PATH_PREFIX}{}", escape_label(unit))
}

/// The unit name for a unit object path, if it is one.
pub fn unit_from_path(path: &str) -> Option<String> {
    unescape_label(path.strip_prefix(UNIT_PATH_PREFIX)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_systemd() {
        // Values as systemd itself prints them (busctl tree org.freedesktop.systemd1).
        assert_eq!(
            escape_label("podscope-ab12.scope"),
            "podscope_2dab12_2escope"
        );
        assert_eq!(escape_label("dbus.service"), "dbus_2eservice");
        assert_eq!(escape_label("1x"), "_31x");
        assert_eq!(escape_label("-.slice"), "_2d_2eslice");
    }

    #[test]
    fn round_trip() {
        for u in [
            "podscope-0f.scope",
            "user@0.service",
            "-.mount",
            "a_b.slice",
        ] {
            assert_eq!(unit_from_path(&unit_path(u)).as_deref(), Some(u));
        }
        assert_eq!(unit_from_path("/org/freedesktop/systemd1"), None);
        assert_eq!(unescape_label("bad_zz"), None);
        assert_eq!(unescape_label("trunc_2"), None);
    }
}
