//! podscope-bench: the figures `make bench` prints. Runs inside the test
//! harness (a real systemd and system bus) against the installed podscoped,
//! as root. Prints one table: figure, target, measured, verdict.

mod abuse;
mod anchor;
mod checkpoint;
mod clients;
mod cluster;
mod containers;
mod crash;
mod devices;
mod fullnode;
mod images;
mod kubelet;
mod metrics;
mod sandbox_metrics;
mod streaming;

use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use podscope_api::domain::NetworkMode;
use podscope_api::{Client, CreateOptions, ListFilter, PodMetadata};
use podscope_sys::logging::event;
use podscope_test_support::failpoints;
use podscope_test_support::harness::{manager, sh};
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

struct Row {
    figure: String,
    target: String,
    measured: String,
    ok: Option<bool>,
}

#[derive(Default)]
struct Table(Vec<Row>);

impl Table {
    fn add(&mut self, figure: &str, target: &str, measured: String, ok: Option<bool>) {
        eprintln!("bench: {figure}: {measured}");
        self.0.push(Row {
            figure: figure.into(),
            target: target.into(),
            measured,
            ok,
        });
    }

    /// A latency row: measured against an upper bound.
    fn add_within(&mut self, figure: &str, measured: Duration, limit: Duration) {
        let target = if limit < Duration::from_millis(1) {
            format!("<= {} µs", limit.as_micros())
        } else if limit.as_millis() % 1000 == 0 {
            format!("<= {} s", limit.as_secs())
        } else {
            format!("<= {} ms", limit.as_millis())
        };
        self.add(figure, &target, ms(measured), Some(measured <= limit));
    }

    fn print(&self) {
        let w0 = self
            .0
            .iter()
            .map(|r| r.figure.len())
            .max()
            .unwrap_or(0)
            .max(6);
        let w1 = self
            .0
            .iter()
            .map(|r| r.target.len())
            .max()
            .unwrap_or(0)
            .max(6);
        let w2 = self
            .0
            .iter()
            .map(|r| r.measured.chars().count())
            .max()
            .unwrap_or(0)
            .max(8);
        println!(
            "{:<w0$}  {:<w1$}  {:<w2$}  verdict",
            "figure", "target", "measured"
        );
        println!("{}", "-".repeat(w0 + w1 + w2 + 13));
        for r in &self.0 {
            let v = match r.ok {
                Some(true) => "ok",
                Some(false) => "MISSED",
                None => "-",
            };
            println!(
                "{:<w0$}  {:<w1$}  {:<w2$}  {v}",
                r.figure, r.target, r.measured
            );
        }
    }
}

fn pct(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn ms(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        return format!("{:.1} µs", d.as_secs_f64() * 1e6);
    }
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn daemon_pid() -> u32 {
    sh("systemctl show -P MainPID podscoped")
        .trim()
        .parse()
        .unwrap()
}

/// (Rss, Pss) in KiB from smaps_rollup.
fn rss_pss(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let get = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (get("Rss:"), get("Pss:"))
}

fn host() -> CreateOptions {
    CreateOptions {
        network: Some(NetworkMode::Host),
        ..Default::default()
    }
}

/// Create and start `n` sandboxes named `<prefix>-<i>` one after another;
/// their ids and each one's Create+Start time.
async fn create_started(
    m: &Client,
    prefix: &str,
    n: usize,
    options: fn() -> CreateOptions,
) -> (Vec<String>, Vec<Duration>) {
    let mut ids = Vec::with_capacity(n);
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let t0 = Instant::now();
        let (id, _) = m
            .create(&bench_pod(format!("{prefix}-{i}")), &options())
            .await
            .unwrap();
        m.start(&id).await.unwrap();
        times.push(t0.elapsed());
        ids.push(id);
    }
    (ids, times)
}

/// A bench pod's metadata: namespace "bench", one uid, attempt 0.
fn bench_pod(name: String) -> PodMetadata {
    PodMetadata {
        name,
        namespace: "bench".into(),
        uid: "u".into(),
        attempt: 0,
    }
}

