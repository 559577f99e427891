//! A store's recovery at start (`DefaultMessageStore.recover`): the ConsumeQueues first,
//! then the CommitLog, normally after a clean exit (no `abort` file) or abnormally, then
//! each queue's next offset from what its ConsumeQueue holds.
//!
//! - **Normal** (`recoverNormally`) scans from the third-last file up to 5.3.1; from
//!   5.3.2 from the newest file at or below the ConsumeQueues' end, dispatching the
//!   records that start past that end (a strict `>` against an *end* offset, so a record
//!   starting exactly there is not dispatched).
//! - **Abnormal** (`recoverAbnormally`) starts at the newest file whose first record was
//!   stored at or before the checkpoint's minimum timestamp (the older of the CommitLog's
//!   and the ConsumeQueues' timestamps, less 3 s), file 0 if none, and dispatches every
//!   whole record again; the ConsumeQueues skip what they already hold. (With
//!   `messageIndexSafe`, off by default and not modelled, the index's timestamp counts
//!   too.)
//!
//! Either way the first record that fails its check (zeros, a bad magic code, a body CRC
//! that does not match, lengths that disagree) ends the log: the ConsumeQueues are cut
//! there if they reach past it, later CommitLog files deleted, and nothing zeroed.

use super::checkpoint::Checkpoint;
use super::consume_queue::{ConsumeQueues, Put};
use super::mapped_file::MappedFileQueue;
use super::message::{self, Checked, Dispatch, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2};
use crate::config::rocketmq::{NormalStart, Rules};
use crate::os::disk::DiskError;

/// What recovery did, in RocketMQ's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// Whether the last exit was clean (no `abort` file).
    pub normal: bool,
    /// The CommitLog file the scan started at.
    pub start_file: u64,
    /// Where the log now ends (`processOffset`): the next append goes here.
    pub end: u64,
    /// The start of the last whole record (5.x's confirm offset after recovery).
    pub last_message: u64,
    /// A record whose magic code was right but whose lengths were not, at this offset.
    pub half_message: Option<u64>,
    /// Records dispatched to a ConsumeQueue again.
    pub dispatched: u64,
    /// Whole records that normal recovery passed over (all of them up to 5.3.1, those
    /// starting at or below the ConsumeQueues' end from 5.3.2) and that their own queue
    /// does not hold: unless dispatch picks them up after the start, no consumer sees them.
    pub undispatched: Vec<Dispatch>,
    /// Where the ConsumeQueues were cut back to, when they reached past the end.
    pub queues_truncated: Option<u64>,
}

