//! CheckpointContainer and a restore's archive, where CRIU cannot run: this
//! machine's kernel, on which Debian's criu 3.17 fails its own `criu check`
//! (the dump and the restore themselves are make node's, in the VM). Each
//! refusal is a named error; nothing is left at the archive's path or
//! beside it (no temporary file); the container still runs, its output
//! still coming.

use crate::containers::*;
use crate::isolation::{assert_needs_privileged, busctl_as_nobody, manage_only};
use podscope_api::container::{CheckpointOptions, ContainerOptions, Security};
use podscope_api::domain::container::ContainerState;
use podscope_api::domain::NamespaceMode;
use podscope_api::{CreateOptions, ErrorKind};
use podscope_oci::checkpoint_seal::{Sealer, KEY_LEN, SEAL_MEMBER};
use podscope_test_support::harness::*;
use std::path::Path;
use std::time::Duration;

/// The node's checkpoint key (made by the daemon at its first checkpoint
/// or restore).
const KEY: &str = "/var/lib/podscope/checkpoint.key";

const COUNTER: &str = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.2; done";

/// A directory of the test's own for archives.
fn archive_dir(tag: &str) -> String {
    let d = format!("/var/lib/podscope-test/{}", uniq(tag));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An archive with busybox's config.dump, a spec.dump and one CRIU image,
/// sealed with `key` (the node's, as its own checkpoint would be) or with
/// `seal` as written; or unsealed.
fn archive(path: &str, key: Option<&[u8; KEY_LEN]>, seal: Option<&[u8]>) {
    let members: [(&str, &[u8]); 3] = [
        ("checkpoint/pages-1.img", &[0x5a; 4096]),
        (
            "config.dump",
            br#"{"id":"x","name":"c","rootfsImageName":"docker.io/library/busybox:latest"}"#,
        ),
        ("spec.dump", b"{}"),
    ];
    let mut b = tar::Builder::new(std::fs::File::create(path).unwrap());
    let mut sealer = key.map(Sealer::new);
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_mode(0o700);
    h.set_size(0);
    b.append_data(&mut h, "checkpoint/", std::io::empty())
        .unwrap();
    if let Some(s) = sealer.as_mut() {
        s.member("checkpoint", b'5', 0);
    }
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o600);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, name, data).unwrap();
        if let Some(s) = sealer.as_mut() {
            s.member(name, b'0', data.len() as u64);
            s.update(data);
        }
    }
    let seal = sealer
        .map(|s| s.finish().into_bytes())
        .or(seal.map(<[u8]>::to_vec));
    if let Some(seal) = seal {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o600);
        h.set_size(seal.len() as u64);
        b.append_data(&mut h, SEAL_MEMBER, &seal[..]).unwrap();
    }
    b.into_inner().unwrap();
}

