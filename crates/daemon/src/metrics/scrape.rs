//! What one scrape reads: the registry, the index's pods and containers
//! by state and handler (each record read under its own short read lock,
//! never an operation lock), the last recovery's findings, the bus gate
//! and the descriptor budget, the process from /proc/self, and
//! podscope-cri's own families from its socket. No call on the bus.

use crate::bus::Service;
use podscope_api::domain::container::ContainerState;
use podscope_api::domain::State;
use podscope_metrics::catalog::{self, PROCESS_DAEMON};
use podscope_metrics::{GateFigures, ProcessFigures, Snapshot};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// podscope-cri's socket: in the runtime directory its unit makes
/// (`RuntimeDirectory=podscope/cri`, root's alone), gone when it stops.
pub const CRI_SOCKET: &str = "/run/podscope/cri/metrics.sock";
/// How long podscope-cri has to answer, and how much it may send.
pub const CRI_TIMEOUT: Duration = Duration::from_millis(500);
pub const CRI_MAX_BYTES: u64 = 1 << 20;

pub struct Scraper {
    pub service: Arc<Service>,
    pub cri_socket: PathBuf,
}

impl Scraper {
    pub fn new(service: Arc<Service>) -> Self {
        Scraper {
            service,
            cri_socket: CRI_SOCKET.into(),
        }
    }

    /// Every family, both processes', as the text format.
    pub async fn render(&self) -> String {
        let mut s = self.snapshot();
        match ask_cri(&self.cri_socket).await {
            Ok(cri) => {
                s.number(&catalog::CRI_UP, &[], 1.0);
                let left_out = s.merge(cri);
                if left_out > 0 {
                    tracing::debug!("metrics: {left_out} of podscope-cri's series did not fit and were left out");
                }
            }
            Err(why) => {
                tracing::debug!("metrics: podscope-cri: {why}");
                s.number(&catalog::CRI_UP, &[], 0.0);
            }
        }
        s.declare(catalog::ALL.iter().copied());
        podscope_metrics::exposition::render(&s)
    }

    /// The daemon's own families now.
    pub fn snapshot(&self) -> Snapshot {
        let svc = &self.service;
        let mut s = super::registry().snapshot();
        let settings = &svc.pods.settings;
        let handler_of = |h: &str| -> String {
            if h.is_empty() {
                settings.default_runtime.clone()
            } else {
                h.to_owned()
            }
        };
        // Every configured handler in every state, 0 where none: a series
        // that comes and goes is a gap in a graph, not a zero.
        let mut pods: BTreeMap<(&'static str, String), u64> = BTreeMap::new();
        let mut containers: BTreeMap<(&'static str, String), u64> = BTreeMap::new();
        for h in settings.runtimes.keys() {
            for st in [State::Created, State::Ready, State::NotReady] {
                pods.insert((st.as_str(), h.clone()), 0);
            }
            for st in [
                ContainerState::Created,
                ContainerState::Running,
                ContainerState::Exited,
                ContainerState::Unknown,
            ] {
                containers.insert((st.as_str(), h.clone()), 0);
            }
        }
        let mut pod_handler = BTreeMap::new();
        for e in svc.pods.list(&Default::default()) {
            let (state, handler) = e.with(|p| (p.state, handler_of(&p.config.runtime_handler)));
            *pods.entry((state.as_str(), handler.clone())).or_default() += 1;
            pod_handler.insert(e.id.clone(), handler);
        }
        for e in svc.containers.list(&Default::default()) {
            let (state, pod) = e.with(|c| (c.state, c.pod_id.clone()));
            let handler = pod_handler
                .get(&pod)
                .cloned()
                .unwrap_or_else(|| podscope_metrics::OTHER.to_owned());
            *containers.entry((state.as_str(), handler)).or_default() += 1;
        }
        for ((state, handler), n) in pods {
            s.number(&catalog::PODS, &[state, &handler], n as f64);
        }
        for ((state, handler), n) in containers {
            s.number(&catalog::CONTAINERS, &[state, &handler], n as f64);
        }

        let (pod_rec, ctr_rec) = (svc.pods.recovery_report(), svc.containers.recovery_report());
        for (kind, orphans, quarantined) in [
            (
                "pod",
                pod_rec.orphans_stopped.len(),
                pod_rec.quarantined.len(),
            ),
            (
                "container",
                ctr_rec.orphans_stopped.len(),
                ctr_rec.quarantined.len(),
            ),
        ] {
            s.number(&catalog::RECOVERY_ORPHANS, &[kind], orphans as f64);
            s.number(&catalog::RECOVERY_QUARANTINED, &[kind], quarantined as f64);
        }

        let fds = svc.fds.figures();
        s.number(&catalog::DESCRIPTORS_RESERVED, &[], fds.reserved as f64);
        s.number(&catalog::DESCRIPTORS_REFUSALS, &[], fds.refused as f64);
        s.gate(PROCESS_DAEMON, gate_figures(&svc.gate.figures()));
        s.process(PROCESS_DAEMON, process_figures(fds.open, fds.limit));
        s
    }
}

/// A bus gate's figures for the metrics.
pub fn gate_figures(g: &podscope_api::bus_gate::Figures) -> GateFigures {
    GateFigures {
        slots: g.max as u64,
        in_flight: g.in_flight as u64,
        peak: g.peak as u64,
        waited: g.waited,
        refused_retried: g.refused_retried,
        gave_up: g.gave_up,
    }
}

/// This process's figures for the metrics.
pub fn process_figures(open_fds: u64, max_fds: u64) -> ProcessFigures {
    let u = podscope_sys::process::usage();
    ProcessFigures {
        resident_bytes: u.resident_bytes,
        cpu_seconds: u.cpu_seconds,
        open_fds,
        max_fds,
        start_time_seconds: u.start_time_seconds,
    }
}

/// podscope-cri's snapshot: it writes it whole on each connection and
/// closes. Not there (not running), slow or too large: an error.
async fn ask_cri(path: &std::path::Path) -> Result<Snapshot, String> {
    let read = async {
        let conn = tokio::net::UnixStream::connect(path)
            .await
            .map_err(|e| format!("connect {}: {e}", path.display()))?;
        let mut buf = Vec::new();
        conn.take(CRI_MAX_BYTES + 1)
            .read_to_end(&mut buf)
            .await
            .map_err(|e| format!("read {}: {e}", path.display()))?;
        if buf.len() as u64 > CRI_MAX_BYTES {
            return Err(format!("its answer is over {CRI_MAX_BYTES} bytes"));
        }
        Snapshot::from_json(&buf).map_err(|e| format!("its answer: {e}"))
    };
    tokio::time::timeout(CRI_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {CRI_TIMEOUT:?}")))
}
