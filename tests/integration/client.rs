//! The producer against a scripted fake broker on a turmoil network: what the history says
//! and what the broker received when a request times out.

use hightide::config::bugs::Bugs;
use hightide::config::kafka::{Acks, ConsumerConfig, IsolationLevel, ProducerConfig};
use hightide::config::workload::{ArrivalProcess, Arrivals, OnError};
use hightide::history::budget::SendBudget;
use hightide::history::facts::Facts;
use hightide::history::{History, MessageId, Op};
use hightide::kafka::client::{
    final_read, run_consumer, run_producer, Application, ConsumerContext, LeaderOf,
    ProducerContext, Reading,
};
use hightide::kafka::protocol::frame::serve;
use hightide::kafka::protocol::messages::{
    ClusterMetadata, ErrorCode, FetchResponse, FetchedPartition, OffsetSpec,
    OffsetsForLeaderEpochResponse, PartitionState, ProduceResponse, Request, Response,
};
use hightide::kafka::record::{
    records, set_base_offset, set_partition_leader_epoch, validate, BatchBuilder,
};
use hightide::kafka::types::EpochEndOffset;
use hightide::kafka::types::{PartitionEpoch, ProducerId};
use hightide::os::clock::SimTime;
use hightide::types::{BrokerId, Epoch, Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

/// Longer than the producer's 1 s request timeout.
const SLOW: Duration = Duration::from_secs(3);

/// One batch as the fake broker appended it.
#[derive(Clone, Debug)]
struct Appended {
    base_offset: i64,
    producer_id: ProducerId,
    base_sequence: i32,
    ids: Vec<MessageId>,
}

/// A one-partition broker that appends every batch it gets, but answers the first
/// Produce only after `first_answer_delay` (longer than the producer's request timeout).
#[derive(Clone, Default)]
struct FakeBroker {
    log: Rc<RefCell<Vec<Appended>>>,
    produce_requests: Rc<RefCell<u32>>,
}

impl FakeBroker {
    async fn handle(self, request: Request, first_answer_delay: Duration) -> Response {
        match request {
            Request::Metadata => Response::Metadata(metadata()),
            Request::InitProducerId => Response::InitProducerId {
                error: None,
                producer_id: ProducerId(1000),
                producer_epoch: 0,
            },
            Request::Produce(produce) => {
                let attempt = {
                    let mut n = self.produce_requests.borrow_mut();
                    *n += 1;
                    *n
                };
                let base_offset = self.append(&produce.batch);
                if attempt == 1 {
                    tokio::time::sleep(first_answer_delay).await;
                }
                Response::Produce(ProduceResponse {
                    error: None,
                    base_offset: Offset(base_offset),
                    log_start_offset: Offset(0),
                })
            }
            other => panic!("unexpected request {other:?}"),
        }
    }

    fn append(&self, batch: &[u8]) -> i64 {
        let header = validate(batch).expect("a valid batch");
        let ids = records(batch)
            .expect("records")
            .iter()
            .filter_map(|r| r.value.as_deref().and_then(MessageId::parse_value))
            .collect::<Vec<_>>();
        let mut log = self.log.borrow_mut();
        let base_offset = log.iter().map(|b| b.ids.len() as i64).sum();
        log.push(Appended {
            base_offset,
            producer_id: header.producer_id,
            base_sequence: header.base_sequence,
            ids,
        });
        base_offset
    }
}

fn metadata() -> ClusterMetadata {
    let mut m = ClusterMetadata {
        version: 1,
        ..ClusterMetadata::default()
    };
    m.partitions.insert(
        TopicPartition::new("t", 0),
        PartitionState {
            replicas: vec![BrokerId(1)],
            leader: Some(BrokerId(1)),
            leader_epoch: Epoch(0),
            partition_epoch: PartitionEpoch(0),
            isr: vec![BrokerId(1)],
            elr: Vec::new(),
            last_known_leader: None,
        },
    );
    m
}

/// Run one producer that sends `messages` messages against the fake broker.
fn run(
    config: ProducerConfig,
    messages: u64,
    first_answer_delay: Duration,
) -> (Vec<Op>, Vec<Appended>) {
    let broker = FakeBroker::default();
    let history = History::default();
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(60))
        .rng_seed(1)
        .build();
    let host_broker = broker.clone();
    sim.host("broker-1", move || {
        let broker = host_broker.clone();
        async move {
            serve(move |request, _peer| broker.clone().handle(request, first_answer_delay)).await?;
            Ok(())
        }
    });
    let ctx = ProducerContext {
        index: 1,
        config,
        topic: "t".to_string(),
        partitions: 1,
        keys: 0,
        value_bytes: 32,
        on_error: OnError::WhatItProves,
        bugs: Bugs::default(),
        brokers: 1,
        history: history.clone(),
        facts: Facts::default(),
        seed: 1,
        application: Application::Workload {
            arrivals: ArrivalProcess::new(Arrivals::Periodic, 100, 0),
            budget: SendBudget::new(1, Some(messages)),
            stop_at: SimTime::after_start(Duration::from_secs(30)),
            transaction_messages: 10,
        },
    };
    sim.client("producer-1", async move {
        run_producer(ctx).await?;
        // Let the broker finish with what is still in flight before the simulation ends.
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(())
    });
    sim.run().expect("the simulation completes");
    let ops = history.take_events().into_iter().map(|e| e.op).collect();
    let log = broker.log.borrow().clone();
    (ops, log)
}

