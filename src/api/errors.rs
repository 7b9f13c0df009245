//! The public D-Bus error names (`org.podscope.Sandbox1.Error.*`, and
//! `org.freedesktop.DBus.Error.AccessDenied` for denials), one per
//! `ErrorKind`, and how a client reads a failed call back into a kind.

use crate::error::ErrorKind;

pub fn error_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "org.podscope.Sandbox1.Error.NotFound",
        ErrorKind::AlreadyExists => "org.podscope.Sandbox1.Error.AlreadyExists",
        ErrorKind::InvalidArgument => "org.podscope.Sandbox1.Error.InvalidArgument",
        ErrorKind::InvalidState => "org.podscope.Sandbox1.Error.InvalidState",
        ErrorKind::NetworkFailed => "org.podscope.Sandbox1.Error.NetworkFailed",
        ErrorKind::SystemdFailed => "org.podscope.Sandbox1.Error.SystemdFailed",
        ErrorKind::Timeout => "org.podscope.Sandbox1.Error.Timeout",
        ErrorKind::Internal => "org.podscope.Sandbox1.Error.Internal",
        ErrorKind::AccessDenied => "org.freedesktop.DBus.Error.AccessDenied",
        ErrorKind::LimitsExceeded => LIMITS_EXCEEDED,
        ErrorKind::RegistryUnauthorized => "org.podscope.Sandbox1.Error.RegistryUnauthorized",
        ErrorKind::RegistryDenied => "org.podscope.Sandbox1.Error.RegistryDenied",
        ErrorKind::RegistryUnavailable => "org.podscope.Sandbox1.Error.RegistryUnavailable",
        ErrorKind::RuntimeFailed => "org.podscope.Sandbox1.Error.RuntimeFailed",
    }
}

/// Too many calls of a kind in flight (the standard D-Bus name).
pub const LIMITS_EXCEEDED: &str = "org.freedesktop.DBus.Error.LimitsExceeded";

/// The kind for a D-Bus error name.
pub fn kind_of(name: &str) -> Option<ErrorKind> {
    ErrorKind::ALL.into_iter().find(|k| error_name(*k) == name)
}

/// A D-Bus call's failure as (kind, message): the daemon's named error, or
/// Internal for transport problems.
pub fn classify(e: &zbus::Error) -> (ErrorKind, String) {
    match e {
        zbus::Error::MethodError(name, desc, _) => (
            kind_of(name.as_str()).unwrap_or(ErrorKind::Internal),
            desc.clone().unwrap_or_else(|| name.to_string()),
        ),
        zbus::Error::FDO(f) => match f.as_ref() {
            zbus::fdo::Error::AccessDenied(m) => (ErrorKind::AccessDenied, m.clone()),
            other => (ErrorKind::Internal, other.to_string()),
        },
        other => (ErrorKind::Internal, other.to_string()),
    }
}

/// Whether a failed call is the daemon's `kind`.
pub fn is(e: &zbus::Error, kind: ErrorKind) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _) if kind_of(name.as_str()) == Some(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ErrorKind::ALL {
            assert_eq!(kind_of(error_name(k)), Some(k));
        }
        assert_eq!(kind_of("org.example.Nope"), None);
    }
}
