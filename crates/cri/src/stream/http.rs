//! The HTTP/1.1 part of a streaming connection: one request head, read with
//! bounds, and the few answers the server gives before a protocol takes the
//! connection over (101, 400, 403, 404).

use tokio::io::{AsyncRead, AsyncReadExt};

/// A request head larger than this is refused.
pub const HEAD_MAX: usize = 16 * 1024;
const HEADERS_MAX: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct Head {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// Every value of `name`, each split on commas and trimmed, as Go's
    /// httpstream reads X-Stream-Protocol-Version.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether some value of `name` contains `token` (case-insensitive), as
    /// the upgrade checks do.
    pub fn contains(&self, name: &str, token: &str) -> bool {
        let token = token.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .any(|(_, v)| v.to_ascii_lowercase().contains(&token))
    }

    /// A WebSocket upgrade (RFC 6455), not SPDY.
    pub fn is_websocket(&self) -> bool {
        self.get("upgrade")
            .is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket"))
            && self.contains("connection", "upgrade")
    }
}

#[derive(Debug)]
pub enum HeadError {
    Io(std::io::Error),
    /// Not HTTP, too large, or cut short: answered 400 and closed.
    Bad(String),
}

/// Read one request head; what came after it is returned with it.
pub async fn read_head<R: AsyncRead + Unpin>(r: &mut R) -> Result<(Head, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    loop {
        let mut chunk = [0u8; 2048];
        let n = r.read(&mut chunk).await.map_err(HeadError::Io)?;
        if n == 0 {
            return Err(HeadError::Bad(
                "the connection ended inside the request".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let head = Head {
                    method: req.method.unwrap_or("").to_owned(),
                    path: req.path.unwrap_or("").to_owned(),
                    headers: req
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_owned(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect(),
                };
                return Ok((head, buf[len..].to_vec()));
            }
            Ok(httparse::Status::Partial) if buf.len() < HEAD_MAX => {}
            Ok(httparse::Status::Partial) => {
                return Err(HeadError::Bad("request head over 16 KiB".into()))
            }
            Err(e) => return Err(HeadError::Bad(format!("not an HTTP request: {e}"))),
        }
    }
}

/// A complete answer that closes the connection.
pub fn response(code: u16, reason: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut s = format!("HTTP/1.1 {code} {reason}\r\n");
    for (n, v) in headers {
        s.push_str(&format!("{n}: {v}\r\n"));
    }
    if code != 101 {
        s.push_str("Content-Type: text/plain; charset=utf-8\r\n");
        s.push_str("X-Content-Type-Options: nosniff\r\n");
        s.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n",
            body.len()
        ));
    }
    s.push_str("\r\n");
    s.push_str(body);
    s.into_bytes()
}

/// The answer to every unknown, spent, expired or forged token alike.
pub fn not_found() -> Vec<u8> {
    response(404, "Not Found", &[], "404 page not found\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_head_and_what_follows() {
        let raw = b"POST /exec/abc HTTP/1.1\r\nHost: x\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nx-stream-protocol-version: v3.channel.k8s.io, v2.channel.k8s.io\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n\x80\x03";
        let (h, rest) = read_head(&mut &raw[..]).await.unwrap();
        assert_eq!(h.method, "POST");
        assert_eq!(h.path, "/exec/abc");
        assert_eq!(
            h.list("X-Stream-Protocol-Version"),
            [
                "v4.channel.k8s.io",
                "v3.channel.k8s.io",
                "v2.channel.k8s.io"
            ]
        );
        assert!(h.contains("connection", "upgrade"));
        assert!(h.contains("upgrade", "spdy/3.1"));
        assert!(!h.is_websocket());
        assert_eq!(rest, b"\x80\x03");
    }

    #[tokio::test]
    async fn garbage_and_giants_are_bad() {
        assert!(matches!(
            read_head(&mut &b"\x16\x03\x01 hello\r\n\r\n"[..]).await,
            Err(HeadError::Bad(_))
        ));
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(HEAD_MAX));
        assert!(matches!(
            read_head(&mut big.as_bytes()).await,
            Err(HeadError::Bad(_))
        ));
        assert!(matches!(
            read_head(&mut &b"GET / HT"[..]).await,
            Err(HeadError::Bad(_))
        ));
    }
}
