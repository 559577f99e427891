//! Brokers: the replica manager, partitions as leader or follower, fetchers, purgatory.
//!
//! ## Model
//! A broker hosts one log dir on its simulated disk. It learns leadership from the
//! controller's metadata (brought by its heartbeat long poll), leads some partitions and
//! follows others. Followers pull (Fetch from their LEO); the leader tracks each
//! follower's LEO and caught-up time, computes the HW over the ISR, proposes ISR changes
//! to the controller, and answers `acks=all` produces once the HW passes them. The rules
//! are plain functions in [`hw`], [`isr`], [`purgatory`] and [`truncation`]; the rest moves
//! bytes and waits on timers.
//!
//! ## What is simplified, and why
//! - **One fetcher per leader** (`num.replica.fetchers` = 1), fetching every partition
//!   it follows from that leader in one request, as Kafka's `ReplicaFetcherThread` does; it
//!   stops when its last partition leaves, and a leader elected again keeps its fetcher
//!   (with any request still in flight to it).
//! - **Fetch sessions (KIP-227) for followers only**: a follower's fetch names only the
//!   partitions that changed and the answer carries only those with news
//!   (`protocol::fetch_session`); a consumer's fetch names all its partitions, as Kafka's
//!   did before 1.1. One session per follower at each leader, where Kafka's cache holds
//!   up to `max.incremental.fetch.session.cache.slots` and evicts.
//! - **Fetch-from-follower (KIP-392), compaction, quotas, and multiple log dirs are
//!   absent**: they do not change what is lost or kept.
//!   With one log dir, a storage error halts the broker (Kafka halts when its last log dir
//!   goes offline): in-flight requests get KAFKA_STORAGE_ERROR and `run` returns without
//!   a clean-shutdown marker.
//! - **Fetch timing is Kafka's, not simplified**: the leader reads, then records the
//!   follower's fetch offset (`ReplicaManager.fetchMessages`), so a response with data
//!   carries the HW from before that fetch; a fetch with nothing to return waits up to
//!   `replica.fetch.wait.max.ms` and completes on new data, a leadership change or the
//!   timeout, not on an HW move. Hence a follower's HW trails the leader's by a round.
//!   A fetch of many partitions waits for `fetch.min.bytes` / `replica.fetch.min.bytes`
//!   over all of them, and is answered at once when any has an error or a divergence.
//! - **Divergence is found as the release finds it**: by OffsetsForLeaderEpoch on becoming
//!   follower (KIP-101/279), and from 2.8 by `diverging_epoch` in fetch responses, a new
//!   follower whose log has an epoch then skipping the OffsetsForLeaderEpoch round
//!   (KAFKA-10554); an empty log still asks. Both reach the same truncation by the same
//!   rule ([`truncation::leader_epoch_truncation`]).
//!   Under the high-watermark rule followers send no last fetched epoch, as pre-0.11
//!   followers had none, so only the HW (and OFFSET_OUT_OF_RANGE) decide truncation.
//! - **A pre-KIP-101 follower whose LEO is inside a leader's batch takes the batch's tail**
//!   (`record::records_from`): 0.10's message formats gave every message its own offset,
//!   so a fetch from the LEO returned exactly the messages from there; v2 serves whole
//!   batches. The leader-epoch rule never needs this, and refuses such a batch as Kafka's
//!   v2 follower does.
//! - **Pre-KIP-101 truncation happens on becoming follower only** (with the checkpointed
//!   HW after a restart, since a restarted broker first follows); a restarted broker that
//!   becomes leader at once keeps its log, as Kafka 0.10 did.
//! - **A follower does not copy the leader's log start offset**: retention runs on every
//!   replica by its own clock and HW, so logs may start at different offsets.
//! - **AlterPartition is one request per partition on a fresh connection**, sent again
//!   until the controller answers, as Kafka's `AlterPartitionManager` does; a refused
//!   proposal is dropped and proposed again when the leader next finds the difference
//!   (that follower's next fetch, or the next ISR check). The HW is computed over the
//!   *maximal* ISR (committed plus a pending addition), as in Kafka since KIP-497.
//! - **The flush scheduler is Kafka's**: `log.flush.interval.ms` acts only when
//!   `log.flush.scheduler.interval.ms` (default: never) makes the flusher run.
//! - **`acks=0` produces get an answer** (after the append, like `acks=1`): our protocol
//!   is request/response; Kafka sends none, and a producer with `acks=0` need not read it.
//! - **InitProducerId** asks the controller for one producer id per call (KRaft hands
//!   brokers blocks of ids); an idempotent producer's epoch is always 0. A transactional
//!   producer's goes to its transaction coordinator ([`txn`]), which bumps the epoch and
//!   so fences older instances.
//! - **Time** is simulated milliseconds since the run began, the clock the storage layer
//!   stamps segments with.

