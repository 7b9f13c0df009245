//! Any client's `:authority` on the CRI socket.
//!
//! grpc-go (crictl, critest, kubelets before 1.26), grpcurl and gRPC C-core
//! 1.57+ put the unix socket's path in `:authority`, often percent-encoded
//! (`%2Frun%2Fpodscope%2Fcri.sock`). The `h2` crate under tonic parses the
//! header with `http::uri::Authority`, finds it malformed and resets the
//! stream (PROTOCOL_ERROR), so every call of those clients failed. No
//! maintained Rust HTTP/2 server stack other than `h2` exists, and `h2` has
//! no switch for it, so this layer sits between the socket and hyper:
//!
//! - client → server: the connection preface and every frame but HEADERS
//!   and CONTINUATION pass through byte for byte. A header block (HEADERS
//!   plus its CONTINUATIONs, padding stripped, priority kept) is decoded
//!   with HPACK, keeping the client's dynamic table; an `:authority` that
//!   `http` would refuse becomes `localhost` (what kubelet itself sends);
//!   the block is re-encoded without the dynamic table (literals only), so
//!   the table h2 decodes with stays empty and can never disagree with the
//!   client's. `grpc-timeout` is renamed `deadline::DEADLINE_HEADER`, so
//!   that the frontend keeps the caller's deadline itself (`deadline`: tonic
//!   would answer CANCELLED where gRPC names DEADLINE_EXCEEDED).
//! - server → client: untouched (writes go straight to the socket).
//!
//! A header block that cannot be decoded, or a frame sequence HTTP/2 calls
//! a connection error, closes the connection, as h2 itself would.

use super::deadline::{DEADLINE_HEADER, GRPC_TIMEOUT};
use loona_hpack::encoder::encode_integer_into;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_LEN: usize = 9;
const TYPE_HEADERS: u8 = 0x1;
const TYPE_CONTINUATION: u8 = 0x9;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
const PRIORITY_LEN: usize = 5;
/// The frame size every HTTP/2 peer must accept (SETTINGS_MAX_FRAME_SIZE's
/// initial value): re-encoded blocks are cut into frames of at most this.
const MAX_FRAME: usize = 16_384;
/// The dynamic table size h2 advertises (hyper leaves SETTINGS_HEADER_TABLE_SIZE
/// at its default), so the most a client's encoder may use.
const HEADER_TABLE_SIZE: usize = 4096;
/// Bounds on one header block, compressed and decoded (name + value + 32
/// per field, as HTTP/2 counts a header list). hyper refuses lists over
/// 16 KiB itself; these only keep a hostile client from making this layer
/// buffer without end. Beyond them the connection is closed.
pub const MAX_BLOCK: usize = 1 << 20;
pub const MAX_DECODED: usize = 1 << 20;
/// What replaces an authority h2 would refuse.
const REPLACEMENT_AUTHORITY: &[u8] = b"localhost";

#[derive(Debug, PartialEq, Eq)]
pub enum RewriteError {
    /// A frame sequence HTTP/2 treats as a connection error.
    Protocol(String),
    /// The header block's HPACK could not be decoded (COMPRESSION_ERROR).
    Compression(String),
    /// Over `MAX_BLOCK` or `MAX_DECODED`.
    TooLarge(String),
}

impl std::fmt::Display for RewriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RewriteError::Protocol(m) => write!(f, "HTTP/2 protocol error: {m}"),
            RewriteError::Compression(m) => write!(f, "HPACK decoding failed: {m}"),
            RewriteError::TooLarge(m) => write!(f, "header block too large: {m}"),
        }
    }
}

impl std::error::Error for RewriteError {}

enum Phase {
    /// Matching the connection preface; `n` bytes of it seen.
    Preface(usize),
    /// At a frame boundary.
    Frame,
    /// Inside a frame that passes through; this many payload bytes left.
    Pass(usize),
    /// Not HTTP/2 with prior knowledge: everything passes through and hyper
    /// answers it as it would.
    Transparent,
}

/// A header block being collected from HEADERS and CONTINUATION frames.
struct OpenBlock {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; PRIORITY_LEN]>,
    fragment: Vec<u8>,
}

