//! StartContainer: the log pipes made and also held by the pod's init, the
//! log file opened (as the host sees it), the pod's /dev/shm and the
//! container's root mounted, the OOM watch set, then the unit started (the
//! OCI runtime's `create` leaves the container's process, waiting, as the
//! unit's main process), then the runtime's `start` run: Running. A failure undoes it all and leaves the container
//! Exited with reason StartError and the runtime's own message.

use super::*;
use logs::Stream;
use podscope_api::domain::container::REASON_START_ERROR;
use std::os::fd::{AsFd, OwnedFd};

/// How long the runtime may take to hand over a TTY container's terminal.
const CONSOLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A start in progress: what to undo if it fails, and how long each step
/// took (µs: the log file, the pipes and their holding, the pod's shm, the
/// root, the OOM watch, the unit's job, the runtime's start, reading the
/// unit back).
#[derive(Default)]
struct Started {
    unit: bool,
    rootfs: bool,
    /// A v1 hugetlb cgroup may have been made for it.
    hugetlb: bool,
    /// A cgroup in a cpuacct hierarchy apart from cpu may have been made
    /// for it.
    cpuacct: bool,
    held: bool,
    live: Option<Live>,
    /// µs of: the log file, the pipes, the pod's /dev/shm + the root +
    /// the OOM watch (alongside), the unit, its status, the runtime's start.
    steps: [u64; 6],
    /// µs of each part of the third step, made alongside: the pod's
    /// /dev/shm, the root, the OOM watch, the cpuacct cgroup.
    prepare: [u64; 4],
}

/// Await `f`, and how long it took (µs).
async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, u64) {
    let t0 = std::time::Instant::now();
    let out = f.await;
    (out, t0.elapsed().as_micros() as u64)
}

impl<S: SystemdClient + Clone> Containers<S> {
    /// Start a created container: Running.
    pub async fn start(&self, entry: &Arc<ContainerEntry>) -> Result<()> {
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
        let c = entry.snapshot();
        match c.state {
            ContainerState::Created => {}
            ContainerState::Running => {
                return Err(Error::invalid_state(format!(
                    "container {} is already running",
                    c.id
                )))
            }
            ContainerState::Exited | ContainerState::Unknown => {
                return Err(Error::invalid_state(format!(
                    "container {} has exited; a container is started once (create a new one)",
                    c.id
                )))
            }
        }
        let sb = pod.snapshot();
        self.ready_pod(&sb)?;
        let t0 = std::time::Instant::now();
        let mut started = Started::default();
        match self.start_steps(&c, &sb, &mut started).await {
            Ok(next) => {
                let live = started
                    .live
                    .take()
                    .expect("a started container has its readers");
                self.live.lock().unwrap().insert(c.id.clone(), live);
                if let Err(e) = self.persist(entry, next) {
                    let e = e.context(format!("container {}: start: save checkpoint", c.id));
                    self.fail_start(
                        entry,
                        Started {
                            unit: true,
                            rootfs: true,
                            hugetlb: !c.resources.hugepage_limits.is_empty(),
                            cpuacct: true,
                            held: true,
                            live: None,
                            steps: [0; 6],
                            prepare: [0; 4],
                        },
                        &e,
                    )
                    .await;
                    return Err(e);
                }
                failpoint::hit(failpoint::CTR_START_DONE);
                let [log_us, pipes_us, prepare_us, unit_us, status_us, start_us] = started.steps;
                let [shm_us, root_us, oom_us, cpuacct_us] = started.prepare;
                info!(
                    event = podscope_sys::logging::event::CONTAINER_STARTED,
                    container_id = %c.id,
                    sandbox_id = %c.pod_id,
                    unit = %c.unit(),
                    main_pid = entry.with(|c| c.main_pid),
                    log_us,
                    pipes_us,
                    prepare_us,
                    shm_us,
                    root_us,
                    oom_us,
                    cpuacct_us,
                    unit_us,
                    status_us,
                    start_us,
                    elapsed_us = t0.elapsed().as_micros() as u64,
                    "container {} ({}) started in {} µs",
                    c.id,
                    c.config.name,
                    t0.elapsed().as_micros()
                );
                self.emit(Event::ContainerChanged(
                    c.id.clone(),
                    ContainerState::Running,
                ));
                // A container quicker than its start (it exited already)
                // is recorded so now; its unit's events may be in the past.
                if let Err(e) = self.observe_exit(entry).await {
                    warn!(container_id = %c.id, "container {}: {e}", c.id);
                }
                Ok(())
            }
            Err(e) => {
                self.fail_start(entry, started, &e).await;
                Err(e)
            }
        }
    }

