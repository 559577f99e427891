//! How the checkers' examples get their words. The checkers find each anomaly and count
//! it in terms every system shares; why it happened is told by the system that ran, from
//! its own facts and in its own vocabulary (a Kafka ISR, a RocketMQ SyncStateSet), so each
//! system hands [`check`](super::check) a [`Teller`]. What is shared lives here: an
//! example's shape ([`Told`]) and its timed steps ([`Step`]).

use super::final_read::{FinalIndex, Located};
use super::groups::{Gap, Processing, Repeat};
use super::reorder::Placed;
use super::replicas::{Divergence, Holder};
use super::sends::Send;
use crate::history::final_state::{PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::{Event, MessageId};
use crate::os::clock::SimTime;
use crate::types::{Offset, TopicPartition};

/// Steps told per example, the first ones in time.
const STEPS_SHOWN: usize = 8;

/// An example: one line of what is wrong, and the steps that led to it.
pub struct Told {
    pub text: String,
    pub why: Vec<String>,
}

impl Told {
    /// `text`, with `steps` told in time order.
    pub fn new(text: String, steps: Vec<Step>) -> Told {
        Told {
            text,
            why: lines(steps),
        }
    }
}

impl From<String> for Told {
    fn from(text: String) -> Told {
        Told {
            text,
            why: Vec::new(),
        }
    }
}

/// One step of a story: when, and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub time: SimTime,
    pub text: String,
}

impl Step {
    pub fn new(time: SimTime, text: String) -> Step {
        Step { time, text }
    }
}

/// The steps in time order (the sort is stable: facts of one instant keep the order they
/// were recorded in), as `t=8.000s ...` lines; beyond `STEPS_SHOWN`, a count.
pub fn lines(mut steps: Vec<Step>) -> Vec<String> {
    steps.sort_by_key(|s| s.time);
    steps.dedup();
    let more = steps.len().saturating_sub(STEPS_SHOWN);
    let mut lines: Vec<String> = steps
        .iter()
        .take(STEPS_SHOWN)
        .map(|s| format!("{} {}", time(s.time), s.text))
        .collect();
    if more > 0 {
        lines.push(format!("and {more} more steps (--trace shows every event)"));
    }
    lines
}

/// `t=8.012s`
pub fn time(t: SimTime) -> String {
    format!("t={:.3}s", t.since_start().as_secs_f64())
}

/// A system's words for each anomaly the checkers find: what is wrong, and from the facts
/// its programs recorded, how it came about. A checker asks only for the examples it
/// keeps, so a teller may take its time.
pub trait Teller {
    /// A record of the final read whose message id no client ever sent.
    fn never_sent(&self, index: &FinalIndex, located: &Located) -> Told;
    /// A record of the final read that is no message's copy: its value carries no message
    /// id, or is not the value its id was sent with.
    fn corrupt(&self, index: &FinalIndex, part: usize, record: &ReadRecord) -> Told;
    /// A send that failed or whose outcome is unknown (`failed`, `indeterminate`,
    /// `false_failures`), with its copies in the final read.
    fn send_status(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told;
    /// A send with more than one copy in the final read.
    fn duplicate(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told;
    /// An acknowledged send whose copies are all away from where it was acknowledged.
    fn moved(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told;
    /// An acknowledged send absent from the final read; `holders`: the replicas' logs
    /// that still hold it.
    fn lost(&self, send: &Send, index: &FinalIndex, holders: &[Holder]) -> Told;
    /// Two sends of one producer to one partition, in the final read in the other order.
    fn reordered(&self, index: &FinalIndex, earlier: &Placed, later: &Placed) -> Told;
    /// A read during the run that the final read contradicts at that offset.
    fn dirty_read(
        &self,
        event: &Event,
        at: (&TopicPartition, Offset),
        id: Option<MessageId>,
        index: &FinalIndex,
    ) -> Told;
    /// A partition with no leader after the heal.
    fn offline(&self, partition: &PartitionFinal) -> Told;
    /// A partition the final read could not read to its end.
    fn unreadable(&self, partition: &PartitionFinal) -> Told;
    /// A partition with replicas out of sync after the heal (`out`).
    fn under_replicated(&self, partition: &PartitionFinal, out: &[&ReplicaLog]) -> Told;
    /// Two replicas' logs that differ below the high watermark.
    fn divergent(&self, partition: &PartitionFinal, divergence: &Divergence) -> Told;
    /// Records of the final read that no member of the group processed (`gap`), given
    /// every processing sorted (`processings`); `behind`: the group had not caught up.
    fn unprocessed(
        &self,
        history: &[Event],
        processings: &[Processing],
        at: (&TopicPartition, Gap),
        behind: Option<&str>,
    ) -> Told;
    /// Records the group processed more than once.
    fn reprocessed(&self, history: &[Event], processings: &[Processing], repeat: &Repeat) -> Told;
}

/// A teller with no words, for tests of what the checkers count: every example is blank.
#[cfg(test)]
pub(crate) struct Untold;

#[cfg(test)]
impl Teller for Untold {
    fn never_sent(&self, _: &FinalIndex, _: &Located) -> Told {
        String::new().into()
    }
    fn corrupt(&self, _: &FinalIndex, _: usize, _: &ReadRecord) -> Told {
        String::new().into()
    }
    fn send_status(&self, _: &Send, _: &FinalIndex, _: &[Located]) -> Told {
        String::new().into()
    }
    fn duplicate(&self, _: &Send, _: &FinalIndex, _: &[Located]) -> Told {
        String::new().into()
    }
    fn moved(&self, _: &Send, _: &FinalIndex, _: &[Located]) -> Told {
        String::new().into()
    }
    fn lost(&self, _: &Send, _: &FinalIndex, _: &[Holder]) -> Told {
        String::new().into()
    }
    fn reordered(&self, _: &FinalIndex, _: &Placed, _: &Placed) -> Told {
        String::new().into()
    }
    fn dirty_read(
        &self,
        _: &Event,
        _: (&TopicPartition, Offset),
        _: Option<MessageId>,
        _: &FinalIndex,
    ) -> Told {
        String::new().into()
    }
    fn offline(&self, _: &PartitionFinal) -> Told {
        String::new().into()
    }
    fn unreadable(&self, _: &PartitionFinal) -> Told {
        String::new().into()
    }
    fn under_replicated(&self, _: &PartitionFinal, _: &[&ReplicaLog]) -> Told {
        String::new().into()
    }
    fn divergent(&self, _: &PartitionFinal, _: &Divergence) -> Told {
        String::new().into()
    }
    fn unprocessed(
        &self,
        _: &[Event],
        _: &[Processing],
        _: (&TopicPartition, Gap),
        _: Option<&str>,
    ) -> Told {
        String::new().into()
    }
    fn reprocessed(&self, _: &[Event], _: &[Processing], _: &Repeat) -> Told {
        String::new().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_story_is_told_in_time_order_and_cut_after_its_first_steps() {
        let step = |ms: u64, text: &str| {
            Step::new(SimTime::after_start(Duration::from_millis(ms)), text.into())
        };
        let mut steps = vec![step(20, "b"), step(10, "a"), step(10, "a")];
        assert_eq!(lines(steps.clone()), ["t=0.010s a", "t=0.020s b"]);
        steps.extend((0..STEPS_SHOWN as u64).map(|i| step(30 + i, "c")));
        let lines = lines(steps);
        assert_eq!(lines.len(), STEPS_SHOWN + 1);
        assert_eq!(
            lines[STEPS_SHOWN],
            "and 2 more steps (--trace shows every event)"
        );
    }
}
