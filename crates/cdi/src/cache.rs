//! The node's CDI spec files, as last read: the directories' `.json` and
//! `.yaml` files, parsed once and read again only when one changed (its
//! inode, size, mtime or ctime), so a CreateContainer after a DRA driver
//! wrote a spec sees it without a restart, and one with nothing changed
//! costs a stat per file.
//!
//! SPEC.md's rules: a later directory wins a device both define; two files
//! of one directory defining the same device leave it to neither. Beyond
//! them, podscope's: a file that does not parse, or that anyone but root
//! may write (its hooks and mounts act with root's rights), is in error
//! by name and its devices refused, while the other files keep working;
//! a file's size, the number of files and their total are bounded, so a
//! directory of junk costs the daemon a bounded amount of memory.

use crate::edits::{Edits, Host};
use crate::error::CdiError;
use crate::spec::{Format, Refused, SpecFile};
use podscope_api::domain::cdi::DeviceName;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How much of the directories is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest spec file read (nvidia-ctk's for eight GPUs and their
    /// libraries is about 60 KiB).
    pub file_max_bytes: u64,
    /// The most spec files read, all directories together (a DRA driver
    /// writes one per claim: a node's 110 pods are far below it).
    pub files_max: usize,
    /// The most bytes of spec files held, all together.
    pub total_max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            file_max_bytes: 4 << 20,
            files_max: 1024,
            total_max_bytes: 64 << 20,
        }
    }
}

/// What tells a file changed without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

struct Cached {
    dir: usize,
    stamp: Stamp,
    spec: Result<Arc<SpecFile>, Refused>,
}

/// Where a device is defined.
enum Entry {
    One {
        dir: usize,
        file: PathBuf,
        spec: Arc<SpecFile>,
        device: usize,
    },
    Conflict {
        dir: usize,
        files: Vec<PathBuf>,
    },
}

/// What a refresh found that was not so before, for the daemon's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A spec file read (new or changed): its kind and devices.
    Read {
        file: PathBuf,
        kind: String,
        devices: usize,
    },
    /// A spec file that cannot be used, and why.
    Refused { file: PathBuf, why: String },
    /// A spec file gone.
    Removed { file: PathBuf },
    /// A directory that could not be read whole, or an entry of one that
    /// is no file.
    Listing { path: PathBuf, why: String },
}

/// The CDI devices a container gets: their names, the spec files, and
/// every edit, checked against the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub devices: Vec<String>,
    pub spec_files: Vec<String>,
    pub edits: Edits,
}

/// What RuntimeStatus and `podscopectl info` show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub dirs: Vec<String>,
    pub kinds: Vec<String>,
    pub devices: Vec<String>,
    /// `path: why`, a spec file or a directory each.
    pub errors: Vec<String>,
}

pub struct SpecCache {
    dirs: Vec<PathBuf>,
    /// Where the directories are looked up (`RealHost::root`).
    root: PathBuf,
    limits: Limits,
    /// Who may own a spec file: root, and the daemon's own user.
    owners: [u32; 2],
    files: BTreeMap<PathBuf, Cached>,
    /// Directories not read whole, entries that are no files: path → why.
    dir_errors: BTreeMap<PathBuf, String>,
    index: HashMap<String, Entry>,
    /// kind → its devices' names.
    kinds: BTreeMap<String, BTreeSet<String>>,
}

impl SpecCache {
    /// The directories, lowest priority first (a later one wins a device
    /// both define), looked up beneath `root` ("/" for as they are).
    /// Nothing is read until `refresh`.
    pub fn new(dirs: Vec<PathBuf>, root: PathBuf, limits: Limits) -> SpecCache {
        SpecCache {
            dirs,
            root,
            limits,
            // SAFETY: geteuid has no preconditions and cannot fail.
            owners: [0, unsafe { libc::geteuid() }],
            files: BTreeMap::new(),
            dir_errors: BTreeMap::new(),
            index: HashMap::new(),
            kinds: BTreeMap::new(),
        }
    }

