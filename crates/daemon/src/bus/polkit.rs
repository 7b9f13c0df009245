//! Authorization of mutating calls: root is always allowed; anyone else
//! needs polkit's `org.podscope.Sandbox1.manage`, and for a Create with
//! host access `org.podscope.Sandbox1.manage-privileged`. Reading is open
//! to all.

use super::limits::Limiter;
use enumflags2::BitFlags;
use podscope_api::bus_gate::BusGate;
use podscope_api::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;
use tracing::warn;
use zbus::message::{Flags, Header};
use zbus::Connection;
use zbus_polkit::policykit1::{AuthorityProxy, CheckAuthorizationFlags, Subject};

pub const ACTION_MANAGE: &str = "org.podscope.Sandbox1.manage";
/// A Create that reaches past the pod: host namespaces, host ports, its
/// own cgroup parent (`SandboxConfig::privileges`).
pub const ACTION_MANAGE_PRIVILEGED: &str = "org.podscope.Sandbox1.manage-privileged";
/// Every action podscope asks about (polkit/org.podscope.Sandbox1.policy).
pub const ACTIONS: [&str; 2] = [ACTION_MANAGE, ACTION_MANAGE_PRIVILEGED];

/// The action a call takes: `manage`, or `manage-privileged` when it asks
/// for any privilege (its `privileges` detail names them).
pub fn action_for(privileges: &[String]) -> &'static str {
    if privileges.is_empty() {
        ACTION_MANAGE
    } else {
        ACTION_MANAGE_PRIVILEGED
    }
}

/// An enum whose every variant has one public spelling, with the list of
/// them all: what rules and documents see is written once, here.
macro_rules! spelled {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $v,)* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v,)*];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s,)* }
            }
        }
    };
}

spelled! {
    /// The mutating call being authorized: polkit's detail "verb", and the
    /// first word of a denial.
    Verb {
        Create = "Create",
        Start = "Start",
        Stop = "Stop",
        Remove = "Remove",
        UpdateResources = "UpdateResources",
        PortForward = "PortForward",
        CreateContainer = "CreateContainer",
        StartContainer = "StartContainer",
        StopContainer = "StopContainer",
        RemoveContainer = "RemoveContainer",
        UpdateContainerResources = "UpdateContainerResources",
        ReopenContainerLog = "ReopenContainerLog",
        CheckpointContainer = "CheckpointContainer",
        ExecSync = "ExecSync",
        Exec = "Exec",
        Attach = "Attach",
        Pull = "Pull",
        RemoveImage = "RemoveImage",
    }
}

spelled! {
    /// The details polkit's rules and agents see of a call
    /// (`action.lookup(...)`).
    Detail {
        /// The `Verb`.
        Verb = "verb",
        /// namespace/name, '%' and '/' in each escaped as %25 and %2F.
        Sandbox = "sandbox",
        Namespace = "namespace",
        Name = "name",
        /// The pod's full id; empty for Create.
        SandboxId = "sandbox_id",
        /// What a Create or CreateContainer takes from the host.
        Privileges = "privileges",
        ContainerId = "container_id",
        Container = "container",
        /// The image: a Pull's reference, a RemoveImage's id.
        Image = "image",
    }
}

/// polkit checks pending at once, per user and in all: at most half of
/// the daemon's bus permits (`bus_gate`), so that checks, which local users
/// can ask for at will and polkit may take seconds to answer, never keep
/// systemd's calls waiting.
pub const CHECKS_PER_UID: usize = 16;
pub fn checks_max(gate: &BusGate) -> usize {
    (gate.max() / 2).max(1)
}
/// Callers whose uid is remembered. A unique name is never reused while
/// the bus runs, so an entry never goes stale; past this many the memory
/// starts over.
const UID_CACHE_MAX: usize = 4096;

