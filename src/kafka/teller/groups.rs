//! Consumer groups' examples: the stories of `unprocessed` and `reprocessed` (counted in
//! `groups`). They tell offset ranges per partition, with what moved the group's position
//! past a range or back before it: the `Resume` or `Reset`, the commit a resume started
//! from, and the faults that struck the member in between.
//!
//! Cost: each story is a pass over the history and the faults: a run tells at most ten,
//! so an index would cost more than it saves.

use super::describe;
use super::story::{self, Chronicle};
use crate::check::tell::{self, Step, Told};
use crate::check::{of_partition, Gap, Processing, Repeat};
use crate::history::facts::{Fact, FactEvent};
use crate::history::{Event, MessageId, Op};
use crate::os::clock::SimTime;
use crate::types::{HostName, Offset, TopicPartition};
use std::fmt::Write;

/// Faults told that struck a member between the commit and the resume: the fault and the
/// restart.
const FAULTS_TOLD: usize = 2;

/// How a member came to a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// Resumed at the group's committed offset.
    Committed,
    /// Resumed where `auto.offset.reset` put it: the group had no committed offset.
    NoCommit,
    /// Its position `from` was out of range, and `auto.offset.reset` moved it.
    OutOfRange { from: Offset },
}

/// A `Resume` or a `Reset`: a member's position of a partition set to `at`.
#[derive(Clone, Copy, Debug)]
struct Start {
    event: usize,
    time: SimTime,
    consumer: u32,
    at: Offset,
    how: How,
}

/// An acknowledged commit.
#[derive(Clone, Copy, Debug)]
struct Commit {
    time: SimTime,
    consumer: u32,
}

fn member(consumer: u32) -> HostName {
    HostName::Consumer(consumer)
}

/// `orders/0@4089–4099 (11 records)`
fn range_text(tp: &TopicPartition, first: Offset, last: Offset, records: u64) -> String {
    if records == 1 {
        format!("{tp}@{first} (1 record)")
    } else {
        format!("{tp}@{first}–{last} ({records} records)")
    }
}

/// `t=12.100s–12.400s`
fn span(from: SimTime, to: SimTime) -> String {
    if from == to {
        tell::time(from)
    } else {
        format!(
            "{}–{:.3}s",
            tell::time(from),
            to.since_start().as_secs_f64()
        )
    }
}

/// Where an out-of-range position was: a reset forward means it was below the log's start
/// (either policy moves it up from there), a reset back that it was past the log's end.
fn out_of_range(from: Offset, to: Offset) -> &'static str {
    if to > from {
        "below the log's start"
    } else {
        "past the log's end"
    }
}

/// `consumer-2 processed orders/0@4088 (producer-1:004088)`
fn processed_step(
    consumer: u32,
    tp: &TopicPartition,
    (time, offset, id): (SimTime, Offset, Option<MessageId>),
) -> Step {
    Step::new(
        time,
        format!(
            "{} processed {tp}@{offset} ({})",
            member(consumer),
            describe::id_text(id)
        ),
    )
}

/// What the stories read: the history, the cluster's facts, the processings sorted.
pub(super) struct Teller<'a, 'p> {
    pub(super) history: &'a [Event],
    pub(super) chronicle: &'a Chronicle<'a>,
    pub(super) facts: &'a [FactEvent],
    pub(super) processings: &'p [Processing<'a>],
}

impl Teller<'_, '_> {
    fn time(&self, event: usize) -> SimTime {
        self.history[event].time
    }

