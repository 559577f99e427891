//! The simulated disk: page cache, fsync, the OS flusher, power loss and disk faults.
//!
//! ## Model
//! Each host owns one disk that outlives its process: a [`Disk`] is a cheap handle the
//! world keeps, so a killed broker restarts on the very same files. Paths are relative,
//! `/`-separated (`orders-0/00000000000000000000.log`); directories are implicit (a
//! directory is the part of a path before its last `/`, the root is `""`), exist while they
//! hold a file, and cannot be empty.
//!
//! What is simulated:
//! - A file is an inode with a *durable* image (what the medium holds) and a *page-cache*
//!   image (what a process reads). Writes land in the page cache and mark 4 KiB pages dirty,
//!   stamped with the simulated time they *first* became dirty.
//! - Two namespaces map paths to inodes: the cached one (what a process sees) and the
//!   durable one. On the POSIX-minimum filesystem create, rename, delete and length changes
//!   are durable only after an fsync: `fsync(file)` makes the inode's data, its length and its current name durable (dropping
//!   any other durable name of that inode); `fsync_dir(dir)` makes the durable entries of the
//!   directory's direct children equal to the cached ones (and forgets durable entries under
//!   a subdirectory that no longer exists).
//! - The OS flusher ([`Disk::writeback`]) wakes every `writeback` interval and writes back
//!   the pages dirty for at least `dirty_expire` (Linux's `dirty_writeback_centisecs` and
//!   `dirty_expire_centisecs`).
//! - A process crash (kill -9) needs nothing from the disk: the page cache survives.
//!   A power loss ([`Disk::power_loss`]) drops the page cache: the namespace falls back to the
//!   durable one and each file to its durable image plus, on the POSIX-minimum filesystem
//!   and per [`PowerLossModel`], the dirty pages the disk happened to write: none, a seeded
//!   subset, or a torn last page.
//! - The device writes `throughput` bytes a second (unlimited by default): an fsync waits
//!   for its file's dirty pages behind what earlier fsyncs owe, and the flusher writes in
//!   the time they leave. Past `dirty_background_ratio` of `memory` the flusher writes the
//!   oldest dirty pages without waiting for them to expire; past `dirty_ratio` a writer
//!   waits in [`Disk::write_gate`] until it is back under (Linux's `balance_dirty_pages`).
//! - Faults: an fsync error with Linux semantics (reported once; the dirty pages it covered
//!   are marked clean without reaching the medium, so a later fsync succeeds without them),
//!   disk full, latent bit flips in durable bytes, slow fsync and writes, a slower device.
//! - The filesystem ([`Filesystem`]) decides when names and sizes reach the medium. ext4
//!   (`data=ordered`, delayed allocation) keeps them in its journal's running transaction
//!   and commits it `journal_commit` after its first change and at an fsync of a file or
//!   directory it holds a change of; a page gets blocks, and its file the size over it,
//!   only when written back, so a power loss keeps what the last commit named. The other
//!   choice is POSIX's minimum: a name durable only through an fsync, a size extended by
//!   each page written back.
//!
//! What is not, and why: an overwrite of allocated blocks waits for the next commit (ext4
//! writes it in place); the journal's writes take no device time. The
//! flusher works page by page (Linux expires whole inodes). There are no hard links, no
//! empty directories, no capacity accounting (disk full is a switch), no read errors, and
//! renames move files only (Kafka's partition-directory renames are out of scope).
//!
//! Why not turmoil's `unstable-fs`: its `crash` always discards unsynced writes (bar torn
//! blocks), so a process crash whose page cache survives cannot be told apart from a power
//! loss; unsynced writes become durable by chance (`sync_probability`), not by the age of
//! dirty pages, so there is no flusher to race; and its fsync never fails, let alone with
//! Linux's drop-the-dirty-pages semantics that Kafka must survive.
//!
//! Every random choice comes from a `StdRng` seeded by [`Disk::new`], so a seed replays.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::rc::Rc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::os::clock::{self, SimTime};
use crate::os::pages::Pages;

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

impl PowerLossModel {
    pub const ALL: [PowerLossModel; 3] = [
        PowerLossModel::DropUnflushed,
        PowerLossModel::RandomWriteback,
        PowerLossModel::TornTail,
    ];

    /// As a scenario file writes it (`[disk] power_loss`).
    pub const fn name(self) -> &'static str {
        match self {
            PowerLossModel::DropUnflushed => "drop-unflushed",
            PowerLossModel::RandomWriteback => "random-writeback",
            PowerLossModel::TornTail => "torn-tail",
        }
    }
}

/// When names and sizes reach the medium without an fsync.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Filesystem {
    /// ext4's defaults (`data=ordered`, `commit=5`, delayed allocation): creates, renames,
    /// deletes and sizes reach the medium at the journal's commits, every `journal_commit`
    /// and at an fsync of a file or directory the running transaction touched; a size
    /// grows only once the flusher has written (allocated) the pages under it.
    Ext4Ordered,
    /// POSIX's minimum: a name, rename or delete reaches the medium only through an fsync;
    /// a page the flusher writes extends the file's size on the medium at once.
    NoMetadataWriteback,
}

impl Filesystem {
    pub const ALL: [Filesystem; 2] = [Filesystem::Ext4Ordered, Filesystem::NoMetadataWriteback];

