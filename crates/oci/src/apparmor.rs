//! AppArmor for containers, as containerd and CRI-O apply it: the profile a
//! container's process is confined by (`process.apparmorProfile`), chosen
//! from what it asked for and what the node has loaded.
//!
//! `RuntimeDefault` is podscope's own profile, `podscope-default`
//! (`DEFAULT_PROFILE_TEXT`). podscoped has no CAP_MAC_ADMIN: the profile is
//! loaded before it starts by `podscoped --load-apparmor-profile`, run by
//! podscoped.service's privileged `ExecStartPre=+` with the apparmor
//! package's `apparmor_parser` (podscoped's `apparmor::load_default_profile`).
//! A node without
//! AppArmor, or without that package, has no default profile: a container
//! that asked for none then runs without one, and one that asked for
//! RuntimeDefault is refused by name.

/// The default profile's name, as the kernel knows it.
pub const DEFAULT_PROFILE: &str = "podscope-default";

/// The default profile's source (AppArmor 3 syntax; the includes are the
/// apparmor package's). What a container does within its own namespaces is
/// allowed; what would reach the node is not: mounting, the kernel's knobs
/// under /proc/sys (the network's are the pod's own and allowed), sysrq,
/// kernel memory and log, firmware, security and debug file systems, and
/// writes to the node's devices and drivers in /sys. Signals and tracing
/// stay among the processes confined by it (the runtime and systemd,
/// unconfined, may signal them).
pub const DEFAULT_PROFILE_TEXT: &str = r#"# podscope's default AppArmor profile for containers (CRI RuntimeDefault).
# Written and loaded by `podscoped --load-apparmor-profile` at each start of
# podscoped.service; edits here are replaced then.
abi <abi/3.0>,
#include <tunables/global>

profile podscope-default flags=(attach_disconnected,mediate_deleted) {
  #include <abstractions/base>

  network,
  capability,
  file,
  umount,

  signal (receive) peer=unconfined,
  signal (send,receive) peer=podscope-default,
  ptrace (trace,read,tracedby,readby) peer=podscope-default,

  deny mount,
  deny pivot_root,

  deny @{PROC}/sys/kernel/** wklx,
  deny @{PROC}/sys/vm/** wklx,
  deny @{PROC}/sys/fs/** wklx,
  deny @{PROC}/sys/dev/** wklx,
  deny @{PROC}/sys/debug/** wklx,
  deny @{PROC}/sysrq-trigger rwklx,
  deny @{PROC}/kcore rwklx,
  deny @{PROC}/kmsg rwklx,
  deny @{PROC}/kallsyms rwklx,

  deny /sys/firmware/** rwklx,
  deny /sys/kernel/security/** rwklx,
  deny /sys/kernel/debug/** rwklx,
  deny /sys/module/** wklx,
  deny /sys/devices/** wklx,
  deny /sys/class/** wklx,
  deny /sys/bus/** wklx,
  deny /sys/power/** wklx,
}
"#;

/// What the node's AppArmor is: on or off, and which profiles are loaded
/// (a trait for the choice's unit tests).
pub trait Host {
    fn enabled(&self) -> bool;
    fn loaded(&self, name: &str) -> bool;
}

/// A profile asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked<'a> {
    /// None (CRI's nil).
    Unset,
    Unconfined,
    RuntimeDefault,
    /// A loaded profile's name (CRI's localhost_ref, with or without the
    /// "localhost/" prefix critest and kubelet's annotations give it).
    Localhost(&'a str),
}

/// The profile a container's process gets: Some(name), None for none
/// (unconfined), or why it cannot run as asked. A privileged container
/// gets none unless it named one (as containerd's); a node with AppArmor
/// off gives none to all (the caller logs an explicit ask).
pub fn choose(
    asked: Asked<'_>,
    privileged: bool,
    host: &impl Host,
) -> Result<Option<String>, String> {
    if !host.enabled() {
        return Ok(None);
    }
    match asked {
        Asked::Unconfined => Ok(None),
        Asked::Unset | Asked::RuntimeDefault if privileged => Ok(None),
        Asked::Unset => Ok(host
            .loaded(DEFAULT_PROFILE)
            .then(|| DEFAULT_PROFILE.to_owned())),
        Asked::RuntimeDefault if host.loaded(DEFAULT_PROFILE) => Ok(Some(DEFAULT_PROFILE.into())),
        Asked::RuntimeDefault => Err(format!(
            "the runtime's default AppArmor profile {DEFAULT_PROFILE} is not loaded \
             (podscoped.service loads it with apparmor_parser: is the apparmor package installed?)"
        )),
        Asked::Localhost(name) => {
            let name = name.strip_prefix("localhost/").unwrap_or(name);
            if name.is_empty() {
                return Err("a Localhost AppArmor profile needs a name".into());
            }
            if host.loaded(name) {
                Ok(Some(name.to_owned()))
            } else {
                Err(format!("AppArmor profile {name:?} is not loaded"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        on: bool,
        loaded: &'static [&'static str],
    }
    impl Host for Fake {
        fn enabled(&self) -> bool {
            self.on
        }
        fn loaded(&self, name: &str) -> bool {
            self.loaded.contains(&name)
        }
    }

    /// Issue 41, finding 6: profiles were parsed and never applied. The
    /// choice follows containerd's: the default for a container that asks
    /// for none, a loaded Localhost profile by name (the "localhost/"
    /// prefix critest gives dropped), an unloaded one refused, nothing on a
    /// node without AppArmor.
    #[test]
    fn the_profile_follows_the_ask_and_the_node() {
        let on = Fake {
            on: true,
            loaded: &[DEFAULT_PROFILE, "deny-write"],
        };
        let d = Some(DEFAULT_PROFILE.to_owned());
        assert_eq!(choose(Asked::Unset, false, &on), Ok(d.clone()));
        assert_eq!(choose(Asked::RuntimeDefault, false, &on), Ok(d));
        assert_eq!(choose(Asked::Unconfined, false, &on), Ok(None));
        assert_eq!(choose(Asked::Unset, true, &on), Ok(None), "privileged");
        for name in ["deny-write", "localhost/deny-write"] {
            assert_eq!(
                choose(Asked::Localhost(name), true, &on),
                Ok(Some("deny-write".into()))
            );
        }
        let e = choose(Asked::Localhost("localhost/nope"), false, &on).unwrap_err();
        assert_eq!(e, "AppArmor profile \"nope\" is not loaded");
        assert!(choose(Asked::Localhost("localhost/"), false, &on).is_err());

        // AppArmor on, but no default profile (no apparmor_parser): none
        // for a container that asked for none, refusal for one that asked.
        let bare = Fake {
            on: true,
            loaded: &[],
        };
        assert_eq!(choose(Asked::Unset, false, &bare), Ok(None));
        let e = choose(Asked::RuntimeDefault, false, &bare).unwrap_err();
        assert!(e.contains("podscope-default is not loaded"), "{e}");

        let off = Fake {
            on: false,
            loaded: &[],
        };
        for asked in [
            Asked::Unset,
            Asked::RuntimeDefault,
            Asked::Localhost("x"),
            Asked::Unconfined,
        ] {
            assert_eq!(choose(asked, false, &off), Ok(None), "{asked:?}");
        }
    }
}
