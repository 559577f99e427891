//! Partition verification (KIP-890 part 1, Kafka 3.6): before a producer's transactional
//! batch starts a transaction on a partition, the partition's leader asks the transaction
//! coordinator whether the partition is in the producer's ongoing transaction
//! (AddPartitionsToTxn with `VerifyOnly`), and appends the batch only if it is and no
//! marker came in meanwhile (the guard of `storage::producer_state`). A produce that
//! arrives after its transaction ended — delayed on the network past the producer's
//! abort — is refused instead of opening a transaction nobody will end.
//!
//! Kafka's `AddPartitionsToTxnManager` and the part of `ReplicaManager.appendRecords`
//! that uses it (3.6.2). As Kafka's, except: one question per produce request, on a
//! connection per coordinator kept between questions (Kafka batches one coordinator's
//! questions into a request per turn of its sender thread).

use super::replica_manager::{ReplicaManager, MARKER_TIMEOUT};
use super::txn::coordinator::TRANSACTION_STATE_TOPIC;
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    ErrorCode, Produce, ProduceResponse, Request, Response, TxnProducer,
};
use crate::kafka::record;
use crate::kafka::storage::producer_state::VerificationGuard;
use crate::kafka::types::coordinator_partition;
use crate::types::{BrokerId, HostName, Offset, TopicPartition};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

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
    if !rm.config.transaction_partition_verification_enable || rm.bugs.skip_partition_verification {
        return Ok(None);
    }
    let Ok(header) = record::parse_header(&request.batch) else {
        return Ok(None); // the append refuses it
    };
    if !header.is_transactional() {
        return Ok(None);
    }
    let guard = rm.start_verification(&request.tp, header.producer_id)?;
    let (Some(guard), Some(transactional_id)) = (guard, &request.transactional_id) else {
        // Nothing to verify, or no id to ask about: the append decides.
        return Ok(guard);
    };
    let state = TopicPartition::new(
        TRANSACTION_STATE_TOPIC,
        coordinator_partition(
            transactional_id,
            rm.config.transaction_state_log_num_partitions,
        ),
    );
    let coordinator = rm.leader_of(&state);
    let txn = TxnProducer {
        transactional_id: transactional_id.clone(),
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
    };
    let answer = match coordinator {
        Some(coordinator) => verifier.ask(coordinator, txn, request.tp.clone()).await,
        None => Err(ErrorCode::CoordinatorNotAvailable),
    };
    match answer.map_err(produce_error) {
        Ok(()) => Ok(Some(guard)),
        Err(error) => {
            if refused(error) {
                rm.record_unverified(&request.tp, transactional_id, error);
            }
            Err(error)
        }
    }
}

/// The leader's connections to transaction coordinators, one per broker, idle between
/// questions.
#[derive(Default)]
pub struct Verifier {
    connections: RefCell<BTreeMap<BrokerId, Connection>>,
}

impl Verifier {
    /// Ask `coordinator` whether `tp` is in `txn`'s ongoing transaction: `Ok` if it is,
    /// else the coordinator's error, or NETWORK_EXCEPTION if no answer came.
    pub async fn ask(
        &self,
        coordinator: BrokerId,
        txn: TxnProducer,
        tp: TopicPartition,
    ) -> Result<(), ErrorCode> {
        let cached = self.connections.borrow_mut().remove(&coordinator);
        let mut connection = match cached.filter(|c| !c.is_broken()) {
            Some(c) => c,
            None => Connection::connect(HostName::Broker(coordinator.0), MARKER_TIMEOUT)
                .await
                .map_err(|_| ErrorCode::NetworkException)?,
        };
        let request = Request::VerifyPartitionsInTxn {
            txn,
            partitions: vec![tp],
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
/// (TRANSACTION_ABORTABLE from 3.8).
pub fn produce_error(answer: ErrorCode) -> ErrorCode {
    match answer {
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
            assert_eq!(produce_error(busy), ErrorCode::NotEnoughReplicas);
            assert!(!refused(produce_error(busy)));
        }
        assert_eq!(
            produce_error(ErrorCode::ProducerFenced),
            ErrorCode::InvalidProducerEpoch
        );
        assert!(refused(produce_error(ErrorCode::ProducerFenced)));
        assert!(refused(produce_error(ErrorCode::InvalidTxnState)));
        assert!(refused(produce_error(ErrorCode::TransactionAbortable)));
        assert!(!refused(produce_error(ErrorCode::NetworkException)));
    }
}
