//! D-Bus failures as gRPC statuses. The daemon's named errors map one to
//! one (its message kept word for word); a daemon that cannot be reached —
//! not running and not activatable, gone mid-call, the bus itself down —
//! is UNAVAILABLE, so kubelet retries instead of giving up.

use podscope_api::error::ErrorKind;
use podscope_api::errors::{is, kind_of, BUS_LIMITS_EXCEEDED};
use tonic::{Code, Status};
use zbus::DBusError;

/// Whether the failure says our bus connection itself is broken (then the
/// next call reconnects).
pub fn connection_lost(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::InputOutput(io) if io.kind() != std::io::ErrorKind::TimedOut)
}

pub fn code_of_kind(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::AccessDenied => Code::PermissionDenied,
        ErrorKind::LimitsExceeded => Code::ResourceExhausted,
        ErrorKind::Timeout => Code::DeadlineExceeded,
        ErrorKind::InvalidState => Code::FailedPrecondition,
        ErrorKind::RegistryUnauthorized => Code::Unauthenticated,
        ErrorKind::RegistryDenied => Code::PermissionDenied,
        ErrorKind::RegistryUnavailable => Code::Unavailable,
        // kubelet retries UNAVAILABLE: nothing was done that a retry repeats.
        ErrorKind::Busy => Code::Unavailable,
        // As containerd answers a runtime's refusal.
        ErrorKind::RuntimeFailed => Code::Unknown,
        ErrorKind::NetworkFailed | ErrorKind::SystemdFailed | ErrorKind::Internal => Code::Internal,
    }
}

/// The code for a D-Bus error name that is not one of the daemon's own.
fn code_of_bus_error(name: &str) -> Code {
    match name {
        "org.freedesktop.DBus.Error.AccessDenied"
        | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => Code::PermissionDenied,
        "org.freedesktop.DBus.Error.Timeout" | "org.freedesktop.DBus.Error.TimedOut" => {
            Code::DeadlineExceeded
        }
        // Activation failed (unit masked, failed, missing), the daemon
        // vanished before answering, or the bus is going away.
        n if n.starts_with("org.freedesktop.DBus.Error.")
            || n.starts_with("org.freedesktop.systemd1.") =>
        {
            Code::Unavailable
        }
        _ => Code::Internal,
    }
}

/// The bus would not carry the call (too many of this frontend's calls
/// awaiting replies, past what `daemon_calls_max` and the retries in
/// `daemon` allow): podscoped never saw it.
fn bus_refused(msg: &str) -> Status {
    Status::unavailable(format!(
        "the system bus refused the call to podscoped (too many calls awaiting replies): {msg}"
    ))
}

/// A failed call to podscoped as a gRPC status.
pub fn status_of(e: &zbus::Error) -> Status {
    match e {
        zbus::Error::MethodError(name, desc, _) => {
            let msg = desc.clone().unwrap_or_else(|| name.to_string());
            let kind = kind_of(name.as_str());
            let code = match kind {
                Some(kind) => code_of_kind(kind),
                None => code_of_bus_error(name.as_str()),
            };
            if name.as_str() == BUS_LIMITS_EXCEEDED {
                bus_refused(&msg)
            // A registry out of reach is the daemon's answer, word for word.
            } else if code == Code::Unavailable && kind.is_none() {
                Status::unavailable(format!("podscoped is not reachable: {name}: {msg}"))
            } else {
                Status::new(code, msg)
            }
        }
        zbus::Error::FDO(f) => {
            let name = f.name().to_string();
            let msg = f.description().unwrap_or_default().to_owned();
            let code = code_of_bus_error(&name);
            if name == BUS_LIMITS_EXCEEDED {
                bus_refused(&msg)
            } else if code == Code::Unavailable {
                Status::unavailable(format!("podscoped is not reachable: {name}: {msg}"))
            } else {
                Status::new(code, format!("{name}: {msg}"))
            }
        }
        zbus::Error::InputOutput(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            Status::deadline_exceeded(format!("podscoped did not answer in time: {io}"))
        }
        zbus::Error::InputOutput(io) => {
            Status::unavailable(format!("the system bus connection failed: {io}"))
        }
        other => Status::internal(format!("D-Bus: {other}")),
    }
}

