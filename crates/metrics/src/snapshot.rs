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

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a snapshot serialises")
    }

    pub fn from_json(bytes: &[u8]) -> Result<Snapshot, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
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
