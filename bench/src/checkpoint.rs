//! Checkpoint and restore (issue 44): CheckpointContainer of a container
//! with 64 MiB of memory in use, and its restore (CreateContainer whose
//! image is the archive, then StartContainer) in another pod, seconds.
//!
//! Where CRIU runs: this machine's kernel (6.18) is refused by Debian 12's
//! criu 3.17, so the section runs Debian 13's criu 4.1 as runc's `--criu`
//! program (`bench/criu-trixie.sh` unpacks it, with trixie's loader and
//! libraries, under /var/cache; `make bench` names it in CRIU_4_1). The
//! handler `runc-criu` is Debian's runc behind a wrapper that adds that
//! option; podscope itself is as installed. `criu check` must pass first,
//! or the section fails: a figure of a CRIU that cannot work is none.
//!
//! The container is busybox's sh holding a 64 MiB string in a variable
//! and counting, the string's length on each line: a restored one that
//! prints the next number with the same length went on from where it was
//! with its memory. ROUNDS checkpoints of the same running container, each
//! restored into a pod of its own and removed; p50 of each. What the
//! section makes (the config, the wrapper, the pods, the archives) is
//! undone at the end.

use super::anchor::{self, Target};
use super::{sh, Table};
use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const HANDLER: &str = "runc-criu";
/// The wrapper runc, inside the harness's throw-away root.
const WRAPPER: &str = "/usr/local/lib/podscope-bench/runc-criu/runc";
const CONFIG: &str = "/etc/podscope/podscope.toml";
/// Where the archives go.
const DIR: &str = "/var/lib/podscope-bench-checkpoint";
const LOGS: &str = "/var/log/pods/podscope-bench-checkpoint";
const MIB: usize = 64;
const ROUNDS: usize = 3;
/// 64 MiB of 'a' in a shell variable, then a count with its length.
fn program() -> String {
    format!(
        "x=$(head -c {} /dev/zero | tr '\\0' a); i=0; while :; do i=$((i+1)); echo \"$i ${{#x}}\"; sleep 0.5; done",
        MIB << 20
    )
}

/// The (count, length) lines of a container's CRI log.
fn counted(log: &Path) -> Vec<(u64, usize)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.rsplit(' ');
            let len = w.next()?.parse().ok()?;
            let n = w.next()?.parse().ok()?;
            Some((n, len))
        })
        .collect()
}

