//! podscopectl: inspect and drive podscope sandboxes (machinectl-like).

use enumflags2::BitFlags;
use podscope::api::errors::classify;
use podscope::api::proxy::system_connection;
use podscope::api::{Client, CreateOptions, Dns, ListFilter, PodMetadata, PortMapping, Resources};
use podscope::domain::{NamespaceMode, NetworkMode, Protocol, State};
use std::collections::BTreeMap;
use std::process::ExitCode;
use zbus::proxy::MethodFlags;
use zbus::zvariant::OwnedObjectPath;

const USAGE: &str = "usage: podscopectl [--no-ask-password] COMMAND [ARGS]
       podscopectl --version

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
  start ID...    stop ID...    rm ID...
  wait ID                                 block until the sandbox stops; print
                                          its exit status, end time and reason
  update ID [--memory BYTES] [--cpu-quota USEC] [--cpu-period USEC]
            [--cpu-shares N] [--pids-limit N]
                                          set a sandbox's resources (a limit not
                                          given is removed)
  info                                    runtime version, platform and readiness
  pull IMAGE [--creds USER[:PASSWORD]] [--auth BASE64] [--registry-token TOKEN]
                                          pull an image (progress on a terminal),
                                          print its id
  images [-q|--quiet] [IMAGE]             list images (-q: ids only)
  inspecti IMAGE                          one image as JSON (id, tag, digest)
  rmi IMAGE...                            remove images (id, prefix, tag, digest)
  imagefsinfo                             the image store's disk use

Containers (crictl's names where they name nothing else here):
  container create POD NAME IMAGE [OPTIONS] [-- COMMAND ARGS...]
      --env K=V  --workdir DIR  --user UID|NAME  --mount HOST:CONTAINER[:ro]
      --label K=V  --log-path PATH (in the pod's log directory; default
      NAME/ATTEMPT.log)
      --privileged  --read-only  --cap-add CAP  --cap-drop CAP  --tty  --stdin
      --memory BYTES  --cpu-quota USEC  --cpu-period USEC  --cpu-shares N
      --cpuset-cpus LIST  --attempt N  --start (start it too)
                                          create a container in a ready pod
  container start ID...    container stop [-t SECONDS] ID...    container rm ID...
  container update ID [--memory BYTES] [--cpu-quota USEC] [--cpu-period USEC]
                      [--cpu-shares N] [--cpuset-cpus LIST]
  ps [-a] [--pod ID] [--state STATE] [--label K=V]... [-q]
                                          list containers (running ones unless -a)
  inspect ID                              one container as JSON
  logs [-f] ID                            its output, from its CRI log file
  exec [-i] [-t] [--timeout SECONDS] ID COMMAND...
                                          run a command in a running container;
                                          exits with the command's status. -i: with
                                          this stdin; -t: on a terminal (ctrl-p ctrl-q
                                          detaches)
  attach [-i] ID                          join a running container's output (and,
                                          with -i, its stdin; its terminal if it has one)

Create, start, stop, rm, update, pull, rmi, container, exec and attach let polkit ask for a password (through an
authentication agent) unless --no-ask-password is given.";

struct Fail(String);

impl From<zbus::Error> for Fail {
    fn from(e: zbus::Error) -> Self {
        let (_, msg) = classify(&e);
        Fail(msg)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.first().map(String::as_str), Some("--version" | "-V")) {
        // Without the bus: a packager's smoke test, or a node whose
        // daemon is down, still gets it.
        println!("podscopectl {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    // No command (`--no-ask-password` alone included) is told before the
    // bus is reached.
    let no_command = args.iter().all(|a| a == "--no-ask-password");
    if no_command || matches!(args[0].as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}");
        return if no_command {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(args)) {
        // exec exits with its command's status.
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(255)),
        Err(Fail(msg)) => {
            eprintln!("podscopectl: {msg}");
            ExitCode::from(1)
        }
    }
}

/// The mutating calls, with ALLOW_INTERACTIVE_AUTHORIZATION unless
/// --no-ask-password (as systemctl and machinectl do): polkit may then have
/// an authentication agent ask for a password instead of refusing.
struct Mutate<'a> {
    m: &'a Client,
    flags: BitFlags<MethodFlags>,
}

impl Mutate<'_> {
    async fn call<B, R>(&self, method: &str, body: &B) -> Result<R, Fail>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        call_with(self.m.proxy().inner(), self.flags, method, body).await
    }
}

