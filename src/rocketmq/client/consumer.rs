//! A member of a consumer group as `DefaultMQPushConsumer` runs it in clustering mode:
//! the client polls the NameServer for the topic's route, sends heartbeats to every
//! master (which is how a broker learns the group's members), and rebalances at start,
//! every 20 s and whenever a broker says the group changed. A rebalance asks one master
//! for the group's client ids, sorts them and the queues, and takes its share
//! (`AllocateMessageQueueAveragely`). Each queue it owns is pulled by queue offset with
//! long polling; each message is processed, then the queue's consumed offset moves past
//! it. Offsets go to the broker with each pull (`commitOffset`) and every 5 s
//! (`persistConsumerOffsetInterval`, oneway); a queue taken over starts at the offset its
//! master answers (`computePullFromWhere`). Delivery is at least once: what was processed
//! after the last offset the broker kept is processed again.
//!
//! Departures: a queue's messages are processed one at a time, between pulls (the real
//! client pulls ahead into a ProcessQueue and consumes on a pool of 20 threads); tags,
//! retry topics and the consume-later path (`RECONSUME_LATER`) are left out.

use crate::config::rocketmq::{ConsumeFromWhere, ConsumerConfig, Rules};
use crate::history::{History, MessageId, Op};
use crate::os::clock::{self, SimTime};
use crate::rocketmq::broker::PULL_BATCH;
use crate::rocketmq::client::producer::group_of;
use crate::rocketmq::remoting::{self, PullMessage, PullStatus, Request, Response, TopicRoute};
use crate::types::{HostName, Offset, TopicPartition};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// `pollNameServerInterval`.
const POLL_NAME_SERVER_INTERVAL: Duration = Duration::from_secs(30);
/// `heartbeatBrokerInterval`.
const HEARTBEAT_BROKER_INTERVAL: Duration = Duration::from_secs(30);
/// `rocketmq.client.rebalance.waitInterval`: RebalanceService's period.
const REBALANCE_INTERVAL: Duration = Duration::from_secs(20);
/// `persistAllConsumerOffset`'s first wait.
const PERSIST_FIRST_DELAY: Duration = Duration::from_secs(10);
/// `mqClientApiTimeout`: a heartbeat, member list or offset request.
const API_TIMEOUT: Duration = Duration::from_secs(3);
/// `BROKER_SUSPEND_MAX_TIME_MILLIS` and `CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND`: a pull
/// may be held 15 s, and is waited for 30 s.
const BROKER_SUSPEND_MAX_TIME: Duration = Duration::from_secs(15);
const PULL_TIMEOUT: Duration = Duration::from_secs(30);
/// `pullTimeDelayMillsWhenException`.
const PULL_DELAY_WHEN_EXCEPTION: Duration = Duration::from_secs(3);
/// How long a queue whose offset was moved waits before it is dropped (the consumer
/// `executeTaskLater(…, 10000)` on `OFFSET_ILLEGAL`).
const OFFSET_ILLEGAL_DELAY: Duration = Duration::from_secs(10);

/// Per queue: the offset after the last processed message, the queue's end as the last
/// pull saw it, and when; the harness's consume phase waits on it.
pub type GroupProgress = Rc<RefCell<BTreeMap<TopicPartition, (Offset, Offset, SimTime)>>>;

#[derive(Clone)]
pub struct ConsumerContext {
    pub index: u32,
    pub group: String,
    pub topic: String,
    /// The topic's queues on each broker group (partition = group * queues + queue).
    pub queues: u32,
    /// Simulated work per message.
    pub processing: Duration,
    pub config: ConsumerConfig,
    pub history: History,
    pub progress: GroupProgress,
    pub rules: Rules,
    pub seed: u64,
}

/// A `MessageQueue`: broker group and queue id, ordered as RocketMQ sorts them (by
/// broker name, then queue id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Queue {
    group: u32,
    queue_id: i32,
}

/// A queue this member pulls (`ProcessQueue` and its pull loop).
struct Owned {
    dropped: Rc<Cell<bool>>,
    task: JoinHandle<()>,
}

struct Consumer {
    ctx: ConsumerContext,
    /// `clientId`: the host name.
    name: Arc<str>,
    client: remoting::Client,
    route: RefCell<Option<TopicRoute>>,
    owned: RefCell<BTreeMap<Queue, Owned>>,
    /// `RemoteBrokerOffsetStore.offsetTable`: each owned queue's consumed offset.
    offsets: RefCell<BTreeMap<Queue, i64>>,
    rng: RefCell<StdRng>,
}

