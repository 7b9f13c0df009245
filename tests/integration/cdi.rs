//! CDI devices (issue 43), in the harness's own /etc/cdi and /var/run/cdi
//! (the daemon's defaults; the harness's root is a throw-away overlay and
//! its /run a tmpfs): what a device's spec says reaches the container on
//! crun and runc through crictl (CRI's CDI_devices and the cdi.k8s.io/
//! annotations), specs are seen as they change, bad specs and bad names
//! are named errors that make nothing, and a `manage`-only caller needs the
//! privilege "CDI devices" for them.
//!
//! Each test has a kind of its own (`example.com/<uniq>`), so they run
//! side by side in the shared directories.

use crate::authorization::PolkitRule;
use crate::containers::{log_pod, pull_busybox, sh_cmd, wait_container, BUSYBOX};
use podscope_api::container::{ContainerFilter, ContainerOptions};
use podscope_api::domain::container::ContainerState;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const ETC: &str = "/etc/cdi";
const RUN: &str = "/var/run/cdi";
const EP: &str = "unix:///run/podscope/cri.sock";

/// A test's spec files and host objects, removed when dropped.
struct Fixture {
    /// `example.com/<class>`.
    kind: String,
    /// Host objects: device nodes, a shared directory, a hook, markers.
    dir: PathBuf,
    files: Vec<PathBuf>,
}

impl Fixture {
    fn new(prefix: &str) -> Fixture {
        let class = uniq(prefix);
        let dir = PathBuf::from(format!("/run/podscope-test-cdi/{class}"));
        std::fs::create_dir_all(dir.join("markers")).unwrap();
        std::fs::create_dir_all(ETC).unwrap();
        std::fs::create_dir_all(RUN).unwrap();
        // Two devices no container has by default on either runtime
        // (runc allows /dev/net/tun of its own accord): /dev/fuse's
        // numbers and /dev/loop-control's, both opened without effect.
        sh(&format!(
            "mknod -m 0666 {0}/fuse c 10 229 && mknod -m 0666 {0}/loopctl c 10 237",
            dir.display()
        ));
        for d in ["dev0", "dev1"] {
            std::fs::create_dir_all(dir.join("share").join(d)).unwrap();
            std::fs::write(dir.join("share").join(d).join("name"), d).unwrap();
        }
        // The hook records the state the runtime gives it, by hook name.
        let hook = dir.join("hook");
        std::fs::write(&hook, "#!/bin/sh\nexec /bin/cat > \"$1/$2.json\"\n").unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fixture {
            kind: format!("example.com/{class}"),
            dir,
            files: Vec::new(),
        }
    }

    fn device(&self, name: &str) -> String {
        format!("{}={name}", self.kind)
    }

    fn path(&self, rel: &str) -> String {
        self.dir.join(rel).display().to_string()
    }

