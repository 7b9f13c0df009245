//! CRI's messages in the daemon's terms and back, pure (no call is made
//! here): a pod sandbox's (`sandbox`) and a container's (`container`).

pub mod container;
pub mod sandbox;