fn config(idempotent: bool) -> ProducerConfig {
    ProducerConfig {
        acks: Acks::All,
        enable_idempotence: idempotent,
        linger: Duration::ZERO,
        request_timeout: Duration::from_millis(1_000),
        ..ProducerConfig::default()
    }
}

/// The scenario behind every "duplicates" count: the first attempt wrote, its answer came
/// too late, the retry wrote again. The producer was told ok once, at the retry's offset.
#[test]
fn request_timeout_retry_acks_once_and_duplicates_without_idempotence() {
    let (ops, log) = run(config(false), 1, SLOW);
    let id = MessageId {
        producer: 1,
        seq: 0,
    };
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert!(matches!(&ops[0], Op::Invoke { id: i, .. } if *i == id));
    assert_eq!(
        ops[1],
        Op::Ok {
            id,
            tp: TopicPartition::new("t", 0),
            offset: Offset(1),
            degraded: None,
        }
    );
    let copies: Vec<i64> = log
        .iter()
        .filter(|b| b.ids.contains(&id))
        .map(|b| b.base_offset)
        .collect();
    assert_eq!(copies, vec![0, 1], "the retry wrote a second copy");
    assert!(log.iter().all(|b| b.producer_id == ProducerId::NONE));
}

/// The idempotent producer resends the timed-out batch with the same producer id and
/// sequence, which is what lets a real broker recognise the duplicate.
#[test]
fn idempotent_retry_keeps_producer_id_and_sequence() {
    let (ops, log) = run(config(true), 1, SLOW);
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log.iter()
            .all(|b| b.producer_id == ProducerId(1000) && b.base_sequence == 0),
        "{log:?}"
    );
    assert!(matches!(ops.last(), Some(Op::Ok { .. })), "{ops:?}");
}

/// With retries = 0 the timed-out attempt is the last: the outcome is unknown, not a failure.
#[test]
fn a_timeout_without_retries_is_indeterminate() {
    let config = ProducerConfig {
        retries: 0,
        ..config(false)
    };
    let (ops, log) = run(config, 1, SLOW);
    assert_eq!(log.len(), 1);
    assert!(matches!(ops.last(), Some(Op::Info { .. })), "{ops:?}");
}

