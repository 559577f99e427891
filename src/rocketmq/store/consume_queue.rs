//! One queue's index into the CommitLog (`ConsumeQueue`): 20-byte entries, the i-th at
//! byte 20·i, each the CommitLog offset and size of the queue's i-th message and its tags
//! code. Consumers read only what is here: a message is visible once dispatch wrote its
//! entry. Files of 300,000 entries live in `consumequeue/<topic>/<queueId>/`, named by
//! their first byte offset; an entry can straddle two 4 KiB pages.

use super::mapped_file::{Flush, LoadError, MappedFileQueue};
use super::message::Dispatch;
use crate::os::disk::{Disk, DiskError};
use std::collections::BTreeMap;

/// Where every queue's directory lives, under the store root.
pub const ROOT: &str = "store/consumequeue";

/// `CQ_STORE_UNIT_SIZE`.
pub const ENTRY_BYTES: u64 = 20;

/// The queue's directory under the store root.
pub fn dir(topic: &str, queue_id: i32) -> String {
    format!("{ROOT}/{topic}/{queue_id}")
}

/// One entry, big-endian: offset 8, size 4, tags code 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub commit_log_offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

impl Entry {
    /// What `fillPreBlank` writes below a queue's first entry when its first file starts
    /// past offset 0.
    pub(super) const PRE_BLANK: Entry = Entry {
        commit_log_offset: 0,
        size: i32::MAX,
        tags_code: 0,
    };

    pub fn to_bytes(self) -> [u8; ENTRY_BYTES as usize] {
        let mut out = [0; ENTRY_BYTES as usize];
        out[..8].copy_from_slice(&self.commit_log_offset.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Entry {
        Entry {
            commit_log_offset: i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes")),
            size: i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes")),
            tags_code: i64::from_be_bytes(bytes[12..20].try_into().expect("8 bytes")),
        }
    }

    /// What recovery and truncation take for an entry (a pre-blank one counts).
    fn valid(self) -> bool {
        self.commit_log_offset >= 0 && self.size > 0
    }
}

/// What a dispatch did to the queue (`putMessagePositionInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    Appended,
    /// Already indexed: at or below the queue's highest CommitLog end, or below its
    /// write position (a re-dispatch after recovery).
    Skipped,
    /// Appended at the queue's end although its queue offset said a later slot: Java only
    /// logs "\[BUG\]logic queue order maybe wrong", and from here the entry's index and
    /// the record's QUEUEOFFSET disagree.
    Gap {
        expected: u64,
        at: u64,
    },
}

#[derive(Clone, Debug)]
pub struct ConsumeQueue {
    files: MappedFileQueue,
    /// The CommitLog end of the last entry (`maxPhysicOffset`), -1 while empty.
    max_physic_offset: i64,
}

impl ConsumeQueue {
    pub fn new(files: MappedFileQueue) -> ConsumeQueue {
        ConsumeQueue {
            files,
            max_physic_offset: -1,
        }
    }

    /// An empty queue of `file_size` files (`mappedFileSizeConsumeQueue`).
    pub fn empty(disk: Disk, topic: &str, queue_id: i32, file_size: u64) -> ConsumeQueue {
        debug_assert_eq!(file_size % ENTRY_BYTES, 0);
        ConsumeQueue::new(MappedFileQueue::new(disk, &dir(topic, queue_id), file_size))
    }

    pub fn files(&self) -> &MappedFileQueue {
        &self.files
    }

    pub fn max_physic_offset(&self) -> i64 {
        self.max_physic_offset
    }

    /// The next queue offset: entries written, pre-blank ones included
    /// (`getMaxOffsetInQueue`).
    pub fn max_offset_in_queue(&self) -> i64 {
        (self.files.max_offset() / ENTRY_BYTES) as i64
    }

    /// The entry at queue offset `index`, if written.
    pub fn entry(&self, index: i64) -> Result<Option<Entry>, DiskError> {
        let Ok(at) = u64::try_from(index) else {
            return Ok(None);
        };
        let at = at * ENTRY_BYTES;
        if at + ENTRY_BYTES > self.files.max_offset() {
            return Ok(None);
        }
        let bytes = self.files.read(at, ENTRY_BYTES as usize)?;
        Ok((bytes.len() as u64 >= ENTRY_BYTES).then(|| Entry::from_bytes(&bytes)))
    }

