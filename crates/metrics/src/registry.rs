//! The values a process counts, by family and label values.
//!
//! Each family's series sit behind a lock of their own, held for one
//! update or one copy (no I/O, no allocation on the update of a series
//! that exists). Label values a caller passes may come from outside (a
//! registry's host name, a method name), so a family holds at most
//! `MAX_SERIES` label sets, and a value longer than `MAX_VALUE_LEN` is
//! never kept: past either, the update goes to the one label set whose
//! every value is `other`. Callers fold what they can name no better
//! (an unknown method) into `other` themselves, before this bound.

use crate::catalog::{Family, Kind};
use crate::snapshot::{Sample, Snapshot, Value};
use crate::OTHER;
use std::sync::Mutex;

/// Label sets one family may hold; its `other` set is one more.
pub const MAX_SERIES: usize = 256;
/// The longest label value kept as it is.
pub const MAX_VALUE_LEN: usize = 128;

pub struct Registry {
    families: Vec<(&'static Family, Mutex<Vec<Sample>>)>,
}

impl Registry {
    pub fn new(families: impl IntoIterator<Item = &'static Family>) -> Self {
        Registry {
            families: families
                .into_iter()
                .map(|f| (f, Mutex::new(Vec::new())))
                .collect(),
        }
    }

    /// Add `v` to a counter (or a gauge).
    pub fn add(&self, family: &Family, labels: &[&str], v: f64) {
        self.update(family, labels, |value| {
            if let Value::Number(n) = value {
                *n += v;
            }
        });
    }

    pub fn inc(&self, family: &Family, labels: &[&str]) {
        self.add(family, labels, 1.0);
    }

    /// Set a gauge.
    pub fn set(&self, family: &Family, labels: &[&str], v: f64) {
        self.update(family, labels, |value| *value = Value::Number(v));
    }

    /// One observation of a histogram.
    pub fn observe(&self, family: &Family, labels: &[&str], v: f64) {
        let bucket = family
            .buckets
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(family.buckets.len());
        self.update(family, labels, |value| {
            if let Value::Histogram { counts, sum, count } = value {
                counts[bucket] += 1;
                *sum += v;
                *count += 1;
            }
        });
    }

    fn update(&self, family: &Family, labels: &[&str], f: impl FnOnce(&mut Value)) {
        let Some((family, series)) = self.families.iter().find(|(f, _)| f.name == family.name)
        else {
            debug_assert!(false, "{} is not in this registry", family.name);
            return;
        };
        if labels.len() != family.labels.len() {
            debug_assert!(false, "{}: labels {labels:?}", family.name);
            return;
        }
        let other = vec![OTHER; labels.len()];
        let long = labels.iter().any(|l| l.len() > MAX_VALUE_LEN);
        let labels = if long { &other[..] } else { labels };
        let mut series = series.lock().unwrap_or_else(|e| e.into_inner());
        let at = |series: &Vec<Sample>, labels: &[&str]| {
            series.binary_search_by(|s| {
                s.labels
                    .iter()
                    .map(String::as_str)
                    .cmp(labels.iter().copied())
            })
        };
        let i = match at(&series, labels) {
            Ok(i) => i,
            Err(_) if series.len() >= MAX_SERIES => match at(&series, &other) {
                Ok(i) => i,
                Err(i) => insert(&mut series, i, family, &other),
            },
            Err(i) => insert(&mut series, i, family, labels),
        };
        f(&mut series[i].value);
    }

    /// The values now, every family of this registry declared.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        for (family, series) in &self.families {
            let series = series.lock().unwrap_or_else(|e| e.into_inner()).clone();
            s.families.insert(family.name.to_owned(), series);
        }
        s
    }
}

fn insert(series: &mut Vec<Sample>, i: usize, family: &Family, labels: &[&str]) -> usize {
    let value = match family.kind {
        Kind::Counter | Kind::Gauge => Value::Number(0.0),
        Kind::Histogram => Value::Histogram {
            counts: vec![0; family.buckets.len() + 1],
            sum: 0.0,
            count: 0,
        },
    };
    series.insert(
        i,
        Sample {
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            value,
        },
    );
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::*;

    #[test]
    fn counters_gauges_and_histograms_count() {
        let r = Registry::new(ALL.iter().copied());
        r.inc(&BUS_CALLS, &["Create"]);
        r.inc(&BUS_CALLS, &["Create"]);
        r.inc(&BUS_CALLS, &["List"]);
        r.set(&CRI_UP, &[], 1.0);
        r.observe(&CRI_CALL_DURATION, &["Version"], 0.0007);
        r.observe(&CRI_CALL_DURATION, &["Version"], 1000.0);
        let s = r.snapshot();
        let calls = &s.families[BUS_CALLS.name];
        assert_eq!(calls[0].labels, ["Create"]);
        assert_eq!(calls[0].value, Value::Number(2.0));
        assert_eq!(calls[1].value, Value::Number(1.0));
        assert_eq!(s.families[CRI_UP.name][0].value, Value::Number(1.0));
        let Value::Histogram { counts, sum, count } = &s.families[CRI_CALL_DURATION.name][0].value
        else {
            panic!("not a histogram")
        };
        assert_eq!(*count, 2);
        assert_eq!(*sum, 1000.0007);
        assert_eq!(counts[1], 1, "0.0007 is in the 0.001 bucket");
        assert_eq!(counts[CALL_SECONDS.len()], 1, "1000 s is past every bound");
        assert!(s.families[PODS.name].is_empty(), "declared, no series");
    }

    /// A hostile caller naming ever new label values grows a family to
    /// the bound and no further; the rest count as `other`.
    #[test]
    fn label_sets_are_bounded() {
        let r = Registry::new([&IMAGE_PULLS]);
        for i in 0..10_000 {
            r.inc(&IMAGE_PULLS, &[&format!("registry-{i}.example")]);
        }
        r.inc(&IMAGE_PULLS, &[&"x".repeat(MAX_VALUE_LEN + 1)]);
        let s = r.snapshot();
        let series = &s.families[IMAGE_PULLS.name];
        assert_eq!(series.len(), MAX_SERIES + 1);
        let other = series.iter().find(|s| s.labels == [OTHER]).unwrap();
        assert_eq!(other.value, Value::Number((10_000 - MAX_SERIES + 1) as f64));
        // A label set seen before the bound still counts as itself.
        r.inc(&IMAGE_PULLS, &["registry-0.example"]);
        let s = r.snapshot();
        let first = s.families[IMAGE_PULLS.name]
            .iter()
            .find(|s| s.labels == ["registry-0.example"])
            .unwrap();
        assert_eq!(first.value, Value::Number(2.0));
    }
}
