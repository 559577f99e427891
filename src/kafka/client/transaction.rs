//! The transactional producer's client side (`transactional.id`), as plain data: the subset
//! of Kafka's `TransactionManager` (clients/.../producer/internals, 3.9) a producer needs to
//! begin, fill, commit and abort transactions against the transaction coordinator.
//!
//! The application drives it (`initialize`, `begin`, `add_partition`, `send_offsets`,
//! `begin_commit`, `begin_abort`); the producer's shell asks it which request to send next
//! ([`TransactionManager::next_request`]: one in flight at a time, in Kafka's priority
//! order), sends it to the coordinator and feeds the answer back
//! ([`TransactionManager::on_answer`]). Failed batches go through
//! [`TransactionManager::on_batch_failed`], Kafka's `maybeTransitionToErrorState`.
//!
//! What follows the release ([`TxnRules`]): from 2.5 (KIP-360) an abortable error asks for an
//! epoch bump after the abort (InitProducerId with the held id and epoch), which restarts
//! every partition's sequence; before, a batch whose outcome is unknown is fatal ("the client
//! hasn't received acknowledgment for some previously sent messages and can no longer retry
//! them"). From 2.7 (KIP-588) INVALID_PRODUCER_EPOCH on a produce is abortable; before, it
//! was `ProducerFencedException`, fatal. Under transaction protocol v2 (4.0, KIP-890 part
//! 2) the client sends no AddPartitionsToTxn (a partition's leader adds it) and no
//! AddOffsetsToTxn (the group coordinator adds its partition), every EndTxn answer
//! carries the epoch the end bumped to, which restarts every partition's sequence, and
//! an abortable error needs no InitProducerId after the abort: the abort bumps the epoch.

use crate::kafka::protocol::messages::ErrorCode;
use crate::kafka::record::TxnResult;
use crate::kafka::types::ProducerId;
use crate::types::{BrokerId, TopicPartition};
use std::collections::BTreeSet;
use std::time::Duration;

/// Kafka's `TransactionManager.State`, less 4.1's PREPARED_TRANSACTION (2PC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    Uninitialized,
    Initializing,
    Ready,
    InTransaction,
    CommittingTransaction,
    AbortingTransaction,
    AbortableError,
    FatalError,
}

/// The client's transaction rules of a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnRules {
    /// KIP-360 (2.5): bump the epoch after an abortable error instead of giving up.
    pub bump_epoch: bool,
    /// KIP-588 (2.7): a produce's INVALID_PRODUCER_EPOCH is abortable, not fatal.
    pub invalid_epoch_abortable: bool,
    /// Transaction protocol v2 (4.0): the cluster's `transaction.version` is 2.
    pub v2: bool,
}

impl TxnRules {
    /// Kafka's `canHandleAbortableError`: an abortable error can be recovered from by an
    /// epoch bump, the client's (2.5) or the abort's own (v2).
    fn can_handle_abortable(self) -> bool {
        self.bump_epoch || self.v2
    }

    /// Kafka's `needToTriggerEpochBumpFromClient`: the bump is the client's InitProducerId.
    fn bump_from_client(self) -> bool {
        self.bump_epoch && !self.v2
    }
}

/// A request the transaction manager wants sent, in Kafka's priority order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnRequest {
    /// FindCoordinator(TRANSACTION), to any broker.
    FindCoordinator,
    /// InitProducerId; `expected` is KIP-360's bump of the held id and epoch.
    InitProducerId {
        expected: Option<(ProducerId, i16)>,
    },
    AddPartitions(Vec<TopicPartition>),
    /// AddOffsetsToTxn: the group's offsets partition joins the transaction.
    AddOffsets(String),
    /// FindCoordinator(GROUP), to any broker: where the TxnOffsetCommit goes.
    FindGroupCoordinator(String),
    /// TxnOffsetCommit of the offsets `sendOffsetsToTransaction` was given, to the group's
    /// coordinator (the shell holds the offsets).
    TxnOffsetCommit(BrokerId),
    EndTxn(TxnResult),
}

impl TxnRequest {
    /// Whether the request goes to the transaction coordinator (and so needs it found).
    fn to_txn_coordinator(&self) -> bool {
        !matches!(
            self,
            TxnRequest::FindCoordinator
                | TxnRequest::FindGroupCoordinator(_)
                | TxnRequest::TxnOffsetCommit(_)
        )
    }
}

/// Where `sendOffsetsToTransaction` is: AddOffsetsToTxn, then TxnOffsetCommit to the
/// group's coordinator (found first), then done.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingOffsets {
    group: String,
    added: bool,
    group_coordinator: Option<BrokerId>,
}

/// What came back for a [`TxnRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnAnswer {
    Coordinator(BrokerId),
    ProducerId(ProducerId, i16),
    /// An answer without data: `None` is success.
    Error(Option<ErrorCode>),
    /// No answer: a timeout, a disconnect, a broker that could not be reached.
    Lost,
}

