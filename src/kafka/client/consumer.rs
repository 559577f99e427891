//! A consumer host: reads every partition from offset 0 at its leader, below the high
//! watermark (the broker enforces that), follows leader changes, validates its position
//! with OffsetsForLeaderEpoch after each one (KIP-320) and moves back over truncation,
//! and records every record it saw, for the dirty-read check. As Kafka's consumer does,
//! it keeps one metadata cache and one connection per broker, and fetches all the
//! partitions a broker leads in one request, one request in flight per broker.
//!
//! Outside a group it reads every partition and commits nothing. In a group
//! (`client::member`) it fetches only the partitions the member owns, from where the
//! member put them, and keeps what it fetched for the member's poll: as Kafka's fetcher
//! holds one completed fetch per partition, a partition with records waiting is not
//! fetched again until they are polled.

use crate::config::bugs::Bugs;
use crate::config::kafka::Commit;
use crate::config::kafka::{ConsumerConfig, OffsetReset};
use crate::history::final_state::ReadRecord;
use crate::history::{History, Op};
use crate::kafka::client::fetch::{with_batch_epochs, FetchOutcome, FetchPosition};
use crate::kafka::client::metadata::{fetch_metadata, MetadataCache, CONNECTION_SETUP_TIMEOUT};
use crate::kafka::protocol::fetch_session::FINAL_EPOCH;
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    Fetch, FetchPartition, FetchedPartition, OffsetsForLeaderEpoch, OffsetsForLeaderEpochResponse,
    Request, Response,
};
use crate::os::clock::{self, SimTime};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::Notify;

/// Kafka's replica id for consumers is -1; ours is unsigned, and the broker does not look
/// at it in OffsetsForLeaderEpoch. Chosen so that it can never be a real broker's id.
const CONSUMER_REPLICA_ID: BrokerId = BrokerId(u32::MAX);

#[derive(Clone)]
pub struct ConsumerContext {
    /// Host `consumer-<index>`.
    pub index: u32,
    pub config: ConsumerConfig,
    pub topic: String,
    pub partitions: u32,
    pub brokers: u32,
    pub history: History,
    /// The workload's group, if the consumers are its members.
    pub group: Option<GroupSpec>,
}

/// What a group member needs besides a consumer's context.
#[derive(Clone)]
pub struct GroupSpec {
    /// `group.id`.
    pub name: String,
    pub commit: Commit,
    /// Simulated work per record.
    pub processing: std::time::Duration,
    /// Where the members say how far they got, for the runner's consume phase.
    pub progress: GroupProgress,
    /// Bugs a mutation test injected (none in any real run).
    pub bugs: Bugs,
    /// For stream processors (`[workload] output`): their output producer's context.
    pub output: Option<super::producer::ProducerContext>,
}

/// Each partition's last report from its owner: the position it has processed up to,
/// the HW its last fetch answer carried, and when that answer came. Shared with the
/// runner, outside the hosts.
pub type GroupProgress = Rc<RefCell<BTreeMap<TopicPartition, (Offset, Offset, SimTime)>>>;

/// Where the consumer is in one partition.
pub(crate) struct Position {
    pub fetch: FetchPosition,
    /// The leader epoch the position was last validated against (KIP-320).
    validated: Option<Epoch>,
    /// In a fetch now: no other broker's fetch may take it (during a leader change).
    in_flight: bool,
    /// Held back until then, after an error.
    delayed_until: Option<SimTime>,
    /// A group member's: records fetched and not yet polled, with the leader epoch of
    /// their batch.
    pub fetched: VecDeque<(ReadRecord, Epoch)>,
    /// The high watermark the last fetch answer carried, and when it came.
    pub high_watermark: Offset,
    pub high_watermark_at: SimTime,
    /// A group member's position was out of range with `auto.offset.reset = "none"`: it
    /// is not fetched again (Kafka's poll throws, and the application must decide).
    pub stuck: bool,
    /// A group member's position was out of range here: it waits, unfetched, for the
    /// member to look up where `auto.offset.reset` puts it (ListOffsets).
    pub reset_from: Option<Offset>,
    /// Which placement of the partition this is: a member may be given a partition back
    /// while a fetch for its previous placement is in flight, whose answer must not move
    /// the new one.
    pub placed: u64,
}

impl Position {
    pub fn new(fetch: FetchPosition, placed: u64) -> Position {
        Position {
            placed,
            fetch,
            validated: None,
            in_flight: false,
            delayed_until: None,
            fetched: VecDeque::new(),
            high_watermark: Offset::NONE,
            high_watermark_at: SimTime::ZERO,
            stuck: false,
            reset_from: None,
        }
    }
}