    /// `tp`'s starts among the first `before` events, in history order.
    fn starts<'s>(
        &'s self,
        tp: &'s TopicPartition,
        before: usize,
    ) -> impl DoubleEndedIterator<Item = Start> + 's {
        self.history[..before]
            .iter()
            .enumerate()
            .filter_map(move |(event, e)| {
                let (consumer, at, how) = match &e.op {
                    Op::Resume {
                        consumer,
                        tp: t,
                        offset,
                        committed,
                    } if t == tp => {
                        let how = if *committed {
                            How::Committed
                        } else {
                            How::NoCommit
                        };
                        (*consumer, *offset, how)
                    }
                    Op::Reset {
                        consumer,
                        tp: t,
                        from,
                        to,
                    } if t == tp => (*consumer, *to, How::OutOfRange { from: *from }),
                    _ => return None,
                };
                Some(Start {
                    event,
                    time: e.time,
                    consumer,
                    at,
                    how,
                })
            })
    }

    /// The start that jumped over `offset`: of those that put a member past it (a reset
    /// only if it moved the position from at or below it), the nearest, the first in time.
    fn jump_over(&self, tp: &TopicPartition, offset: Offset) -> Option<Start> {
        self.starts(tp, self.history.len())
            .filter(|s| match s.how {
                How::OutOfRange { from } => from <= offset && s.at > offset,
                How::Committed | How::NoCommit => s.at > offset,
            })
            .min_by_key(|s| (s.at, s.event))
    }

    /// The last start before event `before` that put `consumer` at or below `offset`.
    fn put_back(
        &self,
        tp: &TopicPartition,
        consumer: u32,
        before: usize,
        offset: Offset,
    ) -> Option<Start> {
        self.starts(tp, before)
            .rev()
            .find(|s| s.consumer == consumer && s.at <= offset)
    }

    /// The last acknowledged commit of `tp` at `offset` before event `before`.
    fn commit_of(&self, tp: &TopicPartition, offset: Offset, before: usize) -> Option<Commit> {
        self.history[..before]
            .iter()
            .rev()
            .find_map(|e| match &e.op {
                Op::Committed {
                    consumer,
                    tp: t,
                    offset: o,
                } if t == tp && *o == offset => Some(Commit {
                    time: e.time,
                    consumer: *consumer,
                }),
                _ => None,
            })
    }

    /// `consumer`'s last processing of `tp` before event `before`, and not after `until`.
    fn last_processed(
        &self,
        tp: &TopicPartition,
        consumer: u32,
        before: usize,
        until: SimTime,
    ) -> Option<(SimTime, Offset, Option<MessageId>)> {
        self.history[..before]
            .iter()
            .rev()
            .find_map(|e| match &e.op {
                Op::Processed {
                    consumer: c,
                    tp: t,
                    offset,
                    id,
                } if t == tp && *c == consumer && e.time <= until => Some((e.time, *offset, *id)),
                _ => None,
            })
    }

    /// The faults that struck `consumer` from `from` to `to`, the first ones.
    fn faults_on(&self, consumer: u32, from: SimTime, to: SimTime) -> Vec<(SimTime, &str, Step)> {
        self.facts
            .iter()
            .filter(|e| (from..=to).contains(&e.time))
            .filter_map(|e| match &e.fact {
                Fact::Fault { what, hosts } if hosts.contains(&member(consumer)) => Some((
                    e.time,
                    what.as_str(),
                    Step::new(e.time, story::fault(what, hosts)),
                )),
                _ => None,
            })
            .take(FAULTS_TOLD)
            .collect()
    }

    fn processing_step(&self, p: &Processing) -> Step {
        processed_step(p.consumer, p.tp, (self.time(p.event), p.offset, p.id))
    }

    fn start_step(&self, tp: &TopicPartition, start: &Start) -> Step {
        let who = member(start.consumer);
        let at = start.at;
        let text = match start.how {
            How::Committed => format!("{who} resumed {tp} at {at}, the group's committed offset"),
            How::NoCommit => format!(
                "{who} started {tp} at {at}, where auto.offset.reset put it: the group had no committed offset"
            ),
            How::OutOfRange { from } => format!(
                "{who}'s position {from} on {tp} was out of range ({}): auto.offset.reset moved it to {at}",
                out_of_range(from, at)
            ),
        };
        Step::new(start.time, text)
    }

    /// An unprocessed gap: other records processed at its offsets, else the start that
    /// jumped over it, else how far the group got. `behind` names a group that had not
    /// caught up, for the first example.
    pub(super) fn unprocessed(&self, tp: &TopicPartition, gap: Gap, behind: Option<&str>) -> Told {
        let what = format!(
            "{} never processed",
            range_text(tp, gap.first, gap.last, gap.records)
        );
        let mut steps = Vec::new();
        let other = self.processed_within(tp, gap);
        let jump = self.jump_over(tp, gap.first);
        let mut text = match (other, jump) {
            // Rolled back under the group, then jumped over: the jump is why the new
            // records went unprocessed.
            (Some(other), Some(start)) if start.event > other.event => {
                let skipped = self.skipped(tp, &start, &what, &mut steps);
                let replaced = self.replaced(other, &mut steps);
                format!("{skipped}; before, {replaced}")
            }
            (Some(other), _) => format!("{}: {what}", self.replaced(other, &mut steps)),
            (None, Some(start)) => self.skipped(tp, &start, &what, &mut steps),
            (None, None) => self.not_reached(tp, gap, &what, &mut steps),
        };
        if let Some(group) = behind {
            let _ = write!(
                text,
                "; the group {group} had not caught up with the HW when the consume phase's bound ran out"
            );
        }
        Told::new(text, steps)
    }

    /// The first processing at the gap's offsets: of another record than the final
    /// read's, since none of its records was processed.
    fn processed_within(&self, tp: &TopicPartition, gap: Gap) -> Option<&Processing<'_>> {
        let done = of_partition(self.processings, tp);
        let i = done.partition_point(|p| p.offset < gap.first);
        done.get(i).filter(|p| p.offset <= gap.last)
    }

    /// The group processed what the log held there before it was replaced: the append of
    /// what was processed and how it left the logs.
    fn replaced(&self, other: &Processing, steps: &mut Vec<Step>) -> String {
        let (tp, offset, time) = (other.tp, other.offset, self.time(other.event));
        steps.push(self.processing_step(other));
        let write = self.chronicle.write_before(tp, offset, time);
        if let Some(write) = write {
            steps.push(story::appended(write, tp, offset, "what was processed "));
        }
        let holder = write.map(|w| (w.leader, w.epoch));
        steps.extend(self.chronicle.departure(tp, offset, time, holder));
        format!(
            "the group processed other records at these offsets, first {} at @{offset} by {} ({}), which the final read does not hold",
            describe::id_text(other.id),
            member(other.consumer),
            tell::time(time)
        )
    }

    /// A member started past the gap: from a commit (who made it, what it had processed
    /// by the fault that struck it or by the resume), from `auto.offset.reset`, or reset.
    fn skipped(
        &self,
        tp: &TopicPartition,
        start: &Start,
        what: &str,
        steps: &mut Vec<Step>,
    ) -> String {
        steps.push(self.start_step(tp, start));
        // A resume past the log's end is then reset: tell where it went.
        let reset = self.starts(tp, self.history.len()).find(|s| {
            s.event > start.event
                && s.consumer == start.consumer
                && matches!(s.how, How::OutOfRange { from } if from == start.at)
        });
        steps.extend(reset.map(|reset| self.start_step(tp, &reset)));
        let (who, at, when) = (member(start.consumer), start.at, tell::time(start.time));
        match start.how {
            How::Committed => {
                let Some(commit) = self.commit_of(tp, at, start.event) else {
                    return format!(
                        "{who} resumed at {tp}@{at}, the group's committed offset ({when}), with no acknowledged commit of it in the history: {what}"
                    );
                };
                let committer = member(commit.consumer);
                steps.push(Step::new(
                    commit.time,
                    format!("{committer} committed offset {at} of {tp}"),
                ));
                let faults = self.faults_on(commit.consumer, commit.time, start.time);
                let struck = faults.first().map(|&(time, fault, _)| (time, fault));
                steps.extend(faults.into_iter().map(|(_, _, step)| step));
                let until = struck.map_or(start.time, |(time, _)| time);
                let last = self.last_processed(tp, commit.consumer, start.event, until);
                steps.extend(last.map(|p| processed_step(commit.consumer, tp, p)));
                let had = match last {
                    Some((_, offset, _)) => format!("processed up to {offset}"),
                    None => format!("processed nothing of {tp}"),
                };
                let committed = format!(
                    "{committer} committed {tp}@{at} ({})",
                    tell::time(commit.time)
                );
                match struck {
                    Some((time, fault)) => format!(
                        "{committed}; the fault `{fault}` struck it ({}) when it had {had}; {who} resumed at {at} ({when}): {what}",
                        tell::time(time)
                    ),
                    None => {
                        format!("{committed}, and had {had} when {who} resumed at {at} ({when}): {what}")
                    }
                }
            }
            How::NoCommit => format!(
                "{who} had no committed offset for {tp}: auto.offset.reset started it at {at} ({when}): {what}"
            ),
            How::OutOfRange { from } => format!(
                "{who}'s position {from} on {tp} was out of range, {} ({when}); auto.offset.reset moved it to {at}: {what}",
                out_of_range(from, at)
            ),
        }
    }

    /// No member was put past the gap: how far below it the group's processing reached.
    fn not_reached(
        &self,
        tp: &TopicPartition,
        gap: Gap,
        what: &str,
        steps: &mut Vec<Step>,
    ) -> String {
        let done = of_partition(self.processings, tp);
        if done.is_empty() {
            return format!("{what}: no member processed anything of {tp}");
        }
        let below = done.partition_point(|p| p.offset < gap.first);
        let none = format!("{what}: no resume or reset put a member past {}", gap.first);
        let Some(highest) = below.checked_sub(1).map(|i| &done[i]) else {
            return none;
        };
        steps.push(self.processing_step(highest));
        format!(
            "{none}; the group had processed {tp} up to @{} ({}, {})",
            highest.offset,
            member(highest.consumer),
            tell::time(self.time(highest.event))
        )
    }

    /// A run of records processed again: the first processings and the second, the start
    /// that put the second member back, the commit it resumed from, and a fault that struck
    /// the first member in between.
    pub(super) fn reprocessed(&self, repeat: &Repeat) -> Told {
        let (once, again) = (&repeat.first[0], &repeat.first[1]);
        let tp = once.tp;
        let (first, second) = (member(once.consumer), member(again.consumer));
        let times = |i: usize| {
            span(
                self.time(repeat.first[i].event),
                self.time(repeat.last[i].event),
            )
        };
        let how_often = if repeat.most == 2 {
            "twice".to_string()
        } else {
            format!("more than once (up to {} times)", repeat.most)
        };
        let what = format!(
            "{} processed {how_often}: by {first} ({}), by {second} ({})",
            range_text(tp, once.offset, repeat.last[0].offset, repeat.records),
            times(0),
            times(1)
        );
        let mut steps: Vec<Step> = [repeat.first, repeat.last]
            .iter()
            .flat_map(|r| [&r[0], &r[1]])
            .map(|p| self.processing_step(p))
            .collect();
        let back = self.put_back(tp, again.consumer, again.event, once.offset);
        let until = back.map_or(self.time(again.event), |s| s.time);
        let faults = self.faults_on(once.consumer, self.time(once.event), until);
        let after = match faults.first() {
            Some((time, fault, _)) => format!(
                ", after the fault `{fault}` struck {first} ({})",
                tell::time(*time)
            ),
            None => String::new(),
        };
        steps.extend(faults.into_iter().map(|(_, _, step)| step));
        let Some(back) = back else {
            let text = format!(
                "no resume or reset put {second} back to {} or before{after}; {what}",
                once.offset
            );
            return Told::new(text, steps);
        };
        steps.push(self.start_step(tp, &back));
        let (at, when) = (back.at, tell::time(back.time));
        let cause = match back.how {
            How::Committed => match self.commit_of(tp, at, back.event) {
                Some(commit) => {
                    let committer = member(commit.consumer);
                    steps.push(Step::new(
                        commit.time,
                        format!("{committer} committed offset {at} of {tp}"),
                    ));
                    format!(
                        "{second} resumed at {tp}@{at} ({when}), committed by {committer} ({}){after}",
                        tell::time(commit.time)
                    )
                }
                None => format!(
                    "{second} resumed at {tp}@{at} ({when}), the group's committed offset{after}"
                ),
            },
            How::NoCommit => format!(
                "{second} started {tp} at {at} ({when}) by auto.offset.reset, with no committed offset{after}"
            ),
            How::OutOfRange { from } => format!(
                "{second}'s position {from} on {tp} was out of range, {} ({when}); auto.offset.reset moved it to {at}{after}",
                out_of_range(from, at)
            ),
        };
        Told::new(format!("{cause}; {what}"), steps)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Teller;
    use crate::check::groups_tests::{
        committed, event, final_state, process, resume, texts, tp, VALUE_BYTES,
    };
    use crate::check::{Count, Verdict};
    use crate::history::facts::{Fact, FactEvent};
    use crate::history::final_state::FinalState;
    use crate::history::final_state::{GroupFinal, ReadRecord};
    use crate::history::{Event, MessageId, Op};
    use crate::os::clock::SimTime;
    use crate::types::{HostName, Offset};

    fn reset(ms: u64, consumer: u32, from: i64, to: i64) -> Event {
        let op = Op::Reset {
            consumer,
            tp: tp(),
            from: Offset(from),
            to: Offset(to),
        };
        event(ms, consumer, op)
    }

    fn kill(ms: u64, consumer: u32) -> FactEvent {
        FactEvent {
            time: SimTime::from_millis(ms),
            fact: Fact::Fault {
                what: format!("kill consumer-{consumer}"),
                hosts: vec![HostName::Consumer(consumer)],
            },
        }
    }

    fn check(history: &[Event], state: &FinalState) -> Verdict {
        crate::check::check(history, state, VALUE_BYTES, &Teller::new(&state.facts))
    }

    fn why(verdict: &Verdict, count: Count) -> Vec<&str> {
        verdict
            .examples_of(count)
            .next()
            .map(|e| e.why.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// At most once: consumer-2 commits what it polled, then dies processing it; the
    /// commit is where consumer-1 starts.
    #[test]
    fn a_commit_ahead_of_processing_then_a_crash_leaves_the_rest_of_the_poll_unprocessed() {
        let mut history = vec![resume(100, 2, 0, false), committed(200, 2, 10)];
        history.extend(process(210, 2, 0..6));
        history.push(resume(1000, 1, 10, true));
        history.extend(process(1010, 1, 10..20));
        let verdict = check(&history, &final_state(0..20, vec![kill(300, 2)]));
        assert_eq!(
            (verdict.counts.unprocessed, verdict.counts.reprocessed),
            (4, 0)
        );
        assert!(verdict.group);
        assert_eq!(
            texts(&verdict, Count::Unprocessed),
            ["consumer-2 committed orders/0@10 (t=0.200s); the fault `kill consumer-2` struck it (t=0.300s) when it had processed up to 5; consumer-1 resumed at 10 (t=1.000s): orders/0@6–9 (4 records) never processed"]
        );
        assert_eq!(
            why(&verdict, Count::Unprocessed),
            [
                "t=0.200s consumer-2 committed offset 10 of orders/0",
                "t=0.260s consumer-2 processed orders/0@5 (producer-1:000005)",
                "t=0.300s fault: kill consumer-2",
                "t=1.000s consumer-1 resumed orders/0 at 10, the group's committed offset",
            ]
        );
    }

    /// At least once: consumer-2 processes a poll and dies before committing it; consumer-1
    /// starts again from the last commit.
    #[test]
    fn a_crash_between_processing_and_its_commit_has_the_next_member_process_it_again() {
        let mut history = vec![resume(100, 2, 0, false)];
        history.extend(process(110, 2, 0..5));
        history.push(committed(160, 2, 5));
        history.extend(process(200, 2, 5..10));
        history.push(resume(1000, 1, 5, true));
        history.extend(process(1010, 1, 5..20));
        let verdict = check(&history, &final_state(0..20, vec![kill(300, 2)]));
        assert_eq!(
            (verdict.counts.unprocessed, verdict.counts.reprocessed),
            (0, 5)
        );
        assert_eq!(
            texts(&verdict, Count::Reprocessed),
            ["consumer-1 resumed at orders/0@5 (t=1.000s), committed by consumer-2 (t=0.160s), after the fault `kill consumer-2` struck consumer-2 (t=0.300s); orders/0@5–9 (5 records) processed twice: by consumer-2 (t=0.200s–0.240s), by consumer-1 (t=1.010s–1.050s)"]
        );
        assert_eq!(
            why(&verdict, Count::Reprocessed),
            [
                "t=0.160s consumer-2 committed offset 5 of orders/0",
                "t=0.200s consumer-2 processed orders/0@5 (producer-1:000005)",
                "t=0.240s consumer-2 processed orders/0@9 (producer-1:000009)",
                "t=0.300s fault: kill consumer-2",
                "t=1.000s consumer-1 resumed orders/0 at 5, the group's committed offset",
                "t=1.010s consumer-1 processed orders/0@5 (producer-1:000005)",
                "t=1.050s consumer-1 processed orders/0@9 (producer-1:000009)",
            ]
        );
    }

    /// Retention moved the log's start past the member's position: auto.offset.reset
    /// (latest) put it at the log's end, over the records in between.
    #[test]
    fn a_reset_forward_from_below_the_log_start_skips_to_where_it_moved() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..3));
        history.push(reset(500, 1, 3, 15));
        history.extend(process(510, 1, 15..20));
        let verdict = check(&history, &final_state(10..20, vec![]));
        assert_eq!(verdict.counts.unprocessed, 5);
        assert_eq!(
            texts(&verdict, Count::Unprocessed),
            ["consumer-1's position 3 on orders/0 was out of range, below the log's start (t=0.500s); auto.offset.reset moved it to 15: orders/0@10–14 (5 records) never processed"]
        );
        assert_eq!(
            why(&verdict, Count::Unprocessed),
            ["t=0.500s consumer-1's position 3 on orders/0 was out of range (below the log's start): auto.offset.reset moved it to 15"]
        );
    }

    #[test]
    fn a_reset_back_from_past_the_log_end_has_the_member_process_records_again() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..10));
        history.push(reset(500, 1, 12, 8));
        history.extend(process(510, 1, 8..10));
        let verdict = check(&history, &final_state(0..10, vec![]));
        assert_eq!(
            (verdict.counts.unprocessed, verdict.counts.reprocessed),
            (0, 2)
        );
        assert_eq!(
            texts(&verdict, Count::Reprocessed),
            ["consumer-1's position 12 on orders/0 was out of range, past the log's end (t=0.500s); auto.offset.reset moved it to 8; orders/0@8–9 (2 records) processed twice: by consumer-1 (t=0.190s–0.200s), by consumer-1 (t=0.510s–0.520s)"]
        );
    }

    /// Only the first example says the group was still behind; each gap is told from the
    /// furthest the group got below it.
    #[test]
    fn a_group_that_had_not_caught_up_says_so_in_its_first_example() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..10));
        history.extend(process(300, 1, 12..15));
        let mut state = final_state(0..20, vec![]);
        state.group = Some(GroupFinal {
            name: "audit".into(),
            caught_up: false,
        });
        let verdict = check(&history, &state);
        assert_eq!(verdict.counts.unprocessed, 7);
        assert_eq!(
            texts(&verdict, Count::Unprocessed),
            [
                "orders/0@10–11 (2 records) never processed: no resume or reset put a member past 10; the group had processed orders/0 up to @9 (consumer-1, t=0.200s); the group audit had not caught up with the HW when the consume phase's bound ran out",
                "orders/0@15–19 (5 records) never processed: no resume or reset put a member past 15; the group had processed orders/0 up to @14 (consumer-1, t=0.320s)",
            ]
        );
        let caught_up = check(&history, &final_state(0..20, vec![]));
        assert!(texts(&caught_up, Count::Unprocessed)
            .iter()
            .all(|text| !text.contains("caught up")));
    }

    /// A truncation replaced what the group had processed: the records the final read
    /// holds there are other ones, which no member saw.
    #[test]
    fn records_replaced_after_the_group_processed_their_offsets_are_unprocessed() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..10));
        let mut state = final_state(0..10, vec![]);
        for record in &mut state.partitions[0].read[5..] {
            let other = MessageId {
                producer: 2,
                seq: record.offset.0 as u32,
            };
            *record = ReadRecord::new(record.offset, &other.value(VALUE_BYTES));
        }
        let verdict = check(&history, &state);
        assert_eq!(verdict.counts.unprocessed, 5);
        assert_eq!(
            texts(&verdict, Count::Unprocessed),
            ["the group processed other records at these offsets, first producer-1:000005 at @5 by consumer-1 (t=0.160s), which the final read does not hold: orders/0@5–9 (5 records) never processed"]
        );
    }

    #[test]
    fn a_record_processed_three_times_is_told_once_with_each_processing() {
        let mut history = vec![resume(100, 1, 0, false)];
        history.extend(process(110, 1, 0..2));
        history.push(resume(200, 2, 0, true));
        history.extend(process(210, 2, 0..2));
        history.push(resume(300, 3, 0, true));
        history.extend(process(310, 3, 0..2));
        let verdict = check(&history, &final_state(0..2, vec![]));
        assert_eq!(
            texts(&verdict, Count::Reprocessed),
            ["consumer-2 resumed at orders/0@0 (t=0.200s), the group's committed offset; orders/0@0–1 (2 records) processed more than once (up to 3 times): by consumer-1 (t=0.110s–0.120s), by consumer-2 (t=0.210s–0.220s)"]
        );
    }
}
