//! podscopectl: inspect and drive podscope sandboxes (machinectl-like).

use enumflags2::BitFlags;
use podscope::client::{classify, dict_map, dict_str, dict_strs, dict_u64, Dict, ManagerProxy};
use std::collections::HashMap;
use std::process::ExitCode;
use zbus::proxy::MethodFlags;
use zbus::zvariant::{OwnedObjectPath, Value};

const USAGE: &str = "usage: podscopectl [--no-ask-password] COMMAND [ARGS]

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

Create, start, stop, rm and update let polkit ask for a password (through an
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
    if args.is_empty() || matches!(args[0].as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}");
        return if args.is_empty() {
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
        Ok(()) => ExitCode::SUCCESS,
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
    m: &'a ManagerProxy<'a>,
    flags: BitFlags<MethodFlags>,
}

impl Mutate<'_> {
    async fn call<B, R>(&self, method: &str, body: &B) -> Result<R, Fail>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        self.m
            .inner()
            .call_with_flags(method, self.flags, body)
            .await?
            .ok_or_else(|| Fail(format!("{method}: no reply")))
    }
}

async fn run(args: Vec<String>) -> Result<(), Fail> {
    // Longer than any daemon-side step timeout, so the daemon's own error
    // arrives first.
    let conn = podscope::client::system_connection(std::time::Duration::from_secs(120))
        .await
        .map_err(|e| Fail(format!("cannot connect to the system bus: {e}")))?;
    let m = ManagerProxy::new(&conn).await?;
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
    match cmd {
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
            let mut resources: HashMap<&str, Value<'_>> = HashMap::new();
            let mut it = opts.iter();
            while let Some(a) = it.next() {
                let v = it
                    .next()
                    .ok_or_else(|| Fail(format!("{a} needs a value")))?;
                let (key, n) = resource_option(a, v)?
                    .ok_or_else(|| Fail(format!("update: unknown option {a:?}")))?;
                resources.insert(key, n.into());
            }
            mutate
                .call::<_, ()>("UpdateResources", &(id.as_str(), resources))
                .await
        }
        "info" => info(&m).await,
        other => Err(Fail(format!("unknown command {other:?}\n{USAGE}"))),
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

async fn list(m: &ManagerProxy<'_>, args: &[String]) -> Result<(), Fail> {
    let mut filter: HashMap<&str, Value<'_>> = HashMap::new();
    let mut labels = HashMap::new();
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
                filter.insert("state", Value::from(val()?));
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
        filter.insert("labels", Value::from(labels));
    }
    let mut sandboxes = m.list(filter).await?;
    sandboxes.sort_by_key(|d| dict_u64(d, "created_at"));
    if quiet {
        for d in &sandboxes {
            println!("{}", dict_str(d, "id"));
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
            dict_str(d, "id").chars().take(12).collect(),
            format!("{}/{}", dict_str(d, "namespace"), dict_str(d, "name")),
            dict_str(d, "state"),
            dict_str(d, "network"),
            fmt_time(dict_u64(d, "created_at")),
            dict_str(d, "unit"),
        ]);
    }
    table(&rows);
    println!("\n{} sandboxes listed.", sandboxes.len());
    Ok(())
}

