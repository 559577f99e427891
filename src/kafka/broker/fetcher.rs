//! The follower side of replication: one fetcher per leader broker, fetching every
//! partition this broker follows from that leader in one request (Kafka's
//! `ReplicaFetcherThread`, with `num.replica.fetchers` = 1).
//!
//! Each partition in a fetcher belongs to one *generation* of the partition (one leader,
//! one leader epoch). It leaves the fetcher as soon as the partition's role changes, and
//! every step re-checks that after every await before it touches the log. Under the
//! leader-epoch rule a partition first reconciles its log with the leader's
//! (OffsetsForLeaderEpoch, KIP-279 iterations), then joins the fetch from its LEO. The HW
//! it learns is the leader's HW as of the leader's answer: a round behind the leader, as
//! in Kafka. A partition that failed is held back for `replica.fetch.backoff.ms` while
//! the others go on; a request that failed holds back all of its partitions.

use super::partition::Partition;
use super::replica_manager::ReplicaManager;
use super::truncation::TruncationState;
use crate::config::kafka::IsolationLevel;
use crate::history::facts::kafka::Fact;
use crate::kafka::protocol::fetch_session::SessionHandler;
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    ErrorCode, Fetch, FetchPartition, FetchedPartition, OffsetSpec, OffsetsForLeaderEpoch, Request,
    Response,
};
use crate::kafka::storage::log::StorageError;
use crate::kafka::types::EpochEndOffset;
use crate::os::clock::{self, SimTime};
use crate::os::frame::NetError;
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use tokio::sync::Notify;

/// Why a partition did not fetch: it is held back, then tries again.
enum Backoff {
    /// Connecting or the call failed.
    Net(NetError),
    /// The leader answered with an error.
    Leader(ErrorCode),
    /// The leader answered, but not with what was asked.
    Unexpected,
    /// Our side failed: the append was rejected, or the log dir went offline.
    Local(String),
    /// The partition is gone from this broker (it is about to leave the fetcher).
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

/// A partition in its leader's fetcher.
struct Followed {
    generation: u64,
    leader_epoch: Epoch,
    /// Held back until then, after a failure.
    delayed_until: Option<SimTime>,
    /// The error of the last failure, until a fetch succeeds: facts record changes.
    failing: Option<String>,
}

/// The partitions one fetcher follows, a wake-up for when one is added, and the signal
/// that stops it.
#[derive(Default)]
struct FetchSet {
    partitions: RefCell<BTreeMap<TopicPartition, Followed>>,
    /// The fetch session with the leader (KIP-227), new with each connection.
    session: RefCell<SessionHandler>,
    added: Notify,
    closed: Cell<bool>,
    close: Notify,
}

impl FetchSet {
    /// Run a network step unless, or until, the fetcher is closed: a closed fetcher drops
    /// its connection, and with it the request in flight.
    async fn unless_closed<T>(&self, step: impl Future<Output = T>) -> Option<T> {
        if self.closed.get() {
            return None;
        }
        tokio::select! {
            biased;
            _ = self.close.notified() => None,
            out = step => Some(out),
        }
    }
}

/// This broker's fetchers, by the leader each fetches from (Kafka's
/// `ReplicaFetcherManager`), kept by the task that applies metadata.
#[derive(Default)]
pub struct Fetchers {
    by_leader: RefCell<BTreeMap<BrokerId, Rc<FetchSet>>>,
}

/// Follow `tp` from `leader` in this generation of the partition, in the leader's
/// fetcher; the fetcher starts if there is none.
pub fn follow(
    rm: &Rc<ReplicaManager>,
    fetchers: &Rc<Fetchers>,
    tp: TopicPartition,
    generation: u64,
    leader: BrokerId,
    leader_epoch: Epoch,
) {
    let followed = Followed {
        generation,
        leader_epoch,
        delayed_until: None,
        failing: None,
    };
    let mut by_leader = fetchers.by_leader.borrow_mut();
    if let Some(set) = by_leader.get(&leader) {
        set.partitions.borrow_mut().insert(tp, followed);
        set.added.notify_one();
        return;
    }
    let set = Rc::new(FetchSet::default());
    set.partitions.borrow_mut().insert(tp, followed);
    by_leader.insert(leader, set.clone());
    tokio::task::spawn_local(run(rm.clone(), fetchers.clone(), leader, set));
}

/// Kafka's `removeFetcherForPartitions` and `shutdownIdleFetcherThreads`, after a metadata
/// image was applied: partitions whose generation is over leave their fetcher, and a
/// fetcher left with none stops at once, even in the middle of a request (a leader that
/// went away must not hold a fetcher that a new generation will need).
pub fn shut_down_idle(rm: &ReplicaManager, fetchers: &Fetchers) {
    fetchers.by_leader.borrow_mut().retain(|_, set| {
        set.partitions
            .borrow_mut()
            .retain(|tp, followed| is_current(rm, tp, followed.generation));
        let idle = set.partitions.borrow().is_empty();
        if idle {
            set.closed.set(true);
            set.close.notify_waiters();
        }
        !idle
    });
}

/// What one fetch round asks for, and the generation and epoch of each partition asked.
struct Round {
    partitions: Vec<FetchPartition>,
    asked: Vec<(u64, Epoch)>,
}

impl Round {
    /// Each partition asked, with its generation: what a failed round holds back.
    fn asked(&self) -> impl Iterator<Item = (TopicPartition, u64)> + '_ {
        let asked = self.partitions.iter().zip(&self.asked);
        asked.map(|(p, &(generation, _))| (p.tp.clone(), generation))
    }
}

