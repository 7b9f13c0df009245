//! The CDI figures (issue 43): what asking for CDI devices adds to a
//! CreateContainer, on podscope (crun and runc) and on containerd 2.3 +
//! runc (CDI on by default since 2.0), in the same run and by the same
//! code.
//!
//! The node gets a directory as a GPU node with a DRA driver has one:
//! 50 spec files in /var/run/cdi (the harness's own /run, a tmpfs), each
//! a kind of its own (`bench.example.com/c00` .. `c49`) with 4 devices,
//! each device edits of the kinds `nvidia-ctk cdi generate` writes for a
//! GPU: a device node (a host node every container may have, at a path
//! of its own), an env entry and a read-only bind of a small host
//! directory (a driver's libraries), and an env entry at spec level.
//! Then, in one pod per target:
//!
//! - once, a container with 4 devices of 4 spec files runs a check of
//!   what it got (nodes, env, mounts read-only, a device not asked for
//!   absent) and must exit 0: the figures are of a path that works, and a
//!   refused CreateContainer fails the bench;
//! - CreateContainer (tonic CRI client, one connection), alternately with
//!   no device and with 4 devices of 4 different spec files (rotating
//!   through all 50), each container removed before the next: p50 of each
//!   and their difference (target for podscope: <= 1 ms).
//!
//! The spec files, their host directories, the pods and the anchor are
//! removed at the end, so the sections after this one find the node as
//! it was. A failure panics, and the release build aborts on a panic (no
//! unwinding, so no guard would run): what the section made then goes
//! with the harness, whose root is a throw-away overlay and whose /run a
//! tmpfs, as every section's leftovers do.

use super::anchor::{self, Target};
use super::{ms, pct, sh, Table};
use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Where the spec files go: the directory DRA drivers write to (the
/// harness's /run, thrown away with it).
const SPEC_DIR: &str = "/var/run/cdi";
/// The host directories the devices' mounts bind.
const HOST_DIR: &str = "/run/podscope-bench-cdi";
const VENDOR: &str = "bench.example.com";
const SPECS: usize = 50;
const DEVICES_PER_SPEC: usize = 4;
/// Devices per container in the measured samples.
const ASKED: usize = 4;
/// Samples of each kind (no device, 4 devices) per target.
const SAMPLES: usize = 50;
/// Samples of each kind before the measured ones, not counted: the first
/// creates of a pod pay for caches the later ones find warm.
const WARMUP: usize = 3;
/// The podscope rows' target for what the 4 devices add.
const LIMIT: Duration = Duration::from_millis(1);

/// The host node each device index binds: different nodes, so that a
/// device given the wrong node reads differently (`/dev/null` gives no
/// byte, the others one), and all of them nodes a container may have.
const HOST_NODES: [&str; DEVICES_PER_SPEC] =
    ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom"];

fn kind(spec: usize) -> String {
    format!("{VENDOR}/c{spec:02}")
}

/// The fully qualified name of device `dev` of spec `spec`.
fn device_name(spec: usize, dev: usize) -> String {
    format!("{}=d{dev}", kind(spec))
}

fn spec_path(spec: usize) -> PathBuf {
    Path::new(SPEC_DIR).join(format!("podscope-bench-c{spec:02}.json"))
}

fn node_path(spec: usize, dev: usize) -> String {
    format!("/dev/bench-c{spec:02}-d{dev}")
}

fn host_dir(spec: usize, dev: usize) -> PathBuf {
    Path::new(HOST_DIR).join(format!("c{spec:02}-d{dev}"))
}

fn mount_path(spec: usize, dev: usize) -> String {
    format!("/opt/bench-cdi/c{spec:02}/d{dev}")
}

fn device_env(spec: usize, dev: usize) -> String {
    format!("BENCH_CDI_C{spec:02}_D{dev}")
}

fn spec_env(spec: usize) -> String {
    format!("BENCH_CDI_SPEC_C{spec:02}")
}

/// The devices of sample `i`: one of each of 4 consecutive spec files
/// (4 different files, all 50 in turn), device indices varied so each
/// sample binds the 4 host nodes.
fn sample_devices(i: usize) -> Vec<(usize, usize)> {
    (0..ASKED)
        .map(|k| ((ASKED * i + k) % SPECS, (i + k) % DEVICES_PER_SPEC))
        .collect()
}

/// One spec file, with edits of the kinds nvidia-ctk writes for a GPU
/// (not its paths): per device a node, an env entry and a read-only
/// bind; at spec level an env entry.
fn spec_json(spec: usize) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = (0..DEVICES_PER_SPEC)
        .map(|dev| {
            serde_json::json!({
                "name": format!("d{dev}"),
                "containerEdits": {
                    "env": [format!("{}={}", device_env(spec, dev), device_name(spec, dev))],
                    "deviceNodes": [{
                        "path": node_path(spec, dev),
                        "hostPath": HOST_NODES[dev],
                    }],
                    "mounts": [{
                        "hostPath": host_dir(spec, dev).display().to_string(),
                        "containerPath": mount_path(spec, dev),
                        "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"],
                    }],
                },
            })
        })
        .collect();
    serde_json::json!({
        "cdiVersion": "0.6.0",
        "kind": kind(spec),
        "devices": devices,
        "containerEdits": {
            "env": [format!("{}=c{spec:02}", spec_env(spec))],
        },
    })
}