async fn status(m: &ManagerProxy<'_>, id: &str) -> Result<(), Fail> {
    let d: Dict = m.status(id).await?;
    let show = |k: &str, v: String| println!("{k:>16}: {v}");
    println!(
        "{} ({}/{})",
        dict_str(&d, "id"),
        dict_str(&d, "namespace"),
        dict_str(&d, "name")
    );
    show("State", dict_str(&d, "state"));
    let reason = dict_str(&d, "reason");
    if !reason.is_empty() {
        show("Reason", reason);
    }
    show(
        "UID",
        format!(
            "{} (attempt {})",
            dict_str(&d, "uid"),
            dict_u64(&d, "attempt")
        ),
    );
    show("Created", fmt_time(dict_u64(&d, "created_at")));
    show("Started", fmt_time(dict_u64(&d, "started_at")));
    if dict_u64(&d, "finished_at") > 0 {
        show("Finished", fmt_time(dict_u64(&d, "finished_at")));
    }
    show(
        "Unit",
        format!("{} (in {})", dict_str(&d, "unit"), dict_str(&d, "slice")),
    );
    let pid = dict_u64(&d, "init_pid");
    if pid > 0 {
        show("Init PID", pid.to_string());
    }
    let machine = dict_str(&d, "machine");
    if !machine.is_empty() {
        show(
            "Machine",
            format!("{machine} (machinectl status {machine})"),
        );
    }
    show("Network", dict_str(&d, "network"));
    let netns = dict_str(&d, "netns_path");
    if !netns.is_empty() {
        show("Netns", netns);
    }
    let ips = dict_strs(&d, "ips");
    if !ips.is_empty() {
        show(
            "IPs",
            format!(
                "{} (CNI network {})",
                ips.join(", "),
                dict_str(&d, "network_name")
            ),
        );
    }
    let net_err = dict_str(&d, "network_error");
    if !net_err.is_empty() {
        show("Network error", net_err);
    }
    let resolv = dict_str(&d, "resolv_conf_path");
    if !resolv.is_empty() {
        show("resolv.conf", resolv);
    }
    show("Hostname", dict_str(&d, "hostname"));
    show("PID namespace", dict_str(&d, "pid_namespace"));
    let handler = dict_str(&d, "runtime_handler");
    show(
        "Runtime handler",
        if handler.is_empty() {
            "(default)".into()
        } else {
            handler
        },
    );
    for (title, key) in [("Labels", "labels"), ("Annotations", "annotations")] {
        let mut pairs: Vec<_> = dict_map(&d, key)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.sort();
        show(
            title,
            if pairs.is_empty() {
                "-".into()
            } else {
                pairs.join(", ")
            },
        );
    }
    println!("\nInspect with: systemctl status {}", dict_str(&d, "unit"));
    Ok(())
}

/// A resource option of create and update: (the key of the resources
/// dictionary, its value); None for any other option.
fn resource_option(opt: &str, value: &str) -> Result<Option<(&'static str, u64)>, Fail> {
    let key = match opt {
        "--memory" => "memory_limit_in_bytes",
        "--cpu-quota" => "cpu_quota",
        "--cpu-period" => "cpu_period",
        "--cpu-shares" => "cpu_shares",
        "--pids-limit" => "pids_limit",
        _ => return Ok(None),
    };
    let n = value
        .parse::<u64>()
        .map_err(|_| Fail(format!("{opt}: {value:?} is not a number")))?;
    Ok(Some((key, n)))
}

/// Wait without a method timeout of our own: a pod may run for months.
async fn wait(id: &str) -> Result<(), Fail> {
    let conn =
        podscope::client::system_connection(std::time::Duration::from_secs(10 * 365 * 86_400))
            .await
            .map_err(|e| Fail(format!("cannot connect to the system bus: {e}")))?;
    let m = ManagerProxy::new(&conn).await?;
    let (status, finished_at, reason) = m.wait(id).await?;
    println!(
        "exit status {status}, finished {}{}",
        fmt_time(finished_at),
        if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        }
    );
    Ok(())
}

