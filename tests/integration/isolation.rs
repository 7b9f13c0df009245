//! The adversarial suite (issue 41): each way out of a pod or up from
//! `manage` that was found, played by its actor against the real daemon,
//! crun and runc. Each test failed while its hole was open. Nothing of the
//! host is written but what the test made; a global sysctl is opened for
//! appending and never written (busybox's `[ -w ]` answers yes to root
//! without asking the kernel).

use crate::authorization::PolkitRule;
use crate::containers::{pull_busybox, run, sh_cmd, wait_lines, BUSYBOX};
use podscope_api::container::{ContainerOptions, Security};
use podscope_api::domain::NamespaceMode;
use podscope_api::image::PullOptions;
use podscope_api::CreateOptions;
use podscope_test_support::harness::*;
use std::time::Duration;

/// A container's command that runs until SIGTERM (double quotes inside, so
/// that a shell line can wrap it in single quotes).
const IDLE: &str = "trap \"exit 0\" TERM; while :; do sleep 0.1; done";

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
        ..sh_cmd(IDLE)
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
    let id = run(&m, &pod, "own", sh_cmd(IDLE)).await;
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

/// A `manage`-only user, as the shipped example rule makes the group
/// `podscope`: `nobody` granted the plain action, not the privileged one.
/// Held until dropped; polkitd has picked it up when this returns.
pub(crate) fn manage_only() -> PolkitRule {
    let rule = PolkitRule::install(
        "40-podscope-isolation.rules",
        r#"polkit.addRule(function(action, subject) {
    if (action.id == "org.podscope.Sandbox1.manage" && subject.user == "nobody") {
        return polkit.Result.YES;
    }
});
"#,
    );
    let name = uniq("iso-probe");
    let mut made = (1, String::new(), String::new());
    wait_until(Duration::from_secs(15), || {
        made = as_nobody(&format!("podscopectl create {name} --namespace team-a"));
        made.0 == 0
    });
    assert_eq!(made.0, 0, "polkitd took the rule: {}", made.2);
    sh(&format!("podscopectl rm {}", made.1.trim()));
    rule
}

const MANAGER: &str = "org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager";

/// A started pod of namespace team-a, made by the `manage`-only user: its id.
fn team_pod_as_nobody(name: &str) -> String {
    let (rc, pod, err) = as_nobody(&format!(
        "podscopectl create {name} --namespace team-a --start"
    ));
    assert_eq!(rc, 0, "{err}");
    pod.trim().to_owned()
}

/// `busctl call` on the manager, as `nobody`: (status, stdout, stderr).
/// busctl says only "Access denied" for polkit's denial (it hides the
/// message of that error name): each test shows with a call of the same
/// shape that the plain action is granted, so the denial is the
/// privileged action's.
pub(crate) fn busctl_as_nobody(member_and_args: &str) -> (i32, String, String) {
    as_nobody(&format!("busctl -- call {MANAGER} {member_and_args}"))
}

/// A call polkit denied for want of the privileged action: podscopectl
/// and dbus-send print the daemon's message, busctl its own.
pub(crate) fn assert_needs_privileged(what: &str, (rc, out, err): (i32, String, String)) {
    assert_ne!(rc, 0, "{what} was allowed: {out}");
    assert!(
        err.contains("not authorized for org.podscope.Sandbox1.manage-privileged")
            || err.trim() == "Call failed: Access denied",
        "{what}: {err}"
    );
}

/// `dbus-send` to the manager as `nobody`, which prints an error's name
/// and message.
fn dbus_send_as_nobody(member: &str, args: &str) -> (i32, String, String) {
    as_nobody(&format!(
        "dbus-send --system --print-reply --dest=org.podscope.Sandbox1 /org/podscope/Sandbox1 \
         org.podscope.Sandbox1.Manager.{member} {args}"
    ))
}