/// Recover the CommitLog's `files` (as loaded) and the `queues` (loaded) with the
/// checkpoint read back, by the release's `rules`, checking bodies' CRCs if `check_crc`
/// (`checkCRCOnRecover`); the CommitLog's next queue offsets are then
/// `queues.next_offsets()`.
pub fn recover(
    files: &mut MappedFileQueue,
    queues: &mut ConsumeQueues,
    checkpoint: &Checkpoint,
    last_exit_ok: bool,
    rules: &Rules,
    check_crc: bool,
) -> Result<Recovered, DiskError> {
    for (_, queue) in queues.iter_mut() {
        queue.recover()?;
    }
    let queue_end = queues.max_physic_offset();
    if files.files().is_empty() {
        files.set_flushed_where(0);
        queues.destroy()?;
        return Ok(Recovered {
            normal: last_exit_ok,
            start_file: 0,
            end: 0,
            last_message: 0,
            half_message: None,
            dispatched: 0,
            undispatched: Vec::new(),
            queues_truncated: None,
        });
    }
    let start = if last_exit_ok {
        normal_start(files, queue_end, rules.normal_start)
    } else {
        abnormal_start(files, checkpoint, rules.abnormal_start_v2)?
    };
    let file_size = files.file_size();
    let start_file = files.files()[start].from;
    let mut index = start;
    let mut within = 0u64;
    let mut last_message = files.files()[start].from;
    let mut half_message = None;
    let mut dispatched = 0;
    let mut undispatched = Vec::new();
    loop {
        let from = files.files()[index].from;
        let remaining = file_size - within;
        let header = files.read_at(index, within, 4)?;
        let total = header
            .get(..4)
            .map_or(0, |b| i32::from_be_bytes(b.try_into().expect("4 bytes")));
        // Enough of the file for the record and what a bad length makes Java read on.
        let window = (total.max(0) as u64 + 64 * 1024).min(remaining) as usize;
        let bytes = files.read_at(index, within, window)?;
        let bytes = pad_to(bytes, window);
        match message::check(&bytes, check_crc) {
            Checked::Message(record) => {
                last_message = from + within;
                within += u64::from(record.msg_size);
                let redispatch = if last_exit_ok {
                    rules.normal_start == NormalStart::ConsumeQueueEnd
                        && record.commit_log_offset > queue_end
                } else {
                    true
                };
                if redispatch {
                    if queues.dispatch(&record)? != Put::Skipped {
                        dispatched += 1;
                    }
                } else if last_exit_ok && !held(queues, &record) {
                    undispatched.push(record);
                }
            }
            Checked::Blank => {
                if index + 1 >= files.files().len() {
                    break;
                }
                index += 1;
                within = 0;
            }
            Checked::End { half } => {
                half_message = half.map(|_| from + within);
                break;
            }
        }
    }
    let end = files.files()[index].from + within;
    if !last_exit_ok && rules.flush_queues_after_abnormal {
        queues.flush_now()?;
    }
    let mut queues_truncated = None;
    if queue_end >= end as i64 {
        for (_, queue) in queues.iter_mut() {
            queue.truncate_dirty(end as i64)?;
        }
        queues_truncated = Some(end);
    }
    files.set_flushed_where(end);
    files.truncate_dirty_files(end)?;
    debug_assert_eq!(
        files.max_offset(),
        end,
        "the log ends where recovery found its end"
    );
    Ok(Recovered {
        normal: last_exit_ok,
        start_file,
        end,
        last_message,
        half_message,
        dispatched,
        undispatched,
        queues_truncated,
    })
}

/// Zeros past the end of a short read, as a mapping reads past a file's end: only a file
/// smaller than the bytes asked for (a tiny `mappedFileSizeCommitLog`) reads short.
fn pad_to(mut bytes: Vec<u8>, len: usize) -> Vec<u8> {
    bytes.resize(len, 0);
    bytes
}

/// Whether the record's own ConsumeQueue indexes it.
fn held(queues: &ConsumeQueues, record: &Dispatch) -> bool {
    queues.get(&record.topic, record.queue_id).is_some_and(|q| {
        record.commit_log_offset + i64::from(record.msg_size) <= q.max_physic_offset()
    })
}

fn normal_start(files: &MappedFileQueue, queue_end: i64, rule: NormalStart) -> usize {
    let count = files.files().len();
    match rule {
        NormalStart::ThirdLastFile => count.saturating_sub(3),
        NormalStart::ConsumeQueueEnd => {
            let mut index = count - 1;
            while index > 0 && files.files()[index].from as i64 > queue_end {
                index -= 1;
            }
            index
        }
    }
}

