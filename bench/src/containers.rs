//! The container figures (issue 22): podscope with each of its runtime
//! handlers (crun, runc) against the anchor, containerd 1.6 + runc, in the
//! same run and by the same code (anchor.rs). Each figure is taken on the
//! three one after another, so that all three see the same machine at
//! about the same time; every ratio is of this run's own numbers. Then
//! what podscope alone must show (no process per container, the daemon's
//! memory per container, log throughput into the CRI log file), and a row
//! per target with its verdict.

use super::anchor::{self, Figures, Target, Tools};
use super::{daemon_pid, ms, rss_pss, sh, Table};
use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// The section: the anchor started, every shared figure on the three
/// targets, the anchor stopped, podscope's own figures, the verdicts.
pub async fn run(t: &mut Table) {
    let tools = Tools::from_env();
    // The cold pull's image, when the images section did not push it.
    super::images::ensure_big().await;
    let containerd = anchor::start_containerd();
    let targets = [
        containerd,
        Target::podscope("crun"),
        Target::podscope("runc"),
    ];
    let mut figs = vec![Figures::default(); targets.len()];
    for target in &targets {
        let mut img = anchor::image_client(target).await;
        anchor::pull(&mut img, anchor::IMAGE).await;
    }
    for (target, f) in targets.iter().zip(figs.iter_mut()) {
        let cursor = (target.socket == Path::new(super::CRI_SOCKET)).then(journal_cursor);
        anchor::critest_benchmarks(target, &tools, t, f);
        if let Some(cursor) = cursor {
            critest_breakdown(target, &cursor, t);
        }
    }
    for (target, f) in targets.iter().zip(figs.iter_mut()) {
        anchor::exec_sync(target, &tools, t, f).await;
    }
    for (target, f) in targets.iter().zip(figs.iter_mut()) {
        anchor::footprint(target, t, f).await;
    }
    for (target, f) in targets.iter().zip(figs.iter_mut()) {
        anchor::concurrent_starts(target, t, f).await;
    }
    let podscope = Target {
        name: "podscope".into(),
        ..Target::podscope("")
    };
    let pulls = cold_pulls(&targets[0], &podscope, &tools, t).await;
    let mut logs = Vec::new();
    for target in &targets {
        logs.push(log_throughput(target, t).await);
    }
    anchor::stop_containerd();
    let mut own = Vec::new();
    for target in &targets[1..] {
        own.push(per_container(target, t).await);
    }
    verdicts(t, &targets, &figs, &own, &logs, pulls);
}

/// A ratio row: ours / theirs against `max` (lower is better).
fn ratio_row(
    t: &mut Table,
    figure: &str,
    ours: Duration,
    theirs: Duration,
    max: f64,
    detail: &str,
) {
    let r = ours.as_secs_f64() / theirs.as_secs_f64();
    t.add(
        figure,
        &format!("<= {max:.1}x containerd"),
        format!("{} / {} = {r:.2}x{detail}", ms(ours), ms(theirs)),
        Some(r <= max),
    );
}

