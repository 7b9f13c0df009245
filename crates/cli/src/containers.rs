//! Containers: `container create|start|stop|rm|update` (the pod verbs
//! keep their short names), and crictl's `ps`, `logs`, `exec`, `inspect`,
//! `attach`, which name nothing else here. Each command's arguments are
//! read by a `*_args` function (pure: no bus), then acted on.

use crate::call::Mutate;
use crate::fail::Fail;
use crate::operands::{kv, no_operands};
use crate::output::{fmt_time, table};
use crate::spec::{Given, Opt, Parsed};
use podscope_api::container::{
    ContainerFilter, ContainerOptions, Device, Mount, Resources, Security,
};
use podscope_api::domain::cdi::looks_like_device_name;
use podscope_api::domain::container::{ContainerState, Propagation};
use podscope_api::Client;
use std::collections::BTreeMap;
use std::io::Write;
use zbus::zvariant::OwnedObjectPath;

/// StartContainer or RemoveContainer on each.
pub async fn each(m: &Mutate<'_>, method: &str, ids: &[String]) -> Result<(), Fail> {
    for id in ids {
        m.call::<_, ()>(method, &(id.as_str(),)).await?;
    }
    Ok(())
}

/// `container stop [-t SECONDS] ID...`: the grace period and the IDs.
pub fn stop_args(p: &Parsed) -> Result<(i64, Vec<String>), Fail> {
    let mut timeout = 10i64;
    for g in p.flags() {
        match g.opt() {
            Opt::Timeout => {
                let (a, v) = (g.name(), g.value());
                timeout = v
                    .parse()
                    .map_err(|_| Fail(format!("{a}: {v:?} is not a number of seconds")))?;
            }
            _ => return Err(g.unhandled(p)),
        }
    }
    Ok((timeout, super::at_least_one(p, "ID")?))
}

pub async fn stop(m: &Mutate<'_>, timeout: i64, ids: &[String]) -> Result<(), Fail> {
    for id in ids {
        m.call::<_, ()>("StopContainer", &(id.as_str(), timeout))
            .await?;
    }
    Ok(())
}

/// `container update ID [LIMITS]`.
pub fn update_args(p: &Parsed) -> Result<(String, Resources), Fail> {
    let id = super::only_id(p)?;
    let mut r = Resources::default();
    for g in p.flags() {
        if !resource(&mut r, g)? {
            return Err(g.unhandled(p));
        }
    }
    Ok((id, r))
}

pub async fn update(m: &Mutate<'_>, id: &str, r: &Resources) -> Result<(), Fail> {
    m.call::<_, ()>("UpdateContainerResources", &(id, r)).await
}

/// `container checkpoint [-t SECONDS] [--stop] ID ARCHIVE`.
pub fn checkpoint_args(
    p: &Parsed,
) -> Result<(String, String, podscope_api::container::CheckpointOptions), Fail> {
    let mut o = podscope_api::container::CheckpointOptions::default();
    for g in p.flags() {
        match g.opt() {
            Opt::Timeout => {
                let (a, v) = (g.name(), g.value());
                let secs: u64 = v
                    .parse()
                    .map_err(|_| Fail(format!("{a}: {v:?} is not a number of seconds")))?;
                o.timeout_ms = secs.saturating_mul(1000);
            }
            Opt::StopAfterDump => o.stop = true,
            _ => return Err(g.unhandled(p)),
        }
    }
    let ops = p.operands();
    let [id, archive] = ops else {
        return Err(Fail(
            "container checkpoint takes an ID and the archive's path".into(),
        ));
    };
    // The daemon writes it as root: an absolute path, as the daemon sees
    // the node (a relative one would be the daemon's working directory).
    let archive = if archive.starts_with('/') {
        archive.clone()
    } else {
        std::env::current_dir()
            .map_err(|e| Fail(format!("the working directory: {e}")))?
            .join(archive)
            .display()
            .to_string()
    };
    Ok((id.clone(), archive, o))
}

