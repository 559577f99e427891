//! What a timeline page draws, as plain data: the lanes of one run, computed here so that
//! the page's script only scales and paints. Times are milliseconds since the run began.

use crate::check::{count_name, Verdict};
use crate::history::facts::kafka::{ElectedFrom, Fact as KafkaFact};
use crate::history::facts::rocketmq::Fact as RocketMqFact;
use crate::history::facts::{Fact, FactLog};
use crate::history::{Event, Op};
use crate::os::clock::SimTime;
use crate::scenario::model::SystemName;
use crate::sim::timeline::Timeline;
use crate::sim::world::Stopped;
use crate::types::{BrokerId, HostName, Offset, TopicPartition};
use serde::Serialize;
use std::collections::BTreeMap;

/// Send outcomes are counted in buckets this long; the page adds them up to its zoom.
pub const BUCKET_MS: u64 = 10;

/// One run, as the page draws it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Panel {
    pub variant: String,
    /// `kafka` or `rocketmq`: the words the page uses.
    pub system: &'static str,
    pub summary: String,
    pub end: u64,
    /// When the faults were lifted and the heal phase began.
    pub heal: u64,
    pub hosts: Vec<HostLane>,
    /// Each RocketMQ master's CommitLog: its end and its flushed position.
    pub logs: Vec<LogLane>,
    pub partitions: Vec<PartitionLanes>,
    /// Every fault as it fired, and what the cluster did in reply.
    pub events: Vec<Marker>,
    pub bucket: u64,
    /// Acknowledged sends per bucket.
    pub acked: Vec<u32>,
    /// Failed or indeterminate sends per bucket.
    pub failed: Vec<u32>,
    /// When each acknowledged message that was later lost had been acknowledged.
    pub lost: Vec<u64>,
    /// The checkers' examples with their causal stories, anomalies first.
    pub stories: Vec<Story>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostLane {
    pub host: String,
    pub spans: Vec<HostSpan>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostState {
    Up,
    Killed,
    PowerLost,
    Exited,
    Paused,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostSpan {
    pub from: u64,
    pub to: u64,
    pub state: HostState,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionLanes {
    pub tp: String,
    pub replicas: u32,
    pub min_isr: u32,
    pub leadership: Vec<LeaderSpan>,
    /// Kafka: the leader's log end offset after each append; RocketMQ: the queue's end as
    /// the acknowledgements showed it. At most one point per bucket.
    pub leo: Series,
    /// Kafka: the high watermark the leader saw at each acknowledgement; RocketMQ: the
    /// offset after the last message the group consumed. At most one per bucket.
    pub hw: Series,
    /// Kafka: the last stable offset at each acknowledgement, where an open transaction
    /// held it below the HW at least once (empty otherwise: it is the HW).
    pub lso: Series,
}

/// A RocketMQ master's CommitLog over time, from its flush service's passes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogLane {
    pub host: String,
    /// `getMaxOffset`: the end of what is written.
    pub max: Series,
    /// `flushedWhere`: what an fsync covered.
    pub flushed: Series,
}

/// (time, offset) points of a step line.
pub type Series = Vec<(u64, i64)>;

/// A stretch of one leadership as the controller saw it. The controller learns of a dead
/// broker only when its session times out, so it can name a leader whose host is down:
/// `leader_down` marks that stretch, when nobody can write to the partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeaderSpan {
    pub from: u64,
    pub to: u64,
    pub leader: Option<u32>,
    /// The leader's host, as the page names it.
    pub host: Option<String>,
    pub epoch: i32,
    pub isr: Vec<u32>,
    pub leader_down: bool,
}

/// A point event, drawn on the lane of the host or partition it concerns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Marker {
    pub at: u64,
    /// A host name, a partition (`orders-0`), or `faults`.
    pub lane: String,
    pub kind: &'static str,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Story {
    pub count: &'static str,
    pub text: String,
    pub why: Vec<String>,
}

