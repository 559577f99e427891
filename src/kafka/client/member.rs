//! A consumer group member, as an application runs Kafka's classic consumer: a poll loop
//! that joins the group when it must, takes at most `max.poll.records` fetched records,
//! processes each for `processing`, and commits as the workload's `commit` says; and a
//! heartbeat thread (KIP-62) that keeps the member's session, finds the coordinator again
//! when it moves, and notices a rebalance, which the next poll acts on.
//!
//! The protocol's decisions are [`Membership`]'s; this sends what it asks and records what
//! the application did: where it resumed each partition, each record processed, each
//! commit acknowledged. As Kafka's consumer:
//! - the eager protocol: a rebalance revokes every partition, and each assigned one
//!   resumes at the group's committed offset (validated against its leader epoch, KIP-320)
//!   or, with none, where `auto.offset.reset` puts it;
//! - `commit = "auto"` commits the positions of the records already polled from within the
//!   poll every `auto.commit.interval.ms` with `commitAsync` (the poll goes on; a retriable
//!   failure brings the next one forward to `retry.backoff.ms`), and before rejoining
//!   (synchronously); the two `commitSync` modes commit a poll's positions before or after
//!   processing its records, retrying only the retriable errors; a commit that fails
//!   otherwise is the application's `CommitFailedException`: before processing, the
//!   records are not processed (the exception skips them); after, they stay processed
//!   and uncommitted;
//! - a member that does not poll within `max.poll.interval.ms` leaves the group from its
//!   heartbeat thread and joins afresh at its next poll.
//!
//! With `[workload] output` the member is a stream processor (consume, transform,
//! produce): each record it processes is sent to the output topic, as a record carrying
//! the input's id. `commit = "transactional"` is Kafka's exactly once: each poll's outputs
//! and its consumed offsets go in one transaction (`sendOffsetsToTransaction`, then
//! `commitTransaction`); `"after-processing"` is at least once: the outputs are flushed,
//! then the offsets committed. What did not commit (an aborted transaction, an output
//! that failed) is processed again from the group's committed offsets, as Kafka Streams
//! does after a task's error.

