//! What each runtime handler can do here: the CRI's per-handler features
//! (`RuntimeHandlerFeatures`), advertised only where both the OCI runtime
//! and the kernel can.
//!
//! - Recursive read-only mounts: the runtime knows the `rro` mount option
//!   (it calls `mount_setattr(2)` with `AT_RECURSIVE`, kernel 5.12).
//! - User namespaces: the runtime makes a user namespace and idmapped
//!   mounts (`linux.mountExtensions.idmap`), and the kernel idmaps tmpfs
//!   (6.3), which kubelet's projected volumes are.
//!
//! The runtime says so in `<runtime> features` (runc 1.1, crun 1.8.6).
//! A crun without that command (Debian 12's 1.8.1) is judged by its
//! version: `rro` since crun 1.4; its idmapped mounts (1.9) came after
//! `features`, so never. A runtime that says nothing is given nothing: an
//! option it does not know could be dropped silently, and a mount thought
//! read-only would be writable.
//!
//! - Checkpoint and restore (not a CRI feature; CheckpointContainer and a
//!   restore ask): the runtime is built with CRIU's support, as its
//!   `features` annotations say (`org.opencontainers.runc.checkpoint.enabled`,
//!   `run.oci.crun.checkpoint.enabled`: "true"), or a crun without
//!   `features` its `--version` flags (`+CRIU`). Whether CRIU itself runs
//!   on this kernel is CRIU's to say when it is asked to dump.
//!
//! Probing runs the binary, so each answer is kept until the binary
//! changes (its size or mtime).

use podscope_config::{RuntimeHandler, RuntimeKind};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// A `features` or `--version` that takes longer is taken as no answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Kernels: `mount_setattr` and idmapped tmpfs.
const KERNEL_RRO: (u32, u32) = (5, 12);
const KERNEL_IDMAP_TMPFS: (u32, u32) = (6, 3);
/// crun learnt `rro` in 1.4.
const CRUN_RRO: (u32, u32) = (1, 4);

/// One handler's features, and why each one that is off is off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandlerFeatures {
    pub recursive_read_only_mounts: bool,
    pub user_namespaces: bool,
    /// For operators: "user namespaces: crun 1.8.1 has no idmapped mounts".
    pub why_not: Vec<String>,
    /// Checkpoint and restore with CRIU; else why not.
    pub checkpoint: bool,
    pub checkpoint_why_not: String,
}

/// What the runtime binary says of itself (before the kernel is asked).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RuntimeSays {
    rro: bool,
    userns: bool,
    why_not: Vec<String>,
    checkpoint: bool,
    checkpoint_why_not: String,
}

/// `<runtime> features`' JSON (OCI runtime-spec's features document).
fn from_features(name: &str, json: &str) -> Option<RuntimeSays> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let has = |list: &serde_json::Value, item: &str| {
        list.as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(item)))
    };
    let rro = has(&v["mountOptions"], "rro");
    let user_ns = has(&v["linux"]["namespaces"], "user");
    let idmap = v["linux"]["mountExtensions"]["idmap"]["enabled"].as_bool() == Some(true);
    let annotations = &v["annotations"];
    let checkpoint = [
        "org.opencontainers.runc.checkpoint.enabled",
        "run.oci.crun.checkpoint.enabled",
    ]
    .iter()
    .any(|k| annotations[*k].as_str() == Some("true"));
    let checkpoint_why_not = if checkpoint {
        String::new()
    } else {
        format!("{name} is built without CRIU (its features say no checkpoint.enabled)")
    };
    let mut why_not = Vec::new();
    if !rro {
        why_not.push(format!(
            "recursive read-only mounts: {name} features lists no \"rro\" mount option"
        ));
    }
    if !user_ns || !idmap {
        why_not.push(format!(
            "user namespaces: {name} features lists {}",
            if user_ns {
                "no idmapped mounts (linux.mountExtensions.idmap)"
            } else {
                "no user namespace"
            }
        ));
    }
    Some(RuntimeSays {
        rro,
        userns: user_ns && idmap,
        why_not,
        checkpoint,
        checkpoint_why_not,
    })
}

