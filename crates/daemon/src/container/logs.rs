//! A container's stdout and stderr, from its pipes (or its terminal) into
//! the CRI log file kubelet reads: one record per line,
//! `<RFC3339Nano> stdout|stderr F|P <text>`.
//!
//! - A line longer than 16 KiB is cut into `P` (partial) records and ends
//!   with an `F`; a last line with no newline is written as `F` when the
//!   stream ends.
//! - The daemon holds no process per container: a task reads each pipe
//!   as it fills. The pipes' write ends are systemd's (the unit's
//!   StandardOutput/Error file descriptors); the read ends are the
//!   daemon's and, so that a write never meets a pipe with no reader while
//!   the daemon is down, also the pod init's (see `pod::holder`).
//! - Every record of a read is formatted first and written with one
//!   write(2) under the file's lock, so stdout and stderr records never
//!   interleave and a reopened file (log rotation) gets whole records.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

/// CRI's limit on one record's text: longer lines are split.
pub const MAX_RECORD: usize = 16 * 1024;
/// The pipe's buffer (the kernel's default pipe-max-size): what a
/// container may write while nobody reads before its writes block.
pub const READ_CHUNK: usize = 64 * 1024;
/// A reader's first buffer. It grows to READ_CHUNK at the first read that
/// fills it: a container that writes little keeps a few KiB in the daemon,
/// not the 64 KiB (stdout and stderr each) a busy one needs.
const READ_START: usize = 4 * 1024;
/// The last stderr bytes kept for error messages.
const TAIL: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// The log file of one container, shared by its readers; None when the
/// container has no log path (its output is read and dropped, so it never
/// blocks).
pub struct LogFile {
    file: Mutex<Option<File>>,
    /// The last stderr bytes, for a start that fails.
    tail: Mutex<VecDeque<u8>>,
}

impl LogFile {
    pub fn new(file: Option<File>) -> Arc<Self> {
        Arc::new(LogFile {
            file: Mutex::new(file),
            tail: Mutex::new(VecDeque::new()),
        })
    }

    /// Write records: one write(2) of the whole batch.
    fn write(&self, buf: &[u8]) -> io::Result<()> {
        match self.file.lock().unwrap().as_mut() {
            Some(f) => f.write_all(buf),
            None => Ok(()),
        }
    }

    /// A new file replaces the old one (after rotation: ReopenContainerLog).
    pub fn reopen(&self, file: File) {
        *self.file.lock().unwrap() = Some(file);
    }

    pub fn has_file(&self) -> bool {
        self.file.lock().unwrap().is_some()
    }

    fn keep_tail(&self, bytes: &[u8]) {
        let mut t = self.tail.lock().unwrap();
        t.extend(bytes.iter().rev().take(TAIL).rev());
        let excess = t.len().saturating_sub(TAIL);
        t.drain(..excess);
    }

    /// The last stderr text, trimmed.
    pub fn tail(&self) -> String {
        let t = self.tail.lock().unwrap();
        let v: Vec<u8> = t.iter().copied().collect();
        String::from_utf8_lossy(&v).trim().to_owned()
    }
}

/// RFC 3339 with nanoseconds, UTC ("2026-11-25T03:41:48.123456789Z"):
/// what kubelet parses (Go's RFC3339Nano accepts a fixed 9 digits).
pub fn timestamp(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_nanos()
    )
}

/// Turns bytes read from one stream into records. It keeps only an
/// unfinished line (under 16 KiB) between reads.
pub struct Framer {
    stream: Stream,
    pending: Vec<u8>,
}

impl Framer {
    pub fn new(stream: Stream) -> Self {
        Framer {
            stream,
            pending: Vec::new(),
        }
    }

