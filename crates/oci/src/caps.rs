//! Linux capabilities by name, and the set a CRI container gets.
//!
//! CRI names capabilities without the `CAP_` prefix and in any case
//! ("NET_ADMIN", "sys_time"); the OCI spec wants `CAP_*`. Everything here
//! returns the spec's spelling, ordered by capability number so that the
//! same request always writes the same config.json.

/// Every capability Linux 6.1 knows, in number order (`ALL[n]` is
/// capability `n`).
pub const ALL: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The set an unprivileged CRI container starts from: containerd 1.6's
/// (`oci/spec.go`, `defaultUnixCaps`), which is Docker's, so images written
/// for either behave the same here.
pub const DEFAULT: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// The capability's number, for a name already in `CAP_*` form.
pub fn number(name: &str) -> Option<usize> {
    ALL.iter().position(|c| *c == name)
}

/// "sys_admin", "SYS_ADMIN", "cap_sys_admin" → "CAP_SYS_ADMIN".
pub fn normalize(name: &str) -> Result<String, String> {
    lookup(name).map(|n| ALL[n].to_owned())
}

/// The number of a capability named in any of CRI's or the spec's ways.
fn lookup(name: &str) -> Result<usize, String> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    number(&full).ok_or_else(|| format!("unknown capability {name:?}"))
}

fn is_all(name: &str) -> bool {
    name.eq_ignore_ascii_case("ALL")
}

/// Capability numbers named in `list` (one CRI field, `field` naming it in
/// errors), leaving out "ALL".
fn numbers(list: &[String], field: &str) -> Result<Vec<usize>, String> {
    list.iter()
        .enumerate()
        .filter(|(_, name)| !is_all(name))
        .map(|(i, name)| lookup(name).map_err(|e| format!("{field}[{i}]: {e}")))
        .collect()
}