/// A runtime with no `features` command, by its `--version`.
fn from_version(name: &str, kind: RuntimeKind, version_text: &str) -> RuntimeSays {
    let version = version_text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(major_minor);
    let rro = kind == RuntimeKind::Crun && version.is_some_and(|v| v >= CRUN_RRO);
    let said = version_text.lines().next().unwrap_or("").trim();
    let mut why_not = Vec::new();
    if !rro {
        why_not.push(format!(
            "recursive read-only mounts: {name} has no features command and its version ({said:?}) is not one known to honour \"rro\""
        ));
    }
    why_not.push(format!(
        "user namespaces: {name} has no features command ({said:?}): idmapped mounts need crun 1.9 or runc 1.2"
    ));
    // crun lists what it was built with: "+SYSTEMD +SELINUX ... +CRIU".
    let checkpoint = version_text
        .lines()
        .any(|l| l.split_whitespace().any(|w| w == "+CRIU"));
    RuntimeSays {
        rro,
        userns: false,
        why_not,
        checkpoint,
        checkpoint_why_not: if checkpoint {
            String::new()
        } else {
            format!("{name} ({said}) is built without CRIU (no +CRIU in its --version)")
        },
    }
}

/// "1.8.1", "1.1.5+ds1", "6.18.44-fc" → (major, minor).
fn major_minor(s: &str) -> Option<(u32, u32)> {
    let mut it = s.split(['.', '-', '+']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// The runtime's word, then the kernel's.
fn combine(says: RuntimeSays, kernel: Option<(u32, u32)>) -> HandlerFeatures {
    let mut f = HandlerFeatures {
        recursive_read_only_mounts: says.rro,
        user_namespaces: says.userns,
        why_not: says.why_not,
        checkpoint: says.checkpoint,
        checkpoint_why_not: says.checkpoint_why_not,
    };
    let at_least = |want: (u32, u32)| kernel.is_some_and(|k| k >= want);
    let release = kernel.map_or("unknown".to_owned(), |(a, b)| format!("{a}.{b}"));
    if f.recursive_read_only_mounts && !at_least(KERNEL_RRO) {
        f.recursive_read_only_mounts = false;
        f.why_not.push(format!(
            "recursive read-only mounts: kernel {release} has no mount_setattr (5.12)"
        ));
    }
    if f.user_namespaces && !at_least(KERNEL_IDMAP_TMPFS) {
        f.user_namespaces = false;
        f.why_not.push(format!(
            "user namespaces: kernel {release} cannot idmap tmpfs (6.3), which kubelet's projected volumes are"
        ));
    }
    f
}

/// The running kernel's (major, minor).
fn kernel() -> Option<(u32, u32)> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|s| major_minor(s.trim()))
}

/// What a runtime said to one question.
enum Answer {
    /// Exited 0: its stdout.
    Said(String),
    /// Exited non-zero (crun 1.8.1 to `features`): ask something else.
    Refused,
    /// Could not run, or did not finish in time: a runtime that hangs on
    /// one question is not asked another.
    Silent,
}

