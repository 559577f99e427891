//! What the clients were told about each send, folded from the history per message id.

use crate::history::{Event, MessageId, Op};
use crate::os::clock::SimTime;
use crate::types::{Offset, TopicPartition};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// Acknowledged at this partition and offset; `degraded`: with a stored status that
    /// promises less (`acked_degraded`).
    Acked {
        tp: &'a TopicPartition,
        offset: Offset,
        time: SimTime,
        degraded: bool,
    },
    /// Definitely not written.
    Failed { error: &'a str, time: SimTime },
    /// Unknown: timeout, disconnect, error after append, or acks=0.
    Indeterminate { error: &'a str, time: SimTime },
    /// Invoked but never completed (the run ended, or the producer crashed first).
    Pending,
}

impl Outcome<'_> {
    /// Which completion wins when a (malformed) history has several for one id: a client
    /// that was ever told "ok" must have that ack checked.
    fn rank(&self) -> u8 {
        match self {
            Outcome::Acked { .. } => 3,
            Outcome::Failed { .. } => 2,
            Outcome::Indeterminate { .. } => 1,
            Outcome::Pending => 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send<'a> {
    pub id: MessageId,
    /// The partition the producer chose and the invoke time; `None` for a completion
    /// whose invoke is missing from the history.
    pub invoked: Option<(&'a TopicPartition, SimTime)>,
    pub outcome: Outcome<'a>,
}

impl<'a> Send<'a> {
    /// Where the send went: the invoke's partition, else the ack's.
    pub fn tp(&self) -> Option<&'a TopicPartition> {
        match (self.invoked, self.outcome) {
            (Some((tp, _)), _) => Some(tp),
            (None, Outcome::Acked { tp, .. }) => Some(tp),
            (None, _) => None,
        }
    }
}

/// Every send the history mentions, sorted by id.
pub fn sends(history: &[Event]) -> Vec<Send<'_>> {
    let mut ops: Vec<(MessageId, usize)> = history
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.op {
            Op::Invoke { id, .. }
            | Op::Ok { id, .. }
            | Op::Fail { id, .. }
            | Op::Info { id, .. } => Some((*id, i)),
            _ => None,
        })
        .collect();
    // Stable: within an id, events stay in history order, so the first completion of the
    // strongest kind wins.
    ops.sort_by_key(|&(id, _)| id);

    // Sized exactly: growing by doubling would hold twice the sends at the checkers' peak.
    let distinct = ops.chunk_by(|a, b| a.0 == b.0).count();
    let mut sends: Vec<Send<'_>> = Vec::with_capacity(distinct);
    for (id, i) in ops {
        let event = &history[i];
        if sends.last().map(|s| s.id) != Some(id) {
            sends.push(Send {
                id,
                invoked: None,
                outcome: Outcome::Pending,
            });
        }
        let Some(send) = sends.last_mut() else {
            continue;
        };
        let outcome = match &event.op {
            Op::Invoke { tp, .. } => {
                if send.invoked.is_none() {
                    send.invoked = Some((tp, event.time));
                }
                continue;
            }
            Op::Ok {
                tp,
                offset,
                degraded,
                ..
            } => Outcome::Acked {
                tp,
                offset: *offset,
                time: event.time,
                degraded: degraded.is_some(),
            },
            Op::Fail { error, .. } => Outcome::Failed {
                error,
                time: event.time,
            },
            Op::Info { error, .. } => Outcome::Indeterminate {
                error,
                time: event.time,
            },
            _ => continue,
        };
        if outcome.rank() > send.outcome.rank() {
            send.outcome = outcome;
        }
    }
    sends
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ms: u64, op: Op) -> Event {
        Event {
            time: SimTime::from_millis(ms),
            process: "producer-1".into(),
            op,
        }
    }

    fn id(seq: u32) -> MessageId {
        MessageId { producer: 1, seq }
    }

    #[test]
    fn an_ok_after_an_info_is_checked_as_an_ack() {
        let tp = TopicPartition::new("t", 0);
        let history = vec![
            ev(
                1,
                Op::Invoke {
                    id: id(1),
                    tp: tp.clone(),
                },
            ),
            ev(
                2,
                Op::Info {
                    id: id(1),
                    error: "timeout".into(),
                },
            ),
            ev(
                3,
                Op::Ok {
                    id: id(1),
                    tp: tp.clone(),
                    offset: Offset(4),
                    degraded: None,
                },
            ),
        ];
        let sends = sends(&history);
        assert_eq!(sends.len(), 1);
        assert_eq!(
            sends[0].outcome,
            Outcome::Acked {
                tp: &tp,
                offset: Offset(4),
                time: SimTime::from_millis(3),
                degraded: false,
            }
        );
        assert_eq!(sends[0].invoked, Some((&tp, SimTime::from_millis(1))));
    }

    #[test]
    fn sends_are_sorted_by_id_and_uncompleted_ones_are_pending() {
        let tp = TopicPartition::new("t", 0);
        let history = vec![
            ev(
                1,
                Op::Invoke {
                    id: id(2),
                    tp: tp.clone(),
                },
            ),
            ev(
                1,
                Op::Invoke {
                    id: id(1),
                    tp: tp.clone(),
                },
            ),
            ev(
                2,
                Op::Fail {
                    id: id(1),
                    error: "NOT_ENOUGH_REPLICAS".into(),
                },
            ),
        ];
        let sends = sends(&history);
        assert_eq!(
            sends.iter().map(|s| s.id.seq).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(matches!(
            sends[0].outcome,
            Outcome::Failed {
                error: "NOT_ENOUGH_REPLICAS",
                ..
            }
        ));
        assert_eq!(sends[1].outcome, Outcome::Pending);
    }
}
