//! The follower side of replication: one fetch loop per followed partition.
//!
//! The loop belongs to one *generation* of the partition (one leader, one leader epoch);
//! it stops as soon as the partition's role changes, and re-checks that after every
//! await before it touches the log. Under the leader-epoch rule it first reconciles the
//! log with the leader's (OffsetsForLeaderEpoch, KIP-279 iterations), then fetches from
//! its LEO. The HW it learns is the leader's HW as of the leader's answer — a round
//! behind the leader, as in Kafka.

use super::partition::Partition;
use super::replica_manager::ReplicaManager;
use super::truncation::TruncationState;
use crate::config::Truncation;
use crate::history::facts::Fact;
use crate::os::clock;
use crate::protocol::frame::{Connection, NetError};
use crate::protocol::messages::{
    ErrorCode, Fetch, FetchResponse, OffsetsForLeaderEpoch, Request, Response,
};
use crate::storage::log::StorageError;
use crate::types::EpochEndOffset;
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::rc::Rc;

/// Why one round of the loop did not fetch: back off, then try again.
enum Backoff {
    /// Connecting or the call failed.
    Net(NetError),
    /// The leader answered with an error.
    Leader(ErrorCode),
    /// The leader answered, but not with what was asked.
    Unexpected,
    /// Our side failed: the append was rejected, or the log dir went offline.
    Local(String),
    /// The partition is gone from this broker (the loop is about to stop).
    Gone,
}

impl std::fmt::Display for Backoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backoff::Net(e) => write!(f, "{e}"),
            Backoff::Leader(code) => f.write_str(code.name()),
            Backoff::Unexpected => f.write_str("unexpected response"),
            Backoff::Local(e) => write!(f, "{e}"),
            Backoff::Gone => f.write_str("partition gone"),
        }
    }
}

pub async fn run(
    rm: Rc<ReplicaManager>,
    tp: TopicPartition,
    generation: u64,
    leader: BrokerId,
    leader_epoch: Epoch,
) {
    let mut connection: Option<Connection> = None;
    // The error of the last failed round, until a round succeeds: facts record changes.
    let mut failing: Option<String> = None;
    while is_current(&rm, &tp, generation) {
        if connection.as_ref().is_none_or(Connection::is_broken) {
            connection = match Connection::connect(
                HostName::Broker(leader.0),
                rm.config.replica_socket_timeout_ms,
            )
            .await
            {
                Ok(connection) => Some(connection),
                Err(e) => {
                    record_failure(&rm, &tp, generation, leader, &mut failing, Backoff::Net(e));
                    None
                }
            };
        }
        let round = match connection.as_mut() {
            None => Err(None),
            Some(connection) => fetch_round(&rm, &tp, generation, leader_epoch, connection)
                .await
                .map_err(Some),
        };
        match round {
            Ok(()) => {
                if failing.take().is_some() {
                    rm.facts.record(Fact::FetchResumed {
                        tp: tp.clone(),
                        broker: rm.id,
                        leader,
                    });
                }
            }
            Err(failure) => {
                if let Some(failure) = failure {
                    record_failure(&rm, &tp, generation, leader, &mut failing, failure);
                }
                tokio::time::sleep(rm.config.replica_fetch_backoff_ms).await;
            }
        }
    }
}

/// Record a failed round as a fact when its error differs from the last one recorded.
fn record_failure(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    generation: u64,
    leader: BrokerId,
    failing: &mut Option<String>,
    failure: Backoff,
) {
    if !is_current(rm, tp, generation) {
        return;
    }
    let error = failure.to_string();
    if failing.as_deref() != Some(error.as_str()) {
        rm.facts.record(Fact::FetchFailed {
            tp: tp.clone(),
            broker: rm.id,
            leader,
            error: error.clone(),
        });
        *failing = Some(error);
    }
}

