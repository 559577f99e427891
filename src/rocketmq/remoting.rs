//! RocketMQ's remoting layer (`org.apache.rocketmq.remoting`): requests and responses by
//! RocketMQ's request and response codes, matched by `opaque` on one connection per peer,
//! and answered in whatever order the server finishes them (a SYNC_FLUSH put answers after
//! its flush, a pull after its long poll). The messages travel as postcard frames
//! (`os::frame`), not as RocketMQ's JSON headers: what a run measures depends on what
//! each side knows and when, not on the header bytes.
//!
//! A request that is not answered in time closes its connection, as
//! `NettyRemotingClient.invokeSync` does with `clientCloseSocketIfTimeout` (true by
//! default): the stream may hold half a frame, and every other request on it then fails.
//! From 5.1.4 (#7057) it keeps the connection when getting it took most of the time.

use crate::config::rocketmq::Rules;
use crate::os::frame::{read_frame, write_frame, NetError};
use crate::types::HostName;
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::{Rc, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use turmoil::net::{TcpListener, TcpStream};

/// A broker's `listenPort`.
pub const BROKER_PORT: u16 = 10911;
/// The NameServer's `listenPort`.
pub const NAMESRV_PORT: u16 = 9876;

/// How long a client waits to connect (`connectTimeoutMillis`, 3 s).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// What a server does not finish in this long is dropped with its connection (a server
/// only blocks on a write when the peer's receive buffer is full).
const RESPONSE_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A topic as a broker registers it (`TopicConfig`): its queues on that broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicQueues {
    pub topic: String,
    pub queues: u32,
}

/// The route of a topic (`TopicRouteData`): each broker group's queues and its master,
/// in broker-name order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRoute {
    pub brokers: Vec<BrokerRoute>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRoute {
    /// `brokerName`: `broker-a`.
    pub broker_name: String,
    /// The master's address (`brokerAddrs[0]`), if it is registered.
    pub master: Option<HostName>,
    /// `writeQueueNums`.
    pub queues: u32,
}

/// A message as the producer sends it (`SendMessageRequestHeader` and the body).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendMessage {
    pub topic: String,
    pub queue_id: i32,
    pub born_timestamp: i64,
    /// The message's properties as the client wrote them (`UNIQ_KEY`, `WAIT`, ...).
    pub properties: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// `SEND_MESSAGE` (10).
    SendMessage(SendMessage),
    /// `PULL_MESSAGE` (11): up to `max_msg_nums` messages of a queue from `queue_offset`.
    PullMessage(PullMessage),
    /// `HEART_BEAT` (34): a client's consumer group and subscription, to every master.
    HeartBeat {
        client_id: String,
        group: String,
        topic: String,
    },
    /// `GET_CONSUMER_LIST_BY_GROUP` (38): the client ids of a group's live members.
    GetConsumerListByGroup { group: String },
    /// `QUERY_CONSUMER_OFFSET` (14): the group's committed offset in a queue.
    QueryConsumerOffset {
        group: String,
        topic: String,
        queue_id: i32,
    },
    /// `UPDATE_CONSUMER_OFFSET` (15), sent oneway: the group's next offset in a queue.
    UpdateConsumerOffset {
        group: String,
        topic: String,
        queue_id: i32,
        offset: i64,
    },
    /// `GET_MAX_OFFSET` (30) and `GET_MIN_OFFSET` (29) together: a queue's range.
    QueueRange { topic: String, queue_id: i32 },
    /// `REGISTER_BROKER` (103), to the NameServer.
    RegisterBroker {
        broker_name: String,
        broker_id: u32,
        address: HostName,
        topics: Vec<TopicQueues>,
    },
    /// `GET_ROUTEINFO_BY_TOPIC` (105), to the NameServer.
    GetRouteInfoByTopic { topic: String },
}