pub struct Authorizer {
    conn: Connection,
    gate: Arc<BusGate>,
    checks: Limiter,
    uids: Mutex<HashMap<String, u32>>,
    /// How long polkit may take to answer (ten times as long for a caller
    /// that allows interactive authorization).
    timeout: std::time::Duration,
    dbus: OnceCell<zbus::fdo::DBusProxy<'static>>,
    authority: OnceCell<AuthorityProxy<'static>>,
}

impl Authorizer {
    pub fn new(conn: &Connection, gate: Arc<BusGate>, timeout: std::time::Duration) -> Self {
        let max = checks_max(&gate);
        Authorizer {
            conn: conn.clone(),
            gate,
            checks: Limiter::new("polkit checks", CHECKS_PER_UID.min(max), max),
            uids: Mutex::default(),
            timeout,
            dbus: OnceCell::new(),
            authority: OnceCell::new(),
        }
    }

    /// The uid of the connection that sent the message with `header`.
    pub async fn caller_uid(&self, header: &Header<'_>) -> Result<u32> {
        let sender = header
            .sender()
            .ok_or_else(|| Error::access_denied("the call has no sender"))?;
        if let Some(uid) = self.uids.lock().unwrap().get(sender.as_str()) {
            return Ok(*uid);
        }
        let dbus = self
            .dbus
            .get_or_try_init(|| zbus::fdo::DBusProxy::new(&self.conn))
            .await
            .map_err(|e| Error::internal(format!("connect to the bus driver: {e}")))?;
        let uid = dbus
            .get_connection_unix_user(sender.clone().into())
            .await
            .map_err(|e| Error::access_denied(format!("cannot identify caller {sender}: {e}")))?;
        let mut uids = self.uids.lock().unwrap();
        if uids.len() >= UID_CACHE_MAX {
            uids.clear();
        }
        uids.insert(sender.to_string(), uid);
        Ok(uid)
    }

    /// Allow or deny `action` for the caller of the message with `header`.
    /// `details` (which pod) go to polkit's rules and agents; computed only
    /// for callers that are not root.
    pub async fn check(
        &self,
        header: &Header<'_>,
        action: &'static str,
        verb: Verb,
        details: impl FnOnce() -> Vec<(Detail, String)>,
    ) -> Result<()> {
        let verb = verb.as_str();
        let uid = self.caller_uid(header).await?;
        if uid == 0 {
            return Ok(());
        }
        // Refused at once past the caller's share, before polkit is asked.
        let _slot = self.checks.acquire(uid, false)?;
        let details = details();
        let deny =
            |why: String| Error::access_denied(format!("{verb} denied for uid {uid}: {why}"));
        let subject = Subject::new_for_message_header(header)
            .map_err(|e| deny(format!("no polkit subject: {e}")))?;
        let authority = self
            .authority
            .get_or_try_init(|| AuthorityProxy::new(&self.conn))
            .await
            .map_err(|e| deny(format!("polkit is unavailable: {e}")))?;
        let interactive = header
            .primary()
            .flags()
            .contains(Flags::AllowInteractiveAuth);
        let mut flags = BitFlags::empty();
        if interactive {
            flags |= CheckAuthorizationFlags::AllowUserInteraction;
        }
        let details: HashMap<&str, &str> = details
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        // The permit is waited for within the same limit, and the call is
        // bounded by it (the gate drops an unanswered call, and its reply
        // slot with it). No permit in time is the gate's Busy, not a denial.
        let limit = if interactive {
            self.timeout * 10
        } else {
            self.timeout
        };
        let deadline = tokio::time::Instant::now() + limit;
        let result = self
            .gate
            .call(&format!("polkit check of uid {uid}"), deadline, || {
                authority.check_authorization(&subject, action, &details, flags, "")
            })
            .await?
            .map_err(|e| match e {
                zbus::Error::InputOutput(io) if io.kind() == std::io::ErrorKind::TimedOut => deny(
                    format!("polkit did not answer within {} ms", limit.as_millis()),
                ),
                e => deny(format!("polkit is unavailable: {e}")),
            })?;
        let privileges = details
            .get(Detail::Privileges.as_str())
            .copied()
            .unwrap_or("");
        let why = |text: String| match privileges {
            "" => text,
            p => format!("{text} (it takes: {p})"),
        };
        let refused = if result.is_authorized {
            return Ok(());
        } else if result.is_challenge && interactive {
            // polkit found no agent to ask, or the user dismissed it.
            Err(deny(why(format!(
                "{action} requires authentication and no authentication agent completed it"
            ))))
        } else if result.is_challenge {
            Err(deny(why(format!(
                "{action} requires authentication (call with interactive authorization allowed)"
            ))))
        } else {
            Err(deny(why(format!("not authorized for {action}"))))
        };
        // Every refusal is in the journal, with who asked for what.
        if let Err(e) = &refused {
            warn!(caller_uid = uid, action, verb, privileges, "{e}");
        }
        refused
    }
}