/// acks=0 never waits for the broker: every send is recorded as unknown right away.
#[test]
fn acks_zero_records_info_for_every_send() {
    let config = ProducerConfig {
        acks: Acks::None,
        ..config(false)
    };
    let (ops, log) = run(config, 5, Duration::ZERO);
    let infos = ops
        .iter()
        .filter(|op| matches!(op, Op::Info { error, .. } if error == "acks=0"))
        .count();
    assert_eq!(infos, 5, "{ops:?}");
    assert_eq!(log.iter().map(|b| b.ids.len()).sum::<usize>(), 5);
}

/// A fake broker holding a fixed log for `t/0` (leader broker-1, epoch 2): batches of
/// offsets [0,2) and [2,4) in epoch 1, [4,6) in epoch 2; the high watermark is 4. It
/// answers one batch per Fetch, so readers must loop.
fn log_broker(
    leader: Option<BrokerId>,
) -> impl Fn(Request, String) -> std::future::Ready<Response> + Clone {
    let batch = |base: i64, epoch: i32, seqs: [u32; 2]| {
        let mut builder = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        for seq in seqs {
            builder.push(0, None, Some(&MessageId { producer: 1, seq }.value(16)));
        }
        let mut bytes = builder.build();
        set_base_offset(&mut bytes, Offset(base));
        set_partition_leader_epoch(&mut bytes, Epoch(epoch));
        (base, bytes)
    };
    let log = Rc::new(vec![
        batch(0, 1, [0, 1]),
        batch(2, 1, [2, 3]),
        batch(4, 2, [4, 5]),
    ]);
    let high_watermark = Offset(4);
    move |request, _peer| {
        let response = match request {
            Request::Metadata => {
                let mut m = metadata();
                for state in m.partitions.values_mut() {
                    state.leader = leader;
                    state.leader_epoch = Epoch(2);
                }
                Response::Metadata(m)
            }
            Request::ListOffsets { spec, .. } => Response::ListOffsets {
                error: None,
                offset: match spec {
                    OffsetSpec::Earliest => Offset(0),
                    OffsetSpec::Latest => high_watermark,
                },
            },
            Request::Fetch(fetch) => Response::Fetch(FetchResponse {
                error: None,
                session_id: 0,
                partitions: fetch
                    .partitions
                    .into_iter()
                    .map(|asked| {
                        let records = log
                            .iter()
                            .find(|(base, bytes)| {
                                let count = validate(bytes).map_or(0, |h| h.records_count);
                                let next = base + i64::from(count);
                                asked.fetch_offset.0 < next && Offset(*base) < high_watermark
                            })
                            .map(|(_, bytes)| bytes.clone())
                            .unwrap_or_default();
                        FetchedPartition {
                            tp: asked.tp,
                            error: None,
                            high_watermark,
                            last_stable_offset: high_watermark,
                            log_start_offset: Offset(0),
                            aborted_transactions: None,
                            records,
                            diverging_epoch: None,
                        }
                    })
                    .collect(),
            }),
            other => panic!("unexpected request {other:?}"),
        };
        std::future::ready(response)
    }
}

/// The final read returns exactly the records below the high watermark, read batch by batch.
#[test]
fn final_read_reads_from_log_start_to_the_high_watermark() {
    let mut sim = turmoil::Builder::new().rng_seed(1).build();
    sim.host("broker-1", || async {
        serve(log_broker(Some(BrokerId(1)))).await?;
        Ok(())
    });
    let reads = Rc::new(RefCell::new(Vec::new()));
    let out = reads.clone();
    sim.client("reader", async move {
        let tp = TopicPartition::new("t", 0);
        let leader_of: LeaderOf = Rc::new(|_: &TopicPartition| Some((BrokerId(1), Epoch(2))));
        *out.borrow_mut() = final_read(
            vec![tp],
            leader_of,
            Reading {
                check_crcs: true,
                isolation: IsolationLevel::ReadUncommitted,
                ignore_aborted: false,
            },
            Duration::from_secs(10),
        )
        .await;
        Ok(())
    });
    sim.run().expect("the simulation completes");
    let reads = reads.borrow();
    assert_eq!(reads.len(), 1);
    let read = &reads[0];
    assert_eq!(read.tp, TopicPartition::new("t", 0));
    assert_eq!(
        (read.leader, read.log_start_offset, read.high_watermark),
        (Some(BrokerId(1)), Offset(0), Offset(4))
    );
    assert!(read.complete);
    let ids: Vec<(i64, u32)> = read
        .records
        .iter()
        .map(|r| (r.offset.0, r.id.map_or(u32::MAX, |id| id.seq)))
        .collect();
    assert_eq!(ids, vec![(0, 0), (1, 1), (2, 2), (3, 3)]);
}

