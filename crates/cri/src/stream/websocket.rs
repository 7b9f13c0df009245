//! The WebSocket side of the streaming server (RFC 6455 through
//! tokio-tungstenite), as newer clients speak it: every message is one
//! channel's bytes, the channel number its first byte (or, for the
//! `base64` subprotocols, its first character, then the bytes in base64).
//!
//! exec and attach: 0 stdin, 1 stdout, 2 stderr, 3 error (the Status, as
//! over SPDY), 4 resize; `v5.channel.k8s.io` adds the client's `[255, n]`
//! that closes its channel n (stdin's end). port-forward: port i's data
//! on channel 2i and its errors on 2i+1, each first announced with the
//! port (2 bytes, little-endian).

use super::http::{response, Head};
use super::relay::Output;
use super::spdy::{Activity, Link};
use base64::Engine;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// exec and attach, in the server's order ("" when the client offers none).
pub const REMOTECOMMAND: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "base64.channel.k8s.io",
];
pub const PORTFORWARD: &[&str] = &["v4.channel.k8s.io", "v4.base64.channel.k8s.io"];

/// A client message is at most this (a stdin chunk); larger ends the
/// connection.
const MESSAGE_MAX: usize = 1 << 20;

/// The subprotocol: the client's first that we speak, "" when it offers
/// none; None when it offers only others.
pub fn negotiate(head: &Head, supported: &[&'static str]) -> Option<&'static str> {
    let offered = head.list("sec-websocket-protocol");
    if offered.is_empty() {
        return Some("");
    }
    super::remotecommand::negotiate(&offered, supported)
}

/// The status's generation for a subprotocol: v4 and v5 always write a
/// Status, the older ones text on failure only.
pub fn version(proto: &str) -> u8 {
    match proto {
        "v5.channel.k8s.io" => 5,
        "v4.channel.k8s.io" | "v4.base64.channel.k8s.io" => 4,
        _ => 1,
    }
}

/// Answer the upgrade (or refuse it) and take the connection over.
pub async fn upgrade<S>(
    head: &Head,
    mut io: S,
    supported: &[&'static str],
) -> Option<(&'static str, WebSocketStream<S>)>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Some(key) = head
        .get("sec-websocket-key")
        .map(str::trim)
        .filter(|k| !k.is_empty())
    else {
        let _ = io
            .write_all(&response(
                400,
                "Bad Request",
                &[],
                "Sec-WebSocket-Key is required\n",
            ))
            .await;
        return None;
    };
    let Some(proto) = negotiate(head, supported) else {
        let _ = io
            .write_all(&response(
                403,
                "Forbidden",
                &[],
                "unable to negotiate a WebSocket subprotocol\n",
            ))
            .await;
        return None;
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut headers = vec![
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", accept.as_str()),
    ];
    if !proto.is_empty() {
        headers.push(("Sec-WebSocket-Protocol", proto));
    }
    io.write_all(&response(101, "Switching Protocols", &headers, ""))
        .await
        .ok()?;
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(MESSAGE_MAX))
        .max_frame_size(Some(MESSAGE_MAX));
    Some((
        proto,
        WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await,
    ))
}

/// One upgraded connection, channels in and out.
pub struct Ws {
    pub out: mpsc::Sender<(u8, Bytes)>,
    pub link: Link,
}

impl Ws {
    /// Run the connection: client messages on a channel in `inputs` go to
    /// its sender (the others are dropped); `(channel, bytes)` sent on
    /// `out` go to the client.
    pub fn start<S>(
        ws: WebSocketStream<S>,
        proto: &str,
        inputs: HashMap<u8, mpsc::Sender<Bytes>>,
    ) -> Ws
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let base64 = proto.contains("base64");
        let v5 = proto == "v5.channel.k8s.io";
        let (sink, stream) = ws.split();
        let activity = Arc::new(Activity::new());
        let (out, rx) = mpsc::channel(16);
        let (gone_tx, gone) = tokio::sync::watch::channel(false);
        let reader = tokio::spawn(read_loop(
            stream,
            inputs,
            base64,
            v5,
            activity.clone(),
            gone_tx,
        ));
        let writer = tokio::spawn(write_loop(sink, rx, base64, activity.clone()));
        Ws {
            out,
            link: Link::new(gone, activity, reader, writer),
        }
    }

    /// A channel of ours, as an `Output`.
    pub fn output(&self, channel: u8) -> WsOutput {
        WsOutput {
            out: self.out.clone(),
            channel,
        }
    }

    /// Everything queued written, a close frame, the end.
    pub async fn close(self) {
        let Ws { out, link } = self;
        drop(out);
        link.close().await;
    }

    pub fn abort(self) {
        self.link.abort();
    }
}

/// The channel and data one client message carries (a binary frame, or in
/// the base64 subprotocols a text frame: the channel's digit, then base64),
/// or `None` for one that carries none.
pub fn channel_data(msg: &Message, base64: bool) -> Option<(u8, Bytes)> {
    match msg {
        Message::Binary(b) if !b.is_empty() && !base64 => Some((b[0], b.slice(1..))),
        Message::Text(t) if !t.is_empty() && base64 => {
            // Bytes, not chars: a frame may start with a multi-byte
            // character (slicing the str there would panic, and a panic
            // aborts the frontend).
            let t = t.as_bytes();
            let ch = t[0].wrapping_sub(b'0');
            base64::engine::general_purpose::STANDARD
                .decode(&t[1..])
                .ok()
                .map(|d| (ch, Bytes::from(d)))
        }
        _ => None,
    }
}

async fn read_loop<S>(
    mut stream: futures_util::stream::SplitStream<WebSocketStream<S>>,
    mut inputs: HashMap<u8, mpsc::Sender<Bytes>>,
    base64: bool,
    v5: bool,
    activity: Arc<Activity>,
    gone: tokio::sync::watch::Sender<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(msg) = stream.next().await {
        let Ok(msg) = msg else { break };
        activity.touch();
        if let Message::Close(_) = msg {
            break;
        }
        let Some((channel, data)) = channel_data(&msg, base64) else {
            continue;
        };
        if v5 && channel == 255 {
            // The client closes its channel: its end of stdin, say.
            match data.first() {
                Some(ch) if data.len() == 1 => {
                    inputs.remove(ch);
                    continue;
                }
                _ => break,
            }
        }
        if let Some(tx) = inputs.get(&channel) {
            if !data.is_empty() && tx.send(data).await.is_err() {
                inputs.remove(&channel);
            }
        }
    }
    drop(inputs);
    let _ = gone.send(true);
}

async fn write_loop<S>(
    mut sink: futures_util::stream::SplitSink<WebSocketStream<S>, Message>,
    mut rx: mpsc::Receiver<(u8, Bytes)>,
    base64: bool,
    activity: Arc<Activity>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some((channel, data)) = rx.recv().await {
        let msg = if base64 {
            let mut t = String::with_capacity(1 + data.len() * 4 / 3 + 4);
            t.push(char::from(b'0' + channel));
            base64::engine::general_purpose::STANDARD.encode_string(&data, &mut t);
            Message::text(t)
        } else {
            let mut b = Vec::with_capacity(1 + data.len());
            b.push(channel);
            b.extend_from_slice(&data);
            Message::Binary(b.into())
        };
        if sink.send(msg).await.is_err() {
            return;
        }
        activity.touch();
    }
    // A normal closure (1000), as the Go server's: a close without a
    // code reads as abnormal (1005) to clients.
    let normal = tokio_tungstenite::tungstenite::protocol::CloseFrame {
        code: tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode::Normal,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(normal))).await;
    let _ = sink.close().await;
}

/// A channel toward the client. WebSocket channels have no end of their
/// own before the connection's: `close` says nothing.
pub struct WsOutput {
    out: mpsc::Sender<(u8, Bytes)>,
    channel: u8,
}

impl Output for WsOutput {
    async fn write(&mut self, data: Bytes) -> std::io::Result<()> {
        let mut data = data;
        while !data.is_empty() {
            let part = data.split_to(data.len().min(super::spdy::CHUNK));
            self.out
                .send((self.channel, part))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        }
        Ok(())
    }
    async fn close(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(protocols: &str) -> Head {
        Head {
            method: "GET".into(),
            path: "/exec/x".into(),
            headers: vec![("Sec-WebSocket-Protocol".into(), protocols.into())],
        }
    }

    #[test]
    fn subprotocols_as_kubelet_chooses_them() {
        assert_eq!(
            negotiate(&head("v5.channel.k8s.io, v4.channel.k8s.io"), REMOTECOMMAND),
            Some("v5.channel.k8s.io")
        );
        assert_eq!(
            negotiate(&head("base64.channel.k8s.io"), REMOTECOMMAND),
            Some("base64.channel.k8s.io")
        );
        assert_eq!(negotiate(&head("SPDY/3.1"), REMOTECOMMAND), None);
        let none = Head::default();
        assert_eq!(negotiate(&none, PORTFORWARD), Some(""));
        assert_eq!(version("v4.base64.channel.k8s.io"), 4);
        assert_eq!(version(""), 1);
    }

    /// A text frame that starts with a multi-byte character carries
    /// nothing, and the frontend lives on (the finding 8: slicing it
    /// as a str panicked, and the release build aborts on a panic).
    #[test]
    fn frames_carry_their_channel_and_data_and_odd_ones_nothing() {
        let text = |s: &str| Message::Text(s.into());
        assert_eq!(
            channel_data(&text("0aGk="), true),
            Some((0, Bytes::from("hi")))
        );
        for odd in ["\u{e9}aGk=", "\u{1f600}", "\u{e9}", "0@@@"] {
            assert_eq!(channel_data(&text(odd), true), None, "{odd:?}");
        }
        assert_eq!(channel_data(&text("0aGk="), false), None);
        let bin = Message::Binary(Bytes::from_static(b"\x01hi"));
        assert_eq!(channel_data(&bin, false), Some((1, Bytes::from("hi"))));
        assert_eq!(channel_data(&bin, true), None);
        assert_eq!(channel_data(&Message::Binary(Bytes::new()), false), None);
    }
}
