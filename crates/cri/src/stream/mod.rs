//! The CRI streaming server: Exec, Attach and PortForward answer with a URL
//! here, and the client (crictl, critest, kubelet proxying kubectl)
//! upgrades an HTTP connection to it. It lives in the frontend so that
//! podscoped never parses a network protocol; what it needs of the daemon
//! (an exec, an attach, a connection in the pod's namespace) it gets as
//! descriptors over D-Bus.
//!
//! `tokens` (single-use, one minute), `http` (the request head and the
//! answers before an upgrade), `spdy` (SPDY/3.1 framing, the protocol
//! crictl, critest and kubelet speak), `remotecommand` (exec and attach
//! over it), `relay` (the exec's descriptors and the bytes between them
//! and the client), `tls` (the optional certificate and key).

pub mod http;
pub mod portforward;
pub mod relay;
pub mod remotecommand;
pub mod spdy;
pub mod tls;
pub mod tokens;
pub mod websocket;

use crate::daemon::Daemon;
use http::{not_found, read_head, response, HeadError};
use podscope_api::error::{Error, Result};
use relay::{ClientIo, Outcome};
use remotecommand::{SpdyOutput, Wants};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokens::{Request, Tokens};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// A client has this long to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how the server listens (from podscope.toml).
#[derive(Debug, Clone)]
pub struct StreamConfig {
    pub address: std::net::IpAddr,
    pub port: u16,
    pub idle_timeout: Duration,
    /// None: plain HTTP.
    pub tls: Option<tls::TlsFiles>,
}

impl From<&podscope_config::Settings> for StreamConfig {
    fn from(s: &podscope_config::Settings) -> Self {
        StreamConfig {
            address: s.stream_address,
            port: s.stream_port,
            idle_timeout: Duration::from_millis(s.stream_idle_timeout_ms),
            tls: (!s.stream_tls_cert.as_os_str().is_empty()).then(|| tls::TlsFiles {
                cert: s.stream_tls_cert.clone(),
                key: s.stream_tls_key.clone(),
            }),
        }
    }
}

