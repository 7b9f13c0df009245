//! The metrics endpoint: `GET /metrics` over HTTP/1.0 or 1.1 on
//! `metrics_address`, answered whole and the connection closed.
//! Unauthenticated, as containerd's is (podscoped(8), METRICS).
//!
//! Bounded, since whoever reaches the address may call: `MAX_SCRAPES`
//! connections served at once (one more is answered 503 and closed at
//! once, nothing read), a request head of at most `HEAD_MAX` bytes read
//! within `READ_DEADLINE`, the answer written within `WRITE_DEADLINE`; a
//! client that hangs up or stalls costs its slot until then, no more.

use super::scrape::Scraper;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

pub const MAX_SCRAPES: usize = 4;
pub const HEAD_MAX: usize = 8 * 1024;
pub const READ_DEADLINE: Duration = Duration::from_secs(3);
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);

const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n";

/// Bind `addr` (at start, before the bus name is taken): an error names
/// the key and the address.
pub fn bind(addr: std::net::SocketAddr) -> Result<std::net::TcpListener, String> {
    let l = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("metrics_address {addr}: cannot listen there: {e}"))?;
    l.set_nonblocking(true)
        .map_err(|e| format!("metrics_address {addr}: {e}"))?;
    Ok(l)
}

/// Serve scrapes on `listener` for as long as the daemon runs.
pub async fn serve(listener: std::net::TcpListener, scraper: Arc<Scraper>) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("metrics endpoint: {e}");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_SCRAPES));
    loop {
        let sock = match listener.accept().await {
            Ok((sock, _)) => sock,
            Err(e) => {
                // Out of descriptors, most likely: the budget keeps the
                // daemon's calls from it; scrapes wait a moment.
                tracing::debug!("metrics endpoint: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let scraper = scraper.clone();
                tokio::spawn(async move {
                    answer(sock, &scraper).await;
                    drop(slot);
                });
            }
            Err(_) => {
                // Never waited for: a full socket buffer drops the answer.
                let _ = sock.try_write(BUSY);
            }
        }
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    Metrics,
    NotFound,
    MethodNotAllowed,
    Bad(&'static str),
}

/// Read a request line (`GET /metrics HTTP/1.1`); the headers are not
/// needed.
pub fn parse_head(head: &[u8]) -> Asked {
    let Some(line) = head.split(|b| *b == b'\n').next() else {
        return Asked::Bad("no request line");
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Ok(line) = std::str::from_utf8(line) else {
        return Asked::Bad("the request line is not UTF-8");
    };
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Asked::Bad("the request line is not METHOD TARGET VERSION");
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Asked::Bad("not HTTP/1.0 or HTTP/1.1");
    }
    let path = target.split('?').next().unwrap_or(target);
    if path != "/metrics" {
        return Asked::NotFound;
    }
    if method != "GET" {
        return Asked::MethodNotAllowed;
    }
    Asked::Metrics
}

/// The request head: up to the blank line, at most `HEAD_MAX` bytes.
async fn read_head(sock: &mut TcpStream) -> Result<Vec<u8>, &'static str> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let n = sock.read(&mut buf).await.map_err(|_| "read failed")?;
        if n == 0 {
            return Err("closed before the end of the request head");
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return Ok(head);
        }
        if head.len() > HEAD_MAX {
            return Err("request head over 8 KiB");
        }
    }
}

async fn answer(mut sock: TcpStream, scraper: &Scraper) {
    let head = match tokio::time::timeout(READ_DEADLINE, read_head(&mut sock)).await {
        Ok(Ok(h)) => h,
        Ok(Err(why)) => {
            tracing::debug!("metrics endpoint: {why}");
            if why.starts_with("request head over") {
                write(&mut sock, "431 Request Header Fields Too Large", "", why).await;
            }
            return;
        }
        Err(_) => {
            tracing::debug!("metrics endpoint: no request head within {READ_DEADLINE:?}");
            return;
        }
    };
    match parse_head(&head) {
        Asked::Metrics => {
            let body = scraper.render().await;
            write(&mut sock, "200 OK", podscope_metrics::CONTENT_TYPE, &body).await;
        }
        Asked::NotFound => {
            write(
                &mut sock,
                "404 Not Found",
                "text/plain",
                "only /metrics is here\n",
            )
            .await
        }
        Asked::MethodNotAllowed => {
            write(
                &mut sock,
                "405 Method Not Allowed\r\nAllow: GET",
                "text/plain",
                "GET only\n",
            )
            .await
        }
        Asked::Bad(why) => write(&mut sock, "400 Bad Request", "text/plain", why).await,
    }
}

async fn write(sock: &mut TcpStream, status: &str, content_type: &str, body: &str) {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        out.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    let send = async {
        sock.write_all(out.as_bytes()).await?;
        sock.shutdown().await
    };
    match tokio::time::timeout(WRITE_DEADLINE, send).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("metrics endpoint: the client left mid-answer: {e}"),
        Err(_) => tracing::debug!("metrics endpoint: answer not taken within {WRITE_DEADLINE:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_read_as_asked() {
        for (head, want) in [
            (
                &b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"[..],
                Asked::Metrics,
            ),
            (b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", Asked::Metrics),
            (b"GET / HTTP/1.1\r\n\r\n", Asked::NotFound),
            (b"POST /metrics HTTP/1.1\r\n\r\n", Asked::MethodNotAllowed),
            (
                b"GET /metrics HTTP/2.0\r\n\r\n",
                Asked::Bad("not HTTP/1.0 or HTTP/1.1"),
            ),
            (
                b"GET /metrics\r\n\r\n",
                Asked::Bad("the request line is not METHOD TARGET VERSION"),
            ),
            (
                b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
                Asked::Bad("the request line is not UTF-8"),
            ),
        ] {
            assert_eq!(parse_head(head), want, "{}", String::from_utf8_lossy(head));
        }
    }
}
