//! The final read indexed two ways: by message id (to follow a send) and by partition and
//! offset (to check what a consumer read during the run).

use crate::history::final_state::{FinalState, PartitionFinal};
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
    /// Sorted by (id, partition, offset).
    by_id: Vec<Located>,
    /// Per partition, sorted by offset: the id each record carries.
    by_offset: Vec<Vec<(Offset, Option<MessageId>)>>,
    /// (partition index, record index) of records without a parseable id.
    unparsed: Vec<(usize, usize)>,
}

impl<'a> FinalIndex<'a> {
    pub fn new(state: &'a FinalState) -> FinalIndex<'a> {
        let partitions = state.partitions.as_slice();
        let mut tp_index = BTreeMap::new();
        for (i, p) in partitions.iter().enumerate() {
            tp_index.entry(&p.tp).or_insert(i);
        }
        let records: usize = partitions.iter().map(|p| p.read.len()).sum();
        let mut by_id = Vec::with_capacity(records);
        let mut by_offset = Vec::with_capacity(partitions.len());
        let mut unparsed = Vec::new();
        for (part, p) in partitions.iter().enumerate() {
            let mut here = Vec::with_capacity(p.read.len());
            for (i, record) in p.read.iter().enumerate() {
                let id = record.id;
                match id {
                    Some(id) => by_id.push(Located {
                        id,
                        part,
                        offset: record.offset,
                    }),
                    None => unparsed.push((part, i)),
                }
                here.push((record.offset, id));
            }
            here.sort_by_key(|&(offset, _)| offset);
            by_offset.push(here);
        }
        by_id.sort_unstable();
        FinalIndex {
            partitions,
            tp_index,
            by_id,
            by_offset,
            unparsed,
        }
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
    /// record without a parseable id.
    pub fn at(&self, tp: &TopicPartition, offset: Offset) -> Option<Option<MessageId>> {
        let records = &self.by_offset[self.partition_index(tp)?];
        let i = records.binary_search_by_key(&offset, |&(o, _)| o).ok()?;
        Some(records[i].1)
    }

    /// Final-read records whose value carries no id: (partition index, offset, value).
    pub fn unparsed(&self) -> impl Iterator<Item = (usize, Offset, &'a [u8])> + '_ {
        self.unparsed.iter().map(|&(part, i)| {
            let record = &self.partitions[part].read[i];
            (part, record.offset, record.unparsed().unwrap_or_default())
        })
    }
}
