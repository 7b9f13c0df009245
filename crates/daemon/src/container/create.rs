//! CreateContainer: the pod ready, the image present and its layers held,
//! the user resolved from the image, the OCI spec written into a bundle of
//! its own, the checkpoint saved: Created. Nothing runs yet; a failure
//! undoes what was done.

use super::*;
use crate::host::apparmor::Node as AppArmorNode;
use podscope_api::domain::container::ProfileKind;
use podscope_api::error::IoResultExt;
use podscope_api::reference::Digest;
use podscope_oci::apparmor;
use podscope_oci::spec::LinuxDevice;
use podscope_oci::user::{resolve, UserRequest};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};

/// Largest /etc/passwd or /etc/group read from an image.
const ID_FILE_MAX: u64 = 4 << 20;
/// Largest Localhost seccomp profile.
const PROFILE_MAX: usize = podscope_oci::seccomp::MAX_PROFILE_BYTES;

/// Undoes a Create cut short, in reverse order, unless disarmed.
struct Undo<'a, S: SystemdClient + Clone> {
    c: &'a Containers<S>,
    id: ContainerId,
    key: Option<ContainerKey>,
    dir: bool,
    armed: bool,
}

impl<S: SystemdClient + Clone> Drop for Undo<'_, S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if self.dir {
            if let Err(e) = crate::state::files::remove_tree_on_one_fs(&self.c.bundle(&self.id)) {
                warn!(container_id = %self.id, "container {}: undoing its create: {e}", self.id);
            }
        }
        if let Some(key) = &self.key {
            self.c.registry.release(key);
        }
        self.c.images.release_layers(self.id.as_str());
    }
}