/// One row per target, podscope with each handler against containerd.
fn verdicts(
    t: &mut Table,
    targets: &[Target],
    figs: &[Figures],
    own: &[PerContainer],
    logs: &[LogRate],
    pulls: (Duration, Duration),
) {
    let c = &figs[0];
    for ((target, f), o) in targets[1..].iter().zip(&figs[1..]).zip(own) {
        let h = target.runtime_handler.as_str();
        let crun = h == "crun";
        ratio_row(
            t,
            &format!("Create+StartContainer p50 (critest), {h} / containerd"),
            f.create_start,
            c.create_start,
            if crun { 0.3 } else { 1.0 },
            &format!(
                " ({} + {} / {} + {})",
                ms(f.create),
                ms(f.start),
                ms(c.create),
                ms(c.start)
            ),
        );
        ratio_row(
            t,
            &format!("StopContainer p50 (critest, exits on SIGTERM), {h} / containerd"),
            f.stop,
            c.stop,
            0.5,
            "",
        );
        t.add(
            &format!("RemoveContainer p50 (critest), {h}"),
            "<= 5 ms",
            format!("{} (containerd {})", ms(f.remove), ms(c.remove)),
            Some(f.remove <= Duration::from_millis(5)),
        );
        ratio_row(
            t,
            &format!("ExecSync `true` p50 (crictl exec -s - version), {h} / containerd"),
            f.exec,
            c.exec,
            if crun { 0.4 } else { 1.0 },
            "",
        );
        ratio_row(
            t,
            &format!("StopPodSandbox p50, pod net (critest), {h} / containerd"),
            f.stop_pod,
            c.stop_pod,
            0.8,
            "",
        );
        t.add(
            &format!("memory per pod with 1 running container, outside it, {h}"),
            "<= 1 MiB RSS",
            format!(
                "{:.2} MiB RSS, {:.2} MiB PSS ({}; containerd {:.1} MiB RSS, {})",
                f.pod_rss_kib / 1024.0,
                f.pod_pss_kib / 1024.0,
                f.pod_processes,
                c.pod_rss_kib / 1024.0,
                c.pod_processes
            ),
            Some(f.pod_rss_kib > 0.0 && f.pod_rss_kib <= 1024.0),
        );
        let extra = o.slice_others.len() + o.podscope_new.len();
        t.add(
            &format!(
                "processes per running container besides its own, {h} ({} in {} pods)",
                o.containers, o.pods
            ),
            "0",
            format!(
                "{:.2} ({} in the pods' slices besides inits and containers, {} podscope processes new with the containers)",
                extra as f64 / o.containers as f64,
                o.slice_others.len(),
                o.podscope_new.len()
            ),
            Some(extra == 0 && o.containers > 0),
        );
        t.add(
            &format!(
                "podscoped RSS growth per running container, {h} ({})",
                o.containers
            ),
            "<= 64 KiB",
            format!(
                "{:.1} KiB ({:.1} -> {:.1} MiB)",
                o.rss_growth_kib,
                o.rss_before_kib as f64 / 1024.0,
                o.rss_after_kib as f64 / 1024.0
            ),
            Some(o.rss_growth_kib <= 64.0),
        );
        let r = f.start_rate / c.start_rate;
        t.add(
            &format!("containers started/s, 100 in 25 pods, 4 clients, {h} / containerd"),
            ">= 2.0x containerd",
            format!("{:.1} / {:.1} /s = {r:.2}x", f.start_rate, c.start_rate),
            Some(r >= 2.0),
        );
    }
    for (target, l) in targets.iter().zip(logs).skip(1) {
        let h = target.runtime_handler.as_str();
        // The writer writes as fast as it can, so the daemon's reader is
        // busy all the time at any rate it reaches: its CPU is judged per
        // 100 MiB/s of output, the target's rate.
        let per_100 = l.cores * 100.0 / l.mib_s.max(f64::MIN_POSITIVE);
        t.add(
            &format!("log throughput into the CRI log, 1 container, {h}"),
            ">= 100 MiB/s at <= 1 core",
            format!(
                "{:.0} MiB/s, podscoped {:.2} core = {per_100:.2} core per 100 MiB/s (containerd {:.0} MiB/s at {:.2} core)",
                l.mib_s, l.cores, logs[0].mib_s, logs[0].cores
            ),
            Some(l.mib_s >= 100.0 && per_100 <= 1.0),
        );
    }
    let (ours, theirs) = pulls;
    ratio_row(
        t,
        "cold pull, 52 MiB image (crictl pull, median of 3), podscope / containerd",
        ours,
        theirs,
        1.0,
        "",
    );
}

