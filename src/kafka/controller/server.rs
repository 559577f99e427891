//! The controller process: the async shell around `ControllerState`.
//!
//! It decides nothing. It feeds requests and a liveness tick into the state machine,
//! traces every change, persists the snapshot, and only then shows the new image to
//! brokers (heartbeat long polls, `Metadata`) and to the world (`MetadataView`), as the
//! KRaft controller exposes only committed metadata. If the snapshot cannot be written
//! the controller halts, as KRaft's does on a metadata log write failure: `run` returns
//! and the connections it leaves behind never answer again.

use crate::config::bugs::Bugs;
use crate::config::kafka::{BrokerConfig, TopicConfig};
use crate::history::facts::kafka::{ElectedFrom, Fact};
use crate::history::facts::Facts;
use crate::kafka::controller::election::Election;
use crate::kafka::controller::state::{Change, ControllerState, Snapshot};
use crate::kafka::controller::store;
use crate::kafka::protocol::frame::serve;
use crate::kafka::protocol::messages::{
    ClusterMetadata, ErrorCode, FetchResponse, FetchedPartition, OffsetsForLeaderEpochResponse,
    ProduceResponse, Request, Response, HEARTBEAT_LONG_POLL,
};
use crate::kafka::types::EpochEndOffset;
use crate::kafka::types::{Brokers, ProducerId};
use crate::os::clock;
use crate::os::disk::Disk;
use crate::types::{BrokerId, Epoch, Offset, TopicPartition};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::{watch, Mutex};

/// How often the liveness timer looks for expired broker sessions.
pub const LIVENESS_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Everything the world gives the controller process when it starts it.
pub struct ControllerContext {
    pub disk: Disk,
    pub config: BrokerConfig,
    pub brokers: u32,
    /// Every partition with its placement and its topic's configuration.
    pub topics: Vec<(TopicPartition, Vec<BrokerId>, TopicConfig)>,
    pub view: MetadataView,
    /// Where committed elections and ISR changes are recorded.
    pub facts: Facts,
    /// Bugs a mutation test injected (none in any real run).
    pub bugs: Bugs,
}

/// The controller's latest committed metadata, readable by the world (to resolve
/// `leader:` fault targets). It outlives controller restarts.
#[derive(Clone, Default)]
pub struct MetadataView(Rc<RefCell<ClusterMetadata>>);

impl MetadataView {
    pub fn get(&self) -> ClusterMetadata {
        self.0.borrow().clone()
    }

    /// The metadata's version: it changes with every committed change.
    pub fn version(&self) -> u64 {
        self.0.borrow().version
    }

    /// Look at the metadata without copying it.
    pub fn with<T>(&self, f: impl FnOnce(&ClusterMetadata) -> T) -> T {
        f(&self.0.borrow())
    }

    pub fn set(&self, metadata: ClusterMetadata) {
        *self.0.borrow_mut() = metadata;
    }
}

struct Controller {
    state: RefCell<ControllerState>,
    disk: Disk,
    /// One save at a time; a save writes the newest state, so waiting saves coalesce.
    save_lock: Mutex<()>,
    /// The last snapshot made durable: what brokers and the world are shown.
    committed: RefCell<Snapshot>,
    /// The committed version, for heartbeat long polls.
    committed_version: watch::Sender<u64>,
    view: MetadataView,
    facts: Facts,
    /// Set once a save failed: `run` returns and no request is answered any more.
    halted: watch::Sender<bool>,
}