async fn call_with<B, R>(
    proxy: &zbus::Proxy<'_>,
    flags: BitFlags<MethodFlags>,
    method: &str,
    body: &B,
) -> Result<R, Fail>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
    R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
{
    proxy
        .call_with_flags(method, flags, body)
        .await?
        .ok_or_else(|| Fail(format!("{method}: no reply")))
}

async fn run(args: Vec<String>) -> Result<i32, Fail> {
    // Longer than any daemon-side step timeout, so the daemon's own error
    // arrives first.
    let conn = system_connection(std::time::Duration::from_secs(120))
        .await
        .map_err(|e| Fail(format!("cannot connect to the system bus: {e}")))?;
    let m = Client::new(&conn).await?;
    let (ask_password, args) = match args.first().map(String::as_str) {
        Some("--no-ask-password") => (false, &args[1..]),
        _ => (true, &args[..]),
    };
    let Some(cmd) = args.first().map(String::as_str) else {
        return Err(Fail(USAGE.into()));
    };
    let rest = &args[1..];
    let mutate = Mutate {
        m: &m,
        flags: if ask_password {
            MethodFlags::AllowInteractiveAuth.into()
        } else {
            BitFlags::empty()
        },
    };
    let done: Result<(), Fail> = match cmd {
        "list" => list(&m, rest).await,
        "status" => {
            let [id] = rest else {
                return Err(Fail("status takes one ID".into()));
            };
            status(&m, id).await
        }
        "create" => create(&mutate, rest).await,
        "start" | "stop" | "rm" | "remove" => {
            if rest.is_empty() {
                return Err(Fail(format!("{cmd} needs at least one ID")));
            }
            let method = match cmd {
                "start" => "Start",
                "stop" => "Stop",
                _ => "Remove",
            };
            for id in rest {
                mutate.call::<_, ()>(method, &(id.as_str(),)).await?;
            }
            Ok(())
        }
        "wait" => {
            let [id] = rest else {
                return Err(Fail("wait takes one ID".into()));
            };
            wait(id).await
        }
        "update" => {
            let Some((id, opts)) = rest.split_first() else {
                return Err(Fail("update needs an ID".into()));
            };
            let mut resources = Resources::default();
            let mut it = opts.iter();
            while let Some(a) = it.next() {
                let v = it
                    .next()
                    .ok_or_else(|| Fail(format!("{a} needs a value")))?;
                if !resource_option(&mut resources, a, v)? {
                    return Err(Fail(format!("update: unknown option {a:?}")));
                }
            }
            mutate
                .call::<_, ()>("UpdateResources", &(id.as_str(), resources))
                .await
        }
        "info" => info(&m).await,
        "container" => containers::command(&mutate, rest).await,
        "ps" => containers::ps(&m, rest).await,
        "inspect" => {
            let [id] = rest else {
                return Err(Fail("inspect takes one ID".into()));
            };
            containers::inspect(&m, id).await
        }
        "logs" => containers::logs(&m, rest).await,
        "exec" => return containers::exec(&m, rest).await,
        "attach" => return containers::attach(&m, rest).await,
        "pull" => images::pull(mutate.flags, rest).await,
        "images" => images::list(&m, rest).await,
        "inspecti" => {
            let [image] = rest else {
                return Err(Fail("inspecti takes one IMAGE".into()));
            };
            images::inspect(&m, image).await
        }
        "rmi" => {
            if rest.is_empty() {
                return Err(Fail("rmi needs at least one IMAGE".into()));
            }
            for image in rest {
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
        "imagefsinfo" => {
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
        other => Err(Fail(format!("unknown command {other:?}\n{USAGE}"))),
    };
    done.map(|()| 0)
}

/// Bytes for people: 1.5 MiB.
fn human(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

mod images {
    use super::{call_with, human, table, Fail};
    use futures_util::StreamExt;
    use podscope::api::image::{ImageFilter, ImageSummary, PullOptions};
    use podscope::api::proxy::{system_connection, ImagesProxy};
    use podscope::api::{from_dict, Client, Dict};
    use std::io::{IsTerminal, Write};

    pub async fn pull(
        flags: enumflags2::BitFlags<zbus::proxy::MethodFlags>,
        args: &[String],
    ) -> Result<(), Fail> {
        let Some((image, opts)) = args.split_first() else {
            return Err(Fail("pull needs an IMAGE".into()));
        };
        let mut options = PullOptions::default();
        let mut it = opts.iter();
        while let Some(a) = it.next() {
            let v = it
                .next()
                .ok_or_else(|| Fail(format!("{a} needs a value")))?
                .clone();
            match a.as_str() {
                "--creds" => {
                    let (u, p) = v.split_once(':').unwrap_or((v.as_str(), ""));
                    options.username = Some(u.to_owned());
                    options.password = Some(p.to_owned());
                }
                "--auth" => options.auth = Some(v),
                "--registry-token" => options.registry_token = Some(v),
                other => return Err(Fail(format!("pull: unknown option {other:?}"))),
            }
        }
        // A pull may take longer than any other call: its own connection.
        let conn = system_connection(std::time::Duration::from_secs(6 * 3600))
            .await
            .map_err(|e| Fail(format!("cannot connect to the system bus: {e}")))?;
        let proxy = ImagesProxy::builder(&conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await?;
        let tty = std::io::stderr().is_terminal();
        let mut progress = if tty {
            Some(proxy.receive_pull_progress().await?)
        } else {
            None
        };
        let body = (image.as_str(), &options);
        let call = call_with::<_, Dict>(proxy.inner(), flags, "Pull", &body);
        tokio::pin!(call);
        let reply = loop {
            tokio::select! {
                r = &mut call => break r?,
                Some(sig) = async {
                    match progress.as_mut() {
                        Some(p) => p.next().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Ok(a) = sig.args() {
                        if a.reference == *image {
                            eprint!(
                                "\r{image}: {} of {}, {}/{} layers   ",
                                human(a.bytes_done),
                                human(a.bytes_total),
                                a.layers_done,
                                a.layers_total
                            );
                            let _ = std::io::stderr().flush();
                        }
                    }
                }
            }
        };
        if tty {
            eprintln!();
        }
        let s: ImageSummary =
            from_dict(None, &reply).map_err(|e| Fail(format!("Pull reply: {e}")))?;
        println!("{}", s.id);
        Ok(())
    }

    pub async fn list(m: &Client, args: &[String]) -> Result<(), Fail> {
        let mut quiet = false;
        let mut filter = ImageFilter::default();
        for a in args {
            match a.as_str() {
                "-q" | "--quiet" => quiet = true,
                name if !name.starts_with('-') => filter.image = Some(name.to_owned()),
                other => return Err(Fail(format!("images: unknown option {other:?}"))),
            }
        }
        let mut images = m.list_images(&filter).await?;
        images.sort_by(|a, b| a.repo_tags.cmp(&b.repo_tags).then(a.id.cmp(&b.id)));
        if quiet {
            for i in images {
                println!("{}", i.id);
            }
            return Ok(());
        }
        let mut rows = vec![vec![
            "IMAGE".into(),
            "TAG".into(),
            "IMAGE ID".into(),
            "SIZE".into(),
        ]];
        for i in &images {
            let short =
                i.id.trim_start_matches("sha256:")
                    .chars()
                    .take(13)
                    .collect::<String>();
            let names: Vec<(String, String)> = if i.repo_tags.is_empty() {
                i.repo_digests
                    .iter()
                    .map(|d| {
                        (
                            d.split('@').next().unwrap_or(d).to_owned(),
                            "<none>".to_owned(),
                        )
                    })
                    .take(1)
                    .collect()
            } else {
                i.repo_tags
                    .iter()
                    .map(|t| match t.rsplit_once(':') {
                        Some((r, tag)) if !tag.contains('/') => (r.to_owned(), tag.to_owned()),
                        _ => (t.clone(), "<none>".to_owned()),
                    })
                    .collect()
            };
            for (repo, tag) in names {
                rows.push(vec![repo, tag, short.clone(), human(i.size)]);
            }
        }
        table(&rows);
        Ok(())
    }

    pub async fn inspect(m: &Client, image: &str) -> Result<(), Fail> {
        let (s, i) = m.image_status(image).await?;
        let mut doc = i.to_json();
        let summary = serde_json::json!({
            "id": s.id,
            "repoTags": s.repo_tags,
            "repoDigests": s.repo_digests,
            "size": s.size,
            "user": s.user,
        });
        if let (Some(d), serde_json::Value::Object(sm)) = (doc.as_object_mut(), summary) {
            d.extend(sm);
        }
        println!("{}", serde_json::to_string_pretty(&doc).expect("JSON"));
        Ok(())
    }
}

fn fmt_time(usec: u64) -> String {
    if usec == 0 {
        return "-".into();
    }
    let secs = (usec / 1_000_000) as libc::time_t;
    // SAFETY: localtime_r writes into the tm we own.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

fn table(rows: &[Vec<String>]) {
    let cols = rows[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                if i + 1 == cols {
                    cell.clone()
                } else {
                    format!("{cell:<w$}", w = widths[i])
                }
            })
            .collect();
        println!("{}", line.join(" ").trim_end());
    }
}

fn kv(arg: &str, flag: &str) -> Result<(String, String), Fail> {
    arg.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| Fail(format!("{flag} takes KEY=VALUE, got {arg:?}")))
}

async fn list(m: &Client, args: &[String]) -> Result<(), Fail> {
    let mut filter = ListFilter::default();
    let mut labels = BTreeMap::new();
    let mut quiet = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--state" => {
                let v = val()?;
                filter.state = Some(State::parse(&v).ok_or_else(|| {
                    Fail(format!(
                        "--state: {v:?} is not one of created, ready, notready"
                    ))
                })?);
            }
            "--label" => {
                let (k, v) = kv(&val()?, "--label")?;
                labels.insert(k, v);
            }
            "-q" | "--quiet" => quiet = true,
            other => return Err(Fail(format!("list: unknown option {other:?}"))),
        }
    }
    if !labels.is_empty() {
        filter.labels = Some(labels);
    }
    let mut sandboxes = m.list(&filter).await?;
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

/// A resource option of create and update, set in `r`; false for any
/// other option.
fn resource_option(r: &mut Resources, opt: &str, value: &str) -> Result<bool, Fail> {
    let field = match opt {
        "--memory" => &mut r.memory_limit_in_bytes,
        "--cpu-quota" => &mut r.cpu_quota,
        "--cpu-period" => &mut r.cpu_period,
        "--cpu-shares" => &mut r.cpu_shares,
        "--pids-limit" => &mut r.pids_limit,
        _ => return Ok(false),
    };
    *field = value
        .parse::<u64>()
        .map_err(|_| Fail(format!("{opt}: {value:?} is not a number")))?;
    Ok(true)
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

async fn create(m: &Mutate<'_>, args: &[String]) -> Result<(), Fail> {
    let Some((name, rest)) = args.split_first() else {
        return Err(Fail("create needs a NAME".into()));
    };
    let mut pod = PodMetadata {
        name: name.clone(),
        namespace: "default".to_owned(),
        uid: podscope::domain::SandboxId::random().short().to_owned(),
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
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail(format!("{a} needs a value")))
        };
        let num = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| Fail(format!("{a}: {s:?} is not a number")))
        };
        match a.as_str() {
            "--namespace" => pod.namespace = val()?,
            "--uid" => pod.uid = val()?,
            "--attempt" => pod.attempt = num(&val()?)?,
            "--hostname" => o.hostname = Some(val()?),
            "--host-network" => o.network = Some(NetworkMode::Host),
            "--pid-namespace" => {
                o.pid_namespace = Some(
                    NamespaceMode::parse("--pid-namespace", &val()?)
                        .map_err(|e| Fail(e.to_string()))?,
                )
            }
            "--cgroup-parent" => o.cgroup_parent = Some(val()?),
            "--log-directory" => o.log_directory = Some(val()?),
            "--runtime-handler" => o.runtime_handler = Some(val()?),
            "--label" => {
                let (k, v) = kv(&val()?, a)?;
                labels.insert(k, v);
            }
            "--annotation" => {
                let (k, v) = kv(&val()?, a)?;
                annotations.insert(k, v);
            }
            "--memory" | "--cpu-quota" | "--cpu-period" | "--cpu-shares" | "--pids-limit" => {
                resource_option(&mut resources, a, &val()?)?;
            }
            "--port" => {
                let v = val()?;
                let (pair, proto) = v.split_once('/').unwrap_or((&v, "tcp"));
                let (host, container) = pair
                    .split_once(':')
                    .ok_or_else(|| Fail(format!("--port: {v:?} is not HOST:CONTAINER[/PROTO]")))?;
                ports.push(PortMapping {
                    protocol: Protocol::parse(proto).map_err(|e| Fail(format!("--port: {e}")))?,
                    container_port: num(container)?,
                    host_port: num(host)?,
                    host_ip: String::new(),
                });
            }
            "--dns-server" => dns.servers.push(val()?),
            "--dns-search" => dns.searches.push(val()?),
            "--dns-option" => dns.options.push(val()?),
            "--sysctl" => {
                let (k, v) = kv(&val()?, a)?;
                sysctls.insert(k, v);
            }
            "--start" => start = true,
            other => return Err(Fail(format!("create: unknown option {other:?}"))),
        }
    }
    let some_map = |m: BTreeMap<String, String>| (!m.is_empty()).then_some(m);
    o.labels = some_map(labels);
    o.annotations = some_map(annotations);
    o.sysctls = some_map(sysctls);
    o.resources = (resources != Resources::default()).then_some(resources);
    o.port_mappings = (!ports.is_empty()).then_some(ports);
    o.dns = (dns != Dns::default()).then_some(dns);
    let (id, _): (String, OwnedObjectPath) = m
        .call(
            "Create",
            &(&pod.name, &pod.namespace, &pod.uid, pod.attempt, &o),
        )
        .await?;
    if start {
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
    Ok(())
}