/// Cold pulls of the bench's big image, containerd's and podscope's in
/// turn, 3 each: (podscope's median, containerd's median). Each target's
/// row as anchor.rs words it.
async fn cold_pulls(
    containerd: &Target,
    podscope: &Target,
    tools: &Tools,
    t: &mut Table,
) -> (Duration, Duration) {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    // The layers podscope's store holds without the big image.
    anchor::forget_big(podscope, tools);
    let base = collected(None).await;
    for _ in 0..3 {
        anchor::forget_big(containerd, tools);
        theirs.push(anchor::pull_big(containerd, tools));
        anchor::forget_big(podscope, tools);
        collected(Some(&base)).await;
        ours.push(anchor::pull_big(podscope, tools));
    }
    anchor::forget_big(containerd, tools);
    anchor::forget_big(podscope, tools);
    collected(Some(&base)).await;
    let (o, c) = (median(ours), median(theirs));
    t.add(&anchor::cold_pull_figure(containerd), "report", ms(c), None);
    t.add(&anchor::cold_pull_figure(podscope), "report", ms(o), None);
    (o, c)
}

fn median(mut v: Vec<Duration>) -> Duration {
    super::pct(&mut v, 0.5)
}

const LAYERS: &str = "/var/lib/podscope/images/layers";
const STORE_TMP: &str = "/var/lib/podscope/images/tmp";

