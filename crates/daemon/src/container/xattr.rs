//! Reading a short extended attribute of a directory: overlayfs' opaque
//! mark (`rootfs`), systemd-oomd's kill count on a cgroup (`oom`).

use std::ffi::CStr;
use std::path::Path;

/// The value of `name` on `path` (not following a last symlink), if it
/// has one of at most 32 bytes.
pub fn short(path: &Path, name: &CStr) -> Option<Vec<u8>> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let mut buf = [0u8; 32];
    // SAFETY: lgetxattr into our buffer of its length; the result is checked.
    let n = unsafe {
        libc::lgetxattr(
            c.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    usize::try_from(n).ok().map(|n| buf[..n].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_value_is_read_a_missing_or_long_one_is_none() {
        let t = podscope_test_support::TempDir::new();
        assert_eq!(short(&t.0, c"user.podscope-test"), None);
        xattr::set(&t.0, "user.podscope-test", b"y").unwrap();
        assert_eq!(
            short(&t.0, c"user.podscope-test").as_deref(),
            Some(&b"y"[..])
        );
        xattr::set(&t.0, "user.podscope-test", &[b'x'; 33]).unwrap();
        assert_eq!(short(&t.0, c"user.podscope-test"), None);
    }
}
