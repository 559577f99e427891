//! Checkers: anomaly counts over the history, the final read and the replicas' logs.
//!
//! Model: the checkers know only what a client was told (the history), what a consumer
//! reads after healing (the final read) and what each replica's disk holds (the replica
//! logs); never a broker's memory, so that a broker bug cannot hide itself. The counts
//! are defined in docs/checkers.md; the precise rules for edge cases are on [`Counts`].
//!
//! Cost: O(n log n) in the number of events and records (sorts and merge joins),
//! so that histories of a million events check in well under a second.

mod counts;
pub mod coverage;
mod expect;
mod final_read;
mod groups;
mod processors;
mod reorder;
mod replicas;
mod sends;
pub mod tell;
mod transactions;

pub use counts::{count_name, Count, Counts, ANOMALIES};
pub use expect::{
    comparison_symbol, evaluate, evaluate_some, holds, with_defaults, Comparison, Expectation,
    SomeTally, DEFAULT_ZERO,
};

pub use final_read::{FinalIndex, Located};
pub use groups::{of_partition, Gap, Processing, Repeat};
pub use reorder::Placed;
pub use replicas::{Divergence, Holder};
pub use sends::{Outcome, Send};
pub use tell::{Step, Teller, Told};

#[cfg(test)]
pub(crate) use groups::tests as groups_tests;

use crate::history::facts::{FactEvent, Tally};
use crate::history::final_state::FinalState;
use crate::history::{Event, Op, TxnOutcome};
use crate::os::clock::SimTime;
use std::collections::BTreeMap;

/// Examples kept per count: enough to follow into the trace, few enough to read.
pub const EXAMPLES_PER_COUNT: usize = 5;

/// One instance of a count, in words a person can follow into the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    pub count: Count,
    pub text: String,
    /// How it came about, as timed steps (`t=8.000s fault: power-loss broker-1`), from
    /// the facts the cluster recorded; empty where the facts tell nothing.
    pub why: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub counts: Counts,
    /// At most [`EXAMPLES_PER_COUNT`] per count, ordered by count, then as found (by id
    /// for per-message counts, by history order for reads, by partition otherwise).
    pub examples: Vec<Example>,
    /// When each lost message had been acknowledged, in id order (for the timeline).
    pub lost_acked_at: Vec<SimTime>,
    /// Whether the run consumed as a group: only then do `unprocessed` and `reprocessed`
    /// mean anything, so only then do the reports show them.
    pub group: bool,
    /// Whether the group's members were stream processors (`[workload] output`): only
    /// then do `eos_duplicates` and `eos_missing` mean anything.
    pub processors: bool,
}

impl Verdict {
    /// The examples of one count.
    pub fn examples_of(&self, count: Count) -> impl Iterator<Item = &Example> {
        self.examples.iter().filter(move |e| e.count == count)
    }
}

/// Collects examples, at most [`EXAMPLES_PER_COUNT`] per count; texts are only built when
/// they will be kept, so a run with a million anomalies formats five of them.
#[derive(Default)]
struct Examples {
    kept: BTreeMap<Count, usize>,
    list: Vec<Example>,
}

impl Examples {
    fn wants(&self, count: Count) -> bool {
        self.kept.get(&count).copied().unwrap_or(0) < EXAMPLES_PER_COUNT
    }

    fn add<T: Into<Told>>(&mut self, count: Count, text: impl FnOnce() -> T) {
        if self.wants(count) {
            *self.kept.entry(count).or_insert(0) += 1;
            let told = text().into();
            self.list.push(Example {
                count,
                text: told.text,
                why: told.why,
            });
        }
    }

    fn into_sorted(mut self) -> Vec<Example> {
        self.list.sort_by_key(|e| e.count);
        self.list
    }
}

