//! Kill at every step: podscoped built with the `failpoints` feature is
//! killed (SIGKILL, by itself) at each step boundary of Create, Start,
//! Stop, Remove and the network reconciliation (`podscope_sys::failpoint`),
//! started again, and the node is checked: every unit, namespace, network
//! attachment, IP lease, pod file directory and init process has a record
//! that accounts for it, or is gone; ready pods have their files; every
//! DEL ran in a live namespace. Then the pods are removed and nothing of
//! them may be left.
//!
//! One source for both users: `make bench` (the "failpoints × 5 rounds"
//! row) and the integration test `failpoints`, which includes this file.

use crate::harness::{manager, sh, sh_status};
use podscope_api::image::PullOptions;
use podscope_api::{Client, CreateOptions, ListFilter, PodMetadata};
use podscope_sys::failpoint;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Where the failpoint build is copied: podscoped's sandbox hides /home
/// and /tmp, where checkouts live.
const DAEMON_COPY: &str = "/usr/local/lib/podscope-test/podscoped-failpoints";
const DROP_IN_DIR: &str = "/run/systemd/system/podscoped.service.d";
const DROP_IN: &str = "/run/systemd/system/podscoped.service.d/50-failpoints.conf";
/// Holds `PODSCOPE_FAILPOINT=<name>` while one is armed, nothing otherwise.
const ARM_FILE: &str = "/run/podscope-test/failpoint.env";
const CONF_DIR: &str = "/run/podscope-test/cni/failpoints";
const FIXTURE_LOG: &str = "/run/podscope-test/cni/failpoints.log";
const FIXTURE_BIN: &str = "/usr/local/lib/podscope-test/cni";
const CONFIG: &str = "/etc/podscope/podscope.toml";
const NETWORK: &str = "failpoints-net";
const LABEL: &str = "failpoints";
/// Where the checkpoint failpoint's archive would go.
const CHECKPOINTS: &str = "/var/lib/podscope-test-checkpoints";

/// What the rounds found.
#[derive(Debug, Default)]
pub struct Report {
    /// Failpoints seen to kill the daemon, at least once.
    pub covered: BTreeSet<&'static str>,
    /// Kills by a failpoint, over all rounds.
    pub kills: usize,
    /// Everything found without a record to account for it, or missing
    /// where a record says it must be: "<failpoint>: <what>".
    pub leaks: Vec<String>,
}

/// Run every failpoint `rounds` times with `daemon` (a podscoped built
/// with the `failpoints` feature). Leaves podscoped running its installed
/// build on the podscope.toml it had.
pub async fn run(daemon: &Path, rounds: usize) -> Report {
    let mut report = Report::default();
    let guard = Setup::install(daemon);
    for _ in 0..rounds {
        for &name in failpoint::ALL {
            let killed = scenario(name).await;
            report.kills += killed.len();
            report.covered.extend(killed);
            let m = restart_clean().await;
            let found = converged(&m).await;
            report
                .leaks
                .extend(found.into_iter().map(|l| format!("{name}: {l}")));
            // Finish what the kill interrupted: every pod removed, and
            // nothing of them may remain.
            let ids = remove_ours(&m).await;
            let found = converged(&m).await;
            report.leaks.extend(
                found
                    .into_iter()
                    .map(|l| format!("{name}, after Remove: {l}")),
            );
            for id in &ids {
                if !host_local_leases(id).is_empty() {
                    report
                        .leaks
                        .push(format!("{name}, after Remove: IP lease of {id}"));
                }
            }
        }
    }
    drop(guard);
    report
}

