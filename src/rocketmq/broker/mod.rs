//! A RocketMQ broker (`BrokerController` over `DefaultMessageStore`) as a host's program:
//! it opens and recovers its store, runs the store's services on their real schedules,
//! creates the `abort` file once it has started, registers with the NameServer and answers
//! sends and pulls. The decisions are the store's plain methods (`store::message_store`,
//! `store::services`); the tasks here only keep their time.

pub mod consumer_offsets;
mod consumers;
mod services;

use crate::config::bugs::Bugs;
use crate::config::rocketmq::{BrokerConfig, ConfigPersist, FlushDiskType, Rules, StoreConfig};
use crate::history::facts::rocketmq::Fact;
use crate::history::facts::Facts;
use crate::os::clock;
use crate::os::disk::Disk;
use crate::rocketmq::remoting::{
    self, Peer, PullMessage, PullStatus, Pulled, Request, Response, ResponseCode, SendMessage,
    TopicQueues,
};
use crate::rocketmq::store::commit_log::PutError;
use crate::rocketmq::store::message::{self, Host, Message};
use crate::rocketmq::store::message_store::{GetStatus, MessageStore, ABORT};
use crate::rocketmq::store::services::{FlushRequest, Flushed, GroupCommit};
use crate::types::HostName;
use consumer_offsets::{ConsumerOffsets, Loaded};
use consumers::ConsumerManager;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// `brokerClusterName`'s default, which the broker stores in each message's `CLUSTER`
/// property.
const CLUSTER: &str = "DefaultCluster";

/// How often a stopping broker looks at its shutdown flag.
const SHUTDOWN_POLL: Duration = Duration::from_millis(10);

/// The most messages one pull returns (`pullBatchSize`'s default, 32).
pub const PULL_BATCH: u32 = 32;

/// Everything a broker process starts from.
#[derive(Clone)]
pub struct BrokerContext {
    pub host: HostName,
    /// `brokerName`: `broker-a`.
    pub broker_name: String,
    /// `brokerId`: 0 for the master.
    pub broker_id: u32,
    pub store: StoreConfig,
    pub broker: BrokerConfig,
    pub rules: Rules,
    /// The topics this broker serves, with their queues (as `mqadmin updateTopic` made
    /// them before the run).
    pub topics: Vec<TopicQueues>,
    pub disk: Disk,
    /// Set by the harness for a clean shutdown.
    pub shutdown: Rc<Cell<bool>>,
    pub facts: Facts,
    /// Injected bugs, for the checkers' mutation tests.
    pub bugs: Bugs,
}

/// What the broker's tasks share.
struct Broker {
    host: HostName,
    disk: Disk,
    store: RefCell<MessageStore>,
    /// SYNC_FLUSH puts waiting for GroupCommitService, and how each is answered.
    group_commit: RefCell<GroupCommit>,
    waiting: RefCell<BTreeMap<u64, oneshot::Sender<Flushed>>>,
    next_request: Cell<u64>,
    /// Wakes GroupCommitService (a put), or FlushRealTimeService when it is not timed.
    flush_wake: Notify,
    /// Develop makes the store unwritable after a failed CommitLog flush.
    writable: Cell<bool>,
    facts: Facts,
    topics: Vec<TopicQueues>,
    bugs: Bugs,
    /// The consumer groups' members, and the connections they are on.
    consumers: RefCell<ConsumerManager>,
    peers: RefCell<BTreeMap<u64, Peer>>,
    /// The groups' committed offsets (`ConsumerOffsetManager`).
    offsets: RefCell<ConsumerOffsets>,
    /// The CommitLog's (end, flushed position) as last recorded.
    noted: Cell<(u64, u64)>,
    /// Woken when ReputMessageService dispatched something: the held pulls look again
    /// (`NotifyMessageArrivingListener`, with `longPollingEnable`).
    arrived: Notify,
}