/// Run the controller until it halts. Returns `Ok` when it stopped on a disk error
/// (a snapshot it cannot write or read: the process exits, as a broker whose log dir
/// went offline does), `Err` only if its port cannot be bound.
pub async fn run(ctx: ControllerContext) -> turmoil::Result {
    let started = clock::now();
    let state = match store::load(&ctx.disk) {
        Ok(Some(snapshot)) => {
            tracing::info!(
                version = snapshot.metadata.version,
                "controller loaded its metadata"
            );
            ControllerState::restore(&ctx.config, ctx.brokers, &ctx.topics, snapshot, started)
        }
        Ok(None) => {
            let state = ControllerState::new(&ctx.config, ctx.brokers, &ctx.topics, started);
            if let Err(error) = store::save(&ctx.disk, &state.snapshot()).await {
                tracing::error!(error = %error, "controller halts: cannot write its metadata");
                return Ok(());
            }
            state
        }
        Err(error) => {
            // Starting from nothing would hand out producer ids and epochs again.
            tracing::error!(error = %error, "controller cannot start: its metadata is unreadable");
            return Ok(());
        }
    };
    let mut state = state;
    state.inject(ctx.bugs);
    let snapshot = state.snapshot();
    ctx.view.set(snapshot.metadata.clone());
    let (committed_version, _) = watch::channel(snapshot.metadata.version);
    let (halted, mut halt) = watch::channel(false);
    let controller = Rc::new(Controller {
        state: RefCell::new(state),
        disk: ctx.disk,
        save_lock: Mutex::new(()),
        committed: RefCell::new(snapshot),
        committed_version,
        view: ctx.view,
        facts: ctx.facts,
        halted,
    });
    let handler = {
        let controller = controller.clone();
        move |request, _peer| controller.clone().handle(request)
    };
    tokio::select! {
        biased;
        _ = halt.wait_for(|&halted| halted) => Ok(()),
        served = serve(handler) => Err(served.err().map(|e| e.to_string()).unwrap_or_default().into()),
        () = controller.clone().liveness() => Ok(()),
    }
}

impl Controller {
    async fn liveness(self: Rc<Self>) {
        loop {
            tokio::time::sleep(LIVENESS_CHECK_INTERVAL).await;
            let changes = self.state.borrow_mut().fence_expired(clock::now());
            self.commit(changes).await;
        }
    }

    async fn handle(self: Rc<Self>, request: Request) -> Response {
        if *self.halted.borrow() {
            return std::future::pending().await;
        }
        let response = self.answer(request).await;
        if *self.halted.borrow() {
            return std::future::pending().await;
        }
        response
    }

    async fn answer(&self, request: Request) -> Response {
        match request {
            Request::RegisterBroker {
                broker,
                incarnation,
                clean_shutdown,
            } => {
                let outcome = self.state.borrow_mut().register(
                    broker,
                    incarnation,
                    clean_shutdown,
                    clock::now(),
                );
                match outcome {
                    Ok(changes) => {
                        self.commit(changes).await;
                        Response::RegisterBroker { error: None }
                    }
                    Err(error) => Response::RegisterBroker { error: Some(error) },
                }
            }
            Request::BrokerHeartbeat {
                broker,
                incarnation,
                known_version,
            } => {
                let outcome = self
                    .state
                    .borrow_mut()
                    .heartbeat(broker, incarnation, clock::now());
                self.commit(outcome.changes).await;
                self.long_poll(known_version).await;
                let committed = self.committed.borrow();
                let metadata = (committed.metadata.version > known_version)
                    .then(|| committed.metadata.clone());
                Response::BrokerHeartbeat {
                    fenced: self.state.borrow().is_fenced(broker, incarnation),
                    metadata,
                }
            }
            Request::AlterPartition(alter) => {
                let outcome = self.state.borrow_mut().alter_partition(&alter);
                match outcome {
                    Ok((state, changes)) => {
                        self.commit(changes).await;
                        Response::AlterPartition {
                            error: None,
                            state: Some(state),
                        }
                    }
                    Err(error) => {
                        tracing::info!(
                            tp = %alter.tp,
                            broker = %alter.broker,
                            error = %error,
                            "AlterPartition rejected"
                        );
                        let state = self
                            .committed
                            .borrow()
                            .metadata
                            .partitions
                            .get(&alter.tp)
                            .cloned();
                        Response::AlterPartition {
                            error: Some(error),
                            state,
                        }
                    }
                }
            }
            Request::ControlledShutdown {
                broker,
                incarnation,
            } => {
                let outcome = self
                    .state
                    .borrow_mut()
                    .controlled_shutdown(broker, incarnation);
                match outcome {
                    Ok(outcome) => {
                        tracing::info!(broker = %broker, remaining = outcome.remaining, "controlled shutdown");
                        self.commit(outcome.changes).await;
                        Response::ControlledShutdown {
                            error: None,
                            remaining: outcome.remaining,
                        }
                    }
                    Err(error) => Response::ControlledShutdown {
                        error: Some(error),
                        remaining: 0,
                    },
                }
            }
            Request::AllocateProducerId => {
                let producer_id = self.state.borrow_mut().allocate_producer_id();
                // Durable before it is answered, so an id is never handed out twice,
                // even across controller restarts.
                self.save().await;
                Response::AllocateProducerId { producer_id }
            }
            Request::Metadata => Response::Metadata(self.committed.borrow().metadata.clone()),
            request => not_served_here(request),
        }
    }

