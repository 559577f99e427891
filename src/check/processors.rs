//! Stream processors (`[workload] output`): the group's members write one output per input
//! record, carrying the input's id. Exactly once means that what the group committed past
//! has its output once in the read_committed final read of the output topic: no more
//! (`eos_duplicates`), no fewer (`eos_missing`).

use crate::history::final_state::{FinalState, PartitionFinal};
use crate::history::{Event, MessageId, Op};
use crate::types::{Offset, TopicPartition};
use std::collections::BTreeMap;

/// What the processors' checks found.
pub enum Found<'a> {
    /// An input with more outputs than it has copies in the input topic.
    Duplicate {
        id: MessageId,
        outputs: Vec<(&'a TopicPartition, Offset)>,
        inputs: usize,
    },
    /// An input below its partition's committed offset without any output.
    Missing {
        id: MessageId,
        tp: &'a TopicPartition,
        offset: Offset,
        committed: Offset,
    },
}

/// The group's last acknowledged commit per partition, in history order: what the
/// processors will never process again.
fn committed(history: &[Event]) -> BTreeMap<&TopicPartition, Offset> {
    let mut last = BTreeMap::new();
    for event in history {
        if let Op::Committed { tp, offset, .. } = &event.op {
            last.insert(tp, *offset);
        }
    }
    last
}

/// Every copy of each id in `partitions`, as (partition, offset).
fn copies(
    partitions: &[PartitionFinal],
    value_bytes: usize,
) -> BTreeMap<MessageId, Vec<(&TopicPartition, Offset)>> {
    let mut by_id: BTreeMap<MessageId, Vec<(&TopicPartition, Offset)>> = BTreeMap::new();
    for partition in partitions {
        for record in &partition.read {
            if let Some(id) = record.copy_of(value_bytes) {
                by_id
                    .entry(id)
                    .or_default()
                    .push((&partition.tp, record.offset));
            }
        }
    }
    by_id
}

/// `eos_duplicates` and `eos_missing`, each finding given to `found`; both stay 0 without
/// processors. An input written twice (a producer's retry) may have two outputs: only the
/// outputs beyond its copies in the input topic are duplicates. An input is missing only
/// where the output topic was read completely; one the input topic lost after it was
/// processed is neither.
pub fn check<'a>(
    history: &[Event],
    final_state: &'a FinalState,
    value_bytes: usize,
    found: &mut dyn FnMut(Found<'a>),
) {
    if final_state.outputs.is_empty() {
        return;
    }
    let outputs = copies(&final_state.outputs, value_bytes);
    let inputs = copies(&final_state.partitions, value_bytes);
    for (&id, at) in &outputs {
        let copies = inputs.get(&id).map_or(0, Vec::len);
        if at.len() > copies.max(1) {
            found(Found::Duplicate {
                id,
                outputs: at.clone(),
                inputs: copies,
            });
        }
    }
    if !final_state.outputs.iter().all(|p| p.complete) {
        return;
    }
    let committed = committed(history);
    for partition in &final_state.partitions {
        let Some(&upto) = committed.get(&partition.tp) else {
            continue;
        };
        for record in partition.read.iter().take_while(|r| r.offset < upto) {
            let Some(id) = record.copy_of(value_bytes) else {
                continue;
            };
            if !outputs.contains_key(&id) {
                found(Found::Missing {
                    id,
                    tp: &partition.tp,
                    offset: record.offset,
                    committed: upto,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::groups_tests::{committed, final_state, id, VALUE_BYTES};
    use crate::history::final_state::ReadRecord;
    use crate::types::BrokerId;

    /// totals/0 holding outputs of the inputs at `offsets`, in that order.
    fn outputs(offsets: &[i64], complete: bool) -> PartitionFinal {
        let read: Vec<ReadRecord> = offsets
            .iter()
            .enumerate()
            .map(|(at, &o)| ReadRecord::new(Offset(at as i64), &id(o).value(VALUE_BYTES)))
            .collect();
        PartitionFinal {
            tp: TopicPartition::new("totals", 0),
            leader: Some(BrokerId(1)),
            high_watermark: Offset(read.len() as i64),
            log_start_offset: Offset(0),
            last_stable_offset: Some(Offset(read.len() as i64)),
            read,
            complete,
            beyond_lso: None,
            replicas: Vec::new(),
        }
    }

    /// (duplicates, missing) as the verdict counts them.
    fn counts(history: &[Event], state: &FinalState) -> (u64, u64) {
        let (mut duplicates, mut missing) = (0, 0);
        check(history, state, VALUE_BYTES, &mut |found| match found {
            Found::Duplicate {
                outputs, inputs, ..
            } => duplicates += (outputs.len() - inputs.max(1)) as u64,
            Found::Missing { .. } => missing += 1,
        });
        (duplicates, missing)
    }

    #[test]
    fn each_committed_input_once_downstream_is_neither() {
        let mut state = final_state(0..4, Vec::new());
        state.outputs = vec![outputs(&[0, 1, 2, 3], true)];
        assert_eq!(counts(&[committed(10, 1, 4)], &state), (0, 0));
    }

    #[test]
    fn an_output_twice_is_a_duplicate_unless_its_input_is_there_twice() {
        let mut state = final_state(0..4, Vec::new());
        state.outputs = vec![outputs(&[0, 1, 2, 1, 2, 2], true)];
        assert_eq!(
            counts(&[committed(10, 1, 4)], &state),
            (3, 1),
            "3 is missing"
        );
        // The input topic holds input 2 twice (a producer's retry): two outputs are its due.
        let twice = ReadRecord::new(Offset(4), &id(2).value(VALUE_BYTES));
        state.partitions[0].read.push(twice);
        state.partitions[0].high_watermark = Offset(5);
        assert_eq!(counts(&[committed(10, 1, 4)], &state).0, 2);
    }

    #[test]
    fn only_inputs_below_the_last_commit_of_a_completely_read_output_are_missing() {
        let mut state = final_state(0..6, Vec::new());
        state.outputs = vec![outputs(&[0, 1], true)];
        // The group committed 5, then went back to 3 (another member's older commit).
        let history = [committed(10, 1, 5), committed(20, 2, 3)];
        assert_eq!(counts(&history, &state), (0, 1), "input 2 only");
        assert_eq!(
            counts(&[], &state),
            (0, 0),
            "nothing committed, nothing owed"
        );
        state.outputs[0].complete = false;
        assert_eq!(
            counts(&history, &state),
            (0, 0),
            "an output topic not read to its end owes nothing"
        );
    }

    #[test]
    fn without_processors_there_is_nothing_to_count() {
        let state = final_state(0..4, Vec::new());
        assert_eq!(counts(&[committed(10, 1, 4)], &state), (0, 0));
    }
}
