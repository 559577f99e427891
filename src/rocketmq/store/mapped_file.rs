//! A queue of fixed-size files named by their first offset, RocketMQ's `MappedFileQueue`
//! of `MappedFile`s, which both the CommitLog and each ConsumeQueue live in. A file is
//! created at its full size, zero-filled (Java maps it `READ_WRITE` at `fileSize`), and
//! written in place: an mmap write is a page-cache write, so a killed broker keeps it and
//! a power loss keeps only what was forced or written back.
//!
//! The positions are RocketMQ's, per file: `wrotePosition` (written), `flushedPosition`
//! (forced). A flush is planned here and carried out by the caller, which awaits the
//! fsync and reports back: Java's `flush` reads the position to flush to *before* it
//! forces, so what is appended during the fsync waits for the next one.
//!
//! With the TransientStorePool (`transientStorePoolEnable`) appends go to a buffer in
//! the broker's memory, which CommitRealTimeService commits to the file (a page-cache
//! write) every `commitIntervalCommitLog`: what is read, flushed and dispatched is then
//! only what was committed (`getReadPosition`), and a killed broker loses the rest. The
//! buffer's bytes past a BLANK record are zeros here; RocketMQ's pool reuses buffers
//! without clearing them, so its file tails hold an earlier file's bytes after the BLANK.

use crate::os::disk::{Disk, DiskError, PAGE_BYTES};
use std::collections::BTreeMap;

/// `UtilAll.offset2FileName`: the offset in at least 20 digits.
pub fn file_name(offset: u64) -> String {
    format!("{offset:020}")
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappedFile {
    /// Its first offset in the queue, which is its name.
    pub from: u64,
    pub wrote: u64,
    /// Up to where the TransientStorePool's buffer is in the file (`committedPosition`).
    pub committed: u64,
    pub flushed: u64,
    /// The store timestamp of the last message appended to it (`storeTimestamp`), which a
    /// full flush records as the queue's.
    pub store_timestamp: i64,
}

impl MappedFile {
    /// `isAbleToFlush` (`to` the read position) and `isAbleToCommit` (`to` the write
    /// position, `done` the committed one): a full file always; otherwise `least_pages`
    /// 4 KiB page boundaries crossed (integer division of the positions, not a byte
    /// count), or with `least_pages` 0 any byte at all.
    fn able(&self, file_size: u64, least_pages: u64, to: u64, done: u64) -> bool {
        if self.wrote == file_size {
            return true;
        }
        if least_pages > 0 {
            return to / PAGE_BYTES - done / PAGE_BYTES >= least_pages;
        }
        to > done
    }
}

/// A flush the caller carries out: fsync `path`, then [`MappedFileQueue::flushed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flush {
    pub path: String,
    from: u64,
    /// The position read before the force, which the file's flushed position becomes.
    to: u64,
    store_timestamp: i64,
    least_pages: u64,
}

#[derive(Clone, Debug)]
pub struct MappedFileQueue {
    disk: Disk,
    dir: String,
    file_size: u64,
    files: Vec<MappedFile>,
    /// Where the queue is flushed to (`flushedWhere`).
    flushed_where: u64,
    /// Where the TransientStorePool's buffer is committed to (`committedWhere`).
    committed_where: u64,
    /// With the TransientStorePool, each file's bytes from its committed position to its
    /// write position: process memory, which a kill loses.
    pending: Option<BTreeMap<u64, Vec<u8>>>,
    /// The store timestamp as of the last full (0-page) flush.
    store_timestamp: i64,
}

impl MappedFileQueue {
    /// An empty queue in `dir` (no file yet).
    pub fn new(disk: Disk, dir: &str, file_size: u64) -> MappedFileQueue {
        assert!(file_size > 0, "a file holds something");
        MappedFileQueue {
            disk,
            dir: dir.to_string(),
            file_size,
            files: Vec::new(),
            flushed_where: 0,
            committed_where: 0,
            pending: None,
            store_timestamp: 0,
        }
    }

