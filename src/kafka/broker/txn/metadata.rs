//! One transactional id's state at its transaction coordinator, as plain data: Kafka's
//! `TransactionMetadata` and `TxnTransitMetadata`.
//!
//! Every change goes in three steps, as in Kafka: `prepare_*` computes the next state and
//! marks it *pending* (other requests meanwhile get CONCURRENT_TRANSACTIONS), the shell
//! appends it to `__transaction_state` with acks=all, and [`TxnMetadata::complete`] makes it
//! current once the append is replicated (or [`TxnMetadata::abandon`] drops it when the
//! append failed). The one state never written is `PrepareEpochFence`: a fence is written
//! as the PrepareAbort that follows it.

use std::collections::BTreeSet;

use crate::kafka::types::ProducerId;
use crate::types::TopicPartition;

/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// The states of Kafka's `TransactionState`, with the ids `__transaction_state` stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    /// In memory only: an ongoing transaction being fenced by an epoch bump before it is
    /// aborted (KAFKA-6119).
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The `TransactionStatus` byte of a `__transaction_state` value.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Kafka's `TransactionState.validPreviousStates`.
    pub fn may_follow(self, previous: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(previous, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => previous == Ongoing,
            // 4.0 adds the ended states: a transaction protocol v2 client aborts when it
            // cannot tell whether its transaction began, and the abort bumps the epoch.
            PrepareAbort => matches!(
                previous,
                Ongoing | PrepareEpochFence | Empty | CompleteCommit | CompleteAbort
            ),
            CompleteCommit => previous == PrepareCommit,
            CompleteAbort => previous == PrepareAbort,
            Dead => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            PrepareEpochFence => previous == Ongoing,
        }
    }

    /// A transaction ends in one of these; the id may begin another.
    pub fn is_complete(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// The values a transition writes (Kafka's `TxnTransitMetadata`): what the
/// `__transaction_state` record holds, and what the metadata becomes once it is appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnTransit {
    pub producer_id: ProducerId,
    pub last_producer_id: ProducerId,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The transaction protocol the transition was made under: 0, or 2 for v2
    /// (`ClientTransactionVersion`; the epoch is bumped when a transaction ends).
    pub client_transaction_version: i16,
}

/// `ClientTransactionVersion` of a transaction protocol v2 transition (KIP-890 part 2).
pub const TRANSACTION_VERSION_2: i16 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    /// The producer id before the last rotation (KIP-360): a retry naming it is no zombie.
    pub last_producer_id: ProducerId,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so that a retried InitProducerId whose answer was
    /// lost gets the same epoch again instead of being fenced (KIP-360).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions the ongoing transaction wrote, or the ended one's markers go to.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the first partition joined the transaction: `transaction.timeout.ms` counts
    /// from here. -1 when there is none.
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The protocol of the last transition: 2 when its epoch bumps at every end.
    pub client_transaction_version: i16,
    /// A transition appended but not yet replicated.
    pub pending: Option<TxnState>,
    /// The fencing append of a timed-out or superseded transaction failed: the next fence
    /// reuses the epoch instead of bumping it again (KAFKA-9666, 2.7).
    pub has_failed_epoch_fence: bool,
    /// The pending transition is an abort that a fence bumped the epoch for.
    fencing_abort: bool,
}

impl TxnMetadata {
    /// A transactional id seen for the first time: Empty, with a new producer id and no
    /// epoch yet (InitProducerId bumps it to 0).
    pub fn new(
        transactional_id: &str,
        producer_id: ProducerId,
        timeout_ms: i32,
        now_ms: i64,
    ) -> Self {
        let empty = TxnTransit {
            producer_id,
            last_producer_id: ProducerId::NONE,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            client_transaction_version: 0,
        };
        TxnMetadata::loaded(transactional_id, &empty)
    }

