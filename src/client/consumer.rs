//! A consumer host: reads every partition from offset 0 at its leader, below the high
//! watermark (the broker enforces that), follows leader changes, validates its position
//! with OffsetsForLeaderEpoch after each one (KIP-320) and moves back over truncation,
//! and records every record it saw, for the dirty-read check. One task per partition,
//! as simple as a consumer can be; it has no group and commits nothing.

use crate::client::fetch::{FetchOutcome, FetchPosition};
use crate::client::metadata::{fetch_metadata, MetadataCache, CONNECTION_SETUP_TIMEOUT};
use crate::config::ConsumerConfig;
use crate::history::{History, Op};
use crate::protocol::frame::Connection;
use crate::protocol::messages::{
    Fetch, OffsetsForLeaderEpoch, OffsetsForLeaderEpochResponse, Request, Response,
};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::rc::Rc;
use std::sync::Arc;

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

/// Read all partitions until the host is stopped.
pub async fn run_consumer(ctx: ConsumerContext) -> turmoil::Result {
    let ctx = Rc::new(ctx);
    tracing::info!(consumer = ctx.index, "consumer started");
    let readers: Vec<_> = (0..ctx.partitions)
        .map(|partition| tokio::task::spawn_local(read_partition(ctx.clone(), partition)))
        .collect();
    for reader in readers {
        reader.await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

async fn read_partition(ctx: Rc<ConsumerContext>, partition: u32) {
    let tp = TopicPartition::new(ctx.topic.clone(), partition);
    let process: Arc<str> = HostName::Consumer(ctx.index).to_string().into();
    let timeout = ctx.config.request_timeout_ms;
    let backoff = ctx.config.retry_backoff_ms;
    let mut metadata = MetadataCache::default();
    let mut position = FetchPosition::new(Offset(0));
    let mut connection: Option<(BrokerId, Connection)> = None;
    let mut first_broker = partition % ctx.brokers.max(1) + 1;
    let mut leader: Option<(BrokerId, Epoch)> = None;
    // The leader epoch the position was last validated against (KIP-320).
    let mut validated: Option<Epoch> = None;
    loop {
        let Some((broker, epoch)) = leader else {
            if let Some(fresh) = fetch_metadata(ctx.brokers, first_broker, timeout).await {
                metadata.update(fresh);
            }
            first_broker = first_broker % ctx.brokers.max(1) + 1;
            leader = metadata.leader(&tp);
            if leader.is_none() {
                tokio::time::sleep(backoff).await;
            }
            continue;
        };
        if !matches!(&connection, Some((b, c)) if *b == broker && !c.is_broken()) {
            match Connection::connect(HostName::Broker(broker.0), CONNECTION_SETUP_TIMEOUT).await {
                Ok(c) => connection = Some((broker, c)),
                Err(_) => {
                    connection = None;
                    leader = None;
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            }
        }
        let Some((_, conn)) = connection.as_mut() else {
            continue;
        };
        if validated != Some(epoch) {
            if let Some(last_fetched_epoch) = position.last_fetched_epoch {
                let request = Request::OffsetsForLeaderEpoch(OffsetsForLeaderEpoch {
                    replica: CONSUMER_REPLICA_ID,
                    tp: tp.clone(),
                    current_leader_epoch: epoch,
                    leader_epoch: last_fetched_epoch,
                });
                match conn.call(&request, timeout).await {
                    Ok(Response::OffsetsForLeaderEpoch(OffsetsForLeaderEpochResponse {
                        error: None,
                        end,
                    })) => {
                        if let Some(to) = position.validate(end) {
                            tracing::debug!(%tp, consumer = ctx.index, to = to.0, "consumer position truncated");
                        }
                    }
                    answer => {
                        if answer.is_err() {
                            connection = None;
                        }
                        leader = None;
                        tokio::time::sleep(backoff).await;
                        continue;
                    }
                }
            }
            validated = Some(epoch);
        }
        let request = Request::Fetch(Fetch {
            replica: None,
            tp: tp.clone(),
            fetch_offset: position.offset,
            current_leader_epoch: epoch,
            last_fetched_epoch: position.last_fetched_epoch,
            max_bytes: ctx.config.max_partition_fetch_bytes,
            max_wait_ms: ctx.config.fetch_max_wait_ms.as_millis() as u64,
            min_bytes: ctx.config.fetch_min_bytes,
        });
        // The broker may hold the fetch for `fetch.max.wait.ms` before answering.
        let answer = conn
            .call(&request, timeout + ctx.config.fetch_max_wait_ms)
            .await;
        let response = match answer {
            Ok(Response::Fetch(response)) => response,
            Ok(_) | Err(_) => {
                connection = None;
                leader = None;
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        match position.apply(&response) {
            FetchOutcome::Records(records) => {
                for record in records {
                    let id = record.id;
                    ctx.history.record(
                        &process,
                        Op::Read {
                            consumer: ctx.index,
                            tp: tp.clone(),
                            offset: record.offset,
                            id,
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
                    leader = None;
                }
                tokio::time::sleep(backoff).await;
            }
        }
    }
}
