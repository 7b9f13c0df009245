//! What a claim's devices become on the node: the devices themselves (a
//! character device node and a directory with a file, made at start), the
//! claim's allocation read for this driver's devices, and the CDI spec of
//! a prepared claim (CDI v0.6.0: cncf-tags/container-device-interface's
//! SPEC.md), one file per claim so that unpreparing it is removing it.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// tun's device numbers: a device the OCI defaults do not allow, so a
/// container opens it only when its device cgroup was given the rule, and
/// whose open (without TUNSETIFF) makes nothing.
pub const MAJOR: u64 = 10;
pub const MINOR: u64 = 200;
/// Where a container finds its device, its variables and its mount.
pub const CONTAINER_DEVICE: &str = "/dev/dra-example";
pub const CONTAINER_MOUNT: &str = "/dra-example";
pub const ENV_DEVICE: &str = "DRA_EXAMPLE_DEVICE";
pub const ENV_CLAIM: &str = "DRA_EXAMPLE_CLAIM";
/// The file in each device's shared directory: "DEVICE on NODE".
pub const INFO_FILE: &str = "info";

/// A device's host paths.
pub struct HostDevice {
    pub node: PathBuf,
    pub share: PathBuf,
}

pub fn host_device(state_dir: &Path, device: &str) -> HostDevice {
    HostDevice {
        node: state_dir.join("dev").join(device),
        share: state_dir.join("share").join(device),
    }
}

/// The node's devices made under STATE_DIR (made again, so a node left by
/// an earlier run holds what this one says).
pub fn make_devices(state_dir: &Path, node: &str, devices: &[String]) -> Result<(), String> {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    for d in devices {
        let h = host_device(state_dir, d);
        for dir in [h.node.parent().unwrap(), h.share.as_path()] {
            std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        }
        match std::fs::remove_file(&h.node) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("remove {}: {e}", h.node.display()))
            }
            _ => {}
        }
        mknod(
            &h.node,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o600),
            makedev(MAJOR, MINOR),
        )
        .map_err(|e| format!("mknod {} c {MAJOR} {MINOR}: {e}", h.node.display()))?;
        let info = h.share.join(INFO_FILE);
        std::fs::write(&info, format!("{d} on {node}\n"))
            .map_err(|e| format!("write {}: {e}", info.display()))?;
    }
    Ok(())
}

/// One device of a claim's allocation: its request and its name.
#[derive(Debug, PartialEq, Eq)]
pub struct Allocated {
    pub request: String,
    pub device: String,
}

