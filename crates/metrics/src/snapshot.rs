//! The values of a process's families at one moment: what the exposition
//! renders, and what podscope-cri hands podscoped (as JSON) to be merged
//! into its own, so that one scrape gives both and each family once.

use crate::catalog::{self, Family, Kind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One series' value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Value {
    /// A counter's or a gauge's.
    Number(f64),
    /// A histogram's: how many observations fell in each of its family's
    /// buckets (not cumulative; one more than the bounds, for +Inf), their
    /// sum and count.
    Histogram {
        counts: Vec<u64>,
        sum: f64,
        count: u64,
    },
}

/// One series: its label values, in its family's label order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub labels: Vec<String>,
    pub value: Value,
}

/// Families by name, each with its series sorted by label values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub families: BTreeMap<String, Vec<Sample>>,
}

impl Snapshot {
    /// Add a series, replacing one of the same labels.
    pub fn put(&mut self, family: &Family, labels: &[&str], value: Value) {
        debug_assert_eq!(labels.len(), family.labels.len(), "{}", family.name);
        let samples = self.families.entry(family.name.to_owned()).or_default();
        let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
        match samples.binary_search_by(|s| s.labels.cmp(&labels)) {
            Ok(i) => samples[i].value = value,
            Err(i) => samples.insert(i, Sample { labels, value }),
        }
    }

    /// A gauge's or counter's value, set.
    pub fn number(&mut self, family: &Family, labels: &[&str], v: f64) {
        self.put(family, labels, Value::Number(v));
    }

    /// Each family declared (`catalog`) with no series yet, empty: the
    /// exposition then says of each that it exists.
    pub fn declare(&mut self, families: impl Iterator<Item = &'static Family>) {
        for f in families {
            self.families.entry(f.name.to_owned()).or_default();
        }
    }

    /// Merge `other` (another process's) into this one. A family the
    /// catalog does not know, a series whose label count or value shape
    /// does not fit its family, and a series this one already has are
    /// left out: the exposition stays valid whatever the other side sent.
    pub fn merge(&mut self, other: Snapshot) -> usize {
        let mut left_out = 0;
        for (name, samples) in other.families {
            let Some(family) = catalog::by_name(&name) else {
                left_out += samples.len().max(1);
                continue;
            };
            let mine = self.families.entry(name).or_default();
            for s in samples {
                if !fits(family, &s) {
                    left_out += 1;
                    continue;
                }
                match mine.binary_search_by(|m| m.labels.cmp(&s.labels)) {
                    Ok(_) => left_out += 1,
                    Err(i) => mine.insert(i, s),
                }
            }
        }
        left_out
    }

    /// A bus gate's figures as `process`'s series (both processes have
    /// one).
    pub fn gate(&mut self, process: &str, g: GateFigures) {
        use crate::catalog::*;
        self.number(&BUS_GATE_SLOTS, &[process], g.slots as f64);
        self.number(&BUS_GATE_IN_FLIGHT, &[process], g.in_flight as f64);
        self.number(&BUS_GATE_PEAK, &[process], g.peak as f64);
        self.number(&BUS_GATE_WAITS, &[process], g.waited as f64);
        self.number(&BUS_GATE_RETRIES, &[process], g.refused_retried as f64);
        self.number(&BUS_GATE_GAVE_UP, &[process], g.gave_up as f64);
    }

    /// A process's own series.
    pub fn process(&mut self, process: &str, p: ProcessFigures) {
        use crate::catalog::*;
        self.number(&PROCESS_RSS, &[process], p.resident_bytes as f64);
        self.number(&PROCESS_CPU, &[process], p.cpu_seconds);
        self.number(&PROCESS_OPEN_FDS, &[process], p.open_fds as f64);
        self.number(&PROCESS_MAX_FDS, &[process], p.max_fds as f64);
        self.number(&PROCESS_START_TIME, &[process], p.start_time_seconds);
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a snapshot serialises")
    }