    /// Write `text` as `dir/name`, staged and renamed in as drivers do.
    fn write(&mut self, dir: &str, name: &str, text: &str) -> PathBuf {
        let path = Path::new(dir).join(name);
        let tmp = Path::new(dir).join(format!(".{name}"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        self.files.push(path.clone());
        path
    }

    /// The spec this file's tests use: dev0 and dev1, each with a device
    /// node, its env and its directory; the spec's own edits (once however
    /// many of its devices are asked for): an env, a read-only node, a
    /// group, and hooks at createRuntime and poststop.
    fn spec(&self) -> Value {
        let dev = |name: &str| {
            json!({
                "name": name,
                "containerEdits": {
                    "env": [format!("EXAMPLE_DEV={name}")],
                    "deviceNodes": [{
                        "path": format!("/dev/example-{name}"),
                        "hostPath": self.path("fuse"),
                        "fileMode": 0o640,
                        "uid": 1000,
                        "gid": 44
                    }],
                    "mounts": [{
                        "hostPath": self.path(&format!("share/{name}")),
                        "containerPath": "/run/example-dev",
                        "options": ["ro", "nosuid", "nodev", "bind"]
                    }]
                }
            })
        };
        let hook = |point: &str| {
            json!({
                "hookName": point,
                "path": self.path("hook"),
                "args": ["hook", self.path("markers"), point]
            })
        };
        json!({
            "cdiVersion": "0.6.0",
            "kind": self.kind,
            "devices": [dev("dev0"), dev("dev1")],
            "containerEdits": {
                "env": ["EXAMPLE_KIND=example"],
                "deviceNodes": [{
                    "path": "/dev/example-ro",
                    "hostPath": self.path("loopctl"),
                    "permissions": "r"
                }],
                "additionalGids": [4242],
                "hooks": [hook("createRuntime"), hook("poststop")]
            }
        })
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn crictl_cmd(args: &str) -> String {
    format!(
        "{} --runtime-endpoint {EP} --image-endpoint {EP} {args}",
        crictl()
    )
}

/// What the container prints of its devices, env, mount and groups.
const PROBE: &str = "stat -c 'node=%F %t:%T %a %u %g' /dev/example-dev0; \
    (exec 3<>/dev/example-dev0) && echo open=ok; \
    (exec 3</dev/example-ro) && echo ro-read=ok; \
    (exec 3<>/dev/example-ro) 2>/dev/null || echo ro-write=denied; \
    echo env=$EXAMPLE_DEV,$EXAMPLE_KIND; \
    echo share=$(cat /run/example-dev/name); \
    id -G | tr ' ' '\\n' | grep -qx 4242 && echo gid=4242";

/// A device asked for through CRI's CDI_devices by crictl (a real
/// client), its kind's other device through a cdi.k8s.io/ annotation: the
/// container gets the node (numbers, mode, owner; open), the read-only
/// node readable and not writable (the device cgroup: systemd's
/// DeviceAllow= on crun, runc's own rules), the env, the mount, the group;
/// the createRuntime hook ran with the container's state, the poststop
/// hook once it is removed; crictl inspect names the devices.
async fn a_cdi_device_reaches_the_container_through_crictl(handler: &str) {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let mut f = Fixture::new(&format!("cri-{handler}"));
    let spec = f.spec().to_string();
    f.write(RUN, &format!("{}.json", f.kind.replace('/', "_")), &spec);
    let work = f.path("crictl");
    std::fs::create_dir_all(&work).unwrap();
    let logs = format!("/var/log/pods/{}", uniq("cdi"));
    let pod_json = json!({
        "metadata": {"name": uniq("cdi"), "namespace": "default", "uid": uniq("u")},
        "log_directory": logs,
        "linux": {}
    });
    let ctr_json = json!({
        "metadata": {"name": "probe"},
        "image": {"image": BUSYBOX},
        "command": ["/bin/sh", "-c", PROBE],
        "log_path": "probe.log",
        "CDI_devices": [{"name": f.device("dev0")}],
        "annotations": {"cdi.k8s.io/test-plugin_1": f.device("dev1")}
    });
    std::fs::write(format!("{work}/pod.json"), pod_json.to_string()).unwrap();
    std::fs::write(format!("{work}/ctr.json"), ctr_json.to_string()).unwrap();
    let pod = sh(&crictl_cmd(&format!(
        "runp --runtime {handler} {work}/pod.json"
    )))
    .trim()
    .to_owned();
    let id = sh(&crictl_cmd(&format!(
        "create {pod} {work}/ctr.json {work}/pod.json"
    )))
    .trim()
    .to_owned();
    sh(&crictl_cmd(&format!("start {id}")));
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(30)).await;
    let out = sh(&crictl_cmd(&format!("logs {id}")));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "node=character special file a:e5 640 1000 44",
            "open=ok",
            "ro-read=ok",
            "ro-write=denied",
            // dev1 came second (the annotation): its env wins.
            "env=dev1,example",
            "share=dev1",
            "gid=4242",
        ],
        "{handler}: {}",
        sh(&crictl_cmd(&format!("logs {id} 2>&1 >/dev/null")))
    );
    let marker = std::fs::read_to_string(f.dir.join("markers/createRuntime.json"))
        .expect("the createRuntime hook ran");
    assert!(marker.contains(&id), "{marker}");

    let inspect: Value = serde_json::from_str(&sh(&crictl_cmd(&format!("inspect {id}")))).unwrap();
    // crictl shows the verbose "info" value's object as its "info".
    let info = match &inspect["info"]["info"] {
        Value::String(s) => serde_json::from_str(s).unwrap(),
        Value::Null => inspect["info"].clone(),
        v => v.clone(),
    };
    assert_eq!(
        info["cdi_devices"],
        json!([f.device("dev0"), f.device("dev1")]),
        "{info}"
    );
    assert_eq!(info["cdi_spec_files"].as_array().map(Vec::len), Some(1));

    sh(&crictl_cmd(&format!("rm {id}")));
    wait_until(Duration::from_secs(10), || {
        f.dir.join("markers/poststop.json").exists()
    });
    sh(&crictl_cmd(&format!("rmp -f {pod}")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cdi_device_reaches_the_container_through_crictl_crun() {
    a_cdi_device_reaches_the_container_through_crictl("crun").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cdi_device_reaches_the_container_through_crictl_runc() {
    a_cdi_device_reaches_the_container_through_crictl("runc").await;
}

/// A container with the CDI device `device` runs `script` to exit 0.
async fn runs_to_0(m: &Client, pod: &str, device: &str, script: &str) {
    let o = ContainerOptions {
        cdi_devices: vec![device.to_owned()],
        ..sh_cmd(script)
    };
    let (id, _) = m
        .create_container(pod, &uniq("ok"), 0, BUSYBOX, &o)
        .await
        .unwrap_or_else(|e| panic!("{device}: {e}"));
    m.start_container(&id).await.unwrap();
    wait_container(m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.exit_code, 0, "{device}: {s:?}");
}

/// The containers of a pod: none after a refused create.
async fn containers_of(m: &Client, pod: &str) -> usize {
    m.list_containers(&ContainerFilter {
        pod_id: Some(pod.to_owned()),
        ..Default::default()
    })
    .await
    .unwrap()
    .len()
}

async fn refused(m: &Client, pod: &str, devices: &[String], why: &str) {
    let o = ContainerOptions {
        cdi_devices: devices.to_vec(),
        ..sh_cmd("true")
    };
    let e = m
        .create_container(pod, &uniq("bad"), 0, BUSYBOX, &o)
        .await
        .map(|(id, _)| id)
        .expect_err(&format!("{devices:?} was refused"));
    let (k, msg) = classify(&e);
    assert_eq!(k, ErrorKind::InvalidArgument, "{devices:?}: {msg}");
    assert!(msg.contains(why), "{devices:?}: {msg}");
    assert_eq!(containers_of(m, pod).await, 0, "{devices:?} made nothing");
}

/// Every kind of bad input a named error, the device in it, nothing made;
/// a spec file that does not parse named in the journal and in
/// RuntimeStatus, and the other specs still working.
#[tokio::test(flavor = "multi_thread")]
async fn bad_cdi_devices_and_specs_are_named_errors_that_make_nothing() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "cdi-bad", "").await;
    let mut f = Fixture::new("bad");
    let kind = f.kind.clone();
    let spec = |devices: Value| {
        json!({"cdiVersion": "0.6.0", "kind": kind, "devices": devices}).to_string()
    };
    let node = |name: &str, host: &str| json!({"name": name, "containerEdits": {"deviceNodes": [{"path": "/dev/x", "hostPath": host}]}});
    let good = f.path("fuse");
    f.write(
        ETC,
        &format!("{}-a.json", &kind[12..]),
        &spec(json!([node("twice", &good), node("ok", &good)])),
    );
    f.write(
        ETC,
        &format!("{}-b.json", &kind[12..]),
        &spec(json!([node("twice", &good)])),
    );
    f.write(
        RUN,
        &format!("{}-c.json", &kind[12..]),
        &spec(json!([
            node("gone", "/dev/podscope-test-no-such-device"),
            {"name": "hook", "containerEdits": {"hooks": [
                {"hookName": "createContainer", "path": f.path("share/dev0/name")}
            ]}},
            {"name": "net", "containerEdits": {"netDevices": [
                {"hostInterfaceName": "eth9", "name": "net0"}
            ]}}
        ])),
    );
    let broken = f.write(
        RUN,
        &format!("{}-d.yaml", &kind[12..]),
        &format!("cdiVersion: 0.6.0\nkind: {kind}\ndevices: [{{name: late}}\n"),
    );

    refused(
        &m,
        &pod,
        &["gpu0".into()],
        "cdi_devices[0]: \"gpu0\" is not a CDI device name",
    )
    .await;
    refused(&m, &pod, &[format!("{kind}=")], "empty device name").await;
    refused(&m, &pod, &[f.device("nothing")], &format!("CDI device {kind}=nothing: no spec in /etc/cdi, /var/run/cdi defines it (its kind's devices:")).await;
    refused(
        &m,
        &pod,
        &["nobody.example/none=0".into()],
        "nobody.example/none=0: no spec in",
    )
    .await;
    refused(
        &m,
        &pod,
        &[f.device("twice")],
        &format!("CDI device {kind}=twice: defined by /etc/cdi/"),
    )
    .await;
    refused(
        &m,
        &pod,
        &[f.device("gone")],
        "host path /dev/podscope-test-no-such-device: No such file",
    )
    .await;
    refused(
        &m,
        &pod,
        &[f.device("hook")],
        "name: is not an executable file",
    )
    .await;
    refused(
        &m,
        &pod,
        &[f.device("net")],
        "netDevices (host interface eth9 as net0)",
    )
    .await;
    // The device of the file that does not parse: refused, naming it.
    refused(
        &m,
        &pod,
        &[f.device("late")],
        &format!("spec {} is in error", broken.display()),
    )
    .await;
    // A good device beside a bad one: nothing either.
    refused(
        &m,
        &pod,
        &[f.device("ok"), f.device("gone")],
        "No such file",
    )
    .await;

    // The broken file is in the journal by name, and in RuntimeStatus.
    let broken_s = broken.display().to_string();
    wait_until(Duration::from_secs(10), || {
        sh(&format!(
            "journalctl -u podscoped -o cat CDI_SPEC={broken_s} --no-pager | grep -c 'its devices are refused' || true"
        ))
        .trim()
            != "0"
    });
    let info = runtime_info_when(&m, |i| {
        i.cdi_spec_errors.iter().any(|e| e.starts_with(&broken_s))
    })
    .await;
    assert!(info
        .cdi_spec_errors
        .iter()
        .any(|e| e.starts_with(&format!("{kind}=twice: defined by"))));
    // The good device of the same kind still works.
    runs_to_0(&m, &pod, &f.device("ok"), "test -c /dev/x").await;
    m.remove(&pod).await.unwrap();
}

/// A spec added while the daemon runs is seen by the next create; one
/// removed after a create changes nothing made (the container starts with
/// its device); RuntimeStatus and podscopectl info list kinds and devices.
#[tokio::test(flavor = "multi_thread")]
async fn specs_are_seen_as_they_change_and_a_made_container_keeps_its_device() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "cdi-change", "").await;
    let mut f = Fixture::new("change");
    let o = ContainerOptions {
        cdi_devices: vec![f.device("dev0")],
        ..sh_cmd("test -c /dev/example-dev0 && test \"$EXAMPLE_DEV\" = dev0")
    };
    // Not there yet.
    let e = m
        .create_container(&pod, "early", 0, BUSYBOX, &o)
        .await
        .unwrap_err();
    assert_eq!(kind(e), ErrorKind::InvalidArgument);
    // Written as YAML (what nvidia-ctk writes), while the daemon runs.
    let spec = f.spec();
    let yaml = json_as_yaml(&spec);
    let file = f.write(RUN, &format!("{}.yaml", f.kind.replace('/', "_")), &yaml);
    let (id, _) = m
        .create_container(&pod, "made", 0, BUSYBOX, &o)
        .await
        .unwrap();
    let info = runtime_info_when(&m, |i| i.cdi_kinds.contains(&f.kind)).await;
    assert!(info.cdi_devices.contains(&f.device("dev1")));
    assert_eq!(info.cdi_spec_dirs, [ETC, RUN]);
    let printed = sh("podscopectl info");
    assert!(
        printed.contains(&format!("  {}", f.device("dev0"))),
        "{printed}"
    );
    // Gone before Start: the container was made with it, and has it.
    std::fs::remove_file(&file).unwrap();
    m.start_container(&id).await.unwrap();
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    let s = m.container_status(&id).await.unwrap();
    assert_eq!(s.exit_code, 0, "{s:?}");
    assert_eq!(s.cdi_devices, [f.device("dev0")]);
    // RuntimeStatus looks again at most once a second.
    let gone = runtime_info_when(&m, |i| !i.cdi_kinds.contains(&f.kind)).await;
    assert!(!gone.cdi_devices.contains(&f.device("dev0")));
    let e = m
        .create_container(&pod, "late", 0, BUSYBOX, &o)
        .await
        .unwrap_err();
    assert_eq!(kind(e), ErrorKind::InvalidArgument);
    m.remove(&pod).await.unwrap();
}

/// RuntimeStatus's info once `f` holds of it (it looks at the spec
/// directories again at most once a second), within 10 s.
async fn runtime_info_when(
    m: &Client,
    f: impl Fn(&podscope_api::RuntimeInfo) -> bool,
) -> podscope_api::RuntimeInfo {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, info, _) = m.runtime_status().await.unwrap();
        if f(&info) {
            return info;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "RuntimeStatus never showed it: {:?} {:?}",
            info.cdi_devices,
            info.cdi_spec_errors
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A JSON value as YAML, by hand (block style, as nvidia-ctk writes):
/// every string quoted as JSON quotes it, which YAML reads alike.
fn json_as_yaml(v: &Value) -> String {
    fn walk(v: &Value, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match v {
                        Value::Object(_) | Value::Array(_) => {
                            out.push_str(&format!("{pad}{k}:\n"));
                            walk(v, indent + 2, out);
                        }
                        _ => out.push_str(&format!("{pad}{k}: {v}\n")),
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    let mut inner = String::new();
                    walk(item, indent + 2, &mut inner);
                    match item {
                        Value::Object(_) | Value::Array(_) => {
                            out.push_str(&format!("{pad}- {}\n", inner.trim_start().trim_end()));
                        }
                        _ => out.push_str(&format!("{pad}- {item}\n")),
                    }
                }
            }
            _ => out.push_str(&format!("{pad}{v}\n")),
        }
    }
    let mut out = String::new();
    walk(v, 0, &mut out);
    out
}