use super::consumer::{self, Consumer, ConsumerContext, GroupSpec, Position};
use super::fetch::FetchPosition;
use super::membership::{Change, Membership, Phase};
use super::producer::OutputProducer;
use crate::config::kafka::{Commit, OffsetReset};
use crate::history::final_state::ReadRecord;
use crate::history::{Op, TxnOutcome};
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    CommittedOffset, ErrorCode, OffsetCommit, OffsetSpec, Request, Response,
};
use crate::os::clock::{self, SimTime};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a poll waits for records before it loops (the application's poll timeout).
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// How long `commitSync` and the offset lookups retry retriable errors
/// (`default.api.timeout.ms`).
const API_TIMEOUT: Duration = Duration::from_secs(60);

/// Connection setup limit, as for the consumer's fetch connections.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

struct Member {
    consumer: Rc<Consumer>,
    spec: GroupSpec,
    membership: RefCell<Membership>,
    /// Each owned partition's position after the last record polled, with that record's
    /// leader epoch: what a commit sends.
    consumed: RefCell<BTreeMap<TopicPartition, CommittedOffset>>,
    /// An answer that means rejoin, from the heartbeat thread or a commit: the next poll
    /// acts on it.
    rejoin: Cell<Option<ErrorCode>>,
    /// Assigned partitions whose committed offsets could not be fetched yet: the next
    /// poll asks again (Kafka's `refreshCommittedOffsetsIfNeeded`).
    unplaced: RefCell<Vec<TopicPartition>>,
    /// Where the next poll starts taking records, so that no partition starves.
    next_first: Cell<usize>,
    last_poll: Cell<SimTime>,
    /// When the poll next sends an auto commit (Kafka's `nextAutoCommitTimer`).
    next_auto_commit: Cell<SimTime>,
    /// Partitions placed so far, to tell a placement from the one before.
    placements: Cell<u64>,
    /// Each subscribed topic's partition count, for the leader's assignment.
    partitions: BTreeMap<String, u32>,
    /// A stream processor's producer of outputs.
    output: Option<OutputProducer>,
}

impl Member {
    fn ctx(&self) -> &ConsumerContext {
        &self.consumer.ctx
    }

    fn record(&self, op: Op) {
        self.ctx().history.record(&self.consumer.process, op);
    }

    /// An answer to a request sent in `generation` says rejoin: the next poll does, unless
    /// the member has moved on from that generation since (Kafka compares the generation
    /// the request was sent in).
    fn request_rejoin(&self, error: ErrorCode, generation: i32) {
        let current = self.membership.borrow().identity().1;
        if generation == current && self.rejoin.get().is_none() {
            tracing::info!(consumer = self.ctx().index, %error, "rejoin needed");
            self.rejoin.set(Some(error));
        }
    }

    /// The partitions were revoked: stop fetching them and forget their positions (and
    /// their progress: the next owner reports its own).
    fn revoke(&self, revoked: &[TopicPartition]) {
        self.forget(revoked);
        self.unplaced
            .borrow_mut()
            .retain(|tp| !revoked.contains(tp));
        tracing::info!(
            consumer = self.ctx().index,
            partitions = revoked.len(),
            "partitions revoked"
        );
    }
}

impl Member {
    /// Stop fetching `partitions` and forget their positions and progress.
    fn forget(&self, partitions: &[TopicPartition]) {
        let mut positions = self.consumer.positions.borrow_mut();
        let mut consumed = self.consumed.borrow_mut();
        let mut progress = self.spec.progress.borrow_mut();
        for tp in partitions {
            positions.remove(tp);
            consumed.remove(tp);
            progress.remove(tp);
        }
    }
}

/// A group member until its host stops.
pub async fn run_member(ctx: ConsumerContext) -> turmoil::Result {
    let Some(spec) = ctx.group.clone() else {
        return consumer::run_consumer(ctx).await;
    };
    tracing::info!(consumer = ctx.index, group = %spec.name, "group member started");
    let config = &ctx.config;
    let membership = Membership::new(
        &spec.name,
        &HostName::Consumer(ctx.index).to_string(),
        vec![ctx.topic.clone()],
        config.session_timeout,
        config.max_poll_interval,
        config.heartbeat_interval,
    );
    let partitions = BTreeMap::from([(ctx.topic.clone(), ctx.partitions)]);
    let first_auto_commit = clock::now() + config.auto_commit_interval;
    let output = spec.output.as_ref().map(OutputProducer::start);
    let (consumer, tasks) = consumer::start(ctx, BTreeMap::new());
    let member = Rc::new(Member {
        consumer,
        spec,
        membership: RefCell::new(membership),
        consumed: RefCell::default(),
        rejoin: Cell::new(None),
        unplaced: RefCell::default(),
        next_first: Cell::new(0),
        last_poll: Cell::new(clock::now()),
        next_auto_commit: Cell::new(first_auto_commit),
        placements: Cell::new(0),
        partitions,
        output,
    });
    if let Some(output) = member.output.as_ref().filter(|o| o.transactional()) {
        output.init_transactions().await;
    }
    let (poll_link, poll_task) = Channel::open(&member);
    let (heartbeat_link, heartbeat_task) = Channel::open(&member);
    let heartbeat = tokio::task::spawn_local(heartbeat_thread(member.clone(), heartbeat_link));
    poll_loop(member, poll_link).await;
    heartbeat.await.map_err(|e| e.to_string())?;
    for task in [poll_task, heartbeat_task].into_iter().chain(tasks) {
        task.await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One connection to whichever broker the member talks to now.
#[derive(Default)]
struct Link {
    connection: Option<Connection>,
}

impl Link {
    async fn call(
        &mut self,
        broker: BrokerId,
        request: &Request,
        timeout: Duration,
    ) -> Option<Response> {
        let host = HostName::Broker(broker.0);
        let usable = self
            .connection
            .as_ref()
            .is_some_and(|c| c.host() == host && !c.is_broken());
        if !usable {
            self.connection = Connection::connect(host, CONNECT_TIMEOUT).await.ok();
        }
        self.connection.as_mut()?.call(request, timeout).await.ok()
    }
}

/// A thread's connection as Kafka's consumer has it (one `NetworkClient`): requests go out
/// in the order they are made, one at a time, each answered before the next is sent; a
/// request may be queued without waiting for its answer (`commitAsync`). A task owns the
/// [`Link`] and works through the queue.
struct Channel {
    calls: mpsc::UnboundedSender<Call>,
}

struct Call {
    broker: BrokerId,
    request: Request,
    timeout: Duration,
    then: Then,
}

/// What happens with a call's answer.
enum Then {
    Reply(oneshot::Sender<Option<Response>>),
    /// An auto commit's answer, taken as Kafka's callback takes it.
    AutoCommitted {
        offsets: BTreeMap<TopicPartition, CommittedOffset>,
        generation: i32,
    },
}

impl Channel {
    fn open(m: &Rc<Member>) -> (Channel, tokio::task::JoinHandle<()>) {
        let (calls, mut queue) = mpsc::unbounded_channel::<Call>();
        let m = m.clone();
        let task = tokio::task::spawn_local(async move {
            let mut link = Link::default();
            while let Some(call) = queue.recv().await {
                let answer = link.call(call.broker, &call.request, call.timeout).await;
                match call.then {
                    Then::Reply(reply) => {
                        let _ = reply.send(answer);
                    }
                    Then::AutoCommitted {
                        offsets,
                        generation,
                    } => {
                        if commit_answered(&m, &offsets, generation, answer)
                            == CommitOutcome::Retriable
                        {
                            let backoff = m.ctx().config.retry_backoff;
                            m.next_auto_commit.set(clock::now() + backoff);
                        }
                    }
                }
            }
        });
        (Channel { calls }, task)
    }

    /// Send `request` after whatever is queued, and wait for its answer.
    async fn call(
        &self,
        broker: BrokerId,
        request: &Request,
        timeout: Duration,
    ) -> Option<Response> {
        let (reply, answer) = oneshot::channel();
        self.queue(broker, request.clone(), timeout, Then::Reply(reply));
        answer.await.ok().flatten()
    }

    fn queue(&self, broker: BrokerId, request: Request, timeout: Duration, then: Then) {
        let call = Call {
            broker,
            request,
            timeout,
            then,
        };
        // The task lives as long as the member's host does.
        let _ = self.calls.send(call);
    }
}

/// The application's loop: poll, process, commit.
async fn poll_loop(m: Rc<Member>, link: Channel) {
    let config = m.ctx().config.clone();
    loop {
        m.last_poll.set(clock::now());
        ensure_active(&m, &link).await;
        let unplaced = std::mem::take(&mut *m.unplaced.borrow_mut());
        if !unplaced.is_empty() {
            install(&m, &link, unplaced).await;
        }
        if m.spec.commit == Commit::Auto && clock::now() >= m.next_auto_commit.get() {
            m.next_auto_commit
                .set(clock::now() + config.auto_commit_interval);
            commit_async(&m, &link);
        }
        reset_positions(&m).await;
        let polled = take_records(&m, config.max_poll_records as usize);
        if polled.is_empty() {
            report_progress(&m);
            let _ = tokio::time::timeout(POLL_TIMEOUT, m.consumer.fetched.notified()).await;
            continue;
        }
        if m.spec.commit == Commit::BeforeProcessing && !commit_sync(&m, &link).await {
            // The application's commitSync threw: its records are not processed.
            continue;
        }
        if let Some(output) = &m.output {
            process_to_output(&m, &link, output, polled).await;
            report_progress(&m);
            continue;
        }
        for (tp, record) in polled {
            process(&m, tp, &record).await;
        }
        if m.spec.commit == Commit::AfterProcessing {
            commit_sync(&m, &link).await;
        }
        report_progress(&m);
    }
}

/// The application's work on one record: `processing` long, then recorded.
async fn process(m: &Member, tp: TopicPartition, record: &ReadRecord) {
    if !m.spec.processing.is_zero() {
        tokio::time::sleep(m.spec.processing).await;
    }
    m.record(Op::Processed {
        consumer: m.ctx().index,
        tp,
        offset: record.offset,
        id: record.id,
    });
}

/// A processor's poll: each record processed and its output sent; then the outputs
/// committed with the offsets as `commit` says (auto: the poll's auto commit, whenever it
/// comes). What did not commit is processed again from the committed offsets.
async fn process_to_output(
    m: &Member,
    link: &Channel,
    output: &OutputProducer,
    polled: Vec<(TopicPartition, ReadRecord)>,
) {
    let exactly_once = m.spec.commit == Commit::Transactional;
    if exactly_once {
        output.begin();
    }
    for (tp, record) in polled {
        process(m, tp, &record).await;
        // A record without an id (corrupt) has no output to carry it.
        if let Some(id) = record.id {
            output.send(id);
        }
    }
    let committed_all = match m.spec.commit {
        Commit::Transactional => {
            let offsets = to_commit(m);
            let commit = offset_commit(m, &offsets, m.ctx().config.group_metadata_in_transactions);
            let (outcome, error) = output.commit_with_offsets(commit).await;
            if outcome == TxnOutcome::Committed {
                committed(m, &offsets);
            } else {
                tracing::info!(
                    consumer = m.ctx().index,
                    ?outcome,
                    ?error,
                    "transaction not committed: processing again from the committed offsets"
                );
            }
            outcome == TxnOutcome::Committed
        }
        Commit::AfterProcessing => {
            let written = output.flush().await;
            if !written {
                tracing::info!(
                    consumer = m.ctx().index,
                    "an output failed: processing again from the committed offsets"
                );
            }
            written && commit_sync(m, link).await
        }
        Commit::Auto | Commit::BeforeProcessing => true,
    };
    if !committed_all {
        seek_to_committed(m, link).await;
    }
}

/// Kafka Streams after a task's error: every owned partition resumes at the group's
/// committed offset.
async fn seek_to_committed(m: &Member, link: &Channel) {
    let owned: Vec<TopicPartition> = m.consumer.positions.borrow().keys().cloned().collect();
    m.forget(&owned);
    install(m, link, owned).await;
}

/// Place every position waiting for `auto.offset.reset`: one with no committed offset,
/// or one found out of range, looked up with ListOffsets at the leader (Kafka's
/// `resetPositionsIfNeeded`, from within poll); one whose lookup fails waits for the next
/// poll.
async fn reset_positions(m: &Member) {
    let pending: Vec<(TopicPartition, Offset)> = m
        .consumer
        .positions
        .borrow()
        .iter()
        .filter_map(|(tp, p)| Some((tp.clone(), p.reset_from?)))
        .collect();
    let spec = match m.ctx().config.auto_offset_reset {
        OffsetReset::Earliest => OffsetSpec::Earliest,
        _ => OffsetSpec::Latest,
    };
    let index = m.ctx().index;
    for (tp, from) in pending {
        let Some(to) = list_offset(m, &tp, spec).await else {
            continue;
        };
        let mut positions = m.consumer.positions.borrow_mut();
        let Some(position) = positions
            .get_mut(&tp)
            .filter(|p| p.reset_from == Some(from))
        else {
            continue;
        };
        position.fetch = FetchPosition::new(to);
        position.reset_from = None;
        drop(positions);
        let reset = m.ctx().config.auto_offset_reset.name();
        if from == Offset::NONE {
            tracing::info!(consumer = index, %tp, offset = to.0, reset, "no committed offset: starting where auto.offset.reset puts it");
            m.record(Op::Resume {
                consumer: index,
                tp: tp.clone(),
                offset: to,
                committed: false,
            });
        } else {
            tracing::info!(consumer = index, %tp, from = from.0, to = to.0, reset, "position reset");
            m.record(Op::Reset {
                consumer: index,
                tp: tp.clone(),
                from,
                to,
            });
        }
        m.consumed.borrow_mut().insert(
            tp,
            CommittedOffset {
                offset: to,
                leader_epoch: Epoch::NONE,
            },
        );
    }
    m.consumer.wake_fetchers();
}

/// At most `max` fetched records of the owned partitions, in partition order; each
/// partition's consumed position moves past them.
fn take_records(m: &Member, max: usize) -> Vec<(TopicPartition, ReadRecord)> {
    let mut out = Vec::new();
    let mut positions = m.consumer.positions.borrow_mut();
    let mut consumed = m.consumed.borrow_mut();
    // Starting one partition further each poll: Kafka serves partitions in the order their
    // fetches completed, so a busy partition cannot hold the others back.
    let count = positions.len().max(1);
    let first = m.next_first.get() % count;
    m.next_first.set(first + 1);
    let (before, after): (Vec<_>, Vec<_>) = positions
        .iter_mut()
        .enumerate()
        .partition(|(i, _)| *i < first);
    for (tp, position) in after.into_iter().chain(before).map(|(_, p)| p) {
        while out.len() < max {
            let Some((record, epoch)) = position.fetched.pop_front() else {
                break;
            };
            consumed.insert(
                tp.clone(),
                CommittedOffset {
                    offset: record.offset.next(),
                    leader_epoch: epoch,
                },
            );
            out.push((tp.clone(), record));
        }
    }
    drop((positions, consumed));
    if !out.is_empty() {
        m.consumer.wake_fetchers();
    }
    out
}

/// Tell the runner how far each owned partition with nothing left to process has got.
fn report_progress(m: &Member) {
    let positions = m.consumer.positions.borrow();
    let consumed = m.consumed.borrow();
    let mut progress = m.spec.progress.borrow_mut();
    for (tp, position) in positions.iter().filter(|(_, p)| p.fetched.is_empty()) {
        if let Some(at) = consumed.get(tp) {
            let seen = (position.high_watermark, position.high_watermark_at);
            progress.insert(tp.clone(), (at.offset, seen.0, seen.1));
        }
    }
}

/// Kafka's `ensureActiveGroup` from within poll: act on a requested rejoin, then find,
/// join and sync until the member is in a generation.
async fn ensure_active(m: &Member, link: &Channel) {
    let config = m.ctx().config.clone();
    if let Some(error) = m.rejoin.take() {
        if m.spec.commit == Commit::Auto {
            // onJoinPrepare: an auto-committing member commits before it gives up its
            // partitions (refused if the generation is gone: it rejoins anyway).
            commit_sync(m, link).await;
            m.rejoin.set(None);
        }
        let change = m.membership.borrow_mut().heartbeat_answered(Some(error));
        if let Change::Revoked(revoked) = change {
            m.revoke(&revoked);
        }
    }
    let mut find_from = m.ctx().index;
    loop {
        let request = {
            let mut membership = m.membership.borrow_mut();
            // A member still in its generation, looking for a moved coordinator, polls on:
            // the heartbeat thread looks.
            let looking = *membership.phase() == Phase::Finding && membership.identity().1 >= 0;
            if *membership.phase() == Phase::Stable || looking {
                return;
            }
            membership.next(clock::now(), &m.partitions)
        };
        let Some(request) = request else { return };
        let coordinator = m.membership.borrow().coordinator();
        let change = match &request {
            Request::FindCoordinator { .. } => {
                find_from = find_from % m.ctx().brokers.max(1) + 1;
                let answer = link
                    .call(BrokerId(find_from), &request, config.request_timeout)
                    .await;
                let found = match answer {
                    Some(Response::FindCoordinator { coordinator, .. }) => coordinator,
                    _ => None,
                };
                m.membership.borrow_mut().found(found, clock::now());
                if found.is_none() {
                    backoff(&config).await;
                }
                continue;
            }
            Request::JoinGroup(_) => {
                // The coordinator holds a join until the join phase ends.
                let timeout = config.max_poll_interval + config.request_timeout;
                match call_coordinator(link, coordinator, &request, timeout).await {
                    Some(Response::JoinGroup(answer)) => {
                        let change = m.membership.borrow_mut().joined(&answer);
                        if answer.error.is_some() {
                            backoff(&config).await;
                        }
                        change
                    }
                    _ => m.membership.borrow_mut().timed_out(),
                }
            }
            Request::SyncGroup(_) => {
                let timeout = config.max_poll_interval + config.request_timeout;
                match call_coordinator(link, coordinator, &request, timeout).await {
                    Some(Response::SyncGroup { error, assignment }) => {
                        let change =
                            m.membership
                                .borrow_mut()
                                .synced(error, &assignment, clock::now());
                        if error.is_some() {
                            backoff(&config).await;
                        }
                        change
                    }
                    _ => m.membership.borrow_mut().timed_out(),
                }
            }
            _ => return,
        };
        match change {
            Change::Assigned(assigned) => {
                // The poll timer restarts with the generation, as Kafka's heartbeat does.
                m.last_poll.set(clock::now());
                install(m, link, assigned).await
            }
            Change::Revoked(revoked) => m.revoke(&revoked),
            Change::None => {}
        }
    }
}

async fn call_coordinator(
    link: &Channel,
    coordinator: Option<BrokerId>,
    request: &Request,
    timeout: Duration,
) -> Option<Response> {
    link.call(coordinator?, request, timeout).await
}

/// The partitions are this member's now: resume each at the group's committed offset, or
/// where `auto.offset.reset` says (looked up by the next poll). If the coordinator does
/// not answer for the committed offsets, the next poll asks again: a partition is never
/// reset for want of an answer.
async fn install(m: &Member, link: &Channel, assigned: Vec<TopicPartition>) {
    let ctx = m.ctx();
    let Some(committed) = fetch_committed(m, link, &assigned).await else {
        tracing::info!(
            consumer = ctx.index,
            "committed offsets not fetched: the next poll asks again"
        );
        m.unplaced.borrow_mut().extend(assigned);
        return;
    };
    for tp in assigned {
        m.placements.set(m.placements.get() + 1);
        let placed = m.placements.get();
        let position = match committed.get(&tp) {
            Some(c) => {
                let epoch = (c.leader_epoch >= Epoch(0)).then_some(c.leader_epoch);
                let fetch = FetchPosition {
                    offset: c.offset,
                    last_fetched_epoch: epoch,
                };
                tracing::info!(consumer = ctx.index, %tp, offset = c.offset.0, "resuming partition at the committed offset");
                m.record(Op::Resume {
                    consumer: ctx.index,
                    tp: tp.clone(),
                    offset: c.offset,
                    committed: true,
                });
                m.consumed.borrow_mut().insert(tp.clone(), *c);
                Position::new(fetch, placed)
            }
            None => {
                let mut position = Position::new(FetchPosition::new(Offset(0)), placed);
                if ctx.config.auto_offset_reset == OffsetReset::None {
                    tracing::warn!(consumer = ctx.index, %tp, "no committed offset and auto.offset.reset = none: the partition is not read");
                    position.stuck = true;
                } else {
                    position.reset_from = Some(Offset::NONE);
                }
                position
            }
        };
        m.consumer.positions.borrow_mut().insert(tp, position);
    }
    // As Kafka's fetcher: a position whose leader is not known asks for metadata.
    let leaderless = {
        let metadata = m.consumer.metadata.borrow();
        m.consumer
            .positions
            .borrow()
            .keys()
            .any(|tp| metadata.leader(tp).is_none())
    };
    if leaderless {
        m.consumer.want_metadata();
    }
    m.consumer.wake_fetchers();
}

/// OffsetFetch, retried while the coordinator cannot answer yet (or, from 2.5, while a
/// transaction holds an offset: UNSTABLE_OFFSET_COMMIT), for up to the API timeout;
/// `None` if it never answered.
async fn fetch_committed(
    m: &Member,
    link: &Channel,
    partitions: &[TopicPartition],
) -> Option<BTreeMap<TopicPartition, CommittedOffset>> {
    let config = &m.ctx().config;
    let deadline = clock::now() + API_TIMEOUT;
    let request = Request::OffsetFetch {
        group: m.spec.name.clone(),
        partitions: partitions.to_vec(),
        require_stable: config.require_stable_offsets,
    };
    while clock::now() < deadline {
        let coordinator = m.membership.borrow().coordinator();
        if coordinator.is_none() {
            find_coordinator(m, link).await;
            continue;
        }
        match call_coordinator(link, coordinator, &request, config.request_timeout).await {
            Some(Response::OffsetFetch {
                error: None,
                offsets,
            }) => return Some(offsets.into_iter().collect()),
            Some(Response::OffsetFetch {
                error:
                    Some(error @ (ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable)),
                ..
            }) => {
                m.membership.borrow_mut().heartbeat_answered(Some(error));
            }
            _ => {}
        }
        backoff(config).await;
    }
    None
}

/// ListOffsets at the partition's leader, once: `None` if it did not answer (the caller
/// tries again at its next poll).
async fn list_offset(m: &Member, tp: &TopicPartition, spec: OffsetSpec) -> Option<Offset> {
    let config = &m.ctx().config;
    let leader = m.consumer.metadata.borrow().leader(tp);
    if let Some((leader, epoch)) = leader {
        // Before KIP-320 reached the consumer (2.3) its ListOffsets named no epoch.
        let request = Request::ListOffsets {
            replica: None,
            isolation: config.isolation_level,
            tp: tp.clone(),
            spec,
            current_leader_epoch: if config.validate_positions {
                epoch
            } else {
                Epoch::NONE
            },
        };
        let mut link = Link::default();
        if let Some(Response::ListOffsets {
            error: None,
            offset,
        }) = link.call(leader, &request, config.request_timeout).await
        {
            return Some(offset);
        }
    }
    m.consumer.want_metadata();
    None
}

/// The retry backoff, at least a millisecond: with `retry.backoff.ms` = 0 a loop of
/// requests that fail without touching the network would never let time pass.
async fn backoff(config: &crate::config::kafka::ConsumerConfig) {
    tokio::time::sleep(config.retry_backoff.max(Duration::from_millis(1))).await;
}

/// What a commit sends: each owned partition's consumed position.
fn to_commit(m: &Member) -> BTreeMap<TopicPartition, CommittedOffset> {
    if !m.spec.bugs.commit_fetch_position {
        return m.consumed.borrow().clone();
    }
    m.consumer
        .positions
        .borrow()
        .iter()
        .map(|(tp, p)| {
            let epoch = p.fetch.last_fetched_epoch.unwrap_or(Epoch::NONE);
            (
                tp.clone(),
                CommittedOffset {
                    offset: p.fetch.offset,
                    leader_epoch: epoch,
                },
            )
        })
        .collect()
}

/// `commitSync` of every owned partition's consumed position: retried on the retriable
/// errors (the coordinator moved or cannot take it yet) until the API timeout; refused
/// by the group (another generation, an unknown member, a rebalance), it fails and the
/// member rejoins at its next poll. Returns whether the commit was acknowledged.
async fn commit_sync(m: &Member, link: &Channel) -> bool {
    let offsets = to_commit(m);
    let config = m.ctx().config.clone();
    let deadline = clock::now() + API_TIMEOUT;
    while clock::now() < deadline {
        if offsets.is_empty() {
            return true;
        }
        let coordinator = m.membership.borrow().coordinator();
        if coordinator.is_none() {
            find_coordinator(m, link).await;
            continue;
        }
        let request = commit_request(m, &offsets);
        let generation = m.membership.borrow().identity().1;
        let answer = call_coordinator(link, coordinator, &request, config.request_timeout).await;
        match commit_answered(m, &offsets, generation, answer) {
            CommitOutcome::Committed => return true,
            CommitOutcome::Failed => return false,
            CommitOutcome::Retriable => backoff(&config).await,
        }
    }
    false
}

/// The auto commit from within poll, Kafka's `commitAsync`: queued on the poll's
/// connection behind whatever it sent before, so commits reach the coordinator in the
/// order they were made, and not waited for. With no coordinator known it fails at once
/// (the heartbeat thread looks for one) and, retriable, is tried again after the retry
/// backoff; Kafka's looks the coordinator up first and then sends it.
fn commit_async(m: &Member, link: &Channel) {
    let offsets = to_commit(m);
    if offsets.is_empty() {
        return;
    }
    let Some(coordinator) = m.membership.borrow().coordinator() else {
        let backoff = m.ctx().config.retry_backoff;
        m.next_auto_commit.set(clock::now() + backoff);
        return;
    };
    let request = commit_request(m, &offsets);
    let generation = m.membership.borrow().identity().1;
    let then = Then::AutoCommitted {
        offsets,
        generation,
    };
    link.queue(coordinator, request, m.ctx().config.request_timeout, then);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CommitOutcome {
    Committed,
    Retriable,
    Failed,
}

/// A commit's answer, as Kafka's `OffsetCommitResponseHandler` takes it, whichever way it
/// was sent: acknowledged, it is recorded; the coordinator moved, unavailable or timed
/// out, the member looks for it again; refused by the group, the member rejoins.
fn commit_answered(
    m: &Member,
    offsets: &BTreeMap<TopicPartition, CommittedOffset>,
    generation: i32,
    answer: Option<Response>,
) -> CommitOutcome {
    match answer {
        Some(Response::OffsetCommit { error: None }) => {
            committed(m, offsets);
            CommitOutcome::Committed
        }
        Some(Response::OffsetCommit {
            error: Some(ErrorCode::CoordinatorLoadInProgress),
        }) => CommitOutcome::Retriable,
        Some(Response::OffsetCommit {
            error:
                Some(
                    error @ (ErrorCode::NotCoordinator
                    | ErrorCode::CoordinatorNotAvailable
                    | ErrorCode::RequestTimedOut),
                ),
        }) => {
            m.membership.borrow_mut().heartbeat_answered(Some(error));
            CommitOutcome::Retriable
        }
        Some(Response::OffsetCommit { error: Some(error) }) => {
            tracing::info!(consumer = m.ctx().index, %error, "commit failed");
            m.request_rejoin(error, generation);
            CommitOutcome::Failed
        }
        _ => {
            m.membership.borrow_mut().timed_out();
            CommitOutcome::Retriable
        }
    }
}

fn commit_request(m: &Member, offsets: &BTreeMap<TopicPartition, CommittedOffset>) -> Request {
    Request::OffsetCommit(offset_commit(m, offsets, true))
}

/// The offsets to commit, with the member's id and generation if `identified` (a
/// transaction's before KIP-447 named only the group).
fn offset_commit(
    m: &Member,
    offsets: &BTreeMap<TopicPartition, CommittedOffset>,
    identified: bool,
) -> OffsetCommit {
    let membership = m.membership.borrow();
    let (member, generation) = if identified {
        membership.identity()
    } else {
        ("", -1)
    };
    OffsetCommit {
        group: m.spec.name.clone(),
        member: member.to_owned(),
        generation,
        offsets: offsets.iter().map(|(tp, c)| (tp.clone(), *c)).collect(),
    }
}

fn committed(m: &Member, offsets: &BTreeMap<TopicPartition, CommittedOffset>) {
    for (tp, c) in offsets {
        m.record(Op::Committed {
            consumer: m.ctx().index,
            tp: tp.clone(),
            offset: c.offset,
        });
    }
}

/// FindCoordinator until one is known (or the member leaves the finding phase).
async fn find_coordinator(m: &Member, link: &Channel) {
    let config = &m.ctx().config;
    let mut broker = m.ctx().index;
    while *m.membership.borrow().phase() == Phase::Finding {
        broker = broker % m.ctx().brokers.max(1) + 1;
        let request = Request::FindCoordinator {
            group: m.spec.name.clone(),
        };
        let found = match link
            .call(BrokerId(broker), &request, config.request_timeout)
            .await
        {
            Some(Response::FindCoordinator { coordinator, .. }) => coordinator,
            _ => None,
        };
        m.membership.borrow_mut().found(found, clock::now());
        if found.is_none() {
            backoff(config).await;
        }
    }
}

/// The heartbeat thread: heartbeats every `heartbeat.interval.ms` while the member is in a
/// generation, looks for a moved coordinator, and leaves the group when the application
/// has not polled within `max.poll.interval.ms`.
async fn heartbeat_thread(m: Rc<Member>, link: Channel) {
    let config = m.ctx().config.clone();
    loop {
        let now = clock::now();
        let (phase, in_generation) = {
            let membership = m.membership.borrow();
            (membership.phase().clone(), membership.identity().1 >= 0)
        };
        let rejoining = matches!(
            m.rejoin.get(),
            Some(ErrorCode::UnknownMemberId | ErrorCode::IllegalGeneration)
        );
        match phase {
            Phase::Stable if !rejoining => {
                if now - m.last_poll.get() > config.max_poll_interval {
                    leave_group(&m, &link).await;
                    continue;
                }
                let next = m.membership.borrow().next_heartbeat();
                if next > now {
                    tokio::time::sleep(next - now).await;
                    continue;
                }
                let Some(request) = m.membership.borrow_mut().next(now, &m.partitions) else {
                    continue;
                };
                let (coordinator, generation) = {
                    let membership = m.membership.borrow();
                    (membership.coordinator(), membership.identity().1)
                };
                match call_coordinator(&link, coordinator, &request, config.request_timeout).await {
                    Some(Response::Heartbeat { error: None }) => {}
                    Some(Response::Heartbeat {
                        error:
                            Some(
                                error @ (ErrorCode::NotCoordinator
                                | ErrorCode::CoordinatorNotAvailable),
                            ),
                    }) => {
                        m.membership.borrow_mut().heartbeat_answered(Some(error));
                    }
                    Some(Response::Heartbeat {
                        error: Some(ErrorCode::CoordinatorLoadInProgress),
                    }) => {}
                    Some(Response::Heartbeat { error: Some(error) }) => {
                        m.request_rejoin(error, generation);
                    }
                    _ => {
                        m.membership.borrow_mut().timed_out();
                    }
                }
            }
            Phase::Finding if in_generation => find_coordinator(&m, &link).await,
            _ => tokio::time::sleep(config.heartbeat_interval).await,
        }
    }
}

/// KIP-62: the application stopped polling; the member leaves, and joins afresh when it
/// polls again.
async fn leave_group(m: &Member, link: &Channel) {
    let config = &m.ctx().config;
    tracing::info!(
        consumer = m.ctx().index,
        "max.poll.interval.ms passed without a poll: leaving the group"
    );
    let (request, coordinator) = {
        let membership = m.membership.borrow();
        let request = Request::LeaveGroup {
            group: m.spec.name.clone(),
            member: membership.identity().0.to_owned(),
        };
        (request, membership.coordinator())
    };
    let _ = call_coordinator(link, coordinator, &request, config.request_timeout).await;
    m.rejoin.set(Some(ErrorCode::UnknownMemberId));
}