/// The devices of CLAIM allocated from DRIVER's pool POOL, checked to be
/// the claim kubelet named (by UID) and to be allocated at all.
pub fn allocated(
    claim: &Value,
    uid: &str,
    driver: &str,
    pool: &str,
) -> Result<Vec<Allocated>, String> {
    let found = claim["metadata"]["uid"].as_str().unwrap_or_default();
    if found != uid {
        return Err(format!(
            "the claim's UID is {found:?}, kubelet asked for {uid:?} (deleted and made again?)"
        ));
    }
    let results = claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .ok_or("the claim is not allocated (no status.allocation.devices.results)")?;
    let mine: Vec<Allocated> = results
        .iter()
        .filter(|r| r["driver"] == driver)
        .map(|r| {
            if r["pool"] != pool {
                return Err(format!(
                    "device {} of pool {} allocated, this node's pool is {pool}",
                    r["device"], r["pool"]
                ));
            }
            match (r["request"].as_str(), r["device"].as_str()) {
                (Some(request), Some(device)) => Ok(Allocated {
                    request: request.to_string(),
                    device: device.to_string(),
                }),
                _ => Err(format!(
                    "an allocation result without request or device: {r}"
                )),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(mine)
}

/// The CDI kind of DRIVER's devices.
pub fn kind(driver: &str) -> String {
    format!("{driver}/dev")
}

/// A prepared device's name in the spec: unique to the claim, so that two
/// claims' specs never define the same device.
pub fn device_name(claim_uid: &str, device: &str) -> String {
    format!("{claim_uid}-{device}")
}

/// The fully qualified CDI name kubelet hands the runtime.
pub fn qualified_name(driver: &str, claim_uid: &str, device: &str) -> String {
    format!("{}={}", kind(driver), device_name(claim_uid, device))
}

/// The spec file of a claim.
pub fn spec_path(cdi_dir: &Path, driver: &str, claim_uid: &str) -> PathBuf {
    cdi_dir.join(format!("{driver}-{claim_uid}.json"))
}

/// The CDI spec of a claim's devices. The device nodes name their host
/// path only, as `nvidia-ctk cdi generate` writes them: the runtime takes
/// the type and numbers from the node itself.
pub fn spec(driver: &str, claim_uid: &str, state_dir: &Path, devices: &[Allocated]) -> Value {
    let devices: Vec<Value> = devices
        .iter()
        .map(|a| {
            let h = host_device(state_dir, &a.device);
            json!({
                "name": device_name(claim_uid, &a.device),
                "containerEdits": {
                    "env": [
                        format!("{ENV_DEVICE}={}", a.device),
                        format!("{ENV_CLAIM}={claim_uid}"),
                    ],
                    "deviceNodes": [{ "path": CONTAINER_DEVICE, "hostPath": h.node }],
                    "mounts": [{
                        "hostPath": h.share,
                        "containerPath": CONTAINER_MOUNT,
                        "options": ["ro", "nosuid", "nodev", "bind"],
                    }],
                },
            })
        })
        .collect();
    json!({ "cdiVersion": "0.6.0", "kind": kind(driver), "devices": devices })
}

/// SPEC written at PATH whole or not at all (a runtime reading the
/// directory meanwhile sees the old file or the new one).
pub fn write_spec(path: &Path, spec: &Value) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    // A dot file: CDI reads *.json and *.yaml only, never the half-written one.
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::write(&tmp, serde_json::to_vec_pretty(spec).unwrap())
        .map_err(|e| format!("write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("rename to {}: {e}", path.display()))
}

/// The spec at PATH removed (gone already is fine: unprepare is retried).
pub fn remove_spec(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("remove {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(uid: &str, results: Value) -> Value {
        json!({
            "metadata": { "uid": uid, "name": "dra-dev-x", "namespace": "checks" },
            "status": { "allocation": { "devices": { "results": results } } },
        })
    }

    #[test]
    fn the_drivers_devices_of_the_claim() {
        let c = claim(
            "u1",
            json!([
                { "request": "dev", "driver": "dra.example.com", "pool": "node2", "device": "dev1" },
                { "request": "gpu", "driver": "gpu.example.com", "pool": "node2", "device": "gpu0" },
            ]),
        );
        assert_eq!(
            allocated(&c, "u1", "dra.example.com", "node2").unwrap(),
            [Allocated {
                request: "dev".into(),
                device: "dev1".into()
            }]
        );
    }

    #[test]
    fn a_claim_that_is_not_the_one_kubelet_named_or_not_allocated() {
        let c = claim("u1", json!([]));
        assert!(allocated(&c, "u2", "d", "n").unwrap_err().contains("UID"));
        let unallocated = json!({ "metadata": { "uid": "u1" }, "status": {} });
        assert!(allocated(&unallocated, "u1", "d", "n")
            .unwrap_err()
            .contains("not allocated"));
        let elsewhere = claim(
            "u1",
            json!([{ "request": "dev", "driver": "d", "pool": "node1", "device": "dev0" }]),
        );
        assert!(allocated(&elsewhere, "u1", "d", "node2")
            .unwrap_err()
            .contains("pool"));
    }

    #[test]
    fn the_spec_of_a_claim() {
        let devices = [Allocated {
            request: "dev".into(),
            device: "dev1".into(),
        }];
        let s = spec("dra.example.com", "u1", Path::new("/run/d"), &devices);
        assert_eq!(s["kind"], "dra.example.com/dev");
        assert_eq!(s["devices"][0]["name"], "u1-dev1");
        let edits = &s["devices"][0]["containerEdits"];
        assert_eq!(
            edits["env"],
            json!(["DRA_EXAMPLE_DEVICE=dev1", "DRA_EXAMPLE_CLAIM=u1"])
        );
        assert_eq!(
            edits["deviceNodes"],
            json!([{ "path": "/dev/dra-example", "hostPath": "/run/d/dev/dev1" }])
        );
        assert_eq!(edits["mounts"][0]["hostPath"], "/run/d/share/dev1");
        assert_eq!(
            qualified_name("dra.example.com", "u1", "dev1"),
            "dra.example.com/dev=u1-dev1"
        );
        assert_eq!(
            spec_path(Path::new("/var/run/cdi"), "dra.example.com", "u1"),
            Path::new("/var/run/cdi/dra.example.com-u1.json")
        );
    }

    #[test]
    fn a_spec_written_and_removed() {
        let dir = std::env::temp_dir().join(format!("podscope-dra-cdi-{}", std::process::id()));
        let path = spec_path(&dir, "d", "u1");
        write_spec(&path, &json!({ "kind": "d/dev" })).unwrap();
        let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back["kind"], "d/dev");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        remove_spec(&path).unwrap();
        remove_spec(&path).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }
}
