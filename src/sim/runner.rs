//! The runner: one scenario variant on one seed. It builds the world (controller, brokers
//! with their disks, producers, consumers), applies the fault schedule at its simulated
//! times, then heals (every fault lifted, every host up, `heal` of settling), performs the
//! final read and collects every replica's log for the checkers.

use crate::check::{self, Verdict};
use crate::config::{Bugs, TopicConfig};
use crate::history::facts::{Fact, Facts};
use crate::history::final_state::{FinalState, GroupFinal, PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::{Event, History};
use crate::kafka::broker::groups::coordinator::OFFSETS_TOPIC;
use crate::kafka::broker::groups::group::offsets_partition;
use crate::kafka::broker::{self, BrokerContext};
use crate::kafka::client::budget::SendBudget;
use crate::kafka::client::{self, ConsumerContext, GroupProgress, GroupSpec, ProducerContext};
use crate::kafka::controller::{self, ControllerContext, MetadataView};
use crate::kafka::storage;
use crate::os::clock::SimTime;
use crate::os::disk::{Disk, DiskFault};
use crate::scenario::model::{Fault, FaultAction, Settings, Target, Variant};
use crate::sim::world::{HostChange, World};
use crate::sim::{derive_seed, faults, trace};
use crate::types::{BrokerId, Epoch, HostName, Incarnation, Offset, TopicPartition};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long the final read may take before the partition counts as unreadable.
const FINAL_READ_LIMIT: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Which of the run's events to print to stderr.
    pub trace: trace::Print,
    /// Write every host's files after the run, where this says.
    pub dump_disks: Option<DumpDisks>,
}

/// `--dump-disks DIR`: every host's files after the run in `DIR/<host>/`, or, when the
/// command runs several variants, `DIR/<variant>/<host>/` (each run would otherwise
/// overwrite the last). Each run's files are written in a staging folder beside `DIR`
/// and renamed into place whole, so an interrupted dump leaves no half-written folder
/// to block the rerun; a staging folder left by one is removed first.
#[derive(Clone, Debug)]
pub struct DumpDisks {
    pub dir: PathBuf,
    pub per_variant: bool,
}

impl DumpDisks {
    /// Where the run of `variant` goes.
    pub fn target(&self, variant: &str) -> PathBuf {
        if self.per_variant {
            self.dir.join(variant)
        } else {
            self.dir.clone()
        }
    }

    /// Where the run of `variant` is written before it is renamed to its target.
    fn staging(&self, variant: &str) -> PathBuf {
        let name = self
            .dir
            .file_name()
            .map_or("dump".into(), |n| n.to_string_lossy());
        self.dir
            .with_file_name(format!(".{name}.hightide-partial"))
            .join(variant)
    }