pub async fn run(ctx: BrokerContext) -> turmoil::Result {
    let mut rules = ctx.rules;
    rules.sync_flush_reads_flushed &= !ctx.bugs.reput_past_flushed;
    let (store, recovered) = match MessageStore::open(ctx.disk.clone(), ctx.store.clone(), rules) {
        Ok(opened) => opened,
        Err(e) => {
            tracing::warn!(host = %ctx.host, error = %e, "the store did not open");
            ctx.facts.record(Fact::NotOpened {
                broker: ctx.host,
                reason: e.to_string(),
            });
            return Ok(());
        }
    };
    ctx.facts.record(Fact::Recovered {
        broker: ctx.host,
        normal: recovered.normal,
        start_file: recovered.start_file,
        end: recovered.end,
        dispatched: recovered.dispatched,
        undispatched: recovered.undispatched.len() as u64,
        queues_truncated: recovered.queues_truncated,
    });
    tracing::info!(host = %ctx.host, normal = recovered.normal, end = recovered.end, "store recovered");
    let (offsets, source) = match ConsumerOffsets::load(&ctx.disk) {
        Loaded::File(offsets) => (offsets, "consumerOffset.json"),
        Loaded::Backup(offsets) => (offsets, "consumerOffset.json.bak"),
        Loaded::Nothing => (ConsumerOffsets::default(), "nothing"),
        Loaded::Unreadable(reason) => {
            ctx.facts.record(Fact::NotOpened {
                broker: ctx.host,
                reason: format!("consumerOffset.json and its .bak are unreadable: {reason}"),
            });
            return Ok(());
        }
    };
    ctx.facts.record(Fact::OffsetsLoaded {
        broker: ctx.host,
        source: source.into(),
        queues: offsets.queues() as u64,
    });
    let broker = Rc::new(Broker {
        host: ctx.host,
        disk: ctx.disk.clone(),
        store: RefCell::new(store),
        group_commit: RefCell::new(GroupCommit::default()),
        waiting: RefCell::new(BTreeMap::new()),
        next_request: Cell::new(0),
        flush_wake: Notify::new(),
        writable: Cell::new(true),
        facts: ctx.facts.clone(),
        topics: ctx.topics.clone(),
        bugs: ctx.bugs,
        consumers: RefCell::default(),
        peers: RefCell::default(),
        offsets: RefCell::new(offsets),
        arrived: Notify::new(),
        noted: Cell::default(),
    });
    let mut tasks = services::start(&broker, &ctx);
    create_abort_file(&ctx.disk, &ctx.rules)?;
    let server = BrokerServer(broker.clone());
    tasks.push(tokio::task::spawn_local(async move {
        let served = remoting::serve(remoting::BROKER_PORT, server).await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "the broker's server stopped");
        }
    }));
    tasks.push(tokio::task::spawn_local(register_loop(ctx.clone())));
    while !ctx.shutdown.get() {
        tokio::time::sleep(SHUTDOWN_POLL).await;
    }
    for task in tasks {
        task.abort();
    }
    broker.persist_offsets();
    broker.shut_down().await;
    Ok(())
}

/// `createTempFile`, at the end of `start()`: an empty `abort` file, or from 5.0 one
/// holding the PID written by `string2File`, which first copies the old content (none) to
/// `abort.bak`. Neither it nor its directory is fsynced.
fn create_abort_file(disk: &Disk, rules: &Rules) -> Result<(), crate::os::disk::DiskError> {
    if !disk.exists(ABORT) {
        disk.create(ABORT)?;
    }
    if rules.abort_holds_pid {
        let backup = format!("{ABORT}.bak");
        if !disk.exists(&backup) {
            disk.create(&backup)?;
        }
        disk.set_len(ABORT, 0)?;
        disk.write(ABORT, 0, b"4242")?;
    }
    Ok(())
}

/// `registerBrokerAll` at start, then 10 s later and every `registerNameServerPeriod`
/// (clamped to 10..60 s) after that, as `BrokerController` schedules it.
async fn register_loop(ctx: BrokerContext) {
    let client = remoting::Client::new(&ctx.rules);
    let period = ctx
        .broker
        .register_name_server_period
        .clamp(REGISTER_FIRST_DELAY, Duration::from_secs(60));
    let mut next = REGISTER_FIRST_DELAY;
    loop {
        let request = Request::RegisterBroker {
            broker_name: ctx.broker_name.clone(),
            broker_id: ctx.broker_id,
            address: ctx.host,
            topics: ctx.topics.clone(),
        };
        let answer = client
            .invoke(HostName::NameServer, request, REGISTER_TIMEOUT)
            .await;
        if let Err(e) = answer {
            tracing::debug!(error = %e, "registering with the NameServer failed");
        }
        tokio::time::sleep(next).await;
        next = period;
    }
}

/// The scheduled registrations' initial delay, and the least period.
const REGISTER_FIRST_DELAY: Duration = Duration::from_secs(10);

/// `registerBrokerTimeoutMills`: 6 s.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(6);

/// The broker's request processors, each request with the connection it came on.
#[derive(Clone)]
struct BrokerServer(Rc<Broker>);

