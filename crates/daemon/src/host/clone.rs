//! A child cloned from a daemon thread to run a few raw system calls where
//! the daemon itself must not go (the host's mount namespace for `hostns`,
//! a new user namespace for `idmap`): a stack of its own behind a guard
//! page, and every signal blocked around the clone so that no handler of
//! the daemon's runs in the child.

use std::io;

/// A child's stack: a few system calls, a message, no more.
const CHILD_STACK: usize = 64 * 1024;

/// The child's stack, mapped with a guard page below it (as posix_spawn
/// does), so an overflow faults instead of writing over the daemon's heap.
pub struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

impl ChildStack {
    pub fn new() -> io::Result<Self> {
        // SAFETY: a fresh private mapping, its lowest page made
        // inaccessible; unmapped on drop.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE).max(4096) as usize;
            let len = CHILD_STACK + page;
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = ChildStack { base, len };
            if libc::mprotect(base, page, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The top, 16-aligned as the ABI wants (the stack grows down).
    pub fn top(&self) -> *mut libc::c_void {
        ((self.base as usize + self.len) & !15) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used: its child has
        // exited (hostns clones with CLONE_VFORK; idmap reaps its own before
        // the drop).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// `clone(entry, stack, flags, arg)` with every signal blocked around it,
/// so that no handler of the daemon's runs in the child (which inherits
/// the mask); this thread's mask is restored before returning. The child's
/// pid.
///
/// # Safety
/// `stack` and what `arg` points to must outlive the child, and `entry`
/// must make only raw system calls (the child shares the daemon's memory
/// where `flags` has CLONE_VM).
pub unsafe fn clone_blocked(
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    stack: &ChildStack,
    flags: libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<i32> {
    let mut all: libc::sigset_t = std::mem::zeroed();
    let mut old: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    let pid = libc::clone(entry, stack.top(), flags, arg);
    let e = io::Error::last_os_error();
    libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    if pid < 0 {
        return Err(e);
    }
    Ok(pid)
}