fn is_current(rm: &ReplicaManager, tp: &TopicPartition, generation: u64) -> bool {
    !rm.offline.get()
        && !rm.stopped.get()
        && rm
            .partitions
            .borrow()
            .get(tp)
            .is_some_and(|p| p.generation() == generation)
}

async fn fetch_round(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    generation: u64,
    leader_epoch: Epoch,
    connection: &mut Connection,
) -> Result<(), Backoff> {
    let truncation_pending = rm
        .partitions
        .borrow()
        .get(tp)
        .is_some_and(Partition::truncation_pending);
    if truncation_pending {
        return reconcile(rm, tp, generation, leader_epoch, connection).await;
    }
    let leader_epoch_rule = rm.config.replication_truncation == Truncation::LeaderEpoch;
    let request = {
        let partitions = rm.partitions.borrow();
        let partition = partitions.get(tp).ok_or(Backoff::Gone)?;
        Fetch {
            replica: Some(rm.id),
            tp: tp.clone(),
            fetch_offset: partition.log().log_end_offset(),
            current_leader_epoch: leader_epoch,
            last_fetched_epoch: if leader_epoch_rule {
                partition.log().epochs().latest_epoch()
            } else {
                None
            },
            max_bytes: rm.config.replica_fetch_max_bytes,
            max_wait_ms: rm.config.replica_fetch_wait_max_ms.as_millis() as u64,
            min_bytes: rm.config.replica_fetch_min_bytes,
        }
    };
    let timeout = rm.config.replica_socket_timeout_ms;
    let response = match connection
        .call(&Request::Fetch(request.clone()), timeout)
        .await
    {
        Ok(Response::Fetch(response)) => response,
        Ok(_) => return Err(Backoff::Unexpected),
        Err(e) => return Err(Backoff::Net(e)),
    };
    if !is_current(rm, tp, generation) {
        return Ok(());
    }
    match response.error {
        None => apply_fetch(rm, tp, request.fetch_offset, response).await,
        Some(ErrorCode::OffsetOutOfRange) => {
            out_of_range(rm, tp, generation, leader_epoch, &response, connection).await
        }
        Some(code) => Err(Backoff::Leader(code)),
    }
}

/// Append what the leader sent (flushing if the policy says so), learn the HW, or
/// truncate where the leader says our log diverges.
async fn apply_fetch(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    fetch_offset: Offset,
    response: FetchResponse,
) -> Result<(), Backoff> {
    if let Some(diverging) = response.diverging_epoch {
        return truncate_step(rm, tp, diverging, "diverging-epoch").map(|_| ());
    }
    let flush = {
        let mut partitions = rm.partitions.borrow_mut();
        let partition = partitions.get_mut(tp).ok_or(Backoff::Gone)?;
        if partition.log().log_end_offset() != fetch_offset {
            return Ok(());
        }
        if let Err(e) = partition.on_fetch_response(
            &response.records,
            response.high_watermark,
            rm.config.replication_truncation,
            clock::now(),
        ) {
            drop(partitions);
            // An I/O error takes the log dir offline; bad bytes from the leader do not:
            // Kafka's fetcher logs them and retries after the backoff.
            if matches!(e, StorageError::Disk(_)) {
                rm.storage_failed(&tp.to_string(), &e);
            } else {
                tracing::warn!(%tp, error = %e, "follower append rejected");
            }
            return Err(Backoff::Local(format!("append failed: {e}")));
        }
        // The flush policy applies to followers' appends too (Kafka's `Log.append`); a
        // rolled segment is flushed as on the leader.
        let log = partition.log();
        log.flush_needed() || log.roll_flush_pending()
    };
    if flush && rm.flush(tp).await.is_err() {
        return Err(Backoff::Local("flush failed".to_string()));
    }
    Ok(())
}