    /// As a scenario file writes it (`[disk] filesystem`).
    pub const fn name(self) -> &'static str {
        match self {
            Filesystem::Ext4Ordered => "ext4-ordered",
            Filesystem::NoMetadataWriteback => "no-metadata-writeback",
        }
    }
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
    pub filesystem: Filesystem,
    /// How long ext4's running transaction may stay open (the `commit=` mount option).
    pub journal_commit: Duration,
    /// What the device writes per second; `None` writes any amount at once.
    pub throughput: Option<u64>,
    /// The host's dirtyable memory, which the dirty ratios are percentages of.
    pub memory: u64,
    /// Writers are throttled while dirty pages exceed this percentage of `memory`
    /// (`vm.dirty_ratio`).
    pub dirty_ratio: u64,
    /// The flusher writes the oldest pages while dirty pages exceed this percentage of
    /// `memory` (`vm.dirty_background_ratio`).
    pub dirty_background_ratio: u64,
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            writeback: Duration::from_secs(5),
            dirty_expire: Duration::from_secs(30),
            fsync_latency: Duration::from_millis(2),
            power_loss: PowerLossModel::RandomWriteback,
            filesystem: Filesystem::Ext4Ordered,
            journal_commit: Duration::from_secs(5),
            throughput: None,
            memory: 16 << 30,
            dirty_ratio: 20,
            dirty_background_ratio: 10,
        }
    }
}

impl DiskConfig {
    /// Dirty bytes above which a writer waits (`balance_dirty_pages`).
    pub fn dirty_limit(&self) -> u64 {
        self.memory / 100 * self.dirty_ratio
    }

    /// Dirty bytes above which the flusher writes without waiting for pages to expire.
    /// As Linux does, a background ratio not below the dirty ratio counts as half of it
    /// (`domain_dirty_limits`).
    pub fn background_limit(&self) -> u64 {
        if self.dirty_background_ratio >= self.dirty_ratio {
            self.dirty_limit() / 2
        } else {
            self.memory / 100 * self.dirty_background_ratio
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
    /// The device writes this many bytes per second until healed.
    Throughput(u64),
    /// Flip bits in `bytes` durable bytes at the tail of the newest file matching `glob`.
    Corrupt { glob: String, bytes: u64 },
    /// Flip bits in `bytes` contiguous durable bytes of the newest file matching `glob`,
    /// from a seeded position. Its own variant rather than a field of `Corrupt`, so that
    /// the trace of a tail corruption reads as it always has.
    CorruptAnywhere { glob: String, bytes: u64 },
    /// End Slow, Full and a pending FsyncError.
    Heal,
}

pub use crate::os::pages::PAGE_BYTES;
/// The unit a torn write persists in.
pub const SECTOR_BYTES: u64 = 512;
/// What writing one page costs the device's credit (bytes times 10⁹).
const PAGE_COST: u128 = PAGE_BYTES as u128 * 1_000_000_000;

/// One host's disk. Clones share the same files: the world keeps one, the host's process
/// gets another, and a crash of the process leaves the world's intact.
#[derive(Clone)]
pub struct Disk {
    state: Rc<RefCell<DiskState>>,
}

struct DiskState {
    config: DiskConfig,
    rng: StdRng,
    /// Inode numbers grow with every create, so the largest is the newest file.
    inodes: BTreeMap<u64, Inode>,
    next_ino: u64,
    /// The namespace a process sees.
    names: BTreeMap<String, u64>,
    /// The namespace on the medium.
    durable_names: BTreeMap<String, u64>,
    fsync_error: bool,
    /// A mutation test's bug: fsync succeeds and makes nothing durable.
    fsync_lies: bool,
    /// A mutation test's bug: a power loss loses nothing.
    cache_survives_power_loss: bool,
    /// A mutation test's bug: the journal commits nothing on its timer, and an fsync only
    /// its own file.
    journal_per_file: bool,
    full: bool,
    slow: Duration,
    /// Bytes per second the device writes now: the configured rate, or a `slow-disk`'s.
    throughput: Option<u64>,
    /// Dirty pages in every file: what background writeback and throttling measure.
    dirty_pages: u64,
    /// The device is busy with what fsyncs asked of it until then.
    busy_until: SimTime,
    /// The flusher has used the device's time up to here.
    flushed_to: SimTime,
    /// What the device can still write for the flusher under a throughput, in bytes times
    /// 10⁹ (byte-nanoseconds per second), so that no fraction of a byte is lost per tick.
    credit: u128,
    /// An expired-page pass that the device's throughput has not finished.
    expiring: bool,
    /// When the flusher next wakes; `writeback` is called every tick and must stay cheap.
    next_writeback: SimTime,
    /// ext4's running transaction; always empty on the other filesystem.
    journal: Journal,
}

/// ext4's running transaction (jbd2): the metadata its next commit makes durable.
#[derive(Default)]
struct Journal {
    /// Paths whose entry changed since the last commit: created, renamed from or to, deleted.
    names: BTreeSet<String>,
    /// Inodes whose image on the medium changes at the commit (their `next`).
    inodes: BTreeSet<u64>,
    /// When the transaction commits: `journal_commit` after its first change (a write's
    /// mtime is one). None while nothing changed since the last commit.
    commit_at: Option<SimTime>,
}

/// Invariant: outside dirty pages (and pages dropped by a failed fsync), `cached` equals
/// `durable` read with zeros past its end, up to `cached.len()`. This is what lets an fsync
/// write only the dirty pages instead of the whole file. The images share their clean
/// pages ([`Pages`]), so a file's bytes are in memory once.
struct Inode {
    cached: Pages,
    /// What the medium holds: after a power loss, the file.
    durable: Pages,
    /// ext4: the medium as the running transaction will commit it (the pages written back
    /// since the last commit, sizes set or grown by write-back); `durable` until then.
    next: Option<Pages>,
    /// Page index -> simulated time the page first became dirty.
    dirty: BTreeMap<u64, SimTime>,
    cached_name: Option<String>,
    durable_name: Option<String>,
    /// The longest the cached image has been: the medium can never hold more.
    longest: u64,
    /// The first bytes the last fsync made durable and nothing has changed since: the
    /// medium must go on holding them, whatever the flusher, the journal or a power loss
    /// does (asserted at each power loss).
    synced: u64,
    /// Pages a failed fsync marked clean without writing them, until written again: an
    /// fsync that succeeds later leaves them as the medium held them.
    dropped: BTreeSet<u64>,
}

impl Inode {
    fn new() -> Inode {
        Inode {
            longest: 0,
            synced: 0,
            dropped: BTreeSet::new(),
            cached: Pages::new(),
            durable: Pages::new(),
            next: None,
            dirty: BTreeMap::new(),
            cached_name: None,
            durable_name: None,
        }
    }

    fn len(&self) -> u64 {
        self.cached.len()
    }

    /// The image that write-back and fsync change: the transaction's, if one is open.
    fn medium(&self) -> &Pages {
        self.next.as_ref().unwrap_or(&self.durable)
    }

    fn mark_dirty(&mut self, start: u64, end: u64, now: SimTime) {
        if end <= start {
            return;
        }
        for page in start / PAGE_BYTES..=(end - 1) / PAGE_BYTES {
            self.dirty.entry(page).or_insert(now);
            self.dropped.remove(&page);
        }
    }

    /// A failed fsync: the dirty pages are marked clean without reaching the medium.
    fn drop_dirty(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        self.dropped.extend(dirty.into_keys());
    }

    /// Grow the cached image with zeros. Where the durable image still holds bytes there
    /// (it was shrunk but not synced), the zeros differ from the medium: those pages are dirty.
    fn extend_to(&mut self, new_len: u64, now: SimTime) {
        let old_len = self.len();
        if new_len <= old_len {
            return;
        }
        let stale_end = new_len.min(self.medium().len());
        self.mark_dirty(old_len, stale_end, now);
        self.cached.set_len(new_len);
        self.longest = self.longest.max(new_len);
    }

    fn set_len(&mut self, new_len: u64, now: SimTime) {
        self.synced = self.synced.min(new_len);
        if new_len < self.len() {
            self.cached.set_len(new_len);
            self.dirty.split_off(&new_len.div_ceil(PAGE_BYTES));
            self.dropped.split_off(&new_len.div_ceil(PAGE_BYTES));
        } else {
            self.extend_to(new_len, now);
        }
    }

    fn write(&mut self, offset: u64, data: &[u8], now: SimTime) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        self.synced = self.synced.min(offset);
        self.extend_to(offset, now);
        self.cached.write(offset, data);
        self.mark_dirty(offset, end, now);
        self.longest = self.longest.max(end);
    }

    /// Put the first `limit` bytes of a cached page on the medium (the flusher, or the
    /// part of a page a power loss let through). What reaches the medium is what the
    /// process wrote: the bytes the cache holds, within the longest the file has been.
    fn write_back(&mut self, page: u64, limit: u64) {
        let medium = self.next.as_mut().unwrap_or(&mut self.durable);
        medium.copy_page_from(&self.cached, page, limit);
        debug_assert!(
            self.medium().len() <= self.longest,
            "the medium holds {} bytes of a file never longer than {}",
            self.medium().len(),
            self.longest
        );
        debug_assert!(
            {
                let start = page * PAGE_BYTES;
                let n = limit
                    .min(PAGE_BYTES)
                    .min(self.cached.len().saturating_sub(start)) as usize;
                self.medium().read(start, n) == self.cached.read(start, n)
            },
            "page {page} reads back from the medium as the cache held it"
        );
    }

    /// Make data and length durable: only dirty pages are written.
    fn sync(&mut self) {
        let medium = self.next.as_mut().unwrap_or(&mut self.durable);
        medium.set_len(self.cached.len());
        for &page in self.dirty.keys() {
            medium.copy_page_from(&self.cached, page, PAGE_BYTES);
            debug_assert!(
                medium.read(page * PAGE_BYTES, PAGE_BYTES as usize)
                    == self.cached.read(page * PAGE_BYTES, PAGE_BYTES as usize),
                "a synced page {page} reads back from the medium as the cache holds it"
            );
        }
        self.dirty.clear();
        let first_dropped = self
            .dropped
            .first()
            .map_or(u64::MAX, |page| page * PAGE_BYTES);
        self.synced = self.cached.len().min(first_dropped);
        debug_assert_eq!(self.medium().len(), self.cached.len(), "a synced length");
    }

    /// What an fsync made durable and nothing changed since is still on the medium.
    fn assert_synced_range_durable(&self) {
        debug_assert!(
            self.durable.len() >= self.synced
                && self.durable.same_prefix(&self.cached, self.synced),
            "the first {} bytes, fsynced, reach the medium unchanged",
            self.synced
        );
    }
}

/// `"a/b"` -> `"a/b/"`, `""` -> `""`: the prefix of every path under a directory.
fn dir_prefix(dir: &str) -> String {
    let dir = dir.trim_end_matches('/');
    if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    }
}

