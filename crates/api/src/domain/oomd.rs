//! Pod memory pressure handed to systemd-oomd: with
//! `oomd_memory_pressure_limit` set in podscope.toml, each pod slice
//! podscope makes (`podscope-<id>.slice`, for pods that name no cgroup
//! parent) gets `ManagedOOMMemoryPressure=kill` and that limit. When the
//! slice's memory pressure (PSI) stays above it for oomd.conf's
//! `DefaultMemoryPressureDurationSec`, systemd-oomd kills the cgroup in
//! it with the most reclaim activity: one container's unit (a whole one
//! when kubelet set `memory.oom.group`), not the node's biggest process.
//! systemd then ends that unit with `Result=oom-kill` and sets
//! `user.oomd_ooms` on its cgroup; podscope reports the exit with a reason
//! of its own, [`REASON_OOMD_KILLED`].

use crate::error::{Error, Result};

const FIELD: &str = "oomd_memory_pressure_limit";

/// The reason of a container killed by systemd-oomd.
pub const REASON_OOMD_KILLED: &str = "OomdKilled";

/// The limit as a percentage ("60%", "12.5%", two decimals at most), in
/// permyriad; empty is off. 0% would kill at any stall and 100% never,
/// so the limit is above the one and below the other.
pub fn parse_limit(text: &str) -> Result<Option<u32>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || {
        Error::invalid(
            FIELD,
            format!("{text:?} is not a percentage above 0 and below 100, like \"60%\""),
        )
    };
    let number = text.strip_suffix('%').ok_or_else(bad)?;
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty()
        || whole.len() > 3
        || frac.len() > 2
        || !whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
        || (number.contains('.') && frac.is_empty())
    {
        return Err(bad());
    }
    let whole: u32 = whole.parse().map_err(|_| bad())?;
    let frac: u32 = format!("{frac:0<2}").parse().map_err(|_| bad())?;
    let permyriad = whole * 100 + frac;
    if permyriad == 0 || permyriad >= 10_000 {
        return Err(bad());
    }
    Ok(Some(permyriad))
}

/// The D-Bus form of `ManagedOOMMemoryPressureLimit=`: a fraction of
/// 2^32 (systemd's UINT32_SCALE_FROM_PERMYRIAD), rounded as systemd does.
pub fn dbus_limit(permyriad: u32) -> u32 {
    ((u64::from(permyriad) * u64::from(u32::MAX) + 5_000) / 10_000) as u32
}

/// The limit as systemd prints it ("60.00%").
pub fn percent(permyriad: u32) -> String {
    format!("{}.{:02}%", permyriad / 100, permyriad % 100)
}

/// What the exit of a container its unit says was OOM-killed is, when
/// the kernel's counter saw no OOM kill in the container's cgroup:
/// systemd-oomd's (it leaves `user.oomd_ooms` on the cgroup it killed).
pub fn oomd_message(slice: &str, permyriad: Option<u32>) -> String {
    match permyriad {
        Some(p) => format!(
            "killed by systemd-oomd: the memory pressure of the pod's slice {slice} stayed above {}",
            percent(p)
        ),
        None => format!("killed by systemd-oomd (memory pressure in {slice})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn percentages_become_permyriad() {
        assert_eq!(parse_limit("").unwrap(), None);
        assert_eq!(parse_limit("60%").unwrap(), Some(6000));
        assert_eq!(parse_limit("12.5%").unwrap(), Some(1250));
        assert_eq!(parse_limit("0.01%").unwrap(), Some(1));
        assert_eq!(parse_limit(" 99.99% ").unwrap(), Some(9999));
        assert_eq!(percent(1250), "12.50%");
    }

    #[test]
    fn bad_limits_are_named() {
        for bad in [
            "60", "0%", "100%", "101%", "-5%", "5.%", ".5%", "1.234%", "x%", "60 %", "1e2%",
        ] {
            let e = parse_limit(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}");
            assert!(e.to_string().contains(FIELD), "{bad}: {e}");
        }
    }

    #[test]
    fn the_dbus_limit_is_a_fraction_of_two_to_the_32() {
        assert_eq!(dbus_limit(5000), 2_147_483_648);
        assert_eq!(dbus_limit(10_000), u32::MAX);
        assert_eq!(dbus_limit(0), 0);
    }
}