fn dir_names(dir: &str) -> HashSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Wait for podscope's store to have collected what a removal left:
/// until its layers are `base` (or, without one, until they and the
/// store's tmp/ are still for 300 ms); the layers then.
async fn collected(base: Option<&HashSet<String>>) -> HashSet<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = dir_names(LAYERS);
    let mut still = Instant::now();
    loop {
        let now = dir_names(LAYERS);
        let tmp_empty = dir_names(STORE_TMP).is_empty();
        match base {
            Some(b) if now.is_subset(b) && tmp_empty => return now,
            None if now == last && tmp_empty && still.elapsed() >= Duration::from_millis(300) => {
                return now
            }
            _ => {}
        }
        if now != last {
            still = Instant::now();
            last = now;
        }
        assert!(
            Instant::now() < deadline,
            "podscope's image store did not collect the removed image's layers in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one container writing as fast as it can gets into its CRI log
/// file: MiB/s of its output (the records' text and newlines, not their
/// timestamps and tags), and the CPU the runtime's log writer used
/// meanwhile (podscoped; containerd's shim), in cores.
#[derive(Debug, Default, Clone, Copy)]
struct LogRate {
    mib_s: f64,
    cores: f64,
}

/// A line of 99 characters: `yes` writes it with its newline, 100 bytes.
fn line() -> String {
    format!("{:-<99}", "podscope-bench log throughput ")
}

/// Warm-up before the measured interval, and the interval.
const LOG_WARMUP: Duration = Duration::from_secs(1);
const LOG_INTERVAL: Duration = Duration::from_secs(3);

async fn log_throughput(target: &Target, t: &mut Table) -> LogRate {
    let podscope = target.socket == Path::new(super::CRI_SOCKET);
    let tag = if podscope {
        target.runtime_handler.clone()
    } else {
        "containerd".into()
    };
    let dir = PathBuf::from(format!("/var/log/pods/podscope-bench-logs-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut rt = anchor::runtime_client(target).await;
    let mut config = anchor::pod_config(target, &format!("logs-{tag}"));
    config.log_directory = dir.display().to_string();
    let pod = anchor::run_pod(&mut rt, target, &config).await;
    let mut c = anchor::container_config("yes");
    c.command = vec!["yes".into(), line()];
    c.log_path = "yes/0.log".into();
    let id = anchor::run_container(&mut rt, &pod, &config, c).await;
    let log = dir.join("yes/0.log");
    // Whose CPU: the daemon; containerd's CRI plugin (it reads the
    // container's output from the shim's FIFOs and writes the file) and the
    // pod's shim.
    let writers: Vec<u32> = if podscope {
        vec![daemon_pid()]
    } else {
        let all = anchor::processes();
        let mut v: Vec<u32> =
            anchor::runtime_processes(&mut rt, &[(pod.clone(), vec![id.clone()])])
                .await
                .remove(0)
                .into_iter()
                .filter(|p| all.get(p).is_some_and(|p| p.comm.contains("shim")))
                .collect();
        v.push(anchor::containerd_pid());
        v
    };
    tokio::time::sleep(LOG_WARMUP).await;
    let size = || std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let (s0, c0, t0) = (size(), cpu_ticks(&writers), Instant::now());
    tokio::time::sleep(LOG_INTERVAL).await;
    let (s1, c1, took) = (size(), cpu_ticks(&writers), t0.elapsed());
    rt.stop_container(cri::StopContainerRequest {
        container_id: id.clone(),
        timeout: 0,
    })
    .await
    .unwrap_or_else(|e| panic!("StopContainer yes: {e}"));
    let text = record_text_bytes(&log, s0, s1);
    anchor::remove_pods(&mut rt, &[pod]).await;
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let secs = took.as_secs_f64();
    let r = LogRate {
        mib_s: text as f64 / 1048576.0 / secs,
        cores: c1.saturating_sub(c0) as f64 / hz / secs,
    };
    let who = if podscope {
        "podscoped"
    } else {
        "containerd + shim"
    };
    t.add(
        &target.row("log throughput: `yes` of 100-byte lines into the CRI log file"),
        "report",
        format!(
            "{:.0} MiB/s of output ({:.0} MiB/s of file), {who} {:.2} core",
            r.mib_s,
            s1.saturating_sub(s0) as f64 / 1048576.0 / secs,
            r.cores
        ),
        None,
    );
    r
}

/// utime + stime of `pids`, in clock ticks.
fn cpu_ticks(pids: &[u32]) -> u64 {
    pids.iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let after = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
            let f: Vec<&str> = after.split_whitespace().collect();
            // After "(comm)": state is field 3, utime 14, stime 15.
            let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            get(11) + get(12)
        })
        .sum()
}

/// The container's output in the log file's bytes [from, to): the text of
/// each whole record (`<time> <stream> <F|P> <text>`), with the newline an
/// `F` record ends a line with. The record `from` falls into is skipped.
fn record_text_bytes(log: &Path, from: u64, to: u64) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else {
        return 0;
    };
    if f.seek(SeekFrom::Start(from)).is_err() {
        return 0;
    }
    let mut r = std::io::BufReader::with_capacity(1 << 20, f.take(to - from));
    let mut line = Vec::with_capacity(256);
    let mut first = from > 0;
    let mut text = 0u64;
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // A record cut by either end of the interval is not counted.
        if std::mem::take(&mut first) || line.last() != Some(&b'\n') {
            continue;
        }
        let mut parts = line.splitn(4, |b| *b == b' ');
        let (_, _, tag, body) = (parts.next(), parts.next(), parts.next(), parts.next());
        let Some(body) = body else { continue };
        // body ends with the record's newline: the line's own for F.
        text += body.len() as u64 - u64::from(tag != Some(b"F".as_slice()));
    }
    text
}

/// What running containers cost podscope beyond their own processes.
#[derive(Debug, Default)]
struct PerContainer {
    pods: usize,
    containers: usize,
    /// Processes in the pods' slices that are neither in a container's
    /// unit nor the pod's init.
    slice_others: Vec<u32>,
    /// podscope's processes (its binaries, the runtimes, anything in its
    /// units) that appeared with the containers, outside their units.
    podscope_new: Vec<String>,
    rss_before_kib: u64,
    rss_after_kib: u64,
    rss_growth_kib: f64,
}

/// The hierarchy systemd tracks processes in: its named v1 hierarchy where
/// there is one (legacy and hybrid layouts), else cgroup2. (mount point,
/// the line prefix in /proc/<pid>/cgroup.)
fn tracking_hierarchy() -> (PathBuf, &'static str) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut v2 = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        if f[2] == "cgroup" && f[3].split(',').any(|o| o == "name=systemd") {
            return (PathBuf::from(f[1]), ":name=systemd:");
        }
        if f[2] == "cgroup2" && v2.is_none() {
            v2 = Some(PathBuf::from(f[1]));
        }
    }
    (v2.expect("a cgroup2 or name=systemd mount"), "0::")
}

