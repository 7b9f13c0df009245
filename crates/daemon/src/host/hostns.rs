//! Work done in the host's mount namespace (PID 1's).
//!
//! podscoped runs in a mount namespace of its own: the file system is
//! read-only but for its state (`ProtectSystem=strict`), `/tmp` is private
//! and `/sys/fs/cgroup` read-only. That stays true for everything the
//! daemon does itself. A few things must happen where the node sees them:
//!
//! - a container's root (an overlay of the image's layers) and a pod's
//!   `/dev/shm` are mounted where the OCI runtime, which systemd starts in
//!   the host's namespace, finds them; mounts made in the daemon's own
//!   namespace would stay there;
//! - the files a caller names are the host's: CRI log files (kubelet's
//!   `/var/log/pods`, critest's `/tmp/...`), Localhost seccomp profiles;
//! - cgroup v1 OOM notifications are registered by a write to the
//!   container's `cgroup.event_control`.
//!
//! Each call starts a child that joins PID 1's mount namespace, does the
//! prepared system calls and exits; file descriptors it opens come back
//! over a socket pair. The child allocates nothing (everything is prepared
//! before it starts), so starting it in the multi-threaded daemon is safe.
//! It is not a fork: it runs in the daemon's memory (on a stack of its
//! own) and with its descriptor table, the calling thread suspended until
//! it exits, as posix_spawn's child does (`clone`). A fork copied the
//! daemon's page tables and its descriptor table, and the child's exit
//! closed every copy: on a full node, thousands of descriptors for each of
//! the few children a container's start and removal take (measured: a
//! sixth of the machine's CPU in a burst of 440 starts). This needs
//! CAP_SYS_PTRACE (to open PID 1's namespace) and CAP_SYS_CHROOT (to join
//! it), and nothing more than the daemon already has.

use crate::host::clone::{clone_blocked, ChildStack};
use crate::host::idmap::MappedUserNs;
use podscope_api::error::{Error, Result};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// PID 1's mount namespace.
const HOST_MNT_NS: &str = "/proc/1/ns/mnt";

/// The host's mount namespace, held open; clones share the descriptor
/// (the pods' and the containers' side use one).
#[derive(Clone)]
pub struct HostNs {
    mntns: Option<std::sync::Arc<OwnedFd>>,
}

/// One system call for the child, its strings made beforehand.
enum Op {
    Mount {
        source: CString,
        target: CString,
        fstype: CString,
        flags: libc::c_ulong,
        data: Option<CString>,
        /// A directory to change into first (overlay's relative lower
        /// directories resolve there).
        cwd: Option<CString>,
    },
    Unmount {
        target: CString,
    },
    /// Detach a mount point (nothing mounted is fine) and remove it (no
    /// such file is fine).
    Unpin {
        target: CString,
    },
    /// Remove an empty directory (a cgroup); no such directory is fine.
    Rmdir {
        path: CString,
    },
    Open {
        path: CString,
        flags: libc::c_int,
        mode: libc::mode_t,
    },
    /// Open `root`, then each of `dirs` in turn beneath it (made first,
    /// 0755, when `make_dirs`), then `name` in the last: every step one
    /// component with O_NOFOLLOW, so no symbolic link on the way is
    /// followed and nothing outside `root` is reached.
    OpenBeneath {
        root: CString,
        dirs: Vec<CString>,
        name: CString,
        make_dirs: bool,
        flags: libc::c_int,
        mode: libc::mode_t,
    },
    Mkdir {
        path: CString,
        mode: libc::mode_t,
    },
    Write {
        path: CString,
        data: Vec<u8>,
    },
    /// An idmapped copy of the mount at `source` (a clone of its tree,
    /// `open_tree`), its ids mapped through the user namespace `userns`
    /// (`mount_setattr`), attached at `target` (`move_mount`).
    IdmapBind {
        source: CString,
        target: CString,
        userns: RawFd,
    },
    /// Detach what is mounted at the directory `target` (nothing is fine)
    /// and remove it (gone is fine).
    Release {
        target: CString,
    },
}

/// The kernel's `struct mount_attr` (mount_setattr(2)).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// Where an overlay at `target` of idmapped layers has them bound while
/// it is made: `<target>.lower/<n>`.
pub const IDMAPPED_LOWERS: &str = ".lower";

pub fn idmapped_lowers_of(target: &Path) -> PathBuf {
    let mut s = target.as_os_str().to_owned();
    s.push(IDMAPPED_LOWERS);
    PathBuf::from(s)
}

/// One Mkdir per component of `dir`, outermost first.
fn mkdirs(dir: &Path) -> Result<Vec<Op>> {
    let mut ops = Vec::new();
    for d in dir.ancestors().collect::<Vec<_>>().into_iter().rev() {
        if d.as_os_str().is_empty() || d == Path::new("/") {
            continue;
        }
        ops.push(Op::Mkdir {
            path: cpath(d)?,
            mode: 0o755,
        });
    }
    Ok(ops)
}

