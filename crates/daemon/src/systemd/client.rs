//! The systemd calls the lifecycle makes, as a trait (youki's
//! `SystemdClient`): the daemon uses `Systemd`, the lifecycle's unit tests
//! a fake that records calls and fails on cue, so rollback and recovery
//! paths are tested without root or a bus.

use super::{Prop, ServiceStatus, Systemd};
use podscope_api::error::Result;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

pub trait SystemdClient: Send + Sync + 'static {
    /// StartTransientUnit and wait for its job.
    fn start_transient(
        &self,
        unit: &str,
        props: Vec<(&'static str, Prop)>,
        timeout: Duration,
    ) -> impl Future<Output = Result<()>> + Send;
    /// SetUnitProperties (runtime).
    fn set_properties(
        &self,
        unit: &str,
        props: Vec<(&'static str, Prop)>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// StartUnit and wait for its job.
    fn start_unit(&self, unit: &str, timeout: Duration) -> impl Future<Output = Result<()>> + Send;
    /// StopUnit and wait for its job; a unit systemd does not know is stopped.
    fn stop_unit(&self, unit: &str, timeout: Duration) -> impl Future<Output = Result<()>> + Send;
    /// StopUnit, its job left to systemd (not waited for).
    fn queue_stop(&self, unit: &str) -> impl Future<Output = Result<()>> + Send;
    /// KillUnit (all processes).
    fn kill_unit(&self, unit: &str, signal: i32) -> impl Future<Output = Result<()>> + Send;
    /// KillUnit (the main process only).
    fn kill_main(&self, unit: &str, signal: i32) -> impl Future<Output = Result<()>> + Send;
    /// UnrefUnit (the reference AddRef= took); failures are only logged.
    fn unref(&self, unit: &str) -> impl Future<Output = ()> + Send;
    /// ResetFailedUnit; unknown units are fine.
    fn reset_failed(&self, unit: &str) -> impl Future<Output = Result<()>> + Send;
    /// A service's state and exit status; None when systemd does not know it.
    fn service_status(
        &self,
        unit: &str,
    ) -> impl Future<Output = Result<Option<ServiceStatus>>> + Send;
    /// The unit's ActiveState; None when systemd does not know it.
    fn active_state(&self, unit: &str) -> impl Future<Output = Result<Option<String>>> + Send;
    /// Loaded units matching `pattern`, with their ActiveState.
    fn list_units(
        &self,
        pattern: &str,
    ) -> impl Future<Output = Result<HashMap<String, String>>> + Send;
    /// Resolves when the connection to systemd is lost.
    fn connection_lost(&self) -> impl Future<Output = ()> + Send;
}

impl SystemdClient for Systemd {
    fn start_transient(
        &self,
        unit: &str,
        props: Vec<(&'static str, Prop)>,
        timeout: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        Systemd::start_transient(self, unit, props, timeout)
    }
    fn set_properties(
        &self,
        unit: &str,
        props: Vec<(&'static str, Prop)>,
    ) -> impl Future<Output = Result<()>> + Send {
        Systemd::set_properties(self, unit, props)
    }
    fn start_unit(&self, unit: &str, timeout: Duration) -> impl Future<Output = Result<()>> + Send {
        Systemd::start_unit(self, unit, timeout)
    }
    fn stop_unit(&self, unit: &str, timeout: Duration) -> impl Future<Output = Result<()>> + Send {
        Systemd::stop_unit(self, unit, timeout)
    }
    fn queue_stop(&self, unit: &str) -> impl Future<Output = Result<()>> + Send {
        Systemd::queue_stop(self, unit)
    }
    fn kill_unit(&self, unit: &str, signal: i32) -> impl Future<Output = Result<()>> + Send {
        Systemd::kill_unit(self, unit, signal)
    }
    fn kill_main(&self, unit: &str, signal: i32) -> impl Future<Output = Result<()>> + Send {
        Systemd::kill_main(self, unit, signal)
    }
    fn reset_failed(&self, unit: &str) -> impl Future<Output = Result<()>> + Send {
        Systemd::reset_failed(self, unit)
    }
    fn unref(&self, unit: &str) -> impl Future<Output = ()> + Send {
        Systemd::unref(self, unit)
    }
    fn service_status(
        &self,
        unit: &str,
    ) -> impl Future<Output = Result<Option<ServiceStatus>>> + Send {
        Systemd::service_status(self, unit)
    }
    fn active_state(&self, unit: &str) -> impl Future<Output = Result<Option<String>>> + Send {
        Systemd::active_state(self, unit)
    }
    fn list_units(
        &self,
        pattern: &str,
    ) -> impl Future<Output = Result<HashMap<String, String>>> + Send {
        Systemd::list_units(self, pattern)
    }
    fn connection_lost(&self) -> impl Future<Output = ()> + Send {
        Systemd::connection_lost(self)
    }
}
