//! Seccomp: podscope's RuntimeDefault profile, and Localhost profiles read
//! from their JSON.
//!
//! # RuntimeDefault
//!
//! An allow list: any syscall not named fails with `EPERM`
//! (`SCMP_ACT_ERRNO`, `defaultErrnoRet` 1), the answer programs already
//! handle for "not permitted here". It covers the native architecture and
//! its 32-bit companions (x86-64 with x86 and x32, aarch64 with arm), so a
//! 32-bit binary meets the same rules instead of a killed process. The list
//! agrees with what containerd's and Docker's default profiles allow
//! (CRI users expect the same programs to run), written here by purpose.
//!
//! Allowed to every container:
//!
//! - files, paths, extended attributes, descriptors, pipes, readiness
//!   (select/poll/epoll) and notification (eventfd, signalfd, timerfd,
//!   inotify, fanotify_mark), POSIX AIO;
//! - memory management, processes and threads (fork, vfork, execve, wait,
//!   futexes, rseq), signals, the process's own ids and limits, clocks and
//!   timers (reading; setting the clock needs CAP_SYS_TIME), scheduling and
//!   I/O priority (the kernel still checks CAP_SYS_NICE for raising them);
//! - System V and POSIX IPC (namespaced by the pod's IPC namespace);
//! - sockets, except the families below; `socketpair`, `bind`, `connect`
//!   and the rest of the socket calls;
//! - self-restriction: `seccomp`, `prctl`, `capset`, Landlock;
//! - `ptrace`, `process_vm_readv` and `process_vm_writev`: since Linux 4.8
//!   seccomp rechecks a syscall a tracer rewrote, so tracing no longer
//!   escapes the filter, and the kernel's own ptrace access check (same
//!   user and dumpable, or CAP_SYS_PTRACE; Yama) still guards every other
//!   process. Docker and containerd allow them for that reason, and strace
//!   and debuggers in pods rely on it;
//! - `clone` without namespace flags (checked with `SCMP_CMP_MASKED_EQ`
//!   on the flags argument), and `personality` with the values programs
//!   set: Linux, Linux32, UNAME26, both, and the 0xffffffff query. Other
//!   personas (such as ADDR_NO_RANDOMIZE) are denied: they weaken ASLR;
//! - on x86-64 `arch_prctl` and `modify_ldt`, on aarch64 the arm
//!   compatibility calls (`set_tls`, `cacheflush`, ...).
//!
//! Allowed only with the capability the kernel checks for them anyway: the
//! filter adds a second gate in front of the calls that have been the usual
//! way out of a container, so a capability granted for one purpose does
//! not also open the others' code to the container unless asked for:
//!
//! - CAP_SYS_ADMIN: mount and umount, the new mount API (fsopen, fsmount,
//!   move_mount, open_tree, ...), unshare, setns, clone with namespace flags
//!   and clone3, sethostname and setdomainname, quotactl, fanotify_init,
//!   lookup_dcookie, and bpf, perf_event_open and syslog, which the kernel
//!   also accepts with this capability;
//! - CAP_SYS_PTRACE: kcmp, pidfd_getfd, process_madvise;
//! - CAP_DAC_READ_SEARCH: open_by_handle_at (the "shocker" escape: it
//!   opens any inode on the filesystem by handle, past the mount root);
//! - CAP_SYS_MODULE: init_module, finit_module, delete_module;
//! - CAP_SYS_BOOT: reboot; CAP_SYS_TIME: settimeofday, stime,
//!   clock_settime; CAP_SYS_PACCT: acct; CAP_SYS_TTY_CONFIG: vhangup;
//!   CAP_SYS_RAWIO: iopl, ioperm; CAP_SYSLOG: syslog; CAP_BPF: bpf;
//!   CAP_PERFMON: perf_event_open; CAP_SYS_CHROOT: chroot (in the default
//!   set); CAP_SYS_NICE: mbind, get/set_mempolicy, set_mempolicy_home_node.
//!
//! Denied whatever the capabilities:
//!
//! - `kexec_load`, `kexec_file_load`, `swapon`, `swapoff`, `pivot_root`,
//!   `nfsservctl`, `_sysctl`, `uselib`, `ustat`, `sysfs`, `vm86`: host
//!   administration or obsolete interfaces no container needs;
//! - `add_key`, `request_key`, `keyctl`: the kernel keyrings are not
//!   namespaced, so one container could reach another's keys;
//! - `userfaultfd`: a staple of kernel exploits (it pauses the kernel
//!   mid-copy at a page fault), used by almost nothing else;
//! - `io_uring_setup`, `io_uring_enter`, `io_uring_register`: a large,
//!   fast-moving kernel surface behind many privilege escalations; Docker
//!   25 and containerd 2.0 dropped it from their defaults too, and its
//!   users fall back to ordinary I/O when setup fails;
//! - `move_pages`, `migrate_pages`: other processes' memory placement;
//! - `socket` for AF_ALG (the kernel crypto API, a recurring source of
//!   bugs; containerd's newest default denies it) and AF_VSOCK (host and
//!   hypervisor sockets, which no network namespace confines), and for
//!   families newer than AF_MCTP. The allowed families are matched exactly
//!   (below 38, or one of 39, 41..45) rather than "not 40": the kernel reads
//!   the family as an int, so a value with high bits set would pass a 64-bit
//!   "not equal" test and still become AF_VSOCK;
//! - `clone3` fails with `ENOSYS`, not `EPERM`, without CAP_SYS_ADMIN: its
//!   flags are in memory a filter cannot read, and glibc falls back to
//!   `clone` (whose flags it can) only on ENOSYS;
//! - anything newer than the list, until it is added here.
//!
//! Every name resolves with Debian 12's libseccomp 2.5.4 (whose syscall
//! table reaches Linux 6.7). A name the runtime's libseccomp does not know
//! is skipped by runc and warned about by crun at every start, so calls
//! newer than that table (mseal, listmount, statmount, lsm_*) wait until
//! the runtimes' library knows them.
//!
//! # Localhost profiles
//!
//! `parse_profile` reads a profile file as kubelet names them: Docker's and
//! containerd's format (`archMap`, `name` or `names`, `includes` and
//! `excludes` on capabilities, architectures and kernel versions, which are
//! resolved here for the host and the container's capabilities) or the
//! plain OCI `LinuxSeccomp`, which is the same format without those.

use super::caps;
use super::spec::{LinuxSeccomp, LinuxSeccompArg, LinuxSyscall};
use serde::{Deserialize, Deserializer};

/// The largest profile file read, in bytes.
pub const MAX_PROFILE_BYTES: usize = 1 << 20;

pub const ACT_ALLOW: &str = "SCMP_ACT_ALLOW";
pub const ACT_ERRNO: &str = "SCMP_ACT_ERRNO";

/// The actions a profile may use (runc 1.1's and crun 1.8's, without
/// SCMP_ACT_NOTIFY, which needs a seccomp agent podscope does not run).
pub const ACTIONS: &[&str] = &[
    "SCMP_ACT_KILL",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_KILL_THREAD",
    "SCMP_ACT_TRAP",
    "SCMP_ACT_ERRNO",
    "SCMP_ACT_TRACE",
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_LOG",
];

/// The argument comparisons.
pub const OPS: &[&str] = &[
    "SCMP_CMP_NE",
    "SCMP_CMP_LT",
    "SCMP_CMP_LE",
    "SCMP_CMP_EQ",
    "SCMP_CMP_GE",
    "SCMP_CMP_GT",
    "SCMP_CMP_MASKED_EQ",
];

