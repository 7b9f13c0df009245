//! Back after a crash: kill -9 podscoped with pods alive, and time how long
//! a client that retries at once (as the CRI frontend and kubelet do) waits
//! for its List to be answered.

use crate::{create_started, daemon_pid, host, pct, remove_all, sh, Table};
use podscope_api::{errors::classify, Client, ListFilter};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One kill, then List until it is answered: (time to the answer, the
/// errors met on the way).
async fn kill_and_list(m: &Client) -> (Duration, Vec<String>) {
    let pid = daemon_pid();
    sh(&format!("kill -9 {pid}"));
    let t0 = Instant::now();
    let mut errors = Vec::new();
    loop {
        match m.list(&ListFilter::default()).await {
            Ok(_) => return (t0.elapsed(), errors),
            Err(e) => {
                errors.push(classify(&e).1.chars().take(90).collect());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

pub async fn kill_to_answering(m: &Client, t: &mut Table, kills: usize, spacing: Duration) {
    let (ids, _) = create_started(m, "crash", 20, host).await;
    let mut times = Vec::new();
    let mut errors = BTreeMap::<String, usize>::new();
    for _ in 0..kills {
        let (d, errs) = kill_and_list(m).await;
        times.push(d);
        for e in errs {
            *errors.entry(e).or_default() += 1;
        }
        tokio::time::sleep(spacing).await;
    }
    for (e, n) in &errors {
        eprintln!("bench: crash: {n} × {e}");
    }
    let live = m.list(&ListFilter::default()).await.unwrap();
    assert!(
        ids.iter().all(|id| live.iter().any(|d| &d.id == id)),
        "every pod is still there after {kills} kills"
    );
    let max = times.iter().max().copied().unwrap_or_default();
    let p99 = pct(&mut times, 0.99);
    eprintln!(
        "bench: crash: {kills} kills {} ms apart: p50 {:.1} ms, max {:.1} ms",
        spacing.as_millis(),
        pct(&mut times, 0.5).as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    t.add_within(
        &format!("kill -9 to List answered, p99 ({kills} kills, 20 pods)"),
        p99,
        Duration::from_millis(300),
    );
    remove_all(m).await;
}