/// The capabilities a CRI container runs with (its bounding, permitted and
/// effective sets), by CRI's rules as containerd applies them: privileged
/// means every capability; otherwise start from `DEFAULT`, or from every
/// capability when `add` holds "ALL", or from none when `drop` holds "ALL"
/// (drop wins over add); then add the named ones, then drop the named ones.
/// So add ALL + drop CHOWN is everything but CAP_CHOWN, and drop ALL + add
/// NET_ADMIN is CAP_NET_ADMIN alone. Names are checked even for a
/// privileged container, so a typo is an error wherever it is.
pub fn effective(add: &[String], drop: &[String], privileged: bool) -> Result<Vec<String>, String> {
    let added = numbers(add, "add")?;
    let dropped = numbers(drop, "drop")?;
    let mut set = [false; ALL.len()];
    if privileged {
        set = [true; ALL.len()];
    } else {
        for n in DEFAULT.iter().filter_map(|c| number(c)) {
            set[n] = true;
        }
        if add.iter().any(|c| is_all(c)) {
            set = [true; ALL.len()];
        }
        if drop.iter().any(|c| is_all(c)) {
            set = [false; ALL.len()];
        }
        for n in added {
            set[n] = true;
        }
        for n in dropped {
            set[n] = false;
        }
    }
    Ok(ALL
        .iter()
        .zip(set)
        .filter(|(_, on)| *on)
        .map(|(name, _)| (*name).to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn sorted_default() -> Vec<String> {
        let mut d: Vec<&str> = DEFAULT.to_vec();
        d.sort_by_key(|c| number(c).unwrap());
        strings(&d)
    }

    #[test]
    fn all_is_linux_6_1_in_number_order() {
        assert_eq!(ALL.len(), 41);
        assert_eq!(number("CAP_CHOWN"), Some(0));
        assert_eq!(number("CAP_NET_ADMIN"), Some(12));
        assert_eq!(number("CAP_SYS_ADMIN"), Some(21));
        assert_eq!(number("CAP_AUDIT_READ"), Some(37));
        assert_eq!(number("CAP_PERFMON"), Some(38));
        assert_eq!(number("CAP_BPF"), Some(39));
        assert_eq!(number("CAP_CHECKPOINT_RESTORE"), Some(40));
        let mut seen = std::collections::HashSet::new();
        assert!(ALL.iter().all(|c| seen.insert(c)), "duplicate in ALL");
    }

    #[test]
    fn default_is_containerds_fourteen() {
        assert_eq!(DEFAULT.len(), 14);
        for c in DEFAULT {
            assert!(number(c).is_some(), "{c}");
        }
        for c in [
            "CAP_SYS_ADMIN",
            "CAP_NET_ADMIN",
            "CAP_SYS_PTRACE",
            "CAP_DAC_READ_SEARCH",
        ] {
            assert!(!DEFAULT.contains(&c), "{c}");
        }
    }

    #[test]
    fn normalize_accepts_every_spelling() {
        for name in [
            "sys_admin",
            "SYS_ADMIN",
            "CAP_SYS_ADMIN",
            "cap_sys_admin",
            "Sys_Admin",
        ] {
            assert_eq!(normalize(name).unwrap(), "CAP_SYS_ADMIN");
        }
        assert_eq!(
            normalize("checkpoint_restore").unwrap(),
            "CAP_CHECKPOINT_RESTORE"
        );
    }

    #[test]
    fn normalize_names_the_unknown() {
        let e = normalize("SYS_ADMN").unwrap_err();
        assert!(e.contains("\"SYS_ADMN\""), "{e}");
        assert!(normalize("").is_err());
        assert!(normalize("CAP_").is_err());
        assert!(normalize("ALL").is_err());
        assert!(normalize(" SYS_ADMIN").is_err());
    }

    #[test]
    fn plain_container_gets_default_in_number_order() {
        let caps = effective(&[], &[], false).unwrap();
        assert_eq!(caps, sorted_default());
        assert_eq!(caps[0], "CAP_CHOWN");
        assert_eq!(caps[1], "CAP_DAC_OVERRIDE");
        assert_eq!(caps[2], "CAP_FOWNER");
    }

    #[test]
    fn privileged_gets_all() {
        assert_eq!(effective(&[], &[], true).unwrap(), strings(ALL));
        let caps = effective(&strings(&["NET_ADMIN"]), &strings(&["ALL"]), true).unwrap();
        assert_eq!(caps, strings(ALL));
    }

    #[test]
    fn add_and_drop_named() {
        let caps = effective(
            &strings(&["sys_admin", "NET_ADMIN"]),
            &strings(&["MKNOD"]),
            false,
        )
        .unwrap();
        assert!(caps.contains(&"CAP_SYS_ADMIN".to_owned()));
        assert!(caps.contains(&"CAP_NET_ADMIN".to_owned()));
        assert!(!caps.contains(&"CAP_MKNOD".to_owned()));
        assert_eq!(caps.len(), DEFAULT.len() + 1);
        // Sorted by number: NET_ADMIN (12) before SYS_ADMIN (21).
        let at = |c: &str| caps.iter().position(|x| x == c).unwrap();
        assert!(at("CAP_NET_ADMIN") < at("CAP_SYS_ADMIN"));
    }

    #[test]
    fn drop_wins_over_add_of_the_same() {
        let caps = effective(&strings(&["NET_ADMIN"]), &strings(&["NET_ADMIN"]), false).unwrap();
        assert!(!caps.contains(&"CAP_NET_ADMIN".to_owned()));
    }

    #[test]
    fn add_all_then_drop_one() {
        let caps = effective(&strings(&["ALL"]), &strings(&["CHOWN"]), false).unwrap();
        assert_eq!(caps.len(), ALL.len() - 1);
        assert!(!caps.contains(&"CAP_CHOWN".to_owned()));
        assert_eq!(caps[0], "CAP_DAC_OVERRIDE");
    }

    #[test]
    fn drop_all_then_add_one() {
        let caps = effective(&strings(&["NET_ADMIN"]), &strings(&["all"]), false).unwrap();
        assert_eq!(caps, strings(&["CAP_NET_ADMIN"]));
        assert!(effective(&[], &strings(&["ALL"]), false)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn all_in_any_case_and_both_all() {
        assert_eq!(
            effective(&strings(&["all"]), &[], false).unwrap(),
            strings(ALL)
        );
        assert_eq!(
            effective(&strings(&["All"]), &[], false).unwrap(),
            strings(ALL)
        );
        // Add ALL and drop ALL: containerd applies the add first, so nothing.
        assert!(effective(&strings(&["ALL"]), &strings(&["ALL"]), false)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn no_duplicates() {
        let caps = effective(
            &strings(&["CHOWN", "chown", "CAP_CHOWN", "SYS_TIME", "sys_time"]),
            &[],
            false,
        )
        .unwrap();
        assert_eq!(caps, sorted_default_plus("CAP_SYS_TIME"));
    }

    fn sorted_default_plus(extra: &str) -> Vec<String> {
        let mut d: Vec<&str> = DEFAULT.to_vec();
        d.push(extra);
        d.sort_by_key(|c| number(c).unwrap());
        strings(&d)
    }

    #[test]
    fn unknown_names_are_errors_naming_field_and_item() {
        let e = effective(&strings(&["NET_ADMIN", "BOGUS"]), &[], false).unwrap_err();
        assert!(e.starts_with("add[1]: "), "{e}");
        assert!(e.contains("\"BOGUS\""), "{e}");
        let e = effective(&[], &strings(&["NOPE"]), false).unwrap_err();
        assert!(e.starts_with("drop[0]: "), "{e}");
        assert!(effective(&strings(&["BOGUS"]), &[], true).is_err());
    }
}