/// Paths of `map` under `prefix`, in order.
fn under<'a>(
    map: &'a BTreeMap<String, u64>,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a String, &'a u64)> + 'a {
    map.range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
        .take_while(move |(path, _)| path.starts_with(prefix))
}

/// A child of a directory: a file (`Ok`) or the name of a subdirectory (`Err`).
fn child<'a>(path: &'a str, prefix: &str) -> Result<&'a str, &'a str> {
    let rest = &path[prefix.len()..];
    match rest.find('/') {
        None => Ok(rest),
        Some(slash) => Err(&rest[..slash]),
    }
}

impl DiskState {
    fn inode(&self, path: &str) -> Result<&Inode, DiskError> {
        self.names
            .get(path)
            .map(|ino| &self.inodes[ino])
            .ok_or_else(|| DiskError::NotFound(path.to_string()))
    }

    fn check_space(&self, path: &str) -> Result<(), DiskError> {
        if self.full {
            Err(DiskError::NoSpace(path.to_string()))
        } else {
            Ok(())
        }
    }

    /// The inode number at `path`, created empty if missing.
    fn open_or_create(&mut self, path: &str) -> u64 {
        match self.names.get(path) {
            Some(&ino) => ino,
            None => {
                let ino = self.next_ino;
                self.next_ino += 1;
                let mut inode = Inode::new();
                inode.cached_name = Some(path.to_string());
                self.inodes.insert(ino, inode);
                self.names.insert(path.to_string(), ino);
                self.name_changed(path);
                ino
            }
        }
    }

