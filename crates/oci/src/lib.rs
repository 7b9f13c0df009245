//! The OCI runtime spec (config.json) that containers run with: its types
//! and the defaults podscope fills in. Pure: nothing here touches the
//! system.

pub mod apparmor;
pub mod caps;
pub mod checkpoint_seal;
pub mod defaults;
pub mod seccomp;
pub mod spec;
pub mod user;
