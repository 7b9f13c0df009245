//! podscope-device-plugin: a kubelet device plugin for the tests (`make
//! e2e`), on the device plugin API v1beta1. It advertises `example.com/dev`
//! (two devices, dev0 and dev1) and answers Allocate with CDI device names,
//! whose spec it writes: what the container gets is the runtime's reading
//! of that spec.
//!
//!   podscope-device-plugin [--plugin-dir DIR] [--cdi-dir DIR] [--state-dir DIR]
//!
//!   --plugin-dir  kubelet's device plugin directory, where kubelet.sock is
//!                 and the plugin's socket goes (/var/lib/kubelet/device-plugins)
//!   --cdi-dir     where the CDI spec is written (/var/run/cdi)
//!   --state-dir   the devices' host side: a character device node and a
//!                 directory to mount for each (/run/podscope-test-devices)
//!
//! It runs until SIGTERM or SIGINT, then removes all it made. A
//! registration kubelet refuses, or a kubelet that does not answer within
//! 30 s, ends it with status 1 and the reason on stderr.

use podscope_test_devices::device_plugin::{self, Plugin, API_VERSION, DEVICES, RESOURCE, SOCKET};
use podscope_test_devices::deviceplugin::v1beta1 as api;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

const KUBELET_SOCKET: &str = "kubelet.sock";
/// How long kubelet's socket may take to answer (it is there from its
/// start on; after a restart of kubelet, once its device manager is up).
const KUBELET_WAIT: Duration = Duration::from_secs(30);
/// How often the plugin looks for its socket: kubelet removes every socket
/// in its directory when it starts, which is a plugin's sign to register
/// again.
const SOCKET_POLL: Duration = Duration::from_millis(500);

struct Args {
    plugin_dir: PathBuf,
    cdi_dir: PathBuf,
    state_dir: PathBuf,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        plugin_dir: "/var/lib/kubelet/device-plugins".into(),
        cdi_dir: "/var/run/cdi".into(),
        state_dir: "/run/podscope-test-devices".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let slot = match flag.as_str() {
            "--plugin-dir" => &mut a.plugin_dir,
            "--cdi-dir" => &mut a.cdi_dir,
            "--state-dir" => &mut a.state_dir,
            _ => return Err(format!("unknown argument {flag:?}")),
        };
        *slot = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .into();
    }
    Ok(a)
}

fn say(what: impl std::fmt::Display) {
    eprintln!("podscope-device-plugin: {what}");
}

/// The devices' host side and their CDI spec. The spec is written last and
/// by rename, so a runtime never reads one whose nodes are not there yet.
fn make_devices(a: &Args) -> Result<(), String> {
    let dir = &a.state_dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for d in DEVICES {
        let node = d.host_node(dir);
        let _ = std::fs::remove_file(&node);
        nix::sys::stat::mknod(
            &node,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(d.major.into(), d.minor.into()),
        )
        .map_err(|e| format!("mknod {} c {} {}: {e}", node.display(), d.major, d.minor))?;
        // Whatever the umask: the node is as open as /dev/null's own.
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o666))
            .map_err(|e| format!("chmod {}: {e}", node.display()))?;
        let mount = d.host_mount(dir);
        std::fs::create_dir_all(&mount).map_err(|e| format!("{}: {e}", mount.display()))?;
        std::fs::write(mount.join("name"), format!("{}\n", d.id))
            .map_err(|e| format!("{}/name: {e}", mount.display()))?;
    }
    std::fs::create_dir_all(&a.cdi_dir).map_err(|e| format!("{}: {e}", a.cdi_dir.display()))?;
    let spec = a.cdi_dir.join(device_plugin::SPEC_FILE);
    let tmp = a.cdi_dir.join(format!(".{}.tmp", device_plugin::SPEC_FILE));
    let text = serde_json::to_vec_pretty(&device_plugin::cdi_spec(dir)).unwrap();
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &spec))
        .map_err(|e| format!("{}: {e}", spec.display()))?;
    say(format!("CDI spec {} written", spec.display()));
    Ok(())
}

