//! Pipes as podscope's processes make them: close-on-exec, large, and
//! non-blocking where a reactor reads them (a container's output, a
//! streaming session's relay, podscopectl's terminal).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

pub const PIPE_SIZE: i32 = 1024 * 1024;

/// Make `fd` non-blocking.
pub fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on a valid fd.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A pipe for one stream: (read end, write end), close-on-exec, with a 1
/// MiB buffer where the kernel allows it.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    // SAFETY: fcntl on a valid fd; a refusal (pipe-max-size lowered) keeps
    // the default size.
    unsafe {
        libc::fcntl(r.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE);
    }
    Ok((r, w))
}
