//! The platform this node runs pods for, named as OCI image indexes name
//! it (`os`, `architecture`, `variant`): what the Sandbox API's Platform
//! call returns and what image pulls will match against.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: &'static str,
    pub architecture: &'static str,
    pub variant: &'static str,
}

/// Rust's architecture name as Go's GOARCH (the OCI image spec's names),
/// with the variant containerd normalises to: none for amd64 (v1 is the
/// baseline every amd64 image runs on), v8 for arm64, v7 for 32-bit arm
/// (Debian's armhf); none elsewhere.
pub fn for_arch(arch: &str) -> (&'static str, &'static str) {
    match arch {
        "x86_64" => ("amd64", ""),
        "x86" => ("386", ""),
        "aarch64" => ("arm64", "v8"),
        "arm" => ("arm", "v7"),
        "powerpc64" => ("ppc64le", ""),
        "s390x" => ("s390x", ""),
        "riscv64" => ("riscv64", ""),
        "loongarch64" => ("loong64", ""),
        "mips64" => ("mips64le", ""),
        _ => ("unknown", ""),
    }
}

pub fn host() -> Platform {
    let (architecture, variant) = for_arch(std::env::consts::ARCH);
    Platform {
        os: std::env::consts::OS,
        architecture,
        variant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_use_oci_names() {
        assert_eq!(for_arch("x86_64"), ("amd64", ""));
        assert_eq!(for_arch("aarch64"), ("arm64", "v8"));
        assert_eq!(for_arch("arm"), ("arm", "v7"));
        let h = host();
        assert_eq!(h.os, "linux");
        assert_ne!(h.architecture, "unknown");
    }
}