/// A partition without a leader is reported offline, with no records, once the time is up.
#[test]
fn final_read_reports_an_offline_partition() {
    let mut sim = turmoil::Builder::new().rng_seed(1).build();
    sim.host("broker-1", || async {
        serve(log_broker(None)).await?;
        Ok(())
    });
    let reads = Rc::new(RefCell::new(Vec::new()));
    let out = reads.clone();
    sim.client("reader", async move {
        *out.borrow_mut() = final_read(
            vec![TopicPartition::new("t", 0)],
            Rc::new(|_: &TopicPartition| None),
            Reading {
                check_crcs: true,
                isolation: IsolationLevel::ReadUncommitted,
                ignore_aborted: false,
            },
            Duration::from_secs(2),
        )
        .await;
        Ok(())
    });
    sim.run().expect("the simulation completes");
    let reads = reads.borrow();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].leader, None);
    assert!(reads[0].records.is_empty());
    assert!(!reads[0].complete, "an offline partition is not read");
}

/// A consumer records each record below the high watermark once, with its id.
#[test]
fn consumer_records_what_it_reads_below_the_high_watermark() {
    let mut sim = turmoil::Builder::new().rng_seed(1).build();
    sim.host("broker-1", || async {
        serve(log_broker(Some(BrokerId(1)))).await?;
        Ok(())
    });
    let history = History::default();
    let ctx = ConsumerContext {
        index: 1,
        config: ConsumerConfig::default(),
        topic: "t".to_string(),
        partitions: 1,
        brokers: 1,
        history: history.clone(),
        group: None,
    };
    sim.client("consumer-1", async move {
        // A consumer never stops by itself.
        let _ = tokio::time::timeout(Duration::from_secs(5), run_consumer(ctx)).await;
        Ok(())
    });
    sim.run().expect("the simulation completes");
    let reads: Vec<(i64, Option<u32>)> = history
        .take_events()
        .into_iter()
        .map(|e| {
            assert_eq!(&*e.process, "consumer-1");
            match e.op {
                Op::Read {
                    consumer: 1,
                    offset,
                    id,
                    ..
                } => (offset.0, id.map(|id| id.seq)),
                other => panic!("unexpected {other:?}"),
            }
        })
        .collect();
    assert_eq!(
        reads,
        vec![(0, Some(0)), (1, Some(1)), (2, Some(2)), (3, Some(3))]
    );
}