/// The architectures runc 1.1 accepts (crun takes the same names).
pub const ARCHES: &[&str] = &[
    "SCMP_ARCH_X86",
    "SCMP_ARCH_X86_64",
    "SCMP_ARCH_X32",
    "SCMP_ARCH_ARM",
    "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_MIPS",
    "SCMP_ARCH_MIPS64",
    "SCMP_ARCH_MIPS64N32",
    "SCMP_ARCH_MIPSEL",
    "SCMP_ARCH_MIPSEL64",
    "SCMP_ARCH_MIPSEL64N32",
    "SCMP_ARCH_PPC",
    "SCMP_ARCH_PPC64",
    "SCMP_ARCH_PPC64LE",
    "SCMP_ARCH_S390",
    "SCMP_ARCH_S390X",
];

/// The filter flags the spec defines. crun 1.8 applies them; runc 1.1
/// refuses any flag, so a profile with flags runs under crun only.
pub const FLAGS: &[&str] = &[
    "SECCOMP_FILTER_FLAG_TSYNC",
    "SECCOMP_FILTER_FLAG_LOG",
    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
];

const EPERM: u32 = libc::EPERM as u32;
const ENOSYS: u32 = libc::ENOSYS as u32;

/// The clone flags that make namespaces: CLONE_NEWNS, NEWCGROUP, NEWUTS,
/// NEWIPC, NEWUSER, NEWPID, NEWNET (0x7e020000).
const CLONE_NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

/// AF_ALG: sockets below it are allowed by one "less than" rule.
const AF_ALG: u64 = 38;
/// The socket families above AF_ALG that stay allowed: AF_NFC, then (past
/// AF_VSOCK, 40) AF_KCM, AF_QIPCRTR, AF_SMC, AF_XDP, AF_MCTP.
const SOCKET_FAMILIES_ABOVE_ALG: &[u64] = &[39, 41, 42, 43, 44, 45];

/// The `personality` values allowed: PER_LINUX, PER_LINUX32, UNAME26,
/// UNAME26 | PER_LINUX32, and 0xffffffff, which only queries.
const PERSONALITIES: &[u64] = &[0x0, 0x0008, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

// The allow list, by purpose. 32-bit names (`*32`, `*64` on 32-bit ABIs,
// `*_time64`) are for the x86 and arm companions of the native arch.

/// Descriptors: open, read, write, copy, sync, pipes.
const FILE_IO: &str = "\
    open openat openat2 creat close close_range read readv pread64 preadv preadv2 write writev \
    pwrite64 pwritev pwritev2 lseek _llseek dup dup2 dup3 fcntl fcntl64 flock ioctl fsync \
    fdatasync sync syncfs sync_file_range fallocate fadvise64 fadvise64_64 readahead cachestat \
    ftruncate ftruncate64 truncate truncate64 sendfile sendfile64 splice tee vmsplice \
    copy_file_range pipe pipe2 memfd_create name_to_handle_at \
";

/// The file tree: directories, links, metadata, permissions, times.
const PATHS: &str = "\
    access faccessat faccessat2 chdir fchdir getcwd mkdir mkdirat mknod mknodat rmdir rename \
    renameat renameat2 link linkat symlink symlinkat unlink unlinkat readlink readlinkat \
    getdents getdents64 stat stat64 lstat lstat64 fstat fstat64 fstatat64 newfstatat statx \
    statfs statfs64 fstatfs fstatfs64 chmod fchmod fchmodat fchmodat2 chown chown32 fchown \
    fchown32 fchownat lchown lchown32 umask utime utimes utimensat utimensat_time64 futimesat \
";

/// Extended attributes (the kernel checks the namespace's permissions).
const XATTRS: &str = "\
    getxattr lgetxattr fgetxattr setxattr lsetxattr fsetxattr listxattr llistxattr flistxattr \
    removexattr lremovexattr fremovexattr \
";

/// Waiting for descriptors, and descriptors that deliver events
/// (fanotify marks only: making a fanotify group needs CAP_SYS_ADMIN).
const EVENTS: &str = "\
    select _newselect pselect6 pselect6_time64 poll ppoll ppoll_time64 epoll_create \
    epoll_create1 epoll_ctl epoll_ctl_old epoll_wait epoll_wait_old epoll_pwait epoll_pwait2 \
    eventfd eventfd2 signalfd signalfd4 timerfd_create timerfd_settime timerfd_settime64 \
    timerfd_gettime timerfd_gettime64 inotify_init inotify_init1 inotify_add_watch \
    inotify_rm_watch \
    fanotify_mark \
";

/// Linux native AIO (not io_uring: see the module's doc).
const AIO: &str = "\
    io_setup io_destroy io_submit io_cancel io_getevents io_pgetevents io_pgetevents_time64 \
";

/// The process's own memory.
const MEMORY: &str = "\
    brk mmap mmap2 munmap mremap mprotect madvise mincore msync mlock mlock2 mlockall munlock \
    munlockall remap_file_pages membarrier memfd_secret pkey_alloc pkey_free pkey_mprotect \
    map_shadow_stack \
";

/// Processes and threads (clone and personality are argument rules).
const PROCESSES: &str = "\
    fork vfork execve execveat exit exit_group wait4 waitid waitpid getpid getppid gettid \
    getpgid setpgid getpgrp getsid setsid set_tid_address set_robust_list get_robust_list futex \
    futex_time64 futex_waitv futex_wait futex_wake futex_requeue rseq get_thread_area \
    set_thread_area restart_syscall getrlimit ugetrlimit setrlimit prlimit64 getrusage times \
    getcpu uname sysinfo getrandom pidfd_open pidfd_send_signal process_mrelease \
";

/// Tracing, bounded by the kernel's own checks (see the module's doc).
const TRACING: &str = "ptrace process_vm_readv process_vm_writev";

/// Signals.
const SIGNALS: &str = "\
    kill tkill tgkill rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend \
    rt_sigtimedwait rt_sigtimedwait_time64 rt_sigqueueinfo rt_tgsigqueueinfo sigaltstack \
    sigprocmask sigreturn pause alarm \
";

/// The process's own credentials (changing them needs CAP_SETUID/SETGID).
const IDENTITY: &str = "\
    getuid getuid32 geteuid geteuid32 getgid getgid32 getegid getegid32 getresuid getresuid32 \
    getresgid getresgid32 getgroups getgroups32 setuid setuid32 setgid setgid32 setreuid \
    setreuid32 setregid setregid32 setresuid setresuid32 setresgid setresgid32 setfsuid \
    setfsuid32 setfsgid setfsgid32 setgroups setgroups32 capget capset \
";

/// Clocks, sleeps and timers (adjtimex and clock_adjtime only read
/// without CAP_SYS_TIME).
const TIME: &str = "\
    time gettimeofday clock_gettime clock_gettime64 clock_getres clock_getres_time64 \
    clock_nanosleep clock_nanosleep_time64 nanosleep adjtimex clock_adjtime clock_adjtime64 \
    getitimer setitimer timer_create timer_delete timer_settime timer_settime64 timer_gettime \
    timer_gettime64 timer_getoverrun \
";

/// CPU and I/O scheduling (raising priority needs CAP_SYS_NICE).
const SCHEDULING: &str = "\
    sched_yield sched_getaffinity sched_setaffinity sched_getattr sched_setattr sched_getparam \
    sched_setparam sched_getscheduler sched_setscheduler sched_get_priority_max \
    sched_get_priority_min sched_rr_get_interval sched_rr_get_interval_time64 getpriority \
    setpriority ioprio_get ioprio_set \
";

/// System V and POSIX IPC, inside the pod's IPC namespace.
const IPC: &str = "\
    ipc msgget msgsnd msgrcv msgctl semget semop semtimedop semtimedop_time64 semctl shmget \
    shmat shmdt shmctl mq_open mq_unlink mq_timedsend mq_timedsend_time64 mq_timedreceive \
    mq_timedreceive_time64 mq_notify mq_getsetattr \
";

/// Sockets once made (`socket` itself is an argument rule). `socketcall`
/// is the x86 multiplexer, whose arguments no filter can see.
const NETWORK: &str = "\
    socketpair bind listen accept accept4 connect shutdown getsockname getpeername getsockopt \
    setsockopt send sendto sendmsg sendmmsg recv recvfrom recvmsg recvmmsg recvmmsg_time64 \
    socketcall \
";

/// A process restricting itself further.
const SELF_RESTRICTION: &str = "\
    prctl seccomp landlock_create_ruleset landlock_add_rule landlock_restrict_self \
";

const BASE: &[&str] = &[
    FILE_IO,
    PATHS,
    XATTRS,
    EVENTS,
    AIO,
    MEMORY,
    PROCESSES,
    TRACING,
    SIGNALS,
    IDENTITY,
    TIME,
    SCHEDULING,
    IPC,
    NETWORK,
    SELF_RESTRICTION,
];

/// The native arch's own calls.
const X86_64_ONLY: &str = "arch_prctl modify_ldt";
const AARCH64_ONLY: &str =
    "arm_fadvise64_64 arm_sync_file_range sync_file_range2 breakpoint cacheflush set_tls";

/// The syscalls each capability unlocks.
const BY_CAP: &[(&str, &str)] = &[
    (
        "CAP_SYS_ADMIN",
        "mount umount umount2 fsopen fsconfig fsmount fspick move_mount open_tree mount_setattr \
         unshare setns clone clone3 sethostname setdomainname quotactl quotactl_fd fanotify_init \
         lookup_dcookie bpf perf_event_open syslog",
    ),
    ("CAP_SYS_PTRACE", "kcmp pidfd_getfd process_madvise"),
    ("CAP_DAC_READ_SEARCH", "open_by_handle_at"),
    ("CAP_SYS_MODULE", "init_module finit_module delete_module"),
    ("CAP_SYS_BOOT", "reboot"),
    (
        "CAP_SYS_TIME",
        "settimeofday stime clock_settime clock_settime64",
    ),
    ("CAP_SYS_PACCT", "acct"),
    ("CAP_SYS_TTY_CONFIG", "vhangup"),
    ("CAP_SYS_RAWIO", "iopl ioperm"),
    ("CAP_SYSLOG", "syslog"),
    ("CAP_BPF", "bpf"),
    ("CAP_PERFMON", "perf_event_open"),
    ("CAP_SYS_CHROOT", "chroot"),
    (
        "CAP_SYS_NICE",
        "mbind get_mempolicy set_mempolicy set_mempolicy_home_node",
    ),
];

/// libseccomp's name for the architecture podscope was built for, as
/// Docker profiles' `arches` conditions spell it.
pub fn native_arch() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "amd64"
    } else if cfg!(target_arch = "aarch64") {
        "arm64"
    } else if cfg!(target_arch = "x86") {
        "x86"
    } else if cfg!(target_arch = "arm") {
        "arm"
    } else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
        "ppc64le"
    } else if cfg!(target_arch = "s390x") {
        "s390x"
    } else {
        "unknown"
    }
}

