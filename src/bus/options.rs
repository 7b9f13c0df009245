//! Translation between D-Bus `a{sv}` dictionaries and the domain types:
//! Create's options in, Status/List dictionaries out. Unknown keys and wrong
//! variant types are InvalidArgument naming the key.

use crate::domain::{
    DnsConfig, NamespaceMode, NetworkMode, PortMapping, Protocol, Resources, Sandbox,
    SandboxConfig, State,
};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use zbus::zvariant::{OwnedValue, Value};

pub type Dict = HashMap<String, OwnedValue>;

fn type_err(key: &str, want: &str, v: &Value<'_>) -> Error {
    Error::invalid(
        key,
        format!(
            "expected {want}, got a value of type {}",
            v.value_signature()
        ),
    )
}

/// Unwrap a variant-in-variant (some clients box values twice).
fn inner<'a>(v: &'a Value<'a>) -> &'a Value<'a> {
    match v {
        Value::Value(b) => inner(b),
        other => other,
    }
}

pub fn get_str(key: &str, v: &Value<'_>) -> Result<String> {
    match inner(v) {
        Value::Str(s) => Ok(s.to_string()),
        other => Err(type_err(key, "a string (s)", other)),
    }
}

pub fn get_u64(key: &str, v: &Value<'_>) -> Result<u64> {
    let n: i128 = match inner(v) {
        Value::U8(n) => (*n).into(),
        Value::U16(n) => (*n).into(),
        Value::U32(n) => (*n).into(),
        Value::U64(n) => (*n).into(),
        Value::I16(n) => (*n).into(),
        Value::I32(n) => (*n).into(),
        Value::I64(n) => (*n).into(),
        other => return Err(type_err(key, "an integer", other)),
    };
    u64::try_from(n).map_err(|_| Error::invalid(key, format!("{n} is negative")))
}

pub fn get_string_map(key: &str, v: &Value<'_>) -> Result<BTreeMap<String, String>> {
    match inner(v) {
        Value::Dict(d) => {
            let mut out = BTreeMap::new();
            for (k, val) in d.iter() {
                let k = match inner(k) {
                    Value::Str(s) => s.to_string(),
                    other => return Err(type_err(key, "a string-to-string map (a{ss})", other)),
                };
                let val = get_str(&format!("{key}.{k}"), val)?;
                out.insert(k, val);
            }
            Ok(out)
        }
        other => Err(type_err(key, "a string-to-string map (a{ss})", other)),
    }
}

fn get_dict<'a>(key: &str, v: &'a Value<'a>) -> Result<Vec<(String, &'a Value<'a>)>> {
    match inner(v) {
        Value::Dict(d) => d
            .iter()
            .map(|(k, val)| match inner(k) {
                Value::Str(s) => Ok((s.to_string(), val)),
                other => Err(type_err(key, "a dictionary (a{sv})", other)),
            })
            .collect(),
        other => Err(type_err(key, "a dictionary (a{sv})", other)),
    }
}

fn get_resources(key: &str, v: &Value<'_>) -> Result<Resources> {
    resources_from_pairs(key, get_dict(key, v)?)
}

/// Resources from a method's own `a{sv}` argument (UpdateResources).
pub fn resources_from_dict(key: &str, d: &Dict) -> Result<Resources> {
    resources_from_pairs(key, d.iter().map(|(k, v)| (k.clone(), &**v)))
}

fn resources_from_pairs<'a>(
    key: &str,
    pairs: impl IntoIterator<Item = (String, &'a Value<'a>)>,
) -> Result<Resources> {
    let mut r = Resources::default();
    for (k, val) in pairs {
        let field = format!("{key}.{k}");
        match k.as_str() {
            "cpu_period" => r.cpu_period = get_u64(&field, val)?,
            // CRI sends -1 or 0 for "no quota".
            "cpu_quota" => {
                r.cpu_quota = match inner(val) {
                    Value::I64(n) if *n < 0 => 0,
                    Value::I32(n) if *n < 0 => 0,
                    _ => get_u64(&field, val)?,
                }
            }
            "cpu_shares" => r.cpu_shares = get_u64(&field, val)?,
            "memory_limit_in_bytes" => r.memory_limit_in_bytes = get_u64(&field, val)?,
            "pids_limit" => r.pids_limit = get_u64(&field, val)?,
            _ => return Err(Error::invalid(&field, "unknown resource key")),
        }
    }
    Ok(r)
}