/// Compute every count, with examples in the words of the system that ran (`teller`).
/// `value_bytes` is the size of every value the producers sent (`[workload] value_bytes`):
/// a record of the final read is a copy of a message only if its value is exactly the one
/// that message was sent with.
pub fn check(
    history: &[Event],
    final_state: &FinalState,
    value_bytes: usize,
    teller: &dyn Teller,
) -> Verdict {
    let sends = sends::sends(history);
    let index = FinalIndex::new(final_state, value_bytes);
    let mut tally = Pass {
        teller,
        counts: Counts::default(),
        examples: Examples::default(),
        lost: Vec::new(),
        reorder: reorder::Groups::default(),
        txns: transactions::Txns::new(history),
    };

    // Merge join of the sends and the final read's copies, both sorted by id.
    let mut occurrences = index.by_id().iter().peekable();
    for send in &sends {
        // Ids in the final read that sort before this send were never attempted.
        while let Some(located) = occurrences.next_if(|l| l.id < send.id) {
            tally.never_sent(&index, located);
        }
        let start = index.by_id().len() - occurrences.len();
        let mut found = 0;
        while occurrences.next_if(|l| l.id == send.id).is_some() {
            found += 1;
        }
        tally.send(send, &index.by_id()[start..start + found], &index);
    }
    for located in occurrences {
        tally.never_sent(&index, located);
    }
    let Pass {
        mut counts,
        mut examples,
        lost,
        reorder,
        txns,
        ..
    } = tally;
    check_transactions(history, final_state, &txns, &mut counts, &mut examples);

    for (part, record) in index.corrupt() {
        counts.unexpected += 1;
        examples.add(Count::Unexpected, || teller.corrupt(&index, part, record));
    }
    let holders = replicas::holders(final_state, &lost, value_bytes);
    for (send, held) in lost.iter().zip(holders) {
        examples.add(Count::Lost, || teller.lost(send, &index, &held));
    }
    counts.reordered = reorder.count(&mut |a, b| {
        examples.add(Count::Reordered, || teller.reordered(&index, a, b));
    });
    counts.out_of_order = reorder.out_of_order();
    check_reads(history, (&index, teller), &mut counts, &mut examples);
    check_partitions(final_state, teller, &mut counts, &mut examples);
    check_groups(history, final_state, teller, &mut counts, &mut examples);
    check_processors(
        history,
        final_state,
        value_bytes,
        &mut counts,
        &mut examples,
    );
    count_facts(final_state.facts.events(), &mut counts);

    let lost_acked_at = lost
        .iter()
        .filter_map(|send| match send.outcome {
            Outcome::Acked { time, .. } => Some(time),
            _ => None,
        })
        .collect();
    Verdict {
        counts,
        examples: examples.into_sorted(),
        lost_acked_at,
        group: final_state.group.is_some(),
        processors: !final_state.outputs.is_empty(),
    }
}

/// The per-message pass: counts, examples, the lost sends to describe once the replicas'
/// holdings are known, and the sequences to check for reordering.
struct Pass<'a> {
    teller: &'a dyn Teller,
    counts: Counts,
    examples: Examples,
    lost: Vec<Send<'a>>,
    reorder: reorder::Groups,
    txns: transactions::Txns,
}

impl<'a> Pass<'a> {
    fn never_sent(&mut self, index: &FinalIndex, located: &final_read::Located) {
        self.counts.unexpected += 1;
        self.examples
            .add(Count::Unexpected, || self.teller.never_sent(index, located));
    }

