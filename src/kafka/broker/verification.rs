//! Partition verification (KIP-890 part 1, Kafka 3.6): before a producer's transactional
//! batch starts a transaction on a partition, the partition's leader asks the transaction
//! coordinator whether the partition is in the producer's ongoing transaction
//! (AddPartitionsToTxn with `VerifyOnly`), and appends the batch only if it is and no
//! marker came in meanwhile (the guard of `storage::producer_state`). A produce that
//! arrives after its transaction ended — delayed on the network past the producer's
//! abort — is refused instead of opening a transaction nobody will end.
//!
//! Under transaction protocol v2 (4.0, KIP-890 part 2) the question becomes the add
//! itself: the client sends no AddPartitionsToTxn, and the leader's AddPartitionsToTxn
//! (without `VerifyOnly`) puts the partition in the transaction, or starts one. It is
//! asked whatever `transaction.partition.verification.enable` says, and a coordinator busy
//! ending the transaction (CONCURRENT_TRANSACTIONS) is asked again every 20 ms for up to
//! 100 ms before the producer is told to retry.
//!
//! Kafka's `AddPartitionsToTxnManager` and the part of `ReplicaManager.appendRecords`
//! that uses it (3.6.2; 4.0.1 for v2). As Kafka's, except: one question per produce
//! request, on a connection per coordinator kept between questions (Kafka batches one
//! coordinator's questions into a request per turn of its sender thread). A client speaks
//! its cluster's protocol here, so the leader knows a v2 client by its own
//! `transaction.version` (Kafka, by Produce v12 and later).

use super::replica_manager::{ReplicaManager, MARKER_TIMEOUT};
use super::txn::coordinator::TRANSACTION_STATE_TOPIC;
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    ErrorCode, Produce, ProduceResponse, Request, Response, TxnProducer,
};
use crate::kafka::record;
use crate::kafka::storage::producer_state::VerificationGuard;
use crate::kafka::types::coordinator_partition;
use crate::os::clock;
use crate::types::{BrokerId, HostName, Offset, TopicPartition};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// `add.partitions.to.txn.retry.backoff.ms` and `.max.ms`: how often, and how long, a
/// leader asks again while the coordinator answers CONCURRENT_TRANSACTIONS (v2).
const ADD_RETRY_BACKOFF: Duration = Duration::from_millis(20);
const ADD_RETRY_MAX: Duration = Duration::from_millis(100);

/// A client's produce at this leader: verified first if its batch would start a
/// transaction here, then appended.
pub async fn produce(
    rm: &Rc<ReplicaManager>,
    verifier: &Verifier,
    request: Produce,
) -> ProduceResponse {
    match verify(rm, verifier, &request).await {
        Ok(guard) => rm.produce(request, guard).await,
        Err(error) => ProduceResponse {
            error: Some(error),
            base_offset: Offset::NONE,
            log_start_offset: Offset::NONE,
        },
    }
}

/// The guard to append `request`'s batch with, once its coordinator said yes; `Ok(None)`
/// when there is nothing to verify (verification off, not transactional, or continuing a
/// transaction open here). `Err`: the produce's answer.
async fn verify(
    rm: &Rc<ReplicaManager>,
    verifier: &Verifier,
    request: &Produce,
) -> Result<Option<VerificationGuard>, ErrorCode> {
    let add = rm.config.rules.transaction_version_2;
    if !(rm.config.transaction_partition_verification_enable || add)
        || rm.bugs.skip_partition_verification
    {
        return Ok(None);
    }
    let Ok(header) = record::parse_header(&request.batch) else {
        return Ok(None); // the append refuses it
    };
    if !header.is_transactional() {
        return Ok(None);
    }
    let guard = rm.start_verification(&request.tp, header.producer_id, header.producer_epoch)?;
    let (Some(guard), Some(transactional_id)) = (guard, &request.transactional_id) else {
        // Nothing to verify, or no id to ask about: the append decides.
        return Ok(guard);
    };
    let txn = TxnProducer {
        transactional_id: transactional_id.clone(),
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
    };
    ask_coordinator(rm, verifier, &txn, &request.tp, add).await?;
    Ok(Some(guard))
}

/// Transaction protocol v2: a TxnOffsetCommit (v5) reaches the group coordinator without
/// an AddOffsetsToTxn before it, so the coordinator adds its `__consumer_offsets`
/// partition to the transaction first, as a leader adds a produce's partition (Kafka's
/// `CoordinatorPartitionWriter.maybeStartTransactionVerification`). `Err`: the
/// TxnOffsetCommit's answer. The guard is not carried to the offsets' append, which
/// checks no guard here.
pub async fn add_offsets_partition(
    rm: &Rc<ReplicaManager>,
    verifier: &Verifier,
    txn: &TxnProducer,
    offsets: &TopicPartition,
) -> Result<(), ErrorCode> {
    let started = rm
        .start_verification(offsets, txn.producer_id, txn.producer_epoch)
        .map_err(|_| ErrorCode::NotCoordinator)?;
    if started.is_some() {
        ask_coordinator(rm, verifier, txn, offsets, true).await?;
    }
    Ok(())
}

