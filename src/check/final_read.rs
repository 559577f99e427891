//! The final read indexed two ways: by message id (to follow a send) and by partition and
//! offset (to check what a consumer read during the run). A record is a copy of a message
//! only if its value is exactly the one the message was sent with; the others are corrupt.

use crate::history::final_state::{FinalState, PartitionFinal, ReadRecord};
use crate::history::MessageId;
use crate::types::{Offset, TopicPartition};
use std::collections::BTreeMap;

/// One copy of an id in the final read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Located {
    pub id: MessageId,
    /// Index of the partition in the final state.
    pub part: usize,
    pub offset: Offset,
}

pub struct FinalIndex<'a> {
    partitions: &'a [PartitionFinal],
    tp_index: BTreeMap<&'a TopicPartition, usize>,
    /// The copies of messages, sorted by (id, partition, offset).
    by_id: Vec<Located>,
    /// Per partition, sorted by offset: the id each record's value starts with.
    by_offset: Vec<Vec<(Offset, Option<MessageId>)>>,
    /// (partition index, record index) of records that are no message's copy.
    corrupt: Vec<(usize, usize)>,
    /// Copies in the records past a partition's LSO (`PartitionFinal::beyond_lso`), sorted
    /// as `by_id`: there in the log, hidden from read_committed readers.
    hidden: Vec<Located>,
    /// The size of every value sent (`[workload] value_bytes`).
    value_bytes: usize,
}

impl<'a> FinalIndex<'a> {
    /// `value_bytes`: the size of every value the producers sent.
    pub fn new(state: &'a FinalState, value_bytes: usize) -> FinalIndex<'a> {
        let partitions = state.partitions.as_slice();
        let mut tp_index = BTreeMap::new();
        for (i, p) in partitions.iter().enumerate() {
            tp_index.entry(&p.tp).or_insert(i);
        }
        let records: usize = partitions.iter().map(|p| p.read.len()).sum();
        let mut by_id = Vec::with_capacity(records);
        let mut by_offset = Vec::with_capacity(partitions.len());
        let mut corrupt = Vec::new();
        for (part, p) in partitions.iter().enumerate() {
            let mut here = Vec::with_capacity(p.read.len());
            for (i, record) in p.read.iter().enumerate() {
                match record.copy_of(value_bytes) {
                    Some(id) => by_id.push(Located {
                        id,
                        part,
                        offset: record.offset,
                    }),
                    None => corrupt.push((part, i)),
                }
                here.push((record.offset, record.id));
            }
            here.sort_by_key(|&(offset, _)| offset);
            by_offset.push(here);
        }
        by_id.sort_unstable();
        let mut hidden: Vec<Located> = partitions
            .iter()
            .enumerate()
            .flat_map(|(part, p)| {
                p.beyond_lso.iter().flatten().filter_map(move |record| {
                    record.copy_of(value_bytes).map(|id| Located {
                        id,
                        part,
                        offset: record.offset,
                    })
                })
            })
            .collect();
        hidden.sort_unstable();
        FinalIndex {
            partitions,
            tp_index,
            by_id,
            by_offset,
            corrupt,
            hidden,
            value_bytes,
        }
    }

    /// Whether `id` has a copy past the LSO of partition `part`, in the log but hidden
    /// from read_committed readers by a transaction still open.
    pub fn hidden(&self, id: MessageId, part: usize) -> bool {
        let from = self.hidden.partition_point(|l| (l.id, l.part) < (id, part));
        self.hidden
            .get(from)
            .is_some_and(|l| l.id == id && l.part == part)
    }

    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    pub fn by_id(&self) -> &[Located] {
        &self.by_id
    }

    pub fn partition(&self, part: usize) -> &'a PartitionFinal {
        &self.partitions[part]
    }

    pub fn partition_index(&self, tp: &TopicPartition) -> Option<usize> {
        self.tp_index.get(tp).copied()
    }

    pub fn partition_of(&self, tp: &TopicPartition) -> Option<&'a PartitionFinal> {
        self.partition_index(tp).map(|i| &self.partitions[i])
    }

    /// What the final read holds at `tp`@`offset`: `None` if no record, `Some(None)` for a
    /// record without a parseable id, else the id its value starts with, corrupt or not.
    pub fn at(&self, tp: &TopicPartition, offset: Offset) -> Option<Option<MessageId>> {
        let records = &self.by_offset[self.partition_index(tp)?];
        let i = records.binary_search_by_key(&offset, |&(o, _)| o).ok()?;
        Some(records[i].1)
    }

    /// Final-read records that are no message's copy, with their partition's index: their
    /// value carries no id, or is not the value its id was sent with.
    pub fn corrupt(&self) -> impl Iterator<Item = (usize, &'a ReadRecord)> + '_ {
        self.corrupt
            .iter()
            .map(|&(part, i)| (part, &self.partitions[part].read[i]))
    }
}