    /// Outcome, delivery, duplicates, lost, moved and the reorder sequence of one send,
    /// given its copies in the final read (sorted by partition and offset).
    fn send(&mut self, send: &Send<'a>, copies: &[final_read::Located], index: &FinalIndex) {
        let (counts, examples, teller) = (&mut self.counts, &mut self.examples, self.teller);
        counts.attempted += 1;
        match send.outcome {
            Outcome::Acked { degraded, .. } => {
                counts.acked += 1;
                counts.acked_degraded += u64::from(degraded);
            }
            Outcome::Failed { .. } => {
                counts.failed += 1;
                examples.add(Count::Failed, || teller.send_status(send, index, copies));
            }
            Outcome::Indeterminate { .. } | Outcome::Pending => {
                counts.indeterminate += 1;
                counts.unresolved += u64::from(matches!(send.outcome, Outcome::Pending));
                examples.add(Count::Indeterminate, || {
                    teller.send_status(send, index, copies)
                });
            }
        }
        let failed = matches!(send.outcome, Outcome::Failed { .. });
        let read_whole = send
            .tp()
            .and_then(|tp| index.partition_of(tp))
            .is_some_and(|p| p.complete);
        self.txns.saw(send, copies, read_whole);
        let aborted = self.txns.outcome_of(send.id) == Some(TxnOutcome::Aborted);
        if aborted && !copies.is_empty() {
            // Not a false failure: a transaction's abort promises it is never read.
            counts.aborted_reads += copies.len() as u64;
            let txns = &self.txns;
            examples.add(Count::AbortedReads, || {
                txns.aborted_example(send.id, index, &copies[0])
            });
        } else if failed && !copies.is_empty() {
            counts.false_failures += 1;
            examples.add(Count::FalseFailures, || {
                teller.send_status(send, index, copies)
            });
        }
        if copies.is_empty() {
            if !failed {
                counts.missing += 1;
            }
        } else {
            counts.delivered += 1;
            if copies.len() > 1 {
                counts.duplicates += copies.len() as u64 - 1;
                examples.add(Count::Duplicates, || teller.duplicate(send, index, copies));
            }
        }
        let Outcome::Acked { tp, offset, .. } = send.outcome else {
            return;
        };
        let part = index.partition_index(tp);
        let at_the_ack = copies
            .iter()
            .any(|c| Some(c.part) == part && c.offset == offset);
        if let (false, Some(part)) = (at_the_ack, part) {
            let partition = index.partition(part);
            // The final read did not get all of that partition: where it is, is unknown,
            // unless only an open transaction's LSO cut it short and the read past the LSO
            // got the rest. Then a send found there is hidden, and one found nowhere lost.
            let hidden_or_unknown = partition.beyond_lso.is_none() || index.hidden(send.id, part);
            if !partition.complete && hidden_or_unknown {
                return;
            }
        }
        if copies.is_empty() {
            counts.lost += 1;
            if self.lost.len() < EXAMPLES_PER_COUNT {
                self.lost.push(send.clone());
            }
            return;
        }
        if !at_the_ack {
            counts.moved += 1;
            examples.add(Count::Moved, || teller.moved(send, index, copies));
        }
        // A message's position is where its acknowledgement put it, as Jepsen reads a
        // log: a retry that landed late and was the one acknowledged sits there, even if an
        // unacknowledged earlier copy survived. Without that copy, its first in the
        // partition.
        let placed = if at_the_ack {
            Some(offset)
        } else {
            copies
                .iter()
                .find(|c| Some(c.part) == part)
                .map(|c| c.offset)
        };
        if let (Some(part), Some(now)) = (part, placed) {
            self.reorder.push(send.id, part, offset, now);
        }
    }
}

/// Dirty reads: what a consumer saw during the run against the final read at that offset.
fn check_reads(
    history: &[Event],
    (index, teller): (&FinalIndex, &dyn Teller),
    counts: &mut Counts,
    examples: &mut Examples,
) {
    for event in history {
        let Op::Read { tp, offset, id, .. } = &event.op else {
            continue;
        };
        // `None`: no record there; `Some(held)`: the id the record there carries.
        let held = index.at(tp, *offset);
        if held != Some(*id) {
            counts.dirty_reads += 1;
            examples.add(Count::DirtyReads, || {
                teller.dirty_read(event, (tp, *offset), *id, index)
            });
        }
    }
}

/// The transactions' counts: outcomes, aborted records read during the run, torn
/// transactions and hanging partitions.
fn check_transactions(
    history: &[Event],
    final_state: &FinalState,
    txns: &transactions::Txns,
    counts: &mut Counts,
    examples: &mut Examples,
) {
    counts.txn_committed = txns.tally(TxnOutcome::Committed);
    counts.txn_aborted = txns.tally(TxnOutcome::Aborted);
    counts.txn_unknown = txns.tally(TxnOutcome::Unknown);
    for event in transactions::aborted_reads_during_run(history, txns) {
        counts.aborted_reads += 1;
        examples.add(Count::AbortedReads, || {
            let Op::Read {
                consumer,
                tp,
                offset,
                id,
            } = &event.op
            else {
                unreachable!("aborted reads are reads");
            };
            let id = id.map(|id| id.to_string()).unwrap_or_default();
            format!(
                "consumer-{consumer} read {id} of an aborted transaction at {tp}@{} ({})",
                offset.0,
                tell::time(event.time)
            )
        });
    }
    for txn in txns.torn() {
        counts.torn += 1;
        examples.add(Count::Torn, || {
            format!(
                "transaction {} ({:?}): {} of its sends in the read_committed final read, {} absent",
                transactions::range(txn),
                txn.outcome,
                txn.present,
                txn.absent
            )
        });
    }
    for partition in transactions::hanging(final_state) {
        counts.hanging += 1;
        examples.add(Count::Hanging, || {
            format!(
                "{}: the LSO stayed at {} below the HW {} when the heal phase ended: a transaction open there{} holds back every read_committed reader",
                partition.tp,
                partition.last_stable_offset.map_or(-1, |o| o.0),
                partition.high_watermark.0,
                txns.holding_lso(partition),
            )
        });
    }
}