pub struct StreamServer {
    pub tokens: Tokens,
    base_url: String,
    idle_timeout: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl StreamServer {
    /// Bind the listener (port 0: one the kernel picks) and make the server.
    pub fn bind(cfg: &StreamConfig) -> Result<(Arc<Self>, std::net::TcpListener)> {
        let addr = SocketAddr::new(cfg.address, cfg.port);
        let l = std::net::TcpListener::bind(addr)
            .map_err(|e| Error::io(format!("streaming server: listen on {addr}"), e))?;
        l.set_nonblocking(true)
            .map_err(|e| Error::io("streaming server: listener", e))?;
        let local = l
            .local_addr()
            .map_err(|e| Error::io("streaming server: listener", e))?;
        let tls = cfg.tls.as_ref().map(tls::acceptor).transpose()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let server = StreamServer {
            tokens: Tokens::default(),
            base_url: format!("{scheme}://{local}"),
            idle_timeout: cfg.idle_timeout,
            tls,
        };
        Ok((Arc::new(server), l))
    }

    /// The URL for a request just stored.
    pub fn url(&self, req: Request) -> std::result::Result<String, tokens::Full> {
        let route = req.route();
        let token = self.tokens.insert(req)?;
        Ok(format!("{}/{route}/{token}", self.base_url))
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Accept connections until the process ends.
    pub async fn serve(self: Arc<Self>, listener: std::net::TcpListener, daemon: Arc<Daemon>) {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("streaming server: {e}");
                return;
            }
        };
        loop {
            let (sock, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("streaming server: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = sock.set_nodelay(true);
            let this = self.clone();
            let daemon = daemon.clone();
            tokio::spawn(async move {
                match &this.tls {
                    None => this.connection(sock, peer, daemon).await,
                    // The handshake counts against the head's time: a
                    // client that never finishes it is dropped as one that
                    // never sends its request.
                    Some(tls) => match tokio::time::timeout(HEAD_TIMEOUT, tls.accept(sock)).await {
                        Ok(Ok(s)) => this.connection(s, peer, daemon).await,
                        Ok(Err(e)) => tracing::debug!("streaming server: {peer}: TLS: {e}"),
                        Err(_) => {
                            tracing::debug!("streaming server: {peer}: TLS handshake timed out")
                        }
                    },
                }
            });
        }
    }

    async fn connection<S>(&self, mut io: S, peer: SocketAddr, daemon: Arc<Daemon>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut io)).await {
            Ok(Ok(h)) => h,
            Ok(Err(HeadError::Bad(m))) => {
                tracing::debug!("streaming server: {peer}: {m}");
                let _ = io
                    .write_all(&response(400, "Bad Request", &[], &format!("{m}\n")))
                    .await;
                return;
            }
            Ok(Err(HeadError::Io(_))) | Err(_) => return,
        };
        let mut parts = head.path.trim_start_matches('/').splitn(2, '/');
        let (route, token) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let token = token.split(['?', '/']).next().unwrap_or("");
        let req = if head.method == "GET" || head.method == "POST" {
            self.tokens.take(route, token)
        } else {
            None
        };
        let Some(req) = req else {
            let _ = io.write_all(&not_found()).await;
            return;
        };
        if head.is_websocket() {
            if !rest.is_empty() {
                // A client speaks after the 101, not before.
                let _ = io
                    .write_all(&response(
                        400,
                        "Bad Request",
                        &[],
                        "data before the upgrade\n",
                    ))
                    .await;
                return;
            }
            return self.websocket(&head, io, req, daemon).await;
        }
        let (r, w) = tokio::io::split(io);
        let (supported, wants, target) = match &req {
            Request::Exec(x) => (
                remotecommand::PROTOCOLS,
                wants_of(x.stdin, x.stdout, x.stderr, x.tty),
                x.container_id.clone(),
            ),
            Request::Attach(x) => (
                remotecommand::PROTOCOLS,
                wants_of(x.stdin, x.stdout, x.stderr, x.tty),
                x.container_id.clone(),
            ),
            Request::PortForward(x) => (
                portforward::PROTOCOLS,
                Wants::default(),
                x.pod_sandbox_id.clone(),
            ),
        };
        let Some((proto, mut conn)) = spdy_upgrade(&head, r, w, &rest, supported).await else {
            return;
        };
        let cmd = match &req {
            Request::Exec(x) => Some(x.cmd.as_slice()),
            Request::Attach(_) => None,
            Request::PortForward(_) => {
                return portforward::serve(conn, target, daemon, self.idle_timeout).await;
            }
        };
        let version = remotecommand::version(proto);
        let verb = if cmd.is_some() { "exec" } else { "attach" };
        let streams = match remotecommand::gather(&mut conn, wants, version).await {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(container_id = target, "streaming {verb}: {e}");
                conn.close(0).await;
                return;
            }
        };
        // client-go opens every stream of a session at its start.
        conn.stop_taking_streams();
        let sender = conn.sender.clone();
        let out = |id: Option<u32>| {
            id.map(|id| SpdyOutput {
                sender: sender.clone(),
                id,
            })
        };
        let io = ClientIo {
            stdin: streams.stdin,
            stdout: out(streams.stdout),
            stderr: out(streams.stderr),
            resize: streams.resize,
            tty: wants.tty,
        };
        let session = run(&daemon, &target, cmd, io);
        let Some(outcome) = self.until_gone(session, &conn.link, &target, verb).await else {
            conn.abort();
            return;
        };
        if let Some(b) =
            remotecommand::status_bytes(&outcome, verb, cmd.unwrap_or_default(), version)
        {
            let _ = sender.data(streams.error, b.into()).await;
        }
        let _ = sender.fin(streams.error).await;
        drop(sender);
        conn.close(streams.last).await;
    }

    /// The session's outcome (a failure when it idled past the timeout), or
    /// None when the client went away. Either way the session is dropped
    /// when it ends here, which kills its command.
    async fn until_gone(
        &self,
        session: impl std::future::Future<Output = Outcome>,
        link: &spdy::Link,
        target: &str,
        verb: &str,
    ) -> Option<Outcome> {
        let mut gone = link.gone.clone();
        let outcome = tokio::select! {
            o = session => o,
            _ = gone.wait_for(|g| *g) => {
                tracing::debug!(target, "streaming {verb}: the client hung up");
                return None;
            }
            _ = link.activity.idle_for(self.idle_timeout) => {
                // Said on the error stream, or the client, whose streams
                // just end, would take it for a success.
                Outcome::Failed(format!(
                    "the session was idle for {} s (stream_idle_timeout_ms): closed",
                    self.idle_timeout.as_secs_f64()
                ))
            }
        };
        if let Outcome::Failed(e) = &outcome {
            tracing::info!(target, "streaming {verb}: {e}");
        }
        Some(outcome)
    }

    /// Exec, attach or port-forward over WebSocket.
    async fn websocket<S>(&self, head: &http::Head, io: S, req: Request, daemon: Arc<Daemon>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (supported, wants, target, cmd) = match &req {
            Request::Exec(x) => (
                websocket::REMOTECOMMAND,
                wants_of(x.stdin, x.stdout, x.stderr, x.tty),
                x.container_id.clone(),
                Some(x.cmd.clone()),
            ),
            Request::Attach(x) => (
                websocket::REMOTECOMMAND,
                wants_of(x.stdin, x.stdout, x.stderr, x.tty),
                x.container_id.clone(),
                None,
            ),
            Request::PortForward(x) => (
                websocket::PORTFORWARD,
                Wants::default(),
                x.pod_sandbox_id.clone(),
                None,
            ),
        };
        let Some((proto, ws)) = websocket::upgrade(head, io, supported).await else {
            return;
        };
        let mut inputs = std::collections::HashMap::new();
        if let Request::PortForward(x) = &req {
            let mut rxs = Vec::new();
            for (i, _) in x.port.iter().enumerate() {
                let (tx, rx) = tokio::sync::mpsc::channel(8);
                inputs.insert((2 * i) as u8, tx);
                rxs.push(rx);
            }
            let ws = websocket::Ws::start(ws, proto, inputs);
            let mut forwards = tokio::task::JoinSet::new();
            for (i, (port, rx)) in x.port.iter().zip(rxs).enumerate() {
                let port = *port as u16;
                let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
                for ch in [data, error] {
                    let _ = ws
                        .out
                        .send((ch, bytes::Bytes::copy_from_slice(&port.to_le_bytes())))
                        .await;
                }
                forwards.spawn(portforward::forward(
                    daemon.clone(),
                    target.clone(),
                    port,
                    ws.output(error),
                    ws.output(data),
                    rx,
                ));
            }
            let all = async { while forwards.join_next().await.is_some() {} };
            let mut gone = ws.link.gone.clone();
            let activity = ws.link.activity.clone();
            tokio::select! {
                _ = all => {}
                _ = gone.wait_for(|g| *g) => {}
                _ = activity.idle_for(self.idle_timeout) => {}
            }
            ws.close().await;
            return;
        }
        let stdin = wants.stdin.then(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(8);
            inputs.insert(0, tx);
            rx
        });
        let resize = wants.tty.then(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(8);
            inputs.insert(4, tx);
            rx
        });
        let ws = websocket::Ws::start(ws, proto, inputs);
        let stderr = wants.stderr && !wants.tty;
        // The first message: an empty one on the first channel that is on.
        let first = if wants.stdout {
            1
        } else if stderr {
            2
        } else {
            3
        };
        let _ = ws.out.send((first, bytes::Bytes::new())).await;
        let io = ClientIo {
            stdin,
            stdout: wants.stdout.then(|| ws.output(1)),
            stderr: stderr.then(|| ws.output(2)),
            resize,
            tty: wants.tty,
        };
        let verb = if cmd.is_some() { "exec" } else { "attach" };
        let session = run(&daemon, &target, cmd.as_deref(), io);
        let Some(outcome) = self.until_gone(session, &ws.link, &target, verb).await else {
            ws.abort();
            return;
        };
        let version = websocket::version(proto);
        if let Some(b) =
            remotecommand::status_bytes(&outcome, verb, cmd.as_deref().unwrap_or_default(), version)
        {
            let _ = ws.out.send((3, b.into())).await;
        }
        ws.close().await;
    }
}