/// A deposed leader answers NOT_LEADER_OR_FOLLOWER; the producer refreshes metadata, finds
/// the new leader (the higher leader epoch wins over the stale broker's answer) and the
/// retry is acknowledged there. Nothing was written by the rejected attempt.
#[test]
fn not_leader_moves_the_batch_to_the_new_leader() {
    let mut sim = turmoil::Builder::new().rng_seed(1).build();
    let rejected = Rc::new(RefCell::new(0u32));
    for broker in [1u32, 2] {
        let rejected = rejected.clone();
        sim.host(format!("broker-{broker}"), move || {
            let rejected = rejected.clone();
            async move {
                serve(move |request, _peer| {
                    let response = match request {
                        Request::Metadata => {
                            // broker-1 still believes it leads, in an older epoch.
                            let mut m = metadata();
                            for state in m.partitions.values_mut() {
                                state.leader = Some(BrokerId(broker));
                                state.leader_epoch = Epoch(broker as i32);
                            }
                            Response::Metadata(m)
                        }
                        Request::Produce(_) if broker == 1 => {
                            *rejected.borrow_mut() += 1;
                            Response::Produce(ProduceResponse {
                                error: Some(ErrorCode::NotLeaderOrFollower),
                                base_offset: Offset::NONE,
                                log_start_offset: Offset::NONE,
                            })
                        }
                        Request::Produce(_) => Response::Produce(ProduceResponse {
                            error: None,
                            base_offset: Offset(7),
                            log_start_offset: Offset(0),
                        }),
                        other => panic!("unexpected request {other:?}"),
                    };
                    std::future::ready(response)
                })
                .await?;
                Ok(())
            }
        });
    }
    let history = History::default();
    let ctx = ProducerContext {
        index: 1,
        config: config(false),
        topic: "t".to_string(),
        partitions: 1,
        keys: 0,
        value_bytes: 32,
        on_error: OnError::WhatItProves,
        bugs: Bugs::default(),
        brokers: 2,
        history: history.clone(),
        facts: Facts::default(),
        // The first metadata answer comes from broker-1 (seed % brokers + 1).
        seed: 0,
        application: Application::Workload {
            arrivals: ArrivalProcess::new(Arrivals::Periodic, 100, 0),
            budget: SendBudget::new(1, Some(1)),
            stop_at: SimTime::after_start(Duration::from_secs(30)),
            transaction_messages: 10,
        },
    };
    sim.client("producer-1", async move { run_producer(ctx).await });
    sim.run().expect("the simulation completes");
    let ops: Vec<Op> = history.take_events().into_iter().map(|e| e.op).collect();
    assert_eq!(
        *rejected.borrow(),
        1,
        "the first attempt went to the stale leader"
    );
    assert_eq!(
        ops.last(),
        Some(&Op::Ok {
            id: MessageId {
                producer: 1,
                seq: 0
            },
            tp: TopicPartition::new("t", 0),
            offset: Offset(7),
            degraded: None,
        })
    );
}

/// Run consumer-1 on topic `t` (`partitions` partitions, one broker) for `run_for` of
/// `sim`; what it read, in the order it read it: (partition, offset, sequence).
fn consume(
    mut sim: turmoil::Sim<'_>,
    partitions: u32,
    run_for: Duration,
) -> Vec<(u32, i64, Option<u32>)> {
    let history = History::default();
    let ctx = ConsumerContext {
        index: 1,
        config: ConsumerConfig::default(),
        topic: "t".to_string(),
        partitions,
        brokers: 1,
        history: history.clone(),
        group: None,
    };
    sim.client("consumer-1", async move {
        let _ = tokio::time::timeout(run_for, run_consumer(ctx)).await;
        Ok(())
    });
    sim.run().expect("the simulation completes");
    history
        .take_events()
        .into_iter()
        .filter_map(|e| match e.op {
            Op::Read { tp, offset, id, .. } => Some((tp.partition, offset.0, id.map(|i| i.seq))),
            _ => None,
        })
        .collect()
}