/// Whether a daemon error is NotFound (Stop and Remove treat that as done).
pub fn is_not_found(e: &zbus::Error) -> bool {
    is(e, ErrorKind::NotFound)
}

pub fn is_already_exists(e: &zbus::Error) -> bool {
    is(e, ErrorKind::AlreadyExists)
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::errors::error_name;

    #[test]
    fn daemon_kinds_map_to_the_documented_codes() {
        for (kind, code) in [
            (ErrorKind::NotFound, Code::NotFound),
            (ErrorKind::InvalidArgument, Code::InvalidArgument),
            (ErrorKind::AlreadyExists, Code::AlreadyExists),
            (ErrorKind::AccessDenied, Code::PermissionDenied),
            (ErrorKind::LimitsExceeded, Code::ResourceExhausted),
            (ErrorKind::Busy, Code::Unavailable),
            (ErrorKind::Timeout, Code::DeadlineExceeded),
            (ErrorKind::InvalidState, Code::FailedPrecondition),
            (ErrorKind::NetworkFailed, Code::Internal),
            (ErrorKind::SystemdFailed, Code::Internal),
            (ErrorKind::Internal, Code::Internal),
        ] {
            assert_eq!(code_of_kind(kind), code, "{kind:?}");
            // The name the daemon sends back maps to the same code.
            assert_eq!(kind_of(error_name(kind)).map(code_of_kind), Some(code));
        }
    }

    /// `CODE_NAME` as gRPC spells it: NotFound -> NOT_FOUND.
    fn grpc_name(c: Code) -> String {
        let mut out = String::new();
        for (i, ch) in format!("{c:?}").chars().enumerate() {
            if ch.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_uppercase());
        }
        out
    }

    /// podscope-cri(8) lists every error the daemon names, each with the
    /// code it becomes here: the list comes from ErrorKind::ALL.
    #[test]
    fn every_mapping_is_in_the_man_page() {
        let man = include_str!("../../../man/podscope-cri.8");
        assert_eq!(grpc_name(Code::FailedPrecondition), "FAILED_PRECONDITION");
        for kind in ErrorKind::ALL {
            let short = error_name(kind).rsplit('.').next().unwrap();
            let code = grpc_name(code_of_kind(kind));
            assert!(
                man.contains(&format!(".TP\n.B {short}\n{code}")),
                "podscope-cri(8) does not map {short} to {code}"
            );
        }
        for (name, code) in [
            (
                "org.freedesktop.DBus.Error.AccessDenied",
                "PERMISSION_DENIED",
            ),
            ("org.freedesktop.DBus.Error.Timeout", "DEADLINE_EXCEEDED"),
            ("org.freedesktop.DBus.Error.ServiceUnknown", "UNAVAILABLE"),
        ] {
            assert_eq!(grpc_name(code_of_bus_error(name)), code, "{name}");
            assert!(man.contains(code), "{code}");
        }
    }

    #[test]
    fn unreachable_daemon_is_unavailable() {
        for name in [
            "org.freedesktop.DBus.Error.ServiceUnknown",
            "org.freedesktop.DBus.Error.NoReply",
            "org.freedesktop.DBus.Error.LimitsExceeded",
            "org.freedesktop.DBus.Error.NameHasNoOwner",
            "org.freedesktop.DBus.Error.Spawn.ChildExited",
            "org.freedesktop.systemd1.UnitMasked",
        ] {
            assert_eq!(code_of_bus_error(name), Code::Unavailable, "{name}");
        }
        assert_eq!(
            code_of_bus_error("org.freedesktop.DBus.Error.AccessDenied"),
            Code::PermissionDenied
        );
        assert_eq!(code_of_bus_error("com.example.Odd"), Code::Internal);
        let io = zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        assert!(connection_lost(&io));
        assert_eq!(status_of(&io).code(), Code::Unavailable);
        let tout = zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::TimedOut,
        )));
        assert!(!connection_lost(&tout));
        assert_eq!(status_of(&tout).code(), Code::DeadlineExceeded);
    }
}