/// CheckpointContainer: the container's memory and files into `archive`.
pub async fn checkpoint(
    m: &Mutate<'_>,
    id: &str,
    archive: &str,
    o: &podscope_api::container::CheckpointOptions,
) -> Result<(), Fail> {
    m.call::<_, ()>("CheckpointContainer", &(id, archive, o))
        .await?;
    println!("{archive}");
    Ok(())
}

/// A resource flag of container create and update, set in `r`; false for
/// any other flag.
fn resource(r: &mut Resources, g: &Given) -> Result<bool, Fail> {
    match g.opt() {
        Opt::Memory => r.memory_limit_in_bytes = g.number()?,
        Opt::CpuQuota => r.cpu_quota = g.number()?,
        Opt::CpuPeriod => r.cpu_period = g.number()?,
        Opt::CpuShares => r.cpu_shares = g.number()?,
        Opt::CpusetCpus => r.cpuset_cpus = g.value().to_owned(),
        _ => return Ok(false),
    }
    Ok(true)
}

/// `container create POD NAME IMAGE [OPTIONS] [-- COMMAND ARGS...]`.
#[derive(Debug)]
pub struct CreateArgs {
    pod: String,
    name: String,
    attempt: u32,
    image: String,
    options: ContainerOptions,
    start: bool,
}

pub fn create_args(p: &Parsed) -> Result<CreateArgs, Fail> {
    let [pod, name, image] = p.operands() else {
        return Err(Fail(if p.operands().len() > 3 {
            "container create needs POD NAME IMAGE (a command goes after --)".into()
        } else {
            "container create needs POD NAME IMAGE".into()
        }));
    };
    let mut o = ContainerOptions::default();
    let (mut security, mut resources) = (Security::default(), Resources::default());
    let mut labels = BTreeMap::new();
    let mut attempt = 0u32;
    let mut start = false;
    for g in p.flags() {
        let (a, v) = (g.name(), g.value());
        match g.opt() {
            Opt::Attempt => attempt = g.number()?,
            Opt::Env => o.envs.push(v.to_owned()),
            Opt::Workdir => o.working_dir = v.to_owned(),
            Opt::Label => {
                let (k, v) = kv(v, a)?;
                labels.insert(k, v);
            }
            Opt::Mount => {
                let parts: Vec<&str> = v.split(':').collect();
                let (host, container, ro, rro) = match parts.as_slice() {
                    [h, c] => (*h, *c, false, false),
                    [h, c, "ro"] => (*h, *c, true, false),
                    [h, c, "rro"] => (*h, *c, true, true),
                    _ => return Err(Fail(format!("{a}: {v:?} is not HOST:CONTAINER[:ro|:rro]"))),
                };
                o.mounts.push(Mount {
                    host_path: host.into(),
                    container_path: container.into(),
                    readonly: ro,
                    recursive_read_only: rro,
                    propagation: Propagation::Private,
                    ..Default::default()
                });
            }
            // podman's rule: a CDI name (vendor/class=name) or a host
            // device node, optionally at another path, with cgroup access.
            Opt::Device if looks_like_device_name(v) => o.cdi_devices.push(v.to_owned()),
            Opt::Device => {
                let parts: Vec<&str> = v.split(':').collect();
                let (host, container, permissions) = match parts.as_slice() {
                    [h] => (*h, *h, ""),
                    [h, c] => (*h, *c, ""),
                    [h, c, p] => (*h, *c, *p),
                    _ => {
                        return Err(Fail(format!(
                            "{a}: {v:?} is neither a CDI device (VENDOR/CLASS=NAME) nor HOST[:CONTAINER[:PERMS]]"
                        )))
                    }
                };
                o.devices.push(Device {
                    host_path: host.into(),
                    container_path: container.into(),
                    permissions: permissions.into(),
                });
            }
            Opt::User => match v.parse::<u32>() {
                Ok(uid) => security.run_as_user = Some(uid),
                Err(_) => security.run_as_username = v.to_owned(),
            },
            Opt::Privileged => security.privileged = true,
            Opt::ReadOnly => security.readonly_rootfs = true,
            Opt::CapAdd => security.capabilities_add.push(v.to_owned()),
            Opt::CapDrop => security.capabilities_drop.push(v.to_owned()),
            Opt::LogPath => o.log_path = v.to_owned(),
            Opt::Tty => o.tty = true,
            Opt::Stdin => o.stdin = true,
            Opt::Start => start = true,
            _ => {
                if !resource(&mut resources, g)? {
                    return Err(g.unhandled(p));
                }
            }
        }
    }
    o.command = p.rest().to_vec();
    o.labels = labels;
    o.security = security;
    o.resources = resources;
    if o.log_path.is_empty() {
        // kubelet's layout; used only when the pod has a log directory.
        o.log_path = format!("{name}/{attempt}.log");
    }
    Ok(CreateArgs {
        pod: pod.clone(),
        name: name.clone(),
        attempt,
        image: image.clone(),
        options: o,
        start,
    })
}

