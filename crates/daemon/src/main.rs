//! podscoped: the pod sandbox manager daemon (`org.podscope.Sandbox1`).

use libsystemd::daemon::{self, NotifyState};
use podscope_config::Settings;
use podscope_sys::logging;
use podscoped::serve::serve;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info};

const USAGE: &str = "usage: podscoped [--config PATH] [--version]
       podscoped [--config PATH] --load-apparmor-profile

The podscope daemon: serves org.podscope.Sandbox1 on the system bus.
Normally started by systemd (podscoped.service) or by D-Bus activation.
--load-apparmor-profile writes podscope-default, the AppArmor profile of
containers that ask for the runtime's default, and loads it with
apparmor_parser (podscoped.service's privileged ExecStartPre), then exits.
PODSCOPE_LOG sets the log filter (default: info).";

/// Give memory back after large calls. glibc raises its mmap threshold to
/// the largest block freed so far (up to 32 MiB, a whole bus message) and
/// from then on keeps such blocks in its heaps: one flood of big calls
/// from any local user would stay in the daemon's RSS for good. A fixed
/// threshold (this also fixes the trim threshold's default) keeps large
/// blocks mapped apart, unmapped when freed.
///
/// And two arenas, not glibc's eight per core: every thread the runtime's
/// blocking pool starts in a burst (dozens) would get one of its own, and
/// each kept its share of the burst's memory, pinned by a few allocations
/// that outlive it (a full node's create and drain left 9 MiB free but
/// resident in them). What is freed is handed back once the daemon is idle
/// again (`trim_when_idle`).
fn return_large_blocks_to_the_system() {
    // SAFETY: mallopt only sets allocator parameters; called before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1024 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// sysexits' EX_CONFIG: podscoped.service's RestartPreventExitStatus.
const EXIT_CONFIG: u8 = 78;

/// `--load-apparmor-profile`: as root, before the daemon's sandbox is made
/// (podscoped has no CAP_MAC_ADMIN). Its lines go to the unit's journal; a
/// load that fails exits 1 (the unit's "-" lets the daemon start anyway,
/// refusing RuntimeDefault by name).
fn load_apparmor_profile(config: &std::path::Path) -> ExitCode {
    let run_dir = match Settings::load(config) {
        Ok(s) => s.run_dir,
        Err(e) => {
            eprintln!("podscoped: {}: {e}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let oci = podscoped::host::apparmor::Node;
    match podscoped::host::apparmor::load_default_profile(&run_dir.join("apparmor"), &oci) {
        Ok(said) => {
            println!("podscoped: {said}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("podscoped: loading the AppArmor profile failed: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    return_large_blocks_to_the_system();
    let spec = podscope_config::CommandLineSpec {
        program: "podscoped",
        version: env!("CARGO_PKG_VERSION"),
        usage: USAGE,
        flags: &["--load-apparmor-profile"],
        options: &[],
    };
    let (config, load_apparmor) = match spec.parse(std::env::args().skip(1)) {
        Ok(cl) => (cl.config.clone(), cl.flag("--load-apparmor-profile")),
        Err(exit) => return exit,
    };
    if load_apparmor {
        return load_apparmor_profile(&config);
    }
    logging::init("podscoped");
    podscope_sys::descriptors::raise_at_start("podscoped");
    let settings = match Settings::load(&config) {
        Ok(s) => s,
        Err(e) => {
            error!("invalid configuration: {e}");
            let _ = daemon::notify(
                false,
                &[NotifyState::Status(format!("invalid configuration: {e}"))],
            );
            // EX_CONFIG: the unit does not restart on it.
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Bound now, before anything else: a port another holds keeps the
    // daemon from starting, naming the key. EX_CONFIG: it is the operator's
    // to change, and an immediate restart would find it taken again.
    let metrics = match settings.metrics_address() {
        None => None,
        Some(addr) => match podscoped::metrics::endpoint::bind(addr) {
            Ok(l) => Some(l),
            Err(e) => {
                error!("{e}");
                let _ = daemon::notify(false, &[NotifyState::Status(e)]);
                return ExitCode::from(EXIT_CONFIG);
            }
        },
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error!("cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(settings, metrics)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("podscoped failed: {e}");
            let _ = daemon::notify(false, &[NotifyState::Status(format!("failed: {e}"))]);
            ExitCode::from(1)
        }
    }
}

/// Once the operations are over (none in flight, some done since the last
/// time), the memory freed is handed back: a burst's, free but resident
/// in the allocator's heaps between the allocations that outlived it.
/// The count of operations done then.
fn trim_when_idle(service: &podscoped::bus::Service, done_at_trim: u64) -> u64 {
    let done = service.operations_done();
    if done == done_at_trim || service.operations_in_flight() > 0 {
        return done_at_trim;
    }
    // SAFETY: malloc_trim only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
    done
}

fn status_line(service: &podscoped::bus::Service) -> String {
    let lc = &service.pods;
    format!(
        "{} sandboxes, {} ready",
        lc.count(),
        lc.count_in(podscope_api::domain::State::Ready)
    )
}

async fn run(
    settings: Settings,
    metrics: Option<std::net::TcpListener>,
) -> podscope_api::Result<()> {
    let io = |e: std::io::Error| podscope_api::Error::io("install signal handler", e);
    let mut sigterm = signal(SignalKind::terminate()).map_err(io)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(io)?;
    let (_conn, service) = serve(settings).await?;
    if let Some(listener) = metrics {
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let scraper = Arc::new(podscoped::metrics::scrape::Scraper::new(service.clone()));
        tokio::spawn(podscoped::metrics::endpoint::serve(listener, scraper));
        info!("metrics on http://{addr}/metrics");
    }
    let rec = service.pods.recovery_report();
    info!(
        sandboxes = service.pods.count(),
        recovery_us = rec.duration_usec,
        "podscoped ready: {} sandboxes recovered in {} µs",
        service.pods.count(),
        rec.duration_usec
    );
    // Before any handler's features are asked (here or by a caller):
    // their user namespaces need the daemon to idmap the layers too. A
    // few system calls.
    let idmap = podscoped::host::idmap::probe(&service.pods.settings.image_dir);
    if let Err(why) = &idmap {
        info!("pods' user namespaces: podscoped cannot idmap the image layers here ({why})");
    }
    podscoped::host::features::set_daemon_idmap(idmap);
    let _ = daemon::notify(
        false,
        &[
            NotifyState::Ready,
            NotifyState::Status(status_line(&service)),
        ],
    );

    // Each handler's features, probed now (the runtime binaries run once
    // each) rather than at the first RuntimeStatus kubelet sends: what the
    // node can do is in the journal from the start, and the probe's
    // one-time memory is in the idle daemon's figure.
    let runtimes = service.pods.settings.runtimes.clone();
    tokio::spawn(async move {
        for (name, h) in &runtimes {
            let f = podscoped::host::features::of(name, h).await;
            info!(
                runtime_handler = name.as_str(),
                "runtime handler {name}: recursive read-only mounts {}, user namespaces {}{}",
                f.recursive_read_only_mounts,
                f.user_namespaces,
                if f.why_not.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f.why_not.join("; "))
                }
            );
        }
    });

    // Watchdog keep-alive at half the interval, and a fresh STATUS line.
    let watchdog = daemon::watchdog_enabled(false);
    let tick = watchdog
        .map(|w| w / 2)
        .unwrap_or(Duration::from_secs(5))
        .min(Duration::from_secs(5));
    let svc = service.clone();
    tokio::spawn(async move {
        let mut last = String::new();
        let mut done_at_trim = svc.operations_done();
        loop {
            tokio::time::sleep(tick).await;
            done_at_trim = trim_when_idle(&svc, done_at_trim);
            let mut states = Vec::new();
            if watchdog.is_some() {
                states.push(NotifyState::Watchdog);
            }
            let line = status_line(&svc);
            if line != last {
                states.push(NotifyState::Status(line.clone()));
                last = line;
            }
            if !states.is_empty() {
                let _ = daemon::notify(false, &states);
            }
        }
    });

    let lost = tokio::select! {
        _ = sigterm.recv() => { info!("SIGTERM: shutting down (pods keep running)"); false }
        _ = sigint.recv() => { info!("SIGINT: shutting down (pods keep running)"); false }
        _ = service.pods.systemd_connection_lost() => true,
    };
    let _ = daemon::notify(false, &[NotifyState::Stopping]);
    if lost {
        return Err(podscope_api::Error::internal(
            "lost the connection to systemd",
        ));
    }
    service.drain(Duration::from_secs(20)).await;
    // Every line read so far written; the pipes stay with the pods' inits.
    service.containers.detach_logs().await;
    // Let the replies of the drained calls leave before the socket closes.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}
