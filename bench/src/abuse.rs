//! What a hostile local user can make the daemon spend: the callers run as
//! `nobody` (this binary again, `podscope-bench as-caller …`, under
//! setpriv), the figures are read from the daemon.

use crate::{daemon_pid, rss_pss, sh, Table};
use podscope_api::{BUS_NAME, MANAGER_INTERFACE, MANAGER_PATH};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use zbus::zvariant::Value;

/// The largest Create a system bus lets through: dbus-daemon's
/// max_message_size is 32 MiB, header and the other arguments included.
const BIG_ARG: usize = 32 * 1024 * 1024 - 64 * 1024;

const AS_NOBODY: &str = "setpriv --reuid=nobody --regid=nogroup --clear-groups";

/// One Manager call, as the hostile caller makes it.
async fn call<B>(conn: &zbus::Connection, member: &str, body: &B) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(
        Some(BUS_NAME),
        MANAGER_PATH,
        Some(MANAGER_INTERFACE),
        member,
        body,
    )
    .await
}

/// How a call was answered: "ok", the error's D-Bus name, or what failed
/// on the way.
fn answer(r: zbus::Result<zbus::Message>) -> String {
    match r {
        Ok(_) => "ok".to_owned(),
        Err(zbus::Error::MethodError(n, _, _)) => n.to_string(),
        Err(e) => format!("transport: {e}"),
    }
}

/// Print how many calls got each answer, one "<count> <answer>" a line.
fn print_counts(answers: impl IntoIterator<Item = String>) {
    let mut counts = HashMap::<String, usize>::new();
    for a in answers {
        *counts.entry(a).or_default() += 1;
    }
    for (a, n) in counts {
        println!("{n} {a}");
    }
}

/// The caller's side, run as nobody: `calls` Creates whose options carry
/// one annotation of `BIG_ARG` bytes, `parallel` at a time. Prints how
/// each was answered (error name → count).
pub async fn big_args(calls: usize, parallel: usize) {
    let conn = zbus::Connection::system().await.expect("system bus");
    let value = "x".repeat(BIG_ARG);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let one = || async {
        let mut answers = Vec::new();
        while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < calls {
            let annotations = HashMap::from([("x", value.as_str())]);
            let options = HashMap::from([("annotations", Value::from(annotations))]);
            let body = ("big", "abuse", "u", 0u32, options);
            answers.push(answer(call(&conn, "Create", &body).await));
        }
        answers
    };
    let answers = futures_util::future::join_all((0..parallel).map(|_| one())).await;
    print_counts(answers.into_iter().flatten());
}

/// The caller's side, run as nobody: `calls` Waits on sandbox `id`, all at
/// once, on one connection. Prints how each was answered.
pub async fn waits(id: &str, calls: usize) {
    let conn = zbus::Connection::system().await.expect("system bus");
    let one = || async { answer(call(&conn, "Wait", &(id,)).await) };
    print_counts(futures_util::future::join_all((0..calls).map(|_| one())).await);
}

