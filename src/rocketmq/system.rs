//! RocketMQ as a system of the harness: its side of the seam ([`System`]). It builds a
//! NameServer, each broker group's master with its disk, and the workload's producers;
//! says which host `master:broker-a` or `leader:orders/1` names; takes the final read
//! from each master's ConsumeQueues; and reads each master's queues back from its disk.
//!
//! A queue is a partition to the checkers: queue `q` of broker group `g` is partition
//! `g * queues + q` of its topic, its offsets are queue offsets, and a replica's
//! `BrokerId` is RocketMQ's `brokerId` (0, the master).

use crate::check::Teller;
use crate::config::rocketmq::{RocketMqConfig, Rules};
use crate::history::budget::SendBudget;
use crate::history::facts::{FactLog, Facts};
use crate::history::final_state::{FinalState, GroupFinal, PartitionFinal, ReadRecord, ReplicaLog};
use crate::history::History;
use crate::os::clock::SimTime;
use crate::os::disk::Disk;
use crate::rocketmq::broker::{self, BrokerContext};
use crate::rocketmq::client::consumer::{self, ConsumerContext, GroupProgress};
use crate::rocketmq::client::final_read::{self, QueueRead, QueueToRead};
use crate::rocketmq::client::producer::{self, ProducerContext};
use crate::rocketmq::namesrv;
use crate::rocketmq::remoting::TopicQueues;
use crate::rocketmq::store::commit_log;
use crate::rocketmq::store::consume_queue::ConsumeQueues;
use crate::rocketmq::store::mapped_file::MappedFileQueue;
use crate::rocketmq::store::message::{self, Checked};
use crate::rocketmq::teller;
use crate::scenario::model::{Settings, Target};
use crate::sim::derive_seed;
use crate::sim::system::{Leadership, Phase, RunError, System};
use crate::sim::timeline::LeadershipChange;
use crate::sim::world::{disk_for, release_freed_memory, World};
use crate::types::{broker_name, BrokerId, Epoch, HostName, Offset, TopicPartition};
use rand::rngs::StdRng;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// How long the final read may take before a queue counts as unreadable.
const FINAL_READ_LIMIT: Duration = Duration::from_secs(60);

/// The master's `brokerId`.
const MASTER: u32 = 0;

/// How often the consume phase looks again whether the group has caught up.
const CONSUME_POLL: Duration = Duration::from_millis(100);

/// How long the consume phase goes on: long enough for a dropped queue's 10 s wait and
/// two rebalances (20 s apart), and for a restarted broker to be routed again.
const CONSUME_LIMIT: Duration = Duration::from_secs(90);

pub struct RocketMq {
    settings: Settings,
    progress: GroupProgress,
    /// Each broker's clean-shutdown flag.
    shutdown: BTreeMap<HostName, Rc<Cell<bool>>>,
    read: Option<Vec<QueueRead>>,
}

/// The masters as the run's fixed view of leadership: one master per group, never
/// moved (no failover without controller mode).
#[derive(Clone)]
pub struct Masters {
    /// Each queue and its group's master.
    queues: Vec<(TopicPartition, HostName)>,
}

impl Leadership for Masters {
    fn version(&self) -> u64 {
        0
    }

    fn sample(&self, now: SimTime) -> Vec<LeadershipChange> {
        self.queues
            .iter()
            .map(|(tp, master)| LeadershipChange {
                time: now,
                tp: tp.clone(),
                leader: Some(BrokerId(MASTER)),
                leader_host: Some(*master),
                leader_epoch: Epoch(0),
                isr: vec![BrokerId(MASTER)],
            })
            .collect()
    }
}

impl System for RocketMq {
    type View = Masters;

