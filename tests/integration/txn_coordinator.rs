//! The transaction coordinator end to end, on three brokers with the real controller, driven
//! by requests as a transactional producer sends them: a commit made visible by its
//! markers, a new instance fencing the old one and aborting its transaction, the timeout
//! aborting an abandoned one, and a new coordinator finishing a commit its predecessor
//! began.

use hightide::config::kafka::{Acks, BrokerConfig, IsolationLevel, TopicConfig};
use hightide::history::facts::Facts;
use hightide::kafka::broker::groups::coordinator::OFFSETS_TOPIC;
use hightide::kafka::broker::txn::coordinator::TRANSACTION_STATE_TOPIC;
use hightide::kafka::broker::{self, BrokerContext};
use hightide::kafka::client::fetch;
use hightide::kafka::controller::{self, ControllerContext, MetadataView};
use hightide::kafka::protocol::frame::Connection;
use hightide::kafka::protocol::messages::{
    CommittedOffset, ErrorCode, Fetch, FetchPartition, FetchedPartition, InitTxnProducerId,
    OffsetCommit, Produce, Request, Response, TxnProducer,
};
use hightide::kafka::record::{self, BatchBuilder, EndTxnMarker, TxnResult};
use hightide::kafka::types::{Incarnation, ProducerId};
use hightide::os::disk::{Disk, DiskConfig};
use hightide::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

const BROKERS: u32 = 3;
const TXN_ID: &str = "txn-1";

fn orders() -> TopicPartition {
    TopicPartition::new("orders", 0)
}

/// `orders/0` is led by broker 2 (replicas 2, 3, 1); `__transaction_state/0`, the only
/// partition, by broker 1 with broker 3 (min ISR 2): the coordinator and the data leader
/// are different brokers, and broker 2 holds no transaction state. The group coordinator
/// (`__consumer_offsets/0`) is broker 3. `v2`: transaction protocol v2 (4.0); without it
/// the brokers follow 3.9's rules, the protocol the requests here speak.
fn cluster(seed: u64, v2: bool) -> turmoil::Sim<'static> {
    let mut config = BrokerConfig {
        min_insync_replicas: 2,
        transaction_state_log_num_partitions: 1,
        offsets_topic_num_partitions: 1,
        transaction_abort_timed_out_transaction_cleanup_interval: Duration::from_secs(1),
        ..BrokerConfig::default()
    };
    config.rules.transaction_version_2 = v2;
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(120))
        .rng_seed(seed)
        .build();
    let state_config = TopicConfig {
        min_insync_replicas: Some(2),
        ..TopicConfig::default()
    };
    let topic_configs = BTreeMap::from([
        ("orders".to_string(), TopicConfig::default()),
        (TRANSACTION_STATE_TOPIC.to_string(), state_config.clone()),
        (OFFSETS_TOPIC.to_string(), TopicConfig::default()),
    ]);
    let topics = vec![
        (
            orders(),
            vec![BrokerId(2), BrokerId(3), BrokerId(1)],
            TopicConfig::default(),
        ),
        (
            TopicPartition::new(TRANSACTION_STATE_TOPIC, 0),
            vec![BrokerId(1), BrokerId(3)],
            state_config,
        ),
        (
            TopicPartition::new(OFFSETS_TOPIC, 0),
            vec![BrokerId(3), BrokerId(2), BrokerId(1)],
            TopicConfig::default(),
        ),
    ];
    let controller_disk = Disk::new(DiskConfig::default(), 100);
    let controller_config = config.clone();
    sim.host(HostName::Controller.to_string(), move || {
        controller::run(ControllerContext {
            disk: controller_disk.clone(),
            config: controller_config.clone(),
            brokers: BROKERS,
            topics: topics.clone(),
            view: MetadataView::default(),
            facts: Facts::default(),
            bugs: Default::default(),
        })
    });
    for id in 1..=BROKERS {
        let disk = Disk::new(DiskConfig::default(), u64::from(id));
        let config = config.clone();
        let topic_configs = topic_configs.clone();
        let incarnation = Rc::new(Cell::new(Incarnation(0)));
        sim.host(HostName::Broker(id).to_string(), move || {
            incarnation.set(incarnation.get().next());
            broker::run(BrokerContext {
                id: BrokerId(id),
                incarnation: incarnation.get(),
                config: config.clone(),
                topic_configs: topic_configs.clone(),
                disk: disk.clone(),
                shutdown: Rc::new(Cell::new(false)),
                facts: Facts::default(),
                bugs: Default::default(),
                seed: u64::from(id) << 32 | incarnation.get().0,
            })
        });
    }
    sim
}

