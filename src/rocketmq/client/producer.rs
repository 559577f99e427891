//! A producer application on `DefaultMQProducer`: at each of its arrival instants it calls
//! the synchronous `send(msg)` on a thread of its own (so sends overlap as the arrivals
//! do), as `DefaultMQProducerImpl.sendDefaultImpl` runs it: a queue chosen round robin,
//! avoiding the broker of the last attempt; up to `retryTimesWhenSendFailed` more attempts
//! within one `sendMsgTimeout` budget; a stored status other than SEND_OK retried only with
//! `retryAnotherBrokerWhenNotStoreOK`. There is no deduplication: every retry is a new
//! message to the broker.
//!
//! What the application records: SEND_OK and the other stored statuses as acknowledged
//! (at the queue offset the broker answered); an exception after which no attempt can
//! have been stored (the broker refused each, or none could connect) as failed; any other
//! exception (a timeout, a connection lost after the request left) as unknown.

use crate::config::bugs::Bugs;
use crate::config::rocketmq::{ProducerConfig, Rules};
use crate::config::workload::{ArrivalProcess, OnError};
use crate::history::budget::SendBudget;
use crate::history::{History, MessageId, Op};
use crate::os::clock::{self, SimTime};
use crate::os::frame::NetError;
use crate::rocketmq::remoting::{self, Request, Response, ResponseCode, SendMessage, TopicRoute};
use crate::types::{HostName, TopicPartition};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// `SendStatus`: how a stored message was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStatus {
    SendOk,
    FlushDiskTimeout,
}

impl SendStatus {
    pub const fn name(self) -> &'static str {
        match self {
            SendStatus::SendOk => "SEND_OK",
            SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        }
    }
}

/// The codes a send retries on (`DefaultMQProducer.retryResponseCodes`, of those the
/// broker here answers).
fn retries_on(code: ResponseCode) -> bool {
    matches!(
        code,
        ResponseCode::TopicNotExist | ResponseCode::ServiceNotAvailable | ResponseCode::SystemError
    )
}

#[derive(Clone)]
pub struct ProducerContext {
    pub index: u32,
    pub config: ProducerConfig,
    pub topic: String,
    /// The topic's queues on each broker group: queue `q` of group `g` is partition
    /// `g * queues + q` in the history.
    pub queues: u32,
    pub arrivals: ArrivalProcess,
    pub keys: u32,
    pub value_bytes: u32,
    pub on_error: OnError,
    pub history: History,
    pub budget: SendBudget,
    pub stop_at: SimTime,
    pub seed: u64,
    pub bugs: Bugs,
    /// The release's rules (the remoting client's).
    pub rules: Rules,
}

struct Producer {
    name: Arc<str>,
    ctx: ProducerContext,
    client: remoting::Client,
    /// The topic's route as last fetched (`TopicPublishInfo`).
    route: RefCell<Option<TopicRoute>>,
    /// `sendWhichQueue`: the round robin's position, from a seeded start.
    next_queue: Cell<u32>,
}

/// One queue of the route, as `MessageQueue`.
#[derive(Clone, Debug)]
struct Queue {
    group: u32,
    broker_name: String,
    master: Option<HostName>,
    queue_id: i32,
}

pub async fn run_producer(ctx: ProducerContext) -> turmoil::Result {
    let mut rng = StdRng::seed_from_u64(ctx.seed);
    let producer = Rc::new(Producer {
        name: HostName::Producer(ctx.index).to_string().into(),
        next_queue: Cell::new(rng.random_range(0..1024)),
        client: remoting::Client::new(&ctx.rules),
        route: RefCell::new(None),
        ctx,
    });
    let refresher = tokio::task::spawn_local(refresh_routes(producer.clone()));
    let start = clock::now();
    let mut sends = Vec::new();
    for offset in producer.ctx.arrivals.clone() {
        clock::sleep_until(start + offset).await;
        if clock::now() >= producer.ctx.stop_at {
            break;
        }
        let Some(id) = producer.ctx.budget.take(producer.ctx.index) else {
            break;
        };
        sends.push(tokio::task::spawn_local(producer.clone().send(id)));
    }
    for send in sends {
        let _ = send.await;
    }
    refresher.abort();
    Ok(())
}

/// `updateTopicRouteInfoFromNameServer` every `pollNameServerInterval`.
async fn refresh_routes(producer: Rc<Producer>) {
    loop {
        producer.fetch_route().await;
        tokio::time::sleep(producer.ctx.config.poll_name_server_interval).await;
    }
}

impl Producer {
    async fn fetch_route(&self) {
        if let Some(route) = super::fetch_route(&self.client, &self.ctx.topic).await {
            *self.route.borrow_mut() = Some(route);
        }
    }

    fn queues(&self) -> Vec<Queue> {
        let route = self.route.borrow();
        let Some(route) = route.as_ref() else {
            return Vec::new();
        };
        route
            .brokers
            .iter()
            .flat_map(|broker| {
                let group = group_of(&broker.broker_name);
                (0..broker.queues).map(move |q| Queue {
                    group,
                    broker_name: broker.broker_name.clone(),
                    master: broker.master,
                    queue_id: q as i32,
                })
            })
            .collect()
    }

