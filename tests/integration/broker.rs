//! Brokers in a turmoil cluster with the real controller: replication end to end.

use crate::support;
use hightide::config::kafka::{Acks, BrokerConfig, TopicConfig};
use hightide::history::facts::Facts;
use hightide::kafka::broker::{self, BrokerContext};
use hightide::kafka::controller::{self, ControllerContext, MetadataView};
use hightide::kafka::protocol::frame::Connection;
use hightide::kafka::protocol::messages::{ErrorCode, Produce, ProduceResponse, Request, Response};
use hightide::kafka::record::BatchBuilder;
use hightide::kafka::storage::checkpoint;
use hightide::kafka::storage::log::read_records;
use hightide::kafka::types::{Incarnation, ProducerId};
use hightide::os::disk::{Disk, DiskConfig, DiskFault};
use hightide::types::{BrokerId, HostName, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BROKERS: u32 = 3;

/// The tests of this file run one at a time: tracing's callsite cache is global, so a
/// simulation on another thread can change which events a captured trace shows.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn tp() -> TopicPartition {
    TopicPartition::new("orders", 0)
}

/// A simulated cluster: its disks and the brokers' shutdown switches, by broker id - 1.
struct Cluster {
    sim: turmoil::Sim<'static>,
    disks: Vec<Disk>,
    shutdown: Vec<Rc<Cell<bool>>>,
}

/// A controller and three brokers hosting `orders/0` with replication factor 3.
fn cluster(config: BrokerConfig) -> Cluster {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(120))
        .rng_seed(7)
        .build();
    let controller_disk = Disk::new(DiskConfig::default(), 100);
    let placement = controller::placement(0, BROKERS, 3);
    let controller_config = config.clone();
    sim.host(HostName::Controller.to_string(), move || {
        controller::run(ControllerContext {
            disk: controller_disk.clone(),
            config: controller_config.clone(),
            brokers: BROKERS,
            topics: vec![(tp(), placement.clone(), TopicConfig::default())],
            view: MetadataView::default(),
            facts: Facts::default(),
            bugs: Default::default(),
        })
    });
    let mut disks = Vec::new();
    let mut switches = Vec::new();
    for id in 1..=BROKERS {
        let disk = Disk::new(DiskConfig::default(), u64::from(id));
        disks.push(disk.clone());
        let shutdown = Rc::new(Cell::new(false));
        switches.push(shutdown.clone());
        let config = config.clone();
        let incarnation = Rc::new(Cell::new(Incarnation(0)));
        sim.host(HostName::Broker(id).to_string(), move || {
            incarnation.set(incarnation.get().next());
            broker::run(BrokerContext {
                id: BrokerId(id),
                incarnation: incarnation.get(),
                config: config.clone(),
                topic_configs: BTreeMap::from([("orders".to_string(), TopicConfig::default())]),
                disk: disk.clone(),
                shutdown: shutdown.clone(),
                facts: Facts::default(),
                bugs: Default::default(),
                seed: u64::from(id) << 32 | incarnation.get().0,
            })
        });
    }
    Cluster {
        sim,
        disks,
        shutdown: switches,
    }
}

/// One step of the simulation; false once every client is done.
fn running(sim: &mut turmoil::Sim<'_>) -> bool {
    !support::step(sim).unwrap_or_else(|e| panic!("simulation failed: {e}"))
}

fn run_until_done(sim: &mut turmoil::Sim<'_>) {
    while running(sim) {}
}

