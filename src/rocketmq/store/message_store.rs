//! One broker's store (`DefaultMessageStore`) as plain data: opened and recovered from the
//! disk, appended to, dispatched into its ConsumeQueues, read by queue offset. The
//! services that flush, commit and dispatch call its steps on their own schedules (the
//! broker's tasks); each step is a plain method, so a test drives the store without them.

use super::checkpoint::{self, Checkpoint};
use super::commit_log::{self, Appended, CommitLog, PutError};
use super::consume_queue::{ConsumeQueues, ENTRY_BYTES};
use super::mapped_file::{Flush, LoadError, MappedFileQueue};
use super::message::{self, Checked, Message};
use super::recovery::{self, Recovered};
use super::services::reput_end;
use crate::config::rocketmq::{Rules, StoreConfig};
use crate::os::disk::{Disk, DiskError};

/// The `abort` file: there while the broker runs, deleted by a clean shutdown.
pub const ABORT: &str = "store/abort";

/// Why a store does not open (the broker then does not start, as Java's `load` fails).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Disk(#[from] DiskError),
}

/// A queue's messages as a pull reads them (`GetMessageResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Got {
    pub status: GetStatus,
    /// `minOffset` and `maxOffset` of the queue: its first entry and the one after its
    /// last.
    pub min_offset: i64,
    pub max_offset: i64,
    pub next_begin_offset: i64,
    /// (queue offset, body) of each message read.
    pub messages: Vec<(i64, Vec<u8>)>,
}

/// `GetMessageStatus`, the cases a single master answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetStatus {
    Found,
    /// The asked offset is the queue's end (`OFFSET_OVERFLOW_ONE`): nothing new yet.
    OffsetFoundNull,
    /// The queue holds nothing (`NO_MESSAGE_IN_QUEUE`): an ask for offset 0 waits for
    /// messages, any other is moved to 0.
    NoMessageInQueue,
    /// Past the end by more than one (`OFFSET_OVERFLOW_BADLY`) or below the start
    /// (`OFFSET_TOO_SMALL`): `next_begin_offset` is where a master says to go on.
    OffsetMoved,
    /// The entries point at CommitLog bytes that are not there
    /// (`MESSAGE_WAS_REMOVING` and the like).
    NoMatchedMessage,
}

#[derive(Debug)]
pub struct MessageStore {
    disk: Disk,
    config: StoreConfig,
    rules: Rules,
    commit_log: CommitLog,
    queues: ConsumeQueues,
    /// The checkpoint's fields as the services set them; the file holds them as of its
    /// last flush.
    checkpoint: Checkpoint,
    /// Where dispatch goes on (`reputFromOffset`).
    reput_from: u64,
}