pub mod controller_link;
pub mod fetcher;
pub mod groups;
pub mod hw;
pub mod isr;
pub mod partition;
pub mod purgatory;
pub mod replica_manager;
pub mod scheduler;
pub mod server;
pub mod truncation;
pub mod txn;
pub mod verification;

use crate::config::bugs::Bugs;
use crate::config::kafka::{BrokerConfig, TopicConfig};
use crate::history::facts::kafka::Fact;
use crate::history::facts::Facts;
use crate::kafka::storage::checkpoint;
use crate::kafka::storage::log::Log;
use crate::kafka::types::Incarnation;
use crate::os::clock;
use crate::os::disk::Disk;
use crate::types::{BrokerId, Offset, TopicPartition};
use replica_manager::ReplicaManager;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

pub struct BrokerContext {
    pub id: BrokerId,
    pub incarnation: Incarnation,
    pub config: BrokerConfig,
    pub topic_configs: BTreeMap<String, TopicConfig>,
    pub disk: Disk,
    /// Set by the world for the `shutdown` action: controlled shutdown, then `run` returns Ok.
    pub shutdown: Rc<Cell<bool>>,
    /// Where the broker records its follower truncations and log recoveries.
    pub facts: Facts,
    /// Bugs a mutation test injected (none in any real run).
    pub bugs: Bugs,
    /// This process's own random choices (the registration backoff's jitter).
    pub seed: u64,
}

/// How many times a controlled shutdown asks the controller to move leadership away
/// (Kafka's `controlled.shutdown.max.retries` is 3; the controller here may be slower to
/// elect, hence more).
const CONTROLLED_SHUTDOWN_ATTEMPTS: u32 = 10;

/// Time for responses already decided (KAFKA_STORAGE_ERROR) to leave before the broker halts.
const HALT_GRACE: Duration = Duration::from_millis(20);

/// A broker process: start-up (log recovery), serving, replication, until a controlled
/// shutdown or a storage error stops it. Never returns `Err`: that would abort the run.
pub async fn run(ctx: BrokerContext) -> turmoil::Result {
    let rm = Rc::new(ReplicaManager::new(
        ctx.id,
        ctx.incarnation,
        ctx.config,
        ctx.topic_configs,
        ctx.disk,
        ctx.facts,
        ctx.bugs,
    ));
    tracing::info!(
        broker = rm.id.0,
        incarnation = %rm.incarnation,
        "broker starting"
    );
    if start_up(&rm).await.is_err() {
        return Ok(());
    }
    let groups = Rc::new(groups::Groups::new(&rm.config));
    // Only a cluster with a consumer group has the offsets topic, and a coordinator to run.
    if rm
        .topic_configs
        .contains_key(groups::coordinator::OFFSETS_TOPIC)
    {
        tokio::task::spawn_local(groups::run(rm.clone(), groups.clone()));
    }
    let txns = Rc::new(txn::Txns::new(&rm.config));
    // Only a cluster with a transactional producer has the transaction state topic.
    if rm
        .topic_configs
        .contains_key(txn::coordinator::TRANSACTION_STATE_TOPIC)
    {
        tokio::task::spawn_local(txn::run(rm.clone(), txns.clone()));
    }
    let verifier = Rc::new(verification::Verifier::default());
    let server = rm.clone();
    tokio::task::spawn_local(async move {
        let handler = move |request, _peer| {
            server::handle(
                server.clone(),
                groups.clone(),
                txns.clone(),
                verifier.clone(),
                request,
            )
        };
        if let Err(e) = crate::kafka::protocol::frame::serve(handler).await {
            tracing::error!(error = %e, "cannot listen");
        }
    });
    let link = rm.clone();
    let seed = ctx.seed;
    tokio::task::spawn_local(async move {
        controller_link::register(&link, seed).await;
        controller_link::heartbeat_loop(link).await;
    });
    tokio::task::spawn_local(controller_link::alter_partition_loop(rm.clone()));
    tokio::task::spawn_local(scheduler::isr_expiration(rm.clone()));
    tokio::task::spawn_local(scheduler::hw_checkpoint(rm.clone()));
    tokio::task::spawn_local(scheduler::recovery_point_checkpoint(rm.clone()));
    tokio::task::spawn_local(scheduler::flusher(rm.clone()));
    tokio::task::spawn_local(scheduler::retention(rm.clone()));
    loop {
        tokio::time::sleep(scheduler::POLL).await;
        if rm.exiting.get() {
            rm.wake_all();
            tokio::time::sleep(HALT_GRACE).await;
            return Ok(());
        }
        if rm.offline.get() {
            tracing::error!(broker = rm.id.0, "halting: log dir offline");
            rm.wake_all();
            tokio::time::sleep(HALT_GRACE).await;
            return Ok(());
        }
        if ctx.shutdown.get() {
            shut_down(&rm).await;
            return Ok(());
        }
    }
}

