//! Why an anomaly happened, told from the cluster's facts: who acknowledged a write and
//! what it knew then, the fault that struck, who was elected and with what log, who
//! truncated what, which batches the producer sent again. Each example gets these as
//! timed steps a person can follow into the trace (`--trace` prints the same times).
//!
//! Only recorded facts are used, never a program's memory, and a step is told only when
//! a fact shows it: where the facts are silent, the story is shorter, not guessed.

use crate::check::tell::Step;
use crate::history::facts::kafka::{ElectedFrom, Fact as KafkaFact};
use crate::history::facts::{Fact, FactLog};
use crate::history::MessageId;
use crate::os::clock::SimTime;
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Faults told that struck the broker that held a record: the fault and the restart.
const FAULTS_TOLD: usize = 2;
/// Elections told while looking for the one that left a record behind.
const ELECTIONS_TOLD: usize = 3;
/// Retries of one message told.
const RETRIES_TOLD: usize = 3;

/// What the leader that acknowledged a write knew when it did.
pub struct Acknowledgement {
    pub leader: BrokerId,
    pub epoch: Epoch,
    pub step: Step,
}

/// A leader's append of the batch holding a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Append {
    pub time: SimTime,
    pub leader: BrokerId,
    pub epoch: Epoch,
}

/// The run's facts, read for explanations. Each question is one pass over them: a run
/// explains a handful of examples, so an index would cost more than it saves.
pub struct Chronicle<'a> {
    log: &'a FactLog,
}

