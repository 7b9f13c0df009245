//! `runtime.v1.ImageService`: each call is the daemon's `Images` interface,
//! translated. Pull and Remove run in their own tasks (a kubelet that
//! hangs up never cuts a pull short; the layers it fetched stay for the
//! next try). CRI's idempotency: ImageStatus of a missing image is an
//! empty answer and RemoveImage of one succeeds.

use crate::calls::now_ns;
use cri_api::v1 as cri;
use cri_api::v1::image_service_server::ImageService;
use podscope_api::error::ErrorKind;
use podscope_api::image::{ImageFilter, ImageInfo, ImageSummary, PullOptions};
use std::collections::HashMap;
use std::sync::Arc;
use tonic::{Request, Response, Status};

#[derive(Clone)]
pub struct ImageApi(pub Arc<crate::calls::Cri>);

fn image_of(s: ImageSummary) -> cri::Image {
    cri::Image {
        spec: Some(cri::ImageSpec {
            image: s.id.clone(),
            ..Default::default()
        }),
        id: s.id,
        repo_tags: s.repo_tags,
        repo_digests: s.repo_digests,
        size: s.size,
        uid: (s.uid >= 0).then_some(cri::Int64Value { value: s.uid }),
        username: s.username,
        pinned: s.pinned,
    }
}

/// The verbose `info` of ImageStatus: one JSON document under "info", as
/// containerd's and CRI-O's are (crictl inspecti prints it).
fn verbose_info(i: &ImageInfo) -> HashMap<String, String> {
    HashMap::from([("info".to_owned(), i.to_json().to_string())])
}

fn spec_name(spec: Option<&cri::ImageSpec>, call: &str) -> Result<String, Status> {
    match spec.map(|s| s.image.as_str()) {
        Some(n) if !n.is_empty() => Ok(n.to_owned()),
        _ => Err(Status::invalid_argument(format!(
            "{call}: image.image is required"
        ))),
    }
}

fn is_not_found(e: &zbus::Error) -> bool {
    podscope_api::errors::is(e, ErrorKind::NotFound)
}

#[tonic::async_trait]
impl ImageService for ImageApi {
    async fn list_images(
        &self,
        req: Request<cri::ListImagesRequest>,
    ) -> Result<Response<cri::ListImagesResponse>, Status> {
        let filter = ImageFilter {
            image: req
                .into_inner()
                .filter
                .and_then(|f| f.image)
                .map(|s| s.image)
                .filter(|s| !s.is_empty()),
        };
        let images = self
            .0
            .daemon
            .rpc(|c| {
                let filter = &filter;
                async move { c.list_images(filter).await }
            })
            .await?;
        Ok(Response::new(cri::ListImagesResponse {
            images: images.into_iter().map(image_of).collect(),
        }))
    }

    async fn image_status(
        &self,
        req: Request<cri::ImageStatusRequest>,
    ) -> Result<Response<cri::ImageStatusResponse>, Status> {
        let req = req.into_inner();
        let name = spec_name(req.image.as_ref(), "ImageStatus")?;
        let r = self
            .0
            .daemon
            .call(|c| {
                let name = &name;
                async move { c.image_status(name).await }
            })
            .await;
        match r {
            Ok((summary, info)) => Ok(Response::new(cri::ImageStatusResponse {
                image: Some(image_of(summary)),
                info: if req.verbose {
                    verbose_info(&info)
                } else {
                    HashMap::new()
                },
            })),
            Err(e) if is_not_found(&e) => Ok(Response::new(cri::ImageStatusResponse::default())),
            Err(e) => Err(super::errors::status_of(&e)),
        }
    }

    async fn pull_image(
        &self,
        req: Request<cri::PullImageRequest>,
    ) -> Result<Response<cri::PullImageResponse>, Status> {
        let req = req.into_inner();
        let name = spec_name(req.image.as_ref(), "PullImage")?;
        let auth = req.auth.unwrap_or_default();
        let opt = |s: String| (!s.is_empty()).then_some(s);
        let options = PullOptions {
            username: opt(auth.username),
            password: opt(auth.password),
            auth: opt(auth.auth),
            identity_token: opt(auth.identity_token),
            registry_token: opt(auth.registry_token),
        };
        let cri = Arc::clone(&self.0);
        let image = crate::calls::detached(async move {
            cri.daemon
                .long_rpc(|c| {
                    let (name, options) = (&name, &options);
                    async move { c.pull_image(name, options).await }
                })
                .await
        })
        .await?;
        Ok(Response::new(cri::PullImageResponse {
            image_ref: image.id,
        }))
    }

    async fn remove_image(
        &self,
        req: Request<cri::RemoveImageRequest>,
    ) -> Result<Response<cri::RemoveImageResponse>, Status> {
        let name = spec_name(req.into_inner().image.as_ref(), "RemoveImage")?;
        // Neither a reference nor an image id names nothing to remove: done,
        // as for any image that is not there.
        if podscope_api::reference::Reference::parse(&name).is_err()
            && podscope_api::reference::id_prefix(&name).is_none()
        {
            return Ok(Response::new(cri::RemoveImageResponse {}));
        }
        let cri = Arc::clone(&self.0);
        crate::calls::detached(async move {
            match cri
                .daemon
                .call(|c| {
                    let name = &name;
                    async move { c.remove_image(name).await }
                })
                .await
            {
                Ok(()) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(super::errors::status_of(&e)),
            }
        })
        .await?;
        Ok(Response::new(cri::RemoveImageResponse {}))
    }

    async fn image_fs_info(
        &self,
        _: Request<cri::ImageFsInfoRequest>,
    ) -> Result<Response<cri::ImageFsInfoResponse>, Status> {
        let i = self
            .0
            .daemon
            .rpc(|c| async move { c.image_fs_info().await })
            .await?;
        let usage = cri::FilesystemUsage {
            timestamp: now_ns(),
            fs_id: Some(cri::FilesystemIdentifier {
                mountpoint: i.mountpoint,
            }),
            used_bytes: Some(cri::UInt64Value {
                value: i.used_bytes,
            }),
            inodes_used: Some(cri::UInt64Value {
                value: i.inodes_used,
            }),
        };
        // The containers' writable layers (their upper directories),
        // named by the images' mountpoint when on the same filesystem
        // (the daemon decides): kubelet sees a split disk only where there
        // is one.
        let containers = cri::FilesystemUsage {
            timestamp: usage.timestamp,
            fs_id: Some(cri::FilesystemIdentifier {
                mountpoint: i.containers_mountpoint,
            }),
            used_bytes: Some(cri::UInt64Value {
                value: i.containers_used_bytes,
            }),
            inodes_used: Some(cri::UInt64Value {
                value: i.containers_inodes_used,
            }),
        };
        Ok(Response::new(cri::ImageFsInfoResponse {
            image_filesystems: vec![usage],
            container_filesystems: vec![containers],
        }))
    }

    // ListImages as a stream (KEP-5825, alpha): not offered yet.
    type StreamImagesStream = crate::calls::Streamed<cri::StreamImagesResponse>;
    async fn stream_images(
        &self,
        _: Request<cri::StreamImagesRequest>,
    ) -> Result<Response<Self::StreamImagesStream>, Status> {
        Err(crate::calls::unimplemented("StreamImages"))
    }
}