/// Finding 2, played by a `manage`-only user: a log directory anywhere
/// was plain `manage`, and the daemon made it and wrote the container's
/// output there as root (/etc/cron.d: root). Now one outside log_root
/// (/var/log/pods) is privileged, and one beneath it is opened there with
/// no symbolic link followed.
#[tokio::test(flavor = "multi_thread")]
async fn a_manage_only_user_writes_logs_only_beneath_the_log_root() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let _rule = manage_only();
    let tag = uniq("iso-logs");
    let etc = format!("/etc/{tag}");
    assert_needs_privileged(
        "a log directory in /etc",
        as_nobody(&format!(
            "podscopectl create lp --namespace team-a --log-directory {etc} --start"
        )),
    );
    assert!(!std::path::Path::new(&etc).exists(), "{etc} was made");

    // Beneath the root, a link planted on the way is not followed.
    let planted = format!("/var/log/pods/{tag}");
    let target = format!("/tmp/{tag}-target");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::create_dir_all(&target).unwrap();
    std::os::unix::fs::symlink(&target, format!("{planted}/lnk")).unwrap();
    let (rc, pod, err) = as_nobody(&format!(
        "podscopectl create lp --namespace team-a --log-directory {planted}/lnk --start"
    ));
    assert_eq!(
        rc, 0,
        "a log directory beneath /var/log/pods is manage's: {err}"
    );
    let (rc, out, err) = as_nobody(&format!(
        "podscopectl container create {} c {BUSYBOX} --log-path marker.log --start -- echo marker",
        pod.trim()
    ));
    assert_ne!(
        rc, 0,
        "the container started with its log through a link: {out}"
    );
    assert!(
        err.contains("where no symbolic link is followed"),
        "the error names the link: {err}"
    );
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "nothing was written through the link"
    );

    // A plain log directory beneath the root still works for manage.
    let (rc, pod, err) = as_nobody(&format!(
        "podscopectl create lp2 --namespace team-a --log-directory {planted}/real --start"
    ));
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = as_nobody(&format!(
        "podscopectl container create {} c {BUSYBOX} --log-path c/0.log --start -- echo marker",
        pod.trim()
    ));
    assert_eq!(rc, 0, "{err}");
    wait_lines(
        &format!("{planted}/real/c/0.log"),
        1,
        Duration::from_secs(10),
    )
    .await;
    std::fs::remove_dir_all(&planted).unwrap();
    std::fs::remove_dir_all(&target).unwrap();
}

/// CreateContainer's options as busctl spells them: a shell command and
/// the `security` dictionary's entries (`n` of them, busctl's syntax).
fn create_container_args(pod: &str, name: &str, n: usize, security: &str) -> String {
    format!(
        "CreateContainer ssusa{{sv}} {pod} {name} 0 {BUSYBOX} 2 \
         command as 3 /bin/sh -c '{IDLE}' security a{{sv}} {n} {security}"
    )
}

/// Finding 3, played by a `manage`-only user over the bus: empty
/// masked_paths and readonly_paths left /proc/sys/kernel/core_pattern
/// writable (a crash then runs a program as the host's root). Now fewer
/// masked or read-only paths than the default are privileged; granted
/// (as root), the container does get them. Probed by an open, nothing
/// written.
#[tokio::test(flavor = "multi_thread")]
async fn a_manage_only_user_cannot_unmask_the_kernels_paths() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let _rule = manage_only();
    let pod = team_pod_as_nobody("unmask");
    for (what, security) in [
        ("masked_paths=[]", "masked_paths as 0"),
        ("readonly_paths=[]", "readonly_paths as 0"),
        (
            "masked_paths without /proc/kcore",
            "masked_paths as 1 /proc/acpi",
        ),
    ] {
        assert_needs_privileged(
            what,
            busctl_as_nobody(&create_container_args(&pod, "unmasked", 1, security)),
        );
    }
    // The plain action is granted: the defaults and one more path masked.
    let (rc, out, err) = busctl_as_nobody(&create_container_args(
        &pod,
        "masked-more",
        1,
        &format!(
            "masked_paths as {} {} /proc/cmdline",
            podscope_oci::defaults::masked_paths().len() + 1,
            podscope_oci::defaults::masked_paths().join(" ")
        ),
    ));
    assert_eq!(rc, 0, "more masked paths are manage's: {err}");
    assert!(out.starts_with("so "), "{out}");
    // The same with the privileged action (root here): the hole is real,
    // and a default container does not have it.
    // busybox's `[ -w ]` says yes to root whatever the mount: the probe
    // opens the file for appending and writes nothing (procfs acts on a
    // write, not an open; a read-only mount refuses the open, EROFS).
    let probe = "if (exec 3>>/proc/sys/kernel/core_pattern) 2>/dev/null; \
                 then echo writable; else echo read-only; fi";
    let unmasked = sh(&format!(
        "busctl -- call {MANAGER} {}",
        create_container_args(&pod, "unmasked", 2, "masked_paths as 0 readonly_paths as 0")
    ));
    let unmasked = unmasked.split('"').nth(1).unwrap().to_owned();
    m.start_container(&unmasked).await.unwrap();
    let plain = run(&m, &pod, "plain", sh_cmd(IDLE)).await;
    for (id, want) in [(&unmasked, "writable"), (&plain, "read-only")] {
        let r = m
            .exec_sync(id, &["/bin/sh".into(), "-c".into(), probe.into()], 10_000)
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&r.stdout).trim(), want);
    }
}