    async fn start_steps(
        &self,
        c: &Container,
        sb: &Sandbox,
        st: &mut Started,
    ) -> Result<Container> {
        let ctx = |step: &str| format!("container {} ({}): start: {step}", c.id, c.config.name);
        let (handler_name, handler) = self.runtime_of(sb)?;
        let run_dir = self.run_dir(&c.id);
        if let Err(e) = std::fs::create_dir_all(&run_dir) {
            return Err(Error::io(
                format!("{}: create {}", ctx("run directory"), run_dir.display()),
                e,
            ));
        }
        let runtime_log = run_dir.join("runtime.log");
        let _ = std::fs::remove_file(&runtime_log);
        let mut lap = std::time::Instant::now();
        let mut step = |st: &mut Started, i: usize| {
            st.steps[i] = lap.elapsed().as_micros() as u64;
            lap = std::time::Instant::now();
        };

        // The log file, where the host sees it (kubelet's /var/log/pods,
        // a client's /tmp).
        let file = match c.log_path.as_str() {
            "" => None,
            p => Some(std::fs::File::from(
                self.hostns
                    .open_log(&self.settings.log_root, Path::new(p))
                    .await
                    .map_err(|e| {
                        Error::invalid(
                            "log_path",
                            format!("{p}: the log file cannot be written: {e}"),
                        )
                        .context(ctx("log file"))
                    })?,
            )),
        };
        let log = LogFile::new(file);
        step(st, 0);

        // Pipes: the write ends go to systemd for the unit, the read ends
        // are read here and held by the pod's init as well.
        let io = |what: &'static str| {
            move |e: std::io::Error| Error::io(format!("{}: {what}", ctx("pipes")), e)
        };
        let (out_r, out_w) = podscope_sys::pipe::pipe().map_err(io("stdout"))?;
        let (err_r, err_w) = podscope_sys::pipe::pipe().map_err(io("stderr"))?;
        let stdin = if c.config.stdin {
            Some(podscope_sys::pipe::pipe().map_err(io("stdin"))?)
        } else {
            None
        };
        // stdin's write end under a name of its own: stdin_once lets go
        // of it alone.
        let hold: Vec<std::os::fd::BorrowedFd<'_>> = vec![out_r.as_fd(), err_r.as_fd()];
        let sock = holder::socket_path(&self.pod_dir(&sb.id));
        let name = Self::holding(&c.id);
        let held: Vec<OwnedFd> = hold
            .iter()
            .map(|f| f.try_clone_to_owned())
            .collect::<std::io::Result<_>>()
            .map_err(io("duplicate"))?;
        let held_stdin = match &stdin {
            Some((_, w)) => Some(w.try_clone().map_err(io("duplicate"))?),
            None => None,
        };
        match tokio::task::spawn_blocking(move || {
            let b: Vec<_> = held.iter().map(|f| f.as_fd()).collect();
            holder::hold(&sock, &name, &b)?;
            if let Some(w) = held_stdin {
                holder::hold(&sock, &format!("{name}-stdin"), &[w.as_fd()])?;
            }
            Ok::<_, std::io::Error>(())
        })
        .await
        {
            Ok(Ok(())) => st.held = true,
            Ok(Err(e)) => warn!(
                container_id = %c.id,
                "container {}: the pod's init does not hold its log pipes ({e}): a write while podscoped is stopped would find no reader",
                c.id
            ),
            Err(e) => warn!(container_id = %c.id, "container {}: hold task: {e}", c.id),
        }
        let (tx, rx) = watch::channel(End::Running);
        let tap = Arc::new(logs::Tap::default());
        let mut readers = Vec::new();
        for (fd, stream) in [(out_r, Stream::Stdout), (err_r, Stream::Stderr)] {
            podscope_sys::pipe::set_nonblocking(&fd).map_err(io("non-blocking"))?;
            readers.push(tokio::spawn(logs::read_stream(
                fd,
                stream,
                log.clone(),
                rx.clone(),
                tap.clone(),
            )));
        }
        let (stdin_r, stdin_w) = match stdin {
            Some((r, w)) => (Some(r), Some(w)),
            None => (None, None),
        };
        st.live = Some(Live {
            end: tx,
            log: log.clone(),
            readers,
            oom: None,
            stdin: stdin_w,
            tty: None,
            tap,
        });
        step(st, 1);
        failpoint::hit(failpoint::CTR_START_LOGS_READY);