impl remoting::Server for BrokerServer {
    fn handle(
        &self,
        request: Request,
        peer: &Peer,
    ) -> impl std::future::Future<Output = Response> + 'static {
        let broker = self.0.clone();
        let peer = peer.clone();
        async move { broker.handle(request, &peer).await }
    }

    fn closed(&self, peer: &Peer) {
        self.0.peers.borrow_mut().remove(&peer.id);
        let left = self.0.consumers.borrow_mut().channel_closed(peer.id);
        self.0.notify_changed(&left);
    }
}

impl Broker {
    async fn handle(&self, request: Request, peer: &Peer) -> Response {
        match request {
            Request::SendMessage(send) => self.send_message(send).await,
            Request::PullMessage(pull) => self.pull(pull).await,
            Request::HeartBeat {
                client_id, group, ..
            } => {
                self.peers.borrow_mut().insert(peer.id, peer.clone());
                let changed = self.consumers.borrow_mut().heartbeat(
                    &group,
                    &client_id,
                    peer.id,
                    clock::now(),
                );
                if changed {
                    self.notify_changed(&[group]);
                }
                Response::HeartBeat
            }
            Request::GetConsumerListByGroup { group } => {
                Response::ConsumerList(self.consumers.borrow().ids(&group))
            }
            Request::QueryConsumerOffset {
                group,
                topic,
                queue_id,
            } => Response::ConsumerOffset(self.query_offset(&group, &topic, queue_id)),
            Request::UpdateConsumerOffset {
                group,
                topic,
                queue_id,
                offset,
            } => {
                self.offsets
                    .borrow_mut()
                    .commit(&topic, &group, queue_id, offset);
                Response::UpdateConsumerOffset
            }
            Request::QueueRange { topic, queue_id } => {
                let (min_offset, max_offset) = self.store.borrow().queue_range(&topic, queue_id);
                Response::QueueRange {
                    min_offset,
                    max_offset,
                }
            }
            Request::RegisterBroker { .. } | Request::GetRouteInfoByTopic { .. } => {
                Response::NotSupported
            }
        }
    }

    /// `SendMessageProcessor.asyncSendMessage` and the store's `asyncPutMessage`: the
    /// append, then under SYNC_FLUSH the wait for GroupCommitService (FlushDiskWatcher
    /// answering FLUSH_DISK_TIMEOUT after `syncFlushTimeout`).
    async fn send_message(&self, send: SendMessage) -> Response {
        let refused = |code| Response::SendMessage {
            code,
            queue_offset: -1,
            commit_log_offset: -1,
        };
        let Some(topic) = self.topics.iter().find(|t| t.topic == send.topic) else {
            return refused(ResponseCode::TopicNotExist);
        };
        if send.queue_id < 0 || send.queue_id as u32 >= topic.queues {
            return refused(ResponseCode::SystemError);
        }
        if !self.writable.get() {
            return refused(ResponseCode::ServiceNotAvailable);
        }
        let wait = send
            .properties
            .iter()
            .any(|(name, value)| name == "WAIT" && value == "true");
        let mut properties = send.properties;
        properties.push(("CLUSTER".to_owned(), CLUSTER.to_owned()));
        if self.store.borrow().rules().context_properties {
            properties.push(("MSG_REGION".to_owned(), "DefaultRegion".to_owned()));
            properties.push(("TRACE_ON".to_owned(), "true".to_owned()));
        } else {
            properties.retain(|(name, _)| name != "WAIT");
        }
        let (appended, flush_disk_type, timeout) = {
            let mut store = self.store.borrow_mut();
            let config = store.config();
            let (flush_disk_type, timeout) = (config.flush_disk_type, config.sync_flush_timeout);
            let entries: Vec<(&str, &str)> = properties
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            let mut message = Message {
                topic: send.topic.clone(),
                queue_id: send.queue_id,
                flag: 0,
                queue_offset: 0,
                physical_offset: 0,
                sys_flag: 0,
                born_timestamp: send.born_timestamp,
                born_host: CLIENT_HOST,
                store_timestamp: 0,
                store_host: store_host(self.host),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: send.body,
                properties: message::stored_properties(entries, store.rules()),
            };
            let now_ms = clock::now().since_start().as_millis() as i64;
            match store.put(&mut message, now_ms) {
                Ok(appended) => (appended, flush_disk_type, timeout),
                Err(PutError::TooLarge(_)) => return refused(ResponseCode::MessageIllegal),
                Err(PutError::Disk(e)) => {
                    tracing::debug!(error = %e, "put failed");
                    return refused(ResponseCode::SystemError);
                }
            }
        };
        if self.bugs.pool_commits_at_append {
            let _ = self.store.borrow_mut().commit(0);
        }
        let stored = |code| Response::SendMessage {
            code,
            queue_offset: appended.queue_offset,
            commit_log_offset: appended.wrote_offset as i64,
        };
        if flush_disk_type == FlushDiskType::AsyncFlush
            || !wait
            || self.bugs.sync_flush_acks_at_append
        {
            self.flush_wake.notify_one();
            return stored(ResponseCode::Success);
        }
        let id = self.next_request.get();
        self.next_request.set(id + 1);
        let (answer, flushed) = oneshot::channel();
        self.waiting.borrow_mut().insert(id, answer);
        self.group_commit.borrow_mut().put(FlushRequest {
            id,
            next_offset: appended.next_offset(),
        });
        self.flush_wake.notify_one();
        let outcome = tokio::select! {
            biased;
            outcome = flushed => outcome.unwrap_or(Flushed::FlushDiskTimeout),
            () = tokio::time::sleep(timeout) => Flushed::FlushDiskTimeout,
        };
        self.waiting.borrow_mut().remove(&id);
        match outcome {
            Flushed::PutOk => stored(ResponseCode::Success),
            Flushed::FlushDiskTimeout => stored(ResponseCode::FlushDiskTimeout),
        }
    }