/// Kill at every failpoint of a pull and of an image's removal, pulling
/// `image` (several layers, from the harness registry): after each kill
/// and restart the store holds the whole image or none of it, never a half
/// layer or a record without its layers, and a pull then works; after its
/// removal nothing of it is left.
pub async fn run_images(daemon: &Path, image: &str) -> Report {
    let mut report = Report::default();
    let guard = Setup::install(daemon);
    for &name in failpoint::IMAGES {
        // The failpoint build, disarmed, from no image.
        std::fs::write(ARM_FILE, "").unwrap();
        let m = restart_armed().await;
        forget_image(&m, image).await;
        let op = name.split_once('.').map(|(op, _)| op).unwrap_or(name);
        if op != "pull" {
            m.pull_image(image, &PullOptions::default()).await.unwrap();
        }
        arm(name);
        let m = restart_armed().await;
        let answer = if op == "pull" {
            m.pull_image(image, &PullOptions::default())
                .await
                .map(|_| ())
        } else {
            // The collection runs after Remove has answered.
            m.remove_image(image).await
        };
        if op == "pull" || op == "remove-image" {
            assert!(
                answer.is_err(),
                "failpoints: {name}: answered; never reached"
            );
        }
        wait_down();
        let killed = killed_at(name);
        report.kills += killed.len();
        report.covered.extend(killed);
        let m = restart_clean().await;
        report.leaks.extend(
            store_leftovers(&m)
                .await
                .into_iter()
                .map(|l| format!("{name}: {l}")),
        );
        // The retry works, and a removal leaves nothing.
        match m.pull_image(image, &PullOptions::default()).await {
            Ok(_) => {}
            Err(e) => report
                .leaks
                .push(format!("{name}: the pull after it failed: {e}")),
        }
        let others = layers_of_others(&m, image).await;
        forget_image(&m, image).await;
        let left: Vec<String> = super::leftovers::dir_names(&format!("{IMAGE_STORE}/layers"), "")
            .into_iter()
            .filter(|l| !others.contains(l))
            .collect();
        if !left.is_empty() {
            report
                .leaks
                .push(format!("{name}, after removal: layers {left:?}"));
        }
    }
    drop(guard);
    report
}

const IMAGE_STORE: &str = "/var/lib/podscope/images";

/// Kill at every failpoint of a container's Create, Start, Stop and Remove
/// (`failpoint::CONTAINERS`), `image` (present in the store) in a ready
/// host-network pod: after each kill and restart every container unit,
/// root mount, bundle, run directory and runtime state has a record that
/// accounts for it; the interrupted verb, tried again, works; and once the
/// pod is removed nothing of its containers is left.
pub async fn run_containers(daemon: &Path, image: &str) -> Report {
    let mut report = Report::default();
    let guard = Setup::install(daemon);
    // The store is left as it was found: the image goes at the end unless
    // it was there before (make bench's images section wants it empty).
    std::fs::write(ARM_FILE, "").unwrap();
    let had_image = restart_armed().await.image_status(image).await.is_ok();
    for &name in failpoint::CONTAINERS {
        std::fs::write(ARM_FILE, "").unwrap();
        let m = restart_armed().await;
        m.pull_image(image, &PullOptions::default()).await.unwrap();
        let op = name.split_once('.').map(|(op, _)| op).unwrap_or(name);
        // A checkpoint needs runc and a PID namespace of the container's
        // own (else it is refused before its pause).
        let checkpoint = op == "ctr-checkpoint";
        let pod = {
            let mut o = host_options();
            if checkpoint {
                o.runtime_handler = Some("runc".into());
            }
            let (id, _) = m.create(&pod(), &o).await.unwrap();
            m.start(&id).await.unwrap();
            id
        };
        let mut ctr = container_options();
        if checkpoint {
            ctr.security.pid_namespace = podscope_api::domain::NamespaceMode::Container;
            let _ = std::fs::remove_dir_all(CHECKPOINTS);
            std::fs::create_dir_all(CHECKPOINTS).unwrap();
        }
        arm(name);
        let m = restart_armed().await;
        let mut made = None;
        let answer = async {
            let (id, _) = m.create_container(&pod, "fp", 0, image, &ctr).await?;
            made = Some(id.clone());
            if op != "ctr-create" {
                m.start_container(&id).await?;
            }
            if op == "ctr-stop" {
                m.stop_container(&id, 10).await?;
            }
            if op == "ctr-remove" {
                m.remove_container(&id).await?;
            }
            if checkpoint {
                m.checkpoint_container(&id, &format!("{CHECKPOINTS}/fp.tar"), &Default::default())
                    .await?;
            }
            zbus::Result::Ok(())
        }
        .await;
        if answer.is_ok() {
            panic!("failpoints: {name}: the {op} went through; the failpoint was never reached");
        }
        wait_down();
        let killed = killed_at(name);
        report.kills += killed.len();
        report.covered.extend(killed);
        let m = restart_clean().await;
        let mut found = super::leftovers::containers(&m).await;
        if let (true, Some(id)) = (checkpoint, &made) {
            found.extend(checkpoint_leftovers(id));
        }
        report
            .leaks
            .extend(found.into_iter().map(|l| format!("{name}: {l}")));
        // What the kill cut short, done again, goes through.
        let filter = podscope_api::container::ContainerFilter {
            pod_id: Some(pod.clone()),
            ..Default::default()
        };
        let before = m.list_containers(&filter).await.unwrap_or_default();
        // Every container the pod had, those removed here included.
        let mut ids: Vec<String> = before.iter().map(|c| c.id.clone()).collect();
        for c in before {
            use podscope_api::domain::container::ContainerState as S;
            let again = match (op, c.state) {
                // A start cut short after its OOM watch made the unit's
                // memory cgroup, then removed instead: that cgroup must go
                // too (systemd never had the unit).
                ("ctr-start", S::Created) if name == failpoint::CTR_START_ROOTFS_MOUNTED => {
                    let removed = m.remove_container(&c.id).await;
                    // Before the pod goes: its slice's removal would trim
                    // the cgroup with it.
                    let left = cgroups_of(&c.id);
                    if !left.is_empty() {
                        report.leaks.push(format!(
                            "{name}: container {} removed, its cgroups left: {left}",
                            c.id
                        ));
                    }
                    removed
                }
                ("ctr-start", S::Created) => m.start_container(&c.id).await,
                ("ctr-stop", S::Running) => m.stop_container(&c.id, 10).await,
                ("ctr-remove", _) => m.remove_container(&c.id).await,
                _ => Ok(()),
            };
            if let Err(e) = again {
                report
                    .leaks
                    .push(format!("{name}: {op} of {} again failed: {e}", c.id));
            }
        }
        for c in m.list_containers(&filter).await.unwrap_or_default() {
            if !ids.contains(&c.id) {
                ids.push(c.id);
            }
        }
        m.remove(&pod).await.unwrap();
        let mut found = super::leftovers::containers(&m).await;
        for id in &ids {
            let cgroups = cgroups_of(id);
            if !cgroups.is_empty() {
                found.push(format!("container {id} left cgroups: {cgroups}"));
            }
            if !Path::new(&format!("/var/lib/podscope/containers/{id}")).exists()
                && sh(&format!(
                    "systemctl list-units --all --plain --no-legend 'podscope-ctr-{id}.service'"
                ))
                .trim()
                .is_empty()
            {
                continue;
            }
            found.push(format!(
                "container {id} left something after its pod's removal"
            ));
        }
        report.leaks.extend(
            found
                .into_iter()
                .map(|l| format!("{name}, after Remove: {l}")),
        );
    }
    if !had_image {
        forget_image(&manager().await.0, image).await;
    }
    drop(guard);
    report
}

