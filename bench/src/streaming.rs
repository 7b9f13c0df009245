//! The streaming figures (issue 24): crictl's exec, an exec's throughput
//! and port-forward's, on podscope (crun) and on the anchor, containerd
//! 1.6 + runc, in the same run; then podscope's own: podscope-cri's RSS
//! with 100 idle sessions, and the processes an exec keeps beside its
//! command.

use super::anchor::{self, Target, Tools};
use super::{ms, pct, sh, Table};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// 256 MiB, through an exec's stdout and through a forwarded port.
const BULK: u64 = 256 << 20;

#[derive(Default, Clone, Copy)]
struct Figures {
    exec: Duration,
    exec_mib_s: f64,
    exec_small_mib_s: f64,
    forward_mib_s: f64,
}

pub async fn run(t: &mut Table) {
    let tools = Tools::from_env();
    let containerd = anchor::start_containerd();
    let targets = [containerd, Target::podscope("crun")];
    let mut figs = Vec::new();
    for target in &targets {
        let mut img = anchor::image_client(target).await;
        anchor::pull(&mut img, anchor::IMAGE).await;
        figs.push(measure(target, &tools, t).await);
    }
    anchor::stop_containerd();
    let (c, p) = (figs[0], figs[1]);
    t.add(
        "crictl exec `true` p50 (minus crictl version): podscope vs containerd",
        "<= containerd's",
        format!("{} vs {}", ms(p.exec), ms(c.exec)),
        Some(p.exec <= c.exec),
    );
    t.add(
        "exec stream, `cat` of a 256 MiB file to crictl: podscope vs containerd",
        ">= containerd's, >= 200 MiB/s",
        format!("{:.0} vs {:.0} MiB/s", p.exec_mib_s, c.exec_mib_s),
        Some(p.exec_mib_s >= c.exec_mib_s && p.exec_mib_s >= 200.0),
    );
    t.add(
        "exec stream, 256 MiB in 4 KiB writes to crictl: podscope vs containerd",
        "report",
        format!(
            "{:.0} vs {:.0} MiB/s",
            p.exec_small_mib_s, c.exec_small_mib_s
        ),
        None,
    );
    t.add(
        "port-forward, one stream, 256 MiB: podscope vs containerd",
        ">= containerd's",
        format!("{:.0} vs {:.0} MiB/s", p.forward_mib_s, c.forward_mib_s),
        Some(p.forward_mib_s >= c.forward_mib_s),
    );
    idle_sessions(&targets[1], &tools, t).await;
}

async fn measure(target: &Target, tools: &Tools, t: &mut Table) -> Figures {
    let mut rt = anchor::runtime_client(target).await;
    let config = anchor::pod_config(target, "anchor-stream");
    let pod = anchor::run_pod(&mut rt, target, &config).await;
    let sleeper =
        anchor::run_container(&mut rt, &pod, &config, anchor::container_config("c0")).await;
    // A web server with a 256 MiB file, for port-forward.
    let mut web = anchor::container_config("web");
    web.command = vec![
        "sh".into(),
        "-c".into(),
        format!("mkdir -p /www && head -c {BULK} /dev/zero > /www/bulk && exec httpd -f -p 9000 -h /www"),
    ];
    let web = anchor::run_container(&mut rt, &pod, &config, web).await;

    let (mut exec, mut version) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        version.push(tools.crictl(target, &["version"]).0);
        exec.push(tools.crictl(target, &["exec", &sleeper, "true"]).0);
    }
    let base = pct(&mut version, 0.5);
    let e50 = pct(&mut exec, 0.5);
    let exec_p50 = e50.saturating_sub(base);
    t.add(
        &target.row("crictl exec `true` p50 (minus crictl version)"),
        "report",
        format!("{} ({} - {})", ms(exec_p50), ms(e50), ms(base)),
        None,
    );

    let crictl = tools.crictl_path().display().to_string();
    let ep = target.endpoint();
    // A writer of 4 KiB at a time (busybox head): every write is a wakeup
    // and, read as it comes, a frame of its own.
    let exec_small_mib_s = exec_stream(
        target,
        t,
        &format!("{crictl} --runtime-endpoint {ep} exec {sleeper} head -c {BULK} /dev/zero"),
        "exec stream, `head -c` 256 MiB of /dev/zero (4 KiB writes) to crictl",
    );

    let local = free_port();
    let mut fwd = Command::new(&crictl)
        .args([
            "--runtime-endpoint",
            &ep,
            "port-forward",
            &pod,
            &format!("{local}:9000"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("crictl port-forward");
    let url = format!("http://127.0.0.1:{local}/bulk");
    // The server listens once its file is whole; crictl once it says so.
    // A first whole download proves both.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let size = sh(&format!(
            "curl -s -o /dev/null -w '%{{size_download}}' {url} || true"
        ));
        if size.trim() == BULK.to_string() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{url}: the bulk file never came whole"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The file is whole: the figure, `cat` of 256 MiB (busybox
    // cat sendfile(2)s it into the pipe in large pieces).
    let exec_mib_s = exec_stream(
        target,
        t,
        &format!("{crictl} --runtime-endpoint {ep} exec {web} cat /www/bulk"),
        "exec stream, `cat` of a 256 MiB file to crictl",
    );
    let t0 = Instant::now();
    let got = sh(&format!(
        "curl -s -o /dev/null -w '%{{size_download}}' {url}"
    ));
    let took = t0.elapsed();
    assert_eq!(
        got.trim(),
        BULK.to_string(),
        "port-forward's stream was cut"
    );
    let forward_mib_s = (BULK >> 20) as f64 / took.as_secs_f64();
    t.add(
        &target.row("port-forward, one stream, 256 MiB"),
        "report",
        format!("{forward_mib_s:.0} MiB/s ({})", ms(took)),
        None,
    );
    let _ = fwd.kill();
    let _ = fwd.wait();
    anchor::remove_pods(&mut rt, &[pod]).await;
    Figures {
        exec: exec_p50,
        exec_mib_s,
        exec_small_mib_s,
        forward_mib_s,
    }
}