async fn run(rm: Rc<ReplicaManager>, fetchers: Rc<Fetchers>, leader: BrokerId, set: Rc<FetchSet>) {
    let mut connection: Option<Connection> = None;
    while keep_fetching(&rm, &fetchers, leader, &set) {
        let (mut round, truncating) = plan(&rm, &set);
        if round.partitions.is_empty() && truncating.is_empty() {
            let wait = idle_wait(&rm, &set);
            let _ = tokio::time::timeout(wait, set.added.notified()).await;
            continue;
        }
        if connection.as_ref().is_none_or(Connection::is_broken) {
            let connect =
                Connection::connect(HostName::Broker(leader.0), rm.config.replica_socket_timeout);
            connection = match set.unless_closed(connect).await {
                None => return,
                Some(Ok(connection)) => {
                    set.session.borrow_mut().reset();
                    Some(connection)
                }
                Some(Err(e)) => {
                    let all: Vec<_> = round
                        .asked()
                        .chain(truncating.iter().map(|(tp, g, _)| (tp.clone(), *g)))
                        .collect();
                    fail_all(&rm, leader, &set, &all, || Backoff::Net(e.clone()));
                    continue;
                }
            };
        }
        let Some(conn) = connection.as_mut() else {
            continue;
        };
        if !truncating.is_empty() {
            truncate(&rm, leader, &set, conn, truncating).await;
            // Those reconciled fetch in this round already.
            round = plan(&rm, &set).0;
        }
        if !round.partitions.is_empty() {
            fetch_round(&rm, leader, &set, conn, round).await;
        }
    }
}

