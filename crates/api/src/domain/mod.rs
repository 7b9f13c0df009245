//! Pure domain logic: ids, validated sandbox and container configuration, the state
//! machine, cgroup-parent to slice mapping and resource conversion. Nothing
//! here touches the system, so all of it is unit-tested without root.

pub mod cdi;
pub mod config;
pub mod container;
pub mod id;
pub mod machine;
pub mod network;
pub mod oomd;
pub mod platform;
pub mod resources;
pub mod sandbox;
pub mod selinux;
pub mod slice;
pub mod state;
pub mod userns;

pub use config::{NamespaceMode, NetworkMode, PodKey, SandboxConfig};
pub use container::{Container, ContainerConfig, ContainerState};
pub use id::{ContainerId, SandboxId};
pub use network::{DnsConfig, PortMapping, Protocol};
pub use resources::Resources;
pub use sandbox::Sandbox;
pub use state::State;
pub use userns::{IdMapping, UserNamespace};