    /// Look at the directories again and read what changed.
    pub fn refresh(&mut self) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut seen: Vec<(usize, PathBuf, Format, std::fs::Metadata)> = Vec::new();
        let mut dir_errors = BTreeMap::new();
        for (i, dir) in self.dirs.iter().enumerate() {
            let real = self.beneath(dir);
            let rd = match std::fs::read_dir(&real) {
                Ok(rd) => rd,
                // A directory not made yet holds no spec: /var/run/cdi is
                // made by the first driver that writes one.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    dir_errors.insert(dir.clone(), e.to_string());
                    continue;
                }
            };
            let mut names: Vec<(String, Format)> = rd
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    Format::of(&name).map(|f| (name, f))
                })
                .collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            let room = self.limits.files_max.saturating_sub(seen.len());
            if names.len() > room {
                dir_errors.insert(
                    dir.clone(),
                    format!(
                        "holds {} spec files: podscope reads {} in all, so the rest (from {:?} on) are not read",
                        names.len(),
                        self.limits.files_max,
                        names[room].0
                    ),
                );
                names.truncate(room);
            }
            for (name, format) in names {
                let path = dir.join(&name);
                match std::fs::metadata(self.beneath(&path)) {
                    Ok(m) if m.is_file() => seen.push((i, path, format, m)),
                    Ok(_) => {
                        dir_errors.insert(path, "is not a regular file".into());
                    }
                    // Gone between the listing and the stat: not there.
                    Err(_) => {}
                }
            }
        }
        for (path, why) in &dir_errors {
            if self.dir_errors.get(path) != Some(why) {
                changes.push(Change::Listing {
                    path: path.clone(),
                    why: why.clone(),
                });
            }
        }
        self.dir_errors = dir_errors;

        let present: BTreeSet<&PathBuf> = seen.iter().map(|(_, p, _, _)| p).collect();
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for p in gone {
            self.files.remove(&p);
            changes.push(Change::Removed { file: p });
        }
        // What the unchanged files hold already counts against the total.
        let mut total: u64 = seen
            .iter()
            .filter(|(i, p, _, m)| {
                self.files
                    .get(p)
                    .is_some_and(|c| c.dir == *i && c.stamp == Stamp::of(m) && c.spec.is_ok())
            })
            .map(|(_, _, _, m)| m.size())
            .sum();
        for (i, path, format, meta) in seen {
            let stamp = Stamp::of(&meta);
            if self
                .files
                .get(&path)
                .is_some_and(|c| c.dir == i && c.stamp == stamp)
            {
                continue;
            }
            let spec = self.read(&path, format, &meta, total).map(Arc::new);
            match &spec {
                Ok(s) => {
                    total += meta.size();
                    changes.push(Change::Read {
                        file: path.clone(),
                        kind: s.kind.clone(),
                        devices: s.devices.len(),
                    });
                }
                Err(r) => changes.push(Change::Refused {
                    file: path.clone(),
                    why: r.why.clone(),
                }),
            }
            self.files.insert(
                path,
                Cached {
                    dir: i,
                    stamp,
                    spec,
                },
            );
        }
        if changes.iter().any(|c| !matches!(c, Change::Listing { .. })) {
            self.reindex();
        }
        changes
    }

    /// Read and parse one file, within the limits.
    fn read(
        &self,
        path: &Path,
        format: Format,
        meta: &std::fs::Metadata,
        total: u64,
    ) -> Result<SpecFile, Refused> {
        let refuse = |why: String| Refused { kind: None, why };
        if !self.owners.contains(&meta.uid()) || meta.mode() & 0o022 != 0 {
            return Err(refuse(format!(
                "may be written by others than root (owner {}, mode {:o}): refused, as its hooks and mounts act with root's rights",
                meta.uid(),
                meta.mode() & 0o7777
            )));
        }
        let max = self.limits.file_max_bytes;
        if meta.size() > max {
            return Err(refuse(format!(
                "is {} bytes, more than the {max} podscope reads",
                meta.size()
            )));
        }
        if total + meta.size() > self.limits.total_max_bytes {
            return Err(refuse(format!(
                "not read: the spec files pass the {} bytes podscope holds",
                self.limits.total_max_bytes
            )));
        }
        let mut bytes = Vec::with_capacity(meta.size() as usize);
        std::fs::File::open(self.beneath(path))
            .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
            .map_err(|e| refuse(e.to_string()))?;
        if bytes.len() as u64 > max {
            return Err(refuse(format!("grew past the {max} bytes podscope reads")));
        }
        SpecFile::parse(&bytes, format)
    }

    fn beneath(&self, path: &Path) -> PathBuf {
        self.root.join(path.strip_prefix("/").unwrap_or(path))
    }

    fn reindex(&mut self) {
        self.index.clear();
        self.kinds.clear();
        let mut files: Vec<(&PathBuf, &Cached)> = self.files.iter().collect();
        files.sort_by_key(|(p, c)| (c.dir, *p));
        for (path, c) in files {
            let Ok(spec) = &c.spec else { continue };
            for (n, d) in spec.devices.iter().enumerate() {
                let key = format!("{}={}", spec.kind, d.name);
                let entry = match self.index.remove(&key) {
                    Some(Entry::One { dir, file, .. }) if dir == c.dir => Entry::Conflict {
                        dir,
                        files: vec![file, path.clone()],
                    },
                    Some(Entry::Conflict { dir, mut files }) if dir == c.dir => {
                        files.push(path.clone());
                        Entry::Conflict { dir, files }
                    }
                    // Nothing yet, or an earlier directory's: this one wins.
                    _ => Entry::One {
                        dir: c.dir,
                        file: path.clone(),
                        spec: spec.clone(),
                        device: n,
                    },
                };
                self.index.insert(key, entry);
                self.kinds
                    .entry(spec.kind.clone())
                    .or_default()
                    .insert(d.name.clone());
            }
        }
    }

    /// The devices `names`, with every edit they make checked against
    /// `host`; spec-level edits once per spec file.
    pub fn resolve(&self, names: &[DeviceName], host: &dyn Host) -> Result<Resolved, CdiError> {
        let mut out = Resolved::default();
        for name in names {
            let key = name.to_string();
            match self.index.get(&key) {
                None => {
                    let kind = name.kind();
                    return Err(CdiError::Unknown {
                        device: key,
                        dirs: self
                            .dirs
                            .iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        known: self
                            .kinds
                            .get(&kind)
                            .map(|s| s.iter().cloned().collect())
                            .unwrap_or_default(),
                        in_error: self
                            .files
                            .iter()
                            .filter_map(|(p, c)| match &c.spec {
                                Err(r) if r.kind.as_ref().is_none_or(|k| *k == kind) => {
                                    Some((p.display().to_string(), r.why.clone()))
                                }
                                _ => None,
                            })
                            .collect(),
                    });
                }
                Some(Entry::Conflict { files, .. }) => {
                    return Err(CdiError::Conflict {
                        device: key,
                        files: files.iter().map(|f| f.display().to_string()).collect(),
                    })
                }
                Some(Entry::One {
                    file, spec, device, ..
                }) => {
                    let file = file.display().to_string();
                    if !out.spec_files.contains(&file) {
                        out.edits.add(&key, &spec.container_edits, host)?;
                        out.spec_files.push(file);
                    }
                    out.edits
                        .add(&key, &spec.devices[*device].container_edits, host)?;
                    out.devices.push(key);
                }
            }
        }
        Ok(out)
    }

    pub fn report(&self) -> Report {
        Report {
            dirs: self.dirs.iter().map(|d| d.display().to_string()).collect(),
            kinds: self.kinds.keys().cloned().collect(),
            devices: {
                let mut v: Vec<String> = self
                    .index
                    .iter()
                    .filter(|(_, e)| matches!(e, Entry::One { .. }))
                    .map(|(k, _)| k.clone())
                    .collect();
                v.sort();
                v
            },
            errors: self
                .dir_errors
                .iter()
                .map(|(d, why)| format!("{}: {why}", d.display()))
                .chain(self.files.iter().filter_map(|(p, c)| {
                    c.spec
                        .as_ref()
                        .err()
                        .map(|r| format!("{}: {}", p.display(), r.why))
                }))
                .chain(self.index.iter().filter_map(|(k, e)| match e {
                    Entry::Conflict { files, .. } => Some(format!(
                        "{k}: defined by {}",
                        files
                            .iter()
                            .map(|f| f.display().to_string())
                            .collect::<Vec<_>>()
                            .join(" and ")
                    )),
                    Entry::One { .. } => None,
                }))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edits::tests::FakeHost;
    use std::os::unix::fs::PermissionsExt;

    struct Dirs(PathBuf);

    impl Dirs {
        fn new(name: &str) -> Dirs {
            let d =
                std::env::temp_dir().join(format!("podscope-cdi-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(d.join("etc")).unwrap();
            std::fs::create_dir_all(d.join("run")).unwrap();
            Dirs(d)
        }
        fn cache(&self, limits: Limits) -> SpecCache {
            SpecCache::new(
                vec![self.0.join("etc"), self.0.join("run")],
                "/".into(),
                limits,
            )
        }
        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let p = self.0.join(rel);
            // Staged and renamed in, as drivers write: a new inode each time.
            let tmp = p.with_file_name(".staging");
            std::fs::write(&tmp, text).unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
            std::fs::rename(&tmp, &p).unwrap();
            p
        }
    }

    impl Drop for Dirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn spec(kind: &str, devices: &[&str], env: &str) -> String {
        let devs: Vec<String> = devices
            .iter()
            .map(|d| format!("{{\"name\":\"{d}\",\"containerEdits\":{{\"env\":[\"DEV={d}\"]}}}}"))
            .collect();
        format!(
            "{{\"cdiVersion\":\"0.6.0\",\"kind\":\"{kind}\",\"devices\":[{}],\"containerEdits\":{{\"env\":[\"{env}\"],\"deviceNodes\":[{{\"path\":\"/dev/nvidiactl\"}}]}}}}",
            devs.join(",")
        )
    }

    fn names(v: &[&str]) -> Vec<DeviceName> {
        v.iter().map(|n| DeviceName::parse(n).unwrap()).collect()
    }

    #[test]
    fn a_later_directory_wins_and_spec_edits_come_once() {
        let d = Dirs::new("wins");
        d.write(
            "etc/a.json",
            &spec("example.com/dev", &["dev0", "dev1"], "FROM=etc"),
        );
        d.write(
            "run/b.json",
            &spec("example.com/dev", &["dev1"], "FROM=run"),
        );
        let mut c = d.cache(Limits::default());
        let changes = c.refresh();
        assert_eq!(changes.len(), 2, "{changes:?}");
        let host = FakeHost::standard();
        let r = c
            .resolve(
                &names(&["example.com/dev=dev0", "example.com/dev=dev1"]),
                &host,
            )
            .unwrap();
        assert_eq!(r.devices, ["example.com/dev=dev0", "example.com/dev=dev1"]);
        assert_eq!(r.spec_files.len(), 2);
        assert!(r.spec_files[1].ends_with("run/b.json"));
        // Each spec's own edits once, the later one's value last.
        assert_eq!(r.edits.env, ["FROM=run", "DEV=dev1"]);
        assert_eq!(
            r.edits.nodes.len(),
            1,
            "the same node from both specs, once"
        );
        let two = c.resolve(&names(&["example.com/dev=dev0"]), &host).unwrap();
        assert_eq!(two.edits.env, ["FROM=etc", "DEV=dev0"]);
        let report = c.report();
        assert_eq!(report.kinds, ["example.com/dev"]);
        assert_eq!(
            report.devices,
            ["example.com/dev=dev0", "example.com/dev=dev1"]
        );
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        // Nothing changed: nothing read again.
        assert!(c.refresh().is_empty());
    }

    #[test]
    fn changes_are_seen_and_a_bad_file_spoils_only_itself() {
        let d = Dirs::new("changes");
        let mut c = d.cache(Limits::default());
        assert!(
            c.refresh().is_empty(),
            "no spec yet, no run directory either"
        );
        let host = FakeHost::standard();
        let err = c
            .resolve(&names(&["example.com/dev=dev0"]), &host)
            .unwrap_err();
        assert!(matches!(err, CdiError::Unknown { .. }), "{err}");

        let a = d.write(
            "run/a.yaml",
            "cdiVersion: 0.6.0\nkind: example.com/dev\ndevices: [{name: dev0}]\n",
        );
        let b = d.write("run/b.json", &spec("other.com/gpu", &["0"], "X=1"));
        c.refresh();
        c.resolve(&names(&["example.com/dev=dev0", "other.com/gpu=0"]), &host)
            .unwrap();

        // A's rewrite does not parse: its devices are refused, naming it;
        // b's still work.
        d.write(
            "run/a.yaml",
            "cdiVersion: 0.6.0\nkind: example.com/dev\ndevices: [{name: dev0}\n",
        );
        let changes = c.refresh();
        assert!(
            matches!(&changes[..], [Change::Refused { file, .. }] if *file == a),
            "{changes:?}"
        );
        let err = c
            .resolve(&names(&["example.com/dev=dev0"]), &host)
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("spec {} is in error", a.display())),
            "{text}"
        );
        assert_eq!(err.device(), "example.com/dev=dev0");
        c.resolve(&names(&["other.com/gpu=0"]), &host).unwrap();
        assert!(c.report().errors[0].starts_with(&a.display().to_string()));

        // Removed: its devices are gone.
        std::fs::remove_file(&b).unwrap();
        assert_eq!(c.refresh(), [Change::Removed { file: b }]);
        let err = c.resolve(&names(&["other.com/gpu=0"]), &host).unwrap_err();
        assert!(err.to_string().contains("no spec in"), "{err}");
    }

    #[test]
    fn two_files_of_one_directory_leave_a_device_to_neither() {
        let d = Dirs::new("conflict");
        d.write(
            "etc/a.json",
            &spec("example.com/dev", &["dev0", "dev1"], "A=1"),
        );
        d.write("etc/b.json", &spec("example.com/dev", &["dev0"], "B=1"));
        let mut c = d.cache(Limits::default());
        c.refresh();
        let host = FakeHost::standard();
        let err = c
            .resolve(&names(&["example.com/dev=dev0"]), &host)
            .unwrap_err();
        let CdiError::Conflict { files, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(files.len(), 2);
        c.resolve(&names(&["example.com/dev=dev1"]), &host).unwrap();
        assert!(c
            .report()
            .errors
            .iter()
            .any(|e| e.starts_with("example.com/dev=dev0: defined by")));
        // The run directory's definition settles it.
        d.write("run/c.json", &spec("example.com/dev", &["dev0"], "C=1"));
        c.refresh();
        let r = c.resolve(&names(&["example.com/dev=dev0"]), &host).unwrap();
        assert_eq!(r.edits.env, ["C=1", "DEV=dev0"]);
    }

    #[test]
    fn writable_by_others_large_and_too_many_files_are_refused_by_name() {
        let d = Dirs::new("limits");
        let open = d.write("etc/open.json", &spec("a.com/x", &["0"], "A=1"));
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let big = d.write(
            "etc/big.json",
            &format!("{}{}", spec("b.com/x", &["0"], "B=1"), " ".repeat(2000)),
        );
        for i in 0..5 {
            d.write(
                &format!("run/{i}.json"),
                &spec(&format!("c{i}.com/x"), &["0"], "C=1"),
            );
        }
        std::fs::create_dir(d.0.join("run/dir.json")).unwrap();
        let mut c = d.cache(Limits {
            file_max_bytes: 1000,
            files_max: 5,
            total_max_bytes: 1 << 20,
        });
        c.refresh();
        let errors = c.report().errors;
        let has = |path: &Path, why: &str| {
            errors
                .iter()
                .any(|e| e.starts_with(&path.display().to_string()) && e.contains(why))
        };
        assert!(
            has(&open, "may be written by others than root"),
            "{errors:?}"
        );
        assert!(has(&big, "more than the 1000 podscope reads"), "{errors:?}");
        assert!(
            has(
                &d.0.join("run"),
                "holds 6 spec files: podscope reads 5 in all"
            ),
            "{errors:?}"
        );
        // The first three of run/ fit beside etc/'s two.
        assert_eq!(
            c.report().devices,
            ["c0.com/x=0", "c1.com/x=0", "c2.com/x=0"]
        );

        // The total: two files fit, the third does not.
        let one = spec("c0.com/x", &["0"], "C=1").len() as u64;
        let mut c = SpecCache::new(
            vec![d.0.join("run")],
            "/".into(),
            Limits {
                file_max_bytes: 1000,
                files_max: 100,
                total_max_bytes: 2 * one + 1,
            },
        );
        c.refresh();
        assert_eq!(c.report().devices.len(), 2);
        assert!(c.report().errors.iter().any(|e| e.contains("pass the")));
    }
}