fn wants_of(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> Wants {
    Wants {
        stdin,
        stdout,
        stderr,
        tty,
    }
}

/// An exec (`cmd`) or an attach.
async fn run<O: relay::Output + 'static>(
    daemon: &Daemon,
    target: &str,
    cmd: Option<&[String]>,
    io: ClientIo<O>,
) -> Outcome {
    match cmd {
        Some(cmd) => relay::exec(daemon, target, cmd, io).await,
        None => relay::attach(daemon, target, io).await,
    }
}

/// The SPDY handshake: a protocol both sides speak, the upgrade headers
/// checked, 101 sent. None when the client was refused (and told why).
async fn spdy_upgrade<R, W>(
    head: &http::Head,
    r: R,
    mut w: W,
    rest: &[u8],
    supported: &'static [&'static str],
) -> Option<(&'static str, spdy::Connection)>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    const HEADER: &str = "X-Stream-Protocol-Version";
    let offered = head.list(HEADER);
    if offered.is_empty() {
        let _ = w
            .write_all(&response(
                400,
                "Bad Request",
                &[],
                "unable to upgrade: X-Stream-Protocol-Version is required\n",
            ))
            .await;
        return None;
    }
    let Some(proto) = remotecommand::negotiate(&offered, supported) else {
        let accepted: Vec<(&str, &str)> = supported
            .iter()
            .map(|p| ("X-Accepted-Stream-Protocol-Versions", *p))
            .collect();
        let msg = format!(
            "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts {supported:?}\n"
        );
        let _ = w
            .write_all(&response(403, "Forbidden", &accepted, &msg))
            .await;
        return None;
    };
    if !head.contains("connection", "upgrade") || !head.contains("upgrade", "spdy/3.1") {
        let _ = w
            .write_all(&response(
                400,
                "Bad Request",
                &[],
                "unable to upgrade: missing upgrade headers in request\n",
            ))
            .await;
        return None;
    }
    let ok = response(
        101,
        "Switching Protocols",
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", "SPDY/3.1"),
            (HEADER, proto),
        ],
        "",
    );
    w.write_all(&ok).await.ok()?;
    Some((proto, spdy::Connection::start(r, w, rest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// podscope.toml's TLS keys make the server's TLS; none, plain HTTP.
    #[test]
    fn the_config_files_tls_keys_reach_the_stream_server() {
        let none = podscope_config::Settings::parse("").unwrap();
        assert!(StreamConfig::from(&none).tls.is_none());
        let s = podscope_config::Settings::parse(
            "stream_tls_cert = \"/etc/c.pem\"\nstream_tls_key = \"/etc/k.pem\"",
        )
        .unwrap();
        let tls = StreamConfig::from(&s).tls.unwrap();
        assert_eq!(
            (tls.cert.as_path(), tls.key.as_path()),
            (
                std::path::Path::new("/etc/c.pem"),
                std::path::Path::new("/etc/k.pem")
            )
        );
    }
}
