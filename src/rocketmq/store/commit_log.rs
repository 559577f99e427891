//! The CommitLog: one log for every topic and queue, appended in arrival order
//! (`CommitLog.asyncPutMessage` with `DefaultAppendMessageCallback.doAppend`). Each
//! message gets its queue offset from the topic-queue table and its physical offset from
//! where it lands; a file that cannot take it and keep 8 bytes spare is closed with a
//! BLANK record and the message goes to the next file, with the same queue offset.

use super::mapped_file::{Flush, MappedFileQueue};
use super::message::{self, Checked, Dispatch, Message, END_FILE_MIN_BLANK_LENGTH};
use crate::os::disk::{Disk, DiskError};
use std::collections::BTreeMap;

/// The CommitLog's directory under the store root.
pub const DIR: &str = "store/commitlog";

/// Where an appended message went (`AppendMessageResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    pub wrote_offset: u64,
    pub wrote_bytes: u32,
    pub queue_offset: i64,
    pub store_timestamp: i64,
}

impl Appended {
    /// The offset a SYNC_FLUSH put waits for (`GroupCommitRequest.nextOffset`).
    pub fn next_offset(&self) -> u64 {
        self.wrote_offset + u64::from(self.wrote_bytes)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PutError {
    /// Bigger than a file can hold with its BLANK spare (Java refuses it as
    /// MESSAGE_ILLEGAL before it reaches a file).
    #[error("a message of {0} bytes does not fit in a CommitLog file")]
    TooLarge(usize),
    #[error(transparent)]
    Disk(#[from] DiskError),
}

#[derive(Clone, Debug)]
pub struct CommitLog {
    files: MappedFileQueue,
    /// `topicQueueTable`: each queue's next queue offset.
    queue_offsets: BTreeMap<(String, i32), i64>,
}

impl CommitLog {
    /// A CommitLog over `files` (new or loaded), with the next queue offsets recovery
    /// rebuilt from the ConsumeQueues.
    pub fn new(files: MappedFileQueue, queue_offsets: BTreeMap<(String, i32), i64>) -> CommitLog {
        CommitLog {
            files,
            queue_offsets,
        }
    }

    /// An empty CommitLog of `file_size` files on `disk`.
    pub fn empty(disk: Disk, file_size: u64) -> CommitLog {
        CommitLog::new(MappedFileQueue::new(disk, DIR, file_size), BTreeMap::new())
    }

    pub fn files(&self) -> &MappedFileQueue {
        &self.files
    }

    /// The end of what is written (`getMaxOffset`).
    pub fn max_offset(&self) -> u64 {
        self.files.max_offset()
    }

    pub fn flushed_where(&self) -> u64 {
        self.files.flushed_where()
    }

    /// Append `message` at `now_ms` (its store timestamp): its queue and physical offsets
    /// are filled in, and the queue's next offset moves on.
    pub fn append(&mut self, message: &mut Message, now_ms: i64) -> Result<Appended, PutError> {
        let key = (message.topic.clone(), message.queue_id);
        message.queue_offset = self.queue_offsets.get(&key).copied().unwrap_or(0);
        message.store_timestamp = now_ms;
        let len = message.encoded_len() as u64;
        let file_size = self.files.file_size();
        if len + END_FILE_MIN_BLANK_LENGTH > file_size {
            return Err(PutError::TooLarge(len as usize));
        }
        let free = {
            let file = self.files.last_file(0)?;
            file_size - file.wrote
        };
        if len + END_FILE_MIN_BLANK_LENGTH > free {
            self.files.append(&message::blank(free), free, 0)?;
            self.files.last_file(0)?;
        }
        let file = self.files.files().last().expect("a file to append to");
        message.physical_offset = (file.from + file.wrote) as i64;
        let mut bytes = Vec::with_capacity(len as usize);
        message.encode(&mut bytes);
        let at = self.files.append(&bytes, len, now_ms)?;
        debug_assert_eq!(at as i64, message.physical_offset);
        self.queue_offsets.insert(key, message.queue_offset + 1);
        Ok(Appended {
            wrote_offset: at,
            wrote_bytes: len as u32,
            queue_offset: message.queue_offset,
            store_timestamp: now_ms,
        })
    }

    /// The queue's next offset (what its next message gets).
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.queue_offsets
            .get(&(topic.to_string(), queue_id))
            .copied()
            .unwrap_or(0)
    }

    /// CommitRealTimeService's step with the TransientStorePool: commit the buffer of
    /// one file if it holds `least_pages` (see [`MappedFileQueue::commit`]).
    pub fn commit(&mut self, least_pages: u64) -> Result<bool, DiskError> {
        self.files.commit(least_pages)
    }

    pub fn plan_flush(&self, least_pages: u64) -> Option<Flush> {
        self.files.plan_flush(least_pages)
    }

    pub fn flushed(
        &mut self,
        flush: Flush,
        fsync: Result<(), DiskError>,
        advance_on_error: bool,
    ) -> bool {
        self.files.flushed(flush, fsync, advance_on_error)
    }

    /// The records from `offset` up to `end` that dispatch would hand to the
    /// ConsumeQueues (ReputMessageService's `doReput` over `getData`), and where dispatch
    /// stops: past the last whole record, or at the start of the next file after a BLANK.
    /// Reput does not check CRCs.
    pub fn dispatchable(
        &self,
        mut offset: u64,
        end: u64,
    ) -> Result<(Vec<Dispatch>, u64), DiskError> {
        let mut out = Vec::new();
        let file_size = self.files.file_size();
        while offset < end {
            let bytes = self.files.read_from(offset)?;
            if bytes.is_empty() {
                break;
            }
            let mut at = 0usize;
            let mut next_file = false;
            while offset + (at as u64) < end {
                match message::check(&bytes[at..], false) {
                    Checked::Message(d) if offset + at as u64 + u64::from(d.msg_size) <= end => {
                        at += d.msg_size as usize;
                        out.push(d);
                    }
                    Checked::Blank => {
                        next_file = true;
                        break;
                    }
                    _ => break,
                }
            }
            if next_file {
                let here = offset + at as u64;
                offset = here + file_size - here % file_size;
                continue;
            }
            offset += at as u64;
            break;
        }
        Ok((out, offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::disk::{DiskConfig, PowerLossModel};

    fn disk() -> Disk {
        let config = DiskConfig {
            power_loss: PowerLossModel::DropUnflushed,
            ..DiskConfig::default()
        };
        Disk::new(config, 1)
    }

    fn message(queue_id: i32, body: &[u8]) -> Message {
        crate::rocketmq::store::test_message(queue_id, body)
    }

    /// 91 bytes of header and lengths, 6 of topic: a 100-byte body makes 197 bytes.
    #[test]
    fn a_full_file_ends_in_a_blank_and_the_message_moves_to_the_next() {
        let disk = disk();
        let mut log = CommitLog::empty(disk.clone(), 4096);
        let mut offsets = Vec::new();
        for _ in 0..21 {
            let appended = log.append(&mut message(0, &[7; 100]), 1_000).unwrap();
            offsets.push((appended.wrote_offset, appended.queue_offset));
        }
        // 20 records fill 3940 bytes; the 21st needs 197 + 8 > 156 free.
        assert_eq!(offsets[19], (19 * 197, 19));
        assert_eq!(offsets[20], (4096, 20), "same queue offset, next file");
        let first = disk
            .read_all("store/commitlog/00000000000000000000")
            .unwrap();
        assert_eq!(first.len(), 4096);
        assert_eq!(message::check(&first[3940..], true), Checked::Blank);
        assert_eq!(first[3940..3948], message::blank(156));
        assert!(
            first[3948..].iter().all(|&b| b == 0),
            "the rest left as it was"
        );
        assert!(disk.exists("store/commitlog/00000000000000004096"));
        assert_eq!(log.next_queue_offset("orders", 0), 21);
        assert_eq!(log.next_queue_offset("orders", 1), 0);

        let (dispatched, end) = log.dispatchable(0, log.max_offset()).unwrap();
        assert_eq!(dispatched.len(), 21);
        assert_eq!(end, 4096 + 197);
        let (partial, stop) = log.dispatchable(0, 197 * 2 + 10).unwrap();
        assert_eq!(
            (partial.len(), stop),
            (2, 394),
            "only whole records below the bound"
        );
    }

    #[test]
    fn a_message_bigger_than_a_file_is_refused() {
        let mut log = CommitLog::empty(disk(), 4096);
        assert!(matches!(
            log.append(&mut message(0, &[0; 4000]), 1),
            Err(PutError::TooLarge(_))
        ));
    }

    /// What a flush service does: plan, fsync, report.
    fn flush(log: &mut CommitLog, disk: &Disk, least_pages: u64) -> Option<u64> {
        let flush = log.plan_flush(least_pages)?;
        let fsync = disk.fsync_now(&flush.path);
        log.flushed(flush, fsync, true);
        Some(log.flushed_where())
    }

    /// The 4-page rule counts page boundaries crossed, a full file always flushes, and
    /// one flush covers one file.
    #[test]
    fn a_flush_needs_its_pages_and_covers_one_file() {
        let disk = disk();
        let mut log = CommitLog::empty(disk.clone(), 4 * 4096);
        while log.max_offset() < 3 * 4096 + 4000 {
            log.append(&mut message(0, &[1; 100]), 5).unwrap();
        }
        assert_eq!(log.plan_flush(4), None, "three page boundaries crossed");
        let to = log.max_offset();
        assert_eq!(
            flush(&mut log, &disk, 0),
            Some(to),
            "anything flushes with 0 pages"
        );
        while log.files().files().len() < 2 {
            log.append(&mut message(0, &[1; 100]), 6).unwrap();
        }
        assert_eq!(
            flush(&mut log, &disk, 4),
            Some(4 * 4096),
            "a full file always flushes, and only it"
        );
        assert_eq!(flush(&mut log, &disk, 0), Some(log.max_offset()));

        // What was flushed survives a power loss; what was not, does not.
        log.append(&mut message(0, b"unflushed"), 7).unwrap();
        let flushed = log.flushed_where();
        disk.power_loss();
        let second = disk
            .read_all("store/commitlog/00000000000000016384")
            .unwrap();
        let within = (flushed - 4 * 4096) as usize;
        assert!(matches!(
            message::check(&second[within - 197..], true),
            Checked::Message(_)
        ));
        assert_eq!(
            message::check(&second[within..], true),
            Checked::End { half: None }
        );
    }

    /// With the TransientStorePool, appends wait in process memory until committed:
    /// dispatch and flushes see only what was committed, and a kill loses the rest.
    #[test]
    fn the_transient_store_pool_holds_appends_in_memory_until_committed() {
        let disk = disk();
        let files = MappedFileQueue::new(disk.clone(), DIR, 4 * 4096).with_transient_store_pool();
        let mut log = CommitLog::new(files, BTreeMap::new());
        for n in 0..10 {
            log.append(&mut message(0, &[n; 100]), 1).unwrap();
        }
        assert_eq!(log.max_offset(), 0, "nothing committed, nothing readable");
        assert_eq!(log.plan_flush(0), None);
        assert!(!log.commit(4).unwrap(), "1970 bytes cross no page boundary");
        assert!(log.commit(0).unwrap());
        assert_eq!(log.max_offset(), 10 * 197);
        for n in 10..20 {
            log.append(&mut message(0, &[n; 100]), 1).unwrap();
        }
        assert_eq!(log.files().wrote_offset(), 20 * 197);
        let (records, _) = log.dispatchable(0, u64::MAX).unwrap();
        assert_eq!(records.len(), 10, "dispatch reads what was committed");

        // A kill: the process and its buffer go; the file holds the committed records.
        drop(log);
        let reloaded = MappedFileQueue::load(disk.clone(), DIR, 4 * 4096, true).unwrap();
        let bytes = reloaded.read_file(0).unwrap();
        let at = 10 * 197;
        assert!(matches!(
            message::check(&bytes[at - 197..], true),
            Checked::Message(_)
        ));
        assert_eq!(
            message::check(&bytes[at..], true),
            Checked::End { half: None }
        );
    }

    /// Up to 5.3.3 a failed fsync still moves the flushed position (#2706); develop's
    /// does not.
    #[test]
    fn a_failed_fsync_moves_the_flushed_position_only_where_the_release_lets_it() {
        let mut log = CommitLog::empty(disk(), 4096);
        log.append(&mut message(0, b"x"), 1).unwrap();
        let flush = log.plan_flush(0).unwrap();
        let eio = Err(DiskError::Io("store/commitlog".into()));
        assert!(!log.flushed(flush.clone(), eio.clone(), false));
        assert_eq!(log.flushed_where(), 0);
        assert!(log.flushed(flush, eio, true));
        assert_eq!(log.flushed_where(), log.max_offset());
    }
}