/// Runs `<runtime> <arg>`; killed at the timeout.
async fn ask(h: &RuntimeHandler, arg: &str) -> Answer {
    let run = tokio::time::timeout(
        PROBE_TIMEOUT,
        tokio::process::Command::new(&h.path)
            .arg(arg)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await;
    match run {
        Ok(Ok(out)) if out.status.success() => {
            Answer::Said(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        Ok(Ok(_)) => Answer::Refused,
        _ => Answer::Silent,
    }
}

/// Asks the binary (no cache); None when it answered neither question.
async fn probe(name: &str, h: &RuntimeHandler) -> Option<HandlerFeatures> {
    let kind = h.kind().expect("settings check the kind");
    // A features document it cannot read, or a refusal, falls back to
    // the version; a runtime that hung is asked nothing more.
    let from_json = match ask(h, "features").await {
        Answer::Said(json) => from_features(name, &json),
        Answer::Refused => None,
        Answer::Silent => return None,
    };
    let says = match from_json {
        Some(s) => s,
        None => match ask(h, "--version").await {
            Answer::Said(text) => from_version(name, kind, &text),
            Answer::Refused | Answer::Silent => return None,
        },
    };
    Some(daemon_can(combine(says, kernel())))
}

/// Whether the daemon itself can make a pod's idmapped layers
/// (`idmap::probe` of the image store, at start): None until asked, when
/// nothing is vetoed (tests, tools).
fn daemon_idmap() -> &'static OnceLock<Result<(), String>> {
    static CAN: OnceLock<Result<(), String>> = OnceLock::new();
    &CAN
}

/// What `idmap::probe` found at the daemon's start.
pub fn set_daemon_idmap(r: Result<(), String>) {
    let _ = daemon_idmap().set(r);
}

/// The daemon's own veto: a runtime and kernel that can are no use when
/// the daemon cannot idmap the layers.
fn daemon_can(mut f: HandlerFeatures) -> HandlerFeatures {
    if let (true, Some(Err(why))) = (f.user_namespaces, daemon_idmap().get()) {
        f.user_namespaces = false;
        f.why_not.push(format!(
            "user namespaces: podscoped cannot idmap the image layers ({why})"
        ));
    }
    f
}

type Stamp = (PathBuf, u64, Option<SystemTime>);

/// A probe's result: an answer is kept while the binary is the same; no
/// answer (a timeout under load, say) only for a while, so that a
/// RuntimeStatus does not wait on a hung runtime each time it is asked.
enum Probed {
    Answered(HandlerFeatures),
    NoAnswer { until: Instant },
}

/// How long no answer is remembered before the binary is asked again.
const NO_ANSWER_KEPT: Duration = Duration::from_secs(60);

fn cache() -> &'static Mutex<HashMap<Stamp, Probed>> {
    static CACHE: OnceLock<Mutex<HashMap<Stamp, Probed>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn no_answer(name: &str, h: &RuntimeHandler) -> HandlerFeatures {
    HandlerFeatures {
        why_not: vec![format!(
            "{name}: {} answered neither features nor --version in {} s (asked again within a minute)",
            h.path.display(),
            PROBE_TIMEOUT.as_secs()
        )],
        ..Default::default()
    }
}

/// The handler's features, probed once per binary. A binary that is not
/// there has none.
pub async fn of(name: &str, h: &RuntimeHandler) -> HandlerFeatures {
    let Ok(meta) = std::fs::metadata(&h.path) else {
        return HandlerFeatures {
            why_not: vec![format!("{name}: {} is not there", h.path.display())],
            ..Default::default()
        };
    };
    let stamp = (h.path.clone(), meta.len(), meta.modified().ok());
    match cache().lock().unwrap().get(&stamp) {
        Some(Probed::Answered(f)) => return f.clone(),
        Some(Probed::NoAnswer { until }) if Instant::now() < *until => return no_answer(name, h),
        _ => {}
    }
    match probe(name, h).await {
        Some(f) => {
            cache()
                .lock()
                .unwrap()
                .insert(stamp, Probed::Answered(f.clone()));
            f
        }
        None => {
            let until = Instant::now() + NO_ANSWER_KEPT;
            cache()
                .lock()
                .unwrap()
                .insert(stamp, Probed::NoAnswer { until });
            no_answer(name, h)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNC_1_1: &str = r#"{"ociVersionMin":"1.0.0","mountOptions":["bind","rbind","ro","rro"],
        "linux":{"namespaces":["cgroup","mount","user"]}}"#;
    const CRUN_1_27: &str = r#"{"mountOptions":["rro","idmap"],
        "linux":{"namespaces":["user","mount"],"mountExtensions":{"idmap":{"enabled":true}}}}"#;

    #[test]
    fn runc_1_1_has_rro_but_no_idmapped_mounts() {
        let s = from_features("runc", RUNC_1_1).unwrap();
        assert!(s.rro && !s.userns);
        assert!(
            s.why_not[0].contains("no idmapped mounts"),
            "{:?}",
            s.why_not
        );
    }

    #[test]
    fn crun_1_27_has_both() {
        let s = from_features("crun-new", CRUN_1_27).unwrap();
        assert!(s.rro && s.userns && s.why_not.is_empty());
    }

    #[test]
    fn checkpoint_from_features_or_version() {
        let runc = r#"{"annotations":{"org.opencontainers.runc.checkpoint.enabled":"true"}}"#;
        assert!(from_features("runc", runc).unwrap().checkpoint);
        // crun 1.27.1 as built in ../shared/tools: without libcriu.
        let crun = r#"{"annotations":{"run.oci.crun.checkpoint.enabled":"false"}}"#;
        let s = from_features("crun-userns", crun).unwrap();
        assert!(!s.checkpoint);
        assert!(s
            .checkpoint_why_not
            .contains("crun-userns is built without CRIU"));
        let debian = "crun version 1.8.1\ncommit: f8a\nspec: 1.0.0\n+SYSTEMD +SELINUX +APPARMOR +CAP +SECCOMP +EBPF +YAJL\n";
        let s = from_version("crun", RuntimeKind::Crun, debian);
        assert!(!s.checkpoint && s.checkpoint_why_not.contains("no +CRIU"));
        let with = "crun version 1.8.1\n+SYSTEMD +CRIU +YAJL\n";
        assert!(from_version("crun", RuntimeKind::Crun, with).checkpoint);
    }

    #[test]
    fn not_json_is_no_answer() {
        assert_eq!(from_features("x", "unknown command features"), None);
    }

    #[test]
    fn old_crun_by_version() {
        let v = "crun version 1.8.1\ncommit: f8a096\nspec: 1.0.0\n";
        let s = from_version("crun", RuntimeKind::Crun, v);
        assert!(s.rro && !s.userns);
        let s = from_version("crun", RuntimeKind::Crun, "crun version 1.3\n");
        assert!(!s.rro);
        let s = from_version("runc", RuntimeKind::Runc, "runc version 1.0.0\n");
        assert!(!s.rro && !s.userns);
        assert_eq!(s.why_not.len(), 2);
    }

    #[test]
    fn the_kernel_takes_away_what_it_lacks() {
        let both = RuntimeSays {
            rro: true,
            userns: true,
            why_not: vec![],
            ..Default::default()
        };
        let f = combine(both.clone(), Some((6, 18)));
        assert!(f.recursive_read_only_mounts && f.user_namespaces);
        // Debian 12's kernel: rro yes, idmapped tmpfs no.
        let f = combine(both.clone(), Some((6, 1)));
        assert!(f.recursive_read_only_mounts && !f.user_namespaces);
        assert!(f.why_not[0].contains("kernel 6.1"), "{:?}", f.why_not);
        let f = combine(both, Some((5, 10)));
        assert!(!f.recursive_read_only_mounts && !f.user_namespaces);
    }

    #[test]
    fn user_namespaces_where_runtime_and_kernel_can() {
        let both = RuntimeSays {
            rro: true,
            userns: true,
            why_not: vec![],
            ..Default::default()
        };
        let f = combine(both, Some((6, 18)));
        assert!(f.recursive_read_only_mounts && f.user_namespaces);
        assert!(f.why_not.is_empty(), "{:?}", f.why_not);
    }

    #[test]
    fn versions() {
        assert_eq!(major_minor("6.18.44-fc-v782"), Some((6, 18)));
        assert_eq!(major_minor("1.1.5+ds1"), Some((1, 1)));
        assert_eq!(major_minor("1.27"), Some((1, 27)));
        assert_eq!(major_minor("x"), None);
    }

    /// A runtime that answers neither question is asked again only after
    /// a while: every RuntimeStatus would wait on it otherwise.
    #[tokio::test]
    async fn no_answer_is_remembered_for_a_while() {
        let dir = std::env::temp_dir().join(format!("podscope-features-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("crun");
        let count = dir.join("asked");
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho >> {}\nexit 1\n", count.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let h = RuntimeHandler {
            path: script.clone(),
            kind: None,
            root: PathBuf::new(),
        };
        let first = of("mute", &h).await;
        let second = of("mute", &h).await;
        let asked = std::fs::read_to_string(&count).unwrap().lines().count();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!first.recursive_read_only_mounts && !first.user_namespaces);
        assert!(first.why_not[0].contains("answered neither"), "{first:?}");
        assert_eq!(first, second);
        // features, then --version; not again for the second call.
        assert_eq!(asked, 2);
    }
}