    fn record(&self, out: &mut Vec<u8>, ts: &str, tag: &str, text: &[u8]) {
        out.extend_from_slice(ts.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.stream.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(tag.as_bytes());
        out.push(b' ');
        out.extend_from_slice(text);
        out.push(b'\n');
    }

    /// Records for `data` read at `ts`, appended to `out`.
    pub fn feed(&mut self, ts: &str, data: &[u8], out: &mut Vec<u8>) {
        let mut rest = data;
        while let Some(nl) = memchr(b'\n', rest) {
            let line = &rest[..nl];
            rest = &rest[nl + 1..];
            if self.pending.is_empty() {
                self.full_line(ts, line, out);
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(line);
                self.full_line(ts, &whole, out);
            }
        }
        self.pending.extend_from_slice(rest);
        // An unfinished line never grows past one record: its head goes.
        while self.pending.len() >= MAX_RECORD {
            let head: Vec<u8> = self.pending.drain(..MAX_RECORD).collect();
            self.record(out, ts, "P", &head);
        }
    }

    fn full_line(&self, ts: &str, mut line: &[u8], out: &mut Vec<u8>) {
        while line.len() > MAX_RECORD {
            self.record(out, ts, "P", &line[..MAX_RECORD]);
            line = &line[MAX_RECORD..];
        }
        self.record(out, ts, "F", line);
    }

    /// The stream ended: an unfinished last line is whole now (`F`).
    pub fn finish(&mut self, ts: &str, out: &mut Vec<u8>) {
        if !self.pending.is_empty() {
            let last = std::mem::take(&mut self.pending);
            self.record(out, ts, "F", &last);
        }
    }

    /// The daemon is going away while the stream goes on: what is pending
    /// is written as a part (`P`); the line's rest comes later.
    pub fn flush_partial(&mut self, ts: &str, out: &mut Vec<u8>) {
        if !self.pending.is_empty() {
            let part = std::mem::take(&mut self.pending);
            self.record(out, ts, "P", &part);
        }
    }
}

fn memchr(b: u8, s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b)
}

/// How a reader ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Keep reading.
    Running,
    /// The container ended: read what is left, finish the last line.
    Drain,
    /// The daemon stops: read what is there, keep the stream open for the
    /// next daemon (a partial line is written as `P`).
    Detach,
}

/// Poll an owned descriptor with tokio (read interest).
pub fn async_fd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns the OwnedFd: it stays open and the same for
    // the AsyncFd's whole life.
    unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| io::Error::other(e.to_string()))
}

/// Read `fd` (non-blocking) into `log` until `end` says to stop. Returns
/// when the stream is done with (the container ended, the daemon stops, or
/// the pipe closed).
/// Attached clients' copies of a container's output: each read from the
/// container's pipe (or terminal) is offered to every attacher of that
/// stream after it went to the log file. An attacher that falls
/// `TAP_QUEUE` reads behind is dropped, never waited for: the log keeps
/// every line whoever is attached.
#[derive(Default)]
pub struct Tap {
    sinks: std::sync::Mutex<Vec<(u64, Stream, tokio::sync::mpsc::Sender<bytes::Bytes>)>>,
    next: std::sync::atomic::AtomicU64,
}

/// Reads an attacher may be behind before it is dropped.
pub const TAP_QUEUE: usize = 256;

impl Tap {
    /// A new attacher of `stream`: its id and the receiving end.
    pub fn attach(&self, stream: Stream) -> (u64, tokio::sync::mpsc::Receiver<bytes::Bytes>) {
        let (tx, rx) = tokio::sync::mpsc::channel(TAP_QUEUE);
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.sinks.lock().unwrap().push((id, stream, tx));
        (id, rx)
    }

    pub fn detach(&self, id: u64) {
        self.sinks.lock().unwrap().retain(|(i, _, _)| *i != id);
    }

    fn feed(&self, stream: Stream, data: &[u8]) {
        let mut sinks = self.sinks.lock().unwrap();
        if sinks.is_empty() {
            return;
        }
        let chunk = bytes::Bytes::copy_from_slice(data);
        sinks.retain(|(id, s, tx)| {
            if *s != stream {
                return true;
            }
            match tx.try_send(chunk.clone()) {
                Ok(()) => true,
                Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(
                        "attacher {id} fell {TAP_QUEUE} reads behind the container's {}: dropped",
                        stream.as_str()
                    );
                    false
                }
                Err(_) => false,
            }
        });
    }

    /// The stream ended: its attachers see its end.
    fn close(&self, stream: Stream) {
        self.sinks.lock().unwrap().retain(|(_, s, _)| *s != stream);
    }
}

pub async fn read_stream(
    fd: OwnedFd,
    stream: Stream,
    log: Arc<LogFile>,
    mut end: watch::Receiver<End>,
    tap: Arc<Tap>,
) {
    read_stream_inner(fd, stream, &log, &mut end, &tap).await;
    tap.close(stream);
}