async fn remove_all(m: &Client) {
    for d in m.list(&ListFilter::default()).await.unwrap() {
        m.remove(&d.id).await.unwrap();
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    // Sections to run (default: all): latency, network, cri, clients,
    // crash, abuse, failpoints, images, alive, throughput, streaming
    // (exec, attach and port-forward against containerd's), containers
    // (also named anchor: podscope's container figures with crun and runc
    // against containerd's, all taken in this run), kubelet (real
    // kubelets driving containerd, then podscope: kubelet-1.26 on
    // containerd 1.6 and kubelet-1.36 on containerd 2.3, each also a
    // section of its own), devices (CreateContainer with and without 4
    // CDI devices of 50 spec files on podscope with crun and runc and on
    // containerd 2.3), fullnode (110 pods x 4
    // containers created and drained on containerd 1.6, 2.3 and podscope),
    // metrics (a scrape's cost with a full node running), sandbox_metrics
    // (ListPodSandboxMetrics for 110 pods on containerd 2.3 and podscope),
    // checkpoint (CheckpointContainer and a restore of 64 MiB in use, on
    // runc with CRIU 4.1: CRIU_4_1).
    let only: Vec<String> = std::env::args().skip(1).collect();
    match only.first().map(String::as_str) {
        Some("as-caller") => return as_caller(&only[1..]).await,
        // The cluster section (tests/cluster/run-cluster.sh bench): one
        // runtime's figures, then the table of both.
        Some("cluster") => return cluster::run_on(only.get(1).expect("cluster RUNTIME")),
        Some("cluster-table") => return cluster::table(),
        _ => {}
    }
    let run = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    let mut t = Table::default();
    environment(&mut t);
    sh("systemctl reset-failed podscoped 2>/dev/null; systemctl restart podscoped");
    let m = manager().await.0;
    remove_all(&m).await;
    // First, on a node no other section has used: kubelet's figures are
    // kubelet's and the runtimes' alone.
    let kubelets: Vec<&kubelet::Generation> = kubelet::GENERATIONS
        .iter()
        .filter(|g| run("kubelet") || run(&format!("kubelet-{}", g.version)))
        .collect();
    if !kubelets.is_empty() {
        kubelet::run(&mut t, &kubelets).await;
    }
    if run("latency") {
        latency(&m, &mut t).await;
    }
    if run("network") {
        network(&m, &mut t).await;
    }
    if run("cri") {
        cri(&m, &mut t).await;
    }
    if run("clients") {
        let tools = anchor::Tools::from_env();
        clients::authority_rewrite(&mut t);
        clients::crictl_calls(&tools, &mut t);
        clients::critest_benchmark(&tools, &mut t);
        // critest exits with samples in flight (gmeasure returns once it
        // has handed out the last one); their RunPodSandbox still
        // completes in the frontend.
        tokio::time::sleep(Duration::from_secs(1)).await;
        remove_all(&m).await;
        assert!(m.list(&ListFilter::default()).await.unwrap().is_empty());
    }
    if run("crash") {
        let spacing = std::env::var("CRASH_SPACING_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(500);
        let kills = std::env::var("CRASH_KILLS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(50);
        crash::kill_to_answering(&m, &mut t, kills, Duration::from_millis(spacing)).await;
    }
    if run("abuse") {
        abuse::big_args_rss(&mut t);
        abuse::runtime_status_flood_row(&mut t);
    }
    if run("failpoints") {
        failpoints_row(&mut t).await;
        container_failpoints_row(&mut t).await;
    }
    if run("images") {
        images::images(&m, &mut t).await;
        image_failpoints_row(&mut t).await;
    }
    if run("alive") {
        alive(&mut t).await;
    }
    if run("throughput") {
        throughput(&mut t).await;
    }
    if run("containers") || run("anchor") {
        containers::run(&mut t).await;
    }
    if run("streaming") {
        streaming::run(&mut t).await;
    }
    if run("devices") {
        devices::run(&mut t).await;
    }
    if run("fullnode") {
        fullnode::run(&mut t).await;
    }
    if run("metrics") {
        metrics::run(&mut t).await;
    }
    if run("sandbox_metrics") {
        sandbox_metrics::run(&mut t).await;
    }
    if run("checkpoint") {
        checkpoint::run(&mut t).await;
    }
    println!();
    t.print();
    let missed = t.0.iter().filter(|r| r.ok == Some(false)).count();
    println!(
        "\n{missed} of {} figures missed their target.",
        t.0.iter().filter(|r| r.ok.is_some()).count()
    );
}

/// Kill at every failpoint of a pull and an image's removal, once each.
async fn image_failpoints_row(t: &mut Table) {
    let t0 = Instant::now();
    let report = failpoints::run_images(
        std::path::Path::new(&failpoint_daemon()),
        "127.0.0.1:5000/podscope-test/multilayer",
    )
    .await;
    failpoints_report(
        t,
        "kill -9 at every pull/removal failpoint: leaks",
        "image failpoints",
        &report,
        podscope_sys::failpoint::IMAGES.len(),
        t0,
    );
}

/// Kill at every failpoint of a container's Create, Start, Stop and
/// Remove, once each.
async fn container_failpoints_row(t: &mut Table) {
    let t0 = Instant::now();
    let report =
        failpoints::run_containers(std::path::Path::new(&failpoint_daemon()), anchor::IMAGE).await;
    failpoints_report(
        t,
        "kill -9 at every container failpoint: leaks",
        "container failpoints",
        &report,
        podscope_sys::failpoint::CONTAINERS.len(),
        t0,
    );
}

/// Kill at every failpoint, FAILPOINT_ROUNDS (5) rounds, with the
/// failpoint build of podscoped that `make bench` names in
/// FAILPOINT_DAEMON.
async fn failpoints_row(t: &mut Table) {
    let rounds = std::env::var("FAILPOINT_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let t0 = Instant::now();
    let report = failpoints::run(std::path::Path::new(&failpoint_daemon()), rounds).await;
    failpoints_report(
        t,
        &format!("kill -9 at every failpoint × {rounds} rounds: leaks"),
        "failpoints",
        &report,
        podscope_sys::failpoint::ALL.len(),
        t0,
    );
}

/// The failpoint build of podscoped `make bench` names in FAILPOINT_DAEMON.
fn failpoint_daemon() -> String {
    std::env::var("FAILPOINT_DAEMON").expect(
        "FAILPOINT_DAEMON: a podscoped built with --features failpoints (make bench builds and names it)",
    )
}

/// A kill-at-every-step run as a row: its leaks printed, then none and
/// all `all` failpoints covered as the target.
fn failpoints_report(
    t: &mut Table,
    figure: &str,
    label: &str,
    report: &failpoints::Report,
    all: usize,
    t0: Instant,
) {
    for leak in &report.leaks {
        eprintln!("bench: {label}: leak: {leak}");
    }
    t.add(
        figure,
        &format!("0, all {all} covered"),
        format!(
            "{} leaks, {}/{all} covered, {} kills in {:.0} s",
            report.leaks.len(),
            report.covered.len(),
            report.kills,
            t0.elapsed().as_secs_f64()
        ),
        Some(report.leaks.is_empty() && report.covered.len() == all),
    );
}

/// The callers the abuse section runs as another user.
async fn as_caller(args: &[String]) {
    let n = |i: usize| args.get(i).and_then(|a| a.parse().ok()).expect("a count");
    match args.first().map(String::as_str) {
        Some("big-args") => abuse::big_args(n(1), n(2)).await,
        Some("waits") => abuse::waits(&args[1], n(2)).await,
        Some("runtime-status") => abuse::runtime_status_flood(n(1)).await,
        Some("runtime-status-each") => abuse::runtime_status_each(n(1)).await,
        Some("silent") => abuse::silent(n(1), n(2), n(3) as u64).await,
        Some("hang-up") => abuse::hang_up(&args[1], n(2), n(3) as u64).await,
        other => panic!("as-caller: unknown {other:?}"),
    }
}

/// What the machine charges for moving a process between cgroups, which
/// systemd does for every unit it starts a process in (the netns unit's
/// ExecStart/ExecStop, the scope's podscope-init). Without cgroup2's
/// `favordynmods` each isolated move waits for an RCU grace period, and
/// that alone is a large share of the pod-network figures on small VMs.
fn environment(t: &mut Table) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let Some((root, options)) = mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 3 && f[2] == "cgroup2").then(|| (f[1].to_owned(), f[3].to_owned()))
    }) else {
        t.add(
            "env: cgroup migration p50",
            "report",
            "no cgroup2 mount".into(),
            None,
        );
        return;
    };
    let dirs = ["a", "b"].map(|x| format!("{root}/podscope-bench-probe-{x}"));
    let mut child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let mut samples = Vec::new();
    for dir in &dirs {
        let _ = std::fs::create_dir(dir);
    }
    for i in 0..12 {
        // Apart enough that the kernel's fast path from the previous move
        // has expired: what a lone unit start sees.
        std::thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        if std::fs::write(
            format!("{}/cgroup.procs", dirs[i % 2]),
            child.id().to_string(),
        )
        .is_err()
        {
            break;
        }
        samples.push(t0.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    for dir in &dirs {
        let _ = std::fs::remove_dir(dir);
    }
    let favour = options.split(',').any(|o| o == "favordynmods");
    let measured = if samples.is_empty() {
        format!("cannot write {root}")
    } else {
        format!(
            "{} (favordynmods {})",
            ms(pct(&mut samples, 0.5)),
            if favour { "on" } else { "off" }
        )
    };
    t.add("env: lone cgroup migration p50", "report", measured, None);
}

async fn latency(m: &Client, t: &mut Table) {
    // Pod lifecycle latency, host network, one client.
    let (ids, mut cs) = create_started(m, "lat", 200, host).await;
    let (mut stop, mut rm) = (Vec::new(), Vec::new());
    // Init footprint, on the pods just started.
    let mut rss = Vec::new();
    let mut pss = Vec::new();
    for id in ids.iter().take(50) {
        let pid = m.status(id).await.unwrap().init_pid;
        let (r, p) = rss_pss(pid);
        rss.push(r);
        pss.push(p);
    }
    for id in &ids {
        let t0 = Instant::now();
        m.stop(id).await.unwrap();
        stop.push(t0.elapsed());
        let t0 = Instant::now();
        m.remove(id).await.unwrap();
        rm.push(t0.elapsed());
    }
    let p50 = pct(&mut cs, 0.5);
    let p99 = pct(&mut cs, 0.99);
    t.add_within(
        "Create+Start p50 (host net, 200)",
        p50,
        Duration::from_millis(15),
    );
    t.add_within(
        "Create+Start p99 (host net, 200)",
        p99,
        Duration::from_millis(50),
    );
    let s50 = pct(&mut stop, 0.5);
    let r50 = pct(&mut rm, 0.5);
    t.add_within("Stop p50", s50, Duration::from_millis(15));
    t.add_within("Remove p50", r50, Duration::from_millis(15));
    let max_rss = *rss.iter().max().unwrap();
    let avg_pss = pss.iter().sum::<u64>() as f64 / pss.len() as f64;
    t.add(
        "podscope-init RSS (max of 50)",
        "<= 1024 KiB",
        format!("{max_rss} KiB"),
        Some(max_rss <= 1024),
    );
    t.add(
        "podscope-init PSS (mean of 50)",
        "report",
        format!("{avg_pss:.0} KiB"),
        None,
    );
}

/// The daemon's journal (JSON entries), read once: its per-step timings
/// are structured fields of its log messages.
struct Journal(Vec<serde_json::Value>);

impl Journal {
    fn read() -> Self {
        let out = sh("journalctl -u podscoped -o json --no-pager -n 20000");
        Journal(
            out.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        )
    }

    /// The entries for one of `ids` with `EVENT=event`: (sandbox id, the
    /// text of `field`), for those that have it.
    fn fields<'a>(
        &'a self,
        ids: &[String],
        event: &'a str,
        field: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let want: std::collections::HashSet<String> = ids.iter().cloned().collect();
        let text = |v: &'a serde_json::Value, k: &str| v.get(k).and_then(|s| s.as_str());
        self.0.iter().filter_map(move |v| {
            if text(v, "EVENT")? != event {
                return None;
            }
            let id = text(v, "SANDBOX_ID").filter(|id| want.contains(*id))?;
            Some((id, text(v, field)?))
        })
    }

    /// `field` (µs) of the entries for one of `ids` with `EVENT=event`, by
    /// sandbox id.
    fn times(&self, ids: &[String], event: &str, field: &str) -> HashMap<String, Duration> {
        self.fields(ids, event, field)
            .filter_map(|(id, us)| Some((id.to_owned(), Duration::from_micros(us.parse().ok()?))))
            .collect()
    }

    /// Each plugin's run times from the `PLUGINS_US` field
    /// (`bridge=24133 portmap=3210 ...`), plugins in the order they ran.
    fn plugin_times(&self, ids: &[String], event: &str) -> Vec<(String, Vec<Duration>)> {
        let mut out: Vec<(String, Vec<Duration>)> = Vec::new();
        for (_, pairs) in self.fields(ids, event, "PLUGINS_US") {
            for pair in pairs.split_whitespace() {
                let Some((name, us)) = pair.split_once('=') else {
                    continue;
                };
                let Ok(us) = us.parse() else { continue };
                let d = Duration::from_micros(us);
                match out.iter_mut().find(|(n, _)| n == name) {
                    Some((_, v)) => v.push(d),
                    None => out.push((name.to_owned(), vec![d])),
                }
            }
        }
        out
    }

    /// Per sandbox: (Create+Start total, time in CNI plugins, CNI runtime's
    /// own time), as the daemon measured them.
    fn create_start_timings(&self, ids: &[String]) -> Vec<(Duration, Duration, Duration)> {
        let created = self.times(ids, event::CREATED, "ELAPSED_US");
        let started = self.times(ids, event::STARTED, "TOTAL_US");
        let plugins = self.times(ids, event::NETWORK_ATTACHED, "PLUGIN_US");
        let overhead = self.times(ids, event::NETWORK_ATTACHED, "OVERHEAD_US");
        ids.iter()
            .filter_map(|id| {
                Some((
                    *created.get(id)? + started.get(id).copied().unwrap_or_default(),
                    *plugins.get(id)?,
                    overhead.get(id).copied().unwrap_or_default(),
                ))
            })
            .collect()
    }
}

/// `clients` parallel clients creating and starting `total` sandboxes
/// named `<prefix>-<client>-<i>`; the rate in pods per second.
async fn parallel_create_rate(
    prefix: &'static str,
    total: usize,
    clients: usize,
    options: fn() -> CreateOptions,
) -> f64 {
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        tasks.push(tokio::spawn(async move {
            let m = manager().await.0;
            for i in 0..total / clients {
                let (id, _) = m
                    .create(&bench_pod(format!("{prefix}-{c}-{i}")), &options())
                    .await
                    .unwrap();
                m.start(&id).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    total as f64 / t0.elapsed().as_secs_f64()
}

/// Pod network through the CNI config in /etc/cni/net.d (the harness's
/// bridge + host-local + portmap + loopback list, Debian's plugins).
async fn network(m: &Client, t: &mut Table) {
    let n = 100;
    let (ids, mut cs) = create_started(m, "net", n, CreateOptions::default).await;
    let mut rm = HashMap::new();
    for id in &ids {
        let t0 = Instant::now();
        m.stop(id).await.unwrap();
        m.remove(id).await.unwrap();
        rm.insert(id.clone(), t0.elapsed());
    }
    let journal = Journal::read();
    let mut timings = journal.create_start_timings(&ids);
    assert!(!timings.is_empty(), "no step timings found in the journal");
    t.add_within(
        "Create+Start p50 (bridge CNI, 100)",
        pct(&mut cs, 0.5),
        Duration::from_millis(60),
    );
    t.add(
        "Create+Start p99 (bridge CNI, 100)",
        "report",
        ms(pct(&mut cs, 0.99)),
        None,
    );
    let mut runtime: Vec<Duration> = timings.iter().map(|x| x.2).collect();
    t.add_within(
        "CNI step outside the plugins p50",
        pct(&mut runtime, 0.5),
        Duration::from_millis(5),
    );
    let mut plugins: Vec<Duration> = timings.iter().map(|x| x.1).collect();
    t.add(
        "time inside CNI plugins p50 (4 plugins)",
        "report",
        ms(pct(&mut plugins, 0.5)),
        None,
    );
    let mut outside: Vec<Duration> = timings
        .iter_mut()
        .map(|x| x.0.saturating_sub(x.1))
        .collect();
    t.add(
        "daemon Create+Start outside plugins p50",
        "report",
        ms(pct(&mut outside, 0.5)),
        None,
    );
    // Stop runs DEL while the namespace exists (issue 3); the figure is
    // what Stop+Remove costs besides the plugins themselves.
    let del = journal.times(&ids, event::NETWORK_DETACHED, "PLUGIN_US");
    let mut outside: Vec<Duration> = rm
        .iter()
        .filter_map(|(id, took)| Some(took.saturating_sub(*del.get(id)?)))
        .collect();
    assert_eq!(outside.len(), ids.len(), "a DEL time for every pod");
    t.add_within(
        "Stop+Remove outside the CNI plugins p50",
        pct(&mut outside, 0.5),
        Duration::from_millis(12),
    );
    let mut whole: Vec<Duration> = rm.into_values().collect();
    t.add(
        "Stop+Remove p50, whole (CNI DEL)",
        "report",
        ms(pct(&mut whole, 0.5)),
        None,
    );
    // Where Stop's time goes, as the daemon measured it.
    for (row, ev, field) in [
        ("Stop: scope stop p50", event::STOPPED, "SCOPE_US"),
        ("Stop: CNI DEL p50", event::NETWORK_DETACHED, "CNI_US"),
        (
            "Stop: inside CNI plugins (DEL) p50",
            event::NETWORK_DETACHED,
            "PLUGIN_US",
        ),
        (
            "Stop: unpin + the netns unit's stop queued p50 (after DEL)",
            event::STOPPED,
            "NETNS_US",
        ),
        (
            "Stop: whole, daemon-measured p50",
            event::STOPPED,
            "ELAPSED_US",
        ),
        (
            "Create: netns unit start p50 (alongside ADD)",
            event::CREATED,
            "NETNS_US",
        ),
        (
            "Create: whole, daemon-measured p50",
            event::CREATED,
            "ELAPSED_US",
        ),
        (
            "Start: whole, daemon-measured p50",
            event::STARTED,
            "TOTAL_US",
        ),
        ("Start: network check p50", event::STARTED, "NETWORK_US"),
        ("Start: podscope-init spawn p50", event::STARTED, "INIT_US"),
        ("Start: scope job p50", event::STARTED, "SCOPE_US"),
        (
            "machined registration p50 (after Start answers)",
            event::MACHINE_REGISTERED,
            "MACHINE_US",
        ),
    ] {
        let mut v: Vec<Duration> = journal.times(&ids, ev, field).into_values().collect();
        if !v.is_empty() {
            t.add(row, "report", ms(pct(&mut v, 0.5)), None);
        }
    }
    // Which plugin the time inside the plugins goes to (p50 / p90).
    for (verb, ev) in [
        ("ADD", event::NETWORK_ATTACHED),
        ("DEL", event::NETWORK_DETACHED),
    ] {
        for (plugin, mut v) in journal.plugin_times(&ids, ev) {
            t.add(
                &format!("CNI {verb}: {plugin} p50 / p90"),
                "report",
                format!("{} / {}", ms(pct(&mut v, 0.5)), ms(pct(&mut v, 0.9))),
                None,
            );
        }
    }

    // 100 pods with networks, 4 parallel clients.
    let rate = parallel_create_rate("netp", 100, 4, CreateOptions::default).await;
    t.add(
        "Create+Start, pod net, 4 clients, 100",
        ">= 20 /s",
        format!("{rate:.0} /s"),
        Some(rate >= 20.0),
    );
    remove_all(m).await;
}

const CRI_SOCKET: &str = "/run/podscope/cri.sock";

async fn cri_client() -> RuntimeServiceClient<tonic::transport::Channel> {
    let ch = cri_api::channel(std::path::Path::new(CRI_SOCKET))
        .await
        .expect("connect to the CRI socket");
    RuntimeServiceClient::new(ch)
}

fn cri_host_pod(name: String) -> cri::RunPodSandboxRequest {
    cri::RunPodSandboxRequest {
        config: Some(cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name,
                uid: "u".into(),
                namespace: "bench".into(),
                attempt: 0,
            }),
            linux: Some(cri::LinuxPodSandboxConfig {
                security_context: Some(cri::LinuxSandboxSecurityContext {
                    namespace_options: Some(cri::NamespaceOption {
                        network: cri::NamespaceMode::Node as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        runtime_handler: String::new(),
    }
}

/// The CRI frontend's cost: RunPodSandbox through the socket against the
/// same Create+Start straight over D-Bus (host network, interleaved so both
/// see the same machine), and its memory when idle.
async fn cri(m: &Client, t: &mut Table) {
    let mut rt = cri_client().await;
    // Warm both paths (activation, first connections).
    for i in 0..5 {
        rt.run_pod_sandbox(cri_host_pod(format!("criwarm-{i}")))
            .await
            .unwrap();
    }
    let n = 200;
    let (mut via_cri, mut via_bus) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t0 = Instant::now();
        rt.run_pod_sandbox(cri_host_pod(format!("cri-{i}")))
            .await
            .unwrap();
        via_cri.push(t0.elapsed());
        let t0 = Instant::now();
        let (id, _) = m
            .create(&bench_pod(format!("bus-{i}")), &host())
            .await
            .unwrap();
        m.start(&id).await.unwrap();
        via_bus.push(t0.elapsed());
    }
    let mut trip = Vec::new();
    for _ in 0..200 {
        let t0 = Instant::now();
        rt.runtime_config(cri::RuntimeConfigRequest {})
            .await
            .unwrap();
        trip.push(t0.elapsed());
    }
    t.add(
        "CRI round trip without D-Bus (RuntimeConfig) p50",
        "report",
        ms(pct(&mut trip, 0.5)),
        None,
    );
    let (c50, b50) = (pct(&mut via_cri, 0.5), pct(&mut via_bus, 0.5));
    t.add(
        "RunPodSandbox p50 via CRI (host net, 200)",
        "report",
        ms(c50),
        None,
    );
    t.add(
        "Create+Start p50 via D-Bus, same runs",
        "report",
        ms(b50),
        None,
    );
    let added = c50.saturating_sub(b50);
    t.add_within("CRI frontend overhead p50", added, Duration::from_millis(1));
    remove_all(m).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid: u32 = sh("systemctl show -P MainPID podscope-cri")
        .trim()
        .parse()
        .unwrap();
    let (rss, _) = rss_pss(pid);
    t.add(
        "podscope-cri idle RSS",
        "<= 16 MiB",
        format!("{:.1} MiB", rss as f64 / 1024.0),
        Some(rss > 0 && rss <= 16 * 1024),
    );
}

/// 1000 sandboxes alive: memory, Status, List, recovery.
async fn alive(t: &mut Table) {
    sh("systemctl restart podscoped");
    let m = manager().await.0;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = daemon_pid();
    let (rss0, _) = rss_pss(pid);
    let alive = 1000;
    let (ids, _) = create_started(&m, "alive", alive, host).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss1, _) = rss_pss(pid);
    let per = (rss1.saturating_sub(rss0)) as f64 / alive as f64;
    t.add(
        "daemon RSS growth per sandbox",
        "<= 64 KiB",
        format!("{per:.1} KiB"),
        Some(per <= 64.0),
    );
    t.add(
        "daemon RSS, 1000 sandboxes",
        "<= 64 MiB",
        format!("{:.1} MiB", rss1 as f64 / 1024.0),
        Some(rss1 <= 64 * 1024),
    );
    let mut st = Vec::new();
    for i in 0..500 {
        let id = &ids[(i * 7) % ids.len()];
        let t0 = Instant::now();
        m.status(id).await.unwrap();
        st.push(t0.elapsed());
    }
    let st50 = pct(&mut st, 0.5);
    t.add_within("Status p50, 1000 alive", st50, Duration::from_millis(2));
    let mut ls = Vec::new();
    for _ in 0..30 {
        let t0 = Instant::now();
        let l = m.list(&ListFilter::default()).await.unwrap();
        ls.push(t0.elapsed());
        assert_eq!(l.len(), alive);
    }
    let ls50 = pct(&mut ls, 0.5);
    t.add_within("List p50, 1000 alive", ls50, Duration::from_millis(50));
    let mut rt = cri_client().await;
    let mut cls = Vec::new();
    for _ in 0..30 {
        let t0 = Instant::now();
        let l = rt
            .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
            .await
            .unwrap()
            .into_inner()
            .items;
        cls.push(t0.elapsed());
        assert_eq!(l.len(), alive);
    }
    t.add_within(
        "CRI ListPodSandbox p50, 1000 alive",
        pct(&mut cls, 0.5),
        Duration::from_millis(60),
    );

    // Recovery: what the daemon measured, and restart-to-answer wall time.
    let t0 = Instant::now();
    sh("systemctl restart podscoped");
    let m = manager().await.0;
    let wall = t0.elapsed();
    let (_, info, _) = m.runtime_status().await.unwrap();
    let rec = Duration::from_micros(info.recovery_usec);
    assert_eq!(info.recovered as usize, alive);
    assert_eq!(
        info.ready, alive as u32,
        "every pod still ready after the restart"
    );
    t.add_within(
        "recovery of 1000 (daemon-measured)",
        rec,
        Duration::from_secs(2),
    );
    t.add("restart until answering, 1000", "report", ms(wall), None);
    remove_all(&m).await;
}

/// 8 parallel clients creating and starting 400 sandboxes.
async fn throughput(t: &mut Table) {
    let rate = parallel_create_rate("tp", 400, 8, host).await;
    t.add(
        "Create+Start, 8 clients, 400",
        ">= 100 /s",
        format!("{rate:.0} /s"),
        Some(rate >= 100.0),
    );
    remove_all(&manager().await.0).await;
}