/// A failed batch, as the transaction manager classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchFailure {
    /// The broker refused it with this error (nothing written).
    Refused(Option<ErrorCode>),
    /// It expired or its answer never came: it may have been written.
    Unknown,
}

/// Why the transaction cannot go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnError {
    pub reason: String,
    pub fatal: bool,
}

#[derive(Debug)]
pub struct TransactionManager {
    rules: TxnRules,
    state: TxnState,
    identity: Option<(ProducerId, i16)>,
    coordinator: Option<BrokerId>,
    /// Partitions AddPartitionsToTxn accepted for the open transaction.
    partitions: BTreeSet<TopicPartition>,
    /// Partitions written in the open transaction and not yet added.
    pending: BTreeSet<TopicPartition>,
    /// The request sent and not yet answered.
    in_flight: Option<TxnRequest>,
    epoch_bump_required: bool,
    /// Whether a partition was added (Kafka's `transactionStarted`): only then is there a
    /// transaction for EndTxn to end.
    started: bool,
    /// Whether an EndTxn(COMMIT) of the transaction was sent and no EndTxn answer ended
    /// it: the transaction may have committed, whatever follows (an abort that skips
    /// EndTxn, for a producer id the coordinator no longer knows, confirms nothing).
    commit_sent: bool,
    error: Option<TxnError>,
    /// The coordinator does not know the held producer id (INVALID_PRODUCER_ID_MAPPING):
    /// it would refuse an EndTxn too, so the abort skips it and goes straight to
    /// InitProducerId (`beginCompletingTransaction`).
    unknown_producer_id: bool,
    /// Offsets sent to the open transaction and not yet committed to it (Kafka's
    /// `pendingTxnOffsetCommits`), while `sendOffsetsToTransaction` waits.
    offsets: Option<PendingOffsets>,
}

/// How long to wait before the next request, after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    None,
    /// `retry.backoff.ms`: the request is retried.
    RetryBackoff,
    Fixed(Duration),
}

/// AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS while it is the transaction's first:
/// the previous transaction's markers are about to complete (`TransactionManager`'s
/// `ADD_PARTITIONS_RETRY_BACKOFF_MS`).
pub const ADD_PARTITIONS_RETRY_BACKOFF: Wait = Wait::Fixed(Duration::from_millis(20));

impl TransactionManager {
    pub fn new(rules: TxnRules) -> TransactionManager {
        TransactionManager {
            rules,
            state: TxnState::Uninitialized,
            identity: None,
            coordinator: None,
            partitions: BTreeSet::new(),
            pending: BTreeSet::new(),
            in_flight: None,
            epoch_bump_required: false,
            started: false,
            commit_sent: false,
            error: None,
            unknown_producer_id: false,
            offsets: None,
        }
    }

    pub fn state(&self) -> TxnState {
        self.state
    }

    /// The producer id and epoch batches are stamped with.
    pub fn identity(&self) -> Option<(ProducerId, i16)> {
        self.identity
    }

    pub fn coordinator(&self) -> Option<BrokerId> {
        self.coordinator
    }

    pub fn error(&self) -> Option<&TxnError> {
        self.error.as_ref()
    }

    /// Whether an EndTxn(COMMIT) of the open transaction has been sent.
    pub fn commit_sent(&self) -> bool {
        self.commit_sent
    }

    /// `initTransactions`.
    pub fn initialize(&mut self) {
        assert_eq!(
            self.state,
            TxnState::Uninitialized,
            "initTransactions twice"
        );
        self.transition(TxnState::Initializing);
    }

    /// `beginTransaction`.
    pub fn begin(&mut self) {
        assert_eq!(
            self.state,
            TxnState::Ready,
            "beginTransaction outside READY"
        );
        debug_assert!(self.partitions.is_empty() && self.pending.is_empty() && !self.started);
        self.commit_sent = false;
        self.transition(TxnState::InTransaction);
    }

    /// Why a send must fail at once, without reaching the accumulator: the transaction
    /// already failed (Kafka's `maybeFailWithError`, which `send` calls first). The
    /// application learns it from the send, and again from its commit or abort.
    pub fn send_error(&self) -> Option<TxnError> {
        matches!(self.state, TxnState::AbortableError | TxnState::FatalError)
            .then(|| self.failure())
    }

    /// A send to `tp` inside the open transaction (Kafka's `maybeAddPartition`). Under v2
    /// the partition is in the transaction at once: its leader adds it.
    pub fn add_partition(&mut self, tp: &TopicPartition) {
        assert_eq!(
            self.state,
            TxnState::InTransaction,
            "a transactional send outside a transaction"
        );
        if self.rules.v2 {
            self.partitions.insert(tp.clone());
            self.started = true;
        } else if !self.partitions.contains(tp) {
            self.pending.insert(tp.clone());
        }
    }

