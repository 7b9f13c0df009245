//! The CRI socket (socket-activated, or bound by hand) and the gRPC server
//! on it: both services behind the deadline layer, every connection's
//! header blocks through the authority rewrite, the streaming server
//! started first.

use cri_api::v1::image_service_server::ImageServiceServer;
use cri_api::v1::runtime_service_server::RuntimeServiceServer;
use libsystemd::activation::IsType;
use podscope_api::error::{Error, Result};
use std::future::Future;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio_stream::StreamExt;

pub const DEFAULT_SOCKET: &str = "/run/podscope/cri.sock";
/// Kubelet's own limit for CRI messages.
pub const MAX_MESSAGE_SIZE: usize = 16 << 20;

/// The socket systemd passed (socket activation), if any. Read before any
/// thread starts; the environment is left as it is (never `set_var`).
pub fn activated_socket() -> Result<Option<std::os::unix::net::UnixListener>> {
    let fds = libsystemd::activation::receive_descriptors(false)
        .map_err(|e| Error::internal(format!("socket activation: {e}")))?;
    let Some(fd) = fds.into_iter().next() else {
        return Ok(None);
    };
    if !fd.is_unix() {
        return Err(Error::internal(
            "socket activation: the passed descriptor is not a unix socket",
        ));
    }
    // SAFETY: systemd handed this descriptor to us and nothing else owns it.
    let l = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd.into_raw_fd()) };
    Ok(Some(l))
}

/// Bind `path` ourselves (run by hand): mode 0660, parent made if missing,
/// a stale socket file replaced, a live one refused.
pub fn bind(path: &Path) -> Result<std::os::unix::net::UnixListener> {
    let ctx = |what: &str| format!("{what} {}", path.display());
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io(ctx("create the directory of"), e))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(Error::already_exists(format!(
                "{}: another server is listening there",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(|e| Error::io(ctx("remove the stale socket"), e))?;
    }
    let l = std::os::unix::net::UnixListener::bind(path).map_err(|e| Error::io(ctx("bind"), e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| Error::io(ctx("chmod"), e))?;
    Ok(l)
}

/// Serve both CRI services on `listener` until `shutdown` completes.
/// `ready` is called once the streaming server is listening too, so that a
/// config it cannot serve (a port taken, a TLS key that does not go with
/// its certificate) fails the start rather than a running service.
pub async fn serve(
    listener: std::os::unix::net::UnixListener,
    call_timeout: std::time::Duration,
    daemon_calls_max: usize,
    streaming: crate::stream::StreamConfig,
    metrics: bool,
    ready: impl FnOnce(),
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("socket", e))?;
    let listener = UnixListener::from_std(listener).map_err(|e| Error::io("socket", e))?;
    let daemon = Arc::new(crate::daemon::Daemon::new(call_timeout, daemon_calls_max));
    let (stream_server, stream_listener) = crate::stream::StreamServer::bind(&streaming)?;
    tracing::info!("streaming server on {}", stream_server.base_url());
    tokio::spawn(stream_server.clone().serve(stream_listener, daemon.clone()));
    // For podscoped's scrapes (metrics_address set): a failure is said
    // and costs the CRI nothing (the scrapes then say podscope_cri_up 0).
    if metrics {
        let path = Path::new(crate::metrics::SOCKET);
        match crate::metrics::bind(path) {
            Ok(l) => {
                tokio::spawn(crate::metrics::serve(l, daemon.clone()));
            }
            Err(e) => tracing::warn!(
                "metrics: cannot serve them on {}: {e}; podscoped's scrapes will say podscope_cri_up 0",
                path.display()
            ),
        }
    }
    ready();
    let cri = crate::calls::Cri::new(daemon, stream_server);
    let runtime_svc = RuntimeServiceServer::new(crate::service::RuntimeApi(Arc::clone(&cri)))
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let image_svc = ImageServiceServer::new(crate::image::ImageApi(cri))
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    tonic::transport::Server::builder()
        // Outermost: every call is counted, those the deadline layer
        // answers too.
        .layer(crate::metrics::Layer)
        .layer(crate::deadline::Layer)
        .add_service(runtime_svc)
        .add_service(image_svc)
        .serve_with_incoming_shutdown(
            // Every client's header blocks pass through the authority rewrite.
            tokio_stream::wrappers::UnixListenerStream::new(listener)
                .map(|conn| conn.map(crate::authority::Rewriting::new)),
            shutdown,
        )
        .await
        .map_err(|e| Error::internal(format!("gRPC server: {e}")))
}

/// Where to listen: `--listen PATH`, else the activated socket, else the
/// default path.
pub fn listener_for(listen: Option<PathBuf>) -> Result<std::os::unix::net::UnixListener> {
    if let Some(path) = listen {
        return bind(&path);
    }
    match activated_socket()? {
        Some(l) => Ok(l),
        None => bind(Path::new(DEFAULT_SOCKET)),
    }
}