/// The cluster facts: what the controller and the brokers recorded doing, in the terms
/// every system shares.
fn count_facts(facts: &[FactEvent], counts: &mut Counts) {
    for event in facts {
        if let Some(crate::history::facts::kafka::Fact::TxnMarked { started, .. }) =
            event.fact.kafka()
        {
            let stall = event
                .time
                .since_start()
                .saturating_sub(started.since_start());
            counts.lso_stall_max = counts.lso_stall_max.max(stall.as_millis() as u64);
        }
    }
    for tally in facts.iter().filter_map(|event| event.fact.tally()) {
        match tally {
            Tally::Election { unclean } => {
                counts.elections += 1;
                counts.unclean_elections += u64::from(unclean);
            }
            Tally::InSyncShrink => counts.isr_shrinks += 1,
            Tally::InSyncExpand => counts.isr_expands += 1,
            Tally::Truncated(records) => counts.truncated += records,
            Tally::Recovery => counts.recoveries += 1,
            Tally::Retry => counts.retries += 1,
            Tally::RequestTimeout => counts.request_timeouts += 1,
            Tally::Fenced { timed_out } => {
                counts.fenced += 1;
                counts.txn_timeouts += u64::from(timed_out);
            }
            Tally::Markers(partitions) => counts.markers += partitions,
            Tally::Unverified => counts.unverified += 1,
        }
    }
}

/// A consumer group's unprocessed and reprocessed records: counted by `groups`, told by
/// the teller.
fn check_groups(
    history: &[Event],
    final_state: &FinalState,
    teller: &dyn Teller,
    counts: &mut Counts,
    examples: &mut Examples,
) {
    groups::check(
        history,
        final_state,
        counts,
        &mut |processings, found| match found {
            groups::Found::Unprocessed { tp, gap, behind } => examples
                .add(Count::Unprocessed, || {
                    teller.unprocessed(history, processings, (tp, gap), behind)
                }),
            groups::Found::Reprocessed(repeat) => examples.add(Count::Reprocessed, || {
                teller.reprocessed(history, processings, &repeat)
            }),
        },
    );
}

/// The stream processors' outputs against their inputs.
fn check_processors(
    history: &[Event],
    final_state: &FinalState,
    value_bytes: usize,
    counts: &mut Counts,
    examples: &mut Examples,
) {
    let place = |(tp, offset): &(&crate::types::TopicPartition, crate::types::Offset)| {
        format!("{tp}@{}", offset.0)
    };
    processors::check(
        history,
        final_state,
        value_bytes,
        &mut |found| match found {
            processors::Found::Duplicate {
                id,
                outputs,
                inputs,
            } => {
                counts.eos_duplicates += (outputs.len() - inputs.max(1)) as u64;
                examples.add(Count::EosDuplicates, || {
                let at: Vec<String> = outputs.iter().map(place).collect();
                format!(
                    "{id} has {} outputs ({}) for {inputs} input record(s): its effect is seen {} times downstream",
                    outputs.len(),
                    at.join(", "),
                    outputs.len()
                )
            });
            }
            processors::Found::Missing {
                id,
                tp,
                offset,
                committed,
            } => {
                counts.eos_missing += 1;
                examples.add(Count::EosMissing, || {
                format!(
                    "{id} at {tp}@{} is below the group's committed offset {} and has no output: it will never be processed again",
                    offset.0, committed.0
                )
            });
            }
        },
    );
}

/// Divergent, under-replicated, unreadable and offline partitions.
fn check_partitions(
    final_state: &FinalState,
    teller: &dyn Teller,
    counts: &mut Counts,
    examples: &mut Examples,
) {
    for partition in final_state.every_partition() {
        if partition.leader.is_none() {
            counts.offline += 1;
            examples.add(Count::Offline, || teller.offline(partition));
        }
        if !partition.complete {
            counts.unreadable += 1;
            examples.add(Count::Unreadable, || teller.unreadable(partition));
        }
        let out = replicas::out_of_isr(partition);
        if !out.is_empty() {
            counts.under_replicated += 1;
            examples.add(Count::UnderReplicated, || {
                teller.under_replicated(partition, &out)
            });
        }
        if let Some(divergence) = replicas::divergence(partition) {
            counts.divergent += 1;
            examples.add(Count::Divergent, || {
                teller.divergent(partition, &divergence)
            });
        }
    }
}