impl<'a> Chronicle<'a> {
    pub fn new(log: &'a FactLog) -> Chronicle<'a> {
        Chronicle { log }
    }

    /// The leader's answer that acknowledged `tp@offset`: the last before the client heard
    /// of it at `heard`.
    pub fn acknowledgement(
        &self,
        tp: &TopicPartition,
        offset: Offset,
        heard: SimTime,
    ) -> Option<Acknowledgement> {
        self.log
            .kafka()
            .acknowledgements()
            .take_while(|a| a.time <= heard)
            .filter(|a| a.tp == tp && (a.first..=a.last).contains(&offset))
            .last()
            .map(|a| Acknowledgement {
                leader: a.leader,
                epoch: a.epoch,
                step: Step::new(
                    a.time,
                    format!(
                        "{} acknowledged {tp}@{}..{} in epoch {} (acks={}): HW {}, {}",
                        a.leader,
                        a.first,
                        a.last,
                        a.epoch,
                        a.acks,
                        a.high_watermark,
                        follower_leos(a.followers)
                    ),
                ),
            })
    }

    /// The append that wrote `tp@offset` in leader epoch `epoch`: a leader appends each
    /// offset at most once per epoch, so it is unique.
    pub fn write_in(&self, tp: &TopicPartition, epoch: Epoch, offset: Offset) -> Option<Append> {
        self.writes(tp, offset).find(|w| w.epoch == epoch)
    }

    /// The last append of `tp@offset` before `before`: what a consumer read there then.
    pub fn write_before(
        &self,
        tp: &TopicPartition,
        offset: Offset,
        before: SimTime,
    ) -> Option<Append> {
        self.writes(tp, offset)
            .take_while(|w| w.time <= before)
            .last()
    }

    fn writes<'b>(
        &'b self,
        tp: &'b TopicPartition,
        offset: Offset,
    ) -> impl Iterator<Item = Append> + 'b {
        self.log
            .kafka()
            .appends()
            .filter(move |a| a.tp == tp && (a.first..=a.last).contains(&offset))
            .map(|a| Append {
                time: a.time,
                leader: a.leader,
                epoch: a.epoch,
            })
    }

    /// How the record at `tp@offset`, which `holder` had (in epoch `epoch`) at `since`,
    /// left the logs: the faults that struck `holder`, the elections up to the first
    /// leader whose log ended short of it, the recoveries and truncations that removed it,
    /// and the first append of other records there.
    pub fn departure(
        &self,
        tp: &TopicPartition,
        offset: Offset,
        since: SimTime,
        holder: Option<(BrokerId, Epoch)>,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        let (mut faults, mut elections, mut offline) = (0, 0, false);
        let mut short_leader = false;
        let mut recovered = BTreeSet::new();
        let mut truncated = BTreeSet::new();
        let struck = |hosts: &[HostName]| match holder {
            Some((broker, _)) => hosts.contains(&HostName::Broker(broker.0)),
            None => true,
        };
        for e in self.log.events().iter().filter(|e| e.time >= since) {
            let step = |text: String| Step::new(e.time, text);
            match &e.fact {
                Fact::Fault { what, hosts } if faults < FAULTS_TOLD && struck(hosts) => {
                    faults += 1;
                    steps.push(step(fault(what, hosts)));
                }
                Fact::Kafka(KafkaFact::NoLeader { tp: t })
                    if t == tp && !offline && !short_leader =>
                {
                    offline = true;
                    steps.push(step(format!(
                        "{tp} has no leader: the controller may elect none of its replicas"
                    )));
                }
                Fact::Kafka(KafkaFact::Election {
                    tp: t,
                    leader,
                    epoch,
                    from,
                }) if t == tp && elections < ELECTIONS_TOLD && !short_leader => {
                    elections += 1;
                    let start = self.leader_start(tp, *leader, *epoch);
                    short_leader = start.is_some_and(|leo| leo <= offset);
                    steps.push(step(election(tp, *leader, *epoch, *from, start, offset)));
                }
                Fact::Kafka(KafkaFact::Recovery {
                    tp: t,
                    broker,
                    log_end_offset,
                }) if t == tp && *log_end_offset <= offset && recovered.insert(*broker) => {
                    steps.push(step(format!(
                        "{broker} reopened {tp} after an unclean stop: its log ends at {log_end_offset}, short of @{offset} (what its page cache held and its disk did not is gone)"
                    )));
                }
                Fact::Kafka(KafkaFact::LogMissing { tp: t, broker })
                    if t == tp && recovered.insert(*broker) =>
                {
                    steps.push(step(format!(
                        "{broker} came back after an unclean stop with no log of {tp}: its directory never reached the disk, so it starts empty"
                    )));
                }
                Fact::Kafka(KafkaFact::Truncation {
                    tp: t,
                    broker,
                    from,
                    to,
                    rule,
                }) if t == tp && (*to..*from).contains(&offset) && truncated.insert(*broker) => {
                    steps.push(step(format!(
                        "{broker} truncated {tp} from {from} to {to} ({rule}), removing @{offset}"
                    )));
                }
                _ => {}
            }
        }
        let overwrite = self
            .writes(tp, offset)
            .find(|w| w.time >= since && holder.is_none_or(|(_, held_in)| held_in != w.epoch));
        steps.extend(overwrite.map(|w| appended(w, tp, offset, "other records ")));
        steps.sort_by_key(|s| s.time);
        steps
    }

    /// The LEO `broker` took up the leadership of `epoch` with.
    fn leader_start(&self, tp: &TopicPartition, broker: BrokerId, epoch: Epoch) -> Option<Offset> {
        self.log.events().iter().find_map(|e| match &e.fact {
            Fact::Kafka(KafkaFact::LeaderStarted {
                tp: t,
                broker: b,
                epoch: ep,
                log_end_offset,
            }) if t == tp && *b == broker && *ep == epoch => Some(*log_end_offset),
            _ => None,
        })
    }

    /// The election that began `epoch` of `tp`, as a step.
    pub fn election_of(&self, tp: &TopicPartition, epoch: Epoch, offset: Offset) -> Option<Step> {
        self.log.events().iter().find_map(|e| match &e.fact {
            Fact::Kafka(KafkaFact::Election {
                tp: t,
                leader,
                epoch: ep,
                from,
            }) if t == tp && *ep == epoch => {
                let start = self.leader_start(tp, *leader, epoch);
                Some(Step::new(
                    e.time,
                    election(tp, *leader, epoch, *from, start, offset),
                ))
            }
            _ => None,
        })
    }

    /// The times the producer put the batch holding `id` back to send again.
    pub fn retries(&self, id: MessageId, tp: &TopicPartition) -> Vec<Step> {
        self.log
            .events()
            .iter()
            .filter_map(|e| match &e.fact {
                Fact::Retried {
                    producer,
                    tp: t,
                    first,
                    last,
                    error,
                } if *producer == id.producer && t == tp && (*first..=*last).contains(&id) => {
                    Some(Step::new(
                        e.time,
                        format!(
                            "producer-{producer} sends its batch {first}..{:06} again after: {error}",
                            last.seq
                        ),
                    ))
                }
                _ => None,
            })
            .take(RETRIES_TOLD)
            .collect()
    }

    /// Every truncation `broker` made of `tp`.
    pub fn truncations_by(&self, tp: &TopicPartition, broker: BrokerId) -> Vec<Step> {
        self.log
            .events()
            .iter()
            .filter_map(|e| match &e.fact {
                Fact::Kafka(KafkaFact::Truncation {
                    tp: t,
                    broker: b,
                    from,
                    to,
                    rule,
                }) if t == tp && *b == broker => Some(Step::new(
                    e.time,
                    format!("{broker} truncated {tp} from {from} to {to} ({rule})"),
                )),
                _ => None,
            })
            .collect()
    }
}

