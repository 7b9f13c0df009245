//! SPDY/3.1 as the Kubernetes clients speak it (moby/spdystream, under
//! client-go's remotecommand and portforward): frames, the zlib-compressed
//! header blocks, and one connection's reader and writer tasks.
//!
//! What the Go peer needs, and nothing more: no flow control (spdystream
//! never opens a window, so enforcing SPDY's 64 KiB one would stall every
//! stream), every SYN_STREAM answered by an empty SYN_REPLY before any
//! data on it, PINGs echoed, SETTINGS, WINDOW_UPDATE and HEADERS read and
//! dropped, and never a control type spdystream does not know (it ends the
//! connection). The server speaks only after the client's first frame: the
//! Go client reads the 101 through a buffer it then throws away.

use bytes::{Buf, Bytes, BytesMut};
use flate2::{Decompress, FlushDecompress, Status};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const FLAG_FIN: u8 = 0x01;

pub const RST_PROTOCOL_ERROR: u32 = 1;
pub const RST_CANCEL: u32 = 5;

/// A DATA frame from the client is at most this (spdystream writes one per
/// Write, 32 KiB from io.Copy); a control frame's payload at most
/// `CONTROL_MAX`. Larger is a protocol error, not a buffer to grow.
pub const DATA_MAX: usize = 1 << 20;
const CONTROL_MAX: usize = 64 * 1024;
/// A header block inflates to at most this.
const HEADERS_MAX: usize = 64 * 1024;
/// What we put in one DATA frame.
pub const CHUNK: usize = 128 * 1024;

/// The SPDY/3 header-compression dictionary (draft-mbelshe-httpbis-spdy-00
/// §2.6.10.1): the length-prefixed names, then a run of common values.
pub fn dictionary() -> &'static [u8] {
    static DICT: OnceLock<Vec<u8>> = OnceLock::new();
    DICT.get_or_init(|| {
        const WORDS: &[&str] = &[
            "options",
            "head",
            "post",
            "put",
            "delete",
            "trace",
            "accept",
            "accept-charset",
            "accept-encoding",
            "accept-language",
            "accept-ranges",
            "age",
            "allow",
            "authorization",
            "cache-control",
            "connection",
            "content-base",
            "content-encoding",
            "content-language",
            "content-length",
            "content-location",
            "content-md5",
            "content-range",
            "content-type",
            "date",
            "etag",
            "expect",
            "expires",
            "from",
            "host",
            "if-match",
            "if-modified-since",
            "if-none-match",
            "if-range",
            "if-unmodified-since",
            "last-modified",
            "location",
            "max-forwards",
            "pragma",
            "proxy-authenticate",
            "proxy-authorization",
            "range",
            "referer",
            "retry-after",
            "server",
            "te",
            "trailer",
            "transfer-encoding",
            "upgrade",
            "user-agent",
            "vary",
            "via",
            "warning",
            "www-authenticate",
            "method",
            "get",
            "status",
            "200 OK",
            "version",
            "HTTP/1.1",
            "url",
            "public",
            "set-cookie",
            "keep-alive",
            "origin",
        ];
        const TAIL: &str = concat!(
            "100101201202205206300302303304305306307402405406407408409410411412413414415416417",
            "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently",
            "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error",
            "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct ",
            "Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,",
            "image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,",
            "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8",
            "charset=iso-8859-1,utf-,*,enq=0.",
        );
        let mut d = Vec::with_capacity(1423);
        for w in WORDS {
            d.extend_from_slice(&(w.len() as u32).to_be_bytes());
            d.extend_from_slice(w.as_bytes());
        }
        d.extend_from_slice(TAIL.as_bytes());
        d
    })
}

#[derive(Debug)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SPDY: {}", self.0)
    }
}

fn perr<T>(m: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(m.into()))
}

/// A stream's headers, names lower-case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(pub Vec<(String, String)>);