    /// `selectOneMessageQueue(info, lastBrokerName)`: the next queue of the round robin,
    /// of another broker than the last attempt's if there is one.
    fn select(&self, queues: &[Queue], last_broker: Option<&str>) -> Option<Queue> {
        if queues.is_empty() {
            return None;
        }
        let take = || {
            let index = self.next_queue.get();
            self.next_queue.set(index.wrapping_add(1));
            queues[index as usize % queues.len()].clone()
        };
        let Some(last) = last_broker else {
            return Some(take());
        };
        for _ in 0..queues.len() {
            let queue = take();
            if queue.broker_name != last {
                return Some(queue);
            }
        }
        Some(take())
    }

    fn tp(&self, queue: &Queue) -> TopicPartition {
        let partition = queue.group * self.ctx.queues + queue.queue_id as u32;
        TopicPartition::new(&self.ctx.topic, partition)
    }

    fn record(&self, op: Op) {
        self.ctx.history.record(&self.name, op);
    }

    /// `sendDefaultImpl` in SYNC mode for the message `id`, recorded as the application
    /// sees its outcome.
    async fn send(self: Rc<Self>, id: MessageId) {
        let begin = clock::now();
        let config = &self.ctx.config;
        if self.route.borrow().is_none() {
            self.fetch_route().await;
        }
        let queues = self.queues();
        let attempts = 1 + config.retry_times_when_send_failed;
        let mut last: Option<Queue> = None;
        let mut stored: Option<(TopicPartition, i64, SendStatus)> = None;
        let mut maybe_stored = false;
        let mut error = String::from("no route info of this topic");
        let mut invoked = false;
        for _ in 0..attempts {
            let Some(queue) = self.select(&queues, last.as_ref().map(|q| q.broker_name.as_str()))
            else {
                break;
            };
            let tp = self.tp(&queue);
            if !invoked {
                self.record(Op::Invoke { id, tp: tp.clone() });
                invoked = true;
            }
            last = Some(queue.clone());
            let spent = clock::now() - begin;
            if spent > config.send_msg_timeout {
                error = "sendDefaultImpl call timeout".into();
                break;
            }
            let Some(master) = queue.master else {
                error = format!("the broker {} has no master", queue.broker_name);
                continue;
            };
            let request = Request::SendMessage(SendMessage {
                topic: self.ctx.topic.clone(),
                queue_id: queue.queue_id,
                born_timestamp: clock::now().since_start().as_millis() as i64,
                properties: self.properties(id),
                body: id.value(self.ctx.value_bytes as usize),
            });
            let answer = self
                .client
                .invoke(master, request, config.send_msg_timeout - spent)
                .await;
            match answer {
                Ok(Response::SendMessage {
                    code, queue_offset, ..
                }) if code.stored() => {
                    let status = if code == ResponseCode::Success {
                        SendStatus::SendOk
                    } else {
                        SendStatus::FlushDiskTimeout
                    };
                    stored = Some((tp, queue_offset, status));
                    if status != SendStatus::SendOk && config.retry_another_broker_when_not_store_ok
                    {
                        continue;
                    }
                    break;
                }
                Ok(Response::SendMessage { code, .. }) => {
                    error = format!("MQBrokerException: CODE: {}", code.name());
                    if !retries_on(code) {
                        break;
                    }
                }
                Ok(_) => {
                    error = "an answer of another kind".into();
                    maybe_stored = true;
                }
                Err(NetError::Connect(e)) => error = format!("RemotingConnectException: {e}"),
                Err(NetError::Timeout) => {
                    error = "RemotingTimeoutException".into();
                    maybe_stored |= !self.ctx.bugs.timeout_proves_not_written;
                }
                Err(e) => {
                    error = format!("RemotingSendRequestException: {e}");
                    maybe_stored = true;
                }
            }
        }
        if !invoked {
            let tp = TopicPartition::new(&self.ctx.topic, 0);
            self.record(Op::Invoke { id, tp });
        }
        let op = match stored {
            Some((tp, offset, status)) => Op::Ok {
                id,
                tp,
                offset: crate::types::Offset(offset),
                degraded: (status != SendStatus::SendOk).then(|| status.name().to_owned()),
            },
            None if maybe_stored && self.ctx.on_error == OnError::WhatItProves => {
                Op::Info { id, error }
            }
            None => Op::Fail { id, error },
        };
        self.record(op);
    }

    /// What `new Message(topic, body)` and `sendKernelImpl` put in the properties: the
    /// key (`KEYS`) if the workload has keys, `WAIT`, then the unique id.
    fn properties(&self, id: MessageId) -> Vec<(String, String)> {
        let mut properties = Vec::with_capacity(3);
        if self.ctx.keys > 0 {
            let key = u64::from(id.seq) % u64::from(self.ctx.keys);
            properties.push(("KEYS".to_owned(), format!("key-{key}")));
        }
        properties.push(("WAIT".to_owned(), "true".to_owned()));
        properties.push(("UNIQ_KEY".to_owned(), uniq_key(id)));
        properties
    }
}

/// A `MessageClientIDSetter` id: 32 hex digits, here the producer and its sequence.
fn uniq_key(id: MessageId) -> String {
    format!("{:016X}{:016X}", id.producer, id.seq)
}

/// `broker-a` is group 0.
pub(crate) fn group_of(broker_name: &str) -> u32 {
    broker_name
        .strip_prefix("broker-")
        .and_then(|letter| letter.bytes().next())
        .map_or(0, |b| u32::from(b.saturating_sub(b'a')))
}