/// The `SCMP_ARCH_*` name of a native architecture (for `archMap`).
fn scmp_arch(native: &str) -> Option<&'static str> {
    Some(match native {
        "amd64" => "SCMP_ARCH_X86_64",
        "arm64" => "SCMP_ARCH_AARCH64",
        "x86" => "SCMP_ARCH_X86",
        "arm" => "SCMP_ARCH_ARM",
        "ppc64le" => "SCMP_ARCH_PPC64LE",
        "s390x" => "SCMP_ARCH_S390X",
        _ => return None,
    })
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn allow(names: Vec<String>) -> LinuxSyscall {
    LinuxSyscall {
        names,
        action: ACT_ALLOW.to_owned(),
        errno_ret: None,
        args: Vec::new(),
    }
}

/// Allow `name` when argument `index` compares true.
fn allow_if(name: &str, index: u32, op: &str, value: u64, value_two: u64) -> LinuxSyscall {
    LinuxSyscall {
        args: vec![LinuxSeccompArg {
            index,
            value,
            value_two,
            op: op.to_owned(),
        }],
        ..allow(vec![name.to_owned()])
    }
}

/// podscope's RuntimeDefault profile for a container whose effective
/// capabilities are `caps` (`CAP_*` names); see the module's doc.
pub fn runtime_default(caps: &[String]) -> LinuxSeccomp {
    runtime_default_for(native_arch(), caps)
}

fn runtime_default_for(arch: &str, caps: &[String]) -> LinuxSeccomp {
    let held: Vec<String> = caps
        .iter()
        .filter_map(|c| caps::normalize(c).ok())
        .collect();
    let has = |cap: &str| held.iter().any(|c| c == cap);

    let (architectures, arch_only): (&[&str], &str) = match arch {
        "amd64" => (
            &["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            X86_64_ONLY,
        ),
        "arm64" => (&["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"], AARCH64_ONLY),
        _ => (&[], ""),
    };

    let mut names: Vec<&str> = BASE.iter().flat_map(|g| g.split_whitespace()).collect();
    names.extend(arch_only.split_whitespace());
    for (cap, unlocked) in BY_CAP {
        if has(cap) {
            names.extend(unlocked.split_whitespace());
        }
    }
    names.sort_unstable();
    names.dedup();

    let mut syscalls = vec![allow(strings(&names))];
    syscalls.push(allow_if("socket", 0, "SCMP_CMP_LT", AF_ALG, 0));
    for &family in SOCKET_FAMILIES_ABOVE_ALG {
        syscalls.push(allow_if("socket", 0, "SCMP_CMP_EQ", family, 0));
    }
    for &p in PERSONALITIES {
        syscalls.push(allow_if("personality", 0, "SCMP_CMP_EQ", p, 0));
    }
    if !has("CAP_SYS_ADMIN") {
        // The flags are clone's first argument, its second on s390.
        let flags = if arch == "s390x" { 1 } else { 0 };
        syscalls.push(allow_if(
            "clone",
            flags,
            "SCMP_CMP_MASKED_EQ",
            CLONE_NAMESPACE_FLAGS,
            0,
        ));
        syscalls.push(LinuxSyscall {
            names: strings(&["clone3"]),
            action: ACT_ERRNO.to_owned(),
            errno_ret: Some(ENOSYS),
            args: Vec::new(),
        });
    }

    LinuxSeccomp {
        default_action: ACT_ERRNO.to_owned(),
        default_errno_ret: Some(EPERM),
        architectures: strings(architectures),
        flags: Vec::new(),
        syscalls,
    }
}

/// What a Localhost profile's conditions are tested against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host<'a> {
    /// libseccomp's native architecture name ("amd64", "arm64", ...).
    pub arch: &'a str,
    /// The running kernel's (version, major revision), for `minKernel`;
    /// None: assume a kernel new enough for every condition (podscope
    /// needs a far newer kernel than any Docker profile asks about).
    pub kernel: Option<(u64, u64)>,
}

