//! podscopectl: inspect and drive podscope sandboxes (machinectl-like).
//!
//! The command line is a table (`spec`): every command, alias and flag.
//! `read_line` parses the arguments against it and `prepare` turns them
//! into an `Action`, without the bus; `perform` then calls the daemon.

mod call;
mod containers;
#[cfg(test)]
mod doc_tests;
mod fail;
mod images;
mod operands;
mod output;
mod spec;
mod terminal;

use call::{call_with, Mutate};
use containers::{CreateArgs as ContainerCreateArgs, ExecArgs};
use enumflags2::BitFlags;
use fail::Fail;
use operands::{kv, no_operands};
use output::{fmt_time, human, table};
use podscope_api::container::{ContainerFilter, Resources as ContainerResources};
use podscope_api::domain::{NamespaceMode, NetworkMode, Protocol, State};
use podscope_api::errors::classify;
use podscope_api::image::{ImageFilter, PullOptions};
use podscope_api::proxy::system_connection;
use podscope_api::ErrorKind;
use podscope_api::{Client, CreateOptions, Dns, ListFilter, PodMetadata, PortMapping, Resources};
use spec::{Cmd, Opt, Parsed, ROOT};
use std::collections::BTreeMap;
use std::process::ExitCode;
use zbus::proxy::MethodFlags;
use zbus::zvariant::OwnedObjectPath;

const USAGE: &str = "usage: podscopectl [--no-ask-password] COMMAND [ARGS]
       podscopectl --version|-V
       podscopectl --help|-h|help

Commands:
  list [--state STATE] [--label K=V]... [-q|--quiet]
                                          list sandboxes (-q: full ids only)
  status ID                               show one sandbox (ID or unique prefix)
  create NAME [OPTIONS]                   create a sandbox, print its id
      --namespace NS (default: default)  --uid UID (default: random)
      --attempt N  --hostname NAME  --host-network  --pid-namespace pod|container|node
      --label K=V  --annotation K=V  --cgroup-parent PARENT  --log-directory DIR
      --runtime-handler NAME  --memory BYTES  --cpu-quota USEC  --cpu-period USEC
      --cpu-shares N  --pids-limit N  --port HOST:CONTAINER[/PROTO]
      --dns-server IP  --dns-search DOMAIN  --dns-option OPT  --sysctl K=V
      --start (start it too)
  start ID...    stop ID...    rm|remove ID...
  wait ID                                 block until the sandbox stops; print
                                          its exit status, end time and reason
  update ID [--memory BYTES] [--cpu-quota USEC] [--cpu-period USEC]
            [--cpu-shares N] [--pids-limit N]
                                          set a sandbox's resources (a limit not
                                          given is removed)
  info                                    runtime version, platform, readiness and
                                          what recovery found at start
  journal ID [JOURNALCTL-OPTIONS...]      journalctl for a sandbox or container (ID
                                          or unique prefix): podscoped's entries
                                          about it and its units'; e.g. -f, -n 50
  pull IMAGE [--creds USER[:PASSWORD]] [--auth BASE64] [--registry-token TOKEN]
                                          pull an image (progress on a terminal),
                                          print its id
  images [-q|--quiet] [IMAGE]             list images (-q: ids only)
  inspecti IMAGE                          one image as JSON (id, tag, digest)
  rmi IMAGE...                            remove images (id, prefix, tag, digest)
  imagefsinfo                             the image store's disk use
  help                                    this usage (also -h, --help)

Containers (crictl's names where they name nothing else here):
  container create POD NAME IMAGE [OPTIONS] [-- COMMAND ARGS...]
      -e|--env K=V  -w|--workdir DIR  -u|--user UID|NAME
      --mount HOST:CONTAINER[:ro|:rro]  --label K=V  --log-path PATH (in the pod's
      log directory; default NAME/ATTEMPT.log)
      --device VENDOR/CLASS=NAME (a CDI device) or HOST[:CONTAINER[:PERMS]]
      --privileged  --read-only  --cap-add CAP  --cap-drop CAP  -t|--tty
      -i|--stdin  --memory BYTES  --cpu-quota USEC  --cpu-period USEC
      --cpu-shares N  --cpuset-cpus LIST  --attempt N  --start (start it too)
                                          create a container in a ready pod
  container start ID...    container stop [-t|--timeout SECONDS] ID...
  container rm|remove ID...
  container update ID [--memory BYTES] [--cpu-quota USEC] [--cpu-period USEC]
                      [--cpu-shares N] [--cpuset-cpus LIST]
  container checkpoint [-t|--timeout SECONDS] [--stop] ID ARCHIVE
                                          its memory (CRIU) and files into ARCHIVE,
                                          a new file; it keeps running unless --stop.
                                          Restore: container create POD NAME ARCHIVE
  ps [-a|--all] [-p|--pod ID] [--state STATE] [--label K=V]... [-q|--quiet]
                                          list containers (running ones unless -a)
  inspect ID                              one container as JSON
  logs [-f|--follow] ID                   its output, from its CRI log file
  exec [-i|--interactive] [-t|--tty] [--timeout SECONDS] ID [--] COMMAND...
                                          run a command in a running container;
                                          exits with the command's status. -i: with
                                          this stdin; -t: on a terminal (ctrl-p ctrl-q
                                          detaches)
  attach [-i|--interactive] [-t|--tty] ID join a running container's output (and,
                                          with -i, its stdin; its terminal if it has one)