/// A fetcher left with no partitions stops, as does every fetcher of a broker that
/// stopped or whose log dir went offline.
fn keep_fetching(
    rm: &ReplicaManager,
    fetchers: &Fetchers,
    leader: BrokerId,
    set: &Rc<FetchSet>,
) -> bool {
    // Partitions whose generation ended left at `shut_down_idle`, right after the metadata
    // that ended it: only the broker's own state is left to check.
    let running = !rm.offline.get() && !rm.stopped.get() && !set.closed.get();
    if !running {
        set.partitions.borrow_mut().clear();
    }
    if !set.partitions.borrow().is_empty() {
        return true;
    }
    let mut by_leader = fetchers.by_leader.borrow_mut();
    if by_leader.get(&leader).is_some_and(|s| Rc::ptr_eq(s, set)) {
        by_leader.remove(&leader);
    }
    false
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

fn is_delayed(followed: &Followed, now: SimTime) -> bool {
    followed.delayed_until.is_some_and(|until| until > now)
}

/// How long an idle fetcher sleeps: until its first held-back partition may go again.
fn idle_wait(rm: &ReplicaManager, set: &FetchSet) -> std::time::Duration {
    let now = clock::now();
    set.partitions
        .borrow()
        .values()
        .filter_map(|f| f.delayed_until.filter(|&until| until > now))
        .min()
        .map_or(rm.config.replica_fetch_backoff, |until| until - now)
}

/// This round's work, over the partitions not held back (all current, as the round
/// starts right after `keep_fetching`): what to fetch, and what must first reconcile its
/// log with the leader's (Kafka's `maybeTruncate` before `maybeFetch`).
fn plan(rm: &ReplicaManager, set: &FetchSet) -> (Round, Vec<(TopicPartition, u64, Epoch)>) {
    let now = clock::now();
    // Kafka 2.8+ followers send their last fetched epoch, so the leader can answer with
    // where their logs diverge (KAFKA-10554).
    let send_last_fetched_epoch = rm.config.replication_truncation.uses_leader_epochs()
        && rm.config.rules.diverging_epoch_in_fetch;
    let followed = set.partitions.borrow();
    let partitions = rm.partitions.borrow();
    let mut round = Round {
        partitions: Vec::with_capacity(followed.len()),
        asked: Vec::with_capacity(followed.len()),
    };
    let mut truncating = Vec::new();
    for (tp, f) in followed.iter().filter(|(_, f)| !is_delayed(f, now)) {
        let Some(partition) = partitions
            .get(tp)
            .filter(|p| p.generation() == f.generation)
        else {
            continue;
        };
        if partition.truncation_pending() {
            truncating.push((tp.clone(), f.generation, f.leader_epoch));
            continue;
        }
        round.partitions.push(FetchPartition {
            tp: tp.clone(),
            fetch_offset: partition.log().log_end_offset(),
            current_leader_epoch: fencing_epoch(rm, f.leader_epoch),
            last_fetched_epoch: if send_last_fetched_epoch {
                partition.log().epochs().latest_epoch()
            } else {
                None
            },
            max_bytes: rm.config.replica_fetch_max_bytes,
        });
        round.asked.push((f.generation, f.leader_epoch));
    }
    (round, truncating)
}

/// Reconcile, one at a time, the partitions that must before they fetch.
async fn truncate(
    rm: &ReplicaManager,
    leader: BrokerId,
    set: &FetchSet,
    connection: &mut Connection,
    truncating: Vec<(TopicPartition, u64, Epoch)>,
) {
    for (tp, generation, leader_epoch) in truncating {
        if connection.is_broken() || !is_current(rm, &tp, generation) {
            continue;
        }
        let result = reconcile(rm, set, &tp, generation, leader_epoch, connection).await;
        settle(rm, leader, set, &tp, generation, result);
    }
}

/// One Fetch of every ready partition, in the fetch session; the answers, the partitions
/// with news, are applied in order.
async fn fetch_round(
    rm: &ReplicaManager,
    leader: BrokerId,
    set: &FetchSet,
    connection: &mut Connection,
    round: Round,
) {
    let session = set.session.borrow_mut().build(&round.partitions);
    let request = Request::Fetch(Fetch {
        replica: Some(rm.id),
        replica_epoch: rm.config.rules.isr_broker_epochs.then_some(rm.incarnation),
        isolation: IsolationLevel::ReadUncommitted,
        max_wait_ms: rm.config.replica_fetch_wait_max.as_millis() as u64,
        min_bytes: rm.config.replica_fetch_min_bytes,
        session_id: session.session_id,
        session_epoch: session.session_epoch,
        partitions: session.partitions,
        forgotten: session.forgotten,
    });
    let call = connection.call(&request, rm.config.replica_socket_timeout);
    let answer = set.unless_closed(call).await;
    let all = || -> Vec<_> { round.asked().collect() };
    let response = match answer {
        None => return,
        Some(Ok(Response::Fetch(response))) => response,
        Some(Ok(_)) => {
            set.session.borrow_mut().reset();
            return fail_all(rm, leader, set, &all(), || Backoff::Unexpected);
        }
        Some(Err(e)) => {
            set.session.borrow_mut().reset();
            return fail_all(rm, leader, set, &all(), || Backoff::Net(e.clone()));
        }
    };
    if !set.session.borrow_mut().handle_response(&response) {
        // The leader lost the session: the next round opens a new one.
        return;
    }
    // The answer holds the partitions with news, in order; the round's are sorted too.
    for answer in response.partitions {
        let found = round.partitions.binary_search_by(|p| p.tp.cmp(&answer.tp));
        let Ok(i) = found else {
            continue;
        };
        let (tp, (generation, leader_epoch)) = (&round.partitions[i].tp, round.asked[i]);
        let ask = Ask {
            tp,
            generation,
            leader_epoch,
            fetch_offset: round.partitions[i].fetch_offset,
        };
        let result = apply_answer(rm, set, &ask, answer, connection).await;
        settle(rm, leader, set, tp, generation, result);
    }
}

/// One partition's place in a fetch that was answered.
struct Ask<'a> {
    tp: &'a TopicPartition,
    generation: u64,
    leader_epoch: Epoch,
    fetch_offset: Offset,
}