pub async fn run_consumer(ctx: ConsumerContext) -> turmoil::Result {
    let consumer = Rc::new(Consumer {
        name: HostName::Consumer(ctx.index).to_string().into(),
        client: remoting::Client::new(&ctx.rules),
        route: RefCell::new(None),
        owned: RefCell::default(),
        offsets: RefCell::default(),
        rng: RefCell::new(StdRng::seed_from_u64(ctx.seed)),
        ctx,
    });
    // `start()`: the route, a heartbeat to every master, a rebalance at once.
    consumer.fetch_route().await;
    consumer.heartbeat().await;
    // `MQClientInstance`'s scheduled tasks; they end with the host.
    tokio::task::spawn_local(refresh_routes(consumer.clone()));
    tokio::task::spawn_local(heartbeats(consumer.clone()));
    tokio::task::spawn_local(persist_all(consumer.clone()));
    let notified = consumer.client.notified();
    loop {
        consumer.clone().rebalance().await;
        tokio::select! {
            biased;
            () = notified.notified() => {}
            () = tokio::time::sleep(REBALANCE_INTERVAL) => {}
        }
    }
}

/// `updateTopicRouteInfoFromNameServer` every `pollNameServerInterval`.
async fn refresh_routes(consumer: Rc<Consumer>) {
    loop {
        tokio::time::sleep(POLL_NAME_SERVER_INTERVAL).await;
        consumer.fetch_route().await;
    }
}

/// `sendHeartbeatToAllBrokerWithLock` every `heartbeatBrokerInterval`.
async fn heartbeats(consumer: Rc<Consumer>) {
    loop {
        tokio::time::sleep(HEARTBEAT_BROKER_INTERVAL).await;
        consumer.heartbeat().await;
    }
}

/// `persistAllConsumerOffset`: each owned queue's offset to its master, oneway.
async fn persist_all(consumer: Rc<Consumer>) {
    tokio::time::sleep(PERSIST_FIRST_DELAY).await;
    loop {
        let offsets: Vec<(Queue, i64)> = consumer
            .offsets
            .borrow()
            .iter()
            .map(|(&q, &o)| (q, o))
            .collect();
        for (queue, offset) in offsets {
            consumer.persist(queue, offset).await;
        }
        tokio::time::sleep(consumer.ctx.config.persist_consumer_offset_interval).await;
    }
}

impl Consumer {
    async fn fetch_route(&self) {
        if let Some(route) = super::fetch_route(&self.client, &self.ctx.topic).await {
            *self.route.borrow_mut() = Some(route);
        }
    }

    /// The masters of the route, by broker group.
    fn masters(&self) -> BTreeMap<u32, HostName> {
        let route = self.route.borrow();
        route
            .iter()
            .flat_map(|r| &r.brokers)
            .filter_map(|b| Some((group_of(&b.broker_name), b.master?)))
            .collect()
    }

    /// `sendHeartbeatToAllBroker`: the group and its subscription to every master.
    async fn heartbeat(&self) {
        for master in self.masters().into_values() {
            let request = Request::HeartBeat {
                client_id: self.name.to_string(),
                group: self.ctx.group.clone(),
                topic: self.ctx.topic.clone(),
            };
            if let Err(e) = self.client.invoke(master, request, API_TIMEOUT).await {
                tracing::debug!(%master, error = %e, "heartbeat failed");
            }
        }
    }

    /// `rebalanceByTopic` in clustering mode.
    async fn rebalance(self: Rc<Self>) {
        let all: Vec<Queue> = {
            let route = self.route.borrow();
            let mut all: Vec<Queue> = route
                .iter()
                .flat_map(|r| &r.brokers)
                .flat_map(|b| {
                    let group = group_of(&b.broker_name);
                    (0..b.queues).map(move |q| Queue {
                        group,
                        queue_id: q as i32,
                    })
                })
                .collect();
            all.sort();
            all
        };
        // `findConsumerIdList`: from a master of the topic picked at random.
        let masters: Vec<HostName> = self.masters().into_values().collect();
        if all.is_empty() || masters.is_empty() {
            return;
        }
        let master = masters[self.rng.borrow_mut().random_range(0..masters.len())];
        let request = Request::GetConsumerListByGroup {
            group: self.ctx.group.clone(),
        };
        let mut ids = match self.client.invoke(master, request, API_TIMEOUT).await {
            Ok(Response::ConsumerList(ids)) if !ids.is_empty() => ids,
            _ => return,
        };
        ids.sort();
        let mine = allocate_averagely(&self.name, &ids, &all);
        self.update_process_queues(&mine).await;
    }