A flag's value follows it, or an = (--memory=67108864); short flags
without values may be joined (-it, -aq).
Create, start, stop, rm, update, pull, rmi, container, exec and attach let polkit ask for a password (through an
authentication agent) unless --no-ask-password is given.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Without the bus: the version (a packager's smoke test, or a node
    // whose daemon is down, still gets it), the usage, and every mistake
    // in the arguments.
    let (ask_password, action) = match read_line(&args) {
        Ok(Line::Version) => {
            println!("podscopectl {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(Line::Usage(code)) => {
            println!("{USAGE}");
            return ExitCode::from(code);
        }
        Ok(Line::Run {
            ask_password,
            action,
        }) => (ask_password, action),
        Err(Fail(msg)) => {
            eprintln!("podscopectl: {msg}");
            return ExitCode::from(1);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(perform(ask_password, *action)) {
        // exec exits with its command's status.
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(255)),
        Err(Fail(msg)) => {
            eprintln!("podscopectl: {msg}");
            ExitCode::from(1)
        }
    }
}

/// What the command line asks for.
enum Line {
    Version,
    /// The usage, and the exit status: 0 when asked for, 2 for no command.
    Usage(u8),
    Run {
        ask_password: bool,
        action: Box<Action>,
    },
}

/// "create, start or update": a group's verbs, for its messages.
fn verbs(group: &spec::Command, last: &str) -> String {
    let names: Vec<&str> = group.subcommands.iter().map(|c| c.name).collect();
    match names.split_last() {
        Some((tail, [])) => (*tail).to_owned(),
        Some((tail, init)) => format!("{}{last}{tail}", init.join(", ")),
        None => String::new(),
    }
}

/// The global flags, the command (and a group's verb), its arguments.
fn read_line(args: &[String]) -> Result<Line, Fail> {
    let top = spec::parse(&ROOT, "", args)?;
    let (mut ask_password, mut version, mut help) = (true, false, false);
    for g in top.flags() {
        match g.opt() {
            Opt::NoAskPassword => ask_password = false,
            Opt::Version => version = true,
            Opt::Help => help = true,
            _ => return Err(g.unhandled(&top)),
        }
    }
    if version {
        return Ok(Line::Version);
    }
    if help {
        return Ok(Line::Usage(0));
    }
    // No command, `--no-ask-password` alone included.
    let Some(name) = top.operands().first() else {
        return Ok(Line::Usage(2));
    };
    let Some(mut cmd) = ROOT.find(name) else {
        return Err(Fail(format!("unknown command {name:?}\n{USAGE}")));
    };
    let mut path = name.clone();
    let mut rest = top.rest().to_vec();
    if !cmd.subcommands.is_empty() {
        let group = spec::parse(cmd, &path, &rest)?;
        no_flags(&group)?;
        let Some(verb) = group.operands().first() else {
            return Err(Fail(format!("{path} needs a verb: {}", verbs(cmd, " or "))));
        };
        let Some(sub) = cmd.find(verb) else {
            return Err(Fail(format!(
                "{path}: unknown verb {verb:?} ({})",
                verbs(cmd, ", ")
            )));
        };
        path = format!("{path} {verb}");
        rest = group.rest().to_vec();
        cmd = sub;
    }
    let p = spec::parse(cmd, &path, &rest)?;
    let action = prepare(cmd.cmd, &p)?;
    if let Some(g) = p.unseen() {
        return Err(g.unhandled(&p));
    }
    Ok(match action {
        Action::Help => Line::Usage(0),
        action => Line::Run {
            ask_password,
            action: Box::new(action),
        },
    })
}

/// One command, its arguments read and checked.
#[derive(Debug)]
enum Action {
    Help,
    List {
        filter: ListFilter,
        quiet: bool,
    },
    Status(String),
    Create(Box<CreateArgs>),
    /// Start, Stop or Remove on each sandbox.
    Each {
        method: &'static str,
        ids: Vec<String>,
    },
    Wait(String),
    Update {
        id: String,
        resources: Resources,
    },
    Info,
    Journal {
        id: String,
        options: Vec<String>,
    },
    Pull {
        image: String,
        options: PullOptions,
    },
    Images {
        filter: ImageFilter,
        quiet: bool,
    },
    Inspecti(String),
    Rmi(Vec<String>),
    ImageFsInfo,
    ContainerCreate(Box<ContainerCreateArgs>),
    /// StartContainer or RemoveContainer on each.
    ContainerEach {
        method: &'static str,
        ids: Vec<String>,
    },
    ContainerStop {
        timeout: i64,
        ids: Vec<String>,
    },
    ContainerUpdate {
        id: String,
        resources: ContainerResources,
    },
    ContainerCheckpoint {
        id: String,
        archive: String,
        options: podscope_api::container::CheckpointOptions,
    },
    Ps {
        filter: ContainerFilter,
        quiet: bool,
    },
    Inspect(String),
    Logs {
        follow: bool,
        id: String,
    },
    Exec(ExecArgs),
    Attach {
        stdin: bool,
        id: String,
    },
}

/// A command's parsed arguments as an `Action`. Each command takes its
/// flags here, matching on their `Opt`; a flag the table gives a command
/// and its arm does not take is an error (`Given::unhandled`, or, for a
/// flag never looked at, `Parsed::unseen` in read_line), never ignored.
fn prepare(cmd: Cmd, p: &Parsed) -> Result<Action, Fail> {
    Ok(match cmd {
        // Groups are resolved to a verb by read_line.
        Cmd::Podscopectl | Cmd::Container => {
            return Err(Fail(format!("{} needs a command", p.path())))
        }
        // `help` and anything after it: the usage.
        Cmd::Help => Action::Help,
        Cmd::List => {
            let (filter, quiet) = list_args(p)?;
            Action::List { filter, quiet }
        }
        Cmd::Status => Action::Status(one(p, "status takes one ID")?),
        Cmd::Create => Action::Create(Box::new(create_args(p)?)),
        Cmd::Start => Action::Each {
            method: "Start",
            ids: at_least_one(p, "ID")?,
        },
        Cmd::Stop => Action::Each {
            method: "Stop",
            ids: at_least_one(p, "ID")?,
        },
        Cmd::Rm => Action::Each {
            method: "Remove",
            ids: at_least_one(p, "ID")?,
        },
        Cmd::Wait => Action::Wait(one(p, "wait takes one ID")?),
        Cmd::Update => {
            let (id, resources) = update_args(p)?;
            Action::Update { id, resources }
        }
        Cmd::Info => {
            no_operands(p)?;
            Action::Info
        }
        Cmd::Journal => Action::Journal {
            id: one(p, "journal needs an ID (then journalctl's options)")?,
            options: p.rest().to_vec(),
        },
        Cmd::Pull => {
            let (image, options) = images::pull_args(p)?;
            Action::Pull { image, options }
        }
        Cmd::Images => {
            let (filter, quiet) = images::list_args(p)?;
            Action::Images { filter, quiet }
        }
        Cmd::Inspecti => Action::Inspecti(one(p, "inspecti takes one IMAGE")?),
        Cmd::Rmi => Action::Rmi(at_least_one(p, "IMAGE")?),
        Cmd::Imagefsinfo => {
            no_operands(p)?;
            Action::ImageFsInfo
        }
        Cmd::ContainerCreate => Action::ContainerCreate(Box::new(containers::create_args(p)?)),
        Cmd::ContainerStart => Action::ContainerEach {
            method: "StartContainer",
            ids: at_least_one(p, "ID")?,
        },
        Cmd::ContainerRm => Action::ContainerEach {
            method: "RemoveContainer",
            ids: at_least_one(p, "ID")?,
        },
        Cmd::ContainerStop => {
            let (timeout, ids) = containers::stop_args(p)?;
            Action::ContainerStop { timeout, ids }
        }
        Cmd::ContainerUpdate => {
            let (id, resources) = containers::update_args(p)?;
            Action::ContainerUpdate { id, resources }
        }
        Cmd::ContainerCheckpoint => {
            let (id, archive, options) = containers::checkpoint_args(p)?;
            Action::ContainerCheckpoint {
                id,
                archive,
                options,
            }
        }
        Cmd::Ps => {
            let (filter, quiet) = containers::ps_args(p)?;
            Action::Ps { filter, quiet }
        }
        Cmd::Inspect => Action::Inspect(one(p, "inspect takes one ID")?),
        Cmd::Logs => {
            let (follow, id) = containers::logs_args(p)?;
            Action::Logs { follow, id }
        }
        Cmd::Exec => Action::Exec(containers::exec_args(p)?),
        Cmd::Attach => {
            let (stdin, id) = containers::attach_args(p)?;
            Action::Attach { stdin, id }
        }
    })
}

/// For a group, which takes no flags: any the table gives it is a bug.
fn no_flags(p: &Parsed) -> Result<(), Fail> {
    match p.flags().first() {
        Some(g) => Err(g.unhandled(p)),
        None => Ok(()),
    }
}

/// The one operand, or `msg`.
fn one(p: &Parsed, msg: &str) -> Result<String, Fail> {
    match p.operands() {
        [one] => Ok(one.clone()),
        _ => Err(Fail(msg.into())),
    }
}

/// The one ID an `update` takes.
fn only_id(p: &Parsed) -> Result<String, Fail> {
    match p.operands() {
        [] => Err(Fail(format!("{} needs an ID", p.path()))),
        [id] => Ok(id.clone()),
        _ => Err(Fail(format!("{} takes one ID", p.path()))),
    }
}

/// The operands, at least one `what`.
fn at_least_one(p: &Parsed, what: &str) -> Result<Vec<String>, Fail> {
    if p.operands().is_empty() {
        return Err(Fail(format!("{} needs at least one {what}", p.path())));
    }
    Ok(p.operands().to_vec())
}

/// Connect, then do `action`; the exit status (exec's command's, or 0).
async fn perform(ask_password: bool, action: Action) -> Result<i32, Fail> {
    // Longer than any daemon-side step timeout, so the daemon's own error
    // arrives first.
    let conn = system_connection(std::time::Duration::from_secs(120))
        .await
        .map_err(|e| Fail(format!("cannot connect to the system bus: {e}")))?;
    let m = Client::new(&conn).await?;
    let mutate = Mutate {
        m: &m,
        flags: if ask_password {
            MethodFlags::AllowInteractiveAuth.into()
        } else {
            BitFlags::empty()
        },
    };
    let done: Result<(), Fail> = match action {
        // read_line answers it without the bus.
        Action::Help => Ok(()),
        Action::List { filter, quiet } => list(&m, &filter, quiet).await,
        Action::Status(id) => status(&m, &id).await,
        Action::Create(c) => create(&mutate, &c).await,
        Action::Each { method, ids } => {
            for id in &ids {
                mutate.call::<_, ()>(method, &(id.as_str(),)).await?;
            }
            Ok(())
        }
        Action::Wait(id) => wait(&id).await,
        Action::Update { id, resources } => {
            mutate
                .call::<_, ()>("UpdateResources", &(id.as_str(), resources))
                .await
        }
        Action::Info => info(&m).await,
        Action::Journal { id, options } => journal(&m, &id, &options).await,
        Action::Pull { image, options } => images::pull(mutate.flags, &image, &options).await,
        Action::Images { filter, quiet } => images::list(&m, &filter, quiet).await,
        Action::Inspecti(image) => images::inspect(&m, &image).await,
        Action::Rmi(images) => {
            for image in &images {
                call_with::<_, ()>(
                    m.images_proxy().inner(),
                    mutate.flags,
                    "Remove",
                    &(image.as_str(),),
                )
                .await?;
            }
            Ok(())
        }
        Action::ImageFsInfo => {
            let i = m.image_fs_info().await?;
            println!("store:  {}", i.mountpoint);
            println!("images: {}", i.images);
            println!(
                "used:   {} ({} bytes), {} inodes",
                human(i.used_bytes),
                i.used_bytes,
                i.inodes_used
            );
            Ok(())
        }
        Action::ContainerCreate(c) => containers::create(&mutate, &c).await,
        Action::ContainerEach { method, ids } => containers::each(&mutate, method, &ids).await,
        Action::ContainerStop { timeout, ids } => containers::stop(&mutate, timeout, &ids).await,
        Action::ContainerUpdate { id, resources } => {
            containers::update(&mutate, &id, &resources).await
        }
        Action::ContainerCheckpoint {
            id,
            archive,
            options,
        } => containers::checkpoint(&mutate, &id, &archive, &options).await,
        Action::Ps { filter, quiet } => containers::ps(&m, &filter, quiet).await,
        Action::Inspect(id) => containers::inspect(&m, &id).await,
        Action::Logs { follow, id } => containers::logs(&m, follow, &id).await,
        Action::Exec(e) => return containers::exec(&m, &e).await,
        Action::Attach { stdin, id } => return containers::attach(&m, stdin, &id).await,
    };
    done.map(|()| 0)
}

/// `list [--state STATE] [--label K=V]... [-q]`: the filter and -q.
fn list_args(p: &Parsed) -> Result<(ListFilter, bool), Fail> {
    no_operands(p)?;
    let mut filter = ListFilter::default();
    let mut labels = BTreeMap::new();
    let mut quiet = false;
    for g in p.flags() {
        let (a, v) = (g.name(), g.value());
        match g.opt() {
            Opt::State => {
                filter.state = Some(State::parse(v).ok_or_else(|| {
                    Fail(format!("{a}: {v:?} is not one of created, ready, notready"))
                })?);
            }
            Opt::Label => {
                let (k, v) = kv(v, a)?;
                labels.insert(k, v);
            }
            Opt::Quiet => quiet = true,
            _ => return Err(g.unhandled(p)),
        }
    }
    if !labels.is_empty() {
        filter.labels = Some(labels);
    }
    Ok((filter, quiet))
}

async fn list(m: &Client, filter: &ListFilter, quiet: bool) -> Result<(), Fail> {
    let mut sandboxes = m.list(filter).await?;
    sandboxes.sort_by_key(|d| d.created_at);
    if quiet {
        for d in &sandboxes {
            println!("{}", d.id);
        }
        return Ok(());
    }
    if sandboxes.is_empty() {
        println!("No sandboxes.");
        return Ok(());
    }
    let mut rows = vec![["ID", "POD", "STATE", "NETWORK", "CREATED", "UNIT"]
        .map(String::from)
        .to_vec()];
    for d in &sandboxes {
        rows.push(vec![
            d.id.chars().take(12).collect(),
            format!("{}/{}", d.namespace, d.name),
            d.state.to_string(),
            d.network.as_str().to_owned(),
            fmt_time(d.created_at),
            d.unit.clone(),
        ]);
    }
    table(&rows);
    println!("\n{} sandboxes listed.", sandboxes.len());
    Ok(())
}

async fn status(m: &Client, id: &str) -> Result<(), Fail> {
    let d = m.status(id).await?;
    let show = |k: &str, v: String| println!("{k:>16}: {v}");
    println!("{} ({}/{})", d.id, d.namespace, d.name);
    show("State", d.state.to_string());
    if !d.reason.is_empty() {
        show("Reason", d.reason.clone());
    }
    show("UID", format!("{} (attempt {})", d.uid, d.attempt));
    show("Created", fmt_time(d.created_at));
    show("Started", fmt_time(d.started_at));
    if d.finished_at > 0 {
        show("Finished", fmt_time(d.finished_at));
    }
    show("Unit", format!("{} (in {})", d.unit, d.slice));
    if d.init_pid > 0 {
        show("Init PID", d.init_pid.to_string());
    }
    if !d.machine.is_empty() {
        let machine = &d.machine;
        show(
            "Machine",
            format!("{machine} (machinectl status {machine})"),
        );
    }
    show("Network", d.network.as_str().to_owned());
    if !d.netns_path.is_empty() {
        show("Netns", d.netns_path.clone());
    }
    if !d.ips.is_empty() {
        show(
            "IPs",
            format!("{} (CNI network {})", d.ips.join(", "), d.network_name),
        );
    }
    if !d.network_error.is_empty() {
        show("Network error", d.network_error.clone());
    }
    if !d.resolv_conf_path.is_empty() {
        show("resolv.conf", d.resolv_conf_path.clone());
    }
    show("Hostname", d.hostname.clone());
    show("PID namespace", d.pid_namespace.as_str().to_owned());
    show(
        "Runtime handler",
        if d.runtime_handler.is_empty() {
            "(default)".into()
        } else {
            d.runtime_handler.clone()
        },
    );
    for (title, map) in [("Labels", &d.labels), ("Annotations", &d.annotations)] {
        let pairs: Vec<_> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
        show(
            title,
            if title == "Annotations" && d.annotations_hidden {
                "(shown to root only)".into()
            } else if pairs.is_empty() {
                "-".into()
            } else {
                pairs.join(", ")
            },
        );
    }
    println!("\nInspect with: systemctl status {}", d.unit);
    Ok(())
}

/// A resource flag of create and update, set in `r`; false for any other
/// flag.
fn resource_option(r: &mut Resources, g: &spec::Given) -> Result<bool, Fail> {
    let field = match g.opt() {
        Opt::Memory => &mut r.memory_limit_in_bytes,
        Opt::CpuQuota => &mut r.cpu_quota,
        Opt::CpuPeriod => &mut r.cpu_period,
        Opt::CpuShares => &mut r.cpu_shares,
        Opt::PidsLimit => &mut r.pids_limit,
        _ => return Ok(false),
    };
    *field = g.number()?;
    Ok(true)
}

/// `update ID [LIMITS]`.
fn update_args(p: &Parsed) -> Result<(String, Resources), Fail> {
    let id = only_id(p)?;
    let mut resources = Resources::default();
    for g in p.flags() {
        if !resource_option(&mut resources, g)? {
            return Err(g.unhandled(p));
        }
    }
    Ok((id, resources))
}

/// Wait without a method timeout of our own: a pod may run for months.
async fn wait(id: &str) -> Result<(), Fail> {
    let conn = system_connection(std::time::Duration::from_secs(10 * 365 * 86_400))
        .await
        .map_err(|e| Fail(format!("cannot connect to the system bus: {e}")))?;
    let exit = Client::new(&conn).await?.wait(id).await?;
    println!(
        "exit status {}, finished {}{}",
        exit.status,
        fmt_time(exit.finished_at),
        if exit.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", exit.reason)
        }
    );
    Ok(())
}

/// `create NAME [OPTIONS]`.
#[derive(Debug)]
struct CreateArgs {
    pod: PodMetadata,
    options: CreateOptions,
    start: bool,
}

fn create_args(p: &Parsed) -> Result<CreateArgs, Fail> {
    let [name] = p.operands() else {
        return Err(Fail(if p.operands().is_empty() {
            "create needs a NAME".into()
        } else {
            "create takes one NAME".into()
        }));
    };
    let mut pod = PodMetadata {
        name: name.clone(),
        namespace: "default".to_owned(),
        uid: podscope_api::domain::SandboxId::random().short().to_owned(),
        attempt: 0,
    };
    let mut start = false;
    let mut o = CreateOptions::default();
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    let mut resources = Resources::default();
    let mut ports = Vec::new();
    let mut dns = Dns::default();
    let mut sysctls = BTreeMap::new();
    for g in p.flags() {
        let (a, v) = (g.name(), g.value());
        // A part of the value (--port's), named with the flag.
        let num = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| Fail(format!("{a}: {s:?} is not a number")))
        };
        match g.opt() {
            Opt::Namespace => pod.namespace = v.to_owned(),
            Opt::Uid => pod.uid = v.to_owned(),
            Opt::Attempt => pod.attempt = g.number()?,
            Opt::Hostname => o.hostname = Some(v.to_owned()),
            Opt::HostNetwork => o.network = Some(NetworkMode::Host),
            Opt::PidNamespace => {
                o.pid_namespace = Some(NamespaceMode::parse(a, v).map_err(|e| Fail(e.to_string()))?)
            }
            Opt::CgroupParent => o.cgroup_parent = Some(v.to_owned()),
            Opt::LogDirectory => o.log_directory = Some(v.to_owned()),
            Opt::RuntimeHandler => o.runtime_handler = Some(v.to_owned()),
            Opt::Label => {
                let (k, v) = kv(v, a)?;
                labels.insert(k, v);
            }
            Opt::Annotation => {
                let (k, v) = kv(v, a)?;
                annotations.insert(k, v);
            }
            Opt::Port => {
                let (pair, proto) = v.split_once('/').unwrap_or((v, "tcp"));
                let (host, container) = pair
                    .split_once(':')
                    .ok_or_else(|| Fail(format!("{a}: {v:?} is not HOST:CONTAINER[/PROTO]")))?;
                ports.push(PortMapping {
                    protocol: Protocol::parse(proto).map_err(|e| Fail(format!("{a}: {e}")))?,
                    container_port: num(container)?,
                    host_port: num(host)?,
                    host_ip: String::new(),
                });
            }
            Opt::DnsServer => dns.servers.push(v.to_owned()),
            Opt::DnsSearch => dns.searches.push(v.to_owned()),
            Opt::DnsOption => dns.options.push(v.to_owned()),
            Opt::Sysctl => {
                let (k, v) = kv(v, a)?;
                sysctls.insert(k, v);
            }
            Opt::Start => start = true,
            _ => {
                if !resource_option(&mut resources, g)? {
                    return Err(g.unhandled(p));
                }
            }
        }
    }
    let some_map = |m: BTreeMap<String, String>| (!m.is_empty()).then_some(m);
    o.labels = some_map(labels);
    o.annotations = some_map(annotations);
    o.sysctls = some_map(sysctls);
    o.resources = (resources != Resources::default()).then_some(resources);
    o.port_mappings = (!ports.is_empty()).then_some(ports);
    o.dns = (dns != Dns::default()).then_some(dns);
    Ok(CreateArgs {
        pod,
        options: o,
        start,
    })
}

