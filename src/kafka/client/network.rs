//! A producer's connection to one broker with requests pipelined on it, as Kafka's
//! `NetworkClient` keeps up to `max.in.flight.requests.per.connection` requests on one
//! socket. The broker answers a connection's requests in order; responses are matched by
//! correlation id, so an answer to a request the producer gave up on is dropped.
//!
//! A request that is not answered within its timeout closes the connection, as Kafka does:
//! the stream may hold half a frame, and every other request on it is then failed as
//! disconnected (their outcome is unknown: they were sent).

use crate::kafka::protocol::frame::Envelope;
use crate::kafka::protocol::messages::{address, Request, Response};
use crate::os::frame::{read_frame, write_frame, NetError};
use crate::types::HostName;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use turmoil::net::TcpStream;

/// A pipelined connection; cloning shares it.
#[derive(Clone)]
pub struct Pipeline {
    inner: Rc<Inner>,
}

struct Inner {
    outgoing: mpsc::UnboundedSender<Envelope<Request>>,
    /// Requests awaiting their response, by correlation id.
    pending: RefCell<BTreeMap<u32, oneshot::Sender<Response>>>,
    next_correlation_id: Cell<u32>,
    closed: Cell<bool>,
    /// Signalled when a response arrives or the connection closes, for `flush`.
    answered: Notify,
    tasks: RefCell<Vec<JoinHandle<()>>>,
}

impl Inner {
    fn close(&self) {
        self.closed.set(true);
        self.answered.notify_waiters();
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

/// A request handed to the connection; await its response with [`InFlight::response`].
pub struct InFlight {
    receiver: oneshot::Receiver<Response>,
    connection: Weak<Inner>,
}

impl InFlight {
    /// The response, or `Timeout` (and the connection is closed) or `Disconnected`.
    pub async fn response(self, timeout: Duration) -> Result<Response, NetError> {
        match tokio::time::timeout(timeout, self.receiver).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(NetError::Disconnected),
            Err(_) => {
                if let Some(inner) = self.connection.upgrade() {
                    inner.close();
                }
                Err(NetError::Timeout)
            }
        }
    }
}

impl Pipeline {
    /// Connect to `host`; turmoil's connect to a crashed or cut-off host never returns.
    pub async fn connect(host: HostName, timeout: Duration) -> Result<Pipeline, NetError> {
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(address(host))).await {
            Err(_) => return Err(NetError::Timeout),
            Ok(Err(e)) => return Err(NetError::Connect(format!("{host}: {e}"))),
            Ok(Ok(stream)) => stream,
        };
        let (read_half, write_half) = stream.into_split();
        let (outgoing, requests) = mpsc::unbounded_channel();
        let inner = Rc::new(Inner {
            outgoing,
            pending: RefCell::new(BTreeMap::new()),
            next_correlation_id: Cell::new(0),
            closed: Cell::new(false),
            answered: Notify::new(),
            tasks: RefCell::new(Vec::new()),
        });
        let writer =
            tokio::task::spawn_local(write_loop(write_half, requests, Rc::downgrade(&inner)));
        let reader = tokio::task::spawn_local(read_loop(read_half, Rc::downgrade(&inner)));
        inner.tasks.borrow_mut().extend([writer, reader]);
        Ok(Pipeline { inner })
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.get()
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.inner.pending.borrow().len()
    }

    /// Hand `request` to the connection; its response comes through the returned handle.
    pub fn send(&self, request: Request) -> Result<InFlight, NetError> {
        let correlation_id = self.enqueue(request)?;
        let (sender, receiver) = oneshot::channel();
        self.inner
            .pending
            .borrow_mut()
            .insert(correlation_id, sender);
        Ok(InFlight {
            receiver,
            connection: Rc::downgrade(&self.inner),
        })
    }

    fn enqueue(&self, request: Request) -> Result<u32, NetError> {
        if self.is_closed() {
            return Err(NetError::Disconnected);
        }
        let correlation_id = self.inner.next_correlation_id.get();
        self.inner
            .next_correlation_id
            .set(correlation_id.wrapping_add(1));
        self.inner
            .outgoing
            .send(Envelope {
                correlation_id,
                body: request,
            })
            .map_err(|_| NetError::Disconnected)?;
        Ok(correlation_id)
    }

    /// Wait, at most `timeout`, until every request has been answered or the connection
    /// closed. An `acks=0` producer drops its handles but must not exit before the broker
    /// took its requests: a server stops reading a connection whose peer has gone.
    pub async fn flush(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, async {
            while self.in_flight() > 0 && !self.is_closed() {
                self.inner.answered.notified().await;
            }
        })
        .await;
    }

    pub fn close(&self) {
        self.inner.close();
    }
}

async fn write_loop(
    mut stream: OwnedWriteHalf,
    mut requests: mpsc::UnboundedReceiver<Envelope<Request>>,
    inner: Weak<Inner>,
) {
    while let Some(envelope) = requests.recv().await {
        if write_frame(&mut stream, &envelope).await.is_err() {
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
        let envelope = read_frame::<_, Envelope<Response>>(&mut stream).await;
        let Some(inner) = inner.upgrade() else { return };
        match envelope {
            Ok(envelope) => {
                let waiter = inner.pending.borrow_mut().remove(&envelope.correlation_id);
                if let Some(waiter) = waiter {
                    // The waiter may be gone (acks=0); its answer then goes nowhere.
                    let _ = waiter.send(envelope.body);
                }
                inner.answered.notify_waiters();
            }
            Err(_) => {
                inner.close();
                return;
            }
        }
    }
}