impl Host<'static> {
    /// The architecture podscope was built for, any kernel.
    pub fn native() -> Host<'static> {
        Host {
            arch: native_arch(),
            kernel: None,
        }
    }
}

/// Read JSON `null` as the default, as Go's decoder does (Docker writes
/// `"args": null` in some profiles).
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A profile file, in Docker's format (a superset of OCI's).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RawProfile {
    #[serde(deserialize_with = "nullable")]
    default_action: String,
    default_errno_ret: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    architectures: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    arch_map: Vec<RawArch>,
    #[serde(deserialize_with = "nullable")]
    flags: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    syscalls: Vec<RawSyscall>,
    #[serde(deserialize_with = "nullable")]
    listener_path: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RawArch {
    #[serde(deserialize_with = "nullable")]
    architecture: String,
    #[serde(deserialize_with = "nullable")]
    sub_architectures: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RawSyscall {
    #[serde(deserialize_with = "nullable")]
    name: String,
    #[serde(deserialize_with = "nullable")]
    names: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    action: String,
    errno_ret: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    args: Vec<LinuxSeccompArg>,
    includes: Option<RawFilter>,
    excludes: Option<RawFilter>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RawFilter {
    #[serde(deserialize_with = "nullable")]
    caps: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    arches: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    min_kernel: String,
}

/// A filter with its names checked.
struct Filter<'a> {
    caps: Vec<String>,
    arches: &'a [String],
    min_kernel: Option<(u64, u64)>,
}

fn check_action(action: &str, field: &str) -> Result<(), String> {
    if action == "SCMP_ACT_NOTIFY" {
        return Err(format!(
            "{field}: SCMP_ACT_NOTIFY needs a seccomp agent, which podscope does not run"
        ));
    }
    if !ACTIONS.contains(&action) {
        return Err(format!("{field}: unknown action {action:?}"));
    }
    Ok(())
}

fn check_arch(arch: &str, field: &str) -> Result<(), String> {
    if !ARCHES.contains(&arch) {
        return Err(format!("{field}: unknown architecture {arch:?}"));
    }
    Ok(())
}

/// Syscall names are lowercase C identifiers.
fn check_name(name: &str, field: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(format!("{field}: invalid syscall name {name:?}"));
    }
    Ok(())
}

/// "<kernel>.<major>", as Docker writes `minKernel`.
fn kernel_version(text: &str, field: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{field}: {text:?} is not <kernel>.<major>");
    let (k, m) = text.split_once('.').ok_or_else(bad)?;
    let k: u64 = k.parse().map_err(|_| bad())?;
    let m: u64 = m.parse().map_err(|_| bad())?;
    if (k, m) == (0, 0) {
        return Err(bad());
    }
    Ok((k, m))
}

fn check_filter<'a>(raw: &'a RawFilter, field: &str) -> Result<Filter<'a>, String> {
    let caps = raw
        .caps
        .iter()
        .enumerate()
        .map(|(i, c)| caps::normalize(c).map_err(|e| format!("{field}.caps[{i}]: {e}")))
        .collect::<Result<_, _>>()?;
    let min_kernel = if raw.min_kernel.is_empty() {
        None
    } else {
        Some(kernel_version(
            &raw.min_kernel,
            &format!("{field}.minKernel"),
        )?)
    };
    Ok(Filter {
        caps,
        arches: &raw.arches,
        min_kernel,
    })
}

fn kernel_at_least(host: &Host, min: (u64, u64)) -> bool {
    host.kernel.is_none_or(|k| k >= min)
}

/// Read a Localhost profile for a container with capabilities `caps`, on
/// the architecture podscope was built for; see `parse_profile_for`.
pub fn parse_profile(json: &[u8], caps: &[String]) -> Result<LinuxSeccomp, String> {
    parse_profile_for(json, caps, &Host::native())
}