/// What one panel is built from.
pub struct PanelInput<'a> {
    pub variant: &'a str,
    pub summary: String,
    pub timeline: &'a Timeline,
    pub history: &'a [Event],
    pub facts: &'a FactLog,
    pub verdict: &'a Verdict,
    pub system: SystemName,
    /// Each topic's replication factor and `min.insync.replicas`.
    pub topics: &'a BTreeMap<String, (u32, u32)>,
}

fn ms(t: SimTime) -> u64 {
    t.since_start().as_millis() as u64
}

pub fn panel(input: &PanelInput<'_>) -> Panel {
    let t = input.timeline;
    let end = (t.duration + t.heal).as_millis() as u64;
    let hosts = host_lanes(t, end);
    let buckets = end.div_ceil(BUCKET_MS).max(1) as usize;
    let bucket = |at: SimTime| (ms(at) / BUCKET_MS).min(buckets as u64 - 1) as usize;
    let mut acked = vec![0u32; buckets];
    let mut failed = vec![0u32; buckets];
    for event in input.history {
        match event.op {
            Op::Ok { .. } => acked[bucket(event.time)] += 1,
            Op::Fail { .. } | Op::Info { .. } => failed[bucket(event.time)] += 1,
            _ => {}
        }
    }
    let stories = input
        .verdict
        .examples
        .iter()
        .map(|e| Story {
            count: count_name(e.count),
            text: e.text.clone(),
            why: e.why.clone(),
        })
        .collect();
    Panel {
        variant: input.variant.to_owned(),
        system: match input.system {
            SystemName::Kafka => "kafka",
            SystemName::RocketMq => "rocketmq",
        },
        logs: log_lanes(input.facts),
        summary: input.summary.clone(),
        end,
        heal: t.duration.as_millis() as u64,
        partitions: partition_lanes(input, &hosts, end),
        hosts,
        events: markers(t, input.facts),
        bucket: BUCKET_MS,
        acked,
        failed,
        lost: input
            .verdict
            .lost_acked_at
            .iter()
            .map(|&at| ms(at))
            .collect(),
        stories,
    }
}

fn host_lanes(t: &Timeline, end: u64) -> Vec<HostLane> {
    // The reader exists only for the final read after the heal phase.
    t.hosts
        .iter()
        .filter(|h| **h != HostName::Reader)
        .map(|&host| {
            let mut spans = Vec::new();
            let mut from = 0;
            let mut state = HostState::Up;
            for change in t.host_changes.iter().filter(|c| c.host == host) {
                let at = ms(change.time);
                if at > from {
                    spans.push(HostSpan {
                        from,
                        to: at,
                        state,
                    });
                }
                from = at;
                state = match change.stopped {
                    None => HostState::Up,
                    Some(Stopped::Killed) => HostState::Killed,
                    Some(Stopped::PowerLost) => HostState::PowerLost,
                    Some(Stopped::Exited) => HostState::Exited,
                    Some(Stopped::Paused) => HostState::Paused,
                };
            }
            spans.push(HostSpan {
                from,
                to: end.max(from),
                state,
            });
            HostLane {
                host: host.to_string(),
                spans,
            }
        })
        .collect()
}