async fn create(m: &Mutate<'_>, c: &CreateArgs) -> Result<(), Fail> {
    let (pod, o) = (&c.pod, &c.options);
    let (id, _): (String, OwnedObjectPath) = m
        .call(
            "Create",
            &(&pod.name, &pod.namespace, &pod.uid, pod.attempt, o),
        )
        .await?;
    if c.start {
        if let Err(Fail(msg)) = m.call::<_, ()>("Start", &(id.as_str(),)).await {
            return Err(Fail(format!("created {id} but start failed: {msg}")));
        }
    }
    println!("{id}");
    Ok(())
}

async fn info(m: &Client) -> Result<(), Fail> {
    let v = m.version().await?;
    println!(
        "{} {} (API {})",
        v.runtime_name, v.runtime_version, v.api_version
    );
    let p = m.platform().await?;
    println!(
        "Platform: {}/{}{}",
        p.os,
        p.architecture,
        if p.variant.is_empty() {
            String::new()
        } else {
            format!("/{}", p.variant)
        }
    );
    let (conditions, info, _) = m.runtime_status().await?;
    for c in conditions {
        let (kind, ok) = (c.kind, c.status);
        let extra = [c.reason, c.message]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        println!(
            "{kind}: {}{}",
            ok,
            if extra.is_empty() {
                String::new()
            } else {
                format!(" ({extra})")
            }
        );
    }
    println!("Sandboxes: {} ({} ready)", info.sandboxes, info.ready);
    println!(
        "Recovered at start: {} in {} µs",
        info.recovered, info.recovery_usec
    );
    // What recovery found, counts always (0 says it was checked).
    println!("Quarantined at start: {}", info.quarantined.len());
    for q in &info.quarantined {
        println!("  {} -> {}: {}", q.dir, q.moved_to, q.reason);
    }
    println!("Orphans stopped at start: {}", info.orphans_stopped.len());
    for unit in &info.orphans_stopped {
        println!("  {unit}");
    }
    println!("Network teardowns owed: {}", info.network_teardowns_owed);
    // What kubelet sees in the CRI's runtime_handlers, and why not.
    for h in &info.handler_features {
        let yes = |b: bool| if b { "yes" } else { "no" };
        println!(
            "Runtime handler {}: recursive read-only mounts {}, user namespaces {}",
            h.name,
            yes(h.recursive_read_only_mounts),
            yes(h.user_namespaces)
        );
        for why in &h.why_not {
            println!("  {why}");
        }
    }
    println!("cgroup layout: {}", info.cgroup_layout);
    if !info.cgroup_advice.is_empty() {
        println!("  {}", info.cgroup_advice);
    }
    println!(
        "CDI devices: {} of {} kinds, from {}",
        info.cdi_devices.len(),
        info.cdi_kinds.len(),
        info.cdi_spec_dirs.join(", ")
    );
    for d in &info.cdi_devices {
        println!("  {d}");
    }
    for e in &info.cdi_spec_errors {
        println!("  in error: {e}");
    }
    println!(
        "systemd-oomd for pod slices: {}",
        if info.oomd_memory_pressure_limit.is_empty() {
            "off".to_owned()
        } else {
            format!("memory pressure limit {}", info.oomd_memory_pressure_limit)
        }
    );
    println!(
        "File descriptors: {} open of {} (most at once {}; {} promised to calls in flight)",
        info.descriptors_open,
        info.descriptors_limit,
        info.descriptors_peak,
        info.descriptors_reserved
    );
    println!(
        "  held for {} running containers: {}{}",
        info.containers_running,
        info.descriptors_containers,
        if info.containers_running > 0 {
            format!(
                " ({:.1} each)",
                info.descriptors_containers as f64 / f64::from(info.containers_running)
            )
        } else {
            String::new()
        }
    );
    println!(
        "Calls on the bus: {} in flight of at most {} (most at once {}; {} waited for a slot, {} refusals by the bus retried, {} failed)",
        info.bus_calls_in_flight,
        info.bus_calls_max,
        info.bus_calls_peak,
        info.bus_calls_waited,
        info.bus_refusals_retried,
        info.bus_calls_failed
    );
    Ok(())
}