    /// `sendOffsetsToTransaction`: the group's offsets join the transaction, and commit
    /// with it. The application waits for [`TransactionManager::offsets_pending`] to end.
    pub fn send_offsets(&mut self, group: &str) {
        assert_eq!(
            self.state,
            TxnState::InTransaction,
            "sendOffsetsToTransaction outside a transaction"
        );
        assert!(self.offsets.is_none(), "offsets already on their way");
        // Under v2 the TxnOffsetCommit goes first: the group coordinator adds its partition.
        self.offsets = Some(PendingOffsets {
            group: group.to_owned(),
            added: self.rules.v2,
            group_coordinator: None,
        });
        self.started |= self.rules.v2;
    }

    /// Whether offsets sent to the transaction still wait for TxnOffsetCommit's answer
    /// (while the transaction has not failed).
    pub fn offsets_pending(&self) -> bool {
        self.offsets.is_some() && self.state == TxnState::InTransaction
    }

    /// Whether batches for `tp` may be sent now: the coordinator added the partition
    /// (`isSendToPartitionAllowed`), and the transaction has not failed.
    /// After an abortable error the batches already sent go on with their retries, which
    /// the abort waits for.
    pub fn may_send_to(&self, tp: &TopicPartition) -> bool {
        self.state != TxnState::FatalError && self.partitions.contains(tp)
    }

    /// Whether batches not yet sent are to be dropped (`abortUndrainedBatches`): the
    /// transaction failed or is aborting.
    pub fn aborts_undrained(&self) -> bool {
        matches!(
            self.state,
            TxnState::AbortableError | TxnState::AbortingTransaction | TxnState::FatalError
        )
    }

    pub fn rules(&self) -> TxnRules {
        self.rules
    }

    /// `commitTransaction`: `Err` if the transaction already failed (the application
    /// aborts an abortable one).
    pub fn begin_commit(&mut self) -> Result<(), TxnError> {
        match self.state {
            TxnState::InTransaction => {
                self.transition(TxnState::CommittingTransaction);
                Ok(())
            }
            TxnState::AbortableError | TxnState::FatalError => Err(self.failure()),
            state => panic!("commitTransaction in {state:?}"),
        }
    }

    /// `abortTransaction`: partitions not yet added are dropped with their batches (the
    /// shell fails those locally).
    pub fn begin_abort(&mut self) -> Result<(), TxnError> {
        match self.state {
            TxnState::InTransaction | TxnState::AbortableError => {
                self.pending.clear();
                self.transition(TxnState::AbortingTransaction);
                Ok(())
            }
            TxnState::FatalError => Err(self.failure()),
            state => panic!("abortTransaction in {state:?}"),
        }
    }

    /// Why the transaction failed, as `commitTransaction` or `abortTransaction` throws it.
    pub fn failure(&self) -> TxnError {
        self.error.clone().unwrap_or_else(|| TxnError {
            reason: "transaction failed".to_owned(),
            fatal: self.state == TxnState::FatalError,
        })
    }

    /// The next request to send, if one is due and none is in flight. `batches_unresolved`:
    /// whether batches of the transaction are still queued or in flight; EndTxn waits for
    /// them. A commit or abort with nothing added completes here, without a request.
    pub fn next_request(&mut self, batches_unresolved: bool) -> Option<TxnRequest> {
        if self.in_flight.is_some() {
            return None;
        }
        let request = match self.state {
            TxnState::Initializing => TxnRequest::InitProducerId {
                expected: self.epoch_bump_required.then_some(self.identity).flatten(),
            },
            TxnState::InTransaction | TxnState::CommittingTransaction
                if !self.pending.is_empty() =>
            {
                TxnRequest::AddPartitions(self.pending.iter().cloned().collect())
            }
            TxnState::InTransaction => match &self.offsets {
                None => return None,
                Some(offsets) if !offsets.added => TxnRequest::AddOffsets(offsets.group.clone()),
                Some(offsets) => match offsets.group_coordinator {
                    None => TxnRequest::FindGroupCoordinator(offsets.group.clone()),
                    Some(broker) => TxnRequest::TxnOffsetCommit(broker),
                },
            },
            TxnState::CommittingTransaction | TxnState::AbortingTransaction => {
                if batches_unresolved {
                    return None;
                }
                let result = if self.state == TxnState::CommittingTransaction {
                    TxnResult::Commit
                } else {
                    TxnResult::Abort
                };
                if !self.started
                    || (self.state == TxnState::AbortingTransaction && self.unknown_producer_id)
                {
                    // Ends here; after an abortable error, the epoch bump is next.
                    self.complete_transaction();
                    return self.next_request(batches_unresolved);
                }
                TxnRequest::EndTxn(result)
            }
            _ => return None,
        };
        let request = if self.coordinator.is_none() && request.to_txn_coordinator() {
            TxnRequest::FindCoordinator
        } else {
            request
        };
        if request == TxnRequest::EndTxn(TxnResult::Commit) {
            self.commit_sent = true;
        }
        self.in_flight = Some(request.clone());
        Some(request)
    }

