//! What the fuzzers of every crate draw from: the case count (FUZZ_CASES,
//! 256 when unset), strings that mean something to some field, D-Bus
//! values and dictionaries of any nesting, JSON documents.

use proptest::prelude::*;
use serde_json::Value as Json;
use std::collections::HashMap;
use zbus::zvariant::Value;

pub fn config() -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        // Failures are minimised and printed; nothing is written into the
        // source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Keys the decoders know, at any depth, so that generated dictionaries
/// reach past the first unknown-key check; and some they do not.
pub const KEYS: &[&str] = &[
    "hostname",
    "log_directory",
    "labels",
    "annotations",
    "network",
    "pid_namespace",
    "ipc_namespace",
    "runtime_handler",
    "cgroup_parent",
    "resources",
    "overhead",
    "dns",
    "port_mappings",
    "sysctls",
    "cpu_period",
    "cpu_quota",
    "cpu_shares",
    "memory_limit_in_bytes",
    "pids_limit",
    "servers",
    "searches",
    "options",
    "protocol",
    "container_port",
    "host_port",
    "host_ip",
    "id",
    "state",
    "namespace",
    "name",
    "kubernetes.io/ingress-bandwidth",
    "",
    "x",
];

/// Strings that mean something to some field, and anything else.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "pod",
            "host",
            "node",
            "container",
            "tcp",
            "udp",
            "sctp",
            "ready",
            "created",
            "notready",
            "runc",
            "10M",
            "1Gi",
            "kubepods.slice",
            "a-b.slice",
            "../x",
            "/",
            "127.0.0.1",
            "::1",
            "net.ipv4.ip_forward",
            "kernel.shm_rmid_forced",
            "1",
            "-1",
        ])
        .prop_map(str::to_owned),
        ".{0,40}",
        "[a-z0-9._/-]{0,300}",
    ]
}

/// What a D-Bus string can hold: anything but NUL.
pub fn bus_text() -> impl Strategy<Value = String> {
    text().prop_map(|s| s.replace('\0', ""))
}

/// A variant tree: every basic type the bus carries, string arrays, a{sv}
/// dictionaries, arrays of them, and variants inside variants.
pub fn value() -> impl Strategy<Value = Value<'static>> {
    let leaf = prop_oneof![
        bus_text().prop_map(Value::from),
        any::<u32>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u16>().prop_map(Value::from),
        any::<u8>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::collection::vec(bus_text(), 0..4).prop_map(Value::from),
        prop::collection::hash_map(bus_text(), bus_text(), 0..4).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            dict_of(inner.clone()).prop_map(Value::from),
            prop::collection::vec(dict_of(inner.clone()), 0..3).prop_map(Value::from),
            inner.prop_map(|v| Value::Value(Box::new(v))),
        ]
    })
}

pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => bus_text(),
    ]
}

pub fn dict_of(
    v: impl Strategy<Value = Value<'static>>,
) -> impl Strategy<Value = HashMap<String, Value<'static>>> {
    prop::collection::hash_map(key(), v, 0..6)
}

/// JSON of any shape, with the keys CNI configs and results use.
pub fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        any::<f64>().prop_map(Json::from),
        text().prop_map(Json::from),
    ];
    let keys = prop_oneof![
        4 => prop::sample::select(vec![
            "cniVersion", "cniVersions", "name", "plugins", "type", "capabilities",
            "disableCheck", "disableGC", "ips", "interfaces", "interface", "address",
            "sandbox", "prevResult", "code", "msg", "details", "ipam", "runtimeConfig",
        ])
        .prop_map(str::to_owned),
        1 => text(),
    ];
    leaf.prop_recursive(4, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::from),
            prop::collection::btree_map(keys.clone(), inner, 0..6)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}
