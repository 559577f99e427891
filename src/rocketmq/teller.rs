//! RocketMQ's words for the checkers' examples: a partition is a queue of a broker group,
//! an offset a queue offset, and a story is told from the brokers' facts (the flushed
//! position before a fault, how the store recovered after it).

use crate::check::{
    Divergence, FinalIndex, Gap, Holder, Located, Outcome, Placed, Processing, Repeat, Send, Step,
    Told,
};
use crate::history::facts::rocketmq::Fact;
use crate::history::facts::{Fact as AnyFact, FactLog};
use crate::history::final_state::{PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::{Event, MessageId, Op};
use crate::os::clock::SimTime;
use crate::types::{Offset, TopicPartition};

pub struct Teller<'f> {
    facts: &'f FactLog,
}

impl<'f> Teller<'f> {
    pub fn new(facts: &'f FactLog) -> Teller<'f> {
        Teller { facts }
    }

    /// The faults, recoveries and shutdowns of the run, with the flushed position each
    /// broker had reached when a fault struck it: the story of any loss.
    fn store_story(&self, after: SimTime) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut flushed = std::collections::BTreeMap::new();
        for event in self.facts.events() {
            match &event.fact {
                AnyFact::RocketMq(Fact::CommitLog {
                    broker,
                    max_offset,
                    flushed_where,
                }) => {
                    flushed.insert(*broker, (*max_offset, *flushed_where));
                }
                AnyFact::Fault { what, hosts } if event.time >= after => {
                    let mut text = format!("fault: {what}");
                    // Where the CommitLog stood is what a stop takes or keeps.
                    let stops = what.starts_with("power-loss") || what.starts_with("kill");
                    for host in hosts.iter().filter(|_| stops) {
                        if let Some(&(max, at)) = flushed.get(host) {
                            text.push_str(&format!(
                                "; {host}'s CommitLog was flushed to {at} (flushedWhere) of {max} written when its flush service last ran{}",
                                if max > at {
                                    format!(", {} bytes in the page cache only", max - at)
                                } else {
                                    String::new()
                                }
                            ));
                        }
                    }
                    steps.push(Step::new(event.time, text));
                }
                AnyFact::RocketMq(Fact::Recovered {
                    broker,
                    normal,
                    start_file,
                    end,
                    queues_truncated,
                    ..
                }) if event.time >= after => {
                    let how = if *normal {
                        "normally (no abort file)"
                    } else {
                        "abnormally (the abort file was there)"
                    };
                    let cut = queues_truncated
                        .map(|at| format!("; the ConsumeQueues were cut back to {at}"))
                        .unwrap_or_default();
                    steps.push(Step::new(
                        event.time,
                        format!("{broker} recovered {how}: the CommitLog scan from file {start_file} ended at {end}{cut}, and queue offsets past it are handed out again"),
                    ));
                }
                AnyFact::RocketMq(Fact::ShutDown {
                    broker,
                    abort_deleted,
                }) if event.time >= after => steps.push(Step::new(
                    event.time,
                    format!(
                        "{broker} shut down cleanly, flushing everything{}",
                        if *abort_deleted {
                            ""
                        } else {
                            " but keeping its abort file"
                        }
                    ),
                )),
                _ => {}
            }
        }
        steps
    }
}

/// Where a member that took a queue started: the group's offset its master answered, or
/// `consumeFromWhere`'s choice when the master had none.
fn whence(committed: bool) -> &'static str {
    if committed {
        "the group's offset its master answered"
    } else {
        "where consumeFromWhere put it (its master had no offset for the group)"
    }
}

fn queue(tp: &TopicPartition) -> String {
    format!("queue {tp}")
}

fn outcome(send: &Send) -> (String, Option<SimTime>) {
    match send.outcome {
        Outcome::Acked {
            tp,
            offset,
            time,
            degraded,
        } => (
            format!(
                "acknowledged {} at queue offset {offset} of {}",
                if degraded {
                    "FLUSH_DISK_TIMEOUT"
                } else {
                    "SEND_OK"
                },
                queue(tp)
            ),
            Some(time),
        ),
        Outcome::Failed { error, time } => (format!("failed ({error})"), Some(time)),
        Outcome::Indeterminate { error, time } => {
            (format!("of unknown outcome ({error})"), Some(time))
        }
        Outcome::Pending => ("never answered".to_owned(), None),
    }
}

