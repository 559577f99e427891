//! The group coordinator of one broker, as plain data: for each `__consumer_offsets`
//! partition it leads, the groups that hash to it (`group::offsets_partition`) and their
//! committed offsets. The async shell appends what it is asked to (with acks=all) and
//! reports back; this decides.
//!
//! As Kafka's: a partition the broker just came to lead answers
//! `COORDINATOR_LOAD_IN_PROGRESS` until its log is read back into memory; one it does not
//! lead answers `NOT_COORDINATOR`, so a member looks for the coordinator again; a commit
//! counts (is answered, and read back by OffsetFetch) only once its record is appended
//! and replicated, so an acknowledged commit survives a coordinator failover and an
//! unacknowledged one may or may not.

use super::group::{offsets_partition, Answer, Group, GroupError, Storing};
use super::offsets_record::{self, Key, OffsetKey, OffsetValue};
use crate::kafka::protocol::messages::{CommittedOffset, ErrorCode};
use crate::kafka::record::TxnResult;
use crate::kafka::types::ProducerId;
use crate::os::clock::SimTime;
use crate::types::TopicPartition;
use std::collections::BTreeMap;
use std::time::Duration;

/// The internal topic of committed offsets, as Kafka names it.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// One offsets partition this broker leads.
#[derive(Clone, Debug)]
struct Led {
    /// Which time this broker came to lead the partition: a store begun under an
    /// earlier leadership must not complete a group loaded under a later one.
    incarnation: u64,
    loaded: bool,
    groups: BTreeMap<String, Group>,
    /// Committed offsets: the last record appended and replicated for each key.
    offsets: BTreeMap<String, BTreeMap<TopicPartition, OffsetValue>>,
    /// Offsets sent to a transaction (TxnOffsetCommit), by producer id: applied when its
    /// COMMIT marker reaches this partition, dropped by an ABORT (Kafka's
    /// `pendingTransactionalOffsetCommits`). `appended`: the record is in the log.
    pending: BTreeMap<ProducerId, BTreeMap<(String, TopicPartition), Pending>>,
}

/// An offset in a transaction, waiting for the transaction's end.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    value: OffsetValue,
    appended: bool,
}

/// One record of an offsets partition as a load reads it: a record of a batch (with the
/// batch's producer id if the batch is transactional), or a transaction marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogEntry<'r> {
    Record {
        transactional: Option<ProducerId>,
        key: &'r [u8],
        value: Option<&'r [u8]>,
    },
    Marker {
        producer_id: ProducerId,
        result: TxnResult,
    },
}

#[derive(Clone, Debug)]
pub struct Coordinator {
    /// `offsets.topic.num.partitions`.
    partitions: u32,
    initial_delay: Duration,
    led: BTreeMap<u32, Led>,
    leaderships: u64,
}

/// A group's metadata record on its way to the log, and the assignment it carries.
#[derive(Clone, Debug)]
pub struct GroupStore {
    pub append: Append,
    incarnation: u64,
    storing: Storing,
}

/// A commit to make durable: the records to append to an offsets partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    pub partition: u32,
    /// `(key, value)` record bytes, one per committed partition.
    pub records: Vec<(Vec<u8>, Vec<u8>)>,
    /// A TxnOffsetCommit's: the transactional producer (id, epoch) whose batch it is.
    pub producer: Option<(ProducerId, i16)>,
}

impl Coordinator {
    /// `partitions` is `offsets.topic.num.partitions`, `initial_delay`
    /// `group.initial.rebalance.delay.ms`.
    pub fn new(partitions: u32, initial_delay: Duration) -> Coordinator {
        Coordinator {
            partitions: partitions.max(1),
            initial_delay,
            led: BTreeMap::new(),
            leaderships: 0,
        }
    }

    /// The offsets partition of `group`.
    pub fn partition_of(&self, group: &str) -> u32 {
        offsets_partition(group, self.partitions)
    }

    /// This broker now leads `partition`: it loads it before it answers for it.
    pub fn lead(&mut self, partition: u32) {
        self.leaderships += 1;
        self.led.insert(
            partition,
            Led {
                incarnation: self.leaderships,
                loaded: false,
                groups: BTreeMap::new(),
                offsets: BTreeMap::new(),
                pending: BTreeMap::new(),
            },
        );
    }

