//! The adversarial suite (issue 41): each way out of a pod or up from
//! `manage` that was found, played by its actor against the real daemon,
//! crun and runc. Each test failed while its hole was open. Nothing of the
//! host is written but what the test made; a global sysctl is probed with
//! access(2), never written.

use crate::common::*;
use crate::containers::{pull_busybox, run, sh_cmd};
use podscope::api::container::{ContainerOptions, Security};
use podscope::api::CreateOptions;
use podscope::domain::NamespaceMode;

/// What a container's root finds of PID 1's files: one line per file,
/// `<name> denied` or `<name> <what it read>`.
const PROC1_PROBE: &str = r#"
for d in root cwd; do
  if l=$(ls -A /proc/1/$d/ 2>/dev/null); then echo "$d $(echo $l)"; else echo "$d denied"; fi
done
# The numbers of the open descriptors are listed to any root (the directory
# is root's); what they are is ptrace-guarded.
t=""
for n in $(ls /proc/1/fd/ 2>/dev/null); do
  r=$(readlink /proc/1/fd/$n 2>/dev/null) && t="$t $n=$r"
  head -c 0 /proc/1/fd/$n 2>/dev/null && t="$t $n:opened"
done
if [ -n "$t" ]; then echo "fd$t"; else echo "fd denied"; fi
for f in environ mem exe; do
  if head -c 1 /proc/1/$f >/dev/null 2>&1; then echo "$f readable"; else echo "$f denied"; fi
done
if head -c 5 /proc/1/root/etc/shadow >/dev/null 2>&1; then echo "shadow readable"; else echo "shadow denied"; fi
if [ -e /proc/1/root/run/podscope ]; then echo "run/podscope seen"; else echo "run/podscope unseen"; fi
"#;

async fn probe_pid1(m: &Client, ctr: &str) -> String {
    let r = m
        .exec_sync(
            ctr,
            &["/bin/sh".into(), "-c".into(), PROC1_PROBE.into()],
            20_000,
        )
        .await
        .unwrap();
    assert_eq!(
        r.exit_code,
        0,
        "the probe ran: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    String::from_utf8_lossy(&r.stdout).into_owned()
}

/// Finding 1, played by a container's root with the default capabilities:
/// in a pod that shares its PID namespace the pod's init is PID 1, and
/// through its `/proc/1/root` the container read the host's /etc/shadow
/// and reached /run/podscope (the CRI socket: the whole node). Now the
/// init is not dumpable and runs as 65535: none of its files opens; with
/// CAP_SYS_PTRACE (a privileged grant) its root is an empty tmpfs.
async fn a_containers_root_reaches_nothing_of_the_host_through_the_pods_init(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let pod = create_started(
        &m,
        "iso-init",
        CreateOptions {
            runtime_handler: Some(handler.to_owned()),
            pid_namespace: Some(NamespaceMode::Pod),
            ..Default::default()
        },
    )
    .await;
    let status = m.status(&pod).await.unwrap();
    let init = status.init_pid;
    let shared = |caps: &[&str]| ContainerOptions {
        security: Security {
            pid_namespace: NamespaceMode::Pod,
            capabilities_add: caps.iter().map(|c| (*c).to_owned()).collect(),
            ..Default::default()
        },
        ..sh_cmd("trap 'exit 0' TERM; while :; do sleep 0.1; done")
    };
    let plain = run(&m, &pod, "plain", shared(&[])).await;
    let seen = probe_pid1(&m, &plain).await;
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        [
            "root denied",
            "cwd denied",
            "fd denied",
            "environ denied",
            "mem denied",
            "exe denied",
            "shadow denied",
            "run/podscope unseen"
        ],
        "a container's root opens none of the init's files:\n{seen}"
    );

    // The operator's grant of CAP_SYS_PTRACE opens them: they hold nothing
    // of the host (the threat model says what the descriptors are).
    let tracer = run(&m, &pod, "tracer", shared(&["CAP_SYS_PTRACE"])).await;
    let seen = probe_pid1(&m, &tracer).await;
    let lines: Vec<_> = seen.lines().collect();
    assert_eq!(lines[0], "root ", "the init's root is empty:\n{seen}");
    assert_eq!(
        lines[1], "cwd ",
        "the init's cwd is its empty root:\n{seen}"
    );
    assert_eq!(
        &lines[6..],
        ["shadow denied", "run/podscope unseen"],
        "{seen}"
    );
    let r = m
        .exec_sync(
            &tracer,
            &[
                "/bin/sh".into(),
                "-c".into(),
                "wc -c < /proc/1/environ".into(),
            ],
            10_000,
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&r.stdout).trim(),
        "0",
        "the init's environment is empty"
    );
    // Seen from the host: the init's root holds nothing, and it keeps no
    // privilege.
    let root: Vec<_> = std::fs::read_dir(format!("/proc/{init}/root"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(root.is_empty(), "the init's root is empty: {root:?}");
    let st = std::fs::read_to_string(format!("/proc/{init}/status")).unwrap();
    let field = |name: &str| {
        st.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {st}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(field("Uid:"), "65535 65535 65535 65535");
    assert_eq!(field("Gid:"), "65535 65535 65535 65535");
    assert_eq!(field("Groups:"), "");
    assert_eq!(field("CapEff:"), "0000000000000000");
    assert_eq!(field("CapBnd:"), "0000000000000000");
    assert_eq!(field("NoNewPrivs:"), "1");
    assert_ne!(
        ns_of(init, "mnt"),
        ns_of(std::process::id(), "mnt"),
        "the init has a mount namespace of its own"
    );

    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_containers_root_reaches_nothing_of_the_host_through_the_pods_init_crun() {
    a_containers_root_reaches_nothing_of_the_host_through_the_pods_init("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_containers_root_reaches_nothing_of_the_host_through_the_pods_init_runc() {
    a_containers_root_reaches_nothing_of_the_host_through_the_pods_init("runc").await;
}

/// Finding 1 with the pod's PID namespace not shared: the init is in no
/// container's view at all (PID 1 is the container's own process, and no
/// process of the container's namespace is podscope's).
#[tokio::test(flavor = "multi_thread")]
async fn a_container_of_its_own_pid_namespace_sees_no_process_of_podscopes() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let pod = create_started(&m, "iso-own-pid", CreateOptions::default()).await;
    let id = run(
        &m,
        &pod,
        "own",
        sh_cmd("trap 'exit 0' TERM; while :; do sleep 0.1; done"),
    )
    .await;
    let r = m
        .exec_sync(
            &id,
            &[
                "/bin/sh".into(),
                "-c".into(),
                "cat /proc/[0-9]*/comm | sort -u | tr '\\n' ' '".into(),
            ],
            10_000,
        )
        .await
        .unwrap();
    let comms = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(
        !comms.contains("podscope"),
        "no process of podscope's is in the container's view: {comms}"
    );
    assert!(
        comms.contains("sh"),
        "the probe saw the container's own: {comms}"
    );
    m.remove(&pod).await.unwrap();
}