/// Daemon RSS (KiB) sampled every 5 ms while `cmd` runs: (peak, after).
fn rss_while(pid: u32, cmd: &str) -> (u64, u64, String) {
    let child = std::process::Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("bash");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_pss(pid).0);
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let out = child.wait_with_output().expect("caller");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    assert!(out.status.success(), "{cmd} failed");
    std::thread::sleep(Duration::from_millis(500));
    (
        peak,
        rss_pss(pid).0,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// 100 Creates with 32 MiB of options from nobody, 4 at a time: the
/// daemon's RSS at its peak and after, against idle.
pub fn big_args_rss(t: &mut Table) {
    let pid = daemon_pid();
    let me = std::env::current_exe().unwrap();
    let t0 = Instant::now();
    let idle = rss_pss(pid).0;
    let (peak, after, answers) = rss_while(
        pid,
        &format!("{AS_NOBODY} {} as-caller big-args 100 4", me.display()),
    );
    eprintln!(
        "bench: 100 × 32 MiB Creates as nobody in {:.1} s: {}",
        t0.elapsed().as_secs_f64(),
        answers.trim().replace('\n', ", ")
    );
    assert!(
        answers.contains("100 org.podscope.Sandbox1.Error.InvalidArgument"),
        "each big Create is refused as invalid: {answers}"
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    let above = peak.saturating_sub(idle);
    t.add(
        "RSS peak above idle, 100 × 32 MiB args (nobody)",
        "<= 64 MiB",
        format!("{:.1} MiB", mib(above)),
        Some(above <= 64 * 1024),
    );
    let left = after.saturating_sub(idle);
    t.add(
        "RSS after them, above idle",
        "<= 8 MiB",
        format!("{:.1} MiB", mib(left)),
        Some(left <= 8 * 1024),
    );
}

/// One RuntimeStatus call on `conn`: how long it took.
async fn timed_runtime_status(conn: &zbus::Connection) -> Duration {
    let t0 = Instant::now();
    call(conn, "RuntimeStatus", &())
        .await
        .expect("RuntimeStatus");
    t0.elapsed()
}

/// The caller's side, run as nobody: `calls` RuntimeStatus calls one after
/// another. Prints each call's time in µs.
pub async fn runtime_status_each(calls: usize) {
    let conn = zbus::Connection::system().await.expect("system bus");
    for _ in 0..calls {
        println!("{}", timed_runtime_status(&conn).await.as_micros());
    }
}

/// The caller's side, run as nobody: `calls` RuntimeStatus calls at once,
/// over connections of at most 100 calls each (dbus-daemon lets one
/// connection wait on 128 replies). Prints each call's time in µs.
pub async fn runtime_status_flood(calls: usize) {
    let mut conns = Vec::new();
    for _ in 0..calls.div_ceil(100) {
        conns.push(zbus::Connection::system().await.expect("system bus"));
    }
    let times = (0..calls).map(|i| timed_runtime_status(&conns[i / 100]));
    for d in futures_util::future::join_all(times).await {
        println!("{}", d.as_micros());
    }
}

/// Where the flood's network and its plugin's log live.
const FLOOD_DIR: &str = "/run/podscope-bench/flood";
const FIXTURE_BIN: &str = "/usr/local/lib/podscope-test/cni";

/// 200 RuntimeStatus calls at once from nobody, with a 1.1.0 network whose
/// plugin logs each STATUS: how many plugin runs they caused, and their
/// latency.
pub fn runtime_status_flood_row(t: &mut Table) {
    let log = format!("{FLOOD_DIR}/fixture.log");
    std::fs::create_dir_all(FLOOD_DIR).unwrap();
    let _ = std::fs::remove_file(&log);
    std::fs::write(
        format!("{FLOOD_DIR}/10-flood.conflist"),
        format!(
            r#"{{"cniVersion":"1.1.0","name":"flood","plugins":[{{"type":"podscope-fixture","mode":"ok","ip":"10.96.9.2/24","log":"{log}"}}]}}"#
        ),
    )
    .unwrap();
    let config = "/etc/podscope/podscope.toml";
    let saved = std::fs::read_to_string(config).unwrap_or_default();
    std::fs::write(
        config,
        format!(
            "cni_conf_dir = \"{FLOOD_DIR}\"\ncni_bin_dirs = [\"{FIXTURE_BIN}\", \"/usr/lib/cni\"]\n"
        ),
    )
    .unwrap();
    sh("systemctl restart podscoped");
    // Past the STATUS answer the start may have cached.
    std::thread::sleep(Duration::from_millis(3500));
    let statuses = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("STATUS "))
            .count()
    };
    let before = statuses();
    let me = std::env::current_exe().unwrap();
    let t0 = Instant::now();
    let out = sh(&format!(
        "{AS_NOBODY} {} as-caller runtime-status 200",
        me.display()
    ));
    let took = t0.elapsed();
    let runs = statuses() - before;
    let each = sh(&format!(
        "{AS_NOBODY} {} as-caller runtime-status-each 200",
        me.display()
    ));
    std::fs::write(config, saved).unwrap();
    sh("systemctl restart podscoped");
    let times = |out: &str| -> Vec<Duration> {
        out.lines()
            .map(|l| Duration::from_micros(l.trim().parse().unwrap()))
            .collect()
    };
    let (mut burst, mut each) = (times(&out), times(&each));
    assert_eq!((burst.len(), each.len()), (200, 200));
    // One STATUS answer stands 3 s: the flood may straddle two periods.
    let periods = 1 + took.as_millis() as usize / 3000;
    t.add(
        "RuntimeStatus flood (200 at once, nobody): plugin runs",
        &format!("<= {periods}"),
        format!("{runs}"),
        Some(runs <= periods),
    );
    // All 200 pass through dbus-daemon, one broker, at once: a call's time
    // in the burst is mostly its place in that queue.
    let p50 = crate::pct(&mut burst, 0.5);
    t.add(
        "RuntimeStatus flood: p50 of the 200 at once",
        "report",
        crate::ms(p50),
        None,
    );
    t.add_within(
        "RuntimeStatus from nobody, one at a time: p50",
        crate::pct(&mut each, 0.5),
        Duration::from_millis(1),
    );
}

