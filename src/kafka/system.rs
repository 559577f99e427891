//! Kafka as a system of the harness: its side of the seam ([`System`]). It builds a
//! Kafka cluster in the world (the controller, the brokers with their disks, producers and
//! consumers), says which brokers a role names from the controller's view, runs the
//! consume phase of a group and the final read, and reads each replica's log back from its
//! disk for the checkers.

use crate::check::Teller;
use crate::config::kafka::{Commit, IsolationLevel, ProducerConfig, TopicConfig};
use crate::config::workload::ArrivalProcess;
use crate::history::budget::SendBudget;
use crate::history::facts::{FactLog, Facts};
use crate::history::final_state::{FinalState, GroupFinal, PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::History;
use crate::kafka::broker::groups::coordinator::OFFSETS_TOPIC;
use crate::kafka::broker::groups::group::offsets_partition;
use crate::kafka::broker::txn::coordinator::TRANSACTION_STATE_TOPIC;
use crate::kafka::broker::txn::load::state_partition;
use crate::kafka::broker::{self, BrokerContext};
use crate::kafka::client::{
    self, Application, ConsumerContext, GroupProgress, GroupSpec, ProducerContext,
};
use crate::kafka::controller::{self, ControllerContext, MetadataView};
use crate::kafka::storage;
use crate::kafka::teller;
use crate::kafka::types::Incarnation;
use crate::os::clock::SimTime;
use crate::os::disk::Disk;
use crate::scenario::model::{Settings, Target};
use crate::sim::derive_seed;
use crate::sim::system::RunError;
use crate::sim::system::{Leadership, Phase, System};
use crate::sim::timeline::LeadershipChange;
use crate::sim::world::{disk_for, release_freed_memory, World};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use rand::rngs::StdRng;
use rand::Rng;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// How long a run waits for a pre-2.1 send (see `give_up_after`): 2.1's default
/// `delivery.timeout.ms`.
const PRE_KIP_91_SEND_LIFE: Duration = Duration::from_secs(120);

/// How long the final read may take before the partition counts as unreadable.
const FINAL_READ_LIMIT: Duration = Duration::from_secs(60);

/// How often the consume phase looks again whether the group has caught up.
const CONSUME_POLL: Duration = Duration::from_millis(100);

/// How long the consume phase goes on past the members' session timeout.
const CONSUME_LIMIT: Duration = Duration::from_secs(60);

/// A Kafka cluster in a run: what the harness asks of it, and the handles it keeps on
/// its programs (the harness plays the operator, not any process).
pub struct Kafka {
    settings: Settings,
    /// The controller's committed metadata, as the harness may look at it.
    view: MetadataView,
    /// Each broker's controlled-shutdown flag.
    shutdown: BTreeMap<u32, Rc<Cell<bool>>>,
    /// The group's processing progress, shared with its members.
    progress: GroupProgress,
    /// The workload's topics' partitions and their replicas.
    partitions: Vec<(TopicPartition, Vec<BrokerId>)>,
    /// The final read, once taken.
    read: Option<FinalRead>,
}

impl System for Kafka {
    type View = MetadataView;

    fn build(
        world: &mut World<'_>,
        settings: &Settings,
        seed: u64,
        history: &History,
        facts: &Facts,
    ) -> Kafka {
        let view = MetadataView::default();
        let partitions = topic_partitions(settings);
        let offsets = offsets_partitions(settings);
        let transactions = transaction_state_partitions(settings);
        add_controller(
            world,
            settings,
            seed,
            (&view, facts),
            &[
                partitions.as_slice(),
                offsets.as_slice(),
                transactions.as_slice(),
            ]
            .concat(),
        );
        let mut shutdown = BTreeMap::new();
        for n in 1..=settings.cluster.brokers {
            let flag = add_broker(world, settings, seed, n, facts);
            shutdown.insert(n, flag);
        }
        let progress = GroupProgress::default();
        add_clients(world, settings, seed, (history, facts), &progress);
        Kafka {
            settings: settings.clone(),
            view,
            shutdown,
            progress,
            partitions,
            read: None,
        }
    }

    fn view(&self) -> MetadataView {
        self.view.clone()
    }

    fn resolve_role(&mut self, role: &Target, rng: &mut StdRng) -> Vec<HostName> {
        let leader_of = |tp: &TopicPartition| -> Vec<HostName> {
            self.view
                .get()
                .partitions
                .get(tp)
                .and_then(|p| p.leader)
                .map(|b| vec![HostName::Broker(b.0)])
                .unwrap_or_default()
        };
        match role {
            Target::Leader(tp) => leader_of(tp),
            Target::Followers(tp) => self.followers(tp),
            Target::Follower(tp) => {
                let all = self.followers(tp);
                if all.is_empty() {
                    all
                } else {
                    vec![all[rng.random_range(0..all.len())]]
                }
            }
            Target::Coordinator => {
                let Some(group) = &self.settings.workload.group else {
                    return Vec::new();
                };
                let partitions = self.settings.broker.offsets_topic_num_partitions;
                leader_of(&TopicPartition::new(
                    OFFSETS_TOPIC,
                    offsets_partition(group, partitions),
                ))
            }
            Target::TxnCoordinator => {
                let settings = &self.settings;
                let id = (settings.producer.transactional_id_of(1))
                    .or_else(|| processor_config(settings).transactional_id_of(1));
                let Some(id) = id else {
                    return Vec::new();
                };
                let partitions = self.settings.broker.transaction_state_log_num_partitions;
                leader_of(&TopicPartition::new(
                    TRANSACTION_STATE_TOPIC,
                    state_partition(&id, partitions),
                ))
            }
            Target::Host(_)
            | Target::List(_)
            | Target::Brokers
            | Target::Crashed
            | Target::RandomBroker => {
                unreachable!("the harness resolves `{role}` itself")
            }
            Target::Master(_) => unreachable!("a Kafka scenario names no `{role}`"),
        }
    }

    fn shutdown(&mut self, host: HostName) -> bool {
        match host {
            HostName::Broker(n) => {
                tracing::info!(host = %host, "controlled shutdown requested");
                self.shutdown[&n].set(true);
                true
            }
            // Other hosts keep no state worth a clean stop.
            _ => false,
        }
    }

    /// A send's longest life, and a request timeout for its answer. Before KIP-91 only
    /// `retries` bounds it: each attempt may wait `request.timeout.ms` in the accumulator,
    /// as long in flight and a backoff; a run waits for that, up to the 120 s that
    /// `delivery.timeout.ms` gave from 2.1, and calls what is still open indeterminate.
    fn give_up_after(&self) -> Duration {
        let producer = &self.settings.producer;
        let life = if producer.expire_in_accumulator {
            let attempt = producer.request_timeout * 2 + producer.retry_backoff;
            let attempts = producer.retries.saturating_add(1);
            attempt
                .saturating_mul(attempts)
                .saturating_add(producer.linger)
                .min(PRE_KIP_91_SEND_LIFE)
        } else {
            producer.delivery_timeout
        };
        life + producer.request_timeout
    }

    fn consume(&mut self, phase: &mut Phase<'_, '_>) -> Result<Option<GroupFinal>, RunError> {
        let Some(name) = &self.settings.workload.group else {
            return Ok(None);
        };
        let caught_up = consume(phase, &self.settings, &self.progress)?;
        Ok(Some(GroupFinal {
            name: name.clone(),
            caught_up,
        }))
    }

    fn final_read(&mut self, world: &mut World<'_>) -> Result<(), RunError> {
        let read = final_read(world, &self.view, &self.partitions, &self.settings)?;
        self.read = Some(read);
        Ok(())
    }

    fn collect(mut self, world: World<'_>, facts: &Facts) -> FinalState {
        let read = self.read.take().unwrap_or_default();
        collect_final_state(world, &self, facts, read)
    }

    fn teller(facts: &FactLog) -> impl Teller + '_ {
        teller::Teller::new(facts)
    }
}