/// Where a caller's `path` is opened (`Op::OpenBeneath`): beneath `root`
/// when it is there, else beneath `/`; the directories between and the
/// file's name.
fn split_beneath(root: &Path, path: &Path) -> Result<(CString, Vec<CString>, CString)> {
    use std::path::Component;
    let (base, rest) = match path.strip_prefix(root) {
        Ok(rest) => (root, rest),
        Err(_) => (Path::new("/"), path.strip_prefix("/").unwrap_or(path)),
    };
    let mut parts = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => parts.push(cpath(Path::new(n))?),
            Component::CurDir => {}
            _ => {
                return Err(Error::invalid(
                    "path",
                    format!("{} is not a plain absolute path", path.display()),
                ))
            }
        }
    }
    let name = parts
        .pop()
        .ok_or_else(|| Error::invalid("path", format!("{} names no file", path.display())))?;
    Ok((cpath(base)?, parts, name))
}

/// A descriptor `OpenBeneath` opened non-blocking: a regular file, made
/// blocking again, or an error that says what it is instead.
fn regular_file(fd: OwnedFd, path: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::FileTypeExt;
    let f = std::fs::File::from(fd);
    let meta = f
        .metadata()
        .map_err(|e| Error::io(format!("stat {}", path.display()), e))?;
    if !meta.file_type().is_file() {
        let t = meta.file_type();
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else {
            "a device"
        };
        return Err(Error::invalid(
            "path",
            format!("{} is {what}, not a regular file", path.display()),
        ));
    }
    let fd = OwnedFd::from(f);
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    Ok(fd)
}

/// The error of an `OpenBeneath`, saying why a link is an error there.
fn beneath_error(what: String, root: &Path, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => Error::io(
            format!(
                "{what} (beneath {}, where no symbolic link is followed)",
                root.display()
            ),
            e,
        ),
        _ => Error::io(what, e),
    }
}

fn cstr(p: &str) -> Result<CString> {
    CString::new(p).map_err(|_| Error::invalid("path", format!("{p:?} contains a NUL byte")))
}

fn cpath(p: &Path) -> Result<CString> {
    cstr(
        p.to_str()
            .ok_or_else(|| Error::invalid("path", format!("{} is not UTF-8", p.display())))?,
    )
}

impl HostNs {
    /// Open PID 1's mount namespace. When the daemon's namespace is PID
    /// 1's already (run by hand, tests), calls run in place, unforked.
    pub fn connect() -> Result<Self> {
        let mine = std::fs::metadata("/proc/self/ns/mnt");
        let host = std::fs::metadata(HOST_MNT_NS);
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (&mine, &host) {
            if a.ino() == b.ino() && a.dev() == b.dev() {
                return Ok(HostNs { mntns: None });
            }
        }
        let f = std::fs::File::open(HOST_MNT_NS).map_err(|e| {
            Error::io(
                format!("open the host's mount namespace {HOST_MNT_NS} (podscoped needs CAP_SYS_PTRACE)"),
                e,
            )
        })?;
        Ok(HostNs {
            mntns: Some(std::sync::Arc::new(f.into())),
        })
    }

    /// Calls run in the daemon's own namespace (the unit tests').
    #[cfg(test)]
    pub fn in_place() -> Self {
        HostNs { mntns: None }
    }

    /// An overlay of `lowers` (relative to `lower_base`, topmost first)
    /// under `upper`, mounted at `target`. Relative lower directories keep
    /// the options within a page for stacks of hundreds of layers. With
    /// `idmap`, the lowers are idmapped first (below).
    pub async fn mount_overlay(
        &self,
        lower_base: &Path,
        lowers: &[String],
        upper: &Path,
        work: &Path,
        target: &Path,
        idmap: Option<&MappedUserNs>,
    ) -> Result<()> {
        let rest = format!(",upperdir={},workdir={}", upper.display(), work.display());
        let what = format!("mount the overlay at {}", target.display());
        self.overlay(lower_base, lowers, &rest, 0, target, idmap, what)
            .await
    }

    /// A read-only overlay of `lowers` (at least two; no upper directory)
    /// at `target`: an image volume.
    pub async fn mount_overlay_readonly(
        &self,
        lower_base: &Path,
        lowers: &[String],
        target: &Path,
        idmap: Option<&MappedUserNs>,
    ) -> Result<()> {
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
        let what = format!("mount the read-only overlay at {}", target.display());
        self.overlay(lower_base, lowers, "", flags, target, idmap, what)
            .await
    }