    fn write(&self, variant: &str, disks: &BTreeMap<HostName, Disk>) -> std::io::Result<()> {
        let staging = self.staging(variant);
        if staging.exists() {
            std::fs::remove_dir_all(&staging)?;
        }
        for (host, disk) in disks {
            disk.dump_to(&staging.join(host.to_string()))?;
        }
        let target = self.target(variant);
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        // Over an empty directory a rename replaces it; the caller refused a full one.
        std::fs::rename(&staging, &target)?;
        if let Some(parent) = staging.parent() {
            // The staging parent is shared by the variants: the last one out removes it.
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }
}

/// What happened to the cluster over time, for the timeline picture.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub duration: Duration,
    pub heal: Duration,
    pub hosts: Vec<HostName>,
    pub host_changes: Vec<HostChange>,
    /// Each fault as it fired, described as in the scenario file.
    pub faults: Vec<(SimTime, String)>,
    /// Each change of a partition's leader, leader epoch or ISR, as the controller saw it.
    pub leadership: Vec<LeadershipChange>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadershipChange {
    pub time: SimTime,
    pub tp: TopicPartition,
    pub leader: Option<BrokerId>,
    pub leader_epoch: Epoch,
    pub isr: Vec<BrokerId>,
}

/// How often the runner looks again whether every send has its outcome, after the heal.
const UNRESOLVED_POLL: Duration = Duration::from_millis(100);

/// How long the consume phase goes on past the members' session timeout.
const CONSUME_LIMIT: Duration = Duration::from_secs(60);

/// How often the runner samples the controller's view for the timeline.
const LEADERSHIP_SAMPLE: Duration = Duration::from_millis(10);

/// Everything a run leaves behind.
pub struct RunOutcome {
    pub variant: String,
    pub seed: u64,
    pub history: Vec<Event>,
    pub final_state: FinalState,
    pub verdict: Verdict,
    /// `[expect]` failures of this run (expect_some is judged over all seeds).
    pub failures: Vec<String>,
    pub trace_hash: u64,
    pub sim_time: Duration,
    pub wall_time: Duration,
    pub timeline: Timeline,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the simulation failed: {0}")]
    Simulation(String),
    #[error("writing --dump-disks: {0}")]
    Dump(#[from] std::io::Error),
}

/// Run one variant on one seed.
pub fn run(variant: &Variant, seed: u64, options: &RunOptions) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    if options.trace != trace::Print::Nothing {
        // Runs print one after another: each under its own header, its clock from zero.
        eprintln!("\n=== {}, seed {seed} ===", variant.name);
    }
    let (result, hash) = trace::with_trace(options.trace, || simulate(variant, seed, options));
    let (history, final_state, timeline) = result?;
    let sim_time = timeline.duration + timeline.heal;
    let verdict = check::check(&history, &final_state);
    let failures = check::evaluate(&variant.expect, &verdict.counts);
    Ok(RunOutcome {
        variant: variant.name.clone(),
        seed,
        history,
        final_state,
        verdict,
        failures,
        trace_hash: hash.value(),
        sim_time,
        wall_time: started.elapsed(),
        timeline,
    })
}

/// Harness state shared with host programs across restarts (it plays the role of the
/// operator and of Jepsen's control node, not of any process).
struct Harness {
    view: MetadataView,
    /// What the cluster's programs record doing (elections, truncations, ...).
    facts: Facts,
    shutdown: BTreeMap<u32, Rc<Cell<bool>>>,
    rng: StdRng,
}

type Simulated = (Vec<Event>, FinalState, Timeline);

/// Steps the world to a time, sampling the controller's view on the way.
fn advance(
    world: &mut World<'_>,
    until: SimTime,
    view: &MetadataView,
    timeline: &mut Timeline,
) -> Result<(), RunError> {
    let mut last: BTreeMap<TopicPartition, LeadershipChange> = BTreeMap::new();
    for change in &timeline.leadership {
        last.insert(change.tp.clone(), change.clone());
    }
    // Metadata only changes with its version: a sample of an unchanged version is skipped.
    let mut sampled_version = None;
    while world.elapsed() < until {
        world
            .step()
            .map_err(|e| RunError::Simulation(e.to_string()))?;
        let now = world.elapsed();
        if !now
            .since_start()
            .as_millis()
            .is_multiple_of(LEADERSHIP_SAMPLE.as_millis())
            || sampled_version == Some(view.version())
        {
            continue;
        }
        sampled_version = Some(view.version());
        view.with(|metadata| {
            for (tp, state) in &metadata.partitions {
                let seen = last.get(tp);
                if seen.is_none_or(|c| {
                    c.leader != state.leader
                        || c.leader_epoch != state.leader_epoch
                        || c.isr != state.isr
                }) {
                    let change = LeadershipChange {
                        time: now,
                        tp: tp.clone(),
                        leader: state.leader,
                        leader_epoch: state.leader_epoch,
                        isr: state.isr.clone(),
                    };
                    timeline.leadership.push(change.clone());
                    last.insert(tp.clone(), change);
                }
            }
        });
    }
    Ok(())
}

fn simulate(variant: &Variant, seed: u64, options: &RunOptions) -> Result<Simulated, RunError> {
    let settings = &variant.settings;
    let mut world = World::new(
        seed,
        settings.network.latency_min,
        settings.network.latency_max,
    );
    let history = History::with_capacity(expected_events(settings));
    let mut harness = Harness {
        view: MetadataView::default(),
        facts: Facts::default(),
        shutdown: BTreeMap::new(),
        rng: StdRng::seed_from_u64(derive_seed(seed, "targets")),
    };
    let partitions = topic_partitions(settings);
    let offsets = offsets_partitions(settings);
    add_controller(
        &mut world,
        settings,
        seed,
        (&harness.view, &harness.facts),
        &[partitions.as_slice(), offsets.as_slice()].concat(),
    );
    for n in 1..=settings.cluster.brokers {
        let flag = add_broker(&mut world, settings, seed, n, &harness.facts);
        harness.shutdown.insert(n, flag);
    }
    let progress = GroupProgress::default();
    add_clients(
        &mut world,
        settings,
        seed,
        (&history, &harness.facts),
        &progress,
    );

    let schedule = faults::schedule(
        &settings.faults,
        settings.nemesis.as_ref(),
        settings.cluster.brokers,
        settings.duration,
        seed,
    );
    let mut timeline = Timeline {
        duration: settings.duration,
        heal: settings.heal,
        ..Timeline::default()
    };
    for fault in &schedule {
        let at = SimTime::after_start(fault.at);
        advance(&mut world, at, &harness.view, &mut timeline)?;
        timeline.faults.push((at, fault.action.to_string()));
        apply(&mut world, &mut harness, settings, fault);
    }
    let end = SimTime::after_start(settings.duration);
    advance(&mut world, end, &harness.view, &mut timeline)?;

    heal(&mut world, &harness.facts);
    advance(
        &mut world,
        end + settings.heal,
        &harness.view,
        &mut timeline,
    )?;
    // Producers finish first: the heal phase goes on while sends are unresolved, up to the
    // longest a producer can take to give up on the last of them. A producer that was
    // killed never answers its own, so then there is nothing to wait for.
    let producer = &settings.producer;
    let give_up = end + producer.delivery_timeout_ms + producer.request_timeout_ms;
    let producers_run = |world: &World<'_>| {
        !world
            .stopped_hosts()
            .iter()
            .any(|h| matches!(h, HostName::Producer(_)))
    };
    while history.unresolved() > 0 && world.elapsed() < give_up && producers_run(&world) {
        let next = (world.elapsed() + UNRESOLVED_POLL).min(give_up);
        advance(&mut world, next, &harness.view, &mut timeline)?;
    }
    let group = match &settings.workload.group {
        Some(name) => {
            let caught_up = consume(
                &mut world,
                settings,
                &progress,
                &harness.view,
                &mut timeline,
            )?;
            Some(GroupFinal {
                name: name.clone(),
                caught_up,
            })
        }
        None => None,
    };
    timeline.heal = world.elapsed() - end;

