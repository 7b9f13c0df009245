//! What the daemon keeps: the sandboxes and containers in memory (`index`),
//! their checkpoints on disk (`checkpoint`), and how it writes and removes
//! its own files (`files`).

pub mod checkpoint;
pub mod files;
pub mod index;