    /// Hold a heartbeat until the committed version passes `known_version`, at most
    /// `HEARTBEAT_LONG_POLL`.
    async fn long_poll(&self, known_version: u64) {
        let mut version = self.committed_version.subscribe();
        // Timing out is the normal outcome when nothing changed.
        let _ = tokio::time::timeout(
            HEARTBEAT_LONG_POLL,
            version.wait_for(|&v| v > known_version),
        )
        .await;
    }

    /// Trace `changes` and, if there are any, make the state durable and visible.
    async fn commit(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        for change in &changes {
            trace_change(change);
        }
        self.save().await;
        if !*self.halted.borrow() {
            for change in &changes {
                record_fact(&self.facts, change);
            }
        }
    }

    /// Persist the newest state, then publish it. A failed save halts the controller.
    async fn save(&self) {
        let _guard = self.save_lock.lock().await;
        if *self.halted.borrow() {
            return;
        }
        let snapshot = self.state.borrow().snapshot();
        if snapshot == *self.committed.borrow() {
            return;
        }
        if let Err(error) = store::save(&self.disk, &snapshot).await {
            tracing::error!(error = %error, "controller halts: cannot write its metadata");
            self.halted.send_replace(true);
            return;
        }
        let version = snapshot.metadata.version;
        self.view.set(snapshot.metadata.clone());
        *self.committed.borrow_mut() = snapshot;
        self.committed_version.send_replace(version);
    }
}

/// Data-plane requests sent to the controller by mistake: refused, as a broker that is
/// not the leader would.
fn not_served_here(request: Request) -> Response {
    if let Some(refusal) = request.group_refusal(ErrorCode::NotCoordinator) {
        return refusal;
    }
    let error = Some(ErrorCode::NotLeaderOrFollower);
    match request {
        Request::Produce(_) => Response::Produce(ProduceResponse {
            error,
            base_offset: Offset::NONE,
            log_start_offset: Offset::NONE,
        }),
        Request::Fetch(fetch) => Response::Fetch(FetchResponse {
            error: None,
            session_id: 0,
            partitions: fetch
                .partitions
                .into_iter()
                .map(|p| FetchedPartition::error(p.tp, ErrorCode::NotLeaderOrFollower))
                .collect(),
        }),
        Request::OffsetsForLeaderEpoch(_) => {
            Response::OffsetsForLeaderEpoch(OffsetsForLeaderEpochResponse {
                error,
                end: EpochEndOffset {
                    epoch: Epoch::NONE,
                    end_offset: Offset::NONE,
                },
            })
        }
        Request::ListOffsets { .. } => Response::ListOffsets {
            error,
            offset: Offset::NONE,
        },
        _ => Response::InitProducerId {
            error,
            producer_id: ProducerId::NONE,
            producer_epoch: -1,
        },
    }
}

/// The cluster facts a committed change makes: an election, an ISR shrink or expansion.
fn record_fact(facts: &Facts, change: &Change) {
    let Change::Partition {
        tp,
        election,
        state,
        previous_isr,
    } = change
    else {
        return;
    };
    let from = match election {
        Some(Election::Clean(_)) => Some(ElectedFrom::Isr),
        Some(Election::Eligible(_)) => Some(ElectedFrom::Elr),
        Some(Election::LastKnownLeader(_)) => Some(ElectedFrom::LastKnownLeader),
        Some(Election::Unclean(_)) => Some(ElectedFrom::OutOfSync),
        Some(Election::Offline) => {
            facts.record(Fact::NoLeader { tp: tp.clone() });
            None
        }
        None => None,
    };
    if let (Some(from), Some(leader)) = (from, election.and_then(Election::leader)) {
        facts.record(Fact::Election {
            tp: tp.clone(),
            leader,
            epoch: state.leader_epoch,
            from,
        });
    }
    if state.isr.len() < previous_isr.len() {
        facts.record(Fact::IsrShrink { tp: tp.clone() });
    } else if state.isr.len() > previous_isr.len() {
        facts.record(Fact::IsrExpand { tp: tp.clone() });
    }
}