    fn journaled(&self) -> bool {
        self.config.filesystem == Filesystem::Ext4Ordered
    }

    /// ext4: a change the running transaction records (a write's mtime is one) opens it if
    /// none is open, to commit `journal_commit` later (jbd2's `t_expires`).
    fn journal_change(&mut self) {
        if self.journaled() && self.journal.commit_at.is_none() {
            self.journal.commit_at = Some(clock::now() + self.config.journal_commit);
        }
    }

    /// ext4: the entry at `path` changed (a create, a rename, a delete).
    fn name_changed(&mut self, path: &str) {
        if self.journaled() {
            self.journal.names.insert(path.to_string());
            self.journal_change();
        }
    }

    /// ext4: the file's image on the medium is about to change (a size set, pages written
    /// back and allocated): the running transaction holds the changed image until it commits.
    fn stage(&mut self, ino: u64) {
        if !self.journaled() {
            return;
        }
        let inode = self.inodes.get_mut(&ino).expect("every name has its inode");
        if inode.next.is_none() {
            inode.next = Some(inode.durable.clone());
        }
        self.journal.inodes.insert(ino);
        self.journal_change();
    }

    /// ext4's commit: every change of the running transaction reaches the medium at once.
    /// Under data=ordered the pages below a new size are on the medium before it: they are
    /// the pages written back into `next`.
    fn commit(&mut self) {
        let journal = std::mem::take(&mut self.journal);
        for ino in journal.inodes {
            if let Some(inode) = self.inodes.get_mut(&ino) {
                if let Some(next) = inode.next.take() {
                    inode.durable = next;
                }
            }
        }
        for path in journal.names {
            match self.names.get(&path) {
                Some(&ino) => self.link_durable(ino, &path),
                None => self.unlink_durable(&path),
            }
        }
        debug_assert!(
            self.names == self.durable_names,
            "a commit leaves on the medium the namespace processes see"
        );
        debug_assert!(
            self.inodes.values().all(|inode| inode.next.is_none()),
            "a commit leaves no file's image pending"
        );
    }

    /// ext4's `auto_da_alloc`: a rename over an existing file first writes back the renamed
    /// file's pages, so that the commit holding the rename holds its data too
    /// (`ext4_rename` calls `ext4_alloc_da_blocks`): what saves the programs that replace a
    /// file without an fsync.
    fn allocate_on_replace(&mut self, ino: u64) {
        if !self.journaled() {
            return;
        }
        self.stage(ino);
        self.change(ino, |inode| {
            let pages: Vec<u64> = inode.dirty.keys().copied().collect();
            for page in pages {
                inode.write_back(page, PAGE_BYTES);
            }
            inode.dirty.clear();
        });
    }

    /// The mutation tests' journal that commits one file at a time: its image and name.
    fn commit_file(&mut self, ino: u64, path: &str) {
        self.journal.inodes.remove(&ino);
        self.journal.names.remove(path);
        let inode = self.inodes.get_mut(&ino).expect("every name has its inode");
        if let Some(next) = inode.next.take() {
            inode.durable = next;
        }
        self.link_durable(ino, path);
    }

    /// Truncate or extend a file. ext4 journals the new size at once (`ext4_setattr` sets
    /// `i_disksize`): the next commit makes it durable, zeros past the old end included.
    fn set_len(&mut self, ino: u64, len: u64, now: SimTime) {
        self.stage(ino);
        self.change(ino, |inode| {
            inode.set_len(len, now);
            if let Some(next) = &mut inode.next {
                next.set_len(len);
            }
        });
    }

    /// Change inode `ino` with `f`, keeping the count of dirty pages.
    fn change<R>(&mut self, ino: u64, f: impl FnOnce(&mut Inode) -> R) -> R {
        let inode = self.inodes.get_mut(&ino).expect("every name has its inode");
        let before = inode.dirty.len() as u64;
        let result = f(inode);
        let after = inode.dirty.len() as u64;
        self.dirty_pages = self.dirty_pages - before + after;
        result
    }

    fn count_dirty(&self) -> u64 {
        self.inodes
            .values()
            .map(|inode| inode.dirty.len() as u64)
            .sum()
    }

    /// Forget an inode that no namespace refers to any more.
    fn collect(&mut self, ino: u64) {
        if let Some(inode) = self.inodes.get(&ino) {
            if inode.cached_name.is_none() && inode.durable_name.is_none() {
                self.inodes.remove(&ino);
            }
        }
    }

    /// Unlink `path` from the cached namespace. The kernel drops an unlinked file's page
    /// cache, so its dirty pages never reach the medium.
    fn unlink(&mut self, path: &str) -> Option<u64> {
        let ino = self.names.remove(path)?;
        self.name_changed(path);
        self.change(ino, |inode| {
            inode.cached_name = None;
            inode.dirty.clear();
            inode.cached = Pages::new();
            inode.synced = 0;
        });
        self.collect(ino);
        Some(ino)
    }

    fn unlink_durable(&mut self, path: &str) {
        if let Some(ino) = self.durable_names.remove(path) {
            if let Some(inode) = self.inodes.get_mut(&ino) {
                inode.durable_name = None;
            }
            self.collect(ino);
        }
    }

