//! A systemd that records calls and fails on cue, for the lifecycle's unit
//! tests (no root, no bus). The harness tests run the same paths against
//! the real systemd.

use super::{Prop, ServiceStatus, SystemdClient};
use podscope_api::error::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Records every call ("start <unit>", "stop <unit>", ...); units it
/// started are "active". A call starting with a prefix in `fail` fails with
/// that kind, the first `times` times (0: always).
#[derive(Default)]
pub(crate) struct FakeSystemd {
    pub units: Mutex<HashMap<String, String>>,
    pub calls: Mutex<Vec<String>>,
    pub fail: Mutex<Vec<(String, ErrorKind, usize)>>,
    /// StopUnit calls in flight now, and the most there ever were.
    pub stopping: std::sync::atomic::AtomicUsize,
    pub most_stopping: std::sync::atomic::AtomicUsize,
    /// What service_status answers, by unit (unset: from `units`).
    pub services: Mutex<HashMap<String, ServiceStatus>>,
}

impl FakeSystemd {
    pub fn call(&self, what: String) -> Result<()> {
        self.calls.lock().unwrap().push(what.clone());
        let mut fail = self.fail.lock().unwrap();
        let Some(i) = fail
            .iter()
            .position(|(p, _, _)| what.starts_with(p.as_str()))
        else {
            return Ok(());
        };
        let kind = fail[i].1;
        match fail[i].2 {
            0 => {}
            1 => drop(fail.remove(i)),
            _ => fail[i].2 -= 1,
        }
        Err(Error::new(kind, format!("{what}: refused by the test")))
    }
    pub fn fail(&self, prefix: &str, kind: ErrorKind, times: usize) {
        self.fail
            .lock()
            .unwrap()
            .push((prefix.to_owned(), kind, times));
    }
    pub fn set_active(&self, unit: &str) {
        self.units
            .lock()
            .unwrap()
            .insert(unit.to_owned(), "active".to_owned());
    }
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

/// `pattern` is `prefix*suffix`, as the lifecycle's patterns are.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    let (pre, suf) = pattern.split_once('*').unwrap_or((pattern, ""));
    name.starts_with(pre) && name.ends_with(suf) && name.len() >= pre.len() + suf.len()
}

impl SystemdClient for Arc<FakeSystemd> {
    fn start_transient(
        &self,
        unit: &str,
        _props: Vec<(&'static str, Prop)>,
        _timeout: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        let r = self.call(format!("transient {unit}"));
        if r.is_ok() {
            self.set_active(unit);
        }
        std::future::ready(r)
    }
    fn set_properties(
        &self,
        unit: &str,
        props: Vec<(&'static str, Prop)>,
    ) -> impl Future<Output = Result<()>> + Send {
        let keys: Vec<&str> = props.iter().map(|(k, _)| *k).collect();
        std::future::ready(self.call(format!("set {unit} {}", keys.join(","))))
    }
    fn start_unit(
        &self,
        unit: &str,
        _timeout: Duration,
    ) -> impl Future<Output = Result<()>> + Send {
        let r = self.call(format!("start {unit}"));
        if r.is_ok() {
            self.set_active(unit);
        }
        std::future::ready(r)
    }
    fn stop_unit(&self, unit: &str, _timeout: Duration) -> impl Future<Output = Result<()>> + Send {
        use std::sync::atomic::Ordering::SeqCst;
        let (this, unit) = (self.clone(), unit.to_owned());
        async move {
            // A stop takes a while: callers that do not wait for one before
            // the next show up here as overlapping calls.
            let now = this.stopping.fetch_add(1, SeqCst) + 1;
            this.most_stopping.fetch_max(now, SeqCst);
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            this.stopping.fetch_sub(1, SeqCst);
            let r = this.call(format!("stop {unit}"));
            if r.is_ok() {
                this.units.lock().unwrap().remove(&unit);
            }
            r
        }
    }
    fn queue_stop(&self, unit: &str) -> impl Future<Output = Result<()>> + Send {
        let r = self.call(format!("stop {unit}"));
        if r.is_ok() {
            self.units.lock().unwrap().remove(unit);
        }
        std::future::ready(r)
    }
    fn kill_unit(&self, unit: &str, signal: i32) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(self.call(format!("kill {unit} {signal}")))
    }
    fn kill_main(&self, unit: &str, signal: i32) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(self.call(format!("killmain {unit} {signal}")))
    }
    fn unref(&self, unit: &str) -> impl Future<Output = ()> + Send {
        let _ = self.call(format!("unref {unit}"));
        std::future::ready(())
    }
    fn reset_failed(&self, unit: &str) -> impl Future<Output = Result<()>> + Send {
        let r = self.call(format!("reset {unit}"));
        if r.is_ok() {
            self.services.lock().unwrap().remove(unit);
            let mut units = self.units.lock().unwrap();
            if units.get(unit).map(String::as_str) == Some("failed") {
                units.remove(unit);
            }
        }
        std::future::ready(r)
    }
    fn service_status(
        &self,
        unit: &str,
    ) -> impl Future<Output = Result<Option<ServiceStatus>>> + Send {
        let r = self.call(format!("status {unit}")).map(|()| {
            if let Some(s) = self.services.lock().unwrap().get(unit) {
                return Some(s.clone());
            }
            self.units.lock().unwrap().get(unit).map(|a| ServiceStatus {
                active_state: a.clone(),
                sub_state: if a == "active" {
                    "running".into()
                } else {
                    a.clone()
                },
                result: "success".into(),
                main_pid: 4242,
                ..Default::default()
            })
        });
        std::future::ready(r)
    }
    fn active_state(&self, unit: &str) -> impl Future<Output = Result<Option<String>>> + Send {
        std::future::ready(Ok(self.units.lock().unwrap().get(unit).cloned()))
    }
    fn list_units(
        &self,
        pattern: &str,
    ) -> impl Future<Output = Result<HashMap<String, String>>> + Send {
        let units = self.units.lock().unwrap();
        std::future::ready(Ok(units
            .iter()
            .filter(|(u, _)| glob(pattern, u))
            .map(|(u, s)| (u.clone(), s.clone()))
            .collect()))
    }
    fn connection_lost(&self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }
}
