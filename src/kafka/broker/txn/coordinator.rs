//! The transaction coordinator of one broker, as plain data: for each `__transaction_state`
//! partition it leads, the coordinator epoch (that leadership's leader epoch, which its
//! markers carry) and the transactional ids that hash to it. The async shell appends the
//! [`Write`]s it is handed (acks=all) and reports back; this decides, with [`decide`]'s
//! rules, as Kafka's `TransactionCoordinator` does over `TransactionStateManager`.
//!
//! Every transition is one record: prepared (the id is busy, other requests get
//! CONCURRENT_TRANSACTIONS), appended, and made current only once replicated, and only if
//! this broker still coordinates the partition in the same epoch; a coordinator that lost
//! the partition meanwhile answers NOT_COORDINATOR, and the new one reads the record back.

use std::collections::{BTreeMap, BTreeSet};

use super::decide::{self, EndStep, InitStep};
use super::load::{state_partition, Loaded};
use super::log_record;
use super::metadata::{TxnMetadata, TxnState, TxnTransit};
use crate::kafka::protocol::messages::{ErrorCode, TxnMarker, TxnProducer};
use crate::kafka::record::TxnResult;
use crate::kafka::types::ProducerId;
use crate::types::TopicPartition;

/// The internal topic of transactions' state, as Kafka names it.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// One `__transaction_state` partition this broker leads.
#[derive(Clone, Debug)]
struct Led {
    coordinator_epoch: i32,
    txns: BTreeMap<String, TxnMetadata>,
}

#[derive(Clone, Debug)]
pub struct Coordinator {
    /// `transaction.state.log.num.partitions`.
    partitions: u32,
    /// KAFKA-9666 (2.7): a fence whose abort could not be written is reused by the next.
    remember_failed_fence: bool,
    /// The transaction protocol: 2 (4.0) bumps the epoch at every end. The cluster's
    /// `transaction.version`; every client here speaks its cluster's.
    version: i16,
    led: BTreeMap<u32, Led>,
}

/// A transition on its way to the log, under the coordinator epoch it was decided in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub transactional_id: String,
    pub partition: u32,
    pub coordinator_epoch: i32,
    pub transit: TxnTransit,
}

impl Write {
    /// The `__transaction_state` record: key and value bytes, the value in the version
    /// the cluster's `transaction.version` writes.
    pub fn record(&self, transaction_version: i16) -> (Vec<u8>, Vec<u8>) {
        (
            log_record::encode_key(&self.transactional_id),
            log_record::encode_value(&self.transit, transaction_version),
        )
    }
}

/// An ended transaction: its markers to write on every partition it touched, then its
/// Complete record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub marker: TxnMarker,
    pub complete: Write,
}

/// What InitProducerId decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Init {
    /// Append the new epoch; answer it once written.
    Bump(Write),
    /// A transaction was open: the producer is fenced and the transaction aborted with
    /// this PrepareAbort; the client is told CONCURRENT_TRANSACTIONS and asks again.
    Abort(Write),
}

impl Coordinator {
    pub fn new(partitions: u32, remember_failed_fence: bool, version: i16) -> Self {
        Coordinator {
            partitions,
            remember_failed_fence,
            version,
            led: BTreeMap::new(),
        }
    }

    /// The cluster's `transaction.version`, which the records are written in.
    pub fn version(&self) -> i16 {
        self.version
    }

    pub fn partition_of(&self, transactional_id: &str) -> u32 {
        state_partition(transactional_id, self.partitions)
    }

    /// Whether this broker coordinates `partition` in `coordinator_epoch`: a marker or a
    /// write begun under an earlier leadership stops when this is false.
    pub fn coordinates(&self, partition: u32, coordinator_epoch: i32) -> bool {
        self.led
            .get(&partition)
            .is_some_and(|led| led.coordinator_epoch == coordinator_epoch)
    }

    /// This broker leads `partition` in `coordinator_epoch`, whose log read back as
    /// `loaded`: the transactions caught between Prepare and Complete have their markers
    /// sent again, with the new coordinator epoch.
    pub fn lead(
        &mut self,
        partition: u32,
        coordinator_epoch: i32,
        loaded: Loaded,
    ) -> Vec<Completion> {
        assert!(
            self.led
                .get(&partition)
                .is_none_or(|led| led.coordinator_epoch < coordinator_epoch),
            "partition {partition} led again in an epoch not above the last"
        );
        let Loaded {
            transactions,
            to_complete,
        } = loaded;
        let completions = to_complete
            .into_iter()
            .map(|(id, complete)| {
                let meta = &transactions[&id];
                completion(meta, partition, coordinator_epoch, complete)
            })
            .collect();
        self.led.insert(
            partition,
            Led {
                coordinator_epoch,
                txns: transactions,
            },
        );
        completions
    }