impl MessageStore {
    /// `load` and `recover`: the files on disk, the checkpoint, and recovery by whether the
    /// `abort` file survived. The ConsumeQueues then give each queue's next offset.
    pub fn open(
        disk: Disk,
        config: StoreConfig,
        rules: Rules,
    ) -> Result<(MessageStore, Recovered), OpenError> {
        let last_exit_ok = !disk.exists(ABORT);
        let mut files = MappedFileQueue::load(
            disk.clone(),
            commit_log::DIR,
            config.mapped_file_size_commit_log,
            rules.delete_empty_last_file,
        )?;
        if config.transient_store_pool(&rules) {
            files = files.with_transient_store_pool();
        }
        let mut queues = ConsumeQueues::load(
            disk.clone(),
            config.mapped_file_size_consume_queue,
            rules.delete_empty_last_file,
        )?;
        let checkpoint = if disk.exists(checkpoint::PATH) {
            Checkpoint::from_bytes(&disk.read(
                checkpoint::PATH,
                0,
                checkpoint::FILE_BYTES as usize,
            )?)
        } else {
            disk.create(checkpoint::PATH)?;
            disk.set_len(checkpoint::PATH, checkpoint::FILE_BYTES)?;
            Checkpoint::default()
        };
        let recovered = recovery::recover(
            &mut files,
            &mut queues,
            &checkpoint,
            last_exit_ok,
            &rules,
            config.check_crc_on_recover,
        )?;
        let reput_from = if rules.reput_from_log_end {
            recovered.end
        } else {
            u64::try_from(queues.max_physic_offset()).unwrap_or(0)
        };
        let commit_log = CommitLog::new(files, queues.next_offsets());
        let store = MessageStore {
            disk,
            config,
            rules,
            commit_log,
            queues,
            checkpoint,
            reput_from,
        };
        Ok((store, recovered))
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    pub fn commit_log(&self) -> &CommitLog {
        &self.commit_log
    }

    pub fn reput_from(&self) -> u64 {
        self.reput_from
    }

    /// `asyncPutMessage`'s append: the message stored in the page cache (or the pool's
    /// buffer), not yet flushed nor dispatched.
    pub fn put(&mut self, message: &mut Message, now_ms: i64) -> Result<Appended, PutError> {
        let appended = self.commit_log.append(message, now_ms)?;
        debug_assert_eq!(
            appended.next_offset(),
            self.commit_log.files().wrote_offset()
        );
        Ok(appended)
    }

    /// ReputMessageService's `doReput`: index every whole record from where dispatch
    /// stopped up to the release's bound. Returns how many it indexed.
    pub fn reput(&mut self) -> Result<usize, DiskError> {
        let end = reput_end(&self.rules, self.config.flush_disk_type, &self.commit_log);
        if self.reput_from >= end {
            return Ok(0);
        }
        let (records, next) = self.commit_log.dispatchable(self.reput_from, end)?;
        for record in &records {
            self.queues.dispatch(record)?;
            self.checkpoint.logics_msg_timestamp = record.store_timestamp;
        }
        debug_assert!(next >= self.reput_from, "dispatch never goes back");
        self.reput_from = next;
        Ok(records.len())
    }

    /// CommitRealTimeService's step with the TransientStorePool.
    pub fn commit(&mut self, least_pages: u64) -> Result<bool, DiskError> {
        self.commit_log.commit(least_pages)
    }

    pub fn plan_flush(&self, least_pages: u64) -> Option<Flush> {
        self.commit_log.plan_flush(least_pages)
    }

    /// The flush's fsync returned: the flushed position moves (or not, by the release's
    /// rule on a failed fsync), and the checkpoint's CommitLog timestamp follows the last
    /// full flush.
    pub fn flushed(&mut self, flush: Flush, fsync: Result<(), DiskError>) -> bool {
        let moved = self
            .commit_log
            .flushed(flush, fsync, self.rules.failed_flush_advances);
        let timestamp = self.commit_log.files().store_timestamp();
        if timestamp > 0 {
            self.checkpoint.physic_msg_timestamp = timestamp;
        }
        moved
    }

    /// FlushConsumeQueueService's pass: the flush each queue's file needs, if it holds
    /// `least_pages`.
    pub fn plan_queue_flushes(&self, least_pages: u64) -> Vec<((String, i32), Flush)> {
        self.queues
            .iter()
            .filter_map(|(key, queue)| Some((key.clone(), queue.plan_flush(least_pages)?)))
            .collect()
    }

    pub fn queue_flushed(
        &mut self,
        key: &(String, i32),
        flush: Flush,
        fsync: Result<(), DiskError>,
    ) {
        if let Some((_, queue)) = self.queues.iter_mut().find(|(k, _)| *k == key) {
            queue.flushed(flush, fsync);
        }
    }

    /// `StoreCheckpoint.flush`'s write: the page as this release writes it, in place. The
    /// caller forces it.
    pub fn write_checkpoint(&self) -> Result<(), DiskError> {
        let bytes = self.checkpoint.to_bytes(self.rules.checkpoint_longs);
        self.disk.write(checkpoint::PATH, 0, &bytes)
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// The checkpoint's ConsumeQueue timestamp, set again (the thorough flush captures it
    /// before flushing the queues and stores it after).
    pub fn set_logics_timestamp(&mut self, timestamp: i64) {
        self.checkpoint.logics_msg_timestamp = timestamp;
    }

    /// Dispatch has indexed everything written (`dispatchBehindBytes() == 0`), as a clean
    /// shutdown requires before it deletes the `abort` file.
    pub fn dispatched_all(&self) -> bool {
        self.reput_from >= self.commit_log.max_offset()
    }

    /// A queue's first and next offsets (`getMinOffsetInQueue`, `getMaxOffsetInQueue`).
    pub fn queue_range(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        match self.queues.get(topic, queue_id) {
            Some(queue) => {
                let files = queue.files();
                let min = files.files().first().map_or(0, |f| f.from / ENTRY_BYTES) as i64;
                let max = queue.max_offset_in_queue();
                (min.min(max), max)
            }
            None => (0, 0),
        }
    }

    /// `getMessage`: up to `max` messages of a queue from `offset`, each read through its
    /// ConsumeQueue entry from the CommitLog.
    pub fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max: u32,
    ) -> Result<Got, DiskError> {
        let (min_offset, max_offset) = self.queue_range(topic, queue_id);
        let answer = |status, next_begin_offset, messages| Got {
            status,
            min_offset,
            max_offset,
            next_begin_offset,
            messages,
        };
        if max_offset == 0 {
            return Ok(answer(GetStatus::NoMessageInQueue, 0, Vec::new()));
        }
        if offset < min_offset {
            return Ok(answer(GetStatus::OffsetMoved, min_offset, Vec::new()));
        }
        if offset == max_offset {
            return Ok(answer(GetStatus::OffsetFoundNull, offset, Vec::new()));
        }
        if offset > max_offset {
            // OFFSET_OVERFLOW_BADLY: a master corrects it to the end (#8239's skip).
            return Ok(answer(GetStatus::OffsetMoved, max_offset, Vec::new()));
        }
        let queue = self
            .queues
            .get(topic, queue_id)
            .expect("a queue with entries");
        let mut messages = Vec::new();
        let mut next = offset;
        while next < max_offset && messages.len() < max as usize {
            let Some(entry) = queue.entry(next)? else {
                break;
            };
            let bytes = self
                .commit_log
                .files()
                .read(entry.commit_log_offset as u64, entry.size.max(0) as usize)?;
            match message::check(&bytes, false) {
                Checked::Message(_) => messages.push((next, message::body(&bytes))),
                _ => break,
            }
            next += 1;
        }
        let status = if messages.is_empty() {
            GetStatus::NoMatchedMessage
        } else {
            GetStatus::Found
        };
        Ok(answer(status, next, messages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rocketmq::{FlushDiskType, Release};
    use crate::os::disk::{DiskConfig, PowerLossModel};
    use crate::rocketmq::store::test_message;

    fn disk() -> Disk {
        let config = DiskConfig {
            power_loss: PowerLossModel::DropUnflushed,
            ..DiskConfig::default()
        };
        Disk::new(config, 1)
    }

    fn config(flush: FlushDiskType) -> StoreConfig {
        StoreConfig {
            flush_disk_type: flush,
            mapped_file_size_commit_log: 64 * 1024,
            mapped_file_size_consume_queue: 20 * 100,
            ..StoreConfig::default()
        }
    }

    fn open(disk: &Disk, flush: FlushDiskType, release: &str) -> (MessageStore, Recovered) {
        let rules = Release::parse(release).unwrap().rules();
        MessageStore::open(disk.clone(), config(flush), rules).expect("opens")
    }

    fn put(store: &mut MessageStore, queue_id: i32, body: &[u8]) -> Appended {
        store
            .put(&mut test_message(queue_id, body), 1_000)
            .expect("appends")
    }

    /// A put is readable only once dispatched, and a pull reads from any offset to the end.
    #[test]
    fn a_put_is_seen_by_a_pull_once_dispatched() {
        let disk = disk();
        let (mut store, recovered) = open(&disk, FlushDiskType::AsyncFlush, "5.3.3");
        assert!(recovered.normal);
        let first = put(&mut store, 1, b"a");
        put(&mut store, 1, b"b");
        assert_eq!(first.queue_offset, 0);
        let got = store.get_message("orders", 1, 0, 32).unwrap();
        assert_eq!(
            (got.status, got.max_offset),
            (GetStatus::NoMessageInQueue, 0)
        );
        assert_eq!(store.reput().unwrap(), 2);
        assert!(store.dispatched_all());
        let got = store.get_message("orders", 1, 1, 32).unwrap();
        assert_eq!(got.status, GetStatus::Found);
        assert_eq!(got.messages, [(1, b"b".to_vec())]);
        assert_eq!(got.next_begin_offset, 2);
        let end = store.get_message("orders", 1, 2, 32).unwrap();
        assert_eq!(end.status, GetStatus::OffsetFoundNull);
        let past = store.get_message("orders", 1, 9, 32).unwrap();
        assert_eq!(
            (past.status, past.next_begin_offset),
            (GetStatus::OffsetMoved, 2)
        );
    }

    /// Under SYNC_FLUSH from 5.3.0 dispatch waits for the flush; a flush moves the
    /// checkpoint's CommitLog timestamp only when it is a full one.
    #[test]
    fn sync_flush_dispatches_what_was_flushed() {
        let disk = disk();
        let (mut store, _) = open(&disk, FlushDiskType::SyncFlush, "5.3.3");
        put(&mut store, 0, b"a");
        assert_eq!(store.reput().unwrap(), 0);
        let flush = store.plan_flush(0).expect("a flush");
        let fsync = disk.fsync_now(&flush.path);
        assert!(store.flushed(flush, fsync));
        assert_eq!(store.checkpoint().physic_msg_timestamp, 1_000);
        assert_eq!(store.reput().unwrap(), 1);
    }

    /// What only the page cache held is gone after a power loss; the abort file makes the
    /// next start abnormal, and the lost tail's queue offsets are handed out again.
    #[test]
    fn a_power_loss_loses_the_unflushed_tail_and_its_offsets_are_reused() {
        let disk = disk();
        let (mut store, _) = open(&disk, FlushDiskType::AsyncFlush, "5.3.3");
        disk.create(ABORT).unwrap();
        put(&mut store, 0, b"kept");
        let flush = store.plan_flush(0).expect("a flush");
        let fsync = disk.fsync_now(&flush.path);
        store.flushed(flush, fsync);
        put(&mut store, 0, b"lost");
        store.reput().unwrap();
        disk.power_loss();
        let (mut store, recovered) = open(&disk, FlushDiskType::AsyncFlush, "5.3.3");
        assert!(!recovered.normal, "the abort file was there");
        store.reput().unwrap();
        assert_eq!(store.queue_range("orders", 0), (0, 1));
        assert_eq!(put(&mut store, 0, b"new").queue_offset, 1);
    }
}