fn places(index: &FinalIndex, copies: &[Located]) -> String {
    let places: Vec<String> = copies
        .iter()
        .map(|c| format!("{} offset {}", index.partition(c.part).tp, c.offset))
        .collect();
    places.join(", ")
}

impl crate::check::Teller for Teller<'_> {
    fn never_sent(&self, index: &FinalIndex, located: &Located) -> Told {
        format!(
            "{} at {} offset {}: no producer sent it",
            located.id,
            index.partition(located.part).tp,
            located.offset
        )
        .into()
    }

    fn corrupt(&self, index: &FinalIndex, part: usize, record: &ReadRecord) -> Told {
        format!(
            "{} offset {} holds a body that no producer sent",
            queue(&index.partition(part).tp),
            record.offset
        )
        .into()
    }

    fn send_status(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told {
        let (what, _) = outcome(send);
        let text = if copies.is_empty() {
            format!("{} was {what}, and no queue holds it", send.id)
        } else {
            format!(
                "{} was {what}, yet it is stored at {}: the broker stored it before the producer gave up",
                send.id,
                places(index, copies)
            )
        };
        text.into()
    }

    fn duplicate(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told {
        let (what, _) = outcome(send);
        format!(
            "{} was {what} and is stored {} times, at {}: each retry of a send is a new message (RocketMQ does not deduplicate)",
            send.id,
            copies.len(),
            places(index, copies)
        )
        .into()
    }

    fn moved(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told {
        let (what, _) = outcome(send);
        format!(
            "{} was {what} but is stored only at {}: the queue offset it was acknowledged at now holds another message",
            send.id,
            places(index, copies)
        )
        .into()
    }

    fn lost(&self, send: &Send, _index: &FinalIndex, holders: &[Holder]) -> Told {
        let (what, time) = outcome(send);
        let text = if holders.is_empty() {
            format!(
                "{} was {what}, and no queue holds it after the heal",
                send.id
            )
        } else {
            format!(
                "{} was {what}; the master's ConsumeQueue holds it but the final read did not return it",
                send.id
            )
        };
        let mut steps = self.store_story(time.unwrap_or_default());
        if let Some(time) = time {
            steps.push(Step::new(time, format!("the broker answered: {what}")));
        }
        Told::new(text, steps)
    }

    fn reordered(&self, index: &FinalIndex, earlier: &Placed, later: &Placed) -> Told {
        format!(
            "{} was sent before {} but is stored after it in {}",
            earlier.id,
            later.id,
            queue(&index.partition(earlier.part).tp)
        )
        .into()
    }

    fn dirty_read(
        &self,
        _event: &Event,
        at: (&TopicPartition, Offset),
        id: Option<MessageId>,
        _index: &FinalIndex,
    ) -> Told {
        let read = id.map_or_else(|| "a message".to_owned(), |id| id.to_string());
        format!(
            "a consumer read {read} at {} offset {}, which the final read contradicts: ReputMessageService had dispatched a message that recovery then lost",
            queue(at.0),
            at.1
        )
        .into()
    }

    fn offline(&self, partition: &PartitionFinal) -> Told {
        format!("{} has no master after the heal", queue(&partition.tp)).into()
    }

    fn unreadable(&self, partition: &PartitionFinal) -> Told {
        format!(
            "{} could not be read to its end: its master did not answer every pull",
            queue(&partition.tp)
        )
        .into()
    }

    fn under_replicated(&self, partition: &PartitionFinal, _out: &[&ReplicaLog]) -> Told {
        format!("{} has a slave behind its master", queue(&partition.tp)).into()
    }

    fn divergent(&self, partition: &PartitionFinal, divergence: &Divergence) -> Told {
        format!(
            "{} differs between brokerId {} and brokerId {} below offset {}",
            queue(&partition.tp),
            divergence.reference.0,
            divergence.other.0,
            divergence.end
        )
        .into()
    }

    fn unprocessed(
        &self,
        history: &[Event],
        _processings: &[Processing],
        (tp, gap): (&TopicPartition, Gap),
        behind: Option<&str>,
    ) -> Told {
        let mut text = format!(
            "{} offsets {}..={} ({} messages) were never consumed",
            queue(tp),
            gap.first,
            gap.last,
            gap.records,
        );
        if let Some(group) = behind {
            text.push_str(&format!(
                " (group {group} had not caught up when the run ended)"
            ));
        }
        // What moved a member's pull offset past the gap: a queue taken at an offset
        // beyond it, a pull the master moved (OFFSET_ILLEGAL), or a member that had
        // consumed those offsets already, holding messages recovery then lost.
        let past = history.iter().find_map(|e| match &e.op {
            Op::Resume {
                consumer,
                tp: t,
                offset,
                committed,
            } if t == tp && *offset > gap.last => Some((
                e.time,
                format!("consumer-{consumer} took {} at offset {offset}, {}", queue(tp), whence(*committed)),
            )),
            Op::Reset {
                consumer,
                tp: t,
                from,
                to,
            } if t == tp && *from <= gap.first && *to > gap.last => Some((
                e.time,
                format!("consumer-{consumer}'s pull at offset {from} was answered PULL_OFFSET_MOVED to {to}"),
            )),
            Op::Processed {
                consumer,
                tp: t,
                offset,
                ..
            } if t == tp && *offset == gap.last => Some((
                e.time,
                format!("consumer-{consumer} consumed {} up to offset {offset}, messages recovery then lost; the same offsets went to new messages after it, and its pulls went on from past them", queue(tp)),
            )),
            _ => None,
        });
        let mut steps: Vec<Step> = past
            .iter()
            .map(|(time, text)| Step::new(*time, text.clone()))
            .collect();
        steps.extend(self.store_story(past.map_or(SimTime::ZERO, |(time, _)| time)));
        steps.sort_by_key(|s| s.time);
        Told::new(text, steps)
    }

    fn reprocessed(&self, history: &[Event], _processings: &[Processing], repeat: &Repeat) -> Told {
        let (first, last) = (repeat.first[0], repeat.last[0]);
        let tp = first.tp;
        let mut text = format!(
            "{} offsets {}..={} ({} messages) were consumed more than once (up to {} times): first by consumer-{} ({})",
            queue(tp),
            first.offset,
            last.offset,
            repeat.records,
            repeat.most,
            first.consumer,
            crate::check::tell::time(history[first.event].time),
        );
        // The last time a member took the queue before consuming it again: where it
        // started is the offset the master kept.
        let resumed = history[first.event..].iter().find_map(|e| match &e.op {
            Op::Resume {
                consumer,
                tp: t,
                offset,
                committed,
            } if t == tp && *offset <= first.offset => {
                Some((e.time, *consumer, *offset, *committed))
            }
            _ => None,
        });
        let mut steps = Vec::new();
        if let Some((time, consumer, offset, committed)) = resumed {
            text.push_str(&format!(
                ", then again by consumer-{consumer} after it took the queue at offset {offset}, {}",
                whence(committed)
            ));
            steps.push(Step::new(
                time,
                format!(
                    "consumer-{consumer} took {} at offset {offset} (QUERY_CONSUMER_OFFSET)",
                    queue(tp)
                ),
            ));
        }
        for event in self.facts.events() {
            if let AnyFact::RocketMq(Fact::OffsetsLoaded {
                broker,
                source,
                queues,
            }) = &event.fact
            {
                if event.time > SimTime::ZERO {
                    steps.push(Step::new(
                        event.time,
                        format!("{broker} started with the offsets of {queues} queues, loaded from {source}"),
                    ));
                }
            }
        }
        steps.extend(
            self.store_story(history[first.event].time)
                .into_iter()
                .filter(|s| s.text.starts_with("fault")),
        );
        steps.sort_by_key(|s| s.time);
        Told::new(text, steps)
    }
}