impl<S: SystemdClient + Clone> Containers<S> {
    /// Make a container in the pod `pod_id` names (a unique prefix will
    /// do): Created.
    pub async fn create(
        &self,
        pod_id: &str,
        mut config: ContainerConfig,
    ) -> Result<Arc<ContainerEntry>> {
        config.validate()?;
        // A restore: the archive checked whole, and the image it was made
        // from in place of its path.
        let restore = if podscope_api::container::is_checkpoint_archive(&config.image) {
            let r = self.open_archive(&config.image).await?;
            config.image = r.image.clone();
            Some(r)
        } else {
            None
        };
        // What can be known before anything is made: unified's values, and
        // its keys against the node's controllers.
        unified::plan(&config.resources.unified)?;
        unified::check_keys(
            &config.resources.unified,
            std::path::Path::new(unified::CGROUP_V2_ROOT),
        )?;
        let pod = self.pods.resolve(pod_id)?;
        let _gate = pod.members.read().await;
        let sb = pod.snapshot();
        if pod.is_removed() {
            return Err(Error::not_found(format!("no sandbox with id {pod_id}")));
        }
        self.ready_pod(&sb)?;
        if sb.config.user_namespace.is_some() {
            // Its root is the node's root only in name: devices, the
            // node's /sys and every capability are not the pod's to give
            // (Kubernetes refuses the same).
            if config.security.privileged {
                return Err(Error::invalid(
                    "security_context.privileged",
                    "a privileged container cannot run in a pod with a user namespace of its own",
                ));
            }
            if config.security.pid_namespace == podscope_api::domain::NamespaceMode::Node {
                return Err(Error::invalid(
                    "security_context.namespace_options.pid",
                    "a container of a pod with a user namespace of its own cannot use the node's PID namespace",
                ));
            }
        }
        let id = ContainerId::random();
        let name = config.name.clone();
        let ctx = |step: &str| format!("container {name} in sandbox {}: create: {step}", sb.id);
        let (handler_name, handler) = self.runtime_of(&sb)?;
        if let Some(r) = &restore {
            self.can_restore(handler_name, handler, r).await?;
        }
        // The CDI devices, resolved now against the spec files as they are
        // and their edits checked against the host: what is made is what
        // they said at this moment (a spec removed before Start changes
        // nothing), and a device that cannot be given stops the create
        // before anything exists.
        let cdi_names = config.cdi_requested()?;
        let cdi = if cdi_names.is_empty() {
            None
        } else {
            Some(
                self.cdi
                    .resolve(cdi_names)
                    .await
                    .map_err(|e| e.context(ctx("CDI devices")))?,
            )
        };
        if let Some(i) = config.mounts.iter().position(|m| m.recursive_read_only) {
            let f = crate::host::features::of(handler_name, handler).await;
            if !f.recursive_read_only_mounts {
                let why = f.why_not.iter().find(|w| w.starts_with("recursive"));
                return Err(Error::invalid(
                    &format!("mounts[{i}].recursive_read_only"),
                    format!(
                        "runtime handler {handler_name} cannot make recursive read-only mounts here ({})",
                        why.map_or("", String::as_str)
                    ),
                ));
            }
        }

        // The image, and its layers held from now on: a RemoveImage that
        // comes meanwhile takes the record, never the layers.
        let image = self
            .images
            .status(&config.image)
            .map_err(|e| e.context(ctx("image")))?;
        let layers: Vec<Digest> = image.layers.iter().map(|l| l.chain_id.clone()).collect();
        // Image volumes' images, held with the container's own.
        let mut volumes = Vec::new();
        let mut held = layers.clone();
        for (i, m) in config.mounts.iter().enumerate() {
            if m.image.is_empty() {
                continue;
            }
            let v = self.images.status(&m.image).map_err(|e| {
                Error::new(
                    e.kind(),
                    format!("mounts[{i}].image: {e} (an image volume's image is pulled first)"),
                )
                .context(ctx("image volume"))
            })?;
            let v_layers: Vec<Digest> = v.layers.iter().map(|l| l.chain_id.clone()).collect();
            // A sub path not in the image fails here, as kubelet expects
            // (CreateContainerError); Start checks the mounted overlay
            // again.
            if !m.image_sub_path.is_empty() {
                rootfs::image_dir(&self.images.store, &v_layers, &m.image_sub_path).map_err(
                    |why| {
                        Error::invalid(
                            &format!("mounts[{i}].image_sub_path"),
                            format!("{:?} {why} image {}", m.image_sub_path, v.id),
                        )
                    },
                )?;
            }
            held.extend(v_layers.iter().cloned());
            volumes.push(podscope_api::domain::container::ImageVolume {
                mount: i,
                image_id: v.id.to_string(),
                layers: v_layers.iter().map(|l| l.to_string()).collect(),
            });
        }
        self.images.hold_layers(id.as_str(), held.clone());
        let mut undo = Undo {
            c: self,
            id: id.clone(),
            key: None,
            dir: false,
            armed: true,
        };
        if let Some(gone) = held.iter().find(|l| !self.images.store.has_layer(l)) {
            return Err(Error::not_found(format!(
                "{}: layer {gone} of image {} was removed while the container was being made",
                ctx("image"),
                image.id
            )));
        }
        let run = self
            .images
            .run_config(&image)
            .map_err(|e| e.context(ctx("image config")))?;

        let store = &self.images.store;
        let text = |rel: &str| {
            rootfs::image_file(store, &layers, rel, ID_FILE_MAX)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        let (passwd, group) = (text("etc/passwd"), text("etc/group"));
        let s = &config.security;
        let user = resolve(
            &UserRequest {
                run_as_user: s.run_as_user,
                run_as_username: (!s.run_as_username.is_empty()).then(|| s.run_as_username.clone()),
                run_as_group: s.run_as_group,
                supplemental_groups: s.supplemental_groups.clone(),
                strict_groups: s.supplemental_groups_policy
                    == podscope_api::domain::container::GroupsPolicy::Strict,
                image_user: run.user.clone().unwrap_or_default(),
            },
            passwd.as_deref(),
            group.as_deref(),
        )
        .map_err(|e| Error::invalid("user", e).context(ctx("user")))?;

        let stop_signal = match run.stop_signal.as_deref().filter(|s| !s.is_empty()) {
            None => libc::SIGTERM,
            Some(sig) => spec::parse_signal(sig).ok_or_else(|| {
                Error::invalid("image", format!("its StopSignal {sig:?} is not a signal"))
                    .context(ctx("image config"))
            })?,
        };
        let caps = spec::capabilities(&config, &self.host_caps)?;
        let seccomp = match spec::seccomp_kind(&config) {
            None => None,
            Some(ProfileKind::RuntimeDefault) => {
                Some(podscope_oci::seccomp::runtime_default(&caps))
            }
            Some(ProfileKind::Localhost) => {
                let path = Path::new(&s.seccomp.localhost_ref);
                let bytes = self
                    .hostns
                    .read_beneath(&self.settings.seccomp_profile_root, path, PROFILE_MAX)
                    .await
                    .map_err(|e| {
                        Error::invalid("seccomp.localhost_ref", e).context(ctx("seccomp profile"))
                    })?;
                Some(
                    podscope_oci::seccomp::parse_profile(&bytes, &caps).map_err(|e| {
                        Error::invalid("seccomp.localhost_ref", format!("{}: {e}", path.display()))
                            .context(ctx("seccomp profile"))
                    })?,
                )
            }
            Some(ProfileKind::Unconfined | ProfileKind::Unset) => None,
        };
        let asked = match s.apparmor.kind {
            ProfileKind::Unset => apparmor::Asked::Unset,
            ProfileKind::Unconfined => apparmor::Asked::Unconfined,
            ProfileKind::RuntimeDefault => apparmor::Asked::RuntimeDefault,
            ProfileKind::Localhost => apparmor::Asked::Localhost(&s.apparmor.localhost_ref),
        };
        let apparmor_profile = apparmor::choose(asked, s.privileged, &AppArmorNode)
            .map_err(|e| Error::invalid("apparmor", e).context(ctx("AppArmor profile")))?;
        if matches!(
            s.apparmor.kind,
            ProfileKind::RuntimeDefault | ProfileKind::Localhost
        ) && apparmor_profile.is_none()
            && !s.privileged
        {
            info!(container_id = %id, "container {}: AppArmor profile {} ignored: AppArmor is off on this host", config.name, s.apparmor.kind.as_str());
        }
        let pid_target = match s.pid_target.as_str() {
            "" => None,
            t => {
                let target = self.resolve(t).map_err(|e| e.context(ctx("pid_target")))?;
                let (state, pid, pod_of) = target.with(|c| (c.state, c.main_pid, c.pod_id.clone()));
                if pod_of != sb.id || state != ContainerState::Running {
                    return Err(Error::invalid(
                        "pid_target",
                        format!(
                            "container {} is not running in sandbox {}",
                            target.id, sb.id
                        ),
                    ));
                }
                Some(pid)
            }
        };
        let mut devices = Vec::new();
        for (i, d) in config.devices.iter().enumerate() {
            let dev = device_at(&d.host_path)
                .map_err(|e| Error::invalid(&format!("devices[{i}].host_path"), e))?;
            devices.push((dev, d.container_path.clone(), d.permissions.clone()));
        }
        let host_devices = if s.privileged {
            host_devices()
        } else {
            Vec::new()
        };

        let slice = sb.slice.clone();
        let unit_cgroup = format!(
            "{}/{}",
            podscope_api::domain::slice::slice_cgroup_path(&slice),
            podscope_api::domain::container::container_unit_name(&id)
        );
        let cgroup = unit_cgroup.clone();
        let view = pod_view(&self.settings, &sb);
        let user_record = podscope_api::domain::container::ContainerUser {
            uid: user.uid,
            gid: user.gid,
            supplemental_groups: user.spec_additional_gids(),
        };
        let mut oci = spec::build(&spec::Input {
            config: &config,
            image: &run,
            capabilities: caps,
            user,
            pod: &view,
            runtime: handler.kind().expect("settings check the kind"),
            cgroup_path: unit_cgroup,
            seccomp,
            apparmor_profile,
            // Where SELinux is on, every container not privileged is
            // labelled (its options over the pod's, the defaults filled),
            // as containerd and CRI-O label theirs; where it is off, the
            // options are recorded and nothing is labelled.
            selinux: (selinux_enabled() && !s.privileged)
                .then(|| s.selinux.over(&sb.config.selinux).labels()),
            pid_target,
            host_devices,
            devices,
            oom_score_floor: self.oom_score_floor,
            cgroup_v2: self.cgroup_v2,
            volumes: rootfs::Dirs::of(&self.bundle(&id)).volumes,
        })
        .map_err(|e| e.context(ctx("OCI spec")))?;
        let cdi_applied = match &cdi {
            None => Default::default(),
            Some(r) => {
                let applied = r.edits.apply(&mut oci, view.user_namespace.is_some());
                podscope_api::domain::container::CdiApplied {
                    devices: r.devices.clone(),
                    spec_files: r.spec_files.clone(),
                    device_allow: applied.device_allow,
                }
            }
        };
        let json = match &restore {
            None => serde_json::to_vec_pretty(&oci).expect("a spec serialises"),
            Some(r) => r.spec_for(&oci, &self.bundle(&id).join(super::restore::CRIU_CONF)),
        };

        let key = config.key(&sb.id);
        self.registry.reserve(&key)?;
        undo.key = Some(key);
        let bundle = self.store.make_dir(&id)?;
        undo.dir = true;
        write_private(&bundle.join("config.json"), &json).io_context(ctx("write config.json"))?;
        rootfs::Dirs::of(&bundle)
            .make()
            .with_context(|| ctx("root directories"))?;
        let restored_from = match restore {
            Some(r) => {
                let path = r.path.display().to_string();
                super::restore::write_criu_conf(&bundle.join(super::restore::CRIU_CONF), &cgroup)
                    .map_err(|e| e.context(ctx("restore")))?;
                self.unpack_archive(r, &bundle)
                    .await
                    .map_err(|e| e.context(ctx("restore")))?;
                path
            }
            None => String::new(),
        };
        failpoint::hit(failpoint::CTR_CREATE_DIRS_MADE);

        let now = podscope_api::domain::sandbox::now_usec();
        let record = Container {
            id: id.clone(),
            pod_id: sb.id.clone(),
            pod_name: format!("{}/{}", sb.config.namespace, sb.config.name),
            state: ContainerState::Created,
            created_at: now,
            started_at: 0,
            exit: Default::default(),
            image_id: image.id.to_string(),
            image_ref: image
                .repo_digests
                .first()
                .cloned()
                .unwrap_or_else(|| image.id.to_string()),
            image_name: image
                .repo_tags
                .first()
                .cloned()
                .unwrap_or_else(|| config.image.clone()),
            layers: layers.iter().map(|l| l.to_string()).collect(),
            runtime_handler: handler_name.to_owned(),
            slice,
            log_path: log_file_path(&sb.config.log_directory, &config.log_path)
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            main_pid: 0,
            resources: config.resources.clone(),
            oom_killed: false,
            stop_signal,
            user: Some(user_record),
            cdi: cdi_applied,
            volumes,
            restored_from,
            config,
        };
        self.store
            .save(&record)
            .with_context(|| ctx("save checkpoint"))?;
        undo.armed = false;
        let entry = Entry::new(record);
        self.registry.insert(entry.clone());
        failpoint::hit(failpoint::CTR_CREATE_DONE);
        entry.with(|c| {
            if !c.cdi.devices.is_empty() {
                info!(
                    container_id = %c.id,
                    cdi_devices = %c.cdi.devices.join(","),
                    "container {}: CDI devices {} from {}",
                    c.id,
                    c.cdi.devices.join(", "),
                    c.cdi.spec_files.join(", ")
                );
            }
            info!(
                event = podscope_sys::logging::event::CONTAINER_CREATED,
                container_id = %c.id,
                sandbox_id = %c.pod_id,
                image = %c.image_id,
                "container {} ({}) created in sandbox {} from {}",
                c.id,
                c.config.name,
                c.pod_id,
                c.config.image
            )
        });
        self.emit(Event::ContainerCreated(id));
        Ok(entry)
    }

    /// The pod's runtime handler, with its binary there.
    pub(super) fn runtime_of(
        &self,
        sb: &Sandbox,
    ) -> Result<(&str, &podscope_config::RuntimeHandler)> {
        let (name, h) = self
            .settings
            .runtime(&sb.config.runtime_handler)
            .ok_or_else(|| {
                Error::invalid(
                    "runtime_handler",
                    format!(
                        "sandbox {} names runtime handler {:?}, which is not configured",
                        sb.id, sb.config.runtime_handler
                    ),
                )
            })?;
        if !h.path.is_file() {
            return Err(Error::new(
                ErrorKind::RuntimeFailed,
                format!(
                    "runtime handler {name}: {} is not there (install it, or set runtimes.{name}.path in podscope.toml)",
                    h.path.display()
                ),
            ));
        }
        Ok((name, h))
    }

    /// A pod a container may be made or started in: Ready, its init alive
    /// in its scope (the container joins its namespaces by /proc/<pid>).
    pub(super) fn ready_pod(&self, sb: &Sandbox) -> Result<()> {
        if sb.state != State::Ready {
            return Err(Error::invalid_state(format!(
                "sandbox {} is {}, not ready: containers are made and started only in a ready pod",
                sb.id,
                sb.state.as_str()
            )));
        }
        let cg =
            std::fs::read_to_string(self.proc_root.join(sb.init_pid.to_string()).join("cgroup"))
                .unwrap_or_default();
        if !cg.lines().any(|l| l.ends_with(&format!("/{}", sb.unit()))) {
            return Err(Error::invalid_state(format!(
                "sandbox {}: its init (PID {}) is not in its scope {} any more",
                sb.id,
                sb.init_pid,
                sb.unit()
            )));
        }
        Ok(())
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// SELinux is on (selinuxfs mounted, as libselinux's is_selinux_enabled
/// asks).
fn selinux_enabled() -> bool {
    Path::new("/sys/fs/selinux/enforce").exists()
}

/// The device node at `path` on the host.
fn device_at(path: &str) -> std::result::Result<LinuxDevice, String> {
    let m = std::fs::metadata(path).map_err(|e| format!("{path}: {e}"))?;
    let ft = m.file_type();
    let type_ = if ft.is_char_device() {
        "c"
    } else if ft.is_block_device() {
        "b"
    } else {
        return Err(format!("{path} is not a device"));
    };
    let rdev = m.rdev();
    Ok(LinuxDevice {
        path: path.to_owned(),
        type_: type_.into(),
        major: libc::major(rdev) as i64,
        minor: libc::minor(rdev) as i64,
        file_mode: Some(m.mode() & 0o7777),
        uid: Some(m.uid()),
        gid: Some(m.gid()),
    })
}

/// Every device node under /dev, for a privileged container (as containerd
/// gives one): not the pseudo-terminals, shm or mqueue, which the container
/// has of its own.
fn host_devices() -> Vec<LinuxDevice> {
    fn walk(dir: &Path, out: &mut Vec<LinuxDevice>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if !matches!(
                    p.to_str(),
                    Some("/dev/pts" | "/dev/shm" | "/dev/mqueue" | "/dev/.lxc" | "/dev/.udev")
                ) {
                    walk(&p, out);
                }
            } else if ft.is_char_device() || ft.is_block_device() {
                if p == Path::new("/dev/console") {
                    continue;
                }
                if let Some(d) = p.to_str().and_then(|s| device_at(s).ok()) {
                    out.push(d);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/dev"), &mut out);
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}