    /// Appends go through the TransientStorePool from now on.
    pub fn with_transient_store_pool(mut self) -> MappedFileQueue {
        self.pending = Some(BTreeMap::new());
        self
    }

    /// What is readable in `file` (`getReadPosition`): what was written, or with the
    /// TransientStorePool what was committed.
    fn read_position(&self, file: &MappedFile) -> u64 {
        if self.pending.is_some() {
            file.committed
        } else {
            file.wrote
        }
    }

    /// `load`: the files on disk, sorted by name, each taken as full (recovery sets the
    /// positions). A file of another size stops the broker, as Java's `load` returns
    /// false; from 5.x (`delete_empty_last`) an empty last file is deleted first.
    pub fn load(
        disk: Disk,
        dir: &str,
        file_size: u64,
        delete_empty_last: bool,
    ) -> Result<MappedFileQueue, LoadError> {
        let mut queue = MappedFileQueue::new(disk, dir, file_size);
        let mut names: Vec<String> = queue
            .disk
            .list(dir)
            .into_iter()
            .filter(|name| queue.disk.len(&format!("{dir}/{name}")).is_ok())
            .collect();
        names.sort();
        if delete_empty_last {
            if let Some(last) = names.last() {
                let path = format!("{dir}/{last}");
                if queue.disk.len(&path) == Ok(0) {
                    queue.disk.delete(&path).map_err(LoadError::Disk)?;
                    names.pop();
                }
            }
        }
        for name in names {
            let path = format!("{dir}/{name}");
            let len = queue.disk.len(&path).map_err(LoadError::Disk)?;
            let from = name
                .parse::<u64>()
                .map_err(|_| LoadError::Name(path.clone()))?;
            if len != file_size {
                return Err(LoadError::Size { path, len });
            }
            queue.files.push(MappedFile {
                from,
                wrote: file_size,
                committed: file_size,
                flushed: file_size,
                store_timestamp: 0,
            });
        }
        Ok(queue)
    }

    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    pub fn files(&self) -> &[MappedFile] {
        &self.files
    }

    pub fn path(&self, file: &MappedFile) -> String {
        format!("{}/{}", self.dir, file_name(file.from))
    }

    pub fn flushed_where(&self) -> u64 {
        self.flushed_where
    }

    pub fn store_timestamp(&self) -> i64 {
        self.store_timestamp
    }

    /// The offset after the last readable byte (`getMaxOffset`).
    pub fn max_offset(&self) -> u64 {
        self.files
            .last()
            .map_or(0, |f| f.from + self.read_position(f))
    }

    /// The offset after the last appended byte, committed or not.
    pub fn wrote_offset(&self) -> u64 {
        self.files.last().map_or(0, |f| f.from + f.wrote)
    }

    /// `getLastMappedFile(startOffset, true)`: the last file while it has room, else a
    /// new one, at `start_offset` rounded down to a file in an empty queue or after the
    /// last; created at full size, zero-filled.
    pub fn last_file(&mut self, start_offset: u64) -> Result<&mut MappedFile, DiskError> {
        let create_at = match self.files.last() {
            None => Some(start_offset - start_offset % self.file_size),
            Some(last) if last.wrote == self.file_size => Some(last.from + self.file_size),
            Some(_) => None,
        };
        if let Some(from) = create_at {
            let path = format!("{}/{}", self.dir, file_name(from));
            self.disk.create(&path)?;
            self.disk.set_len(&path, self.file_size)?;
            if self.files.is_empty() {
                self.flushed_where = from;
                self.committed_where = from;
            }
            self.files.push(MappedFile {
                from,
                wrote: 0,
                committed: 0,
                flushed: 0,
                store_timestamp: 0,
            });
        }
        Ok(self.files.last_mut().expect("a file was there or made"))
    }