    /// `updateProcessQueueTableInRebalance`: queues no longer ours are dropped (their
    /// offsets persisted first); new ones start where their master says.
    async fn update_process_queues(self: &Rc<Self>, mine: &[Queue]) {
        let gone: Vec<Queue> = self
            .owned
            .borrow()
            .keys()
            .filter(|q| !mine.contains(q))
            .copied()
            .collect();
        for queue in gone {
            self.drop_queue(queue).await;
        }
        for &queue in mine {
            if self.owned.borrow().contains_key(&queue) {
                continue;
            }
            let Some((offset, committed)) = self.compute_pull_from_where(queue).await else {
                continue;
            };
            if self.owned.borrow().contains_key(&queue) {
                continue;
            }
            self.record(Op::Resume {
                consumer: self.ctx.index,
                tp: self.tp(queue),
                offset: Offset(offset),
                committed,
            });
            self.offsets.borrow_mut().insert(queue, offset);
            let dropped = Rc::new(Cell::new(false));
            let task =
                tokio::task::spawn_local(self.clone().pull_loop(queue, offset, dropped.clone()));
            self.owned
                .borrow_mut()
                .insert(queue, Owned { dropped, task });
        }
    }

    /// `removeUnnecessaryMessageQueue`: persist the queue's offset, forget it.
    async fn drop_queue(&self, queue: Queue) {
        if let Some(owned) = self.owned.borrow_mut().remove(&queue) {
            owned.dropped.set(true);
            owned.task.abort();
        }
        let offset = self.offsets.borrow_mut().remove(&queue);
        if let Some(offset) = offset {
            self.persist(queue, offset).await;
        }
    }