/// The ack-after-HW contract end to end: once an `acks=all` produce is acknowledged,
/// every ISR member's log holds the batch at the same offsets.
#[test]
fn acks_all_batch_is_in_all_three_logs_when_acknowledged() {
    let _serial = serial();
    let Cluster { mut sim, disks, .. } = cluster(BrokerConfig {
        min_insync_replicas: 2,
        ..BrokerConfig::default()
    });
    let acked = Rc::new(RefCell::new(None));
    let result = acked.clone();
    sim.client("producer-1", async move {
        let leader = wait_for_leader(None, 3).await;
        let mut builder = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        builder.push(0, Some(b"key"), Some(b"first"));
        builder.push(0, Some(b"key"), Some(b"second"));
        let produce = Request::Produce(Produce {
            transactional_id: None,
            tp: tp(),
            acks: Acks::All,
            timeout_ms: 30_000,
            batch: builder.build(),
        });
        let mut connection =
            Connection::connect(HostName::Broker(leader.0), Duration::from_secs(1)).await?;
        let response = connection.call(&produce, Duration::from_secs(35)).await?;
        *result.borrow_mut() = Some(response);
        Ok(())
    });
    run_until_done(&mut sim);
    let Some(Response::Produce(response)) = acked.borrow_mut().take() else {
        panic!("no produce response")
    };
    assert_eq!(response.error, None, "acks=all produce failed");
    for (i, disk) in disks.iter().enumerate() {
        let records = read_records(disk, &tp()).expect("log readable");
        let values: Vec<_> = records
            .iter()
            .map(|(offset, _, record)| (offset.0, record.value.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            values,
            vec![
                (response.base_offset.0, b"first".to_vec()),
                (response.base_offset.0 + 1, b"second".to_vec())
            ],
            "broker-{} log",
            i + 1
        );
    }
}

/// Metadata from any reachable broker until `orders/0` has a leader that is not
/// `excluded` and an ISR of `isr_len`.
async fn wait_for_leader(excluded: Option<BrokerId>, isr_len: usize) -> BrokerId {
    loop {
        for id in 1..=BROKERS {
            let Ok(mut connection) =
                Connection::connect(HostName::Broker(id), Duration::from_secs(1)).await
            else {
                continue;
            };
            if let Ok(Response::Metadata(metadata)) = connection
                .call(&Request::Metadata, Duration::from_secs(1))
                .await
            {
                if let Some(state) = metadata.partitions.get(&tp()) {
                    if let Some(leader) = state.leader.filter(|l| Some(*l) != excluded) {
                        if state.isr.len() == isr_len {
                            return leader;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Failover: the leader is killed after an acknowledged write; the new leader takes a
/// second write once the controller fenced the old one; the old leader restarts, follows,
/// and rejoins the ISR; all three logs then hold both writes at the same offsets.
#[test]
fn killed_leader_rejoins_as_follower_and_logs_converge() {
    let _serial = serial();
    failover();
}

/// Same seed, same run: the failover's event trace is identical twice over.
#[test]
fn failover_trace_is_deterministic() {
    let _serial = serial();
    let first = trace_of(failover);
    let second = trace_of(failover);
    assert!(
        first.contains("became leader"),
        "the trace records role changes"
    );
    assert_eq!(first, second);
}

/// Every tracing event emitted while `run` runs, as text without wall-clock times.
fn trace_of(run: impl FnOnce()) -> String {
    // The process's trace subscriber goes in first. While this capture's subscriber is the
    // only one, a callsite that a test on another thread hits first is registered against
    // that thread's default, no subscriber at all, and stays disabled for this capture.
    hightide::sim::trace::with_trace(hightide::sim::trace::Print::Nothing, || ());
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .without_time()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::with_default(subscriber, run);
    let bytes = capture.0.lock().map(|b| b.clone()).unwrap_or_default();
    // hightide's events only, from their target on: whether the span prefix (the host)
    // is printed depends on tracing's global callsite cache, not on the run.
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| line.find("hightide::").map(|at| &line[at..]))
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut bytes) = self.0.lock() {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}

fn failover() {
    let Cluster { mut sim, disks, .. } = cluster(BrokerConfig {
        min_insync_replicas: 2,
        ..BrokerConfig::default()
    });
    let first_leader = Rc::new(Cell::new(None));
    let restarted = Rc::new(Cell::new(false));
    let acks = Rc::new(RefCell::new(Vec::new()));
    let (leader_out, restarted_in, acks_out) =
        (first_leader.clone(), restarted.clone(), acks.clone());
    sim.client("producer-1", async move {
        let leader = wait_for_leader(None, 3).await;
        let ack = produce(leader, Acks::All, b"before").await;
        acks_out.borrow_mut().push(ack);
        leader_out.set(Some(leader));
        let new_leader = wait_for_leader(Some(leader), 2).await;
        let ack = produce(new_leader, Acks::All, b"after").await;
        acks_out.borrow_mut().push(ack);
        while !restarted_in.get() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        wait_for_leader(None, 3).await;
        Ok(())
    });
    let mut crashed = None;
    while running(&mut sim) {
        if let (None, Some(leader)) = (crashed, first_leader.get()) {
            sim.crash(HostName::Broker(leader.0).to_string());
            crashed = Some((leader, sim.elapsed()));
        }
        if let Some((leader, at)) = crashed {
            if !restarted.get()
                && acks.borrow().len() == 2
                && sim.elapsed() > at + Duration::from_secs(1)
            {
                sim.bounce(HostName::Broker(leader.0).to_string());
                restarted.set(true);
            }
        }
    }
    let acks = acks.borrow();
    let offsets: Vec<i64> = acks
        .iter()
        .map(|ack| match ack {
            Some(ProduceResponse {
                error: None,
                base_offset,
                ..
            }) => base_offset.0,
            other => panic!("acks=all produce failed: {other:?}"),
        })
        .collect();
    let expected = vec![
        (offsets[0], b"before".to_vec()),
        (offsets[1], b"after".to_vec()),
    ];
    for (i, disk) in disks.iter().enumerate() {
        let values: Vec<_> = read_records(disk, &tp())
            .expect("log readable")
            .into_iter()
            .map(|(offset, _, record)| (offset.0, record.value.unwrap_or_default()))
            .collect();
        assert_eq!(values, expected, "broker-{} log", i + 1);
    }
}

async fn produce(leader: BrokerId, acks: Acks, value: &[u8]) -> Option<ProduceResponse> {
    let mut builder = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
    builder.push(0, None, Some(value));
    let produce = Request::Produce(Produce {
        transactional_id: None,
        tp: tp(),
        acks,
        timeout_ms: 30_000,
        batch: builder.build(),
    });
    let mut connection = Connection::connect(HostName::Broker(leader.0), Duration::from_secs(1))
        .await
        .ok()?;
    match connection.call(&produce, Duration::from_secs(35)).await {
        Ok(Response::Produce(response)) => Some(response),
        _ => None,
    }
}

/// Never acknowledge data whose flush failed: with a flush after every message, an EIO
/// on the leader's fsync answers the produce KAFKA_STORAGE_ERROR and halts the broker
/// (its only log dir is offline) without a clean-shutdown marker.
#[test]
fn failed_fsync_is_not_acknowledged_and_halts_the_broker() {
    let _serial = serial();
    let Cluster { mut sim, disks, .. } = cluster(BrokerConfig {
        log_flush_interval_messages: 1,
        ..BrokerConfig::default()
    });
    let outcome = Rc::new(RefCell::new(None));
    let (result, client_disks) = (outcome.clone(), disks.clone());
    sim.client("producer-1", async move {
        let leader = wait_for_leader(None, 3).await;
        let index = usize::try_from(leader.0 - 1)?;
        client_disks[index].inject(DiskFault::FsyncError)?;
        let response = produce(leader, Acks::Leader, b"doomed").await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        *result.borrow_mut() = Some((leader, response));
        Ok(())
    });
    run_until_done(&mut sim);
    let Some((leader, response)) = outcome.borrow_mut().take() else {
        panic!("client did not finish")
    };
    let response = response.expect("the broker answers before it halts");
    assert_eq!(response.error, Some(ErrorCode::KafkaStorageError));
    assert!(
        !sim.is_host_running(HostName::Broker(leader.0).to_string()),
        "the broker must halt"
    );
    let index = usize::try_from(leader.0 - 1).expect("small id");
    assert!(!disks[index].exists(checkpoint::CLEAN_SHUTDOWN));
}

/// Controlled shutdown: leadership moves away first, then the broker flushes, writes its
/// checkpoints and, last, its clean-shutdown marker, and stops.
#[test]
fn controlled_shutdown_hands_off_leadership_and_leaves_a_clean_marker() {
    let _serial = serial();
    let Cluster {
        mut sim,
        disks,
        shutdown,
    } = cluster(BrokerConfig::default());
    let outcome = Rc::new(RefCell::new(None));
    let result = outcome.clone();
    sim.client("producer-1", async move {
        let leader = wait_for_leader(None, 3).await;
        let acked = produce(leader, Acks::All, b"kept").await;
        shutdown[usize::try_from(leader.0 - 1)?].set(true);
        let successor = wait_for_leader(Some(leader), 2).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        *result.borrow_mut() = Some((leader, acked, successor));
        Ok(())
    });
    run_until_done(&mut sim);
    let Some((leader, acked, successor)) = outcome.borrow_mut().take() else {
        panic!("client did not finish")
    };
    assert_eq!(acked.and_then(|r| r.error), None);
    assert_ne!(successor, leader);
    assert!(
        !sim.is_host_running(HostName::Broker(leader.0).to_string()),
        "the broker must have stopped"
    );
    let disk = &disks[usize::try_from(leader.0 - 1).expect("small id")];
    assert!(disk.exists(checkpoint::CLEAN_SHUTDOWN));
    assert_eq!(
        disk.durable(checkpoint::CLEAN_SHUTDOWN),
        Some(Vec::new()),
        "the marker is durable"
    );
    let kept: Vec<_> = read_records(disk, &tp())
        .expect("log readable")
        .into_iter()
        .map(|(_, _, record)| record.value.unwrap_or_default())
        .collect();
    assert_eq!(kept, vec![b"kept".to_vec()]);
}

/// ISR shrink through the controller: a follower cut off from the leader (but not from the
/// controller) stops fetching; after `replica.lag.time.max.ms` the leader proposes an ISR
/// without it, and the `acks=all` write that waited on it is acknowledged by the rest.
#[test]
fn lagging_follower_is_shrunk_out_of_the_isr_and_acks_all_proceeds() {
    let _serial = serial();
    let Cluster { mut sim, disks, .. } = cluster(BrokerConfig {
        min_insync_replicas: 2,
        replica_lag_time_max: Duration::from_millis(2_000),
        ..BrokerConfig::default()
    });
    let cut = Rc::new(Cell::new(None));
    let outcome = Rc::new(RefCell::new(None));
    let (cut_out, result) = (cut.clone(), outcome.clone());
    sim.client("producer-1", async move {
        let leader = wait_for_leader(None, 3).await;
        let follower = BrokerId(leader.0 % BROKERS + 1);
        cut_out.set(Some((leader, follower)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let acked = produce(leader, Acks::All, b"acked-by-two").await;
        let leader_after = wait_for_leader(None, 2).await;
        *result.borrow_mut() = Some((leader, follower, acked, leader_after));
        Ok(())
    });
    let mut partitioned = false;
    while running(&mut sim) {
        if let (false, Some((leader, follower))) = (partitioned, cut.get()) {
            sim.partition(
                HostName::Broker(leader.0).to_string(),
                HostName::Broker(follower.0).to_string(),
            );
            partitioned = true;
        }
    }
    let Some((leader, follower, acked, leader_after)) = outcome.borrow_mut().take() else {
        panic!("client did not finish")
    };
    assert_eq!(
        acked.and_then(|r| r.error),
        None,
        "acks=all with 2 of 3 in the ISR"
    );
    assert_eq!(leader_after, leader, "no election: only the ISR shrank");
    let lagging = &disks[usize::try_from(follower.0 - 1).expect("small id")];
    assert!(read_records(lagging, &tp())
        .expect("log readable")
        .is_empty());
}

/// A transaction ended by its coordinator, end to end on three brokers: the leader appends
/// the ABORT marker acks=all, every replica indexes the abort in its `.txnindex`, a
/// read_committed reader sees neither the aborted batch nor the marker; a marker from an
/// older coordinator, or sent to a broker that does not lead, is refused.
#[test]
fn markers_end_a_transaction_on_every_replica() {
    use hightide::config::kafka::IsolationLevel;
    use hightide::kafka::protocol::messages::{Fetch, FetchPartition, TxnMarker, WriteTxnMarkers};
    use hightide::kafka::record::TxnResult;
    use hightide::kafka::storage::txn_index::TxnIndex;
    use hightide::types::{Epoch, Offset};

    let _serial = serial();
    let Cluster { mut sim, disks, .. } = cluster(BrokerConfig {
        min_insync_replicas: 2,
        ..BrokerConfig::default()
    });
    type Answers = Vec<(&'static str, Response)>;
    let answers: Rc<RefCell<Answers>> = Rc::new(RefCell::new(Vec::new()));
    let seen = answers.clone();
    sim.client("coordinator", async move {
        let leader = wait_for_leader(None, 3).await;
        let mut connection =
            Connection::connect(HostName::Broker(leader.0), Duration::from_secs(1)).await?;
        let mut call = async |what, request: Request| -> turmoil::Result {
            let response = connection.call(&request, Duration::from_secs(35)).await?;
            seen.borrow_mut().push((what, response));
            Ok(())
        };
        let mut batch = BatchBuilder::new(0, ProducerId(42), 0, 0).transactional();
        batch.push(0, None, Some(b"aborted"));
        call(
            "produce",
            Request::Produce(Produce {
                transactional_id: None,
                tp: tp(),
                acks: Acks::All,
                timeout_ms: 30_000,
                batch: batch.build(),
            }),
        )
        .await?;
        let marker = |coordinator_epoch| TxnMarker {
            producer_id: ProducerId(42),
            producer_epoch: 0,
            result: TxnResult::Abort,
            coordinator_epoch,
            partitions: vec![tp()],
        };
        let markers = |m| Request::WriteTxnMarkers(WriteTxnMarkers { markers: vec![m] });
        call("abort", markers(marker(3))).await?;
        call("zombie", markers(marker(2))).await?;
        for isolation in [
            IsolationLevel::ReadCommitted,
            IsolationLevel::ReadUncommitted,
        ] {
            let fetch = Request::Fetch(Fetch {
                replica: None,
                replica_epoch: None,
                isolation,
                max_wait_ms: 0,
                min_bytes: 0,
                session_id: 0,
                session_epoch: -1,
                partitions: vec![FetchPartition {
                    tp: tp(),
                    fetch_offset: Offset(0),
                    current_leader_epoch: Epoch::NONE,
                    last_fetched_epoch: None,
                    max_bytes: 1 << 20,
                }],
                forgotten: Vec::new(),
            });
            call(isolation.name(), fetch).await?;
        }
        let other = (1..=BROKERS)
            .find(|b| *b != leader.0)
            .expect("three brokers");
        let mut follower =
            Connection::connect(HostName::Broker(other), Duration::from_secs(1)).await?;
        let response = follower
            .call(&markers(marker(4)), Duration::from_secs(35))
            .await?;
        seen.borrow_mut().push(("follower", response));
        Ok(())
    });
    run_until_done(&mut sim);
    let answers = answers.borrow();
    let answer = |what: &str| {
        answers
            .iter()
            .find(|(w, _)| *w == what)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("no {what} answer"))
    };
    let marker_error = |what| match answer(what) {
        Response::WriteTxnMarkers { markers } => markers[0][0].1,
        other => panic!("{other:?}"),
    };
    assert!(matches!(
        answer("produce"),
        Response::Produce(ProduceResponse { error: None, .. })
    ));
    assert_eq!(marker_error("abort"), None);
    assert_eq!(
        marker_error("zombie"),
        Some(ErrorCode::TransactionCoordinatorFenced)
    );
    assert_eq!(
        marker_error("follower"),
        Some(ErrorCode::NotLeaderOrFollower)
    );
    let fetched = |what| match answer(what) {
        Response::Fetch(f) => f.partitions[0].clone(),
        other => panic!("{other:?}"),
    };
    let committed = fetched("read_committed");
    assert_eq!(
        committed.last_stable_offset,
        Offset(2),
        "the marker is below the HW"
    );
    let aborted = committed
        .aborted_transactions
        .expect("read_committed gets the aborts");
    assert_eq!(
        (
            aborted.len(),
            aborted[0].producer_id,
            aborted[0].first_offset
        ),
        (1, ProducerId(42), Offset(0))
    );
    assert!(fetched("read_uncommitted").aborted_transactions.is_none());
    for (i, disk) in disks.iter().enumerate() {
        let bytes = disk
            .read_all("orders-0/00000000000000000000.txnindex")
            .unwrap_or_else(|e| panic!("broker-{}: {e}", i + 1));
        let index = TxnIndex::parse(&bytes, Offset(0)).expect("sound");
        let entries: Vec<_> = index
            .entries()
            .iter()
            .map(|e| (e.producer_id, e.first_offset, e.last_offset))
            .collect();
        assert_eq!(
            entries,
            vec![(ProducerId(42), Offset(0), Offset(1))],
            "broker-{}",
            i + 1
        );
    }
}
