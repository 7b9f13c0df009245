//! How long each step of a verb took, as values: the steps measure, the
//! verb logs the value once. Each log entry carries a stable `EVENT=`
//! (`logging::event`) and one `*_US` field per step, which `make bench`
//! and operators (`journalctl EVENT=sandbox-started`) read; the message
//! text is for people and may change.

use podscope_api::domain::SandboxId;
use podscope_sys::logging::event;
use std::time::{Duration, Instant};
use tracing::info;

fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// Times the steps of one verb: each `lap` is the time since the last.
pub struct Laps {
    start: Instant,
    last: Instant,
}

impl Laps {
    pub fn start() -> Self {
        let now = Instant::now();
        Laps {
            start: now,
            last: now,
        }
    }

    /// The time since the previous lap (or the start).
    pub fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let d = now - self.last;
        self.last = now;
        d
    }

    pub fn total(&self) -> Duration {
        self.start.elapsed()
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct CreateTimings {
    /// The first checkpoint.
    pub checkpoint: Duration,
    /// The netns unit's start (alongside CNI ADD when the namespace is
    /// handed off).
    pub netns: Duration,
    pub total: Duration,
}

impl CreateTimings {
    pub fn log(&self, id: &SandboxId, pod: &str) {
        info!(event = event::CREATED, sandbox_id = %id, pod = %pod,
              checkpoint_us = us(self.checkpoint), netns_us = us(self.netns),
              elapsed_us = us(self.total), "sandbox {id} created");
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct StartTimings {
    /// Checking (or redoing) the pod's network.
    pub network: Duration,
    /// Spawning podscope-init.
    pub init: Duration,
    /// The transient scope's job.
    pub scope: Duration,
    pub total: Duration,
}

impl StartTimings {
    pub fn log(&self, id: &SandboxId, unit: &str, init_pid: u32) {
        info!(event = event::STARTED, sandbox_id = %id, unit = %unit, init_pid,
              network_us = us(self.network), init_us = us(self.init),
              scope_us = us(self.scope), total_us = us(self.total), "sandbox {id} started in {unit}");
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct StopTimings {
    pub scope: Duration,
    /// CNI DEL (in the pinned namespace, before the netns unit's stop).
    pub network: Duration,
    /// The namespace unpinned and its unit's stop queued (or, without the
    /// host namespace, the unit's stop waited for).
    pub netns: Duration,
    pub total: Duration,
}

impl StopTimings {
    pub fn log(&self, id: &SandboxId, unit: &str) {
        info!(event = event::STOPPED, sandbox_id = %id, unit = %unit,
              scope_us = us(self.scope), network_us = us(self.network),
              netns_us = us(self.netns), elapsed_us = us(self.total),
              "sandbox {id} stopped");
    }
}