    /// `computePullFromWhere`: the master's offset for the group; with none, the queue's
    /// end (CONSUME_FROM_LAST_OFFSET) or 0 (CONSUME_FROM_FIRST_OFFSET). `None`: the master
    /// did not answer (the next rebalance tries again). With the offset, whether it is the
    /// master's (`SUCCESS`) rather than the client's choice.
    async fn compute_pull_from_where(&self, queue: Queue) -> Option<(i64, bool)> {
        let master = *self.masters().get(&queue.group)?;
        let request = Request::QueryConsumerOffset {
            group: self.ctx.group.clone(),
            topic: self.ctx.topic.clone(),
            queue_id: queue.queue_id,
        };
        match self.client.invoke(master, request, API_TIMEOUT).await {
            Ok(Response::ConsumerOffset(Some(offset))) => Some((offset, true)),
            Ok(Response::ConsumerOffset(None))
                if self.ctx.config.consume_from_where == ConsumeFromWhere::FirstOffset =>
            {
                Some((0, false))
            }
            Ok(Response::ConsumerOffset(None)) => {
                let request = Request::QueueRange {
                    topic: self.ctx.topic.clone(),
                    queue_id: queue.queue_id,
                };
                match self.client.invoke(master, request, API_TIMEOUT).await {
                    Ok(Response::QueueRange { max_offset, .. }) => Some((max_offset, false)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `updateConsumeOffsetToBroker`, oneway.
    async fn persist(&self, queue: Queue, offset: i64) {
        let Some(&master) = self.masters().get(&queue.group) else {
            return;
        };
        let request = Request::UpdateConsumerOffset {
            group: self.ctx.group.clone(),
            topic: self.ctx.topic.clone(),
            queue_id: queue.queue_id,
            offset,
        };
        let _ = self.client.oneway(master, request, API_TIMEOUT).await;
    }

    /// The pulls of one queue (`PullMessageService` and `PullCallback`), with each
    /// message processed as it arrives.
    async fn pull_loop(self: Rc<Self>, queue: Queue, mut next: i64, dropped: Rc<Cell<bool>>) {
        let tp = self.tp(queue);
        while !dropped.get() {
            let Some(&master) = self.masters().get(&queue.group) else {
                tokio::time::sleep(PULL_DELAY_WHEN_EXCEPTION).await;
                continue;
            };
            let commit_offset = self
                .offsets
                .borrow()
                .get(&queue)
                .copied()
                .filter(|&o| o > 0);
            let request = Request::PullMessage(PullMessage {
                group: self.ctx.group.clone(),
                topic: self.ctx.topic.clone(),
                queue_id: queue.queue_id,
                queue_offset: next,
                max_msg_nums: PULL_BATCH,
                commit_offset,
                suspend: Some(BROKER_SUSPEND_MAX_TIME),
            });
            let answer = self.client.invoke(master, request, PULL_TIMEOUT).await;
            let Ok(Response::PullMessage {
                status,
                next_begin_offset,
                max_offset,
                messages,
                ..
            }) = answer
            else {
                if let Err(e) = answer {
                    tracing::debug!(%master, error = %e, "pull failed");
                }
                tokio::time::sleep(PULL_DELAY_WHEN_EXCEPTION).await;
                continue;
            };
            if let Some(offset) = commit_offset {
                self.record(Op::Committed {
                    consumer: self.ctx.index,
                    tp: tp.clone(),
                    offset: Offset(offset),
                });
            }
            match status {
                PullStatus::Found => {
                    for message in &messages {
                        self.record(Op::Read {
                            consumer: self.ctx.index,
                            tp: tp.clone(),
                            offset: Offset(message.queue_offset),
                            id: MessageId::parse_value(&message.body),
                        });
                    }
                    for message in messages {
                        tokio::time::sleep(self.ctx.processing).await;
                        if dropped.get() {
                            return;
                        }
                        self.record(Op::Processed {
                            consumer: self.ctx.index,
                            tp: tp.clone(),
                            offset: Offset(message.queue_offset),
                            id: MessageId::parse_value(&message.body),
                        });
                        self.consumed(queue, message.queue_offset + 1, max_offset);
                    }
                    next = next_begin_offset;
                }
                PullStatus::NoNewMessage => {
                    // `correctTagsOffset`: nothing in flight, so the consumed offset is
                    // where the next pull starts.
                    next = next_begin_offset;
                    self.consumed(queue, next, max_offset);
                }
                PullStatus::OffsetMoved => {
                    self.record(Op::Reset {
                        consumer: self.ctx.index,
                        tp: tp.clone(),
                        from: Offset(next),
                        to: Offset(next_begin_offset),
                    });
                    // OFFSET_ILLEGAL: the queue is dropped, its offset set to where the
                    // broker said and persisted 10 s later; a rebalance takes it again.
                    dropped.set(true);
                    tokio::time::sleep(OFFSET_ILLEGAL_DELAY).await;
                    self.offsets.borrow_mut().insert(queue, next_begin_offset);
                    self.persist(queue, next_begin_offset).await;
                    self.offsets.borrow_mut().remove(&queue);
                    self.owned.borrow_mut().remove(&queue);
                    return;
                }
                PullStatus::RetryImmediately => next = next_begin_offset.max(next),
            }
        }
    }

    /// `updateOffset(mq, offset, increaseOnly = true)` after processing, and the progress
    /// the consume phase waits on.
    fn consumed(&self, queue: Queue, offset: i64, max_offset: i64) {
        let mut offsets = self.offsets.borrow_mut();
        let entry = offsets.entry(queue).or_insert(offset);
        *entry = (*entry).max(offset);
        self.ctx.progress.borrow_mut().insert(
            self.tp(queue),
            (Offset(*entry), Offset(max_offset), clock::now()),
        );
    }

    fn tp(&self, queue: Queue) -> TopicPartition {
        TopicPartition::new(
            &self.ctx.topic,
            queue.group * self.ctx.queues + queue.queue_id as u32,
        )
    }

    fn record(&self, op: Op) {
        self.ctx.history.record(&self.name, op);
    }
}

/// `AllocateMessageQueueAveragely`: `mine`'s share of the sorted queues `all` among the
/// sorted client ids `ids`, a contiguous run, the first `all % ids` members taking one
/// more.
fn allocate_averagely<Q: Copy>(mine: &str, ids: &[String], all: &[Q]) -> Vec<Q> {
    let Some(index) = ids.iter().position(|id| id == mine) else {
        return Vec::new();
    };
    let (n, members) = (all.len(), ids.len());
    let rem = n % members;
    let average = if n <= members {
        1
    } else if rem > 0 && index < rem {
        n / members + 1
    } else {
        n / members
    };
    let start = if rem > 0 && index < rem {
        index * average
    } else {
        index * average + rem
    };
    let range = average.min(n.saturating_sub(start));
    (0..range).map(|i| all[(start + i) % n]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("consumer-{i}")).collect()
    }

    /// RocketMQ's own cases: 8 queues among 3 members go 3, 3, 2; with more members than
    /// queues the last members get none; every queue goes to exactly one member.
    #[test]
    fn averagely_gives_each_member_a_contiguous_share() {
        let all: Vec<u32> = (0..8).collect();
        let shares: Vec<Vec<u32>> = ids(3)
            .iter()
            .map(|id| allocate_averagely(id, &ids(3), &all))
            .collect();
        assert_eq!(shares, [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
        let four: Vec<u32> = (0..4).collect();
        let shares: Vec<Vec<u32>> = ids(6)
            .iter()
            .map(|id| allocate_averagely(id, &ids(6), &four))
            .collect();
        assert_eq!(shares, [vec![0], vec![1], vec![2], vec![3], vec![], vec![]]);
        assert!(allocate_averagely("consumer-9", &ids(3), &all).is_empty());
        for members in 1..10 {
            for queues in 0..20u32 {
                let all: Vec<u32> = (0..queues).collect();
                let mut taken: Vec<u32> = ids(members)
                    .iter()
                    .flat_map(|id| allocate_averagely(id, &ids(members), &all))
                    .collect();
                taken.sort();
                assert_eq!(taken, all, "{queues} queues among {members}");
            }
        }
    }
}