    /// The answer to the request in flight; returns how long to wait before the next.
    pub fn on_answer(&mut self, answer: TxnAnswer) -> Wait {
        let request = self
            .in_flight
            .take()
            .expect("an answer to a request in flight");
        let retry = Wait::RetryBackoff;
        let backoff = match (&request, answer) {
            (TxnRequest::FindCoordinator, TxnAnswer::Coordinator(broker)) => {
                self.coordinator = Some(broker);
                Wait::None
            }
            (TxnRequest::FindGroupCoordinator(_), TxnAnswer::Coordinator(broker)) => {
                if let Some(offsets) = self.offsets.as_mut() {
                    offsets.group_coordinator = Some(broker);
                }
                Wait::None
            }
            (TxnRequest::TxnOffsetCommit(_), TxnAnswer::Lost) => {
                self.forget_group_coordinator();
                retry
            }
            (_, TxnAnswer::Lost) => {
                // Kafka's handlers look the coordinator up again on a disconnect or timeout.
                self.coordinator = None;
                retry
            }
            (TxnRequest::FindCoordinator | TxnRequest::FindGroupCoordinator(_), _) => retry,
            (TxnRequest::InitProducerId { .. }, TxnAnswer::ProducerId(id, epoch)) => {
                if let Some((held, old)) = self.identity.filter(|_| self.epoch_bump_required) {
                    debug_assert!(
                        held == id && epoch > old,
                        "a bump of {held:?}/{old} answered {id:?}/{epoch}"
                    );
                }
                self.identity = Some((id, epoch));
                self.epoch_bump_required = false;
                self.transition(TxnState::Ready);
                Wait::None
            }
            (TxnRequest::InitProducerId { .. }, TxnAnswer::Error(error)) => {
                self.on_error(&request, error)
            }
            (TxnRequest::AddPartitions(added), TxnAnswer::Error(None)) => {
                for tp in added {
                    self.pending.remove(tp);
                    self.partitions.insert(tp.clone());
                }
                self.started = true;
                Wait::None
            }
            (
                TxnRequest::AddPartitions(_),
                TxnAnswer::Error(Some(ErrorCode::ConcurrentTransactions)),
            ) if !self.started => ADD_PARTITIONS_RETRY_BACKOFF,
            (TxnRequest::AddOffsets(_), TxnAnswer::Error(None)) => {
                if let Some(offsets) = self.offsets.as_mut() {
                    offsets.added = true;
                }
                self.started = true;
                Wait::None
            }
            (TxnRequest::TxnOffsetCommit(_), TxnAnswer::Error(None)) => {
                self.offsets = None;
                Wait::None
            }
            (TxnRequest::TxnOffsetCommit(_), TxnAnswer::Error(Some(error))) => {
                self.txn_offset_commit_failed(error)
            }
            (TxnRequest::EndTxn(_), TxnAnswer::Error(None)) => {
                // The coordinator says how it ended: an abort it answered did abort.
                self.commit_sent = false;
                self.complete_transaction();
                Wait::None
            }
            (TxnRequest::EndTxn(_), TxnAnswer::ProducerId(id, epoch)) => {
                // v2: the end bumped the epoch; the next transaction runs at it.
                assert!(self.rules.v2, "EndTxn answered an epoch before v2");
                if let Some((held, old)) = self.identity {
                    assert!(
                        held == id && epoch > old,
                        "an end of {held:?}/{old} answered {id:?}/{epoch}"
                    );
                }
                self.identity = Some((id, epoch));
                self.commit_sent = false;
                self.complete_transaction();
                Wait::None
            }
            (_, TxnAnswer::Error(error)) => self.on_error(&request, error),
            (request, answer) => panic!("{answer:?} does not answer {request:?}"),
        };
        backoff
    }

    /// A request's error, as Kafka's handlers read it (3.9): retriable ones retry after
    /// `retry.backoff.ms`, fencing is fatal, the rest abortable.
    fn on_error(&mut self, request: &TxnRequest, error: Option<ErrorCode>) -> Wait {
        let Some(error) = error else {
            panic!("{request:?} answered without error and without data");
        };
        match error {
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress => {
                if error != ErrorCode::CoordinatorLoadInProgress {
                    self.coordinator = None;
                }
                Wait::RetryBackoff
            }
            ErrorCode::ConcurrentTransactions | ErrorCode::RequestTimedOut => Wait::RetryBackoff,
            ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerEpoch
            | ErrorCode::InvalidTxnState
            | ErrorCode::InvalidTransactionTimeout
            | ErrorCode::TransactionCoordinatorFenced => {
                self.fail_request(error.name(), true);
                Wait::None
            }
            ErrorCode::InvalidProducerIdMapping if self.rules.bump_from_client() => {
                self.epoch_bump_required = true;
                self.unknown_producer_id = true;
                self.fail_request(error.name(), false);
                Wait::None
            }
            ErrorCode::InvalidProducerIdMapping => {
                self.fail_request(error.name(), true);
                Wait::None
            }
            other => {
                let fatal = !matches!(request, TxnRequest::AddPartitions(_));
                self.fail_request(other.name(), fatal);
                Wait::None
            }
        }
    }