/// What the consumer's tasks share: one per broker, and the metadata refresher.
pub(crate) struct Consumer {
    pub ctx: ConsumerContext,
    pub process: Arc<str>,
    pub metadata: RefCell<MetadataCache>,
    /// A partition has no known leader, or a broker said it is not the leader.
    stale: Cell<bool>,
    refresh: Notify,
    refreshed: Notify,
    pub positions: RefCell<BTreeMap<TopicPartition, Position>>,
    /// Records fetched for a member's poll, or its positions changed: the member's poll
    /// and the fetchers look again.
    pub fetched: Notify,
}

impl Consumer {
    /// Positions changed (assigned, or their records polled): fetch what can be fetched.
    pub fn wake_fetchers(&self) {
        self.refreshed.notify_waiters();
    }

    pub fn want_metadata(&self) {
        self.stale.set(true);
        self.refresh.notify_one();
    }

    fn delay(&self, tp: &TopicPartition) {
        if let Some(position) = self.positions.borrow_mut().get_mut(tp) {
            position.delayed_until = Some(clock::now() + self.ctx.config.retry_backoff);
        }
    }

    /// A request to the broker that leads `asks` failed: hold them back, and ask where
    /// they are led now.
    fn back_off(&self, asks: &[Ask]) {
        for ask in asks {
            self.delay(&ask.tp);
        }
        self.want_metadata();
    }
}

/// Read all partitions until the host is stopped.
pub async fn run_consumer(ctx: ConsumerContext) -> turmoil::Result {
    tracing::info!(consumer = ctx.index, "consumer started");
    let positions = (0..ctx.partitions)
        .map(|p| {
            let position = Position::new(FetchPosition::new(Offset(0)), 0);
            (TopicPartition::new(ctx.topic.clone(), p), position)
        })
        .collect();
    let (_, tasks) = start(ctx, positions);
    for task in tasks {
        task.await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The consumer's fetching: the metadata refresher and one fetcher per broker, over
/// `positions` (a group member changes them as it is assigned partitions).
pub(crate) fn start(
    ctx: ConsumerContext,
    positions: BTreeMap<TopicPartition, Position>,
) -> (Rc<Consumer>, Vec<tokio::task::JoinHandle<()>>) {
    let consumer = Rc::new(Consumer {
        process: HostName::Consumer(ctx.index).to_string().into(),
        metadata: RefCell::new(MetadataCache::default()),
        stale: Cell::new(true),
        refresh: Notify::new(),
        refreshed: Notify::new(),
        positions: RefCell::new(positions),
        fetched: Notify::new(),
        ctx,
    });
    let mut tasks = vec![tokio::task::spawn_local(refresh_metadata(consumer.clone()))];
    for broker in 1..=consumer.ctx.brokers {
        let task = fetch_from(consumer.clone(), BrokerId(broker));
        tasks.push(tokio::task::spawn_local(task));
    }
    (consumer, tasks)
}

/// Keep the metadata cache fresh: ask again whenever a fetch found it stale, and until
/// every partition has a leader. Each attempt starts at the next broker.
async fn refresh_metadata(consumer: Rc<Consumer>) {
    let ctx = &consumer.ctx;
    let mut first_broker = ctx.index % ctx.brokers.max(1) + 1;
    loop {
        if !consumer.stale.get() {
            consumer.refresh.notified().await;
            continue;
        }
        consumer.stale.set(false);
        if let Some(fresh) =
            fetch_metadata(ctx.brokers, first_broker, ctx.config.request_timeout).await
        {
            consumer.metadata.borrow_mut().update(fresh);
        }
        first_broker = first_broker % ctx.brokers.max(1) + 1;
        consumer.refreshed.notify_waiters();
        let leaderless = consumer
            .positions
            .borrow()
            .keys()
            .any(|tp| consumer.metadata.borrow().leader(tp).is_none());
        if leaderless {
            consumer.stale.set(true);
            tokio::time::sleep(ctx.config.retry_backoff).await;
        }
    }
}

/// One partition of a fetch to `broker`, as the cache has it led there.
struct Ask {
    tp: TopicPartition,
    epoch: Epoch,
    placed: u64,
}

impl Ask {
    /// The position this ask was taken from, if the partition still has it.
    fn position<'p>(
        &self,
        positions: &'p BTreeMap<TopicPartition, Position>,
    ) -> Option<&'p Position> {
        positions.get(&self.tp).filter(|p| p.placed == self.placed)
    }

    fn position_mut<'p>(
        &self,
        positions: &'p mut BTreeMap<TopicPartition, Position>,
    ) -> Option<&'p mut Position> {
        positions
            .get_mut(&self.tp)
            .filter(|p| p.placed == self.placed)
    }
}