/// A pull (`PullMessageRequestHeader`), as the push consumer sends it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullMessage {
    pub group: String,
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub max_msg_nums: u32,
    /// `commitOffset` with `FLAG_COMMIT_OFFSET`: the group's consumed offset, which the
    /// master stores before it answers.
    pub commit_offset: Option<i64>,
    /// `suspendTimeoutMillis` with `FLAG_SUSPEND`: how long the broker may hold a pull that
    /// finds nothing (long polling).
    pub suspend: Option<Duration>,
}

/// `ResponseCode`: the codes the modelled paths answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseCode {
    /// `SUCCESS` (0).
    Success,
    /// `SYSTEM_ERROR` (1).
    SystemError,
    /// `FLUSH_DISK_TIMEOUT` (10): stored, the flush not confirmed in time.
    FlushDiskTimeout,
    /// `MESSAGE_ILLEGAL` (13).
    MessageIllegal,
    /// `SERVICE_NOT_AVAILABLE` (14): the store does not take writes.
    ServiceNotAvailable,
    /// `TOPIC_NOT_EXIST` (17).
    TopicNotExist,
}

impl ResponseCode {
    /// As RocketMQ names it.
    pub const fn name(self) -> &'static str {
        match self {
            ResponseCode::Success => "SUCCESS",
            ResponseCode::SystemError => "SYSTEM_ERROR",
            ResponseCode::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            ResponseCode::MessageIllegal => "MESSAGE_ILLEGAL",
            ResponseCode::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            ResponseCode::TopicNotExist => "TOPIC_NOT_EXIST",
        }
    }

    /// The broker stored the message (the answer carries its offsets).
    pub const fn stored(self) -> bool {
        matches!(self, ResponseCode::Success | ResponseCode::FlushDiskTimeout)
    }
}

/// `PullStatus` as the broker answers it (`GetMessageStatus` mapped to response codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PullStatus {
    /// `SUCCESS`: messages from the asked offset.
    Found,
    /// `PULL_NOT_FOUND`: nothing at or past the asked offset yet.
    NoNewMessage,
    /// `PULL_OFFSET_MOVED`: the asked offset is outside the queue; `next_begin_offset` is
    /// where the broker says to go on.
    OffsetMoved,
    /// `PULL_RETRY_IMMEDIATELY`: the queue's entry points at CommitLog bytes the broker
    /// cannot read now.
    RetryImmediately,
}

/// A pulled message: its queue offset and body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pulled {
    pub queue_offset: i64,
    pub body: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// A send's answer: where it was stored when `code` says it was.
    SendMessage {
        code: ResponseCode,
        queue_offset: i64,
        commit_log_offset: i64,
    },
    PullMessage {
        status: PullStatus,
        next_begin_offset: i64,
        min_offset: i64,
        max_offset: i64,
        messages: Vec<Pulled>,
    },
    /// A queue's first offset and the offset after its last entry, as dispatched.
    QueueRange {
        min_offset: i64,
        max_offset: i64,
    },
    RegisterBroker,
    HeartBeat,
    /// Never sent: the request is oneway.
    UpdateConsumerOffset,
    ConsumerList(Vec<String>),
    /// `None`: `QUERY_NOT_FOUND`.
    ConsumerOffset(Option<i64>),
    /// `NOTIFY_CONSUMER_IDS_CHANGED` (40), which a broker sends oneway to a group's
    /// members when one joins or leaves, so that they rebalance at once.
    NotifyConsumerIdsChanged {
        group: String,
    },
    /// `None`: `TOPIC_NOT_EXIST`.
    Route(Option<TopicRoute>),
    /// A request this server does not serve (`REQUEST_CODE_NOT_SUPPORTED`).
    NotSupported,
}

/// What travels in a frame: the request's `opaque`, which its response carries back, and
/// `RPC_ONEWAY` (a request that gets no answer, either way).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Command<T> {
    opaque: u32,
    oneway: bool,
    body: T,
}

/// A client connection as a server sees it: an id for the connection's lifetime, and a
/// way to send the client a oneway command over it (`NOTIFY_CONSUMER_IDS_CHANGED`).
#[derive(Clone, Debug)]
pub struct Peer {
    pub id: u64,
    outgoing: mpsc::UnboundedSender<Command<Response>>,
}