/// One `info` event per change, with stable fields only (names and numbers, no
/// addresses), because the run's trace hash is built from these events.
fn trace_change(change: &Change) {
    match change {
        Change::Registered {
            broker,
            incarnation,
        } => {
            tracing::info!(broker = %broker, incarnation = %incarnation, "broker registered")
        }
        Change::Fenced { broker, cause } => {
            tracing::info!(broker = %broker, cause = cause.name(), "broker fenced")
        }
        Change::Unfenced { broker } => tracing::info!(broker = %broker, "broker unfenced"),
        Change::Partition {
            tp,
            election,
            state,
            ..
        } => {
            let leader = state
                .leader
                .map_or_else(|| "none".to_string(), |l| l.to_string());
            // The ELR shows only where it exists, so runs without it trace as before.
            let isr = if state.elr.is_empty() {
                Brokers(&state.isr).to_string()
            } else {
                format!("{} elr={}", Brokers(&state.isr), Brokers(&state.elr))
            };
            match election {
                Some(election) => tracing::info!(
                    tp = %tp,
                    election = election.kind(),
                    leader = %leader,
                    leader_epoch = state.leader_epoch.0,
                    isr = %isr,
                    partition_epoch = %state.partition_epoch,
                    "leader election"
                ),
                None => tracing::info!(
                    tp = %tp,
                    leader = %leader,
                    leader_epoch = state.leader_epoch.0,
                    isr = %isr,
                    partition_epoch = %state.partition_epoch,
                    "ISR changed"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::protocol::messages::PartitionState;
    use crate::kafka::types::PartitionEpoch;

    fn change(election: Option<Election>, previous_isr: &[u32], isr: &[u32]) -> Change {
        let ids = |ids: &[u32]| ids.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
        Change::Partition {
            tp: TopicPartition::new("orders", 0),
            election,
            state: PartitionState {
                replicas: ids(&[1, 2, 3]),
                leader: Some(BrokerId(isr[0])),
                leader_epoch: Epoch(1),
                partition_epoch: PartitionEpoch(1),
                isr: ids(isr),
                elr: Vec::new(),
                last_known_leader: None,
            },
            previous_isr: ids(previous_isr),
        }
    }

    fn facts_of(changes: &[Change]) -> Vec<Fact> {
        let facts = Facts::default();
        for change in changes {
            record_fact(&facts, change);
        }
        facts
            .take()
            .events()
            .iter()
            .filter_map(|e| e.fact.kafka().cloned())
            .collect()
    }

    #[test]
    fn committed_changes_become_elections_shrinks_and_expansions() {
        let tp = TopicPartition::new("orders", 0);
        let facts = facts_of(&[
            change(Some(Election::Unclean(BrokerId(3))), &[1], &[3]),
            change(Some(Election::Clean(BrokerId(2))), &[1, 2], &[2]),
            change(None, &[2], &[2, 3]),
            change(Some(Election::Offline), &[2, 3], &[2, 3]),
            change(Some(Election::Eligible(BrokerId(1))), &[], &[1]),
            change(Some(Election::LastKnownLeader(BrokerId(2))), &[], &[2]),
        ]);
        let elected = |leader: u32, from: ElectedFrom| Fact::Election {
            tp: tp.clone(),
            leader: BrokerId(leader),
            epoch: Epoch(1),
            from,
        };
        assert_eq!(
            facts,
            [
                elected(3, ElectedFrom::OutOfSync),
                elected(2, ElectedFrom::Isr),
                Fact::IsrShrink { tp: tp.clone() },
                Fact::IsrExpand { tp: tp.clone() },
                Fact::NoLeader { tp: tp.clone() },
                elected(1, ElectedFrom::Elr),
                Fact::IsrExpand { tp: tp.clone() },
                elected(2, ElectedFrom::LastKnownLeader),
                Fact::IsrExpand { tp },
            ]
        );
    }
}
