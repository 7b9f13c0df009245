//! The public contract of `org.podscope.Sandbox1`, below both the daemon
//! (podscoped's `bus/`) and its clients (`client`, podscope-cri,
//! podscopectl, the bench, the tests): bus names and paths, error names,
//! one Rust type per dictionary on the wire, and the proxies; the domain
//! types the wire carries (`domain`, pure), the error kinds every process
//! answers with (`error`), image references (`reference`), and the bound on
//! a client's calls in flight (`bus_gate`). A key, a name or a type changes
//! here and nowhere else: this crate is all that the CRI frontend and the
//! CLI share with the daemon.

pub mod bus_gate;
pub mod client;
pub mod container;
pub mod dict;
pub mod domain;
pub mod error;
pub mod errors;
pub mod exec;
pub mod image;
pub mod list_budget;
mod mirror;
pub mod proxy;
pub mod reference;
pub mod sandbox;

pub use client::Client;
pub use dict::{from_dict, to_dict, Dict, DictArg};
pub use error::{Error, ErrorKind, Result};
pub use sandbox::{
    Condition, CreateOptions, Dns, Exit, HandlerFeatures, ListFilter, PodMetadata, PortMapping,
    Quarantined, Resources, RuntimeInfo, SandboxStatus, SandboxSummary, Version,
};

use crate::domain::container::{ContainerState, GroupsPolicy, ProfileKind, Propagation};
use crate::domain::{ContainerId, NamespaceMode, NetworkMode, Protocol, SandboxId, State};
use zbus::zvariant::{OwnedObjectPath, Signature, Type};

pub const BUS_NAME: &str = "org.podscope.Sandbox1";
pub const MANAGER_PATH: &str = "/org/podscope/Sandbox1";
/// The interface names, as the `#[interface]` and `#[proxy]` attributes
/// must spell them again (a unit test keeps them equal).
pub const MANAGER_INTERFACE: &str = "org.podscope.Sandbox1.Manager";
pub const SANDBOX_INTERFACE: &str = "org.podscope.Sandbox1.Sandbox";
pub const IMAGES_INTERFACE: &str = "org.podscope.Sandbox1.Images";
pub const CONTAINER_INTERFACE: &str = "org.podscope.Sandbox1.Container";
/// The third value of Version.
pub const API_VERSION: &str = "v1";

/// A sandbox's object path.
pub fn sandbox_path(id: &SandboxId) -> OwnedObjectPath {
    OwnedObjectPath::try_from(format!("{MANAGER_PATH}/sandbox/{id}"))
        .expect("hex ids make valid paths")
}

/// A container's object path.
pub fn container_path(id: &ContainerId) -> OwnedObjectPath {
    OwnedObjectPath::try_from(format!("{MANAGER_PATH}/container/{id}"))
        .expect("hex ids make valid paths")
}

/// The domain's small enums travel as their lowercase names (their serde
/// names, which the checkpoints use too).
macro_rules! as_string {
    ($($t:ty),*) => {$(
        impl Type for $t {
            const SIGNATURE: &'static Signature = &Signature::Str;
        }
    )*};
}
as_string!(
    State,
    NetworkMode,
    NamespaceMode,
    Protocol,
    ContainerState,
    Propagation,
    ProfileKind,
    GroupsPolicy
);