    /// One overlay mount of `lowers` with the `rest` of its options, which
    /// must fit a page; a failure is `what`'s.
    ///
    /// With `idmap` (a pod with a user namespace of its own), each lower
    /// is first an idmapped bind at `<target>.lower/<n>` and the overlay
    /// is made of those: overlayfs cannot itself be idmapped, but takes
    /// idmapped layers (5.19), so the pod's root sees the image's files
    /// as its own while the layers, shared with other pods, stay as they
    /// are. The binds are detached once the overlay holds them (it keeps
    /// private copies), in the same child.
    #[allow(clippy::too_many_arguments)]
    async fn overlay(
        &self,
        lower_base: &Path,
        lowers: &[String],
        rest: &str,
        flags: libc::c_ulong,
        target: &Path,
        idmap: Option<&MappedUserNs>,
        what: String,
    ) -> Result<()> {
        let scratch = idmapped_lowers_of(target);
        let (cwd, names) = match idmap {
            None => (lower_base.to_path_buf(), lowers.to_vec()),
            Some(_) => (
                scratch.clone(),
                (0..lowers.len()).map(|n| n.to_string()).collect(),
            ),
        };
        let data = format!("lowerdir={}{rest}", names.join(":"));
        if data.len() >= 4096 {
            return Err(Error::invalid(
                "image",
                format!(
                    "{} layers make overlay options of {} bytes, more than a page",
                    lowers.len(),
                    data.len()
                ),
            ));
        }
        let mount = Op::Mount {
            source: cstr("overlay")?,
            target: cpath(target)?,
            fstype: cstr("overlay")?,
            flags,
            data: Some(cstr(&data)?),
            cwd: Some(cpath(&cwd)?),
        };
        let Some(ns) = idmap else {
            return self
                .run(vec![mount])
                .await
                .map(drop)
                .map_err(|e| Error::io(what, e));
        };
        let release = || -> Result<Vec<Op>> {
            let mut ops = (0..lowers.len())
                .map(|n| {
                    Ok(Op::Release {
                        target: cpath(&scratch.join(n.to_string()))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            ops.push(Op::Rmdir {
                path: cpath(&scratch)?,
            });
            Ok(ops)
        };
        // What an earlier Start cut short left there goes first.
        self.release_idmapped_lowers(&scratch).await?;
        let mut ops = vec![Op::Mkdir {
            path: cpath(&scratch)?,
            mode: 0o700,
        }];
        for (n, l) in lowers.iter().enumerate() {
            let at = scratch.join(n.to_string());
            ops.push(Op::Mkdir {
                path: cpath(&at)?,
                mode: 0o700,
            });
            ops.push(Op::IdmapBind {
                source: cpath(&lower_base.join(l))?,
                target: cpath(&at)?,
                userns: ns.as_raw_fd(),
            });
        }
        ops.push(mount);
        ops.extend(release()?);
        match self.run(ops).await {
            Ok(_) => Ok(()),
            Err(e) => {
                // Whatever step failed, no idmapped bind is left behind.
                let _ = self.release_idmapped_lowers(&scratch).await;
                Err(Error::io(format!("{what} (of idmapped layers)"), e))
            }
        }
    }

    /// Detach and remove every idmapped layer bind under `scratch` (an
    /// overlay's `<target>.lower`), each on its own so that one that
    /// cannot go does not keep the others, then the directory. Nothing
    /// there is done already.
    pub async fn release_idmapped_lowers(&self, scratch: &Path) -> Result<()> {
        let Ok(entries) = std::fs::read_dir(scratch) else {
            return Ok(());
        };
        let mut first = None;
        for e in entries.flatten() {
            let op = Op::Release {
                target: cpath(&e.path())?,
            };
            if let Err(err) = self.run(vec![op]).await {
                first.get_or_insert(Error::io(
                    format!("release the idmapped layer {}", e.path().display()),
                    err,
                ));
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
        let op = Op::Rmdir {
            path: cpath(scratch)?,
        };
        self.run(vec![op])
            .await
            .map(drop)
            .map_err(|e| Error::io(format!("remove {}", scratch.display()), e))
    }

    /// A tmpfs at `target` (a pod's /dev/shm).
    pub async fn mount_tmpfs(&self, target: &Path, options: &str) -> Result<()> {
        let op = Op::Mount {
            source: cstr("shm")?,
            target: cpath(target)?,
            fstype: cstr("tmpfs")?,
            flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            data: Some(cstr(options)?),
            cwd: None,
        };
        self.run(vec![op])
            .await
            .map(drop)
            .map_err(|e| Error::io(format!("mount a tmpfs at {}", target.display()), e))
    }

    /// Detach whatever is mounted at `target`; nothing mounted (or no such
    /// path) is done already.
    pub async fn unmount(&self, target: &Path) -> Result<()> {
        let op = Op::Unmount {
            target: cpath(target)?,
        };
        match self.run(vec![op]).await {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOENT)) => Ok(()),
            Err(e) => Err(Error::io(format!("unmount {}", target.display()), e)),
        }
    }

    /// Unmount what is pinned at `target` and remove the file: what
    /// `podscope-netns del` does for a pod's namespace, here without a
    /// process forked into its unit's cgroup. Done already is fine.
    pub async fn unpin(&self, target: &Path) -> Result<()> {
        let op = Op::Unpin {
            target: cpath(target)?,
        };
        self.run(vec![op])
            .await
            .map(drop)
            .map_err(|e| Error::io(format!("unpin {}", target.display()), e))
    }

    /// Remove the empty directory `dir` (a cgroup); gone already is fine.
    pub async fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.remove_dirs(&[dir.to_path_buf()]).await
    }

    /// Remove empty directories (cgroups), in one child, stopping at the
    /// first that cannot go; gone already is fine.
    pub async fn remove_dirs(&self, dirs: &[PathBuf]) -> Result<()> {
        let ops = dirs
            .iter()
            .map(|d| Ok(Op::Rmdir { path: cpath(d)? }))
            .collect::<Result<Vec<_>>>()?;
        self.run(ops).await.map(drop).map_err(|e| {
            let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            Error::io(format!("remove {}", names.join(", ")), e)
        })
    }

    /// `mkdir -p`, mode 0755 for what it makes.
    pub async fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let ops = mkdirs(dir)?;
        self.run(ops)
            .await
            .map(drop)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))
    }