/// Write the spec files and their host directories; whether the spec
/// directory had to be made.
fn write_specs() -> bool {
    let made_dir = !Path::new(SPEC_DIR).exists();
    std::fs::create_dir_all(SPEC_DIR).unwrap_or_else(|e| panic!("mkdir {SPEC_DIR}: {e}"));
    for spec in 0..SPECS {
        for dev in 0..DEVICES_PER_SPEC {
            let dir = host_dir(spec, dev);
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
            // What the container must read through its mount: this
            // device's name, so a bind of the wrong directory shows.
            std::fs::write(dir.join("device"), device_name(spec, dev)).unwrap();
        }
        let path = spec_path(spec);
        let text = serde_json::to_vec_pretty(&spec_json(spec)).unwrap();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        // podscope refuses a spec file others than root may write (its
        // edits act with root's rights): the mode must not depend on the
        // umask.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    made_dir
}

/// Remove the bench's spec files (only those: a node may hold others),
/// the spec directory if the bench made it and nothing else came, and the
/// host directories.
fn remove_specs(made_dir: bool) {
    for spec in 0..SPECS {
        let path = spec_path(spec);
        std::fs::remove_file(&path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
    }
    if made_dir {
        let _ = std::fs::remove_dir(SPEC_DIR);
    }
    std::fs::remove_dir_all(HOST_DIR).unwrap_or_else(|e| panic!("remove {HOST_DIR}: {e}"));
}

/// One target's CreateContainer samples.
struct Figures {
    none: Duration,
    four: Duration,
    samples: usize,
}

pub async fn run(t: &mut Table) {
    let t0 = Instant::now();
    let journal = super::containers::journal_cursor();
    // containerd's CDI cache watches the directories from its start: the
    // files are there before it is.
    let made_dir = write_specs();
    let containerd = anchor::start_containerd_2_3();
    let targets = [
        Target::podscope("crun"),
        Target::podscope("runc"),
        containerd,
    ];
    let mut figs = Vec::new();
    for target in &targets {
        let podscope = target.socket == Path::new(super::CRI_SOCKET);
        let mut rt = anchor::runtime_client(target).await;
        if !podscope {
            containerd_cdi_on(&mut rt, target).await;
        }
        let mut img = anchor::image_client(target).await;
        anchor::pull(&mut img, anchor::IMAGE).await;
        let tag = if podscope {
            target.runtime_handler.clone()
        } else {
            "containerd".into()
        };
        let mut config = anchor::pod_config(target, &format!("cdi-{tag}"));
        let logs = PathBuf::from(format!("/var/log/pods/podscope-bench-cdi-{tag}"));
        let _ = std::fs::remove_dir_all(&logs);
        config.log_directory = logs.display().to_string();
        let pod = anchor::run_pod(&mut rt, target, &config).await;
        check_devices(&mut rt, target, &pod, &config).await;
        figs.push(samples(&mut rt, target, &pod, &config).await);
        anchor::remove_pods(&mut rt, std::slice::from_ref(&pod)).await;
        let _ = std::fs::remove_dir_all(&logs);
    }
    anchor::stop_containerd();
    remove_specs(made_dir);
    let reads = spec_reads(&journal);

    for (target, f) in targets.iter().zip(&figs) {
        let podscope = target.socket == Path::new(super::CRI_SOCKET);
        t.add(
            &target.row(&format!(
                "CreateContainer p50, no CDI device ({} samples)",
                f.samples
            )),
            "report",
            ms(f.none),
            None,
        );
        t.add(
            &target.row(&format!(
                "CreateContainer p50, {ASKED} CDI devices of {SPECS} spec files ({} samples)",
                f.samples
            )),
            "report",
            ms(f.four),
            None,
        );
        let added = if f.four >= f.none {
            format!("+{}", ms(f.four - f.none))
        } else {
            format!("-{}", ms(f.none - f.four))
        };
        t.add(
            &target.row(&format!(
                "what {ASKED} CDI devices add to CreateContainer p50"
            )),
            if podscope { "<= 1 ms" } else { "report" },
            format!("{added} ({} - {})", ms(f.four), ms(f.none)),
            podscope.then(|| f.four.saturating_sub(f.none) <= LIMIT),
        );
    }
    // The cache's promise: a stat per file when nothing changed, so each
    // file read once however many creates (two handlers' worth) ask.
    t.add(
        &format!("podscope: CDI spec files read for all its creates ({SPECS} files)"),
        &format!("{SPECS}, each once"),
        format!("{reads}"),
        Some(reads == SPECS),
    );
    t.add(
        "devices section wall time (specs, 3 targets, anchor start and stop)",
        "report",
        format!("{:.1} s", t0.elapsed().as_secs_f64()),
        None,
    );
}

/// containerd's CRI config as its verbose Status tells it: CDI on, and
/// /var/run/cdi among its spec directories (the anchor's config does not
/// set them: containerd 2.x's defaults).
async fn containerd_cdi_on(rt: &mut RuntimeServiceClient<Channel>, target: &Target) {
    let st = rt
        .status(cri::StatusRequest { verbose: true })
        .await
        .unwrap_or_else(|e| panic!("{}: Status: {e}", target.name))
        .into_inner();
    let config: serde_json::Value = st
        .info
        .get("config")
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or_default();
    assert_eq!(
        config["enableCDI"].as_bool(),
        Some(true),
        "{}: CDI is not on (its Status config: enableCDI {})",
        target.name,
        config["enableCDI"]
    );
    let dirs = config["cdiSpecDirs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        dirs.iter().any(|d| d.as_str() == Some(SPEC_DIR)),
        "{}: {SPEC_DIR} is not among its CDI spec directories {dirs:?}",
        target.name
    );
}

/// The container config of a sample: `sleep`, and the CDI devices asked
/// for as kubelet asks (CRI's CDI_devices).
fn with_devices(name: &str, devices: &[(usize, usize)]) -> cri::ContainerConfig {
    let mut c = anchor::container_config(name);
    c.cdi_devices = devices
        .iter()
        .map(|(s, d)| cri::CdiDevice {
            name: device_name(*s, *d),
        })
        .collect();
    c
}

/// A container with sample 0's 4 devices runs a check of each: its node
/// a character device that reads as its host node does, its env entry
/// and its spec's, its mount holding its name and read-only; and a device
/// of the same spec not asked for absent. It must exit 0; otherwise its
/// log says what it lacked.
async fn check_devices(
    rt: &mut RuntimeServiceClient<Channel>,
    target: &Target,
    pod: &str,
    pod_config: &cri::PodSandboxConfig,
) {
    let devices = sample_devices(0);
    // Plain `if`s, no function or arithmetic: the image's busybox shell
    // is built without them.
    let mut script = String::from("f=0\n");
    let mut check = |cond: String, what: String| {
        script.push_str(&format!(
            "if {cond}; then echo \"ok: {what}\"; else echo \"FAIL: {what}\"; f=1; fi\n"
        ));
    };
    for (s, d) in &devices {
        let node = node_path(*s, *d);
        let bytes = usize::from(HOST_NODES[*d] != "/dev/null");
        check(
            format!("[ -c {node} ]"),
            format!("{node} is a character device"),
        );
        check(
            format!("[ \"$(head -c 1 {node} | wc -c)\" -eq {bytes} ]"),
            format!("{node} reads {bytes} byte as {} does", HOST_NODES[*d]),
        );
        let env = device_env(*s, *d);
        check(
            format!("[ \"${env}\" = \"{}\" ]", device_name(*s, *d)),
            format!("{env} is set"),
        );
        let spec = spec_env(*s);
        check(
            format!("[ \"${spec}\" = \"c{s:02}\" ]"),
            format!("{spec} (spec level) is set"),
        );
        let dir = mount_path(*s, *d);
        check(
            format!("[ \"$(cat {dir}/device)\" = \"{}\" ]", device_name(*s, *d)),
            format!("{dir} is the device's host directory"),
        );
        check(
            format!("! touch {dir}/written 2>/dev/null"),
            format!("{dir} is read-only"),
        );
        // The spec's next device, not asked for: nothing of it.
        let other = (d + 1) % DEVICES_PER_SPEC;
        if !devices.contains(&(*s, other)) {
            let node = node_path(*s, other);
            check(
                format!("[ ! -e {node} ]"),
                format!("{node} (not asked for) is absent"),
            );
        }
    }
    script.push_str("exit $f\n");
    let mut c = with_devices("cdi-check", &devices);
    c.command = vec!["sh".into(), "-c".into(), script];
    c.log_path = "cdi-check/0.log".into();
    let names: Vec<String> = c.cdi_devices.iter().map(|d| d.name.clone()).collect();
    // A refused create or start panics there, the daemon's error naming
    // the device.
    let id = anchor::run_container(rt, pod, pod_config, c).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let st = rt
            .container_status(cri::ContainerStatusRequest {
                container_id: id.clone(),
                verbose: false,
            })
            .await
            .unwrap_or_else(|e| panic!("{}: ContainerStatus: {e}", target.name))
            .into_inner()
            .status
            .expect("a container status");
        if st.state == cri::ContainerState::ContainerExited as i32 {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "{}: the CDI check container did not exit in 60 s",
            target.name
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if status.exit_code != 0 {
        let log = Path::new(&pod_config.log_directory).join("cdi-check/0.log");
        panic!(
            "{}: the container with CDI devices {names:?} did not get what their specs say (exit {}, {} {}):\n{}",
            target.name,
            status.exit_code,
            status.reason,
            status.message,
            std::fs::read_to_string(&log).unwrap_or_else(|e| format!("({}: {e})", log.display()))
        );
    }
    eprintln!(
        "bench: devices: {}: a container with {names:?} got their nodes, env and read-only mounts",
        target.name
    );
    remove_container(rt, target, &id).await;
}

async fn remove_container(rt: &mut RuntimeServiceClient<Channel>, target: &Target, id: &str) {
    rt.remove_container(cri::RemoveContainerRequest {
        container_id: id.to_owned(),
    })
    .await
    .unwrap_or_else(|e| panic!("{}: RemoveContainer: {e}", target.name));
}

/// CreateContainer with no device and with 4, alternately, each removed
/// before the next; the first `WARMUP` of each not counted.
async fn samples(
    rt: &mut RuntimeServiceClient<Channel>,
    target: &Target,
    pod: &str,
    pod_config: &cri::PodSandboxConfig,
) -> Figures {
    let (mut none, mut four) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + SAMPLES {
        for asked in [0, ASKED] {
            let devices = if asked == 0 {
                Vec::new()
            } else {
                sample_devices(i)
            };
            let config = with_devices(&format!("cdi-{asked}-{i}"), &devices);
            let t0 = Instant::now();
            let id = rt
                .create_container(cri::CreateContainerRequest {
                    pod_sandbox_id: pod.to_owned(),
                    config: Some(config),
                    sandbox_config: Some(pod_config.clone()),
                })
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "{}: CreateContainer with {asked} CDI devices ({:?}) refused: {e}",
                        target.name,
                        devices
                            .iter()
                            .map(|(s, d)| device_name(*s, *d))
                            .collect::<Vec<_>>()
                    )
                })
                .into_inner()
                .container_id;
            let took = t0.elapsed();
            remove_container(rt, target, &id).await;
            if i >= WARMUP {
                (if asked == 0 { &mut none } else { &mut four }).push(took);
            }
        }
    }
    Figures {
        none: pct(&mut none, 0.5),
        four: pct(&mut four, 0.5),
        samples: SAMPLES,
    }
}

/// How many times podscoped read one of the bench's spec files since
/// `cursor` (its log names each file it reads, `CDI_SPEC=`, with "kind").
fn spec_reads(cursor: &str) -> usize {
    sh(&format!(
        "journalctl -u podscoped -o json --no-pager --after-cursor='{cursor}'"
    ))
    .lines()
    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    .filter(|v| {
        v["CDI_SPEC"]
            .as_str()
            .is_some_and(|f| f.starts_with(SPEC_DIR) && f.contains("podscope-bench-c"))
            && v["MESSAGE"].as_str().is_some_and(|m| m.contains(": kind "))
    })
    .count()
}
