//! The metrics endpoint's cost (issue 44) with a full node running
//! (`node_load`'s 110 pods x 4 containers, through the CRI): a scrape's
//! latency p50/p99, podscoped's CPU per scrape (from /proc/<pid>/stat
//! over the scrapes), its calls to systemd meanwhile (its own counter,
//! read from the first and the last scrape: 0), and its RSS with the
//! endpoint on against off (the daemon started both ways on the same
//! node, the second time after the scrapes).

use super::anchor::{self, Target};
use super::{daemon_pid, pct, rss_pss, Table};
use podscope_metrics::catalog;
use podscope_test_support::harness::sh;
use podscope_test_support::node_load::{self, Endpoint, Retry, FULL_NODE};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const CONFIG: &str = "/etc/podscope/podscope.toml";
const ADDRESS: &str = "127.0.0.1:9101";
const SCRAPES: usize = 200;

/// podscoped (and podscope-cri) started again on `base` (the config the
/// bench found), with the endpoint or without.
fn restart_with_metrics(base: &str, on: bool) {
    let extra = if on {
        format!("\nmetrics_address = \"{ADDRESS}\"\n")
    } else {
        String::new()
    };
    std::fs::write(CONFIG, format!("{base}{extra}")).unwrap();
    sh("systemctl reset-failed podscoped 2>/dev/null; systemctl restart podscoped; systemctl restart podscope-cri.service");
}

/// One scrape: its time and its body.
fn scrape() -> (Duration, String) {
    let t0 = Instant::now();
    let mut s = std::net::TcpStream::connect(ADDRESS).expect("connect to the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let took = t0.elapsed();
    assert!(
        out.starts_with("HTTP/1.1 200 OK"),
        "{}",
        &out[..out.len().min(200)]
    );
    (took, out)
}

/// The sum of a counter family's series in a scrape's body.
fn family_sum(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The idle daemon's RSS in KiB: after the start's work is over (it
/// hands freed memory back once idle, `trim_when_idle`, every 5 s).
async fn idle_rss_kib() -> u64 {
    tokio::time::sleep(Duration::from_secs(12)).await;
    rss_pss(daemon_pid()).0
}

pub async fn run(t: &mut Table) {
    let target = Target::podscope("crun");
    let ep = Endpoint {
        socket: target.socket.clone(),
        cgroup_parent: target.cgroup_parent.clone(),
        runtime_handler: target.runtime_handler.clone(),
    };
    let mut img = anchor::image_client(&target).await;
    anchor::pull(&mut img, node_load::IMAGE).await;
    let shape = FULL_NODE;
    let create = node_load::create(&ep, "bench-metrics", shape, Retry::Never).await;
    assert!(
        create.failures().is_empty(),
        "the full node: {:?}",
        create.codes()
    );

    let base = std::fs::read_to_string(CONFIG).unwrap_or_default();
    restart_with_metrics(&base, false);
    let off = idle_rss_kib().await;
    restart_with_metrics(&base, true);
    // Scraped once its start's work (recovery's reconciliations, the
    // handlers' probes) is over: a node's steady state.
    let started = idle_rss_kib().await;
    let pid = daemon_pid();
    let (_, first) = scrape();
    let cpu0 = cpu_ticks(pid);
    let mut times = Vec::with_capacity(SCRAPES);
    let mut last = String::new();
    for _ in 0..SCRAPES {
        let (took, body) = scrape();
        times.push(took);
        last = body;
    }
    let cpu = cpu_ticks(pid) - cpu0;
    let on = idle_rss_kib().await;
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let systemd = family_sum(&last, catalog::SYSTEMD_CALLS.name)
        - family_sum(&first, catalog::SYSTEMD_CALLS.name);
    let up = family_sum(&last, catalog::CRI_UP.name);
    let what = format!(
        "{} pods x {} containers running, {SCRAPES} scrapes, {} bytes each",
        shape.pods,
        shape.per_pod,
        last.len()
    );
    t.add_within(
        &format!("metrics: scrape p50 ({what})"),
        pct(&mut times, 0.5),
        Duration::from_millis(10),
    );
    t.add_within(
        "metrics: scrape p99",
        pct(&mut times, 0.99),
        Duration::from_millis(10),
    );
    t.add(
        "metrics: podscoped's CPU per scrape",
        "report",
        format!("{:.2} ms", cpu as f64 / hz / SCRAPES as f64 * 1e3),
        None,
    );
    t.add(
        &format!("metrics: podscoped's calls to systemd during the scrapes (podscope_cri_up {up})"),
        "0",
        format!("{systemd}"),
        Some(systemd == 0.0 && up == 1.0),
    );
    let more = on as f64 - off as f64;
    t.add(
        "metrics: podscoped's RSS, endpoint on (after the scrapes) against off",
        "<= +2 MiB",
        format!(
            "{:+.2} MiB ({on} KiB against {off} KiB; {started} KiB before the scrapes)",
            more / 1024.0
        ),
        Some(more <= 2048.0),
    );

    std::fs::write(CONFIG, &base).unwrap();
    restart_with_metrics(&base, false);
    let drain = node_load::drain(&ep, &create.pods, shape.clients, Retry::Never).await;
    assert!(drain.failures().is_empty(), "drain: {:?}", drain.codes());
}