/// The client-to-server half of a connection: feed it what the client
/// sent, it appends what hyper should read. Pure; the I/O is `Rewriting`.
pub struct Rewriter {
    phase: Phase,
    decoder: loona_hpack::Decoder<'static>,
    block: Option<OpenBlock>,
    /// Header blocks re-encoded and authorities replaced (the tests and the
    /// bench read them).
    pub blocks: u64,
    pub replaced: u64,
}

impl Default for Rewriter {
    fn default() -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        Rewriter {
            phase: Phase::Preface(0),
            decoder,
            block: None,
            blocks: 0,
            replaced: 0,
        }
    }
}

impl Rewriter {
    /// Consume a prefix of `input`, appending its rewritten form to `out`.
    /// Returns how many bytes were consumed; the rest (an incomplete frame
    /// header or header-block frame) must be offered again with more data.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, RewriteError> {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match self.phase {
                Phase::Transparent => {
                    out.extend_from_slice(rest);
                    return Ok(input.len());
                }
                Phase::Preface(seen) => {
                    let want = &PREFACE[seen..];
                    let n = want.len().min(rest.len());
                    if rest[..n] != want[..n] {
                        self.phase = Phase::Transparent;
                        continue;
                    }
                    out.extend_from_slice(&rest[..n]);
                    used += n;
                    if n < want.len() {
                        self.phase = Phase::Preface(seen + n);
                        return Ok(used);
                    }
                    self.phase = Phase::Frame;
                }
                Phase::Pass(left) => {
                    let n = left.min(rest.len());
                    out.extend_from_slice(&rest[..n]);
                    used += n;
                    self.passed(n);
                    if n == rest.len() {
                        return Ok(used);
                    }
                }
                Phase::Frame => {
                    if rest.len() < FRAME_HEADER_LEN {
                        return Ok(used);
                    }
                    let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
                    let (kind, flags) = (rest[3], rest[4]);
                    let stream =
                        u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
                    let is_block = kind == TYPE_HEADERS || kind == TYPE_CONTINUATION;
                    if let Some(open) = &self.block {
                        if kind != TYPE_CONTINUATION || stream != open.stream {
                            return Err(RewriteError::Protocol(format!(
                                "frame type {kind:#x} on stream {stream} inside the header block of stream {}",
                                open.stream
                            )));
                        }
                    }
                    if !is_block {
                        out.extend_from_slice(&rest[..FRAME_HEADER_LEN]);
                        used += FRAME_HEADER_LEN;
                        self.phase = Phase::Pass(len);
                        continue;
                    }
                    if len > MAX_BLOCK {
                        return Err(RewriteError::TooLarge(format!(
                            "a {len}-byte frame on stream {stream}"
                        )));
                    }
                    if rest.len() < FRAME_HEADER_LEN + len {
                        return Ok(used);
                    }
                    let payload = &rest[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
                    used += FRAME_HEADER_LEN + len;
                    if kind == TYPE_HEADERS {
                        self.open_block(stream, flags, payload)?;
                    } else {
                        self.continue_block(stream, payload)?;
                    }
                    if flags & FLAG_END_HEADERS != 0 {
                        self.close_block(out)?;
                    }
                }
            }
        }
    }

    /// `n` payload bytes of a passing frame went to the reader directly.
    pub fn passed(&mut self, n: usize) {
        if let Phase::Pass(left) = self.phase {
            self.phase = if left > n {
                Phase::Pass(left - n)
            } else {
                Phase::Frame
            };
        }
    }

    /// Payload bytes of the current passing frame still to come, if the
    /// reader may take them straight from the socket.
    pub fn passing(&self) -> usize {
        match self.phase {
            Phase::Pass(left) => left,
            _ => 0,
        }
    }

    fn open_block(&mut self, stream: u32, flags: u8, payload: &[u8]) -> Result<(), RewriteError> {
        if stream == 0 {
            return Err(RewriteError::Protocol("HEADERS on stream 0".into()));
        }
        let mut body = payload;
        let mut pad = 0usize;
        if flags & FLAG_PADDED != 0 {
            let (&p, tail) = body.split_first().ok_or_else(|| {
                RewriteError::Protocol("padded HEADERS without a pad length".into())
            })?;
            pad = p as usize;
            body = tail;
        }
        let mut priority = None;
        if flags & FLAG_PRIORITY != 0 {
            if body.len() < PRIORITY_LEN {
                return Err(RewriteError::Protocol(
                    "HEADERS too short for its priority".into(),
                ));
            }
            let mut p = [0u8; PRIORITY_LEN];
            p.copy_from_slice(&body[..PRIORITY_LEN]);
            priority = Some(p);
            body = &body[PRIORITY_LEN..];
        }
        if pad > body.len() {
            return Err(RewriteError::Protocol(format!(
                "HEADERS on stream {stream}: {pad} bytes of padding in a {}-byte payload",
                payload.len()
            )));
        }
        self.block = Some(OpenBlock {
            stream,
            end_stream: flags & FLAG_END_STREAM != 0,
            priority,
            fragment: body[..body.len() - pad].to_vec(),
        });
        Ok(())
    }

    fn continue_block(&mut self, stream: u32, payload: &[u8]) -> Result<(), RewriteError> {
        let Some(open) = self.block.as_mut() else {
            return Err(RewriteError::Protocol(format!(
                "CONTINUATION on stream {stream} without a HEADERS before it"
            )));
        };
        if open.fragment.len() + payload.len() > MAX_BLOCK {
            return Err(RewriteError::TooLarge(format!(
                "stream {stream}'s header block passes {MAX_BLOCK} bytes"
            )));
        }
        open.fragment.extend_from_slice(payload);
        Ok(())
    }

    /// Decode the finished block, fix its authority, re-encode and frame it.
    fn close_block(&mut self, out: &mut Vec<u8>) -> Result<(), RewriteError> {
        let Some(open) = self.block.take() else {
            return Ok(());
        };
        let mut encoded = Vec::with_capacity(open.fragment.len() + 64);
        let mut decoded = 0usize;
        let mut replaced = false;
        self.decoder
            .decode_with_cb(&open.fragment, |name, value| {
                decoded += name.len() + value.len() + 32;
                if decoded > MAX_DECODED {
                    return;
                }
                let value: &[u8] = if &*name == b":authority" && !authority_ok(&value) {
                    replaced = true;
                    REPLACEMENT_AUTHORITY
                } else {
                    &value
                };
                // The caller's deadline goes to `deadline::Deadlines`, past
                // tonic's own timeout layer; a client's header of the name it
                // travels under is not the caller's deadline.
                let name: &[u8] = match &*name {
                    n if n == GRPC_TIMEOUT.as_bytes() => DEADLINE_HEADER.as_bytes(),
                    n if n == DEADLINE_HEADER.as_bytes() => return,
                    n => n,
                };
                encode_literal(name, value, &mut encoded);
            })
            .map_err(|e| RewriteError::Compression(format!("stream {}: {e}", open.stream)))?;
        if decoded > MAX_DECODED {
            return Err(RewriteError::TooLarge(format!(
                "stream {}'s header list decodes to more than {MAX_DECODED} bytes",
                open.stream
            )));
        }
        self.blocks += 1;
        self.replaced += u64::from(replaced);
        write_block(out, &open, &encoded);
        Ok(())
    }
}

