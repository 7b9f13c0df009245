//! The kubelet's device interfaces, generated with protoc from the
//! vendored protos (see proto/README.md) at build time, as podscope's CRI
//! bindings are (crates/cri-api). The three are compiled apart: two of them
//! name a service `Registration`, each in its own proto package.

const PROTOS: [&str; 3] = [
    "proto/deviceplugin/v1beta1/api.proto",
    "proto/pluginregistration/v1/api.proto",
    "proto/dra/v1/api.proto",
];

fn main() {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
        let dir = proto.rsplit_once('/').unwrap().0;
        tonic_prost_build::configure()
            .compile_protos(&[proto], &[dir])
            .unwrap_or_else(|e| panic!("protoc on {proto} (is protobuf-compiler installed?): {e}"));
    }
}
