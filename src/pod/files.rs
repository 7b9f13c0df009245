//! The files a pod's containers will bind-mount: `resolv.conf` and
//! `hostname`, under `<run_dir>/sandboxes/<id>/`.

use crate::domain::{NetworkMode, Sandbox, SandboxId};
use crate::error::{IoResultExt, Result};
use std::path::{Path, PathBuf};

const HOST_RESOLV_CONF: &str = "/etc/resolv.conf";

pub fn dir_of(run_dir: &Path, id: &SandboxId) -> PathBuf {
    run_dir.join("sandboxes").join(id.as_str())
}

/// The hostname the pod's containers see: the one asked for; for a
/// host-network pod the host's (it shares the host's UTS namespace); else
/// the pod's name made a DNS label, as kubelet does (the name is opaque:
/// lowercased, other characters become '-'; the id's first 12 characters
/// when nothing is left).
pub fn pod_hostname(sb: &Sandbox) -> String {
    let c = &sb.config;
    if c.network == NetworkMode::Host {
        return nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default();
    }
    if !c.hostname.is_empty() {
        return c.hostname.clone();
    }
    let label: String = c
        .name
        .chars()
        .map(|ch| match ch.to_ascii_lowercase() {
            l @ ('a'..='z' | '0'..='9' | '-' | '.') => l,
            _ => '-',
        })
        .take(63)
        .collect();
    let label = label.trim_matches(['-', '.']);
    if label.is_empty() {
        sb.id.as_str()[..12].to_owned()
    } else {
        label.to_owned()
    }
}

/// Write both files; returns (resolv.conf path, hostname path).
pub fn write(run_dir: &Path, sb: &Sandbox) -> Result<(String, String)> {
    let dir = dir_of(run_dir, &sb.id);
    let ctx = |what: &Path| format!("write {}", what.display());
    std::fs::create_dir_all(&dir).io_context(ctx(&dir))?;
    let resolv = dir.join("resolv.conf");
    let text = if sb.config.dns.is_empty() {
        // No DNS config: the host's, as the CRI asks.
        match std::fs::read_to_string(HOST_RESOLV_CONF) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(crate::Error::io(format!("read {HOST_RESOLV_CONF}"), e)),
        }
    } else {
        sb.config.dns.render()
    };
    std::fs::write(&resolv, text).io_context(ctx(&resolv))?;
    let hostname = dir.join("hostname");
    std::fs::write(&hostname, format!("{}\n", pod_hostname(sb))).io_context(ctx(&hostname))?;
    Ok((resolv.display().to_string(), hostname.display().to_string()))
}

/// Remove the pod's files; gone already is fine.
pub fn remove(run_dir: &Path, id: &SandboxId) -> Result<()> {
    let dir = dir_of(run_dir, id);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(crate::Error::io(format!("remove {}", dir.display()), e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{DnsConfig, SandboxConfig};

    #[test]
    fn files_follow_the_config() {
        let run = std::env::temp_dir().join(format!("podscope-files-{}", std::process::id()));
        let mut sb = Sandbox::new(
            SandboxId::random(),
            SandboxConfig {
                name: "web-0".into(),
                dns: DnsConfig {
                    servers: vec!["10.96.0.10".into()],
                    ..Default::default()
                },
                ..Default::default()
            },
            String::new(),
            0,
        );
        let (r, h) = write(&run, &sb).unwrap();
        assert!(std::fs::read_to_string(&r)
            .unwrap()
            .contains("nameserver 10.96.0.10\n"));
        assert_eq!(std::fs::read_to_string(&h).unwrap(), "web-0\n");
        sb.config.hostname = "custom".into();
        assert_eq!(pod_hostname(&sb), "custom");
        sb.config.name = format!("{}-", "a".repeat(62));
        sb.config.hostname.clear();
        assert_eq!(pod_hostname(&sb), "a".repeat(62));
        sb.config.name = "PodSandbox for Test_1.".into();
        assert_eq!(pod_hostname(&sb), "podsandbox-for-test-1");
        sb.config.name = "ü".into();
        assert_eq!(pod_hostname(&sb), &sb.id.as_str()[..12]);
        remove(&run, &sb.id).unwrap();
        remove(&run, &sb.id).unwrap();
        assert!(!Path::new(&r).exists());
        let _ = std::fs::remove_dir_all(&run);
    }
}