    let read = final_read(&mut world, &harness.view, &partitions, settings.bugs)?;
    if let Some(dump) = &options.dump_disks {
        dump.write(&variant.name, world.disks())?;
    }
    timeline.hosts = world.hosts().to_vec();
    timeline.host_changes = world.host_changes().to_vec();
    let mut final_state = collect_final_state(world, &harness, &partitions, read);
    final_state.group = group;
    Ok((history.take_events(), final_state, timeline))
}

/// The consume phase of a run with a group: the members go on until each partition's
/// owner has processed up to the HW of a fetch answered after the phase began, or
/// until `session.timeout.ms` + [`CONSUME_LIMIT`] have passed (time for a dead member's
/// session to expire and the group to rebalance). Returns whether they caught up.
fn consume(
    world: &mut World<'_>,
    settings: &Settings,
    progress: &GroupProgress,
    view: &MetadataView,
    timeline: &mut Timeline,
) -> Result<bool, RunError> {
    let began = world.elapsed();
    let limit = began + settings.consumer.session_timeout_ms + CONSUME_LIMIT;
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
        if world.elapsed() >= limit {
            tracing::info!("consume phase: the group did not catch up in time");
            return Ok(false);
        }
        let next = (world.elapsed() + UNRESOLVED_POLL).min(limit);
        advance(world, next, view, timeline)?;
    }
    Ok(true)
}

/// About how many events the workload records: an invoke and a completion per send, and
/// a read per send per consumer.
fn expected_events(settings: &Settings) -> usize {
    let w = &settings.workload;
    let by_rate = u64::from(w.producers) * u64::from(w.rate) * settings.duration.as_secs();
    let sends = w.messages.map_or(by_rate, |m| m.min(by_rate));
    let events = sends.saturating_mul(2 + u64::from(w.consumers));
    // Generous but bounded: a mistaken estimate costs a doubling, not gigabytes.
    usize::try_from(events + events / 16).map_or(1 << 24, |e| e.min(1 << 24))
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
    let brokers = settings.cluster.brokers;
    (0..broker.offsets_topic_num_partitions)
        .map(|p| {
            let placement =
                controller::placement(p, brokers, broker.offsets_topic_replication_factor);
            (TopicPartition::new(OFFSETS_TOPIC, p), placement)
        })
        .collect()
}