    /// The partition's log read back, oldest entry first (a value of `None` is a
    /// tombstone): later records win. Each group stored in it is restored in its last
    /// stored generation, its members' sessions starting `now`. Transactional offsets wait
    /// for their producer's marker, as Kafka's `doLoadGroupsAndOffsets` holds them; those
    /// with no marker yet stay pending.
    pub fn loaded<'r>(
        &mut self,
        partition: u32,
        entries: impl IntoIterator<Item = LogEntry<'r>>,
        now: SimTime,
    ) -> Result<(), String> {
        let initial_delay = self.initial_delay;
        let Some(led) = self.led.get_mut(&partition) else {
            return Ok(());
        };
        let mut stored = BTreeMap::new();
        for entry in entries {
            let (transactional, key, value) = match entry {
                LogEntry::Marker {
                    producer_id,
                    result,
                } => {
                    led.end_txn(producer_id, result);
                    continue;
                }
                LogEntry::Record {
                    transactional,
                    key,
                    value,
                } => (transactional, key, value),
            };
            match (offsets_record::decode_key(key)?, value, transactional) {
                (Some(Key::Offset(key)), Some(value), Some(producer_id)) => {
                    let value = offsets_record::decode_value(value)?;
                    let pending = Pending {
                        value,
                        appended: true,
                    };
                    led.pending
                        .entry(producer_id)
                        .or_default()
                        .insert((key.group, key.tp), pending);
                }
                (Some(Key::Offset(key)), Some(value), None) => {
                    let value = offsets_record::decode_value(value)?;
                    led.offsets
                        .entry(key.group)
                        .or_default()
                        .insert(key.tp, value);
                }
                (Some(Key::Offset(key)), None, _) => {
                    if let Some(group) = led.offsets.get_mut(&key.group) {
                        group.remove(&key.tp);
                    }
                }
                (Some(Key::Group(group)), Some(value), _) => {
                    stored.insert(group, offsets_record::decode_group_value(value)?);
                }
                (Some(Key::Group(group)), None, _) => {
                    stored.remove(&group);
                }
                (None, _, _) => {}
            }
        }
        for (name, value) in stored {
            led.groups
                .insert(name, Group::restore(&value, initial_delay, now));
        }
        led.loaded = true;
        Ok(())
    }

    /// A SyncGroup ([`Group::sync`]); with the leader's assignment, the group's metadata
    /// record carrying it, to append before the group becomes stable.
    pub fn sync(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        assignment: Option<BTreeMap<String, Vec<TopicPartition>>>,
        now: SimTime,
    ) -> Result<(Vec<Answer>, Option<GroupStore>), ErrorCode> {
        let partition = self.partition_of(group);
        let initial_delay = self.initial_delay;
        let led = self.loaded_partition(group)?;
        let incarnation = led.incarnation;
        let g = led
            .groups
            .entry(group.to_owned())
            .or_insert_with(|| Group::new(initial_delay));
        let (answers, storing) = g.sync(member, generation, assignment, now);
        let store = storing.map(|storing| {
            let value = g.stored(&storing, now);
            GroupStore {
                append: Append {
                    partition,
                    records: vec![(
                        offsets_record::encode_group_key(group),
                        offsets_record::encode_group_value(&value),
                    )],
                    producer: None,
                },
                incarnation,
                storing,
            }
        });
        Ok((answers, store))
    }

    /// How the group's store went: the answers it releases, none if this broker has
    /// stopped leading the partition since, or leads it again and reloaded the group.
    pub fn group_stored(
        &mut self,
        group: &str,
        store: GroupStore,
        outcome: Result<(), GroupError>,
        now: SimTime,
    ) -> Vec<Answer> {
        let same = self
            .led
            .get(&store.append.partition)
            .is_some_and(|led| led.incarnation == store.incarnation);
        match self.group(group) {
            Ok(g) if same => g.assignment_stored(store.storing, outcome, now),
            _ => Vec::new(),
        }
    }

    /// This broker no longer leads `partition`: its groups and offsets go (their members
    /// find the new coordinator, which loads them from the log).
    pub fn resign(&mut self, partition: u32) {
        self.led.remove(&partition);
    }

    /// The group's state machine, if this broker coordinates it and has loaded it; else
    /// the error that sends the member elsewhere or makes it wait.
    pub fn group(&mut self, group: &str) -> Result<&mut Group, ErrorCode> {
        let initial_delay = self.initial_delay;
        let led = self.loaded_partition(group)?;
        Ok(led
            .groups
            .entry(group.to_owned())
            .or_insert_with(|| Group::new(initial_delay)))
    }

    /// An OffsetCommit, checked against the group (an unknown group takes commits from
    /// outside the protocol, as Kafka's does): the records to append, or why not.
    pub fn commit(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        offsets: &[(TopicPartition, CommittedOffset)],
        now_ms: i64,
    ) -> Result<Append, ErrorCode> {
        let partition = self.partition_of(group);
        self.group(group)?
            .accepts_commit(member, generation)
            .map_err(ErrorCode::from)?;
        Ok(Append {
            partition,
            records: offset_records(group, offsets, now_ms),
            producer: None,
        })
    }

    /// A TxnOffsetCommit (KIP-98, with KIP-447's member and generation): checked against
    /// the group, then pending in the producer's transaction from now on (an OffsetFetch
    /// that requires stable offsets waits for it); the records to append, in a
    /// transactional batch of the producer's.
    pub fn txn_commit(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        producer: (ProducerId, i16),
        offsets: &[(TopicPartition, CommittedOffset)],
        now_ms: i64,
    ) -> Result<Append, ErrorCode> {
        let partition = self.partition_of(group);
        self.group(group)?
            .accepts_txn_commit(member, generation)
            .map_err(ErrorCode::from)?;
        let led = self.led.get_mut(&partition).expect("loaded above");
        let records = offset_records(group, offsets, now_ms);
        let pending = led.pending.entry(producer.0).or_default();
        for (key, value) in &records {
            let (Ok(Some(Key::Offset(key))), Ok(value)) = (
                offsets_record::decode_key(key),
                offsets_record::decode_value(value),
            ) else {
                unreachable!("offset records just encoded")
            };
            pending.insert(
                (key.group, key.tp),
                Pending {
                    value,
                    appended: false,
                },
            );
        }
        Ok(Append {
            partition,
            records,
            producer: Some(producer),
        })
    }

    /// A TxnOffsetCommit's append finished: its offsets now wait for the marker, or, if it
    /// failed, leave the transaction (Kafka's `onTxnOffsetCommitAppend` and
    /// `failPendingTxnOffsetCommit`).
    pub fn txn_commit_appended(&mut self, append: &Append, ok: bool) {
        let (Some((producer_id, _)), Some(led)) =
            (append.producer, self.led.get_mut(&append.partition))
        else {
            return;
        };
        let Some(pending) = led.pending.get_mut(&producer_id) else {
            return;
        };
        for (key, _) in &append.records {
            let Ok(Some(Key::Offset(key))) = offsets_record::decode_key(key) else {
                continue;
            };
            let slot = (key.group, key.tp);
            if ok {
                if let Some(p) = pending.get_mut(&slot) {
                    p.appended = true;
                }
            } else {
                pending.remove(&slot);
            }
        }
        if pending.is_empty() {
            led.pending.remove(&producer_id);
        }
    }

    /// A transaction marker for `producer_id` is written (and replicated) on `partition`:
    /// its offsets there are committed or dropped (Kafka's `handleTxnCompletion`).
    pub fn txn_completed(&mut self, partition: u32, producer_id: ProducerId, result: TxnResult) {
        if let Some(led) = self.led.get_mut(&partition) {
            led.end_txn(producer_id, result);
        }
    }

    /// The commit's records are appended and replicated: they now count.
    pub fn committed(&mut self, append: &Append) -> Result<(), String> {
        let Some(led) = self.led.get_mut(&append.partition) else {
            return Ok(());
        };
        for (key, value) in &append.records {
            let Some(Key::Offset(key)) = offsets_record::decode_key(key)? else {
                continue;
            };
            let value = offsets_record::decode_value(value)?;
            led.offsets
                .entry(key.group)
                .or_default()
                .insert(key.tp, value);
        }
        Ok(())
    }

    /// OffsetFetch: the committed offset of each partition that has one. With
    /// `require_stable` (KIP-447, clients from 2.5), a partition with an offset pending in
    /// a transaction answers UNSTABLE_OFFSET_COMMIT, and the consumer asks again.
    pub fn fetch(
        &mut self,
        group: &str,
        partitions: &[TopicPartition],
        require_stable: bool,
    ) -> Result<Vec<(TopicPartition, CommittedOffset)>, ErrorCode> {
        let led = self.loaded_partition(group)?;
        if require_stable
            && led.pending.values().any(|offsets| {
                partitions
                    .iter()
                    .any(|tp| offsets.contains_key(&(group.to_owned(), tp.clone())))
            })
        {
            return Err(ErrorCode::UnstableOffsetCommit);
        }
        let Some(offsets) = led.offsets.get(group) else {
            return Ok(Vec::new());
        };
        Ok(partitions
            .iter()
            .filter_map(|tp| {
                offsets.get(tp).map(|v| {
                    (
                        tp.clone(),
                        CommittedOffset {
                            offset: v.offset,
                            leader_epoch: v.leader_epoch,
                        },
                    )
                })
            })
            .collect())
    }

    /// Every loaded group's clock: the answers it releases, with the group's name.
    pub fn tick(&mut self, now: SimTime) -> Vec<(String, Answer)> {
        let mut out = Vec::new();
        for led in self.led.values_mut().filter(|led| led.loaded) {
            for (name, group) in &mut led.groups {
                out.extend(group.tick(now).into_iter().map(|a| (name.clone(), a)));
            }
        }
        out
    }

    /// When [`tick`](Self::tick) can next change anything.
    pub fn next_deadline(&self) -> SimTime {
        self.led
            .values()
            .flat_map(|led| led.groups.values())
            .map(Group::next_deadline)
            .min()
            .unwrap_or(SimTime::LAST)
    }

    fn loaded_partition(&mut self, group: &str) -> Result<&mut Led, ErrorCode> {
        let partition = self.partition_of(group);
        match self.led.get_mut(&partition) {
            None => Err(ErrorCode::NotCoordinator),
            Some(led) if !led.loaded => Err(ErrorCode::CoordinatorLoadInProgress),
            Some(led) => Ok(led),
        }
    }
}

