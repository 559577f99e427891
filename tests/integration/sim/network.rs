//! What TCP peers see when a host dies: a power loss delivers what the machine had already
//! sent and silences it; a peer with unacknowledged bytes learns of the reboot at its next
//! retransmission (RST); a peer with nothing to send waits for its own timeout; a killed
//! process's kernel refuses connections at once.

use hightide::os::clock::{self, SimTime};
use hightide::sim::world::World;
use hightide::types::HostName;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::{TcpListener, TcpStream};

const PORT: u16 = 7000;
const LATENCY: Duration = Duration::from_millis(10);
const SERVER: HostName = HostName::Broker(1);
const CLIENT: HostName = HostName::Broker(2);

type Log = Rc<RefCell<Vec<(SimTime, String)>>>;
/// A fault and the millisecond it fires at.
type Fault = (u64, fn(&mut World));

fn note(log: &Log, what: impl Into<String>) {
    log.borrow_mut().push((clock::now(), what.into()));
}

/// Answers each request (a u64) with its double after `delay`, noting what it receives.
async fn server(log: Log, delay: Duration) -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", PORT)).await?;
    note(&log, "booted");
    loop {
        let (mut stream, _) = listener.accept().await?;
        let log = log.clone();
        tokio::task::spawn_local(async move {
            while let Ok(value) = stream.read_u64().await {
                note(&log, format!("request {value}"));
                tokio::time::sleep(delay).await;
                if stream.write_u64(value * 2).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// At `at`, connects (if not yet connected), sends one request and notes how it ends.
async fn client(
    log: Log,
    connect_at: SimTime,
    send_at: SimTime,
    timeout: Duration,
) -> turmoil::Result {
    clock::sleep_until(connect_at).await;
    let mut stream =
        match tokio::time::timeout(timeout, TcpStream::connect((SERVER.to_string(), PORT))).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                note(&log, format!("connect failed: {:?}", e.kind()));
                return Ok(());
            }
            Err(_) => {
                note(&log, "connect timed out");
                return Ok(());
            }
        };
    note(&log, "connected");
    clock::sleep_until(send_at).await;
    stream.write_u64(21).await?;
    let outcome = match tokio::time::timeout(timeout, stream.read_u64()).await {
        Ok(Ok(value)) => format!("reply {value}"),
        Ok(Err(e)) => format!("error {:?}", e.kind()),
        Err(_) => "timed out".to_string(),
    };
    note(&log, outcome);
    std::future::pending().await
}

struct Run {
    server: Vec<(SimTime, String)>,
    client: Vec<(SimTime, String)>,
}

impl Run {
    /// When the client noted `what`, if it did.
    fn client_noted(&self, what: &str) -> Option<SimTime> {
        self.client.iter().find(|(_, w)| w == what).map(|(t, _)| *t)
    }
}

/// A server and a client 10 ms apart; `faults` fire at their instants.
fn run(
    server_delay: Duration,
    (connect_at, send_at): (u64, u64),
    timeout: Duration,
    faults: &[Fault],
    until: u64,
) -> Run {
    let server_log: Log = Rc::default();
    let client_log: Log = Rc::default();
    {
        let mut world = World::new(1, LATENCY, LATENCY);
        let log = server_log.clone();
        world.add_host(SERVER, None, move || server(log.clone(), server_delay));
        let log = client_log.clone();
        world.add_host(CLIENT, None, move || {
            client(
                log.clone(),
                SimTime::from_millis(connect_at),
                SimTime::from_millis(send_at),
                timeout,
            )
        });
        for (at, fault) in faults {
            world
                .run_until(SimTime::from_millis(*at))
                .expect("the world runs");
            fault(&mut world);
        }
        world
            .run_until(SimTime::from_millis(until))
            .expect("the world runs");
    }
    let server = server_log.borrow().clone();
    let client = client_log.borrow().clone();
    Run { server, client }
}

fn power_loss(world: &mut World) {
    world.power_loss(SERVER);
}

fn restart(world: &mut World) {
    world.restart(SERVER);
}

fn kill(world: &mut World) {
    world.kill(SERVER);
}

fn ms(ms: u64) -> SimTime {
    SimTime::from_millis(ms)
}

#[test]
fn a_reply_on_the_wire_when_the_server_loses_power_arrives() {
    // The request reaches the server at 110 ms; its reply leaves at once and is on the
    // wire until 120 ms. The power goes at 115 ms.
    let run = run(
        Duration::ZERO,
        (0, 100),
        Duration::from_secs(5),
        &[(115, power_loss)],
        1_000,
    );
    assert!(
        run.client_noted("reply 42").is_some(),
        "client saw {:?}",
        run.client
    );
}

#[test]
fn a_request_on_the_wire_to_a_host_that_loses_power_is_lost_and_reset_at_its_next_retransmission() {
    // Sent at 100 ms, due at 110 ms; the power goes at 105 ms and comes back at 1 s. The
    // client retransmits at 300, 700 and 1500 ms: the last reaches the new boot at 1510 ms,
    // whose kernel has no such connection and answers RST, back at 1520 ms.
    let run = run(
        Duration::ZERO,
        (0, 100),
        Duration::from_secs(30),
        &[(105, power_loss), (1_000, restart)],
        3_000,
    );
    let requests = run
        .server
        .iter()
        .filter(|(_, w)| w.starts_with("request"))
        .count();
    assert_eq!(requests, 0, "server saw {:?}", run.server);
    let reset = run
        .client_noted("error ConnectionReset")
        .unwrap_or_else(|| panic!("no reset: client saw {:?}", run.client));
    assert!(ms(1_500) <= reset && reset <= ms(1_540), "reset at {reset}");
}

#[test]
fn a_request_the_server_received_before_it_lost_power_waits_for_the_timeout() {
    // The server's kernel acknowledged the request at 110 ms, so the client has nothing to
    // retransmit: it learns nothing from the reboot and waits out its 2 s timeout.
    let run = run(
        Duration::from_secs(10),
        (0, 100),
        Duration::from_secs(2),
        &[(500, power_loss), (1_000, restart)],
        3_000,
    );
    let timed_out = run
        .client_noted("timed out")
        .unwrap_or_else(|| panic!("no timeout: client saw {:?}", run.client));
    assert!(timed_out >= ms(2_100), "timed out at {timed_out}");
}

#[test]
fn a_host_without_power_leaves_a_connect_hanging() {
    let run = run(
        Duration::ZERO,
        (500, 600),
        Duration::from_secs(2),
        &[(100, power_loss)],
        3_000,
    );
    assert!(
        run.client_noted("connect timed out").is_some(),
        "client saw {:?}",
        run.client
    );
}

#[test]
fn a_killed_process_has_its_kernel_refuse_connections_at_once() {
    let run = run(
        Duration::ZERO,
        (500, 600),
        Duration::from_secs(2),
        &[(100, kill)],
        3_000,
    );
    let refused = run
        .client_noted("connect failed: ConnectionRefused")
        .unwrap_or_else(|| panic!("not refused: client saw {:?}", run.client));
    assert!(refused <= ms(520), "refused at {refused}");
}

#[test]
fn a_killed_process_closes_its_connections() {
    // The server holds the request for 10 s; the kill at 500 ms closes its socket (FIN),
    // which reaches the client 10 ms later.
    let run = run(
        Duration::from_secs(10),
        (0, 100),
        Duration::from_secs(5),
        &[(500, kill)],
        3_000,
    );
    let (at, what) = run.client.last().expect("client noted something").clone();
    assert!(what.starts_with("error"), "client saw {:?}", run.client);
    assert!(at <= ms(520), "closed at {at}");
}

fn partition(world: &mut World) {
    world.partition(&[vec![SERVER], vec![CLIENT]]);
}

fn heal(world: &mut World) {
    world.heal_network();
}

#[test]
fn a_request_held_by_a_partition_goes_out_at_the_next_retransmission_after_the_heal() {
    // Cut at 95 ms, sent at 100 ms, healed at 1 s: retransmitted at 1.5 s (200, 400 and
    // 800 ms after the first send), answered 20 ms later.
    let run = run(
        Duration::ZERO,
        (0, 100),
        Duration::from_secs(5),
        &[(95, partition), (1_000, heal)],
        3_000,
    );
    let reply = run
        .client_noted("reply 42")
        .unwrap_or_else(|| panic!("no reply: client saw {:?}", run.client));
    assert!(ms(1_500) <= reply && reply <= ms(1_540), "reply at {reply}");
}

/// Sends two 100,000-byte writes as soon as a client connects.
async fn bulk_server() -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", PORT)).await?;
    loop {
        let (mut stream, _) = listener.accept().await?;
        tokio::task::spawn_local(async move {
            for _ in 0..2 {
                if stream.write_all(&[7; 100_000]).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Connects at 0 s and again at 2 s, and notes when each 100,000 bytes have arrived.
async fn bulk_client(log: Log) -> turmoil::Result {
    for (round, at) in [(1, 0), (2, 2_000)] {
        clock::sleep_until(ms(at)).await;
        let mut stream = TcpStream::connect((SERVER.to_string(), PORT)).await?;
        note(&log, format!("connected {round}"));
        let mut buf = vec![0; 100_000];
        for n in 1..=2 {
            stream.read_exact(&mut buf).await?;
            note(&log, format!("chunk {round}.{n}"));
        }
    }
    std::future::pending().await
}

/// What the client noted, with every link carrying `bandwidth`; with `narrowed`, the one
/// link carries that from the start until a heal at 1 s.
fn bulk(bandwidth: Option<u64>, narrowed: Option<u64>) -> Vec<(SimTime, String)> {
    let log: Log = Rc::default();
    {
        let mut world = World::new(1, LATENCY, LATENCY);
        world.set_bandwidth(bandwidth);
        world.add_host(SERVER, None, bulk_server);
        let client_log = log.clone();
        world.add_host(CLIENT, None, move || bulk_client(client_log.clone()));
        if let Some(narrowed) = narrowed {
            world.narrow_link(SERVER, CLIENT, narrowed);
        }
        world.run_until(ms(1_000)).expect("the world runs");
        world.heal_network();
        world.run_until(ms(5_000)).expect("the world runs");
    }
    let notes = log.borrow().clone();
    notes
}

/// Milliseconds from `connected R` to `what` (`chunk R.N`).
fn since_connected(notes: &[(SimTime, String)], what: &str) -> u128 {
    let find = |what: &str| {
        let (t, _) = notes.iter().find(|(_, w)| w == what).expect(what);
        *t
    };
    let round = &what["chunk ".len()..what.find('.').expect("chunk R.N")];
    (find(what) - find(&format!("connected {round}"))).as_millis()
}

#[test]
fn a_link_with_a_bandwidth_sends_one_write_after_another() {
    let unlimited = bulk(None, None);
    assert_eq!(
        since_connected(&unlimited, "chunk 1.1"),
        10,
        "{unlimited:?}"
    );
    assert_eq!(
        since_connected(&unlimited, "chunk 1.2"),
        10,
        "{unlimited:?}"
    );
    // 1 GB/s: 0.1 ms on the wire each, which rounds to no step at all.
    let fast = bulk(Some(1_000_000_000), None);
    assert_eq!(since_connected(&fast, "chunk 1.2"), 10, "{fast:?}");
    // 1 MB/s: each 100,000 bytes take 100 ms on the wire, the second behind the first.
    let limited = bulk(Some(1_000_000), None);
    for round in [1, 2] {
        let first = since_connected(&limited, &format!("chunk {round}.1"));
        let second = since_connected(&limited, &format!("chunk {round}.2"));
        assert!((110..=112).contains(&first), "{limited:?}");
        assert!((210..=212).contains(&second), "{limited:?}");
    }
}

#[test]
fn a_narrowed_link_is_wide_again_after_a_heal() {
    let notes = bulk(None, Some(1_000_000));
    assert!(
        (110..=112).contains(&since_connected(&notes, "chunk 1.1")),
        "{notes:?}"
    );
    assert!(
        (210..=212).contains(&since_connected(&notes, "chunk 1.2")),
        "{notes:?}"
    );
    assert_eq!(since_connected(&notes, "chunk 2.2"), 10, "{notes:?}");
}