    /// Make `path` the one durable name of `ino`.
    fn link_durable(&mut self, ino: u64, path: &str) {
        if self.durable_names.get(path) == Some(&ino) {
            return;
        }
        let old = self
            .inodes
            .get_mut(&ino)
            .and_then(|inode| inode.durable_name.take());
        if let Some(old) = old {
            self.durable_names.remove(&old);
        }
        self.unlink_durable(path);
        self.durable_names.insert(path.to_string(), ino);
        if let Some(inode) = self.inodes.get_mut(&ino) {
            inode.durable_name = Some(path.to_string());
        }
    }

    fn take_fsync_error(&mut self) -> bool {
        std::mem::take(&mut self.fsync_error)
    }

    fn fsync(&mut self, path: &str) -> Result<(), DiskError> {
        let ino = *self
            .names
            .get(path)
            .ok_or_else(|| DiskError::NotFound(path.to_string()))?;
        let failed = self.take_fsync_error();
        if self.fsync_lies && !failed {
            return Ok(());
        }
        if failed {
            self.change(ino, Inode::drop_dirty);
            return Err(DiskError::Io(path.to_string()));
        }
        if self.journaled() {
            // ext4_sync_file: write the file's pages, then commit the transaction that
            // holds its last change, with every other change in it; none if it has none.
            let inode = &self.inodes[&ino];
            let touched = !inode.dirty.is_empty()
                || inode.next.is_some()
                || self.journal.names.contains(path);
            if touched {
                if self.journal_per_file {
                    self.stage(ino);
                    self.change(ino, Inode::sync);
                    self.commit_file(ino, path);
                } else {
                    // The commit follows at once: a file with nothing staged syncs straight
                    // to the medium, sparing a copy of its page table (a preallocated
                    // 1 GiB file has 262,144 entries) that the commit would swap back in.
                    if inode.next.is_some() {
                        self.stage(ino);
                    }
                    self.change(ino, Inode::sync);
                    self.commit();
                }
            }
            return Ok(());
        }
        self.change(ino, Inode::sync);
        self.link_durable(ino, path);
        Ok(())
    }

    fn fsync_dir(&mut self, dir: &str) -> Result<(), DiskError> {
        if self.take_fsync_error() {
            return Err(DiskError::Io(dir.to_string()));
        }
        if self.fsync_lies {
            return Ok(());
        }
        let prefix = dir_prefix(dir);
        // (The per-file journal of the mutation tests makes a directory's entries durable
        // as the stricter filesystem does, below.)
        if self.journaled() && !self.journal_per_file {
            // A directory's entries change in the running transaction: commit it if any
            // did under this one (a subdirectory's changes count: directories are implicit).
            let changed = self
                .journal
                .names
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .next()
                .is_some_and(|path| path.starts_with(&prefix));
            if changed {
                self.commit();
            }
            return Ok(());
        }
        let stale: Vec<String> = under(&self.durable_names, &prefix)
            .filter(|&(path, ino)| match child(path, &prefix) {
                Ok(_) => self.names.get(path) != Some(ino),
                Err(subdir) => {
                    let sub_prefix = format!("{prefix}{subdir}/");
                    let gone = under(&self.names, &sub_prefix).next().is_none();
                    gone
                }
            })
            .map(|(path, _)| path.clone())
            .collect();
        for path in stale {
            self.unlink_durable(&path);
        }
        let current: Vec<(String, u64)> = under(&self.names, &prefix)
            .filter(|(path, _)| child(path, &prefix).is_ok())
            .map(|(path, &ino)| (path.clone(), ino))
            .collect();
        for (path, ino) in current {
            self.link_durable(ino, &path);
        }
        Ok(())
    }

    /// The flusher, once a tick: at each `writeback` interval it writes the pages dirty for
    /// `dirty_expire`, and while dirty pages pass the background limit it writes the
    /// oldest, as Linux's flusher does (`wb_workfn`: kupdate and background writeback).
    /// Under a throughput both share what the device can write after the fsyncs it owes.
    fn writeback(&mut self, now: SimTime) {
        self.earn_credit(now);
        if now >= self.next_writeback {
            self.next_writeback = now + self.config.writeback;
            self.expiring = true;
            debug_assert_eq!(self.dirty_pages, self.count_dirty(), "the dirty count");
        }
        if self.expiring {
            let expire = self.config.dirty_expire;
            self.expiring = self.write_oldest(|since, _| now - since >= expire);
        }
        if self.over_background() {
            let limit = self.config.background_limit();
            self.write_oldest(|_, dirty_pages| dirty_pages * PAGE_BYTES > limit);
        }
        if !self.expiring && !self.over_background() {
            self.credit = 0;
        }
        if self.journal.commit_at.is_some_and(|at| now >= at) && !self.journal_per_file {
            self.commit();
        }
    }

    fn over_background(&self) -> bool {
        self.dirty_pages * PAGE_BYTES > self.config.background_limit()
    }

    /// What the device could write for the flusher since the last tick, past the fsyncs.
    fn earn_credit(&mut self, now: SimTime) {
        let Some(throughput) = self.throughput else {
            return;
        };
        let from = self.flushed_to.max(self.busy_until);
        if now > from {
            let earned = (now - from).as_nanos() * u128::from(throughput);
            self.credit = self.credit.saturating_add(earned);
        }
        self.flushed_to = now;
    }

    /// Write back dirty pages, oldest first (a file's pages in order), while `wanted(page's
    /// dirty time, dirty pages now)` holds and the device has credit. True if a wanted page
    /// is left.
    fn write_oldest(&mut self, wanted: impl Fn(SimTime, u64) -> bool) -> bool {
        let limited = self.throughput.is_some();
        if limited && self.credit < PAGE_COST {
            return self.inodes.values().any(|inode| {
                inode
                    .dirty
                    .values()
                    .any(|&since| wanted(since, self.dirty_pages))
            });
        }
        let mut pages: Vec<(SimTime, u64, u64)> = self
            .inodes
            .iter()
            .flat_map(|(&ino, inode)| {
                inode
                    .dirty
                    .iter()
                    .map(move |(&page, &since)| (since, ino, page))
            })
            .collect();
        pages.sort_unstable();
        for (since, ino, page) in pages {
            if !wanted(since, self.dirty_pages) {
                continue;
            }
            if limited {
                if self.credit < PAGE_COST {
                    return true;
                }
                self.credit -= PAGE_COST;
            }
            self.stage(ino);
            let inode = self.inodes.get_mut(&ino).expect("listed above");
            inode.dirty.remove(&page);
            inode.write_back(page, PAGE_BYTES);
            self.dirty_pages -= 1;
        }
        false
    }

