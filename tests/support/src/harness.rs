//! Helpers for the suites that run in the harness (tests/harness): the
//! daemon's bus, pods and options made short, the node's state read with
//! the shell, configs swapped in and put back, fixture CNI plugins and
//! registries, and where the workspace's own binaries were built.
#![allow(dead_code)]

pub use podscope_api::domain::{NamespaceMode, NetworkMode, State};
pub use podscope_api::errors::classify;
use podscope_api::ErrorKind;
pub use podscope_api::{
    proxy::{system_connection, SandboxProxy},
    Client, Condition, CreateOptions, Dns, ListFilter, PodMetadata, Resources, SandboxStatus,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::process::Command;
use std::time::{Duration, Instant};
use zbus::zvariant::{OwnedObjectPath, Value};
use zbus::Connection;

/// A connection and client; waits (up to 30 s) for the daemon to answer,
/// starting it by D-Bus activation if needed.
pub async fn manager() -> (Client, Connection) {
    let conn = system_connection(Duration::from_secs(60))
        .await
        .expect("system bus");
    let m = Client::new(&conn).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match m.version().await {
            Ok(_) => return (m, conn),
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("podscoped does not answer: {e}"),
        }
    }
}

pub fn uniq(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &podscope_api::domain::SandboxId::random().as_str()[..8]
    )
}

/// A raw `a{sv}`, for the tests that send what a typed client cannot.
pub fn opts(pairs: &[(&'static str, Value<'static>)]) -> HashMap<&'static str, Value<'static>> {
    pairs
        .iter()
        .map(|(k, v)| (*k, v.try_clone().unwrap()))
        .collect()
}

/// Create with raw options (hostile input).
pub async fn create_raw(
    m: &Client,
    pod: &PodMetadata,
    options: HashMap<&str, Value<'_>>,
) -> zbus::Result<(String, OwnedObjectPath)> {
    m.proxy()
        .inner()
        .call(
            "Create",
            &(&pod.name, &pod.namespace, &pod.uid, pod.attempt, options),
        )
        .await
}

/// List with a raw filter (hostile input).
pub async fn list_raw(m: &Client, filter: HashMap<&str, Value<'_>>) -> zbus::Result<()> {
    m.proxy()
        .inner()
        .call::<_, _, Vec<HashMap<String, zbus::zvariant::OwnedValue>>>("List", &(filter,))
        .await
        .map(drop)
}

/// Pod metadata: `name` in `namespace`, uid `uid`, attempt `attempt`.
pub fn pod_in(name: &str, namespace: &str, uid: &str, attempt: u32) -> PodMetadata {
    PodMetadata {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        uid: uid.to_owned(),
        attempt,
    }
}

/// Pod metadata in namespace "default", uid "u", attempt 0.
pub fn pod(name: &str) -> PodMetadata {
    pod_in(name, "default", "u", 0)
}

/// Options for a host-network pod.
pub fn host_net() -> CreateOptions {
    CreateOptions {
        network: Some(NetworkMode::Host),
        ..Default::default()
    }
}

/// Options with these labels.
pub fn labelled(pairs: &[(&str, &str)]) -> CreateOptions {
    CreateOptions {
        labels: Some(string_map(pairs)),
        ..Default::default()
    }
}

pub fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub fn kind(e: zbus::Error) -> ErrorKind {
    classify(&e).0
}

pub async fn create_started(m: &Client, prefix: &str, o: CreateOptions) -> String {
    let (id, _) = m.create(&pod(&uniq(prefix)), &o).await.unwrap();
    m.start(&id).await.unwrap();
    id
}

/// Run a shell command; panics with its output when it fails.
pub fn sh(cmd: &str) -> String {
    let (rc, out, err) = sh_out(cmd);
    assert_eq!(rc, 0, "`{cmd}` failed ({rc}): {out}{err}");
    out
}

/// Prefix that runs a command as `nobody`, with no supplementary groups.
pub const AS_NOBODY: &str = "setpriv --reuid=nobody --regid=nogroup --clear-groups";

/// Run a shell command as `nobody` (see `AS_NOBODY`).
pub fn as_nobody(cmd: &str) -> (i32, String, String) {
    sh_out(&format!("{AS_NOBODY} {cmd}"))
}

pub fn sh_status(cmd: &str) -> i32 {
    sh_out(cmd).0
}

