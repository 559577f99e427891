//! The transaction coordinator's decisions, as plain functions over one transactional
//! id's [`TxnMetadata`]: Kafka's `TransactionCoordinator` handlers without their
//! callbacks. Each checks the request in Kafka's order and either answers at once or
//! prepares a transition for the shell to append to `__transaction_state`.

use std::collections::BTreeSet;

use super::metadata::{TxnMetadata, TxnState, TxnTransit, TRANSACTION_VERSION_2};
use crate::kafka::protocol::messages::ErrorCode;
use crate::kafka::record::TxnResult;
use crate::kafka::types::ProducerId;
use crate::types::TopicPartition;

/// What InitProducerId does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitStep {
    /// Append the bumped epoch; answer it once replicated.
    Bump(TxnTransit),
    /// An ongoing transaction stands in the way: fence its producer and abort it
    /// ([`end_txn`] with `from_client` false), then answer CONCURRENT_TRANSACTIONS so that
    /// the client retries, and the epoch is bumped a second time.
    FenceAndAbort(TxnTransit),
}

/// Kafka's `prepareInitProducerIdTransit`. `expected` is a KIP-360 client's producer id
/// and epoch (2.5+), `None` for a new instance or an older client.
pub fn init_producer_id(
    meta: &mut TxnMetadata,
    timeout_ms: i32,
    expected: Option<(ProducerId, i16)>,
    now_ms: i64,
) -> Result<InitStep, ErrorCode> {
    if meta.pending_transition_in_progress() {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    if let Some((pid, _)) = expected {
        if pid != meta.producer_id && pid != meta.last_producer_id {
            return Err(ErrorCode::ProducerFenced);
        }
    }
    match meta.state {
        TxnState::PrepareAbort | TxnState::PrepareCommit => Err(ErrorCode::ConcurrentTransactions),
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => meta
            .prepare_increment_epoch(timeout_ms, expected.map(|(_, epoch)| epoch), now_ms)
            .map(InitStep::Bump)
            .map_err(|_| ErrorCode::ProducerFenced),
        TxnState::Ongoing => Ok(InitStep::FenceAndAbort(meta.prepare_fence_epoch())),
        TxnState::Dead | TxnState::PrepareEpochFence => {
            unreachable!(
                "{} is never current with nothing pending",
                meta.state.name()
            )
        }
    }
}

/// Kafka's `handleAddPartitionsToTransaction`; AddOffsetsToTxn adds the group's
/// `__consumer_offsets` partition the same way, and under transaction protocol v2
/// (`version` 2) a partition's leader or the group coordinator adds the partition.
/// `Ok(None)`: already in the transaction, answered at once.
pub fn add_partitions(
    meta: &mut TxnMetadata,
    producer_id: ProducerId,
    producer_epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
    version: i16,
    now_ms: i64,
) -> Result<Option<TxnTransit>, ErrorCode> {
    if meta.producer_id != producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if meta.producer_epoch != producer_epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    if meta.pending_transition_in_progress()
        || matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
    {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    if meta.state == TxnState::Ongoing && partitions.is_subset(&meta.partitions) {
        return Ok(None);
    }
    Ok(Some(
        meta.prepare_add_partitions(partitions, version, now_ms),
    ))
}

/// Kafka's `handleVerifyPartitionsInTransaction` (3.6, KIP-890 part 1): a partition
/// leader asks whether `partitions` are in the producer's ongoing transaction before a
/// batch starts a transaction on them. A read: nothing is written. Partitions join the
/// transaction when their AddPartitionsToTxn is written and leave it with the end marker,
/// so an ended transaction has none: INVALID_TXN_STATE, or from 3.8 TRANSACTION_ABORTABLE
/// (`abortable`).
pub fn verify_partitions(
    meta: &TxnMetadata,
    producer_id: ProducerId,
    producer_epoch: i16,
    partitions: &BTreeSet<TopicPartition>,
    abortable: bool,
) -> Result<(), ErrorCode> {
    if meta.producer_id != producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if meta.producer_epoch != producer_epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    if matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    if partitions.is_subset(&meta.partitions) {
        Ok(())
    } else if abortable {
        Err(ErrorCode::TransactionAbortable)
    } else {
        Err(ErrorCode::InvalidTxnState)
    }
}

/// What EndTxn does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndStep {
    /// The transaction already ended this way: a retry, answered NONE.
    Done,
    /// Append PrepareCommit or PrepareAbort; once replicated, answer and send the markers.
    Prepare(TxnTransit),
}

/// Kafka's `endTransaction`. `from_client` is false for the coordinator's own aborts (a
/// fence or a timeout), whose epoch may be above the current one. `version` is the
/// transaction protocol: 2 (`end_txn_v2`) bumps the epoch at every end.
pub fn end_txn(
    meta: &mut TxnMetadata,
    producer_id: ProducerId,
    producer_epoch: i16,
    result: TxnResult,
    from_client: bool,
    version: i16,
    now_ms: i64,
) -> Result<EndStep, ErrorCode> {
    if version >= TRANSACTION_VERSION_2 {
        return end_txn_v2(
            meta,
            producer_id,
            producer_epoch,
            result,
            from_client,
            now_ms,
        );
    }
    if meta.producer_id != producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    // Strict for clients (KAFKA-9600): their requests never bump the epoch.
    if (from_client && producer_epoch != meta.producer_epoch)
        || producer_epoch < meta.producer_epoch
    {
        return Err(ErrorCode::ProducerFenced);
    }
    let fencing = meta.pending == Some(TxnState::PrepareEpochFence);
    // A fence is followed at once by the coordinator's own abort: no client request
    // comes between (the shell makes both in one step).
    if meta.pending_transition_in_progress() && (!fencing || from_client) {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    let same = |state: TxnState| {
        matches!(
            (state, result),
            (
                TxnState::CompleteCommit | TxnState::PrepareCommit,
                TxnResult::Commit
            ) | (
                TxnState::CompleteAbort | TxnState::PrepareAbort,
                TxnResult::Abort
            )
        )
    };
    match meta.state {
        TxnState::Ongoing => {
            let next = match result {
                TxnResult::Commit => TxnState::PrepareCommit,
                TxnResult::Abort => TxnState::PrepareAbort,
            };
            if next == TxnState::PrepareAbort && fencing {
                meta.take_fence(producer_epoch, version);
            }
            Ok(EndStep::Prepare(
                meta.prepare_abort_or_commit(next, version, now_ms),
            ))
        }
        s @ (TxnState::CompleteCommit | TxnState::CompleteAbort) if same(s) => Ok(EndStep::Done),
        s @ (TxnState::PrepareCommit | TxnState::PrepareAbort) if same(s) => {
            Err(ErrorCode::ConcurrentTransactions)
        }
        TxnState::Empty
        | TxnState::CompleteCommit
        | TxnState::CompleteAbort
        | TxnState::PrepareCommit
        | TxnState::PrepareAbort => Err(ErrorCode::InvalidTxnState),
        TxnState::Dead | TxnState::PrepareEpochFence => {
            unreachable!("{} is never current", meta.state.name())
        }
    }
}

/// `endTransaction` under transaction protocol v2 (4.0, KIP-890 part 2). The end bumps
/// the epoch, so a client's request at the current epoch always means the transaction
/// it is in, and one at the epoch just below means a retry of the end that bumped it:
///
/// | state          | abort, retry | abort, current | commit, retry | commit, current |
/// |----------------|--------------|----------------|---------------|-----------------|
/// | Empty          | fenced       | bump           | fenced        | invalid         |
/// | Ongoing        | fenced       | PrepareAbort   | fenced        | PrepareCommit   |
/// | CompleteAbort  | NONE         | bump           | invalid       | invalid         |
/// | CompleteCommit | invalid      | bump           | NONE          | invalid         |
/// | PrepareCommit  | invalid      | fenced         | CONCURRENT    | fenced          |
/// | PrepareAbort   | CONCURRENT   | fenced         | invalid       | fenced          |
///
/// "bump" is an abort of a transaction that never began, which the client sends when it
/// cannot tell: a PrepareAbort with no partitions, completed at once. Producer id
/// rotation at an exhausted epoch is not modelled ([`TxnMetadata::prepare_abort_or_commit`]
/// asserts it never comes).
fn end_txn_v2(
    meta: &mut TxnMetadata,
    producer_id: ProducerId,
    producer_epoch: i16,
    result: TxnResult,
    from_client: bool,
    now_ms: i64,
) -> Result<EndStep, ErrorCode> {
    let fencing = meta.pending == Some(TxnState::PrepareEpochFence);
    let retry = !fencing && i32::from(meta.producer_epoch) == i32::from(producer_epoch) + 1;
    let current = producer_epoch == meta.producer_epoch;
    let valid = if fencing {
        (!from_client || current) && producer_epoch >= meta.producer_epoch
    } else {
        match meta.state {
            TxnState::Ongoing | TxnState::Empty => current,
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry,
            TxnState::CompleteCommit | TxnState::CompleteAbort => retry || current,
            TxnState::Dead | TxnState::PrepareEpochFence => {
                unreachable!("{} is never current", meta.state.name())
            }
        }
    };
    if meta.pending_transition_in_progress() && (!fencing || from_client) {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    if meta.producer_id != producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if !valid {
        return Err(ErrorCode::ProducerFenced);
    }
    let prepare = |meta: &mut TxnMetadata, next: TxnState| {
        if fencing {
            meta.take_fence(producer_epoch, TRANSACTION_VERSION_2);
        }
        Ok(EndStep::Prepare(meta.prepare_abort_or_commit(
            next,
            TRANSACTION_VERSION_2,
            now_ms,
        )))
    };
    match (meta.state, result) {
        (TxnState::Ongoing, TxnResult::Commit) => prepare(meta, TxnState::PrepareCommit),
        (TxnState::Ongoing, TxnResult::Abort) => prepare(meta, TxnState::PrepareAbort),
        (TxnState::CompleteCommit, TxnResult::Commit)
        | (TxnState::CompleteAbort, TxnResult::Abort)
            if retry =>
        {
            Ok(EndStep::Done)
        }
        (
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort,
            TxnResult::Abort,
        ) if !retry => prepare(meta, TxnState::PrepareAbort),
        (TxnState::PrepareCommit, TxnResult::Commit)
        | (TxnState::PrepareAbort, TxnResult::Abort) => Err(ErrorCode::ConcurrentTransactions),
        _ => Err(ErrorCode::InvalidTxnState),
    }
}

/// Kafka's `timedOutTransactions`: an ongoing transaction older than its timeout, with
/// nothing pending, is aborted by the coordinator (after a fence, from 0.11.0.2).
pub fn timed_out(meta: &TxnMetadata, now_ms: i64) -> bool {
    meta.state == TxnState::Ongoing
        && !meta.pending_transition_in_progress()
        && meta.start_ms + i64::from(meta.timeout_ms) < now_ms
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parts(names: &[u32]) -> BTreeSet<TopicPartition> {
        names
            .iter()
            .map(|p| TopicPartition::new("out", *p))
            .collect()
    }

    /// A new id after its first InitProducerId: epoch 0, Empty.
    fn initialized() -> TxnMetadata {
        let mut meta = TxnMetadata::new("t", ProducerId(7), 60_000, 0);
        let Ok(InitStep::Bump(transit)) = init_producer_id(&mut meta, 60_000, None, 0) else {
            panic!("a new id is bumped")
        };
        meta.complete(transit);
        meta
    }

    fn ongoing(meta: &mut TxnMetadata, now_ms: i64) {
        let epoch = meta.producer_epoch;
        let transit = add_partitions(meta, ProducerId(7), epoch, &parts(&[0, 1]), 0, now_ms)
            .unwrap()
            .unwrap();
        meta.complete(transit);
    }

    /// The coordinator's own abort after a fence (a timeout, a new instance) at `epoch`,
    /// under transaction protocol `version`: its PrepareAbort.
    fn fencing_abort(meta: &mut TxnMetadata, epoch: i16, version: i16, now_ms: i64) -> TxnTransit {
        match end_txn(
            meta,
            ProducerId(7),
            epoch,
            TxnResult::Abort,
            false,
            version,
            now_ms,
        ) {
            Ok(EndStep::Prepare(abort)) => abort,
            other => panic!("the coordinator's abort prepares: {other:?}"),
        }
    }

    #[test]
    fn a_transaction_runs_from_empty_to_complete_commit() {
        let mut meta = initialized();
        assert_eq!((meta.producer_epoch, meta.state), (0, TxnState::Empty));
        ongoing(&mut meta, 10);
        assert_eq!((meta.state, meta.start_ms), (TxnState::Ongoing, 10));
        assert_eq!(
            add_partitions(&mut meta, ProducerId(7), 0, &parts(&[1]), 0, 20),
            Ok(None),
            "a partition already in is answered at once"
        );
        let Ok(EndStep::Prepare(prepare)) =
            end_txn(&mut meta, ProducerId(7), 0, TxnResult::Commit, true, 0, 30)
        else {
            panic!("commit prepares")
        };
        assert_eq!(
            end_txn(&mut meta, ProducerId(7), 0, TxnResult::Commit, true, 0, 31),
            Err(ErrorCode::ConcurrentTransactions),
            "while the PrepareCommit append is in flight"
        );
        meta.complete(prepare);
        assert_eq!(
            end_txn(&mut meta, ProducerId(7), 0, TxnResult::Commit, true, 0, 32),
            Err(ErrorCode::ConcurrentTransactions),
            "markers in flight"
        );
        assert_eq!(
            end_txn(&mut meta, ProducerId(7), 0, TxnResult::Abort, true, 0, 32),
            Err(ErrorCode::InvalidTxnState)
        );
        let complete = meta.prepare_complete(40);
        assert!(complete.partitions.is_empty());
        meta.complete(complete);
        assert_eq!(meta.state, TxnState::CompleteCommit);
        assert_eq!(
            end_txn(&mut meta, ProducerId(7), 0, TxnResult::Commit, true, 0, 50),
            Ok(EndStep::Done),
            "a retried commit is answered NONE"
        );
        ongoing(&mut meta, 60);
        assert_eq!(
            meta.start_ms, 60,
            "the next transaction starts its own clock"
        );
    }

    /// A new instance's InitProducerId on an ongoing transaction fences the old producer
    /// (epoch + 1) and aborts its transaction with that epoch; the old producer's requests
    /// are then refused.
    #[test]
    fn a_new_instance_fences_and_aborts_the_old_ones_transaction() {
        let mut meta = initialized();
        ongoing(&mut meta, 10);
        let Ok(InitStep::FenceAndAbort(fence)) = init_producer_id(&mut meta, 60_000, None, 20)
        else {
            panic!("an ongoing transaction is fenced first")
        };
        assert_eq!(fence.producer_epoch, 1);
        let abort = fencing_abort(&mut meta, fence.producer_epoch, 0, 20);
        assert_eq!(
            (abort.state, abort.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        meta.complete(abort);
        assert_eq!(
            end_txn(&mut meta, ProducerId(7), 0, TxnResult::Commit, true, 0, 21),
            Err(ErrorCode::ProducerFenced),
            "the zombie's commit"
        );
        assert_eq!(
            add_partitions(&mut meta, ProducerId(7), 0, &parts(&[2]), 0, 21),
            Err(ErrorCode::ProducerFenced)
        );
        assert_eq!(
            init_producer_id(&mut meta, 60_000, None, 22),
            Err(ErrorCode::ConcurrentTransactions),
            "the new instance retries until the markers are written"
        );
        let complete = meta.prepare_complete(23);
        meta.complete(complete);
        let Ok(InitStep::Bump(bump)) = init_producer_id(&mut meta, 60_000, None, 24) else {
            panic!("bumped a second time")
        };
        assert_eq!(bump.producer_epoch, 2);
    }

    /// KIP-890 part 1: only the current epoch's ongoing transaction holding every
    /// partition asked about says yes; an ended one holds none.
    #[test]
    fn verification_answers_from_the_ongoing_transaction() {
        let mut meta = initialized();
        let (pid, epoch) = (meta.producer_id, meta.producer_epoch);
        assert_eq!(
            verify_partitions(&meta, pid, epoch, &parts(&[0]), false),
            Err(ErrorCode::InvalidTxnState),
            "no transaction yet"
        );
        ongoing(&mut meta, 1_000);
        assert_eq!(
            verify_partitions(&meta, pid, epoch, &parts(&[0]), false),
            Ok(())
        );
        assert_eq!(
            verify_partitions(&meta, pid, epoch, &parts(&[0, 7]), false),
            Err(ErrorCode::InvalidTxnState)
        );
        assert_eq!(
            verify_partitions(&meta, pid, epoch, &parts(&[0, 7]), true),
            Err(ErrorCode::TransactionAbortable),
            "3.8"
        );
        assert_eq!(
            verify_partitions(&meta, pid, epoch - 1, &parts(&[0]), false),
            Err(ErrorCode::ProducerFenced)
        );
        assert_eq!(
            verify_partitions(&meta, ProducerId(99), epoch, &parts(&[0]), false),
            Err(ErrorCode::InvalidProducerIdMapping)
        );
        let EndStep::Prepare(prepare) =
            end_txn(&mut meta, pid, epoch, TxnResult::Abort, true, 0, 2_000).unwrap()
        else {
            panic!("an ongoing transaction prepares");
        };
        meta.complete(prepare);
        assert_eq!(
            verify_partitions(&meta, pid, epoch, &parts(&[0]), false),
            Err(ErrorCode::ConcurrentTransactions),
            "markers on their way"
        );
        let complete = meta.prepare_complete(2_100);
        meta.complete(complete);
        assert_eq!(
            verify_partitions(&meta, pid, epoch, &parts(&[0]), false),
            Err(ErrorCode::InvalidTxnState),
            "the stray batch of an aborted transaction"
        );
    }

    #[test]
    fn the_timeout_counts_from_the_first_partition() {
        let mut meta = initialized();
        assert!(!timed_out(&meta, i64::MAX / 2), "nothing ongoing");
        ongoing(&mut meta, 1_000);
        assert!(!timed_out(&meta, 61_000));
        assert!(timed_out(&meta, 61_001));
        meta.prepare_fence_epoch();
        assert!(
            !timed_out(&meta, 61_001),
            "not while a transition is pending"
        );
    }

    /// KIP-360: a retry of InitProducerId whose answer was lost names the previous epoch
    /// and gets the current one again; any other epoch is a zombie.
    #[test]
    fn kip_360_retries_get_the_same_epoch_and_zombies_are_fenced() {
        let mut meta = initialized();
        let bump = |meta: &mut TxnMetadata, expected| {
            init_producer_id(meta, 60_000, Some((ProducerId(7), expected)), 0)
        };
        let Ok(InitStep::Bump(first)) = bump(&mut meta, 0) else {
            panic!("bumps")
        };
        meta.complete(first);
        assert_eq!(meta.producer_epoch, 1);
        let Ok(InitStep::Bump(retry)) = bump(&mut meta, 0) else {
            panic!("a retry")
        };
        assert_eq!(retry.producer_epoch, 1, "the same epoch again");
        meta.abandon(true);
        assert_eq!(bump(&mut meta, 5), Err(ErrorCode::ProducerFenced));
        assert_eq!(
            init_producer_id(&mut meta, 60_000, Some((ProducerId(8), 1)), 0),
            Err(ErrorCode::ProducerFenced)
        );
    }

    /// KAFKA-9666: when a fencing abort's append fails, the next fence reuses its epoch
    /// from 2.7; before, every retry bumped the epoch again.
    #[test]
    fn a_failed_fence_is_not_bumped_again_from_2_7() {
        for (remember, expected) in [(true, 1), (false, 2)] {
            let mut meta = initialized();
            ongoing(&mut meta, 0);
            let fence = meta.prepare_fence_epoch();
            fencing_abort(&mut meta, fence.producer_epoch, 0, 0);
            meta.abandon(remember);
            assert_eq!(meta.state, TxnState::Ongoing);
            assert_eq!(meta.prepare_fence_epoch().producer_epoch, expected);
        }
    }

    /// Transaction protocol v2: the end bumps the epoch, the markers carry it, and the
    /// EndTxn table of `end_txn_v2` row by row.
    #[test]
    fn under_v2_every_end_bumps_the_epoch_and_a_retry_is_the_epoch_below() {
        let v2 = TRANSACTION_VERSION_2;
        let mut meta = initialized();
        let end = |meta: &mut TxnMetadata, epoch, result| {
            end_txn(meta, ProducerId(7), epoch, result, true, v2, 0)
        };
        ongoing(&mut meta, 10);
        let Ok(EndStep::Prepare(commit)) = end(&mut meta, 0, TxnResult::Commit) else {
            panic!("commit prepares")
        };
        assert_eq!(
            (
                commit.producer_epoch,
                commit.last_producer_epoch,
                commit.client_transaction_version
            ),
            (1, 0, 2),
            "PrepareCommit, and so its markers, at the next epoch"
        );
        meta.complete(commit);
        assert_eq!(
            end(&mut meta, 0, TxnResult::Commit),
            Err(ErrorCode::ConcurrentTransactions),
            "a retry while the markers go"
        );
        assert_eq!(
            end(&mut meta, 1, TxnResult::Commit),
            Err(ErrorCode::ProducerFenced),
            "PrepareCommit, current epoch"
        );
        assert_eq!(
            end(&mut meta, 0, TxnResult::Abort),
            Err(ErrorCode::InvalidTxnState)
        );
        let complete = meta.prepare_complete(20);
        meta.complete(complete);
        assert_eq!(
            (meta.state, meta.producer_epoch),
            (TxnState::CompleteCommit, 1)
        );
        assert_eq!(
            end(&mut meta, 0, TxnResult::Commit),
            Ok(EndStep::Done),
            "the retry, answered NONE"
        );
        assert_eq!(
            end(&mut meta, 0, TxnResult::Abort),
            Err(ErrorCode::InvalidTxnState)
        );
        assert_eq!(
            end(&mut meta, 1, TxnResult::Commit),
            Err(ErrorCode::InvalidTxnState),
            "an empty commit"
        );
        assert_eq!(
            end(&mut meta, 2, TxnResult::Abort),
            Err(ErrorCode::ProducerFenced)
        );
        let Ok(EndStep::Prepare(abort)) = end(&mut meta, 1, TxnResult::Abort) else {
            panic!("an abort of a transaction that never began bumps the epoch")
        };
        assert_eq!(
            (abort.state, abort.producer_epoch, abort.start_ms),
            (TxnState::PrepareAbort, 2, 0)
        );
        assert!(abort.partitions.is_empty());
        meta.complete(abort);
        let complete = meta.prepare_complete(30);
        meta.complete(complete);
        assert_eq!(end(&mut meta, 1, TxnResult::Abort), Ok(EndStep::Done));
        assert_eq!(
            end(&mut meta, 1, TxnResult::Commit),
            Err(ErrorCode::InvalidTxnState)
        );
        assert_eq!(
            end(&mut meta, 0, TxnResult::Abort),
            Err(ErrorCode::ProducerFenced),
            "two below"
        );
    }

    /// Under v2 the coordinator's own abort (a timeout, a new instance) bumps the epoch once
    /// (4.0.1, KAFKA-19367), and the timed-out producer's own abort then learns that epoch.
    #[test]
    fn under_v2_a_fencing_abort_bumps_once() {
        let v2 = TRANSACTION_VERSION_2;
        let mut meta = initialized();
        ongoing(&mut meta, 0);
        let fence = meta.prepare_fence_epoch();
        assert_eq!(fence.producer_epoch, 1);
        let abort = fencing_abort(&mut meta, 1, v2, 70_000);
        assert_eq!(
            (abort.state, abort.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        meta.complete(abort);
        let complete = meta.prepare_complete(70_010);
        meta.complete(complete);
        assert_eq!(
            end_txn(
                &mut meta,
                ProducerId(7),
                0,
                TxnResult::Commit,
                true,
                v2,
                70_020
            ),
            Err(ErrorCode::InvalidTxnState),
            "the timed-out producer's commit"
        );
        assert_eq!(
            end_txn(
                &mut meta,
                ProducerId(7),
                0,
                TxnResult::Abort,
                true,
                v2,
                70_020
            ),
            Ok(EndStep::Done),
            "its abort: answered with epoch 1"
        );
        assert_eq!(meta.producer_epoch, 1);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Instance `i` (re)initializes.
        Init(usize),
        Add(usize),
        End(usize, bool),
        Timeout,
        /// The pending append is replicated, or fails.
        Settle(bool),
        /// The markers of a Prepare* state were all written.
        Markers,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..2).prop_map(Op::Init),
            (0usize..2).prop_map(Op::Add),
            ((0usize..2), any::<bool>()).prop_map(|(i, c)| Op::End(i, c)),
            Just(Op::Timeout),
            any::<bool>().prop_map(Op::Settle),
            Just(Op::Markers),
        ]
    }

    proptest! {
        /// Two instances of one transactional id race through any interleaving of requests,
        /// timeouts and append outcomes. Only one epoch is live: no commit prepares for an
        /// instance whose epoch was superseded, the epoch never goes back, and each
        /// instance's epoch is one the coordinator gave out. Under transaction protocol v2
        /// an instance also learns an epoch from each EndTxn answered.
        #[test]
        fn no_two_live_epochs_of_one_transactional_id_commit(
            ops in proptest::collection::vec(op(), 1..60),
            version in prop_oneof![Just(0i16), Just(TRANSACTION_VERSION_2)],
        ) {
            let mut meta = initialized();
            let mut epochs = [Some(0i16), None];
            let mut pending: Option<(TxnTransit, Option<usize>)> = None;
            let mut highest_given = 0i16;
            let mut now = 0;
            for op in ops {
                now += 1_000;
                let before = meta.producer_epoch;
                match op {
                    Op::Init(i) if pending.is_none() => {
                        match init_producer_id(&mut meta, 5_000, None, now) {
                            Ok(InitStep::Bump(t)) => pending = Some((t, Some(i))),
                            Ok(InitStep::FenceAndAbort(f)) => {
                                pending = Some((fencing_abort(&mut meta, f.producer_epoch, version, now), None));
                            }
                            Err(_) => {}
                        }
                    }
                    Op::Add(i) if pending.is_none() => {
                        if let Some(epoch) = epochs[i] {
                            if let Ok(Some(t)) = add_partitions(&mut meta, ProducerId(7), epoch, &parts(&[0]), version, now) {
                                pending = Some((t, None));
                            }
                        }
                    }
                    Op::End(i, commit) if pending.is_none() => {
                        if let Some(epoch) = epochs[i] {
                            let result = if commit { TxnResult::Commit } else { TxnResult::Abort };
                            match end_txn(&mut meta, ProducerId(7), epoch, result, true, version, now) {
                                Ok(EndStep::Prepare(t)) => {
                                    prop_assert_eq!(epoch, meta.producer_epoch);
                                    prop_assert!(epochs.iter().flatten().all(|e| *e <= epoch),
                                        "instance {} at epoch {} ended a transaction after a newer epoch was given", i, epoch);
                                    let learns = (version == TRANSACTION_VERSION_2).then_some(i);
                                    pending = Some((t, learns));
                                }
                                Ok(EndStep::Done) if version == TRANSACTION_VERSION_2 => {
                                    epochs[i] = Some(meta.producer_epoch);
                                }
                                _ => {}
                            }
                        }
                    }
                    Op::Timeout if pending.is_none() && timed_out(&meta, now) => {
                        let f = meta.prepare_fence_epoch();
                        pending = Some((fencing_abort(&mut meta, f.producer_epoch, version, now), None));
                    }
                    Op::Settle(ok) => {
                        if let Some((t, init)) = pending.take() {
                            if ok {
                                if let Some(i) = init {
                                    epochs[i] = Some(t.producer_epoch);
                                    highest_given = highest_given.max(t.producer_epoch);
                                }
                                meta.complete(t);
                            } else {
                                meta.abandon(true);
                            }
                        }
                    }
                    Op::Markers if pending.is_none()
                        && matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort) => {
                        pending = Some((meta.prepare_complete(now), None));
                    }
                    _ => {}
                }
                prop_assert!(meta.producer_epoch >= before, "the epoch went back");
                prop_assert!(epochs.iter().flatten().all(|e| *e <= meta.producer_epoch));
                prop_assert!(highest_given <= meta.producer_epoch);
            }
        }
    }
}