impl Headers {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The client's zlib stream of header blocks: every block continues it
/// (sync-flushed, never finished). Its inflater is most of a connection's
/// memory (zlib-rs takes its 32 KiB window and its tables at the start,
/// about 47 KiB), so only the reader has one, and only while streams are
/// still taken.
pub struct HeaderDecoder {
    inflate: Decompress,
}

impl Default for HeaderDecoder {
    fn default() -> Self {
        HeaderDecoder {
            inflate: Decompress::new(true),
        }
    }
}

/// Our zlib stream of header blocks (SYN_REPLY's), written as stored
/// blocks: no compressor state at all.
#[derive(Default)]
pub struct HeaderEncoder {
    /// Whether the zlib header went out.
    started: bool,
}

impl HeaderDecoder {
    pub fn decode(&mut self, block: &[u8]) -> Result<Headers, ProtocolError> {
        let mut out: Vec<u8> = Vec::with_capacity(256);
        let start = self.inflate.total_in();
        loop {
            let used = (self.inflate.total_in() - start) as usize;
            if out.len() == out.capacity() {
                if out.len() >= HEADERS_MAX {
                    return perr("a header block inflates past 64 KiB");
                }
                out.reserve(out.len().max(256));
            }
            match self
                .inflate
                .decompress_vec(&block[used..], &mut out, FlushDecompress::Sync)
            {
                Ok(Status::StreamEnd) => return perr("the header stream ended"),
                Ok(_) => {
                    let used = (self.inflate.total_in() - start) as usize;
                    if used == block.len() && out.len() < out.capacity() {
                        break;
                    }
                }
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(dictionary())
                        .map_err(|e| ProtocolError(format!("header dictionary: {e}")))?;
                }
                Err(e) => return perr(format!("header block: {e}")),
            }
        }
        parse_nv(&out)
    }
}

impl HeaderEncoder {
    /// A header block for the peer: the name/value pairs in one stored
    /// (uncompressed) deflate block of the connection's zlib stream, after
    /// a header without a dictionary the first time. A valid zlib stream
    /// that Go's reader takes as it takes compressed ones, for a fraction
    /// of a compressor's memory (level 9 keeps 384 KiB a connection), and
    /// the server only ever sends empty blocks.
    pub fn encode(&mut self, h: &Headers) -> Vec<u8> {
        let mut nv = Vec::new();
        nv.extend_from_slice(&(h.0.len() as u32).to_be_bytes());
        for (n, v) in &h.0 {
            let n = n.to_ascii_lowercase();
            nv.extend_from_slice(&(n.len() as u32).to_be_bytes());
            nv.extend_from_slice(n.as_bytes());
            nv.extend_from_slice(&(v.len() as u32).to_be_bytes());
            nv.extend_from_slice(v.as_bytes());
        }
        let mut out = Vec::with_capacity(nv.len() + 8);
        if !self.started {
            // CMF: deflate, 32 KiB window; FLG: no dictionary, check bits.
            out.extend_from_slice(&[0x78, 0x01]);
            self.started = true;
        }
        for chunk in nv.chunks(0xffff) {
            // BFINAL 0, BTYPE 00 (stored), then LEN and its complement.
            let len = chunk.len() as u16;
            out.push(0x00);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        // And an empty one, as a sync flush ends: Go's inflater hands out
        // a stored block's bytes only at the next block's start, which
        // must be in this frame.
        out.extend_from_slice(&[0x00, 0x00, 0x00, 0xff, 0xff]);
        out
    }
}

fn parse_nv(b: &[u8]) -> Result<Headers, ProtocolError> {
    let mut b = b;
    let u32_of = |b: &mut &[u8]| -> Result<usize, ProtocolError> {
        if b.len() < 4 {
            return perr("a header block is cut short");
        }
        Ok(b.get_u32() as usize)
    };
    let n = u32_of(&mut b)?;
    let mut h = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        let take = |b: &mut &[u8]| -> Result<String, ProtocolError> {
            let len = u32_of(b)?;
            if b.len() < len {
                return perr("a header block is cut short");
            }
            let s = String::from_utf8_lossy(&b[..len]).into_owned();
            b.advance(len);
            Ok(s)
        };
        let name = take(&mut b)?.to_ascii_lowercase();
        let value = take(&mut b)?;
        h.push((name, value));
    }
    Ok(Headers(h))
}