/// podscoped's resident memory, from /proc.
fn daemon_rss_kib() -> u64 {
    let pid = sh("systemctl show -P MainPID podscoped").trim().to_owned();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A spec file of 100 MiB is refused by its size, never read; a directory
/// of 10,000 files is read to the bound (1024 files) and named: the
/// daemon's memory stays within a few MiB of what it was, and devices of
/// the files read still work.
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_spec_and_a_crowded_directory_cost_the_daemon_little() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "cdi-huge", "").await;
    let mut f = Fixture::new("huge");
    let spec = f.spec().to_string();
    let good = f.write(ETC, &format!("{}.json", f.kind.replace('/', "_")), &spec);
    // A crowd in a directory of its own under /etc/cdi would not be read
    // (CDI reads no subdirectory): it goes to /var/run/cdi, named to sort
    // after every other test's file.
    let crowd = f.dir.join("crowd");
    std::fs::create_dir_all(&crowd).unwrap();
    let class = f.kind[12..].to_owned();
    sh(&format!(
        "cd {} && for i in $(seq -w 0 9999); do printf '{{\"cdiVersion\":\"0.6.0\",\"kind\":\"crowd.example/{class}\",\"devices\":[{{\"name\":\"d%s\"}}]}}' $i > zz-{class}-$i.json; done && chmod 0644 * && mv * {RUN}/",
        crowd.display()
    ));
    let huge = Path::new(ETC).join(format!("{class}-huge.json"));
    sh(&format!("truncate -s 100M {}", huge.display()));
    f.files.push(huge.clone());
    let before = daemon_rss_kib();
    let info = runtime_info_when(&m, |i| {
        i.cdi_spec_errors
            .iter()
            .any(|e| e.starts_with(&format!("{RUN}: holds")))
    })
    .await;
    let after = daemon_rss_kib();
    sh(&format!("rm -f {RUN}/zz-{class}-*.json"));
    assert!(
        info.cdi_spec_errors.iter().any(|e| e.starts_with(&format!(
            "{}: is 104857600 bytes, more than the 4194304 podscope reads",
            huge.display()
        ))),
        "{:?}",
        info.cdi_spec_errors
    );
    assert!(
        info.cdi_spec_errors
            .iter()
            .any(|e| e.starts_with(&format!("{RUN}: holds"))
                && e.contains("podscope reads 1024 in all")),
        "{:?}",
        info.cdi_spec_errors
    );
    assert!(
        after < before + 32 * 1024,
        "podscoped's RSS went from {before} KiB to {after} KiB"
    );
    // The devices of the files read still work.
    assert!(good.exists());
    runs_to_0(&m, &pod, &f.device("dev0"), "test -c /dev/example-dev0").await;
    m.remove(&pod).await.unwrap();
}