impl Kafka {
    /// The replicas of `tp` that do not lead it, from the controller's view.
    fn followers(&self, tp: &TopicPartition) -> Vec<HostName> {
        let metadata = self.view.get();
        metadata
            .partitions
            .get(tp)
            .map(|p| {
                p.replicas
                    .iter()
                    .filter(|&&r| Some(r) != p.leader)
                    .map(|r| HostName::Broker(r.0))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Leadership for MetadataView {
    fn version(&self) -> u64 {
        MetadataView::version(self)
    }

    fn sample(&self, now: SimTime) -> Vec<LeadershipChange> {
        self.with(|metadata| {
            metadata
                .partitions
                .iter()
                .map(|(tp, state)| LeadershipChange {
                    time: now,
                    tp: tp.clone(),
                    leader: state.leader,
                    leader_host: state.leader.map(|b| HostName::Broker(b.0)),
                    leader_epoch: state.leader_epoch,
                    isr: state.isr.clone(),
                })
                .collect()
        })
    }
}

/// The consume phase of a run with a group: the members go on until each partition's
/// owner has processed up to the HW of a fetch answered after the phase began, or
/// until `session.timeout.ms` + [`CONSUME_LIMIT`] have passed (time for a dead member's
/// session to expire and the group to rebalance). Returns whether they caught up.
fn consume(
    phase: &mut Phase<'_, '_>,
    settings: &Settings,
    progress: &GroupProgress,
) -> Result<bool, RunError> {
    let began = phase.elapsed();
    let limit = began + settings.consumer.session_timeout + CONSUME_LIMIT;
    let topic = &settings.workload.topic;
    let partitions = settings
        .cluster
        .topics
        .iter()
        .find(|t| &t.name == topic)
        .map_or(0, |t| t.partitions);
    let caught_up = || {
        let progress = progress.borrow();
        (0..partitions).all(|p| {
            progress
                .get(&TopicPartition::new(topic.as_str(), p))
                .is_some_and(|&(processed, hw, at)| {
                    at >= began && hw >= Offset(0) && processed >= hw
                })
        })
    };
    while !caught_up() {
        if phase.elapsed() >= limit {
            tracing::info!("consume phase: the group did not catch up in time");
            return Ok(false);
        }
        let next = (phase.elapsed() + CONSUME_POLL).min(limit);
        phase.advance(next)?;
    }
    Ok(true)
}

fn topic_partitions(settings: &Settings) -> Vec<(TopicPartition, Vec<BrokerId>)> {
    let brokers = settings.cluster.brokers;
    settings
        .cluster
        .topics
        .iter()
        .flat_map(|topic| {
            (0..topic.partitions).map(move |p| {
                let placement = controller::placement(p, brokers, topic.replication_factor);
                (TopicPartition::new(topic.name.as_str(), p), placement)
            })
        })
        .collect()
}

/// `__consumer_offsets`, when the workload has a group. Kafka makes it when a client first
/// looks for a coordinator; here it is there from the start, placed like any topic, so
/// that the first join does not wait for it (and a run without a group has none).
fn offsets_partitions(settings: &Settings) -> Vec<(TopicPartition, Vec<BrokerId>)> {
    if settings.workload.group.is_none() {
        return Vec::new();
    }
    let broker = &settings.broker;
    internal_partitions(
        settings,
        OFFSETS_TOPIC,
        broker.offsets_topic_num_partitions,
        broker.offsets_topic_replication_factor,
    )
}

/// An internal topic's partitions, placed like any topic's.
fn internal_partitions(
    settings: &Settings,
    topic: &str,
    partitions: u32,
    replication_factor: u32,
) -> Vec<(TopicPartition, Vec<BrokerId>)> {
    let brokers = settings.cluster.brokers;
    (0..partitions)
        .map(|p| {
            let placement = controller::placement(p, brokers, replication_factor);
            (TopicPartition::new(topic, p), placement)
        })
        .collect()
}

/// `__transaction_state`, when the producers are transactional. As for `__consumer_offsets`,
/// Kafka makes it at the first FindCoordinator(TRANSACTION); here it is there from the start,
/// and a run without a transactional producer has none.
fn transaction_state_partitions(settings: &Settings) -> Vec<(TopicPartition, Vec<BrokerId>)> {
    if !settings.transactional() {
        return Vec::new();
    }
    let broker = &settings.broker;
    internal_partitions(
        settings,
        TRANSACTION_STATE_TOPIC,
        broker.transaction_state_log_num_partitions,
        broker.transaction_state_log_replication_factor,
    )
}

/// The topics' configurations, `__consumer_offsets` included when there is a group (its
/// segments are `offsets.topic.segment.bytes` = 100 MiB; the rest are broker defaults),
/// `__transaction_state` when the producers are transactional (Kafka forces its
/// `min.insync.replicas` to `transaction.state.log.min.isr`, unclean election off, and
/// `transaction.state.log.segment.bytes` = 100 MiB).
fn topic_configs(settings: &Settings) -> BTreeMap<String, TopicConfig> {
    let mut configs: BTreeMap<String, TopicConfig> = settings
        .cluster
        .topics
        .iter()
        .map(|t| (t.name.clone(), t.config.clone()))
        .collect();
    if settings.workload.group.is_some() {
        let offsets = TopicConfig {
            segment_bytes: Some(100 * 1024 * 1024),
            ..TopicConfig::default()
        };
        configs.insert(OFFSETS_TOPIC.to_owned(), offsets);
    }
    if settings.transactional() {
        let transactions = TopicConfig {
            segment_bytes: Some(100 * 1024 * 1024),
            min_insync_replicas: Some(settings.broker.transaction_state_log_min_isr),
            unclean_leader_election_enable: Some(false),
            ..TopicConfig::default()
        };
        configs.insert(TRANSACTION_STATE_TOPIC.to_owned(), transactions);
    }
    configs
}

fn add_controller(
    world: &mut World<'_>,
    settings: &Settings,
    seed: u64,
    (view, facts): (&MetadataView, &Facts),
    partitions: &[(TopicPartition, Vec<BrokerId>)],
) {
    let disk = disk_for(settings, seed, HostName::Controller);
    let topic_configs = topic_configs(settings);
    let topics: Vec<_> = partitions
        .iter()
        .map(|(tp, replicas)| {
            (
                tp.clone(),
                replicas.clone(),
                topic_configs[&*tp.topic].clone(),
            )
        })
        .collect();
    let config = settings.broker.clone();
    let brokers = settings.cluster.brokers;
    let view = view.clone();
    let facts = facts.clone();
    let settings_bugs = settings.bugs;
    let host_disk = disk.clone();
    world.add_host(HostName::Controller, Some(disk), move || {
        controller::run(ControllerContext {
            disk: host_disk.clone(),
            config: config.clone(),
            brokers,
            topics: topics.clone(),
            view: view.clone(),
            facts: facts.clone(),
            bugs: settings_bugs,
        })
    });
}

fn add_broker(
    world: &mut World<'_>,
    settings: &Settings,
    seed: u64,
    n: u32,
    facts: &Facts,
) -> Rc<Cell<bool>> {
    let facts = facts.clone();
    let bugs = settings.bugs;
    let host = HostName::Broker(n);
    let disk = disk_for(settings, seed, host);
    let shutdown = Rc::new(Cell::new(false));
    let incarnation = Rc::new(Cell::new(Incarnation(0)));
    let config = settings.broker.clone();
    let topic_configs = topic_configs(settings);
    let host_disk = disk.clone();
    let flag = shutdown.clone();
    world.add_host(host, Some(disk), move || {
        incarnation.set(incarnation.get().next());
        flag.set(false);
        broker::run(BrokerContext {
            id: BrokerId(n),
            incarnation: incarnation.get(),
            config: config.clone(),
            topic_configs: topic_configs.clone(),
            disk: host_disk.clone(),
            shutdown: flag.clone(),
            facts: facts.clone(),
            bugs,
            seed: derive_seed(seed, &format!("broker-{n} {}", incarnation.get())),
        })
    });
    shutdown
}

fn add_clients(
    world: &mut World<'_>,
    settings: &Settings,
    seed: u64,
    (history, facts): (&History, &Facts),
    progress: &GroupProgress,
) {
    let workload = &settings.workload;
    let partitions = partitions_of(settings, &workload.topic);
    let budget = SendBudget::new(workload.producers, workload.messages);
    for n in 1..=workload.producers {
        let ctx = producer_context(
            settings,
            (history, facts),
            (n, settings.producer.clone(), &workload.topic),
            derive_seed(seed, &format!("producer-{n}")),
            Application::Workload {
                arrivals: ArrivalProcess::new(
                    workload.arrivals,
                    workload.rate,
                    derive_seed(seed, &format!("producer-{n} arrivals")),
                ),
                budget: budget.clone(),
                stop_at: SimTime::after_start(settings.duration),
                transaction_messages: workload.transaction_messages,
            },
        );
        world.add_host(HostName::Producer(n), None, move || {
            client::run_producer(ctx.clone())
        });
    }
    for n in 1..=workload.consumers {
        let ctx = ConsumerContext {
            index: n,
            config: settings.consumer.clone(),
            topic: workload.topic.clone(),
            partitions,
            brokers: settings.cluster.brokers,
            history: history.clone(),
            group: workload.group.as_ref().map(|name| GroupSpec {
                name: name.clone(),
                commit: workload.commit,
                processing: workload.processing,
                progress: progress.clone(),
                bugs: settings.bugs,
                output: workload.output.as_ref().map(|output| {
                    producer_context(
                        settings,
                        (history, facts),
                        (n, processor_config(settings), output),
                        derive_seed(seed, &format!("consumer-{n} output")),
                        Application::Processor,
                    )
                }),
            }),
        };
        world.add_host(HostName::Consumer(n), None, move || {
            client::run_member(ctx.clone())
        });
    }
}

/// Producer `index`'s context, writing `topic` with `config`: a workload producer's or a
/// processor's; the rest is the workload's and the run's.
fn producer_context(
    settings: &Settings,
    (history, facts): (&History, &Facts),
    (index, config, topic): (u32, ProducerConfig, &str),
    seed: u64,
    application: Application,
) -> ProducerContext {
    let workload = &settings.workload;
    ProducerContext {
        index,
        config,
        topic: topic.to_owned(),
        partitions: partitions_of(settings, topic),
        keys: workload.keys,
        value_bytes: workload.value_bytes,
        on_error: workload.on_error,
        bugs: settings.bugs,
        brokers: settings.cluster.brokers,
        history: history.clone(),
        facts: facts.clone(),
        seed,
        application,
    }
}

/// A processor's producer: `[producer]`'s keys, transactional for exactly once
/// (`commit = "transactional"`) with `transactional.id` `<group>-consumer-N` (one per
/// member, so that a restarted member's new instance fences the old one), otherwise not
/// transactional, whatever the workload's producers are.
fn processor_config(settings: &Settings) -> ProducerConfig {
    let workload = &settings.workload;
    let mut config = settings.producer.clone();
    config.transactional_id = workload
        .group
        .as_ref()
        .filter(|_| workload.commit == Commit::Transactional)
        .map(|group| format!("{group}-consumer"));
    if config.transactional_id.is_some() {
        // Idempotent: what it needs, in keys the file left at their defaults (a key set
        // against it is refused when the file is read), as Kafka's producer sets them.
        config.enable_idempotence = true;
        while let Some(conflict) = config.idempotence_conflict() {
            config.settle_for_idempotence(conflict.key);
        }
    }
    config
}

fn partitions_of(settings: &Settings, topic: &str) -> u32 {
    settings
        .cluster
        .topics
        .iter()
        .find(|t| t.name == topic)
        .map_or(0, |t| t.partitions)
}

type FinalRead = Vec<client::PartitionRead>;

/// The final read, checking CRCs or not as `[consumer] check.crcs` says.
fn final_read(
    world: &mut World<'_>,
    view: &MetadataView,
    partitions: &[(TopicPartition, Vec<BrokerId>)],
    settings: &Settings,
) -> Result<FinalRead, RunError> {
    let out: Rc<RefCell<Option<FinalRead>>> = Rc::default();
    let bugs = settings.bugs;
    let skip = usize::from(bugs.final_read_skips_a_partition);
    let check_crcs = settings.consumer.check_crcs && !bugs.final_read_skips_crc;
    // With transactions, what counts is what a read_committed consumer can read.
    let reading = client::Reading {
        check_crcs,
        isolation: if settings.transactional() {
            IsolationLevel::ReadCommitted
        } else {
            IsolationLevel::ReadUncommitted
        },
        ignore_aborted: bugs.final_read_ignores_aborted,
    };
    let topics: Vec<TopicPartition> = partitions
        .iter()
        .skip(skip)
        .map(|(tp, _)| tp.clone())
        .collect();
    let view = view.clone();
    let leader_of: client::LeaderOf = Rc::new(move |tp: &TopicPartition| {
        let state = view.get().partitions.get(tp).cloned()?;
        state.leader.map(|leader| (leader, state.leader_epoch))
    });
    let sink = out.clone();
    world.add_host(HostName::Reader, None, move || {
        let sink = sink.clone();
        let topics = topics.clone();
        let leader_of = leader_of.clone();
        async move {
            let read = client::final_read(topics, leader_of, reading, FINAL_READ_LIMIT).await;
            *sink.borrow_mut() = Some(read);
            Ok(())
        }
    });
    let deadline = world.elapsed() + FINAL_READ_LIMIT + Duration::from_secs(5);
    while out.borrow().is_none() && world.elapsed() < deadline {
        world
            .step()
            .map_err(|e| RunError::Simulation(e.to_string()))?;
    }
    let read = out.borrow_mut().take();
    read.ok_or_else(|| RunError::Simulation("the final read did not finish".into()))
}

/// The final read and every replica's log. The simulation ends here: each broker's disk
/// is read and dropped before the next one's, so a run never holds all its logs twice
/// (as pages and as records), which was its peak of memory.
fn collect_final_state(
    world: World<'_>,
    kafka: &Kafka,
    facts: &Facts,
    read: FinalRead,
) -> FinalState {
    let partitions = &kafka.partitions;
    let metadata = kafka.view.get();
    let in_isr = |tp: &TopicPartition, broker: BrokerId| {
        metadata
            .partitions
            .get(tp)
            .is_some_and(|p| p.isr.contains(&broker))
    };
    let running: BTreeMap<BrokerId, bool> = partitions
        .iter()
        .flat_map(|(_, replicas)| replicas.iter().copied())
        .map(|broker| (broker, world.is_running(HostName::Broker(broker.0))))
        .collect();
    let mut disks = world.into_disks();
    let mut logs: BTreeMap<(BrokerId, &TopicPartition), ReplicaLog> = BTreeMap::new();
    for (&broker, &running) in &running {
        let disk = disks.remove(&HostName::Broker(broker.0));
        for (tp, _) in partitions.iter().filter(|(_, r)| r.contains(&broker)) {
            let log = replica_log(disk.as_ref(), tp, broker, in_isr(tp, broker), running);
            logs.insert((broker, tp), log);
        }
        drop(disk);
        release_freed_memory();
    }
    let mut by_tp: BTreeMap<TopicPartition, client::PartitionRead> =
        read.into_iter().map(|r| (r.tp.clone(), r)).collect();
    let partitions: Vec<PartitionFinal> = partitions
        .iter()
        .map(|(tp, replicas)| {
            let mut read = by_tp.remove(tp);
            let replicas = replicas
                .iter()
                .filter_map(|&broker| logs.remove(&(broker, tp)))
                .collect();
            PartitionFinal {
                tp: tp.clone(),
                leader: read.as_ref().and_then(|r| r.leader),
                high_watermark: read
                    .as_ref()
                    .map_or(Offset::default(), |r| r.high_watermark),
                log_start_offset: read
                    .as_ref()
                    .map_or(Offset::default(), |r| r.log_start_offset),
                last_stable_offset: read.as_ref().and_then(|r| r.last_stable_offset),
                complete: read.as_ref().is_some_and(|r| {
                    r.complete
                        && r.last_stable_offset
                            .is_none_or(|lso| lso >= r.high_watermark)
                }),
                beyond_lso: read.as_mut().and_then(|r| r.beyond_lso.take()),
                read: read.map(|r| r.records).unwrap_or_default(),
                replicas,
            }
        })
        .collect();
    // A processor's outputs carry their inputs' ids: checked against the inputs, not as
    // sends.
    let output = kafka.settings.workload.output.as_deref();
    let (outputs, partitions) = partitions
        .into_iter()
        .partition(|p| Some(&*p.tp.topic) == output);
    FinalState {
        partitions,
        outputs,
        facts: facts.take(),
        group: None,
    }
}

fn replica_log(
    disk: Option<&Disk>,
    tp: &TopicPartition,
    broker: BrokerId,
    in_isr: bool,
    running: bool,
) -> ReplicaLog {
    let mut records = Vec::new();
    let mut epochs: Vec<(Epoch, Offset)> = Vec::new();
    if let Some(disk) = disk {
        let read = storage::log::visit_records(disk, tp, |offset, epoch, record| {
            if epochs.last().is_none_or(|&(last, _)| last != epoch) {
                epochs.push((epoch, offset));
            }
            records.push(ReadRecord::new(offset, record.value.unwrap_or_default()));
        });
        if read.is_err() {
            records.clear();
            epochs.clear();
        }
    }
    records.shrink_to_fit();
    ReplicaLog {
        broker,
        in_isr,
        running,
        log_start_offset: records.first().map_or(Default::default(), |r| r.offset),
        log_end_offset: records
            .last()
            .map_or(Default::default(), |r| r.offset.next()),
        records,
        epochs,
    }
}