/// The partitions `broker` leads that may be fetched now, marked in flight.
fn take_led(consumer: &Consumer, broker: BrokerId) -> Vec<Ask> {
    let now = clock::now();
    let metadata = consumer.metadata.borrow();
    let mut positions = consumer.positions.borrow_mut();
    positions
        .iter_mut()
        .filter(|(_, p)| !p.in_flight && p.fetched.is_empty() && !p.stuck && p.reset_from.is_none())
        .filter(|(_, p)| p.delayed_until.is_none_or(|until| until <= now))
        .filter_map(|(tp, position)| {
            let (leader, epoch) = metadata.leader(tp)?;
            (leader == broker).then(|| {
                position.in_flight = true;
                Ask {
                    tp: tp.clone(),
                    epoch,
                    placed: position.placed,
                }
            })
        })
        .collect()
}

fn release(consumer: &Consumer, asks: &[Ask]) {
    let mut positions = consumer.positions.borrow_mut();
    for ask in asks {
        if let Some(position) = ask.position_mut(&mut positions) {
            position.in_flight = false;
        }
    }
}

/// Fetch, over one connection, every partition the cache says `broker` leads.
async fn fetch_from(consumer: Rc<Consumer>, broker: BrokerId) {
    let config = &consumer.ctx.config;
    let mut connection: Option<Connection> = None;
    loop {
        let asks = take_led(&consumer, broker);
        if asks.is_empty() {
            // Nothing led here (or all held back): wait for news, or for a backoff to end.
            let _ = tokio::time::timeout(config.retry_backoff, consumer.refreshed.notified()).await;
            continue;
        }
        if connection.as_ref().is_none_or(Connection::is_broken) {
            connection = Connection::connect(HostName::Broker(broker.0), CONNECTION_SETUP_TIMEOUT)
                .await
                .ok();
        }
        let Some(conn) = connection.as_mut() else {
            release(&consumer, &asks);
            consumer.back_off(&asks);
            continue;
        };
        let mut asks = validate(&consumer, conn, asks).await;
        asks.retain(|ask| ask.position(&consumer.positions.borrow()).is_some());
        if !asks.is_empty() {
            fetch_round(&consumer, conn, &asks).await;
        }
        release(&consumer, &asks);
    }
}

/// KIP-320: check with the leader, after every leader change, that each position is still
/// on its log. Returns the partitions that may be fetched; the others are released.
async fn validate(consumer: &Consumer, connection: &mut Connection, asks: Vec<Ask>) -> Vec<Ask> {
    let timeout = consumer.ctx.config.request_timeout;
    let mut ready = Vec::with_capacity(asks.len());
    for ask in asks {
        let last_fetched_epoch = {
            let positions = consumer.positions.borrow();
            let Some(position) = ask.position(&positions) else {
                continue;
            };
            let skip = consumer
                .ctx
                .group
                .as_ref()
                .is_some_and(|g| g.bugs.skip_position_validation);
            let before_kip_320 = !consumer.ctx.config.validate_positions;
            if position.validated == Some(ask.epoch) || skip || before_kip_320 {
                ready.push(ask);
                continue;
            }
            position.fetch.last_fetched_epoch
        };
        if let Some(last_fetched_epoch) = last_fetched_epoch {
            let request = Request::OffsetsForLeaderEpoch(OffsetsForLeaderEpoch {
                replica: CONSUMER_REPLICA_ID,
                tp: ask.tp.clone(),
                current_leader_epoch: ask.epoch,
                leader_epoch: last_fetched_epoch,
            });
            let answer = connection.call(&request, timeout).await;
            let Ok(Response::OffsetsForLeaderEpoch(OffsetsForLeaderEpochResponse {
                error: None,
                end,
            })) = answer
            else {
                let failed = std::slice::from_ref(&ask);
                release(consumer, failed);
                consumer.back_off(failed);
                continue;
            };
            let mut positions = consumer.positions.borrow_mut();
            if let Some(to) = ask
                .position_mut(&mut positions)
                .and_then(|p| p.fetch.validate(end))
            {
                tracing::debug!(tp = %ask.tp, consumer = consumer.ctx.index, to = to.0, "consumer position truncated");
            }
        }
        if let Some(position) = ask.position_mut(&mut consumer.positions.borrow_mut()) {
            position.validated = Some(ask.epoch);
        }
        ready.push(ask);
    }
    ready
}

