//! What a hostile local user can make the daemon spend: the callers run as
//! `nobody` (this binary again, `podscope-bench as-caller …`, under
//! setpriv), the figures are read from the daemon.

use crate::{daemon_pid, rss_pss, sh, Table};
use podscope::api::{BUS_NAME, MANAGER_INTERFACE, MANAGER_PATH};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use zbus::zvariant::Value;

/// The largest Create a system bus lets through: dbus-daemon's
/// max_message_size is 32 MiB, header and the other arguments included.
const BIG_ARG: usize = 32 * 1024 * 1024 - 64 * 1024;

const AS_NOBODY: &str = "setpriv --reuid=nobody --regid=nogroup --clear-groups";

/// The caller's side, run as nobody: `calls` Creates whose options carry
/// one annotation of `BIG_ARG` bytes, `parallel` at a time. Prints how
/// each was answered (error name → count).
pub async fn big_args(calls: usize, parallel: usize) {
    let conn = zbus::Connection::system().await.expect("system bus");
    let value = "x".repeat(BIG_ARG);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let answers = std::sync::Mutex::new(HashMap::<String, usize>::new());
    let one = || async {
        while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < calls {
            let annotations = HashMap::from([("x", value.as_str())]);
            let options = HashMap::from([("annotations", Value::from(annotations))]);
            let r = conn
                .call_method(
                    Some(BUS_NAME),
                    MANAGER_PATH,
                    Some(MANAGER_INTERFACE),
                    "Create",
                    &("big", "abuse", "u", 0u32, options),
                )
                .await;
            let name = match r {
                Ok(_) => "ok".to_owned(),
                Err(zbus::Error::MethodError(n, _, _)) => n.to_string(),
                Err(e) => format!("transport: {e}"),
            };
            *answers.lock().unwrap().entry(name).or_default() += 1;
        }
    };
    futures_util::future::join_all((0..parallel).map(|_| one())).await;
    for (name, n) in answers.into_inner().unwrap() {
        println!("{n} {name}");
    }
}

/// The caller's side, run as nobody: `calls` Waits on sandbox `id`, all at
/// once, on one connection. Prints how each was answered.
pub async fn waits(id: &str, calls: usize) {
    let conn = zbus::Connection::system().await.expect("system bus");
    let one = || async {
        let r = conn
            .call_method(
                Some(BUS_NAME),
                MANAGER_PATH,
                Some(MANAGER_INTERFACE),
                "Wait",
                &(id,),
            )
            .await;
        match r {
            Ok(_) => "ok".to_owned(),
            Err(zbus::Error::MethodError(n, _, _)) => n.to_string(),
            Err(e) => format!("transport: {e}"),
        }
    };
    let mut answers = HashMap::<String, usize>::new();
    for a in futures_util::future::join_all((0..calls).map(|_| one())).await {
        *answers.entry(a).or_default() += 1;
    }
    for (name, n) in answers {
        println!("{n} {name}");
    }
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
    let _ = sh;
}