impl Peer {
    /// Send `body` oneway; a closed connection drops it, as Netty's write would fail.
    pub fn push(&self, body: Response) {
        let _ = self.outgoing.send(Command {
            opaque: 0,
            oneway: true,
            body,
        });
    }
}

/// Where a host's RocketMQ server listens.
pub fn address(host: HostName) -> (String, u16) {
    let port = match host {
        HostName::NameServer => NAMESRV_PORT,
        _ => BROKER_PORT,
    };
    (host.to_string(), port)
}

/// One connection to a server, with requests in flight on it; cloning shares it.
#[derive(Clone)]
pub struct Channel {
    inner: Rc<Inner>,
}

struct Inner {
    outgoing: mpsc::UnboundedSender<Command<Request>>,
    pending: RefCell<BTreeMap<u32, oneshot::Sender<Response>>>,
    next_opaque: Cell<u32>,
    closed: Cell<bool>,
    tasks: RefCell<Vec<JoinHandle<()>>>,
    /// Woken by a oneway `NOTIFY_CONSUMER_IDS_CHANGED` from the server.
    notified: Rc<Notify>,
}

impl Inner {
    fn close(&self) {
        self.closed.set(true);
        // Dropping the senders fails every waiting request as disconnected.
        self.pending.borrow_mut().clear();
        for task in self.tasks.borrow_mut().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.close();
    }
}

impl Channel {
    /// Connect to `host`; turmoil's connect to a crashed or cut-off host never returns.
    async fn connect(host: HostName, notified: Rc<Notify>) -> Result<Channel, NetError> {
        let stream =
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address(host))).await {
                Err(_) => return Err(NetError::Timeout),
                Ok(Err(e)) => return Err(NetError::Connect(format!("{host}: {e}"))),
                Ok(Ok(stream)) => stream,
            };
        let (read_half, write_half) = stream.into_split();
        let (outgoing, requests) = mpsc::unbounded_channel();
        let inner = Rc::new(Inner {
            outgoing,
            pending: RefCell::new(BTreeMap::new()),
            next_opaque: Cell::new(0),
            closed: Cell::new(false),
            tasks: RefCell::new(Vec::new()),
            notified,
        });
        let writer =
            tokio::task::spawn_local(write_loop(write_half, requests, Rc::downgrade(&inner)));
        let reader = tokio::task::spawn_local(read_loop(read_half, Rc::downgrade(&inner)));
        inner.tasks.borrow_mut().extend([writer, reader]);
        Ok(Channel { inner })
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.get()
    }

    /// `invokeOneway`: send `request`, wait for nothing.
    fn oneway(&self, request: Request) -> Result<(), NetError> {
        if self.is_closed() {
            return Err(NetError::Disconnected);
        }
        self.inner
            .outgoing
            .send(Command {
                opaque: 0,
                oneway: true,
                body: request,
            })
            .map_err(|_| NetError::Disconnected)
    }

    /// `invokeSync`'s wait: send `request` and wait at most `timeout` for its answer. A
    /// timeout closes the connection if `close_on_timeout`.
    async fn invoke(
        &self,
        request: Request,
        timeout: Duration,
        close_on_timeout: bool,
    ) -> Result<Response, NetError> {
        if self.is_closed() {
            return Err(NetError::Disconnected);
        }
        let opaque = self.inner.next_opaque.get();
        self.inner.next_opaque.set(opaque.wrapping_add(1));
        let (sender, receiver) = oneshot::channel();
        self.inner.pending.borrow_mut().insert(opaque, sender);
        self.inner
            .outgoing
            .send(Command {
                opaque,
                oneway: false,
                body: request,
            })
            .map_err(|_| NetError::Disconnected)?;
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(NetError::Disconnected),
            Err(_) => {
                if close_on_timeout {
                    self.inner.close();
                }
                Err(NetError::Timeout)
            }
        }
    }
}

