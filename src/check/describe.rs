//! Example texts: what the client was told, what the final read holds and where, with
//! simulated times, so that a person can go straight to the trace.

use super::final_read::{FinalIndex, Located};
use super::reorder::Placed;
use super::replicas::{Divergence, Holder};
use super::sends::{Outcome, Send};
use crate::history::facts::{Fact, FactEvent};
use crate::history::final_state::{PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::{Event, MessageId};
use crate::os::clock::SimTime;
use crate::types::{BrokerId, Offset, TopicPartition};
use std::fmt::Write;

/// Copies listed in an example before "and N more".
const LOCATIONS_SHOWN: usize = 5;
/// Bytes of a corrupt value shown.
const VALUE_BYTES_SHOWN: usize = 32;

/// `orders/0@812`
fn at(tp: &TopicPartition, offset: Offset) -> String {
    format!("{tp}@{offset}")
}

/// `t=10.012s`
fn time(t: SimTime) -> String {
    format!("t={:.3}s", t.since_start().as_secs_f64())
}

/// What the client was told: `acked at orders/0@812 (t=10.012s)`.
fn status(send: &Send) -> String {
    match send.outcome {
        Outcome::Acked {
            tp,
            offset,
            time: t,
        } => format!("acked at {} ({})", at(tp, offset), time(t)),
        Outcome::Failed { error, time: t } => format!("failed at {} ({error})", time(t)),
        Outcome::Indeterminate { error, time: t } => {
            format!("indeterminate at {} ({error})", time(t))
        }
        Outcome::Pending => match send.invoked {
            Some((_, t)) => format!("sent at {}, never completed", time(t)),
            None => "never completed".to_string(),
        },
    }
}

/// `orders/0@812, orders/0@813`
fn locations(index: &FinalIndex, copies: &[Located]) -> String {
    let mut text = String::new();
    for (i, copy) in copies.iter().take(LOCATIONS_SHOWN).enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(&at(&index.partition(copy.part).tp, copy.offset));
    }
    if copies.len() > LOCATIONS_SHOWN {
        let _ = write!(text, " and {} more", copies.len() - LOCATIONS_SHOWN);
    }
    text
}

fn record_id(record: Option<&ReadRecord>) -> String {
    match record {
        None => "nothing".to_string(),
        Some(r) => id_text(r.id),
    }
}

fn id_text(id: Option<MessageId>) -> String {
    match id {
        Some(id) => id.to_string(),
        None => "a record without a message id".to_string(),
    }
}

pub fn lost(send: &Send, index: &FinalIndex, holders: &[Holder]) -> String {
    let final_read = match send.tp().and_then(|tp| index.partition_of(tp)) {
        Some(p) => format!("absent from the final read (HW {})", p.high_watermark),
        None => "absent from the final read (its partition is not in the final state)".to_string(),
    };
    format!(
        "{} {}; {final_read}; {}",
        send.id,
        status(send),
        held_by(send, holders)
    )
}

/// `held by broker-1 only (not in ISR)`; a copy at another place than the ack is located.
fn held_by(send: &Send, holders: &[Holder]) -> String {
    let acked = match send.outcome {
        Outcome::Acked { tp, offset, .. } => Some((tp, offset)),
        _ => None,
    };
    let name = |h: &Holder| {
        if acked == Some((h.tp, h.offset)) {
            h.broker.to_string()
        } else {
            format!("{} at {}", h.broker, at(h.tp, h.offset))
        }
    };
    let isr = |h: &Holder| if h.in_isr { "in ISR" } else { "not in ISR" };
    match holders {
        [] => "held by no replica".to_string(),
        [h] => format!("held by {} only ({})", name(h), isr(h)),
        _ => {
            let list: Vec<String> = holders
                .iter()
                .map(|h| format!("{} ({})", name(h), isr(h)))
                .collect();
            format!("held by {}", list.join(", "))
        }
    }
}

pub fn moved(send: &Send, index: &FinalIndex, copies: &[Located]) -> String {
    format!(
        "{} {}; in the final read at {}",
        send.id,
        status(send),
        locations(index, copies)
    )
}

pub fn duplicate(send: &Send, index: &FinalIndex, copies: &[Located]) -> String {
    format!(
        "{} {}; {} copies in the final read: {}",
        send.id,
        status(send),
        copies.len(),
        locations(index, copies)
    )
}

/// For failed and indeterminate sends: where it was sent, what the client was told, and
/// whether it made it anyway.
pub fn send_status(send: &Send, index: &FinalIndex, copies: &[Located]) -> String {
    let to = send.tp().map(|tp| format!(" to {tp}")).unwrap_or_default();
    let delivery = if copies.is_empty() {
        "absent from the final read".to_string()
    } else {
        format!("in the final read at {}", locations(index, copies))
    };
    format!("{}{to} {}; {delivery}", send.id, status(send))
}

pub fn never_sent(index: &FinalIndex, located: &Located) -> String {
    let tp = &index.partition(located.part).tp;
    format!(
        "{} holds {}, which was never sent",
        at(tp, located.offset),
        located.id
    )
}

pub fn corrupt(index: &FinalIndex, part: usize, offset: Offset, value: &[u8]) -> String {
    let shown = &value[..value.len().min(VALUE_BYTES_SHOWN)];
    let more = if value.len() > shown.len() { "..." } else { "" };
    format!(
        "{} holds a value without a message id ({} bytes): \"{}\"{more}",
        at(&index.partition(part).tp, offset),
        value.len(),
        shown.escape_ascii()
    )
}

