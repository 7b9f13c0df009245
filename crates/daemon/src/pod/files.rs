//! The files a pod's containers bind-mount, under
//! `<run_dir>/sandboxes/<id>/`: `resolv.conf`, `hostname` and `hosts`
//! (unless kubelet brings its own /etc/hosts), and `shm/`, where the pod's
//! /dev/shm is mounted once it has a container. The init's `init.sock`
//! lives there too.

use podscope_api::domain::{NetworkMode, Sandbox, SandboxId};
use podscope_api::error::{IoResultExt, Result};
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

/// The pod's /etc/hosts.
pub fn hosts_path(run_dir: &Path, id: &SandboxId) -> PathBuf {
    dir_of(run_dir, id).join("hosts")
}

/// Where the pod's /dev/shm (a tmpfs) is mounted.
pub fn shm_path(run_dir: &Path, id: &SandboxId) -> PathBuf {
    dir_of(run_dir, id).join("shm")
}

/// The /etc/hosts a pod gets when kubelet gives none: localhost, and the
/// pod's own name on its first address; a host-network pod gets the
/// host's.
fn hosts_text(sb: &Sandbox) -> Result<String> {
    if sb.config.network == NetworkMode::Host {
        return match std::fs::read_to_string("/etc/hosts") {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(podscope_api::Error::io("read /etc/hosts", e)),
        };
    }
    let mut t = String::from(
        "# The pod's hosts file (podscope).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
    );
    if let Some(ip) = sb.network.ips.first() {
        t.push_str(&format!("{ip}\t{}\n", pod_hostname(sb)));
    }
    Ok(t)
}

/// Write the files; returns (resolv.conf path, hostname path).
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
            Err(e) => {
                return Err(podscope_api::Error::io(
                    format!("read {HOST_RESOLV_CONF}"),
                    e,
                ))
            }
        }
    } else {
        sb.config.dns.render()
    };
    std::fs::write(&resolv, text).io_context(ctx(&resolv))?;
    let hostname = dir.join("hostname");
    std::fs::write(&hostname, format!("{}\n", pod_hostname(sb))).io_context(ctx(&hostname))?;
    let hosts = hosts_path(run_dir, &sb.id);
    std::fs::write(&hosts, hosts_text(sb)?).io_context(ctx(&hosts))?;
    Ok((resolv.display().to_string(), hostname.display().to_string()))
}

/// Remove the pod's files; gone already is fine. A /dev/shm still mounted
/// fails it (nothing is deleted through a mount).
pub fn remove(run_dir: &Path, id: &SandboxId) -> Result<()> {
    let dir = dir_of(run_dir, id);
    match crate::state::files::remove_tree_on_one_fs(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(podscope_api::Error::io(
            format!("remove {}", dir.display()),
            e,
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_api::domain::{DnsConfig, SandboxConfig};

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
        let hosts = std::fs::read_to_string(hosts_path(&run, &sb.id)).unwrap();
        assert!(hosts.contains("127.0.0.1\tlocalhost\n"), "{hosts}");
        sb.network.ips = vec!["10.88.0.5".into()];
        write(&run, &sb).unwrap();
        let hosts = std::fs::read_to_string(hosts_path(&run, &sb.id)).unwrap();
        assert!(hosts.ends_with("10.88.0.5\tweb-0\n"), "{hosts}");
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
