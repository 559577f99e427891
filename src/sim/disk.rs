//! The simulated disk. (Interface fixed; the model is being implemented.)
//!
//! ## Model
//! Each host owns one disk that outlives its process. A file (an inode) has a *durable*
//! image and a *page-cache* image; writes land in the page cache and mark 4 KiB pages
//! dirty with the simulated time they became dirty. Paths are relative, `/`-separated
//! (`orders-0/00000000000000000000.log`); directories are implicit (a directory is the
//! part of a path before its last `/`, the root is `""`).

use std::time::Duration;

/// What survives a power loss besides the durable image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PowerLossModel {
    /// Nothing: every dirty page is lost.
    DropUnflushed,
    /// A seeded subset of dirty pages had been written back.
    RandomWriteback,
    /// The last dirty page of each file persisted up to a seeded 512-byte sector.
    TornTail,
}

/// `[disk]` of a scenario.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DiskConfig {
    /// OS flusher interval (`dirty_writeback_centisecs`, Linux default 5 s).
    pub writeback: Duration,
    /// Pages dirty this long are written back (`dirty_expire_centisecs`, default 30 s).
    pub dirty_expire: Duration,
    pub fsync_latency: Duration,
    pub power_loss: PowerLossModel,
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            writeback: Duration::from_secs(5),
            dirty_expire: Duration::from_secs(30),
            fsync_latency: Duration::from_millis(2),
            power_loss: PowerLossModel::RandomWriteback,
        }
    }
}

/// Errors as the OS reports them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiskError {
    #[error("EIO: fsync of {0} failed")]
    Io(String),
    #[error("ENOSPC: no space left on device writing {0}")]
    NoSpace(String),
    #[error("ENOENT: no such file {0}")]
    NotFound(String),
}

/// A fault injected into a disk by the scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum DiskFault {
    /// The next fsync fails with EIO once; the dirty pages it would have written are dropped.
    FsyncError,
    /// Writes fail with ENOSPC until healed.
    Full,
    /// fsync and writes take this much longer until healed.
    Slow(Duration),
    /// Flip bits in `bytes` durable bytes at the tail of the newest file matching `glob`.
    Corrupt { glob: String, bytes: u64 },
    /// End Slow, Full and a pending FsyncError.
    Heal,
}
