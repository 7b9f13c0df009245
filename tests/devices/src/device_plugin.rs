//! `podscope-device-plugin`'s model: the devices it advertises, the CDI
//! spec that describes them to the runtime, and its `DevicePlugin`
//! service, which answers Allocate with CDI device names only (as a plugin
//! does since kubelet's DevicePluginCDIDevices, GA in 1.31): what reaches
//! the container is then the runtime's doing, from the spec, which is what
//! `make e2e` checks of podscope.
//!
//! The binary (src/bin/device-plugin.rs) makes the host's side (device
//! nodes, mount sources, the spec file) and serves this on kubelet's
//! device plugin socket directory.

use crate::deviceplugin::v1beta1 as api;
use api::device_plugin_server::DevicePlugin;
use serde_json::{json, Value};
use std::path::Path;
use std::pin::Pin;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

/// The extended resource kubelet advertises, and the CDI kind of the
/// devices: one name for both, as vendors' plugins do (nvidia.com/gpu).
pub const RESOURCE: &str = "example.com/dev";

/// The device plugin API version kubelet 1.36 serves.
pub const API_VERSION: &str = "v1beta1";

/// The plugin's socket, in kubelet's device plugin directory.
pub const SOCKET: &str = "podscope-example-dev.sock";

/// Where each device's mount lands in the container: a directory holding
/// `name`, which names the device.
pub const CONTAINER_MOUNT: &str = "/run/example-dev";

/// The spec-level env entry, which the runtime adds once whichever device
/// of the kind a container asks for.
pub const KIND_ENV: &str = "EXAMPLE_DEV_KIND=example.com/dev";

/// One device the plugin advertises: its id (kubelet's and CDI's device
/// name) and the character device its host node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    pub id: &'static str,
    pub major: u32,
    pub minor: u32,
    /// Whether the spec states the node's type and numbers. The other
    /// device names its host node only, as nvidia-ctk's specs do, and the
    /// runtime reads them from the node.
    pub numbers_in_spec: bool,
}

/// The two devices: /dev/null's and /dev/zero's numbers, nodes a container
/// may open and write without harm (and read, for /dev/zero, as zeros).
pub const DEVICES: [Device; 2] = [
    Device {
        id: "dev0",
        major: 1,
        minor: 3,
        numbers_in_spec: true,
    },
    Device {
        id: "dev1",
        major: 1,
        minor: 5,
        numbers_in_spec: false,
    },
];

impl Device {
    pub fn by_id(id: &str) -> Option<Device> {
        DEVICES.iter().copied().find(|d| d.id == id)
    }

    /// Its fully-qualified CDI name, `example.com/dev=<id>`.
    pub fn cdi_name(&self) -> String {
        format!("{RESOURCE}={}", self.id)
    }

    /// Its node's path in the container.
    pub fn container_path(&self) -> String {
        format!("/dev/example-{}", self.id)
    }

    /// Its env entry in the container.
    pub fn env(&self) -> String {
        format!("EXAMPLE_DEV={}", self.id)
    }

    /// Its node on the host, under the plugin's state directory.
    pub fn host_node(&self, state_dir: &Path) -> std::path::PathBuf {
        state_dir.join(self.id)
    }

    /// The host directory mounted at [`CONTAINER_MOUNT`].
    pub fn host_mount(&self, state_dir: &Path) -> std::path::PathBuf {
        state_dir.join(format!("{}.d", self.id))
    }
}

/// The spec file's name in a CDI directory (`<vendor>-<class>.json`, as
/// the CDI tools name theirs).
pub const SPEC_FILE: &str = "example.com-dev.json";

/// The CDI spec (CDI v1.1.0's format; cdiVersion 0.6.0, the first with
/// every field used here: `hostPath` on device nodes came with 0.5.0) of
/// both devices, their host side under `state_dir`.
pub fn cdi_spec(state_dir: &Path) -> Value {
    let devices: Vec<Value> = DEVICES
        .iter()
        .map(|d| {
            let mut node = json!({
                "path": d.container_path(),
                "hostPath": d.host_node(state_dir),
                "permissions": "rw",
            });
            if d.numbers_in_spec {
                node["type"] = json!("c");
                node["major"] = json!(d.major);
                node["minor"] = json!(d.minor);
            }
            json!({
                "name": d.id,
                "containerEdits": {
                    "env": [d.env()],
                    "deviceNodes": [node],
                    "mounts": [{
                        "hostPath": d.host_mount(state_dir),
                        "containerPath": CONTAINER_MOUNT,
                        "options": ["ro", "nosuid", "nodev", "bind"],
                    }],
                },
            })
        })
        .collect();
    json!({
        "cdiVersion": "0.6.0",
        "kind": RESOURCE,
        "devices": devices,
        "containerEdits": { "env": [KIND_ENV] },
    })
}

/// What ListAndWatch sends: every device, healthy.
pub fn device_list() -> api::ListAndWatchResponse {
    api::ListAndWatchResponse {
        devices: DEVICES
            .iter()
            .map(|d| api::Device {
                id: d.id.to_owned(),
                health: "Healthy".to_owned(),
                topology: None,
            })
            .collect(),
    }
}

/// Allocate's answer: each container's devices as CDI names, nothing else
/// (no env, mounts or device specs of kubelet's own).
pub fn allocate(req: &api::AllocateRequest) -> Result<api::AllocateResponse, Status> {
    let mut container_responses = Vec::new();
    for c in &req.container_requests {
        let mut cdi_devices = Vec::new();
        for id in &c.devices_ids {
            let d = Device::by_id(id)
                .ok_or_else(|| Status::invalid_argument(format!("{RESOURCE}: no device {id:?}")))?;
            cdi_devices.push(api::CdiDevice { name: d.cdi_name() });
        }
        container_responses.push(api::ContainerAllocateResponse {
            cdi_devices,
            ..Default::default()
        });
    }
    Ok(api::AllocateResponse {
        container_responses,
    })
}

