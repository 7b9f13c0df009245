//! A snapshot as Prometheus' text format, version 0.0.4: per family one
//! `# HELP` and one `# TYPE` line, then its series; a histogram as its
//! cumulative `_bucket` series (`le`, ending with `+Inf`), `_sum` and
//! `_count`. Label values escape `\`, `"` and newline; help text `\` and
//! newline.

use crate::catalog::{self, Family, Kind};
use crate::snapshot::{Snapshot, Value};
use std::fmt::Write;

/// The text of `snapshot`, its families in the catalog's order.
pub fn render(snapshot: &Snapshot) -> String {
    let mut out = String::with_capacity(16 * 1024);
    for family in catalog::ALL {
        let Some(samples) = snapshot.families.get(family.name) else {
            continue;
        };
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(family.help));
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
        for s in samples {
            match (&s.value, family.kind) {
                (Value::Number(v), Kind::Counter | Kind::Gauge) => {
                    line(&mut out, family.name, family, &s.labels, None, *v);
                }
                (Value::Histogram { counts, sum, count }, Kind::Histogram) => {
                    let name = format!("{}_bucket", family.name);
                    let mut cumulative = 0;
                    for (i, c) in counts.iter().enumerate() {
                        cumulative += c;
                        let le = family
                            .buckets
                            .get(i)
                            .map_or_else(|| "+Inf".to_owned(), |b| number(*b));
                        line(
                            &mut out,
                            &name,
                            family,
                            &s.labels,
                            Some(&le),
                            cumulative as f64,
                        );
                    }
                    let name = format!("{}_sum", family.name);
                    line(&mut out, &name, family, &s.labels, None, *sum);
                    let name = format!("{}_count", family.name);
                    line(&mut out, &name, family, &s.labels, None, *count as f64);
                }
                // `Snapshot::merge` and the registry never make one.
                _ => {}
            }
        }
    }
    out
}

