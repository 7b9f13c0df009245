//! The edits of the devices a container asked for: checked against the
//! host (a device node's numbers and mode read from it, a bind mount's
//! source and a hook's program there), then applied to the container's OCI
//! spec. Checking comes first and whole, so a container is made with every
//! edit its devices ask for or not at all.
//!
//! The rules are the reference library's: environment replaced by key,
//! device nodes and mounts replacing any at the same container path, hooks
//! added at their point, groups added once. Each device node is also
//! allowed in the device cgroup: in the spec's rules where the runtime
//! keeps the cgroup (runc), and for the unit's `DeviceAllow=` (`Applied`).

use crate::error::CdiError;
use crate::spec::{ContainerEdits, NetDevice};
use podscope_oci::spec::{
    set_env, Hook, Hooks, LinuxDevice, LinuxDeviceCgroup, LinuxIntelRdt, Mount, Process, Spec,
};
use std::io;

/// What the host says of a path (followed through symlinks, as the
/// runtime will).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: FileKind,
    pub major: i64,
    pub minor: i64,
    /// Permission bits (the low 12).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Char,
    Block,
    Fifo,
    Regular,
    Directory,
    Other,
}

/// The host, as the edits need it: one `stat`. Behind a trait so the
/// rules are tested without device nodes.
pub trait Host {
    fn stat(&self, path: &str) -> io::Result<Stat>;
}

/// The real host, its paths looked up beneath `root`: `/proc/1/root` for
/// podscoped, whose own mount namespace has a private /tmp and hides
/// /home, so what it checks is what the runtime, started by systemd in
/// PID 1's namespace, will find.
pub struct RealHost {
    pub root: std::path::PathBuf,
}

impl RealHost {
    /// `path` (absolute) beneath the root.
    pub fn path(&self, path: &str) -> std::path::PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

impl Host for RealHost {
    fn stat(&self, path: &str) -> io::Result<Stat> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let m = std::fs::metadata(self.path(path))?;
        let t = m.file_type();
        let kind = if t.is_char_device() {
            FileKind::Char
        } else if t.is_block_device() {
            FileKind::Block
        } else if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_file() {
            FileKind::Regular
        } else if t.is_dir() {
            FileKind::Directory
        } else {
            FileKind::Other
        };
        let rdev = m.rdev();
        Ok(Stat {
            kind,
            major: i64::from(libc::major(rdev)),
            minor: i64::from(libc::minor(rdev)),
            mode: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
        })
    }
}

/// A device node as the OCI spec takes it, the host's part read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub path: String,
    /// `c`, `b`, `u` or `p`.
    pub type_: String,
    pub major: i64,
    pub minor: i64,
    pub file_mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub permissions: String,
}

/// Every edit of the devices asked for, checked, in the order to apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edits {
    pub env: Vec<String>,
    pub nodes: Vec<Node>,
    pub mounts: Vec<Mount>,
    /// (hook name, hook).
    pub hooks: Vec<(String, Hook)>,
    pub additional_gids: Vec<u32>,
    pub intel_rdt: Option<LinuxIntelRdt>,
}

/// What applying left for the daemon: the device nodes' rules for the
/// unit's `DeviceAllow=` (`/dev/char/M:m` or `/dev/block/M:m`, access).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub device_allow: Vec<(String, String)>,
}

