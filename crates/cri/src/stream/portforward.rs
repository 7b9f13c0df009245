//! Kubernetes' portforward protocol (`portforward.k8s.io`) over SPDY: the
//! client opens an error stream and a data stream per forwarded
//! connection, paired by `requestid`; each pair gets a TCP connection that
//! podscoped makes inside the pod's network namespace and hands over as a
//! descriptor, and bytes are copied both ways. A port nobody listens on is
//! told on the pair's error stream, as kubelet tells it; other pairs on
//! the connection go on.

use super::relay::Output;
use super::remotecommand::SpdyOutput;
use super::spdy::{Connection, Incoming, RST_CANCEL};
use crate::daemon::Daemon;
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

pub const PROTOCOLS: &[&str] = &["portforward.k8s.io"];

/// The second stream of a pair must come within this.
const PAIR_TIMEOUT: Duration = Duration::from_secs(30);
/// Once the pod's side has closed, the client's has this long to.
const LINGER: Duration = Duration::from_secs(1);
const READ_MAX: usize = 128 * 1024;

#[derive(Default)]
struct Pair {
    error: Option<u32>,
    data: Option<(u32, mpsc::Receiver<Bytes>)>,
    port: u16,
    since: Option<tokio::time::Instant>,
}

/// A stream's kind, port and request id, or why it is refused.
fn classify(s: &Incoming) -> Result<(bool, u16, String), String> {
    let kind = match s.headers.get("streamtype") {
        Some("error") => true,
        Some("data") => false,
        Some(k) => return Err(format!("invalid stream type {k:?}")),
        None => return Err("no stream type".into()),
    };
    let port = s
        .headers
        .get("port")
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("invalid port {:?}", s.headers.get("port")))?;
    // Old clients send no request id: the error stream's own id pairs
    // with the data stream two below it.
    let request = match s.headers.get("requestid") {
        Some(r) => r.to_owned(),
        None if kind => s.id.to_string(),
        None => s.id.saturating_sub(2).to_string(),
    };
    Ok((kind, port, request))
}

/// Serve pairs until the client goes; `idle`: nothing either way for this
/// long ends the connection.
pub async fn serve(mut conn: Connection, pod_id: String, daemon: Arc<Daemon>, idle: Duration) {
    let sender = conn.sender.clone();
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    let mut last = 0u32;
    let mut forwards = tokio::task::JoinSet::new();
    let activity = conn.link.activity.clone();
    let mut gone = conn.link.gone.clone();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            s = conn.incoming.recv() => {
                let Some(s) = s else { break };
                last = last.max(s.id);
                let (is_error, port, request) = match classify(&s) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(pod_id, "port-forward: stream {} refused: {e}", s.id);
                        let _ = sender.rst(s.id, RST_CANCEL).await;
                        continue;
                    }
                };
                if sender.reply(s.id).await.is_err() {
                    break;
                }
                let pair = pairs.entry(request.clone()).or_default();
                pair.since.get_or_insert_with(tokio::time::Instant::now);
                let which = if is_error { "error" } else { "data" };
                let taken = if is_error { pair.error.is_some() } else { pair.data.is_some() };
                if taken {
                    if let Some(e) = pair.error {
                        let msg = format!("error processing stream for request {request}: {which} stream already assigned");
                        let _ = sender.data(e, msg.into()).await;
                    }
                    let _ = sender.rst(s.id, RST_CANCEL).await;
                    continue;
                }
                if is_error {
                    pair.error = Some(s.id);
                } else {
                    pair.data = Some((s.id, s.data));
                    pair.port = port;
                }
                if pair.error.is_some() && pair.data.is_some() {
                    let p = pairs.remove(&request).expect("just seen");
                    let (data_id, data_rx) = p.data.expect("checked");
                    let out = |id| SpdyOutput { sender: sender.clone(), id };
                    forwards.spawn(forward(
                        daemon.clone(),
                        pod_id.clone(),
                        p.port,
                        out(p.error.expect("checked")),
                        out(data_id),
                        data_rx,
                    ));
                }
            }
            _ = tick.tick() => {
                // Pairs whose second stream never came.
                let now = tokio::time::Instant::now();
                let late: Vec<String> = pairs
                    .iter()
                    .filter(|(_, p)| p.since.is_some_and(|t| now.duration_since(t) > PAIR_TIMEOUT))
                    .map(|(r, _)| r.clone())
                    .collect();
                for r in late {
                    let p = pairs.remove(&r).expect("just listed");
                    if let Some(e) = p.error {
                        let msg = format!("(request={r}) timed out waiting for streams");
                        let _ = sender.data(e, msg.into()).await;
                        let _ = sender.fin(e).await;
                    }
                    if let Some((d, _)) = p.data {
                        let _ = sender.fin(d).await;
                    }
                }
                while forwards.try_join_next().is_some() {}
            }
            _ = async { let _ = gone.wait_for(|g| *g).await; } => break,
            _ = activity.idle_for(idle) => {
                tracing::info!(pod_id, "port-forward: idle for {idle:?}, closed");
                break;
            }
        }
    }
    forwards.abort_all();
    drop(sender);
    conn.close(last).await;
}