/// Run `cmd` (a crictl exec writing BULK bytes), counting what arrives;
/// its MiB/s, also added to the table as `what`.
fn exec_stream(target: &Target, t: &mut Table, cmd: &str, what: &str) -> f64 {
    let t0 = Instant::now();
    let got = sh(&format!("{cmd} | wc -c"));
    let took = t0.elapsed();
    assert_eq!(got.trim(), BULK.to_string(), "{what}: the stream was cut");
    let mib_s = (BULK >> 20) as f64 / took.as_secs_f64();
    t.add(
        &target.row(what),
        "report",
        format!("{mib_s:.0} MiB/s ({})", ms(took)),
        None,
    );
    mib_s
}

/// podscope-cri's RSS with 100 sessions open and idle (each a crictl
/// `exec -i` whose stdin stays open), above its idle RSS; and the
/// processes one exec keeps besides its command.
async fn idle_sessions(target: &Target, tools: &Tools, t: &mut Table) {
    let mut rt = anchor::runtime_client(target).await;
    let config = anchor::pod_config(target, "stream-idle");
    let pod = anchor::run_pod(&mut rt, target, &config).await;
    let id = anchor::run_container(&mut rt, &pod, &config, anchor::container_config("c0")).await;
    let frontend = || -> u64 {
        let pid = sh("systemctl show -p MainPID --value podscope-cri.service");
        super::rss_pss(pid.trim().parse().expect("podscope-cri's pid")).0
    };
    let crictl = tools.crictl_path().display().to_string();
    let ep = target.endpoint();
    // Warm: one session opened and closed.
    sh(&format!("{crictl} --runtime-endpoint {ep} exec {id} true"));
    let rss0 = frontend();
    let units = || {
        sh("systemctl list-units --plain --no-legend 'podscope-exec-*' | wc -l")
            .trim()
            .parse::<usize>()
            .unwrap_or(0)
    };
    let mut sessions = Vec::new();
    for _ in 0..100 {
        sessions.push(
            Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "sleep 600 | exec {crictl} --runtime-endpoint {ep} exec -i {id} cat"
                ))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("crictl exec -i"),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while units() < 100 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let open = units();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss1 = frontend();
    let grew = rss1.saturating_sub(rss0);
    t.add(
        &format!("podscope-cri RSS with {open} idle streaming sessions, above idle"),
        "<= 8 MiB",
        format!("{:.1} MiB ({} -> {} KiB)", grew as f64 / 1024.0, rss0, rss1),
        Some(open == 100 && grew <= 8 * 1024),
    );
    // One exec's unit: its processes besides the command (cat).
    let unit =
        sh("systemctl list-units --plain --no-legend 'podscope-exec-*' | head -1 | cut -d' ' -f1");
    let procs = sh(&format!(
        "systemctl show -p ControlGroup --value {} | xargs -I{{}} sh -c 'cat /sys/fs/cgroup/systemd{{}}/cgroup.procs 2>/dev/null || cat /sys/fs/cgroup{{}}/cgroup.procs' | xargs -r ps -o comm= -p",
        unit.trim()
    ));
    let others: Vec<&str> = procs
        .lines()
        .map(str::trim)
        .filter(|c| *c != "cat")
        .collect();
    t.add(
        "processes per exec besides the command's own",
        "0",
        format!("{} ({})", others.len(), others.join(", ")),
        Some(others.is_empty()),
    );
    for mut s in sessions {
        let _ = s.kill();
        let _ = s.wait();
    }
    sh("pkill -f 'sleep 60[0]' || true");
    anchor::remove_pods(&mut rt, &[pod]).await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