        // The pod's /dev/shm, the root and the OOM watch are independent
        // (each a child in the host's namespace): made alongside.
        let host_ipc = pod_view(&self.settings, sb).host_ipc;
        let dirs = rootfs::Dirs::of(&self.bundle(&c.id));
        let layers: Vec<podscope_api::reference::Digest> = c
            .layers
            .iter()
            .map(|l| podscope_api::reference::Digest::parse(l))
            .collect::<Result<_>>()
            .map_err(|e| {
                Error::internal(format!("{}: a layer id in the record: {e}", ctx("root")))
            })?;
        // A pod with a user namespace of its own: its mapping, for the
        // idmapped layers of the root and the image volumes.
        let userns = match &sb.config.user_namespace {
            Some(u) => Some((
                crate::host::idmap::create(&u.uids, &u.gids)
                    .map_err(|e| Error::io(ctx("the pod's user namespace"), e))?,
                u.root_on_host().ok_or_else(|| {
                    Error::internal(format!("{}: the pod's root is not mapped", ctx("root")))
                })?,
            )),
            None => None,
        };
        let idmap = userns
            .as_ref()
            .map(|(ns, root)| rootfs::Idmapped { ns, root: *root });
        st.rootfs = true;
        let cgroup_path = c.cgroup_path();
        // runc joins every v1 hierarchy at its cgroupsPath itself.
        let cpuacct_root = self
            .cpuacct_root
            .as_deref()
            .filter(|_| handler.kind() == Some(RuntimeKind::Crun));
        st.cpuacct = cpuacct_root.is_some();
        let ((shm, shm_us), (root, root_us), (oom, oom_us), (acct, acct_us)) = tokio::join!(
            timed(async {
                if host_ipc {
                    Ok(())
                } else {
                    self.ensure_pod_shm(sb).await
                }
            }),
            timed(async {
                rootfs::mount(
                    &self.hostns,
                    &self.images.store,
                    &layers,
                    &dirs,
                    idmap.as_ref(),
                )
                .await?;
                rootfs::mount_volumes(
                    &self.hostns,
                    &self.images.store,
                    &c.volumes,
                    &c.config.mounts,
                    &dirs,
                    idmap.as_ref(),
                )
                .await
            }),
            timed(oom::watch(&self.hostns, self.oom_layout, &cgroup_path)),
            timed(async {
                match cpuacct_root {
                    Some(root) => Some(cpuacct::prepare(&self.hostns, root, &cgroup_path).await),
                    None => None,
                }
            }),
        );
        st.prepare = [shm_us, root_us, oom_us, acct_us];
        step(st, 2);
        let failed = match (shm, root) {
            (Err(e), _) => Some(e.context(ctx("the pod's /dev/shm"))),
            (_, Err(e)) => Some(e.context(ctx("mount the root"))),
            _ => None,
        };
        if let Some(e) = failed {
            // The watch (ended as it drops) made the unit's memory cgroup,
            // for a unit that will not be started now.
            drop(oom);
            if let Some(dir) = oom::memory_dir(self.oom_layout, &cgroup_path) {
                let _ = self.hostns.remove_dir(&dir).await;
            }
            return Err(e);
        }
        failpoint::hit(failpoint::CTR_START_ROOTFS_MOUNTED);
        match oom {
            Ok(w) => st.live.as_mut().expect("set above").oom = w,
            Err(e) => warn!(container_id = %c.id, "container {}: no OOM watch: {e}", c.id),
        }