    /// How long a writer waits before it may dirty more pages: nothing below the dirty
    /// limit; above it, the time the device needs to write the excess, in pauses of 1 to
    /// 200 ms (`balance_dirty_pages`, whose pauses are at most `MAX_PAUSE`, 200 ms).
    fn throttle_pause(&self) -> Duration {
        let dirty = self.dirty_pages * PAGE_BYTES;
        let limit = self.config.dirty_limit();
        if dirty <= limit {
            return Duration::ZERO;
        }
        let need = match self.throughput {
            Some(throughput) => Duration::from_nanos(
                ((dirty - limit) as u128 * 1_000_000_000 / u128::from(throughput)) as u64,
            ),
            None => Duration::ZERO,
        };
        need.clamp(Duration::from_millis(1), Duration::from_millis(200))
    }

    /// How long an fsync of `path` (None: a directory) takes from `now`: the latency, a
    /// slow disk's extra, and under a throughput the time to write the file's dirty pages
    /// after what the device already owes.
    fn fsync_delay(&mut self, path: Option<&str>, now: SimTime) -> Duration {
        let delay = self.config.fsync_latency + self.slow;
        let (Some(throughput), Some(path)) = (self.throughput, path) else {
            return delay;
        };
        let pages = self.inode(path).map_or(0, |inode| inode.dirty.len() as u64);
        let nanos = u128::from(pages * PAGE_BYTES) * 1_000_000_000 / u128::from(throughput);
        self.busy_until = self.busy_until.max(now) + Duration::from_nanos(nanos as u64);
        delay + (self.busy_until - now)
    }

    fn power_loss(&mut self) {
        // ext4 commits a size only after the pages below it: a page the device writes at
        // the instant of the power loss has no committed size to be read through.
        let model = if self.journaled() {
            PowerLossModel::DropUnflushed
        } else {
            self.config.power_loss
        };
        let rng = &mut self.rng;
        self.inodes.retain(|_, inode| inode.durable_name.is_some());
        for inode in self.inodes.values_mut() {
            inode.assert_synced_range_durable();
            match model {
                PowerLossModel::DropUnflushed => {}
                PowerLossModel::RandomWriteback => {
                    let dirty: Vec<u64> = inode.dirty.keys().copied().collect();
                    for page in dirty {
                        if rng.random_bool(0.5) {
                            inode.write_back(page, PAGE_BYTES);
                        }
                    }
                }
                PowerLossModel::TornTail => {
                    if let Some(&page) = inode.dirty.keys().next_back() {
                        let in_page = inode
                            .len()
                            .saturating_sub(page * PAGE_BYTES)
                            .min(PAGE_BYTES);
                        let sectors = rng.random_range(0..=in_page.div_ceil(SECTOR_BYTES));
                        inode.write_back(page, sectors * SECTOR_BYTES);
                    }
                }
            }
            inode.dirty.clear();
            inode.next = None;
            inode.dropped.clear();
            inode.cached = inode.durable.clone();
            inode.synced = inode.cached.len();
            inode.cached_name.clone_from(&inode.durable_name);
        }
        self.journal = Journal::default();
        self.names.clone_from(&self.durable_names);
        self.dirty_pages = 0;
        self.credit = 0;
        self.expiring = false;
    }

    /// The newest file matching `glob`: the inode created last.
    fn newest_matching(&self, glob: &str) -> Result<u64, DiskError> {
        let matcher = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| DiskError::NotFound(format!("{glob} ({e})")))?
            .compile_matcher();
        self.names
            .iter()
            .filter(|(path, _)| matcher.is_match(path.as_str()))
            .map(|(_, &ino)| ino)
            .max()
            .ok_or_else(|| DiskError::NotFound(glob.to_string()))
    }

    fn corrupt_tail(&mut self, glob: &str, bytes: u64) -> Result<(), DiskError> {
        let ino = self.newest_matching(glob)?;
        let end = self.inodes[&ino].durable.len();
        self.flip(ino, end.saturating_sub(bytes), end);
        Ok(())
    }

    fn corrupt_anywhere(&mut self, glob: &str, bytes: u64) -> Result<(), DiskError> {
        let ino = self.newest_matching(glob)?;
        let len = self.inodes[&ino].durable.len();
        let start = self.rng.random_range(0..=len.saturating_sub(bytes));
        self.flip(ino, start, len.min(start.saturating_add(bytes)));
        Ok(())
    }

    /// Flip one seeded bit in each durable byte of `ino` from `start` to `end`.
    fn flip(&mut self, ino: u64, start: u64, end: u64) {
        let inode = self.inodes.get_mut(&ino).expect("every name has its inode");
        for at in start..end {
            let mask = 1u8 << self.rng.random_range(0..8);
            inode.synced = inode.synced.min(at);
            inode.durable.flip(at, mask);
            if let Some(next) = inode.next.as_mut().filter(|next| at < next.len()) {
                next.flip(at, mask);
            }
            // A clean cached page mirrors the medium, so a reader sees the flip; a dirty one
            // holds newer bytes that will overwrite it.
            if at < inode.cached.len() && !inode.dirty.contains_key(&(at / PAGE_BYTES)) {
                inode.cached.flip(at, mask);
            }
        }
    }
}

