//! PortForward: a TCP connection to a port of the pod's network namespace
//! (the host's, for a host-network pod), made by the daemon and handed to
//! the caller as a connected socket. The frontend relays it; it needs no
//! privilege and never enters a namespace.
//!
//! The socket is made by a thread of its own that joins the namespace of
//! the pod's init (which lives in it for the pod's life) and ends: a
//! socket keeps the namespace it was made in, and no other thread of the
//! daemon changes namespace.

use super::*;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// How long a connect in the pod may take (a port nobody listens on is
/// refused at once; a firewall that drops is not waited on for long).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl<S: SystemdClient> Pods<S> {
    /// A socket connected to `localhost:port` inside the pod: IPv4 first,
    /// then IPv6, as containerd dials.
    pub async fn port_forward(&self, entry: &Arc<Entry>, port: u16) -> Result<OwnedFd> {
        let sb = entry.snapshot();
        let ctx = || format!("sandbox {}: port-forward to port {port}", sb.id);
        if port == 0 {
            return Err(Error::invalid("port", "must be 1 to 65535"));
        }
        if sb.state != State::Ready || sb.init_pid == 0 || entry.is_removed() {
            return Err(Error::invalid_state(format!(
                "{}: the sandbox is {}, not ready",
                ctx(),
                sb.state.as_str()
            )));
        }
        let ns = std::fs::File::open(format!("/proc/{}/ns/net", sb.init_pid))
            .map_err(|e| Error::io(format!("{}: the pod's network namespace", ctx()), e))?;
        let fd = tokio::task::spawn_blocking(move || connect_in(ns, port))
            .await
            .map_err(|e| Error::internal(format!("{}: {e}", ctx())))?;
        fd.map_err(|e| Error::new(ErrorKind::NetworkFailed, format!("{}: {e}", ctx())))
    }
}

/// Connect from a new thread in namespace `ns`.
fn connect_in(ns: std::fs::File, port: u16) -> std::result::Result<OwnedFd, String> {
    std::thread::Builder::new()
        .name("podscope-portfwd".into())
        .spawn(move || {
            // SAFETY: setns changes only this thread's network namespace,
            // and the thread ends below.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(format!(
                    "join the pod's network namespace: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let v4 = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
            let v6 = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port);
            match TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT) {
                Ok(s) => Ok(OwnedFd::from(s)),
                Err(e4) => match TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT) {
                    Ok(s) => Ok(OwnedFd::from(s)),
                    Err(e6) => Err(format!("connect to {v4}: {e4}; {v6}: {e6}")),
                },
            }
        })
        .map_err(|e| format!("thread: {e}"))?
        .join()
        .map_err(|_| "the connecting thread panicked".to_owned())?
}