        let console = if c.config.tty {
            let path = run_dir.join("console.sock");
            let _ = std::fs::remove_file(&path);
            let l = tokio::net::UnixListener::bind(&path).map_err(|e| {
                Error::io(
                    format!("{}: listen on {}", ctx("console socket"), path.display()),
                    e,
                )
            })?;
            Some((path, l))
        } else {
            None
        };
        let unified = unified::plan(&c.resources.unified).map_err(|e| e.context(ctx("limits")))?;
        let restoring = !c.restored_from.is_empty();
        let (restore_images, restore_work, restore_pid) = (
            dirs.bundle.join(super::restore::IMAGES),
            run_dir.join(super::restore::WORK),
            run_dir.join("restore.pid"),
        );
        if restoring {
            std::fs::create_dir_all(&restore_work).map_err(|e| {
                Error::io(
                    format!("{}: create {}", ctx("restore"), restore_work.display()),
                    e,
                )
            })?;
        }
        let props = unit::properties(unit::UnitSpec {
            description: format!(
                "podscope container {}/{} ({})",
                c.pod_name,
                c.config.name,
                c.id.short()
            ),
            slice: &c.slice,
            runtime: handler,
            id: c.id.as_str(),
            bundle: &dirs.bundle,
            runtime_log: &runtime_log,
            console_socket: console.as_ref().map(|(p, _)| p.as_path()),
            stop_signal: c.stop_signal,
            stdin: stdin_r.map(Arc::new),
            stdout: Some(Arc::new(out_w)),
            stderr: Some(Arc::new(err_w)),
            devices: c
                .config
                .devices
                .iter()
                .map(|d| (d.host_path.clone(), d.permissions.clone()))
                .chain(c.cdi.device_allow.iter().cloned())
                .collect(),
            privileged: c.config.security.privileged,
            start_timeout_usec: self.settings.start_timeout_ms * 1000,
            stop_timeout_usec: self.settings.stop_timeout_ms * 1000,
            limits: unified::merged(limit_properties(&c.resources), &unified),
            restore: restoring.then(|| unit::Restoring {
                images: &restore_images,
                work: &restore_work,
                pid_file: &restore_pid,
            }),
        });
        let unit = c.unit();
        let console_task = console.map(|(_, l)| tokio::spawn(receive_console(l)));
        st.unit = true;
        if let Err(e) = self
            .systemd
            .start_transient(&unit, props, self.settings.start_timeout())
            .await
        {
            // The runtime's own words say why (a command not found in the
            // image, a mount it could not make).
            let said = std::fs::read_to_string(&runtime_log).unwrap_or_default();
            let mut said = runtime_message(&said).unwrap_or_else(|| log.tail());
            if restoring {
                let criu = std::fs::read_to_string(restore_work.join("restore.log"))
                    .map(|l| archive::log_tail(&l))
                    .unwrap_or_default();
                warn!(
                    container_id = %c.id,
                    step = "restore",
                    runtime_said = %said,
                    criu_said = %criu,
                    "container {}: restore from {} failed",
                    c.id,
                    c.restored_from
                );
                if !criu.is_empty() {
                    said = format!("{said}; CRIU's restore.log: {criu}");
                }
            }
            return Err(if said.is_empty() {
                e.context(ctx("unit"))
            } else {
                Error::new(
                    ErrorKind::RuntimeFailed,
                    format!("{}: runtime {handler_name}: {said}", ctx("run")),
                )
            });
        }
        step(st, 3);
        failpoint::hit(failpoint::CTR_START_UNIT_STARTED);

        if let Some(task) = console_task {
            let master = tokio::time::timeout(CONSOLE_TIMEOUT, task)
                .await
                .map_err(|_| {
                    Error::timeout(format!("{}: the runtime sent no terminal", ctx("console")))
                })?
                .map_err(|e| Error::internal(format!("{}: {e}", ctx("console"))))?
                .map_err(|e| Error::io(ctx("console"), e))?;
            let dup = master.try_clone().map_err(io("terminal"))?;
            let sock = holder::socket_path(&self.pod_dir(&sb.id));
            let name = format!("{}-tty", Self::holding(&c.id));
            let _ = tokio::task::spawn_blocking(move || holder::hold(&sock, &name, &[dup.as_fd()]))
                .await;
            podscope_sys::pipe::set_nonblocking(&master).map_err(io("terminal"))?;
            let live = st.live.as_mut().expect("set above");
            live.tty = Some(master.try_clone().map_err(io("terminal"))?);
            live.readers.push(tokio::spawn(logs::read_stream(
                master,
                Stream::Stdout,
                log.clone(),
                live.end.subscribe(),
                live.tap.clone(),
            )));
        }