/// The partitions in order, the workload's topics before the internal ones
/// (`__consumer_offsets`, `__transaction_state`, which would otherwise sort first), each
/// with its leadership split where its leader's host went down or came back. An internal
/// partition nothing was written to is left out: of the 50 a coordinator topic has, a run
/// uses the one or two its group and transactional ids hash to.
fn partition_lanes(input: &PanelInput<'_>, hosts: &[HostLane], end: u64) -> Vec<PartitionLanes> {
    let t = input.timeline;
    let mut tps: Vec<&TopicPartition> = t.leadership.iter().map(|c| &c.tp).collect();
    tps.sort_by_key(|tp| (tp.topic.starts_with("__"), *tp));
    tps.dedup();
    tps.into_iter()
        .filter_map(|tp| {
            let changes: Vec<_> = t.leadership.iter().filter(|c| &c.tp == tp).collect();
            let mut leadership = Vec::new();
            for (i, change) in changes.iter().enumerate() {
                let from = ms(change.time);
                let to = changes.get(i + 1).map_or(end, |next| ms(next.time));
                let leader = change.leader.map(|b| b.0);
                let span = LeaderSpan {
                    from,
                    to,
                    leader,
                    host: change.leader_host.map(|h| h.to_string()),
                    epoch: change.leader_epoch.0,
                    isr: change.isr.iter().map(|b| b.0).collect(),
                    leader_down: false,
                };
                let host = change
                    .leader_host
                    .and_then(|name| hosts.iter().find(|h| h.host == name.to_string()));
                split_where_down(&mut leadership, span, host);
            }
            let (replicas, min_isr) = input
                .topics
                .get(&*tp.topic)
                .copied()
                .unwrap_or((changes.first().map_or(1, |c| c.isr.len() as u32), 1));
            let (leo, hw, lso) = match input.system {
                SystemName::Kafka => offsets(input.facts, tp),
                SystemName::RocketMq => {
                    let (acked, consumed) = queue_offsets(input.history, tp);
                    (acked, consumed, Vec::new())
                }
            };
            (!tp.topic.starts_with("__") || !leo.is_empty()).then(|| PartitionLanes {
                tp: tp.to_string(),
                replicas,
                min_isr,
                leadership,
                leo,
                hw,
                lso,
            })
        })
        .collect()
}

/// Push `span`, cut into the stretches where the leader's host was up and where it was not.
fn split_where_down(out: &mut Vec<LeaderSpan>, span: LeaderSpan, host: Option<&HostLane>) {
    let Some(host) = host else {
        out.push(span);
        return;
    };
    let mut at = span.from;
    for h in &host.spans {
        let (from, to) = (h.from.max(at), h.to.min(span.to));
        if from >= to {
            continue;
        }
        let down = h.state != HostState::Up;
        match out.last_mut() {
            Some(last)
                if last.to == from
                    && last.epoch == span.epoch
                    && last.leader_down == down
                    && last.isr == span.isr
                    && last.leader == span.leader =>
            {
                last.to = to;
            }
            _ => out.push(LeaderSpan {
                from,
                to,
                leader_down: down,
                ..span.clone()
            }),
        }
        at = to;
    }
    if at < span.to {
        out.push(LeaderSpan { from: at, ..span });
    }
}

/// Add `(at, value)` to a step line, keeping the last value of each bucket: a step line at
/// the page's finest zoom, a few thousand points.
fn keep(series: &mut Series, at: u64, value: Offset) {
    let bucket = at / BUCKET_MS;
    match series.last_mut() {
        Some(last) if last.0 / BUCKET_MS == bucket => *last = (at, value.0),
        Some(last) if last.1 == value.0 => {}
        _ => series.push((at, value.0)),
    }
}

/// The leader's LEO after each append, and the HW and the LSO at each acknowledgement
/// (the LSO only where it ever fell below the HW).
fn offsets(facts: &FactLog, tp: &TopicPartition) -> (Series, Series, Series) {
    let mut leo = Vec::new();
    for append in facts.kafka().appends().filter(|a| a.tp == tp) {
        keep(&mut leo, ms(append.time), Offset(append.last.0 + 1));
    }
    let (mut hw, mut lso) = (Vec::new(), Vec::new());
    let mut held = false;
    for ack in facts.kafka().acknowledgements().filter(|a| a.tp == tp) {
        keep(&mut hw, ms(ack.time), ack.high_watermark);
        keep(&mut lso, ms(ack.time), ack.last_stable_offset);
        held |= ack.last_stable_offset < ack.high_watermark;
    }
    if !held {
        lso.clear();
    }
    (leo, hw, lso)
}

/// A RocketMQ queue's end as its acknowledgements showed it (the highest acknowledged
/// queue offset, plus one) and the offset after the highest message the group consumed:
/// what the clients saw, as RocketMQ's broker keeps no fact per message.
fn queue_offsets(history: &[Event], tp: &TopicPartition) -> (Series, Series) {
    let (mut acked, mut consumed) = (Vec::new(), Vec::new());
    let (mut acked_end, mut consumed_end) = (Offset(0), Offset(0));
    for event in history {
        match &event.op {
            Op::Ok { tp: t, offset, .. } if t == tp && offset.next() > acked_end => {
                acked_end = offset.next();
                keep(&mut acked, ms(event.time), acked_end);
            }
            Op::Processed { tp: t, offset, .. } if t == tp && offset.next() > consumed_end => {
                consumed_end = offset.next();
                keep(&mut consumed, ms(event.time), consumed_end);
            }
            _ => {}
        }
    }
    (acked, consumed)
}