async fn write_loop(
    mut stream: OwnedWriteHalf,
    mut requests: mpsc::UnboundedReceiver<Command<Request>>,
    inner: Weak<Inner>,
) {
    while let Some(command) = requests.recv().await {
        if write_frame(&mut stream, &command).await.is_err() {
            break;
        }
    }
    if let Some(inner) = inner.upgrade() {
        inner.close();
    }
}

/// Waits without a timeout of its own: every request's waiter has one, and closes the
/// connection (aborting this task) when it fires.
async fn read_loop(mut stream: OwnedReadHalf, inner: Weak<Inner>) {
    loop {
        let command = read_frame::<_, Command<Response>>(&mut stream).await;
        let Some(inner) = inner.upgrade() else { return };
        match command {
            Ok(command) if command.oneway => {
                if let Response::NotifyConsumerIdsChanged { .. } = command.body {
                    inner.notified.notify_one();
                }
            }
            Ok(command) => {
                let waiter = inner.pending.borrow_mut().remove(&command.opaque);
                if let Some(waiter) = waiter {
                    let _ = waiter.send(command.body);
                }
            }
            Err(_) => {
                inner.close();
                return;
            }
        }
    }
}

/// A client's connections, one per server, made when first needed and again after one
/// closed (`NettyRemotingClient`'s channel table). Callers that find no connection wait
/// for the one being made (`lockChannelTables`), so a client's requests to a server share
/// one connection and leave in the order they were made.
pub struct Client {
    channels: RefCell<BTreeMap<HostName, Channel>>,
    connecting: tokio::sync::Mutex<()>,
    /// The release's [`Rules::keep_channel_on_late_timeout`].
    keep_channel_on_late_timeout: bool,
    /// Woken when a server tells this client its consumer group changed.
    notified: Rc<Notify>,
}

/// Under [`Rules::keep_channel_on_late_timeout`], a timeout closes the connection only if
/// more than this was left for the answer (or more than a quarter of the timeout).
const MIN_CLOSE_TIMEOUT: Duration = Duration::from_millis(100);

/// Whether a request that timed out closes its connection, `left` being what getting
/// the connection left of `timeout` (`shouldClose`, with `clientCloseSocketIfTimeout`).
fn closes_on_timeout(
    keep_channel_on_late_timeout: bool,
    timeout: Duration,
    left: Duration,
) -> bool {
    !keep_channel_on_late_timeout || left > MIN_CLOSE_TIMEOUT || left > timeout / 4
}

impl Client {
    pub fn new(rules: &Rules) -> Client {
        Client {
            channels: RefCell::default(),
            connecting: tokio::sync::Mutex::default(),
            keep_channel_on_late_timeout: rules.keep_channel_on_late_timeout,
            notified: Rc::default(),
        }
    }

    /// What a server's `NOTIFY_CONSUMER_IDS_CHANGED` wakes.
    pub fn notified(&self) -> Rc<Notify> {
        self.notified.clone()
    }

    /// `invokeOneway`: get the connection to `host` within `timeout` and send `request`
    /// on it; nothing says whether it arrived.
    pub async fn oneway(
        &self,
        host: HostName,
        request: Request,
        timeout: Duration,
    ) -> Result<(), NetError> {
        self.channel(host, timeout).await?.oneway(request)
    }

