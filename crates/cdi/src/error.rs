//! Why a CDI device could not be given: each names the device (as asked
//! for) and what stood in the way, so a CreateContainer's InvalidArgument
//! says it without a look at the log.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CdiError {
    /// No spec of the directories defines the device. `known` lists the
    /// kind's devices when some spec has the kind; `in_error` the spec
    /// files of that kind (or of no kind read) that are in error.
    Unknown {
        device: String,
        dirs: String,
        known: Vec<String>,
        in_error: Vec<(String, String)>,
    },
    /// Two spec files of one directory define it.
    Conflict { device: String, files: Vec<String> },
    /// A host path its edits need is not there, or is not what it must be.
    HostPath {
        device: String,
        path: String,
        why: String,
    },
    /// A hook its edits name cannot run.
    Hook {
        device: String,
        path: String,
        why: String,
    },
    /// An edit podscope's runtimes cannot make.
    Unsupported { device: String, what: String },
}

impl CdiError {
    /// The device the error is about.
    pub fn device(&self) -> &str {
        match self {
            CdiError::Unknown { device, .. }
            | CdiError::Conflict { device, .. }
            | CdiError::HostPath { device, .. }
            | CdiError::Hook { device, .. }
            | CdiError::Unsupported { device, .. } => device,
        }
    }
}

impl fmt::Display for CdiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CdiError::Unknown {
                device,
                dirs,
                known,
                in_error,
            } => {
                write!(f, "CDI device {device}: no spec in {dirs} defines it")?;
                if !known.is_empty() {
                    write!(f, " (its kind's devices: {})", known.join(", "))?;
                }
                for (file, why) in in_error {
                    write!(f, "; spec {file} is in error: {why}")?;
                }
                Ok(())
            }
            CdiError::Conflict { device, files } => write!(
                f,
                "CDI device {device}: defined by {} in one directory, so by none",
                files.join(" and ")
            ),
            CdiError::HostPath { device, path, why } => {
                write!(f, "CDI device {device}: host path {path}: {why}")
            }
            CdiError::Hook { device, path, why } => {
                write!(f, "CDI device {device}: hook {path}: {why}")
            }
            CdiError::Unsupported { device, what } => {
                write!(f, "CDI device {device}: {what}")
            }
        }
    }
}

impl std::error::Error for CdiError {}