async fn read_stream_inner(
    fd: OwnedFd,
    stream: Stream,
    log: &Arc<LogFile>,
    end: &mut watch::Receiver<End>,
    tap: &Tap,
) {
    let afd = match async_fd(fd) {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!("log reader: cannot poll the {} pipe: {e}", stream.as_str());
            return;
        }
    };
    let mut framer = Framer::new(stream);
    let mut buf = vec![0u8; READ_START];
    let mut out = Vec::new();
    loop {
        let state = *end.borrow();
        if state != End::Running {
            // Whatever the pipe holds now was written before the end.
            let eof = drain(&afd, &mut buf, &mut framer, log, &mut out, tap);
            let ts = timestamp(std::time::SystemTime::now());
            out.clear();
            if state == End::Drain || eof {
                framer.finish(&ts, &mut out);
            } else {
                framer.flush_partial(&ts, &mut out);
            }
            write_out(log, &out, stream);
            return;
        }
        tokio::select! {
            ready = afd.readable() => {
                let mut guard = match ready {
                    Ok(g) => g,
                    Err(_) => return,
                };
                let eof = drain_some(&afd, &mut buf, &mut framer, log, &mut out, tap);
                guard.clear_ready();
                if eof {
                    let ts = timestamp(std::time::SystemTime::now());
                    out.clear();
                    framer.finish(&ts, &mut out);
                    write_out(log, &out, stream);
                    return;
                }
            }
            changed = end.changed() => {
                if changed.is_err() {
                    // The container's record went without saying how:
                    // treat it as the daemon going.
                    let _ = end.borrow_and_update();
                    return;
                }
            }
        }
    }
}

fn write_out(log: &LogFile, out: &[u8], stream: Stream) {
    if out.is_empty() {
        return;
    }
    if let Err(e) = log.write(out) {
        tracing::warn!("log writer: {} records lost: {e}", stream.as_str());
    }
}

/// How a pass over the pipe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// End of file: the container closed its end.
    Eof,
    /// Nothing more to read for now.
    Empty,
    /// The read failed.
    Failed,
    /// The pass read all it may (`max_reads`); more may be waiting.
    Bounded,
}