fn remove_devices(a: &Args) {
    let _ = std::fs::remove_file(a.cdi_dir.join(device_plugin::SPEC_FILE));
    let _ = std::fs::remove_file(a.plugin_dir.join(SOCKET));
    let _ = std::fs::remove_dir_all(&a.state_dir);
}

/// Serve the DevicePlugin service on a fresh socket; the task serving it.
fn serve(socket: &Path) -> Result<tokio::task::JoinHandle<()>, String> {
    let _ = std::fs::remove_file(socket);
    let listener = tokio::net::UnixListener::bind(socket)
        .map_err(|e| format!("listen on {}: {e}", socket.display()))?;
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let server = tonic::transport::Server::builder()
        .add_service(api::device_plugin_server::DevicePluginServer::new(Plugin))
        .serve_with_incoming(incoming);
    Ok(tokio::spawn(async move {
        if let Err(e) = server.await {
            say(format!("serving: {e}"));
        }
    }))
}

/// Register with kubelet: its socket dialled until it answers (within
/// KUBELET_WAIT); a refusal is final.
async fn register(plugin_dir: &Path) -> Result<(), String> {
    let kubelet = plugin_dir.join(KUBELET_SOCKET);
    let deadline = Instant::now() + KUBELET_WAIT;
    let channel = loop {
        match podscope_test_devices::connect(&kubelet).await {
            Ok(c) => break c,
            Err(e) if Instant::now() >= deadline => {
                return Err(format!(
                    "kubelet's {} did not answer within {KUBELET_WAIT:?}: {}",
                    kubelet.display(),
                    causes(&e)
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let mut client = api::registration_client::RegistrationClient::new(channel);
    client
        .register(api::RegisterRequest {
            version: API_VERSION.to_owned(),
            endpoint: SOCKET.to_owned(),
            resource_name: RESOURCE.to_owned(),
            options: Some(api::DevicePluginOptions::default()),
        })
        .await
        .map_err(|e| {
            format!(
                "kubelet refused the registration of {RESOURCE}: {}",
                causes(&e)
            )
        })?;
    Ok(())
}

/// An error and its sources, as one line (tonic's transport error says
/// only "transport error" itself).
fn causes(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        line.push_str(&format!(": {s}"));
        source = s.source();
    }
    line
}

/// Whether `socket` is still the socket this plugin bound (inode `ino`).
fn still_ours(socket: &Path, ino: u64) -> bool {
    std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket() && m.ino() == ino)
}

async fn run(a: &Args) -> Result<(), String> {
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let socket = a.plugin_dir.join(SOCKET);
    loop {
        let server = serve(&socket)?;
        let ino = std::fs::metadata(&socket)
            .map_err(|e| format!("{}: {e}", socket.display()))?
            .ino();
        register(&a.plugin_dir).await?;
        say(format!(
            "registered {RESOURCE} ({API_VERSION}) with kubelet, serving {}",
            socket.display()
        ));
        let gone = loop {
            tokio::select! {
                _ = term.recv() => break false,
                _ = int.recv() => break false,
                () = tokio::time::sleep(SOCKET_POLL) => {
                    if !still_ours(&socket, ino) {
                        break true;
                    }
                }
            }
        };
        // Not a graceful shutdown: kubelet's ListAndWatch stays open as
        // long as the plugin serves, so waiting for it would never end.
        server.abort();
        if !gone {
            say("stopping");
            return Ok(());
        }
        say(format!(
            "{} was removed (kubelet restarted): registering again",
            socket.display()
        ));
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            say(e);
            return ExitCode::from(2);
        }
    };
    let result = match make_devices(&a) {
        Ok(()) => run(&a).await,
        Err(e) => Err(e),
    };
    remove_devices(&a);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(format!("FAILED: {e}"));
            ExitCode::FAILURE
        }
    }
}