fn get_strings(key: &str, v: &Value<'_>) -> Result<Vec<String>> {
    match inner(v) {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, s)| get_str(&format!("{key}[{i}]"), s))
            .collect(),
        other => Err(type_err(key, "an array of strings (as)", other)),
    }
}

/// `dns`: a{sv} with `servers`, `searches`, `options` (each `as`).
fn get_dns(key: &str, v: &Value<'_>) -> Result<DnsConfig> {
    let mut d = DnsConfig::default();
    for (k, val) in get_dict(key, v)? {
        let field = format!("{key}.{k}");
        match k.as_str() {
            "servers" => d.servers = get_strings(&field, val)?,
            "searches" => d.searches = get_strings(&field, val)?,
            "options" => d.options = get_strings(&field, val)?,
            _ => {
                return Err(Error::invalid(
                    &field,
                    "unknown key (known: servers, searches, options)",
                ))
            }
        }
    }
    Ok(d)
}

/// `port_mappings`: aa{sv}, each with `protocol` (s), `container_port`,
/// `host_port` (integers) and `host_ip` (s).
fn get_port_mappings(key: &str, v: &Value<'_>) -> Result<Vec<PortMapping>> {
    let Value::Array(a) = inner(v) else {
        return Err(type_err(key, "an array of dictionaries (aa{sv})", inner(v)));
    };
    let mut out = Vec::with_capacity(a.len());
    for (i, item) in a.iter().enumerate() {
        let mut pm = PortMapping::default();
        for (k, val) in get_dict(&format!("{key}[{i}]"), item)? {
            let field = format!("{key}[{i}].{k}");
            let port = |val| -> Result<u32> {
                let n = get_u64(&field, val)?;
                u32::try_from(n).map_err(|_| Error::invalid(&field, format!("{n} is not a port")))
            };
            match k.as_str() {
                "protocol" => pm.protocol = Protocol::parse(&get_str(&field, val)?)?,
                "container_port" => pm.container_port = port(val)?,
                "host_port" => pm.host_port = port(val)?,
                "host_ip" => pm.host_ip = get_str(&field, val)?,
                _ => {
                    return Err(Error::invalid(
                        &field,
                        "unknown key (known: protocol, container_port, host_port, host_ip)",
                    ))
                }
            }
        }
        out.push(pm);
    }
    Ok(out)
}

/// Build a config from Create's arguments. Semantic validation is
/// `SandboxConfig::validate`'s job; this checks keys and types.
pub fn config_from_options(
    name: String,
    namespace: String,
    uid: String,
    attempt: u32,
    options: &Dict,
) -> Result<SandboxConfig> {
    let mut c = SandboxConfig {
        name,
        namespace,
        uid,
        attempt,
        ..Default::default()
    };
    let mut keys: Vec<&String> = options.keys().collect();
    keys.sort();
    for key in keys {
        let v: &Value<'_> = &options[key];
        match key.as_str() {
            "hostname" => c.hostname = get_str(key, v)?,
            "log_directory" => c.log_directory = get_str(key, v)?,
            "labels" => c.labels = get_string_map(key, v)?,
            "annotations" => c.annotations = get_string_map(key, v)?,
            "network" => c.network = NetworkMode::parse(&get_str(key, v)?)?,
            "pid_namespace" => c.pid_namespace = NamespaceMode::parse(key, &get_str(key, v)?)?,
            "ipc_namespace" => c.ipc_namespace = NamespaceMode::parse(key, &get_str(key, v)?)?,
            "runtime_handler" => c.runtime_handler = get_str(key, v)?,
            "cgroup_parent" => c.cgroup_parent = get_str(key, v)?,
            "resources" => c.resources = get_resources(key, v)?,
            "overhead" => c.overhead = get_resources(key, v)?,
            "dns" => c.dns = get_dns(key, v)?,
            "port_mappings" => c.port_mappings = get_port_mappings(key, v)?,
            "sysctls" => c.sysctls = get_string_map(key, v)?,
            _ => {
                return Err(Error::invalid(
                    key,
                    "unknown option (known: hostname, log_directory, labels, annotations, network, \
                     pid_namespace, ipc_namespace, runtime_handler, cgroup_parent, resources, overhead, \
                     dns, port_mappings, sysctls)",
                ))
            }
        }
    }
    Ok(c)
}

fn resources_value(r: &Resources) -> Value<'static> {
    Value::from(HashMap::from([
        ("cpu_period", Value::U64(r.cpu_period)),
        ("cpu_quota", Value::U64(r.cpu_quota)),
        ("cpu_shares", Value::U64(r.cpu_shares)),
        ("memory_limit_in_bytes", Value::U64(r.memory_limit_in_bytes)),
        ("pids_limit", Value::U64(r.pids_limit)),
    ]))
}

