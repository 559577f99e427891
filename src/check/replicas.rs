//! What the replicas' own logs say: where a lost message still lives, and whether the
//! in-sync replicas agree below the high watermark.

use super::sends::Send;
use crate::history::final_state::{FinalState, PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::MessageId;
use crate::types::{BrokerId, Offset, TopicPartition};

/// A replica log holding a copy of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder<'a> {
    pub broker: BrokerId,
    pub in_isr: bool,
    pub tp: &'a TopicPartition,
    pub offset: Offset,
}

/// For each send (sorted by id), the replica logs that hold it: one pass over every log.
pub fn holders<'a>(state: &'a FinalState, sends: &[Send]) -> Vec<Vec<Holder<'a>>> {
    let mut found = vec![Vec::new(); sends.len()];
    if sends.is_empty() {
        return found;
    }
    for partition in &state.partitions {
        for replica in &partition.replicas {
            for record in &replica.records {
                let Some(id) = MessageId::parse_value(&record.value) else {
                    continue;
                };
                if let Ok(i) = sends.binary_search_by_key(&id, |s| s.id) {
                    found[i].push(Holder {
                        broker: replica.broker,
                        in_isr: replica.in_isr,
                        tp: &partition.tp,
                        offset: record.offset,
                    });
                }
            }
        }
    }
    found
}

/// The first place two in-sync replicas disagree below the HW.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence<'a> {
    /// The reference replica (the leader when it is in the ISR).
    pub reference: BrokerId,
    pub other: BrokerId,
    pub offset: Offset,
    pub reference_holds: Option<&'a ReadRecord>,
    pub other_holds: Option<&'a ReadRecord>,
}

/// Compare every in-ISR replica with the reference over `[start, HW)`, where `start` is the
/// largest log start offset among them (retention may have deleted different prefixes).
pub fn divergence<'a>(partition: &'a PartitionFinal) -> Option<Divergence<'a>> {
    let in_isr: Vec<&ReplicaLog> = partition.replicas.iter().filter(|r| r.in_isr).collect();
    let reference = in_isr
        .iter()
        .copied()
        .find(|r| Some(r.broker) == partition.leader)
        .or_else(|| in_isr.first().copied())?;
    let start = in_isr
        .iter()
        .map(|r| r.log_start_offset)
        .chain(std::iter::once(partition.log_start_offset))
        .max()
        .unwrap_or(partition.log_start_offset);
    let end = partition.high_watermark;
    let below_hw = move |r: &'a ReplicaLog| {
        r.records
            .iter()
            .filter(move |rec| rec.offset >= start && rec.offset < end)
    };
    in_isr
        .iter()
        .filter(|r| r.broker != reference.broker)
        .find_map(|other| {
            first_difference(below_hw(reference), below_hw(other)).map(|(offset, a, b)| {
                Divergence {
                    reference: reference.broker,
                    other: other.broker,
                    offset,
                    reference_holds: a,
                    other_holds: b,
                }
            })
        })
}

type Difference<'a> = (Offset, Option<&'a ReadRecord>, Option<&'a ReadRecord>);

/// Walk two offset-ordered record sequences to their first difference.
fn first_difference<'a>(
    mut a: impl Iterator<Item = &'a ReadRecord>,
    mut b: impl Iterator<Item = &'a ReadRecord>,
) -> Option<Difference<'a>> {
    loop {
        match (a.next(), b.next()) {
            (None, None) => return None,
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) if x.offset < y.offset => return Some((x.offset, Some(x), None)),
            (Some(x), Some(y)) if y.offset < x.offset => return Some((y.offset, None, Some(y))),
            (Some(x), Some(y)) => return Some((x.offset, Some(x), Some(y))),
            (Some(x), None) => return Some((x.offset, Some(x), None)),
            (None, Some(y)) => return Some((y.offset, None, Some(y))),
        }
    }
}