/// What a checkpoint cut short may leave once recovery ran: the
/// container frozen, its working directory, a temporary archive.
fn checkpoint_leftovers(id: &str) -> Vec<String> {
    let mut found = Vec::new();
    let frozen = sh(&format!(
        "find /sys/fs/cgroup -maxdepth 7 -path '*podscope-ctr-{id}.service/*' \\( -name freezer.state -o -name cgroup.events \\) -exec grep -lE '^(FROZEN|frozen 1)$' {{}} + ; true"
    ));
    if !frozen.trim().is_empty() {
        found.push(format!("container {id} left frozen: {}", frozen.trim()));
    }
    let work = format!("/var/lib/podscope/containers/{id}/checkpoint.work");
    if Path::new(&work).exists() {
        found.push(format!("{work} left"));
    }
    let temps = sh(&format!("ls -A {CHECKPOINTS}"));
    if !temps.trim().is_empty() {
        found.push(format!("{CHECKPOINTS} holds {}", temps.trim()));
    }
    let _ = std::fs::remove_dir_all(CHECKPOINTS);
    found
}

/// The cgroup directories of container `id`'s unit, in any hierarchy.
fn cgroups_of(id: &str) -> String {
    sh(&format!(
        "find /sys/fs/cgroup -maxdepth 6 -type d -name 'podscope-ctr-{id}.service'"
    ))
    .trim()
    .to_owned()
}

fn host_options() -> CreateOptions {
    CreateOptions {
        network: Some(podscope_api::domain::NetworkMode::Host),
        ..options()
    }
}

