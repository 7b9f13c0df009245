//! `/org/podscope/Sandbox1/container/<id>`: one object per container, its
//! record as properties (with PropertiesChanged), Start, Stop and Remove;
//! and the service's container operations behind the Manager's methods,
//! each mutating one authorized first (polkit `manage`, or
//! `manage-privileged` for a container with host access), then run in a
//! task of its own.

use super::errors::BusError;
use super::polkit::{pod_details, Detail, Verb};
use super::{polkit, Service};
use crate::container::{ContainerEntry, ListFilter};
use podscope_api::container::{ContainerFilter, ContainerStatus, ContainerSummary, ExecResult};
use podscope_api::container_path;
use podscope_api::domain::container::ContainerConfig;
use podscope_api::error::{Error, Result};
use podscope_sys::descriptors::cost;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::{Interface, SignalEmitter};
use zbus::zvariant::{OwnedObjectPath, Value};

pub struct ContainerObject {
    pub entry: Arc<ContainerEntry>,
    pub service: Arc<Service>,
}

#[interface(name = "org.podscope.Sandbox1.Container")]
impl ContainerObject {
    async fn start(&self, #[zbus(header)] hdr: Header<'_>) -> Result<(), BusError> {
        self.service
            .start_container(&hdr, self.entry.id.as_str())
            .await
    }
    async fn stop(&self, #[zbus(header)] hdr: Header<'_>, timeout: i64) -> Result<(), BusError> {
        self.service
            .stop_container(&hdr, self.entry.id.as_str(), timeout)
            .await
    }
    async fn remove(&self, #[zbus(header)] hdr: Header<'_>) -> Result<(), BusError> {
        self.service
            .remove_container(&hdr, self.entry.id.as_str())
            .await
    }
    async fn checkpoint(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        location: &str,
        options: podscope_api::DictArg<'_>,
    ) -> Result<(), BusError> {
        let options: podscope_api::container::CheckpointOptions =
            podscope_api::from_dict(Some("options"), &options)?;
        self.service
            .checkpoint_container(&hdr, self.entry.id.as_str(), location.to_owned(), options)
            .await
    }