/// One Fetch of all `asks`; each partition's answer moves its position.
async fn fetch_round(consumer: &Consumer, connection: &mut Connection, asks: &[Ask]) {
    let ctx = &consumer.ctx;
    let partitions = {
        let positions = consumer.positions.borrow();
        asks.iter()
            .map(|ask| {
                let position = &ask.position(&positions).expect("kept by fetch_from").fetch;
                // Before KIP-320 reached the consumer (2.3) its fetches named no epoch.
                let validating = ctx.config.validate_positions;
                FetchPartition {
                    tp: ask.tp.clone(),
                    fetch_offset: position.offset,
                    current_leader_epoch: if validating { ask.epoch } else { Epoch::NONE },
                    last_fetched_epoch: position.last_fetched_epoch.filter(|_| validating),
                    max_bytes: ctx.config.max_partition_fetch_bytes,
                }
            })
            .collect()
    };
    let request = Request::Fetch(Fetch {
        replica: None,
        replica_epoch: None,
        isolation: ctx.config.isolation_level,
        max_wait_ms: ctx.config.fetch_max_wait.as_millis() as u64,
        min_bytes: ctx.config.fetch_min_bytes,
        session_id: 0,
        session_epoch: FINAL_EPOCH,
        partitions,
        forgotten: Vec::new(),
    });
    // The broker may hold the fetch for `fetch.max.wait.ms` before answering.
    let timeout = ctx.config.request_timeout + ctx.config.fetch_max_wait;
    let answer = connection.call(&request, timeout).await;
    let response = match answer {
        Ok(Response::Fetch(response)) if response.partitions.len() == asks.len() => response,
        _ => return consumer.back_off(asks),
    };
    for (ask, answer) in asks.iter().zip(&response.partitions) {
        if answer.tp == ask.tp {
            apply(consumer, ask, answer);
        }
    }
}

/// Move the partition's position by the leader's answer, recording what was read (and,
/// for a group member, keeping it for the member's poll).
fn apply(consumer: &Consumer, ask: &Ask, answer: &FetchedPartition) {
    let ctx = &consumer.ctx;
    let tp = &ask.tp;
    let member = ctx.group.is_some();
    let outcome = match ask.position_mut(&mut consumer.positions.borrow_mut()) {
        Some(position) => {
            let from = position.fetch.offset;
            let outcome = position.fetch.apply(answer, ctx.config.check_crcs);
            if answer.error.is_none() {
                position.high_watermark = answer.high_watermark;
                position.high_watermark_at = clock::now();
            }
            if member {
                member_outcome(consumer, tp, position, from, &outcome);
            }
            outcome
        }
        None => return,
    };
    match outcome {
        FetchOutcome::Records { records, .. } => {
            for record in records {
                ctx.history.record(
                    &consumer.process,
                    Op::Read {
                        consumer: ctx.index,
                        tp: tp.clone(),
                        offset: record.offset,
                        id: record.id,
                    },
                );
            }
        }
        FetchOutcome::Diverged { to } | FetchOutcome::Reset { to } => {
            tracing::debug!(%tp, consumer = ctx.index, to = to.0, "consumer position moved back");
        }
        FetchOutcome::Retry {
            error,
            refresh_metadata,
        } => {
            tracing::debug!(%tp, consumer = ctx.index, %error, "fetch error");
            if refresh_metadata {
                consumer.want_metadata();
            }
            consumer.delay(tp);
        }
    }
}

/// A group member's side of a fetch answer: records wait for its poll; a position out of
/// range waits for the member to move it where `auto.offset.reset` says.
fn member_outcome(
    consumer: &Consumer,
    tp: &TopicPartition,
    position: &mut Position,
    from: Offset,
    outcome: &FetchOutcome,
) {
    let ctx = &consumer.ctx;
    match outcome {
        FetchOutcome::Records { records, epochs } if !records.is_empty() => {
            // Each record keeps its own batch's leader epoch, which its commit carries
            // (Kafka's `ConsumerRecord.leaderEpoch`), not the fetch's last.
            position
                .fetched
                .extend(with_batch_epochs(records, epochs).map(|(r, e)| (r.clone(), e)));
            consumer.fetched.notify_one();
        }
        FetchOutcome::Reset { .. } => {
            position.fetched.clear();
            if ctx.config.auto_offset_reset == OffsetReset::None {
                tracing::warn!(%tp, consumer = ctx.index, offset = from.0, "OFFSET_OUT_OF_RANGE with auto.offset.reset = none: the partition is not read again");
                position.stuck = true;
            } else {
                tracing::info!(%tp, consumer = ctx.index, offset = from.0, reset = ctx.config.auto_offset_reset.name(), "OFFSET_OUT_OF_RANGE: the position is reset");
                position.reset_from = Some(from);
            }
            consumer.fetched.notify_one();
        }
        FetchOutcome::Diverged { .. } => position.fetched.clear(),
        _ => {}
    }
}