/// KIP-320, the dirty-read path: a consumer read offsets 2..4 in epoch 1; the new leader
/// (epoch 2) has other records there. After the leader change the consumer validates its
/// position, moves back to offset 2 and reads the replacements, so the history holds both
/// what it saw first (later checked as dirty reads) and what replaced it.
#[test]
fn consumer_moves_back_over_truncated_records_after_a_leader_change() {
    let batch = |base: i64, epoch: i32, seqs: [u32; 2]| {
        let mut builder = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        for seq in seqs {
            builder.push(0, None, Some(&MessageId { producer: 1, seq }.value(16)));
        }
        let mut bytes = builder.build();
        set_base_offset(&mut bytes, Offset(base));
        set_partition_leader_epoch(&mut bytes, Epoch(epoch));
        bytes
    };
    let before = Rc::new(vec![batch(0, 1, [0, 1]), batch(2, 1, [2, 3])]);
    let after = Rc::new(vec![batch(0, 1, [0, 1]), batch(2, 2, [10, 11])]);
    let fetches = Rc::new(Cell::new(0u32));
    let mut sim = turmoil::Builder::new().rng_seed(1).build();
    sim.host("broker-1", move || {
        let (before, after, fetches) = (before.clone(), after.clone(), fetches.clone());
        async move {
            serve(move |request, _peer| {
                // Three fetches in epoch 1 (two batches, then nothing new), then epoch 2.
                let epoch = if fetches.get() < 3 { 1 } else { 2 };
                let log = if epoch == 1 { &before } else { &after };
                let response = match request {
                    Request::Metadata => {
                        let mut m = metadata();
                        for state in m.partitions.values_mut() {
                            state.leader_epoch = Epoch(epoch);
                        }
                        Response::Metadata(m)
                    }
                    Request::OffsetsForLeaderEpoch(request) => {
                        assert_eq!(request.leader_epoch, Epoch(1));
                        Response::OffsetsForLeaderEpoch(OffsetsForLeaderEpochResponse {
                            error: None,
                            end: EpochEndOffset {
                                epoch: Epoch(1),
                                end_offset: Offset(2),
                            },
                        })
                    }
                    Request::Fetch(mut fetch) => {
                        fetches.set(fetches.get() + 1);
                        let asked = fetch.partitions.remove(0);
                        let fenced = asked.current_leader_epoch != Epoch(epoch);
                        let records = log
                            .iter()
                            .find(|b| {
                                let h = validate(b).expect("valid");
                                asked.fetch_offset < h.next_offset()
                            })
                            .filter(|_| !fenced)
                            .cloned()
                            .unwrap_or_default();
                        Response::Fetch(FetchResponse {
                            error: None,
                            session_id: 0,
                            partitions: vec![FetchedPartition {
                                tp: asked.tp,
                                error: fenced.then_some(ErrorCode::FencedLeaderEpoch),
                                high_watermark: Offset(4),
                                last_stable_offset: Offset(4),
                                aborted_transactions: None,
                                log_start_offset: Offset(0),
                                records,
                                diverging_epoch: None,
                            }],
                        })
                    }
                    other => panic!("unexpected request {other:?}"),
                };
                std::future::ready(response)
            })
            .await?;
            Ok(())
        }
    });
    let reads: Vec<(i64, Option<u32>)> = consume(sim, 1, Duration::from_secs(10))
        .into_iter()
        .map(|(_, offset, seq)| (offset, seq))
        .collect();
    assert_eq!(
        reads,
        vec![
            (0, Some(0)),
            (1, Some(1)),
            (2, Some(2)),
            (3, Some(3)),
            (2, Some(10)),
            (3, Some(11))
        ]
    );
}

/// A one-partition broker whose ISR is below `min.insync.replicas` during `[start, end)`:
/// every Produce then gets NOT_ENOUGH_REPLICAS and writes nothing. Otherwise it checks
/// sequences per producer id as a Kafka broker does: an id it has no batch of may start at
/// any sequence, a known id must continue at its next sequence (else
/// OUT_OF_ORDER_SEQUENCE_NUMBER). InitProducerId hands out a new id each time.
#[derive(Clone)]
struct MinIsrBroker {
    start: Duration,
    end: Duration,
    log: Rc<RefCell<Vec<Appended>>>,
    next_sequence: Rc<RefCell<BTreeMap<ProducerId, i32>>>,
    next_producer_id: Rc<Cell<i64>>,
}