/// `isMappedFileMatchedRecover` over the files, newest first.
fn abnormal_start(
    files: &MappedFileQueue,
    checkpoint: &Checkpoint,
    v2: bool,
) -> Result<usize, DiskError> {
    // STORETIMESTAMP sits after 20 bytes of ints, two offsets, SYSFLAG, BORNTIMESTAMP and
    // an IPv4 BORNHOST.
    const STORE_TIMESTAMP_AT: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8;
    for index in (0..files.files().len()).rev() {
        let head = pad_to(
            files.read_at(index, 0, STORE_TIMESTAMP_AT + 8)?,
            STORE_TIMESTAMP_AT + 8,
        );
        let magic = i32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
        if magic != MESSAGE_MAGIC_CODE && !(v2 && magic == MESSAGE_MAGIC_CODE_V2) {
            continue;
        }
        let at = STORE_TIMESTAMP_AT;
        let stored = i64::from_be_bytes(head[at..at + 8].try_into().expect("8 bytes"));
        if stored != 0 && stored <= checkpoint.min_timestamp() {
            return Ok(index);
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rocketmq::Release;
    use crate::os::disk::{Disk, DiskConfig, Filesystem, PowerLossModel};
    use crate::rocketmq::store::commit_log::{self, CommitLog};
    use crate::rocketmq::store::message::Message;
    use proptest::prelude::*;

    const FILE: u64 = 4096;
    const QUEUE_FILE: u64 = 200;

    const NEWEST: &str = "5.3.3";

    fn disk(power_loss: PowerLossModel, seed: u64) -> Disk {
        let config = DiskConfig {
            power_loss,
            filesystem: Filesystem::NoMetadataWriteback,
            ..DiskConfig::default()
        };
        Disk::new(config, seed)
    }

    fn message(queue_id: i32, n: u8) -> Message {
        crate::rocketmq::store::test_message(queue_id, &[n; 100])
    }

    /// A broker's store in miniature: appends, dispatch up to a bound, flushes.
    struct Store {
        disk: Disk,
        log: CommitLog,
        queues: ConsumeQueues,
        dispatched_to: u64,
    }

    impl Store {
        fn new(disk: Disk) -> Store {
            Store::with_log(disk.clone(), CommitLog::empty(disk, FILE))
        }

        /// A store whose CommitLog goes through the TransientStorePool.
        fn transient(disk: Disk) -> Store {
            let files = MappedFileQueue::new(disk.clone(), commit_log::DIR, FILE);
            let log = CommitLog::new(files.with_transient_store_pool(), Default::default());
            Store::with_log(disk, log)
        }

        fn with_log(disk: Disk, log: CommitLog) -> Store {
            Store {
                log,
                queues: ConsumeQueues::new(disk.clone(), QUEUE_FILE),
                disk,
                dispatched_to: 0,
            }
        }

        fn append(&mut self, queue_id: i32, n: u8) {
            self.log
                .append(&mut message(queue_id, n), 1_000 + i64::from(n))
                .unwrap();
        }

        /// ReputMessageService up to the log's end.
        fn dispatch(&mut self) {
            let (records, to) = self
                .log
                .dispatchable(self.dispatched_to, self.log.max_offset())
                .unwrap();
            for record in &records {
                self.queues.dispatch(record).unwrap();
            }
            self.dispatched_to = to;
        }

        fn flush_log(&mut self) {
            while let Some(flush) = self.log.plan_flush(0) {
                let fsync = self.disk.fsync_now(&flush.path);
                if !self.log.flushed(flush, fsync, true) {
                    break;
                }
            }
        }

        fn flush_queues(&mut self) {
            for (_, queue) in self.queues.iter_mut() {
                while let Some(flush) = queue.plan_flush(0) {
                    let fsync = self.disk.fsync_now(&flush.path);
                    if !queue.flushed(flush, fsync) {
                        break;
                    }
                }
            }
        }

        /// The broker starts again on this disk.
        /// The broker of `release` starts again on this disk, checking CRCs.
        fn restart(
            &self,
            last_exit_ok: bool,
            release: &str,
        ) -> (Recovered, CommitLog, ConsumeQueues) {
            self.restart_checking(last_exit_ok, release, true)
        }

        fn restart_checking(
            &self,
            last_exit_ok: bool,
            release: &str,
            check_crc: bool,
        ) -> (Recovered, CommitLog, ConsumeQueues) {
            let rules = Release::parse(release).unwrap().rules();
            let delete_empty = rules.delete_empty_last_file;
            let mut files =
                MappedFileQueue::load(self.disk.clone(), commit_log::DIR, FILE, delete_empty)
                    .unwrap();
            let mut queues =
                ConsumeQueues::load(self.disk.clone(), QUEUE_FILE, delete_empty).unwrap();
            let recovered = recover(
                &mut files,
                &mut queues,
                &Checkpoint::default(),
                last_exit_ok,
                &rules,
                check_crc,
            )
            .unwrap();
            let log = CommitLog::new(files, queues.next_offsets());
            (recovered, log, queues)
        }
    }

    /// Every entry of every queue names a whole record of that queue at that queue
    /// offset, below the log's end.
    fn queues_agree_with_the_log(log: &CommitLog, queues: &ConsumeQueues) -> Result<(), String> {
        for ((topic, queue_id), queue) in queues.iter() {
            for i in 0..queue.max_offset_in_queue() {
                let entry = queue.entry(i).map_err(|e| e.to_string())?.ok_or("entry")?;
                let end = entry.commit_log_offset as u64 + entry.size as u64;
                if end > log.max_offset() {
                    return Err(format!("{topic}/{queue_id} entry {i} past the end"));
                }
                let bytes = log
                    .files()
                    .read(entry.commit_log_offset as u64, entry.size as usize)
                    .map_err(|e| e.to_string())?;
                let Checked::Message(record) = message::check(&bytes, true) else {
                    return Err(format!("{topic}/{queue_id} entry {i}: no record"));
                };
                if (record.queue_id, record.queue_offset) != (*queue_id, i) {
                    return Err(format!("{topic}/{queue_id} entry {i}: {record:?}"));
                }
            }
        }
        Ok(())
    }

    #[test]
    fn a_clean_restart_finds_everything_where_it_was() {
        let mut store = Store::new(disk(PowerLossModel::DropUnflushed, 1));
        for n in 0..50 {
            store.append(n as i32 % 2, n);
        }
        store.dispatch();
        store.flush_log();
        store.flush_queues();
        let end = store.log.max_offset();
        let (recovered, log, queues) = store.restart(true, NEWEST);
        assert_eq!((recovered.end, recovered.half_message), (end, None));
        assert_eq!(recovered.dispatched, 0);
        assert!(recovered.undispatched.is_empty());
        assert_eq!(log.next_queue_offset("orders", 0), 25);
        assert_eq!(log.next_queue_offset("orders", 1), 25);
        queues_agree_with_the_log(&log, &queues).unwrap();
    }

    /// A power loss takes the unflushed tail; abnormal recovery rebuilds the queues from
    /// the log, and the next message gets a lost message's queue offset again (#7689).
    #[test]
    fn a_lost_tail_is_cut_and_its_queue_offsets_are_handed_out_again() {
        let mut store = Store::new(disk(PowerLossModel::DropUnflushed, 1));
        for n in 0..6 {
            store.append(0, n);
        }
        store.flush_log();
        let flushed = store.log.flushed_where();
        for n in 6..10 {
            store.append(0, n);
        }
        store.dispatch();
        store.disk.power_loss();
        let (recovered, mut log, queues) = store.restart(false, NEWEST);
        assert_eq!(recovered.end, flushed);
        assert_eq!(
            recovered.dispatched, 6,
            "the queue was never flushed: all rebuilt"
        );
        assert_eq!(queues.get("orders", 0).unwrap().max_offset_in_queue(), 6);
        queues_agree_with_the_log(&log, &queues).unwrap();
        let again = log.append(&mut message(0, 99), 5_000).unwrap();
        assert_eq!((again.wrote_offset, again.queue_offset), (flushed, 6));
    }

    /// A rotten body ends the log at its record, however much follows, if the scan
    /// reaches it: a clean start scans only from the file holding the queues' end, an
    /// abnormal one from the checkpoint's file (file 0 here). The queues that reached
    /// past the end are cut back.
    #[test]
    fn a_rotten_record_ends_the_log_where_the_scan_meets_it() {
        let build = |seed| {
            let mut store = Store::new(disk(PowerLossModel::DropUnflushed, seed));
            for n in 0..30 {
                store.append(0, n);
            }
            store.dispatch();
            store.flush_log();
            store.flush_queues();
            // Record 12 lies in the first file: 20 records of 197 bytes fill it.
            let at = 12 * 197 + 100;
            let first = "store/commitlog/00000000000000000000";
            store.disk.write(first, at, &[0xEE]).unwrap();
            store
        };
        let (clean, _, _) = build(1).restart(true, NEWEST);
        assert_eq!(clean.start_file, 4096);
        assert_eq!(clean.end, 4096 + 10 * 197, "the first file is not scanned");

        let (recovered, log, queues) = build(1).restart(false, NEWEST);
        assert_eq!(recovered.end, 12 * 197);
        assert_eq!(recovered.queues_truncated, Some(12 * 197));
        assert_eq!(log.files().files().len(), 1, "the second file is deleted");
        assert_eq!(queues.get("orders", 0).unwrap().max_offset_in_queue(), 12);
        queues_agree_with_the_log(&log, &queues).unwrap();

        let (read_on, _, _) = build(1).restart_checking(false, NEWEST, false);
        assert_eq!(read_on.end, 4096 + 10 * 197, "checkCRCOnRecover = false");
    }

    /// A "clean" start over a ConsumeQueue that fell behind (the `abort` file was never
    /// fsynced, so a power loss can take it): 5.3.2's normal recovery dispatches only the
    /// records that start past the queues' end, so the one starting exactly there is
    /// never indexed and the next lands in its slot; before 5.3.2 nothing is dispatched.
    #[test]
    fn a_clean_start_over_a_queue_behind_leaves_records_unindexed() {
        let build = || {
            let mut store = Store::new(disk(PowerLossModel::DropUnflushed, 1));
            for n in 0..3 {
                store.append(0, n);
            }
            store.dispatch();
            store.flush_queues();
            for n in 3..8 {
                store.append(0, n);
            }
            store.flush_log();
            store
        };
        let (recovered, log, queues) = build().restart(true, NEWEST);
        assert_eq!(recovered.end, 8 * 197);
        let missed: Vec<i64> = recovered
            .undispatched
            .iter()
            .map(|d| d.queue_offset)
            .collect();
        assert_eq!(missed, [3], "the record at the queues' end is passed over");
        assert_eq!(recovered.dispatched, 4);
        let queue = queues.get("orders", 0).unwrap();
        assert_eq!(queue.max_offset_in_queue(), 7);
        assert!(
            queues_agree_with_the_log(&log, &queues).is_err(),
            "record 4 sits in slot 3"
        );

        let (recovered, _, queues) = build().restart(true, "5.3.1");
        assert_eq!(recovered.dispatched, 0);
        assert_eq!(recovered.undispatched.len(), 5);
        assert_eq!(queues.get("orders", 0).unwrap().max_offset_in_queue(), 3);
    }

    #[derive(Clone, Debug)]
    enum Step {
        Append(i32),
        Dispatch,
        Commit,
        FlushLog,
        FlushQueues,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (0..3i32).prop_map(Step::Append),
            1 => Just(Step::Dispatch),
            1 => Just(Step::Commit),
            1 => Just(Step::FlushLog),
            1 => Just(Step::FlushQueues),
        ]
    }

    fn power_loss() -> impl Strategy<Value = PowerLossModel> {
        prop_oneof![
            Just(PowerLossModel::DropUnflushed),
            Just(PowerLossModel::RandomWriteback),
            Just(PowerLossModel::TornTail),
        ]
    }

    proptest! {
        /// Whatever was appended, committed (with the TransientStorePool), dispatched and
        /// flushed before a power loss, abnormal recovery (from file 0, the checkpoint
        /// never written) keeps every record the CommitLog flushed, as it was, and leaves every queue indexing exactly its own records in
        /// queue-offset order, the next offset where it ends.
        #[test]
        fn abnormal_recovery_keeps_what_was_flushed_and_rebuilds_the_queues(
            steps in proptest::collection::vec(step(), 1..120),
            model in power_loss(),
            seed in 0..1_000u64,
            transient in any::<bool>(),
        ) {
            let disk = disk(model, seed);
            let mut store = if transient { Store::transient(disk) } else { Store::new(disk) };
            let mut n = 0u8;
            for step in steps {
                match step {
                    Step::Append(queue) => {
                        store.append(queue, n);
                        n = n.wrapping_add(1);
                    }
                    Step::Dispatch => store.dispatch(),
                    Step::Commit => {
                        store.log.commit(0).unwrap();
                    }
                    Step::FlushLog => store.flush_log(),
                    Step::FlushQueues => store.flush_queues(),
                }
            }
            let flushed = store.log.flushed_where();
            let (durable, _) = store.log.dispatchable(0, flushed).unwrap();
            store.disk.power_loss();
            let (recovered, log, queues) = store.restart(false, NEWEST);
            let (kept, _) = log.dispatchable(0, recovered.end).unwrap();
            prop_assert!(
                kept.len() >= durable.len() && kept[..durable.len()] == durable[..],
                "{} records flushed, {} kept", durable.len(), kept.len()
            );
            prop_assert_eq!(log.max_offset(), recovered.end);
            queues_agree_with_the_log(&log, &queues).map_err(TestCaseError::fail)?;
            let (records, _) = log.dispatchable(0, log.max_offset()).unwrap();
            for queue in 0..3 {
                let held = queues.get("orders", queue).map_or(0, |q| q.max_offset_in_queue());
                let count = records.iter().filter(|r| r.queue_id == queue).count() as i64;
                prop_assert_eq!(held, count, "queue {}", queue);
                prop_assert_eq!(log.next_queue_offset("orders", queue), count);
            }
        }
    }
}