    fn build(
        world: &mut World<'_>,
        settings: &Settings,
        seed: u64,
        history: &History,
        facts: &Facts,
    ) -> RocketMq {
        world.add_host(HostName::NameServer, None, namesrv::run);
        let config = &settings.rocketmq;
        let rules = settings.cluster.rocketmq.rules();
        let topics: Vec<TopicQueues> = settings
            .cluster
            .topics
            .iter()
            .map(|t| TopicQueues {
                topic: t.name.clone(),
                queues: t.queues(),
            })
            .collect();
        let mut shutdown = BTreeMap::new();
        for group in 0..settings.cluster.groups {
            let host = HostName::GroupBroker { group, id: MASTER };
            let flag = add_broker(
                world,
                settings,
                seed,
                (host, group),
                (config, rules),
                &topics,
                facts,
            );
            shutdown.insert(host, flag);
        }
        add_producers(world, settings, seed, history);
        let progress = GroupProgress::default();
        add_consumers(world, settings, seed, history, &progress);
        RocketMq {
            settings: settings.clone(),
            progress,
            shutdown,
            read: None,
        }
    }

    fn view(&self) -> Masters {
        Masters {
            queues: self
                .queues()
                .into_iter()
                .map(|q| (q.tp, q.master))
                .collect(),
        }
    }

    fn resolve_role(&mut self, role: &Target, _rng: &mut StdRng) -> Vec<HostName> {
        match role {
            Target::Master(group) => vec![HostName::GroupBroker {
                group: *group,
                id: MASTER,
            }],
            Target::Leader(tp) => self
                .queues()
                .into_iter()
                .filter(|q| q.tp == *tp)
                .map(|q| q.master)
                .collect(),
            // Without slaves there are no followers; no group, no coordinator.
            Target::Followers(_)
            | Target::Follower(_)
            | Target::Coordinator
            | Target::TxnCoordinator => Vec::new(),
            Target::Host(_)
            | Target::List(_)
            | Target::Brokers
            | Target::Crashed
            | Target::RandomBroker => unreachable!("the harness resolves `{role}` itself"),
        }
    }

    fn shutdown(&mut self, host: HostName) -> bool {
        match self.shutdown.get(&host) {
            Some(flag) => {
                tracing::info!(host = %host, "clean shutdown requested");
                flag.set(true);
                true
            }
            None => false,
        }
    }

    /// A send's `sendMsgTimeout`, and as long again for the answer of its last attempt.
    fn give_up_after(&self) -> Duration {
        self.settings.rocketmq.producer.send_msg_timeout * 2
    }

    /// The group consumes until every queue's consumed offset has reached the end its
    /// last pull saw (after the phase began), up to a bound.
    fn consume(&mut self, phase: &mut Phase<'_, '_>) -> Result<Option<GroupFinal>, RunError> {
        let Some(name) = &self.settings.workload.group else {
            return Ok(None);
        };
        let began = phase.elapsed();
        let limit = began + CONSUME_LIMIT;
        let queues: Vec<TopicPartition> = self.queues().into_iter().map(|q| q.tp).collect();
        let caught_up = || {
            let progress = self.progress.borrow();
            queues.iter().all(|tp| {
                progress
                    .get(tp)
                    .is_some_and(|&(consumed, end, at)| at >= began && consumed >= end)
            })
        };
        while !caught_up() {
            if phase.elapsed() >= limit {
                tracing::info!("consume phase: the group did not catch up in time");
                return Ok(Some(GroupFinal {
                    name: name.clone(),
                    caught_up: false,
                }));
            }
            let next = (phase.elapsed() + CONSUME_POLL).min(limit);
            phase.advance(next)?;
        }
        Ok(Some(GroupFinal {
            name: name.clone(),
            caught_up: true,
        }))
    }

    fn final_read(&mut self, world: &mut World<'_>) -> Result<(), RunError> {
        let out: Rc<RefCell<Option<Vec<QueueRead>>>> = Rc::default();
        let queues = self.queues();
        let rules = self.settings.cluster.rocketmq.rules();
        let sink = out.clone();
        world.add_host(HostName::Reader, None, move || {
            let sink = sink.clone();
            let queues = queues.clone();
            async move {
                let read = final_read::final_read(queues, FINAL_READ_LIMIT, rules).await;
                *sink.borrow_mut() = Some(read);
                Ok(())
            }
        });
        let deadline = world.elapsed() + FINAL_READ_LIMIT * 2;
        while out.borrow().is_none() && world.elapsed() < deadline {
            world
                .step()
                .map_err(|e| RunError::Simulation(e.to_string()))?;
        }
        let read = out.borrow_mut().take();
        self.read =
            Some(read.ok_or_else(|| RunError::Simulation("the final read did not finish".into()))?);
        Ok(())
    }