    /// `putMessagePositionInfo`: index a dispatched message.
    pub fn put(&mut self, message: &Dispatch) -> Result<Put, DiskError> {
        let offset = message.commit_log_offset;
        let size = i64::from(message.msg_size);
        if offset + size <= self.max_physic_offset {
            return Ok(Put::Skipped);
        }
        let queue_offset = u64::try_from(message.queue_offset).unwrap_or(0);
        let expected = queue_offset * ENTRY_BYTES;
        let first_in_queue = self.files.files().is_empty();
        let file_size = self.files.file_size();
        let file = self.files.last_file(expected)?;
        if first_in_queue && queue_offset != 0 && file.wrote == 0 {
            self.files.set_flushed_where(expected);
            for _ in 0..(expected % file_size) / ENTRY_BYTES {
                self.files
                    .append(&Entry::PRE_BLANK.to_bytes(), ENTRY_BYTES, 0)?;
            }
        }
        let mut put = Put::Appended;
        if queue_offset != 0 {
            let current = self.files.max_offset();
            if expected < current {
                return Ok(Put::Skipped);
            }
            if expected != current {
                put = Put::Gap {
                    expected: queue_offset,
                    at: current / ENTRY_BYTES,
                };
            }
        }
        self.max_physic_offset = offset + size;
        let entry = Entry {
            commit_log_offset: offset,
            size: message.msg_size as i32,
            tags_code: message.tags_code,
        };
        self.files.append(&entry.to_bytes(), ENTRY_BYTES, 0)?;
        Ok(put)
    }

    pub fn plan_flush(&self, least_pages: u64) -> Option<Flush> {
        self.files.plan_flush(least_pages)
    }

    pub fn flushed(&mut self, flush: Flush, fsync: Result<(), DiskError>) -> bool {
        // A ConsumeQueue file never runs with the CommitLog's running flags: a failed
        // force moves its position in every release.
        self.files.flushed(flush, fsync, true)
    }

    /// `recover`: scan from the third-last file, stop at the first entry that is not
    /// valid, and cut the queue there (files after it deleted, the bytes after it kept).
    pub fn recover(&mut self) -> Result<(), DiskError> {
        let count = self.files.files().len();
        if count == 0 {
            return Ok(());
        }
        let file_size = self.files.file_size();
        let mut index = count.saturating_sub(3);
        let mut process = self.files.files()[index].from;
        loop {
            let bytes = self.files.read_file(index)?;
            let mut valid_to = 0;
            for chunk in bytes.chunks_exact(ENTRY_BYTES as usize) {
                let entry = Entry::from_bytes(chunk);
                if !entry.valid() {
                    break;
                }
                valid_to += ENTRY_BYTES;
                self.max_physic_offset = entry.commit_log_offset + i64::from(entry.size);
            }
            if valid_to == file_size && index + 1 < count {
                index += 1;
                process = self.files.files()[index].from;
                continue;
            }
            process += valid_to;
            break;
        }
        self.files.set_flushed_where(process);
        self.files.truncate_dirty_files(process)
    }