/// A frame as read.
#[derive(Debug)]
pub enum Frame {
    SynStream {
        id: u32,
        fin: bool,
        block: Bytes,
    },
    RstStream {
        id: u32,
        status: u32,
    },
    Ping(u32),
    GoAway,
    Data {
        id: u32,
        fin: bool,
        payload: Bytes,
    },
    /// SYN_REPLY, SETTINGS, HEADERS, WINDOW_UPDATE, NOOP and unknown types:
    /// nothing for a server here to act on.
    Ignored,
}

/// Frames off a byte stream, `buf` holding what came past the HTTP head.
pub struct FrameReader<R> {
    io: R,
    buf: BytesMut,
}

/// The reader starts with this much room: an idle session (a shell
/// waiting at its prompt) holds no more than its few small frames need...
const READ_START: usize = 4 * 1024;
/// ...and grows by at least this much when a frame needs more (stdin and
/// port-forward uploads come in frames of up to 32 KiB from client-go).
const READ_GROW: usize = 32 * 1024;

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(io: R, already: &[u8]) -> Self {
        let mut buf = BytesMut::with_capacity(already.len().max(READ_START));
        buf.extend_from_slice(already);
        FrameReader { io, buf }
    }

    /// The next frame; None at a clean end of the stream.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        if !self.fill(8).await? {
            return Ok(None);
        }
        let head = &self.buf[..8];
        let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let flags = head[4];
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        let control = word & 0x8000_0000 != 0;
        let max = if control { CONTROL_MAX } else { DATA_MAX };
        if len > max {
            return Err(invalid(format!("a frame of {len} bytes")));
        }
        if !self.fill(8 + len).await? {
            return Err(invalid("the connection ended inside a frame".into()));
        }
        self.buf.advance(8);
        let mut p = self.buf.split_to(len).freeze();
        if !control {
            let id = word & 0x7fff_ffff;
            if id == 0 {
                return Err(invalid("DATA on stream 0".into()));
            }
            return Ok(Some(Frame::Data {
                id,
                fin: flags & FLAG_FIN != 0,
                payload: p,
            }));
        }
        let kind = (word & 0xffff) as u16;
        let need = |n: usize| {
            if len < n {
                Err(invalid(format!("control frame {kind} of {len} bytes")))
            } else {
                Ok(())
            }
        };
        Ok(Some(match kind {
            SYN_STREAM => {
                need(10)?;
                let id = p.get_u32() & 0x7fff_ffff;
                p.advance(6);
                Frame::SynStream {
                    id,
                    fin: flags & FLAG_FIN != 0,
                    block: p,
                }
            }
            RST_STREAM => {
                need(8)?;
                Frame::RstStream {
                    id: p.get_u32() & 0x7fff_ffff,
                    status: p.get_u32(),
                }
            }
            PING => {
                need(4)?;
                Frame::Ping(p.get_u32())
            }
            GOAWAY => Frame::GoAway,
            _ => Frame::Ignored,
        }))
    }

    /// Read until `n` bytes are buffered; false at EOF with none.
    async fn fill(&mut self, n: usize) -> std::io::Result<bool> {
        while self.buf.len() < n {
            let need = n - self.buf.len();
            let spare = self.buf.capacity() - self.buf.len();
            if spare < need || spare < 512 {
                self.buf.reserve(need.max(READ_GROW));
            }
            if self.io.read_buf(&mut self.buf).await? == 0 {
                if self.buf.is_empty() {
                    return Ok(false);
                }
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(true)
    }
}

fn invalid(m: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("SPDY: {m}"))
}