    /// Open a container's log file for appending, creating it (0640) and
    /// its missing directories (0755). Beneath `root` (podscope.toml's
    /// `log_root`, made if missing) when it is there, else beneath `/`; in
    /// either no symbolic link is followed (a log directory is a caller's
    /// choice, and the daemon writes there as root), and the file must be
    /// a regular one.
    pub async fn open_log(&self, root: &Path, path: &Path) -> Result<OwnedFd> {
        let before = if path.starts_with(root) {
            mkdirs(root)?
        } else {
            Vec::new()
        };
        let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT;
        let what = format!("open {} for writing", path.display());
        self.open_beneath(before, root, path, flags, 0o640, what)
            .await
    }

    /// Read a small regular file (at most `max` bytes) a caller named,
    /// beneath `root` when it is there, else beneath `/`, following no
    /// symbolic link (a Localhost seccomp profile: read as root).
    pub async fn read_beneath(&self, root: &Path, path: &Path, max: usize) -> Result<Vec<u8>> {
        use std::io::Read;
        let fd = self
            .open_beneath(
                Vec::new(),
                root,
                path,
                libc::O_RDONLY,
                0,
                format!("open {}", path.display()),
            )
            .await?;
        let mut buf = Vec::new();
        std::fs::File::from(fd)
            .take(max as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        if buf.len() > max {
            return Err(Error::invalid(
                "path",
                format!("{} is larger than {max} bytes", path.display()),
            ));
        }
        Ok(buf)
    }

    /// The directory a checkpoint archive is written into, as the host
    /// sees it, following no symbolic link on the way (the daemon writes
    /// there as root, at a path a caller named). Not made when missing.
    pub async fn open_dir(&self, dir: &Path) -> Result<OwnedFd> {
        let (base, dirs, name) = split_beneath(Path::new("/"), dir)?;
        let op = Op::OpenBeneath {
            root: base,
            dirs,
            name,
            make_dirs: false,
            flags: libc::O_RDONLY | libc::O_DIRECTORY,
            mode: 0,
        };
        let what = format!("open the directory {}", dir.display());
        let mut fds = self
            .run(vec![op])
            .await
            .map_err(|e| beneath_error(what.clone(), Path::new("/"), e))?;
        let fd = fds
            .pop()
            .flatten()
            .ok_or_else(|| Error::internal(format!("{what}: no descriptor came back")))?;
        let f = std::fs::File::from(fd);
        let t = f
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", dir.display()), e))?
            .file_type();
        if !t.is_dir() {
            return Err(Error::invalid(
                "location",
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(OwnedFd::from(f))
    }

    /// A regular file a caller named, opened for reading as the host sees
    /// it, following no symbolic link (a checkpoint archive to restore).
    pub async fn open_for_reading(&self, path: &Path) -> Result<OwnedFd> {
        self.open_beneath(
            Vec::new(),
            Path::new("/"),
            path,
            libc::O_RDONLY,
            0,
            format!("open {}", path.display()),
        )
        .await
    }

    /// Run `before`, then `Op::OpenBeneath` for `path` (`split_beneath`),
    /// in one child; the descriptor, checked to be a regular file. A file
    /// opened to be created gets its missing directories made too. `what`
    /// names the step in errors.
    async fn open_beneath(
        &self,
        mut before: Vec<Op>,
        root: &Path,
        path: &Path,
        flags: libc::c_int,
        mode: libc::mode_t,
        what: String,
    ) -> Result<OwnedFd> {
        let (base, dirs, name) = split_beneath(root, path)?;
        before.push(Op::OpenBeneath {
            root: base,
            dirs,
            name,
            make_dirs: flags & libc::O_CREAT != 0,
            flags,
            mode,
        });
        let mut fds = self
            .run(before)
            .await
            .map_err(|e| beneath_error(what.clone(), root, e))?;
        let fd = fds
            .pop()
            .flatten()
            .ok_or_else(|| Error::internal(format!("{what}: no descriptor came back")))?;
        regular_file(fd, path)
    }

    /// `mkdir -p dir`, then open `dir/name` for writing, in one child: a
    /// control file of a cgroup made for it.
    pub async fn open_in_new_dir(&self, dir: &Path, name: &str) -> Result<OwnedFd> {
        self.open_for_writing_after(mkdirs(dir)?, &dir.join(name), 0, 0)
            .await
    }

    /// Run `before`, then open `path` for writing with `flags` (and
    /// O_WRONLY, O_CLOEXEC), in one child.
    async fn open_for_writing_after(
        &self,
        mut before: Vec<Op>,
        path: &Path,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> Result<OwnedFd> {
        before.push(Op::Open {
            path: cpath(path)?,
            flags: flags | libc::O_WRONLY | libc::O_CLOEXEC,
            mode,
        });
        let mut fds = self
            .run(before)
            .await
            .map_err(|e| Error::io(format!("open {} for writing", path.display()), e))?;
        fds.pop().flatten().ok_or_else(|| {
            Error::internal(format!("open {}: no descriptor came back", path.display()))
        })
    }

    /// Write `data` to `path` in one write (a cgroup control file). The
    /// descriptors `data` names are the daemon's: the child has them too.
    /// `write`, its error the system call's own (for a caller that names
    /// what the kernel refused).
    pub async fn try_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let op = Op::Write {
            path: cpath(path)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
            data: data.to_vec(),
        };
        self.run(vec![op]).await.map(drop)
    }

    pub async fn write(&self, path: &Path, data: &[u8]) -> Result<()> {
        let op = Op::Write {
            path: cpath(path)?,
            data: data.to_vec(),
        };
        self.run(vec![op])
            .await
            .map(drop)
            .map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    async fn run(&self, ops: Vec<Op>) -> io::Result<Vec<Option<OwnedFd>>> {
        let ns = self.mntns.as_ref().map(|f| f.as_raw_fd());
        match ns {
            None => tokio::task::spawn_blocking(move || run_here(&ops))
                .await
                .map_err(|e| io::Error::other(format!("host namespace task: {e}")))?,
            Some(ns) => {
                // The fd stays open: `self` outlives the blocking task,
                // which is awaited here.
                tokio::task::spawn_blocking(move || {
                    let mut out = Vec::with_capacity(ops.len());
                    for chunk in ops.chunks(OPS_PER_CHILD) {
                        out.extend(run_in_child(ns, chunk)?);
                    }
                    Ok(out)
                })
                .await
                .map_err(|e| io::Error::other(format!("host namespace task: {e}")))?
            }
        }
    }
}

/// One op, in the calling process: Ok(Some(fd)) for an open.
/// Async-signal-safe: raw system calls on prepared strings only.
fn do_op(op: &Op) -> std::result::Result<Option<RawFd>, i32> {
    // SAFETY: every pointer is a NUL-terminated string or a buffer that
    // lives in `op`; return values are checked.
    unsafe {
        let errno = || *libc::__errno_location();
        match op {
            Op::Mount {
                source,
                target,
                fstype,
                flags,
                data,
                cwd,
            } => {
                if let Some(cwd) = cwd {
                    if libc::chdir(cwd.as_ptr()) != 0 {
                        return Err(errno());
                    }
                }
                let d = data
                    .as_ref()
                    .map_or(std::ptr::null(), |d| d.as_ptr().cast());
                if libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), *flags, d) != 0 {
                    return Err(errno());
                }
                Ok(None)
            }
            Op::Unmount { target } => {
                if libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) != 0 {
                    return Err(errno());
                }
                Ok(None)
            }
            Op::Unpin { target } => {
                if libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) != 0
                    && !matches!(errno(), libc::EINVAL | libc::ENOENT)
                {
                    return Err(errno());
                }
                if libc::unlink(target.as_ptr()) != 0 && errno() != libc::ENOENT {
                    return Err(errno());
                }
                Ok(None)
            }
            Op::Rmdir { path } => {
                if libc::rmdir(path.as_ptr()) != 0 && errno() != libc::ENOENT {
                    return Err(errno());
                }
                Ok(None)
            }
            Op::Open { path, flags, mode } => {
                let fd = libc::open(path.as_ptr(), *flags, *mode as libc::c_uint);
                if fd < 0 {
                    return Err(errno());
                }
                Ok(Some(fd))
            }
            Op::OpenBeneath {
                root,
                dirs,
                name,
                make_dirs,
                flags,
                mode,
            } => {
                let dir_flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
                let mut dir = libc::open(root.as_ptr(), dir_flags);
                if dir < 0 {
                    return Err(errno());
                }
                for d in dirs {
                    if *make_dirs && libc::mkdirat(dir, d.as_ptr(), 0o755) != 0 {
                        let e = errno();
                        if e != libc::EEXIST {
                            libc::close(dir);
                            return Err(e);
                        }
                    }
                    let next = libc::openat(dir, d.as_ptr(), dir_flags | libc::O_NOFOLLOW);
                    let e = errno();
                    libc::close(dir);
                    if next < 0 {
                        return Err(e);
                    }
                    dir = next;
                }
                // Non-blocking: a FIFO put there must not hang the call
                // (the daemon checks what it got: `regular_file`).
                let fd = libc::openat(
                    dir,
                    name.as_ptr(),
                    *flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
                    *mode as libc::c_uint,
                );
                let e = errno();
                libc::close(dir);
                if fd < 0 {
                    return Err(e);
                }
                Ok(Some(fd))
            }
            Op::Mkdir { path, mode } => {
                if libc::mkdir(path.as_ptr(), *mode) != 0 && errno() != libc::EEXIST {
                    return Err(errno());
                }
                Ok(None)
            }
            Op::IdmapBind {
                source,
                target,
                userns,
            } => {
                let tree = libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    source.as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
                ) as libc::c_int;
                if tree < 0 {
                    return Err(errno());
                }
                let attr = MountAttr {
                    attr_set: MOUNT_ATTR_IDMAP,
                    attr_clr: 0,
                    propagation: 0,
                    userns_fd: *userns as u64,
                };
                let empty = c"".as_ptr();
                let mut r = libc::syscall(
                    libc::SYS_mount_setattr,
                    tree,
                    empty,
                    libc::AT_EMPTY_PATH,
                    &attr as *const MountAttr,
                    std::mem::size_of::<MountAttr>(),
                );
                if r == 0 {
                    r = libc::syscall(
                        libc::SYS_move_mount,
                        tree,
                        empty,
                        libc::AT_FDCWD,
                        target.as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH,
                    );
                }
                let e = errno();
                libc::close(tree);
                if r != 0 {
                    return Err(e);
                }
                Ok(None)
            }
            Op::Release { target } => {
                // Every mount stacked there (a bind left by a Start cut
                // short, another on it), until none is.
                while libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) == 0
                {
                }
                if !matches!(errno(), libc::EINVAL | libc::ENOENT) {
                    return Err(errno());
                }
                if libc::rmdir(target.as_ptr()) != 0 && errno() != libc::ENOENT {
                    return Err(errno());
                }
                Ok(None)
            }
            Op::Write { path, data } => {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(errno());
                }
                let n = libc::write(fd, data.as_ptr().cast(), data.len());
                let e = errno();
                libc::close(fd);
                if n < 0 {
                    return Err(e);
                }
                Ok(None)
            }
        }
    }
}