/// Each master's CommitLog end and flushed position, from its `CommitLog` facts.
fn log_lanes(facts: &FactLog) -> Vec<LogLane> {
    let mut lanes: BTreeMap<HostName, LogLane> = BTreeMap::new();
    for event in facts.events() {
        if let Fact::RocketMq(RocketMqFact::CommitLog {
            broker,
            max_offset,
            flushed_where,
        }) = &event.fact
        {
            let lane = lanes.entry(*broker).or_insert_with(|| LogLane {
                host: broker.to_string(),
                max: Vec::new(),
                flushed: Vec::new(),
            });
            let at = ms(event.time);
            keep(&mut lane.max, at, Offset(*max_offset as i64));
            keep(&mut lane.flushed, at, Offset(*flushed_where as i64));
        }
    }
    lanes.into_values().collect()
}

/// The faults as they fired and what the cluster recorded doing about them, each with the
/// words a tooltip shows. Retries are left out: the failed sends show them, by the thousand.
fn markers(t: &Timeline, facts: &FactLog) -> Vec<Marker> {
    let mut out: Vec<Marker> = t
        .faults
        .iter()
        .map(|(at, what)| Marker {
            at: ms(*at),
            lane: "faults".to_owned(),
            kind: "fault",
            text: format!("fault: {what}"),
        })
        .collect();
    for event in facts.events() {
        let at = ms(event.time);
        let broker = |b: BrokerId| HostName::Broker(b.0).to_string();
        let (lane, kind, text) = match &event.fact {
            Fact::Kafka(KafkaFact::Election {
                tp,
                leader,
                epoch,
                from,
            }) => (
                tp.to_string(),
                if from.unclean() {
                    "unclean-election"
                } else {
                    "election"
                },
                format!(
                    "the controller elected {leader} leader of {tp} for epoch {epoch}, {}",
                    elected_from(*from)
                ),
            ),
            Fact::Kafka(KafkaFact::NoLeader { tp }) => (
                tp.to_string(),
                "offline",
                format!("{tp} is offline: the controller found no replica it may elect"),
            ),
            Fact::Kafka(KafkaFact::LeaderStarted {
                tp,
                broker: b,
                epoch,
                log_end_offset,
            }) => (
                tp.to_string(),
                "leader-started",
                format!("{b} took up the leadership of {tp} epoch {epoch}; its log ends at {log_end_offset}, where the epoch starts"),
            ),
            Fact::Kafka(KafkaFact::IsrShrink { tp }) => (
                tp.to_string(),
                "isr-shrink",
                format!("the controller committed a smaller ISR for {tp}"),
            ),
            Fact::Kafka(KafkaFact::IsrExpand { tp }) => (
                tp.to_string(),
                "isr-expand",
                format!("the controller committed a larger ISR for {tp}"),
            ),
            Fact::Kafka(KafkaFact::Truncation {
                tp,
                broker: b,
                from,
                to,
                rule,
            }) => (
                broker(*b),
                "truncation",
                format!(
                    "{b} truncated {tp} from {from} to {to} ({} offsets gone), by {rule}",
                    from.0 - to.0
                ),
            ),
            Fact::Kafka(KafkaFact::Recovery {
                tp,
                broker: b,
                log_end_offset,
            }) => (
                broker(*b),
                "recovery",
                format!("{b} recovered {tp} after an unclean stop: its log ends at {log_end_offset}; what only the page cache held is gone"),
            ),
            Fact::Kafka(KafkaFact::LogMissing { tp, broker: b }) => (
                broker(*b),
                "log-missing",
                format!("{b} found no log of {tp}: its directory never reached the disk, so it starts empty"),
            ),
            Fact::Kafka(KafkaFact::LogDirOffline { broker: b, error }) => (
                broker(*b),
                "log-dir-offline",
                format!("{b}'s log dir went offline ({error}): the broker halts"),
            ),
            Fact::Kafka(KafkaFact::TruncationNotAllowed {
                tp,
                broker: b,
                leader_end_offset,
                log_end_offset,
            }) => (
                broker(*b),
                "truncation-not-allowed",
                format!("{b}'s log of {tp} ends at {log_end_offset}, past its leader's {leader_end_offset}, and unclean election is off: it may not truncate, so the broker exits (before KAFKA-7414)"),
            ),
            Fact::Kafka(KafkaFact::FetchFailed {
                tp,
                broker: b,
                leader,
                error,
            }) => (
                broker(*b),
                "fetch-failed",
                format!("{b}'s fetches of {tp} from {leader} fail: {error}"),
            ),
            Fact::Kafka(KafkaFact::FetchResumed {
                tp,
                broker: b,
                leader,
            }) => (
                broker(*b),
                "fetch-resumed",
                format!("{b} fetches {tp} from {leader} again"),
            ),
            Fact::RocketMq(RocketMqFact::Recovered {
                broker,
                normal,
                start_file,
                end,
                dispatched,
                queues_truncated,
                ..
            }) => (
                broker.to_string(),
                "recovery",
                format!(
                    "{broker} recovered its store {}: the CommitLog scan from file {start_file} ended at {end}{}, {dispatched} records dispatched again",
                    if *normal { "normally (no abort file)" } else { "abnormally (the abort file was there)" },
                    queues_truncated.map_or(String::new(), |at| format!(", the ConsumeQueues cut back to {at}"))
                ),
            ),
            Fact::RocketMq(RocketMqFact::OffsetsLoaded {
                broker,
                source,
                queues,
            }) => (
                broker.to_string(),
                "recovery",
                format!("{broker} loaded its consumer offsets from {source} ({queues} queues)"),
            ),
            Fact::RocketMq(RocketMqFact::NotOpened { broker, reason }) => (
                broker.to_string(),
                "log-dir-offline",
                format!("{broker}'s store did not open ({reason}): the broker does not start"),
            ),
            Fact::RocketMq(RocketMqFact::ShutDown {
                broker,
                abort_deleted,
            }) => (
                broker.to_string(),
                "shutdown",
                format!(
                    "{broker} shut down cleanly{}",
                    if *abort_deleted { ", deleting its abort file" } else { ", keeping its abort file (the next start is abnormal)" }
                ),
            ),
            Fact::Kafka(KafkaFact::TxnUnverified {
                tp,
                broker: leader,
                transactional_id,
                error,
            }) => (
                tp.to_string(),
                "unverified",
                format!(
                    "{} refused a batch of {transactional_id} ({error}): its coordinator does not have {tp} in an ongoing transaction",
                    broker(*leader)
                ),
            ),
            Fact::Kafka(KafkaFact::Appended { .. })
            | Fact::Kafka(KafkaFact::Acknowledged { .. })
            | Fact::Kafka(KafkaFact::TxnFenced { .. })
            | Fact::Kafka(KafkaFact::TxnMarked { .. })
            | Fact::RocketMq(RocketMqFact::CommitLog { .. })
            | Fact::Retried { .. }
            | Fact::RequestTimedOut { .. }
            | Fact::Fault { .. } => continue,
        };
        out.push(Marker {
            at,
            lane,
            kind,
            text,
        });
    }
    out.sort_by_key(|m| m.at);
    out
}

fn elected_from(from: ElectedFrom) -> &'static str {
    match from {
        ElectedFrom::Isr => "clean: from the ISR",
        ElectedFrom::Elr => "clean: the ISR was empty, from the eligible leader replicas (KIP-966)",
        ElectedFrom::LastKnownLeader => {
            "unclean: ISR and ELR were empty and the last known leader came back (KIP-966)"
        }
        ElectedFrom::OutOfSync => "unclean: from outside the ISR (unclean.leader.election.enable)",
    }
}
