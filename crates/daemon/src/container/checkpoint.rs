//! CheckpointContainer: a running container's memory dumped with CRIU
//! through its runtime (`runc checkpoint --leave-running`), its writable
//! layer's files beside it, all written as a checkpoint archive (`archive`)
//! at the path the caller names; the container keeps running (unless the
//! caller asked to stop it: then its unit and journal stay, inspectable,
//! until RemoveContainer).
//!
//! The dump runs as a transient oneshot service,
//! `podscope-checkpoint-<id>.service` in podscope's slice: CRIU needs
//! ptrace and every capability, which the daemon's own sandbox does not
//! have (and must not), and it sees the node as PID 1 does. Its images go
//! to a private directory in the container's bundle, removed afterwards.
//!
//! The archive is written under a temporary name in its directory, opened
//! as the host sees it without following a link, and renamed into place
//! (never over a file) only when whole: on any failure nothing is left.
//! What is refused before CRIU runs: a container not running, one with a
//! terminal, one whose PID namespace other processes share (its pod's, or
//! another container's target), a handler whose runtime has no CRIU, a
//! path that exists or a directory that cannot be written.

use super::*;
use podscope_api::container::CheckpointOptions;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

/// The dump's working directory in the bundle: `images/` (CRIU's images)
/// and `work/` (its log), and the rootfs diff while the archive is made.
const WORK_DIR: &str = "checkpoint.work";
/// The least time a dump is given.
const TIMEOUT_MIN: Duration = Duration::from_secs(60);
/// In the working directory: the temporary archive's path.
const TEMP_NAMED: &str = "archive";
/// How long a container's cgroup is given to freeze before its dump.
const FREEZE_WITHIN: Duration = Duration::from_secs(10);

/// A container's freezer (`Containers::freezer`).
struct Freezer {
    control: PathBuf,
    freeze: &'static str,
    thaw: &'static str,
    state: PathBuf,
}

impl Freezer {
    /// Whether `state` (cgroup.events on v2, freezer.state on v1) says
    /// frozen.
    fn frozen(state: &str) -> bool {
        state.trim() == "FROZEN" || state.lines().any(|l| l.trim() == "frozen 1")
    }
}

/// The transient unit a container's dump runs in.
pub fn dump_unit(id: &ContainerId) -> String {
    format!("podscope-checkpoint-{id}.service")
}

/// Removes the temporary archive and the working directory, unless the
/// archive was renamed into place (then only the directory).
struct Leftovers {
    dir: Option<OwnedFd>,
    temp: Option<std::ffi::CString>,
    work: PathBuf,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        if let (Some(dir), Some(temp)) = (&self.dir, &self.temp) {
            // SAFETY: unlinkat on a directory we hold, a valid C string.
            unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
        }
        let _ = crate::state::files::remove_tree_on_one_fs(&self.work);
    }
}

