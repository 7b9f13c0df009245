//! Every method call to podscoped, counted as it arrives, by method.
//!
//! The one place every call passes is the connection itself: zbus's
//! object server reads the calls addressed to the daemon from a message
//! stream, and a stream with the same rule gets each of them too (zbus
//! hands both streams the same message; this one only counts, so it never
//! holds the connection's reader up). Errors are counted where every
//! method's error becomes its reply (`bus::errors::BusError`).
//!
//! A method name comes from the caller, so only the names the interface
//! XML declares (`bus::interface_xml`, and the standard interfaces' few)
//! are kept; any other is `other`.

use futures_util::StreamExt;
use podscope_metrics::{catalog, OTHER};
use std::collections::BTreeSet;
use std::sync::LazyLock;
use zbus::message::Type;
use zbus::{Connection, MatchRule, MessageStream};

/// What org.freedesktop.DBus.{Properties,Introspectable,Peer,ObjectManager}
/// answer on every object.
const STANDARD: &[&str] = &[
    "Get",
    "GetAll",
    "Set",
    "Introspect",
    "Ping",
    "GetMachineId",
    "GetManagedObjects",
];

static METHODS: LazyLock<BTreeSet<String>> = LazyLock::new(|| {
    let xml = crate::bus::interface_xml::interfaces(crate::bus::interface_xml::XML);
    let declared = xml
        .into_iter()
        .flat_map(|(_, members)| members)
        .filter(|(kind, _)| *kind == "method")
        .map(|(_, name)| name);
    STANDARD
        .iter()
        .map(|s| s.to_string())
        .chain(declared)
        .collect()
});

/// `member` as the metrics' `method` label: itself when podscoped has a
/// method of that name, else `other`.
pub fn known_method(member: &str) -> &'static str {
    METHODS.get(member).map_or(OTHER, String::as_str)
}

/// Count the calls addressed to `conn` from now on, in a task of its own.
pub async fn count(conn: &Connection) -> zbus::Result<()> {
    let mut rule = MatchRule::builder().msg_type(Type::MethodCall);
    if let Some(name) = conn.unique_name() {
        rule = rule.destination(&**name)?;
    }
    let mut stream = MessageStream::for_match_rule(rule.build(), conn, None).await?;
    tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            let Ok(msg) = msg else { continue };
            let header = msg.header();
            let method = header.member().map_or(OTHER, |m| known_method(m.as_str()));
            super::registry().inc(&catalog::BUS_CALLS, &[method]);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_the_interfaces_and_nothing_else() {
        for m in [
            "Create",
            "List",
            "RuntimeStatus",
            "Pull",
            "CreateContainer",
            "Get",
        ] {
            assert_eq!(known_method(m), m);
        }
        assert_eq!(known_method("DropTables"), OTHER);
        assert_eq!(known_method(""), OTHER);
        // Signals and properties are not methods.
        assert_eq!(known_method("SandboxCreated"), OTHER);
    }
}