/// journalctl's matches for one object: `FIELD=ID`, or'ed (`+`) with each
/// unit's own entries and systemd's about it (`_SYSTEMD_UNIT=U + UNIT=U`).
fn journal_matches_of(field: &str, id: &str, units: &[&str]) -> Vec<String> {
    let mut out = vec![format!("{field}={id}")];
    for unit in units.iter().filter(|u| !u.is_empty()) {
        for f in ["_SYSTEMD_UNIT", "UNIT"] {
            out.push("+".into());
            out.push(format!("{f}={unit}"));
        }
    }
    out
}

/// journalctl's matches for a sandbox or container `id` (or unique
/// prefix), as the daemon resolves it: podscoped's entries about it
/// (SANDBOX_ID, CONTAINER_ID) and its units' (a sandbox: its scope and
/// netns unit, and its containers' entries and units).
async fn journal_matches(m: &Client, id: &str) -> Result<Vec<String>, Fail> {
    let (sandbox, container) = tokio::join!(m.status(id), m.container_status(id));
    let not_found = |e: &zbus::Error| classify(e).0 == ErrorKind::NotFound;
    match (sandbox, container) {
        (Ok(s), Err(e)) if not_found(&e) => {
            let mut out = journal_matches_of("SANDBOX_ID", &s.id, &[&s.unit, &s.netns_unit]);
            let filter = ContainerFilter {
                pod_id: Some(s.id.clone()),
                ..Default::default()
            };
            for c in m.list_containers(&filter).await? {
                out.push("+".into());
                out.extend(journal_matches_of("CONTAINER_ID", &c.id, &[&c.unit]));
            }
            Ok(out)
        }
        (Err(e), Ok(c)) if not_found(&e) => {
            Ok(journal_matches_of("CONTAINER_ID", &c.id, &[&c.unit]))
        }
        (Ok(s), Ok(c)) => Err(Fail(format!(
            "id prefix {id:?} is ambiguous: it matches sandbox {} and container {}",
            s.id, c.id
        ))),
        (Err(s), Err(c)) if not_found(&s) && not_found(&c) => {
            Err(Fail(format!("{}; {}", classify(&s).1, classify(&c).1)))
        }
        (Err(e), _) | (_, Err(e)) => Err(e.into()),
    }
}