/// The control group of `pid` in the tracking hierarchy.
fn cgroup_of(pid: u32, prefix: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    s.lines().find_map(|l| {
        let i = l.find(prefix)?;
        // "1:name=systemd:/path" or "0::/path"
        (prefix != "0::" || i == 0).then(|| l[i + prefix.len()..].to_owned())
    })
}

/// Every process under `dir` (a control group directory): (pid, whether a
/// container's unit holds it).
fn procs_under(dir: &Path, in_container: bool, out: &mut Vec<(u32, bool)>) {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    let in_container = in_container
        || name.is_some_and(|n| n.starts_with("podscope-ctr-") && n.ends_with(".service"));
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(
            procs
                .lines()
                .filter_map(|p| p.trim().parse().ok())
                .map(|p| (p, in_container)),
        );
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                procs_under(&e.path(), in_container, out);
            }
        }
    }
}

/// 25 pods made first, then 4 running containers in each (one client, one
/// after another): podscoped's RSS before and after the containers, the
/// processes that came with them outside their units, and every process in
/// the pods' slices that is neither a container's nor a pod's init.
async fn per_container(target: &Target, t: &mut Table) -> PerContainer {
    let (pods_n, per_pod) = (25usize, 4usize);
    let h = &target.runtime_handler;
    let mut rt = anchor::runtime_client(target).await;
    let mut pods = Vec::new();
    for i in 0..pods_n {
        let config = anchor::pod_config(target, &format!("per-container-{h}-{i}"));
        let id = anchor::run_pod(&mut rt, target, &config).await;
        pods.push((id, config));
    }
    let settle = Duration::from_millis(500);
    tokio::time::sleep(settle).await;
    let daemon = daemon_pid();
    let (rss0, _) = rss_pss(daemon);
    let before: HashSet<u32> = anchor::processes().into_keys().collect();
    let cursor = journal_cursor();
    let mut ctrs = Vec::new();
    for (pod, config) in &pods {
        for j in 0..per_pod {
            let c = anchor::container_config(&format!("c{j}"));
            ctrs.push(anchor::run_container(&mut rt, pod, config, c).await);
        }
    }
    tokio::time::sleep(settle).await;
    let (rss1, _) = rss_pss(daemon);
    let after = anchor::processes();
    let (root, prefix) = tracking_hierarchy();

    // New since the pods were made, outside every container's unit, and
    // podscope's: its binaries, a runtime, or in one of its units.
    let me = std::process::id();
    let mut podscope_new = Vec::new();
    for (pid, p) in &after {
        if before.contains(pid) || *pid == me || p.ppid == me {
            continue;
        }
        let cg = cgroup_of(*pid, prefix).unwrap_or_default();
        if cg.contains("/podscope-ctr-") {
            continue;
        }
        let ours = ["podscope", "crun", "runc", "conmon", "containerd-shim"]
            .iter()
            .any(|n| p.comm.starts_with(n))
            || cg.contains("podscope");
        if ours {
            podscope_new.push(format!("{pid} {} in {cg}", p.comm));
        } else {
            eprintln!(
                "bench: containers: a new process not podscope's: {pid} {} in {cg}",
                p.comm
            );
        }
    }

    // Each pod's slice: its init's control group's parent.
    let mut slice_others = Vec::new();
    for (pod, _) in &pods {
        let st = rt
            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                pod_sandbox_id: pod.clone(),
                verbose: true,
            })
            .await
            .unwrap()
            .into_inner();
        let init = anchor::info_pid(&st.info).expect("a ready pod's init pid");
        let scope = cgroup_of(init, prefix).expect("the init's control group");
        let slice = Path::new(&scope).parent().expect("a scope in a slice");
        let dir = root.join(slice.strip_prefix("/").unwrap_or(slice));
        let mut procs = Vec::new();
        procs_under(&dir, false, &mut procs);
        assert!(
            procs.iter().any(|(p, _)| *p == init),
            "pod {pod}: its init {init} is not under {}",
            dir.display()
        );
        for (pid, in_ctr) in procs {
            if !in_ctr && pid != init {
                let comm = after.get(&pid).map_or("?", |p| p.comm.as_str());
                eprintln!(
                    "bench: containers: pod {pod}: {pid} {comm} in its slice, neither a container's nor its init",
                );
                slice_others.push(pid);
            }
        }
    }
    for p in &podscope_new {
        eprintln!("bench: containers: a podscope process came with the containers: {p}");
    }
    start_breakdown(target, &mut rt, &ctrs, &cursor, t).await;
    exec_breakdown(target, &mut rt, &ctrs[0], t).await;
    remove_breakdown(target, &mut rt, &ctrs[..20], t).await;
    let ids: Vec<String> = pods.into_iter().map(|(p, _)| p).collect();
    anchor::remove_pods(&mut rt, &ids).await;
    let containers = ctrs.len();
    PerContainer {
        pods: pods_n,
        containers,
        slice_others,
        podscope_new,
        rss_before_kib: rss0,
        rss_after_kib: rss1,
        rss_growth_kib: rss1.saturating_sub(rss0) as f64 / containers as f64,
    }
}