/// Leader-epoch rule: ask the leader where our last epoch ends on its log and truncate
/// there, repeating while the epoch histories disagree (KIP-279).
async fn reconcile(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    generation: u64,
    leader_epoch: Epoch,
    connection: &mut Connection,
) -> Result<(), Backoff> {
    let latest = rm
        .partitions
        .borrow()
        .get(tp)
        .and_then(|p| p.log().epochs().latest_epoch());
    let Some(latest) = latest else {
        let mut partitions = rm.partitions.borrow_mut();
        let partition = partitions.get_mut(tp).ok_or(Backoff::Gone)?;
        return partition
            .reconcile_without_epoch(clock::now())
            .map_err(|e| storage_failed(rm, partition, &e));
    };
    let answer = ask_epoch_end(rm, tp, leader_epoch, latest, connection).await?;
    if !is_current(rm, tp, generation) {
        return Ok(());
    }
    truncate_step(rm, tp, answer, "leader-epoch").map(|_| ())
}

async fn ask_epoch_end(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    current_leader_epoch: Epoch,
    leader_epoch: Epoch,
    connection: &mut Connection,
) -> Result<EpochEndOffset, Backoff> {
    let request = Request::OffsetsForLeaderEpoch(OffsetsForLeaderEpoch {
        replica: rm.id,
        tp: tp.clone(),
        current_leader_epoch,
        leader_epoch,
    });
    match connection
        .call(&request, rm.config.replica_socket_timeout_ms)
        .await
    {
        Ok(Response::OffsetsForLeaderEpoch(response)) => match response.error {
            None => Ok(response.end),
            Some(code) => Err(Backoff::Leader(code)),
        },
        Ok(_) => Err(Backoff::Unexpected),
        Err(e) => Err(Backoff::Net(e)),
    }
}

/// One step of the leader-epoch rule against the leader's `answer`.
fn truncate_step(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    answer: EpochEndOffset,
    reason: &'static str,
) -> Result<TruncationState, Backoff> {
    let mut partitions = rm.partitions.borrow_mut();
    let partition = partitions.get_mut(tp).ok_or(Backoff::Gone)?;
    partition
        .on_epoch_end(answer, reason, clock::now())
        .map_err(|e| storage_failed(rm, partition, &e))
}

/// A truncation failed: the log dir goes offline (its waiters are woken by `run`, as the
/// partitions are borrowed here).
fn storage_failed(rm: &ReplicaManager, partition: &Partition, error: &StorageError) -> Backoff {
    rm.storage_failed(&partition.tp().to_string(), error);
    Backoff::Local(format!("log dir offline: {error}"))
}

/// OFFSET_OUT_OF_RANGE: our LEO is past the leader's (an unclean election, or the
/// pre-KIP-101 rule keeping more than the new leader has): truncate to the leader's LEO,
/// learnt as the end of its current epoch. Or we are below its log start: start over
/// there (Kafka's `handleOutOfRangeOffset`).
async fn out_of_range(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    generation: u64,
    leader_epoch: Epoch,
    response: &FetchResponse,
    connection: &mut Connection,
) -> Result<(), Backoff> {
    let leader_leo = ask_epoch_end(rm, tp, leader_epoch, leader_epoch, connection)
        .await?
        .end_offset;
    let out_of_range = Backoff::Leader(ErrorCode::OffsetOutOfRange);
    if !is_current(rm, tp, generation) || leader_leo == Offset::NONE {
        return Err(out_of_range);
    }
    let mut partitions = rm.partitions.borrow_mut();
    let partition = partitions.get_mut(tp).ok_or(Backoff::Gone)?;
    let leo = partition.log().log_end_offset();
    if leader_leo < leo {
        return partition
            .on_leader_leo_below_ours(leader_leo, clock::now())
            .map_err(|e| storage_failed(rm, partition, &e));
    }
    if response.log_start_offset > leo {
        tracing::info!(%tp, from = %leo, to = %response.log_start_offset, "fetch below leader log start: starting over");
        if let Err(e) = partition.start_over_at(response.log_start_offset, clock::now()) {
            drop(partitions);
            rm.storage_failed(&tp.to_string(), &e);
        }
        return Err(out_of_range);
    }
    Err(out_of_range)
}