/// The system bus's socket, for a client that speaks the wire itself.
const SYSTEM_BUS: &str = "/run/dbus/system_bus_socket";

/// A bus connection made by hand (SASL EXTERNAL, then Hello) that, once
/// authenticated, writes `calls` List calls to the daemon and never reads
/// a byte again: every reply, and Hello's, waits in dbus-daemon.
fn silent_connection(calls: usize) -> std::io::Result<std::os::unix::net::UnixStream> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(SYSTEM_BUS)?;
    let uid: String = format!("{}", nix::unistd::getuid())
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    s.write_all(format!("\0AUTH EXTERNAL {uid}\r\n").as_bytes())?;
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut b)?;
        line.push(b[0]);
    }
    if !line.starts_with(b"OK ") {
        return Err(std::io::Error::other(format!(
            "the bus refused: {}",
            String::from_utf8_lossy(&line)
        )));
    }
    s.write_all(b"BEGIN\r\n")?;
    let hello = zbus::Message::method_call("/org/freedesktop/DBus", "Hello")
        .and_then(|m| m.destination("org.freedesktop.DBus"))
        .and_then(|m| m.interface("org.freedesktop.DBus"))
        .and_then(|m| m.build(&()))
        .map_err(std::io::Error::other)?;
    s.write_all(hello.data())?;
    let filter: HashMap<&str, Value<'_>> = HashMap::new();
    for _ in 0..calls {
        let list = zbus::Message::method_call(MANAGER_PATH, "List")
            .and_then(|m| m.destination(BUS_NAME))
            .and_then(|m| m.interface(MANAGER_INTERFACE))
            .and_then(|m| m.build(&(&filter,)))
            .map_err(std::io::Error::other)?;
        s.write_all(list.data())?;
    }
    Ok(s)
}

/// The caller's side: `conns` connections that each make `calls` List
/// calls and never read their replies, held for `hold_ms`. Prints
/// "<n> silent" once all are made (how many the bus took).
pub async fn silent(conns: usize, calls: usize, hold_ms: u64) {
    let mut held = Vec::new();
    for _ in 0..conns {
        match silent_connection(calls) {
            Ok(s) => held.push(s),
            Err(e) => {
                eprintln!("silent connection: {e}");
                break;
            }
        }
    }
    println!("{} silent", held.len());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tokio::time::sleep(Duration::from_millis(hold_ms)).await;
    drop(held);
}

/// The caller's side: `pods` pods (host network, named
/// `<prefix>-<i>`) created and started, all at once on one connection,
/// and the process gone `after_ms` later, with most of them in flight.
pub async fn hang_up(prefix: &str, pods: usize, after_ms: u64) {
    let conn = zbus::Connection::system().await.expect("system bus");
    let one = |i: usize| {
        let conn = conn.clone();
        let name = format!("{prefix}-{i}");
        async move {
            let options = HashMap::from([("network", Value::from("host"))]);
            let body = (name.as_str(), "abuse", "u", 0u32, options);
            if let Ok(reply) = call(&conn, "Create", &body).await {
                if let Ok((id, _)) = reply
                    .body()
                    .deserialize::<(String, zbus::zvariant::OwnedObjectPath)>()
                {
                    let _ = call(&conn, "Start", &(id.as_str(),)).await;
                }
            }
        }
    };
    let all = futures_util::future::join_all((0..pods).map(one));
    let _ = tokio::time::timeout(Duration::from_millis(after_ms), all).await;
    // Gone without a word: the connection closes with the process.
    std::process::exit(0);
}