impl<S: SystemdClient + Clone> Containers<S> {
    pub async fn checkpoint(
        &self,
        entry: &Arc<ContainerEntry>,
        location: &str,
        options: CheckpointOptions,
    ) -> Result<()> {
        let pod_id = entry.with(|c| c.pod_id.clone());
        let pod = self
            .pods
            .get(&pod_id)
            .ok_or_else(|| Error::not_found(format!("sandbox {pod_id} is gone")))?;
        let _gate = pod.members.read().await;
        let _op = entry.op.lock().await;
        if entry.is_removed() {
            return Err(Error::not_found(format!(
                "no container with id {}",
                entry.id
            )));
        }
        // Its end may not have been told yet.
        self.observe_exit(entry).await?;
        let c = entry.snapshot();
        let sb = pod.snapshot();
        let ctx =
            |step: &str| format!("container {} ({}): checkpoint: {step}", c.id, c.config.name);
        if c.state != ContainerState::Running {
            return Err(Error::invalid_state(format!(
                "{}: it is {}, not running: only a running container is checkpointed",
                ctx("state"),
                c.state.as_str()
            )));
        }
        if c.config.tty {
            return Err(Error::invalid(
                "tty",
                format!(
                    "{}: it has a terminal, which podscope does not checkpoint",
                    ctx("terminal")
                ),
            ));
        }
        let (handler_name, handler) = self.runtime_of(&sb)?;
        let features = crate::host::features::of(handler_name, handler).await;
        if !features.checkpoint {
            return Err(Error::new(
                ErrorKind::RuntimeFailed,
                format!(
                    "{}: runtime handler {handler_name} cannot checkpoint: {} (use a handler with runc and Debian's criu)",
                    ctx("runtime"),
                    features.checkpoint_why_not
                ),
            ));
        }
        self.alone_in_its_pid_namespace(&c, &sb)
            .map_err(|e| e.context(ctx("PID namespace")))?;
        // The archive's seal (a restore takes only sealed archives).
        let key = super::checkpoint_key::load_or_create(&self.settings.state_dir)
            .map_err(|e| e.context(ctx("checkpoint key")))?;

        // Where the archive goes: a plain absolute path, its directory
        // there and writable, the file not.
        let target = Path::new(location);
        let (dir_path, name) = match (target.parent(), target.file_name()) {
            (Some(d), Some(n)) if target.is_absolute() && !location.ends_with('/') => (d, n),
            _ => {
                return Err(Error::invalid(
                    "location",
                    format!("{location:?} is not an absolute path of a file"),
                ))
            }
        };
        let dir = self.hostns.open_dir(dir_path).await.map_err(|e| {
            Error::invalid(
                "location",
                format!(
                    "{location}: its directory {} cannot be used: {e}",
                    dir_path.display()
                ),
            )
            .context(ctx("archive"))
        })?;
        let cname = cstring(name.as_encoded_bytes())?;
        if exists_at(&dir, &cname) {
            return Err(Error::already_exists(format!(
                "{}: {location} exists already (a checkpoint never replaces a file)",
                ctx("archive")
            )));
        }
        let temp =
            cstring(format!(".{}.podscope-{}", name.to_string_lossy(), c.id.short()).as_bytes())?;
        let out = create_at(&dir, &temp).map_err(|e| {
            Error::invalid(
                "location",
                format!(
                    "{location}: its directory {} cannot be written: {e}",
                    dir_path.display()
                ),
            )
            .context(ctx("archive"))
        })?;
        let work = self.bundle(&c.id).join(WORK_DIR);
        let _ = crate::state::files::remove_tree_on_one_fs(&work);
        let mut left = Leftovers {
            dir: Some(dir),
            temp: Some(temp.clone()),
            work: work.clone(),
        };
        let (images, criu_work) = (work.join("images"), work.join("work"));
        for d in [&images, &criu_work] {
            std::fs::create_dir_all(d).map_err(|e| {
                Error::io(
                    format!("{}: create {}", ctx("work directory"), d.display()),
                    e,
                )
            })?;
        }

        // Paused while it is dumped and its files archived (a container
        // left running): one that went on writing files between the dump
        // and the diff would leave an archive whose files disagree with its
        // memory, and CRIU refuses a restore where an open file changed size
        // (CRI-O pauses likewise). CRIU leaves a cgroup it found frozen so.
        // Where the temporary archive is, for a recovery after the daemon
        // died here (`recover_cut_short`).
        std::fs::write(
            work.join(TEMP_NAMED),
            dir_path
                .join(temp.to_string_lossy().as_ref())
                .as_os_str()
                .as_encoded_bytes(),
        )
        .map_err(|e| Error::io(format!("{}: write {TEMP_NAMED}", ctx("work directory")), e))?;
        let paused = !options.stop;
        if paused {
            self.freeze(&c).await.map_err(|e| e.context(ctx("pause")))?;
        }
        failpoint::hit(failpoint::CTR_CHECKPOINT_FROZEN);
        let r: Result<()> = async {
            // The dump.
            let t0 = std::time::Instant::now();
            let timeout = match options.timeout_ms {
                0 => self.settings.stop_timeout(),
                ms => Duration::from_millis(ms),
            }
            .max(TIMEOUT_MIN);
            info!(
                container_id = %c.id,
                step = "dump",
                "container {} ({}): checkpoint: dumping with runtime {handler_name} into {location}",
                c.id,
                c.config.name
            );
            if let Err(e) = self
                .dump(
                    &c,
                    handler_name,
                    handler,
                    &images,
                    &criu_work,
                    options.stop,
                    timeout,
                )
                .await
            {
                warn!(container_id = %c.id, step = "dump", "{}: {e}", ctx("dump"));
                return Err(e.context(ctx("dump")));
            }
            let dump_us = t0.elapsed().as_micros() as u64;

            // The files, the metadata, the archive.
            let upper = rootfs::Dirs::of(&self.bundle(&c.id)).upper;
            let spec_path = self.bundle(&c.id).join("config.json");
            let mut spec: serde_json::Value = std::fs::read(&spec_path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| {
                    Error::internal(format!("{}: read {}", ctx("spec"), spec_path.display()))
                })?;
            let created = logs::timestamp(std::time::UNIX_EPOCH + Duration::from_micros(c.created_at));
            archive::annotate_spec(
                &mut spec,
                &archive::Names {
                    container: &c.config.name,
                    attempt: c.config.attempt,
                    pod_namespace: &sb.config.namespace,
                    pod_name: &sb.config.name,
                    pod_id: sb.id.as_str(),
                    created: &created,
                    ip: sb.network.ips.first().map(String::as_str),
                },
            );
            let config_dump = archive::ConfigDump {
                id: c.id.to_string(),
                name: c.config.name.clone(),
                rootfs_image: c.config.image.clone(),
                rootfs_image_ref: c.image_id.clone(),
                rootfs_image_name: c.image_name.clone(),
                runtime: handler
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                created_time: created,
                checkpointed_time: logs::timestamp(std::time::SystemTime::now()),
                restored_time: archive::GO_ZERO_TIME.into(),
                restored: false,
            };
            let t1 = std::time::Instant::now();
            let diff = work.join("rootfs-diff.tar");
            let dump_log = criu_work.join(archive::DUMP_LOG);
            let stats_dump = criu_work.join(archive::STATS_DUMP);
            let mut out = out;
            let limits = self.layer_limits();
            let written = tokio::task::spawn_blocking(move || {
                let f =
                    std::fs::File::create(&diff).map_err(|e| Error::io("create rootfs-diff.tar", e))?;
                let deleted = archive::rootfs_diff(&upper, f, &limits)?;
                archive::write(
                    &mut out,
                    &archive::Contents {
                        config_dump: &config_dump,
                        spec_dump: &spec,
                        images: &images,
                        rootfs_diff: &diff,
                        deleted: &deleted,
                        dump_log: Some(&dump_log),
                        stats_dump: Some(&stats_dump),
                    },
                    podscope_oci::checkpoint_seal::Sealer::new(&key),
                )
                .map_err(|e| Error::io("write the archive", e))?;
                Ok::<_, Error>(out.metadata().map(|m| m.len()).unwrap_or(0))
            })
            .await
            .map_err(|e| Error::internal(format!("{}: {e}", ctx("archive"))))?
            .map_err(|e| e.context(ctx("archive")))?;
            let dir = left.dir.as_ref().expect("held");
            rename_noreplace(dir, &temp, &cname).map_err(|e| {
                if e.raw_os_error() == Some(libc::EEXIST) {
                    Error::already_exists(format!(
                        "{}: {location} was made by someone else meanwhile",
                        ctx("archive")
                    ))
                } else {
                    Error::io(format!("{}: rename into {location}", ctx("archive")), e)
                }
            })?;
            left.temp = None;
            // SAFETY: fsync on a directory we hold.
            unsafe { libc::fsync(dir.as_raw_fd()) };
            info!(
                event = podscope_sys::logging::event::CONTAINER_CHECKPOINTED,
                container_id = %c.id,
                sandbox_id = %c.pod_id,
                step = "done",
                archive = %location,
                archive_bytes = written,
                dump_us,
                archive_us = t1.elapsed().as_micros() as u64,
                "container {} ({}) checkpointed into {location} ({written} bytes){}",
                c.id,
                c.config.name,
                if options.stop { ", and stopped" } else { "" }
            );
            Ok(())
        }
        .await;
        // Thawed once the archive is whole, or after any failure (a dump
        // cut short may leave it frozen too).
        if paused || r.is_err() {
            self.thaw(&c).await;
        }
        r
    }