        // The unit's main process is the container's, created and waiting
        // for the start.
        let status = self
            .systemd
            .service_status(&unit)
            .await
            .map_err(|e| e.context(ctx("read the unit")))?;
        step(st, 4);
        // Counted in cpuacct from its first instruction on (CPU accounting
        // only: a failure is said, not fatal).
        let main_pid = status.as_ref().map_or(0, |s| s.main_pid);
        match acct {
            Some(Ok(procs)) if main_pid > 0 => {
                if let Err(e) = cpuacct::join(&procs, main_pid) {
                    warn!(container_id = %c.id, "container {}: its cpuacct cgroup: {e}", c.id);
                }
            }
            Some(Err(e)) => {
                warn!(container_id = %c.id, "container {}: its cpuacct cgroup: {e}", c.id)
            }
            _ => {}
        }
        if !c.resources.hugepage_limits.is_empty() {
            st.hugetlb = true;
            hugetlb::apply(
                &self.hostns,
                &self.hugetlb_layout,
                &c.cgroup_path(),
                &c.resources.hugepage_limits,
                &[main_pid],
                &ctx("limits"),
            )
            .await?;
        }
        // unified's other files, before the container's command runs.
        unified::write_files(&self.hostns, &c.cgroup_path(), &unified)
            .await
            .map_err(|e| e.context(ctx("limits")))?;
        if restoring {
            // Restored running: no start. Its images are not needed again.
            let _ = crate::state::files::remove_tree_on_one_fs(&restore_images);
            info!(
                event = podscope_sys::logging::event::CONTAINER_RESTORED,
                container_id = %c.id,
                sandbox_id = %c.pod_id,
                step = "restore",
                archive = %c.restored_from,
                "container {} ({}) restored from {}",
                c.id,
                c.config.name,
                c.restored_from
            );
        } else {
            runtime::start(
                handler,
                &runtime_log,
                c.id.as_str(),
                self.settings.start_timeout(),
            )
            .await
            .map_err(|e| e.context(ctx(&format!("runtime {handler_name}"))))?;
        }
        step(st, 5);
        let mut next = c.clone();
        next.state = ContainerState::Running;
        next.started_at = status
            .as_ref()
            .map(|s| s.exec_main_start_usec)
            .filter(|t| *t > 0)
            .unwrap_or_else(podscope_api::domain::sandbox::now_usec);
        next.main_pid = status.map(|s| s.main_pid).unwrap_or(0);
        Ok(next)
    }

    /// Undo a start that failed, and record it: Exited, StartError.
    async fn fail_start(&self, entry: &ContainerEntry, st: Started, cause: &Error) {
        let c = entry.snapshot();
        let unit = c.unit();
        if st.unit {
            if let Err(e) = self.force_stop(&unit).await {
                warn!(container_id = %c.id, "container {}: cleaning up after a failed start: {e}", c.id);
            }
        }
        if st.hugetlb {
            if let Err(e) =
                hugetlb::remove(&self.hostns, &self.hugetlb_layout, &c.cgroup_path()).await
            {
                warn!(container_id = %c.id, "container {}: cleaning up after a failed start: {e}", c.id);
            }
        }
        if st.cpuacct {
            if let Err(e) = self.remove_cpuacct(&c).await {
                warn!(container_id = %c.id, "container {}: cleaning up after a failed start: {e}", c.id);
            }
        }
        if st.rootfs {
            if let Err(e) =
                rootfs::unmount(&self.hostns, &rootfs::Dirs::of(&self.bundle(&c.id))).await
            {
                warn!(container_id = %c.id, "container {}: cleaning up after a failed start: {e}", c.id);
            }
        }
        let live = st.live.or_else(|| self.live.lock().unwrap().remove(&c.id));
        if let Some(live) = live {
            let _ = live.end.send(End::Drain);
            for r in live.readers {
                let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
            }
        }
        if st.held {
            self.release_at_init(&c).await;
        }
        // The runtime's log, the console socket: what they said is in
        // the error already.
        let _ = std::fs::remove_dir_all(self.run_dir(&c.id));
        let mut next = c.clone();
        next.mark_exited(ContainerExit {
            code: 128,
            reason: REASON_START_ERROR.into(),
            message: cause.to_string(),
            finished_at: podscope_api::domain::sandbox::now_usec(),
        });
        if let Err(e) = self.persist(entry, next) {
            warn!(container_id = %c.id, "container {}: recording its failed start: {e}", c.id);
        }
        self.emit(Event::ContainerChanged(
            c.id.clone(),
            ContainerState::Exited,
        ));
    }

    /// The pod's /dev/shm: a tmpfs of its own, mounted with its first
    /// container (a pod with none needs none).
    async fn ensure_pod_shm(&self, sb: &Sandbox) -> Result<()> {
        let _one = self.shm_lock.lock().await;
        let shm = files::shm_path(&self.settings.run_dir, &sb.id);
        let dir = files::dir_of(&self.settings.run_dir, &sb.id);
        let mounted = |p: &Path| {
            use std::os::unix::fs::MetadataExt;
            matches!((std::fs::metadata(&dir), std::fs::metadata(p)), (Ok(a), Ok(b)) if a.dev() != b.dev())
        };
        if mounted(&shm) {
            return Ok(());
        }
        std::fs::create_dir_all(&shm)
            .map_err(|e| Error::io(format!("create {}", shm.display()), e))?;
        self.hostns
            .mount_tmpfs(
                &shm,
                &format!("mode=1777,size={}", self.settings.pod_shm_size),
            )
            .await
    }
}

