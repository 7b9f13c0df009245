//! Map a pod's `cgroup_parent` to the systemd slice its scope goes in.
//!
//! kubelet sends either a systemd slice name (systemd cgroup driver, e.g.
//! `kubepods-besteffort-pod<uid>.slice`, sometimes as a full path of slices)
//! or a cgroupfs path (cgroupfs driver, e.g. `/kubepods/besteffort/pod<uid>`).
//! The cgroupfs form maps the way kubelet's own systemd driver names it:
//! each component with `-` replaced by `_`, joined by `-`, plus `.slice`.

use crate::error::{Error, Result};

const FIELD: &str = "cgroup_parent";
/// systemd's limit on unit names.
const UNIT_NAME_MAX: usize = 255;
/// The longest `cgroup_parent` taken (a path; kubelet's are far shorter).
pub const CGROUP_PARENT_MAX: usize = 4096;

/// The slice for a pod; `default_slice` when no parent is given.
pub fn slice_for_cgroup_parent(parent: &str, default_slice: &str) -> Result<String> {
    if parent.is_empty() {
        return Ok(default_slice.to_owned());
    }
    if parent.len() > CGROUP_PARENT_MAX {
        return Err(Error::invalid(
            FIELD,
            format!("{} bytes, more than {CGROUP_PARENT_MAX}", parent.len()),
        ));
    }
    if parent.contains('\0') || parent.chars().any(char::is_control) {
        return Err(Error::invalid(FIELD, "contains control characters"));
    }
    let last = parent.rsplit('/').find(|c| !c.is_empty()).unwrap_or("");
    if last.ends_with(".slice") {
        // A slice name, or a path of slices whose last one is the parent:
        // every component must then be a slice name too.
        for c in parent.split('/').filter(|c| !c.is_empty()) {
            validate_slice_name(c)?;
        }
        return Ok(last.to_owned());
    }
    if !parent.starts_with('/') {
        return Err(Error::invalid(
            FIELD,
            format!("{parent:?} is neither a systemd slice name (*.slice) nor an absolute cgroupfs path"),
        ));
    }
    let components: Vec<&str> = parent.split('/').filter(|c| !c.is_empty()).collect();
    if components.is_empty() {
        return Err(Error::invalid(
            FIELD,
            "the root cgroup cannot be a pod's parent",
        ));
    }
    let mut name = String::new();
    for c in components {
        if c == "." || c == ".." {
            return Err(Error::invalid(FIELD, format!("{parent:?} contains {c:?}")));
        }
        if !c
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
        {
            return Err(Error::invalid(
                FIELD,
                format!("component {c:?} of {parent:?} has characters a slice name cannot hold"),
            ));
        }
        if !name.is_empty() {
            name.push('-');
        }
        name.push_str(&c.replace('-', "_"));
    }
    name.push_str(".slice");
    validate_slice_name(&name)?;
    Ok(name)
}

/// A pod's own slice inside `default_slice` (`podscope.slice` →
/// `podscope-<id>.slice`, its child by systemd's naming): the pod's scope
/// and its containers' units share it.
pub fn pod_slice(default_slice: &str, id: &str) -> Result<String> {
    let stem = default_slice
        .strip_suffix(".slice")
        .unwrap_or(default_slice);
    let name = format!("{stem}-{id}.slice");
    validate_slice_name(&name)?;
    Ok(name)
}

/// Whether `slice` is the pod's own (one podscope made for a pod that
/// named no cgroup parent), not kubelet's.
pub fn is_own_pod_slice(default_slice: &str, id: &str, slice: &str) -> bool {
    pod_slice(default_slice, id).is_ok_and(|own| own == slice)
}

/// The units that may be pods' own slices in `default_slice`, as a
/// ListUnitsByPatterns pattern (`podscope-*.slice`).
pub fn pod_slices_pattern(default_slice: &str) -> String {
    let stem = default_slice
        .strip_suffix(".slice")
        .unwrap_or(default_slice);
    format!("{stem}-*.slice")
}

/// The id part of `pod_slice`'s name, `unit` back into what was given; not
/// checked to be an id.
pub fn id_of_pod_slice<'a>(default_slice: &str, unit: &'a str) -> Option<&'a str> {
    let stem = default_slice
        .strip_suffix(".slice")
        .unwrap_or(default_slice);
    unit.strip_prefix(stem)?
        .strip_prefix('-')?
        .strip_suffix(".slice")
}