/// Apply the leader's answer for one partition, if the partition is still in the
/// generation it was asked for.
async fn apply_answer(
    rm: &ReplicaManager,
    set: &FetchSet,
    ask: &Ask<'_>,
    answer: FetchedPartition,
    connection: &mut Connection,
) -> Result<(), Backoff> {
    let tp = ask.tp;
    match answer.error {
        None => apply_fetch(rm, tp, ask.generation, ask.fetch_offset, answer).await,
        Some(_) if !is_current(rm, tp, ask.generation) => Ok(()),
        Some(ErrorCode::OffsetOutOfRange) => {
            out_of_range(
                rm,
                set,
                tp,
                ask.generation,
                ask.leader_epoch,
                &answer,
                connection,
            )
            .await
        }
        Some(code) => Err(Backoff::Leader(code)),
    }
}

/// Record how a partition's step went: a failure holds it back (and is a fact when its
/// error changed); a success after failures is a fact too.
fn settle(
    rm: &ReplicaManager,
    leader: BrokerId,
    set: &FetchSet,
    tp: &TopicPartition,
    generation: u64,
    result: Result<(), Backoff>,
) {
    let mut partitions = set.partitions.borrow_mut();
    let Some(followed) = partitions
        .get_mut(tp)
        .filter(|f| f.generation == generation)
    else {
        return;
    };
    if matches!(result, Ok(())) && followed.failing.is_none() {
        return;
    }
    if !is_current(rm, tp, generation) {
        return;
    }
    match result {
        Ok(()) => {
            if followed.failing.take().is_some() {
                rm.facts.record(Fact::FetchResumed {
                    tp: tp.clone(),
                    broker: rm.id,
                    leader,
                });
            }
        }
        Err(failure) => {
            followed.delayed_until = Some(clock::now() + rm.config.replica_fetch_backoff);
            let error = failure.to_string();
            if followed.failing.as_deref() != Some(error.as_str()) {
                rm.facts.record(Fact::FetchFailed {
                    tp: tp.clone(),
                    broker: rm.id,
                    leader,
                    error: error.clone(),
                });
                followed.failing = Some(error);
            }
        }
    }
}

fn fail_all(
    rm: &ReplicaManager,
    leader: BrokerId,
    set: &FetchSet,
    partitions: &[(TopicPartition, u64)],
    failure: impl Fn() -> Backoff,
) {
    for (tp, generation) in partitions {
        settle(rm, leader, set, tp, *generation, Err(failure()));
    }
}