pub async fn create(m: &Mutate<'_>, c: &CreateArgs) -> Result<(), Fail> {
    let (id, _): (String, OwnedObjectPath) = m
        .call(
            "CreateContainer",
            &(
                c.pod.as_str(),
                c.name.as_str(),
                c.attempt,
                c.image.as_str(),
                &c.options,
            ),
        )
        .await?;
    if c.start {
        if let Err(Fail(msg)) = m.call::<_, ()>("StartContainer", &(id.as_str(),)).await {
            return Err(Fail(format!("created {id} but start failed: {msg}")));
        }
    }
    println!("{id}");
    Ok(())
}

/// `ps [-a] [--pod ID] [--state STATE] [--label K=V]... [-q]`: the filter
/// and -q.
pub fn ps_args(p: &Parsed) -> Result<(ContainerFilter, bool), Fail> {
    no_operands(p)?;
    let mut filter = ContainerFilter::default();
    let (mut all, mut quiet) = (false, false);
    let mut labels = BTreeMap::new();
    for g in p.flags() {
        let (a, v) = (g.name(), g.value());
        match g.opt() {
            Opt::All => all = true,
            Opt::Quiet => quiet = true,
            Opt::Pod => filter.pod_id = Some(v.to_owned()),
            Opt::State => {
                filter.state = Some(ContainerState::parse(v).map_err(|e| Fail(e.to_string()))?);
            }
            Opt::Label => {
                let (k, v) = kv(v, a)?;
                labels.insert(k, v);
            }
            _ => return Err(g.unhandled(p)),
        }
    }
    if filter.state.is_none() && !all {
        filter.state = Some(ContainerState::Running);
    }
    if !labels.is_empty() {
        filter.labels = Some(labels);
    }
    Ok((filter, quiet))
}

pub async fn ps(m: &Client, filter: &ContainerFilter, quiet: bool) -> Result<(), Fail> {
    let mut list = m.list_containers(filter).await?;
    list.sort_by_key(|c| c.created_at);
    if quiet {
        for c in &list {
            println!("{}", c.id);
        }
        return Ok(());
    }
    if list.is_empty() {
        println!("No containers.");
        return Ok(());
    }
    let mut rows = vec![[
        "CONTAINER",
        "IMAGE",
        "CREATED",
        "STATE",
        "NAME",
        "ATTEMPT",
        "POD",
    ]
    .map(String::from)
    .to_vec()];
    for c in &list {
        rows.push(vec![
            c.id.chars().take(12).collect(),
            c.image.clone(),
            fmt_time(c.created_at),
            c.state.as_str().to_owned(),
            c.name.clone(),
            c.attempt.to_string(),
            c.pod_id.chars().take(12).collect(),
        ]);
    }
    table(&rows);
    Ok(())
}