/// What polkit's rules see of a call: `verb`, `sandbox` (namespace/name)
/// and `sandbox_id` (empty for Create).
/// CRI metadata is opaque and may hold '/': `sandbox` escapes it ('%' and
/// '/' as %25 and %2F) so that "team-a/" can only ever be namespace team-a;
/// `namespace` and `name` carry the exact strings.
pub fn pod_details(verb: Verb, namespace: &str, name: &str, id: &str) -> Vec<(Detail, String)> {
    let esc = |s: &str| s.replace('%', "%25").replace('/', "%2F");
    vec![
        (Detail::Verb, verb.as_str().to_owned()),
        (Detail::Sandbox, format!("{}/{}", esc(namespace), esc(name))),
        (Detail::Namespace, namespace.to_owned()),
        (Detail::Name, name.to_owned()),
        (Detail::SandboxId, id.to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKAGING: &str = include_str!("../../../../docs/PACKAGING.md");
    const POLICY: &str = include_str!("../../../../polkit/org.podscope.Sandbox1.policy");

    /// The documents' drift test for polkit: every action, verb and detail
    /// the code can send is in PACKAGING.md (in backquotes, as a name), and
    /// the policy declares exactly the actions the code asks about.
    #[test]
    fn every_action_verb_and_detail_is_documented() {
        // In the Authorization section: `name` or `Start` elsewhere on the
        // page says nothing about polkit.
        let section = PACKAGING
            .split_once("\n## Authorization\n")
            .map(|(_, s)| s.split("\n## ").next().unwrap_or(s))
            .expect("docs/PACKAGING.md has a ## Authorization section");
        let quoted = |s: &str| section.contains(&format!("`{s}`"));
        let mut missing: Vec<String> = ACTIONS
            .iter()
            .filter(|a| !quoted(a))
            .map(|a| format!("action {a}"))
            .collect();
        missing.extend(
            Verb::ALL
                .iter()
                .filter(|v| !quoted(v.as_str()))
                .map(|v| format!("verb {}", v.as_str())),
        );
        missing.extend(
            Detail::ALL
                .iter()
                .filter(|d| !quoted(d.as_str()))
                .map(|d| format!("detail {}", d.as_str())),
        );
        assert!(
            missing.is_empty(),
            "docs/PACKAGING.md's Authorization section lacks (in `backquotes`): {}",
            missing.join(", ")
        );
        let declared: Vec<&str> = POLICY
            .split("<action id=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .collect();
        assert_eq!(declared, ACTIONS, "polkit/org.podscope.Sandbox1.policy");
    }

    #[test]
    fn spellings_are_unique() {
        let mut verbs: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
        verbs.sort_unstable();
        verbs.dedup();
        assert_eq!(verbs.len(), Verb::ALL.len());
        let mut details: Vec<&str> = Detail::ALL.iter().map(|d| d.as_str()).collect();
        details.sort_unstable();
        details.dedup();
        assert_eq!(details.len(), Detail::ALL.len());
    }
}
