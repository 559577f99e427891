//! Transactions, from the history's transaction outcomes and the read_committed final read:
//! a committed transaction is all visible, an aborted one not at all, and no partition is
//! left with a transaction open (its LSO below its HW) when the heal phase ends.

use super::final_read::{FinalIndex, Located};
use super::sends::Send;
use crate::history::final_state::{FinalState, PartitionFinal};
use crate::history::{Event, MessageId, Op, TxnOutcome};

/// One transaction of a transactional producer: its sends `first..=last`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub first: MessageId,
    pub last: MessageId,
    pub outcome: TxnOutcome,
    /// Sends of it in the final read, and sends of it absent from partitions read
    /// completely.
    pub present: u64,
    pub absent: u64,
}

/// Every transaction the history ended, by first id.
#[derive(Debug, Default)]
pub struct Txns {
    list: Vec<Txn>,
}

impl Txns {
    pub fn new(history: &[Event]) -> Txns {
        let mut list: Vec<Txn> = history
            .iter()
            .filter_map(|event| match &event.op {
                Op::Txn {
                    first,
                    last,
                    outcome,
                    ..
                } => {
                    debug_assert!(first.producer == last.producer && first.seq <= last.seq);
                    Some(Txn {
                        first: *first,
                        last: *last,
                        outcome: *outcome,
                        present: 0,
                        absent: 0,
                    })
                }
                _ => None,
            })
            .collect();
        list.sort_by_key(|t| t.first);
        debug_assert!(
            list.windows(2).all(|w| w[0].last < w[1].first),
            "transactions of one producer do not overlap"
        );
        Txns { list }
    }

    /// The index of the transaction `id` was sent in, if any.
    fn index_of(&self, id: MessageId) -> Option<usize> {
        let i = self
            .list
            .partition_point(|t| t.first <= id)
            .checked_sub(1)?;
        (self.list[i].last >= id && self.list[i].first.producer == id.producer).then_some(i)
    }

    pub fn outcome_of(&self, id: MessageId) -> Option<TxnOutcome> {
        self.index_of(id).map(|i| self.list[i].outcome)
    }

    /// A send and its copies in the final read: count its transaction's visibility.
    /// `read_whole`: whether the final read read the send's partition completely.
    pub fn saw(&mut self, send: &Send, copies: &[Located], read_whole: bool) {
        let Some(i) = self.index_of(send.id) else {
            return;
        };
        let txn = &mut self.list[i];
        if !copies.is_empty() {
            txn.present += 1;
        } else if read_whole {
            txn.absent += 1;
        }
    }

    pub fn tally(&self, outcome: TxnOutcome) -> u64 {
        self.list.iter().filter(|t| t.outcome == outcome).count() as u64
    }

    /// Committed (or unknown) transactions partly in the final read.
    pub fn torn(&self) -> impl Iterator<Item = &Txn> {
        self.list
            .iter()
            .filter(|t| t.outcome != TxnOutcome::Aborted && t.present > 0 && t.absent > 0)
    }
}

/// Read events of records of aborted transactions: what a consumer saw during the run
/// that was never committed.
pub fn aborted_reads_during_run<'a>(
    history: &'a [Event],
    txns: &'a Txns,
) -> impl Iterator<Item = &'a Event> {
    history.iter().filter(|event| match &event.op {
        Op::Read { id: Some(id), .. } => txns.outcome_of(*id) == Some(TxnOutcome::Aborted),
        _ => false,
    })
}

/// Partitions whose read_committed final read stopped at an LSO below the HW: a
/// transaction was still open there when the heal phase ended.
pub fn hanging(final_state: &FinalState) -> impl Iterator<Item = &PartitionFinal> {
    final_state.every_partition().filter(|p| {
        p.last_stable_offset
            .is_some_and(|lso| lso < p.high_watermark)
    })
}

/// `producer-1:000120..000129`
pub fn range(txn: &Txn) -> String {
    format!("{}..{:06}", txn.first, txn.last.seq)
}

impl Txns {
    /// Whose transaction holds a hanging partition's LSO, from the record at the LSO in
    /// the read past it: ` (from producer-1:000051, of transaction producer-1:000050..000059,
    /// which its producer aborted, yet no marker ended here)`; empty without that read.
    pub fn holding_lso(&self, partition: &PartitionFinal) -> String {
        let first = partition
            .beyond_lso
            .as_ref()
            .and_then(|records| records.first())
            .and_then(|record| record.id);
        let Some(id) = first else {
            return String::new();
        };
        match self.index_of(id).map(|i| &self.list[i]) {
            Some(txn) => {
                let told = match txn.outcome {
                    TxnOutcome::Committed => {
                        "which its producer committed, yet no marker ended here"
                    }
                    TxnOutcome::Aborted => "which its producer aborted, yet no marker ended here",
                    TxnOutcome::Unknown => "whose end its producer never learned",
                };
                format!(" (from {id}, of transaction {}, {told})", range(txn))
            }
            None => format!(" (from {id})"),
        }
    }

    /// The example of a record of an aborted transaction in the final read.
    pub fn aborted_example(&self, id: MessageId, index: &FinalIndex, copy: &Located) -> String {
        let txn = self
            .index_of(id)
            .map(|i| range(&self.list[i]))
            .unwrap_or_default();
        format!(
            "{id} of aborted transaction {txn} is in the read_committed final read at {}@{}",
            index.partition(copy.part).tp,
            copy.offset.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::clock::SimTime;
    use std::sync::Arc;

    fn id(producer: u32, seq: u32) -> MessageId {
        MessageId { producer, seq }
    }

    fn txn(first: MessageId, last: MessageId, outcome: TxnOutcome) -> Event {
        Event {
            time: SimTime::after_start(std::time::Duration::ZERO),
            process: Arc::from("producer-1"),
            op: Op::Txn {
                first,
                last,
                outcome,
                error: None,
            },
        }
    }

    #[test]
    fn a_send_finds_its_transaction_and_no_other_producer_s() {
        let history = [
            txn(id(1, 0), id(1, 9), TxnOutcome::Committed),
            txn(id(1, 10), id(1, 19), TxnOutcome::Aborted),
            txn(id(2, 5), id(2, 9), TxnOutcome::Unknown),
        ];
        let txns = Txns::new(&history);
        assert_eq!(txns.outcome_of(id(1, 0)), Some(TxnOutcome::Committed));
        assert_eq!(txns.outcome_of(id(1, 9)), Some(TxnOutcome::Committed));
        assert_eq!(txns.outcome_of(id(1, 10)), Some(TxnOutcome::Aborted));
        assert_eq!(txns.outcome_of(id(1, 20)), None);
        assert_eq!(txns.outcome_of(id(2, 4)), None);
        assert_eq!(txns.outcome_of(id(2, 9)), Some(TxnOutcome::Unknown));
        assert_eq!(txns.tally(TxnOutcome::Aborted), 1);
    }
}