/// One forwarded connection: its bytes both ways, or why it could not be
/// made on `error` (then both ended, error first, as kubelet does).
pub async fn forward<O: Output + 'static>(
    daemon: Arc<Daemon>,
    pod_id: String,
    port: u16,
    mut error: O,
    mut data: O,
    mut from_client: mpsc::Receiver<Bytes>,
) {
    let id = pod_id.as_str();
    let fd = daemon
        .call(|m| async move { m.port_forward(id, port).await })
        .await
        .map_err(|e| podscope_api::errors::classify(&e).1);
    let sock = fd.and_then(|fd| {
        let s = std::net::TcpStream::from(fd);
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        tokio::net::TcpStream::from_std(s).map_err(|e| e.to_string())
    });
    let sock = match sock {
        Ok(s) => s,
        Err(e) => {
            tracing::info!(pod_id, port, "port-forward: {e}");
            let msg = format!("error forwarding port {port} to pod {pod_id}, uid : {e}");
            let _ = error.write(msg.into()).await;
            let _ = error.close().await;
            let _ = data.close().await;
            return;
        }
    };
    let _ = sock.set_nodelay(true);
    let (mut rd, mut wr) = sock.into_split();
    let mut upstream = tokio::spawn(async move {
        while let Some(b) = from_client.recv().await {
            if wr.write_all(&b).await.is_err() {
                return;
            }
        }
        // The client's end of the data stream: the pod's side reads EOF.
        let _ = wr.shutdown().await;
    });
    // Taken when the first bytes are there: an idle forward holds none.
    let mut buf = BytesMut::new();
    loop {
        if buf.capacity() < READ_MAX / 2 {
            if rd.readable().await.is_err() {
                break;
            }
            buf.reserve(READ_MAX);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if data.write(buf.split().freeze()).await.is_err() {
                    break;
                }
            }
        }
    }
    if tokio::time::timeout(LINGER, &mut upstream).await.is_err() {
        upstream.abort();
    }
    let _ = error.close().await;
    let _ = data.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::spdy::Headers;

    fn stream(id: u32, h: &[(&str, &str)]) -> Incoming {
        let (_tx, rx) = mpsc::channel(1);
        Incoming {
            id,
            headers: Headers(
                h.iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
            ),
            data: rx,
        }
    }

    #[test]
    fn streams_are_classified_as_kubelet_does() {
        let s = stream(
            1,
            &[("streamtype", "error"), ("port", "80"), ("requestid", "0")],
        );
        assert_eq!(classify(&s).unwrap(), (true, 80, "0".into()));
        let s = stream(
            3,
            &[("streamtype", "data"), ("port", "80"), ("requestid", "0")],
        );
        assert_eq!(classify(&s).unwrap(), (false, 80, "0".into()));
        // No request id: pairs by stream ids.
        let s = stream(5, &[("streamtype", "error"), ("port", "80")]);
        assert_eq!(classify(&s).unwrap().2, "5");
        let s = stream(7, &[("streamtype", "data"), ("port", "80")]);
        assert_eq!(classify(&s).unwrap().2, "5");
        for bad in [
            vec![("streamtype", "data"), ("port", "0")],
            vec![("streamtype", "data"), ("port", "70000")],
            vec![("streamtype", "data"), ("port", "x")],
            vec![("streamtype", "stdin"), ("port", "80")],
            vec![("port", "80")],
        ] {
            assert!(classify(&stream(9, &bad)).is_err(), "{bad:?}");
        }
    }
}