/// Finding 5, played by a `manage`-only user: Exec, ExecSync, Attach and
/// StartContainer into a privileged container, or into any container of a
/// pod with the host's namespaces, took plain `manage`, and so did a
/// container added to such a pod and a port forward into it. Each now
/// takes the privileged action; a plain container stays manage's.
#[tokio::test(flavor = "multi_thread")]
async fn a_manage_only_user_gets_no_process_into_host_access() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let _rule = manage_only();
    // Made by root (the operator's grant), in the namespace nobody manages.
    let host_pod = m
        .create(
            &pod_in(&uniq("iso-hostnet"), "team-a", &uniq("u"), 0),
            &CreateOptions {
                network: Some(podscope_api::domain::NetworkMode::Host),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .0;
    m.start(&host_pod).await.unwrap();
    let in_host_pod = run(&m, &host_pod, "plain", sh_cmd(IDLE)).await;
    let pod = m
        .create(
            &pod_in(&uniq("iso-plain"), "team-a", &uniq("u"), 0),
            &CreateOptions::default(),
        )
        .await
        .unwrap()
        .0;
    m.start(&pod).await.unwrap();
    let privileged = || ContainerOptions {
        security: Security {
            privileged: true,
            ..Default::default()
        },
        ..sh_cmd(IDLE)
    };
    let running_privileged = run(&m, &pod, "priv", privileged()).await;
    let (created_privileged, _) = m
        .create_container(&pod, "priv-later", 0, BUSYBOX, &privileged())
        .await
        .unwrap();
    let plain = run(&m, &pod, "plain", sh_cmd(IDLE)).await;

    for target in [&in_host_pod, &running_privileged] {
        assert_needs_privileged(
            "ExecSync",
            dbus_send_as_nobody(
                "ExecSync",
                &format!("string:{target} array:string:true uint64:5000"),
            ),
        );
        assert_needs_privileged(
            "Exec",
            as_nobody(&format!("podscopectl exec {target} true </dev/null")),
        );
        assert_needs_privileged(
            "Attach",
            as_nobody(&format!(
                "timeout 10 podscopectl attach {target} </dev/null"
            )),
        );
    }
    assert_needs_privileged(
        "StartContainer",
        as_nobody(&format!("podscopectl container start {created_privileged}")),
    );
    assert_needs_privileged(
        "CreateContainer in a host-network pod",
        as_nobody(&format!(
            "podscopectl container create {host_pod} added {BUSYBOX} -- true"
        )),
    );
    assert_needs_privileged(
        "PortForward into a host-network pod",
        dbus_send_as_nobody("PortForward", &format!("string:{host_pod} uint16:22")),
    );
    // What is manage's stays so: a plain container in a plain pod.
    let (rc, out, err) = dbus_send_as_nobody(
        "ExecSync",
        &format!("string:{plain} array:string:true uint64:5000"),
    );
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("int32 0"), "{out}");
    let (rc, _, err) = as_nobody(&format!("podscopectl exec {plain} true </dev/null"));
    assert_eq!(rc, 0, "{err}");
    // Stopping and removing what is privileged gives nothing: manage's.
    let (rc, _, err) = as_nobody(&format!("podscopectl container rm {running_privileged}"));
    assert_eq!(rc, 0, "{err}");
}

