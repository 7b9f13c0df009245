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
//! and the client).

pub mod http;
pub mod portforward;
pub mod relay;
pub mod remotecommand;
pub mod spdy;
pub mod tokens;

use crate::cri::daemon::Daemon;
use crate::error::{Error, Result};
use http::{not_found, read_head, response, HeadError};
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
}

pub struct StreamServer {
    pub tokens: Tokens,
    base_url: String,
    idle_timeout: Duration,
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
        let server = StreamServer {
            tokens: Tokens::default(),
            base_url: format!("http://{local}"),
            idle_timeout: cfg.idle_timeout,
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
                let (r, w) = sock.into_split();
                this.connection(r, w, peer, daemon).await;
            });
        }
    }

    async fn connection<R, W>(&self, mut r: R, mut w: W, peer: SocketAddr, daemon: Arc<Daemon>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut r)).await {
            Ok(Ok(h)) => h,
            Ok(Err(HeadError::Bad(m))) => {
                tracing::debug!("streaming server: {peer}: {m}");
                let _ = w
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
            let _ = w.write_all(&not_found()).await;
            return;
        };
        if head.is_websocket() {
            let _ = w
                .write_all(&response(
                    400,
                    "Bad Request",
                    &[],
                    "WebSocket streaming is not served yet; use SPDY/3.1\n",
                ))
                .await;
            return;
        }
        match req {
            Request::Exec(x) => {
                let wants = Wants {
                    stdin: x.stdin,
                    stdout: x.stdout,
                    stderr: x.stderr,
                    tty: x.tty,
                };
                let Some((proto, conn)) =
                    spdy_upgrade(&head, r, w, &rest, remotecommand::PROTOCOLS).await
                else {
                    return;
                };
                self.remotecommand(conn, proto, wants, &x.container_id, Some(&x.cmd), &daemon)
                    .await;
            }
            Request::Attach(x) => {
                let wants = Wants {
                    stdin: x.stdin,
                    stdout: x.stdout,
                    stderr: x.stderr,
                    tty: x.tty,
                };
                let Some((proto, conn)) =
                    spdy_upgrade(&head, r, w, &rest, remotecommand::PROTOCOLS).await
                else {
                    return;
                };
                self.remotecommand(conn, proto, wants, &x.container_id, None, &daemon)
                    .await;
            }
            Request::PortForward(x) => {
                let Some((_, conn)) =
                    spdy_upgrade(&head, r, w, &rest, portforward::PROTOCOLS).await
                else {
                    return;
                };
                portforward::serve(conn, x.pod_sandbox_id, daemon, self.idle_timeout).await;
            }
        }
    }

    /// An exec (`cmd`) or an attach (None) over an upgraded connection.
    async fn remotecommand(
        &self,
        mut conn: spdy::Connection,
        proto: &str,
        wants: Wants,
        container_id: &str,
        cmd: Option<&[String]>,
        daemon: &Daemon,
    ) {
        let verb = if cmd.is_some() { "exec" } else { "attach" };
        let version = remotecommand::version(proto);
        let streams = match remotecommand::gather(&mut conn, wants, version).await {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(container_id, "streaming {verb}: {e}");
                conn.close(0).await;
                return;
            }
        };
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
        let mut gone = conn.gone.clone();
        let activity = conn.activity();
        let outcome = tokio::select! {
            o = async {
                match cmd {
                    Some(cmd) => relay::exec(daemon, container_id, cmd, io).await,
                    None => relay::attach(daemon, container_id, io).await,
                }
            } => o,
            _ = gone.wait_for(|g| *g) => {
                tracing::debug!(container_id, "streaming {verb}: the client hung up");
                conn.abort();
                return;
            }
            _ = activity.idle_for(self.idle_timeout) => {
                tracing::info!(container_id, "streaming {verb}: idle for {:?}, closed", self.idle_timeout);
                conn.abort();
                return;
            }
        };
        if let Outcome::Failed(e) = &outcome {
            tracing::info!(container_id, "streaming {verb}: {e}");
        }
        if let Some(b) =
            remotecommand::status_bytes(&outcome, verb, cmd.unwrap_or_default(), version)
        {
            let _ = sender.data(streams.error, b.into()).await;
        }
        let _ = sender.fin(streams.error).await;
        drop(sender);
        conn.close(streams.last).await;
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
