//! What the replicas' own logs say: where a lost message still lives, whether every
//! replica agrees with the leader below the high watermark, and which are out of the ISR.

use super::sends::Send;
use crate::history::final_state::{FinalState, PartitionFinal, ReadRecord, ReplicaLog};
use crate::types::{BrokerId, Offset, TopicPartition};

/// A replica log holding a copy of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder<'a> {
    pub broker: BrokerId,
    pub in_isr: bool,
    pub tp: &'a TopicPartition,
    pub offset: Offset,
}

/// For each send (sorted by id), the replica logs that hold a copy of it, its value as
/// sent (`value_bytes` long): one pass over every log.
pub fn holders<'a>(
    state: &'a FinalState,
    sends: &[Send],
    value_bytes: usize,
) -> Vec<Vec<Holder<'a>>> {
    let mut found = vec![Vec::new(); sends.len()];
    if sends.is_empty() {
        return found;
    }
    for partition in &state.partitions {
        for replica in &partition.replicas {
            for record in &replica.records {
                let Some(id) = record.id else {
                    continue;
                };
                let Ok(i) = sends.binary_search_by_key(&id, |s| s.id) else {
                    continue;
                };
                if record.copy_of(value_bytes).is_some() {
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

/// The first place a replica disagrees with the reference below the HW.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence<'a> {
    /// The reference replica: the leader, or without one the first in-ISR replica.
    pub reference: BrokerId,
    pub other: BrokerId,
    /// Whether `other` is in the final ISR.
    pub other_in_isr: bool,
    /// The end of the compared range: the HW, or `other`'s LEO if it is out of the ISR and
    /// ends first.
    pub end: Offset,
    pub offset: Offset,
    pub reference_holds: Option<&'a ReadRecord>,
    pub other_holds: Option<&'a ReadRecord>,
}

/// Compare every replica with the reference from `start`, the larger of the two log start
/// offsets (retention may have deleted different prefixes): an ISR member up to the HW,
/// which it must hold whole; a replica out of the ISR up to min(HW, its LEO). One that
/// never rejoined must not hide a divergence, and one that lags is only checked over
/// what it has.
pub fn divergence<'a>(partition: &'a PartitionFinal) -> Option<Divergence<'a>> {
    let reference = partition
        .replicas
        .iter()
        .find(|r| Some(r.broker) == partition.leader)
        .or_else(|| partition.replicas.iter().find(|r| r.in_isr))?;
    partition
        .replicas
        .iter()
        .filter(|r| r.broker != reference.broker)
        .find_map(|other| {
            let start = reference
                .log_start_offset
                .max(other.log_start_offset)
                .max(partition.log_start_offset);
            // An ISR member must hold everything below the HW; others only what they have.
            let end = if other.in_isr {
                partition.high_watermark
            } else {
                partition.high_watermark.min(other.log_end_offset)
            };
            let range = move |r: &'a ReplicaLog| {
                r.records
                    .iter()
                    .filter(move |rec| rec.offset >= start && rec.offset < end)
            };
            first_difference(range(reference), range(other)).map(|(offset, a, b)| Divergence {
                reference: reference.broker,
                other: other.broker,
                other_in_isr: other.in_isr,
                end,
                offset,
                reference_holds: a,
                other_holds: b,
            })
        })
}

/// The replicas outside the final ISR, when there are any.
pub fn out_of_isr(partition: &PartitionFinal) -> Vec<&ReplicaLog> {
    partition.replicas.iter().filter(|r| !r.in_isr).collect()
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