    pub fn from_json(bytes: &[u8]) -> Result<Snapshot, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
}

/// A bus gate's figures (podscope-api's `bus_gate::Figures`, summed over
/// a process's gates).
#[derive(Clone, Copy, Debug, Default)]
pub struct GateFigures {
    pub slots: u64,
    pub in_flight: u64,
    pub peak: u64,
    pub waited: u64,
    pub refused_retried: u64,
    pub gave_up: u64,
}

/// A process's own figures (podscope-sys's `process::usage` and
/// descriptors).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessFigures {
    pub resident_bytes: u64,
    pub cpu_seconds: f64,
    pub open_fds: u64,
    pub max_fds: u64,
    pub start_time_seconds: f64,
}

/// Whether `s` is a series `family` can have.
fn fits(family: &Family, s: &Sample) -> bool {
    if s.labels.len() != family.labels.len() {
        return false;
    }
    match (&s.value, family.kind) {
        (Value::Number(_), Kind::Counter | Kind::Gauge) => true,
        (Value::Histogram { counts, .. }, Kind::Histogram) => {
            counts.len() == family.buckets.len() + 1
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::*;

    #[test]
    fn two_processes_merge_into_one_family_each() {
        let mut daemon = Snapshot::default();
        daemon.number(&PROCESS_RSS, &[PROCESS_DAEMON], 10.0);
        daemon.number(&PODS, &["ready", "crun"], 3.0);
        let mut cri = Snapshot::default();
        cri.number(&PROCESS_RSS, &[PROCESS_CRI], 5.0);
        cri.number(&CRI_CALLS, &["Version", "OK"], 2.0);
        // Through the wire, as podscope-cri sends it.
        let cri = Snapshot::from_json(cri.to_json().as_bytes()).unwrap();
        assert_eq!(daemon.merge(cri), 0);
        let rss = &daemon.families[PROCESS_RSS.name];
        assert_eq!(rss.len(), 2);
        assert_eq!(rss[0].labels, ["podscope-cri"]);
        assert_eq!(rss[1].labels, ["podscoped"]);
        assert_eq!(daemon.families[CRI_CALLS.name][0].value, Value::Number(2.0));
    }

    #[test]
    fn what_does_not_fit_is_left_out() {
        let mut daemon = Snapshot::default();
        daemon.number(&PROCESS_RSS, &[PROCESS_DAEMON], 10.0);
        let mut other = Snapshot::default();
        // A series the daemon has already (same labels): the daemon's stays.
        other.number(&PROCESS_RSS, &[PROCESS_DAEMON], 99.0);
        other.families.insert(
            "evil_metric".into(),
            vec![Sample {
                labels: vec![],
                value: Value::Number(1.0),
            }],
        );
        other.families.insert(
            PODS.name.into(),
            vec![
                Sample {
                    labels: vec!["ready".into()],
                    value: Value::Number(1.0),
                },
                Sample {
                    labels: vec!["ready".into(), "crun".into()],
                    value: Value::Histogram {
                        counts: vec![],
                        sum: 0.0,
                        count: 0,
                    },
                },
            ],
        );
        other.families.insert(
            CRI_CALL_DURATION.name.into(),
            vec![Sample {
                labels: vec!["Version".into()],
                value: Value::Histogram {
                    counts: vec![1],
                    sum: 0.1,
                    count: 1,
                },
            }],
        );
        assert_eq!(daemon.merge(other), 5);
        assert_eq!(
            daemon.families[PROCESS_RSS.name][0].value,
            Value::Number(10.0)
        );
        assert!(!daemon.families.contains_key("evil_metric"));
        assert!(daemon.families[PODS.name].is_empty());
        assert!(daemon.families[CRI_CALL_DURATION.name].is_empty());
        assert!(Snapshot::from_json(b"{\"families\": 3}").is_err());
    }
}
