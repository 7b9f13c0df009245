//! What podscope reads from a CNI result: the pod's addresses.
//!
//! Results stay raw JSON elsewhere (they are passed on as `prevResult`
//! exactly as a plugin printed them); this reads them, and changes one
//! thing: the namespace path in `interfaces[].sandbox`, when ADD ran in a
//! namespace the daemon held before its pin existed. The shape is the same
//! for 0.3.x/0.4.0 (whose `ips[]` also carry a `version`) and 1.x.

use serde_json::Value;
use std::net::IpAddr;

/// The pod's addresses: the primary first (the first IPv4 one, as kubelet
/// expects for dual-stack pods), then the others in result order.
pub fn pod_ips(result: &Value) -> Vec<String> {
    let interfaces = result.get("interfaces").and_then(Value::as_array);
    // An address belongs to the pod when its interface is inside a sandbox
    // (the bridge's host side and the bridge itself are not), or when the
    // result does not say which interface holds it.
    let in_pod = |ip: &Value| -> bool {
        let Some(idx) = ip.get("interface").and_then(Value::as_u64) else {
            return true;
        };
        interfaces
            .and_then(|ifs| ifs.get(idx as usize))
            .and_then(|i| i.get("sandbox"))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    let mut ips: Vec<IpAddr> = result
        .get("ips")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|ip| in_pod(ip))
        .filter_map(|ip| ip.get("address").and_then(Value::as_str))
        .filter_map(|a| a.split('/').next()?.parse().ok())
        .collect();
    ips.dedup();
    if let Some(v4) = ips.iter().position(IpAddr::is_ipv4) {
        let first = ips.remove(v4);
        ips.insert(0, first);
    }
    ips.into_iter().map(|ip| ip.to_string()).collect()
}

/// Make the interfaces that ADD put in the namespace at `ran_in` say they
/// are in `pinned_at`, its pin: the path later CHECKs and DELs pass, which
/// plugins (bridge's CHECK) compare with the result's.
pub fn move_sandbox(result: &mut Value, ran_in: &str, pinned_at: &str) {
    let Some(interfaces) = result.get_mut("interfaces").and_then(Value::as_array_mut) else {
        return;
    };
    for i in interfaces {
        if let Some(s) = i.get_mut("sandbox") {
            if s.as_str() == Some(ran_in) {
                *s = Value::from(pinned_at);
            }
        }
    }
}

/// The interface names the result puts inside the pod.
pub fn pod_interfaces(result: &Value) -> Vec<String> {
    result
        .get("interfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|i| {
            i.get("sandbox")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        })
        .filter_map(|i| i.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bridge_result_gives_the_pod_side_addresses_v4_first() {
        let r = json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": "cni0", "mac": "aa"},
                {"name": "veth1", "mac": "bb"},
                {"name": "eth0", "mac": "cc", "sandbox": "/run/netns/podscope-x"}
            ],
            "ips": [
                {"address": "fd00::5/64", "interface": 2},
                {"address": "10.88.0.5/16", "gateway": "10.88.0.1", "interface": 2},
                {"address": "10.99.0.1/16", "interface": 0}
            ]
        });
        assert_eq!(pod_ips(&r), ["10.88.0.5", "fd00::5"]);
        assert_eq!(pod_interfaces(&r), ["eth0"]);
    }

    #[test]
    fn old_results_and_results_without_interfaces_work() {
        let r = json!({"cniVersion": "0.4.0",
            "ips": [{"version": "4", "address": "192.168.1.7/24"}]});
        assert_eq!(pod_ips(&r), ["192.168.1.7"]);
        assert!(pod_ips(&json!({})).is_empty());
        assert!(pod_ips(&json!({"ips": [{"address": "garbage"}]})).is_empty());
    }

    #[test]
    fn the_sandbox_path_moves_to_the_pin() {
        let mut r = serde_json::json!({
            "interfaces": [
                {"name": "cni0", "mac": "aa"},
                {"name": "veth1", "mac": "bb", "sandbox": ""},
                {"name": "eth0", "mac": "cc", "sandbox": "/proc/42/fd/7"},
                {"name": "net1", "sandbox": "/run/netns/other"}
            ],
            "ips": [{"address": "10.0.0.2/24", "interface": 2}]
        });
        move_sandbox(&mut r, "/proc/42/fd/7", "/run/netns/podscope-x");
        assert_eq!(r["interfaces"][2]["sandbox"], "/run/netns/podscope-x");
        assert_eq!(r["interfaces"][3]["sandbox"], "/run/netns/other");
        assert_eq!(r["interfaces"][1]["sandbox"], "");
        assert!(r["interfaces"][0].get("sandbox").is_none());
        assert_eq!(pod_ips(&r), vec!["10.0.0.2"]);
        move_sandbox(&mut serde_json::json!({"cniVersion": "1.0.0"}), "a", "b");
    }
}
