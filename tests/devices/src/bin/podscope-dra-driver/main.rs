//! podscope-dra-driver: a Dynamic Resource Allocation driver for the tests,
//! as a vendor's kubelet plugin is one (make cluster's `dra` check,
//! tests/cluster/checks/dra.rs, runs it on one node).
//!
//! - It serves the DRA gRPC service (`v1.DRAPlugin`) on
//!   `<kubelet>/plugins/<driver>/dra.sock` and registers it with kubelet's
//!   plugin watcher through `<kubelet>/plugins_registry/<driver>-reg.sock`
//!   (type `DRAPlugin`).
//! - Once kubelet has said it is registered, it publishes the node's
//!   ResourceSlice (pool = the node, `--devices` devices named dev0, dev1,
//!   ...) to the API server as the node itself (the node's kubeconfig: the
//!   Node authorizer and NodeRestriction let a node write slices of its own
//!   name, and read the claims of the pods bound to it).
//! - NodePrepareResources reads each claim's allocation from the API
//!   server, writes a CDI spec for the claim's devices of this driver
//!   (`<cdi-dir>/<driver>-<claim uid>.json`: a character device node, an
//!   environment variable, a read-only bind mount of a directory holding a
//!   file) and answers their CDI names; NodeUnprepareResources removes the
//!   spec.
//! - The device nodes are ones it makes itself (mknod, under `--state-dir`),
//!   with tun's numbers (10:200): a device a container may open only when
//!   its device cgroup lets it (it is not among the OCI defaults), and one
//!   whose open does nothing.
//! - On SIGTERM or SIGINT it deletes its ResourceSlice and its sockets (the
//!   registration socket first, so kubelet forgets it) and exits 0.
//!
//! Each step is a line on stderr (the unit's journal), which the check
//! prints when the driver fails.

mod api;
mod cdi;
mod plugin;

use std::path::PathBuf;
use std::process::ExitCode;

/// The command line (every flag has a default but `--node`).
#[derive(Debug, Clone)]
pub struct Args {
    /// The node's name: the ResourceSlice's nodeName and pool.
    pub node: String,
    /// The driver's name (the DeviceClass selects on it; the CDI vendor).
    pub driver: String,
    /// The node's kubeconfig, towards the API server.
    pub kubeconfig: PathBuf,
    /// kubelet's root directory (its plugins/ and plugins_registry/).
    pub kubelet_dir: PathBuf,
    /// Where the CDI specs go (the runtime reads them there).
    pub cdi_dir: PathBuf,
    /// The device nodes and shared directories the specs name.
    pub state_dir: PathBuf,
    /// How many devices the node has.
    pub devices: u32,
}

const USAGE: &str = "usage: podscope-dra-driver --node NAME [--driver dra.example.com] \
[--kubeconfig /etc/kubernetes/kubelet.kubeconfig] [--kubelet-dir /var/lib/kubelet] \
[--cdi-dir /var/run/cdi] [--state-dir /run/DRIVER] [--devices 2]";

impl Args {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut node = None;
        let mut driver = "dra.example.com".to_string();
        let mut kubeconfig = PathBuf::from("/etc/kubernetes/kubelet.kubeconfig");
        let mut kubelet_dir = PathBuf::from("/var/lib/kubelet");
        let mut cdi_dir = PathBuf::from("/var/run/cdi");
        let mut state_dir = None;
        let mut devices = 2;
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .ok_or_else(|| format!("{flag} wants a value\n{USAGE}"))?;
            match flag.as_str() {
                "--node" => node = Some(value),
                "--driver" => driver = value,
                "--kubeconfig" => kubeconfig = value.into(),
                "--kubelet-dir" => kubelet_dir = value.into(),
                "--cdi-dir" => cdi_dir = value.into(),
                "--state-dir" => state_dir = Some(PathBuf::from(value)),
                "--devices" => {
                    devices = value
                        .parse()
                        .map_err(|e| format!("--devices {value}: {e}"))?
                }
                _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
            }
        }
        let node = node.ok_or_else(|| format!("--node is required\n{USAGE}"))?;
        // Both end up in object names and file names: keep them to what a
        // DNS subdomain allows, which is also what CDI allows a vendor.
        for (what, v) in [("--node", &node), ("--driver", &driver)] {
            let ok = !v.is_empty()
                && v.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                });
            if !ok {
                return Err(format!(
                    "{what} {v:?}: lower-case letters, digits, '-' and '.' only"
                ));
            }
        }
        if devices == 0 {
            return Err("--devices 0: a driver with nothing to offer".into());
        }
        let state_dir = state_dir.unwrap_or_else(|| PathBuf::from("/run").join(&driver));
        Ok(Args {
            node,
            driver,
            kubeconfig,
            kubelet_dir,
            cdi_dir,
            state_dir,
            devices,
        })
    }

    /// The devices' names, as the ResourceSlice lists them.
    pub fn device_names(&self) -> Vec<String> {
        (0..self.devices).map(|i| format!("dev{i}")).collect()
    }

    /// The ResourceSlice's name: one slice per node and driver.
    pub fn slice_name(&self) -> String {
        format!("{}-{}", self.node, self.driver)
    }
}

/// A line in the journal.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { eprintln!("podscope-dra-driver: {}", format!($($arg)*)) };
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            say!("{e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match rt.block_on(plugin::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> Result<Args, String> {
        Args::parse(a.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults_and_names() {
        let a = parse(&["--node", "node2"]).unwrap();
        assert_eq!(a.driver, "dra.example.com");
        assert_eq!(a.state_dir, PathBuf::from("/run/dra.example.com"));
        assert_eq!(a.cdi_dir, PathBuf::from("/var/run/cdi"));
        assert_eq!(a.device_names(), ["dev0", "dev1"]);
        assert_eq!(a.slice_name(), "node2-dra.example.com");
    }

    #[test]
    fn bad_command_lines() {
        assert!(parse(&[]).unwrap_err().contains("--node is required"));
        assert!(parse(&["--node"]).unwrap_err().contains("wants a value"));
        assert!(parse(&["--node", "Node_2"])
            .unwrap_err()
            .contains("lower-case"));
        assert!(parse(&["--node", "n", "--devices", "0"]).is_err());
        assert!(parse(&["--node", "n", "--colour", "x"])
            .unwrap_err()
            .contains("unknown flag --colour"));
    }
}