/// What is in `dir`, sorted.
fn listing(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A checkpoint that must fail with `want`, naming `named`: nothing new
/// in `dir`, the container still running and writing.
async fn refused(
    m: &Client,
    id: &str,
    location: &str,
    o: &CheckpointOptions,
    want: ErrorKind,
    named: &str,
    log: &str,
) {
    let dir = Path::new(location).parent().unwrap().to_str().unwrap();
    let before = std::fs::read_dir(dir).is_ok().then(|| listing(dir));
    let e = m
        .checkpoint_container(id, location, o)
        .await
        .expect_err("the checkpoint succeeded");
    let (k, msg) = classify(&e);
    assert_eq!(k, want, "{msg}");
    assert!(msg.contains(named), "the error names {named:?}: {msg}");
    if let Some(before) = before {
        assert_eq!(
            listing(dir),
            before,
            "a refused checkpoint left something in {dir}"
        );
    }
    let s = m.container_status(id).await.unwrap();
    assert_eq!(s.state, ContainerState::Running, "the container runs on");
    let lines = std::fs::read_to_string(log).unwrap().lines().count();
    wait_lines(log, lines + 2, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn checkpoints_refused_here_are_named_leave_nothing_and_the_container_runs_on() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, logs) = log_pod(&m, "ckpt-e", "runc").await;
    let id = run(
        &m,
        &pod,
        "counter",
        ContainerOptions {
            log_path: "counter.log".into(),
            ..sh_cmd(COUNTER)
        },
    )
    .await;
    let log = format!("{logs}/counter.log");
    wait_lines(&log, 2, Duration::from_secs(10)).await;
    let dir = archive_dir("ckpt-e");
    let o = CheckpointOptions::default();

    // The path exists: never replaced.
    let taken = format!("{dir}/taken.tar");
    std::fs::write(&taken, b"mine").unwrap();
    refused(
        &m,
        &id,
        &taken,
        &o,
        ErrorKind::AlreadyExists,
        "exists already",
        &log,
    )
    .await;
    assert_eq!(std::fs::read(&taken).unwrap(), b"mine");
    // A link there counts as there, dangling or not.
    std::os::unix::fs::symlink("/etc/podscope-ckpt-nowhere", format!("{dir}/link.tar")).unwrap();
    refused(
        &m,
        &id,
        &format!("{dir}/link.tar"),
        &o,
        ErrorKind::AlreadyExists,
        "exists already",
        &log,
    )
    .await;
    assert!(!Path::new("/etc/podscope-ckpt-nowhere").exists());
    // A directory that is not there, one that cannot be written, a relative path.
    refused(
        &m,
        &id,
        &format!("{dir}/none/a.tar"),
        &o,
        ErrorKind::InvalidArgument,
        "cannot be used",
        &log,
    )
    .await;
    let ro = format!("{dir}/ro");
    std::fs::create_dir_all(&ro).unwrap();
    sh(&format!("mount -t tmpfs -o ro tmpfs {ro}"));
    refused(
        &m,
        &id,
        &format!("{ro}/a.tar"),
        &o,
        ErrorKind::InvalidArgument,
        "cannot be written",
        &log,
    )
    .await;
    sh(&format!("umount {ro}"));
    refused(
        &m,
        &id,
        "a.tar",
        &o,
        ErrorKind::InvalidArgument,
        "not an absolute path",
        &log,
    )
    .await;

    // CRIU refusing: criu 3.17 on this kernel (its vDSO). The runtime's and
    // CRIU's own words, nothing written, the container not left frozen.
    let (rc, _, err) = sh_out("criu check");
    assert_ne!(
        rc, 0,
        "criu check passes on this kernel: this test's premise is gone ({err})"
    );
    refused(
        &m,
        &id,
        &format!("{dir}/criu.tar"),
        &o,
        ErrorKind::RuntimeFailed,
        "CRIU could not dump",
        &log,
    )
    .await;
    assert_eq!(
        sh_status(
            "systemctl list-units --all --plain --no-legend 'podscope-checkpoint-*' | grep -q ."
        ),
        1,
        "the dump's unit is gone"
    );
    assert!(
        std::fs::read_dir(format!("/var/lib/podscope/containers/{id}"))
            .unwrap()
            .flatten()
            .all(|e| e.file_name() != "checkpoint.work"),
        "the dump's work directory is gone"
    );
    // The journal says which container and which step failed.
    let j = sh(&format!(
        "journalctl -u podscoped --no-pager -o cat CONTAINER_ID={id} STEP=dump"
    ));
    assert!(
        j.contains("checkpoint failed"),
        "the journal has the dump's failure, by container and step: {j}"
    );

    // A created container is not running.
    let (created, _) = m
        .create_container(&pod, "idle", 0, BUSYBOX, &sh_cmd("sleep 60"))
        .await
        .unwrap();
    let e = m
        .checkpoint_container(&created, &format!("{dir}/idle.tar"), &o)
        .await
        .expect_err("a created container was checkpointed");
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::InvalidState, "{msg}");
    assert!(msg.contains("not running"), "{msg}");
    assert!(!Path::new(&format!("{dir}/idle.tar")).exists());
    m.remove(&pod).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A handler whose runtime has no CRIU (crun 1.8.1; crun 1.27 built
/// without libcriu) is named, and so is one whose runc finds no criu.
#[tokio::test(flavor = "multi_thread")]
async fn handlers_that_cannot_checkpoint_are_named() {
    let _cleanup = Cleanup::new();
    std::fs::create_dir_all("/run/podscope-test").unwrap();
    let script = "/run/podscope-test/runtime-runc-nocriu";
    std::fs::write(
        script,
        "#!/bin/sh\nexec /usr/bin/runc --criu /usr/local/lib/podscope-test/no-criu \"$@\"\n",
    )
    .unwrap();
    sh(&format!("chmod 755 {script}"));
    let config = format!(
        "[runtimes.crun]\npath = \"/usr/bin/crun\"\n\
         [runtimes.runc]\npath = \"/usr/bin/runc\"\n\
         [runtimes.runc-nocriu]\npath = \"{script}\"\nkind = \"runc\"\n"
    );
    with_config(&config, || async {
        let (m, _c) = manager().await;
        pull_busybox(&m).await;
        let dir = archive_dir("ckpt-h");
        for (handler, named) in [
            ("crun", "runtime handler crun cannot checkpoint"),
            ("runc-nocriu", "CRIU is not installed"),
        ] {
            let (pod, logs) = log_pod(&m, &format!("ckpt-{handler}"), handler).await;
            let id = run(
                &m,
                &pod,
                "counter",
                ContainerOptions {
                    log_path: "counter.log".into(),
                    ..sh_cmd(COUNTER)
                },
            )
            .await;
            let log = format!("{logs}/counter.log");
            wait_lines(&log, 2, Duration::from_secs(10)).await;
            refused(
                &m,
                &id,
                &format!("{dir}/{handler}.tar"),
                &CheckpointOptions::default(),
                ErrorKind::RuntimeFailed,
                named,
                &log,
            )
            .await;
            m.remove(&pod).await.unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}

/// A container in its pod's shared PID namespace (the init is its PID 1):
/// CRIU would have to dump the pod's init with it. Refused before CRIU.
#[tokio::test(flavor = "multi_thread")]
async fn a_container_in_its_pods_pid_namespace_is_named() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let pod = create_started(
        &m,
        "ckpt-pidns",
        CreateOptions {
            runtime_handler: Some("runc".into()),
            pid_namespace: Some(NamespaceMode::Pod),
            log_directory: Some(format!("/var/log/pods/{}", uniq("ckpt-pidns"))),
            ..Default::default()
        },
    )
    .await;
    let id = run(
        &m,
        &pod,
        "shared",
        ContainerOptions {
            security: Security {
                pid_namespace: NamespaceMode::Pod,
                ..Default::default()
            },
            ..sh_cmd("sleep 600")
        },
    )
    .await;
    let dir = archive_dir("ckpt-pidns");
    let e = m
        .checkpoint_container(&id, &format!("{dir}/a.tar"), &CheckpointOptions::default())
        .await
        .expect_err("a container in the pod's PID namespace was checkpointed");
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::InvalidState, "{msg}");
    assert!(msg.contains("its pod's"), "{msg}");
    assert!(msg.contains("PID namespace"), "{msg}");
    assert!(listing(&dir).is_empty());
    m.remove(&pod).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A restore's archive is hostile input, checked whole before anything is
/// made: not a tar, a truncated one, one without CRIU's images, one whose
/// image member is a link out, one not sealed with the node's checkpoint
/// key (a restore runs its CRIU images as root). Each InvalidArgument
/// naming the file; none repeats what it read of a file that is not an
/// archive (tar's own errors quote a header's bytes).
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_from_a_bad_archive_is_named_and_makes_nothing() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ckpt-bad", "runc").await;
    let dir = archive_dir("ckpt-bad");
    let junk = format!("{dir}/junk.tar");
    std::fs::write(&junk, b"not a tar at all, not even close").unwrap();
    // A tar with the metadata but no images.
    let bare = format!("{dir}/bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::write(
        format!("{bare}/config.dump"),
        br#"{"id":"x","name":"c","rootfsImageName":"docker.io/library/busybox:latest"}"#,
    )
    .unwrap();
    std::fs::write(format!("{bare}/spec.dump"), b"{}").unwrap();
    sh(&format!(
        "tar -C {bare} -cf {dir}/noimages.tar config.dump spec.dump"
    ));
    // Images, but one of them a link out of the images directory.
    sh(&format!(
        "mkdir -p {bare}/checkpoint && ln -s /etc/shadow {bare}/checkpoint/pages-1.img && \
         tar -C {bare} -cf {dir}/link.tar config.dump spec.dump checkpoint"
    ));
    // A whole one cut in half.
    sh(&format!(
        "rm {bare}/checkpoint/pages-1.img && head -c 1048576 /dev/urandom > {bare}/checkpoint/pages-1.img && \
         tar -C {bare} -cf {dir}/whole.tar config.dump spec.dump checkpoint && \
         head -c 600000 {dir}/whole.tar > {dir}/cut.tar"
    ));
    // A file of the host's that is not an archive: tar reads its first
    // 512 bytes as a header.
    std::fs::write(
        format!("{dir}/secret.tar"),
        "root:hunter2-hash:19000:0:99999:7:::\n".repeat(20),
    )
    .unwrap();
    // Whole and well formed, but with no seal, or a seal of another key.
    archive(&format!("{dir}/unsealed.tar"), None, None);
    archive(&format!("{dir}/forged.tar"), None, Some(&[b'0'; 64]));
    archive(&format!("{dir}/otherkey.tar"), Some(&[0x42; KEY_LEN]), None);
    for (file, named) in [
        ("junk.tar", "not a checkpoint archive"),
        ("noimages.tar", "no CRIU images"),
        ("link.tar", "plain files"),
        ("cut.tar", "not a checkpoint archive"),
        ("missing.tar", "missing.tar"),
        ("secret.tar", "not a tar archive"),
        ("whole.tar", "carries no podscope.seal"),
        ("unsealed.tar", "carries no podscope.seal"),
        ("forged.tar", "is not this node's key's seal of it"),
        ("otherkey.tar", "is not this node's key's seal of it"),
    ] {
        let before = all_container_traces();
        let path = format!("{dir}/{file}");
        let e = m
            .create_container(&pod, "restored", 0, &path, &ContainerOptions::default())
            .await
            .expect_err("a restore from a bad archive succeeded");
        let (k, msg) = classify(&e);
        assert!(
            matches!(
                k,
                ErrorKind::InvalidArgument | ErrorKind::NotFound | ErrorKind::Internal
            ),
            "{file}: {k:?}: {msg}"
        );
        assert!(
            msg.contains(named),
            "{file}: the error names {named:?}: {msg}"
        );
        assert!(
            !msg.contains("hunter2"),
            "{file}: the error repeats the file: {msg}"
        );
        assert_eq!(
            all_container_traces(),
            before,
            "{file}: a failed restore left something"
        );
    }
    m.remove(&pod).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `manage`-only caller gets neither a root-owned file at a path it
/// names (/etc/cron.d, /etc/ld.so.preload) nor a read of any file through
/// a restore: both are the privilege "checkpoint".
#[tokio::test(flavor = "multi_thread")]
async fn a_manage_only_user_can_neither_checkpoint_nor_restore() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let _rule = manage_only();
    let (pod, _) = log_pod(&m, "ckpt-iso", "runc").await;
    let id = run(&m, &pod, "sleeper", sh_cmd("sleep 600")).await;
    let target = format!("/etc/cron.d/{}", uniq("podscope-ckpt"));
    assert_needs_privileged(
        "a checkpoint into /etc/cron.d",
        busctl_as_nobody(&format!("CheckpointContainer ssa{{sv}} {id} {target} 0")),
    );
    assert!(!Path::new(&target).exists(), "{target} was written");
    assert_needs_privileged(
        "a restore from /etc/shadow",
        busctl_as_nobody(&format!(
            "CreateContainer ssusa{{sv}} {pod} stolen 0 /etc/shadow 0"
        )),
    );
    // A container restored by root: its process is what the archive's
    // images say (CRIU restores their user, capabilities and mounts as
    // root), so starting it, or a process in it, is "checkpoint" too.
    let dir = archive_dir("ckpt-iso");
    let forged = format!("{dir}/forged.tar");
    archive(&forged, None, Some(&[b'0'; 64]));
    // (The daemon makes its key at the first checkpoint, or restore that
    // gets as far as the seal.)
    let _ = m
        .create_container(&pod, "first", 0, &forged, &ContainerOptions::default())
        .await;
    let key: [u8; KEY_LEN] = std::fs::read(KEY)
        .expect("the node's checkpoint key")
        .try_into()
        .expect("a key of 32 bytes");
    let sealed = format!("{dir}/sealed.tar");
    archive(&sealed, Some(&key), None);
    let (restored, _) = m
        .create_container(&pod, "restored", 0, &sealed, &ContainerOptions::default())
        .await
        .expect("a restore from an archive sealed with the node's key is created");
    assert_needs_privileged(
        "StartContainer of a restored container",
        as_nobody(&format!("podscopectl container start {restored}")),
    );
    assert_needs_privileged(
        "Exec in a restored container",
        as_nobody(&format!("podscopectl exec {restored} true </dev/null")),
    );
    m.remove(&pod).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