    /// This broker no longer leads `partition`: its transactions are forgotten.
    pub fn resign(&mut self, partition: u32) {
        self.led.remove(&partition);
    }

    fn led_for(&mut self, transactional_id: &str) -> Result<(u32, &mut Led), ErrorCode> {
        let partition = self.partition_of(transactional_id);
        match self.led.get_mut(&partition) {
            Some(led) => Ok((partition, led)),
            None => Err(ErrorCode::NotCoordinator),
        }
    }

    /// Whether the id has state here (`Err`: this broker does not coordinate it). An
    /// unknown id needs a producer id before [`Coordinator::init_producer_id`].
    pub fn knows(&mut self, transactional_id: &str) -> Result<bool, ErrorCode> {
        let (_, led) = self.led_for(transactional_id)?;
        Ok(led.txns.contains_key(transactional_id))
    }

    /// Kafka's `handleInitProducerId`. `new_producer_id` is the id for a transactional id
    /// seen for the first time (ignored if another request made it meanwhile).
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(ProducerId, i16)>,
        new_producer_id: Option<ProducerId>,
        now_ms: i64,
    ) -> Result<Init, ErrorCode> {
        let version = self.version;
        let (partition, led) = self.led_for(transactional_id)?;
        let coordinator_epoch = led.coordinator_epoch;
        if !led.txns.contains_key(transactional_id) {
            let producer_id = new_producer_id.ok_or(ErrorCode::CoordinatorNotAvailable)?;
            led.txns.insert(
                transactional_id.to_owned(),
                TxnMetadata::new(transactional_id, producer_id, timeout_ms, now_ms),
            );
        }
        let meta = led.txns.get_mut(transactional_id).expect("just made");
        let write = |transit| Write {
            transactional_id: transactional_id.to_owned(),
            partition,
            coordinator_epoch,
            transit,
        };
        match decide::init_producer_id(meta, timeout_ms, expected, now_ms)? {
            InitStep::Bump(transit) => Ok(Init::Bump(write(transit))),
            InitStep::FenceAndAbort(fence) => {
                let abort = abort_at(meta, fence.producer_epoch, version, now_ms);
                Ok(Init::Abort(write(abort)))
            }
        }
    }

    /// Kafka's `handleAddPartitionsToTransaction` (and AddOffsetsToTxn, with the group's
    /// offsets partition). `Ok(None)`: nothing to write, answered at once.
    pub fn add_partitions(
        &mut self,
        txn: &TxnProducer,
        partitions: &BTreeSet<TopicPartition>,
        now_ms: i64,
    ) -> Result<Option<Write>, ErrorCode> {
        let version = self.version;
        self.decide_for(txn, |meta| {
            decide::add_partitions(
                meta,
                txn.producer_id,
                txn.producer_epoch,
                partitions,
                version,
                now_ms,
            )
        })
    }

    /// Kafka's `handleVerifyPartitionsInTransaction`: a partition leader's question, answered
    /// from the metadata alone.
    pub fn verify_partitions(
        &mut self,
        txn: &TxnProducer,
        partitions: &BTreeSet<TopicPartition>,
        abortable: bool,
    ) -> Result<(), ErrorCode> {
        let (_, led) = self.led_for(&txn.transactional_id)?;
        let meta = led
            .txns
            .get(&txn.transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        decide::verify_partitions(
            meta,
            txn.producer_id,
            txn.producer_epoch,
            partitions,
            abortable,
        )
    }

    /// Kafka's `handleEndTransaction` from a client. `Ok(None)`: a retry of what already
    /// happened, answered at once.
    pub fn end_txn(
        &mut self,
        txn: &TxnProducer,
        result: TxnResult,
        now_ms: i64,
    ) -> Result<Option<Write>, ErrorCode> {
        let version = self.version;
        self.decide_for(txn, |meta| {
            let step = decide::end_txn(
                meta,
                txn.producer_id,
                txn.producer_epoch,
                result,
                true,
                version,
                now_ms,
            )?;
            Ok(match step {
                EndStep::Done => None,
                EndStep::Prepare(transit) => Some(transit),
            })
        })
    }

    /// A client's request about a known id: `decide` over its metadata, and the
    /// transition it prepares as a write under the current coordinator epoch.
    fn decide_for(
        &mut self,
        txn: &TxnProducer,
        decide: impl FnOnce(&mut TxnMetadata) -> Result<Option<TxnTransit>, ErrorCode>,
    ) -> Result<Option<Write>, ErrorCode> {
        let (partition, led) = self.led_for(&txn.transactional_id)?;
        let coordinator_epoch = led.coordinator_epoch;
        let meta = led
            .txns
            .get_mut(&txn.transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        Ok(decide(meta)?.map(|transit| Write {
            transactional_id: txn.transactional_id.clone(),
            partition,
            coordinator_epoch,
            transit,
        }))
    }

    /// Kafka's `abortTimedOutTransactions`: every ongoing transaction past its timeout,
    /// with nothing pending, is fenced and aborted; the PrepareAbort writes to make.
    /// `fence` false aborts at the producer's own epoch, as 0.11.0.0 did (KAFKA-6119): a
    /// bug to inject, since the fence is what refuses the timed-out producer's late batches.
    pub fn abort_timed_out(&mut self, now_ms: i64, fence: bool) -> Vec<Write> {
        let version = self.version;
        let mut writes = Vec::new();
        for (&partition, led) in &mut self.led {
            for (id, meta) in &mut led.txns {
                if !decide::timed_out(meta, now_ms) {
                    continue;
                }
                let epoch = if fence {
                    meta.prepare_fence_epoch().producer_epoch
                } else {
                    meta.producer_epoch
                };
                writes.push(Write {
                    transactional_id: id.clone(),
                    partition,
                    coordinator_epoch: led.coordinator_epoch,
                    transit: abort_at(meta, epoch, version, now_ms),
                });
            }
        }
        writes
    }

    /// `write`'s append finished with `appended` (the produce error, if any). Kafka's
    /// `appendTransactionToLog` callback: the transition becomes current only if this
    /// broker still coordinates in the same epoch; a failed one is dropped, except a
    /// Complete record, which is kept pending (`retry_unavailable`) while the append
    /// fails with what reads as COORDINATOR_NOT_AVAILABLE, and written again. A prepare
    /// that became current starts its completion: the markers to send.
    pub fn appended(
        &mut self,
        write: &Write,
        appended: Result<(), ErrorCode>,
        retry_unavailable: bool,
        now_ms: i64,
    ) -> Result<Option<Completion>, ErrorCode> {
        let remember_failed_fence = self.remember_failed_fence;
        let error = appended.err().map(append_error);
        let Some(led) = self
            .led
            .get_mut(&write.partition)
            .filter(|led| led.coordinator_epoch == write.coordinator_epoch)
        else {
            return Err(ErrorCode::NotCoordinator);
        };
        let Some(meta) = led.txns.get_mut(&write.transactional_id) else {
            return Err(ErrorCode::NotCoordinator);
        };
        if let Some(error) = error {
            if !(retry_unavailable && error == ErrorCode::CoordinatorNotAvailable) {
                meta.abandon(remember_failed_fence);
            }
            return Err(error);
        }
        meta.complete(write.transit.clone());
        if !matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Ok(None);
        }
        let complete = meta.prepare_complete(now_ms);
        Ok(Some(completion(
            meta,
            write.partition,
            write.coordinator_epoch,
            complete,
        )))
    }

    /// The id's current state, for tests and facts.
    pub fn metadata(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        let partition = self.partition_of(transactional_id);
        self.led.get(&partition)?.txns.get(transactional_id)
    }
}

