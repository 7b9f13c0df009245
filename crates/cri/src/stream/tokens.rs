//! The streaming server's single-use tokens: each Exec, Attach or
//! PortForward call leaves its request here under a fresh random token,
//! and the URL it answers carries that token. A lookup takes the token
//! out whether it then fits or not, so a token is good for one connection,
//! for a minute. Kubelet's limit of requests in flight holds too.

use cri_api::v1 as cri;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const TTL: Duration = Duration::from_secs(60);
pub const MAX_IN_FLIGHT: usize = 1000;

#[derive(Debug, Clone)]
pub enum Request {
    Exec(cri::ExecRequest),
    Attach(cri::AttachRequest),
    PortForward(cri::PortForwardRequest),
}

impl Request {
    /// The URL path's first segment.
    pub fn route(&self) -> &'static str {
        match self {
            Request::Exec(_) => "exec",
            Request::Attach(_) => "attach",
            Request::PortForward(_) => "portforward",
        }
    }
}

#[derive(Debug)]
pub struct Full;

pub struct Tokens {
    inner: Mutex<HashMap<String, (Instant, Request)>>,
    ttl: Duration,
}

impl Default for Tokens {
    fn default() -> Self {
        Self::with_ttl(TTL)
    }
}

impl Tokens {
    pub fn with_ttl(ttl: Duration) -> Self {
        Tokens {
            inner: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// A new token for `req`.
    pub fn insert(&self, req: Request) -> Result<String, Full> {
        let mut m = self.inner.lock().unwrap();
        let now = Instant::now();
        m.retain(|_, (t, _)| now.duration_since(*t) < self.ttl);
        if m.len() >= MAX_IN_FLIGHT {
            return Err(Full);
        }
        loop {
            let token = random_token();
            if !m.contains_key(&token) {
                m.insert(token.clone(), (now, req));
                return Ok(token);
            }
        }
    }

    /// The request behind `token` on `route`, once: any lookup spends it.
    pub fn take(&self, route: &str, token: &str) -> Option<Request> {
        let (t, req) = self.inner.lock().unwrap().remove(token)?;
        (t.elapsed() < self.ttl && req.route() == route).then_some(req)
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// 8 base64url characters of 6 random bytes, as kubelet's.
fn random_token() -> String {
    use base64::Engine;
    let mut b = [0u8; 6];
    let mut got = 0;
    while got < b.len() {
        // SAFETY: writing into our own buffer.
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
        if n > 0 {
            got += n as usize;
        }
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec() -> Request {
        Request::Exec(cri::ExecRequest::default())
    }

    #[test]
    fn a_token_serves_once() {
        let t = Tokens::default();
        let tok = t.insert(exec()).unwrap();
        assert_eq!(tok.len(), 8);
        assert!(tok
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert!(t.take("exec", &tok).is_some());
        assert!(t.take("exec", &tok).is_none());
        assert!(t.take("exec", "forged00").is_none());
    }

    #[test]
    fn the_wrong_route_spends_it() {
        let t = Tokens::default();
        let tok = t.insert(exec()).unwrap();
        assert!(t.take("attach", &tok).is_none());
        assert!(t.take("exec", &tok).is_none());
    }

    #[test]
    fn an_expired_token_is_refused_and_swept() {
        let t = Tokens::with_ttl(Duration::from_millis(1));
        let tok = t.insert(exec()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.take("exec", &tok).is_none());
        t.insert(exec()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        t.insert(exec()).unwrap();
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn at_most_a_thousand_in_flight() {
        let t = Tokens::default();
        for _ in 0..MAX_IN_FLIGHT {
            t.insert(exec()).unwrap();
        }
        assert!(t.insert(exec()).is_err());
    }
}