    /// The container's process must be its PID namespace's only tree:
    /// CRIU dumps a namespace whole, and one shared with its pod's init or
    /// another container cannot be restored apart from them.
    fn alone_in_its_pid_namespace(&self, c: &Container, sb: &Sandbox) -> Result<()> {
        let spec: serde_json::Value = std::fs::read(self.bundle(&c.id).join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let pid_ns = spec["linux"]["namespaces"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["type"] == "pid"));
        let shared = match pid_ns {
            None => Some("the node's".to_owned()),
            Some(ns) => ns["path"].as_str().map(|p| {
                if sb.config.pid_namespace == podscope_api::domain::NamespaceMode::Pod
                    && c.config.security.pid_namespace == podscope_api::domain::NamespaceMode::Pod
                {
                    "its pod's (shared with the pod's init and its other containers)".to_owned()
                } else {
                    format!("another container's ({p})")
                }
            }),
        };
        if let Some(whose) = shared {
            return Err(Error::invalid_state(format!(
                "container {} runs in {whose} PID namespace, which CRIU cannot dump apart from the other processes in it (checkpoint containers with a PID namespace of their own)",
                c.id
            )));
        }
        let targeted = self.of_pod(&c.pod_id).into_iter().find(|e| {
            e.id != c.id
                && e.with(|o| {
                    o.state == ContainerState::Running
                        && !o.config.security.pid_target.is_empty()
                        && c.id.as_str().starts_with(&o.config.security.pid_target)
                })
        });
        if let Some(o) = targeted {
            return Err(Error::invalid_state(format!(
                "container {} shares its PID namespace with container {} (its target), which CRIU cannot dump apart",
                c.id, o.id
            )));
        }
        Ok(())
    }