pub fn reordered(index: &FinalIndex, earlier: &Placed, later: &Placed) -> String {
    format!(
        "{} and {}, sent in that order to {} (acked at @{} and @{}), are at @{} and @{} in the final read",
        earlier.id,
        later.id,
        index.partition(earlier.part).tp,
        earlier.acked,
        later.acked,
        earlier.now,
        later.now
    )
}

pub fn dirty_read(
    event: &Event,
    tp: &TopicPartition,
    offset: Offset,
    id: Option<MessageId>,
    index: &FinalIndex,
) -> String {
    let what = match id {
        Some(id) => id.to_string(),
        None => "a record without a message id".to_string(),
    };
    let now = match (index.partition_of(tp), index.at(tp, offset)) {
        (None, _) => "the final state has no such partition".to_string(),
        (Some(p), None) => format!(
            "the final read has no record there (log start {}, HW {})",
            p.log_start_offset, p.high_watermark
        ),
        (Some(_), Some(held)) => format!("the final read holds {} there", id_text(held)),
    };
    format!(
        "{} read {what} at {} ({}); {now}",
        event.process,
        at(tp, offset),
        time(event.time)
    )
}

pub fn divergent(partition: &PartitionFinal, d: &Divergence) -> String {
    let isr = if d.other_in_isr {
        "in the ISR"
    } else {
        "out of the ISR"
    };
    format!(
        "{}: {} ({isr}) differs from {} below {}, first at offset {}: {} holds {}, {} holds {}",
        partition.tp,
        d.other,
        d.reference,
        bound(partition, d.end),
        d.offset,
        d.reference,
        record_id(d.reference_holds),
        d.other,
        record_id(d.other_holds)
    )
}

/// `HW 500`, or `its LEO 480` when the replica's log ends first.
fn bound(partition: &PartitionFinal, end: Offset) -> String {
    if end < partition.high_watermark {
        format!("its LEO {end}")
    } else {
        format!("HW {end}")
    }
}

pub fn unreadable(partition: &PartitionFinal) -> String {
    let leader = partition
        .leader
        .map_or_else(|| "no leader".to_string(), |l| format!("leader {l}"));
    let last = partition.read.last().map(|r| r.offset);
    let got = match last {
        Some(last) => format!("read up to offset {last}"),
        None => "read nothing".to_string(),
    };
    format!(
        "{}: the final read {got} of log start {} to HW {} ({leader}) before time ran out; the acknowledged sends it did not reach are unknown, not lost",
        partition.tp, partition.log_start_offset, partition.high_watermark
    )
}

pub fn under_replicated(
    partition: &PartitionFinal,
    out: &[&ReplicaLog],
    facts: &[FactEvent],
) -> String {
    let leader_leo = partition
        .replicas
        .iter()
        .find(|r| Some(r.broker) == partition.leader)
        .map(|r| r.log_end_offset);
    let leader = match (partition.leader, leader_leo) {
        (Some(leader), Some(leo)) => format!("the leader {leader}'s LEO {leo}"),
        _ => "no leader".to_string(),
    };
    let out: Vec<String> = out
        .iter()
        .map(|r| {
            format!(
                "{} (LEO {}; {})",
                r.broker,
                r.log_end_offset,
                if r.running {
                    last_fetch(&partition.tp, r.broker, facts)
                } else {
                    "its broker is down".to_string()
                }
            )
        })
        .collect();
    format!(
        "{}: {} of {} replicas out of the ISR after healing: {}; against {leader}, HW {}",
        partition.tp,
        out.len(),
        partition.replicas.len(),
        out.join(", "),
        partition.high_watermark
    )
}

/// What a follower's fetching last recorded: why it is out of the ISR, or that it is
/// fetching again and catching up.
fn last_fetch(tp: &TopicPartition, broker: BrokerId, facts: &[FactEvent]) -> String {
    let last = facts.iter().rev().find(|e| match &e.fact {
        Fact::FetchFailed {
            tp: t, broker: b, ..
        }
        | Fact::FetchResumed {
            tp: t, broker: b, ..
        } => t == tp && *b == broker,
        _ => false,
    });
    match last.map(|e| (e.time, &e.fact)) {
        Some((at, Fact::FetchFailed { leader, error, .. })) => {
            format!(
                "its last fetch from {leader} failed at {}: {error}",
                time(at)
            )
        }
        Some((at, Fact::FetchResumed { leader, .. })) => {
            format!("fetching from {leader} again since {}", time(at))
        }
        _ => "no failed fetch recorded".to_string(),
    }
}

pub fn offline(partition: &PartitionFinal) -> String {
    let replicas: Vec<String> = partition
        .replicas
        .iter()
        .map(|r| {
            let isr = if r.in_isr { "in ISR" } else { "not in ISR" };
            format!("{} (LEO {}, {isr})", r.broker, r.log_end_offset)
        })
        .collect();
    let replicas = if replicas.is_empty() {
        "no replica logs".to_string()
    } else {
        replicas.join(", ")
    };
    format!(
        "{} has no leader after the heal phase; replicas: {replicas}",
        partition.tp
    )
}