impl Disk {
    pub fn new(config: DiskConfig, seed: u64) -> Disk {
        let next_writeback = SimTime::after_start(config.writeback);
        Disk {
            state: Rc::new(RefCell::new(DiskState {
                throughput: config.throughput,
                config,
                rng: StdRng::seed_from_u64(seed),
                inodes: BTreeMap::new(),
                next_ino: 0,
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                fsync_error: false,
                fsync_lies: false,
                cache_survives_power_loss: false,
                journal_per_file: false,
                full: false,
                slow: Duration::ZERO,
                dirty_pages: 0,
                busy_until: SimTime::ZERO,
                flushed_to: SimTime::ZERO,
                credit: 0,
                expiring: false,
                next_writeback,
                journal: Journal::default(),
            })),
        }
    }

    /// A file, or a directory holding at least one file (the root always exists).
    pub fn exists(&self, path: &str) -> bool {
        let state = self.state.borrow();
        if state.names.contains_key(path) {
            return true;
        }
        let prefix = dir_prefix(path);
        prefix.is_empty() || under(&state.names, &prefix).next().is_some()
    }

    /// Direct children of `dir`: file names and subdirectory names, sorted.
    pub fn list(&self, dir: &str) -> Vec<String> {
        self.children(dir, |_| true)
    }

    /// Direct subdirectories of `dir`, sorted.
    pub fn list_dirs(&self, dir: &str) -> Vec<String> {
        self.children(dir, |child| child.is_err())
    }

    fn children(&self, dir: &str, keep: impl Fn(&Result<&str, &str>) -> bool) -> Vec<String> {
        let state = self.state.borrow();
        let prefix = dir_prefix(dir);
        let names: BTreeSet<&str> = under(&state.names, &prefix)
            .map(|(path, _)| child(path, &prefix))
            .filter(|child| keep(child))
            .map(|child| child.unwrap_or_else(|subdir| subdir))
            .collect();
        names.into_iter().map(str::to_string).collect()
    }

    pub fn len(&self, path: &str) -> Result<u64, DiskError> {
        Ok(self.state.borrow().inode(path)?.len())
    }

    /// Up to `len` bytes from `offset`; shorter at the end of the file.
    pub fn read(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, DiskError> {
        Ok(self.state.borrow().inode(path)?.cached.read(offset, len))
    }

    /// [`read`](Self::read) into the caller's buffer: for the small reads a lookup repeats,
    /// like the batch headers an offset search walks.
    pub fn read_into(&self, path: &str, offset: u64, buf: &mut [u8]) -> Result<usize, DiskError> {
        Ok(self
            .state
            .borrow()
            .inode(path)?
            .cached
            .read_into(offset, buf))
    }

    pub fn read_all(&self, path: &str) -> Result<Vec<u8>, DiskError> {
        Ok(self.state.borrow().inode(path)?.cached.to_vec())
    }

    /// An empty file; an existing one is truncated (`O_CREAT | O_TRUNC`).
    pub fn create(&self, path: &str) -> Result<(), DiskError> {
        let mut state = self.state.borrow_mut();
        state.check_space(path)?;
        let ino = state.open_or_create(path);
        state.set_len(ino, 0, clock::now());
        Ok(())
    }

    /// Write at `offset`, creating the file if missing; a gap before `offset` reads as zeros.
    pub fn write(&self, path: &str, offset: u64, data: &[u8]) -> Result<(), DiskError> {
        let mut state = self.state.borrow_mut();
        state.check_space(path)?;
        let ino = state.open_or_create(path);
        state.journal_change();
        state.change(ino, |inode| inode.write(offset, data, clock::now()));
        Ok(())
    }

    /// Write at the end of the file (creating it if missing); returns where.
    pub fn append(&self, path: &str, data: &[u8]) -> Result<u64, DiskError> {
        let mut state = self.state.borrow_mut();
        state.check_space(path)?;
        let ino = state.open_or_create(path);
        state.journal_change();
        Ok(state.change(ino, |inode| {
            let position = inode.len();
            inode.write(position, data, clock::now());
            position
        }))
    }

    /// Truncate or extend (with zeros) the cached file; durable at the next fsync.
    pub fn set_len(&self, path: &str, len: u64) -> Result<(), DiskError> {
        let mut state = self.state.borrow_mut();
        let ino = *state
            .names
            .get(path)
            .ok_or_else(|| DiskError::NotFound(path.to_string()))?;
        state.set_len(ino, len, clock::now());
        Ok(())
    }

    /// Move a file, replacing any file at `to`; durable after fsync of the file or the dirs.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), DiskError> {
        let mut state = self.state.borrow_mut();
        let ino = *state
            .names
            .get(from)
            .ok_or_else(|| DiskError::NotFound(from.to_string()))?;
        if from == to {
            return Ok(());
        }
        if state.unlink(to).is_some() {
            state.allocate_on_replace(ino);
        }
        state.names.remove(from);
        state.name_changed(from);
        state.name_changed(to);
        state.names.insert(to.to_string(), ino);
        state
            .inodes
            .get_mut(&ino)
            .expect("every name has its inode")
            .cached_name = Some(to.to_string());
        Ok(())
    }

    pub fn delete(&self, path: &str) -> Result<(), DiskError> {
        let mut state = self.state.borrow_mut();
        state
            .unlink(path)
            .map(|_| ())
            .ok_or_else(|| DiskError::NotFound(path.to_string()))
    }

    /// Delete every file under `dir`, recursively; NotFound if there is none.
    pub fn delete_dir(&self, dir: &str) -> Result<(), DiskError> {
        let mut state = self.state.borrow_mut();
        let prefix = dir_prefix(dir);
        let paths: Vec<String> = under(&state.names, &prefix)
            .map(|(path, _)| path.clone())
            .collect();
        if paths.is_empty() {
            return Err(DiskError::NotFound(dir.to_string()));
        }
        for path in paths {
            state.unlink(&path);
        }
        Ok(())
    }