/// Finding 12, played by a `manage`-only user: a Localhost seccomp profile
/// was read as root from any path (a file-existence oracle, and a FIFO
/// blocked a thread of the daemon forever). Outside seccomp_profile_root it
/// is privileged; any caller's is read as a regular file only.
#[tokio::test(flavor = "multi_thread")]
async fn a_seccomp_profile_is_read_only_beneath_its_root_and_never_from_a_fifo() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let _rule = manage_only();
    let pod = team_pod_as_nobody("seccomp");
    let (rc, _, err) = busctl_as_nobody(&create_container_args(
        &pod,
        "prof-default",
        1,
        "seccomp s runtimedefault",
    ));
    assert_eq!(rc, 0, "RuntimeDefault is manage's: {err}");
    assert_needs_privileged(
        "a profile at /etc/shadow",
        busctl_as_nobody(&create_container_args(
            &pod,
            "prof",
            2,
            "seccomp s localhost seccomp_localhost_ref s /etc/shadow",
        )),
    );
    // Root's call: a FIFO is refused by name, at once.
    let fifo = format!("/tmp/{}.json", uniq("iso-fifo"));
    sh(&format!("mkfifo {fifo}"));
    let o = ContainerOptions {
        security: Security {
            seccomp: podscope_api::domain::container::ProfileKind::Localhost,
            seccomp_localhost_ref: fifo.clone(),
            ..Default::default()
        },
        ..sh_cmd("true")
    };
    let e = tokio::time::timeout(
        Duration::from_secs(20),
        m.create_container(&pod, "fifo", 0, BUSYBOX, &o),
    )
    .await
    .expect("CreateContainer answered")
    .unwrap_err();
    assert_eq!(
        kind(e.clone()),
        podscope_api::ErrorKind::InvalidArgument,
        "{e}"
    );
    assert!(
        e.to_string().contains("is a FIFO, not a regular file"),
        "{e}"
    );
    std::fs::remove_file(&fifo).unwrap();
}

/// Finding 4, played by a `manage`-only user and the container's root: an
/// exec handed the caller's descriptors to the command as they were, and
/// container root reopened them through /proc/self/fd with its own rights
/// (a directory as stdin listed the host's `/` and read /etc/shadow; a
/// file the caller may only read, reopened for writing). Now podscoped
/// takes pipes and sockets only (checked with fstat), and podscopectl
/// relays anything else through a pipe of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_callers_descriptors_reach_a_container_only_as_pipes_or_sockets() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let _rule = manage_only();
    let pod = team_pod_as_nobody("fds");
    let (rc, ctr, err) = as_nobody(&format!(
        "podscopectl container create {pod} c {BUSYBOX} --start -- sh -c '{IDLE}'"
    ));
    assert_eq!(rc, 0, "{err}");
    let ctr = ctr.trim().to_owned();
    let probe = "stat -L -c %F /proc/self/fd/0; ls /proc/self/fd/0/ 2>&1 | head -c 200; \
                 head -c 5 /proc/self/fd/0/etc/shadow 2>&1; echo; echo end";
    // The host's `/` as stdin.
    let (rc, out, err) = as_nobody(&format!("podscopectl exec -i {ctr} sh -c '{probe}' < /"));
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "fifo", "the command's stdin is a pipe: {out}");
    assert!(
        !out.contains("root:"),
        "the host's /etc/shadow was read: {out}"
    );
    assert_eq!(
        lines[1..3],
        [
            "ls: /proc/self/fd/0/: Not a directory",
            "head: /proc/self/fd/0/etc/shadow: Not a directory"
        ],
        "the host's / was not listed: {out}"
    );
    // A file the caller may only read: what the command gets is a pipe
    // with its bytes, not the file.
    let readonly = format!("/tmp/{}", uniq("iso-readonly"));
    std::fs::write(&readonly, "kept\n").unwrap();
    let (rc, out, err) = as_nobody(&format!(
        "podscopectl exec -i {ctr} sh -c 'stat -L -c %F /proc/self/fd/0; cat' < {readonly}"
    ));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "fifo\nkept\n");
    // Output to a file of the caller's comes back through the relay.
    let (rc, _, err) = as_nobody(&format!(
        "podscopectl exec -i {ctr} sh -c 'stat -L -c %F /proc/self/fd/1' </dev/null > /tmp/{}-out",
        readonly.trim_start_matches("/tmp/")
    ));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(format!("{readonly}-out")).unwrap(),
        "fifo\n"
    );
    std::fs::remove_file(format!("{readonly}-out")).unwrap();
    std::fs::remove_file(&readonly).unwrap();

    // A client that hands them over anyway is refused, by name.
    use podscope_api::exec::ExecOptions;
    use std::os::fd::AsFd;
    let opts = ExecOptions {
        stdin: true,
        stdout: false,
        stderr: false,
        tty: false,
        timeout_ms: 0,
    };
    let (_mine, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    for (what, file) in [
        ("a directory", std::fs::File::open("/").unwrap()),
        (
            "a regular file",
            std::fs::File::open("/etc/hostname").unwrap(),
        ),
        (
            "a character device (a terminal?)",
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/ptmx")
                .unwrap(),
        ),
    ] {
        let e = m
            .exec(
                &ctr,
                &["true".into()],
                &opts,
                &[file.as_fd()],
                theirs.as_fd(),
            )
            .await
            .unwrap_err();
        assert_eq!(
            kind(e.clone()),
            podscope_api::ErrorKind::InvalidArgument,
            "{e}"
        );
        assert!(
            e.to_string()
                .contains(&format!("stdio[0]: {what}: only a pipe or a socket")),
            "{what}: {e}"
        );
    }
}