/// Append what the leader sent (flushing if the policy says so), learn the HW, or
/// truncate where the leader says our log diverges.
async fn apply_fetch(
    rm: &ReplicaManager,
    tp: &TopicPartition,
    generation: u64,
    fetch_offset: Offset,
    response: FetchedPartition,
) -> Result<(), Backoff> {
    if let Some(diverging) = response.diverging_epoch {
        if !is_current(rm, tp, generation) {
            return Ok(());
        }
        return truncate_step(rm, tp, diverging, "diverging-epoch").map(|_| ());
    }
    if !response.records.is_empty() {
        // A follower's append is a write like any other: a slow or throttled disk holds
        // the fetcher here, and with it the next fetch that would report the new LEO.
        rm.disk.write_gate().await;
    }
    if rm.offline.get() || rm.stopped.get() {
        return Ok(());
    }
    let flush = {
        let mut partitions = rm.partitions.borrow_mut();
        let partition = partitions.get_mut(tp).ok_or(Backoff::Gone)?;
        if partition.generation() != generation || partition.log().log_end_offset() != fetch_offset
        {
            return Ok(());
        }
        if let Err(e) = partition.update(|p| {
            p.on_fetch_response(
                &response.records,
                response.high_watermark,
                rm.config.replication_truncation,
                clock::now(),
            )
        }) {
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
    set: &FetchSet,
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
            .update(|p| p.reconcile_without_epoch(clock::now()))
            .map_err(|e| storage_failed(rm, partition, &e));
    };
    let answer = ask_epoch_end(rm, set, tp, leader_epoch, latest, connection).await?;
    if !is_current(rm, tp, generation) {
        return Ok(());
    }
    truncate_step(rm, tp, answer, "leader-epoch").map(|_| ())
}

/// The leader's LEO, as ListOffsets LATEST answers a replica.
async fn ask_log_end(
    rm: &ReplicaManager,
    set: &FetchSet,
    tp: &TopicPartition,
    leader_epoch: Epoch,
    connection: &mut Connection,
) -> Result<Offset, Backoff> {
    let request = Request::ListOffsets {
        replica: Some(rm.id),
        isolation: IsolationLevel::ReadUncommitted,
        tp: tp.clone(),
        spec: OffsetSpec::Latest,
        current_leader_epoch: fencing_epoch(rm, leader_epoch),
    };
    let call = connection.call(&request, rm.config.replica_socket_timeout);
    match set.unless_closed(call).await {
        None => Err(Backoff::Gone),
        Some(Ok(Response::ListOffsets {
            error: None,
            offset,
        })) => Ok(offset),
        Some(Ok(Response::ListOffsets {
            error: Some(code), ..
        })) => Err(Backoff::Leader(code)),
        Some(Ok(_)) => Err(Backoff::Unexpected),
        Some(Err(e)) => Err(Backoff::Net(e)),
    }
}

/// The leader epoch a follower's request names for the leader to check (KIP-320, 2.1);
/// before, none (`Epoch::NONE`, which the leader does not check).
fn fencing_epoch(rm: &ReplicaManager, leader_epoch: Epoch) -> Epoch {
    if rm.config.rules.fetch_current_leader_epoch {
        leader_epoch
    } else {
        Epoch::NONE
    }
}

async fn ask_epoch_end(
    rm: &ReplicaManager,
    set: &FetchSet,
    tp: &TopicPartition,
    current_leader_epoch: Epoch,
    leader_epoch: Epoch,
    connection: &mut Connection,
) -> Result<EpochEndOffset, Backoff> {
    let request = Request::OffsetsForLeaderEpoch(OffsetsForLeaderEpoch {
        replica: rm.id,
        tp: tp.clone(),
        current_leader_epoch: fencing_epoch(rm, current_leader_epoch),
        leader_epoch,
    });
    let call = connection.call(&request, rm.config.replica_socket_timeout);
    match set.unless_closed(call).await {
        None => Err(Backoff::Gone),
        Some(Ok(Response::OffsetsForLeaderEpoch(response))) => match response.error {
            None => Ok(response.end),
            Some(code) => Err(Backoff::Leader(code)),
        },
        Some(Ok(_)) => Err(Backoff::Unexpected),
        Some(Err(e)) => Err(Backoff::Net(e)),
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
        .update(|p| {
            p.on_epoch_end(
                answer,
                rm.config.replication_truncation,
                reason,
                clock::now(),
            )
        })
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
/// asked with ListOffsets as a replica. Or we are below its log start: start over there
/// (Kafka's `handleOutOfRangeOffset`).
async fn out_of_range(
    rm: &ReplicaManager,
    set: &FetchSet,
    tp: &TopicPartition,
    generation: u64,
    leader_epoch: Epoch,
    response: &FetchedPartition,
    connection: &mut Connection,
) -> Result<(), Backoff> {
    let leader_leo = ask_log_end(rm, set, tp, leader_epoch, connection).await?;
    let out_of_range = Backoff::Leader(ErrorCode::OffsetOutOfRange);
    if !is_current(rm, tp, generation) || leader_leo == Offset::NONE {
        return Err(out_of_range);
    }
    let mut partitions = rm.partitions.borrow_mut();
    let partition = partitions.get_mut(tp).ok_or(Backoff::Gone)?;
    let leo = partition.log().log_end_offset();
    if leader_leo < leo {
        if !rm.config.rules.out_of_range_never_fatal && !rm.unclean_leader_election(&tp.topic) {
            rm.exit_on_truncation_not_allowed(tp, leader_leo, leo);
            return Err(Backoff::Local(
                "exiting: log truncation is not allowed".into(),
            ));
        }
        return partition
            .update(|p| p.on_leader_leo_below_ours(leader_leo, clock::now()))
            .map_err(|e| storage_failed(rm, partition, &e));
    }
    if response.log_start_offset > leo {
        tracing::info!(%tp, from = %leo, to = %response.log_start_offset, "fetch below leader log start: starting over");
        if let Err(e) =
            partition.update(|p| p.start_over_at(response.log_start_offset, clock::now()))
        {
            drop(partitions);
            rm.storage_failed(&tp.to_string(), &e);
        }
        return Err(out_of_range);
    }
    Err(out_of_range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::bugs::Bugs;
    use crate::config::kafka::BrokerConfig;
    use crate::history::facts::Facts;
    use crate::kafka::protocol::messages::{ClusterMetadata, PartitionState};
    use crate::kafka::types::{Incarnation, PartitionEpoch};
    use crate::os::disk::{Disk, DiskConfig};

    /// Metadata `version` in which `leaders[p]` leads partition `p` of `t` in `epoch`;
    /// broker 1 holds a replica of each.
    fn image(version: u64, epoch: i32, leaders: &[u32]) -> ClusterMetadata {
        let mut image = ClusterMetadata {
            version,
            ..ClusterMetadata::default()
        };
        for (p, &leader) in leaders.iter().enumerate() {
            let state = PartitionState {
                replicas: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
                leader: Some(BrokerId(leader)),
                leader_epoch: Epoch(epoch),
                partition_epoch: PartitionEpoch(epoch),
                isr: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
                elr: Vec::new(),
                last_known_leader: None,
            };
            image
                .partitions
                .insert(TopicPartition::new("t", p as u32), state);
        }
        image
    }

    /// Kafka's `shutdownIdleFetcherThreads`: once the metadata moves every partition of
    /// a fetcher away from its leader, the fetcher is closed at once (its request in
    /// flight with it); a fetcher that keeps one partition is kept.
    #[test]
    fn a_fetcher_left_without_partitions_is_closed_at_once() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let _runtime = runtime.enter();
        let local = tokio::task::LocalSet::new();
        let _local = local.enter();
        let rm = Rc::new(ReplicaManager::new(
            BrokerId(1),
            Incarnation(1),
            BrokerConfig::default(),
            BTreeMap::new(),
            Disk::new(DiskConfig::default(), 1),
            Facts::default(),
            Bugs::default(),
        ));
        let fetchers = Rc::new(Fetchers::default());
        let apply = |image| {
            for (tp, generation, leader, epoch) in rm.apply_metadata(image) {
                follow(&rm, &fetchers, tp, generation, leader, epoch);
            }
            shut_down_idle(&rm, &fetchers);
        };
        // Broker 2 leads partitions 0 and 1, broker 3 leads partition 2.
        apply(image(1, 1, &[2, 2, 3]));
        let set = |leader| fetchers.by_leader.borrow().get(&BrokerId(leader)).cloned();
        let (from_2, from_3) = (set(2).expect("a fetcher"), set(3).expect("a fetcher"));
        assert_eq!(from_2.partitions.borrow().len(), 2, "one fetcher for both");
        // Partition 0 moves to broker 3; partition 2 moves to broker 1 itself.
        apply(image(2, 2, &[3, 2, 1]));
        assert!(!from_2.closed.get(), "it still follows partition 1");
        assert_eq!(from_2.partitions.borrow().len(), 1);
        assert!(
            Rc::ptr_eq(&set(3).expect("kept"), &from_3),
            "partition 0 joins the fetcher broker 3 already had"
        );
        let followed: Vec<u32> = from_3
            .partitions
            .borrow()
            .keys()
            .map(|tp| tp.partition)
            .collect();
        assert_eq!(followed, vec![0], "partition 2 is led here now: it left");
        // Broker 1 leads everything: both fetchers are idle and closed.
        apply(image(3, 3, &[1, 1, 1]));
        assert!(from_2.closed.get() && from_3.closed.get());
        assert!(fetchers.by_leader.borrow().is_empty());
    }
}