/// Read a Localhost profile (Docker's format or OCI's) and resolve its
/// conditions as Docker does: a rule is left out when `excludes` matches
/// (any of its capabilities held, the host's arch listed, the kernel at
/// least `minKernel`) or `includes` does not (all its capabilities held,
/// the host's arch listed, the kernel at least `minKernel`); `archMap`
/// gives the host arch's entry and its sub-architectures.
pub fn parse_profile_for(
    json: &[u8],
    caps: &[String],
    host: &Host,
) -> Result<LinuxSeccomp, String> {
    if json.len() > MAX_PROFILE_BYTES {
        return Err(format!(
            "the seccomp profile is {} bytes, above the limit of {MAX_PROFILE_BYTES}",
            json.len()
        ));
    }
    let raw: RawProfile =
        serde_json::from_slice(json).map_err(|e| format!("not a seccomp profile: {e}"))?;
    let held: Vec<String> = caps
        .iter()
        .filter_map(|c| caps::normalize(c).ok())
        .collect();

    if raw.default_action.is_empty() {
        return Err("defaultAction: missing".to_owned());
    }
    check_action(&raw.default_action, "defaultAction")?;
    if !raw.listener_path.is_empty() {
        return Err(
            "listenerPath: seccomp notification needs an agent, which podscope does not run"
                .to_owned(),
        );
    }
    for (i, flag) in raw.flags.iter().enumerate() {
        if !FLAGS.contains(&flag.as_str()) {
            return Err(format!("flags[{i}]: unknown flag {flag:?}"));
        }
    }
    if !raw.architectures.is_empty() && !raw.arch_map.is_empty() {
        return Err("architectures and archMap are both set; use one".to_owned());
    }
    for (i, a) in raw.architectures.iter().enumerate() {
        check_arch(a, &format!("architectures[{i}]"))?;
    }
    let mut architectures = raw.architectures.clone();
    for (i, entry) in raw.arch_map.iter().enumerate() {
        check_arch(&entry.architecture, &format!("archMap[{i}].architecture"))?;
        for (j, sub) in entry.sub_architectures.iter().enumerate() {
            check_arch(sub, &format!("archMap[{i}].subArchitectures[{j}]"))?;
        }
    }
    if let Some(native) = scmp_arch(host.arch) {
        if let Some(entry) = raw.arch_map.iter().find(|e| e.architecture == native) {
            architectures.push(entry.architecture.clone());
            architectures.extend(entry.sub_architectures.iter().cloned());
        }
    }

    let mut syscalls = Vec::new();
    for (i, call) in raw.syscalls.iter().enumerate() {
        let field = format!("syscalls[{i}]");
        let names = match (call.name.is_empty(), call.names.is_empty()) {
            (false, false) => return Err(format!("{field}: both name and names are set; use one")),
            (false, true) => vec![call.name.clone()],
            (true, false) => call.names.clone(),
            (true, true) => return Err(format!("{field}: no syscall names")),
        };
        for (j, name) in names.iter().enumerate() {
            let f = if call.name.is_empty() {
                format!("{field}.names[{j}]")
            } else {
                format!("{field}.name")
            };
            check_name(name, &f)?;
        }
        check_action(&call.action, &format!("{field}.action"))?;
        if call.args.len() > 6 {
            return Err(format!(
                "{field}.args: {} comparisons, a syscall has at most 6 arguments",
                call.args.len()
            ));
        }
        for (j, arg) in call.args.iter().enumerate() {
            if arg.index > 5 {
                return Err(format!(
                    "{field}.args[{j}].index: {} is not an argument (0..5)",
                    arg.index
                ));
            }
            if !OPS.contains(&arg.op.as_str()) {
                return Err(format!("{field}.args[{j}].op: unknown op {:?}", arg.op));
            }
        }
        let includes = call
            .includes
            .as_ref()
            .map(|f| check_filter(f, &format!("{field}.includes")))
            .transpose()?;
        let excludes = call
            .excludes
            .as_ref()
            .map(|f| check_filter(f, &format!("{field}.excludes")))
            .transpose()?;

        let holds = |c: &String| held.contains(c);
        let on_arch = |arches: &[String]| arches.iter().any(|a| a == host.arch);
        if let Some(ex) = &excludes {
            if on_arch(ex.arches)
                || ex.caps.iter().any(holds)
                || ex.min_kernel.is_some_and(|m| kernel_at_least(host, m))
            {
                continue;
            }
        }
        if let Some(inc) = &includes {
            if (!inc.arches.is_empty() && !on_arch(inc.arches))
                || !inc.caps.iter().all(holds)
                || inc.min_kernel.is_some_and(|m| !kernel_at_least(host, m))
            {
                continue;
            }
        }
        syscalls.push(LinuxSyscall {
            names,
            action: call.action.clone(),
            errno_ret: call.errno_ret,
            args: call.args.clone(),
        });
    }

    Ok(LinuxSeccomp {
        default_action: raw.default_action,
        default_errno_ret: raw.default_errno_ret,
        architectures,
        flags: raw.flags,
        syscalls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(v: &[&str]) -> Vec<String> {
        super::strings(v)
    }

    fn default_caps() -> Vec<String> {
        caps::effective(&[], &[], false).unwrap()
    }

    fn with_caps(add: &[&str]) -> Vec<String> {
        caps::effective(&strings(add), &[], false).unwrap()
    }

    /// Rules that name `name`.
    fn rules<'a>(p: &'a LinuxSeccomp, name: &str) -> Vec<&'a LinuxSyscall> {
        p.syscalls
            .iter()
            .filter(|r| r.names.iter().any(|n| n == name))
            .collect()
    }

    /// Allowed whatever its arguments.
    fn allowed(p: &LinuxSeccomp, name: &str) -> bool {
        rules(p, name)
            .iter()
            .any(|r| r.action == ACT_ALLOW && r.args.is_empty())
    }

    /// Not named at all: the default action (EPERM) applies.
    fn denied(p: &LinuxSeccomp, name: &str) -> bool {
        rules(p, name).is_empty() && p.default_action == ACT_ERRNO
    }

    /// Whether `socket(family, ...)` passes the profile's rules.
    fn socket_allowed(p: &LinuxSeccomp, family: u64) -> bool {
        rules(p, "socket").iter().any(|r| {
            r.action == ACT_ALLOW
                && r.args.iter().all(|a| match a.op.as_str() {
                    "SCMP_CMP_LT" => family < a.value,
                    "SCMP_CMP_EQ" => family == a.value,
                    "SCMP_CMP_NE" => family != a.value,
                    "SCMP_CMP_GT" => family > a.value,
                    op => panic!("{op}"),
                })
        })
    }

    #[test]
    fn default_action_is_eperm() {
        let p = runtime_default(&default_caps());
        assert_eq!(p.default_action, "SCMP_ACT_ERRNO");
        assert_eq!(p.default_errno_ret, Some(1));
        assert!(p.flags.is_empty());
    }

    #[test]
    fn architectures_cover_the_32_bit_companions() {
        let p = runtime_default_for("amd64", &default_caps());
        assert_eq!(
            p.architectures,
            ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
        );
        assert!(allowed(&p, "arch_prctl") && allowed(&p, "modify_ldt"));
        assert!(!allowed(&p, "set_tls"));
        let p = runtime_default_for("arm64", &default_caps());
        assert_eq!(p.architectures, ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]);
        assert!(allowed(&p, "set_tls") && allowed(&p, "cacheflush"));
        assert!(!allowed(&p, "arch_prctl"));
        let native = runtime_default(&default_caps());
        if cfg!(target_arch = "x86_64") {
            assert_eq!(native.architectures[0], "SCMP_ARCH_X86_64");
        }
        // Elsewhere: the native arch only, and clone's flags where s390
        // keeps them.
        let p = runtime_default_for("s390x", &default_caps());
        assert!(p.architectures.is_empty());
        assert_eq!(rules(&p, "clone")[0].args[0].index, 1);
    }

    #[test]
    fn a_plain_container_runs_busybox() {
        // sh, ls, cat, sleep, wget, nc, chmod, and seccomp mode 2 itself
        // (any filter at all gives "Seccomp: 2").
        let p = runtime_default(&default_caps());
        for name in [
            "execve",
            "clone",
            "fork",
            "vfork",
            "wait4",
            "exit_group",
            "openat",
            "open",
            "read",
            "write",
            "close",
            "getdents64",
            "statx",
            "newfstatat",
            "lstat",
            "fstat",
            "ioctl",
            "fcntl",
            "dup2",
            "pipe2",
            "rt_sigaction",
            "rt_sigprocmask",
            "nanosleep",
            "clock_nanosleep",
            "connect",
            "bind",
            "listen",
            "accept4",
            "sendto",
            "recvfrom",
            "poll",
            "select",
            "setsockopt",
            "getsockopt",
            "chmod",
            "fchmodat",
            "chown",
            "fchownat",
            "mkdirat",
            "unlinkat",
            "renameat2",
            "getuid",
            "setuid",
            "setgroups",
            "uname",
            "getcwd",
            "chdir",
            "mmap",
            "mprotect",
            "brk",
            "futex",
            "rseq",
            "getrandom",
            "prctl",
            "capget",
            "capset",
            "chroot",
            "mknodat",
            "kill",
            "setsid",
        ] {
            assert!(
                allowed(&p, name) || name == "clone",
                "{name} is not allowed"
            );
        }
        for family in [1, 2, 10, 16, 17] {
            // unix, inet, inet6, netlink, packet
            assert!(socket_allowed(&p, family), "AF {family}");
        }
        assert!(p
            .syscalls
            .iter()
            .all(|r| r.names.iter().all(|n| !n.is_empty())));
    }

    #[test]
    fn sys_admin_unlocks_hostname_mount_and_namespaces() {
        let plain = runtime_default(&default_caps());
        let admin = runtime_default(&with_caps(&["SYS_ADMIN"]));
        for name in [
            "sethostname",
            "setdomainname",
            "mount",
            "umount2",
            "setns",
            "unshare",
            "fsopen",
            "move_mount",
            "bpf",
            "perf_event_open",
            "syslog",
        ] {
            assert!(denied(&plain, name), "{name} allowed without CAP_SYS_ADMIN");
            assert!(allowed(&admin, name), "{name} denied with CAP_SYS_ADMIN");
        }
        // clone: any flags, and clone3 allowed (no ENOSYS rule).
        assert!(allowed(&admin, "clone"));
        assert_eq!(rules(&admin, "clone").len(), 1);
        assert!(allowed(&admin, "clone3"));
        assert_eq!(rules(&admin, "clone3").len(), 1);
    }

    #[test]
    fn clone_without_sys_admin_is_namespace_free() {
        let p = runtime_default(&default_caps());
        let clone = rules(&p, "clone");
        assert_eq!(clone.len(), 1);
        assert_eq!(clone[0].action, ACT_ALLOW);
        assert_eq!(
            clone[0].args,
            [LinuxSeccompArg {
                index: 0,
                value: 0x7e02_0000,
                value_two: 0,
                op: "SCMP_CMP_MASKED_EQ".into(),
            }]
        );
        let clone3 = rules(&p, "clone3");
        assert_eq!(clone3.len(), 1);
        assert_eq!(clone3[0].action, ACT_ERRNO);
        assert_eq!(clone3[0].errno_ret, Some(38));
    }

    #[test]
    fn personality_only_with_safe_values() {
        let p = runtime_default(&default_caps());
        let r = rules(&p, "personality");
        assert!(!allowed(&p, "personality"));
        let mut values: Vec<u64> = r
            .iter()
            .map(|r| {
                assert_eq!(r.args.len(), 1);
                assert_eq!(r.args[0].op, "SCMP_CMP_EQ");
                assert_eq!(r.args[0].index, 0);
                r.args[0].value
            })
            .collect();
        values.sort_unstable();
        assert_eq!(values, [0, 8, 0x20000, 0x20008, 0xffff_ffff]);
    }

    #[test]
    fn sockets_deny_alg_and_vsock_exactly() {
        let p = runtime_default(&with_caps(&["ALL"]));
        assert!(!allowed(&p, "socket"));
        for family in 0..38 {
            assert!(socket_allowed(&p, family), "AF {family}");
        }
        assert!(!socket_allowed(&p, 38), "AF_ALG");
        assert!(socket_allowed(&p, 39), "AF_NFC");
        assert!(!socket_allowed(&p, 40), "AF_VSOCK");
        for family in 41..=45 {
            assert!(socket_allowed(&p, family), "AF {family}");
        }
        assert!(!socket_allowed(&p, 46));
        // High bits the kernel drops when it reads the int.
        assert!(!socket_allowed(&p, (1 << 32) | 40));
        assert!(!socket_allowed(&p, (1 << 32) | 38));
        // One condition per rule: runc turns several on one argument
        // into an OR.
        assert!(rules(&p, "socket").iter().all(|r| r.args.len() == 1));
    }

    #[test]
    fn escapes_are_denied_without_their_capabilities() {
        let p = runtime_default(&default_caps());
        for name in [
            "kexec_load",
            "kexec_file_load",
            "open_by_handle_at",
            "add_key",
            "request_key",
            "keyctl",
            "init_module",
            "finit_module",
            "delete_module",
            "reboot",
            "settimeofday",
            "clock_settime",
            "acct",
            "iopl",
            "ioperm",
            "userfaultfd",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "pivot_root",
            "swapon",
            "swapoff",
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "mbind",
            "set_mempolicy",
            "move_pages",
            "migrate_pages",
            "vhangup",
            "lookup_dcookie",
            "fanotify_init",
            "quotactl",
            "nfsservctl",
            "_sysctl",
            "uselib",
        ] {
            assert!(denied(&p, name), "{name} is not denied");
        }
    }

    #[test]
    fn some_things_stay_denied_with_every_capability() {
        let p = runtime_default(
            caps::ALL
                .iter()
                .map(|c| (*c).to_owned())
                .collect::<Vec<_>>()
                .as_slice(),
        );
        for name in [
            "kexec_load",
            "kexec_file_load",
            "add_key",
            "request_key",
            "keyctl",
            "userfaultfd",
            "io_uring_setup",
            "pivot_root",
            "swapon",
            "move_pages",
        ] {
            assert!(denied(&p, name), "{name} allowed with every capability");
        }
    }

    #[test]
    fn each_capability_unlocks_only_its_calls() {
        for (cap, unlocked) in BY_CAP {
            let short = cap.trim_start_matches("CAP_");
            let with = caps::effective(&strings(&[short]), &[], false).unwrap();
            let without = caps::effective(&[], &strings(&[short]), false).unwrap();
            let p = runtime_default(&with);
            let q = runtime_default(&without);
            for name in unlocked.split_whitespace() {
                assert!(allowed(&p, name), "{name} denied with {cap}");
                // Dropping it takes the call away again, unless another
                // held capability unlocks it too.
                let other = BY_CAP.iter().any(|(c, n)| {
                    c != cap
                        && without.iter().any(|w| w == c)
                        && n.split_whitespace().any(|x| x == name)
                });
                if !other {
                    assert!(!allowed(&q, name), "{name} allowed without {cap}");
                }
            }
        }
    }

    #[test]
    fn specific_capabilities() {
        let cases: &[(&str, &[&str])] = &[
            ("SYS_PTRACE", &["kcmp", "pidfd_getfd", "process_madvise"]),
            (
                "SYS_MODULE",
                &["init_module", "finit_module", "delete_module"],
            ),
            ("SYS_BOOT", &["reboot"]),
            ("SYS_TIME", &["settimeofday", "stime", "clock_settime"]),
            ("SYS_NICE", &["mbind", "get_mempolicy", "set_mempolicy"]),
            ("SYSLOG", &["syslog"]),
            ("BPF", &["bpf"]),
            ("PERFMON", &["perf_event_open"]),
            ("SYS_RAWIO", &["iopl", "ioperm"]),
            ("DAC_READ_SEARCH", &["open_by_handle_at"]),
            ("SYS_PACCT", &["acct"]),
            ("SYS_TTY_CONFIG", &["vhangup"]),
        ];
        for (cap, names) in cases {
            let p = runtime_default(&with_caps(&[cap]));
            for name in *names {
                assert!(allowed(&p, name), "{name} with {cap}");
            }
            // ...and not mount, which is CAP_SYS_ADMIN's.
            assert!(denied(&p, "mount"), "mount with {cap}");
        }
        // chroot comes with the default set, and goes with it.
        assert!(allowed(&runtime_default(&default_caps()), "chroot"));
        let no_chroot = caps::effective(&[], &strings(&["SYS_CHROOT"]), false).unwrap();
        assert!(denied(&runtime_default(&no_chroot), "chroot"));
    }

    #[test]
    fn tracing_is_allowed_to_all() {
        let p = runtime_default(&default_caps());
        for name in ["ptrace", "process_vm_readv", "process_vm_writev"] {
            assert!(allowed(&p, name), "{name}");
        }
    }

    #[test]
    fn capability_spellings_are_normalized() {
        let p = runtime_default(&strings(&["sys_admin"]));
        assert!(allowed(&p, "sethostname"));
        // Junk is ignored rather than fatal: the caps come from `effective`.
        let p = runtime_default(&strings(&["CAP_BOGUS"]));
        assert!(denied(&p, "sethostname"));
    }

    #[test]
    fn no_name_twice_and_no_conflicts() {
        for caps in [default_caps(), with_caps(&["ALL"]), Vec::new()] {
            let p = runtime_default(&caps);
            let unconditional = &p.syscalls[0];
            assert!(unconditional.args.is_empty() && unconditional.action == ACT_ALLOW);
            let mut sorted = unconditional.names.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted, unconditional.names, "duplicates or unsorted");
            // A name with an unconditional allow has no other rule.
            for rule in &p.syscalls[1..] {
                for name in &rule.names {
                    assert!(!unconditional.names.contains(name), "{name} twice");
                }
            }
            for rule in &p.syscalls {
                for name in &rule.names {
                    check_name(name, "test").unwrap();
                }
            }
        }
    }

    #[test]
    fn base_groups_do_not_overlap() {
        let mut all: Vec<&str> = BASE.iter().flat_map(|g| g.split_whitespace()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a syscall is in two groups");
        let arch = X86_64_ONLY
            .split_whitespace()
            .chain(AARCH64_ONLY.split_whitespace());
        for name in BY_CAP
            .iter()
            .flat_map(|(_, n)| n.split_whitespace())
            .chain(arch)
        {
            assert!(!all.contains(&name), "{name} is both base and gated");
        }
    }

    #[test]
    fn serializes_as_oci() {
        let p = runtime_default(&default_caps());
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(v["defaultErrnoRet"], 1);
        assert!(v.get("flags").is_none());
        let clone3 = v["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["names"] == json!(["clone3"]))
            .unwrap();
        assert_eq!(clone3["errnoRet"], 38);
    }

    // Localhost profiles.

    fn amd64() -> Host<'static> {
        Host {
            arch: "amd64",
            kernel: Some((6, 1)),
        }
    }

    fn parse(v: serde_json::Value, caps: &[String]) -> Result<LinuxSeccomp, String> {
        parse_profile_for(v.to_string().as_bytes(), caps, &amd64())
    }

    #[test]
    fn plain_oci_profile() {
        let text = br#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["sethostname"],"action":"SCMP_ACT_ERRNO"}]}"#;
        let p = parse_profile(text, &default_caps()).unwrap();
        assert_eq!(p.default_action, "SCMP_ACT_ALLOW");
        assert_eq!(p.default_errno_ret, None);
        assert!(p.architectures.is_empty());
        assert_eq!(
            p.syscalls,
            [LinuxSyscall {
                names: strings(&["sethostname"]),
                action: "SCMP_ACT_ERRNO".into(),
                errno_ret: None,
                args: vec![],
            }]
        );
    }

    #[test]
    fn oci_profile_keeps_every_field() {
        let v = json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "defaultErrnoRet": 38,
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
            "flags": ["SECCOMP_FILTER_FLAG_SPEC_ALLOW"],
            "syscalls": [
                {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
                {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
                 "args": [{"index": 0, "value": 2114060288u64, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
                {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                 "args": [{"index": 0, "value": 255, "valueTwo": 8, "op": "SCMP_CMP_MASKED_EQ"}]},
                {"names": ["syslog"], "action": "SCMP_ACT_ERRNO", "errnoRet": 12345},
                {"names": ["ptrace"], "action": "SCMP_ACT_KILL_PROCESS"},
                {"names": ["uname"], "action": "SCMP_ACT_LOG"}
            ]
        });
        let p = parse(v, &[]).unwrap();
        assert_eq!(p.default_errno_ret, Some(38));
        assert_eq!(p.architectures, ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"]);
        assert_eq!(p.flags, ["SECCOMP_FILTER_FLAG_SPEC_ALLOW"]);
        assert_eq!(p.syscalls.len(), 6);
        assert_eq!(p.syscalls[2].args[0].value_two, 8);
        assert_eq!(p.syscalls[3].errno_ret, Some(12345));
        // And it writes back as the same OCI JSON.
        let back: LinuxSeccomp = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn docker_old_format_with_name_and_null_args() {
        let v = json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [
                {"name": "accept", "action": "SCMP_ACT_ALLOW", "args": []},
                {"name": "open", "action": "SCMP_ACT_ALLOW", "args": null, "comment": "x"}
            ]
        });
        let p = parse(v, &[]).unwrap();
        assert_eq!(p.syscalls[0].names, ["accept"]);
        assert_eq!(p.syscalls[1].names, ["open"]);
        assert!(p.syscalls[1].args.is_empty());
    }

    fn docker_profile() -> serde_json::Value {
        json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "defaultErrnoRet": 1,
            "archMap": [
                {"architecture": "SCMP_ARCH_X86_64",
                 "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
                {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}
            ],
            "syscalls": [
                {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW", "comment": "base"},
                {"names": ["ptrace"], "action": "SCMP_ACT_ALLOW",
                 "includes": {"minKernel": "4.8"}},
                {"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW",
                 "includes": {"arches": ["amd64", "x32"]}},
                {"names": ["set_tls"], "action": "SCMP_ACT_ALLOW",
                 "includes": {"arches": ["arm", "arm64"]}},
                {"names": ["mount"], "action": "SCMP_ACT_ALLOW",
                 "includes": {"caps": ["CAP_SYS_ADMIN"]}},
                {"names": ["reboot"], "action": "SCMP_ACT_ALLOW",
                 "includes": {"caps": ["CAP_SYS_BOOT", "CAP_SYS_ADMIN"]}},
                {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
                 "args": [{"index": 0, "value": 2114060288u64, "op": "SCMP_CMP_MASKED_EQ"}],
                 "excludes": {"caps": ["CAP_SYS_ADMIN"], "arches": ["s390", "s390x"]}},
                {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38,
                 "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
                {"names": ["futex_waitv"], "action": "SCMP_ACT_ALLOW",
                 "excludes": {"minKernel": "5.16"}}
            ]
        })
    }

    fn names(p: &LinuxSeccomp) -> Vec<&str> {
        p.syscalls
            .iter()
            .flat_map(|r| r.names.iter().map(String::as_str))
            .collect()
    }

    #[test]
    fn docker_profile_resolves_for_the_host_and_caps() {
        let p = parse(docker_profile(), &default_caps()).unwrap();
        assert_eq!(
            p.architectures,
            ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
        );
        assert_eq!(p.default_errno_ret, Some(1));
        assert_eq!(
            names(&p),
            ["read", "write", "ptrace", "arch_prctl", "clone", "clone3"]
        );
        let clone = &p.syscalls[3];
        assert_eq!(clone.args[0].op, "SCMP_CMP_MASKED_EQ");
        assert_eq!(p.syscalls[4].errno_ret, Some(38));
    }

    #[test]
    fn includes_need_every_cap_excludes_any() {
        let p = parse(docker_profile(), &with_caps(&["SYS_ADMIN"])).unwrap();
        let n = names(&p);
        assert!(n.contains(&"mount"));
        assert!(!n.contains(&"reboot"), "needs SYS_BOOT too");
        assert!(!n.contains(&"clone") && !n.contains(&"clone3"));
        let p = parse(docker_profile(), &with_caps(&["SYS_ADMIN", "SYS_BOOT"])).unwrap();
        assert!(names(&p).contains(&"reboot"));
    }

    #[test]
    fn arches_and_arch_map_follow_the_host() {
        let arm = Host {
            arch: "arm64",
            kernel: Some((6, 1)),
        };
        let p = parse_profile_for(docker_profile().to_string().as_bytes(), &[], &arm).unwrap();
        assert_eq!(p.architectures, ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]);
        let n = names(&p);
        assert!(n.contains(&"set_tls") && !n.contains(&"arch_prctl"));
        // An arch the map does not list: no architectures (native only).
        let s390 = Host {
            arch: "s390x",
            kernel: None,
        };
        let p = parse_profile_for(docker_profile().to_string().as_bytes(), &[], &s390).unwrap();
        assert!(p.architectures.is_empty());
        assert!(!names(&p).contains(&"clone"), "excluded on s390x");
    }

    #[test]
    fn min_kernel() {
        let old = Host {
            arch: "amd64",
            kernel: Some((4, 4)),
        };
        let p = parse_profile_for(docker_profile().to_string().as_bytes(), &[], &old).unwrap();
        let n = names(&p);
        assert!(!n.contains(&"ptrace"), "needs 4.8");
        assert!(n.contains(&"futex_waitv"), "excluded from 5.16 only");
        let new = parse(docker_profile(), &[]).unwrap();
        assert!(!names(&new).contains(&"futex_waitv"));
        // Unknown kernel: new enough.
        let any = Host {
            arch: "amd64",
            kernel: None,
        };
        let p = parse_profile_for(docker_profile().to_string().as_bytes(), &[], &any).unwrap();
        let n = names(&p);
        assert!(n.contains(&"ptrace") && !n.contains(&"futex_waitv"));
        // Equal counts as at least.
        let exact = Host {
            arch: "amd64",
            kernel: Some((4, 8)),
        };
        let p = parse_profile_for(docker_profile().to_string().as_bytes(), &[], &exact).unwrap();
        assert!(names(&p).contains(&"ptrace"));
    }

    #[test]
    fn native_host_parses() {
        let p = parse_profile(docker_profile().to_string().as_bytes(), &default_caps()).unwrap();
        if cfg!(target_arch = "x86_64") {
            assert_eq!(p.architectures[0], "SCMP_ARCH_X86_64");
        }
        assert_eq!(Host::native().arch, native_arch());
    }

    fn error(v: serde_json::Value) -> String {
        parse(v, &[]).unwrap_err()
    }

    #[test]
    fn unknown_actions_are_errors_naming_them() {
        let e = error(json!({"defaultAction": "SCMP_ACT_NOPE"}));
        assert!(
            e.starts_with("defaultAction: ") && e.contains("\"SCMP_ACT_NOPE\""),
            "{e}"
        );
        let e = error(json!({"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"},
                         {"names": ["write"], "action": "ALLOW"}]}));
        assert!(
            e.starts_with("syscalls[1].action: ") && e.contains("\"ALLOW\""),
            "{e}"
        );
        let e = error(json!({"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}]}));
        assert!(e.contains("SCMP_ACT_NOTIFY"), "{e}");
        let e =
            error(json!({"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/agent.sock"}));
        assert!(e.starts_with("listenerPath: "), "{e}");
    }

    #[test]
    fn unknown_ops_and_bad_args_are_errors() {
        let arg = |a: serde_json::Value| {
            error(json!({"defaultAction": "SCMP_ACT_ERRNO",
                "syscalls": [{"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [a]}]}))
        };
        let e = arg(json!({"index": 0, "value": 0, "op": "SCMP_CMP_SOMETIMES"}));
        assert!(
            e.starts_with("syscalls[0].args[0].op: ") && e.contains("SCMP_CMP_SOMETIMES"),
            "{e}"
        );
        let e = arg(json!({"index": 0, "value": 0}));
        assert!(e.contains(".op: "), "{e}");
        let e = arg(json!({"index": 6, "value": 0, "op": "SCMP_CMP_EQ"}));
        assert!(e.starts_with("syscalls[0].args[0].index: "), "{e}");
        let seven = vec![json!({"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}); 7];
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": seven}]}));
        assert!(e.starts_with("syscalls[0].args: "), "{e}");
        let e = arg(json!({"index": 0, "value": -1, "op": "SCMP_CMP_EQ"}));
        assert!(e.starts_with("not a seccomp profile: "), "{e}");
    }

    #[test]
    fn structural_errors() {
        let e = error(json!({"syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]}));
        assert_eq!(e, "defaultAction: missing");
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64"],
            "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []}]}));
        assert!(e.contains("architectures and archMap"), "{e}");
        let e =
            error(json!({"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_VAX"]}));
        assert!(
            e.starts_with("architectures[0]: ") && e.contains("SCMP_ARCH_VAX"),
            "{e}"
        );
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["x86"]}]}));
        assert!(e.starts_with("archMap[0].subArchitectures[0]: "), "{e}");
        let e = error(
            json!({"defaultAction": "SCMP_ACT_ERRNO", "flags": ["SECCOMP_FILTER_FLAG_FAST"]}),
        );
        assert!(e.starts_with("flags[0]: "), "{e}");
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"name": "read", "names": ["write"], "action": "SCMP_ACT_ALLOW"}]}));
        assert!(e.starts_with("syscalls[0]: both"), "{e}");
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": [], "action": "SCMP_ACT_ALLOW"}]}));
        assert!(e.starts_with("syscalls[0]: no syscall names"), "{e}");
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["read", "Write!"], "action": "SCMP_ACT_ALLOW"}]}));
        assert!(
            e.starts_with("syscalls[0].names[1]: ") && e.contains("Write!"),
            "{e}"
        );
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"name": "", "names": null, "action": "SCMP_ACT_ALLOW"}]}));
        assert!(e.contains("no syscall names"), "{e}");
    }

    #[test]
    fn filter_errors() {
        let with = |f: serde_json::Value| {
            error(json!({"defaultAction": "SCMP_ACT_ERRNO",
                "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": f}]}))
        };
        let e = with(json!({"caps": ["CAP_SYS_ADMN"]}));
        assert!(
            e.starts_with("syscalls[0].includes.caps[0]: ") && e.contains("CAP_SYS_ADMN"),
            "{e}"
        );
        for bad in ["4", "four.8", "0.0", "4.8.1", "4."] {
            let e = with(json!({"minKernel": bad}));
            assert!(
                e.starts_with("syscalls[0].includes.minKernel: "),
                "{bad}: {e}"
            );
        }
        // Checked even when the rule would be left out anyway.
        let e = error(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW",
                          "includes": {"arches": ["s390x"]}, "excludes": {"caps": ["NOPE"]}}]}));
        assert!(e.starts_with("syscalls[0].excludes.caps[0]: "), "{e}");
    }

    #[test]
    fn size_and_syntax_limits() {
        let mut big = br#"{"defaultAction":"SCMP_ACT_ALLOW","x":""#.to_vec();
        big.resize(MAX_PROFILE_BYTES + 1, b'a');
        let e = parse_profile(&big, &[]).unwrap_err();
        assert!(e.contains("limit"), "{e}");
        // Exactly at the limit is read.
        let mut ok = br#"{"defaultAction":"SCMP_ACT_ALLOW","x":""#.to_vec();
        ok.resize(MAX_PROFILE_BYTES - 2, b'a');
        ok.extend_from_slice(b"\"}");
        assert_eq!(ok.len(), MAX_PROFILE_BYTES);
        assert!(parse_profile(&ok, &[]).is_ok());
        let e = parse_profile(b"not json", &[]).unwrap_err();
        assert!(e.starts_with("not a seccomp profile: "), "{e}");
        assert!(parse_profile(b"[]", &[]).is_err());
    }

    #[test]
    fn conflicting_cap_spellings_in_profiles() {
        // Profiles may spell capabilities CRI's way too.
        let v = json!({"defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_ALLOW",
                          "includes": {"caps": ["sys_admin"]}}]});
        assert_eq!(
            names(&parse(v.clone(), &with_caps(&["SYS_ADMIN"])).unwrap()),
            ["mount"]
        );
        assert!(parse(v, &default_caps()).unwrap().syscalls.is_empty());
    }
}