    /// `truncateDirtyLogicFiles(phyOffset)`: drop the entries at or past the CommitLog's
    /// recovered end, from the last file back; a file whose first entry is past it goes.
    pub fn truncate_dirty(&mut self, phy_offset: i64) -> Result<(), DiskError> {
        self.max_physic_offset = phy_offset;
        let file_size = self.files.file_size();
        while let Some(last) = self.files.files().last() {
            let from = last.from;
            let bytes = self.files.read_file(self.files.files().len() - 1)?;
            let mut keep = 0;
            let mut delete = false;
            for (i, chunk) in bytes.chunks_exact(ENTRY_BYTES as usize).enumerate() {
                let entry = Entry::from_bytes(chunk);
                let past = entry.commit_log_offset >= phy_offset;
                if i == 0 && past {
                    delete = true;
                    break;
                }
                if i > 0 && (!entry.valid() || past) {
                    break;
                }
                keep += ENTRY_BYTES;
                self.max_physic_offset = entry.commit_log_offset + i64::from(entry.size);
                if keep == file_size {
                    break;
                }
            }
            if delete {
                self.files.delete_last_file()?;
                continue;
            }
            return self.files.truncate_dirty_files(from + keep);
        }
        Ok(())
    }
}

/// Every queue of the store (`ConsumeQueueStore`), made as dispatch first needs one
/// (`findOrCreateConsumeQueue`).
#[derive(Clone, Debug)]
pub struct ConsumeQueues {
    disk: Disk,
    file_size: u64,
    queues: BTreeMap<(String, i32), ConsumeQueue>,
}

impl ConsumeQueues {
    pub fn new(disk: Disk, file_size: u64) -> ConsumeQueues {
        ConsumeQueues {
            disk,
            file_size,
            queues: BTreeMap::new(),
        }
    }

    /// Every queue directory on disk (`ConsumeQueueStore.load`).
    pub fn load(
        disk: Disk,
        file_size: u64,
        delete_empty_last: bool,
    ) -> Result<ConsumeQueues, LoadError> {
        let mut queues = ConsumeQueues::new(disk.clone(), file_size);
        for topic in disk.list_dirs(ROOT) {
            for queue in disk.list_dirs(&format!("{ROOT}/{topic}")) {
                let Ok(queue_id) = queue.parse::<i32>() else {
                    continue;
                };
                let files = MappedFileQueue::load(
                    disk.clone(),
                    &dir(&topic, queue_id),
                    file_size,
                    delete_empty_last,
                )?;
                queues
                    .queues
                    .insert((topic.clone(), queue_id), ConsumeQueue::new(files));
            }
        }
        Ok(queues)
    }

    pub fn get(&self, topic: &str, queue_id: i32) -> Option<&ConsumeQueue> {
        self.queues.get(&(topic.to_string(), queue_id))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&(String, i32), &ConsumeQueue)> {
        self.queues.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&(String, i32), &mut ConsumeQueue)> {
        self.queues.iter_mut()
    }

    /// Index a dispatched message in its queue.
    pub fn dispatch(&mut self, message: &Dispatch) -> Result<Put, DiskError> {
        let key = (message.topic.clone(), message.queue_id);
        let queue = self.queues.entry(key).or_insert_with(|| {
            ConsumeQueue::empty(
                self.disk.clone(),
                &message.topic,
                message.queue_id,
                self.file_size,
            )
        });
        queue.put(message)
    }

    /// The highest CommitLog end any queue indexes (`getMaxPhyOffsetInConsumeQueue`),
    /// -1 with none.
    pub fn max_physic_offset(&self) -> i64 {
        self.queues
            .values()
            .map(ConsumeQueue::max_physic_offset)
            .max()
            .unwrap_or(-1)
            .max(-1)
    }

    /// Each queue's next queue offset, from what it holds (`recoverTopicQueueTable`): a
    /// queue that lost its tail hands the lost offsets out again.
    pub fn next_offsets(&self) -> BTreeMap<(String, i32), i64> {
        self.queues
            .iter()
            .map(|(key, queue)| (key.clone(), queue.max_offset_in_queue()))
            .collect()
    }

    /// `ConsumeQueueStore.flush`: one full flush of every queue, at once.
    pub fn flush_now(&mut self) -> Result<(), DiskError> {
        for queue in self.queues.values_mut() {
            queue.files.flush_now()?;
        }
        Ok(())
    }