/// The topics' configurations, `__consumer_offsets` included when there is a group (its
/// segments are `offsets.topic.segment.bytes` = 100 MiB; the rest are broker defaults).
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
    configs
}

fn disk_for(settings: &Settings, seed: u64, host: HostName) -> Disk {
    let disk = Disk::new(
        settings.disk.clone(),
        derive_seed(seed, &format!("disk/{host}")),
    );
    if settings.bugs.fsync_returns_early {
        disk.inject_lying_fsync();
    }
    disk
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
    let partitions = settings
        .cluster
        .topics
        .iter()
        .find(|t| t.name == workload.topic)
        .map_or(0, |t| t.partitions);
    let budget = SendBudget::new(workload.producers, workload.messages);
    for n in 1..=workload.producers {
        let ctx = ProducerContext {
            index: n,
            config: settings.producer.clone(),
            topic: workload.topic.clone(),
            partitions,
            rate: workload.rate,
            keys: workload.keys,
            value_bytes: workload.value_bytes,
            brokers: settings.cluster.brokers,
            history: history.clone(),
            facts: facts.clone(),
            budget: budget.clone(),
            stop_at: SimTime::after_start(settings.duration),
            seed: derive_seed(seed, &format!("producer-{n}")),
        };
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
            }),
        };
        world.add_host(HostName::Consumer(n), None, move || {
            client::run_member(ctx.clone())
        });
    }
}

/// Resolve a target to hosts, from the controller's view at this instant.
fn resolve(
    world: &World<'_>,
    harness: &mut Harness,
    settings: &Settings,
    target: &Target,
) -> Vec<HostName> {
    let brokers = settings.cluster.brokers;
    let followers = |harness: &Harness, tp: &TopicPartition| -> Vec<HostName> {
        let metadata = harness.view.get();
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
    };
    match target {
        Target::Host(host) => vec![*host],
        Target::List(targets) => targets
            .iter()
            .flat_map(|t| resolve(world, harness, settings, t))
            .collect(),
        Target::Brokers => (1..=brokers).map(HostName::Broker).collect(),
        Target::Crashed => world.stopped_hosts(),
        Target::Leader(tp) => harness
            .view
            .get()
            .partitions
            .get(tp)
            .and_then(|p| p.leader)
            .map(|b| vec![HostName::Broker(b.0)])
            .unwrap_or_default(),
        Target::Followers(tp) => followers(harness, tp),
        Target::Follower(tp) => {
            let all = followers(harness, tp);
            if all.is_empty() {
                all
            } else {
                vec![all[harness.rng.random_range(0..all.len())]]
            }
        }
        Target::Coordinator => {
            let Some(group) = &settings.workload.group else {
                return Vec::new();
            };
            let partitions = settings.broker.offsets_topic_num_partitions;
            let tp = TopicPartition::new(OFFSETS_TOPIC, offsets_partition(group, partitions));
            harness
                .view
                .get()
                .partitions
                .get(&tp)
                .and_then(|p| p.leader)
                .map(|b| vec![HostName::Broker(b.0)])
                .unwrap_or_default()
        }
        Target::RandomBroker => vec![HostName::Broker(
            harness.rng.random_range(1..=brokers.max(1)),
        )],
    }
}