/// A valid, non-root systemd slice name: `[A-Za-z0-9:_.\-]+.slice` with
/// dashes only as hierarchy separators.
/// The cgroup path systemd gives a slice: each `-` is a level
/// (`a-b.slice` is `/a.slice/a-b.slice`).
pub fn slice_cgroup_path(slice: &str) -> String {
    let stem = slice.strip_suffix(".slice").unwrap_or(slice);
    if stem.is_empty() || stem == "-" {
        return String::new();
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for part in stem.split('-') {
        if !prefix.is_empty() {
            prefix.push('-');
        }
        prefix.push_str(part);
        path.push('/');
        path.push_str(&prefix);
        path.push_str(".slice");
    }
    path
}

pub fn validate_slice_name(name: &str) -> Result<()> {
    let Some(stem) = name.strip_suffix(".slice") else {
        return Err(Error::invalid(
            FIELD,
            format!("{name:?} does not end in .slice"),
        ));
    };
    if name.len() > UNIT_NAME_MAX {
        return Err(Error::invalid(
            FIELD,
            format!(
                "slice name is {} characters, more than {UNIT_NAME_MAX}",
                name.len()
            ),
        ));
    }
    if stem.is_empty() || stem == "-" {
        return Err(Error::invalid(
            FIELD,
            "the root slice cannot be a pod's parent",
        ));
    }
    if !stem
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'\\'))
    {
        return Err(Error::invalid(
            FIELD,
            format!("{name:?} has characters not allowed in a unit name"),
        ));
    }
    if stem.starts_with('-') || stem.ends_with('-') || stem.contains("--") {
        return Err(Error::invalid(
            FIELD,
            format!("{name:?} has a misplaced '-' (dashes separate slice levels)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    const D: &str = "podscope.slice";

    #[test]
    fn empty_is_default() {
        assert_eq!(slice_for_cgroup_parent("", D).unwrap(), D);
    }

    #[test]
    fn a_pod_without_a_parent_gets_a_slice_of_its_own_in_the_default() {
        let id = "ab".repeat(32);
        let s = pod_slice(D, &id).unwrap();
        assert_eq!(s, format!("podscope-{id}.slice"));
        assert_eq!(
            slice_cgroup_path(&s),
            format!("/podscope.slice/podscope-{id}.slice")
        );
        let deep = pod_slice("a-b.slice", &id).unwrap();
        assert_eq!(
            slice_cgroup_path(&deep),
            format!("/a.slice/a-b.slice/a-b-{id}.slice")
        );
        assert!(pod_slice(&format!("{}.slice", "x".repeat(200)), &id).is_err());
        // And back, as recovery finds them.
        assert_eq!(pod_slices_pattern(D), "podscope-*.slice");
        assert_eq!(id_of_pod_slice(D, &s), Some(id.as_str()));
        assert!(is_own_pod_slice(D, &id, &s));
        assert!(!is_own_pod_slice(D, &id, "kubepods-besteffort-podx.slice"));
        assert_eq!(id_of_pod_slice("a-b.slice", &deep), Some(id.as_str()));
        assert_eq!(id_of_pod_slice(D, D), None);
        assert_eq!(id_of_pod_slice(D, &format!("other-{id}.slice")), None);
    }

    #[test]
    fn systemd_names_pass_through() {
        let s = "kubepods-besteffort-pod0c8a3f3e_1b2c_4d5e_8f90_a1b2c3d4e5f6.slice";
        assert_eq!(slice_for_cgroup_parent(s, D).unwrap(), s);
        let path = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podabc.slice";
        assert_eq!(
            slice_for_cgroup_parent(path, D).unwrap(),
            "kubepods-burstable-podabc.slice"
        );
    }

    #[test]
    fn cgroupfs_paths_map_like_kubelet() {
        assert_eq!(
            slice_for_cgroup_parent("/kubepods/besteffort/pod0c8a3f3e-1b2c-4d5e", D).unwrap(),
            "kubepods-besteffort-pod0c8a3f3e_1b2c_4d5e.slice"
        );
        assert_eq!(
            slice_for_cgroup_parent("/kubepods/podabc/", D).unwrap(),
            "kubepods-podabc.slice"
        );
    }

    #[test]
    fn bad_parents_are_named_errors() {
        for bad in [
            "/",
            "kubepods",
            "/kubepods/../etc",
            "/kube pods",
            "-.slice",
            "a--b.slice",
            "-a.slice",
            "a-.slice",
            "bad$name.slice",
            "/x\n",
            // Slice form: every component is a slice name.
            "../kubepods.slice",
            "/a b/kubepods.slice",
            "/kubepods/kubepods-besteffort.slice",
        ] {
            let e = slice_for_cgroup_parent(bad, D).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
            assert!(e.to_string().starts_with("cgroup_parent: "), "{e}");
        }
        let long = format!("/{}", "a".repeat(300));
        assert!(slice_for_cgroup_parent(&long, D).is_err());
        let huge = format!("{}/kubepods.slice", "/x.slice".repeat(1 << 19));
        let e = slice_for_cgroup_parent(&huge, D).unwrap_err();
        assert!(e.to_string().contains("more than 4096"), "{e}");
        assert_eq!(
            slice_for_cgroup_parent("/kubepods.slice/kubepods-besteffort.slice", D).unwrap(),
            "kubepods-besteffort.slice"
        );
    }

    #[test]
    fn slices_nest_by_dashes() {
        assert_eq!(slice_cgroup_path("podscope.slice"), "/podscope.slice");
        assert_eq!(
            slice_cgroup_path("kubepods-besteffort-pod1.slice"),
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice"
        );
        assert_eq!(slice_cgroup_path("-.slice"), "");
    }
}
