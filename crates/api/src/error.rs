//! The daemon's error type: a small set of kinds that map one-to-one onto the
//! public D-Bus error names, plus context wrapping so a message says which
//! sandbox, which step and why (netavark style).

use std::fmt;

/// Defines `ErrorKind` and `ErrorKind::ALL` from one list, so that ALL
/// (which the documents' drift tests walk) cannot miss a kind.
macro_rules! error_kinds {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $v:ident,)* }) => {
        $(#[$m])*
        $vis enum $name { $($(#[$vm])* $v,)* }
        impl $name {
            pub const ALL: [$name; [$($name::$v),*].len()] = [$($name::$v),*];
        }
    };
}

error_kinds! {
    /// What went wrong, as callers need to distinguish it. Each kind has a fixed
    /// D-Bus name (see `api::errors`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ErrorKind {
        NotFound,
        AlreadyExists,
        InvalidArgument,
        InvalidState,
        NetworkFailed,
        SystemdFailed,
        Timeout,
        Internal,
        AccessDenied,
        /// podscoped refused before taking any step: too many calls of a
        /// kind in flight, or too few file descriptors left for the call.
        LimitsExceeded,
        /// The system bus or systemd could not take a call podscoped made
        /// (the bus's limit on its pending calls kept refusing after
        /// retries, or no reply came): nothing is known to be done, and a
        /// retry later is the answer.
        Busy,
        /// A registry refused the credentials (or asked for some): HTTP 401.
        RegistryUnauthorized,
        /// A registry (HTTP 403) or registries.conf (`blocked`) denies the pull.
        RegistryDenied,
        /// A registry could not be reached, hung, broke the connection or
        /// answered 5xx: worth a retry.
        RegistryUnavailable,
        /// The OCI runtime is missing, refused the container or failed (its
        /// own message follows): a command not found in the image, say.
        RuntimeFailed,
    }
}

#[derive(Debug)]
pub enum Error {
    /// A leaf error: kind plus a human message.
    Plain { kind: ErrorKind, message: String },
    /// An I/O failure; always `Internal` to callers.
    Io {
        context: String,
        source: std::io::Error,
    },
    /// `context: source`, keeping the source's kind.
    Context { context: String, source: Box<Error> },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error::Plain {
            kind,
            message: message.into(),
        }
    }
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, m)
    }
    pub fn already_exists(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::AlreadyExists, m)
    }
    /// An invalid argument always names the offending field first.
    pub fn invalid(field: &str, reason: impl fmt::Display) -> Self {
        Self::new(ErrorKind::InvalidArgument, format!("{field}: {reason}"))
    }
    pub fn invalid_state(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidState, m)
    }
    pub fn systemd(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::SystemdFailed, m)
    }
    pub fn timeout(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, m)
    }
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, m)
    }
    pub fn limits_exceeded(m: impl Into<String>) -> Self {
        Error::new(ErrorKind::LimitsExceeded, m)
    }
    pub fn busy(m: impl Into<String>) -> Self {
        Error::new(ErrorKind::Busy, m)
    }
    pub fn access_denied(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::AccessDenied, m)
    }
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// The failures of steps that each ran past the others' (a pod's
    /// containers stopped one by one) as one error: the kind of the first,
    /// which is what a caller acts on (a Busy stays Busy, so kubelet
    /// retries), with every message. Ok when there are none.
    pub fn gather(errors: Vec<Error>) -> Result<()> {
        let mut it = errors.into_iter();
        let Some(first) = it.next() else {
            return Ok(());
        };
        let rest: Vec<String> = it.map(|e| e.to_string()).collect();
        if rest.is_empty() {
            return Err(first);
        }
        let kind = first.kind();
        Err(Error::new(kind, format!("{first}; {}", rest.join("; "))))
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Plain { kind, .. } => *kind,
            Error::Io { .. } => ErrorKind::Internal,
            Error::Context { source, .. } => source.kind(),
        }
    }

    /// Wrap with a context prefix (`"sandbox 1a2b…: start scope"`).
    pub fn context(self, context: impl Into<String>) -> Self {
        Error::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Plain { message, .. } => f.write_str(message),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Context { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Context { source, .. } => Some(source.as_ref()),
            Error::Plain { .. } => None,
        }
    }
}

/// `.context("…")` on any `Result<_, Error>`.
pub trait ResultExt<T> {
    fn context(self, context: impl Into<String>) -> Result<T>;
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.context(context))
    }
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| e.context(f()))
    }
}

/// `.io_context("…")` on I/O results.
pub trait IoResultExt<T> {
    fn io_context(self, context: impl Into<String>) -> Result<T>;
}

impl<T> IoResultExt<T> for std::io::Result<T> {
    fn io_context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::io(context, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_kind_and_chains_message() {
        let e = Error::not_found("no such sandbox abc")
            .context("status")
            .context("bus");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(e.to_string(), "bus: status: no such sandbox abc");
    }

    #[test]
    fn gathered_errors_keep_the_first_kind_and_every_message() {
        assert!(Error::gather(vec![]).is_ok());
        let one = Error::gather(vec![Error::busy("a")]).unwrap_err();
        assert_eq!((one.kind(), one.to_string()), (ErrorKind::Busy, "a".into()));
        let two = Error::gather(vec![Error::busy("a"), Error::internal("b")]).unwrap_err();
        assert_eq!(
            (two.kind(), two.to_string()),
            (ErrorKind::Busy, "a; b".into())
        );
    }

    #[test]
    fn io_errors_are_internal() {
        let e = Error::io(
            "write checkpoint",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert!(e.to_string().starts_with("write checkpoint: "));
    }
}