/// The container's limits as unit properties.
pub(super) fn limit_properties(
    r: &podscope_api::domain::container::ContainerResources,
) -> Vec<(&'static str, Prop)> {
    let mut v: Vec<(&'static str, Prop)> = podscope_api::domain::resources::scope_properties(
        &r.as_pod_resources(),
        &Default::default(),
    )
    .into_iter()
    .map(|(k, v)| (k, Prop::U64(v)))
    .collect();
    if r.cpu_period > 0 && r.cpu_quota > 0 {
        v.push(("CPUQuotaPeriodUSec", Prop::U64(r.cpu_period)));
    }
    if let Some(mask) = unit::cpu_mask(&r.cpuset_cpus).filter(|m| !m.is_empty()) {
        v.push(("AllowedCPUs", Prop::Bytes(mask)));
    }
    if let Some(mask) = unit::cpu_mask(&r.cpuset_mems).filter(|m| !m.is_empty()) {
        v.push(("AllowedMemoryNodes", Prop::Bytes(mask)));
    }
    v
}

/// The runtime's message from its `--log` file: crun writes plain lines,
/// runc JSON (`{"level":"error","msg":"..."}`); the last error wins.
pub(super) fn runtime_message(log: &str) -> Option<String> {
    let mut last = None;
    for line in log.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            if let Some(m) = v.get("msg").and_then(|m| m.as_str()) {
                if v.get("level").and_then(|l| l.as_str()) != Some("debug") {
                    last = Some(m.to_owned());
                }
                continue;
            }
        }
        last = Some(line.to_owned());
    }
    last
}

/// Accept the runtime's connection on the console socket and take the
/// terminal's master it sends.
pub(super) async fn receive_console(l: tokio::net::UnixListener) -> std::io::Result<OwnedFd> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::{AsRawFd, FromRawFd, RawFd};
    let (stream, _) = l.accept().await?;
    loop {
        stream.readable().await?;
        let r = stream.try_io(tokio::io::Interest::READABLE, || {
            let mut buf = [0u8; 4096];
            let mut iov = [std::io::IoSliceMut::new(&mut buf)];
            let mut cspace = nix::cmsg_space!([RawFd; 1]);
            let msg = recvmsg::<()>(
                stream.as_raw_fd(),
                &mut iov,
                Some(&mut cspace),
                MsgFlags::MSG_CMSG_CLOEXEC,
            )
            .map_err(std::io::Error::from)?;
            for c in msg.cmsgs().map_err(std::io::Error::from)? {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    if let Some(fd) = fds.first() {
                        // SAFETY: a descriptor the kernel just gave us.
                        return Ok(Some(unsafe { OwnedFd::from_raw_fd(*fd) }));
                    }
                }
            }
            if msg.bytes == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the runtime closed the console socket without a terminal",
                ));
            }
            Ok(None)
        });
        match r {
            Ok(Some(fd)) => return Ok(fd),
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runtime_messages_from_either_runtime() {
        assert_eq!(
            super::runtime_message(
                "executable file `nope` not found in $PATH: No such file or directory\n"
            ),
            Some("executable file `nope` not found in $PATH: No such file or directory".into())
        );
        let runc = "{\"level\":\"debug\",\"msg\":\"nsexec\"}\n{\"level\":\"error\",\"msg\":\"runc run failed: exec: \\\"nope\\\": executable file not found\"}\n";
        assert_eq!(
            super::runtime_message(runc),
            Some("runc run failed: exec: \"nope\": executable file not found".into())
        );
        assert_eq!(super::runtime_message("\n"), None);
    }
}