/// Read the clean-shutdown marker (and delete it, durably, so that a crash from now on
/// means recovery), the checkpoints, and open every partition dir's log.
async fn start_up(rm: &ReplicaManager) -> Result<(), ()> {
    let disk = &rm.disk;
    let clean_shutdown = disk.exists(checkpoint::CLEAN_SHUTDOWN);
    rm.clean_shutdown.set(clean_shutdown);
    if clean_shutdown {
        let deleted = disk.delete(checkpoint::CLEAN_SHUTDOWN);
        if let Err(e) = deleted.and(disk.fsync_dir("").await) {
            rm.storage_failed(checkpoint::CLEAN_SHUTDOWN, &e);
            return Err(());
        }
    }
    let recovery_points = read_checkpoint(rm, checkpoint::RECOVERY_POINT)?;
    let hws = read_checkpoint(rm, checkpoint::REPLICATION)?;
    let log_starts = read_checkpoint(rm, checkpoint::LOG_START)?;
    tracing::info!(broker = rm.id.0, clean_shutdown, "loading logs");
    for dir in disk.list_dirs("") {
        let Some(tp) = parse_dir_name(&dir) else {
            continue;
        };
        let at = |offsets: &BTreeMap<TopicPartition, Offset>| {
            offsets.get(&tp).copied().unwrap_or(Offset(0))
        };
        let config = rm.log_config(&tp.topic);
        match Log::open(
            disk,
            &tp,
            config,
            at(&recovery_points),
            at(&log_starts),
            clean_shutdown,
            clock::now(),
        ) {
            Ok(log) => {
                tracing::info!(
                    broker = rm.id.0, %tp, log_start = %log.log_start_offset(), leo = %log.log_end_offset(),
                    recovery_point = %log.recovery_point(), hw = %at(&hws), "log loaded"
                );
                if !clean_shutdown {
                    rm.facts.record(Fact::Recovery {
                        tp: tp.clone(),
                        broker: rm.id,
                        log_end_offset: log.log_end_offset(),
                    });
                }
                rm.host(log, at(&hws));
            }
            Err(e) => {
                rm.storage_failed(&tp.to_string(), &e);
                return Err(());
            }
        }
    }
    Ok(())
}

/// A checkpoint file (a missing one is empty). An unreadable one takes the log dir offline,
/// so the broker halts: Kafka reads every checkpoint through `CheckpointFileWithFailureHandler`,
/// which marks the dir offline before `LogManager.loadLogs` can fall back to offset 0, and a
/// broker whose only log dir is offline exits ("all log dirs ... have failed").
fn read_checkpoint(
    rm: &ReplicaManager,
    file: &str,
) -> Result<BTreeMap<TopicPartition, Offset>, ()> {
    checkpoint::read_offsets(&rm.disk, file).map_err(|e| rm.storage_failed(file, &e))
}

/// `<topic>-<partition>`; the topic may itself contain `-`.
fn parse_dir_name(dir: &str) -> Option<TopicPartition> {
    let (topic, partition) = dir.rsplit_once('-')?;
    (!topic.is_empty()).then_some(())?;
    Some(TopicPartition::new(topic, partition.parse().ok()?))
}

/// Controlled shutdown: hand leadership away, stop replicating, flush every log, write the
/// checkpoints, then the clean-shutdown marker (durably, last: it vouches for the rest).
async fn shut_down(rm: &ReplicaManager) {
    tracing::info!(broker = rm.id.0, "controlled shutdown");
    let handed_off = controller_link::controlled_shutdown(rm, CONTROLLED_SHUTDOWN_ATTEMPTS).await;
    rm.stopped.set(true);
    rm.wake_all();
    if scheduler::flush_all(rm).await.is_err() {
        return;
    }
    scheduler::write_hw_checkpoint(rm).await;
    scheduler::write_recovery_checkpoints(rm).await;
    if rm.offline.get() || rm.bugs.shutdown_without_marker {
        return;
    }
    let disk = &rm.disk;
    let marker = disk.create(checkpoint::CLEAN_SHUTDOWN);
    let durable = match marker {
        Ok(()) => match disk.fsync(checkpoint::CLEAN_SHUTDOWN).await {
            Ok(()) => disk.fsync_dir("").await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    match durable {
        Ok(()) => tracing::info!(broker = rm.id.0, handed_off, "shut down cleanly"),
        Err(e) => rm.storage_failed(checkpoint::CLEAN_SHUTDOWN, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dir_names_parse_like_kafka() {
        assert_eq!(
            parse_dir_name("orders-0"),
            Some(TopicPartition::new("orders", 0))
        );
        assert_eq!(
            parse_dir_name("my-topic-12"),
            Some(TopicPartition::new("my-topic", 12))
        );
        assert_eq!(parse_dir_name("orders"), None);
        assert_eq!(parse_dir_name("-3"), None);
        assert_eq!(parse_dir_name("orders-x"), None);
    }
}