/// Read what the pipe holds, at most `max_reads` chunks, each framed into
/// the log and offered to the attachers.
fn read_pass(
    afd: &AsyncFd<OwnedFd>,
    buf: &mut Vec<u8>,
    framer: &mut Framer,
    log: &LogFile,
    out: &mut Vec<u8>,
    tap: &Tap,
    max_reads: usize,
) -> Pass {
    let mut reads = 0;
    while reads < max_reads {
        match read_once(afd.get_ref(), buf) {
            Ok(0) => return Pass::Eof,
            Ok(n) => {
                reads += 1;
                let ts = timestamp(std::time::SystemTime::now());
                out.clear();
                framer.feed(&ts, &buf[..n], out);
                if framer.stream == Stream::Stderr {
                    log.keep_tail(&buf[..n]);
                }
                write_out(log, out, framer.stream);
                tap.feed(framer.stream, &buf[..n]);
                grow(buf, n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Pass::Empty,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Pass::Failed,
        }
    }
    Pass::Bounded
}

/// Read what the pipe holds now, a bounded number of chunks (so one busy
/// container cannot hold the task forever); true when the stream is done
/// (end of file, or a read that failed).
fn drain_some(
    afd: &AsyncFd<OwnedFd>,
    buf: &mut Vec<u8>,
    framer: &mut Framer,
    log: &LogFile,
    out: &mut Vec<u8>,
    tap: &Tap,
) -> bool {
    matches!(
        read_pass(afd, buf, framer, log, out, tap, 16),
        Pass::Eof | Pass::Failed
    )
}

/// Read until the pipe is empty (or closed); true at end of file.
fn drain(
    afd: &AsyncFd<OwnedFd>,
    buf: &mut Vec<u8>,
    framer: &mut Framer,
    log: &LogFile,
    out: &mut Vec<u8>,
    tap: &Tap,
) -> bool {
    read_pass(afd, buf, framer, log, out, tap, usize::MAX) == Pass::Eof
}

/// A read that filled the buffer: more is coming, read it in big chunks.
fn grow(buf: &mut Vec<u8>, n: usize) {
    if n == buf.len() && buf.len() < READ_CHUNK {
        buf.resize(READ_CHUNK, 0);
    }
}

fn read_once(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reading into a buffer we own, of its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podscope_sys::pipe::{pipe, set_nonblocking};

    const TS: &str = "2026-11-25T00:00:00.000000001Z";

    #[test]
    fn a_reader_keeps_a_small_buffer_until_a_read_fills_it() {
        let mut buf = vec![0u8; READ_START];
        grow(&mut buf, 100);
        assert_eq!(buf.len(), READ_START);
        grow(&mut buf, READ_START);
        assert_eq!(buf.len(), READ_CHUNK);
        grow(&mut buf, READ_CHUNK);
        assert_eq!(buf.len(), READ_CHUNK, "never past READ_CHUNK");
    }

    fn feed_all(chunks: &[&[u8]], finish: bool) -> String {
        let mut f = Framer::new(Stream::Stdout);
        let mut out = Vec::new();
        for c in chunks {
            f.feed(TS, c, &mut out);
        }
        if finish {
            f.finish(TS, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn timestamps_are_rfc3339_nano_utc() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_795_578_108, 5);
        assert_eq!(timestamp(t), "2026-11-25T03:41:48.000000005Z");
        let leap = std::time::UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        assert_eq!(timestamp(leap), "2000-02-29T00:00:00.000000000Z");
        assert_eq!(
            timestamp(std::time::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000000Z"
        );
    }

    #[test]
    fn lines_become_full_records_across_reads() {
        assert_eq!(
            feed_all(&[b"hello\nwor", b"ld\n"], false),
            format!("{TS} stdout F hello\n{TS} stdout F world\n")
        );
        assert_eq!(feed_all(&[b"\n"], false), format!("{TS} stdout F \n"));
    }

    #[test]
    fn a_last_line_without_newline_is_full_at_the_end() {
        assert_eq!(
            feed_all(&[b"a\nno newline"], true),
            format!("{TS} stdout F a\n{TS} stdout F no newline\n")
        );
        assert_eq!(feed_all(&[b"a\n"], true), format!("{TS} stdout F a\n"));
    }

    #[test]
    fn long_lines_are_cut_into_parts_of_16_kib() {
        let line = vec![b'x'; MAX_RECORD * 2 + 10];
        let mut data = line.clone();
        data.push(b'\n');
        let out = feed_all(&[&data], false);
        let recs: Vec<&str> = out.lines().collect();
        assert_eq!(recs.len(), 3);
        assert!(recs[0].starts_with(&format!("{TS} stdout P ")));
        assert_eq!(recs[0].len(), TS.len() + 10 + MAX_RECORD);
        assert!(recs[1].contains(" P "));
        assert!(recs[2].contains(" F ") && recs[2].ends_with(&"x".repeat(10)));
        // Unfinished, over the limit: parts go out at once, the rest waits.
        let out = feed_all(&[&line], false);
        assert_eq!(out.lines().count(), 2);
        assert!(out.lines().all(|l| l.contains(" P ")));
        // Every byte arrives, in order.
        let joined: String = feed_all(&[&line, b"\n"], false)
            .lines()
            .map(|l| &l[TS.len() + 10..])
            .collect();
        assert_eq!(joined.len(), line.len());
    }

    #[test]
    fn a_detach_writes_the_pending_part() {
        let mut f = Framer::new(Stream::Stderr);
        let mut out = Vec::new();
        f.feed(TS, b"half", &mut out);
        assert!(out.is_empty());
        f.flush_partial(TS, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{TS} stderr P half\n")
        );
    }

    #[tokio::test]
    async fn a_reader_writes_what_the_pipe_held_when_the_container_ended() {
        let t = podscope_test_support::TempDir::new();
        let path = t.0.join("c.log");
        let file = File::create(&path).unwrap();
        let log = LogFile::new(Some(file));
        let (r, w) = pipe().unwrap();
        set_nonblocking(&r).unwrap();
        let (tx, rx) = watch::channel(End::Running);
        let task = tokio::spawn(read_stream(
            r,
            Stream::Stdout,
            log.clone(),
            rx,
            Default::default(),
        ));
        let mut w = File::from(w);
        w.write_all(b"one\ntwo\nthree").unwrap();
        // The write end stays open (systemd keeps it): the end comes from
        // the container's exit, not from EOF.
        tx.send(End::Drain).unwrap();
        task.await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<_> = text.lines().map(|l| l.split_once(' ').unwrap().1).collect();
        assert_eq!(lines, ["stdout F one", "stdout F two", "stdout F three"]);
        drop(w);
    }

    #[tokio::test]
    async fn reopen_moves_later_records_to_the_new_file() {
        let t = podscope_test_support::TempDir::new();
        let (a, b) = (t.0.join("a.log"), t.0.join("b.log"));
        let log = LogFile::new(Some(File::create(&a).unwrap()));
        let (r, w) = pipe().unwrap();
        set_nonblocking(&r).unwrap();
        let (_tx, rx) = watch::channel(End::Running);
        let task = tokio::spawn(read_stream(
            r,
            Stream::Stderr,
            log.clone(),
            rx,
            Default::default(),
        ));
        let mut w = File::from(w);
        w.write_all(b"before\n").unwrap();
        for _ in 0..200 {
            if std::fs::read_to_string(&a).unwrap().contains("before") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        log.reopen(File::create(&b).unwrap());
        w.write_all(b"after\n").unwrap();
        drop(w);
        task.await.unwrap();
        assert!(std::fs::read_to_string(&a)
            .unwrap()
            .contains("stderr F before"));
        let newer = std::fs::read_to_string(&b).unwrap();
        assert!(newer.contains("stderr F after") && !newer.contains("before"));
        assert_eq!(log.tail(), "before\nafter");
    }
}