/// Whether h2 accepts this `:authority` (it parses it exactly so).
fn authority_ok(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

/// A literal header field without indexing, new name, no Huffman (RFC
/// 7541 §6.2.2): leaves the decoder's dynamic table alone.
fn encode_literal(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.push(0);
    for s in [name, value] {
        // Writing to a Vec cannot fail.
        let _ = encode_integer_into(s.len(), 7, 0, out);
        out.extend_from_slice(s);
    }
}

fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// HEADERS (with the original END_STREAM and priority) then as many
/// CONTINUATIONs as the block needs, END_HEADERS on the last.
fn write_block(out: &mut Vec<u8>, open: &OpenBlock, block: &[u8]) {
    let prio_len = open.priority.map_or(0, |_| PRIORITY_LEN);
    let first = block.len().min(MAX_FRAME - prio_len);
    let mut flags = 0;
    if open.end_stream {
        flags |= FLAG_END_STREAM;
    }
    if open.priority.is_some() {
        flags |= FLAG_PRIORITY;
    }
    if first == block.len() {
        flags |= FLAG_END_HEADERS;
    }
    frame_header(out, prio_len + first, TYPE_HEADERS, flags, open.stream);
    if let Some(p) = open.priority {
        out.extend_from_slice(&p);
    }
    out.extend_from_slice(&block[..first]);
    let mut rest = &block[first..];
    while !rest.is_empty() {
        let n = rest.len().min(MAX_FRAME);
        let flags = if n == rest.len() { FLAG_END_HEADERS } else { 0 };
        frame_header(out, n, TYPE_CONTINUATION, flags, open.stream);
        out.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
    }
}

/// A client connection whose reads go through a `Rewriter`; writes pass
/// straight to the socket.
pub struct Rewriting<S> {
    io: S,
    rewriter: Rewriter,
    /// Bytes read from the client and not yet consumed by the rewriter.
    input: Vec<u8>,
    /// Rewritten bytes not yet handed to the reader, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
    eof: bool,
}

impl<S> Rewriting<S> {
    pub fn new(io: S) -> Self {
        Rewriting {
            io,
            rewriter: Rewriter::default(),
            input: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
            eof: false,
        }
    }
}

const READ_CHUNK: usize = 16 * 1024;

/// An empty buffer that grew for a large header block lets its memory go.
fn shrink_idle(b: &mut Vec<u8>) {
    if b.is_empty() && b.capacity() > 4096 {
        *b = Vec::new();
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewriting<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = (this.out.len() - this.out_pos).min(buf.remaining());
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                return Poll::Ready(Ok(()));
            }
            this.out.clear();
            this.out_pos = 0;
            shrink_idle(&mut this.out);
            if this.eof {
                // A truncated frame goes to hyper as it came; then EOF.
                this.out.append(&mut this.input);
                if this.out.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            // A passing frame's payload (DATA: the messages themselves)
            // goes from the socket straight into the reader's buffer.
            let passing = this.rewriter.passing();
            if passing > 0 && this.input.is_empty() {
                let mut limited = buf.take(passing);
                ready!(Pin::new(&mut this.io).poll_read(cx, &mut limited))?;
                let n = limited.filled().len();
                // SAFETY: the read filled (so initialised) the first `n`
                // unfilled bytes of `buf`, which `limited` views.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                this.rewriter.passed(n);
                return Poll::Ready(Ok(()));
            }
            // Read on the stack, keep only what came: a connection that
            // idles (a crictl exec streaming for hours) holds no buffer.
            let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); READ_CHUNK];
            let mut rb = ReadBuf::uninit(&mut chunk);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                this.eof = true;
                continue;
            }
            this.input.extend_from_slice(rb.filled());
            let used = this
                .rewriter
                .feed(&this.input, &mut this.out)
                .map_err(|e| {
                    tracing::warn!("closing a CRI client connection: {e}");
                    io::Error::new(io::ErrorKind::InvalidData, e)
                })?;
            this.input.drain(..used);
            shrink_idle(&mut this.input);
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewriting<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for Rewriting<S> {
    type ConnectInfo = S::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Headers = Vec<(Vec<u8>, Vec<u8>)>;

    fn hdrs(list: &[(&str, &str)]) -> Headers {
        list.iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    /// What grpc-go 1.58 sends for a unary call on a unix socket.
    fn grpc_go_request(authority: Option<&str>) -> Headers {
        let mut h = vec![(":method", "POST"), (":scheme", "http")];
        h.push((":path", "/runtime.v1.RuntimeService/Version"));
        if let Some(a) = authority {
            h.push((":authority", a));
        }
        h.extend([
            ("content-type", "application/grpc"),
            ("user-agent", "grpc-go/1.58.3"),
            ("te", "trailers"),
            ("grpc-timeout", "1999936u"),
        ]);
        hdrs(&h)
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame_header(&mut f, payload.len(), kind, flags, stream);
        f.extend_from_slice(payload);
        f
    }

    fn settings() -> Vec<u8> {
        frame(0x4, 0, 0, &[])
    }

    /// The server's view: frames parsed back, header blocks decoded with
    /// a fresh decoder (as h2 would), other frames kept raw.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Block {
            stream: u32,
            flags: u8,
            priority: Option<[u8; 5]>,
            headers: Headers,
            frames: usize,
        },
        Raw(Vec<u8>),
    }

    fn server_view(mut bytes: &[u8]) -> Vec<Seen> {
        assert!(bytes.starts_with(PREFACE), "preface passed through");
        bytes = &bytes[PREFACE.len()..];
        let mut dec = loona_hpack::Decoder::new();
        let mut seen = Vec::new();
        // (stream, flags, priority, fragment, frames) of the open block.
        type Open = (u32, u8, Option<[u8; 5]>, Vec<u8>, usize);
        let mut open: Option<Open> = None;
        while !bytes.is_empty() {
            let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
            let (kind, flags) = (bytes[3], bytes[4]);
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            let payload = &bytes[9..9 + len];
            assert!(len <= MAX_FRAME, "frames fit the default frame size");
            match kind {
                TYPE_HEADERS => {
                    assert!(open.is_none());
                    assert_eq!(flags & FLAG_PADDED, 0, "padding is stripped");
                    let (prio, frag) = if flags & FLAG_PRIORITY != 0 {
                        (Some(payload[..5].try_into().unwrap()), &payload[5..])
                    } else {
                        (None, payload)
                    };
                    open = Some((stream, flags, prio, frag.to_vec(), 1));
                }
                TYPE_CONTINUATION => {
                    let o = open.as_mut().expect("continuation after headers");
                    assert_eq!(o.0, stream);
                    o.3.extend_from_slice(payload);
                    o.4 += 1;
                }
                _ => seen.push(Seen::Raw(bytes[..9 + len].to_vec())),
            }
            if matches!(kind, TYPE_HEADERS | TYPE_CONTINUATION) && flags & FLAG_END_HEADERS != 0 {
                let (stream, flags, priority, frag, frames) = open.take().unwrap();
                let headers = dec.decode(&frag).expect("h2 can decode what we send");
                seen.push(Seen::Block {
                    stream,
                    flags: flags & (FLAG_END_STREAM | FLAG_PRIORITY),
                    priority,
                    headers,
                    frames,
                });
            }
            bytes = &bytes[9 + len..];
        }
        assert!(open.is_none(), "no header block left open");
        seen
    }

    fn rewrite(input: &[u8]) -> Vec<u8> {
        let mut r = Rewriter::default();
        let mut out = Vec::new();
        assert_eq!(r.feed(input, &mut out).unwrap(), input.len());
        out
    }

    fn block(stream: u32, headers: Headers) -> Seen {
        Seen::Block {
            stream,
            flags: FLAG_END_STREAM,
            priority: None,
            headers,
            frames: 1,
        }
    }

    /// What the server reads of `sent`: its deadline under `DEADLINE_HEADER`.
    fn handed_over(mut sent: Headers) -> Headers {
        for (n, _) in sent.iter_mut() {
            if n == GRPC_TIMEOUT.as_bytes() {
                *n = DEADLINE_HEADER.as_bytes().to_vec();
            }
        }
        sent
    }

    /// The caller's deadline reaches `deadline::Deadlines` and nothing else
    /// (tonic's own timeout layer never sees it); a header of the name it
    /// travels under that the client sent itself does not reach it at all.
    #[test]
    fn the_deadline_is_handed_over_and_a_forged_one_dropped() {
        let mut req = grpc_go_request(Some("localhost"));
        req.insert(4, (DEADLINE_HEADER.as_bytes().to_vec(), b"1H".to_vec()));
        req.push((b"x-after".to_vec(), b"kept".to_vec()));
        let mut input = PREFACE.to_vec();
        let fragment =
            loona_hpack::Encoder::new().encode(req.iter().map(|(n, v)| (&n[..], &v[..])));
        input.extend(frame(
            TYPE_HEADERS,
            FLAG_END_HEADERS | FLAG_END_STREAM,
            1,
            &fragment,
        ));
        let seen = server_view(&rewrite(&input));
        let Seen::Block { headers, .. } = &seen[0] else {
            panic!("{seen:?}")
        };
        let named = |name: &str| -> Vec<&[u8]> {
            headers
                .iter()
                .filter(|(n, _)| n == name.as_bytes())
                .map(|(_, v)| v.as_slice())
                .collect()
        };
        assert_eq!(named(DEADLINE_HEADER), vec![&b"1999936u"[..]]);
        assert!(named(GRPC_TIMEOUT).is_empty());
        assert_eq!(named("x-after"), vec![&b"kept"[..]]);
        assert_eq!(headers.len(), req.len() - 1);
    }

    fn authority_of(h: &Headers) -> Option<&[u8]> {
        h.iter()
            .find(|(n, _)| n == b":authority")
            .map(|(_, v)| v.as_slice())
    }

    #[test]
    fn every_authority_form_reaches_the_server_as_one_it_accepts() {
        for (sent, expect) in [
            (Some("%2Frun%2Fpodscope%2Fcri.sock"), Some("localhost")),
            (Some("/run/podscope/cri.sock"), Some("localhost")),
            (Some("unix:///run/podscope/cri.sock"), Some("localhost")),
            (Some("localhost"), Some("localhost")),
            (Some("podscope-cri:443"), Some("podscope-cri:443")),
            (None, None),
        ] {
            let mut enc = loona_hpack::Encoder::new();
            let req = grpc_go_request(sent);
            let mut input = PREFACE.to_vec();
            input.extend(settings());
            let fragment = enc.encode(req.iter().map(|(n, v)| (&n[..], &v[..])));
            input.extend(frame(
                TYPE_HEADERS,
                FLAG_END_HEADERS | FLAG_END_STREAM,
                1,
                &fragment,
            ));
            let seen = server_view(&rewrite(&input));
            let mut want = handed_over(req.clone());
            if let Some(a) = want.iter_mut().find(|(n, _)| n == b":authority") {
                a.1 = expect.unwrap().as_bytes().to_vec();
            }
            assert_eq!(
                seen,
                vec![Seen::Raw(settings()), block(1, want)],
                "{sent:?}"
            );
        }
    }

    #[test]
    fn the_clients_dynamic_table_is_followed_across_blocks() {
        // The encoder indexes every field, so the second and third requests
        // are mostly references into the dynamic table, the authority among them.
        let mut enc = loona_hpack::Encoder::new();
        let mut input = PREFACE.to_vec();
        let mut want = Vec::new();
        for (i, path) in ["/a.B/One", "/a.B/Two", "/a.B/One"].iter().enumerate() {
            let mut req = grpc_go_request(Some("%2Fsock"));
            req[2].1 = path.as_bytes().to_vec();
            let fragment = enc.encode(req.iter().map(|(n, v)| (&n[..], &v[..])));
            let stream = 1 + 2 * i as u32;
            input.extend(frame(
                TYPE_HEADERS,
                FLAG_END_HEADERS | FLAG_END_STREAM,
                stream,
                &fragment,
            ));
            input.extend(frame(0x0, 0x1, stream, b"\0\0\0\0\x02\x0a\x00"));
            req[3].1 = b"localhost".to_vec();
            want.push(block(stream, handed_over(req)));
            want.push(Seen::Raw(frame(0x0, 0x1, stream, b"\0\0\0\0\x02\x0a\x00")));
        }
        let mut r = Rewriter::default();
        let mut out = Vec::new();
        r.feed(&input, &mut out).unwrap();
        assert_eq!(server_view(&out), want);
        assert_eq!((r.blocks, r.replaced), (3, 3));
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn huffman_and_table_state_from_rfc7541_c4() {
        // RFC 7541 C.4: three requests, Huffman-coded, sharing the table.
        let blocks = [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ];
        let mut input = PREFACE.to_vec();
        for (i, b) in blocks.iter().enumerate() {
            input.extend(frame(
                TYPE_HEADERS,
                FLAG_END_HEADERS,
                1 + 2 * i as u32,
                &hex(b),
            ));
        }
        let common = [(":method", "GET"), (":scheme", "http"), (":path", "/")];
        let mut second = common.to_vec();
        second.extend([
            (":authority", "www.example.com"),
            ("cache-control", "no-cache"),
        ]);
        let third = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ];
        let mut first = common.to_vec();
        first.push((":authority", "www.example.com"));
        let want: Vec<Seen> = [first, second, third.to_vec()]
            .iter()
            .enumerate()
            .map(|(i, h)| Seen::Block {
                stream: 1 + 2 * i as u32,
                flags: 0,
                priority: None,
                headers: hdrs(h),
                frames: 1,
            })
            .collect();
        assert_eq!(server_view(&rewrite(&input)), want);
    }

    #[test]
    fn continuation_padding_and_priority_come_through() {
        let req = grpc_go_request(Some("%2Frun%2Fpodscope%2Fcri.sock"));
        let fragment =
            loona_hpack::Encoder::new().encode(req.iter().map(|(n, v)| (&n[..], &v[..])));
        let (a, rest) = fragment.split_at(7);
        let (b, c) = rest.split_at(5);
        // HEADERS: pad length 3, priority (exclusive, depends on 0, weight
        // 200), then the first piece and the padding.
        let prio = [0x80, 0, 0, 0, 200];
        let mut payload = vec![3];
        payload.extend(prio);
        payload.extend(a);
        payload.extend([0, 0, 0]);
        let mut input = PREFACE.to_vec();
        input.extend(frame(
            TYPE_HEADERS,
            FLAG_PADDED | FLAG_PRIORITY | FLAG_END_STREAM,
            5,
            &payload,
        ));
        input.extend(frame(TYPE_CONTINUATION, 0, 5, b));
        input.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 5, c));
        input.extend(frame(0x2, 0, 5, &[0, 0, 0, 3, 16])); // PRIORITY frame: untouched
        let mut want = handed_over(req.clone());
        want[3].1 = b"localhost".to_vec();
        let expected = vec![
            Seen::Block {
                stream: 5,
                flags: FLAG_END_STREAM | FLAG_PRIORITY,
                priority: Some(prio),
                headers: want,
                frames: 1,
            },
            Seen::Raw(frame(0x2, 0, 5, &[0, 0, 0, 3, 16])),
        ];
        assert_eq!(server_view(&rewrite(&input)), expected);
        // The same bytes a few at a time: partial frames wait for the rest.
        for step in [1, 2, 9, 10, 17] {
            let mut r = Rewriter::default();
            let (mut out, mut pending) = (Vec::new(), Vec::new());
            for chunk in input.chunks(step) {
                pending.extend_from_slice(chunk);
                let used = r.feed(&pending, &mut out).unwrap();
                pending.drain(..used);
            }
            assert!(pending.is_empty());
            assert_eq!(server_view(&out), expected, "fed {step} bytes at a time");
        }
    }

    #[test]
    fn a_block_larger_than_a_frame_is_cut_into_continuations() {
        let mut req = grpc_go_request(Some("%2Fsock"));
        req.push((b"x-big".to_vec(), vec![b'v'; 40_000]));
        let fragment =
            loona_hpack::Encoder::new().encode(req.iter().map(|(n, v)| (&n[..], &v[..])));
        let mut input = PREFACE.to_vec();
        // The client's own frames: 16 KiB pieces.
        let pieces: Vec<&[u8]> = fragment.chunks(MAX_FRAME).collect();
        for (i, p) in pieces.iter().enumerate() {
            let kind = if i == 0 {
                TYPE_HEADERS
            } else {
                TYPE_CONTINUATION
            };
            let flags = if i + 1 == pieces.len() {
                FLAG_END_HEADERS
            } else {
                0
            };
            input.extend(frame(kind, flags, 1, p));
        }
        let seen = server_view(&rewrite(&input));
        let Seen::Block {
            headers, frames, ..
        } = &seen[0]
        else {
            panic!("{seen:?}")
        };
        assert_eq!(*frames, 3);
        assert_eq!(authority_of(headers), Some(&b"localhost"[..]));
        assert_eq!(headers.last().unwrap().1.len(), 40_000);
    }

    #[test]
    fn other_traffic_passes_byte_for_byte() {
        let mut input = PREFACE.to_vec();
        input.extend(settings());
        input.extend(frame(0x8, 0, 0, &[0, 1, 0, 0])); // WINDOW_UPDATE
        input.extend(frame(0x0, 0x8, 1, &[2, b'h', b'i', 0, 0])); // padded DATA
        input.extend(frame(0x6, 0, 0, &[1; 8])); // PING
        assert_eq!(rewrite(&input), input);
        // Not HTTP/2 (an HTTP/1.1 request): hyper gets it as it came.
        let h1 = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(rewrite(h1), h1);
    }

    fn error_of(frames: &[Vec<u8>]) -> RewriteError {
        let mut input = PREFACE.to_vec();
        for f in frames {
            input.extend_from_slice(f);
        }
        Rewriter::default()
            .feed(&input, &mut Vec::new())
            .unwrap_err()
    }

    #[test]
    fn broken_sequences_are_connection_errors() {
        let block = loona_hpack::Encoder::new().encode([(&b":method"[..], &b"POST"[..])]);
        let e = error_of(&[frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 1, &block)]);
        assert!(matches!(e, RewriteError::Protocol(_)), "{e}");
        let e = error_of(&[frame(TYPE_HEADERS, 0, 1, &block), frame(0x0, 0, 1, b"x")]);
        assert!(
            e.to_string()
                .contains("inside the header block of stream 1"),
            "{e}"
        );
        let e = error_of(&[
            frame(TYPE_HEADERS, 0, 1, &block),
            frame(TYPE_CONTINUATION, 4, 3, &[]),
        ]);
        assert!(matches!(e, RewriteError::Protocol(_)), "{e}");
        let e = error_of(&[frame(
            TYPE_HEADERS,
            FLAG_PADDED | FLAG_END_HEADERS,
            1,
            &[200, 0x82],
        )]);
        assert!(e.to_string().contains("padding"), "{e}");
        let e = error_of(&[frame(TYPE_HEADERS, FLAG_END_HEADERS, 0, &block)]);
        assert!(matches!(e, RewriteError::Protocol(_)), "{e}");
        // An index the table does not have.
        let e = error_of(&[frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &[0xff, 0x7f])]);
        assert!(matches!(e, RewriteError::Compression(_)), "{e}");
        // A table larger than the server allows.
        let e = error_of(&[frame(
            TYPE_HEADERS,
            FLAG_END_HEADERS,
            1,
            &[0x3f, 0xe1, 0x3f, 0x82],
        )]);
        assert!(matches!(e, RewriteError::Compression(_)), "{e}");
    }

    #[test]
    fn a_compression_bomb_is_refused_before_it_grows() {
        // One 4000-byte entry, then thousands of one-byte references to it.
        let mut enc = loona_hpack::Encoder::new();
        let mut fragment = enc.encode([(&b"x-bomb"[..], &[b'b'; 4000][..])]);
        fragment.extend(std::iter::repeat_n(0xbe, 300)); // index 62: the entry
        let e = error_of(&[frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &fragment)]);
        assert!(matches!(e, RewriteError::TooLarge(_)), "{e}");
        // Endless CONTINUATIONs stop at MAX_BLOCK.
        let mut frames = vec![frame(TYPE_HEADERS, 0, 1, &[0x82])];
        frames.extend((0..70).map(|_| frame(TYPE_CONTINUATION, 0, 1, &[0x82; MAX_FRAME])));
        let e = error_of(&frames);
        assert!(matches!(e, RewriteError::TooLarge(_)), "{e}");
    }

    /// The real HTTP/2 server under tonic, reading through `Rewriting`,
    /// accepts a request grpc-go's way; without it, h2 refuses the stream.
    #[tokio::test]
    async fn h2_accepts_grpc_gos_authority_through_the_rewrite() {
        use tokio::io::AsyncWriteExt;
        let client_bytes = |authority: &str| {
            let req = grpc_go_request(Some(authority));
            let fragment =
                loona_hpack::Encoder::new().encode(req.iter().map(|(n, v)| (&n[..], &v[..])));
            let mut b = PREFACE.to_vec();
            b.extend(settings());
            b.extend(frame(
                TYPE_HEADERS,
                FLAG_END_HEADERS | FLAG_END_STREAM,
                1,
                &fragment,
            ));
            b
        };
        async fn first_request<S>(io: S) -> Result<http::Request<h2::RecvStream>, h2::Error>
        where
            S: AsyncRead + AsyncWrite + Unpin,
        {
            let mut conn = h2::server::handshake(io).await?;
            let accepted = conn.accept().await;
            accepted.expect("a request or an error").map(|(req, _)| req)
        }

        let (mut client, server) = tokio::io::duplex(64 * 1024);
        client
            .write_all(&client_bytes("%2Frun%2Fpodscope%2Fcri.sock"))
            .await
            .unwrap();
        let req = first_request(Rewriting::new(server)).await.unwrap();
        assert_eq!(req.uri().authority().unwrap().as_str(), "localhost");
        assert_eq!(req.uri().path(), "/runtime.v1.RuntimeService/Version");
        assert_eq!(req.headers()[DEADLINE_HEADER], "1999936u");
        assert!(!req.headers().contains_key(GRPC_TIMEOUT));

        // The same bytes straight to h2: the stream is reset, which is what
        // crictl saw. h2 then waits for the next stream: a timeout says so.
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        client
            .write_all(&client_bytes("%2Frun%2Fpodscope%2Fcri.sock"))
            .await
            .unwrap();
        let direct =
            tokio::time::timeout(std::time::Duration::from_millis(300), first_request(server))
                .await;
        assert!(
            !matches!(direct, Ok(Ok(_))),
            "h2 alone accepts it: the rewrite is no longer needed"
        );
    }
}