    /// The runtime's checkpoint in a oneshot unit of its own; the
    /// runtime's and CRIU's own words when it fails.
    #[allow(clippy::too_many_arguments)]
    async fn dump(
        &self,
        c: &Container,
        handler_name: &str,
        handler: &podscope_config::RuntimeHandler,
        images: &Path,
        work: &Path,
        stop: bool,
        timeout: Duration,
    ) -> Result<()> {
        let log = work.join("runtime.log");
        let log_arg = format!("--log={}", log.display());
        let (images_s, work_s) = (images.display().to_string(), work.display().to_string());
        let mut verb: Vec<&str> = vec![&log_arg, "checkpoint"];
        if !stop {
            verb.push("--leave-running");
        }
        verb.extend([
            "--image-path",
            &images_s,
            "--work-path",
            &work_s,
            c.id.as_str(),
        ]);
        let unit = dump_unit(&c.id);
        let props = vec![
            (
                "Description",
                Prop::Str(format!(
                    "podscope checkpoint of container {}/{} ({})",
                    c.pod_name,
                    c.config.name,
                    c.id.short()
                )),
            ),
            ("Slice", Prop::Str(self.settings.default_slice.clone())),
            ("Type", Prop::Str("oneshot".into())),
            (
                "ExecStart",
                Prop::Exec(vec![unit::command(handler, &verb, false)]),
            ),
            ("StandardInput", Prop::Str("null".into())),
            ("TimeoutStartUSec", Prop::U64(timeout.as_micros() as u64)),
            ("KillMode", Prop::Str("control-group".into())),
            ("CollectMode", Prop::Str("inactive-or-failed".into())),
        ];
        let r = self.systemd.start_transient(&unit, props, timeout).await;
        let Err(e) = r else {
            return Ok(());
        };
        let _ = self.force_stop(&unit).await;
        let _ = self.systemd.reset_failed(&unit).await;
        let said = std::fs::read_to_string(&log)
            .ok()
            .and_then(|l| super::start::runtime_message(&l))
            .unwrap_or_default();
        let criu_log = std::fs::read_to_string(work.join("dump.log"))
            .map(|l| archive::log_tail(&l))
            .unwrap_or_default();
        warn!(
            container_id = %c.id,
            step = "dump",
            runtime_said = %said,
            criu_said = %criu_log,
            "container {}: checkpoint failed: {e}",
            c.id
        );
        if e.kind() == ErrorKind::Timeout {
            return Err(Error::timeout(format!(
                "runtime {handler_name}: the dump did not finish in {} s; stopped",
                timeout.as_secs()
            )));
        }
        let lower = said.to_lowercase();
        if lower.contains("criu") && (lower.contains("not found") || lower.contains("no such file"))
        {
            return Err(Error::new(
                ErrorKind::RuntimeFailed,
                format!(
                    "runtime {handler_name}: CRIU is not installed (install Debian's criu; runc runs `criu` from PATH or its --criu path): {said}"
                ),
            ));
        }
        let mut msg = format!("runtime {handler_name}: CRIU could not dump the container");
        if !said.is_empty() {
            msg.push_str(&format!(": {said}"));
        }
        if !criu_log.is_empty() {
            msg.push_str(&format!("; CRIU's dump.log: {criu_log}"));
        }
        if said.is_empty() && criu_log.is_empty() {
            msg.push_str(&format!(": {e}"));
        }
        Err(Error::new(ErrorKind::RuntimeFailed, msg))
    }