    /// fsync after the simulated fsync latency and, under a throughput, the time to write
    /// the file's dirty pages (use inside hosts).
    pub async fn fsync(&self, path: &str) -> Result<(), DiskError> {
        let delay = self
            .state
            .borrow_mut()
            .fsync_delay(Some(path), clock::now());
        sleep(delay).await;
        self.fsync_now(path)
    }

    /// From now on fsync reports success and makes nothing durable: a bug a mutation test
    /// injects to prove that a power loss then shows the loss.
    pub fn inject_lying_fsync(&self) {
        self.state.borrow_mut().fsync_lies = true;
    }

    /// From now on a power loss keeps the page cache: a bug a mutation test injects to prove
    /// that the lessons about unflushed writes depend on losing them.
    pub fn inject_cache_that_survives_power_loss(&self) {
        self.state.borrow_mut().cache_survives_power_loss = true;
    }

    /// From now on ext4's journal commits nothing on its timer and an fsync only its own
    /// file: a bug a mutation test injects to prove that what a power loss keeps without an
    /// fsync of the segment depends on the journal's commits.
    pub fn inject_journal_per_file(&self) {
        self.state.borrow_mut().journal_per_file = true;
    }

    /// fsync of a directory after the simulated fsync latency (use inside hosts).
    pub async fn fsync_dir(&self, dir: &str) -> Result<(), DiskError> {
        let delay = self.state.borrow_mut().fsync_delay(None, clock::now());
        sleep(delay).await;
        self.fsync_dir_now(dir)
    }

    /// Make the file's data, length and current name durable, at once.
    pub fn fsync_now(&self, path: &str) -> Result<(), DiskError> {
        self.state.borrow_mut().fsync(path)
    }

    /// Make the directory's entries (creates, renames, deletes) durable, at once.
    pub fn fsync_dir_now(&self, dir: &str) -> Result<(), DiskError> {
        self.state.borrow_mut().fsync_dir(dir)
    }

    /// What a writer waits before a batch of writes: a slow disk's latency, then, while
    /// dirty pages pass the dirty limit, the pauses of Linux's `balance_dirty_pages`. Every
    /// process that writes calls it before it writes; with neither it returns at once,
    /// without yielding.
    pub async fn write_gate(&self) {
        let slow = self.state.borrow().slow;
        sleep(slow).await;
        loop {
            let pause = self.state.borrow().throttle_pause();
            if pause.is_zero() {
                return;
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Bytes in dirty pages, in every file.
    pub fn dirty_bytes(&self) -> u64 {
        self.state.borrow().dirty_pages * PAGE_BYTES
    }

    /// The OS flusher; called by the world every tick, acts every `writeback` interval.
    pub fn writeback(&self, now: SimTime) {
        self.state.borrow_mut().writeback(now);
    }

    /// The machine lost power: the page cache is lost per the power-loss model (seeded).
    pub fn power_loss(&self) {
        let mut state = self.state.borrow_mut();
        if !state.cache_survives_power_loss {
            state.power_loss();
        }
    }

    /// Corrupt: NotFound if no file matches (or the glob is invalid).
    pub fn inject(&self, fault: DiskFault) -> Result<(), DiskError> {
        let mut state = self.state.borrow_mut();
        match fault {
            DiskFault::FsyncError => state.fsync_error = true,
            DiskFault::Full => state.full = true,
            DiskFault::Slow(latency) => state.slow = latency,
            DiskFault::Throughput(bytes_per_second) => state.throughput = Some(bytes_per_second),
            DiskFault::Corrupt { glob, bytes } => state.corrupt_tail(&glob, bytes)?,
            DiskFault::CorruptAnywhere { glob, bytes } => state.corrupt_anywhere(&glob, bytes)?,
            DiskFault::Heal => {
                state.fsync_error = false;
                state.full = false;
                state.slow = Duration::ZERO;
                state.throughput = state.config.throughput;
            }
        }
        Ok(())
    }

    /// Write the page-cache view under `root` (for `--dump-disks`; real I/O, outside the
    /// simulation). Files are written sparse: a page of zeros is a hole, so RocketMQ's
    /// preallocated 1 GiB files take only what was written.
    pub fn dump_to(&self, root: &std::path::Path) -> std::io::Result<()> {
        use std::io::{Seek, SeekFrom, Write};
        let state = self.state.borrow();
        std::fs::create_dir_all(root)?;
        for (path, ino) in &state.names {
            let target = root.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let image = &state.inodes[ino].cached;
            let mut file = std::fs::File::create(target)?;
            for (at, bytes) in image.written_pages() {
                file.seek(SeekFrom::Start(at))?;
                file.write_all(bytes)?;
            }
            file.set_len(image.len())?;
        }
        Ok(())
    }

    /// What a power loss under `DropUnflushed` would leave at `path` (the durable namespace
    /// and the durable image); None if no file is durably named `path`.
    pub fn durable(&self, path: &str) -> Option<Vec<u8>> {
        let state = self.state.borrow();
        let ino = state.durable_names.get(path)?;
        Some(state.inodes[ino].durable.to_vec())
    }

    /// The dirty page indices of the file at `path` (cached namespace), ascending.
    pub fn dirty_pages(&self, path: &str) -> Vec<u64> {
        let state = self.state.borrow();
        state
            .inode(path)
            .map(|inode| inode.dirty.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// A zero sleep would still yield to the scheduler; skip it so a disk without latency
/// does not reorder tasks.
async fn sleep(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.state.try_borrow() {
            Ok(state) => f
                .debug_struct("Disk")
                .field("files", &state.names.len())
                .field("durable_files", &state.durable_names.len())
                .finish(),
            Err(_) => f.write_str("Disk { .. }"),
        }
    }
}