    /// TxnOffsetCommit's error, as Kafka's `TxnOffsetCommitHandler` (3.9) reads it: the
    /// group's coordinator moved, look it up again; retriable, retry; the group moved on
    /// to another generation (KIP-447), abortable (`CommitFailedException`); fenced, fatal;
    /// anything else, fatal.
    fn txn_offset_commit_failed(&mut self, error: ErrorCode) -> Wait {
        match error {
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::RequestTimedOut => {
                self.forget_group_coordinator();
                Wait::RetryBackoff
            }
            // Kafka's other RetriableExceptions; the last two come from a v2 group
            // coordinator adding its partition to a transaction being ended.
            ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::ConcurrentTransactions
            | ErrorCode::NotEnoughReplicas => Wait::RetryBackoff,
            ErrorCode::UnknownMemberId | ErrorCode::IllegalGeneration => {
                let reason = format!(
                    "CommitFailedException: transaction offset commit failed due to consumer group metadata mismatch: {}",
                    error.name()
                );
                self.fail(&reason, false);
                Wait::None
            }
            ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => {
                self.fail(ErrorCode::ProducerFenced.name(), true);
                Wait::None
            }
            other => {
                self.fail(other.name(), true);
                Wait::None
            }
        }
    }

    fn forget_group_coordinator(&mut self) {
        if let Some(offsets) = self.offsets.as_mut() {
            offsets.group_coordinator = None;
        }
    }

    /// A batch of the transaction failed (`maybeTransitionToErrorState`, and before 2.5 the
    /// unresolved-sequence check of `TransactionManager`).
    /// `reason`: what the producer was told about the batch.
    pub fn on_batch_failed(&mut self, failure: BatchFailure, reason: &str) {
        let fatal = match failure {
            BatchFailure::Refused(Some(ErrorCode::ProducerFenced)) => true,
            BatchFailure::Refused(Some(ErrorCode::InvalidProducerEpoch)) => {
                !self.rules.invalid_epoch_abortable
            }
            BatchFailure::Unknown => !self.rules.can_handle_abortable(),
            BatchFailure::Refused(_) => false,
        };
        let reason = match failure {
            BatchFailure::Unknown if fatal => format!(
                "{reason}: the client hasn't received acknowledgment for some previously sent messages and can no longer retry them"
            ),
            _ => reason.to_owned(),
        };
        if !fatal && self.rules.bump_from_client() && self.state != TxnState::AbortingTransaction {
            self.epoch_bump_required = true;
        }
        self.fail(&reason, fatal);
    }

    /// A request's abortable error while the transaction aborts has nowhere to go: Kafka's
    /// ABORTING_TRANSACTION -> ABORTABLE_ERROR is no valid transition, which poisons the
    /// manager to FATAL_ERROR (3.6+), and retrying the request would repeat the answer.
    fn fail_request(&mut self, reason: &str, fatal: bool) {
        let aborting = self.state == TxnState::AbortingTransaction;
        if aborting && !fatal && self.unknown_producer_id {
            // Skipped by the next `next_request`: the abort goes on to InitProducerId.
            return;
        }
        self.fail(reason, fatal || aborting);
    }

    fn fail(&mut self, reason: &str, fatal: bool) {
        if self.state == TxnState::FatalError {
            return;
        }
        let fatal = fatal || matches!(self.state, TxnState::Initializing);
        if !fatal && self.state == TxnState::AbortingTransaction {
            // `transitionToAbortableError` skips it: the abort is already under way, and
            // its batches' failures change nothing.
            return;
        }
        self.error = Some(TxnError {
            reason: reason.to_owned(),
            fatal,
        });
        self.transition(if fatal {
            TxnState::FatalError
        } else {
            TxnState::AbortableError
        });
    }

    /// The transaction ended (EndTxn answered, or nothing to end): ready for the next,
    /// or, after an abortable error from 2.5, bump the epoch first.
    fn complete_transaction(&mut self) {
        self.partitions.clear();
        self.pending.clear();
        self.started = false;
        self.error = None;
        self.unknown_producer_id = false;
        self.offsets = None;
        if self.epoch_bump_required {
            self.transition(TxnState::Initializing);
        } else {
            self.transition(TxnState::Ready);
        }
    }

