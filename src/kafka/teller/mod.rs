//! Kafka's teller: the checkers' examples told in Kafka's words, from the facts Kafka's
//! programs recorded (who acknowledged a write and what it knew then, the fault that
//! struck, who was elected with what log, who truncated what, which batches a producer
//! sent again, what moved a group's position).

mod describe;
mod groups;
mod story;

use crate::check::tell::{Teller as Tell, Told};
use crate::check::{
    Divergence, FinalIndex, Gap, Holder, Located, Placed, Processing, Repeat, Send,
};
use crate::history::facts::FactLog;
use crate::history::final_state::{PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::{Event, MessageId};
use crate::types::{Offset, TopicPartition};
use story::Chronicle;

/// Tells one run's examples from its facts.
pub struct Teller<'a> {
    facts: &'a FactLog,
    chronicle: Chronicle<'a>,
}

impl<'a> Teller<'a> {
    pub fn new(facts: &'a FactLog) -> Teller<'a> {
        Teller {
            facts,
            chronicle: Chronicle::new(facts),
        }
    }

    fn groups<'t, 'p>(
        &'t self,
        history: &'t [Event],
        processings: &'p [Processing<'t>],
    ) -> groups::Teller<'t, 'p> {
        groups::Teller {
            history,
            chronicle: &self.chronicle,
            facts: self.facts.events(),
            processings,
        }
    }
}

impl Tell for Teller<'_> {
    fn never_sent(&self, index: &FinalIndex, located: &Located) -> Told {
        describe::never_sent(index, located).into()
    }

    fn corrupt(&self, index: &FinalIndex, part: usize, record: &ReadRecord) -> Told {
        describe::corrupt(index, part, record).into()
    }

    fn send_status(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told {
        describe::send_status(send, index, copies, &self.chronicle)
    }

    fn duplicate(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told {
        describe::duplicate(send, index, copies, &self.chronicle)
    }

    fn moved(&self, send: &Send, index: &FinalIndex, copies: &[Located]) -> Told {
        describe::moved(send, index, copies, &self.chronicle)
    }

    fn lost(&self, send: &Send, index: &FinalIndex, holders: &[Holder]) -> Told {
        describe::lost(send, index, holders, &self.chronicle)
    }

    fn reordered(&self, index: &FinalIndex, earlier: &Placed, later: &Placed) -> Told {
        describe::reordered(index, earlier, later, &self.chronicle)
    }

    fn dirty_read(
        &self,
        event: &Event,
        at: (&TopicPartition, Offset),
        id: Option<MessageId>,
        index: &FinalIndex,
    ) -> Told {
        describe::dirty_read(event, at, id, index, &self.chronicle)
    }

    fn offline(&self, partition: &PartitionFinal) -> Told {
        describe::offline(partition, self.facts.events()).into()
    }

    fn unreadable(&self, partition: &PartitionFinal) -> Told {
        describe::unreadable(partition).into()
    }

    fn under_replicated(&self, partition: &PartitionFinal, out: &[&ReplicaLog]) -> Told {
        describe::under_replicated(partition, out, self.facts.events()).into()
    }

    fn divergent(&self, partition: &PartitionFinal, divergence: &Divergence) -> Told {
        describe::divergent(partition, divergence, &self.chronicle)
    }

    fn unprocessed(
        &self,
        history: &[Event],
        processings: &[Processing],
        (tp, gap): (&TopicPartition, Gap),
        behind: Option<&str>,
    ) -> Told {
        self.groups(history, processings)
            .unprocessed(tp, gap, behind)
    }

    fn reprocessed(&self, history: &[Event], processings: &[Processing], repeat: &Repeat) -> Told {
        self.groups(history, processings).reprocessed(repeat)
    }
}