impl Edits {
    /// Add `edits` (of `device`, or of its spec: `device` names the device
    /// that brought them) after checking them against `host`.
    pub fn add(
        &mut self,
        device: &str,
        edits: &ContainerEdits,
        host: &dyn Host,
    ) -> Result<(), CdiError> {
        if let Some(NetDevice {
            host_interface_name,
            name,
        }) = edits.net_devices.first()
        {
            return Err(CdiError::Unsupported {
                device: device.to_owned(),
                what: format!(
                    "netDevices (host interface {host_interface_name} as {name}): the runtimes podscope drives (runc 1.1, crun 1.8) cannot move a network device into a container"
                ),
            });
        }
        let host_err = |path: &str, why: String| CdiError::HostPath {
            device: device.to_owned(),
            path: path.to_owned(),
            why,
        };
        for n in &edits.device_nodes {
            let host_path = n.host_path.as_deref().unwrap_or(&n.path);
            let known = n.type_.as_deref().is_some_and(|t| t == "p")
                || (n.type_.is_some() && n.major.is_some() && n.minor.is_some());
            let stat = if known && n.file_mode.is_some() {
                None
            } else {
                match host.stat(host_path) {
                    Ok(s) => Some(s),
                    // The spec gave all the numbers: the mode is the
                    // runtime's default then.
                    Err(_) if known => None,
                    Err(e) => return Err(host_err(host_path, e.to_string())),
                }
            };
            let (type_, major, minor) = match (stat, n.type_.as_deref()) {
                (Some(s), t) => {
                    let host_type = match s.kind {
                        FileKind::Char => "c",
                        FileKind::Block => "b",
                        FileKind::Fifo => "p",
                        _ => {
                            return Err(host_err(
                                host_path,
                                "is not a device node (character, block or fifo)".into(),
                            ))
                        }
                    };
                    // `u` is an unbuffered character device: a char node.
                    let t = t.unwrap_or(host_type);
                    if t != host_type && !(t == "u" && host_type == "c") {
                        return Err(host_err(
                            host_path,
                            format!("is of type {host_type}, the spec says {t}"),
                        ));
                    }
                    (
                        t.to_owned(),
                        n.major.unwrap_or(s.major),
                        n.minor.unwrap_or(s.minor),
                    )
                }
                (None, Some(t)) => (t.to_owned(), n.major.unwrap_or(0), n.minor.unwrap_or(0)),
                (None, None) => unreachable!("a node with no type is read from the host"),
            };
            self.nodes.retain(|x| x.path != n.path);
            self.nodes.push(Node {
                path: n.path.clone(),
                type_,
                major,
                minor,
                file_mode: n.file_mode.or(stat.map(|s| s.mode & 0o777)),
                uid: n.uid,
                gid: n.gid,
                permissions: n.permissions.clone().unwrap_or_else(|| "rwm".into()),
            });
        }
        for m in &edits.mounts {
            if m.is_bind() {
                host.stat(&m.host_path)
                    .map_err(|e| host_err(&m.host_path, e.to_string()))?;
            }
            self.mounts.retain(|x| x.destination != m.container_path);
            let mut options = m.options.clone();
            let type_ = match m.type_.as_deref() {
                None | Some("") if m.is_bind() => {
                    // A bind either way; say so, so both runtimes read it
                    // alike (crun binds a type-less mount only with the
                    // option).
                    if !options.iter().any(|o| o == "bind" || o == "rbind") {
                        options.push("rbind".into());
                    }
                    Some("bind".to_owned())
                }
                t => t.map(str::to_owned),
            };
            self.mounts.push(Mount {
                destination: m.container_path.clone(),
                type_,
                source: Some(m.host_path.clone()),
                options,
            });
        }
        for h in &edits.hooks {
            match host.stat(&h.path) {
                Ok(s) if s.kind == FileKind::Regular && s.mode & 0o111 != 0 => {}
                Ok(_) => {
                    return Err(CdiError::Hook {
                        device: device.to_owned(),
                        path: h.path.clone(),
                        why: "is not an executable file".into(),
                    })
                }
                Err(e) => {
                    return Err(CdiError::Hook {
                        device: device.to_owned(),
                        path: h.path.clone(),
                        why: e.to_string(),
                    })
                }
            }
            self.hooks.push((
                h.hook_name.clone(),
                Hook {
                    path: h.path.clone(),
                    args: h.args.clone(),
                    env: h.env.clone(),
                    timeout: h.timeout,
                },
            ));
        }
        for e in &edits.env {
            set_env(&mut self.env, e);
        }
        for g in &edits.additional_gids {
            if !self.additional_gids.contains(g) {
                self.additional_gids.push(*g);
            }
        }
        if let Some(r) = &edits.intel_rdt {
            self.intel_rdt = Some(LinuxIntelRdt {
                clos_id: r.clos_id.clone(),
                l3_cache_schema: r.l3_cache_schema.clone(),
                mem_bw_schema: r.mem_bw_schema.clone(),
                schemata: r.schemata.clone(),
                enable_monitoring: r.enable_monitoring,
            });
        }
        Ok(())
    }