    /// At recovery, a running container whose checkpoint the daemon's end
    /// cut short (its working directory is there): the dump's unit
    /// stopped, the container thawed, the temporary archive and the
    /// working directory removed. Whether one was found.
    pub(super) async fn recover_cut_short(&self, c: &Container) -> bool {
        let work = self.bundle(&c.id).join(WORK_DIR);
        if !work.is_dir() {
            return false;
        }
        let unit = dump_unit(&c.id);
        let _ = self.force_stop(&unit).await;
        let _ = self.systemd.reset_failed(&unit).await;
        self.thaw(c).await;
        if let Ok(temp) = std::fs::read(work.join(TEMP_NAMED)) {
            let temp = PathBuf::from(std::ffi::OsString::from_vec(temp));
            if let (Some(dir), Some(name)) = (temp.parent(), temp.file_name()) {
                if let (Ok(fd), Ok(name)) = (
                    self.hostns.open_dir(dir).await,
                    cstring(name.as_encoded_bytes()),
                ) {
                    // SAFETY: unlinkat on a directory we hold, a valid C string.
                    unsafe { libc::unlinkat(fd.as_raw_fd(), name.as_ptr(), 0) };
                }
            }
        }
        let _ = crate::state::files::remove_tree_on_one_fs(&work);
        warn!(
            container_id = %c.id,
            step = "recover-checkpoint",
            "container {} ({}): a checkpoint cut short by the daemon's end: its dump stopped, the container thawed, its temporary archive removed",
            c.id,
            c.config.name
        );
        true
    }

    /// The container's freezer: the file that freezes and thaws it, the
    /// words for each, and the file that says when it is frozen.
    fn freezer(&self, c: &Container) -> Freezer {
        let cg = c.cgroup_path();
        let cg = cg.trim_start_matches('/');
        if self.cgroup_v2 {
            let dir = Path::new(unified::CGROUP_V2_ROOT).join(cg);
            Freezer {
                control: dir.join("cgroup.freeze"),
                freeze: "1",
                thaw: "0",
                state: dir.join("cgroup.events"),
            }
        } else {
            let f = Path::new("/sys/fs/cgroup/freezer")
                .join(cg)
                .join("freezer.state");
            Freezer {
                control: f.clone(),
                freeze: "FROZEN",
                thaw: "THAWED",
                state: f,
            }
        }
    }

    /// Freeze the container's cgroup and wait until it is frozen.
    async fn freeze(&self, c: &Container) -> Result<()> {
        let f = self.freezer(c);
        self.hostns.write(&f.control, f.freeze.as_bytes()).await?;
        let end = std::time::Instant::now() + FREEZE_WITHIN;
        loop {
            let state = std::fs::read_to_string(&f.state).unwrap_or_default();
            if Freezer::frozen(&state) {
                return Ok(());
            }
            if std::time::Instant::now() > end {
                self.thaw(c).await;
                return Err(Error::timeout(format!(
                    "its cgroup did not freeze within {} s ({}: {:?}); thawed",
                    FREEZE_WITHIN.as_secs(),
                    f.state.display(),
                    state.trim()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Thaw the container's cgroup, best effort.
    /// Thaw it; a write that fails (its cgroup gone with it, or the kernel
    /// refusing) is the journal's: the container is left as it is, and
    /// its unit's stop still kills it.
    async fn thaw(&self, c: &Container) {
        let f = self.freezer(c);
        if let Err(e) = self.hostns.try_write(&f.control, f.thaw.as_bytes()).await {
            warn!(
                container_id = %c.id,
                step = "thaw",
                "container {} ({}): checkpoint: thaw through {}: {e}",
                c.id,
                c.config.name,
                f.control.display()
            );
        }
    }
}

fn cstring(b: &[u8]) -> Result<std::ffi::CString> {
    std::ffi::CString::new(b).map_err(|_| Error::invalid("location", "contains a NUL byte"))
}

/// Whether `name` exists in `dir` (a dangling link too).
fn exists_at(dir: &OwnedFd, name: &std::ffi::CStr) -> bool {
    // SAFETY: fstatat into a zeroed stat we own.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
    }
}

/// A new file `name` in `dir`, 0600, never through a link.
fn create_at(dir: &OwnedFd, name: &std::ffi::CStr) -> std::io::Result<std::fs::File> {
    // SAFETY: openat with a valid C string; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// renameat2(RENAME_NOREPLACE) within `dir`.
fn rename_noreplace(
    dir: &OwnedFd,
    from: &std::ffi::CStr,
    to: &std::ffi::CStr,
) -> std::io::Result<()> {
    // SAFETY: renameat2 on a directory we hold, valid C strings.
    let r = unsafe {
        libc::renameat2(
            dir.as_raw_fd(),
            from.as_ptr(),
            dir.as_raw_fd(),
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Freezer;

    #[test]
    fn frozen_as_v1_and_v2_say_it() {
        assert!(Freezer::frozen("FROZEN\n"));
        assert!(!Freezer::frozen("FREEZING\n"));
        assert!(!Freezer::frozen("THAWED\n"));
        assert!(Freezer::frozen("populated 1\nfrozen 1\n"));
        assert!(!Freezer::frozen("populated 1\nfrozen 0\n"));
    }
}