    /// The metadata a loaded record describes (a coordinator reading its partition back).
    pub fn loaded(transactional_id: &str, record: &TxnTransit) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id: record.producer_id,
            last_producer_id: record.last_producer_id,
            producer_epoch: record.producer_epoch,
            last_producer_epoch: record.last_producer_epoch,
            timeout_ms: record.timeout_ms,
            state: record.state,
            partitions: record.partitions.clone(),
            start_ms: record.start_ms,
            last_update_ms: record.last_update_ms,
            client_transaction_version: record.client_transaction_version,
            pending: None,
            has_failed_epoch_fence: false,
            fencing_abort: false,
        }
    }

    pub fn pending_transition_in_progress(&self) -> bool {
        self.pending.is_some()
    }

    fn transit(&self) -> TxnTransit {
        TxnTransit {
            producer_id: self.producer_id,
            last_producer_id: self.last_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            start_ms: self.start_ms,
            last_update_ms: self.last_update_ms,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// Kafka's `prepareTransitionTo`: one transition at a time, and only along the state
    /// graph.
    fn prepare(&mut self, transit: TxnTransit) -> TxnTransit {
        assert!(
            self.pending.is_none(),
            "{}: a transition to {} while one to {:?} is pending",
            self.transactional_id,
            transit.state.name(),
            self.pending
        );
        assert!(
            transit.state.may_follow(self.state),
            "{}: {} may not follow {}",
            self.transactional_id,
            transit.state.name(),
            self.state.name()
        );
        self.pending = Some(transit.state);
        transit
    }

    /// InitProducerId on an ended (or new) id: the next epoch. `expected_epoch` is what a
    /// KIP-360 client (2.5+) says it had: its own epoch, or the one before (a retry whose
    /// answer was lost, which gets the current epoch again). `None`: an older client,
    /// which is never fenced here.
    pub fn prepare_increment_epoch(
        &mut self,
        timeout_ms: i32,
        expected_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<TxnTransit, Fenced> {
        debug_assert!(
            self.state.is_complete(),
            "InitProducerId bumps only an ended id"
        );
        let bumped = self.producer_epoch + 1;
        let (epoch, last_epoch) = match expected_epoch {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (bumped, self.producer_epoch)
            }
            Some(e) if e == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Err(Fenced),
        };
        Ok(self.prepare(TxnTransit {
            producer_epoch: epoch,
            last_producer_epoch: last_epoch,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            ..self.transit()
        }))
    }

    /// Fence the producer of an ongoing transaction before aborting it (a newer instance's
    /// InitProducerId, or the timeout): the next epoch, in memory only.
    pub fn prepare_fence_epoch(&mut self) -> TxnTransit {
        let epoch = if self.has_failed_epoch_fence {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        };
        self.prepare(TxnTransit {
            producer_epoch: epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            state: TxnState::PrepareEpochFence,
            ..self.transit()
        })
    }

    /// AddPartitionsToTxn (or AddOffsetsToTxn's offsets partition): the transaction starts
    /// with its first partition, which starts its timeout.
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        version: i16,
        now_ms: i64,
    ) -> TxnTransit {
        let start_ms = if self.state.is_complete() {
            now_ms
        } else {
            self.start_ms
        };
        let mut partitions = self.partitions.clone();
        partitions.extend(added.iter().cloned());
        self.prepare(TxnTransit {
            state: TxnState::Ongoing,
            partitions,
            start_ms,
            last_update_ms: now_ms,
            client_transaction_version: version,
            ..self.transit()
        })
    }

    /// EndTxn: PrepareCommit or PrepareAbort, with the partitions the markers go to.
    /// Under transaction protocol v2 (`version` 2) the epoch moves on here, so the markers
    /// carry the next epoch; an abort with no partition added (v2 only) starts its clock
    /// now. Kafka's `prepareAbortOrCommit`.
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TxnState,
        version: i16,
        now_ms: i64,
    ) -> TxnTransit {
        debug_assert!(matches!(
            state,
            TxnState::PrepareCommit | TxnState::PrepareAbort
        ));
        let (producer_epoch, last_producer_epoch) = if version >= TRANSACTION_VERSION_2 {
            assert!(
                self.producer_epoch < i16::MAX - 1,
                "{}: the producer epoch is exhausted",
                self.transactional_id
            );
            (self.producer_epoch + 1, self.producer_epoch)
        } else {
            (self.producer_epoch, self.last_producer_epoch)
        };
        let no_partition_added = self.state.is_complete();
        assert!(
            !no_partition_added || version >= TRANSACTION_VERSION_2,
            "{}: only a v2 abort ends a transaction that never began",
            self.transactional_id
        );
        self.prepare(TxnTransit {
            state,
            producer_epoch,
            last_producer_epoch,
            start_ms: if no_partition_added {
                now_ms
            } else {
                self.start_ms
            },
            last_update_ms: now_ms,
            client_transaction_version: version,
            ..self.transit()
        })
    }

    /// Every marker was written: CompleteCommit or CompleteAbort, with no partitions.
    pub fn prepare_complete(&mut self, now_ms: i64) -> TxnTransit {
        let state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => panic!(
                "{}: markers completed in state {}",
                self.transactional_id,
                other.name()
            ),
        };
        self.prepare(TxnTransit {
            state,
            partitions: BTreeSet::new(),
            last_update_ms: now_ms,
            ..self.transit()
        })
    }

    /// The fence that precedes a coordinator's own abort takes effect in memory at once:
    /// the abort's PrepareAbort record carries the bumped epoch (Kafka's `endTransaction`
    /// clearing the pending PrepareEpochFence). Under transaction protocol v2 the abort
    /// makes the bump, once.
    pub fn take_fence(&mut self, epoch: i16, version: i16) {
        assert_eq!(
            self.pending,
            Some(TxnState::PrepareEpochFence),
            "{}: no fence pending",
            self.transactional_id
        );
        assert!(
            epoch >= self.producer_epoch,
            "a fence never lowers the epoch"
        );
        self.pending = None;
        self.fencing_abort = true;
        if version >= TRANSACTION_VERSION_2 {
            // The abort bumps the epoch itself (KAFKA-19367: 4.0.0 also set it here, and
            // its markers carried the epoch twice bumped; fixed in 4.0.1).
            return;
        }
        self.producer_epoch = epoch;
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
    }

    /// The append of `transit` is replicated: it is the state now (Kafka's
    /// `completeTransitionTo`, whose checks are the assertions here).
    pub fn complete(&mut self, transit: TxnTransit) {
        assert_eq!(
            self.pending,
            Some(transit.state),
            "{}: completing {} while {:?} is pending",
            self.transactional_id,
            transit.state.name(),
            self.pending
        );
        assert!(
            transit.producer_epoch >= self.producer_epoch
                || transit.producer_id != self.producer_id,
            "{}: the producer epoch moved back from {} to {}",
            self.transactional_id,
            self.producer_epoch,
            transit.producer_epoch
        );
        assert!(
            transit.state != TxnState::Ongoing
                || transit.partitions.is_superset(&self.partitions)
                || self.state.is_complete(),
            "{}: an ongoing transaction lost partitions",
            self.transactional_id
        );
        self.producer_id = transit.producer_id;
        self.last_producer_id = transit.last_producer_id;
        self.producer_epoch = transit.producer_epoch;
        self.last_producer_epoch = transit.last_producer_epoch;
        self.timeout_ms = transit.timeout_ms;
        self.state = transit.state;
        self.partitions = transit.partitions;
        self.start_ms = transit.start_ms;
        self.last_update_ms = transit.last_update_ms;
        self.pending = None;
        self.fencing_abort = false;
        self.has_failed_epoch_fence = false;
    }

    /// The append failed (not enough replicas, lost leadership): nothing changes, except
    /// that a fence's bump stays in memory; from 2.7 (`remember_failed_fence`, KAFKA-9666)
    /// the next fence reuses it instead of bumping again.
    pub fn abandon(&mut self, remember_failed_fence: bool) {
        self.pending = None;
        if self.fencing_abort && remember_failed_fence {
            self.has_failed_epoch_fence = true;
        }
        self.fencing_abort = false;
    }
}

