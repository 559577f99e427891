//! Consumer groups: what the group's members processed, against the final read.
//!
//! Model: a record is its partition, offset and message id, so a record the log replaced
//! after a truncation is another record, and a member's `Processed` event is the
//! application having seen it. `unprocessed` is consumer-side loss (records of the final
//! read no processing matches), `reprocessed` consumer-side duplication (records processed
//! more than once). Their examples are told by `group_story`.
//!
//! Cost: one sort of the processings and a merge join per partition.

use super::Counts;
use crate::history::final_state::{FinalState, ReadRecord};
use crate::history::{Event, MessageId, Op};
use crate::types::{Offset, TopicPartition};

/// One member's processing of one record. Sorted, a record's processings sit together in
/// history order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Processing<'a> {
    pub tp: &'a TopicPartition,
    pub offset: Offset,
    pub id: Option<MessageId>,
    /// Its index in the history: when, and the order among events of one instant.
    pub event: usize,
    pub consumer: u32,
}

impl Processing<'_> {
    /// The record it processed.
    fn record(&self) -> (Offset, Option<MessageId>) {
        (self.offset, self.id)
    }
}

/// Final-read records of one partition the group never processed, `first..=last` with
/// nothing processed between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    pub first: Offset,
    pub last: Offset,
    pub records: u64,
}

/// Records of one partition, adjacent among the processed ones, each processed more than
/// once: all first by one member, then all again by one member (maybe the same).
pub struct Repeat<'p, 'a> {
    /// The processings of the first and of the last record.
    pub first: &'p [Processing<'a>],
    pub last: &'p [Processing<'a>],
    pub records: u64,
    /// The most processings of one of them.
    pub most: usize,
}

/// An anomaly found, for its example.
pub enum Found<'p, 'a> {
    /// Records of `tp` never processed; `behind` names a group that had not caught up,
    /// with the first gap only.
    Unprocessed {
        tp: &'a TopicPartition,
        gap: Gap,
        behind: Option<&'a str>,
    },
    Reprocessed(Repeat<'p, 'a>),
}

/// `unprocessed` and `reprocessed`; each anomaly goes to `found` as it is counted, with
/// every processing (sorted) to tell it from. Both stay 0 without a group.
pub fn check<'a>(
    history: &'a [Event],
    final_state: &'a FinalState,
    counts: &mut Counts,
    found: &mut dyn FnMut(&[Processing<'a>], Found<'_, 'a>),
) {
    let Some(group) = &final_state.group else {
        return;
    };
    let processings = processings(history);
    // An incomplete read's tail is unknown, not unprocessed, as it is for `lost`.
    for partition in final_state.partitions.iter().filter(|p| p.complete) {
        let done = of_partition(&processings, &partition.tp);
        for gap in gaps(&partition.read, done) {
            let behind =
                (counts.unprocessed == 0 && !group.caught_up).then_some(group.name.as_str());
            counts.unprocessed += gap.records;
            let tp = &partition.tp;
            found(&processings, Found::Unprocessed { tp, gap, behind });
        }
    }
    for repeat in repeats(&processings) {
        counts.reprocessed += repeat.records;
        found(&processings, Found::Reprocessed(repeat));
    }
}

/// Every processing of the history, sorted by partition, offset, id and history order.
fn processings(history: &[Event]) -> Vec<Processing<'_>> {
    let mut all: Vec<Processing> = history
        .iter()
        .enumerate()
        .filter_map(|(event, e)| match &e.op {
            Op::Processed {
                consumer,
                tp,
                offset,
                id,
            } => Some(Processing {
                tp,
                offset: *offset,
                id: *id,
                event,
                consumer: *consumer,
            }),
            _ => None,
        })
        .collect();
    all.sort_unstable();
    all
}

/// The processings of one partition.
pub fn of_partition<'p, 'a>(
    all: &'p [Processing<'a>],
    tp: &TopicPartition,
) -> &'p [Processing<'a>] {
    let start = all.partition_point(|p| p.tp < tp);
    let end = all.partition_point(|p| p.tp <= tp);
    &all[start..end]
}

