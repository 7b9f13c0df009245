//! Bad input to CreateContainer and StartContainer: each a named error that
//! changes nothing; afterwards no unit, mount or runtime directory of the
//! container is left.

use crate::containers::*;
use podscope_api::container::{ContainerOptions, Mount, Security};
use podscope_api::domain::container::ContainerState;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::{Duration, Instant};

/// A CreateContainer that must fail with `want`, its message naming
/// `named`, and leave the node as it was.
async fn create_fails(
    m: &Client,
    pod: &str,
    image: &str,
    o: ContainerOptions,
    want: ErrorKind,
    named: &str,
) {
    let before = all_container_traces();
    let listed = m.list_containers(&Default::default()).await.unwrap().len();
    let e = m
        .create_container(pod, "bad", 0, image, &o)
        .await
        .expect_err("CreateContainer of bad input succeeded");
    let (k, msg) = classify(&e);
    assert_eq!(k, want, "{msg}");
    assert!(msg.contains(named), "the error names {named:?}: {msg}");
    assert_eq!(
        all_container_traces(),
        before,
        "a failed CreateContainer left something"
    );
    assert_eq!(
        m.list_containers(&Default::default()).await.unwrap().len(),
        listed
    );
}

/// A StartContainer that must fail, within `within`, with one of `want`, its
/// message naming `named`: the container is then Exited (StartError) and
/// nothing of it runs or is mounted, its runtime directory gone; a
/// RemoveContainer then removes its bundle. Every way it falls short is
/// reported at once.
async fn start_fails(m: &Client, id: &str, want: &[ErrorKind], named: &str, within: Duration) {
    let t0 = Instant::now();
    let e = m
        .start_container(id)
        .await
        .expect_err("StartContainer of a bad container succeeded");
    let took = t0.elapsed();
    let (k, msg) = classify(&e);
    let mut problems = Vec::new();
    if !want.contains(&k) {
        problems.push(format!("its error is {k:?}, not one of {want:?}"));
    }
    if !msg.contains(named) {
        problems.push(format!("its error does not name {named:?}"));
    }
    if took > within {
        problems.push(format!("it took {took:?}, more than {within:?}"));
    }
    let s = m.container_status(id).await.unwrap();
    if (s.state, s.reason.as_str()) != (ContainerState::Exited, "StartError") {
        problems.push(format!("the container is {:?} ({})", s.state, s.reason));
    }
    let left = container_traces(id);
    if !left.is_empty() {
        problems.push(format!("it left {left:?}"));
    }
    assert!(
        problems.is_empty(),
        "StartContainer {id} failed ({msg}), but:\n  {}",
        problems.join("\n  ")
    );
    m.remove_container(id).await.unwrap();
    assert_eq!(container_traces(id), Vec::<String>::new());
    assert!(!std::path::Path::new(&bundle_dir(id)).exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_not_present_is_not_found() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    let (pod, _) = log_pod(&m, "ctr-e-img", "").await;
    create_fails(
        &m,
        &pod,
        "registry.example/not/here:1",
        sh_cmd("true"),
        ErrorKind::NotFound,
        "not/here",
    )
    .await;
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mount_with_dotdot_is_invalid() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-e-dotdot", "").await;
    let o = ContainerOptions {
        mounts: vec![Mount {
            container_path: "/data".into(),
            host_path: "/var/lib/../../etc".into(),
            ..Default::default()
        }],
        ..sh_cmd("true")
    };
    create_fails(
        &m,
        &pod,
        BUSYBOX,
        o,
        ErrorKind::InvalidArgument,
        "host_path",
    )
    .await;
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_user_is_invalid() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-e-user", "").await;
    let o = ContainerOptions {
        security: Security {
            run_as_username: "no-such-user".into(),
            ..Default::default()
        },
        ..sh_cmd("true")
    };
    create_fails(
        &m,
        &pod,
        BUSYBOX,
        o,
        ErrorKind::InvalidArgument,
        "no-such-user",
    )
    .await;
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_in_a_stopped_pod_is_invalid_state() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-e-stopped", "").await;
    m.stop(&pod).await.unwrap();
    create_fails(
        &m,
        &pod,
        BUSYBOX,
        sh_cmd("true"),
        ErrorKind::InvalidState,
        &pod,
    )
    .await;
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_not_in_the_image_fails_the_start_naming_it() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    for handler in ["crun", "runc"] {
        let (pod, _) = log_pod(&m, &format!("ctr-e-cmd-{handler}"), handler).await;
        let (id, _) = m
            .create_container(
                &pod,
                "nocmd",
                0,
                BUSYBOX,
                &ContainerOptions {
                    command: vec!["/bin/not-in-the-image".into()],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        start_fails(
            &m,
            &id,
            &[ErrorKind::RuntimeFailed],
            "not-in-the-image",
            Duration::from_secs(10),
        )
        .await;
        m.remove(&pod).await.unwrap();
    }
}

/// podscope.toml with the default runtimes and `extra` handlers
/// (`[runtimes.X]` tables replace the defaults whole).
fn runtimes_config(extra: &str, start_timeout_ms: u64) -> String {
    format!(
        "start_timeout_ms = {start_timeout_ms}\n\
         [runtimes.crun]\npath = \"/usr/bin/crun\"\n\
         [runtimes.runc]\npath = \"/usr/bin/runc\"\n{extra}"
    )
}

/// podscope.toml (`runtimes_config`) with a handler `name` of kind crun
/// whose binary is the shell script `body`, written to
/// /run/podscope-test/runtime-<name>.
fn script_runtime(name: &str, body: &str, start_timeout_ms: u64) -> String {
    let script = format!("/run/podscope-test/runtime-{name}");
    std::fs::create_dir_all("/run/podscope-test").unwrap();
    std::fs::write(&script, body).unwrap();
    sh(&format!("chmod 755 {script}"));
    runtimes_config(
        &format!("[runtimes.{name}]\npath = \"{script}\"\nkind = \"crun\"\n"),
        start_timeout_ms,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_handler_whose_binary_is_missing_is_named() {
    let _cleanup = Cleanup::new();
    let missing = "/usr/local/lib/podscope-test/no-such-runtime";
    let config = runtimes_config(
        &format!("[runtimes.ghost]\npath = \"{missing}\"\nkind = \"crun\"\n"),
        10_000,
    );
    with_config(&config, || async {
        let (m, _c) = manager().await;
        pull_busybox(&m).await;
        let (pod, _) = log_pod(&m, "ctr-e-ghost", "ghost").await;
        create_fails(
            &m,
            &pod,
            BUSYBOX,
            sh_cmd("true"),
            ErrorKind::RuntimeFailed,
            missing,
        )
        .await;
        m.remove(&pod).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_that_hangs_fails_the_start_within_the_start_timeout_leaving_no_unit() {
    let _cleanup = Cleanup::new();
    // It answers podscoped's feature probe (`features`, `--version`) at
    // once, as a runtime stuck on one container does; only what runs the
    // container hangs.
    let config = script_runtime(
        "hang",
        "#!/bin/sh\ncase \"$1\" in features|--version) exit 1 ;; esac\nexec sleep 600\n",
        3000,
    );
    with_config(&config, || async {
        let (m, _c) = manager().await;
        pull_busybox(&m).await;
        let (pod, _) = log_pod(&m, "ctr-e-hang", "hang").await;
        let (id, _) = m
            .create_container(&pod, "hang", 0, BUSYBOX, &sh_cmd("true"))
            .await
            .unwrap();
        let unit = format!("podscope-ctr-{id}.service");
        // Whatever the test finds, the hanging runtime is not left to the
        // next tests (systemd would wait 90 s for its ExecStopPost).
        struct KillUnit(String);
        impl Drop for KillUnit {
            fn drop(&mut self) {
                sh_status(&format!(
                    "systemctl kill -s KILL {0} 2>/dev/null; systemctl stop {0} 2>/dev/null; \
                     systemctl reset-failed {0} 2>/dev/null",
                    self.0
                ));
            }
        }
        let _kill = KillUnit(unit.clone());
        // Timed out: by podscoped's own wait or by systemd's start
        // timeout (the job's result), whichever says so first; within the
        // 3 s start timeout and a second for the rest.
        start_fails(
            &m,
            &id,
            &[ErrorKind::Timeout, ErrorKind::SystemdFailed],
            &unit,
            Duration::from_secs(4),
        )
        .await;
        assert_eq!(
            sh_status("pgrep -f '^sleep 600$' >/dev/null"),
            1,
            "the hanging runtime was killed"
        );
        m.remove(&pod).await.unwrap();
    })
    .await;
}

/// The unit's `ExecStopPost=` (the runtime's `delete`) runs inside the
/// pod's cgroup, where kubelet, cleaning up a pod's slice, SIGKILLs every
/// process it finds. A delete killed so leaves the runtime's state, and
/// RemoveContainer deletes it.
#[tokio::test(flavor = "multi_thread")]
async fn runtime_state_a_killed_exec_stop_post_left_is_deleted_at_remove() {
    let _cleanup = Cleanup::new();
    // crun, but a `delete` run in a container's unit dies by SIGKILL.
    let config = script_runtime(
        "killed",
        "#!/bin/sh\n\
         case \" $* \" in *' delete '*) grep -q podscope-ctr- /proc/self/cgroup && kill -9 $$ ;; esac\n\
         exec /usr/bin/crun \"$@\"\n",
        10_000,
    );
    with_config(&config, || async {
        let (m, _c) = manager().await;
        pull_busybox(&m).await;
        let (pod, _) = log_pod(&m, "ctr-e-killed-delete", "killed").await;
        let id = run(&m, &pod, "sleeper", sh_cmd("exec sleep 600")).await;
        let state = format!("/run/crun/{id}");
        m.stop_container(&id, 0).await.unwrap();
        // What the unit's own delete leaves, when it is killed.
        sh(&format!("systemctl stop podscope-ctr-{id}.service"));
        assert!(
            std::path::Path::new(&state).is_dir(),
            "the unit's delete was killed: {state} is still there"
        );
        m.remove_container(&id).await.unwrap();
        assert!(
            !std::path::Path::new(&state).exists(),
            "{state} outlived RemoveContainer"
        );
        assert!(m.container_status(&id).await.is_err(), "the record is gone");
        m.remove(&pod).await.unwrap();
    })
    .await;
}

/// An image volume's image must be in the store (kubelet pulls it first):
/// NotFound naming the mount, nothing made.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_volume_of_a_missing_image_is_not_found() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-e-imgvol", "").await;
    let o = ContainerOptions {
        mounts: vec![Mount {
            container_path: "/vol".into(),
            image: "registry.example/not/here:1".into(),
            ..Default::default()
        }],
        ..sh_cmd("true")
    };
    create_fails(&m, &pod, BUSYBOX, o, ErrorKind::NotFound, "mounts[0].image").await;
    m.remove(&pod).await.unwrap();
}

/// An image volume on crun and runc: the image's directory read-only at
/// its place; a sub path the image lacks fails the start naming it, and
/// leaves nothing mounted.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_volume_is_the_images_directory_read_only_and_a_bad_sub_path_is_named_at_create() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let volume = |sub: &str| ContainerOptions {
        mounts: vec![Mount {
            container_path: "/vol".into(),
            image: BUSYBOX.into(),
            image_sub_path: sub.into(),
            ..Default::default()
        }],
        ..sh_cmd("sleep 600")
    };
    for handler in ["crun", "runc"] {
        let (pod, _) = log_pod(&m, &format!("ctr-e-imgvol-{handler}"), handler).await;
        let (id, _) = m
            .create_container(&pod, "vol", 0, BUSYBOX, &volume("etc"))
            .await
            .unwrap();
        m.start_container(&id).await.unwrap();
        let sh = |script: &str| vec!["/bin/sh".to_owned(), "-c".into(), script.into()];
        let r = m
            .exec_sync(&id, &sh("head -n1 /vol/passwd && touch /vol/x"), 10_000)
            .await
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr),
        );
        assert!(out.starts_with("root:"), "{handler}: {out} {err}");
        assert!(
            r.exit_code != 0 && err.contains("Read-only file system"),
            "{handler}: {} {err}",
            r.exit_code
        );
        // Named at Create, as kubelet expects (CreateContainerError).
        create_fails(
            &m,
            &pod,
            BUSYBOX,
            volume("not/in/it"),
            ErrorKind::InvalidArgument,
            "mounts[0].image_sub_path: \"not/in/it\" is not in image",
        )
        .await;
        create_fails(
            &m,
            &pod,
            BUSYBOX,
            volume("etc/passwd"),
            ErrorKind::InvalidArgument,
            "mounts[0].image_sub_path: \"etc/passwd\" is not a directory in image",
        )
        .await;
        m.remove(&pod).await.unwrap();
    }
}