/// One request to one broker on a fresh connection; `None` if it could not be answered.
async fn call(broker: BrokerId, request: &Request) -> Option<Response> {
    let mut connection = Connection::connect(HostName::Broker(broker.0), Duration::from_secs(1))
        .await
        .ok()?;
    connection.call(request, Duration::from_secs(35)).await.ok()
}

/// A transactional request to the id's coordinator, found and asked again (as Kafka's
/// `TransactionManager` does) while the answer is retriable; `stop_on_concurrent` returns
/// CONCURRENT_TRANSACTIONS instead of retrying it.
async fn to_coordinator(request: Request, stop_on_concurrent: bool) -> Response {
    loop {
        let find = Request::FindTxnCoordinator {
            transactional_id: TXN_ID.to_string(),
        };
        let mut coordinator = None;
        for id in 1..=BROKERS {
            if let Some(Response::FindCoordinator {
                coordinator: Some(c),
                ..
            }) = call(BrokerId(id), &find).await
            {
                coordinator = Some(c);
                break;
            }
        }
        if let Some(c) = coordinator {
            if let Some(response) = call(c, &request).await {
                let error = match &response {
                    Response::InitProducerId { error, .. }
                    | Response::Txn { error }
                    | Response::EndTxn { error, .. } => *error,
                    other => panic!("{other:?}"),
                };
                let retry = matches!(
                    error,
                    Some(
                        ErrorCode::NotCoordinator
                            | ErrorCode::CoordinatorNotAvailable
                            | ErrorCode::CoordinatorLoadInProgress
                    )
                ) || (error == Some(ErrorCode::ConcurrentTransactions)
                    && !stop_on_concurrent);
                if !retry {
                    return response;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn init(expected: Option<(ProducerId, i16)>, timeout_ms: i32) -> TxnProducer {
    let request = Request::InitTxnProducerId(InitTxnProducerId {
        transactional_id: TXN_ID.to_string(),
        transaction_timeout_ms: timeout_ms,
        expected,
    });
    match to_coordinator(request, false).await {
        Response::InitProducerId {
            error: None,
            producer_id,
            producer_epoch,
        } => TxnProducer {
            transactional_id: TXN_ID.to_string(),
            producer_id,
            producer_epoch,
        },
        other => panic!("{other:?}"),
    }
}

fn txn_error(response: Response) -> Option<ErrorCode> {
    match response {
        Response::Txn { error } => error,
        other => panic!("{other:?}"),
    }
}

async fn add(txn: &TxnProducer) -> Option<ErrorCode> {
    txn_error(
        to_coordinator(
            Request::AddPartitionsToTxn {
                txn: txn.clone(),
                partitions: vec![orders()],
            },
            false,
        )
        .await,
    )
}

async fn end(txn: &TxnProducer, result: TxnResult) -> Option<ErrorCode> {
    txn_error(
        to_coordinator(
            Request::EndTxn {
                txn: txn.clone(),
                result,
            },
            false,
        )
        .await,
    )
}

/// A transactional batch of one record, to `orders/0`'s leader.
async fn produce(txn: &TxnProducer, sequence: i32, value: &[u8]) -> Option<ErrorCode> {
    let mut batch =
        BatchBuilder::new(0, txn.producer_id, txn.producer_epoch, sequence).transactional();
    batch.push(0, None, Some(value));
    let request = Request::Produce(Produce {
        transactional_id: Some(txn.transactional_id.clone()),
        tp: orders(),
        acks: Acks::All,
        timeout_ms: 30_000,
        batch: batch.build(),
    });
    loop {
        if let Some(Response::Produce(answer)) = call(BrokerId(2), &request).await {
            return answer.error;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `orders/0` from its first offset, as a consumer with `isolation` reads it.
async fn fetch(isolation: IsolationLevel) -> FetchedPartition {
    let request = Request::Fetch(Fetch {
        replica: None,
        replica_epoch: None,
        isolation,
        max_wait_ms: 0,
        min_bytes: 0,
        session_id: 0,
        session_epoch: -1,
        partitions: vec![FetchPartition {
            tp: orders(),
            fetch_offset: Offset(0),
            current_leader_epoch: Epoch::NONE,
            last_fetched_epoch: None,
            max_bytes: 1 << 20,
        }],
        forgotten: Vec::new(),
    });
    loop {
        if let Some(Response::Fetch(answer)) = call(BrokerId(2), &request).await {
            return answer.partitions[0].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// read_committed once the LSO reaches `lso`: the records a consumer returns.
async fn committed_records_at(lso: i64) -> usize {
    loop {
        let fetched = fetch(IsolationLevel::ReadCommitted).await;
        if fetched.last_stable_offset >= Offset(lso) {
            let aborted = fetched.aborted_transactions.unwrap_or_default();
            return fetch::decode(&fetched.records, Offset(0), true, Some(&aborted))
                .records
                .len();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every marker in `orders/0`, read_uncommitted: (result, coordinator epoch).
async fn markers() -> Vec<(TxnResult, i32)> {
    marker_batches()
        .await
        .into_iter()
        .map(|(result, coordinator_epoch, _)| (result, coordinator_epoch))
        .collect()
}

/// Every marker in `orders/0`: (result, coordinator epoch, producer epoch).
async fn marker_batches() -> Vec<(TxnResult, i32, i16)> {
    let fetched = fetch(IsolationLevel::ReadUncommitted).await;
    record::batches(&fetched.records)
        .filter_map(|batch| {
            let (_, header, batch) = batch.expect("sound");
            let marker = EndTxnMarker::of(batch).expect("a sound marker")?;
            Some((
                marker.result,
                marker.coordinator_epoch,
                header.producer_epoch,
            ))
        })
        .collect()
}

fn run(sim: &mut turmoil::Sim<'_>) {
    while !crate::support::step(sim).unwrap_or_else(|e| panic!("simulation failed: {e}")) {}
}

/// Transaction protocol v2 (4.0): the producer sends no AddPartitionsToTxn, the leader of
/// `orders/0` adds the partition on the transaction's first batch; EndTxn answers the
/// epoch it bumped to, which the COMMIT marker carries; a batch at the old epoch is then
/// refused, and a retry of the commit at the old epoch is answered NONE with the new one.
#[test]
fn under_v2_the_leader_adds_the_partition_and_the_end_bumps_the_epoch() {
    let mut sim = cluster(1, true);
    let seen = Rc::new(RefCell::new(Vec::new()));
    let out = seen.clone();
    sim.client("producer", async move {
        let first = init(None, 60_000).await;
        assert_eq!(first.producer_epoch, 0);
        assert_eq!(
            produce(&first, 0, b"committed").await,
            None,
            "added by the leader"
        );
        let commit = Request::EndTxn {
            txn: first.clone(),
            result: TxnResult::Commit,
        };
        let answer = to_coordinator(commit.clone(), false).await;
        let Response::EndTxn {
            error: None,
            producer_id,
            producer_epoch,
        } = answer
        else {
            panic!("{answer:?}")
        };
        assert_eq!((producer_id, producer_epoch), (first.producer_id, 1));
        let n = committed_records_at(2).await;
        out.borrow_mut().push(("after commit", n));
        assert_eq!(marker_batches().await, [(TxnResult::Commit, 0, 1)]);
        assert_eq!(
            produce(&first, 1, b"stray").await,
            Some(ErrorCode::InvalidProducerEpoch),
            "the old epoch, fenced by the marker"
        );
        let retry = to_coordinator(commit, false).await;
        assert!(
            matches!(
                retry,
                Response::EndTxn {
                    error: None,
                    producer_epoch: 1,
                    ..
                }
            ),
            "{retry:?}"
        );
        let second = TxnProducer {
            producer_epoch: 1,
            ..first
        };
        assert_eq!(
            produce(&second, 0, b"next").await,
            None,
            "sequences restart"
        );
        Ok(())
    });
    run(&mut sim);
    assert_eq!(*seen.borrow(), [("after commit", 1)]);
}

/// A commit becomes visible to read_committed once its marker is written; a second
/// instance of the id fences the first (its epoch bumped twice: the fence, then its own
/// InitProducerId) and aborts the first's open transaction, which read_committed then
/// skips; the fenced instance can no longer commit.
#[test]
fn a_commit_is_read_and_a_new_instance_fences_and_aborts_the_old() {
    let mut sim = cluster(1, false);
    let seen = Rc::new(RefCell::new(Vec::new()));
    let out = seen.clone();
    sim.client("producer", async move {
        let first = init(None, 60_000).await;
        assert_eq!(first.producer_epoch, 0);
        assert_eq!(add(&first).await, None);
        assert_eq!(produce(&first, 0, b"committed").await, None);
        assert_eq!(end(&first, TxnResult::Commit).await, None);
        let n = committed_records_at(2).await;
        out.borrow_mut().push(("after commit", n));
        assert_eq!(add(&first).await, None);
        assert_eq!(produce(&first, 1, b"open").await, None);
        let n = committed_records_at(0).await;
        out.borrow_mut().push(("open, read_committed", n));
        let second = init(None, 60_000).await;
        assert_eq!(second.producer_id, first.producer_id);
        out.borrow_mut()
            .push(("second epoch", second.producer_epoch as usize));
        let fenced = to_coordinator(
            Request::EndTxn {
                txn: first.clone(),
                result: TxnResult::Commit,
            },
            true,
        )
        .await;
        assert_eq!(txn_error(fenced), Some(ErrorCode::ProducerFenced));
        let n = committed_records_at(4).await;
        out.borrow_mut().push(("after the fence", n));
        let aborted = fetch(IsolationLevel::ReadCommitted).await;
        let aborted = aborted.aborted_transactions.expect("read_committed");
        assert_eq!(
            aborted.iter().map(|a| a.first_offset).collect::<Vec<_>>(),
            [Offset(2)]
        );
        assert_eq!(
            markers().await,
            [(TxnResult::Commit, 0), (TxnResult::Abort, 0)],
            "both markers from the first coordinator epoch (the first leader epoch, 0)"
        );
        Ok(())
    });
    run(&mut sim);
    assert_eq!(
        *seen.borrow(),
        [
            ("after commit", 1),
            ("open, read_committed", 1),
            ("second epoch", 2),
            ("after the fence", 1),
        ]
    );
}

/// A transaction left open past `transaction.timeout.ms` is fenced and aborted by the
/// coordinator's scan: its producer's commit is refused, it cannot bump its epoch back,
/// and read_committed skips what it wrote.
#[test]
fn a_transaction_past_its_timeout_is_fenced_and_aborted() {
    let mut sim = cluster(2, false);
    sim.client("producer", async move {
        let txn = init(None, 2_000).await;
        assert_eq!(add(&txn).await, None);
        assert_eq!(produce(&txn, 0, b"abandoned").await, None);
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(committed_records_at(2).await, 0);
        assert_eq!(
            end(&txn, TxnResult::Commit).await,
            Some(ErrorCode::ProducerFenced)
        );
        assert_eq!(markers().await, [(TxnResult::Abort, 0)]);
        // The fenced instance cannot bump its way back (KIP-360): it is a zombie now.
        let bump = Request::InitTxnProducerId(InitTxnProducerId {
            transactional_id: TXN_ID.to_string(),
            transaction_timeout_ms: 2_000,
            expected: Some((txn.producer_id, txn.producer_epoch)),
        });
        match to_coordinator(bump, false).await {
            Response::InitProducerId { error, .. } => {
                assert_eq!(error, Some(ErrorCode::ProducerFenced))
            }
            other => panic!("{other:?}"),
        }
        let fresh = init(None, 2_000).await;
        assert_eq!(fresh.producer_epoch, 2, "past the fence's epoch");
        Ok(())
    });
    run(&mut sim);
}

/// A coordinator that wrote PrepareCommit but could not reach the data leader crashes;
/// the broker elected in its place reads the Prepare record back and writes the COMMIT
/// marker itself, with its own, newer coordinator epoch. Its CompleteCommit record waits
/// for `__transaction_state`'s min ISR of 2, so the id's next transaction begins only
/// once the crashed broker is back.
#[test]
fn a_new_coordinator_finishes_a_commit_its_predecessor_began() {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Stage {
        Producing,
        Cut,
        Crash,
        Restart,
        Done,
    }
    let mut sim = cluster(3, false);
    let stage = Rc::new(Cell::new(Stage::Producing));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let (client_stage, out) = (stage.clone(), seen.clone());
    sim.client("producer", async move {
        let txn = init(None, 60_000).await;
        assert_eq!(add(&txn).await, None);
        assert_eq!(produce(&txn, 0, b"committed").await, None);
        client_stage.set(Stage::Cut);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(end(&txn, TxnResult::Commit).await, None);
        client_stage.set(Stage::Crash);
        let n = committed_records_at(2).await;
        out.borrow_mut().push(n);
        client_stage.set(Stage::Restart);
        assert_eq!(add(&txn).await, None, "the next transaction begins");
        assert_eq!(markers().await, [(TxnResult::Commit, 1)]);
        client_stage.set(Stage::Done);
        Ok(())
    });
    let coordinator = HostName::Broker(1).to_string();
    let data_leader = HostName::Broker(2).to_string();
    let mut acted = Stage::Producing;
    while !crate::support::step(&mut sim).unwrap_or_else(|e| panic!("simulation failed: {e}")) {
        match (acted, stage.get()) {
            (Stage::Producing, Stage::Cut) => {
                sim.partition(coordinator.clone(), data_leader.clone());
                acted = Stage::Cut;
            }
            (Stage::Cut, Stage::Crash) => {
                sim.crash(coordinator.clone());
                acted = Stage::Crash;
            }
            (Stage::Crash, Stage::Restart) => {
                sim.repair(coordinator.clone(), data_leader.clone());
                sim.bounce(coordinator.clone());
                acted = Stage::Restart;
            }
            _ => {}
        }
    }
    assert_eq!(stage.get(), Stage::Done);
    assert_eq!(*seen.borrow(), [1], "the commit is read");
}

/// The group's coordinator answers `request` (broker 3 leads `__consumer_offsets/0`).
async fn to_group_coordinator(request: &Request) -> Response {
    loop {
        if let Some(response) = call(BrokerId(3), request).await {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `orders/0`'s committed offset for group "billing", as a 2.5+ consumer asks for it
/// (RequireStable): `Err` while a transaction holds it.
async fn stable_offset() -> Result<Option<i64>, ErrorCode> {
    let request = Request::OffsetFetch {
        group: "billing".to_string(),
        partitions: vec![orders()],
        require_stable: true,
    };
    match to_group_coordinator(&request).await {
        Response::OffsetFetch {
            error: None,
            offsets,
        } => Ok(offsets.first().map(|(_, c)| c.offset.0)),
        Response::OffsetFetch {
            error: Some(error), ..
        } => Err(error),
        other => panic!("{other:?}"),
    }
}

/// Offsets sent to a transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group's
/// coordinator): pending, so a consumer that requires stable offsets is told to wait; then
/// applied by the COMMIT marker the transaction coordinator writes on `__consumer_offsets`,
/// or dropped by an ABORT.
#[test]
fn offsets_sent_to_a_transaction_count_only_if_it_commits() {
    let mut sim = cluster(4, false);
    let seen = Rc::new(RefCell::new(Vec::new()));
    let out = seen.clone();
    sim.client("processor", async move {
        let txn = init(None, 60_000).await;
        for (offset, result) in [(5, TxnResult::Commit), (9, TxnResult::Abort)] {
            let add = Request::AddOffsetsToTxn {
                txn: txn.clone(),
                group: "billing".to_string(),
            };
            assert_eq!(txn_error(to_coordinator(add, false).await), None);
            let commit = Request::TxnOffsetCommit {
                txn: txn.clone(),
                commit: OffsetCommit {
                    group: "billing".to_string(),
                    member: String::new(),
                    generation: -1,
                    offsets: vec![(
                        orders(),
                        CommittedOffset {
                            offset: Offset(offset),
                            leader_epoch: Epoch(0),
                        },
                    )],
                },
            };
            match to_group_coordinator(&commit).await {
                Response::OffsetCommit { error } => assert_eq!(error, None),
                other => panic!("{other:?}"),
            }
            let pending = stable_offset().await;
            assert_eq!(end(&txn, result).await, None);
            let settled = loop {
                match stable_offset().await {
                    Err(ErrorCode::UnstableOffsetCommit) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    settled => break settled,
                }
            };
            out.borrow_mut().push((pending, settled));
        }
        Ok(())
    });
    run(&mut sim);
    let unstable = Err(ErrorCode::UnstableOffsetCommit);
    assert_eq!(
        *seen.borrow(),
        [(unstable, Ok(Some(5))), (unstable, Ok(Some(5)))],
        "the commit's offset, then the abort's dropped"
    );
}
