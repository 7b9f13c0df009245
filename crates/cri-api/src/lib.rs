//! The Kubernetes Container Runtime Interface, v1: the messages and the
//! RuntimeService and ImageService clients and servers, generated from
//! k8s.io/cri-api's `pkg/apis/runtime/v1/api.proto` at tag v0.36.3 (the
//! CRI of Kubernetes 1.36; see ORIGIN.md). Its own crate so that the
//! generated code is compiled once and named by one path, `cri_api::v1`.

#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("runtime.v1");
}

/// A gRPC channel to a CRI socket (for the tests, the benchmark and any
/// local client): the socket is dialled whatever the URI says.
pub async fn channel(
    path: &std::path::Path,
) -> std::result::Result<tonic::transport::Channel, tonic::transport::Error> {
    let path = path.to_path_buf();
    // The URI is required by the API and ignored: the connector dials the socket.
    tonic::transport::Endpoint::from_static("http://podscope-cri")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
}