/// A write's append as a step: `broker-2 appended orders/0@815 in epoch 2`.
pub fn appended(write: Append, tp: &TopicPartition, offset: Offset, what: &str) -> Step {
    Step::new(
        write.time,
        format!(
            "{} appended {what}at {tp}@{offset} in epoch {}",
            write.leader, write.epoch
        ),
    )
}

/// `followers broker-2 at LEO 787, broker-3 at LEO 788`
fn follower_leos(followers: &[(BrokerId, Offset)]) -> String {
    if followers.is_empty() {
        return "no followers".to_string();
    }
    let mut text = "followers ".to_string();
    for (i, (broker, leo)) in followers.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        if *leo == Offset::NONE {
            let _ = write!(text, "{broker} not fetched yet");
        } else {
            let _ = write!(text, "{broker} at LEO {leo}");
        }
    }
    text
}

/// `power-loss leader:orders/0, which struck broker-1`
pub fn fault(what: &str, hosts: &[HostName]) -> String {
    let names: Vec<String> = hosts.iter().map(ToString::to_string).collect();
    if names.iter().all(|name| what.contains(name.as_str())) {
        format!("fault: {what}")
    } else {
        format!("fault: {what}, which struck {}", names.join(", "))
    }
}

fn election(
    tp: &TopicPartition,
    leader: BrokerId,
    epoch: Epoch,
    from: ElectedFrom,
    start: Option<Offset>,
    offset: Offset,
) -> String {
    let how = match from {
        ElectedFrom::Isr => "cleanly, from the ISR",
        ElectedFrom::Elr => "cleanly, from the eligible leader replicas (KIP-966)",
        ElectedFrom::LastKnownLeader => {
            "uncleanly: the last known leader, back with the ISR and ELR empty (KIP-966)"
        }
        ElectedFrom::OutOfSync => {
            "uncleanly, from outside the ISR (unclean.leader.election.enable)"
        }
    };
    let log = match start {
        Some(leo) if leo <= offset => format!("; its LEO was {leo}: it lacked @{offset}"),
        Some(leo) => format!("; its LEO was {leo}: it held @{offset}"),
        None => String::new(),
    };
    format!("{leader} elected leader of {tp} for epoch {epoch}, {how}{log}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::kafka::Acks;
    use crate::history::facts::FactEvent;
    use std::time::Duration;

    fn tp() -> TopicPartition {
        TopicPartition::new("orders", 0)
    }

    fn at(ms: u64, fact: Fact) -> FactEvent {
        FactEvent {
            time: SimTime::after_start(Duration::from_millis(ms)),
            fact,
        }
    }

    fn ack(leader: u32, epoch: i32, first: i64, last: i64) -> Fact {
        Fact::Kafka(KafkaFact::Acknowledged {
            tp: tp(),
            leader: BrokerId(leader),
            epoch: Epoch(epoch),
            acks: Acks::Leader,
            first: Offset(first),
            last: Offset(last),
            high_watermark: Offset(first - 2),
            last_stable_offset: Offset(first - 2),
            followers: Box::new([
                (BrokerId(2), Offset(first - 1)),
                (BrokerId(3), Offset::NONE),
            ]),
        })
    }

    fn elected(leader: u32, epoch: i32, from: ElectedFrom) -> Fact {
        Fact::Kafka(KafkaFact::Election {
            tp: tp(),
            leader: BrokerId(leader),
            epoch: Epoch(epoch),
            from,
        })
    }

    fn started(broker: u32, epoch: i32, leo: i64) -> Fact {
        Fact::Kafka(KafkaFact::LeaderStarted {
            tp: tp(),
            broker: BrokerId(broker),
            epoch: Epoch(epoch),
            log_end_offset: Offset(leo),
        })
    }

    fn truncated(broker: u32, from: i64, to: i64) -> Fact {
        Fact::Kafka(KafkaFact::Truncation {
            tp: tp(),
            broker: BrokerId(broker),
            from: Offset(from),
            to: Offset(to),
            rule: "leader-epoch".into(),
        })
    }

    fn appended(leader: u32, epoch: i32, first: i64, last: i64) -> Fact {
        Fact::Kafka(KafkaFact::Appended {
            tp: tp(),
            leader: BrokerId(leader),
            epoch: Epoch(epoch),
            first: Offset(first),
            last: Offset(last),
        })
    }

    fn fault(what: &str, broker: u32) -> Fact {
        Fact::Fault {
            what: what.into(),
            hosts: vec![HostName::Broker(broker)],
        }
    }

    fn texts(steps: &[Step]) -> Vec<&str> {
        steps.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn the_acknowledgement_is_the_last_answer_covering_the_offset_before_the_client_heard() {
        let facts = [
            at(5, ack(1, 0, 10, 12)),
            at(8, ack(2, 1, 11, 11)),
            at(20, ack(3, 2, 10, 14)),
        ];
        let log = facts.into_iter().collect();
        let chronicle = Chronicle::new(&log);
        let found = chronicle
            .acknowledgement(
                &tp(),
                Offset(11),
                SimTime::after_start(Duration::from_millis(9)),
            )
            .expect("an answer before 9 ms");
        assert_eq!((found.leader, found.epoch), (BrokerId(2), Epoch(1)));
        assert_eq!(
            found.step.text,
            "broker-2 acknowledged orders/0@11..11 in epoch 1 (acks=1): HW 9, followers broker-2 at LEO 10, broker-3 not fetched yet"
        );
        assert!(chronicle
            .acknowledgement(
                &tp(),
                Offset(15),
                SimTime::after_start(Duration::from_millis(30))
            )
            .is_none());
    }

    /// A record at offset 5 of epoch 0, held by broker-1: only what removed it is told.
    #[test]
    fn a_departure_tells_the_faults_on_the_holder_the_election_that_left_it_behind_and_who_removed_it(
    ) {
        let facts = [
            at(1, fault("kill broker-3", 3)),
            at(10, fault("power-loss leader:orders/0", 1)),
            at(11, fault("slow-link broker-2 <-> broker-3 +5ms", 2)),
            at(12, elected(2, 1, ElectedFrom::Isr)),
            at(13, started(2, 1, 9)),
            at(14, elected(3, 2, ElectedFrom::OutOfSync)),
            at(15, started(3, 2, 4)),
            at(16, elected(2, 3, ElectedFrom::Isr)),
            at(17, appended(3, 2, 4, 6)),
            at(18, appended(3, 2, 7, 9)),
            at(19, truncated(1, 6, 5)),
            at(20, truncated(2, 9, 4)),
            at(21, truncated(2, 9, 4)),
            at(22, fault("restart crashed", 1)),
            at(23, fault("kill broker-1", 1)),
        ];
        let log = facts.into_iter().collect();
        let chronicle = Chronicle::new(&log);
        let since = SimTime::after_start(Duration::from_millis(5));
        let steps = chronicle.departure(&tp(), Offset(5), since, Some((BrokerId(1), Epoch(0))));
        assert_eq!(
            texts(&steps),
            [
                "fault: power-loss leader:orders/0, which struck broker-1",
                "broker-2 elected leader of orders/0 for epoch 1, cleanly, from the ISR; its LEO was 9: it held @5",
                "broker-3 elected leader of orders/0 for epoch 2, uncleanly, from outside the ISR (unclean.leader.election.enable); its LEO was 4: it lacked @5",
                "broker-3 appended other records at orders/0@5 in epoch 2",
                "broker-1 truncated orders/0 from 6 to 5 (leader-epoch), removing @5",
                "broker-2 truncated orders/0 from 9 to 4 (leader-epoch), removing @5",
                "fault: restart crashed, which struck broker-1",
            ],
            "before the write, on other hosts, after the short leader, repeated, or past the fault limit: not told"
        );
    }

    #[test]
    fn retries_are_those_of_the_producers_batches_that_held_the_message() {
        let id = MessageId {
            producer: 1,
            seq: 7,
        };
        let retry = |producer: u32, first: u32, last: u32, partition: u32| Fact::Retried {
            producer,
            tp: TopicPartition::new("orders", partition),
            first: MessageId {
                producer,
                seq: first,
            },
            last: MessageId {
                producer,
                seq: last,
            },
            error: "disconnected".into(),
        };
        let facts = [
            at(1, retry(1, 1, 6, 0)),
            at(2, retry(2, 5, 9, 0)),
            at(3, retry(1, 5, 9, 1)),
            at(4, retry(1, 5, 9, 0)),
        ];
        let steps = Chronicle::new(&facts.into_iter().collect()).retries(id, &tp());
        assert_eq!(
            texts(&steps),
            ["producer-1 sends its batch producer-1:000005..000009 again after: disconnected"]
        );
    }
}
