//! Pods with a user namespace of their own (Kubernetes' `hostUsers:
//! false`), on the harness's `crun-userns` handler (crun 1.27: idmapped
//! mounts); Debian's crun 1.8.1, the default, cannot and says so.

use crate::containers::*;
use podscope_api::container::{ContainerOptions, Mount, Security};
use podscope_api::sandbox::IdMapping;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::os::unix::fs::MetadataExt;

/// What kubelet gives a pod: 65536 ids from a multiple of 65536.
const HOST_ID: u32 = 65536 * 5;

fn mapping() -> Vec<IdMapping> {
    vec![IdMapping {
        container_id: 0,
        host_id: HOST_ID,
        length: 65536,
    }]
}

fn userns_pod(handler: &str, logs: &str) -> CreateOptions {
    CreateOptions {
        log_directory: Some(logs.to_owned()),
        runtime_handler: Some(handler.to_owned()),
        uid_mappings: Some(mapping()),
        gid_mappings: Some(mapping()),
        ..Default::default()
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

/// The container's root is the image's, owned by the pod's root (an image
/// volume's files too); what it
/// writes there belongs to the pod's ids on the node, what it writes to a
/// node directory bound in belongs to the node's root (an idmapped
/// mount), and its processes run as the pod's ids on the node.
#[tokio::test(flavor = "multi_thread")]
async fn a_pod_in_a_user_namespace_owns_its_root_and_its_volumes() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let vol = format!("/run/podscope-test/{}", uniq("userns-vol"));
    std::fs::create_dir_all(&vol).unwrap();
    std::fs::write(format!("{vol}/from-node"), "node\n").unwrap();
    let logs = format!("/var/log/pods/{}", uniq("userns"));
    let (pod, _) = m
        .create(
            &podscope_test_support::harness::pod(&uniq("userns")),
            &userns_pod("crun-userns", &logs),
        )
        .await
        .unwrap();
    m.start(&pod).await.unwrap();
    let status = m.status(&pod).await.unwrap();
    assert_eq!(status.uid_mappings, mapping(), "Status carries the mapping");
    let o = ContainerOptions {
        mounts: vec![
            Mount {
                container_path: "/vol".into(),
                host_path: vol.clone(),
                ..Default::default()
            },
            Mount {
                container_path: "/img".into(),
                image: BUSYBOX.into(),
                image_sub_path: "etc".into(),
                ..Default::default()
            },
        ],
        ..sh_cmd("exec sleep 600")
    };
    let id = run(&m, &pod, "owner", o).await;
    // The idmapped layers' binds went once the overlays held them.
    let bundle = format!("/var/lib/podscope/containers/{id}");
    assert!(!std::path::Path::new(&format!("{bundle}/rootfs.lower")).exists());
    assert!(!std::path::Path::new(&format!("{bundle}/volumes/1.lower")).exists());
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(".lower"),
        "an idmapped layer is still bound"
    );
    let r = m
        .exec_sync(
            &id,
            &sh(
                "cat /proc/self/uid_map; id -u; stat -c %u:%g /etc/passwd /vol/from-node /img/passwd; \
                 echo x > /written && echo y > /vol/from-pod && echo wrote",
            ),
            10_000,
        )
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.exit_code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    let fields: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(fields, ["0", &HOST_ID.to_string(), "65536"], "{out}");
    assert_eq!(
        &lines[1..],
        ["0", "0:0", "0:0", "0:0", "wrote"],
        "root in the pod; the image's, the node's and an image volume's files root's: {out}"
    );
    let upper = format!("/var/lib/podscope/containers/{id}/upper/written");
    let meta = std::fs::metadata(&upper).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (HOST_ID, HOST_ID),
        "the pod's root writes as the pod's ids on the node"
    );
    let meta = std::fs::metadata(format!("{vol}/from-pod")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (0, 0), "an idmapped volume");
    let st = m.container_status(&id).await.unwrap();
    let uid_line = std::fs::read_to_string(format!("/proc/{}/status", st.main_pid))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .unwrap()
        .to_owned();
    assert!(
        uid_line.split_whitespace().nth(1) == Some(&HOST_ID.to_string()),
        "the container's process is the pod's id on the node: {uid_line}"
    );
    // A privileged container has no place in such a pod.
    let privileged = ContainerOptions {
        security: Security {
            privileged: true,
            ..Default::default()
        },
        ..sh_cmd("true")
    };
    let e = m
        .create_container(&pod, "priv", 0, BUSYBOX, &privileged)
        .await
        .expect_err("a privileged container in a user-namespace pod");
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.contains("security_context.privileged"), "{msg}");
    m.remove(&pod).await.unwrap();
    // Nothing of the idmapped layers is left mounted.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&id), "{id} still mounted");
    std::fs::remove_dir_all(&vol).unwrap();
}

/// A handler whose runtime has no idmapped mounts refuses the pod by
/// name, as a mapping that breaks a rule does; nothing is left.
#[tokio::test(flavor = "multi_thread")]
async fn a_user_namespace_where_it_cannot_be_made_is_refused_by_name() {
    let (m, _c) = manager().await;
    let before = state_dirs();
    let logs = format!("/var/log/pods/{}", uniq("userns-no"));
    let short = vec![IdMapping {
        length: 1000,
        ..mapping()[0]
    }];
    let cases = [
        (
            userns_pod("crun", &logs),
            "runtime handler crun cannot run pods in user namespaces",
        ),
        (
            CreateOptions {
                uid_mappings: Some(short),
                ..userns_pod("crun-userns", &logs)
            },
            "user_namespace.uids: 1000 ids, fewer than 65536",
        ),
        (
            CreateOptions {
                network: Some(NetworkMode::Host),
                ..userns_pod("crun-userns", &logs)
            },
            "cannot use the node's network namespace",
        ),
    ];
    for (o, named) in cases {
        let e = m
            .create(&podscope_test_support::harness::pod(&uniq("userns-no")), &o)
            .await
            .expect_err(named);
        let (k, msg) = classify(&e);
        assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains(named), "names {named:?}: {msg}");
    }
    assert_eq!(state_dirs(), before, "a refused pod left a record");
}