fn control_head(out: &mut Vec<u8>, kind: u16, flags: u8, len: usize) {
    out.extend_from_slice(&(0x8000u16 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
}

fn data_head(id: u32, fin: bool, len: usize) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
    h[4] = if fin { FLAG_FIN } else { 0 };
    h[5..].copy_from_slice(&(len as u32).to_be_bytes()[1..]);
    h
}

/// What the writer task sends.
#[derive(Debug)]
enum Out {
    Reply(u32),
    Data(u32, Bytes),
    Fin(u32),
    Rst(u32, u32),
    Ping(u32),
    GoAway(u32),
}

/// A stream the client opened.
pub struct Incoming {
    pub id: u32,
    pub headers: Headers,
    /// Its data; closed at the client's FIN or RST (or the connection's end).
    pub data: mpsc::Receiver<Bytes>,
}

/// The sending half, shared by a session's tasks.
#[derive(Clone)]
pub struct Sender {
    tx: mpsc::Sender<Out>,
}

impl Sender {
    async fn send(&self, o: Out) -> std::io::Result<()> {
        self.tx
            .send(o)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
    pub async fn reply(&self, id: u32) -> std::io::Result<()> {
        self.send(Out::Reply(id)).await
    }
    /// Data on a stream, cut into frames of at most CHUNK bytes.
    pub async fn data(&self, id: u32, mut b: Bytes) -> std::io::Result<()> {
        while !b.is_empty() {
            let part = b.split_to(b.len().min(CHUNK));
            self.send(Out::Data(id, part)).await?;
        }
        Ok(())
    }
    pub async fn fin(&self, id: u32) -> std::io::Result<()> {
        self.send(Out::Fin(id)).await
    }
    pub async fn rst(&self, id: u32, status: u32) -> std::io::Result<()> {
        self.send(Out::Rst(id, status)).await
    }
    pub async fn goaway(&self, last: u32) -> std::io::Result<()> {
        self.send(Out::GoAway(last)).await
    }
}

/// One SPDY connection, after the 101.
pub struct Connection {
    pub incoming: mpsc::Receiver<Incoming>,
    pub sender: Sender,
    pub link: Link,
}

/// An upgraded connection's reader and writer tasks and what they tell,
/// SPDY's and WebSocket's alike.
pub struct Link {
    /// True once the client has gone (EOF, its close or GOAWAY, a broken
    /// frame).
    pub gone: tokio::sync::watch::Receiver<bool>,
    pub activity: Arc<Activity>,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

impl Link {
    pub fn new(
        gone: tokio::sync::watch::Receiver<bool>,
        activity: Arc<Activity>,
        reader: tokio::task::JoinHandle<()>,
        writer: tokio::task::JoinHandle<()>,
    ) -> Self {
        Link {
            gone,
            activity,
            reader,
            writer,
        }
    }

    /// The end, once every sender of the writer's queue is dropped: what
    /// is queued written and the socket shut down, then a moment for the
    /// client to close its side.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.writer).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), self.gone.wait_for(|g| *g)).await;
        self.reader.abort();
    }

    /// Drop everything now (the client is gone or misbehaved).
    pub fn abort(self) {
        self.reader.abort();
        self.writer.abort();
    }
}

/// When a frame last went either way.
pub struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

impl Activity {
    pub fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }
    pub fn touch(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    /// Resolves once nothing has moved for `idle`.
    pub async fn idle_for(&self, idle: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let quiet = self.start.elapsed().saturating_sub(last);
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    }
}

impl Connection {
    pub fn start<R, W>(read: R, write: W, already: &[u8]) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::new());
        let (out_tx, out_rx) = mpsc::channel(16);
        let (in_tx, in_rx) = mpsc::channel(16);
        let (gone_tx, gone) = tokio::sync::watch::channel(false);
        let sender = Sender { tx: out_tx };
        let reader = tokio::spawn(read_loop(
            FrameReader::new(read, already),
            in_tx,
            sender.clone(),
            activity.clone(),
            gone_tx,
        ));
        let writer = tokio::spawn(write_loop(write, out_rx, activity.clone()));
        Connection {
            incoming: in_rx,
            sender,
            link: Link::new(gone, activity, reader, writer),
        }
    }

    /// Take no more streams: later ones are refused, and the reader lets
    /// go of its header inflater.
    pub fn stop_taking_streams(&mut self) {
        self.incoming.close();
    }

    /// The end: GOAWAY, everything queued written, the socket shut down,
    /// then a moment for the client to close its side.
    pub async fn close(self, last_stream: u32) {
        let Connection {
            incoming,
            sender,
            link,
        } = self;
        drop(incoming);
        let _ = sender.goaway(last_stream).await;
        drop(sender);
        link.close().await;
    }

    /// Drop everything now (the client is gone or misbehaved).
    pub fn abort(self) {
        self.link.abort();
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut frames: FrameReader<R>,
    incoming: mpsc::Sender<Incoming>,
    sender: Sender,
    activity: Arc<Activity>,
    gone: tokio::sync::watch::Sender<bool>,
) {
    // Dropped once the session takes no more streams (an exec's are all
    // there at its start): later ones are refused without being read.
    let mut decoder = Some(HeaderDecoder::default());
    let mut streams: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
    let mut next_id = 1u32;
    loop {
        let next = match decoder {
            Some(_) => tokio::select! {
                f = frames.next() => f,
                _ = incoming.closed() => {
                    decoder = None;
                    continue;
                }
            },
            None => frames.next().await,
        };
        let frame = match next {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!("streaming connection: {e}");
                break;
            }
        };
        activity.touch();
        match frame {
            Frame::SynStream { id, fin, block } => {
                let Some(decoder) = decoder.as_mut() else {
                    let _ = sender.rst(id, RST_CANCEL).await;
                    continue;
                };
                // While streams are taken, the block must be inflated even
                // for a stream refused, to keep the zlib stream in step.
                let headers = match decoder.decode(&block) {
                    Ok(h) => h,
                    Err(e) => {
                        tracing::debug!("streaming connection: {e}");
                        break;
                    }
                };
                if id < next_id || id % 2 == 0 {
                    let _ = sender.rst(id, RST_PROTOCOL_ERROR).await;
                    continue;
                }
                next_id = id + 2;
                let (tx, rx) = mpsc::channel(8);
                if !fin {
                    streams.insert(id, tx);
                }
                let s = Incoming {
                    id,
                    headers,
                    data: rx,
                };
                if incoming.send(s).await.is_err() {
                    // Nobody takes new streams any more: refuse it.
                    let _ = sender.rst(id, RST_CANCEL).await;
                }
            }
            Frame::Data { id, fin, payload } => {
                if let Some(tx) = streams.get(&id) {
                    if !payload.is_empty() && tx.send(payload).await.is_err() {
                        // Its reader is gone: what it would say is dropped.
                        streams.remove(&id);
                    }
                }
                if fin {
                    streams.remove(&id);
                }
            }
            Frame::RstStream { id, .. } => {
                streams.remove(&id);
            }
            Frame::Ping(id) => {
                if id % 2 == 1 {
                    let _ = sender.send(Out::Ping(id)).await;
                }
            }
            Frame::GoAway => break,
            Frame::Ignored => {}
        }
    }
    drop(streams);
    let _ = gone.send(true);
}