async fn wait_counted(log: &Path, n: usize) -> Vec<(u64, usize)> {
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let v = counted(log);
        if v.len() >= n {
            return v;
        }
        assert!(
            Instant::now() < end,
            "{}: fewer than {n} lines after 120 s: {v:?}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn config(name: &str, image: &str) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: name.into(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: image.into(),
            ..Default::default()
        }),
        command: vec!["sh".into(), "-c".into(), program()],
        log_path: format!("{name}.log"),
        linux: Some(cri::LinuxContainerConfig {
            // A PID namespace of its own: CRIU dumps a namespace whole.
            security_context: Some(cri::LinuxContainerSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    pid: cri::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn pod(
    rt: &mut RuntimeServiceClient<Channel>,
    target: &Target,
    name: &str,
) -> (String, cri::PodSandboxConfig) {
    let mut c = anchor::pod_config(target, name);
    let logs = Path::new(LOGS).join(name);
    let _ = std::fs::remove_dir_all(&logs);
    c.log_directory = logs.display().to_string();
    (anchor::run_pod(rt, target, &c).await, c)
}

/// The handler and its wrapper, podscoped restarted on them; the config
/// it had, to put back.
fn install(criu: &str) -> String {
    let saved = std::fs::read_to_string(CONFIG).unwrap_or_default();
    std::fs::create_dir_all(Path::new(WRAPPER).parent().unwrap()).unwrap();
    std::fs::write(
        WRAPPER,
        format!("#!/bin/sh\n# make bench's checkpoint section: Debian's runc with CRIU 4.1.\nexec /usr/bin/runc --criu {criu} \"$@\"\n"),
    )
    .unwrap();
    sh(&format!("chmod 0755 {WRAPPER}"));
    // A [runtimes.X] key replaces the defaults whole: they are listed too.
    std::fs::write(
        CONFIG,
        format!(
            "{saved}\n# make bench's checkpoint section\ndefault_runtime = \"crun\"\nruntimes.crun = {{ path = \"/usr/bin/crun\" }}\nruntimes.runc = {{ path = \"/usr/bin/runc\" }}\nruntimes.{HANDLER} = {{ path = \"{WRAPPER}\", kind = \"runc\" }}\n"
        ),
    )
    .unwrap();
    sh("systemctl reset-failed podscoped 2>/dev/null; systemctl restart podscoped");
    saved
}

fn uninstall(saved: &str) {
    std::fs::write(CONFIG, saved).unwrap();
    let _ = std::fs::remove_file(WRAPPER);
    sh("systemctl reset-failed podscoped 2>/dev/null; systemctl restart podscoped");
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub async fn run(t: &mut Table) {
    let criu = std::env::var("CRIU_4_1")
        .expect("CRIU_4_1 names CRIU 4.1 (make bench runs bench/criu-trixie.sh)");
    let check = std::process::Command::new(&criu)
        .arg("check")
        .output()
        .unwrap_or_else(|e| panic!("{criu} check: {e}"));
    assert!(
        check.status.success(),
        "`{criu} check` fails here: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let version = sh(&format!("{criu} --version"));
    let version = version
        .lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .unwrap_or("?")
        .to_owned();
    let saved = install(&criu);
    let _ = std::fs::remove_dir_all(DIR);
    std::fs::create_dir_all(DIR).unwrap();

    let target = Target::podscope(HANDLER);
    let mut rt = anchor::runtime_client(&target).await;
    let mut img = anchor::image_client(&target).await;
    anchor::pull(&mut img, anchor::IMAGE).await;
    let (a, a_config) = pod(&mut rt, &target, "ckpt-source").await;
    let id = anchor::run_container(&mut rt, &a, &a_config, config("memory", anchor::IMAGE)).await;
    let source_log = Path::new(&a_config.log_directory).join("memory.log");
    let first = wait_counted(&source_log, 1).await;
    assert_eq!(
        first[0].1,
        MIB << 20,
        "the string is not {MIB} MiB: {first:?}"
    );

    let (mut dumps, mut restores, mut bytes) = (Vec::new(), Vec::new(), 0u64);
    for round in 0..ROUNDS {
        let archive = format!("{DIR}/memory-{round}.tar");
        // What the source had logged before the dump: the restored one
        // goes on past it.
        let before = counted(&source_log).last().copied().unwrap();
        let t0 = Instant::now();
        rt.checkpoint_container(cri::CheckpointContainerRequest {
            container_id: id.clone(),
            location: archive.clone(),
            timeout: 120,
        })
        .await
        .unwrap_or_else(|e| panic!("CheckpointContainer {id} into {archive}: {e}"));
        dumps.push(t0.elapsed());
        bytes = std::fs::metadata(&archive).map(|m| m.len()).unwrap();

        let (b, b_config) = pod(&mut rt, &target, &format!("ckpt-restored-{round}")).await;
        let t0 = Instant::now();
        let rid = anchor::run_container(&mut rt, &b, &b_config, config("restored", &archive)).await;
        restores.push(t0.elapsed());
        let log = Path::new(&b_config.log_directory).join("restored.log");
        let after = wait_counted(&log, 1).await;
        // ... and not past where the source, still running, is now.
        let now = counted(&source_log).last().copied().unwrap();
        assert!(
            after[0].0 > before.0 && after[0].0 <= now.0 + 1 && after[0].1 == MIB << 20,
            "round {round}: the restored container {rid} did not go on with its memory: it logged {after:?}; the source {before:?} before the dump, {now:?} now"
        );
        anchor::remove_pods(&mut rt, std::slice::from_ref(&b)).await;
        let _ = std::fs::remove_file(&archive);
    }
    anchor::remove_pods(&mut rt, std::slice::from_ref(&a)).await;
    let _ = std::fs::remove_dir_all(DIR);
    let _ = std::fs::remove_dir_all(LOGS);
    uninstall(&saved);

    let p50 = |v: &mut Vec<Duration>| super::pct(v, 0.5);
    let what = format!("runc 1.1 + CRIU {version}, {MIB} MiB in use");
    t.add(
        &format!("checkpoint: CheckpointContainer ({what}), p50 of {ROUNDS}"),
        "report",
        secs(p50(&mut dumps)),
        None,
    );
    t.add(
        &format!("checkpoint: restore, CreateContainer + StartContainer from the archive ({what}), p50 of {ROUNDS}"),
        "report",
        secs(p50(&mut restores)),
        None,
    );
    t.add(
        "checkpoint: the archive's size",
        "report",
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64),
        None,
    );
}