/// Containers: `container create|start|stop|rm|update` (the pod verbs
/// keep their short names), and crictl's `ps`, `logs`, `exec`, `inspect`,
/// which name nothing else here.
mod containers {
    use super::{fmt_time, kv, table, Fail, Mutate};
    use podscope::api::container::{ContainerFilter, ContainerOptions, Mount, Resources, Security};
    use podscope::api::Client;
    use podscope::domain::container::{ContainerState, Propagation};
    use std::collections::BTreeMap;
    use std::io::Write;
    use zbus::zvariant::OwnedObjectPath;

    pub async fn command(m: &Mutate<'_>, args: &[String]) -> Result<(), Fail> {
        let Some((verb, rest)) = args.split_first() else {
            return Err(Fail(
                "container needs a verb: create, start, stop, rm or update".into(),
            ));
        };
        match verb.as_str() {
            "create" => create(m, rest).await,
            "start" | "rm" | "remove" => {
                if rest.is_empty() {
                    return Err(Fail(format!("container {verb} needs at least one ID")));
                }
                let method = if verb == "start" {
                    "StartContainer"
                } else {
                    "RemoveContainer"
                };
                for id in rest {
                    m.call::<_, ()>(method, &(id.as_str(),)).await?;
                }
                Ok(())
            }
            "stop" => {
                let mut timeout = 10i64;
                let mut ids = Vec::new();
                let mut it = rest.iter();
                while let Some(a) = it.next() {
                    match a.as_str() {
                        "--timeout" | "-t" => {
                            let v = it
                                .next()
                                .ok_or_else(|| Fail(format!("{a} needs a value")))?;
                            timeout = v.parse().map_err(|_| {
                                Fail(format!("{a}: {v:?} is not a number of seconds"))
                            })?;
                        }
                        id => ids.push(id.to_owned()),
                    }
                }
                if ids.is_empty() {
                    return Err(Fail("container stop needs at least one ID".into()));
                }
                for id in ids {
                    m.call::<_, ()>("StopContainer", &(id.as_str(), timeout))
                        .await?;
                }
                Ok(())
            }
            "update" => {
                let Some((id, opts)) = rest.split_first() else {
                    return Err(Fail("container update needs an ID".into()));
                };
                let mut r = Resources::default();
                let mut it = opts.iter();
                while let Some(a) = it.next() {
                    let v = it
                        .next()
                        .ok_or_else(|| Fail(format!("{a} needs a value")))?;
                    if !resource(&mut r, a, v)? {
                        return Err(Fail(format!("container update: unknown option {a:?}")));
                    }
                }
                m.call::<_, ()>("UpdateContainerResources", &(id.as_str(), r))
                    .await
            }
            other => Err(Fail(format!(
                "container: unknown verb {other:?} (create, start, stop, rm, update)"
            ))),
        }
    }

