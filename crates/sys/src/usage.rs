//! What a tree holds on its filesystem: the image store's layers, a
//! container's writable layer (podscoped's FsInfo, podscope-cri's stats).

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Bytes (allocated blocks) and inodes under `root`, not following links
/// and not crossing into other filesystems.
pub fn usage_of(root: &Path) -> std::io::Result<(u64, u64)> {
    let top = fs::symlink_metadata(root)?;
    let dev = top.dev();
    let (mut bytes, mut inodes) = (top.blocks() * 512, 1u64);
    let mut stack = vec![root.to_path_buf()];
    let mut seen = HashSet::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(md) = entry.metadata() else { continue };
            // A hardlinked file is one inode and its blocks once.
            if md.nlink() > 1 && !md.is_dir() && !seen.insert((md.dev(), md.ino())) {
                continue;
            }
            bytes += md.blocks() * 512;
            inodes += 1;
            if md.is_dir() && md.dev() == dev {
                stack.push(entry.path());
            }
        }
    }
    Ok((bytes, inodes))
}