pub async fn inspect(m: &Client, id: &str) -> Result<(), Fail> {
    let (_, d) = m.container_status_with_dict(id).await?;
    let doc = podscope_api::dict::dict_json(&d);
    println!("{doc}");
    Ok(())
}

/// `-i`/`--interactive` and `-t`/`--tty` (exec, attach).
#[derive(Debug, Default, Clone, Copy)]
pub struct Streams {
    stdin: bool,
    tty: bool,
}

impl Streams {
    /// Whether `g` is one of them (and then noted).
    fn take(&mut self, g: &Given) -> bool {
        match g.opt() {
            Opt::Stdin => self.stdin = true,
            Opt::Tty => self.tty = true,
            _ => return false,
        }
        true
    }
}

fn session_end(r: Result<crate::terminal::End, String>) -> Result<i32, Fail> {
    match r.map_err(Fail)? {
        crate::terminal::End::Exited(code) => Ok(code),
        crate::terminal::End::Detached => {
            eprintln!("\r\npodscopectl: detached");
            Ok(0)
        }
    }
}

/// `attach [-i] [-t] ID`. `-t` is taken as kubectl's `-it` habit has it;
/// whether a terminal is joined follows the container.
pub fn attach_args(p: &Parsed) -> Result<(bool, String), Fail> {
    let mut s = Streams::default();
    for g in p.flags() {
        if !s.take(g) {
            return Err(g.unhandled(p));
        }
    }
    let [id] = p.operands() else {
        return Err(Fail("attach takes [-i] ID".into()));
    };
    Ok((s.stdin, id.clone()))
}

pub async fn attach(m: &Client, stdin: bool, id: &str) -> Result<i32, Fail> {
    let s = m.container_status(id).await?;
    let stdin = stdin && s.stdin;
    // A terminal container's terminal is joined on ours.
    // SAFETY: isatty on stdin.
    let tty = s.tty && stdin && unsafe { libc::isatty(0) } == 1;
    session_end(crate::terminal::session(m, &s.id, None, stdin, tty).await)
}

/// `exec [-i] [-t] [--timeout SECONDS] ID [--] COMMAND...`.
#[derive(Debug)]
pub struct ExecArgs {
    streams: Streams,
    timeout_ms: u64,
    id: String,
    command: Vec<String>,
}

pub fn exec_args(p: &Parsed) -> Result<ExecArgs, Fail> {
    let mut streams = Streams::default();
    let mut timeout_ms = 0u64;
    for g in p.flags() {
        if streams.take(g) {
            continue;
        }
        match g.opt() {
            Opt::Timeout => {
                let (a, v) = (g.name(), g.value());
                timeout_ms = v
                    .parse::<u64>()
                    .ok()
                    .and_then(|s| s.checked_mul(1000))
                    .ok_or_else(|| Fail(format!("{a}: {v:?} is not a number of seconds")))?;
            }
            _ => return Err(g.unhandled(p)),
        }
    }
    let [id] = p.operands() else {
        return Err(Fail("exec needs an ID and a command".into()));
    };
    if p.rest().is_empty() {
        return Err(Fail("exec needs a command".into()));
    }
    if timeout_ms != 0 && (streams.stdin || streams.tty) {
        return Err(Fail("--timeout is for exec without -i or -t".into()));
    }
    Ok(ExecArgs {
        streams,
        timeout_ms,
        id: id.clone(),
        command: p.rest().to_vec(),
    })
}

pub async fn exec(m: &Client, e: &ExecArgs) -> Result<i32, Fail> {
    let Streams { stdin, tty } = e.streams;
    if stdin || tty {
        return session_end(crate::terminal::session(m, &e.id, Some(&e.command), stdin, tty).await);
    }
    let r = m.exec_sync(&e.id, &e.command, e.timeout_ms).await?;
    std::io::stdout().write_all(&r.stdout).ok();
    std::io::stderr().write_all(&r.stderr).ok();
    Ok(r.exit_code)
}