    /// No CommitLog at all: every queue goes.
    pub fn destroy(&mut self) -> Result<(), DiskError> {
        for queue in self.queues.values_mut() {
            while !queue.files.files().is_empty() {
                queue.files.delete_last_file()?;
            }
        }
        self.queues.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::disk::DiskConfig;

    fn dispatch(queue_offset: i64, commit_log_offset: i64) -> Dispatch {
        Dispatch {
            topic: "orders".into(),
            queue_id: 0,
            commit_log_offset,
            msg_size: 100,
            tags_code: 97,
            store_timestamp: 1,
            queue_offset,
            keys: String::new(),
            uniq_key: None,
            sys_flag: 0,
            prepared_transaction_offset: 0,
        }
    }

    #[test]
    fn an_entry_is_offset_size_and_tags_code_big_endian() {
        let entry = Entry {
            commit_log_offset: 0x1122_3344_5566_7788,
            size: 197,
            tags_code: -1,
        };
        let mut expected = vec![0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0, 197];
        expected.extend([0xFF; 8]);
        assert_eq!(entry.to_bytes()[..], expected[..]);
        assert_eq!(Entry::from_bytes(&expected), entry);
    }

    /// Entries go where the queue ends; a re-dispatch is skipped; a gap is only noted.
    #[test]
    fn entries_are_appended_at_the_end_whatever_their_queue_offset_says() {
        let disk = Disk::new(DiskConfig::default(), 1);
        let mut queue = ConsumeQueue::empty(disk.clone(), "orders", 0, 6_000);
        for i in 0..3 {
            assert_eq!(queue.put(&dispatch(i, i * 100)).unwrap(), Put::Appended);
        }
        assert_eq!(queue.put(&dispatch(1, 100)).unwrap(), Put::Skipped);
        assert_eq!(
            queue.put(&dispatch(5, 1_000)).unwrap(),
            Put::Gap { expected: 5, at: 3 }
        );
        assert_eq!(queue.max_offset_in_queue(), 4);
        assert_eq!(queue.entry(3).unwrap().unwrap().commit_log_offset, 1_000);
        assert_eq!(queue.entry(4).unwrap(), None);
        let file = disk
            .read_all("store/consumequeue/orders/0/00000000000000000000")
            .unwrap();
        assert_eq!(file.len(), 6_000, "preallocated, zero-filled");
    }

    /// A queue whose first file starts past offset 0 fills the slots below its first
    /// entry with pre-blank entries.
    #[test]
    fn a_queue_starting_late_is_filled_with_pre_blanks() {
        let disk = Disk::new(DiskConfig::default(), 1);
        let mut queue = ConsumeQueue::empty(disk, "orders", 0, 200);
        assert_eq!(queue.put(&dispatch(13, 5_000)).unwrap(), Put::Appended);
        assert_eq!(
            queue.files().files()[0].from,
            200,
            "file of entries 10 to 19"
        );
        assert_eq!(queue.entry(10).unwrap(), Some(Entry::PRE_BLANK));
        assert_eq!(queue.entry(13).unwrap().unwrap().commit_log_offset, 5_000);
        assert_eq!(queue.max_offset_in_queue(), 14);
    }

    /// Recovery keeps valid entries across full files and cuts at the first invalid
    /// one; truncation then drops what points at or past the CommitLog's end.
    #[test]
    fn recovery_and_truncation_cut_where_rocketmq_cuts() {
        let disk = Disk::new(DiskConfig::default(), 1);
        let mut queue = ConsumeQueue::empty(disk.clone(), "orders", 0, 100);
        for i in 0..12 {
            queue.put(&dispatch(i, i * 100)).unwrap();
        }
        // A torn entry in the third file: its size reads 0.
        disk.write(
            "store/consumequeue/orders/0/00000000000000000200",
            28,
            &[0; 4],
        )
        .unwrap();
        let mut loaded = ConsumeQueue::new(
            MappedFileQueue::load(disk.clone(), &dir("orders", 0), 100, true).unwrap(),
        );
        loaded.recover().unwrap();
        assert_eq!(loaded.max_offset_in_queue(), 11);
        assert_eq!(loaded.max_physic_offset(), 1_100);

        loaded.truncate_dirty(650).unwrap();
        assert_eq!(loaded.max_offset_in_queue(), 7, "entries at 700 and on go");
        assert_eq!(loaded.max_physic_offset(), 700);
        assert_eq!(
            loaded.files().files().len(),
            2,
            "the third file, all past, deleted"
        );
        loaded.truncate_dirty(0).unwrap();
        assert_eq!(loaded.max_offset_in_queue(), 0);
    }
}
