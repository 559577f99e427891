//! Request dispatch: what this broker answers to each request kind.

use super::controller_link;
use super::groups::coordinator::OFFSETS_TOPIC;
use super::groups::{self, Groups};
use super::replica_manager::ReplicaManager;
use super::txn::{self, Txns};
use super::verification::{self, Verifier};
use crate::kafka::protocol::messages::{ErrorCode, Request, Response};
use crate::kafka::types::{coordinator_partition, ProducerId};
use crate::types::TopicPartition;
use std::rc::Rc;

pub async fn handle(
    rm: Rc<ReplicaManager>,
    groups: Rc<Groups>,
    txns: Rc<Txns>,
    verifier: Rc<Verifier>,
    request: Request,
) -> Response {
    match request {
        Request::Produce(produce) => {
            Response::Produce(verification::produce(&rm, &verifier, produce).await)
        }
        Request::Fetch(fetch) => Response::Fetch(rm.fetch(fetch).await),
        Request::TxnOffsetCommit {
            ref txn,
            ref commit,
        } if rm.config.rules.transaction_version_2 => {
            let offsets = TopicPartition::new(
                OFFSETS_TOPIC,
                coordinator_partition(&commit.group, rm.config.offsets_topic_num_partitions),
            );
            match verification::add_offsets_partition(&rm, &verifier, txn, &offsets).await {
                Ok(()) => groups::handle(&rm, &groups, request).await,
                Err(error) => Response::OffsetCommit { error: Some(error) },
            }
        }
        Request::WriteTxnMarkers(markers) => {
            let answer = rm.write_txn_markers(&markers).await;
            if let Response::WriteTxnMarkers { markers: errors } = &answer {
                groups::txn_completed(&groups, &markers, errors);
            }
            answer
        }
        Request::OffsetsForLeaderEpoch(request) => {
            Response::OffsetsForLeaderEpoch(rm.offsets_for_leader_epoch(&request))
        }
        Request::ListOffsets {
            replica,
            isolation,
            tp,
            spec,
            current_leader_epoch,
        } => {
            let (error, offset) =
                rm.list_offsets(replica, isolation, &tp, spec, current_leader_epoch);
            Response::ListOffsets { error, offset }
        }
        Request::Metadata => Response::Metadata(rm.metadata.borrow().clone()),
        Request::InitProducerId => match controller_link::allocate_producer_id().await {
            Some(producer_id) => Response::InitProducerId {
                error: None,
                producer_id,
                producer_epoch: 0,
            },
            None => Response::InitProducerId {
                error: Some(ErrorCode::BrokerNotAvailable),
                producer_id: ProducerId::NONE,
                producer_epoch: -1,
            },
        },
        // Controller requests sent to a broker by mistake.
        Request::RegisterBroker { .. } => Response::RegisterBroker {
            error: Some(ErrorCode::BrokerNotAvailable),
        },
        Request::BrokerHeartbeat { .. } => Response::BrokerHeartbeat {
            fenced: true,
            metadata: None,
        },
        Request::AlterPartition(_) => Response::AlterPartition {
            error: Some(ErrorCode::BrokerNotAvailable),
            state: None,
        },
        Request::ControlledShutdown { .. } => Response::ControlledShutdown {
            error: Some(ErrorCode::BrokerNotAvailable),
            remaining: 0,
        },
        Request::AllocateProducerId => Response::AllocateProducerId {
            producer_id: ProducerId::NONE,
        },
        group @ (Request::FindCoordinator { .. }
        | Request::JoinGroup(_)
        | Request::SyncGroup(_)
        | Request::Heartbeat { .. }
        | Request::LeaveGroup { .. }
        | Request::OffsetCommit(_)
        | Request::TxnOffsetCommit { .. }
        | Request::OffsetFetch { .. }) => groups::handle(&rm, &groups, group).await,
        transactional @ (Request::FindTxnCoordinator { .. }
        | Request::InitTxnProducerId(_)
        | Request::AddPartitionsToTxn { .. }
        | Request::VerifyPartitionsInTxn { .. }
        | Request::AddOffsetsToTxn { .. }
        | Request::EndTxn { .. }) => txn::handle(&rm, &txns, transactional).await,
    }
}