impl MinIsrBroker {
    fn handle(&self, request: Request) -> Response {
        match request {
            Request::Metadata => Response::Metadata(metadata()),
            Request::InitProducerId => {
                let producer_id = ProducerId(self.next_producer_id.get());
                self.next_producer_id.set(producer_id.0 + 1);
                Response::InitProducerId {
                    error: None,
                    producer_id,
                    producer_epoch: 0,
                }
            }
            Request::Produce(produce) => {
                let now = turmoil::sim_elapsed().unwrap_or_default();
                let header = validate(&produce.batch).expect("a valid batch");
                let expected = self
                    .next_sequence
                    .borrow()
                    .get(&header.producer_id)
                    .copied();
                let error = if now >= self.start && now < self.end {
                    Some(ErrorCode::NotEnoughReplicas)
                } else if expected.is_some_and(|next| next != header.base_sequence) {
                    Some(ErrorCode::OutOfOrderSequenceNumber)
                } else {
                    None
                };
                if error.is_some() {
                    return Response::Produce(ProduceResponse {
                        error,
                        base_offset: Offset::NONE,
                        log_start_offset: Offset::NONE,
                    });
                }
                self.next_sequence
                    .borrow_mut()
                    .insert(header.producer_id, header.last_sequence() + 1);
                let broker = FakeBroker {
                    log: self.log.clone(),
                    ..FakeBroker::default()
                };
                Response::Produce(ProduceResponse {
                    error: None,
                    base_offset: Offset(broker.append(&produce.batch)),
                    log_start_offset: Offset(0),
                })
            }
            other => panic!("unexpected request {other:?}"),
        }
    }
}

/// Run one idempotent producer (`rate` sends/s for 6 s) against a `MinIsrBroker` whose
/// ISR is too small from 0.3 s to `end`.
fn run_min_isr(end: Duration, delivery_timeout_ms: u64, rate: u32) -> (Vec<Op>, Vec<Appended>) {
    let broker = MinIsrBroker {
        start: Duration::from_millis(300),
        end,
        log: Rc::default(),
        next_sequence: Rc::default(),
        next_producer_id: Rc::new(Cell::new(1)),
    };
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(60))
        .rng_seed(1)
        .build();
    let host_broker = broker.clone();
    sim.host("broker-1", move || {
        let broker = host_broker.clone();
        async move {
            serve(move |request, _peer| std::future::ready(broker.handle(request))).await?;
            Ok(())
        }
    });
    let history = History::default();
    let ctx = ProducerContext {
        index: 1,
        config: ProducerConfig {
            delivery_timeout: Duration::from_millis(delivery_timeout_ms),
            ..config(true)
        },
        topic: "t".to_string(),
        partitions: 1,
        keys: 0,
        value_bytes: 32,
        on_error: OnError::WhatItProves,
        bugs: Bugs::default(),
        brokers: 1,
        history: history.clone(),
        facts: Facts::default(),
        seed: 1,
        application: Application::Workload {
            arrivals: ArrivalProcess::new(Arrivals::Periodic, rate, 0),
            budget: SendBudget::new(1, Some(u64::from(rate) * 6)),
            stop_at: SimTime::after_start(Duration::from_secs(30)),
            transaction_messages: 10,
        },
    };
    sim.client("producer-1", async move { run_producer(ctx).await });
    sim.run().expect("the simulation completes");
    let ops: Vec<Op> = history.take_events().into_iter().map(|e| e.op).collect();
    let log = broker.log.borrow().clone();
    (ops, log)
}

/// Acked (offset, message seq) pairs whose seq goes down as the offset goes up.
fn acked_out_of_order(ops: &[Op]) -> Vec<[(Offset, u32); 2]> {
    let mut acked: Vec<(Offset, u32)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Ok { id, offset, .. } => Some((*offset, id.seq)),
            _ => None,
        })
        .collect();
    acked.sort();
    acked
        .windows(2)
        .filter(|pair| pair[0].1 > pair[1].1)
        .map(|pair| [pair[0], pair[1]])
        .collect()
}

