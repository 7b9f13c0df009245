//! podscope-cri: the CRI v1 gRPC frontend (kubelet's
//! `--container-runtime-endpoint unix:///run/podscope/cri.sock`).

use libsystemd::daemon::{self, NotifyState};
use podscope::{cri, logging};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info};

const USAGE: &str =
    "usage: podscope-cri [--listen PATH] [--call-timeout SECONDS] [--config PATH] [--version]

Serves the CRI v1 RuntimeService and ImageService over gRPC, translating
each call to org.podscope.Sandbox1 on the system bus. Normally started by
systemd through podscope-cri.socket (/run/podscope/cri.sock); with --listen
it binds PATH itself. The streaming server (exec, attach, port-forward)
listens where the config file (default /etc/podscope/podscope.toml) says.
PODSCOPE_LOG sets the log filter (default: info;
debug logs every call).";

fn main() -> ExitCode {
    let mut listen: Option<PathBuf> = None;
    let mut config = PathBuf::from(podscope::settings::DEFAULT_CONFIG_PATH);
    // Longer than any one daemon operation (a stop timeout plus CNI DEL).
    let mut call_timeout = Duration::from_secs(240);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => match args.next() {
                Some(p) => listen = Some(p.into()),
                None => {
                    eprintln!("podscope-cri: --listen needs a path\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--call-timeout" => {
                match args.next().and_then(|s| s.parse::<u64>().ok()) {
                    Some(s) if s > 0 => call_timeout = Duration::from_secs(s),
                    _ => {
                        eprintln!("podscope-cri: --call-timeout needs a positive number of seconds\n{USAGE}");
                        return ExitCode::from(2);
                    }
                }
            }
            "--config" => match args.next() {
                Some(p) => config = p.into(),
                None => {
                    eprintln!("podscope-cri: --config needs a path\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--version" => {
                println!("podscope-cri {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("podscope-cri: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    logging::init("podscope-cri");
    podscope::descriptors::raise_at_start("podscope-cri");
    let settings = match podscope::settings::Settings::load(&config) {
        Ok(s) => s,
        Err(e) => {
            error!("{e}");
            return ExitCode::from(1);
        }
    };
    // Before any thread exists: socket activation reads the environment.
    let listener = match cri::listener_for(listen) {
        Ok(l) => l,
        Err(e) => {
            error!("cannot listen: {e}");
            return ExitCode::from(1);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error!("cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            info!("podscope-cri stopping");
            let _ = daemon::notify(false, &[NotifyState::Stopping]);
        };
        let ready = || {
            let _ = daemon::notify(false, &[NotifyState::Ready]);
            info!("podscope-cri serving CRI v1");
        };
        cri::serve(
            listener,
            call_timeout,
            settings.daemon_calls_max as usize,
            settings.stream(),
            ready,
            shutdown,
        )
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("podscope-cri failed: {e}");
            ExitCode::from(1)
        }
    }
}