    /// Write `bytes` at the last file's write position (which must have room) and move
    /// it on by `advance` (more than the bytes for a BLANK record, which fills the file).
    pub fn append(
        &mut self,
        bytes: &[u8],
        advance: u64,
        store_timestamp: i64,
    ) -> Result<u64, DiskError> {
        let file = self.files.last_mut().expect("append after last_file");
        debug_assert!(advance >= bytes.len() as u64 && file.wrote + advance <= self.file_size);
        let at = file.from + file.wrote;
        match &mut self.pending {
            Some(pending) => {
                let buffer = pending.entry(file.from).or_default();
                buffer.extend_from_slice(bytes);
                buffer.resize(buffer.len() + (advance as usize - bytes.len()), 0);
            }
            None => {
                let path = format!("{}/{}", self.dir, file_name(file.from));
                self.disk.write(&path, file.wrote, bytes)?;
            }
        }
        file.wrote += advance;
        if store_timestamp > 0 {
            file.store_timestamp = store_timestamp;
        }
        Ok(at)
    }

    /// `MappedFileQueue.flush(leastPages)`: the file holding `flushedWhere` (only that one,
    /// so a queue that moved to a new file needs a second flush), if it has enough to flush.
    pub fn plan_flush(&self, least_pages: u64) -> Option<Flush> {
        let file = self.file_at(self.flushed_where, self.flushed_where == 0)?;
        let to = self.read_position(file);
        if !file.able(self.file_size, least_pages, to, file.flushed) {
            return None;
        }
        Some(Flush {
            path: self.path(file),
            from: file.from,
            to,
            store_timestamp: file.store_timestamp,
            least_pages,
        })
    }

    /// The planned flush's fsync returned: the file's flushed position moves to where it
    /// was read, and with it `flushedWhere`. Whether a failed fsync moves it too is the
    /// release's rule (`advance_on_error`: up to 5.3.3 it does, #2706). Returns whether
    /// `flushedWhere` moved.
    pub fn flushed(
        &mut self,
        flush: Flush,
        fsync: Result<(), DiskError>,
        advance_on_error: bool,
    ) -> bool {
        if fsync.is_err() && !advance_on_error {
            return false;
        }
        let Some(file) = self.files.iter_mut().find(|f| f.from == flush.from) else {
            return false; // Truncated away meanwhile.
        };
        file.flushed = file.flushed.max(flush.to);
        let where_ = file.from + file.flushed;
        let moved = where_ != self.flushed_where;
        self.flushed_where = self.flushed_where.max(where_);
        if flush.least_pages == 0 {
            self.store_timestamp = flush.store_timestamp;
        }
        moved
    }

    /// `MappedFileQueue.commit(leastPages)` with the TransientStorePool: the buffer of
    /// the file holding `committedWhere` (only that one) written to the file, if it holds
    /// enough. Returns whether `committedWhere` moved (CommitRealTimeService then wakes the
    /// flush service).
    pub fn commit(&mut self, least_pages: u64) -> Result<bool, DiskError> {
        let Some(index) = self.index_at(self.committed_where, self.committed_where == 0) else {
            return Ok(false);
        };
        let file = &self.files[index];
        if self.pending.is_none()
            || !file.able(self.file_size, least_pages, file.wrote, file.committed)
        {
            return Ok(false);
        }
        let (from, committed) = (file.from, file.committed);
        let bytes = self
            .pending
            .as_mut()
            .and_then(|pending| pending.remove(&from))
            .unwrap_or_default();
        if !bytes.is_empty() {
            self.disk.write(
                &format!("{}/{}", self.dir, file_name(from)),
                committed,
                &bytes,
            )?;
        }
        let file = &mut self.files[index];
        file.committed = file.wrote;
        let where_ = file.from + file.committed;
        let moved = where_ != self.committed_where;
        self.committed_where = where_;
        Ok(moved)
    }