fn run_here(ops: &[Op]) -> io::Result<Vec<Option<OwnedFd>>> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        match do_op(op) {
            // SAFETY: a descriptor open() just returned, owned by no one else.
            Ok(fd) => out.push(fd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })),
            Err(e) => return Err(io::Error::from_raw_os_error(e)),
        }
    }
    Ok(out)
}

/// A report from the child: the op's index, its errno (0 for success), and
/// an fd alongside for an open.
#[repr(C)]
#[derive(Clone, Copy)]
struct Report {
    index: u32,
    errno: i32,
}

fn run_in_child(ns: RawFd, ops: &[Op]) -> io::Result<Vec<Option<OwnedFd>>> {
    let mut pair = [0 as libc::c_int; 2];
    // SAFETY: socketpair fills `pair` on success.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors from socketpair.
    let (mine, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    // The control buffer for one fd, made before the child starts.
    let mut cmsg_space =
        vec![0u8; unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize];
    let pid = spawn_child(ns, ops, theirs.as_raw_fd(), &mut cmsg_space)?;
    drop(theirs);
    let mut out: Vec<Option<OwnedFd>> = Vec::with_capacity(ops.len());
    let mut failure = None;
    loop {
        let mut report = Report { index: 0, errno: 0 };
        let mut iov = libc::iovec {
            iov_base: (&mut report as *mut Report).cast(),
            iov_len: std::mem::size_of::<Report>(),
        };
        let mut cbuf = vec![0u8; cmsg_space.len()];
        // SAFETY: a zeroed msghdr pointing at live buffers.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = cbuf.len();
            let n = libc::recvmsg(mine.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n > 0 {
                let mut fd = None;
                let c = libc::CMSG_FIRSTHDR(&msg);
                if !c.is_null() && (*c).cmsg_type == libc::SCM_RIGHTS {
                    fd = Some(OwnedFd::from_raw_fd(*(libc::CMSG_DATA(c) as *const RawFd)));
                }
                if report.errno == 0 {
                    out.push(fd);
                }
            }
            n
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            failure.get_or_insert(e);
            break;
        }
        if n == 0 {
            break;
        }
        if report.errno != 0 {
            failure = Some(io::Error::from_raw_os_error(report.errno));
            break;
        }
    }
    let mut status = 0;
    // SAFETY: reaping the child forked above.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if out.len() != ops.len() {
        return Err(io::Error::other(format!(
            "the host-namespace helper did {} of {} steps (exit status {status:#x})",
            out.len(),
            ops.len()
        )));
    }
    Ok(out)
}