    /// Kafka's `isTransitionValid` (3.9): an invalid transition is a bug here.
    fn transition(&mut self, to: TxnState) {
        use TxnState::*;
        let from = self.state;
        let valid = match to {
            Uninitialized => false,
            Initializing => matches!(from, Uninitialized | AbortingTransaction),
            Ready => matches!(
                from,
                Initializing | CommittingTransaction | AbortingTransaction
            ),
            InTransaction => from == Ready,
            CommittingTransaction => from == InTransaction,
            AbortingTransaction => matches!(from, InTransaction | AbortableError),
            AbortableError => {
                matches!(from, InTransaction | CommittingTransaction | AbortableError)
            }
            FatalError => true,
        };
        assert!(valid, "invalid transaction transition {from:?} -> {to:?}");
        self.state = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KAFKA_3_9: TxnRules = TxnRules {
        bump_epoch: true,
        invalid_epoch_abortable: true,
        v2: false,
    };
    const KAFKA_4_0: TxnRules = TxnRules {
        v2: true,
        ..KAFKA_3_9
    };
    const KAFKA_2_4: TxnRules = TxnRules {
        bump_epoch: false,
        invalid_epoch_abortable: false,
        v2: false,
    };

    fn tp(partition: u32) -> TopicPartition {
        TopicPartition::new("out", partition)
    }

    /// A manager past initTransactions with producer id 7, epoch 0, coordinator broker 2.
    fn ready(rules: TxnRules) -> TransactionManager {
        let mut tm = TransactionManager::new(rules);
        tm.initialize();
        assert_eq!(tm.next_request(false), Some(TxnRequest::FindCoordinator));
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(2)));
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::InitProducerId { expected: None })
        );
        tm.on_answer(TxnAnswer::ProducerId(ProducerId(7), 0));
        assert_eq!(tm.state(), TxnState::Ready);
        tm
    }

    #[test]
    fn a_commit_adds_the_partitions_then_ends_once_the_batches_resolve() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.add_partition(&tp(1));
        assert!(!tm.may_send_to(&tp(0)), "not before AddPartitionsToTxn");
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::AddPartitions(vec![tp(0), tp(1)]))
        );
        assert_eq!(tm.next_request(true), None, "one request in flight");
        tm.on_answer(TxnAnswer::Error(None));
        assert!(tm.may_send_to(&tp(0)) && tm.may_send_to(&tp(1)));
        tm.add_partition(&tp(0));
        assert_eq!(tm.next_request(true), None, "tp 0 is in already");
        tm.begin_commit().unwrap();
        assert_eq!(tm.next_request(true), None, "EndTxn waits for the batches");
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Commit))
        );
        assert!(tm.commit_sent());
        tm.on_answer(TxnAnswer::Error(None));
        assert_eq!(tm.state(), TxnState::Ready);
        assert!(!tm.commit_sent() && !tm.may_send_to(&tp(0)));
    }

    /// Transaction protocol v2: no AddPartitionsToTxn (the leader adds the partition), and
    /// the EndTxn answer's epoch is the next transaction's.
    #[test]
    fn under_v2_a_send_needs_no_add_and_the_end_bumps_the_epoch() {
        let mut tm = ready(KAFKA_4_0);
        tm.begin();
        tm.add_partition(&tp(0));
        assert!(tm.may_send_to(&tp(0)), "sent at once");
        assert_eq!(tm.next_request(true), None, "nothing to add");
        tm.begin_commit().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Commit))
        );
        tm.on_answer(TxnAnswer::ProducerId(ProducerId(7), 1));
        assert_eq!(tm.state(), TxnState::Ready);
        assert_eq!(tm.identity(), Some((ProducerId(7), 1)));
        assert!(!tm.may_send_to(&tp(0)), "the next transaction starts empty");
    }

    /// Under v2 an abortable error, even a batch whose outcome is unknown, is recovered by
    /// the abort's own epoch bump: no InitProducerId follows.
    #[test]
    fn under_v2_an_abort_is_the_epoch_bump() {
        let mut tm = ready(KAFKA_4_0);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.on_batch_failed(BatchFailure::Unknown, "expired");
        assert_eq!(tm.state(), TxnState::AbortableError);
        tm.begin_abort().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Abort))
        );
        tm.on_answer(TxnAnswer::ProducerId(ProducerId(7), 1));
        assert_eq!(tm.state(), TxnState::Ready, "not Initializing");
        assert_eq!(tm.identity(), Some((ProducerId(7), 1)));
    }

    /// Under v2 the offsets go to the group's coordinator without AddOffsetsToTxn; a
    /// transaction being ended there is retried.
    #[test]
    fn under_v2_offsets_go_straight_to_the_group_coordinator() {
        let mut tm = ready(KAFKA_4_0);
        tm.begin();
        tm.send_offsets("g");
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::FindGroupCoordinator("g".to_owned()))
        );
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(3)));
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::TxnOffsetCommit(BrokerId(3)))
        );
        let wait = tm.on_answer(TxnAnswer::Error(Some(ErrorCode::ConcurrentTransactions)));
        assert_eq!(wait, Wait::RetryBackoff);
        tm.next_request(false);
        tm.on_answer(TxnAnswer::Error(None));
        assert!(!tm.offsets_pending());
        tm.begin_commit().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Commit)),
            "offsets alone began the transaction"
        );
    }

    #[test]
    fn a_transaction_that_wrote_nothing_ends_without_end_txn() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.begin_commit().unwrap();
        assert_eq!(tm.next_request(false), None);
        assert_eq!(tm.state(), TxnState::Ready);
    }

    #[test]
    fn a_lost_answer_or_not_coordinator_looks_the_coordinator_up_again() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        assert_eq!(tm.on_answer(TxnAnswer::Lost), Wait::RetryBackoff);
        assert_eq!(tm.coordinator(), None);
        assert_eq!(tm.next_request(true), Some(TxnRequest::FindCoordinator));
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(3)));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(Some(ErrorCode::NotCoordinator)));
        assert_eq!(tm.next_request(true), Some(TxnRequest::FindCoordinator));
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(1)));
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::AddPartitions(vec![tp(0)]))
        );
        assert_eq!(tm.coordinator(), Some(BrokerId(1)));
    }

    #[test]
    fn concurrent_transactions_on_the_first_add_retries_after_20_ms() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        let backoff = tm.on_answer(TxnAnswer::Error(Some(ErrorCode::ConcurrentTransactions)));
        assert_eq!(backoff, ADD_PARTITIONS_RETRY_BACKOFF);
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.add_partition(&tp(1));
        tm.next_request(true);
        let backoff = tm.on_answer(TxnAnswer::Error(Some(ErrorCode::ConcurrentTransactions)));
        assert_eq!(backoff, Wait::RetryBackoff, "not the first");
    }

    #[test]
    fn from_2_5_a_failed_batch_aborts_then_bumps_the_epoch() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.on_batch_failed(BatchFailure::Unknown, "test");
        assert_eq!(tm.state(), TxnState::AbortableError);
        assert!(
            tm.may_send_to(&tp(0)) && tm.aborts_undrained(),
            "retries go on, new batches are dropped"
        );
        let error = tm.begin_commit().unwrap_err();
        assert!(!error.fatal);
        tm.begin_abort().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Abort))
        );
        assert!(!tm.commit_sent());
        tm.on_answer(TxnAnswer::Error(None));
        assert_eq!(tm.state(), TxnState::Initializing);
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::InitProducerId {
                expected: Some((ProducerId(7), 0))
            })
        );
        tm.on_answer(TxnAnswer::ProducerId(ProducerId(7), 1));
        assert_eq!(tm.state(), TxnState::Ready);
        assert_eq!(tm.identity(), Some((ProducerId(7), 1)));
    }

    #[test]
    fn a_send_in_a_failed_transaction_fails_at_once_with_its_error() {
        let mut tm = ready(KAFKA_2_4);
        tm.begin();
        assert_eq!(tm.send_error(), None, "an open transaction takes sends");
        tm.add_partition(&tp(0));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.on_batch_failed(
            BatchFailure::Refused(Some(ErrorCode::NotEnoughReplicas)),
            "refused",
        );
        let abortable = tm.send_error().expect("an abortable error fails sends");
        assert!(!abortable.fatal);
        tm.begin_abort().unwrap();
        tm.next_request(false);
        tm.on_answer(TxnAnswer::Error(None));
        tm.begin();
        tm.on_batch_failed(BatchFailure::Unknown, "unknown");
        assert!(tm.send_error().expect("a fatal error fails sends").fatal);
    }

    #[test]
    fn before_2_5_an_unknown_batch_outcome_is_fatal_and_a_refused_one_abortable() {
        let mut tm = ready(KAFKA_2_4);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.on_batch_failed(
            BatchFailure::Refused(Some(ErrorCode::NotEnoughReplicas)),
            "test",
        );
        assert_eq!(tm.state(), TxnState::AbortableError);
        tm.begin_abort().unwrap();
        tm.next_request(false);
        tm.on_answer(TxnAnswer::Error(None));
        assert_eq!(tm.state(), TxnState::Ready, "no bump before KIP-360");
        tm.begin();
        tm.on_batch_failed(BatchFailure::Unknown, "test");
        assert_eq!(tm.state(), TxnState::FatalError);
        assert!(tm.begin_abort().unwrap_err().fatal);
    }

    #[test]
    fn invalid_producer_epoch_on_a_produce_is_fatal_before_2_7_and_abortable_after() {
        for (rules, fatal) in [(KAFKA_2_4, true), (KAFKA_3_9, false)] {
            let mut tm = ready(rules);
            tm.begin();
            tm.on_batch_failed(
                BatchFailure::Refused(Some(ErrorCode::InvalidProducerEpoch)),
                "test",
            );
            assert_eq!(tm.error().unwrap().fatal, fatal, "{rules:?}");
        }
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.on_batch_failed(
            BatchFailure::Refused(Some(ErrorCode::ProducerFenced)),
            "test",
        );
        assert_eq!(tm.state(), TxnState::FatalError);
    }

    #[test]
    fn a_fenced_end_txn_is_fatal_and_remembers_the_commit_was_sent() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.begin_commit().unwrap();
        tm.next_request(false);
        tm.on_answer(TxnAnswer::Error(Some(ErrorCode::ProducerFenced)));
        assert_eq!(tm.state(), TxnState::FatalError);
        assert!(tm.commit_sent(), "the commit may have happened");
        assert_eq!(tm.next_request(false), None);
    }

    #[test]
    fn an_unknown_producer_id_skips_the_abort_s_end_txn_and_bumps() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.begin_commit().unwrap();
        tm.next_request(false);
        tm.on_answer(TxnAnswer::Error(Some(ErrorCode::InvalidProducerIdMapping)));
        assert_eq!(tm.state(), TxnState::AbortableError);
        tm.begin_abort().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::InitProducerId {
                expected: Some((ProducerId(7), 0))
            }),
            "no EndTxn the coordinator would refuse again"
        );
        assert!(
            tm.commit_sent(),
            "ended without an answer: the commit may have happened at a coordinator that lost the id"
        );
    }

    #[test]
    fn an_abortable_answer_to_an_abort_s_end_txn_is_fatal_not_retried() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.on_batch_failed(BatchFailure::Unknown, "test");
        tm.begin_abort().unwrap();
        tm.next_request(false);
        tm.on_answer(TxnAnswer::Error(Some(ErrorCode::UnknownServerError)));
        assert_eq!(tm.state(), TxnState::FatalError);
        assert_eq!(tm.next_request(false), None);
    }

    #[test]
    fn an_abort_drops_partitions_not_yet_added() {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.add_partition(&tp(1));
        tm.begin_abort().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Abort))
        );
    }

    /// A transaction with a partition added and offsets sent for group `etl`.
    fn with_offsets_sent() -> TransactionManager {
        let mut tm = ready(KAFKA_3_9);
        tm.begin();
        tm.add_partition(&tp(0));
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::AddPartitions(vec![tp(0)]))
        );
        tm.on_answer(TxnAnswer::Error(None));
        tm.send_offsets("etl");
        assert!(tm.offsets_pending());
        tm
    }

    /// AddOffsetsToTxn answered, the group's coordinator (broker 3) found, and the
    /// TxnOffsetCommit sent to it.
    fn with_offset_commit_sent() -> TransactionManager {
        let mut tm = with_offsets_sent();
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(None));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(3)));
        tm.next_request(true);
        tm
    }

    #[test]
    fn offsets_go_to_the_transaction_then_to_the_group_s_coordinator() {
        let mut tm = with_offsets_sent();
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::AddOffsets("etl".to_owned()))
        );
        tm.on_answer(TxnAnswer::Error(None));
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::FindGroupCoordinator("etl".to_owned())),
            "the group's coordinator is looked up, not the transaction's"
        );
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(3)));
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::TxnOffsetCommit(BrokerId(3)))
        );
        // The group's coordinator moved: looked up again, then the offsets resent.
        assert_eq!(
            tm.on_answer(TxnAnswer::Error(Some(ErrorCode::NotCoordinator))),
            Wait::RetryBackoff
        );
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::FindGroupCoordinator("etl".to_owned()))
        );
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(1)));
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::TxnOffsetCommit(BrokerId(1)))
        );
        assert_eq!(
            tm.coordinator(),
            Some(BrokerId(2)),
            "the transaction's stays"
        );
        tm.on_answer(TxnAnswer::Error(None));
        assert!(!tm.offsets_pending());
        tm.begin_commit().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Commit))
        );
        tm.on_answer(TxnAnswer::Error(None));
        assert_eq!(tm.state(), TxnState::Ready);
    }

    #[test]
    fn offsets_of_a_generation_the_group_left_abort_the_transaction() {
        let mut tm = with_offset_commit_sent();
        tm.on_answer(TxnAnswer::Error(Some(ErrorCode::IllegalGeneration)));
        assert_eq!(tm.state(), TxnState::AbortableError);
        assert!(!tm.offsets_pending(), "the application stops waiting");
        assert!(tm.failure().reason.starts_with("CommitFailedException"));
        tm.begin_abort().unwrap();
        assert_eq!(
            tm.next_request(false),
            Some(TxnRequest::EndTxn(TxnResult::Abort)),
            "AddOffsetsToTxn started the transaction: the abort is sent"
        );
        tm.on_answer(TxnAnswer::Error(None));
        // `abortableError`, not `abortableErrorIfPossible`: no epoch bump, ready at once.
        assert_eq!(tm.state(), TxnState::Ready);
        assert_eq!(tm.identity(), Some((ProducerId(7), 0)));
    }

    #[test]
    fn a_fenced_offset_commit_is_fatal_and_a_lost_one_is_retried() {
        let mut tm = with_offset_commit_sent();
        assert_eq!(tm.on_answer(TxnAnswer::Lost), Wait::RetryBackoff);
        assert_eq!(
            tm.next_request(true),
            Some(TxnRequest::FindGroupCoordinator("etl".to_owned()))
        );
        assert_eq!(tm.coordinator(), Some(BrokerId(2)));
        tm.on_answer(TxnAnswer::Coordinator(BrokerId(3)));
        tm.next_request(true);
        tm.on_answer(TxnAnswer::Error(Some(ErrorCode::ProducerFenced)));
        assert_eq!(tm.state(), TxnState::FatalError);
        assert!(tm.failure().fatal);
    }
}
