//! SELinux labels, as CRI asks for them (`SELinuxOption`: user, role, type,
//! level, for the pod and for each container) and as an OCI runtime takes
//! them: the process's `selinuxLabel` and the `mountLabel` of what the
//! runtime mounts for the container. A part left empty is the pod's, then
//! the usual container policy's (`system_u:system_r:container_t:s0`, files
//! `container_file_t`), as containerd and CRI-O fill them.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The labels asked for; each part empty for the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeLinuxOptions {
    pub user: String,
    pub role: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub level: String,
}

/// The most characters of one part (a context is short; the kernel takes
/// a page).
const PART_MAX: usize = 255;

impl SeLinuxOptions {
    pub fn is_empty(&self) -> bool {
        self == &SeLinuxOptions::default()
    }

    /// Each part a name of the policy's: user, role and type letters,
    /// digits, `_`, `.` and `-`; the level (MLS/MCS, "s0:c1,c2" or a range
    /// "s0-s0:c0.c1023") those and `:` and `,`.
    pub fn validate(&self, field: &str) -> Result<()> {
        for (part, v, extra) in [
            ("user", &self.user, ""),
            ("role", &self.role, ""),
            ("type", &self.type_, ""),
            ("level", &self.level, ":,"),
        ] {
            if v.len() > PART_MAX {
                return Err(Error::invalid(
                    &format!("{field}.{part}"),
                    format!("{} characters, more than {PART_MAX}", v.len()),
                ));
            }
            if let Some(c) = v
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || "_.-".contains(*c) || extra.contains(*c)))
            {
                return Err(Error::invalid(
                    &format!("{field}.{part}"),
                    format!("{v:?}: {c:?} is not in an SELinux {part}"),
                ));
            }
        }
        Ok(())
    }

    /// These options over `base` (the pod's): each part set here, else
    /// base's.
    pub fn over(&self, base: &SeLinuxOptions) -> SeLinuxOptions {
        let pick = |a: &String, b: &String| if a.is_empty() { b.clone() } else { a.clone() };
        SeLinuxOptions {
            user: pick(&self.user, &base.user),
            role: pick(&self.role, &base.role),
            type_: pick(&self.type_, &base.type_),
            level: pick(&self.level, &base.level),
        }
    }

    /// (process label, mount label), the defaults filled in.
    pub fn labels(&self) -> (String, String) {
        let or = |v: &str, d: &str| {
            if v.is_empty() {
                d.to_owned()
            } else {
                v.to_owned()
            }
        };
        let user = or(&self.user, "system_u");
        let level = or(&self.level, "s0");
        (
            format!(
                "{user}:{}:{}:{level}",
                or(&self.role, "system_r"),
                or(&self.type_, "container_t")
            ),
            format!("{user}:object_r:container_file_t:{level}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_fill_defaults_and_the_pod_under_the_container() {
        assert_eq!(
            SeLinuxOptions::default().labels(),
            (
                "system_u:system_r:container_t:s0".to_owned(),
                "system_u:object_r:container_file_t:s0".to_owned()
            )
        );
        let pod = SeLinuxOptions {
            level: "s0:c1,c2".into(),
            ..Default::default()
        };
        let ctr = SeLinuxOptions {
            type_: "spc_t".into(),
            ..Default::default()
        };
        assert_eq!(
            ctr.over(&pod).labels(),
            (
                "system_u:system_r:spc_t:s0:c1,c2".to_owned(),
                "system_u:object_r:container_file_t:s0:c1,c2".to_owned()
            )
        );
    }

    #[test]
    fn bad_parts_are_named() {
        let ok = SeLinuxOptions {
            user: "system_u".into(),
            role: "system_r".into(),
            type_: "container_t".into(),
            level: "s0-s0:c0.c1023".into(),
        };
        ok.validate("selinux").unwrap();
        for (o, field) in [
            (
                SeLinuxOptions {
                    type_: "a:b".into(),
                    ..Default::default()
                },
                "selinux.type",
            ),
            (
                SeLinuxOptions {
                    level: "s0 c1".into(),
                    ..Default::default()
                },
                "selinux.level",
            ),
            (
                SeLinuxOptions {
                    user: "u".repeat(300),
                    ..Default::default()
                },
                "selinux.user",
            ),
        ] {
            let e = o.validate("selinux").unwrap_err().to_string();
            assert!(e.starts_with(field), "{e}");
        }
    }
}
