//! The kubelet's interfaces for device drivers, generated from
//! k8s.io/kubelet v0.36.3's protos (the kubelet 1.36.3 the suites run; see
//! proto/README.md): device plugins (`deviceplugin::v1beta1`), the plugin
//! registration kubelet's plugin watcher speaks (`pluginregistration::v1`)
//! and Dynamic Resource Allocation (`dra::v1`). The device drivers the
//! suites run against kubelet are built on them: `device_plugin` (the
//! binary `podscope-device-plugin`, which `make e2e` runs).

pub mod device_plugin;

pub mod deviceplugin {
    /// Device plugin API v1beta1: kubelet's `Registration` on
    /// `/var/lib/kubelet/device-plugins/kubelet.sock`, the plugin's
    /// `DevicePlugin`.
    pub mod v1beta1 {
        #![allow(clippy::all, missing_docs)]
        tonic::include_proto!("v1beta1");
    }
}

pub mod pluginregistration {
    /// Plugin registration v1 (its proto package is `pluginregistration`):
    /// the `Registration` a plugin serves on its socket in
    /// `/var/lib/kubelet/plugins_registry/`.
    pub mod v1 {
        #![allow(clippy::all, missing_docs)]
        tonic::include_proto!("pluginregistration");
    }
}

pub mod dra {
    /// Dynamic Resource Allocation v1: the `DRAPlugin` a DRA driver serves.
    pub mod v1 {
        #![allow(clippy::all, missing_docs)]
        tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
    }
}

/// A gRPC channel to a unix socket (kubelet's, or a plugin's): the CRI
/// bindings' own dialler, which dials the socket whatever the URI says and
/// knows nothing of the CRI but its name.
pub use cri_api::channel as connect;
