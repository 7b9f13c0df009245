//! What every podscope process takes from the system, and nothing of pods:
//! logging to the journal (and the EVENT names its readers match), the
//! descriptor budget, pipes, a tree's disk usage, and the crash points the
//! kill-at-every-step tests arm in podscoped (named here, where the test
//! driver reads them without the daemon).

pub mod descriptors;
pub mod failpoint;
pub mod logging;
pub mod pipe;
pub mod process;
pub mod usage;