fn line(
    out: &mut String,
    name: &str,
    family: &Family,
    labels: &[String],
    le: Option<&str>,
    v: f64,
) {
    out.push_str(name);
    let pairs = family
        .labels
        .iter()
        .zip(labels)
        .map(|(k, v)| (*k, v.as_str()))
        .chain(le.map(|le| ("le", le)));
    let mut first = true;
    for (k, v) in pairs {
        out.push(if first { '{' } else { ',' });
        first = false;
        let _ = write!(out, "{k}=\"{}\"", escape_value(v));
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    out.push_str(&number(v));
    out.push('\n');
}

/// A value as the format writes it: Go's ParseFloat reads it back.
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

pub fn escape_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::*;
    use crate::Registry;

    #[test]
    fn known_text() {
        let r = Registry::new([&CNI_DURATION, &IMAGE_PULL_FAILURES, &CRI_UP]);
        r.observe(&CNI_DURATION, &["ADD"], 0.02);
        r.observe(&CNI_DURATION, &["ADD"], 100.0);
        r.inc(&IMAGE_PULL_FAILURES, &["re\"g\\1\n", "NotFound"]);
        let text = render(&r.snapshot());
        // In the catalog's order: CRI_UP, the pulls, CNI.
        let mut want = format!(
            "# HELP podscope_cri_up {}\n# TYPE podscope_cri_up gauge\n",
            CRI_UP.help
        );
        want.push_str("# HELP podscope_image_pull_failures_total ");
        want.push_str(IMAGE_PULL_FAILURES.help);
        want.push_str("\n# TYPE podscope_image_pull_failures_total counter\n");
        want.push_str(
            "podscope_image_pull_failures_total{registry=\"re\\\"g\\\\1\\n\",reason=\"NotFound\"} 1\n",
        );
        want.push_str("# HELP podscope_cni_operation_duration_seconds ");
        want.push_str(CNI_DURATION.help);
        want.push_str("\n# TYPE podscope_cni_operation_duration_seconds histogram\n");
        for (le, n) in [
            ("0.005", 0),
            ("0.01", 0),
            ("0.025", 1),
            ("0.05", 1),
            ("0.1", 1),
            ("0.25", 1),
            ("0.5", 1),
            ("1", 1),
            ("2.5", 1),
            ("5", 1),
            ("10", 1),
            ("30", 1),
            ("60", 1),
            ("+Inf", 2),
        ] {
            want.push_str(&format!(
                "podscope_cni_operation_duration_seconds_bucket{{operation=\"ADD\",le=\"{le}\"}} {n}\n"
            ));
        }
        want.push_str("podscope_cni_operation_duration_seconds_sum{operation=\"ADD\"} 100.02\n");
        want.push_str("podscope_cni_operation_duration_seconds_count{operation=\"ADD\"} 2\n");
        assert_eq!(text, want);
    }

    /// Every line of a full exposition is a comment or a sample the
    /// format's grammar takes, each family's HELP and TYPE are there once
    /// and before its samples, and a histogram's buckets are cumulative,
    /// ending with +Inf equal to its count.
    #[test]
    fn a_full_exposition_parses_back() {
        let r = Registry::new(ALL.iter().copied());
        for f in ALL {
            let labels: Vec<String> = f.labels.iter().map(|l| format!("{l} \"x\"\n\\")).collect();
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            match f.kind {
                Kind::Histogram => {
                    for v in [0.0, 0.003, 7.0, 1e9] {
                        r.observe(f, &labels, v)
                    }
                }
                _ => r.add(f, &labels, 3.5),
            }
        }
        let text = render(&r.snapshot());
        let mut help = std::collections::BTreeSet::new();
        let mut types = std::collections::BTreeMap::new();
        let mut buckets: Vec<(String, f64)> = Vec::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(help.insert(name.to_owned()), "HELP {name} twice");
                continue;
            }
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(help.contains(name), "TYPE before HELP: {name}");
                assert!(types.insert(name.to_owned(), kind.to_owned()).is_none());
                continue;
            }
            let (name, labels, value) = parse_sample(l);
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|b| types.get(*b).is_some_and(|k| k == "histogram"))
                })
                .unwrap_or(&name);
            let family = by_name(base).unwrap_or_else(|| panic!("{name}: no family"));
            assert!(types.contains_key(base), "{name} before its TYPE");
            let want: Vec<String> = family
                .labels
                .iter()
                .map(|l| format!("{l} \"x\"\n\\"))
                .collect();
            let got: Vec<&String> = labels
                .iter()
                .filter(|(k, _)| k != "le")
                .map(|(_, v)| v)
                .collect();
            assert_eq!(got, want.iter().collect::<Vec<_>>(), "{l}");
            if name.ends_with("_bucket") {
                let le = &labels.iter().find(|(k, _)| k == "le").unwrap().1;
                buckets.push((le.clone(), value));
            }
            if name.ends_with("_count") && family.kind == Kind::Histogram {
                assert_eq!(buckets.last().unwrap(), &("+Inf".to_owned(), value));
                assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative");
                assert_eq!(value, 4.0);
                buckets.clear();
            }
        }
        assert_eq!(types.len(), ALL.len());
    }

    /// `name{k="v",...} value`, label values unescaped.
    fn parse_sample(l: &str) -> (String, Vec<(String, String)>, f64) {
        let name_end = l.find(['{', ' ']).unwrap();
        let name = &l[..name_end];
        assert!(name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':'));
        let mut rest = &l[name_end..];
        let mut labels = Vec::new();
        if let Some(r) = rest.strip_prefix('{') {
            rest = r;
            loop {
                let (k, r) = rest.split_once("=\"").unwrap();
                let mut v = String::new();
                let mut chars = r.char_indices();
                let end = loop {
                    match chars.next().unwrap() {
                        (_, '\\') => match chars.next().unwrap().1 {
                            'n' => v.push('\n'),
                            c @ ('\\' | '"') => v.push(c),
                            c => panic!("bad escape \\{c} in {l}"),
                        },
                        (i, '"') => break i,
                        (_, c) => v.push(c),
                    }
                };
                labels.push((k.to_owned(), v));
                rest = &r[end + 1..];
                if let Some(r) = rest.strip_prefix(',') {
                    rest = r;
                } else {
                    rest = rest.strip_prefix('}').unwrap();
                    break;
                }
            }
        }
        let v = rest.strip_prefix(' ').unwrap();
        let value = match v {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("{v}: not a number")),
        };
        (name.to_owned(), labels, value)
    }
}
