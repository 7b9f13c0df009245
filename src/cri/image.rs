//! `runtime.v1.ImageService`: podscope has no images yet. Only ImageFsInfo
//! answers (clients call it on connect): the real usage of podscope's state
//! directory.

use super::daemon::Daemon;
use super::runtime::now_ns;
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_server::ImageService;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use tonic::{Request, Response, Status};

#[derive(Clone)]
pub struct ImageApi(pub Arc<super::runtime::Cri>);

/// Bytes (allocated blocks) and inodes under `root`, not following links
/// and not crossing into other filesystems.
pub fn usage_of(root: &Path) -> std::io::Result<(u64, u64)> {
    let top = std::fs::symlink_metadata(root)?;
    let dev = top.dev();
    let (mut bytes, mut inodes) = (top.blocks() * 512, 1u64);
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(md) = entry.metadata() else { continue };
            bytes += md.blocks() * 512;
            inodes += 1;
            if md.is_dir() && md.dev() == dev {
                stack.push(entry.path());
            }
        }
    }
    Ok((bytes, inodes))
}

fn unimplemented(what: &str) -> Status {
    Status::unimplemented(format!(
        "{what}: podscope manages pod sandboxes only; images are not implemented yet"
    ))
}

async fn state_dir(daemon: &Daemon) -> Result<String, Status> {
    let (_, info, _) = daemon
        .rpc(|m| async move { m.runtime_status().await })
        .await?;
    Ok(info.state_dir)
}

#[tonic::async_trait]
impl ImageService for ImageApi {
    async fn list_images(
        &self,
        _: Request<cri::ListImagesRequest>,
    ) -> Result<Response<cri::ListImagesResponse>, Status> {
        Err(unimplemented("ListImages"))
    }
    async fn image_status(
        &self,
        _: Request<cri::ImageStatusRequest>,
    ) -> Result<Response<cri::ImageStatusResponse>, Status> {
        Err(unimplemented("ImageStatus"))
    }
    async fn pull_image(
        &self,
        _: Request<cri::PullImageRequest>,
    ) -> Result<Response<cri::PullImageResponse>, Status> {
        Err(unimplemented("PullImage"))
    }
    async fn remove_image(
        &self,
        _: Request<cri::RemoveImageRequest>,
    ) -> Result<Response<cri::RemoveImageResponse>, Status> {
        Err(unimplemented("RemoveImage"))
    }

    async fn image_fs_info(
        &self,
        _: Request<cri::ImageFsInfoRequest>,
    ) -> Result<Response<cri::ImageFsInfoResponse>, Status> {
        let dir = state_dir(&self.0.daemon).await?;
        let path = dir.clone();
        let (bytes, inodes) = tokio::task::spawn_blocking(move || usage_of(Path::new(&path)))
            .await
            .map_err(|e| Status::internal(format!("ImageFsInfo: {e}")))?
            .map_err(|e| Status::internal(format!("ImageFsInfo: cannot read {dir}: {e}")))?;
        let usage = cri::FilesystemUsage {
            timestamp: now_ns(),
            fs_id: Some(cri::FilesystemIdentifier { mountpoint: dir }),
            used_bytes: Some(cri::UInt64Value { value: bytes }),
            inodes_used: Some(cri::UInt64Value { value: inodes }),
        };
        Ok(Response::new(cri::ImageFsInfoResponse {
            image_filesystems: vec![usage],
            container_filesystems: Vec::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_files_and_dirs() {
        let root = std::env::temp_dir().join(format!("podscope-usage-{}", std::process::id()));
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), vec![1u8; 10_000]).unwrap();
        let (bytes, inodes) = usage_of(&root).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(inodes, 4, "root, a, b, f");
        assert!(bytes >= 10_000, "{bytes}");
    }
}