/// Ask `txn`'s coordinator about `tp` (to verify it, or with `add` to add it), again while
/// a v2 add meets a transaction being ended; the refusal is a fact.
async fn ask_coordinator(
    rm: &Rc<ReplicaManager>,
    verifier: &Verifier,
    txn: &TxnProducer,
    tp: &TopicPartition,
    add: bool,
) -> Result<(), ErrorCode> {
    let state = TopicPartition::new(
        TRANSACTION_STATE_TOPIC,
        coordinator_partition(
            &txn.transactional_id,
            rm.config.transaction_state_log_num_partitions,
        ),
    );
    let coordinator = rm.leader_of(&state);
    let asked = clock::now();
    let answer = loop {
        let answer = match coordinator {
            Some(coordinator) => {
                verifier
                    .ask(coordinator, txn.clone(), tp.clone(), add)
                    .await
            }
            None => Err(ErrorCode::CoordinatorNotAvailable),
        };
        if add
            && answer == Err(ErrorCode::ConcurrentTransactions)
            && clock::now() + ADD_RETRY_BACKOFF <= asked + ADD_RETRY_MAX
        {
            tokio::time::sleep(ADD_RETRY_BACKOFF).await;
            continue;
        }
        break answer;
    };
    answer.map_err(|error| {
        let error = produce_error(error, add);
        if refused(error) {
            rm.record_unverified(tp, &txn.transactional_id, error);
        }
        error
    })
}

/// The leader's connections to transaction coordinators, one per broker, idle between
/// questions.
#[derive(Default)]
pub struct Verifier {
    connections: RefCell<BTreeMap<BrokerId, Connection>>,
}

impl Verifier {
    /// Ask `coordinator` whether `tp` is in `txn`'s ongoing transaction, or with `add`
    /// (transaction protocol v2) to put it there: `Ok` if it is, else the coordinator's
    /// error, or NETWORK_EXCEPTION if no answer came.
    pub async fn ask(
        &self,
        coordinator: BrokerId,
        txn: TxnProducer,
        tp: TopicPartition,
        add: bool,
    ) -> Result<(), ErrorCode> {
        let cached = self.connections.borrow_mut().remove(&coordinator);
        let mut connection = match cached.filter(|c| !c.is_broken()) {
            Some(c) => c,
            None => Connection::connect(HostName::Broker(coordinator.0), MARKER_TIMEOUT)
                .await
                .map_err(|_| ErrorCode::NetworkException)?,
        };
        let partitions = vec![tp];
        let request = if add {
            Request::AddPartitionsToTxn { txn, partitions }
        } else {
            Request::VerifyPartitionsInTxn { txn, partitions }
        };
        let response = connection.call(&request, MARKER_TIMEOUT).await;
        if !connection.is_broken() {
            self.connections
                .borrow_mut()
                .insert(coordinator, connection);
        }
        match response {
            Ok(Response::Txn { error: None }) => Ok(()),
            Ok(Response::Txn { error: Some(error) }) => Err(error),
            Ok(_) | Err(_) => Err(ErrorCode::NetworkException),
        }
    }
}

/// The produce error a leader answers for the coordinator's answer (3.6's
/// `AddPartitionsToTxnManager` and `ReplicaManager`): a coordinator that is busy or moving
/// becomes NOT_ENOUGH_REPLICAS, which the producer retries; a fenced epoch becomes
/// INVALID_PRODUCER_EPOCH; a partition not in the transaction stays INVALID_TXN_STATE
/// (TRANSACTION_ABORTABLE from 3.8). A v2 client (`add`) is told CONCURRENT_TRANSACTIONS
/// as it is, and retries.
pub fn produce_error(answer: ErrorCode, add: bool) -> ErrorCode {
    match answer {
        ErrorCode::ConcurrentTransactions if add => answer,
        ErrorCode::ConcurrentTransactions
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator => ErrorCode::NotEnoughReplicas,
        ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
        other => other,
    }
}

/// Whether a verification answer refuses the batch for good (the producer's transaction
/// does not hold the partition), rather than "ask again".
pub fn refused(error: ErrorCode) -> bool {
    matches!(
        error,
        ErrorCode::InvalidTxnState
            | ErrorCode::TransactionAbortable
            | ErrorCode::InvalidProducerEpoch
            | ErrorCode::InvalidProducerIdMapping
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_coordinator_is_retried_and_a_finished_transaction_refused() {
        for busy in [
            ErrorCode::ConcurrentTransactions,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::NotCoordinator,
        ] {
            for add in [false, true] {
                let error = produce_error(busy, add);
                assert!(!refused(error) && error.is_retriable(), "{busy:?}");
            }
            assert_eq!(produce_error(busy, false), ErrorCode::NotEnoughReplicas);
        }
        assert_eq!(
            produce_error(ErrorCode::ConcurrentTransactions, true),
            ErrorCode::ConcurrentTransactions,
            "v2 passes it on"
        );
        for add in [false, true] {
            assert_eq!(
                produce_error(ErrorCode::ProducerFenced, add),
                ErrorCode::InvalidProducerEpoch
            );
            assert!(refused(produce_error(ErrorCode::ProducerFenced, add)));
            assert!(refused(produce_error(ErrorCode::InvalidTxnState, add)));
            assert!(refused(produce_error(ErrorCode::TransactionAbortable, add)));
            assert!(!refused(produce_error(ErrorCode::NetworkException, add)));
        }
    }
}
