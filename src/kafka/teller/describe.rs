//! Example texts: what the client was told, what the final read holds and where, with
//! simulated times, so that a person can go straight to the trace; and for each anomaly
//! the story of how it came about (see `story`).

use super::story::{self, Append, Chronicle};
use crate::check::tell::{time, Step, Told};
use crate::check::{Divergence, FinalIndex, Holder, Located, Outcome, Placed, Send};
use crate::history::facts::kafka::Fact as KafkaFact;
use crate::history::facts::{Fact, FactEvent};
use crate::history::final_state::{PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::{Event, MessageId};
use crate::os::clock::SimTime;
use crate::types::{BrokerId, Offset, TopicPartition};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Copies listed in an example before "and N more".
const LOCATIONS_SHOWN: usize = 5;
/// Bytes of a corrupt value shown.
const VALUE_BYTES_SHOWN: usize = 32;

/// `orders/0@812`
fn at(tp: &TopicPartition, offset: Offset) -> String {
    format!("{tp}@{offset}")
}

/// The story of an acknowledged write: the leader's answer, then how the record left the
/// logs, with the producer's retries of it.
fn acked_story(send: &Send, chronicle: &Chronicle) -> Vec<Step> {
    let mut steps = Vec::new();
    if let Some(tp) = send.tp() {
        steps.extend(chronicle.retries(send.id, tp));
    }
    let Outcome::Acked {
        tp, offset, time, ..
    } = send.outcome
    else {
        return steps;
    };
    match chronicle.acknowledgement(tp, offset, time) {
        Some(ack) => {
            let since = ack.step.time;
            steps.push(ack.step);
            steps.extend(chronicle.departure(tp, offset, since, Some((ack.leader, ack.epoch))));
        }
        None => steps.extend(chronicle.departure(tp, offset, time, None)),
    }
    steps
}

/// Who wrote the copy at `offset` of the final read: the final leader's log tells the
/// leader epoch of the batch, and the append of that epoch tells the rest.
fn copy_written(
    chronicle: &Chronicle,
    partition: &PartitionFinal,
    offset: Offset,
) -> Option<Append> {
    let log = partition
        .replicas
        .iter()
        .find(|r| Some(r.broker) == partition.leader)
        .or_else(|| partition.replicas.iter().find(|r| r.in_isr))?;
    chronicle.write_in(&partition.tp, log.epoch_at(offset)?, offset)
}

/// A send's retries and the appends of its copies in the final read: how one send came to
/// be written several times, or at all when the client was told otherwise.
fn resent_and_copied(
    send: &Send,
    index: &FinalIndex,
    copies: &[Located],
    chronicle: &Chronicle,
) -> Vec<Step> {
    let mut steps = send
        .tp()
        .map(|tp| chronicle.retries(send.id, tp))
        .unwrap_or_default();
    steps.extend(copy_steps(chronicle, index, copies));
    steps
}

/// The appends of the final read's copies of a message.
fn copy_steps(chronicle: &Chronicle, index: &FinalIndex, copies: &[Located]) -> Vec<Step> {
    copies
        .iter()
        .take(LOCATIONS_SHOWN)
        .filter_map(|copy| {
            let partition = index.partition(copy.part);
            let write = copy_written(chronicle, partition, copy.offset)?;
            Some(story::appended(
                write,
                &partition.tp,
                copy.offset,
                &format!("the copy of {} ", copy.id),
            ))
        })
        .collect()
}

/// What the client was told: `acked at orders/0@812 (t=10.012s)`.
fn status(send: &Send) -> String {
    match send.outcome {
        Outcome::Acked {
            tp,
            offset,
            time: t,
            ..
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

pub fn id_text(id: Option<MessageId>) -> String {
    match id {
        Some(id) => id.to_string(),
        None => "a record without a message id".to_string(),
    }
}

pub fn lost(send: &Send, index: &FinalIndex, holders: &[Holder], chronicle: &Chronicle) -> Told {
    // A record at the acknowledged offset that starts with the id yet is no copy of it.
    let rotten = match send.outcome {
        Outcome::Acked { tp, offset, .. } => index.at(tp, offset) == Some(Some(send.id)),
        _ => false,
    };
    let final_read = match send.tp().and_then(|tp| index.partition_of(tp)) {
        Some(p) if rotten => format!(
            "in the final read only with corrupt bytes (HW {})",
            p.high_watermark
        ),
        Some(p) => format!("absent from the final read (HW {})", p.high_watermark),
        None => "absent from the final read (its partition is not in the final state)".to_string(),
    };
    let text = format!(
        "{} {}; {final_read}; {}",
        send.id,
        status(send),
        held_by(send, holders)
    );
    Told::new(text, acked_story(send, chronicle))
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

pub fn moved(send: &Send, index: &FinalIndex, copies: &[Located], chronicle: &Chronicle) -> Told {
    let text = format!(
        "{} {}; in the final read at {}",
        send.id,
        status(send),
        locations(index, copies)
    );
    let mut steps = acked_story(send, chronicle);
    steps.extend(copy_steps(chronicle, index, copies));
    Told::new(text, steps)
}

pub fn duplicate(
    send: &Send,
    index: &FinalIndex,
    copies: &[Located],
    chronicle: &Chronicle,
) -> Told {
    let text = format!(
        "{} {}; {} copies in the final read: {}",
        send.id,
        status(send),
        copies.len(),
        locations(index, copies)
    );
    Told::new(text, resent_and_copied(send, index, copies, chronicle))
}

/// For failed and indeterminate sends: where it was sent, what the client was told, and
/// whether it made it anyway.
pub fn send_status(
    send: &Send,
    index: &FinalIndex,
    copies: &[Located],
    chronicle: &Chronicle,
) -> Told {
    let to = send.tp().map(|tp| format!(" to {tp}")).unwrap_or_default();
    let delivery = if copies.is_empty() {
        "absent from the final read".to_string()
    } else {
        format!("in the final read at {}", locations(index, copies))
    };
    let text = format!("{}{to} {}; {delivery}", send.id, status(send));
    Told::new(text, resent_and_copied(send, index, copies, chronicle))
}

pub fn never_sent(index: &FinalIndex, located: &Located) -> String {
    let partition = index.partition(located.part);
    format!(
        "{} holds {}, which was never sent{}",
        at(&partition.tp, located.offset),
        located.id,
        sound_copies(index, partition, located.offset, Some(located.id))
    )
}

/// What is wrong with the value, and which replicas hold a sound copy at its offset.
pub fn corrupt(index: &FinalIndex, part: usize, record: &ReadRecord) -> String {
    let partition = index.partition(part);
    let what = match (record.id, record.unparsed()) {
        (Some(id), _) => format!(
            "a value that starts with {id} but is not the value {id} was sent with: corrupt bytes served as data"
        ),
        (None, value) => {
            let value = value.unwrap_or_default();
            let shown = &value[..value.len().min(VALUE_BYTES_SHOWN)];
            let more = if value.len() > shown.len() { "..." } else { "" };
            format!(
                "a value without a message id ({} bytes): \"{}\"{more}",
                value.len(),
                shown.escape_ascii()
            )
        }
    };
    format!(
        "{} holds {what}{}",
        at(&partition.tp, record.offset),
        sound_copies(index, partition, record.offset, None)
    )
}

/// `; broker-2, broker-3 hold producer-1:000417 there as sent`: the replicas whose log
/// has a sound copy of a message other than `except` at `offset`, by message.
fn sound_copies(
    index: &FinalIndex,
    partition: &PartitionFinal,
    offset: Offset,
    except: Option<MessageId>,
) -> String {
    let mut holders: BTreeMap<MessageId, Vec<String>> = BTreeMap::new();
    for replica in &partition.replicas {
        let held = replica
            .records
            .binary_search_by_key(&offset, |r| r.offset)
            .ok()
            .and_then(|i| replica.records[i].copy_of(index.value_bytes()))
            .filter(|&id| Some(id) != except);
        if let Some(id) = held {
            holders
                .entry(id)
                .or_default()
                .push(replica.broker.to_string());
        }
    }
    holders
        .iter()
        .map(|(id, brokers)| {
            let verb = if brokers.len() == 1 { "holds" } else { "hold" };
            format!("; {} {verb} {id} there as sent", brokers.join(", "))
        })
        .collect()
}

pub fn reordered(
    index: &FinalIndex,
    earlier: &Placed,
    later: &Placed,
    chronicle: &Chronicle,
) -> Told {
    let partition = index.partition(earlier.part);
    let text = format!(
        "{} and {}, sent in that order to {} (acked at @{} and @{}), are at @{} and @{} in the final read",
        earlier.id,
        later.id,
        partition.tp,
        earlier.acked,
        later.acked,
        earlier.now,
        later.now
    );
    let mut steps = Vec::new();
    for placed in [earlier, later] {
        steps.extend(chronicle.retries(placed.id, &partition.tp));
        if let Some(write) = copy_written(chronicle, partition, placed.now) {
            let what = format!("{} ", placed.id);
            steps.push(story::appended(write, &partition.tp, placed.now, &what));
        }
    }
    Told::new(text, steps)
}

pub fn dirty_read(
    event: &Event,
    (tp, offset): (&TopicPartition, Offset),
    id: Option<MessageId>,
    index: &FinalIndex,
    chronicle: &Chronicle,
) -> Told {
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
    let text = format!(
        "{} read {what} at {} ({}); {now}",
        event.process,
        at(tp, offset),
        time(event.time)
    );
    let mut steps = Vec::new();
    let write = chronicle.write_before(tp, offset, event.time);
    if let Some(write) = write {
        steps.push(story::appended(write, tp, offset, "what was read "));
    }
    let holder = write.map(|w| (w.leader, w.epoch));
    steps.extend(chronicle.departure(tp, offset, event.time, holder));
    if let (Some(partition), Some(Some(_))) = (index.partition_of(tp), index.at(tp, offset)) {
        if let Some(now) = copy_written(chronicle, partition, offset) {
            steps.push(story::appended(
                now,
                tp,
                offset,
                "what the final read holds ",
            ));
        }
    }
    Told::new(text, steps)
}

pub fn divergent(partition: &PartitionFinal, d: &Divergence, chronicle: &Chronicle) -> Told {
    let isr = if d.other_in_isr {
        "in the ISR"
    } else {
        "out of the ISR"
    };
    let text = format!(
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
    );
    Told::new(text, divergence_story(partition, d, chronicle))
}

/// Each side's record at the first difference: the epoch that wrote it, the election
/// that began that epoch and the append; then the truncations the other replica made.
fn divergence_story(
    partition: &PartitionFinal,
    d: &Divergence,
    chronicle: &Chronicle,
) -> Vec<Step> {
    let tp = &partition.tp;
    let mut steps = Vec::new();
    let mut epochs = Vec::new();
    for (broker, holds) in [(d.reference, d.reference_holds), (d.other, d.other_holds)] {
        let log = partition.replicas.iter().find(|r| r.broker == broker);
        let Some(epoch) = log.and_then(|l| l.epoch_at(d.offset)) else {
            continue;
        };
        if !epochs.contains(&epoch) {
            epochs.push(epoch);
            steps.extend(chronicle.election_of(tp, epoch, d.offset));
        }
        if let Some(write) = chronicle.write_in(tp, epoch, d.offset) {
            let what = format!("{} ", record_id(holds));
            steps.push(story::appended(write, tp, d.offset, &what));
        }
    }
    steps.extend(chronicle.truncations_by(tp, d.other));
    steps
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
    // The harness reads the leader's log up to its first batch that does not decode (a bad
    // CRC, a broken header): if the final read stopped there too, that batch stopped it.
    let next = last.map_or(partition.log_start_offset, Offset::next);
    let corrupt = partition.replicas.iter().any(|r| {
        Some(r.broker) == partition.leader
            && r.log_end_offset == next
            && next < partition.high_watermark
    });
    let hanging = partition
        .last_stable_offset
        .filter(|&lso| lso < partition.high_watermark);
    let why = if let Some(lso) = hanging {
        format!(", where a read_committed reader stops: the LSO, {lso}, held by a transaction still open")
    } else if corrupt {
        ", where the leader's log holds a corrupt batch that every fetch stops at".to_string()
    } else {
        " before time ran out".to_string()
    };
    let beyond = match &partition.beyond_lso {
        Some(records) => format!(
            "; read past the LSO as read_uncommitted, the log holds {} records up to the HW: acknowledged sends among them are hidden, the others lost",
            records.len()
        ),
        None => "; the acknowledged sends it did not reach are unknown, not lost".to_string(),
    };
    format!(
        "{}: the final read {got} of log start {} to HW {} ({leader}){why}{beyond}",
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
    // The harness reads a replica's log as a reader would, up to its first batch that
    // fails its CRC: below the HW, that is where a follower's fetches stop too.
    let leader = match (partition.leader, leader_leo) {
        (Some(leader), Some(leo)) if leo < partition.high_watermark => {
            format!("the leader {leader}'s log, whose batches check out only up to offset {leo}")
        }
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
                if r.running && partition.leader.is_none() {
                    "no leader to fetch from".to_string()
                } else if r.running {
                    last_fetch(&partition.tp, r.broker, facts)
                } else {
                    broker_down(r.broker, facts)
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
        Fact::Kafka(KafkaFact::FetchFailed {
            tp: t, broker: b, ..
        })
        | Fact::Kafka(KafkaFact::FetchResumed {
            tp: t, broker: b, ..
        }) => t == tp && *b == broker,
        _ => false,
    });
    match last.map(|e| (e.time, &e.fact)) {
        Some((at, Fact::Kafka(KafkaFact::FetchFailed { leader, error, .. }))) => {
            format!(
                "its last fetch from {leader} failed at {}: {error}",
                time(at)
            )
        }
        Some((at, Fact::Kafka(KafkaFact::FetchResumed { leader, .. }))) => {
            format!("fetching from {leader} again since {}", time(at))
        }
        _ => "no failed fetch recorded".to_string(),
    }
}

/// Why a broker is down at the end: it halted at each start (its log dir offline, or a
/// truncation it may not make), or a fault stopped it.
fn broker_down(broker: BrokerId, facts: &[FactEvent]) -> String {
    let halts: Vec<(SimTime, String)> = facts
        .iter()
        .filter_map(|e| match &e.fact {
            Fact::Kafka(KafkaFact::LogDirOffline { broker: b, error }) if *b == broker => {
                Some((e.time, format!("its log dir offline: {error}")))
            }
            Fact::Kafka(KafkaFact::TruncationNotAllowed {
                broker: b,
                tp,
                leader_end_offset,
                log_end_offset,
            }) if *b == broker => Some((
                e.time,
                format!("its log of {tp} ends at {log_end_offset}, past its leader's {leader_end_offset}, and it may not truncate (unclean election off, before KAFKA-7414)"),
            )),
            _ => None,
        })
        .collect();
    match halts.last() {
        Some((_, why)) => {
            let at: Vec<String> = halts.iter().map(|(t, _)| time(*t)).collect();
            format!("its broker is down: it halted at {}, {why}", at.join(", "))
        }
        None => "its broker is down".to_string(),
    }
}

pub fn offline(partition: &PartitionFinal, facts: &[FactEvent]) -> String {
    let replicas: Vec<String> = partition
        .replicas
        .iter()
        .map(|r| {
            let isr = if r.in_isr { "in ISR" } else { "not in ISR" };
            let up = if r.running {
                "its broker is up".to_string()
            } else {
                broker_down(r.broker, facts)
            };
            format!("{} (LEO {}, {isr}; {up})", r.broker, r.log_end_offset)
        })
        .collect();
    let replicas = if replicas.is_empty() {
        "no replica logs".to_string()
    } else {
        replicas.join(", ")
    };
    let since = facts
        .iter()
        .rev()
        .find(|e| matches!(&e.fact, Fact::Kafka(KafkaFact::NoLeader { tp }) if *tp == partition.tp))
        .map(|e| {
            format!(
                " (since {}, when the controller found no replica it may elect)",
                time(e.time)
            )
        })
        .unwrap_or_default();
    format!(
        "{} has no leader after the heal phase{since}; replicas: {replicas}",
        partition.tp
    )
}