/// A container that ends at once on SIGTERM.
fn container_options() -> podscope_api::container::ContainerOptions {
    podscope_api::container::ContainerOptions {
        command: vec![
            "/bin/sh".into(),
            "-c".into(),
            "trap 'exit 0' TERM; while :; do sleep 0.1; done".into(),
        ],
        labels: [("tag".to_owned(), LABEL.to_owned())].into(),
        ..Default::default()
    }
}

/// Every container unit, root mount, bundle, run directory and runtime
/// state on the node checked against the container records.
/// Remove the image if present, then wait for the collection to take
/// its layers (30 s at most). Other images' layers stay.
async fn forget_image(m: &Client, image: &str) {
    let Ok((s, info)) = m.image_status(image).await else {
        return;
    };
    m.remove_image(&s.id).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while info.layer_dirs.iter().any(|d| Path::new(d).exists()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The layers the store's other images use.
async fn layers_of_others(m: &Client, image: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let this = m.image_status(image).await.ok().map(|(s, _)| s.id);
    for s in m.list_images(&Default::default()).await.unwrap_or_default() {
        if Some(&s.id) == this.as_ref() {
            continue;
        }
        if let Ok((_, info)) = m.image_status(&s.id).await {
            out.extend(
                info.layers
                    .iter()
                    .map(|l| l.trim_start_matches("sha256:").to_owned()),
            );
        }
    }
    out
}

/// What the store holds that it must not: a layer without its
/// layer.json or root, anything in tmp/, a record whose layers or blobs
/// are missing, an image half there.
async fn store_leftovers(m: &Client) -> Vec<String> {
    let mut out = Vec::new();
    for l in super::leftovers::dir_names(&format!("{IMAGE_STORE}/layers"), "") {
        let d = format!("{IMAGE_STORE}/layers/{l}");
        if !Path::new(&format!("{d}/layer.json")).is_file()
            || !Path::new(&format!("{d}/root")).is_dir()
        {
            out.push(format!("half layer {l}"));
        }
    }
    let tmp = super::leftovers::dir_names(&format!("{IMAGE_STORE}/tmp"), "");
    if !tmp.is_empty() {
        out.push(format!("tmp/ holds {tmp:?} after a start"));
    }
    for s in m.list_images(&Default::default()).await.unwrap_or_default() {
        match m.image_status(&s.id).await {
            Ok((_, info)) => {
                for d in &info.layer_dirs {
                    if !Path::new(d).is_dir() {
                        out.push(format!("image {} without its layer {d}", s.id));
                    }
                }
                if info.config.is_empty() {
                    out.push(format!("image {} without its config blob", s.id));
                }
            }
            Err(e) => out.push(format!("image {} listed but not there: {e}", s.id)),
        }
    }
    out
}

/// The failpoint build installed with a drop-in that takes its failpoint
/// from ARM_FILE and does not restart on its own (the driver restarts it,
/// disarmed); a bridge + host-local + fixture network. Undone on drop.
struct Setup {
    config_before: Vec<u8>,
}

impl Setup {
    fn install(daemon: &Path) -> Setup {
        let config_before = std::fs::read(CONFIG).expect("podscope.toml");
        std::fs::create_dir_all("/usr/local/lib/podscope-test").unwrap();
        std::fs::create_dir_all(DROP_IN_DIR).unwrap();
        std::fs::create_dir_all(CONF_DIR).unwrap();
        std::fs::copy(daemon, DAEMON_COPY).expect("copy the failpoint build of podscoped");
        // The installed init, as the installed daemon would use (the copy
        // has no podscope-init beside it).
        let init = installed_podscoped().replace("podscoped", "podscope-init");
        std::fs::write(ARM_FILE, "").unwrap();
        std::fs::write(
            DROP_IN,
            format!(
                "[Service]\nExecStart=\nExecStart={DAEMON_COPY}\nEnvironmentFile={ARM_FILE}\nRestart=no\n"
            ),
        )
        .unwrap();
        let _ = std::fs::remove_file(FIXTURE_LOG);
        std::fs::write(
            format!("{CONF_DIR}/10-failpoints.conflist"),
            format!(
                r#"{{"cniVersion":"1.0.0","name":"{NETWORK}","plugins":[
  {{"type":"bridge","bridge":"podscope9","isGateway":true,
    "ipam":{{"type":"host-local","ranges":[[{{"subnet":"10.231.0.0/24"}}]]}}}},
  {{"type":"podscope-fixture","mode":"pass","log":"{FIXTURE_LOG}"}}]}}"#
            ),
        )
        .unwrap();
        std::fs::write(
            CONFIG,
            format!(
                "init_path = \"{init}\"\ncni_conf_dir = \"{CONF_DIR}\"\n\
                 cni_bin_dirs = [\"{FIXTURE_BIN}\", \"/usr/lib/cni\"]\n"
            ),
        )
        .unwrap();
        sh("systemctl daemon-reload");
        Setup { config_before }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(DROP_IN);
        let _ = std::fs::remove_file(ARM_FILE);
        let _ = std::fs::write(CONFIG, &self.config_before);
        let _ = Command::new("bash")
            .arg("-c")
            .arg("systemctl daemon-reload; systemctl reset-failed podscoped; systemctl restart podscoped")
            .status();
    }
}

