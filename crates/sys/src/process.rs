//! This process's own figures for the metrics endpoint: resident memory,
//! CPU time, start time, from `/proc/self/stat` (one read, no other
//! process looked at).

/// What `/proc/self/stat` says of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub resident_bytes: u64,
    /// User and system time.
    pub cpu_seconds: f64,
    /// Since the Unix epoch.
    pub start_time_seconds: f64,
}

/// This process's usage now; zeros where /proc cannot be read.
pub fn usage() -> Usage {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| boot_time(&s))
        .unwrap_or(0);
    parse(&stat, boot, ticks_per_second(), page_size())
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// `btime` of /proc/stat: the boot, in seconds since the epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// proc_pid_stat(5): the fields after the command's closing parenthesis
/// (the command may hold spaces and parentheses), counted from field 3.
fn parse(stat: &str, boot: u64, ticks: f64, page: u64) -> Usage {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Usage::default();
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Field n is f[n - 3].
    let num = |n: usize| {
        f.get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Usage {
        resident_bytes: num(24) * page,
        cpu_seconds: (num(14) + num(15)) as f64 / ticks,
        start_time_seconds: boot as f64 + num(22) as f64 / ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_past_a_command_with_parentheses() {
        let stat = "42 (pod (scope) d) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 300 18446744073709551615";
        let u = parse(stat, 1_700_000_000, 100.0, 4096);
        assert_eq!(u.resident_bytes, 300 * 4096);
        assert_eq!(u.cpu_seconds, 3.0);
        assert_eq!(u.start_time_seconds, 1_700_000_010.0);
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        let me = usage();
        assert!(
            me.resident_bytes > 0 && me.start_time_seconds > 1_600_000_000.0,
            "{me:?}"
        );
    }
}