    /// Apply to `spec`. `idmap_binds`: the container is in a user
    /// namespace of its own, where the node's files are bound idmapped.
    pub fn apply(&self, spec: &mut Spec, idmap_binds: bool) -> Applied {
        let mut applied = Applied::default();
        let process = spec.process.get_or_insert_with(Process::default);
        for e in &self.env {
            set_env(&mut process.env, e);
        }
        for g in &self.additional_gids {
            if !process.user.additional_gids.contains(g) {
                process.user.additional_gids.push(*g);
            }
        }
        let linux = spec.linux.get_or_insert_with(Default::default);
        for n in &self.nodes {
            linux.devices.retain(|d| d.path != n.path);
            linux.devices.push(LinuxDevice {
                path: n.path.clone(),
                type_: n.type_.clone(),
                major: n.major,
                minor: n.minor,
                file_mode: n.file_mode,
                uid: n.uid,
                gid: n.gid,
            });
            let class = match n.type_.as_str() {
                "b" => "block",
                "c" | "u" => "char",
                // A fifo is no device to the cgroup.
                _ => continue,
            };
            // The runtime makes the node with mknod inside the container's
            // cgroup, which therefore must allow `m` on it even when the
            // spec grants only `r` (crun fails, runc falls back to binding
            // the container path from the host). `m` on this one device
            // gives the container nothing it does not hold already: the
            // node is there.
            let mut access = n.permissions.clone();
            if !access.contains('m') {
                access.push('m');
            }
            if let Some(r) = linux.resources.as_mut() {
                r.devices.push(LinuxDeviceCgroup {
                    allow: true,
                    type_: Some(if class == "block" { "b" } else { "c" }.into()),
                    major: Some(n.major),
                    minor: Some(n.minor),
                    access: Some(access.clone()),
                });
            }
            applied
                .device_allow
                .push((format!("/dev/{class}/{}:{}", n.major, n.minor), access));
        }
        if let Some(r) = &self.intel_rdt {
            linux.intel_rdt = Some(r.clone());
        }
        let mut mounts = self.mounts.clone();
        if idmap_binds {
            for m in &mut mounts {
                if m.type_.as_deref() == Some("bind") {
                    m.options.push("idmap".into());
                }
            }
        }
        // Parents before what is mounted in them.
        mounts.sort_by_key(Mount::depth);
        spec.mounts
            .retain(|m| !mounts.iter().any(|c| c.destination == m.destination));
        spec.mounts.extend(mounts);
        if !self.hooks.is_empty() {
            let hooks = spec.hooks.get_or_insert_with(Hooks::default);
            for (name, h) in &self.hooks {
                let list = match name.as_str() {
                    "prestart" => &mut hooks.prestart,
                    "createRuntime" => &mut hooks.create_runtime,
                    "createContainer" => &mut hooks.create_container,
                    "startContainer" => &mut hooks.start_container,
                    "poststart" => &mut hooks.poststart,
                    "poststop" => &mut hooks.poststop,
                    _ => unreachable!("hook names are checked as the spec is read"),
                };
                list.push(h.clone());
            }
        }
        applied
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::{DeviceNode, Hook as CdiHook, Mount as CdiMount};
    use podscope_oci::spec::LinuxResources;
    use std::collections::BTreeMap;

    /// A host of named paths.
    #[derive(Default)]
    pub(crate) struct FakeHost(pub BTreeMap<String, Stat>);

    impl FakeHost {
        pub(crate) fn standard() -> FakeHost {
            let mut h = FakeHost::default();
            h.0.insert("/dev/nvidia0".into(), chr(195, 0));
            h.0.insert("/dev/nvidiactl".into(), chr(195, 255));
            h.0.insert(
                "/dev/sda".into(),
                Stat {
                    kind: FileKind::Block,
                    ..chr(8, 0)
                },
            );
            h.0.insert("/usr/lib/libcuda.so".into(), file(0o644));
            h.0.insert("/usr/bin/hook".into(), file(0o755));
            h.0.insert("/usr/bin/not-a-program".into(), file(0o644));
            h
        }
    }

    pub(crate) fn chr(major: i64, minor: i64) -> Stat {
        Stat {
            kind: FileKind::Char,
            major,
            minor,
            mode: 0o666,
            uid: 0,
            gid: 0,
        }
    }

    fn file(mode: u32) -> Stat {
        Stat {
            kind: FileKind::Regular,
            major: 0,
            minor: 0,
            mode,
            uid: 0,
            gid: 0,
        }
    }

    impl Host for FakeHost {
        fn stat(&self, path: &str) -> io::Result<Stat> {
            self.0
                .get(path)
                .copied()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
        }
    }

    fn node(path: &str) -> DeviceNode {
        DeviceNode {
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn device_nodes_take_the_hosts_numbers_unless_given() {
        let host = FakeHost::standard();
        let mut e = Edits::default();
        let edits = ContainerEdits {
            device_nodes: vec![
                node("/dev/nvidia0"),
                DeviceNode {
                    path: "/dev/disk0".into(),
                    host_path: Some("/dev/sda".into()),
                    permissions: Some("r".into()),
                    file_mode: Some(0o600),
                    uid: Some(1000),
                    gid: Some(44),
                    ..Default::default()
                },
                // All numbers given: the host need not have it.
                DeviceNode {
                    path: "/dev/virtual".into(),
                    type_: Some("c".into()),
                    major: Some(10),
                    minor: Some(200),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        e.add("nvidia.com/gpu=0", &edits, &host).unwrap();
        assert_eq!(e.nodes[0].type_, "c");
        assert_eq!((e.nodes[0].major, e.nodes[0].minor), (195, 0));
        assert_eq!(e.nodes[0].permissions, "rwm");
        assert_eq!(e.nodes[0].file_mode, Some(0o666));
        let d = &e.nodes[1];
        assert_eq!((d.type_.as_str(), d.major, d.minor), ("b", 8, 0));
        assert_eq!(
            (d.file_mode, d.uid, d.gid),
            (Some(0o600), Some(1000), Some(44))
        );
        assert_eq!((e.nodes[2].major, e.nodes[2].minor), (10, 200));

        let mut spec = Spec::new();
        spec.linux = Some(podscope_oci::spec::Linux {
            resources: Some(LinuxResources::default()),
            ..Default::default()
        });
        let applied = e.apply(&mut spec, false);
        assert_eq!(
            applied.device_allow,
            [
                ("/dev/char/195:0".to_owned(), "rwm".to_owned()),
                ("/dev/block/8:0".to_owned(), "rm".to_owned()),
                ("/dev/char/10:200".to_owned(), "rwm".to_owned()),
            ]
        );
        let l = spec.linux.unwrap();
        assert_eq!(l.devices.len(), 3);
        assert_eq!(l.devices[1].path, "/dev/disk0");
        let rules = &l.resources.unwrap().devices;
        assert_eq!(rules[1].type_.as_deref(), Some("b"));
        assert_eq!(rules[1].access.as_deref(), Some("rm"), "mknod allowed");
    }

    #[test]
    fn a_missing_or_wrong_host_path_is_named() {
        let host = FakeHost::standard();
        for (edits, path, why) in [
            (
                ContainerEdits {
                    device_nodes: vec![node("/dev/nvidia9")],
                    ..Default::default()
                },
                "/dev/nvidia9",
                "No such file",
            ),
            (
                ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        path: "/dev/x".into(),
                        host_path: Some("/usr/lib/libcuda.so".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                "/usr/lib/libcuda.so",
                "not a device node",
            ),
            (
                ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        path: "/dev/nvidia0".into(),
                        type_: Some("b".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                "/dev/nvidia0",
                "is of type c, the spec says b",
            ),
            (
                ContainerEdits {
                    mounts: vec![CdiMount {
                        host_path: "/usr/lib/libgone.so".into(),
                        container_path: "/usr/lib/libgone.so".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                "/usr/lib/libgone.so",
                "No such file",
            ),
        ] {
            let err = Edits::default()
                .add("v.com/c=d", &edits, &host)
                .unwrap_err();
            let CdiError::HostPath {
                device,
                path: p,
                why: w,
            } = &err
            else {
                panic!("{err}")
            };
            assert_eq!((device.as_str(), p.as_str()), ("v.com/c=d", path));
            assert!(w.contains(why), "{err}");
        }
    }

    #[test]
    fn a_hook_must_be_an_executable_file() {
        let host = FakeHost::standard();
        let hook = |path: &str| ContainerEdits {
            hooks: vec![CdiHook {
                hook_name: "createContainer".into(),
                path: path.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        for (path, why) in [
            ("/usr/bin/not-a-program", "not an executable file"),
            ("/usr/bin/gone", "No such file"),
            ("/dev/nvidia0", "not an executable file"),
        ] {
            let err = Edits::default()
                .add("v.com/c=d", &hook(path), &host)
                .unwrap_err();
            assert!(
                matches!(&err, CdiError::Hook { path: p, .. } if p == path),
                "{err}"
            );
            assert!(err.to_string().contains(why), "{err}");
        }
        let mut e = Edits::default();
        e.add("v.com/c=d", &hook("/usr/bin/hook"), &host).unwrap();
        let mut spec = Spec::new();
        e.apply(&mut spec, false);
        assert_eq!(
            spec.hooks.unwrap().create_container[0].path,
            "/usr/bin/hook"
        );
    }

    #[test]
    fn env_mounts_and_groups_merge_as_the_reference_does() {
        let host = FakeHost::standard();
        let mut e = Edits::default();
        let edits = ContainerEdits {
            env: vec!["A=cdi".into(), "NEW=1".into()],
            mounts: vec![
                CdiMount {
                    host_path: "/usr/lib/libcuda.so".into(),
                    container_path: "/usr/lib/x/libcuda.so".into(),
                    options: vec!["ro".into(), "nosuid".into(), "nodev".into(), "bind".into()],
                    ..Default::default()
                },
                CdiMount {
                    host_path: "tmpfs".into(),
                    container_path: "/usr".into(),
                    type_: Some("tmpfs".into()),
                    ..Default::default()
                },
            ],
            additional_gids: vec![44, 44, 45],
            ..Default::default()
        };
        e.add("v.com/c=d", &edits, &host).unwrap();
        let mut spec = Spec::new();
        let p = spec.process.get_or_insert_with(Process::default);
        p.env = vec!["A=image".into(), "B=2".into()];
        p.user.additional_gids = vec![45];
        spec.mounts.push(Mount {
            destination: "/usr/lib/x/libcuda.so".into(),
            ..Default::default()
        });
        e.apply(&mut spec, true);
        let p = spec.process.unwrap();
        assert_eq!(p.env, ["A=cdi", "B=2", "NEW=1"]);
        assert_eq!(p.user.additional_gids, [45, 44]);
        // The parent first; the bind says it is one, idmapped in a user
        // namespace; the mount it replaced is gone.
        assert_eq!(spec.mounts.len(), 2);
        assert_eq!(spec.mounts[0].destination, "/usr");
        assert_eq!(spec.mounts[0].options, Vec::<String>::new());
        assert_eq!(spec.mounts[1].type_.as_deref(), Some("bind"));
        assert_eq!(
            spec.mounts[1].options,
            ["ro", "nosuid", "nodev", "bind", "idmap"]
        );
    }

    #[test]
    fn net_devices_are_refused_by_name() {
        let edits = ContainerEdits {
            net_devices: vec![NetDevice {
                host_interface_name: "eth1".into(),
                name: "net0".into(),
            }],
            ..Default::default()
        };
        let err = Edits::default()
            .add("v.com/c=d", &edits, &FakeHost::default())
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("netDevices (host interface eth1 as net0)"),
            "{err}"
        );
    }
}
