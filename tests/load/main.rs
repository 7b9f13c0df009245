//! `make load`: a full node's load on podscope, in the harness, through
//! the CRI as kubelet drives it (`node_load`, shared with `make bench`).
//!
//! 1. 110 pods with 4 containers each (440 container units), created by 8
//!    clients at once, then drained (every pod stopped and removed by 8 at
//!    once): nothing may fail.
//! 2. The same with `systemctl restart podscoped` in the middle of each
//!    burst: calls in flight at the restart may fail with UNAVAILABLE and
//!    are retried; none fails otherwise, none is done twice.
//! 3. A burst past a bus bound of 4 (`bus_calls_max` in podscope.toml):
//!    calls wait their turn, none fails.
//! 4. A descriptor limit of 400 (`LimitNOFILE=` in a drop-in): what does
//!    not fit is refused, RESOURCE_EXHAUSTED, before any step; nothing is
//!    Internal, and the drain leaves nothing.
//!
//! After each drain nothing of the pods may be left (units, cgroups,
//! namespaces, mounts, IP leases, records, runtime state), podscoped's
//! descriptors are back to exactly where they were and its own memory (its
//! anonymous pages) within `LEFT_PER_POD_KIB` a pod of where it was.
//! Each step's time is printed.

use podscope_api::image::PullOptions;
use podscope_api::{proxy::system_connection, Client, RuntimeInfo};
use podscope_test_support::harness::sh;
use podscope_test_support::leftovers;
use podscope_test_support::node_load::{self, Burst, Endpoint, Retry, Shape, FULL_NODE};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NETWORK: &str = "podscope-test";
const CONFIG: &str = "/etc/podscope/podscope.toml";
const DROP_IN_DIR: &str = "/run/systemd/system/podscoped.service.d";
const DROP_IN: &str = "/run/systemd/system/podscoped.service.d/50-load-nofile.conf";
/// The descriptor limit of the last round: room for some 40 running
/// containers past the daemon's own and its headroom.
const LOW_NOFILE: u64 = 400;

fn say(t0: Instant, what: impl AsRef<str>) {
    println!(
        "load: [{:6.1} s] {}",
        t0.elapsed().as_secs_f64(),
        what.as_ref()
    );
}

fn endpoint() -> Endpoint {
    Endpoint {
        socket: PathBuf::from("/run/podscope/cri.sock"),
        cgroup_parent: String::new(),
        runtime_handler: String::new(),
    }
}