/// Create's options for a config: the inverse of `config_from_options`
/// (for clients that build a `SandboxConfig` first, like the CRI frontend).
/// Empty fields are left out.
pub fn options_from_config(c: &SandboxConfig) -> HashMap<&'static str, Value<'static>> {
    let mut o: HashMap<&'static str, Value<'static>> = HashMap::new();
    let strings = [
        ("hostname", &c.hostname),
        ("log_directory", &c.log_directory),
        ("runtime_handler", &c.runtime_handler),
        ("cgroup_parent", &c.cgroup_parent),
    ];
    for (k, v) in strings {
        if !v.is_empty() {
            o.insert(k, Value::from(v.clone()));
        }
    }
    for (k, m) in [
        ("labels", &c.labels),
        ("annotations", &c.annotations),
        ("sysctls", &c.sysctls),
    ] {
        if !m.is_empty() {
            o.insert(
                k,
                Value::from(m.clone().into_iter().collect::<HashMap<_, _>>()),
            );
        }
    }
    o.insert("network", Value::from(c.network.as_str()));
    o.insert("pid_namespace", Value::from(c.pid_namespace.as_str()));
    o.insert("ipc_namespace", Value::from(c.ipc_namespace.as_str()));
    for (k, r) in [("resources", &c.resources), ("overhead", &c.overhead)] {
        if !r.is_empty() {
            o.insert(k, resources_value(r));
        }
    }
    if c.dns != DnsConfig::default() {
        o.insert(
            "dns",
            Value::from(HashMap::from([
                ("servers", Value::from(c.dns.servers.clone())),
                ("searches", Value::from(c.dns.searches.clone())),
                ("options", Value::from(c.dns.options.clone())),
            ])),
        );
    }
    if !c.port_mappings.is_empty() {
        let pms: Vec<HashMap<&str, Value<'static>>> = c
            .port_mappings
            .iter()
            .map(|pm| {
                HashMap::from([
                    ("protocol", Value::from(pm.protocol.as_str())),
                    ("container_port", Value::U32(pm.container_port)),
                    ("host_port", Value::U32(pm.host_port)),
                    ("host_ip", Value::from(pm.host_ip.clone())),
                ])
            })
            .collect();
        o.insert("port_mappings", Value::from(pms));
    }
    o
}

fn ov<'a>(v: impl Into<Value<'a>>) -> OwnedValue {
    v.into().try_to_owned().expect("plain values have no fds")
}

fn resources_dict(r: &Resources) -> HashMap<String, OwnedValue> {
    HashMap::from([
        ("cpu_period".to_owned(), ov(r.cpu_period)),
        ("cpu_quota".to_owned(), ov(r.cpu_quota)),
        ("cpu_shares".to_owned(), ov(r.cpu_shares)),
        (
            "memory_limit_in_bytes".to_owned(),
            ov(r.memory_limit_in_bytes),
        ),
        ("pids_limit".to_owned(), ov(r.pids_limit)),
    ])
}

/// Where the pod's network namespace is, while it has one.
pub fn live_netns_path(sb: &Sandbox) -> String {
    if sb.has_netns() && sb.state != State::NotReady {
        sb.netns_path()
    } else {
        String::new()
    }
}

/// What List returns per sandbox: enough for a listing (and for CRI's
/// ListPodSandbox); Status has the rest. Kept small because List of a
/// thousand pods is on kubelet's hot path.
pub fn summary_dict(sb: &Sandbox) -> Dict {
    let c = &sb.config;
    HashMap::from([
        ("id".to_owned(), ov(sb.id.as_str())),
        ("name".to_owned(), ov(c.name.as_str())),
        ("namespace".to_owned(), ov(c.namespace.as_str())),
        ("uid".to_owned(), ov(c.uid.as_str())),
        ("attempt".to_owned(), ov(c.attempt)),
        ("state".to_owned(), ov(sb.state.as_str())),
        ("created_at".to_owned(), ov(sb.created_at)),
        ("unit".to_owned(), ov(sb.unit())),
        ("slice".to_owned(), ov(sb.slice.as_str())),
        ("init_pid".to_owned(), ov(sb.init_pid)),
        ("network".to_owned(), ov(c.network.as_str())),
        ("runtime_handler".to_owned(), ov(c.runtime_handler.as_str())),
        ("labels".to_owned(), ov(string_map(&c.labels))),
        ("annotations".to_owned(), ov(string_map(&c.annotations))),
    ])
}

