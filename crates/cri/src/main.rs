//! podscope-cri: the CRI v1 gRPC frontend (kubelet's
//! `--container-runtime-endpoint unix:///run/podscope/cri.sock`).

use libsystemd::daemon::{self, NotifyState};
use podscope_sys::logging;
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
    let spec = podscope_config::CommandLineSpec {
        program: "podscope-cri",
        version: env!("CARGO_PKG_VERSION"),
        usage: USAGE,
        flags: &[],
        options: &["--listen", "--call-timeout"],
    };
    let cl = match spec.parse(std::env::args().skip(1)) {
        Ok(cl) => cl,
        Err(exit) => return exit,
    };
    let listen: Option<PathBuf> = cl.value("--listen").map(PathBuf::from);
    let config = cl.config.clone();
    // Longer than any one daemon operation (a stop timeout plus CNI DEL).
    let call_timeout = match cl.value("--call-timeout").map(str::parse::<u64>) {
        None => Duration::from_secs(240),
        Some(Ok(s)) if s > 0 => Duration::from_secs(s),
        Some(_) => return spec.usage_error("--call-timeout needs a positive number of seconds"),
    };
    logging::init("podscope-cri");
    podscope_sys::descriptors::raise_at_start("podscope-cri");
    let settings = match podscope_config::Settings::load(&config) {
        Ok(s) => s,
        Err(e) => {
            error!("{e}");
            return ExitCode::from(1);
        }
    };
    // Before any thread exists: socket activation reads the environment.
    let listener = match podscope_cri::server::listener_for(listen) {
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
        podscope_cri::server::serve(
            listener,
            call_timeout,
            settings.daemon_calls_max as usize,
            podscope_cri::stream::StreamConfig::from(&settings),
            settings.metrics_address().is_some(),
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
