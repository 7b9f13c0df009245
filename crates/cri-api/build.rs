//! The CRI's bindings, generated with protoc from the vendored api.proto
//! (see ORIGIN.md) at build time, as every tonic service is.
//!
//! Debian 12's protoc (3.21) does not know the `debug_redact` field option
//! (protobuf 22+), which cri-api puts on AuthConfig's secrets. It only
//! tells text formatters to hide a field and changes nothing on the wire,
//! and prost's Debug prints every field anyway: protoc is given a copy of
//! the file without it, and the vendored file stays as it came.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=proto/api.proto");
    let proto = std::fs::read_to_string("proto/api.proto").expect("read proto/api.proto");
    let stripped = proto.replace(" [debug_redact = true]", "");
    assert!(
        !stripped.contains("debug_redact"),
        "proto/api.proto uses debug_redact in a form build.rs does not strip"
    );
    let dir = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("proto");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("api.proto");
    std::fs::write(&file, stripped).unwrap();
    tonic_prost_build::configure()
        .compile_protos(&[&file], &[&dir])
        .unwrap_or_else(|e| {
            panic!("protoc on proto/api.proto (is protobuf-compiler installed?): {e}")
        });
}