/// A KIP-360 InitProducerId named an epoch that is neither the current nor the previous
/// one: a zombie (PRODUCER_FENCED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fenced;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_ids_are_kafkas_and_round_trip() {
        let ids: Vec<i8> = TxnState::ALL.iter().map(|s| s.id()).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6, 7]);
        for state in TxnState::ALL {
            assert_eq!(TxnState::from_id(state.id()), Some(state));
        }
        assert_eq!(TxnState::from_id(8), None);
    }

    /// Kafka's `validPreviousStates`, as a table: which state may follow which.
    #[test]
    fn the_state_graph_is_kafka_4_0_s() {
        use TxnState::*;
        let edges: Vec<(TxnState, TxnState)> = TxnState::ALL
            .iter()
            .flat_map(|to| TxnState::ALL.iter().map(move |from| (*from, *to)))
            .filter(|(from, to)| to.may_follow(*from))
            .collect();
        let expected = [
            (Empty, Empty),
            (CompleteCommit, Empty),
            (CompleteAbort, Empty),
            (Empty, Ongoing),
            (Ongoing, Ongoing),
            (CompleteCommit, Ongoing),
            (CompleteAbort, Ongoing),
            (Ongoing, PrepareCommit),
            (Ongoing, PrepareAbort),
            (PrepareEpochFence, PrepareAbort),
            (Empty, PrepareAbort),
            (CompleteCommit, PrepareAbort),
            (CompleteAbort, PrepareAbort),
            (PrepareCommit, CompleteCommit),
            (PrepareAbort, CompleteAbort),
            (Empty, Dead),
            (CompleteCommit, Dead),
            (CompleteAbort, Dead),
            (Ongoing, PrepareEpochFence),
        ];
        assert_eq!(edges.len(), expected.len());
        for edge in expected {
            assert!(edges.contains(&edge), "{edge:?}");
        }
    }

    #[test]
    #[should_panic(expected = "is pending")]
    fn one_transition_at_a_time() {
        let mut meta = TxnMetadata::new("t", ProducerId(1), 1_000, 0);
        meta.prepare_increment_epoch(1_000, None, 0).unwrap();
        meta.prepare_increment_epoch(1_000, None, 0).unwrap();
    }

    #[test]
    #[should_panic(expected = "may not follow")]
    fn transitions_follow_the_graph() {
        let mut meta = TxnMetadata::new("t", ProducerId(1), 1_000, 0);
        meta.prepare_abort_or_commit(TxnState::PrepareCommit, TRANSACTION_VERSION_2, 0);
    }

    #[test]
    #[should_panic(expected = "only a v2 abort")]
    fn before_v2_nothing_ends_a_transaction_that_never_began() {
        let mut meta = TxnMetadata::new("t", ProducerId(1), 1_000, 0);
        meta.prepare_abort_or_commit(TxnState::PrepareAbort, 0, 0);
    }
}
