//! Kubernetes' remotecommand protocol (exec and attach) over SPDY: the
//! subprotocol chosen, the client's streams gathered (their count comes
//! from the CRI request, not the client), the session run, and its end
//! told on the error stream: a `metav1.Status` for v4, plain text on
//! failure for v2 and v3.

use super::relay::{Outcome, Output};
use super::spdy::{Connection, Incoming, Sender};
use bytes::Bytes;
use std::time::Duration;
use tokio::sync::mpsc;

/// Over SPDY, in the server's order of preference (kubelet's list; v5 is
/// WebSocket-only, and a v5 client offers v4 too).
pub const PROTOCOLS: &[&str] = &[
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// How long the client has to open every stream it must.
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The first protocol the client offers that the server speaks (the
/// client's order wins, as in Go's httpstream.Handshake).
pub fn negotiate<'a>(offered: &[String], supported: &[&'a str]) -> Option<&'a str> {
    offered
        .iter()
        .find_map(|o| supported.iter().find(|s| **s == o.as_str()).copied())
}

/// The protocol's generation: 1 (channel.k8s.io) to 4.
pub fn version(proto: &str) -> u8 {
    match proto {
        "v5.channel.k8s.io" => 5,
        "v4.channel.k8s.io" => 4,
        "v3.channel.k8s.io" => 3,
        "v2.channel.k8s.io" => 2,
        _ => 1,
    }
}

/// What the CRI request asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wants {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// The streams a session runs on.
pub struct Streams {
    pub error: u32,
    pub stdin: Option<mpsc::Receiver<Bytes>>,
    pub stdout: Option<u32>,
    pub stderr: Option<u32>,
    pub resize: Option<mpsc::Receiver<Bytes>>,
    /// The highest stream id seen (for GOAWAY).
    pub last: u32,
}

/// Take the client's streams until every one `wants` implies exists,
/// answering each at once.
pub async fn gather(conn: &mut Connection, wants: Wants, proto: u8) -> Result<Streams, String> {
    let expected = 1
        + usize::from(wants.stdin)
        + usize::from(wants.stdout)
        + usize::from(wants.stderr && !wants.tty)
        + usize::from(wants.tty && proto >= 3);
    let mut s = Streams {
        error: 0,
        stdin: None,
        stdout: None,
        stderr: None,
        resize: None,
        last: 0,
    };
    let mut have = 0;
    let deadline = tokio::time::Instant::now() + STREAM_CREATION_TIMEOUT;
    while have < expected {
        let next = tokio::time::timeout_at(deadline, conn.incoming.recv()).await;
        let st: Incoming = match next {
            Ok(Some(st)) => st,
            Ok(None) => return Err("the client went away before opening its streams".into()),
            Err(_) => return Err("timed out waiting for client to create streams".into()),
        };
        s.last = s.last.max(st.id);
        conn.sender
            .reply(st.id)
            .await
            .map_err(|e| format!("reply: {e}"))?;
        let kind = st.headers.get("streamtype").unwrap_or("").to_owned();
        let slot_taken = match kind.as_str() {
            "error" if s.error == 0 => {
                s.error = st.id;
                false
            }
            "stdin" if s.stdin.is_none() => {
                s.stdin = Some(st.data);
                false
            }
            "stdout" if s.stdout.is_none() => {
                s.stdout = Some(st.id);
                false
            }
            "stderr" if s.stderr.is_none() => {
                s.stderr = Some(st.id);
                false
            }
            "resize" if s.resize.is_none() => {
                s.resize = Some(st.data);
                false
            }
            _ => true,
        };
        if slot_taken {
            tracing::debug!("streaming: stream {} of type {kind:?} ignored", st.id);
        } else {
            have += 1;
        }
    }
    if s.error == 0 {
        return Err("the client opened no error stream".into());
    }
    Ok(s)
}

/// A stream of ours: DATA on it, FIN at its end.
pub struct SpdyOutput {
    pub sender: Sender,
    pub id: u32,
}

impl Output for SpdyOutput {
    async fn write(&mut self, data: Bytes) -> std::io::Result<()> {
        self.sender.data(self.id, data).await
    }
    async fn close(&mut self) -> std::io::Result<()> {
        self.sender.fin(self.id).await
    }
}

/// The error stream's content for an outcome, for protocol `version`;
/// None when nothing is written (success before v4).
pub fn status_bytes(outcome: &Outcome, verb: &str, cmd: &[String], version: u8) -> Option<Vec<u8>> {
    let v = match outcome {
        Outcome::Exited(0) => {
            if version < 4 {
                return None;
            }
            serde_json::json!({"metadata": {}, "status": "Success"})
        }
        Outcome::Exited(code) => {
            let message = format!(
                "command terminated with non-zero exit code: error executing command {}, exit code {code}",
                go_list(cmd)
            );
            if version < 4 {
                return Some(message.into_bytes());
            }
            serde_json::json!({
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
            })
        }
        Outcome::Failed(e) => {
            let inner = match verb {
                "attach" => format!("error attaching to container: {e}"),
                _ => format!("error executing command in container: {e}"),
            };
            let message = format!("Internal error occurred: {inner}");
            if version < 4 {
                return Some(message.into_bytes());
            }
            serde_json::json!({
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "InternalError",
                "details": {"causes": [{"message": inner}]},
                "code": 500,
            })
        }
    };
    Some(serde_json::to_vec(&v).expect("a status serialises"))
}

/// `[a b c]`, as Go prints a []string.
fn go_list(v: &[String]) -> String {
    format!("[{}]", v.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_order_wins() {
        let offered: Vec<String> = [
            "v5.channel.k8s.io",
            "v4.channel.k8s.io",
            "v3.channel.k8s.io",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(negotiate(&offered, PROTOCOLS), Some("v4.channel.k8s.io"));
        let old = vec![
            "v2.channel.k8s.io".to_owned(),
            "v4.channel.k8s.io".to_owned(),
        ];
        assert_eq!(negotiate(&old, PROTOCOLS), Some("v2.channel.k8s.io"));
        assert_eq!(negotiate(&["portforward.k8s.io".into()], PROTOCOLS), None);
    }

    #[test]
    fn statuses_as_kubelet_writes_them() {
        let cmd = ["sh".to_owned(), "-c".to_owned(), "exit 3".to_owned()];
        assert_eq!(
            status_bytes(&Outcome::Exited(0), "exec", &cmd, 4).unwrap(),
            br#"{"metadata":{},"status":"Success"}"#
        );
        let v: serde_json::Value =
            serde_json::from_slice(&status_bytes(&Outcome::Exited(3), "exec", &cmd, 4).unwrap())
                .unwrap();
        assert_eq!(v["reason"], "NonZeroExitCode");
        assert_eq!(v["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(v["details"]["causes"][0]["message"], "3");
        assert_eq!(
            v["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        let v: serde_json::Value = serde_json::from_slice(
            &status_bytes(&Outcome::Failed("no such file".into()), "exec", &cmd, 4).unwrap(),
        )
        .unwrap();
        assert_eq!(v["reason"], "InternalError");
        assert_eq!(v["code"], 500);
        assert_eq!(status_bytes(&Outcome::Exited(0), "exec", &cmd, 3), None);
        assert!(status_bytes(&Outcome::Exited(2), "exec", &cmd, 2).is_some());
    }
}