fn apply(world: &mut World<'_>, harness: &mut Harness, settings: &Settings, fault: &Fault) {
    let facts = harness.facts.clone();
    let mut struck = Vec::new();
    let mut hosts = |target: &Target| {
        let hosts = resolve(world, harness, settings, target);
        if hosts.is_empty() {
            tracing::info!(target = %target, "fault target resolves to no host now");
        }
        struck.extend_from_slice(&hosts);
        hosts
    };
    match &fault.action {
        FaultAction::Kill(t) => hosts(t).into_iter().for_each(|h| world.kill(h)),
        FaultAction::PowerLoss(t) => hosts(t).into_iter().for_each(|h| world.power_loss(h)),
        FaultAction::Restart(t) => hosts(t).into_iter().for_each(|h| world.restart(h)),
        FaultAction::Shutdown(t) => {
            for host in hosts(t) {
                match host {
                    HostName::Broker(n) => {
                        tracing::info!(host = %host, "controlled shutdown requested");
                        harness.shutdown[&n].set(true);
                    }
                    // Other hosts keep no state worth a clean stop.
                    _ => world.kill(host),
                }
            }
        }
        FaultAction::Partition(groups) => {
            let groups: Vec<Vec<HostName>> = groups.iter().map(&mut hosts).collect();
            world.partition(&groups);
        }
        FaultAction::Isolate(t) => hosts(t).into_iter().for_each(|h| world.isolate(h)),
        FaultAction::Heal => world.heal_network(),
        FaultAction::SlowLink { between, latency } => {
            let (a, b) = (hosts(&between.0), hosts(&between.1));
            for &x in &a {
                for &y in &b {
                    if x != y {
                        world.slow_link(x, y, *latency);
                    }
                }
            }
        }
        FaultAction::SlowDisk { target, latency } => {
            inject(world, hosts(target), DiskFault::Slow(*latency))
        }
        FaultAction::HealDisk(t) => inject(world, hosts(t), DiskFault::Heal),
        FaultAction::FsyncError(t) => inject(world, hosts(t), DiskFault::FsyncError),
        FaultAction::DiskFull(t) => inject(world, hosts(t), DiskFault::Full),
        FaultAction::Corrupt {
            target,
            file,
            bytes,
        } => inject(
            world,
            hosts(target),
            DiskFault::Corrupt {
                glob: file.clone(),
                bytes: *bytes,
            },
        ),
    }
    struck.sort_unstable();
    struck.dedup();
    facts.record(Fact::Fault {
        what: fault.action.to_string(),
        hosts: struck,
    });
}

fn inject(world: &World<'_>, hosts: Vec<HostName>, fault: DiskFault) {
    for host in hosts {
        if let Some(disk) = world.disk(host) {
            tracing::info!(host = %host, fault = ?fault, "disk fault");
            if let Err(error) = disk.inject(fault.clone()) {
                tracing::info!(host = %host, %error, "disk fault not applied");
            }
        }
    }
}

/// The heal phase: every fault lifted, every host up.
fn heal(world: &mut World<'_>, facts: &Facts) {
    tracing::info!("heal phase");
    facts.record(Fact::Fault {
        what: "heal phase: every fault lifted, every host up".to_string(),
        hosts: world.stopped_hosts(),
    });
    world.heal_network();
    for host in world.hosts().to_vec() {
        if let Some(disk) = world.disk(host) {
            let _ = disk.inject(DiskFault::Heal);
        }
    }
    for host in world.stopped_hosts() {
        world.restart(host);
    }
}

type FinalRead = Vec<client::PartitionRead>;

fn final_read(
    world: &mut World<'_>,
    view: &MetadataView,
    partitions: &[(TopicPartition, Vec<BrokerId>)],
    bugs: Bugs,
) -> Result<FinalRead, RunError> {
    let out: Rc<RefCell<Option<FinalRead>>> = Rc::default();
    let skip = usize::from(bugs.final_read_skips_a_partition);
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
            let read = client::final_read(topics, leader_of, FINAL_READ_LIMIT).await;
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
    harness: &Harness,
    partitions: &[(TopicPartition, Vec<BrokerId>)],
    read: FinalRead,
) -> FinalState {
    let metadata = harness.view.get();
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
    let partitions = partitions
        .iter()
        .map(|(tp, replicas)| {
            let read = by_tp.remove(tp);
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
                complete: read.as_ref().is_some_and(|r| r.complete),
                read: read.map(|r| r.records).unwrap_or_default(),
                replicas,
            }
        })
        .collect();
    FinalState {
        partitions,
        facts: harness.facts.take(),
        group: None,
    }
}

/// Give the memory freed so far back to the OS. glibc keeps freed chunks resident, and a
/// dropped disk's pages are 4 KiB holes between other allocations, too small for the
/// records and indexes that the collection and the checkers allocate next: without this,
/// a run's peak memory held its logs twice, once as freed pages.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns glibc's free pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
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