pub fn sh_out(cmd: &str) -> (i32, String, String) {
    let o = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("bash");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub fn ns_of(pid: u32, ns: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{ns}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

pub fn pid_alive(pid: u32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

pub fn checkpoint_exists(id: &str) -> bool {
    std::path::Path::new(&format!("/var/lib/podscope/sandboxes/{id}/checkpoint")).exists()
}

pub fn state_dirs() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/var/lib/podscope/sandboxes")
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "condition not met within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Poll Status until the state is `want`; panics after `timeout`.
pub async fn wait_state(m: &Client, id: &str, want: State, timeout: Duration) -> SandboxStatus {
    let deadline = Instant::now() + timeout;
    loop {
        let st = m.status(id).await.unwrap();
        if st.state == want {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "sandbox {id} not {want} within {timeout:?}: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Poll Status until the pod's machine is recorded (machined registers a
/// pod just after Start answers); panics after 10 s.
pub async fn wait_machine(m: &Client, id: &str) -> SandboxStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = m.status(id).await.unwrap();
        if !st.machine.is_empty() {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "sandbox {id} not registered with machined within 10 s: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn next_signal<S, T>(stream: &mut S, mut pred: impl FnMut(&T) -> bool) -> T
where
    S: futures_util::Stream<Item = T> + Unpin,
{
    use futures_util::StreamExt;
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let s = stream.next().await.expect("signal stream ended");
            if pred(&s) {
                return s;
            }
        }
    })
    .await
    .expect("signal within 5 s")
}

pub async fn introspect(conn: &Connection, path: &str) -> String {
    let p = zbus::fdo::IntrospectableProxy::builder(conn)
        .destination("org.podscope.Sandbox1")
        .unwrap()
        .path(path.to_owned())
        .unwrap()
        .build()
        .await
        .unwrap();
    p.introspect().await.unwrap()
}

/// The tags (comments and whitespace dropped) of `iface` in an
/// introspection document, for comparing the shipped XML with the live one.
pub fn interface_tags(xml: &str, iface: &str) -> Vec<String> {
    let mut s = xml.to_owned();
    while let Some(start) = s.find("<!--") {
        let end = s[start..]
            .find("-->")
            .map(|e| start + e + 3)
            .unwrap_or(s.len());
        s.replace_range(start..end, "");
    }
    let open = format!("<interface name=\"{iface}\">");
    let Some(begin) = s.find(&open) else {
        return Vec::new();
    };
    let body = &s[begin..];
    let end = body
        .find("</interface>")
        .map(|e| e + "</interface>".len())
        .unwrap_or(body.len());
    body[..end]
        .split('<')
        .filter(|t| !t.trim().is_empty())
        .map(|t| format!("<{}", t.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect()
}

const CONFIG: &str = "/etc/podscope/podscope.toml";

/// The harness's podscope.toml (tests/harness/harness.sh, given
/// CRUN_1_27: the runtime handlers crun, runc and crun-userns).
pub const HARNESS_CONFIG: &str = "/usr/local/lib/podscope-test/podscope.toml";

/// The config the tests run on but for their own: the harness's where it
/// wrote one, else the one `make install` shipped (the repository is
/// mounted at the same path inside the harness).
fn default_config() -> &'static str {
    if std::path::Path::new(HARNESS_CONFIG).exists() {
        HARNESS_CONFIG
    } else {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/podscope.toml")
    }
}

/// Put back the default config (`default_config`).
pub fn restore_config() {
    std::fs::copy(default_config(), CONFIG).expect("restore the default podscope.toml");
}

/// Run `f` with podscoped restarted on `config`, then restore the default.
pub async fn with_config<F, Fut>(config: &str, f: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    // Restored even when `f` panics, so one failing test does not leave
    // its config to the next ones.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::copy(default_config(), CONFIG);
            let _ = Command::new("bash")
                .arg("-c")
                .arg("systemctl reset-failed podscoped 2>/dev/null; systemctl restart podscoped")
                .status();
        }
    }
    std::fs::write(CONFIG, config).unwrap();
    daemon("restart");
    let _restore = Restore;
    f().await;
}

/// systemctl VERB podscoped, past systemd's start rate limit (the tests
/// restart the daemon far more often than any operator would).
pub fn daemon(verb: &str) {
    sh(&format!(
        "systemctl reset-failed podscoped 2>/dev/null; systemctl {verb} podscoped"
    ));
}

/// A podscope.toml whose init takes a second to start: a window for
/// hanging up or killing the daemon in the middle of Start.
pub fn slow_init_config() -> String {
    let path = "/run/podscope-test/slow-init";
    std::fs::create_dir_all("/run/podscope-test").unwrap();
    std::fs::write(
        path,
        "#!/bin/sh\nsleep 1\nexec /usr/libexec/podscope/podscope-init \"$@\"\n",
    )
    .unwrap();
    sh(&format!("chmod 755 {path}"));
    format!("init_path = \"{path}\"\n")
}

/// Send Start for `id` from a separate process without waiting for the
/// reply, and return once the (slow) init is running: the daemon is then in
/// the middle of Start. Needs `slow_init_config()` in force.
pub fn start_in_background_slowly(id: &str) {
    sh(&format!(
        "busctl call --timeout=30 org.podscope.Sandbox1 /org/podscope/Sandbox1 \\
         org.podscope.Sandbox1.Manager Start s {id} >/dev/null 2>&1 &"
    ));
    wait_until(Duration::from_secs(5), || {
        sh_status(&format!("pgrep -f 'slow-init --id {id}'")) == 0
    });
}

// ---- pod networking ----

/// Where the harness installs tests/fixtures/cni: podscoped cannot see the
/// checkout (PrivateTmp=, ProtectHome= hide /tmp and /home, where CI and
/// developers keep it), and its plugins run in its sandbox.
pub const FIXTURE_BIN: &str = "/usr/local/lib/podscope-test/cni";
/// Where the tests' own CNI conf dirs and fixture logs live.
const CNI_TEST_ROOT: &str = "/run/podscope-test/cni";

/// A fresh CNI conf dir named `tag` holding `files` (name, content).
pub fn cni_conf_dir(tag: &str, files: &[(&str, String)]) -> String {
    let dir = format!("{CNI_TEST_ROOT}/{tag}");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(format!("{dir}/{name}"), text).unwrap();
    }
    dir
}

/// The fixture's call log for `tag`, emptied: a test's own calls only.
pub fn fresh_fixture_log(tag: &str) -> String {
    let log = fixture_log(tag);
    let _ = std::fs::remove_file(&log);
    log
}

/// The fixture's call log for `tag`.
pub fn fixture_log(tag: &str) -> String {
    std::fs::create_dir_all(CNI_TEST_ROOT).unwrap();
    format!("{CNI_TEST_ROOT}/{tag}.log")
}

pub fn fixture_calls(tag: &str) -> Vec<String> {
    std::fs::read_to_string(fixture_log(tag))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A podscope.toml using `conf_dir`, the fixture plugin and Debian's
/// plugins, and a plugin timeout of `timeout_ms`.
pub fn cni_config(conf_dir: &str, timeout_ms: u64) -> String {
    format!(
        "cni_conf_dir = \"{conf_dir}\"\ncni_bin_dirs = [\"{FIXTURE_BIN}\", \"/usr/lib/cni\"]\n\
         cni_plugin_timeout_ms = {timeout_ms}\n"
    )
}

/// A bridge + host-local network named `name` on `subnet`, followed by
/// the fixture plugin configured with `fixture` (extra JSON keys), if any.
pub fn bridge_conflist(name: &str, bridge: &str, subnet: &str, fixture: Option<&str>) -> String {
    let extra = fixture
        .map(|f| format!(r#",{{"type":"podscope-fixture",{f}}}"#))
        .unwrap_or_default();
    format!(
        r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[
  {{"type":"bridge","bridge":"{bridge}","isGateway":true,
    "ipam":{{"type":"host-local","ranges":[[{{"subnet":"{subnet}"}}]]}}}}{extra}]}}"#
    )
}

/// A network of the fixture plugin alone, in `mode`, handing out `ip`.
pub fn fixture_conflist(version: &str, name: &str, mode: &str, ip: &str, log: &str) -> String {
    format!(
        r#"{{"cniVersion":"{version}","name":"{name}","plugins":[{{"type":"podscope-fixture","mode":"{mode}","ip":"{ip}","log":"{log}"}}]}}"#
    )
}

/// Switch the fixture's mode in sandbox `id`'s cached attachment: DEL and
/// CHECK use the cached config, so this is how a plugin "starts failing".
pub fn set_cached_fixture_mode(id: &str, from: &str, to: &str) {
    let att = attachment_path(id);
    let text = std::fs::read_to_string(&att)
        .unwrap()
        .replace(&format!(r#""mode":"{from}""#), &format!(r#""mode":"{to}""#));
    std::fs::write(&att, text).unwrap();
}

pub fn attachment_path(id: &str) -> String {
    format!("/var/lib/podscope/networks/{id}.json")
}

/// The addresses host-local holds for container `id` on `network`.
pub fn host_local_owner_ips(network: &str, id: &str) -> Vec<String> {
    let dir = format!("/var/lib/cni/networks/{network}");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .parse::<std::net::IpAddr>()
                .is_ok()
        })
        .filter(|e| {
            std::fs::read_to_string(e.path())
                .is_ok_and(|t| t.lines().next().is_some_and(|l| l.trim() == id))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Every address host-local has handed out on `network`.
pub fn host_local_ips(network: &str) -> Vec<String> {
    let dir = format!("/var/lib/cni/networks/{network}");
    std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Run `f` on a thread that has joined the network namespace at `netns`.
pub fn in_netns<T: Send + 'static>(netns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let netns = netns.to_owned();
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&netns).expect("open netns");
        nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("netns thread")
}

pub fn netns_path(id: &str) -> String {
    format!("/run/netns/podscope-{id}")
}

/// List's filter for one pod name.
pub fn by_name(name: &str) -> ListFilter {
    ListFilter {
        name: Some(name.to_owned()),
        ..Default::default()
    }
}

/// Remove every sandbox labelled tag=`tag`.
pub async fn remove_tagged(m: &Client, tag: &str) {
    let filter = ListFilter {
        labels: Some(string_map(&[("tag", tag)])),
        ..Default::default()
    };
    for d in m.list(&filter).await.unwrap() {
        m.remove(&d.id).await.unwrap();
    }
}

/// polkitd stopped (SIGSTOP: it takes calls and answers none) until this
/// is dropped, also when an assertion fails first.
pub struct StalledPolkit;

// No Default: making one stops polkitd.
#[allow(clippy::new_without_default)]
impl StalledPolkit {
    pub fn new() -> Self {
        sh("systemctl start polkit.service && systemctl kill -s STOP polkit.service");
        StalledPolkit
    }
}

impl Drop for StalledPolkit {
    fn drop(&mut self) {
        sh_status("systemctl kill -s CONT polkit.service");
    }
}

// ---- Kubernetes' CRI tools ----

/// The path of a CRI tool from the environment variable `var` (`CRICTL`,
/// `CRITEST`): `make integration` passes the Makefile's, and the harness
/// makes them visible inside at a fixed path. A missing variable or file
/// fails the test: it is never skipped.
pub fn cri_tool(var: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the integration tests with `make integration` (CRICTL=, CRITEST=)")
    });
    let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{var}={path}: {e}"));
    assert!(
        meta.is_file() && meta.permissions().mode() & 0o111 != 0,
        "{var}={path} is not an executable file"
    );
    path
}

/// Kubernetes' crictl (`CRICTL`).
pub fn crictl() -> String {
    cri_tool("CRICTL")
}

/// Kubernetes' critest (`CRITEST`).
pub fn critest() -> String {
    cri_tool("CRITEST")
}

// ---- cleanup of what a test made ----

/// Run `f` to completion on a thread of its own, with its own runtime: for
/// work that must be done from `Drop`, where the test's runtime cannot be
/// blocked on (and may be unwinding). `None` when `f` panicked.
fn on_own_runtime<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> Option<T> {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(f)
    })
    .join()
    .ok()
}

/// The ids of every sandbox and every image.
async fn sandboxes_and_images(m: &Client) -> zbus::Result<(HashSet<String>, HashSet<String>)> {
    let sandboxes = m.list(&ListFilter::default()).await?;
    let images = m.list_images(&Default::default()).await?;
    Ok((
        sandboxes.into_iter().map(|s| s.id).collect(),
        images.into_iter().map(|i| i.id).collect(),
    ))
}

/// Removes, when dropped, every sandbox and every image made since it was
/// created, also when the test fails first (a panic unwinds through it):
/// what one failing test made must not fail the next ones (1000 pods left
/// behind made the next test's List answer larger than its client takes;
/// an image left under another registry's name is one the next test
/// cannot pull cold). Tests run one at a time (run-integration.sh), so
/// what is new is the test's own. Take it first in a test that makes many
/// sandboxes, or images: `let _cleanup = Cleanup::new();`
pub struct Cleanup {
    sandboxes: HashSet<String>,
    images: HashSet<String>,
}

// No Default: making one asks the daemon what is there.
#[allow(clippy::new_without_default)]
impl Cleanup {
    pub fn new() -> Self {
        let (sandboxes, images) = on_own_runtime(async {
            let (m, _) = manager().await;
            sandboxes_and_images(&m).await
        })
        .expect("podscoped answers")
        .expect("List and ListImages before the test");
        Cleanup { sandboxes, images }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (sandboxes, images) = (
            std::mem::take(&mut self.sandboxes),
            std::mem::take(&mut self.images),
        );
        let done = on_own_runtime(async move {
            use futures_util::StreamExt;
            let (m, _) = manager().await;
            // Again until none is left: a Create or Pull the test sent
            // just before it failed may complete after a List.
            for _ in 0..10 {
                let (now_sandboxes, now_images) = sandboxes_and_images(&m).await?;
                let new_sandboxes: Vec<String> =
                    now_sandboxes.difference(&sandboxes).cloned().collect();
                let new_images: Vec<String> = now_images.difference(&images).cloned().collect();
                if new_sandboxes.is_empty() && new_images.is_empty() {
                    return Ok(());
                }
                let removes = new_sandboxes.into_iter().map(|id| {
                    let m = m.clone();
                    async move {
                        if let Err(e) = m.remove(&id).await {
                            eprintln!("cleanup: removing sandbox {id}: {e}");
                        }
                    }
                });
                futures_util::stream::iter(removes)
                    .buffer_unordered(16)
                    .collect::<Vec<()>>()
                    .await;
                for id in new_images {
                    if let Err(e) = m.remove_image(&id).await {
                        eprintln!("cleanup: removing image {id}: {e}");
                    }
                }
            }
            Err(zbus::Error::Failure(
                "sandboxes or images still left after 10 rounds".into(),
            ))
        });
        match done {
            Some(Ok(())) => {}
            Some(Err(e)) => eprintln!("cleanup: what the test made may be left: {e}"),
            None => eprintln!("cleanup: what the test made may be left (the cleanup panicked)"),
        }
    }
}

/// Starts podscoped again when dropped, also when the test fails first: for
/// tests that stop or kill the daemon.
pub struct DaemonBack;

impl Drop for DaemonBack {
    fn drop(&mut self) {
        sh_status("systemctl reset-failed podscoped 2>/dev/null; systemctl start podscoped");
    }
}

/// A registry fixture of the tests' own (a Python script in
/// tests/fixtures) serving plain HTTP on 127.0.0.1:`port` as the transient
/// unit `unit`, marked insecure for podscope in a registries.conf drop-in
/// (read at each pull); stopped and the drop-in removed when dropped.
pub struct FixtureRegistry {
    pub port: u16,
    unit: String,
}

impl FixtureRegistry {
    /// Start `script` (in tests/fixtures) with `args`; it answers /v2/
    /// within `ready_within`.
    pub fn start(unit: &str, port: u16, script: &str, args: &str, ready_within: Duration) -> Self {
        sh(&format!(
            "systemctl stop {unit} 2>/dev/null; systemctl reset-failed {unit} 2>/dev/null; \
             systemd-run --quiet --unit={unit} /usr/bin/python3 {}/../fixtures/{script} {args}",
            env!("CARGO_MANIFEST_DIR")
        ));
        wait_until(ready_within, || {
            sh_status(&format!(
                "curl -sf -o /dev/null http://127.0.0.1:{port}/v2/"
            )) == 0
        });
        std::fs::write(
            Self::dropin(port),
            format!("[[registry]]\nlocation = \"127.0.0.1:{port}\"\ninsecure = true\n"),
        )
        .unwrap();
        FixtureRegistry {
            port,
            unit: unit.to_owned(),
        }
    }

    fn dropin(port: u16) -> String {
        format!("/etc/containers/registries.conf.d/50-fixture-{port}.conf")
    }
}

impl Drop for FixtureRegistry {
    fn drop(&mut self) {
        let _ = sh_status(&format!("systemctl stop {}", self.unit));
        let _ = std::fs::remove_file(Self::dropin(self.port));
    }
}

/// A binary of the workspace's, built beside the test executable that asks
/// (target/debug/deps/NAME-HASH runs; target/debug/NAME is the binary):
/// tests/harness/test-binary.sh builds podscoped with its failpoints and
/// podscope-bench there with the suites.
pub fn built(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a test executable under target/PROFILE/deps");
    let bin = dir.join(name);
    assert!(
        bin.is_file(),
        "{} not built (tests/harness/test-binary.sh builds it)",
        bin.display()
    );
    bin
}