/// Where a StartContainer's time goes, for the containers just started
/// one after another (the journal entries after `cursor`): the daemon's
/// own step times (its container-started entry), and the runtime's
/// `create` as systemd ran and timed it (the unit's `ExecStart`, its
/// spawn into the unit's control group included), on one clock.
async fn start_breakdown(
    target: &Target,
    rt: &mut RuntimeServiceClient<Channel>,
    ctrs: &[String],
    cursor: &str,
    t: &mut Table,
) {
    let want: HashSet<&str> = ctrs.iter().map(String::as_str).collect();
    let entries: Vec<serde_json::Value> =
        journal_after(cursor, podscope_sys::logging::event::CONTAINER_STARTED)
            .into_iter()
            .filter(|v| {
                v["CONTAINER_ID"]
                    .as_str()
                    .is_some_and(|id| want.contains(id))
            })
            .collect();
    let mut create = Vec::new();
    for c in ctrs {
        let info = anchor::verbose_info(rt, c).await;
        if let Some((a, b)) = info["unit"]
            .as_str()
            .and_then(|u| exec_times(u, "ExecStart"))
        {
            create.push(Duration::from_micros(b - a));
        }
    }
    let create = if create.is_empty() {
        "-".to_owned()
    } else {
        ms(super::pct(&mut create, 0.5))
    };
    t.add(
        &target.row(&format!(
            "StartContainer p50 of {} (one client): the daemon's steps; the runtime's create as systemd timed it (ExecStart)",
            entries.len()
        )),
        "report",
        format!("{}; create {create}", steps_p50(&entries)),
        None,
    );
}

/// The p50 of each step time (`*_US`) in `entries`: "whole X: step a, ...".
pub(super) fn steps_p50(entries: &[serde_json::Value]) -> String {
    // The daemon's order of a start's steps; others after, by name.
    const ORDER: &[&str] = &[
        "LOG_US",
        "PIPES_US",
        "PREPARE_US",
        "SHM_US",
        "ROOT_US",
        "OOM_US",
        "CPUACCT_US",
        "UNIT_US",
        "STATUS_US",
        "START_US",
    ];
    let mut names: Vec<String> = entries
        .iter()
        .filter_map(|e| e.as_object())
        .flat_map(|o| o.keys().cloned())
        .filter(|k| k.ends_with("_US") && k != "ELAPSED_US")
        .collect();
    names.sort_by_key(|n| {
        (
            ORDER.iter().position(|o| o == n).unwrap_or(ORDER.len()),
            n.clone(),
        )
    });
    names.dedup();
    let steps: Vec<String> = names
        .iter()
        .map(|n| {
            format!(
                "{} {}",
                n.trim_end_matches("_US").to_lowercase(),
                field_p50(entries, n)
            )
        })
        .collect();
    format!(
        "whole {}: {}",
        field_p50(entries, "ELAPSED_US"),
        steps.join(", ")
    )
}