    fn resource(r: &mut Resources, opt: &str, v: &str) -> Result<bool, Fail> {
        let num = || {
            v.parse::<u64>()
                .map_err(|_| Fail(format!("{opt}: {v:?} is not a number")))
        };
        match opt {
            "--memory" => r.memory_limit_in_bytes = num()?,
            "--cpu-quota" => r.cpu_quota = num()?,
            "--cpu-period" => r.cpu_period = num()?,
            "--cpu-shares" => r.cpu_shares = num()?,
            "--cpuset-cpus" => r.cpuset_cpus = v.to_owned(),
            _ => return Ok(false),
        }
        Ok(true)
    }

    async fn create(m: &Mutate<'_>, args: &[String]) -> Result<(), Fail> {
        let (pod, name, image, rest) = match args {
            [pod, name, image, rest @ ..] => (pod, name, image, rest),
            _ => return Err(Fail("container create needs POD NAME IMAGE".into())),
        };
        let mut o = ContainerOptions::default();
        let (mut security, mut resources) = (Security::default(), Resources::default());
        let mut labels = BTreeMap::new();
        let mut attempt = 0u32;
        let mut start = false;
        let mut it = rest.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                o.command = it.by_ref().cloned().collect();
                break;
            }
            let mut val = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| Fail(format!("{a} needs a value")))
            };
            match a.as_str() {
                "--attempt" => {
                    let v = val()?;
                    attempt = v
                        .parse()
                        .map_err(|_| Fail(format!("{a}: {v:?} is not a number")))?;
                }
                "--env" | "-e" => o.envs.push(val()?),
                "--workdir" | "-w" => o.working_dir = val()?,
                "--label" => {
                    let (k, v) = kv(&val()?, a)?;
                    labels.insert(k, v);
                }
                "--mount" => {
                    let v = val()?;
                    let parts: Vec<&str> = v.split(':').collect();
                    let (host, container, ro) = match parts.as_slice() {
                        [h, c] => (*h, *c, false),
                        [h, c, "ro"] => (*h, *c, true),
                        _ => {
                            return Err(Fail(format!("--mount: {v:?} is not HOST:CONTAINER[:ro]")))
                        }
                    };
                    o.mounts.push(Mount {
                        host_path: host.into(),
                        container_path: container.into(),
                        readonly: ro,
                        propagation: Propagation::Private,
                    });
                }
                "--user" | "-u" => {
                    let v = val()?;
                    match v.parse::<u32>() {
                        Ok(uid) => security.run_as_user = Some(uid),
                        Err(_) => security.run_as_username = v,
                    }
                }
                "--privileged" => security.privileged = true,
                "--read-only" => security.readonly_rootfs = true,
                "--cap-add" => security.capabilities_add.push(val()?),
                "--cap-drop" => security.capabilities_drop.push(val()?),
                "--log-path" => o.log_path = val()?,
                "--tty" | "-t" => o.tty = true,
                "--stdin" | "-i" => o.stdin = true,
                "--start" => start = true,
                opt => {
                    let v = val()?;
                    if !resource(&mut resources, opt, &v)? {
                        return Err(Fail(format!("container create: unknown option {opt:?}")));
                    }
                }
            }
        }
        o.labels = labels;
        o.security = security;
        o.resources = resources;
        if o.log_path.is_empty() {
            // kubelet's layout; used only when the pod has a log directory.
            o.log_path = format!("{name}/{attempt}.log");
        }
        let (id, _): (String, OwnedObjectPath) = m
            .call(
                "CreateContainer",
                &(pod.as_str(), name.as_str(), attempt, image.as_str(), &o),
            )
            .await?;
        if start {
            if let Err(Fail(msg)) = m.call::<_, ()>("StartContainer", &(id.as_str(),)).await {
                return Err(Fail(format!("created {id} but start failed: {msg}")));
            }
        }
        println!("{id}");
        Ok(())
    }

    pub async fn ps(m: &Client, args: &[String]) -> Result<(), Fail> {
        let mut filter = ContainerFilter::default();
        let (mut all, mut quiet) = (false, false);
        let mut labels = BTreeMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| Fail(format!("{a} needs a value")))
            };
            match a.as_str() {
                "-a" | "--all" => all = true,
                "-q" | "--quiet" => quiet = true,
                "--pod" | "-p" => filter.pod_id = Some(val()?),
                "--state" => {
                    let v = val()?;
                    filter.state =
                        Some(ContainerState::parse(&v).map_err(|e| Fail(e.to_string()))?);
                }
                "--label" => {
                    let (k, v) = kv(&val()?, a)?;
                    labels.insert(k, v);
                }
                other => return Err(Fail(format!("ps: unknown option {other:?}"))),
            }
        }
        if filter.state.is_none() && !all {
            filter.state = Some(ContainerState::Running);
        }
        if !labels.is_empty() {
            filter.labels = Some(labels);
        }
        let mut list = m.list_containers(&filter).await?;
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
        let doc = podscope::cri::convert::dict_json(&d);
        println!("{doc}");
        Ok(())
    }

    /// `-i`, `-t` (or `-it`), in any order, then the rest.
    fn stream_flags(mut args: &[String]) -> (bool, bool, &[String]) {
        let (mut stdin, mut tty) = (false, false);
        while let [flag, tail @ ..] = args {
            match flag.as_str() {
                "-i" | "--interactive" => stdin = true,
                "-t" | "--tty" => tty = true,
                "-it" | "-ti" => (stdin, tty) = (true, true),
                _ => break,
            }
            args = tail;
        }
        (stdin, tty, args)
    }

    fn session_end(r: Result<podscope::terminal::End, String>) -> Result<i32, Fail> {
        match r.map_err(Fail)? {
            podscope::terminal::End::Exited(code) => Ok(code),
            podscope::terminal::End::Detached => {
                eprintln!("\r\npodscopectl: detached");
                Ok(0)
            }
        }
    }

    pub async fn attach(m: &Client, args: &[String]) -> Result<i32, Fail> {
        let (stdin, _, rest) = stream_flags(args);
        let [id] = rest else {
            return Err(Fail("attach takes [-i] ID".into()));
        };
        let s = m.container_status(id).await?;
        let stdin = stdin && s.stdin;
        // A terminal container's terminal is joined on ours.
        // SAFETY: isatty on stdin.
        let tty = s.tty && stdin && unsafe { libc::isatty(0) } == 1;
        session_end(podscope::terminal::session(m, &s.id, None, stdin, tty).await)
    }

    pub async fn exec(m: &Client, args: &[String]) -> Result<i32, Fail> {
        let (stdin, tty, args) = stream_flags(args);
        let mut timeout_ms = 0u64;
        let mut rest = args;
        if let [flag, v, tail @ ..] = args {
            if flag == "--timeout" {
                timeout_ms = v
                    .parse::<u64>()
                    .map_err(|_| Fail(format!("--timeout: {v:?} is not a number of seconds")))?
                    * 1000;
                rest = tail;
            }
        }
        if stdin || tty {
            let [id, cmd @ ..] = rest else {
                return Err(Fail("exec needs an ID and a command".into()));
            };
            let cmd: Vec<String> = cmd.iter().skip_while(|a| *a == "--").cloned().collect();
            if cmd.is_empty() {
                return Err(Fail("exec needs a command".into()));
            }
            if timeout_ms != 0 {
                return Err(Fail("--timeout is for exec without -i or -t".into()));
            }
            return session_end(podscope::terminal::session(m, id, Some(&cmd), stdin, tty).await);
        }
        let [id, cmd @ ..] = rest else {
            return Err(Fail("exec needs an ID and a command".into()));
        };
        let cmd: Vec<String> = cmd.iter().skip_while(|a| *a == "--").cloned().collect();
        if cmd.is_empty() {
            return Err(Fail("exec needs a command".into()));
        }
        let r = m.exec_sync(id, &cmd, timeout_ms).await?;
        std::io::stdout().write_all(&r.stdout).ok();
        std::io::stderr().write_all(&r.stderr).ok();
        Ok(r.exit_code)
    }

    /// One CRI log record's text, and whether it ends its line.
    fn record(line: &str) -> Option<(&str, bool)> {
        let mut p = line.splitn(4, ' ');
        let (_ts, _stream, tag) = (p.next()?, p.next()?, p.next()?);
        Some((p.next().unwrap_or(""), tag == "F"))
    }

    pub async fn logs(m: &Client, args: &[String]) -> Result<(), Fail> {
        let (follow, id) = match args {
            [f, id] if f == "-f" || f == "--follow" => (true, id),
            [id] => (false, id),
            _ => return Err(Fail("logs takes [-f] ID".into())),
        };
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
            let f = std::fs::File::open(&s.log_path)
                .map_err(|e| Fail(format!("{}: {e}", s.log_path)))?;
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
}