    /// `invokeSync`: get the connection to `host` (waiting for or making it), then send
    /// `request` and wait for its answer for what is `left` of `timeout`. A connection
    /// that cannot be had in time sent nothing (RemotingConnectException); once it is
    /// had, running out of time is a RemotingTimeoutException, even with nothing sent.
    pub async fn invoke(
        &self,
        host: HostName,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, NetError> {
        let began = tokio::time::Instant::now();
        let channel = self.channel(host, timeout).await?;
        let left = timeout.saturating_sub(began.elapsed());
        let close_on_timeout = closes_on_timeout(self.keep_channel_on_late_timeout, timeout, left);
        if left.is_zero() {
            if close_on_timeout {
                channel.inner.close();
            }
            return Err(NetError::Timeout);
        }
        channel.invoke(request, left, close_on_timeout).await
    }

    /// `getAndCreateChannel`: the open connection to `host`, or a new one.
    async fn channel(&self, host: HostName, timeout: Duration) -> Result<Channel, NetError> {
        let open = || {
            let channels = self.channels.borrow();
            channels.get(&host).filter(|c| !c.is_closed()).cloned()
        };
        if let Some(channel) = open() {
            return Ok(channel);
        }
        let _connecting = tokio::time::timeout(timeout, self.connecting.lock())
            .await
            .map_err(|_| NetError::Connect(format!("{host}: timed out")))?;
        if let Some(channel) = open() {
            return Ok(channel);
        }
        // A connect that does not finish in time sent nothing.
        let channel = tokio::time::timeout(timeout, Channel::connect(host, self.notified.clone()))
            .await
            .map_err(|_| NetError::Connect(format!("{host}: timed out")))?
            .map_err(|e| match e {
                NetError::Timeout => NetError::Connect(format!("{host}: timed out")),
                other => other,
            })?;
        self.channels.borrow_mut().insert(host, channel.clone());
        Ok(channel)
    }
}

/// A server's side of its connections: each request handled with the connection it came
/// on, and each connection's end (`ChannelEventListener.onChannelClose`).
pub trait Server: Clone + 'static {
    fn handle(&self, request: Request, peer: &Peer) -> impl Future<Output = Response> + 'static;
    fn closed(&self, peer: &Peer);
}

/// Serve `port`: each connection's requests are handled concurrently, each answered when
/// its handler finishes, as Netty's processors do; a oneway request is not answered.
pub async fn serve<S: Server>(port: u16, server: S) -> std::io::Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", port)).await?;
    let mut next_peer = 0;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        next_peer += 1;
        tokio::task::spawn_local(serve_connection(stream, server.clone(), next_peer));
    }
}

async fn serve_connection<S: Server>(stream: TcpStream, server: S, id: u64) {
    let (mut read_half, mut write_half) = stream.into_split();
    let (answers, mut outgoing) = mpsc::unbounded_channel::<Command<Response>>();
    let peer = Peer {
        id,
        outgoing: answers.clone(),
    };
    let writer = tokio::task::spawn_local(async move {
        while let Some(answer) = outgoing.recv().await {
            let written = tokio::time::timeout(
                RESPONSE_WRITE_TIMEOUT,
                write_frame(&mut write_half, &answer),
            )
            .await;
            if !matches!(written, Ok(Ok(()))) {
                return;
            }
        }
    });
    while let Ok(command) = read_frame::<_, Command<Request>>(&mut read_half).await {
        let answers = answers.clone();
        let answer = server.handle(command.body, &peer);
        let oneway = command.oneway;
        tokio::task::spawn_local(async move {
            let body = answer.await;
            if !oneway {
                let _ = answers.send(Command {
                    opaque: command.opaque,
                    oneway: false,
                    body,
                });
            }
        });
    }
    server.closed(&peer);
    drop((answers, peer));
    let _ = writer.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 5.1.4's rule (#7057): a timeout closes the connection unless getting it took most
    /// of the time; before, always.
    #[test]
    fn a_timeout_keeps_the_connection_only_when_connecting_took_most_of_the_time() {
        let ms = Duration::from_millis;
        let send = ms(3000);
        assert!(closes_on_timeout(true, send, ms(2990)));
        assert!(closes_on_timeout(true, send, ms(101)));
        assert!(!closes_on_timeout(true, send, ms(100)));
        assert!(!closes_on_timeout(true, send, Duration::ZERO));
        assert!(closes_on_timeout(false, send, Duration::ZERO));
        // A short timeout: a quarter of it is the bound.
        assert!(closes_on_timeout(true, ms(200), ms(60)));
        assert!(!closes_on_timeout(true, ms(200), ms(50)));
    }
}
