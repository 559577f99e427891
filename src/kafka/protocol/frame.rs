//! Kafka's request/response plumbing over the machine's length-prefixed frames
//! (`os::frame`).
//!
//! ## Wire format
//! A frame's body is a postcard encoding of an [`Envelope`]: a correlation id (as in
//! Kafka's request header) and the message. The server echoes the request's correlation id, so a client can tell a response from
//! one to an earlier request it gave up on.
//!
//! ## What the network does to a connection
//! turmoil drops the segments sent over a partitioned link and never retransmits them,
//! and a connection to a crashed host simply stops answering. A stream that lost a
//! segment or timed out part-way through a frame is therefore unusable: after any
//! error, [`Connection`] refuses further calls and the caller must drop it and
//! [`Connection::connect`] again. Every wait on the network here has a timeout.

use crate::kafka::protocol::messages::{address, Request, Response, PORT};
use crate::os::frame::{read_frame, write_frame, NetError};
use crate::types::HostName;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::time::Duration;
use turmoil::net::{TcpListener, TcpStream};

/// Kafka's `connections.max.idle.ms` (10 minutes): a server drops a connection that sent
/// nothing for this long, so connections from crashed clients do not pile up.
pub const CONNECTIONS_MAX_IDLE: Duration = Duration::from_secs(600);

/// How long a server waits for a response to leave before it drops the connection.
/// turmoil only blocks a write when the peer's receive buffer is full.
const RESPONSE_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What travels in a frame: Kafka's correlation id and the message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub correlation_id: u32,
    pub body: T,
}

/// A client connection to one host's server.
///
/// Requests may be pipelined with [`Connection::send`] and [`Connection::receive`]
/// (the server answers them in order); [`Connection::call`] does both for one request.
/// After any error the connection is *broken*: every later use returns
/// [`NetError::Disconnected`], and the caller must drop it and connect again.
pub struct Connection {
    stream: TcpStream,
    host: HostName,
    next_correlation_id: u32,
    broken: bool,
}

impl Connection {
    /// Connect to `host`'s server. turmoil's connect to a crashed or partitioned host
    /// never returns, hence the timeout.
    pub async fn connect(host: HostName, timeout: Duration) -> Result<Connection, NetError> {
        match tokio::time::timeout(timeout, TcpStream::connect(address(host))).await {
            Err(_) => Err(NetError::Timeout),
            Ok(Err(e)) => Err(NetError::Connect(format!("{host}: {e}"))),
            Ok(Ok(stream)) => Ok(Connection {
                stream,
                host,
                next_correlation_id: 0,
                broken: false,
            }),
        }
    }

    /// The host this connection leads to.
    pub fn host(&self) -> HostName {
        self.host
    }

    /// Whether an earlier error made this connection unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Send `request` and await its response, all within `timeout`.
    pub async fn call(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> Result<Response, NetError> {
        let outcome = tokio::time::timeout(timeout, async {
            let correlation_id = self.send(request).await?;
            let (answered, response) = self.receive_now().await?;
            if answered != correlation_id {
                self.broken = true;
                return Err(NetError::Codec(format!(
                    "response to request {answered} while awaiting {correlation_id}"
                )));
            }
            Ok(response)
        })
        .await;
        match outcome {
            Ok(result) => result,
            Err(_) => {
                self.broken = true;
                Err(NetError::Timeout)
            }
        }
    }

    /// Send `request` without waiting for its response; returns its correlation id.
    /// A write only blocks while the peer's receive buffer is full.
    pub async fn send(&mut self, request: &Request) -> Result<u32, NetError> {
        if self.broken {
            return Err(NetError::Disconnected);
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let envelope = Envelope {
            correlation_id,
            body: request,
        };
        let written = write_frame(&mut self.stream, &envelope).await;
        if written.is_err() {
            self.broken = true;
        }
        written.map(|()| correlation_id)
    }

    /// Await the next response (responses come in request order), within `timeout`.
    pub async fn receive(&mut self, timeout: Duration) -> Result<(u32, Response), NetError> {
        match tokio::time::timeout(timeout, self.receive_now()).await {
            Ok(result) => result,
            Err(_) => {
                self.broken = true;
                Err(NetError::Timeout)
            }
        }
    }

    async fn receive_now(&mut self) -> Result<(u32, Response), NetError> {
        if self.broken {
            return Err(NetError::Disconnected);
        }
        match read_frame::<_, Envelope<Response>>(&mut self.stream).await {
            Ok(envelope) => Ok((envelope.correlation_id, envelope.body)),
            Err(e) => {
                self.broken = true;
                Err(e)
            }
        }
    }
}

/// Accept loop on `0.0.0.0:PORT`: one task per connection, which reads a request, awaits
/// `handler(request, peer host name)`, writes the response, and only then reads the
/// next request (Kafka mutes a channel until its response is sent, which keeps
/// responses in request order). The loop does nothing but accept, because a full
/// turmoil listen backlog panics. Returns only if the port cannot be bound.
pub async fn serve<H, F>(handler: H) -> std::io::Result<()>
where
    H: Fn(Request, String) -> F + Clone + 'static,
    F: Future<Output = Response> + 'static,
{
    let listener = TcpListener::bind(("0.0.0.0", PORT)).await?;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!(error = %e, "accept failed");
                continue;
            }
        };
        let peer_name = turmoil::reverse_lookup(peer.ip()).unwrap_or_else(|| peer.ip().to_string());
        tokio::task::spawn_local(serve_connection(stream, peer_name, handler.clone()));
    }
}