/// `journal ID [OPTIONS...]`: exec journalctl with the matches, then the
/// options as given.
async fn journal(m: &Client, id: &str, options: &[String]) -> Result<(), Fail> {
    use std::os::unix::process::CommandExt;
    let matches = journal_matches(m, id).await?;
    let e = std::process::Command::new("journalctl")
        .args(&matches)
        .args(options)
        .exec();
    Err(Fail(if e.kind() == std::io::ErrorKind::NotFound {
        "journal: journalctl not found (it comes with systemd; is it installed and on PATH?)".into()
    } else {
        format!("journal: cannot run journalctl: {e}")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    fn action(line: &str) -> Result<Action, String> {
        match read_line(&args(line)) {
            Ok(Line::Run { action, .. }) => Ok(*action),
            Ok(Line::Version) => Err("version".into()),
            Ok(Line::Usage(code)) => Err(format!("usage {code}")),
            Err(Fail(msg)) => Err(msg),
        }
    }

    /// Operands that let `cmd`'s arguments through `prepare`.
    fn sample_operands(cmd: Cmd) -> &'static str {
        match cmd {
            Cmd::Podscopectl | Cmd::Container => "",
            Cmd::Help | Cmd::List | Cmd::Info | Cmd::Imagefsinfo | Cmd::Ps => "",
            Cmd::Status | Cmd::Start | Cmd::Stop | Cmd::Rm | Cmd::Wait | Cmd::Update => "3fa1",
            Cmd::Inspect | Cmd::Logs | Cmd::Attach => "3fa1",
            Cmd::ContainerStart | Cmd::ContainerStop | Cmd::ContainerRm => "3fa1",
            Cmd::ContainerUpdate => "3fa1",
            Cmd::ContainerCheckpoint => "3fa1 /var/lib/podscope-checkpoints/c.tar",
            Cmd::Create => "web",
            Cmd::Pull | Cmd::Images | Cmd::Inspecti | Cmd::Rmi => "busybox",
            Cmd::ContainerCreate => "3fa1 web busybox -- true",
            Cmd::Exec => "3fa1 true",
            Cmd::Journal => "3fa1 -f",
        }
    }

    /// A value each flag takes, by the name the table gives it.
    fn sample_value(what: &str) -> &'static str {
        match what {
            "BYTES" | "USEC" | "N" | "SECONDS" => "1",
            "K=V" => "k=v",
            "STATE" => "created",
            "pod|container|node" => "pod",
            "HOST:CONTAINER[/PROTO]" => "8080:80/tcp",
            "HOST:CONTAINER[:ro|:rro]" => "/srv:/srv:ro",
            _ => "x",
        }
    }

    /// Every spelling of every flag in the table, given to its command,
    /// is taken by the command's handler: none falls to a catch-all or is
    /// left unlooked at.
    #[test]
    fn every_flag_in_the_table_is_handled() {
        for (path, cmd) in ROOT.walk() {
            if !cmd.subcommands.is_empty() {
                continue;
            }
            let mut lines = vec![String::new()];
            for f in cmd.flags {
                for name in f.names {
                    lines.push(match f.value {
                        Some(what) => format!("{name} {}", sample_value(what)),
                        None => (*name).to_owned(),
                    });
                }
            }
            for flags in lines {
                let line = format!("{path} {flags} {}", sample_operands(cmd.cmd));
                if let Err(Fail(e)) = read_line(&args(&line)) {
                    panic!("`podscopectl {line}`: {e}");
                }
            }
        }
        for line in [
            "--no-ask-password list",
            "-V",
            "--version",
            "-h",
            "--help",
            "help",
        ] {
            assert!(read_line(&args(line)).is_ok(), "{line}");
        }
    }

    #[test]
    fn the_command_line_without_the_bus() {
        assert!(matches!(read_line(&[]), Ok(Line::Usage(2))));
        for (line, want) in [
            ("--no-ask-password", "usage 2"),
            ("--help", "usage 0"),
            ("-h", "usage 0"),
            ("help", "usage 0"),
            ("help list", "usage 0"),
            ("--no-ask-password -V", "version"),
            ("-x", "unknown option \"-x\""),
            ("list -x", "list: unknown option \"-x\""),
            ("list extra", "list: unexpected argument \"extra\""),
            ("status", "status takes one ID"),
            ("start", "start needs at least one ID"),
            ("remove", "remove needs at least one ID"),
            ("update", "update needs an ID"),
            (
                "update 3fa1 --pids-limit x",
                "--pids-limit: \"x\" is not a number",
            ),
            (
                "container",
                "container needs a verb: create, start, stop, rm, update or checkpoint",
            ),
            (
                "container bogus",
                "container: unknown verb \"bogus\" (create, start, stop, rm, update, checkpoint)",
            ),
            (
                "container create a b",
                "container create needs POD NAME IMAGE",
            ),
            (
                "container stop -t x 3fa1",
                "-t: \"x\" is not a number of seconds",
            ),
            ("container remove", "container remove needs at least one ID"),
            (
                "container create p n i --tty=1",
                "container create: --tty takes no value",
            ),
            ("logs -i 3fa1", "logs: unknown option \"-i\""),
            ("exec 3fa1", "exec needs a command"),
            ("exec", "exec needs an ID and a command"),
            (
                "exec -i --timeout 3 3fa1 sh",
                "--timeout is for exec without -i or -t",
            ),
            ("journal", "journal needs an ID (then journalctl's options)"),
            ("journal -f 3fa1", "journal: unknown option \"-f\""),
        ] {
            match action(line) {
                Err(e) => assert!(e.starts_with(want), "`{line}`: {e:?}, not {want:?}"),
                Ok(a) => panic!("`{line}`: {a:?}, not {want:?}"),
            }
        }
        assert!(action("bogus")
            .unwrap_err()
            .starts_with("unknown command \"bogus\"\nusage:"));
    }

    #[test]
    fn journal_matches_or_the_units_in() {
        assert_eq!(
            journal_matches_of("SANDBOX_ID", "ab", &["podscope-ab.scope", ""]),
            [
                "SANDBOX_ID=ab",
                "+",
                "_SYSTEMD_UNIT=podscope-ab.scope",
                "+",
                "UNIT=podscope-ab.scope"
            ]
        );
        assert_eq!(
            journal_matches_of("CONTAINER_ID", "cd", &[]),
            ["CONTAINER_ID=cd"]
        );
    }

    #[test]
    fn actions_as_read() {
        let a = |line: &str| format!("{:?}", action(line).unwrap());
        assert_eq!(a("remove ab cd"), a("rm ab cd"));
        assert!(a("rm ab").contains("\"Remove\""));
        assert!(a("container remove ab").contains("RemoveContainer"));
        assert_eq!(
            a("container stop -t 5 ab"),
            a("container stop ab --timeout=5")
        );
        assert_eq!(a("exec -it ab sh -c x"), a("exec -t -i ab -- sh -c x"));
        assert!(a("exec ab -- sh -c -i").contains("[\"sh\", \"-c\", \"-i\"]"));
        assert!(a("journal 3fa1 -o json -n 50").contains("[\"-o\", \"json\", \"-n\", \"50\"]"));
        assert_eq!(a("ps -aq"), a("ps --all --quiet"));
        assert!(a("ps").contains("Running"));
        let c = a("container create p n img -e A=1 -w /w -u 7 -it --start -- sh -c true");
        for want in [
            "A=1",
            "\"/w\"",
            "Some(7)",
            "tty: true",
            "stdin: true",
            "start: true",
        ] {
            assert!(c.contains(want), "{want} in {c}");
        }
        assert!(c.contains("[\"sh\", \"-c\", \"true\"]"), "{c}");
        let Ok(Line::Run { ask_password, .. }) = read_line(&args("--no-ask-password list")) else {
            panic!("list");
        };
        assert!(!ask_password);
    }
}