fn string_map(m: &BTreeMap<String, String>) -> HashMap<&str, &str> {
    m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// The full status of a sandbox, as Status returns it.
pub fn status_dict(sb: &Sandbox) -> Dict {
    let c = &sb.config;
    let mut d: Dict = HashMap::with_capacity(40);
    let mut put = |k: &str, v: OwnedValue| {
        d.insert(k.to_owned(), v);
    };
    put("id", ov(sb.id.as_str()));
    put("name", ov(c.name.as_str()));
    put("namespace", ov(c.namespace.as_str()));
    put("uid", ov(c.uid.as_str()));
    put("attempt", ov(c.attempt));
    put("state", ov(sb.state.as_str()));
    put("created_at", ov(sb.created_at));
    put("started_at", ov(sb.started_at));
    put("finished_at", ov(sb.finished_at));
    put("unit", ov(sb.unit()));
    put("slice", ov(sb.slice.as_str()));
    put("hostname", ov(c.hostname.as_str()));
    put("log_directory", ov(c.log_directory.as_str()));
    put(
        "labels",
        ov(c.labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<HashMap<_, _>>()),
    );
    put(
        "annotations",
        ov(c.annotations
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<HashMap<_, _>>()),
    );
    put("runtime_handler", ov(c.runtime_handler.as_str()));
    put("network", ov(c.network.as_str()));
    put("pid_namespace", ov(c.pid_namespace.as_str()));
    put("ipc_namespace", ov(c.ipc_namespace.as_str()));
    put("cgroup_parent", ov(c.cgroup_parent.as_str()));
    put("netns_path", ov(live_netns_path(sb)));
    put(
        "netns_unit",
        ov(if sb.has_netns() {
            sb.netns_unit()
        } else {
            String::new()
        }),
    );
    put("ips", ov(sb.network.ips.clone()));
    put("network_name", ov(sb.network.name.as_str()));
    put("network_attached", ov(sb.network.attached));
    put("network_error", ov(sb.network.error.as_str()));
    put("resolv_conf_path", ov(sb.resolv_conf_path.as_str()));
    put("hostname_path", ov(sb.hostname_path.as_str()));
    put("machine", ov(sb.machine.as_str()));
    put(
        "dns",
        ov(HashMap::from([
            ("servers", c.dns.servers.clone()),
            ("searches", c.dns.searches.clone()),
            ("options", c.dns.options.clone()),
        ])),
    );
    put(
        "port_mappings",
        ov(c.port_mappings
            .iter()
            .map(|pm| {
                HashMap::from([
                    ("protocol", ov(pm.protocol.as_str())),
                    ("container_port", ov(pm.container_port)),
                    ("host_port", ov(pm.host_port)),
                    ("host_ip", ov(pm.host_ip.as_str())),
                ])
            })
            .collect::<Vec<_>>()),
    );
    put("sysctls", ov(string_map(&c.sysctls)));
    put("init_pid", ov(sb.init_pid));
    put("reason", ov(sb.reason.as_str()));
    put("resources", ov(resources_dict(&c.resources)));
    put("overhead", ov(resources_dict(&c.overhead)));
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn opts(pairs: Vec<(&str, Value<'static>)>) -> Dict {
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ov(v)))
            .collect()
    }

    fn parse(o: &Dict) -> Result<SandboxConfig> {
        config_from_options("n".into(), "ns".into(), "u".into(), 1, o)
    }

    #[test]
    fn full_options_parse() {
        let labels: HashMap<&str, &str> = [("app", "web")].into();
        let res: HashMap<&str, Value> = [
            ("cpu_quota", Value::I64(50_000)),
            ("cpu_period", Value::I64(100_000)),
            ("memory_limit_in_bytes", Value::U64(1 << 28)),
        ]
        .into();
        let o = opts(vec![
            ("hostname", "h".into()),
            ("labels", labels.into()),
            ("network", "host".into()),
            ("pid_namespace", "pod".into()),
            ("cgroup_parent", "/kubepods/pod1".into()),
            ("resources", res.into()),
        ]);
        let c = parse(&o).unwrap();
        assert_eq!(c.hostname, "h");
        assert_eq!(c.labels["app"], "web");
        assert_eq!(c.network, NetworkMode::Host);
        assert_eq!(c.pid_namespace, NamespaceMode::Pod);
        assert_eq!(c.resources.cpu_quota, 50_000);
        assert_eq!(c.resources.memory_limit_in_bytes, 1 << 28);
        assert_eq!(c.attempt, 1);
    }

    #[test]
    fn network_options_parse() {
        let dns: HashMap<&str, Value<'_>> = HashMap::from([
            ("servers", vec!["10.96.0.10"].into()),
            ("searches", vec!["svc.cluster.local"].into()),
            ("options", vec!["ndots:5"].into()),
        ]);
        let pm: HashMap<&str, Value<'_>> = HashMap::from([
            ("protocol", "udp".into()),
            ("container_port", Value::U32(53)),
            ("host_port", Value::I32(5353)),
            ("host_ip", "127.0.0.1".into()),
        ]);
        let sysctls = HashMap::from([("net.core.somaxconn", "1024")]);
        let o = opts(vec![
            ("dns", dns.into()),
            ("port_mappings", vec![pm].into()),
            ("sysctls", sysctls.into()),
        ]);
        let c = parse(&o).unwrap();
        assert_eq!(c.dns.servers, ["10.96.0.10"]);
        assert_eq!(c.dns.options, ["ndots:5"]);
        assert_eq!(c.port_mappings[0].protocol, Protocol::Udp);
        assert_eq!(c.port_mappings[0].host_port, 5353);
        assert_eq!(c.port_mappings[0].host_ip, "127.0.0.1");
        assert_eq!(c.sysctls["net.core.somaxconn"], "1024");
        let bad: HashMap<&str, Value<'_>> = HashMap::from([("hostport", Value::U32(1))]);
        let e = parse(&opts(vec![("port_mappings", vec![bad].into())])).unwrap_err();
        assert!(
            e.to_string().starts_with("port_mappings[0].hostport:"),
            "{e}"
        );
        let e = parse(&opts(vec![("dns", "8.8.8.8".into())])).unwrap_err();
        assert!(e.to_string().starts_with("dns:"), "{e}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_named() {
        for (o, field) in [
            (opts(vec![("hostnme", "h".into())]), "hostnme"),
            (opts(vec![("hostname", Value::U32(3))]), "hostname"),
            (opts(vec![("labels", "x".into())]), "labels"),
            (
                opts(vec![(
                    "resources",
                    HashMap::from([("cpu_sharez", Value::U64(2))]).into(),
                )]),
                "resources.cpu_sharez",
            ),
            (
                opts(vec![(
                    "resources",
                    HashMap::from([("cpu_shares", Value::I64(-5))]).into(),
                )]),
                "resources.cpu_shares",
            ),
            (opts(vec![("network", "bridge".into())]), "network"),
        ] {
            let e = parse(&o).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().starts_with(&format!("{field}:")), "{e}");
        }
    }

    #[test]
    fn options_from_config_round_trips() {
        let mut c = SandboxConfig {
            name: "n".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            attempt: 1,
            hostname: "h".into(),
            log_directory: "/var/log/pods/x".into(),
            network: NetworkMode::Host,
            pid_namespace: NamespaceMode::Pod,
            ipc_namespace: NamespaceMode::Node,
            runtime_handler: "podscope".into(),
            cgroup_parent: "kubepods-besteffort.slice".into(),
            ..Default::default()
        };
        c.labels.insert("app".into(), "web".into());
        c.annotations.insert("a".into(), "b".into());
        c.sysctls.insert("net.core.somaxconn".into(), "1024".into());
        c.resources.cpu_quota = 50_000;
        c.overhead.memory_limit_in_bytes = 1 << 20;
        c.dns.servers = vec!["10.96.0.10".into()];
        c.port_mappings = vec![PortMapping {
            protocol: Protocol::Udp,
            container_port: 53,
            host_port: 5353,
            host_ip: "127.0.0.1".into(),
        }];
        let o: Dict = options_from_config(&c)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ov(v)))
            .collect();
        assert_eq!(parse(&o).unwrap(), c);
        let plain = SandboxConfig {
            name: "n".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            attempt: 1,
            ..Default::default()
        };
        let o: Dict = options_from_config(&plain)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ov(v)))
            .collect();
        assert_eq!(parse(&o).unwrap(), plain);
    }

    #[test]
    fn negative_quota_means_unlimited() {
        let o = opts(vec![(
            "resources",
            HashMap::from([("cpu_quota", Value::I64(-1))]).into(),
        )]);
        assert_eq!(parse(&o).unwrap().resources.cpu_quota, 0);
    }
}