/// Data at least this large goes straight to the socket beside its
/// 8-byte head (one writev, no copy); smaller frames gather in a buffer
/// that is written when the queue runs dry.
const GATHER_MAX: usize = 4 * 1024;

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut rx: mpsc::Receiver<Out>,
    activity: Arc<Activity>,
) {
    let mut headers = HeaderEncoder::default();
    // Small frames waiting to be written; empty (no allocation) while the
    // session idles.
    let mut pending: Vec<u8> = Vec::new();
    while let Some(o) = rx.recv().await {
        let r = match o {
            Out::Reply(id) => {
                let block = headers.encode(&Headers::default());
                control_head(&mut pending, SYN_REPLY, 0, 4 + block.len());
                pending.extend_from_slice(&id.to_be_bytes());
                pending.extend_from_slice(&block);
                Ok(())
            }
            Out::Data(id, b) if b.len() >= GATHER_MAX => {
                pending.extend_from_slice(&data_head(id, false, b.len()));
                let r = write_both(&mut w, &pending, &b).await;
                pending.clear();
                r
            }
            Out::Data(id, b) => {
                pending.extend_from_slice(&data_head(id, false, b.len()));
                pending.extend_from_slice(&b);
                Ok(())
            }
            Out::Fin(id) => {
                pending.extend_from_slice(&data_head(id, true, 0));
                Ok(())
            }
            Out::Rst(id, status) => {
                control_head(&mut pending, RST_STREAM, 0, 8);
                pending.extend_from_slice(&id.to_be_bytes());
                pending.extend_from_slice(&status.to_be_bytes());
                Ok(())
            }
            Out::Ping(id) => {
                control_head(&mut pending, PING, 0, 4);
                pending.extend_from_slice(&id.to_be_bytes());
                Ok(())
            }
            Out::GoAway(last) => {
                control_head(&mut pending, GOAWAY, 0, 8);
                pending.extend_from_slice(&last.to_be_bytes());
                pending.extend_from_slice(&0u32.to_be_bytes());
                Ok(())
            }
        };
        if r.is_err() {
            return;
        }
        activity.touch();
        if rx.is_empty() || pending.len() >= 64 * 1024 {
            if !pending.is_empty() && w.write_all(&pending).await.is_err() {
                return;
            }
            pending.clear();
            if pending.capacity() > 64 * 1024 {
                pending = Vec::new();
            }
            if w.flush().await.is_err() {
                return;
            }
        }
    }
    if !pending.is_empty() {
        let _ = w.write_all(&pending).await;
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}

/// Write all of `a` then all of `b`, in as few writev(2) calls as the
/// socket takes.
async fn write_both<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut a: &[u8],
    mut b: &[u8],
) -> std::io::Result<()> {
    while !a.is_empty() {
        let n = w
            .write_vectored(&[std::io::IoSlice::new(a), std::io::IoSlice::new(b)])
            .await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        if n < a.len() {
            a = &a[n..];
        } else {
            b = &b[n - a.len()..];
            a = &[];
        }
    }
    w.write_all(b).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_the_specs() {
        let d = dictionary();
        assert_eq!(d.len(), 1423);
        // zlib's FDICT id: the dictionary's Adler-32.
        let (mut a, mut b) = (1u32, 0u32);
        for &x in d {
            a = (a + u32::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!((b << 16) | a, 0xE3C6_A7C2);
    }

    #[test]
    fn empty_reply_blocks_are_stored_blocks_of_one_stream() {
        let mut c = HeaderEncoder::default();
        assert_eq!(
            c.encode(&Headers::default()),
            [0x78, 0x01, 0x00, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0xff, 0xff]
        );
        assert_eq!(
            c.encode(&Headers::default()),
            [0x00, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0xff, 0xff]
        );
    }

    #[test]
    fn a_go_style_compressed_block_is_read() {
        // What spdystream sends first: level 9 with the dictionary,
        // sync-flushed (an empty block).
        let block = [
            0x78, 0xf9, 0xe3, 0xc6, 0xa7, 0xc2, 0x02, 0xa6, 0x23, 0x06, 0x00, 0x00, 0x00, 0x00,
            0xff, 0xff,
        ];
        assert_eq!(
            HeaderDecoder::default().decode(&block).unwrap(),
            Headers::default()
        );
    }

    #[test]
    fn header_blocks_round_trip_on_one_zlib_stream() {
        let (mut tx, mut rx) = (HeaderEncoder::default(), HeaderDecoder::default());
        for i in 0..3 {
            let h = Headers(vec![
                ("streamtype".into(), "data".into()),
                ("port".into(), "80".into()),
                ("requestid".into(), i.to_string()),
            ]);
            assert_eq!(rx.decode(&tx.encode(&h)).unwrap(), h);
        }
    }

    #[test]
    fn garbage_and_bombs_are_errors() {
        let mut rx = HeaderDecoder::default();
        assert!(rx.decode(b"not zlib at all").is_err());
        // 1 MiB of zeros in a valid stream inflates past the cap.
        let mut tx = HeaderEncoder::default();
        let big = Headers(vec![("x".into(), "\0".repeat(1 << 20))]);
        assert!(HeaderDecoder::default().decode(&tx.encode(&big)).is_err());
    }

    #[tokio::test]
    async fn frames_are_read_across_reads() {
        let mut bytes = Vec::new();
        control_head(&mut bytes, PING, 0, 4);
        bytes.extend_from_slice(&7u32.to_be_bytes());
        bytes.extend_from_slice(&data_head(3, true, 2));
        bytes.extend_from_slice(b"hi");
        let (head, rest) = bytes.split_at(5);
        let mut r = FrameReader::new(rest, head);
        assert!(matches!(r.next().await.unwrap(), Some(Frame::Ping(7))));
        match r.next().await.unwrap() {
            Some(Frame::Data {
                id: 3,
                fin: true,
                payload,
            }) => assert_eq!(&payload[..], b"hi"),
            f => panic!("{f:?}"),
        }
        assert!(r.next().await.unwrap().is_none());
    }

    fn syn_stream(id: u32, block: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        control_head(&mut f, SYN_STREAM, 0, 10 + block.len());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(block);
        f
    }

    /// Once a session takes no more streams, the reader drops its inflater:
    /// a later SYN_STREAM is refused unread (its block, garbage here, would
    /// otherwise end the connection), and the connection goes on.
    #[tokio::test]
    async fn streams_after_the_last_are_refused_unread() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (r, w) = tokio::io::split(server);
        let mut conn = Connection::start(r, w, &[]);
        let (client_r, mut client_w) = tokio::io::split(client);
        let mut enc = HeaderEncoder::default();
        let block = enc.encode(&Headers(vec![("streamtype".into(), "error".into())]));
        client_w.write_all(&syn_stream(1, &block)).await.unwrap();
        let st = conn.incoming.recv().await.unwrap();
        assert_eq!(st.headers.get("streamtype"), Some("error"));
        conn.stop_taking_streams();
        // The reader sees the close before the next frame (it waits on both).
        tokio::task::yield_now().await;
        let mut late = syn_stream(3, b"not a zlib block");
        control_head(&mut late, PING, 0, 4);
        late.extend_from_slice(&9u32.to_be_bytes());
        client_w.write_all(&late).await.unwrap();
        let mut from_server = FrameReader::new(client_r, &[]);
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match from_server.next().await.unwrap().unwrap() {
                Frame::RstStream { id, status } => seen.push(format!("rst {id} {status}")),
                Frame::Ping(id) => seen.push(format!("ping {id}")),
                f => panic!("{f:?}"),
            }
        }
        assert_eq!(seen, [format!("rst 3 {RST_CANCEL}"), "ping 9".into()]);
        assert!(!*conn.link.gone.borrow());
    }

    #[tokio::test]
    async fn an_oversized_frame_is_refused() {
        let bytes = data_head(1, false, DATA_MAX + 1);
        let mut r = FrameReader::new(&bytes[..], &[]);
        assert!(r.next().await.is_err());
    }
}
