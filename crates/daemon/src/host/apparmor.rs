//! AppArmor on this node: whether it is on, which profiles the kernel has
//! loaded (`Node`, what `podscope_oci::apparmor::choose` asks), and
//! loading podscope's default profile, which `podscoped
//! --load-apparmor-profile` does from podscoped.service's privileged
//! `ExecStartPre=+` (the daemon itself has no CAP_MAC_ADMIN).

use podscope_oci::apparmor::{Host, DEFAULT_PROFILE, DEFAULT_PROFILE_TEXT};
use std::path::Path;

/// Where the kernel says whether AppArmor is on, and lists loaded profiles.
const ENABLED: &str = "/sys/module/apparmor/parameters/enabled";
const PROFILES: &str = "/sys/kernel/security/apparmor/profiles";

/// The node this process runs on.
pub struct Node;

impl Host for Node {
    fn enabled(&self) -> bool {
        std::fs::read_to_string(ENABLED).is_ok_and(|s| s.trim() == "Y")
    }

    /// Each line of the kernel's list is "<name> (<mode>)".
    fn loaded(&self, name: &str) -> bool {
        std::fs::read_to_string(PROFILES).is_ok_and(|list| {
            list.lines()
                .any(|l| l.rsplit_once(" (").is_some_and(|(n, _)| n == name))
        })
    }
}

/// `podscoped --load-apparmor-profile`: write the default profile under
/// `dir` and load it with apparmor_parser (replacing an older one). What
/// happened, for the journal; an error only when a load was tried and
/// failed. A node without AppArmor or apparmor_parser loads nothing.
pub fn load_default_profile(dir: &Path, host: &impl Host) -> Result<String, String> {
    if !host.enabled() {
        return Ok("AppArmor is off on this node: no profile loaded".into());
    }
    let Some(parser) = ["/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        return Ok(format!(
            "AppArmor is on but apparmor_parser is missing (the apparmor package): \
             {DEFAULT_PROFILE} not loaded, RuntimeDefault will be refused"
        ));
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let file = dir.join(DEFAULT_PROFILE);
    std::fs::write(&file, DEFAULT_PROFILE_TEXT)
        .map_err(|e| format!("write {}: {e}", file.display()))?;
    let out = std::process::Command::new(parser)
        .args(["--replace", "--skip-cache"])
        .arg(&file)
        .output()
        .map_err(|e| format!("run {}: {e}", parser.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {}: {} {}",
            parser.display(),
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(format!("{DEFAULT_PROFILE} loaded from {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Off;
    impl Host for Off {
        fn enabled(&self) -> bool {
            false
        }
        fn loaded(&self, _: &str) -> bool {
            false
        }
    }

    #[test]
    fn the_default_profile_names_itself_and_nothing_is_loaded_without_apparmor() {
        assert!(DEFAULT_PROFILE_TEXT.contains(&format!("profile {DEFAULT_PROFILE} flags=")));
        let t = podscope_test_support::TempDir::new();
        let said = load_default_profile(&t.0.join("apparmor"), &Off).unwrap();
        assert!(said.contains("AppArmor is off"), "{said}");
        assert!(!t.0.join("apparmor").exists());
    }
}