/// One connection's request loop; ends at the first network or codec error.
async fn serve_connection<H, F>(mut stream: TcpStream, peer: String, handler: H)
where
    H: Fn(Request, String) -> F,
    F: Future<Output = Response>,
{
    // One idle timer for the connection's life, re-armed per request: a busy connection
    // would otherwise register and drop a timer for every request it reads.
    let idle = tokio::time::sleep(CONNECTIONS_MAX_IDLE);
    tokio::pin!(idle);
    loop {
        idle.as_mut()
            .reset(tokio::time::Instant::now() + CONNECTIONS_MAX_IDLE);
        let read = tokio::select! {
            biased;
            read = read_frame::<_, Envelope<Request>>(&mut stream) => read,
            () = &mut idle => return,
        };
        let request = match read {
            Ok(request) => request,
            Err(NetError::Codec(reason)) => {
                tracing::debug!(%peer, %reason, "dropping connection after a bad frame");
                return;
            }
            Err(_) => return,
        };
        let response = Envelope {
            correlation_id: request.correlation_id,
            body: handler(request.body, peer.clone()).await,
        };
        match tokio::time::timeout(RESPONSE_WRITE_TIMEOUT, write_frame(&mut stream, &response))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::protocol::messages::ClusterMetadata;
    use crate::os::frame::MAX_FRAME_BYTES;
    use std::cell::Cell;
    use std::rc::Rc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn metadata(version: u64) -> ClusterMetadata {
        ClusterMetadata {
            version,
            ..ClusterMetadata::default()
        }
    }

    const SERVER: HostName = HostName::Controller;
    const CLIENT: &str = "broker-1";

    /// A server that answers `Metadata` with a version counting the requests it saw,
    /// after `delay`.
    fn start_server(sim: &mut turmoil::Sim<'_>, delay: Duration) {
        sim.host(SERVER.to_string(), move || async move {
            let seen = Rc::new(Cell::new(0u64));
            serve(move |request, peer| {
                let seen = seen.clone();
                async move {
                    assert_eq!(peer, CLIENT);
                    tokio::time::sleep(delay).await;
                    seen.set(seen.get() + 1);
                    match request {
                        Request::Metadata => Response::Metadata(metadata(seen.get())),
                        _ => Response::AllocateProducerId {
                            producer_id: crate::kafka::types::ProducerId::NONE,
                        },
                    }
                }
            })
            .await?;
            Ok(())
        });
    }

    #[test]
    fn round_trip_and_pipelined_responses_come_in_request_order() {
        let mut sim = turmoil::Builder::new().build();
        start_server(&mut sim, Duration::from_millis(10));
        sim.client(CLIENT, async {
            let mut connection = Connection::connect(SERVER, Duration::from_secs(1)).await?;
            match connection
                .call(&Request::Metadata, Duration::from_secs(1))
                .await?
            {
                Response::Metadata(m) => assert_eq!(m.version, 1),
                other => panic!("unexpected {other:?}"),
            }
            let first = connection.send(&Request::Metadata).await?;
            let second = connection.send(&Request::Metadata).await?;
            assert_ne!(first, second);
            for (expected_id, expected_version) in [(first, 2), (second, 3)] {
                match connection.receive(Duration::from_secs(1)).await? {
                    (id, Response::Metadata(m)) => {
                        assert_eq!(id, expected_id);
                        assert_eq!(m.version, expected_version);
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            Ok(())
        });
        sim.run().expect("simulation");
    }

    #[test]
    fn call_over_a_partitioned_link_times_out_and_breaks_the_connection() {
        let mut sim = turmoil::Builder::new().build();
        start_server(&mut sim, Duration::ZERO);
        sim.client(CLIENT, async {
            let mut connection = Connection::connect(SERVER, Duration::from_secs(1)).await?;
            connection
                .call(&Request::Metadata, Duration::from_secs(1))
                .await?;
            turmoil::partition(CLIENT, SERVER.to_string());
            let started = tokio::time::Instant::now();
            let outcome = connection
                .call(&Request::Metadata, Duration::from_millis(300))
                .await;
            assert_eq!(outcome.err(), Some(NetError::Timeout));
            assert!(started.elapsed() < Duration::from_millis(400));
            assert!(connection.is_broken());
            turmoil::repair(CLIENT, SERVER.to_string());
            let after = connection
                .call(&Request::Metadata, Duration::from_secs(1))
                .await;
            assert_eq!(after.err(), Some(NetError::Disconnected));
            // A fresh connection works again once the link is repaired.
            let mut fresh = Connection::connect(SERVER, Duration::from_secs(1)).await?;
            fresh
                .call(&Request::Metadata, Duration::from_secs(1))
                .await?;
            Ok(())
        });
        sim.run().expect("simulation");
    }

    #[test]
    fn connect_to_a_partitioned_host_fails_within_the_timeout() {
        let mut sim = turmoil::Builder::new().build();
        start_server(&mut sim, Duration::ZERO);
        sim.client(CLIENT, async {
            turmoil::partition(CLIENT, SERVER.to_string());
            let started = tokio::time::Instant::now();
            let outcome = Connection::connect(SERVER, Duration::from_millis(200)).await;
            // turmoil drops the SYN, which it reports as a refused connection; a crashed
            // host leaves it hanging, which the timeout ends. Either way: promptly.
            assert!(
                matches!(outcome, Err(NetError::Timeout | NetError::Connect(_))),
                "got {:?}",
                outcome.err()
            );
            assert!(started.elapsed() <= Duration::from_millis(200));
            Ok(())
        });
        sim.run().expect("simulation");
    }

    #[test]
    fn a_call_to_a_crashed_host_ends_at_its_timeout() {
        let mut sim = turmoil::Builder::new().build();
        start_server(&mut sim, Duration::from_millis(50));
        sim.client(CLIENT, async {
            let mut connection = Connection::connect(SERVER, Duration::from_secs(1)).await?;
            connection
                .call(&Request::Metadata, Duration::from_secs(1))
                .await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            // The server crashed meanwhile.
            let started = tokio::time::Instant::now();
            let outcome = connection
                .call(&Request::Metadata, Duration::from_millis(300))
                .await;
            assert!(outcome.is_err(), "got {outcome:?}");
            assert!(started.elapsed() <= Duration::from_millis(300));
            let reconnect = Connection::connect(SERVER, Duration::from_millis(300)).await;
            assert!(reconnect.is_err());
            Ok(())
        });
        while sim.elapsed() < Duration::from_millis(500) {
            sim.step().expect("step");
        }
        sim.crash(SERVER.to_string());
        sim.run().expect("simulation");
    }

    #[test]
    fn server_drops_a_connection_that_announces_an_oversize_frame() {
        let mut sim = turmoil::Builder::new().build();
        start_server(&mut sim, Duration::ZERO);
        sim.client(CLIENT, async {
            let mut stream = TcpStream::connect(address(SERVER)).await?;
            let oversize = (MAX_FRAME_BYTES as u32 + 1).to_be_bytes();
            stream.write_all(&oversize).await?;
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut byte)).await;
            // The server closed the connection: EOF (or a reset), not a response.
            assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "got {read:?}");
            Ok(())
        });
        sim.run().expect("simulation");
    }

    #[tokio::test]
    async fn read_frame_rejects_a_length_above_the_limit() {
        let (mut writer, mut reader) = tokio::io::duplex(64);
        writer
            .write_all(&(MAX_FRAME_BYTES as u32 + 1).to_be_bytes())
            .await
            .expect("write");
        let outcome = read_frame::<_, Envelope<Request>>(&mut reader).await;
        assert!(
            matches!(outcome, Err(NetError::Codec(_))),
            "got {outcome:?}"
        );
    }

    #[tokio::test]
    async fn write_frame_refuses_a_body_above_the_limit() {
        let (mut writer, _reader) = tokio::io::duplex(64);
        let body = vec![0u8; MAX_FRAME_BYTES + 1];
        let outcome = write_frame(&mut writer, &body).await;
        assert!(
            matches!(outcome, Err(NetError::Codec(_))),
            "got {outcome:?}"
        );
    }

    #[tokio::test]
    async fn frames_round_trip_through_a_byte_stream() {
        let (mut writer, mut reader) = tokio::io::duplex(1024);
        let sent = Envelope {
            correlation_id: 7,
            body: metadata(42),
        };
        write_frame(&mut writer, &sent).await.expect("write");
        drop(writer);
        let received: Envelope<ClusterMetadata> = read_frame(&mut reader).await.expect("read");
        assert_eq!(received, sent);
        let eof = read_frame::<_, Envelope<ClusterMetadata>>(&mut reader).await;
        assert_eq!(eof.err(), Some(NetError::Disconnected));
    }
}