impl Led {
    /// The producer's transaction ended here: its appended offsets count on a commit;
    /// all of them go on an abort.
    fn end_txn(&mut self, producer_id: ProducerId, result: TxnResult) {
        let Some(pending) = self.pending.remove(&producer_id) else {
            return;
        };
        if result == TxnResult::Abort {
            return;
        }
        for ((group, tp), p) in pending {
            assert!(
                p.appended,
                "{group}: {tp}'s transactional offset committed before its record was appended"
            );
            self.offsets.entry(group).or_default().insert(tp, p.value);
        }
    }
}

/// The offset records of a commit: key and value bytes per partition.
fn offset_records(
    group: &str,
    offsets: &[(TopicPartition, CommittedOffset)],
    now_ms: i64,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    offsets
        .iter()
        .map(|(tp, committed)| {
            let key = OffsetKey {
                group: group.to_owned(),
                tp: tp.clone(),
            };
            let value = OffsetValue {
                offset: committed.offset,
                leader_epoch: committed.leader_epoch,
                metadata: String::new(),
                commit_timestamp_ms: now_ms,
            };
            (
                offsets_record::encode_key(&key),
                offsets_record::encode_value(&value),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Epoch, Offset};

    fn offset(n: i64) -> CommittedOffset {
        CommittedOffset {
            offset: Offset(n),
            leader_epoch: Epoch(0),
        }
    }

    /// A record of a plain (non-transactional) batch.
    fn plain<'r>(key: &'r [u8], value: Option<&'r [u8]>) -> LogEntry<'r> {
        LogEntry::Record {
            transactional: None,
            key,
            value,
        }
    }

    /// A new consumer's JoinGroup.
    fn consumer_1() -> crate::kafka::broker::groups::group::JoinRequest {
        crate::kafka::broker::groups::group::JoinRequest {
            member: None,
            client: "consumer-1".into(),
            subscription: vec!["orders".into()],
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
        }
    }

    /// A coordinator leading the partition of "billing", loaded from an empty log.
    fn leading() -> (Coordinator, u32) {
        let mut coordinator = Coordinator::new(50, Duration::from_secs(3));
        let partition = coordinator.partition_of("billing");
        assert_eq!(
            coordinator.group("billing").err(),
            Some(ErrorCode::NotCoordinator)
        );
        coordinator.lead(partition);
        assert_eq!(
            coordinator.group("billing").err(),
            Some(ErrorCode::CoordinatorLoadInProgress)
        );
        coordinator.loaded(partition, [], SimTime::ZERO).unwrap();
        (coordinator, partition)
    }

    #[test]
    fn a_commit_counts_once_replicated_and_a_new_coordinator_reads_it_from_the_log() {
        let (mut coordinator, partition) = leading();
        let tp = TopicPartition::new("orders", 0);
        let append = coordinator
            .commit("billing", "", -1, &[(tp.clone(), offset(4100))], 12_300)
            .unwrap();
        assert_eq!(append.partition, partition);
        assert!(coordinator
            .fetch("billing", std::slice::from_ref(&tp), true)
            .unwrap()
            .is_empty());
        coordinator.committed(&append).unwrap();
        assert_eq!(
            coordinator
                .fetch("billing", std::slice::from_ref(&tp), true)
                .unwrap(),
            [(tp.clone(), offset(4100))]
        );

        // Failover: another broker leads the partition and loads its log, in which a
        // later commit and a tombstone for another partition follow.
        let later = coordinator
            .commit("billing", "", -1, &[(tp.clone(), offset(4200))], 13_000)
            .unwrap();
        let other = TopicPartition::new("orders", 1);
        let gone = coordinator
            .commit("billing", "", -1, &[(other.clone(), offset(7))], 13_100)
            .unwrap();
        let mut next = Coordinator::new(50, Duration::from_secs(3));
        next.lead(partition);
        let (k1, v1) = &append.records[0];
        let (k2, v2) = &later.records[0];
        let (k3, v3) = &gone.records[0];
        let log = vec![
            plain(k1, Some(v1)),
            plain(k3, Some(v3)),
            plain(k2, Some(v2)),
            plain(k3, None),
        ];
        next.loaded(partition, log, SimTime::ZERO).unwrap();
        assert_eq!(
            next.fetch("billing", &[tp.clone(), other], true).unwrap(),
            [(tp, offset(4200))]
        );
        coordinator.resign(partition);
        assert_eq!(
            coordinator.group("billing").err(),
            Some(ErrorCode::NotCoordinator)
        );
    }

    #[test]
    fn a_commit_from_another_generation_or_an_unknown_member_is_refused() {
        let (mut coordinator, _) = leading();
        let group = coordinator.group("billing").unwrap();
        let (_, answers) = group.join(consumer_1(), crate::os::clock::SimTime::ZERO);
        assert!(answers.is_empty(), "the initial delay");
        let tp = TopicPartition::new("orders", 0);
        assert_eq!(
            coordinator.commit("billing", "consumer-1-1", 5, &[(tp.clone(), offset(1))], 0),
            Err(ErrorCode::IllegalGeneration)
        );
        assert_eq!(
            coordinator.commit("billing", "nobody", 0, &[(tp, offset(1))], 0),
            Err(ErrorCode::UnknownMemberId)
        );
    }

    /// A store begun before the broker lost the partition completes nothing once it leads
    /// the partition again: the group it reloaded is another (Kafka's callback holds the
    /// unloaded group object).
    #[test]
    fn a_store_from_an_earlier_leadership_completes_nothing() {
        use crate::kafka::broker::groups::group::State;
        let (mut coordinator, partition) = leading();
        let at = SimTime::from_millis;
        let group = coordinator.group("billing").unwrap();
        let (member, _) = group.join(consumer_1(), at(0));
        group.tick(at(3_000));
        let plan = BTreeMap::from([(member.clone(), vec![TopicPartition::new("orders", 0)])]);
        let (_, earlier) = coordinator
            .sync("billing", &member, 1, Some(plan), at(3_010))
            .unwrap();
        let earlier = earlier.unwrap();

        // Resigned and led again, the group reloaded from a log without the record, and
        // brought to the same generation's CompletingRebalance by a fresh join.
        coordinator.resign(partition);
        coordinator.lead(partition);
        coordinator.loaded(partition, [], at(4_000)).unwrap();
        let group = coordinator.group("billing").unwrap();
        group.join(consumer_1(), at(4_000));
        group.tick(at(7_000));
        assert_eq!(
            (group.state(), group.generation()),
            (State::CompletingRebalance, 1)
        );
        assert!(coordinator
            .group_stored("billing", earlier, Ok(()), at(7_010))
            .is_empty());
        let group = coordinator.group("billing").unwrap();
        assert_eq!(group.state(), State::CompletingRebalance);
    }

    /// A new coordinator restores the group stored after its last rebalance: its members
    /// go on heartbeating and committing in their generation, without rejoining.
    #[test]
    fn a_stored_group_survives_a_failover_in_its_generation() {
        use crate::kafka::broker::groups::group::{Answer, State};
        let (mut coordinator, partition) = leading();
        let at = SimTime::from_millis;
        let group = coordinator.group("billing").unwrap();
        let (member, _) = group.join(consumer_1(), at(0));
        let joined = group.tick(at(3_000));
        assert!(matches!(&joined[..], [Answer::Join { result: Ok(_), .. }]));
        let generation = group.generation();
        let tp = TopicPartition::new("orders", 0);
        let plan = std::collections::BTreeMap::from([(member.clone(), vec![tp.clone()])]);
        let (answers, store) = coordinator
            .sync("billing", &member, generation, Some(plan), at(3_010))
            .unwrap();
        assert!(answers.is_empty(), "no one hears it before it is stored");
        let group = coordinator.group("billing").unwrap();
        assert_eq!(group.state(), State::CompletingRebalance);
        let store = store.expect("the leader's assignment is stored");
        let stored = store.append.clone();
        let synced = coordinator.group_stored("billing", store, Ok(()), at(3_020));
        assert!(matches!(&synced[..], [Answer::Sync { result: Ok(_), .. }]));
        assert_eq!(coordinator.group("billing").unwrap().state(), State::Stable);
        let commit = coordinator
            .commit(
                "billing",
                &member,
                generation,
                &[(tp.clone(), offset(50))],
                4_000,
            )
            .unwrap();

        let mut next = Coordinator::new(50, Duration::from_secs(3));
        next.lead(partition);
        let log = stored.records.iter().chain(&commit.records);
        next.loaded(partition, log.map(|(k, v)| plain(k, Some(v))), at(20_000))
            .unwrap();
        let restored = next.group("billing").unwrap();
        assert_eq!(restored.state(), State::Stable);
        assert_eq!(restored.generation(), generation);
        assert!(
            restored.tick(at(25_000)).is_empty() && restored.state() == State::Stable,
            "its session runs from the load, not from its last heartbeat to the old one"
        );
        assert_eq!(restored.heartbeat(&member, generation, at(25_100)), Ok(()));
        assert!(next
            .commit(
                "billing",
                &member,
                generation,
                &[(tp.clone(), offset(60))],
                9_200
            )
            .is_ok());
        assert_eq!(
            next.fetch("billing", std::slice::from_ref(&tp), true)
                .unwrap(),
            [(tp, offset(50))]
        );
        let (fresh, _) = next.group("billing").unwrap().join(consumer_1(), at(9_300));
        assert_ne!(fresh, member, "a new member's id is not a restored one's");
    }

    fn tx_offsets(
        coordinator: &mut Coordinator,
        producer: u32,
        tp: &TopicPartition,
        at: i64,
    ) -> Append {
        coordinator
            .txn_commit(
                "billing",
                "",
                -1,
                (ProducerId(producer.into()), 0),
                &[(tp.clone(), offset(at))],
                0,
            )
            .unwrap()
    }

    /// Offsets sent to a transaction count only once its COMMIT marker is written; a
    /// reader that requires stable offsets is told to wait meanwhile, an older one reads
    /// the previous commit; an ABORT drops them.
    #[test]
    fn transactional_offsets_count_only_once_their_transaction_commits() {
        let (mut coordinator, partition) = leading();
        let tp = TopicPartition::new("orders", 0);
        let plain = coordinator
            .commit("billing", "", -1, &[(tp.clone(), offset(10))], 0)
            .unwrap();
        coordinator.committed(&plain).unwrap();
        let append = tx_offsets(&mut coordinator, 7, &tp, 20);
        assert_eq!(append.producer, Some((ProducerId(7), 0)));
        let fetch =
            |c: &mut Coordinator, stable| c.fetch("billing", std::slice::from_ref(&tp), stable);
        assert_eq!(
            fetch(&mut coordinator, true),
            Err(ErrorCode::UnstableOffsetCommit)
        );
        assert_eq!(
            fetch(&mut coordinator, false),
            Ok(vec![(tp.clone(), offset(10))])
        );
        coordinator.txn_commit_appended(&append, true);
        coordinator.txn_completed(partition, ProducerId(7), TxnResult::Commit);
        assert_eq!(
            fetch(&mut coordinator, true),
            Ok(vec![(tp.clone(), offset(20))])
        );

        let aborted = tx_offsets(&mut coordinator, 7, &tp, 30);
        coordinator.txn_commit_appended(&aborted, true);
        coordinator.txn_completed(partition, ProducerId(7), TxnResult::Abort);
        assert_eq!(
            fetch(&mut coordinator, true),
            Ok(vec![(tp.clone(), offset(20))])
        );

        let failed = tx_offsets(&mut coordinator, 8, &tp, 40);
        coordinator.txn_commit_appended(&failed, false);
        assert_eq!(
            fetch(&mut coordinator, true),
            Ok(vec![(tp.clone(), offset(20))]),
            "a failed append leaves nothing pending"
        );
    }

    /// KIP-447's checks: a member of the group in its generation, or no group at all.
    #[test]
    fn a_transactional_commit_from_another_generation_is_refused() {
        let (mut coordinator, _) = leading();
        let tp = TopicPartition::new("orders", 0);
        let group = coordinator.group("billing").unwrap();
        let (member, _) = group.join(consumer_1(), SimTime::ZERO);
        group.tick(SimTime::from_millis(3_000));
        let generation = coordinator.group("billing").unwrap().generation();
        let commit = |c: &mut Coordinator, member: &str, generation| {
            c.txn_commit(
                "billing",
                member,
                generation,
                (ProducerId(7), 0),
                &[(tp.clone(), offset(1))],
                0,
            )
            .map(|_| ())
        };
        assert_eq!(
            commit(&mut coordinator, &member, generation + 1),
            Err(ErrorCode::IllegalGeneration)
        );
        assert_eq!(
            commit(&mut coordinator, "nobody", generation),
            Err(ErrorCode::UnknownMemberId)
        );
        assert_eq!(commit(&mut coordinator, &member, generation), Ok(()));
        assert_eq!(
            commit(&mut coordinator, "", -1),
            Ok(()),
            "no member and no generation: a pre-2.5 producer, not checked"
        );
    }

    /// A new coordinator replays transactional offsets by their markers: committed ones
    /// count, aborted ones are gone, and those whose marker has not come stay pending.
    #[test]
    fn a_load_replays_transactional_offsets_by_their_markers() {
        let (mut old, partition) = leading();
        let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("orders", p)).collect();
        let appends: Vec<Append> = (0..3)
            .map(|i| tx_offsets(&mut old, 1 + i as u32, &tps[i], 100 + i as i64))
            .collect();
        let record = |i: usize| {
            let (key, value) = &appends[i].records[0];
            LogEntry::Record {
                transactional: Some(ProducerId(1 + i as i64)),
                key,
                value: Some(value),
            }
        };
        let marker = |pid: i64, result| LogEntry::Marker {
            producer_id: ProducerId(pid),
            result,
        };
        let log = vec![
            record(0),
            record(1),
            record(2),
            marker(1, TxnResult::Commit),
            marker(2, TxnResult::Abort),
        ];
        let mut next = Coordinator::new(50, Duration::from_secs(3));
        next.lead(partition);
        next.loaded(partition, log, SimTime::ZERO).unwrap();
        assert_eq!(
            next.fetch("billing", &tps, false),
            Ok(vec![(tps[0].clone(), offset(100))])
        );
        assert_eq!(
            next.fetch("billing", &tps[2..], true),
            Err(ErrorCode::UnstableOffsetCommit)
        );
        next.txn_completed(partition, ProducerId(3), TxnResult::Commit);
        assert_eq!(
            next.fetch("billing", &tps, true),
            Ok(vec![
                (tps[0].clone(), offset(100)),
                (tps[2].clone(), offset(102))
            ])
        );
    }
}