/// `logs [-f] ID`.
pub fn logs_args(p: &Parsed) -> Result<(bool, String), Fail> {
    let mut follow = false;
    for g in p.flags() {
        match g.opt() {
            Opt::Follow => follow = true,
            _ => return Err(g.unhandled(p)),
        }
    }
    let [id] = p.operands() else {
        return Err(Fail("logs takes [-f] ID".into()));
    };
    Ok((follow, id.clone()))
}

/// One CRI log record's text, and whether it ends its line.
fn record(line: &str) -> Option<(&str, bool)> {
    let mut p = line.splitn(4, ' ');
    let (_ts, _stream, tag) = (p.next()?, p.next()?, p.next()?);
    Some((p.next().unwrap_or(""), tag == "F"))
}

pub async fn logs(m: &Client, follow: bool, id: &str) -> Result<(), Fail> {
    let s = m.container_status(id).await?;
    if s.log_path.is_empty() {
        return Err(Fail(format!(
            "container {} has no log file (its pod was created without a log directory)",
            s.id
        )));
    }
    let mut out = std::io::stdout().lock();
    let mut pos = 0u64;
    let mut ino = 0u64;
    let mut partial = String::new();
    // The daemon records an exit only once it has read the pipes dry,
    // so a pass after that sees the file's last line.
    let mut last_pass = !follow;
    loop {
        use std::io::{BufRead, Seek};
        use std::os::unix::fs::MetadataExt;
        let f =
            std::fs::File::open(&s.log_path).map_err(|e| Fail(format!("{}: {e}", s.log_path)))?;
        let meta = f.metadata().map_err(|e| Fail(e.to_string()))?;
        if meta.ino() != ino {
            // Rotated (or first open): a new file from its start.
            ino = meta.ino();
            pos = 0;
        }
        let mut r = std::io::BufReader::new(f);
        r.seek(std::io::SeekFrom::Start(pos))
            .map_err(|e| Fail(e.to_string()))?;
        let mut line = String::new();
        while r.read_line(&mut line).map_err(|e| Fail(e.to_string()))? > 0 {
            if !line.ends_with('\n') {
                break;
            }
            pos += line.len() as u64;
            if let Some((text, full)) = record(line.trim_end_matches('\n')) {
                partial.push_str(text);
                if full {
                    let _ = writeln!(out, "{partial}");
                    partial.clear();
                }
            }
            line.clear();
        }
        let _ = out.flush();
        if last_pass {
            return Ok(());
        }
        let st = m.container_status(id).await?;
        if st.state != ContainerState::Running && st.state != ContainerState::Created {
            last_pass = true;
            continue;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{parse, ROOT};

    fn create(args: &str) -> Result<CreateArgs, Fail> {
        let (path, cmd) = ROOT
            .walk()
            .into_iter()
            .find(|(p, _)| p == "container create")
            .expect("container create");
        let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
        create_args(&parse(cmd, &path, &args)?)
    }

    #[test]
    fn a_device_is_a_cdi_name_or_a_host_node_as_podmans() {
        let c = create(
            "pod web img --device nvidia.com/gpu=0 --device /dev/fuse \
             --device /dev/sda:/dev/disk:r --device vendor.com/x=all",
        )
        .unwrap();
        assert_eq!(
            c.options.cdi_devices,
            ["nvidia.com/gpu=0", "vendor.com/x=all"]
        );
        let d: Vec<(&str, &str, &str)> = c
            .options
            .devices
            .iter()
            .map(|d| {
                (
                    d.host_path.as_str(),
                    d.container_path.as_str(),
                    d.permissions.as_str(),
                )
            })
            .collect();
        assert_eq!(
            d,
            [
                ("/dev/fuse", "/dev/fuse", ""),
                ("/dev/sda", "/dev/disk", "r")
            ]
        );
        let e = create("pod web img --device /dev/a:/b:r:x").unwrap_err();
        assert!(e.0.contains("neither a CDI device"), "{}", e.0);
    }
}
