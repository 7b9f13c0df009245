//! The public D-Bus error names (`org.podscope.Sandbox1.Error.*`, and
//! `org.freedesktop.DBus.Error.AccessDenied` for denials), carrying the full
//! context message of the daemon's error.

use crate::error::{Error, ErrorKind};
use zbus::message::{Header, Message};
use zbus::names::ErrorName;
use zbus::DBusError;

pub const PREFIX: &str = "org.podscope.Sandbox1.Error.";

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
    }
}

/// The kind for a D-Bus error name (for clients: podscopectl, CRI).
pub fn kind_of(name: &str) -> Option<ErrorKind> {
    use ErrorKind::*;
    [
        NotFound,
        AlreadyExists,
        InvalidArgument,
        InvalidState,
        NetworkFailed,
        SystemdFailed,
        Timeout,
        Internal,
        AccessDenied,
    ]
    .into_iter()
    .find(|k| error_name(*k) == name)
}

#[derive(Debug)]
pub struct BusError {
    name: &'static str,
    message: String,
}

impl BusError {
    /// Too many calls of a kind in flight (the standard D-Bus name).
    pub fn limits_exceeded(message: String) -> Self {
        BusError {
            name: "org.freedesktop.DBus.Error.LimitsExceeded",
            message,
        }
    }

    pub fn name_str(&self) -> &'static str {
        self.name
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<Error> for BusError {
    fn from(e: Error) -> Self {
        BusError {
            name: error_name(e.kind()),
            message: e.to_string(),
        }
    }
}

impl From<zbus::Error> for BusError {
    fn from(e: zbus::Error) -> Self {
        BusError {
            name: error_name(ErrorKind::Internal),
            message: format!("D-Bus: {e}"),
        }
    }
}

impl DBusError for BusError {
    fn create_reply(&self, call: &Header<'_>) -> zbus::Result<Message> {
        Message::error(call, self.name)?.build(&(self.message.as_str(),))
    }
    fn name(&self) -> ErrorName<'_> {
        ErrorName::from_static_str_unchecked(self.name)
    }
    fn description(&self) -> Option<&str> {
        Some(&self.message)
    }
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for BusError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in [
            ErrorKind::NotFound,
            ErrorKind::Timeout,
            ErrorKind::AccessDenied,
        ] {
            assert_eq!(kind_of(error_name(k)), Some(k));
        }
        assert_eq!(kind_of("org.example.Nope"), None);
        let e: BusError = Error::invalid("name", "must not be empty").into();
        assert_eq!(e.name_str(), "org.podscope.Sandbox1.Error.InvalidArgument");
        assert_eq!(e.message(), "name: must not be empty");
    }
}