    /// `DefaultConsumerIdsChangeListener`: tell each member of the groups that changed to
    /// rebalance now.
    fn notify_changed(&self, groups: &[String]) {
        let consumers = self.consumers.borrow();
        let peers = self.peers.borrow();
        for group in groups {
            for id in consumers.peers(group) {
                if let Some(peer) = peers.get(&id) {
                    peer.push(Response::NotifyConsumerIdsChanged {
                        group: group.clone(),
                    });
                }
            }
        }
    }

    /// `ConsumerManageProcessor.queryConsumerOffset` ([`consumer_offsets::query_answer`]).
    fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let committed = self.offsets.borrow().query(topic, group, queue_id);
        consumer_offsets::query_answer(committed, self.store.borrow().queue_range(topic, queue_id))
    }

    /// `ConsumerOffsetManager.persist`, the release's way.
    fn persist_offsets(&self) {
        let rule = if self.bugs.offsets_persist_fsyncs {
            ConfigPersist::MoveThenFsync
        } else {
            self.store.borrow().rules().config_persist
        };
        if let Err(e) = self.offsets.borrow().persist(&self.disk, rule) {
            tracing::debug!(host = %self.host, error = %e, "consumerOffset.json not written");
        }
    }

    /// `PullMessageProcessor`: the messages from the asked offset; the group's offset
    /// committed first (a master stores `commitOffset`); a pull that finds nothing held
    /// until a dispatch brings something or its suspend time runs out (long polling).
    async fn pull(&self, pull: PullMessage) -> Response {
        let read = || {
            self.pull_message(
                &pull.topic,
                pull.queue_id,
                pull.queue_offset,
                pull.max_msg_nums,
            )
        };
        let mut answer = read();
        if let Some(offset) = pull.commit_offset {
            self.offsets
                .borrow_mut()
                .commit(&pull.topic, &pull.group, pull.queue_id, offset);
        }
        let Some(suspend) = pull.suspend else {
            return answer;
        };
        let until = tokio::time::Instant::now() + suspend;
        while matches!(
            answer,
            Response::PullMessage {
                status: PullStatus::NoNewMessage,
                ..
            }
        ) {
            tokio::select! {
                biased;
                () = self.arrived.notified() => {}
                () = tokio::time::sleep_until(until) => return read(),
            }
            answer = read();
        }
        answer
    }

    /// `PullMessageProcessor` without long polling: what the queue holds from the asked
    /// offset now.
    fn pull_message(&self, topic: &str, queue_id: i32, offset: i64, max: u32) -> Response {
        let got = self
            .store
            .borrow()
            .get_message(topic, queue_id, offset, max.min(PULL_BATCH));
        match got {
            Ok(got) => Response::PullMessage {
                status: match got.status {
                    GetStatus::Found => PullStatus::Found,
                    GetStatus::OffsetFoundNull => PullStatus::NoNewMessage,
                    GetStatus::NoMessageInQueue if offset == 0 => PullStatus::NoNewMessage,
                    GetStatus::NoMessageInQueue => PullStatus::OffsetMoved,
                    GetStatus::OffsetMoved => PullStatus::OffsetMoved,
                    GetStatus::NoMatchedMessage => PullStatus::RetryImmediately,
                },
                next_begin_offset: got.next_begin_offset,
                min_offset: got.min_offset,
                max_offset: got.max_offset,
                messages: got
                    .messages
                    .into_iter()
                    .map(|(queue_offset, body)| Pulled { queue_offset, body })
                    .collect(),
            },
            Err(_) => Response::PullMessage {
                status: PullStatus::RetryImmediately,
                next_begin_offset: offset,
                min_offset: 0,
                max_offset: 0,
                messages: Vec::new(),
            },
        }
    }

    /// Answer the SYNC_FLUSH puts a flush reached (or gave up on).
    fn answer(&self, answers: Vec<(u64, Flushed)>) {
        let mut waiting = self.waiting.borrow_mut();
        for (id, outcome) in answers {
            if let Some(answer) = waiting.remove(&id) {
                let _ = answer.send(outcome);
            }
        }
    }

    /// One CommitLog flush of `least_pages`, carried out: the fsync awaited, the flushed
    /// position moved by the release's rule. Returns whether it moved.
    async fn flush_commit_log(&self, least_pages: u64) -> bool {
        let planned = self.store.borrow().plan_flush(least_pages);
        let moved = match planned {
            None => false,
            Some(flush) => {
                let fsync = self.disk.fsync(&flush.path).await;
                let failed = fsync.is_err();
                let mut store = self.store.borrow_mut();
                let moved = store.flushed(flush, fsync);
                if failed && !store.rules().failed_flush_advances {
                    self.writable.set(false);
                }
                moved
            }
        };
        self.note_commit_log();
        moved
    }

    /// Record where the CommitLog stands, if it moved since the last record.
    fn note_commit_log(&self) {
        let store = self.store.borrow();
        let at = (
            store.commit_log().max_offset(),
            store.commit_log().flushed_where(),
        );
        if self.noted.replace(at) != at {
            self.facts.record(Fact::CommitLog {
                broker: self.host,
                max_offset: at.0,
                flushed_where: at.1,
            });
        }
    }

    /// `StoreCheckpoint.flush`: the page written in place and forced.
    async fn flush_checkpoint(&self) {
        if self.store.borrow().write_checkpoint().is_ok() {
            let _ = self
                .disk
                .fsync(crate::rocketmq::store::checkpoint::PATH)
                .await;
        }
    }

    /// Every ConsumeQueue flushed as far as `least_pages` lets it (one file each).
    async fn flush_queues(&self, least_pages: u64) {
        let flushes = self.store.borrow().plan_queue_flushes(least_pages);
        for (key, flush) in flushes {
            let fsync = self.disk.fsync(&flush.path).await;
            self.store.borrow_mut().queue_flushed(&key, flush, fsync);
        }
    }

    /// `DefaultMessageStore.shutdown`: the services flush what they hold (the CommitLog
    /// and the ConsumeQueues in full, the checkpoint), and the `abort` file is deleted if
    /// the store is writable and dispatch caught up.
    async fn shut_down(&self) {
        for _ in 0..RETRY_TIMES_OVER {
            if self.store.borrow_mut().commit(0).is_err() {
                break;
            }
            if !self.flush_commit_log(0).await {
                break;
            }
        }
        let _ = self.store.borrow_mut().reput();
        for _ in 0..RETRY_TIMES_OVER {
            self.flush_queues(0).await;
        }
        self.flush_checkpoint().await;
        let abort_deleted = self.writable.get()
            && self.store.borrow().dispatched_all()
            && self.disk.delete(ABORT).is_ok();
        self.facts.record(Fact::ShutDown {
            broker: self.host,
            abort_deleted,
        });
        tracing::info!(host = %self.host, abort_deleted, "broker shut down");
    }
}

/// `RETRY_TIMES_OVER`: how many flushes a stopping service makes.
const RETRY_TIMES_OVER: usize = 10;

/// The producers' address as records hold it (`BORNHOST`): every client here is one
/// address, which no check reads.
const CLIENT_HOST: Host = Host {
    ip: [10, 0, 1, 1],
    port: 50000,
};

/// The broker's own address (`STOREHOST`): 10.0.0.N by group and id, port 10911.
fn store_host(host: HostName) -> Host {
    let (group, id) = match host {
        HostName::GroupBroker { group, id } => (group, id),
        _ => (0, 0),
    };
    Host {
        ip: [10, 0, group as u8, 10 + id as u8],
        port: i32::from(remoting::BROKER_PORT),
    }
}
