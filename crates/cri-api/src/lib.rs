//! The Kubernetes Container Runtime Interface, v1: the messages and the
//! RuntimeService and ImageService clients and servers, generated from
//! k8s.io/cri-api's `pkg/apis/runtime/v1/api.proto` at tag v0.36.3 (the
//! CRI of Kubernetes 1.36; see ORIGIN.md). Its own crate so that the
//! generated code is compiled once and named by one path, `cri_api::v1`.

#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("runtime.v1");
}