/// The `DevicePlugin` service; each Allocate is logged (stderr: the
/// journal of its unit), for whoever reads what kubelet asked.
#[derive(Debug, Default)]
pub struct Plugin;

type DeviceStream = Pin<Box<dyn Stream<Item = Result<api::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Plugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<api::Empty>,
    ) -> Result<Response<api::DevicePluginOptions>, Status> {
        Ok(Response::new(api::DevicePluginOptions::default()))
    }

    type ListAndWatchStream = DeviceStream;

    /// The list once, then the stream stays open: kubelet takes its end as
    /// the plugin gone, and the devices with it.
    async fn list_and_watch(
        &self,
        _: Request<api::Empty>,
    ) -> Result<Response<DeviceStream>, Status> {
        eprintln!("podscope-device-plugin: ListAndWatch: {RESOURCE} dev0, dev1 healthy");
        let stream = tokio_stream::once(Ok(device_list())).chain(tokio_stream::pending());
        Ok(Response::new(Box::pin(stream)))
    }

    /// Not asked for (the options say so), answered all the same: the
    /// devices kubelet must include, then the first available ones.
    async fn get_preferred_allocation(
        &self,
        req: Request<api::PreferredAllocationRequest>,
    ) -> Result<Response<api::PreferredAllocationResponse>, Status> {
        let container_responses = req
            .into_inner()
            .container_requests
            .into_iter()
            .map(|c| {
                let mut ids = c.must_include_device_i_ds;
                for id in c.available_device_i_ds {
                    if ids.len() >= usize::try_from(c.allocation_size).unwrap_or(0) {
                        break;
                    }
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                api::ContainerPreferredAllocationResponse { device_i_ds: ids }
            })
            .collect();
        Ok(Response::new(api::PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        req: Request<api::AllocateRequest>,
    ) -> Result<Response<api::AllocateResponse>, Status> {
        let req = req.into_inner();
        let answer = allocate(&req);
        match &answer {
            Ok(a) => {
                for c in &a.container_responses {
                    let names: Vec<&str> = c.cdi_devices.iter().map(|d| d.name.as_str()).collect();
                    eprintln!("podscope-device-plugin: Allocate: {}", names.join(" "));
                }
            }
            Err(e) => eprintln!("podscope-device-plugin: Allocate {req:?} refused: {e}"),
        }
        answer.map(Response::new)
    }

    /// Not asked for (the options say so): nothing to do before a start.
    async fn pre_start_container(
        &self,
        _: Request<api::PreStartContainerRequest>,
    ) -> Result<Response<api::PreStartContainerResponse>, Status> {
        Ok(Response::new(api::PreStartContainerResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_names_each_device_its_node_env_and_mount() {
        let spec = cdi_spec(Path::new("/run/x"));
        assert_eq!(spec["kind"], RESOURCE);
        assert_eq!(spec["containerEdits"]["env"], json!([KIND_ENV]));
        let devs = spec["devices"].as_array().unwrap();
        assert_eq!(devs.len(), 2);
        let d0 = &devs[0]["containerEdits"];
        assert_eq!(devs[0]["name"], "dev0");
        assert_eq!(d0["env"], json!(["EXAMPLE_DEV=dev0"]));
        assert_eq!(
            d0["deviceNodes"],
            json!([{"path": "/dev/example-dev0", "hostPath": "/run/x/dev0",
                    "permissions": "rw", "type": "c", "major": 1, "minor": 3}])
        );
        assert_eq!(d0["mounts"][0]["hostPath"], "/run/x/dev0.d");
        assert_eq!(d0["mounts"][0]["containerPath"], CONTAINER_MOUNT);
        // dev1's node is named by its host path alone.
        let n1 = &devs[1]["containerEdits"]["deviceNodes"][0];
        assert_eq!(n1["hostPath"], "/run/x/dev1");
        assert!(
            n1.get("major").is_none() && n1.get("type").is_none(),
            "{n1}"
        );
    }

    #[test]
    fn allocate_answers_cdi_names_per_container() {
        let req = api::AllocateRequest {
            container_requests: vec![
                api::ContainerAllocateRequest {
                    devices_ids: vec!["dev1".into()],
                },
                api::ContainerAllocateRequest {
                    devices_ids: vec!["dev0".into(), "dev1".into()],
                },
            ],
        };
        let a = allocate(&req).unwrap();
        let names: Vec<Vec<&str>> = a
            .container_responses
            .iter()
            .map(|c| {
                assert!(c.envs.is_empty() && c.mounts.is_empty() && c.devices.is_empty());
                c.cdi_devices.iter().map(|d| d.name.as_str()).collect()
            })
            .collect();
        assert_eq!(
            names,
            vec![
                vec!["example.com/dev=dev1"],
                vec!["example.com/dev=dev0", "example.com/dev=dev1"]
            ]
        );
    }

    #[test]
    fn allocate_refuses_an_unknown_device() {
        let req = api::AllocateRequest {
            container_requests: vec![api::ContainerAllocateRequest {
                devices_ids: vec!["dev9".into()],
            }],
        };
        let e = allocate(&req).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("dev9"), "{e}");
    }

    #[test]
    fn every_device_is_listed_healthy() {
        let l = device_list();
        let ids: Vec<&str> = l.devices.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["dev0", "dev1"]);
        assert!(l.devices.iter().all(|d| d.health == "Healthy"));
    }
}
