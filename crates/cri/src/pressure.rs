//! Pressure stall information (PSI) of a cgroup: `cpu.pressure`,
//! `memory.pressure` and `io.pressure`, which cgroup2 keeps in every
//! cgroup when the kernel has PSI on, whatever controllers are enabled.
//! cgroups-rs 0.5 does not read them; they are three small text files:
//!
//! ```text
//! some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
//! full avg10=0.00 avg60=0.00 avg300=0.00 total=6789
//! ```
//!
//! `total` is in microseconds; the CRI wants nanoseconds.

use cri_api::v1 as cri;
use std::path::Path;

/// One line of a pressure file.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Stall {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Microseconds stalled since the cgroup was made.
    pub total_us: u64,
}

/// One resource's pressure: some tasks stalled, all of them stalled
/// (`cpu.pressure` has `full` since Linux 5.13; before, only `some`).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Resource {
    pub some: Stall,
    pub full: Option<Stall>,
}

/// A cgroup's pressure, each resource None where the file is absent
/// (PSI off in the kernel, or a v1 controller's directory).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Pressure {
    pub cpu: Option<Resource>,
    pub memory: Option<Resource>,
    pub io: Option<Resource>,
}

/// Parse a pressure file's text; None if it has no `some` line.
pub fn parse(text: &str) -> Option<Resource> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let kind = words.next();
        let mut s = Stall::default();
        for kv in words {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            match k {
                "avg10" => s.avg10 = v.parse().ok()?,
                "avg60" => s.avg60 = v.parse().ok()?,
                "avg300" => s.avg300 = v.parse().ok()?,
                "total" => s.total_us = v.parse().ok()?,
                _ => {}
            }
        }
        match kind {
            Some("some") => some = Some(s),
            Some("full") => full = Some(s),
            _ => {}
        }
    }
    Some(Resource { some: some?, full })
}

/// The pressure files of the cgroup2 directory `dir`.
pub fn read(dir: &Path) -> Pressure {
    let one = |file: &str| {
        std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|t| parse(&t))
    };
    Pressure {
        cpu: one("cpu.pressure"),
        memory: one("memory.pressure"),
        io: one("io.pressure"),
    }
}

fn data(s: Stall) -> cri::PsiData {
    cri::PsiData {
        total: s.total_us.saturating_mul(1000),
        avg10: s.avg10,
        avg60: s.avg60,
        avg300: s.avg300,
    }
}

/// The CRI's form of one resource's pressure (`full` zero where the
/// kernel has none, as cadvisor reports it).
pub fn to_cri(r: Option<Resource>) -> Option<cri::PsiStats> {
    r.map(|r| cri::PsiStats {
        some: Some(data(r.some)),
        full: Some(data(r.full.unwrap_or_default())),
    })
}

/// IoUsage: the CRI carries no more of I/O than its pressure.
pub fn io_usage(p: &Pressure, timestamp: i64) -> Option<cri::IoUsage> {
    p.io.map(|io| cri::IoUsage {
        timestamp,
        psi: to_cri(Some(io)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn some_and_full_are_parsed_and_total_becomes_ns() {
        let r = parse(
            "some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\n\
             full avg10=0.00 avg60=0.10 avg300=0.00 total=678\n",
        )
        .unwrap();
        assert_eq!(r.some.total_us, 12345);
        assert_eq!(r.some.avg10, 1.5);
        assert_eq!(r.full.unwrap().avg60, 0.1);
        let c = to_cri(Some(r)).unwrap();
        assert_eq!(c.some.unwrap().total, 12_345_000);
        assert_eq!(c.full.unwrap().total, 678_000);
    }

    #[test]
    fn a_file_with_some_only_has_no_full() {
        let r = parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n").unwrap();
        assert_eq!(r.full, None);
        assert_eq!(to_cri(Some(r)).unwrap().full.unwrap().total, 0);
    }

    #[test]
    fn garbage_is_no_pressure() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("full avg10=0.00 total=3\n"), None);
        assert_eq!(parse("some avg10=x total=3\n"), None);
    }
}
