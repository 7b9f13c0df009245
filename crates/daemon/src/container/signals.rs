//! What a container's process does with a signal, from
//! `/proc/<pid>/status`. A container's process is the init of its own PID
//! namespace, and the kernel drops a signal sent to such an init from
//! outside unless it has a handler for it (SIGKILL and SIGSTOP aside).
//! A Stop that comes just after a Start (critest does that) reaches a
//! program that has not set its SIGTERM handler yet: the signal is gone,
//! and the container would sit out its whole grace period. `stop.rs` sends
//! it again once the program has its handler.

use std::path::Path;

/// What `/proc/<pid>/status` says of a signal and the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disposition {
    /// The process is PID 1 of its innermost PID namespace.
    pub namespace_init: bool,
    /// It has a handler for the signal.
    pub caught: bool,
}

impl Disposition {
    /// Whether the signal, sent now from outside, would be dropped.
    pub fn drops(self) -> bool {
        self.namespace_init && !self.caught
    }
}

/// The process's disposition of `signal`; None when it is gone or the
/// file says nothing usable.
pub fn disposition(pid: u32, signal: i32) -> Option<Disposition> {
    let status =
        std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status")).ok()?;
    parse(&status, signal)
}

fn parse(status: &str, signal: i32) -> Option<Disposition> {
    if !(1..=64).contains(&signal) {
        return None;
    }
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let caught = u64::from_str_radix(field("SigCgt")?, 16).ok()? & (1u64 << (signal - 1)) != 0;
    // NSpid lists the pid in each namespace, outermost first.
    let namespace_init = field("NSpid")?.split_whitespace().last()? == "1";
    Some(Disposition {
        namespace_init,
        caught,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOP_STARTING: &str = "Name:\ttop\nNSpid:\t4242\t1\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n";
    // busybox top once running: SIGTERM (15, bit 14) among its handlers.
    const TOP_RUNNING: &str = "Name:\ttop\nNSpid:\t4242\t1\nSigCgt:\t0000000000004a03\n";
    const IN_A_SHARED_NAMESPACE: &str =
        "Name:\tsleep\nNSpid:\t4243\t7\nSigCgt:\t0000000000000000\n";

    #[test]
    fn an_init_without_a_handler_drops_the_signal() {
        let d = parse(TOP_STARTING, libc::SIGTERM).unwrap();
        assert_eq!(
            d,
            Disposition {
                namespace_init: true,
                caught: false
            }
        );
        assert!(d.drops());
    }

    #[test]
    fn a_handler_or_another_init_gets_it() {
        assert!(!parse(TOP_RUNNING, libc::SIGTERM).unwrap().drops());
        assert!(parse(TOP_RUNNING, libc::SIGTERM).unwrap().caught);
        assert!(!parse(TOP_RUNNING, libc::SIGQUIT).unwrap().caught);
        assert!(!parse(IN_A_SHARED_NAMESPACE, libc::SIGTERM).unwrap().drops());
    }

    #[test]
    fn nonsense_is_none() {
        assert_eq!(parse(TOP_RUNNING, 0), None);
        assert_eq!(parse("Name:\tx\n", libc::SIGTERM), None);
        assert_eq!(disposition(u32::MAX, libc::SIGTERM), None);
    }

    #[test]
    fn this_process_is_read() {
        let d = disposition(std::process::id(), libc::SIGTERM).unwrap();
        assert!(!d.caught);
    }
}