    fn collect(mut self, world: World<'_>, facts: &Facts) -> FinalState {
        let queues = self.queues();
        let running: BTreeMap<HostName, bool> = self
            .shutdown
            .keys()
            .map(|&host| (host, world.is_running(host)))
            .collect();
        let mut disks = world.into_disks();
        let mut logs: BTreeMap<TopicPartition, ReplicaLog> = BTreeMap::new();
        let file_sizes = (
            self.settings.rocketmq.store.mapped_file_size_commit_log,
            self.settings.rocketmq.store.mapped_file_size_consume_queue,
        );
        for (&host, &running) in &running {
            let disk = disks.remove(&host);
            let on_disk = disk
                .as_ref()
                .map(|disk| queues_on_disk(disk, file_sizes))
                .unwrap_or_default();
            for queue in queues.iter().filter(|q| q.master == host) {
                let topic = queue.tp.topic.to_string();
                let records = on_disk
                    .get(&(topic, queue.queue_id))
                    .cloned()
                    .unwrap_or_default();
                logs.insert(queue.tp.clone(), replica_log(records, running));
            }
            drop(disk);
            release_freed_memory();
        }
        let mut reads: BTreeMap<TopicPartition, QueueRead> = self
            .read
            .take()
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.tp.clone(), r))
            .collect();
        let partitions = queues
            .iter()
            .map(|queue| {
                let read = reads.remove(&queue.tp);
                PartitionFinal {
                    tp: queue.tp.clone(),
                    leader: Some(BrokerId(MASTER)),
                    high_watermark: read.as_ref().map_or(Offset(0), |r| r.max_offset),
                    log_start_offset: read.as_ref().map_or(Offset(0), |r| r.min_offset),
                    last_stable_offset: None,
                    beyond_lso: None,
                    complete: read.as_ref().is_some_and(|r| r.complete),
                    read: read.map(|r| r.records).unwrap_or_default(),
                    replicas: logs.remove(&queue.tp).into_iter().collect(),
                }
            })
            .collect();
        FinalState {
            partitions,
            outputs: Vec::new(),
            facts: facts.take(),
            group: None,
        }
    }

    fn teller(facts: &FactLog) -> impl Teller + '_ {
        teller::Teller::new(facts)
    }
}

impl RocketMq {
    /// The workload topic's queues, group by group: the partitions the checkers see.
    fn queues(&self) -> Vec<QueueToRead> {
        let cluster = &self.settings.cluster;
        let topic = &self.settings.workload.topic;
        let queues = workload_queues(&self.settings);
        (0..cluster.groups)
            .flat_map(|group| {
                (0..queues).map(move |q| QueueToRead {
                    tp: TopicPartition::new(topic.as_str(), group * queues + q),
                    master: HostName::GroupBroker { group, id: MASTER },
                    queue_id: q as i32,
                })
            })
            .collect()
    }
}

fn add_broker(
    world: &mut World<'_>,
    settings: &Settings,
    seed: u64,
    (host, group): (HostName, u32),
    (config, rules): (&RocketMqConfig, Rules),
    topics: &[TopicQueues],
    facts: &Facts,
) -> Rc<Cell<bool>> {
    let disk = disk_for(settings, seed, host);
    let shutdown = Rc::new(Cell::new(false));
    let ctx = BrokerContext {
        host,
        broker_name: broker_name(group),
        broker_id: MASTER,
        store: config.store.clone(),
        broker: config.broker.clone(),
        rules,
        topics: topics.to_vec(),
        disk: disk.clone(),
        shutdown: shutdown.clone(),
        facts: facts.clone(),
        bugs: settings.bugs,
    };
    world.add_host(host, Some(disk), move || {
        ctx.shutdown.set(false);
        broker::run(ctx.clone())
    });
    shutdown
}