    fn index_at(&self, offset: u64, first_if_none: bool) -> Option<usize> {
        let first = self.files.first()?;
        let last = self.files.last()?;
        if offset < first.from || offset >= last.from + self.file_size {
            return first_if_none.then_some(0);
        }
        let index = ((offset - first.from) / self.file_size) as usize;
        (index < self.files.len()).then_some(index)
    }

    /// `findMappedFileByOffset`: the file holding `offset`, or the first one if asked.
    pub fn file_at(&self, offset: u64, first_if_none: bool) -> Option<&MappedFile> {
        Some(&self.files[self.index_at(offset, first_if_none)?])
    }

    /// Bytes of the file holding `offset`, from `offset` up to what it holds written
    /// (`getData`, a slice of the mapping up to the read position).
    pub fn read_from(&self, offset: u64) -> Result<Vec<u8>, DiskError> {
        let Some(file) = self.file_at(offset, false) else {
            return Ok(Vec::new());
        };
        let within = offset - file.from;
        let len = self.read_position(file).saturating_sub(within) as usize;
        self.disk.read(&self.path(file), within, len)
    }

    /// `len` bytes from `offset`, within the file holding it and what it holds readable
    /// (`selectMappedBuffer(offset, size)`): fewer where the file ends first.
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, DiskError> {
        let Some(file) = self.file_at(offset, false) else {
            return Ok(Vec::new());
        };
        let within = offset - file.from;
        let readable = self.read_position(file).saturating_sub(within) as usize;
        self.disk.read(&self.path(file), within, len.min(readable))
    }

    /// Bytes of a whole file as it is now, written or not.
    pub fn read_file(&self, index: usize) -> Result<Vec<u8>, DiskError> {
        self.disk.read_all(&self.path(&self.files[index]))
    }

    /// Up to `len` bytes of the `index`-th file from `within`, written or not: what
    /// recovery scans.
    pub fn read_at(&self, index: usize, within: u64, len: usize) -> Result<Vec<u8>, DiskError> {
        self.disk.read(&self.path(&self.files[index]), within, len)
    }

    /// `truncateDirtyFiles(offset)`: files past `offset` are deleted, the one holding it
    /// has every position set to it; the bytes after it stay as they were.
    pub fn truncate_dirty_files(&mut self, offset: u64) -> Result<(), DiskError> {
        let file_size = self.file_size;
        let mut kept = Vec::new();
        for mut file in std::mem::take(&mut self.files) {
            if file.from + file_size <= offset {
                kept.push(file);
            } else if offset >= file.from {
                let within = offset % file_size;
                file.wrote = within;
                file.committed = within;
                file.flushed = within;
                kept.push(file);
            } else {
                self.disk
                    .delete(&format!("{}/{}", self.dir, file_name(file.from)))?;
            }
        }
        self.files = kept;
        Ok(())
    }

    /// One `flush(0)` carried out at once, for recovery, before any service runs; a
    /// failed fsync moves nothing.
    pub fn flush_now(&mut self) -> Result<(), DiskError> {
        if let Some(flush) = self.plan_flush(0) {
            let fsync = self.disk.fsync_now(&flush.path);
            self.flushed(flush, fsync.clone(), false);
            fsync?;
        }
        Ok(())
    }

    /// `deleteLastMappedFile`: the last file goes, whatever it holds.
    pub fn delete_last_file(&mut self) -> Result<(), DiskError> {
        if let Some(last) = self.files.pop() {
            self.disk.delete(&self.path(&last))?;
        }
        Ok(())
    }

    /// Recovery's end: the queue is taken as flushed and committed to `offset`
    /// (`setFlushedWhere`, `setCommittedWhere`).
    pub fn set_flushed_where(&mut self, offset: u64) {
        self.flushed_where = offset;
        self.committed_where = offset;
    }
}

/// Why the files on disk do not make a queue (the broker does not start).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: length {len} is not the file size")]
    Size { path: String, len: u64 },
    #[error("{0}: not named by an offset")]
    Name(String),
    #[error(transparent)]
    Disk(DiskError),
}
