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
        ErrorKind::LimitsExceeded => "org.podscope.Sandbox1.Error.LimitsExceeded",
        ErrorKind::Busy => "org.podscope.Sandbox1.Error.Busy",
        ErrorKind::RegistryUnauthorized => "org.podscope.Sandbox1.Error.RegistryUnauthorized",
        ErrorKind::RegistryDenied => "org.podscope.Sandbox1.Error.RegistryDenied",
        ErrorKind::RegistryUnavailable => "org.podscope.Sandbox1.Error.RegistryUnavailable",
        ErrorKind::RuntimeFailed => "org.podscope.Sandbox1.Error.RuntimeFailed",
    }
}

/// The bus's own refusal: the sender has too many calls awaiting replies
/// (dbus-daemon's `max_replies_per_connection`), or another of its limits.
/// Never one of podscope's: podscope's is under `org.podscope.Sandbox1.Error`.
pub const BUS_LIMITS_EXCEEDED: &str = "org.freedesktop.DBus.Error.LimitsExceeded";
/// No reply came within the bus's timeout: the call may or may not have
/// been carried out.
pub const BUS_NO_REPLY: &str = "org.freedesktop.DBus.Error.NoReply";

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