    #[zbus(property(emits_changed_signal = "const"))]
    fn id(&self) -> String {
        self.entry.id.to_string()
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn name(&self) -> String {
        self.entry.with(|c| c.config.name.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn attempt(&self) -> u32 {
        self.entry.with(|c| c.config.attempt)
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn pod_id(&self) -> String {
        self.entry.with(|c| c.pod_id.to_string())
    }
    #[zbus(property)]
    fn state(&self) -> String {
        self.entry.with(|c| c.state.as_str().to_owned())
    }
    // µs since the epoch.
    #[zbus(property(emits_changed_signal = "const"))]
    fn created_at(&self) -> u64 {
        self.entry.with(|c| c.created_at)
    }
    #[zbus(property)]
    fn started_at(&self) -> u64 {
        self.entry.with(|c| c.started_at)
    }
    #[zbus(property)]
    fn finished_at(&self) -> u64 {
        self.entry.with(|c| c.exit.finished_at)
    }
    #[zbus(property)]
    fn exit_code(&self) -> i32 {
        self.entry.with(|c| c.exit.code)
    }
    #[zbus(property)]
    fn reason(&self) -> String {
        self.entry.with(|c| c.exit.reason.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn unit(&self) -> String {
        self.entry.with(|c| c.unit())
    }
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> u32 {
        self.entry.with(|c| c.main_pid)
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn image(&self) -> String {
        self.entry.with(|c| c.config.image.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn image_id(&self) -> String {
        self.entry.with(|c| c.image_id.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn labels(&self) -> HashMap<String, String> {
        self.entry
            .with(|c| c.config.labels.clone().into_iter().collect())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn runtime_handler(&self) -> String {
        self.entry.with(|c| c.runtime_handler.clone())
    }
    #[zbus(property(emits_changed_signal = "const"))]
    fn log_path(&self) -> String {
        self.entry.with(|c| c.log_path.clone())
    }
}

impl ContainerObject {
    /// One PropertiesChanged with every property that is not "const" (the
    /// names as the declarations above give them).
    pub async fn emit_changes(&self, emitter: &SignalEmitter<'_>) -> zbus::Result<()> {
        let changed: HashMap<&str, Value<'_>> = HashMap::from([
            ("State", self.state().into()),
            ("StartedAt", self.started_at().into()),
            ("FinishedAt", self.finished_at().into()),
            ("ExitCode", self.exit_code().into()),
            ("Reason", self.reason().into()),
            ("MainPID", self.main_pid().into()),
        ]);
        super::properties::properties_changed(emitter, <Self as Interface>::name(), changed).await
    }
}

/// ListContainers' filter as the container room's query.
pub(crate) fn list_filter(f: ContainerFilter) -> Result<ListFilter> {
    for p in [&f.id, &f.pod_id].into_iter().flatten() {
        podscope_api::domain::id::validate_prefix_of("container", p)
            .map_err(|e| e.context("filter"))?;
    }
    Ok(ListFilter {
        id_prefix: f.id,
        pod_id_prefix: f.pod_id,
        state: f.state,
        labels: f.labels.unwrap_or_default(),
    })
}

impl Service {
    /// polkit's details for a container: the pod's, plus the container's
    /// id and name.
    fn container_details(&self, verb: Verb, entry: &ContainerEntry) -> Vec<(Detail, String)> {
        let (pod_id, name) = entry.with(|c| (c.pod_id.clone(), c.config.name.clone()));
        let mut d = match self.pods.get(&pod_id) {
            Some(p) => p.with(|sb| {
                pod_details(verb, &sb.config.namespace, &sb.config.name, sb.id.as_str())
            }),
            None => pod_details(verb, "", "", pod_id.as_str()),
        };
        d.push((Detail::ContainerId, entry.id.to_string()));
        d.push((Detail::Container, name));
        d
    }

    /// Resolve the container, then the polkit check for `verb`. A verb that
    /// runs a process in the container (Start, Exec, ExecSync, Attach)
    /// takes the privileged action when the container or its pod has host
    /// access (`run_privileges`): what a rule granting `manage` in a
    /// namespace grants is no way into a privileged container made there.
    async fn authorize_container(
        &self,
        hdr: &Header<'_>,
        verb: Verb,
        id: &str,
    ) -> Result<Arc<ContainerEntry>> {
        let entry = self.containers.resolve(id)?;
        let runs_a_process = matches!(
            verb,
            Verb::StartContainer | Verb::Exec | Verb::ExecSync | Verb::Attach
        );
        let privileges = if runs_a_process {
            self.run_privileges(&entry)
        } else {
            Vec::new()
        };
        let action = polkit::action_for(&privileges);
        self.auth
            .check(hdr, action, verb, || {
                let mut d = self.container_details(verb, &entry);
                if runs_a_process {
                    d.push((Detail::Privileges, privileges.join(", ")));
                }
                d
            })
            .await?;
        Ok(entry)
    }

    /// The host access a process run in this container has: its pod's host
    /// namespaces and its own (`ContainerConfig::host_access`); and, for a
    /// container restored from a checkpoint, the privilege "checkpoint":
    /// its process is what the archive's CRIU images say (their user,
    /// capabilities, seccomp filter and mounts, which CRIU restores as
    /// root), not what its config says, and its Start runs CRIU.
    fn run_privileges(&self, entry: &ContainerEntry) -> Vec<String> {
        let (pod_id, mut own, restored) = entry.with(|c| {
            (
                c.pod_id.clone(),
                c.config.host_access(),
                !c.restored_from.is_empty(),
            )
        });
        let mut p = match self.pods.get(&pod_id) {
            Some(pod) => pod.with(|sb| sb.config.host_namespaces()),
            None => Vec::new(),
        };
        p.append(&mut own);
        if restored {
            p.push(podscope_api::domain::container::CHECKPOINT_PRIVILEGE.to_owned());
        }
        p
    }

    pub async fn create_container(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        pod_id: &str,
        config: ContainerConfig,
    ) -> Result<(String, OwnedObjectPath), BusError> {
        config.validate()?;
        let pod = self.pods.resolve(pod_id)?;
        // A container added to a pod with host namespaces has them too.
        let mut privileges = pod.with(|sb| sb.config.host_namespaces());
        privileges.extend(config.privileges(&self.containers.settings.seccomp_profile_root));
        let action = polkit::action_for(&privileges);
        self.auth
            .check(hdr, action, Verb::CreateContainer, || {
                let mut d = pod.with(|sb| {
                    pod_details(
                        Verb::CreateContainer,
                        &sb.config.namespace,
                        &sb.config.name,
                        sb.id.as_str(),
                    )
                });
                d.push((Detail::Container, config.name.clone()));
                d.push((Detail::Image, config.image.clone()));
                d.push((Detail::Privileges, privileges.join(", ")));
                d
            })
            .await?;
        let fds = self.fds.reserve(
            &format!("container {} in sandbox {}: create", config.name, pod.id),
            cost::CONTAINER_CREATE,
        )?;
        let this = self.clone();
        let pod_id = pod.id.to_string();
        let out = self
            .detached(async move {
                let _fds = fds;
                let entry = this.containers.create(&pod_id, config).await?;
                let path = container_path(&entry.id);
                let obj = ContainerObject {
                    entry: entry.clone(),
                    service: this.clone(),
                };
                this.export(&path, obj).await?;
                Ok((entry.id.to_string(), path))
            })
            .await?;
        Ok(out)
    }

    pub async fn start_container(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
    ) -> Result<(), BusError> {
        let entry = self
            .authorize_container(hdr, Verb::StartContainer, id)
            .await?;
        // What it keeps is open once it runs: the reservation covers it
        // until then.
        let fds = self.fds.reserve(
            &format!("container {}: start", entry.id),
            cost::CONTAINER_START + cost::CONTAINER_HELD,
        )?;
        let this = self.clone();
        self.detached(async move {
            let _fds = fds;
            this.containers.start(&entry).await
        })
        .await?;
        Ok(())
    }

    pub async fn stop_container(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        timeout: i64,
    ) -> Result<(), BusError> {
        let entry = self
            .authorize_container(hdr, Verb::StopContainer, id)
            .await?;
        let this = self.clone();
        self.detached(async move { this.containers.stop(&entry, timeout).await })
            .await?;
        Ok(())
    }

    pub async fn remove_container(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
    ) -> Result<(), BusError> {
        let entry = self
            .authorize_container(hdr, Verb::RemoveContainer, id)
            .await?;
        let this = self.clone();
        self.detached(async move {
            let id = this.containers.remove(&entry).await?;
            let path = container_path(&id);
            this.unexport::<ContainerObject>(&path, &format!("container {id}"))
                .await;
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// Status, with the annotations for root's callers only.
    pub async fn container_status(
        &self,
        hdr: &Header<'_>,
        id: &str,
    ) -> Result<ContainerStatus, BusError> {
        let entry = self.containers.resolve(id)?;
        let upper = self.containers.upper_dir(&entry.id);
        let status = entry.with(|c| ContainerStatus::of(c, upper));
        Ok(if self.auth.caller_uid(hdr).await? == 0 {
            status
        } else {
            status.without_annotations()
        })
    }

    pub async fn list_containers(
        &self,
        hdr: &Header<'_>,
        filter: ContainerFilter,
    ) -> Result<Vec<ContainerSummary>, BusError> {
        let f = list_filter(filter)?;
        let root = self.auth.caller_uid(hdr).await? == 0;
        let all = self
            .containers
            .list(&f)
            .iter()
            .map(|e| e.with(|c| ContainerSummary::of(c, self.containers.upper_dir(&c.id))))
            .collect();
        Ok(podscope_api::list_budget::for_caller(all, root))
    }

    pub async fn update_container_resources(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        resources: podscope_api::domain::container::ContainerResources,
    ) -> Result<(), BusError> {
        let entry = self
            .authorize_container(hdr, Verb::UpdateContainerResources, id)
            .await?;
        let this = self.clone();
        self.detached(async move { this.containers.update_resources(&entry, resources).await })
            .await?;
        Ok(())
    }

    /// CheckpointContainer: the privilege `checkpoint` (manage-privileged):
    /// the daemon writes the archive as root at a path the caller names,
    /// and it holds the container's memory.
    pub async fn checkpoint_container(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        location: String,
        options: podscope_api::container::CheckpointOptions,
    ) -> Result<(), BusError> {
        let entry = self.containers.resolve(id)?;
        let privileges = vec![podscope_api::domain::container::CHECKPOINT_PRIVILEGE.to_owned()];
        self.auth
            .check(
                hdr,
                polkit::action_for(&privileges),
                Verb::CheckpointContainer,
                || {
                    let mut d = self.container_details(Verb::CheckpointContainer, &entry);
                    d.push((Detail::Privileges, privileges.join(", ")));
                    d
                },
            )
            .await?;
        let fds = self
            .fds
            .reserve(&format!("container {}: checkpoint", entry.id), 8)?;
        let this = self.clone();
        self.detached(async move {
            let _fds = fds;
            this.containers.checkpoint(&entry, &location, options).await
        })
        .await?;
        Ok(())
    }

    pub async fn reopen_container_log(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
    ) -> Result<(), BusError> {
        let entry = self
            .authorize_container(hdr, Verb::ReopenContainerLog, id)
            .await?;
        let fds = self
            .fds
            .reserve(&format!("container {}: reopen its log", entry.id), 4)?;
        let this = self.clone();
        self.detached(async move {
            let _fds = fds;
            this.containers.reopen_log(&entry).await
        })
        .await?;
        Ok(())
    }

    pub async fn exec(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        cmd: Vec<String>,
        options: podscope_api::exec::ExecOptions,
        stdio: Vec<std::os::fd::OwnedFd>,
        control: std::os::fd::OwnedFd,
    ) -> Result<(), BusError> {
        // These reach the command itself: a pipe or a socket only (bad
        // input, named before polkit is asked).
        for (i, fd) in stdio.iter().enumerate() {
            handed_to_a_container(i, fd)?;
        }
        let entry = self.authorize_container(hdr, Verb::Exec, id).await?;
        let io = stdio_of(&options, stdio)?;
        let fds = self
            .fds
            .reserve(&format!("container {}: exec", entry.id), cost::EXEC)?;
        let this = self.clone();
        let run = self
            .detached(async move {
                let _fds = fds;
                this.containers.start_exec(&entry, cmd, io).await
            })
            .await?;
        let timeout = (options.timeout_ms > 0).then(|| Duration::from_millis(options.timeout_ms));
        let this = self.clone();
        tokio::spawn(async move { this.containers.supervise_exec(run, control, timeout).await });
        Ok(())
    }

    pub async fn attach(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        options: podscope_api::exec::ExecOptions,
        stdio: Vec<std::os::fd::OwnedFd>,
        control: std::os::fd::OwnedFd,
    ) -> Result<(), BusError> {
        let entry = self.authorize_container(hdr, Verb::Attach, id).await?;
        let io = stdio_of(&options, stdio)?;
        let fds = self
            .fds
            .reserve(&format!("container {}: attach", entry.id), cost::EXEC)?;
        let this = self.clone();
        self.detached(async move {
            let _fds = fds;
            this.containers.attach(&entry, io, control).await
        })
        .await?;
        Ok(())
    }
}

/// A caller's descriptor that an exec's command gets as its stdin, stdout
/// or stderr: a pipe or a socket, checked with fstat. Anything else would
/// give the container's root what the caller opened, reopened through
/// /proc/self/fd with the container's rights (a directory: the host's tree;
/// a file the caller may only read, for writing), and a terminal would let
/// the command push keystrokes into the caller's shell (TIOCSTI). A client
/// relays those through pipes of its own (podscopectl does; the CRI
/// frontend makes pipes), and a terminal is one the runtime makes (`tty`).
fn handed_to_a_container(i: usize, fd: &std::os::fd::OwnedFd) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::File::from(fd.try_clone().map_err(|e| Error::io("stdio", e))?)
        .metadata()
        .map_err(|e| Error::io(format!("stdio[{i}]: fstat"), e))?
        .file_type();
    if t.is_fifo() || t.is_socket() {
        return Ok(());
    }
    let what = if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else if t.is_char_device() {
        "a character device (a terminal?)"
    } else {
        "not a pipe or a socket"
    };
    Err(Error::invalid(
        &format!("stdio[{i}]"),
        format!(
            "{what}: only a pipe or a socket is handed to a container's process \
             (relay anything else through a pipe; for a terminal ask for tty)"
        ),
    ))
}

/// The descriptors `options` names, in order.
fn stdio_of(
    options: &podscope_api::exec::ExecOptions,
    stdio: Vec<std::os::fd::OwnedFd>,
) -> Result<crate::container::ExecIo, Error> {
    if stdio.len() != options.stdio_count() {
        return Err(Error::invalid(
            "stdio",
            format!(
                "{} descriptors given, options name {}",
                stdio.len(),
                options.stdio_count()
            ),
        ));
    }
    let mut fds = stdio.into_iter();
    let mut take = |on: bool| if on && !options.tty { fds.next() } else { None };
    let io = crate::container::ExecIo {
        tty: options.tty,
        stdin: take(options.stdin),
        stdout: take(options.stdout),
        stderr: take(options.stderr),
    };
    Ok(io)
}

impl Service {
    pub async fn exec_sync(
        self: &Arc<Self>,
        hdr: &Header<'_>,
        id: &str,
        cmd: Vec<String>,
        timeout_ms: u64,
    ) -> Result<ExecResult, BusError> {
        let entry = self.authorize_container(hdr, Verb::ExecSync, id).await?;
        let fds = self
            .fds
            .reserve(&format!("container {}: exec", entry.id), cost::EXEC)?;
        let this = self.clone();
        // Detached like the others: a caller that hangs up still gets its
        // exec's unit killed at the timeout and collected.
        let out = self
            .detached(async move {
                let _fds = fds;
                this.containers
                    .exec_sync(&entry, cmd, Duration::from_millis(timeout_ms))
                    .await
            })
            .await?;
        Ok(ExecResult {
            exit_code: out.exit_code,
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}