async fn client() -> Client {
    let conn = system_connection(Duration::from_secs(120))
        .await
        .expect("system bus");
    let m = Client::new(&conn).await.expect("client");
    let deadline = Instant::now() + Duration::from_secs(30);
    while m.version().await.is_err() {
        assert!(Instant::now() < deadline, "podscoped does not answer");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    m
}

async fn info(m: &Client) -> RuntimeInfo {
    m.runtime_status().await.expect("RuntimeStatus").1
}

fn daemon_pid() -> u32 {
    sh("systemctl show -P MainPID podscoped")
        .trim()
        .parse()
        .unwrap()
}

fn fds_of(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// What a burst's pods may leave in the daemon's memory, a pod (with its
/// four containers), after the drain. A pod's annotations alone are
/// 200 KiB here and its records a few KiB, so a pod or container whose
/// state is kept is seen many times over; what the allocator's heaps keep
/// of a second full node's high water after the first's (fragments a trim
/// cannot return: measured -0.3 to +0.9 MiB) is not.
const LEFT_PER_POD_KIB: u64 = 24;

/// The daemon's anonymous memory (KiB): its heaps and stacks, which a
/// leak grows. Not VmRSS: that also counts the pages of podscoped's own
/// binary, which grow as code first runs (by a MiB between a warm-up of
/// 16 pods and the first full node: ListPodSandbox past its annotation
/// budget, say) and are shared with the page cache (in the harness, whose
/// root is on tmpfs, they show as RssShmem).
fn anon_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn restart_daemon() {
    sh("systemctl reset-failed podscoped 2>/dev/null; systemctl restart podscoped");
}

fn count_units(pattern: &str) -> usize {
    sh(&format!(
        "systemctl list-units --plain --no-legend --state=active '{pattern}' | wc -l"
    ))
    .trim()
    .parse()
    .unwrap_or(0)
}

/// While a burst runs: the daemon's descriptors sampled (the most seen),
/// and `systemctl restart podscoped` once `when` says so.
struct Watch {
    peak_fds: Arc<AtomicU64>,
    restarted: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    fn start(restart_when: Option<Box<dyn Fn() -> bool + Send>>) -> Watch {
        let peak_fds = Arc::new(AtomicU64::new(0));
        let restarted = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, r, s) = (peak_fds.clone(), restarted.clone(), stop.clone());
        let task = tokio::task::spawn_blocking(move || {
            let pid = daemon_pid();
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(fds_of(pid), Ordering::Relaxed);
                if let Some(when) = &restart_when {
                    if !r.load(Ordering::Relaxed) && when() {
                        restart_daemon();
                        r.store(true, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(150));
            }
        });
        Watch {
            peak_fds,
            restarted,
            stop,
            task,
        }
    }

    async fn end(self) -> (u64, bool) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        (
            self.peak_fds.load(Ordering::Relaxed),
            self.restarted.load(Ordering::Relaxed),
        )
    }
}

/// No failure but those `allowed` (codes), each retried to success.
fn assert_clean(what: &str, b: &Burst, allowed: &[tonic::Code]) {
    let failed: Vec<String> = b
        .failures()
        .iter()
        .map(|c| format!("{} {:?}", c.method, c.outcome))
        .collect();
    assert!(failed.is_empty(), "{what}: calls failed: {failed:#?}");
    for c in &b.calls {
        for (code, msg) in &c.retried {
            assert!(
                allowed.contains(code),
                "{what}: {} failed with {code:?} before its retry: {msg}",
                c.method
            );
        }
    }
}

/// Every pod of the burst once, each with its containers c0..c3 once:
/// nothing done twice, nothing missing (the CRI's own listings).
async fn assert_each_once(what: &str, b: &Burst, shape: Shape) {
    let mut rt = node_load::client(&endpoint()).await;
    let pods = rt
        .list_pod_sandbox(cri_api::v1::ListPodSandboxRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items;
    let names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.as_ref().map(|m| m.name.clone()))
        .collect();
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(names.len(), shape.pods, "{what}: pods listed: {names:?}");
    assert_eq!(unique.len(), shape.pods, "{what}: a pod twice: {names:?}");
    let ctrs = rt
        .list_containers(cri_api::v1::ListContainersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .containers;
    let mut per_pod: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &ctrs {
        per_pod
            .entry(c.pod_sandbox_id.clone())
            .or_default()
            .push(c.metadata.as_ref().unwrap().name.clone());
        assert_eq!(
            c.state,
            cri_api::v1::ContainerState::ContainerRunning as i32,
            "{what}: container {} not running",
            c.id
        );
    }
    let want: Vec<String> = (0..shape.per_pod).map(|j| format!("c{j}")).collect();
    for p in &b.pods {
        let mut got = per_pod.remove(&p.id).unwrap_or_default();
        got.sort();
        assert_eq!(got, want, "{what}: pod {} ({})", p.name, p.id);
        assert_eq!(p.containers.len(), shape.per_pod, "{what}: {}", p.name);
    }
    assert!(
        per_pod.is_empty(),
        "{what}: containers of no pod of the burst: {per_pod:?}"
    );
    assert_eq!(
        count_units("podscope-ctr-*.service"),
        shape.pods * shape.per_pod
    );
}

/// ListPodSandbox of a full node whose pods carry large annotations: one
/// answer under gRPC's 16 MiB, as many pods with all their annotations as
/// the list's budget holds, each other pod with the one annotation that
/// says what was left out, and PodSandboxStatus with them all.
async fn assert_annotations_within_budget(t0: &Instant, shape: Shape) {
    use podscope_api::list_budget::{ANNOTATIONS_BUDGET, ANNOTATIONS_LEFT_OUT};
    let mut rt = node_load::client(&endpoint()).await;
    let pods = rt
        .list_pod_sandbox(cri_api::v1::ListPodSandboxRequest::default())
        .await
        .expect("ListPodSandbox of a full node with large annotations")
        .into_inner()
        .items;
    let (full, left_out): (Vec<_>, Vec<_>) = pods
        .iter()
        .partition(|p| p.annotations.contains_key(node_load::BIG_ANNOTATION));
    let fits = ANNOTATIONS_BUDGET / shape.annotation_bytes;
    say(
        *t0,
        format!(
            "ListPodSandbox: {} pods with their {} KiB of annotations, {} with them left out",
            full.len(),
            shape.annotation_bytes >> 10,
            left_out.len()
        ),
    );
    assert_eq!((full.len(), left_out.len()), (fits, shape.pods - fits));
    for p in &full {
        assert_eq!(
            p.annotations[node_load::BIG_ANNOTATION].len() + node_load::BIG_ANNOTATION.len(),
            shape.annotation_bytes
        );
    }
    for p in &left_out {
        let why = p.annotations.get(ANNOTATIONS_LEFT_OUT).unwrap_or_else(|| {
            panic!(
                "pod {} has neither its annotations nor {ANNOTATIONS_LEFT_OUT}",
                p.id
            )
        });
        assert!(
            why.starts_with(&format!("{} bytes", shape.annotation_bytes)),
            "{why}"
        );
        assert_eq!(p.annotations.len(), 1);
    }
    let status = rt
        .pod_sandbox_status(cri_api::v1::PodSandboxStatusRequest {
            pod_sandbox_id: left_out[0].id.clone(),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner()
        .status
        .unwrap();
    assert_eq!(
        status.annotations[node_load::BIG_ANNOTATION].len() + node_load::BIG_ANNOTATION.len(),
        shape.annotation_bytes,
        "PodSandboxStatus has what List left out"
    );
}

/// Nothing of any pod left, the daemon's descriptors exactly where they
/// were and its anonymous memory within `LEFT_PER_POD_KIB` for each of the
/// burst's `pods` of where it was.
async fn assert_nothing_left(
    what: &str,
    m: &Client,
    cgroups_before: &BTreeSet<String>,
    base_fds: u64,
    base_anon: Option<(u64, usize)>,
) {
    // The last units' removals and the background collections settle.
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let mut found = leftovers::pods(m, NETWORK).await;
        found.extend(leftovers::containers(m).await);
        found.extend(leftovers::cgroups(m, cgroups_before).await);
        let i = info(m).await;
        if i.sandboxes != 0 || i.containers != 0 {
            found.push(format!(
                "{} sandboxes, {} containers listed",
                i.sandboxes, i.containers
            ));
        }
        for (pattern, what) in [
            ("podscope-*.scope", "scopes"),
            ("podscope-netns@*.service", "netns units"),
            ("podscope-ctr-*.service", "container units"),
        ] {
            let n = count_units(pattern);
            if n > 0 {
                found.push(format!("{n} {what} active"));
            }
        }
        let records = leftovers::dir_names("/var/lib/podscope/sandboxes", "").len()
            + leftovers::dir_names("/var/lib/podscope/containers", "").len()
            + leftovers::dir_names("/var/lib/podscope/networks", "").len();
        if records > 0 {
            found.push(format!("{records} records or attachments on disk"));
        }
        if found.is_empty() || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(found.is_empty(), "{what}: left behind: {found:#?}");
    let pid = daemon_pid();
    let fds = fds_of(pid);
    assert_eq!(
        fds, base_fds,
        "{what}: podscoped's descriptors after the drain"
    );
    let Some((base_anon, pods)) = base_anon else {
        println!("load: {what}: nothing left; descriptors {fds} (as before)");
        return;
    };
    let most = base_anon + LEFT_PER_POD_KIB * pods as u64;
    // Memory comes back once the daemon is idle: its idle-time trim (every
    // 5 s) and the blocking pool's threads ending (10 s unused).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut anon = anon_kib(pid);
    while anon > most && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        anon = anon_kib(pid);
    }
    assert!(
        anon <= most,
        "{what}: podscoped's anonymous memory {anon} KiB, more than {most} KiB \
         ({base_anon} KiB before, {LEFT_PER_POD_KIB} KiB for each of {pods} pods)"
    );
    println!(
        "load: {what}: nothing left; descriptors {fds} (as before), anonymous memory {anon} KiB \
         (before {base_anon} KiB, at most {most})"
    );
}

/// A full node's burst with the pods' annotations of the bursts to come,
/// created and drained: the daemon's descriptors and anonymous memory
/// (KiB) once it is idle after it. The whole node, not a part: after a
/// warm-up of 16 pods the first full node's heaps kept 0.2 to 2.4 MiB
/// more (a high water seven times the warm-up's, its long-lived blocks
/// landing across it), against -0.3 to +0.9 MiB after a full warm-up.
/// The annotations matter: blocks of their size (below the daemon's mmap
/// threshold) leave the allocator's heaps shaped as a burst of them does. The memory is
/// taken as the drain's is, once the daemon has trimmed its heaps (every
/// 5 s when idle): taken a second after the burst, before any trim, the
/// baseline varied by 1.5 MiB from run to run.
async fn warm_up(ep: &Endpoint, annotation_bytes: usize) -> (u64, u64) {
    let shape = Shape {
        annotation_bytes,
        ..FULL_NODE
    };
    let warm = node_load::create(ep, "warm", shape, Retry::Never).await;
    assert_clean("warm-up", &warm, &[]);
    let drain = node_load::drain(ep, &warm.pods, shape.clients, Retry::Never).await;
    assert_clean("warm-up drain", &drain, &[]);
    let pid = daemon_pid();
    let mut anon = anon_kib(pid);
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        anon = anon.min(anon_kib(pid));
    }
    (fds_of(pid), anon)
}

#[tokio::main]
async fn main() {
    let t0 = Instant::now();
    let ep = endpoint();
    let m = client().await;
    let cgroups = leftovers::cgroup_dirs();
    m.pull_image(node_load::IMAGE, &PullOptions::default())
        .await
        .expect("pull the containers' image");
    // 1. A full node, created and drained; each pod with 200 KiB of
    // annotations, so that ListPodSandbox must keep to its budget.
    let shape = Shape {
        annotation_bytes: 200 * 1024,
        ..FULL_NODE
    };
    // Warm-up, a full node: what the daemon opens once
    // and keeps (its connections to machined and the registry) and its
    // one-time high water marks (its threads' stacks, its tables' sizes)
    // are in the baseline, so what is held against it is what a burst
    // leaves.
    let (base_fds, base_anon) = warm_up(&ep, shape.annotation_bytes).await;
    say(
        t0,
        format!(
            "ready: podscoped has {base_fds} descriptors open, {base_anon} KiB of anonymous memory"
        ),
    );
    let containers = (shape.pods * shape.per_pod) as u64;
    let watch = Watch::start(None);
    let b = node_load::create(&ep, "full", shape, Retry::Never).await;
    let (peak, _) = watch.end().await;
    say(
        t0,
        format!(
            "create {}x{} by {}: {}",
            shape.pods,
            shape.per_pod,
            shape.clients,
            node_load::summary(&b)
        ),
    );
    assert_clean("create", &b, &[]);
    assert_each_once("create", &b, shape).await;
    assert_annotations_within_budget(&t0, shape).await;
    let i = info(&m).await;
    assert_eq!(i.containers_running as u64, containers);
    let held = i.descriptors_containers;
    let peak = peak.max(i.descriptors_peak);
    say(
        t0,
        format!(
            "descriptors: {} open for {containers} running containers, {held} held by them ({:.2} each); peak {peak}, {:.2} per running container over the idle daemon's {base_fds}",
            i.descriptors_open,
            held as f64 / containers as f64,
            (peak - base_fds) as f64 / containers as f64
        ),
    );
    assert_eq!(
        i.descriptors_open,
        base_fds + held,
        "the daemon holds what it says it holds for its containers, and nothing else"
    );
    say(
        t0,
        format!(
            "bus calls: most at once {} of {} ({} waited for a slot, {} refusals retried, {} failed)",
            i.bus_calls_peak, i.bus_calls_max, i.bus_calls_waited, i.bus_refusals_retried, i.bus_calls_failed
        ),
    );
    assert!(i.bus_calls_peak as usize <= i.bus_calls_max as usize);
    let d = node_load::drain(&ep, &b.pods, shape.clients, Retry::Never).await;
    say(t0, format!("drain: {}", node_load::summary(&d)));
    assert_clean("drain", &d, &[]);
    let base = Some((base_anon, shape.pods));
    assert_nothing_left("drain", &m, &cgroups, base_fds, base).await;

    // 2. The same, the daemon restarted in the middle of each burst. The
    // daemon at the end is another process: its figures are held to those
    // of a daemon restarted and warmed up as at the start (no connection
    // to the registry pooled, as it pulls nothing).
    restart_daemon();
    let (base_fds, base_anon) = warm_up(&ep, shape.annotation_bytes).await;
    say(
        t0,
        format!(
            "podscoped restarted and warmed up: {base_fds} descriptors open, \
             {base_anon} KiB of anonymous memory"
        ),
    );
    let half = shape.pods * shape.per_pod / 2;
    let watch = Watch::start(Some(Box::new(move || {
        count_units("podscope-ctr-*.service") >= half
    })));
    let b = node_load::create(&ep, "restart", shape, Retry::Unavailable).await;
    let (_, restarted) = watch.end().await;
    assert!(restarted, "the create burst ended before the restart");
    say(
        t0,
        format!(
            "create, podscoped restarted at {half} containers: {}",
            node_load::summary(&b)
        ),
    );
    assert_clean("create with a restart", &b, &[tonic::Code::Unavailable]);
    assert_each_once("create with a restart", &b, shape).await;
    let half_pods = shape.pods / 2;
    let watch = Watch::start(Some(Box::new(move || {
        count_units("podscope-*.scope") <= half_pods
    })));
    let d = node_load::drain(&ep, &b.pods, shape.clients, Retry::Unavailable).await;
    let (_, restarted) = watch.end().await;
    assert!(restarted, "the drain ended before the restart");
    say(
        t0,
        format!(
            "drain, podscoped restarted at {half_pods} pods left: {}",
            node_load::summary(&d)
        ),
    );
    assert_clean("drain with a restart", &d, &[tonic::Code::Unavailable]);
    assert_nothing_left(
        "drain with a restart",
        &m,
        &cgroups,
        base_fds,
        Some((base_anon, shape.pods)),
    )
    .await;

    // 3. Past a bound of 4 calls on the bus: waiting, not failing.
    let config = std::fs::read_to_string(CONFIG).expect("podscope.toml");
    std::fs::write(CONFIG, format!("{config}\nbus_calls_max = 4\n")).unwrap();
    restart_daemon();
    let small = Shape {
        pods: 24,
        per_pod: 4,
        clients: 8,
        annotation_bytes: 0,
    };
    let b = node_load::create(&ep, "bound", small, Retry::Never).await;
    say(
        t0,
        format!(
            "create {}x{} with bus_calls_max = 4: {}",
            small.pods,
            small.per_pod,
            node_load::summary(&b)
        ),
    );
    assert_clean("create past the bound", &b, &[]);
    let d = node_load::drain(&ep, &b.pods, small.clients, Retry::Never).await;
    say(
        t0,
        format!("drain with bus_calls_max = 4: {}", node_load::summary(&d)),
    );
    assert_clean("drain past the bound", &d, &[]);
    let i = info(&m).await;
    say(
        t0,
        format!(
            "bus calls: most at once {} of {}, {} waited for a slot, {} failed",
            i.bus_calls_peak, i.bus_calls_max, i.bus_calls_waited, i.bus_calls_failed
        ),
    );
    assert_eq!((i.bus_calls_max, i.bus_calls_peak), (4, 4));
    assert!(
        i.bus_calls_waited > 0,
        "no call had to wait: the bound was never passed"
    );
    assert_eq!(i.bus_calls_failed, 0);
    std::fs::write(CONFIG, &config).unwrap();

    // 4. Too few descriptors: refused by name, before any step.
    std::fs::create_dir_all(DROP_IN_DIR).unwrap();
    std::fs::write(DROP_IN, format!("[Service]\nLimitNOFILE={LOW_NOFILE}\n")).unwrap();
    sh("systemctl daemon-reload");
    restart_daemon();
    let i = info(&m).await;
    assert_eq!(i.descriptors_limit, LOW_NOFILE, "the drop-in's limit");
    let low_fds = fds_of(daemon_pid());
    let many = Shape {
        pods: 30,
        per_pod: 4,
        clients: 8,
        annotation_bytes: 0,
    };
    let b = node_load::create(&ep, "nofile", many, Retry::Never).await;
    say(
        t0,
        format!(
            "create {}x{} under LimitNOFILE={LOW_NOFILE}: {}",
            many.pods,
            many.per_pod,
            node_load::summary(&b)
        ),
    );
    let refused = b.failures();
    assert!(
        !refused.is_empty(),
        "nothing was refused under LimitNOFILE={LOW_NOFILE}"
    );
    for c in &refused {
        let (code, msg) = c.outcome.as_ref().unwrap_err();
        assert_eq!(*code, tonic::Code::ResourceExhausted, "{}: {msg}", c.method);
        assert!(
            msg.contains("refused before any step"),
            "{}: {msg}",
            c.method
        );
    }
    assert!(b.containers_running() > 0, "nothing ran at all");
    let i = info(&m).await;
    assert!(
        i.descriptors_peak < LOW_NOFILE,
        "the daemon reached its limit: {}",
        i.descriptors_peak
    );
    say(
        t0,
        format!(
            "{} calls refused (RESOURCE_EXHAUSTED), {} containers running, most descriptors open {} of {LOW_NOFILE}",
            refused.len(),
            b.containers_running(),
            i.descriptors_peak
        ),
    );
    let d = node_load::drain(&ep, &b.pods, many.clients, Retry::Never).await;
    say(
        t0,
        format!(
            "drain under LimitNOFILE={LOW_NOFILE}: {}",
            node_load::summary(&d)
        ),
    );
    assert_clean("drain under the low limit", &d, &[]);
    // Its memory is not held to an unwarmed daemon's: the round is about what
    // is refused and what is left.
    assert_nothing_left("drain under the low limit", &m, &cgroups, low_fds, None).await;
    std::fs::remove_file(DROP_IN).unwrap();
    sh("systemctl daemon-reload");
    restart_daemon();
    say(t0, "done");
    // A last look that the command line tools say the same.
    let _ = Command::new("podscopectl").arg("info").status();
}