async fn create(m: &Mutate<'_>, args: &[String]) -> Result<(), Fail> {
    let Some((name, rest)) = args.split_first() else {
        return Err(Fail("create needs a NAME".into()));
    };
    let mut namespace = "default".to_owned();
    let mut uid = podscope::domain::SandboxId::random().short().to_owned();
    let mut attempt = 0u32;
    let mut start = false;
    let mut opts: HashMap<&str, Value<'_>> = HashMap::new();
    let mut labels = HashMap::new();
    let mut annotations = HashMap::new();
    let mut resources: HashMap<&str, Value<'_>> = HashMap::new();
    let mut ports_list: Vec<HashMap<&str, Value<'_>>> = Vec::new();
    let mut dns: HashMap<&str, Vec<String>> = HashMap::new();
    let mut sysctls = HashMap::new();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail(format!("{a} needs a value")))
        };
        let num = |s: String| {
            s.parse::<u64>()
                .map_err(|_| Fail(format!("{a}: {s:?} is not a number")))
        };
        match a.as_str() {
            "--namespace" => namespace = val()?,
            "--uid" => uid = val()?,
            "--attempt" => attempt = num(val()?)? as u32,
            "--hostname" => _ = opts.insert("hostname", val()?.into()),
            "--host-network" => _ = opts.insert("network", "host".into()),
            "--pid-namespace" => _ = opts.insert("pid_namespace", val()?.into()),
            "--cgroup-parent" => _ = opts.insert("cgroup_parent", val()?.into()),
            "--log-directory" => _ = opts.insert("log_directory", val()?.into()),
            "--runtime-handler" => _ = opts.insert("runtime_handler", val()?.into()),
            "--label" => {
                let (k, v) = kv(&val()?, a)?;
                labels.insert(k, v);
            }
            "--annotation" => {
                let (k, v) = kv(&val()?, a)?;
                annotations.insert(k, v);
            }
            "--memory" | "--cpu-quota" | "--cpu-period" | "--cpu-shares" | "--pids-limit" => {
                if let Some((key, n)) = resource_option(a, &val()?)? {
                    resources.insert(key, n.into());
                }
            }
            "--port" => {
                let v = val()?;
                let (ports, proto) = v.split_once('/').unwrap_or((&v, "tcp"));
                let (host, container) = ports
                    .split_once(':')
                    .ok_or_else(|| Fail(format!("--port: {v:?} is not HOST:CONTAINER[/PROTO]")))?;
                let pm: HashMap<&str, Value<'_>> = HashMap::from([
                    ("host_port", num(host.to_owned())?.into()),
                    ("container_port", num(container.to_owned())?.into()),
                    ("protocol", proto.to_owned().into()),
                ]);
                ports_list.push(pm);
            }
            "--dns-server" => dns.entry("servers").or_default().push(val()?),
            "--dns-search" => dns.entry("searches").or_default().push(val()?),
            "--dns-option" => dns.entry("options").or_default().push(val()?),
            "--sysctl" => {
                let (k, v) = kv(&val()?, a)?;
                sysctls.insert(k, v);
            }
            "--start" => start = true,
            other => return Err(Fail(format!("create: unknown option {other:?}"))),
        }
    }
    if !labels.is_empty() {
        opts.insert("labels", labels.into());
    }
    if !annotations.is_empty() {
        opts.insert("annotations", annotations.into());
    }
    if !resources.is_empty() {
        opts.insert("resources", resources.into());
    }
    if !ports_list.is_empty() {
        opts.insert("port_mappings", ports_list.into());
    }
    if !dns.is_empty() {
        opts.insert("dns", dns.into());
    }
    if !sysctls.is_empty() {
        opts.insert("sysctls", sysctls.into());
    }
    let (id, _): (String, OwnedObjectPath) = m
        .call(
            "Create",
            &(name, namespace.as_str(), uid.as_str(), attempt, opts),
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

async fn info(m: &ManagerProxy<'_>) -> Result<(), Fail> {
    let (name, version, api) = m.version().await?;
    println!("{name} {version} (API {api})");
    let (os, arch, variant) = m.platform().await?;
    println!(
        "Platform: {os}/{arch}{}",
        if variant.is_empty() {
            String::new()
        } else {
            format!("/{variant}")
        }
    );
    let (conditions, info) = m.runtime_status().await?;
    for (kind, ok, reason, msg) in conditions {
        let extra = [reason, msg]
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
    println!(
        "Sandboxes: {} ({} ready)",
        dict_u64(&info, "sandboxes"),
        dict_u64(&info, "ready")
    );
    println!(
        "Recovered at start: {} in {} µs",
        dict_u64(&info, "recovered"),
        dict_u64(&info, "recovery_usec")
    );
    Ok(())
}