/// Finding 12, second half, played by any local user: Images.Status is
/// open to all, and it carried every image's config document, a private
/// image's environment and build history among it. Now only root's
/// callers get the document.
#[tokio::test(flavor = "multi_thread")]
async fn an_images_config_is_roots_callers_only() {
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let call = format!(
        "busctl -- call org.podscope.Sandbox1 /org/podscope/Sandbox1 \
         org.podscope.Sandbox1.Images Status s {BUSYBOX}"
    );
    let as_root = sh(&call);
    assert!(as_root.contains("PATH="), "root sees the config: {as_root}");
    let (rc, as_other, err) = as_nobody(&call);
    assert_eq!(rc, 0, "reading stays open: {err}");
    assert!(as_other.contains("\"config\" s \"\""), "{as_other}");
    assert!(!as_other.contains("PATH="), "{as_other}");
}

/// The hostile registry (tests/fixtures/hostile-registry.py) on `port`,
/// marked insecure for podscope, until dropped.
struct HostileRegistry(FixtureRegistry);

impl HostileRegistry {
    fn start(port: u16) -> Self {
        HostileRegistry(FixtureRegistry::start(
            &format!("podscope-test-hostile-{port}"),
            port,
            "hostile-registry.py",
            &port.to_string(),
            // It builds its images (a 64 MiB bomb among them) first.
            Duration::from_secs(20),
        ))
    }

    fn name(&self, repo: &str) -> String {
        format!("127.0.0.1:{}/hostile/{repo}:latest", self.0.port)
    }
}

/// What the image store holds: its layers and its work directories.
fn store_entries() -> (usize, usize) {
    let count = |d: &str| std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0);
    (
        count("/var/lib/podscope/images/layers"),
        count("/var/lib/podscope/images/tmp"),
    )
}

/// Findings 7 and 11, played by a registry: a layer named by a sha512
/// digest was never checked (only sha256 was); a layer's uncompressed
/// size and a tar header's payload had no cap (a few MB of zstd could make
/// podscoped allocate gigabytes). Each pull now fails, named, and leaves
/// nothing in the store; a plain image from the same registry pulls.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_registrys_layers_are_refused_and_leave_nothing() {
    let _cleanup = Cleanup::new();
    let reg = HostileRegistry::start(5097);
    let config = format!(
        "layer_max_bytes = {}\n{}",
        16 << 20,
        std::fs::read_to_string(HARNESS_CONFIG).unwrap()
    );
    with_config(&config, || async {
        let (m, _c) = manager().await;
        let before = store_entries();
        for (repo, want, says) in [
            (
                "sha512-lie",
                podscope_api::ErrorKind::RegistryUnavailable,
                "content does not match its digest (got sha512:",
            ),
            (
                "bomb",
                podscope_api::ErrorKind::InvalidArgument,
                "more than 16777216 bytes uncompressed (podscope.toml's layer_max_bytes)",
            ),
            (
                "pax",
                podscope_api::ErrorKind::InvalidArgument,
                "a PAX header of 2097",
            ),
        ] {
            let e = m
                .pull_image(&reg.name(repo), &PullOptions::default())
                .await
                .unwrap_err();
            assert_eq!(kind(e.clone()), want, "{repo}: {e}");
            assert!(e.to_string().contains(says), "{repo}: {e}");
            assert!(
                m.image_status(&reg.name(repo)).await.is_err(),
                "{repo}: no image recorded"
            );
            assert_eq!(store_entries(), before, "{repo}: nothing left in the store");
        }
        m.pull_image(&reg.name("plain"), &PullOptions::default())
            .await
            .unwrap();
        m.remove_image(&reg.name("plain")).await.unwrap();
    })
    .await;
}