/// The runs of `read` (one partition's final read) that no processing in `done` (that
/// partition's, sorted) matches: a merge join of the two.
fn gaps<'r>(read: &'r [ReadRecord], done: &'r [Processing]) -> impl Iterator<Item = Gap> + 'r {
    debug_assert!(
        read.is_sorted_by_key(|r| r.offset),
        "a read is in offset order"
    );
    let mut records = read.iter();
    let mut done = done.iter().peekable();
    std::iter::from_fn(move || {
        let mut gap: Option<Gap> = None;
        for record in records.by_ref() {
            let key = (record.offset, record.id);
            while done.next_if(|p| p.record() < key).is_some() {}
            if done.peek().is_some_and(|p| p.record() == key) {
                if gap.is_some() {
                    return gap;
                }
                continue;
            }
            match &mut gap {
                Some(gap) => {
                    gap.last = record.offset;
                    gap.records += 1;
                }
                None => {
                    gap = Some(Gap {
                        first: record.offset,
                        last: record.offset,
                        records: 1,
                    })
                }
            }
        }
        gap
    })
}

/// The records processed more than once, as runs per partition and pair of members.
fn repeats<'p, 'a>(all: &'p [Processing<'a>]) -> impl Iterator<Item = Repeat<'p, 'a>> {
    let mut records = all
        .chunk_by(|a, b| (a.tp, a.record()) == (b.tp, b.record()))
        .peekable();
    // Who processed a record first, and who second.
    let pair = |r: &[Processing]| (r[0].consumer, r[1].consumer);
    std::iter::from_fn(move || {
        let first = records.find(|r| r.len() > 1)?;
        let mut repeat = Repeat {
            first,
            last: first,
            records: 1,
            most: first.len(),
        };
        while let Some(next) =
            records.next_if(|r| r.len() > 1 && r[0].tp == first[0].tp && pair(r) == pair(first))
        {
            repeat.last = next;
            repeat.records += 1;
            repeat.most = repeat.most.max(next.len());
        }
        Some(repeat)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    //! Counting; the fixtures serve Kafka's teller's tests too.

    use super::super::tell::Untold;
    use super::super::{Count, Verdict};
    use crate::history::facts::FactEvent;
    use crate::history::final_state::{FinalState, GroupFinal, PartitionFinal, ReadRecord};
    use crate::history::{Event, MessageId, Op};
    use crate::os::clock::SimTime;
    use crate::types::{BrokerId, Offset, TopicPartition};
    use std::ops::Range;

    /// The size of the fixtures' values.
    pub(crate) const VALUE_BYTES: usize = 20;

    /// The counts, with blank examples: the words are each system's teller's.
    fn check(history: &[Event], state: &FinalState) -> Verdict {
        super::super::check(history, state, VALUE_BYTES, &Untold)
    }

    pub(crate) fn tp() -> TopicPartition {
        TopicPartition::new("orders", 0)
    }

    /// The record at `offset`: written by producer-1, its sequence the offset.
    pub(crate) fn id(offset: i64) -> MessageId {
        MessageId {
            producer: 1,
            seq: offset as u32,
        }
    }

    pub(crate) fn event(ms: u64, consumer: u32, op: Op) -> Event {
        Event {
            time: SimTime::from_millis(ms),
            process: format!("consumer-{consumer}").into(),
            op,
        }
    }

    pub(crate) fn resume(ms: u64, consumer: u32, offset: i64, committed: bool) -> Event {
        let op = Op::Resume {
            consumer,
            tp: tp(),
            offset: Offset(offset),
            committed,
        };
        event(ms, consumer, op)
    }

    pub(crate) fn committed(ms: u64, consumer: u32, offset: i64) -> Event {
        let op = Op::Committed {
            consumer,
            tp: tp(),
            offset: Offset(offset),
        };
        event(ms, consumer, op)
    }

    /// `consumer` processes the records at `offsets`, one every 10 ms from `ms`.
    pub(crate) fn process(ms: u64, consumer: u32, offsets: Range<i64>) -> Vec<Event> {
        offsets
            .enumerate()
            .map(|(i, offset)| {
                let op = Op::Processed {
                    consumer,
                    tp: tp(),
                    offset: Offset(offset),
                    id: Some(id(offset)),
                };
                event(ms + 10 * i as u64, consumer, op)
            })
            .collect()
    }

    /// orders/0 holding the records at `offsets` (up to its HW), read completely, and the
    /// group `audit`, caught up.
    pub(crate) fn final_state(offsets: Range<i64>, faults: Vec<FactEvent>) -> FinalState {
        FinalState {
            outputs: Vec::new(),
            partitions: vec![PartitionFinal {
                tp: tp(),
                leader: Some(BrokerId(1)),
                high_watermark: Offset(offsets.end),
                log_start_offset: Offset(offsets.start),
                last_stable_offset: None,
                read: offsets
                    .map(|o| ReadRecord::new(Offset(o), &id(o).value(VALUE_BYTES)))
                    .collect(),
                complete: true,
                beyond_lso: None,
                replicas: Vec::new(),
            }],
            facts: faults.into_iter().collect(),
            group: Some(GroupFinal {
                name: "audit".into(),
                caught_up: true,
            }),
        }
    }

    pub(crate) fn texts(verdict: &Verdict, count: Count) -> Vec<&str> {
        verdict
            .examples_of(count)
            .map(|e| e.text.as_str())
            .collect()
    }

    #[test]
    fn a_clean_handoff_at_the_committed_offset_is_neither() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..10));
        history.push(committed(300, 1, 10));
        history.push(resume(1000, 2, 10, true));
        history.extend(process(1010, 2, 10..20));
        let verdict = check(&history, &final_state(0..20, vec![]));
        assert_eq!(
            (verdict.counts.unprocessed, verdict.counts.reprocessed),
            (0, 0)
        );
        assert!(texts(&verdict, Count::Unprocessed).is_empty());
        assert!(texts(&verdict, Count::Reprocessed).is_empty());
    }

    #[test]
    fn without_a_group_neither_is_counted() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..5));
        history.extend(process(200, 1, 0..5));
        let mut state = final_state(0..20, vec![]);
        state.group = None;
        let verdict = check(&history, &state);
        assert_eq!(
            (verdict.counts.unprocessed, verdict.counts.reprocessed),
            (0, 0)
        );
        assert!(!verdict.group);
    }

    #[test]
    fn the_unknown_tail_of_an_incomplete_final_read_is_not_unprocessed() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..10));
        let mut state = final_state(0..20, vec![]);
        assert_eq!(check(&history, &state).counts.unprocessed, 10);
        state.partitions[0].complete = false;
        assert_eq!(check(&history, &state).counts.unprocessed, 0);
    }

    #[test]
    fn a_record_processed_three_times_counts_once() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..2));
        history.push(resume(200, 2, 0, true));
        history.extend(process(210, 2, 0..2));
        history.push(resume(300, 3, 0, true));
        history.extend(process(310, 3, 0..2));
        let verdict = check(&history, &final_state(0..2, vec![]));
        assert_eq!(verdict.counts.reprocessed, 2);
        assert_eq!(texts(&verdict, Count::Reprocessed).len(), 1, "one example");
    }

    #[test]
    fn a_record_without_an_id_is_told_apart_by_its_offset() {
        let processed = |ms: u64, offset: i64| {
            let op = Op::Processed {
                consumer: 1,
                tp: tp(),
                offset: Offset(offset),
                id: None,
            };
            event(ms, 1, op)
        };
        let history = [
            processed(100, 4),
            processed(110, 5),
            processed(200, 4),
            processed(210, 5),
            processed(220, 6),
        ];
        let verdict = check(&history, &final_state(0..0, vec![]));
        assert_eq!(verdict.counts.reprocessed, 2);
    }
}