/// When systemd spawned the unit's first `prop` command (ExecStart,
/// ExecStartPost, ...) and when it saw it exit, µs of CLOCK_MONOTONIC.
fn exec_times(unit: &str, prop: &str) -> Option<(u64, u64)> {
    let path: serde_json::Value = serde_json::from_str(&sh(&format!(
        "busctl --json=short call org.freedesktop.systemd1 /org/freedesktop/systemd1 \
         org.freedesktop.systemd1.Manager GetUnit s {unit}"
    )))
    .ok()?;
    let path = path["data"][0].as_str()?.to_owned();
    let v: serde_json::Value = serde_json::from_str(&sh(&format!(
        "busctl --json=short get-property org.freedesktop.systemd1 {path} \
         org.freedesktop.systemd1.Service {prop}"
    )))
    .ok()?;
    // a(sasbttttuii): path, argv, ignore errors, start (realtime,
    // monotonic), exit (realtime, monotonic), pid, code, status.
    let cmd = &v["data"][0];
    let (start, exit) = (cmd[4].as_u64()?, cmd[6].as_u64()?);
    (start > 0 && exit >= start).then_some((start, exit))
}

/// RemoveContainer of stopped containers, whole, and in two: the unit's
/// stop alone (`systemctl stop`: ExecStopPost, the runtime's `delete`),
/// then RemoveContainer of what is left; p50 of `n` each.
async fn remove_breakdown(
    target: &Target,
    rt: &mut RuntimeServiceClient<Channel>,
    ctrs: &[String],
    t: &mut Table,
) {
    let (mut whole, mut unit, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for (i, c) in ctrs.iter().enumerate() {
        rt.stop_container(cri::StopContainerRequest {
            container_id: c.clone(),
            timeout: 10,
        })
        .await
        .unwrap_or_else(|e| panic!("StopContainer: {e}"));
        let remove = |rt: &mut RuntimeServiceClient<Channel>| {
            let mut rt = rt.clone();
            let c = c.clone();
            async move {
                let t0 = Instant::now();
                rt.remove_container(cri::RemoveContainerRequest { container_id: c })
                    .await
                    .unwrap_or_else(|e| panic!("RemoveContainer: {e}"));
                t0.elapsed()
            }
        };
        if i % 2 == 0 {
            whole.push(remove(rt).await);
        } else {
            let t0 = Instant::now();
            sh(&format!("systemctl stop podscope-ctr-{c}.service"));
            unit.push(t0.elapsed());
            rest.push(remove(rt).await);
        }
    }
    let p50 = |v: &mut Vec<Duration>| ms(super::pct(v, 0.5));
    t.add(
        &target.row(&format!(
            "RemoveContainer p50 of stopped containers ({} each): whole / the unit's stop alone (systemctl stop) / the rest",
            whole.len()
        )),
        "report",
        format!(
            "{} / {} / {}",
            p50(&mut whole),
            p50(&mut unit),
            p50(&mut rest)
        ),
        None,
    );
}

/// What an ExecSync is made of, each part run by the bench itself on a
/// running container: the runtime's `exec` of `true` alone, and a
/// transient oneshot unit in the pod's slice running `true` (systemd-run
/// --wait: what the daemon asks of systemd for each exec, plus
/// systemd-run's own start), p50 of 20 each.
async fn exec_breakdown(
    target: &Target,
    rt: &mut RuntimeServiceClient<Channel>,
    ctr: &str,
    t: &mut Table,
) {
    let info = anchor::verbose_info(rt, ctr).await;
    let slice = info["cgroup"]
        .as_str()
        .and_then(|c| {
            Path::new(c)
                .parent()?
                .file_name()?
                .to_str()
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let h = target.runtime_handler.as_str();
    let runtime: Vec<String> = match h {
        "crun" => vec!["/usr/bin/crun".into(), "--cgroup-manager=disabled".into()],
        _ => vec![format!("/usr/bin/{h}")],
    };
    let time = |argv: &[String]| {
        let t0 = Instant::now();
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .expect("run a command");
        let took = t0.elapsed();
        assert!(
            out.status.success(),
            "{argv:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    };
    let mut exec_argv = runtime.clone();
    exec_argv.extend(["exec".into(), ctr.to_owned(), "true".into()]);
    let unit_argv: Vec<String> = [
        "systemd-run",
        "--quiet",
        "--wait",
        "--collect",
        "--service-type=oneshot",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--slice={slice}"), "/bin/true".into()])
    .collect();
    let (mut exec, mut unit) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        exec.push(time(&exec_argv));
        unit.push(time(&unit_argv));
    }
    t.add(
        &target.row("ExecSync's parts p50: runtime exec alone / a oneshot unit of `true` (systemd-run --wait)"),
        "report",
        format!(
            "{} / {}",
            ms(super::pct(&mut exec, 0.5)),
            ms(super::pct(&mut unit, 0.5))
        ),
        None,
    );
}

/// The daemon journal's cursor now: entries after it are this step's.
pub(super) fn journal_cursor() -> String {
    let out = sh("journalctl -u podscoped -n 0 --show-cursor --no-pager");
    out.lines()
        .find_map(|l| l.strip_prefix("-- cursor: "))
        .expect("journalctl --show-cursor printed a cursor")
        .trim()
        .to_owned()
}

/// The daemon's journal entries after `cursor` with `EVENT=event`.
pub(super) fn journal_after(cursor: &str, event: &str) -> Vec<serde_json::Value> {
    sh(&format!(
        "journalctl -u podscoped -o json --no-pager --after-cursor='{cursor}' EVENT={event}"
    ))
    .lines()
    .filter_map(|l| serde_json::from_str(l).ok())
    .collect()
}

/// p50 of a `*_US` field over `entries` ("-" when none has it).
pub(super) fn field_p50(entries: &[serde_json::Value], field: &str) -> String {
    let mut v: Vec<Duration> = entries
        .iter()
        .filter_map(|e| e[field].as_str()?.parse().ok())
        .map(Duration::from_micros)
        .collect();
    if v.is_empty() {
        return "-".into();
    }
    ms(super::pct(&mut v, 0.5))
}

/// Where critest's StartContainer and StopPodSandbox went, as the daemon
/// measured them for the containers and pods of that critest run.
fn critest_breakdown(target: &Target, cursor: &str, t: &mut Table) {
    let started = journal_after(cursor, podscope_sys::logging::event::CONTAINER_STARTED);
    t.add(
        &target.row(&format!(
            "critest StartContainer, daemon-measured p50 ({} containers)",
            started.len()
        )),
        "report",
        steps_p50(&started),
        None,
    );
    let stopped = journal_after(cursor, podscope_sys::logging::event::STOPPED);
    let detached = journal_after(cursor, podscope_sys::logging::event::NETWORK_DETACHED);
    t.add(
        &target.row(&format!(
            "critest StopPodSandbox, daemon-measured p50 ({} pods): whole / scope stop / CNI DEL (in plugins) / unpin + netns unit stop queued",
            stopped.len()
        )),
        "report",
        format!(
            "{} / {} / {} ({}) / {}",
            field_p50(&stopped, "ELAPSED_US"),
            field_p50(&stopped, "SCOPE_US"),
            field_p50(&stopped, "NETWORK_US"),
            field_p50(&detached, "PLUGIN_US"),
            field_p50(&stopped, "NETNS_US"),
        ),
        None,
    );
}