/// Regression: after delivery timeouts the idempotent producer took a new producer id and
/// sent the new id's batches while batches of the old id were still being retried; when
/// the ISR grew back the broker appended both (it orders sequences only within one id), and
/// acknowledged sends landed out of send order. With the ISR short from 0.3 s to 3 s and
/// a 1.5 s delivery timeout the producer goes through several ids; acked offsets must still
/// follow send order.
#[test]
fn idempotent_acks_keep_send_order_across_delivery_timeouts() {
    let (ops, log) = run_min_isr(Duration::from_millis(3_000), 1_500, 100);
    assert!(
        ops.iter().any(|op| matches!(op, Op::Fail { .. })),
        "the ISR outage must fail some sends"
    );
    let producer_ids: BTreeSet<ProducerId> = log.iter().map(|b| b.producer_id).collect();
    assert!(producer_ids.len() > 1, "{producer_ids:?}");
    assert!(
        ops.iter().filter(|op| matches!(op, Op::Ok { .. })).count() > 100,
        "sends resume after the outage"
    );
    let inverted = acked_out_of_order(&ops);
    assert!(inverted.is_empty(), "acked out of send order: {inverted:?}");
}

/// As Kafka's consumer does, one Fetch to a broker carries every partition it leads:
/// two partitions led by one broker are read through requests of both, and every record
/// of each is read once.
#[test]
fn consumer_fetches_all_of_a_brokers_partitions_in_one_request() {
    let batch = |partition: u32| {
        let mut builder = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        for seq in [0, 1] {
            let id = MessageId {
                producer: 1,
                seq: partition * 10 + seq,
            };
            builder.push(0, None, Some(&id.value(16)));
        }
        builder.build()
    };
    let logs = Rc::new([batch(0), batch(1)]);
    let sizes = Rc::new(RefCell::new(Vec::new()));
    let seen = sizes.clone();
    let mut sim = turmoil::Builder::new().rng_seed(1).build();
    sim.host("broker-1", move || {
        let (logs, sizes) = (logs.clone(), sizes.clone());
        async move {
            serve(move |request, _peer| {
                let response = match request {
                    Request::Metadata => {
                        let mut m = metadata();
                        let state = m.partitions[&TopicPartition::new("t", 0)].clone();
                        m.partitions.insert(TopicPartition::new("t", 1), state);
                        Response::Metadata(m)
                    }
                    Request::Fetch(fetch) => {
                        sizes.borrow_mut().push(fetch.partitions.len());
                        let partitions = fetch
                            .partitions
                            .into_iter()
                            .map(|asked| FetchedPartition {
                                records: if asked.fetch_offset == Offset(0) {
                                    logs[asked.tp.partition as usize].clone()
                                } else {
                                    Vec::new()
                                },
                                tp: asked.tp,
                                error: None,
                                high_watermark: Offset(2),
                                last_stable_offset: Offset(2),
                                aborted_transactions: None,
                                log_start_offset: Offset(0),
                                diverging_epoch: None,
                            })
                            .collect();
                        Response::Fetch(FetchResponse {
                            error: None,
                            session_id: 0,
                            partitions,
                        })
                    }
                    other => panic!("unexpected request {other:?}"),
                };
                std::future::ready(response)
            })
            .await?;
            Ok(())
        }
    });
    let mut reads = consume(sim, 2, Duration::from_secs(3));
    reads.sort();
    assert_eq!(
        reads,
        vec![
            (0, 0, Some(0)),
            (0, 1, Some(1)),
            (1, 0, Some(10)),
            (1, 1, Some(11))
        ]
    );
    let sizes = seen.borrow();
    assert!(!sizes.is_empty(), "the consumer fetched");
    assert!(
        sizes.iter().all(|&n| n == 2),
        "every fetch carried both partitions: {sizes:?}"
    );
}
