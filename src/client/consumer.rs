//! A consumer host: reads every partition from offset 0 at its leader, below the high
//! watermark (the broker enforces that), follows leader changes, validates its position
//! with OffsetsForLeaderEpoch after each one (KIP-320) and moves back over truncation,
//! and records every record it saw, for the dirty-read check. As Kafka's consumer does,
//! it keeps one metadata cache and one connection per broker, and fetches all the
//! partitions a broker leads in one request, one request in flight per broker. It has no
//! group and commits nothing.

use crate::client::fetch::{FetchOutcome, FetchPosition};
use crate::client::metadata::{fetch_metadata, MetadataCache, CONNECTION_SETUP_TIMEOUT};
use crate::config::ConsumerConfig;
use crate::history::{History, Op};
use crate::os::clock::{self, SimTime};
use crate::protocol::fetch_session::FINAL_EPOCH;
use crate::protocol::frame::Connection;
use crate::protocol::messages::{
    Fetch, FetchPartition, FetchedPartition, OffsetsForLeaderEpoch, OffsetsForLeaderEpochResponse,
    Request, Response,
};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
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
}

/// Where the consumer is in one partition.
struct Position {
    fetch: FetchPosition,
    /// The leader epoch the position was last validated against (KIP-320).
    validated: Option<Epoch>,
    /// In a fetch now: no other broker's fetch may take it (during a leader change).
    in_flight: bool,
    /// Held back until then, after an error.
    delayed_until: Option<SimTime>,
}

/// What the consumer's tasks share: one per broker, and the metadata refresher.
struct Consumer {
    ctx: ConsumerContext,
    process: Arc<str>,
    metadata: RefCell<MetadataCache>,
    /// A partition has no known leader, or a broker said it is not the leader.
    stale: Cell<bool>,
    refresh: Notify,
    refreshed: Notify,
    positions: RefCell<BTreeMap<TopicPartition, Position>>,
}

impl Consumer {
    fn want_metadata(&self) {
        self.stale.set(true);
        self.refresh.notify_one();
    }

    fn delay(&self, tp: &TopicPartition) {
        if let Some(position) = self.positions.borrow_mut().get_mut(tp) {
            position.delayed_until = Some(clock::now() + self.ctx.config.retry_backoff_ms);
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
            let position = Position {
                fetch: FetchPosition::new(Offset(0)),
                validated: None,
                in_flight: false,
                delayed_until: None,
            };
            (TopicPartition::new(ctx.topic.clone(), p), position)
        })
        .collect();
    let consumer = Rc::new(Consumer {
        process: HostName::Consumer(ctx.index).to_string().into(),
        metadata: RefCell::new(MetadataCache::default()),
        stale: Cell::new(true),
        refresh: Notify::new(),
        refreshed: Notify::new(),
        positions: RefCell::new(positions),
        ctx,
    });
    let mut tasks = vec![tokio::task::spawn_local(refresh_metadata(consumer.clone()))];
    for broker in 1..=consumer.ctx.brokers {
        let task = fetch_from(consumer.clone(), BrokerId(broker));
        tasks.push(tokio::task::spawn_local(task));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())?;
    }
    Ok(())
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
            fetch_metadata(ctx.brokers, first_broker, ctx.config.request_timeout_ms).await
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
            tokio::time::sleep(ctx.config.retry_backoff_ms).await;
        }
    }
}

/// One partition of a fetch to `broker`, as the cache has it led there.
struct Ask {
    tp: TopicPartition,
    epoch: Epoch,
}

/// The partitions `broker` leads that may be fetched now, marked in flight.
fn take_led(consumer: &Consumer, broker: BrokerId) -> Vec<Ask> {
    let now = clock::now();
    let metadata = consumer.metadata.borrow();
    let mut positions = consumer.positions.borrow_mut();
    positions
        .iter_mut()
        .filter(|(_, p)| !p.in_flight && p.delayed_until.is_none_or(|until| until <= now))
        .filter_map(|(tp, position)| {
            let (leader, epoch) = metadata.leader(tp)?;
            (leader == broker).then(|| {
                position.in_flight = true;
                Ask {
                    tp: tp.clone(),
                    epoch,
                }
            })
        })
        .collect()
}

fn release(consumer: &Consumer, asks: &[Ask]) {
    let mut positions = consumer.positions.borrow_mut();
    for ask in asks {
        if let Some(position) = positions.get_mut(&ask.tp) {
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
            let _ =
                tokio::time::timeout(config.retry_backoff_ms, consumer.refreshed.notified()).await;
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
        let asks = validate(&consumer, conn, asks).await;
        if !asks.is_empty() {
            fetch_round(&consumer, conn, &asks).await;
        }
        release(&consumer, &asks);
    }
}

/// KIP-320: check with the leader, after every leader change, that each position is still
/// on its log. Returns the partitions that may be fetched; the others are released.
async fn validate(consumer: &Consumer, connection: &mut Connection, asks: Vec<Ask>) -> Vec<Ask> {
    let timeout = consumer.ctx.config.request_timeout_ms;
    let mut ready = Vec::with_capacity(asks.len());
    for ask in asks {
        let last_fetched_epoch = {
            let positions = consumer.positions.borrow();
            let position = &positions[&ask.tp];
            if position.validated == Some(ask.epoch) {
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
            if let Some(to) = positions
                .get_mut(&ask.tp)
                .and_then(|p| p.fetch.validate(end))
            {
                tracing::debug!(tp = %ask.tp, consumer = consumer.ctx.index, to = to.0, "consumer position truncated");
            }
        }
        if let Some(position) = consumer.positions.borrow_mut().get_mut(&ask.tp) {
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
                let position = &positions[&ask.tp].fetch;
                FetchPartition {
                    tp: ask.tp.clone(),
                    fetch_offset: position.offset,
                    current_leader_epoch: ask.epoch,
                    last_fetched_epoch: position.last_fetched_epoch,
                    max_bytes: ctx.config.max_partition_fetch_bytes,
                }
            })
            .collect()
    };
    let request = Request::Fetch(Fetch {
        replica: None,
        max_wait_ms: ctx.config.fetch_max_wait_ms.as_millis() as u64,
        min_bytes: ctx.config.fetch_min_bytes,
        session_id: 0,
        session_epoch: FINAL_EPOCH,
        partitions,
        forgotten: Vec::new(),
    });
    // The broker may hold the fetch for `fetch.max.wait.ms` before answering.
    let timeout = ctx.config.request_timeout_ms + ctx.config.fetch_max_wait_ms;
    let answer = connection.call(&request, timeout).await;
    let response = match answer {
        Ok(Response::Fetch(response)) if response.partitions.len() == asks.len() => response,
        _ => return consumer.back_off(asks),
    };
    for (ask, answer) in asks.iter().zip(&response.partitions) {
        if answer.tp == ask.tp {
            apply(consumer, &ask.tp, answer);
        }
    }
}

/// Move the partition's position by the leader's answer, recording what was read.
fn apply(consumer: &Consumer, tp: &TopicPartition, answer: &FetchedPartition) {
    let ctx = &consumer.ctx;
    let outcome = match consumer.positions.borrow_mut().get_mut(tp) {
        Some(position) => position.fetch.apply(answer),
        None => return,
    };
    match outcome {
        FetchOutcome::Records(records) => {
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