/// Ops one child does: their reports wait in the socket pair until the
/// child has exited (the caller's thread is suspended until then), so
/// they must fit its buffer (32 small messages: a few KiB of the default
/// 208 KiB; one that does not fit fails the call, never hangs it).
const OPS_PER_CHILD: usize = 32;

/// What the child is given, through clone's one pointer.
struct ChildArgs<'a> {
    ns: RawFd,
    ops: &'a [Op],
    sock: RawFd,
    cmsg_space: &'a mut [u8],
}

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `spawn_child` passes a live ChildArgs and waits (CLONE_VFORK)
    // until this child has exited.
    let a = unsafe { &mut *(arg as *mut ChildArgs<'_>) };
    child(a.ns, a.ops, a.sock, a.cmsg_space)
}

/// Start the child: CLONE_VM (the daemon's memory, nothing copied; a stack
/// of its own), CLONE_FILES (its descriptor table, nothing copied or
/// closed; what the child opens it closes once sent), CLONE_VFORK (this
/// thread waits until the child has exited, so what it is given stays
/// put). Every signal is blocked meanwhile, so no handler of the daemon's
/// runs in the child.
fn spawn_child(ns: RawFd, ops: &[Op], sock: RawFd, cmsg_space: &mut [u8]) -> io::Result<i32> {
    let stack = ChildStack::new()?;
    let mut args = ChildArgs {
        ns,
        ops,
        sock,
        cmsg_space,
    };
    // SAFETY: the stack is ours until the child has exited (CLONE_VFORK).
    unsafe {
        clone_blocked(
            child_entry,
            &stack,
            libc::CLONE_VM | libc::CLONE_FILES | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut args as *mut ChildArgs<'_>).cast(),
        )
    }
}

/// The child: join the host's mount namespace, do each op, report.
fn child(ns: RawFd, ops: &[Op], sock: RawFd, cmsg_space: &mut [u8]) -> ! {
    // SAFETY: only system calls on prepared memory; never returns.
    unsafe {
        let send = |index: usize, errno: i32, fd: Option<RawFd>, cbuf: &mut [u8]| {
            let mut report = Report {
                index: index as u32,
                errno,
            };
            let mut iov = libc::iovec {
                iov_base: (&mut report as *mut Report).cast(),
                iov_len: std::mem::size_of::<Report>(),
            };
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            if let Some(fd) = fd {
                msg.msg_control = cbuf.as_mut_ptr().cast();
                msg.msg_controllen = cbuf.len();
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
                *(libc::CMSG_DATA(c) as *mut RawFd) = fd;
            }
            // Never blocking: the caller's thread is suspended until the
            // child exits, so a full buffer would wait for ever. A report
            // that does not fit ends the child; the caller counts the
            // steps reported and fails the call.
            libc::sendmsg(sock, &msg, libc::MSG_DONTWAIT) >= 0
        };
        if libc::setns(ns, libc::CLONE_NEWNS) != 0 {
            send(0, *libc::__errno_location(), None, cmsg_space);
            libc::_exit(1);
        }
        for (i, op) in ops.iter().enumerate() {
            match do_op(op) {
                Ok(fd) => {
                    let sent = send(i, 0, fd, cmsg_space);
                    // The descriptor table is the daemon's (CLONE_FILES):
                    // what was opened here is closed here, sent or not.
                    if let Some(fd) = fd {
                        libc::close(fd);
                    }
                    if !sent {
                        libc::_exit(2);
                    }
                }
                Err(e) => {
                    send(i, e, None, cmsg_space);
                    libc::_exit(1);
                }
            }
        }
        libc::_exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An overlay of 40 idmapped layers, through children as in the
    /// daemon (this process's own namespace joined, so the ops are split
    /// among several children): every layer's file seen as the mapping's,
    /// and no bind or scratch directory left once it is mounted.
    #[tokio::test]
    async fn an_overlay_of_many_idmapped_layers_leaves_no_bind() {
        let t = podscope_test_support::TempDir::new();
        let ns = std::fs::File::open("/proc/self/ns/mnt").unwrap();
        let h = HostNs {
            mntns: Some(std::sync::Arc::new(ns.into())),
        };
        let mut lowers = Vec::new();
        for n in 0..40 {
            let l = t.0.join(format!("L{n}"));
            std::fs::create_dir(&l).unwrap();
            std::fs::write(l.join(format!("f{n}")), "x").unwrap();
            lowers.insert(0, format!("L{n}"));
        }
        let (upper, work, target) = (t.0.join("upper"), t.0.join("work"), t.0.join("root"));
        for d in [&upper, &work, &target] {
            std::fs::create_dir(d).unwrap();
        }
        let m = [podscope_api::domain::IdMapping {
            container_id: 0,
            host_id: 100_000,
            length: 65536,
        }];
        let userns = crate::host::idmap::create(&m, &m).unwrap();
        h.mount_overlay(&t.0, &lowers, &upper, &work, &target, Some(&userns))
            .await
            .unwrap();
        use std::os::unix::fs::MetadataExt;
        let owners: Vec<u32> = (0..40)
            .map(|n| {
                std::fs::metadata(target.join(format!("f{n}")))
                    .unwrap()
                    .uid()
            })
            .collect();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        h.unmount(&target).await.unwrap();
        assert!(owners.iter().all(|u| *u == 100_000), "{owners:?}");
        assert!(!idmapped_lowers_of(&target).exists());
        assert!(!mountinfo.contains(".lower"), "a bind left: {mountinfo}");
    }

    /// In the test's own namespace the ops run in place: a directory made,
    /// a file opened for appending through missing parents, read back.
    #[tokio::test]
    async fn in_place_ops_work() {
        let t = podscope_test_support::TempDir::new();
        let h = HostNs { mntns: None };
        let log = t.0.join("a/b/c.log");
        let fd = h.open_log(&t.0, &log).await.unwrap();
        use std::io::Write;
        std::fs::File::from(fd).write_all(b"line\n").unwrap();
        assert_eq!(h.read_beneath(&t.0, &log, 100).await.unwrap(), b"line\n");
        let e = h.read_beneath(&t.0, &log, 2).await.unwrap_err();
        assert!(e.to_string().contains("larger than 2 bytes"), "{e}");
        let e = h
            .read_beneath(&t.0, &t.0.join("missing"), 10)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        h.unmount(&t.0.join("not-mounted")).await.unwrap();
    }

    /// Issue 41, findings 2 and 12: a log file or a profile a caller names
    /// is opened beneath its root (or beneath / when it is elsewhere) with
    /// no symbolic link followed on the way, and only a regular file is
    /// taken: a FIFO does not hang the call.
    #[tokio::test]
    async fn callers_paths_are_opened_beneath_without_links() {
        let t = podscope_test_support::TempDir::new();
        let own = std::fs::File::open("/proc/self/ns/mnt").unwrap();
        for h in [
            HostNs { mntns: None },
            HostNs {
                mntns: Some(std::sync::Arc::new(own.into())),
            },
        ] {
            let root = t.0.join("logs");
            let outside = t.0.join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            // The root itself is made, as kubelet's /var/log/pods is.
            let fd = h.open_log(&root, &root.join("p/c/0.log")).await.unwrap();
            drop(fd);
            assert!(root.join("p/c/0.log").is_file());
            let _ = std::fs::remove_file(root.join("lnk"));
            std::os::unix::fs::symlink(&outside, root.join("lnk")).unwrap();
            let e = h
                .open_log(&root, &root.join("lnk/c/0.log"))
                .await
                .unwrap_err();
            assert!(
                e.to_string().contains("where no symbolic link is followed"),
                "{e}"
            );
            let _ = std::fs::remove_file(root.join("p/c/1.log"));
            std::os::unix::fs::symlink(outside.join("f"), root.join("p/c/1.log")).unwrap();
            assert!(h.open_log(&root, &root.join("p/c/1.log")).await.is_err());
            // A path outside the root: beneath /, links refused the same.
            let e = h
                .open_log(&root, &root.join("../logs/lnk/x.log"))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("plain absolute path"), "{e}");
            let e = h
                .open_log(&root, &t.0.join("logs/lnk/y.log"))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{e}");
            assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
            let fifo = root.join("p/fifo");
            let _ = std::fs::remove_file(&fifo);
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: mkfifo with a valid path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            let e = h.read_beneath(&root, &fifo, 100).await.unwrap_err();
            assert!(
                e.to_string().contains("is a FIFO, not a regular file"),
                "{e}"
            );
            let e = h.open_log(&root, &fifo).await.unwrap_err();
            assert!(e.to_string().contains("No such device"), "{e}");
            let e = h
                .read_beneath(&root, &root.join("p"), 100)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("a directory"), "{e}");
            std::fs::write(root.join("p/profile.json"), b"{}").unwrap();
            assert_eq!(
                h.read_beneath(&root, &root.join("p/profile.json"), 100)
                    .await
                    .unwrap(),
                b"{}"
            );
        }
    }

    /// In a child joining our own namespace (what the daemon does with
    /// PID 1's): the steps run in the child, errors and descriptors come
    /// back, and what the child opened it closed (it shares the table).
    #[tokio::test]
    async fn child_ops_report_errors_and_fds() {
        let t = podscope_test_support::TempDir::new();
        let own = std::fs::File::open("/proc/self/ns/mnt").unwrap();
        let h = HostNs {
            mntns: Some(std::sync::Arc::new(own.into())),
        };
        // The unit tests run as root (make check): joining a mount
        // namespace needs CAP_SYS_ADMIN and CAP_SYS_CHROOT.
        let fd = h.open_log(&t.0, &t.0.join("x/y.log")).await.unwrap();
        use std::io::Write;
        std::fs::File::from(fd).write_all(b"ok").unwrap();
        assert_eq!(std::fs::read(t.0.join("x/y.log")).unwrap(), b"ok");
        let e = h
            .read_beneath(&t.0, &t.0.join("nope"), 10)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
        h.write(&t.0.join("x/y.log"), b"!").await.unwrap();
        // More ops than one child does: each is done, in order.
        let dirs: Vec<PathBuf> = (0..OPS_PER_CHILD * 2 + 3)
            .map(|i| t.0.join(format!("d{i}")))
            .collect();
        for d in &dirs {
            std::fs::create_dir(d).unwrap();
        }
        h.remove_dirs(&dirs).await.unwrap();
        assert!(dirs.iter().all(|d| !d.exists()));
        // Nothing the children opened is left open here: their opens
        // came back as new descriptors, now dropped.
        let open = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|p| p.starts_with(&t.0))
                .count()
        };
        assert_eq!(open(), 0);
    }
}