/// A `manage`-only user's CDI device is the privileged action, with the
/// privilege "CDI devices" alone; a rule granting just that (the shipped
/// example's) lets it through, and still no host path.
#[tokio::test(flavor = "multi_thread")]
async fn a_cdi_device_is_a_privilege_of_its_own() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let mut f = Fixture::new("polkit");
    let spec = f.spec().to_string();
    f.write(RUN, &format!("{}.json", f.kind.replace('/', "_")), &spec);
    let _manage = PolkitRule::install(
        "40-podscope-cdi-manage.rules",
        r#"polkit.addRule(function(action, subject) {
    if (action.id == "org.podscope.Sandbox1.manage" && subject.user == "nobody") {
        return polkit.Result.YES;
    }
});
"#,
    );
    let name = uniq("cdi-polkit");
    let mut made = (1, String::new(), String::new());
    wait_until(Duration::from_secs(15), || {
        made = as_nobody(&format!(
            "podscopectl create {name} --namespace gpu-team --start"
        ));
        made.0 == 0
    });
    assert_eq!(made.0, 0, "polkitd took the rule: {}", made.2);
    let pod = made.1.trim().to_owned();
    let create = |extra: &str| {
        as_nobody(&format!(
            "podscopectl --no-ask-password container create {pod} {} {BUSYBOX} {extra} -- true",
            uniq("c")
        ))
    };
    let (rc, _, err) = create(&format!("--device {}", f.device("dev0")));
    assert_ne!(rc, 0);
    assert!(
        err.contains(
            "not authorized for org.podscope.Sandbox1.manage-privileged (it takes: CDI devices)"
        ),
        "{err}"
    );
    let _cdi = PolkitRule::install(
        "40-podscope-cdi-devices.rules",
        r#"polkit.addRule(function(action, subject) {
    if (action.id == "org.podscope.Sandbox1.manage-privileged" &&
        subject.user == "nobody" &&
        action.lookup("namespace") == "gpu-team" &&
        action.lookup("privileges") == "CDI devices") {
        return polkit.Result.YES;
    }
});
"#,
    );
    let mut granted = (1, String::new(), String::new());
    wait_until(Duration::from_secs(15), || {
        granted = create(&format!("--device {}", f.device("dev0")));
        granted.0 == 0
    });
    assert_eq!(granted.0, 0, "{}", granted.2);
    let (rc, _, err) = create("--device /dev/fuse");
    assert_ne!(rc, 0, "a host device is still not granted");
    assert!(err.contains("(it takes: devices)"), "{err}");
    m.remove(&pod).await.unwrap();
}