/// Findings 9 and 10, played by an image's author: a whiteout named `.wh..`
/// or `.wh...` (the directory itself, the one above) reached
/// remove_dir_all on the layer directory's parent; a layer whose `etc` is a
/// link to the host's /etc had the user lookup read the host's passwd (a
/// user of the host's, none of the image's, resolved). Now the whiteouts
/// are refused by name, nothing left in the store, and the lookup finds no
/// such user in the image.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_authors_whiteouts_and_links_reach_nothing_of_the_hosts() {
    let _cleanup = Cleanup::new();
    let reg = HostileRegistry::start(5096);
    let (m, _c) = manager().await;
    let before = store_entries();
    for (repo, target) in [("whiteout-dot", "\".\""), ("whiteout-dotdot", "\"..\"")] {
        let e = m
            .pull_image(&reg.name(repo), &PullOptions::default())
            .await
            .unwrap_err();
        assert_eq!(
            kind(e.clone()),
            podscope_api::ErrorKind::InvalidArgument,
            "{e}"
        );
        assert!(
            e.to_string()
                .contains(&format!("a whiteout of {target} names no file")),
            "{repo}: {e}"
        );
        assert_eq!(store_entries(), before, "{repo}: nothing left in the store");
    }
    assert!(
        sh("getent passwd _apt").starts_with("_apt:"),
        "the host has the user the image names"
    );
    let image = reg.name("etc-link");
    m.pull_image(&image, &PullOptions::default()).await.unwrap();
    let pod = create_started(&m, "iso-etc-link", CreateOptions::default()).await;
    let e = m
        .create_container(&pod, "c", 0, &image, &ContainerOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        kind(e.clone()),
        podscope_api::ErrorKind::InvalidArgument,
        "{e}"
    );
    assert!(e.to_string().contains("_apt"), "the user is named: {e}");
    m.remove(&pod).await.unwrap();
    m.remove_image(&image).await.unwrap();
}

/// Finding 8, played by a streaming client: on the WebSocket
/// `*.base64.*` subprotocols a text frame that began with a multi-byte
/// character was sliced inside it, and the panic aborted podscope-cri with
/// every CRI call and session. Now it carries nothing, the session goes
/// on, and the frontend is the same process.
#[tokio::test(flavor = "multi_thread")]
async fn a_streaming_clients_frame_cannot_kill_the_frontend() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let pod = create_started(&m, "iso-ws", CreateOptions::default()).await;
    let id = run(&m, &pod, "cat", sh_cmd("exec sleep 3600")).await;
    let req = cri_api::v1::ExecRequest {
        container_id: id.clone(),
        cmd: vec!["cat".into()],
        stdin: true,
        stdout: true,
        stderr: false,
        ..Default::default()
    };
    let url = crate::streaming::cri_client()
        .await
        .exec(req)
        .await
        .unwrap()
        .into_inner()
        .url;
    let (pid, _, _) = crate::streaming::frontend();
    // "é" first, then base64 of "ok\n" on stdin (channel 0), then the end.
    let script = format!(
        "import asyncio, base64, websockets\n\
         async def main():\n\
         \x20   async with websockets.connect('ws://{}', subprotocols=['v4.base64.channel.k8s.io']) as ws:\n\
         \x20       await ws.send('\\u00e9tat')\n\
         \x20       await ws.send('0' + base64.b64encode(b'ok\\n').decode())\n\
         \x20       while True:\n\
         \x20           m = await asyncio.wait_for(ws.recv(), 20)\n\
         \x20           if m[0] == '1' and base64.b64decode(m[1:]) == b'ok\\n':\n\
         \x20               print('echoed'); return\n\
         asyncio.run(main())\n",
        url.trim_start_matches("http://")
    );
    let path = format!("/run/{}.py", uniq("iso-ws"));
    std::fs::write(&path, script).unwrap();
    let (rc, out, err) = sh_out(&format!("timeout 60 /usr/bin/python3 {path}"));
    std::fs::remove_file(&path).unwrap();
    assert_eq!((rc, out.trim()), (0, "echoed"), "{err}");
    assert_eq!(
        crate::streaming::frontend().0,
        pid,
        "podscope-cri is the same process"
    );
    m.remove(&pod).await.unwrap();
}