/// How Kafka's `TransactionStateManager.appendTransactionToLog` reads a failed append:
/// the client looks for the coordinator again (NOT_COORDINATOR) or retries it
/// (COORDINATOR_NOT_AVAILABLE). Unlike the group coordinator's, a timed-out append is
/// COORDINATOR_NOT_AVAILABLE too.
fn append_error(error: ErrorCode) -> ErrorCode {
    match error {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        _ => ErrorCode::UnknownServerError,
    }
}

/// The coordinator's own abort of an ongoing transaction, at `epoch` (the fenced one, no
/// request coming between the fence and the abort): the PrepareAbort.
fn abort_at(meta: &mut TxnMetadata, epoch: i16, version: i16, now_ms: i64) -> TxnTransit {
    let producer_id = meta.producer_id;
    let step = decide::end_txn(
        meta,
        producer_id,
        epoch,
        TxnResult::Abort,
        false,
        version,
        now_ms,
    );
    match step {
        Ok(EndStep::Prepare(abort)) => abort,
        other => unreachable!("an ongoing transaction's fence always aborts: {other:?}"),
    }
}

/// The markers of a transaction in PrepareCommit or PrepareAbort, whose Complete record
/// (`complete`, pending) follows them.
fn completion(
    meta: &TxnMetadata,
    partition: u32,
    coordinator_epoch: i32,
    complete: TxnTransit,
) -> Completion {
    let result = match meta.state {
        TxnState::PrepareCommit => TxnResult::Commit,
        TxnState::PrepareAbort => TxnResult::Abort,
        other => unreachable!("markers for a transaction in {}", other.name()),
    };
    assert_eq!(
        meta.pending,
        Some(complete.state),
        "the completion is pending"
    );
    Completion {
        marker: TxnMarker {
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            result,
            coordinator_epoch,
            partitions: meta.partitions.iter().cloned().collect(),
        },
        complete: Write {
            transactional_id: meta.transactional_id.clone(),
            partition,
            coordinator_epoch,
            transit: complete,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::broker::txn::load;

    const ID: &str = "txn-1";
    const PID: ProducerId = ProducerId(1000);

    fn tp(p: u32) -> TopicPartition {
        TopicPartition::new("out", p)
    }

    /// A coordinator leading the id's partition in `epoch`, with nothing loaded.
    fn leading(epoch: i32) -> Coordinator {
        let mut c = Coordinator::new(1, true, 0);
        assert!(c.lead(0, epoch, Loaded::default()).is_empty());
        c
    }

    fn producer(epoch: i16) -> TxnProducer {
        TxnProducer {
            transactional_id: ID.to_owned(),
            producer_id: PID,
            producer_epoch: epoch,
        }
    }

    /// Init, then one partition added: an ongoing transaction at epoch 0, begun at 1 000.
    fn ongoing(c: &mut Coordinator) {
        let Init::Bump(init) = c.init_producer_id(ID, 5_000, None, Some(PID), 0).unwrap() else {
            panic!("a new id is bumped")
        };
        assert_eq!(c.appended(&init, Ok(()), false, 0), Ok(None));
        let add = c
            .add_partitions(&producer(0), &BTreeSet::from([tp(0), tp(1)]), 1_000)
            .unwrap()
            .expect("a write");
        assert_eq!(c.appended(&add, Ok(()), false, 1_000), Ok(None));
    }

    #[test]
    fn a_prepare_once_written_hands_out_its_markers_and_a_complete_record() {
        let mut c = leading(4);
        ongoing(&mut c);
        let prepare = c
            .end_txn(&producer(0), TxnResult::Commit, 2_000)
            .unwrap()
            .expect("a write");
        assert_eq!(prepare.transit.state, TxnState::PrepareCommit);
        let completion = c
            .appended(&prepare, Ok(()), false, 2_000)
            .unwrap()
            .expect("markers");
        assert_eq!(
            completion.marker,
            TxnMarker {
                producer_id: PID,
                producer_epoch: 0,
                result: TxnResult::Commit,
                coordinator_epoch: 4,
                partitions: vec![tp(0), tp(1)],
            }
        );
        assert_eq!(completion.complete.transit.state, TxnState::CompleteCommit);
        // Until the Complete record is written, the id is busy.
        assert_eq!(
            c.end_txn(&producer(0), TxnResult::Commit, 2_001),
            Err(ErrorCode::ConcurrentTransactions)
        );
        assert_eq!(
            c.appended(&completion.complete, Ok(()), true, 2_002),
            Ok(None)
        );
        assert_eq!(c.end_txn(&producer(0), TxnResult::Commit, 2_003), Ok(None));
    }

    /// A write decided under one leadership never completes under the next: the new
    /// leader's state is what it read back.
    #[test]
    fn a_write_from_an_older_leadership_is_not_coordinated() {
        let mut c = leading(0);
        let Init::Bump(init) = c.init_producer_id(ID, 5_000, None, Some(PID), 0).unwrap() else {
            panic!("a new id is bumped")
        };
        c.resign(0);
        assert!(c.lead(0, 1, Loaded::default()).is_empty());
        assert_eq!(
            c.appended(&init, Ok(()), false, 0),
            Err(ErrorCode::NotCoordinator)
        );
        assert!(c.metadata(ID).is_none());
        c.resign(0);
        assert_eq!(
            c.init_producer_id(ID, 5_000, None, Some(PID), 0),
            Err(ErrorCode::NotCoordinator)
        );
    }

    /// Kafka's `appendTransactionToLog`: a failed append frees the id; only the Complete
    /// record stays pending while the log reads as unavailable, to be written again.
    #[test]
    fn a_failed_append_frees_the_id_but_a_complete_record_waits() {
        let mut c = leading(0);
        let Init::Bump(init) = c.init_producer_id(ID, 5_000, None, Some(PID), 0).unwrap() else {
            panic!("a new id is bumped")
        };
        assert_eq!(
            c.appended(&init, Err(ErrorCode::NotEnoughReplicas), false, 0),
            Err(ErrorCode::CoordinatorNotAvailable)
        );
        assert!(!c.metadata(ID).unwrap().pending_transition_in_progress());
        c.resign(0);
        let mut c = leading(1);
        ongoing(&mut c);
        let prepare = c
            .end_txn(&producer(0), TxnResult::Abort, 2_000)
            .unwrap()
            .unwrap();
        let completion = c.appended(&prepare, Ok(()), false, 2_000).unwrap().unwrap();
        let complete = &completion.complete;
        assert_eq!(
            c.appended(complete, Err(ErrorCode::RequestTimedOut), true, 2_100),
            Err(ErrorCode::CoordinatorNotAvailable)
        );
        assert!(c.metadata(ID).unwrap().pending_transition_in_progress());
        assert_eq!(
            c.appended(complete, Err(ErrorCode::NotLeaderOrFollower), true, 2_200),
            Err(ErrorCode::NotCoordinator)
        );
        assert!(!c.metadata(ID).unwrap().pending_transition_in_progress());
    }

    /// A new instance's InitProducerId, with a transaction open: fenced (epoch + 1) and
    /// aborted in one PrepareAbort; the old epoch can no longer end anything.
    #[test]
    fn a_new_instance_fences_and_aborts_the_open_transaction() {
        let mut c = leading(0);
        ongoing(&mut c);
        let Init::Abort(abort) = c.init_producer_id(ID, 5_000, None, None, 3_000).unwrap() else {
            panic!("an open transaction is aborted")
        };
        assert_eq!(
            (abort.transit.state, abort.transit.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        let completion = c.appended(&abort, Ok(()), false, 3_000).unwrap().unwrap();
        assert_eq!(
            (completion.marker.result, completion.marker.producer_epoch),
            (TxnResult::Abort, 1)
        );
        assert_eq!(
            c.end_txn(&producer(0), TxnResult::Commit, 3_001),
            Err(ErrorCode::ProducerFenced)
        );
    }

    /// The scan aborts a transaction only once `start + timeout` has passed, strictly.
    #[test]
    fn the_timeout_fences_and_aborts_only_past_the_deadline() {
        let mut c = leading(0);
        ongoing(&mut c);
        assert!(
            c.abort_timed_out(6_000, true).is_empty(),
            "1 000 + 5 000 is not past"
        );
        let writes = c.abort_timed_out(6_001, true);
        assert_eq!(writes.len(), 1);
        assert_eq!(
            (writes[0].transit.state, writes[0].transit.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        assert!(
            c.abort_timed_out(60_000, true).is_empty(),
            "one abort at a time"
        );
    }

    /// What a coordinator reads back: a PrepareCommit left by its predecessor is completed
    /// with markers at the new coordinator epoch.
    #[test]
    fn a_loaded_prepare_commit_is_completed_under_the_new_epoch() {
        let mut old = leading(0);
        ongoing(&mut old);
        let prepare = old
            .end_txn(&producer(0), TxnResult::Commit, 2_000)
            .unwrap()
            .unwrap();
        let (key, value) = prepare.record(0);
        let loaded = load::load([(key.as_slice(), Some(value.as_slice()))], 9_000).unwrap();
        let mut new = Coordinator::new(1, true, 0);
        let completions = new.lead(0, 1, loaded);
        assert_eq!(completions.len(), 1);
        assert_eq!(completions[0].marker.coordinator_epoch, 1);
        assert_eq!(completions[0].marker.result, TxnResult::Commit);
        assert_eq!(completions[0].marker.partitions, [tp(0), tp(1)]);
        assert_eq!(
            completions[0].complete.transit.state,
            TxnState::CompleteCommit
        );
    }
}