/// The installed podscoped, as its unit's ExecStart names it (not the
/// failpoint build: call it before the drop-in is in place).
pub fn installed_podscoped() -> String {
    sh("systemctl show -P ExecStart podscoped")
        .split(['{', ';', ' '])
        .find_map(|w| w.strip_prefix("path=").map(str::to_owned))
        .expect("podscoped's ExecStart")
}

/// Drive the daemon to `name` and let it die there; the failpoints that
/// were seen to kill it (a reconcile failpoint needs a DEL owed, made by a
/// kill in Stop first).
async fn scenario(name: &'static str) -> Vec<&'static str> {
    let op = name.split_once('.').map(|(op, _)| op).unwrap_or(name);
    let mut killed = Vec::new();
    if op == "reconcile" {
        arm(failpoint::STOP_SCOPE_STOPPED);
        let m = restart_armed().await;
        if let Ok(id) = create_started(&m).await {
            let _ = m.stop(&id).await;
        }
        wait_down();
        killed.extend(killed_at(failpoint::STOP_SCOPE_STOPPED));
        // Recovery finds the DEL owed and dies in its reconciliation.
        arm(name);
        sh("systemctl reset-failed podscoped; systemctl start podscoped");
        wait_down();
        killed.extend(killed_at(name));
        return killed;
    }
    arm(name);
    let m = restart_armed().await;
    let answer = async {
        match op {
            "create" => {
                m.create(&pod(), &options()).await?;
            }
            "start" => {
                let (id, _) = m.create(&pod(), &options()).await?;
                m.start(&id).await?;
            }
            "stop" => {
                let id = create_started(&m).await?;
                m.stop(&id).await?;
            }
            _ => {
                let id = create_started(&m).await?;
                m.remove(&id).await?;
            }
        }
        zbus::Result::Ok(())
    }
    .await;
    match answer {
        // Registered with machined after Start has answered.
        Ok(()) if name == failpoint::START_MACHINE_REGISTERED => wait_down(),
        Ok(()) => {
            panic!("failpoints: {name}: the {op} went through; the failpoint was never reached")
        }
        Err(e) => {
            if !went_down() {
                panic!("failpoints: {name}: the {op} failed without reaching the failpoint: {e}")
            }
        }
    }
    note_unpinned_at_death();
    killed.extend(killed_at(name));
    killed
}

/// Pods with a DEL owed whose namespace was not pinned when the daemon
/// died: the daemon makes the namespace and runs ADD while the netns unit
/// pins it, so a kill before the pin takes the namespace (and whatever ADD
/// put in it) with the daemon, and the owed DEL rightly runs without one,
/// as the CNI spec allows. Any other DEL without its namespace is a leak.
static UNPINNED_AT_DEATH: std::sync::Mutex<BTreeSet<String>> =
    std::sync::Mutex::new(BTreeSet::new());

fn note_unpinned_at_death() {
    let mut unpinned = UNPINNED_AT_DEATH.lock().unwrap();
    for name in super::leftovers::dir_names("/var/lib/podscope/networks", "") {
        let Some(id) = name.strip_suffix(".json") else {
            continue;
        };
        if !Path::new(&format!("/run/netns/podscope-{id}")).exists() {
            unpinned.insert(id.to_owned());
        }
    }
}

async fn create_started(m: &Client) -> zbus::Result<String> {
    let (id, _) = m.create(&pod(), &options()).await?;
    m.start(&id).await?;
    Ok(id)
}

fn pod() -> PodMetadata {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    PodMetadata {
        name: format!(
            "fp-{}",
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
        namespace: LABEL.into(),
        uid: format!("{}", std::process::id()),
        attempt: 0,
    }
}

fn options() -> CreateOptions {
    CreateOptions {
        labels: Some([("tag".to_owned(), LABEL.to_owned())].into()),
        ..Default::default()
    }
}

fn ours() -> ListFilter {
    ListFilter {
        labels: Some([("tag".to_owned(), LABEL.to_owned())].into()),
        ..Default::default()
    }
}

fn arm(name: &str) {
    std::fs::write(ARM_FILE, format!("{}={name}\n", failpoint::ENV)).unwrap();
}

async fn restart_armed() -> Client {
    sh("systemctl reset-failed podscoped 2>/dev/null; systemctl restart podscoped");
    manager().await.0
}

/// Disarmed and started again: recovery runs.
async fn restart_clean() -> Client {
    std::fs::write(ARM_FILE, "").unwrap();
    wait_down();
    sh("systemctl reset-failed podscoped 2>/dev/null; systemctl start podscoped");
    manager().await.0
}

/// Until the killed daemon's unit is no longer active (Restart=no).
fn wait_down() {
    assert!(
        went_down(),
        "podscoped still running: its failpoint was never reached"
    );
}

/// Whether the daemon's unit stops being active within 10 s (systemd
/// learns of a death a little after the bus does).
fn went_down() -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while sh_status("systemctl is-active --quiet podscoped") == 0 {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// `name`, when the last run of the unit ended by SIGKILL and said it was
/// this failpoint's.
fn killed_at(name: &'static str) -> Vec<&'static str> {
    let result = sh("systemctl show -P Result podscoped");
    let status = sh("systemctl show -P ExecMainStatus podscoped");
    let journal = sh("journalctl -u podscoped -o cat --no-pager -n 50");
    let said = journal.contains(&failpoint::hit_message(name));
    if result.trim() == "signal" && status.trim() == "9" && said {
        vec![name]
    } else {
        eprintln!(
            "failpoints: {name} did not kill podscoped (Result={} ExecMainStatus={} logged={said})",
            result.trim(),
            status.trim()
        );
        Vec::new()
    }
}

async fn remove_ours(m: &Client) -> Vec<String> {
    let mut ids = Vec::new();
    for s in m.list(&ours()).await.unwrap() {
        m.remove(&s.id).await.unwrap();
        ids.push(s.id);
    }
    ids
}

/// The node's leftovers once the reconciliation after a start has had
/// time to finish (it runs after the bus name is taken): the last check's
/// findings, after at most 15 s of them not being empty; and every DEL
/// since the last call that ran without its namespace (those are events,
/// not state: they are counted once, never waited out).
async fn converged(m: &Client) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut found = loop {
        let found = super::leftovers::pods(m, NETWORK).await;
        if found.is_empty() || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    found.extend(dels_without_a_namespace());
    found
}

/// DELs the fixture saw with an empty CNI_NETNS or a namespace that was
/// no longer there (each reported once).
fn dels_without_a_namespace() -> Vec<String> {
    static SEEN: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
    let log = std::fs::read_to_string(FIXTURE_LOG).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let mut seen = SEEN.lock().unwrap();
    let mut found = Vec::new();
    for line in lines.iter().skip(*seen) {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.first() {
            Some(&"DEL")
                if !f.get(2).is_some_and(|n| n.starts_with('/'))
                    && !f
                        .get(1)
                        .is_some_and(|id| UNPINNED_AT_DEATH.lock().unwrap().contains(*id)) =>
            {
                found.push(format!(
                    "DEL without CNI_NETNS: {}",
                    f.get(1).unwrap_or(&"")
                ))
            }
            Some(&"NETNS-AT-DEL") if f.get(2) != Some(&"nsfs") => found.push(format!(
                "DEL of {} ran where its namespace was gone ({})",
                f.get(1).unwrap_or(&""),
                f.get(2).unwrap_or(&"")
            )),
            _ => {}
        }
    }
    *seen = lines.len();
    found
}

fn host_local_leases(id: &str) -> Vec<String> {
    super::leftovers::host_local_owners(NETWORK)
        .into_iter()
        .filter(|(_, owner)| owner == id)
        .map(|(ip, _)| ip)
        .collect()
}