/// The workload topic's queues on each broker group (queue `q` of group `g` is partition
/// `g * queues + q`).
fn workload_queues(settings: &Settings) -> u32 {
    settings
        .cluster
        .topics
        .iter()
        .find(|t| t.name == settings.workload.topic)
        .map_or(0, |t| t.queues())
}

fn add_producers(world: &mut World<'_>, settings: &Settings, seed: u64, history: &History) {
    let workload = &settings.workload;
    let queues = workload_queues(settings);
    let budget = SendBudget::new(workload.producers, workload.messages);
    for n in 1..=workload.producers {
        let ctx = ProducerContext {
            index: n,
            config: settings.rocketmq.producer.clone(),
            topic: workload.topic.clone(),
            queues,
            arrivals: crate::config::workload::ArrivalProcess::new(
                workload.arrivals,
                workload.rate,
                derive_seed(seed, &format!("producer-{n} arrivals")),
            ),
            keys: workload.keys,
            value_bytes: workload.value_bytes,
            on_error: workload.on_error,
            history: history.clone(),
            budget: budget.clone(),
            stop_at: SimTime::after_start(settings.duration),
            seed: derive_seed(seed, &format!("producer-{n}")),
            bugs: settings.bugs,
            rules: settings.cluster.rocketmq.rules(),
        };
        world.add_host(HostName::Producer(n), None, move || {
            producer::run_producer(ctx.clone())
        });
    }
}

fn add_consumers(
    world: &mut World<'_>,
    settings: &Settings,
    seed: u64,
    history: &History,
    progress: &GroupProgress,
) {
    let workload = &settings.workload;
    let Some(group) = &workload.group else {
        return;
    };
    let queues = workload_queues(settings);
    for n in 1..=workload.consumers {
        let ctx = ConsumerContext {
            index: n,
            group: group.clone(),
            topic: workload.topic.clone(),
            queues,
            processing: workload.processing,
            config: settings.rocketmq.consumer.clone(),
            history: history.clone(),
            progress: progress.clone(),
            rules: settings.cluster.rocketmq.rules(),
            seed: derive_seed(seed, &format!("consumer-{n}")),
        };
        world.add_host(HostName::Consumer(n), None, move || {
            consumer::run_consumer(ctx.clone())
        });
    }
}

/// Each queue's messages as the disk holds them now: its ConsumeQueue's valid entries,
/// each read from the CommitLog (an entry whose record is not there is left out).
fn queues_on_disk(
    disk: &Disk,
    (commit_log_size, queue_size): (u64, u64),
) -> BTreeMap<(String, i32), Vec<ReadRecord>> {
    let mut out = BTreeMap::new();
    let Ok(log) = MappedFileQueue::load(disk.clone(), commit_log::DIR, commit_log_size, true)
    else {
        return out;
    };
    let Ok(mut queues) = ConsumeQueues::load(disk.clone(), queue_size, true) else {
        return out;
    };
    for (key, queue) in queues.iter_mut() {
        if queue.recover().is_err() {
            continue;
        }
        let mut records = Vec::new();
        let end = queue.max_offset_in_queue();
        for index in 0..end {
            let Ok(Some(entry)) = queue.entry(index) else {
                continue;
            };
            let Ok(bytes) = log.read(entry.commit_log_offset as u64, entry.size.max(0) as usize)
            else {
                continue;
            };
            if let Checked::Message(_) = message::check(&bytes, false) {
                records.push(ReadRecord::new(Offset(index), &message::body(&bytes)));
            }
        }
        out.insert(key.clone(), records);
    }
    out
}

fn replica_log(mut records: Vec<ReadRecord>, running: bool) -> ReplicaLog {
    records.shrink_to_fit();
    ReplicaLog {
        broker: BrokerId(MASTER),
        in_isr: true,
        running,
        log_start_offset: records.first().map_or(Offset(0), |r| r.offset),
        log_end_offset: records.last().map_or(Offset(0), |r| r.offset.next()),
        records,
        epochs: Vec::new(),
    }
}
