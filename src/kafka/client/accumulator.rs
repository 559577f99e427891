//! The producer's record accumulator: one queue of batches per partition, as Kafka's
//! `RecordAccumulator`. Sends append to the partition's open batch; the sender drains a
//! partition's first batch once it is *ready*: full (`batch.size`), old enough
//! (`linger.ms`), due again after a retry backoff (`retry.backoff.ms`), or when the
//! producer is closing. A batch holds only message ids and timestamps: keys and values are
//! derived from the id, and the bytes are built when the batch is first drained (that is
//! when an idempotent producer assigns its sequence).

use crate::history::MessageId;
use crate::kafka::record::BATCH_HEADER_LEN;
use crate::kafka::types::ProducerId;
use crate::os::clock::SimTime;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// One send waiting in a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingRecord {
    pub id: MessageId,
    /// Record timestamp (CreateTime): `SimTime::timestamp_ms` of the send.
    pub timestamp_ms: i64,
}

/// The idempotent producer's stamp on a batch, fixed at its first drain and kept by retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sequenced {
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

/// A batch of records for one partition, and where it stands in its delivery.
#[derive(Clone, Debug)]
pub struct ProducerBatch {
    pub partition: u32,
    pub records: Vec<PendingRecord>,
    /// Estimated encoded size (Kafka's `estimatedSizeInBytes`), for `batch.size`.
    pub size_bytes: usize,
    /// When the batch was created (producer time): `linger.ms` and `delivery.timeout.ms` count from here.
    pub created: SimTime,
    /// When the last record joined it: before KIP-91 a full batch expired
    /// `request.timeout.ms` after this.
    pub last_append: SimTime,
    /// Produce requests sent for it so far.
    pub attempts: u32,
    /// Whether some attempt may have written it (an unknown outcome), so that a later
    /// definite error can no longer prove that nothing was written.
    pub maybe_written: bool,
    /// Set while the batch waits out `retry.backoff.ms` after a failed attempt.
    pub retry_at: Option<SimTime>,
    pub sequence: Option<Sequenced>,
    /// The RecordBatch bytes, built at the first drain and resent unchanged by retries.
    pub encoded: Option<Vec<u8>>,
}

impl ProducerBatch {
    fn new(partition: u32, created: SimTime) -> Self {
        ProducerBatch {
            partition,
            records: Vec::new(),
            size_bytes: BATCH_HEADER_LEN,
            created,
            last_append: created,
            attempts: 0,
            maybe_written: false,
            retry_at: None,
            sequence: None,
            encoded: None,
        }
    }

    /// A batch that has been drained once is closed to new records.
    fn is_open(&self) -> bool {
        self.encoded.is_none()
    }

    fn has_room_for(&self, record_size: usize, batch_size: usize) -> bool {
        self.records.is_empty() || self.size_bytes + record_size <= batch_size
    }
}

/// Bytes of a zigzag varint (Kafka's `ByteUtils.sizeOfVarint`).
fn varint_size(value: i64) -> usize {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    let mut bytes = 1;
    while v >= 0x80 {
        v >>= 7;
        bytes += 1;
    }
    bytes
}

/// Kafka's `DefaultRecord.sizeInBytes` for a record without headers.
pub fn record_size_bytes(
    offset_delta: usize,
    timestamp_delta: i64,
    key_len: Option<usize>,
    value_len: usize,
) -> usize {
    let key = key_len.map_or(varint_size(-1), |len| varint_size(len as i64) + len);
    let body = 1 // attributes
        + varint_size(timestamp_delta)
        + varint_size(offset_delta as i64)
        + key
        + varint_size(value_len as i64)
        + value_len
        + varint_size(0); // header count
    varint_size(body as i64) + body
}

/// When a batch waiting in the accumulator fails with a timeout.
#[derive(Clone, Copy, Debug)]
pub enum Expiry {
    /// `delivery.timeout.ms` after the batch was created (KIP-91, 2.1): any queued batch.
    Delivery(Duration),
    /// Before 2.1 (`ProducerBatch.maybeExpire`): `request.timeout.ms` after the batch was
    /// due to leave, which is its `linger.ms`, its last append once full, or the end of a
    /// retry's backoff. Only from the front of a partition with nothing in flight under
    /// `max.in.flight.requests.per.connection` = 1, stopping at the first batch not due.
    InAccumulator { request_timeout: Duration },
}

impl Expiry {
    /// What an expired batch's failure says.
    pub fn reason(self) -> &'static str {
        match self {
            Expiry::Delivery(_) => "delivery timeout (delivery.timeout.ms)",
            Expiry::InAccumulator { .. } => "expired in the accumulator (request.timeout.ms)",
        }
    }
}

/// The accumulator's configuration, from `ProducerConfig`.
#[derive(Clone, Copy, Debug)]
pub struct AccumulatorConfig {
    pub batch_size_bytes: usize,
    pub linger: Duration,
    pub idempotent: bool,
    pub expiry: Expiry,
    /// A mutation test's bug ([`Bugs::retries_enqueue_at_back`]).
    ///
    /// [`Bugs::retries_enqueue_at_back`]: crate::config::bugs::Bugs::retries_enqueue_at_back
    pub retries_at_back: bool,
    /// A mutation test's bug ([`Bugs::reenqueue_ignores_sequence`]).
    ///
    /// [`Bugs::reenqueue_ignores_sequence`]: crate::config::bugs::Bugs::reenqueue_ignores_sequence
    pub reenqueue_ignores_sequence: bool,
}

impl AccumulatorConfig {
    /// Kafka's `isFull`: closed by a drain, or at `batch.size`.
    fn is_full(&self, batch: &ProducerBatch) -> bool {
        !batch.is_open() || batch.size_bytes >= self.batch_size_bytes
    }

    /// When a batch expires under [`Expiry::InAccumulator`] (`maybeExpire`).
    fn expires_at(&self, batch: &ProducerBatch, full: bool, request_timeout: Duration) -> SimTime {
        if let Some(backoff_ends) = batch.retry_at {
            return backoff_ends + request_timeout;
        }
        let lingered = batch.created + self.linger + request_timeout;
        if full {
            lingered.min(batch.last_append + request_timeout)
        } else {
            lingered
        }
    }
}

#[derive(Debug)]
pub struct RecordAccumulator {
    config: AccumulatorConfig,
    queues: BTreeMap<u32, VecDeque<ProducerBatch>>,
    /// Partitions with a batch in flight while `max.in.flight.requests.per.connection` = 1
    /// (Kafka's `guaranteeMessageOrder`): not drained until it completes.
    muted: BTreeSet<u32>,
    /// Closing: linger no longer applies, every batch is ready.
    closing: bool,
    /// Flushing (a transaction commits): every batch is ready, as while closing.
    flushing: bool,
}

impl RecordAccumulator {
    pub fn new(config: AccumulatorConfig) -> Self {
        RecordAccumulator {
            config,
            queues: BTreeMap::new(),
            muted: BTreeSet::new(),
            closing: false,
            flushing: false,
        }
    }

    /// Whether a record of `record_size` for `partition` would have to open a new batch
    /// (the sticky partitioner moves on when it would).
    pub fn opens_new_batch(
        &self,
        partition: u32,
        key_len: Option<usize>,
        value_len: usize,
    ) -> bool {
        match self.queues.get(&partition).and_then(VecDeque::back) {
            Some(last) if last.is_open() => {
                let size = record_size_bytes(last.records.len(), 0, key_len, value_len);
                !last.has_room_for(size, self.config.batch_size_bytes)
            }
            _ => true,
        }
    }

    /// Add a record to `partition`'s open batch, opening one if needed.
    pub fn append(
        &mut self,
        partition: u32,
        record: PendingRecord,
        key_len: Option<usize>,
        value_len: usize,
        now: SimTime,
    ) {
        let queue = self.queues.entry(partition).or_default();
        let fits = |batch: &ProducerBatch, batch_size: usize| {
            let base_ts = batch
                .records
                .first()
                .map_or(record.timestamp_ms, |r| r.timestamp_ms);
            let size = record_size_bytes(
                batch.records.len(),
                record.timestamp_ms - base_ts,
                key_len,
                value_len,
            );
            (batch.is_open() && batch.has_room_for(size, batch_size)).then_some(size)
        };
        let size = match queue
            .back()
            .and_then(|b| fits(b, self.config.batch_size_bytes))
        {
            Some(size) => size,
            None => {
                queue.push_back(ProducerBatch::new(partition, now));
                record_size_bytes(0, 0, key_len, value_len)
            }
        };
        if let Some(batch) = queue.back_mut() {
            batch.records.push(record);
            batch.size_bytes += size;
            batch.last_append = now;
            // Only a record too big for `batch.size` on its own makes a batch larger.
            debug_assert!(
                batch.records.len() == 1 || batch.size_bytes <= self.config.batch_size_bytes,
                "a batch of {} records holds {} bytes, over batch.size {}",
                batch.records.len(),
                batch.size_bytes,
                self.config.batch_size_bytes
            );
        }
    }

    /// Partitions whose first batch may be sent now, in partition order.
    pub fn ready(&self, now: SimTime) -> Vec<u32> {
        self.queues
            .iter()
            .filter(|(p, _)| !self.muted.contains(p))
            .filter_map(|(&p, queue)| {
                let first = queue.front()?;
                (self.ready_at(first, queue.len()) <= now).then_some(p)
            })
            .collect()
    }

    /// Whether `partition` is among [`ready`](Self::ready) at `now`, without listing them.
    pub fn is_ready(&self, partition: u32, now: SimTime) -> bool {
        !self.muted.contains(&partition)
            && self
                .queues
                .get(&partition)
                .and_then(|queue| Some(self.ready_at(queue.front()?, queue.len()) <= now))
                .unwrap_or(false)
    }

    /// The earliest time a first batch not ready at `now` becomes ready (to sleep until).
    pub fn next_ready_time(&self, now: SimTime) -> Option<SimTime> {
        self.queues
            .iter()
            .filter(|(p, _)| !self.muted.contains(p))
            .filter_map(|(_, queue)| queue.front().map(|first| self.ready_at(first, queue.len())))
            .filter(|&at| at > now)
            .min()
    }

    fn ready_at(&self, first: &ProducerBatch, queued: usize) -> SimTime {
        if let Some(at) = first.retry_at {
            return at;
        }
        let full = queued > 1 || first.size_bytes >= self.config.batch_size_bytes;
        if full || self.closing || self.flushing {
            first.created
        } else {
            first.created + self.config.linger
        }
    }

    /// Take `partition`'s first batch for sending.
    pub fn drain(&mut self, partition: u32) -> Option<ProducerBatch> {
        let queue = self.queues.get_mut(&partition)?;
        let batch = queue.pop_front();
        if queue.is_empty() {
            self.queues.remove(&partition);
        }
        batch
    }

    /// `partition`'s first batch, the one `drain` would take.
    pub fn front(&self, partition: u32) -> Option<&ProducerBatch> {
        self.queues.get(&partition).and_then(VecDeque::front)
    }

    /// Put a batch back for a retry after `backoff`. Kafka's `reenqueue`: at the front, or,
    /// for an idempotent producer, in sequence order among the other retried batches, so
    /// that sequences reach the broker in order again.
    pub fn reenqueue(&mut self, mut batch: ProducerBatch, now: SimTime, backoff: Duration) {
        batch.retry_at = Some(now + backoff);
        let queue = self.queues.entry(batch.partition).or_default();
        let position = match (self.config.idempotent, batch.sequence) {
            (true, Some(seq)) if !self.config.reenqueue_ignores_sequence => queue
                .iter()
                .position(|b| {
                    b.sequence
                        .is_none_or(|s| s.base_sequence > seq.base_sequence)
                })
                .unwrap_or(queue.len()),
            _ if self.config.retries_at_back => queue.len(),
            _ => 0,
        };
        queue.insert(position, batch);
    }

    /// Remove and return the batches whose wait has run out (see [`Expiry`]).
    pub fn expire(&mut self, now: SimTime) -> Vec<ProducerBatch> {
        let mut expired = Vec::new();
        match self.config.expiry {
            Expiry::Delivery(timeout) => {
                let due = |batch: &ProducerBatch| now >= batch.created + timeout;
                // Called on every pass of the sender: the common case, nothing due,
                // allocates nothing.
                for queue in self.queues.values_mut().filter(|q| q.iter().any(due)) {
                    let mut kept = VecDeque::with_capacity(queue.len());
                    for batch in queue.drain(..) {
                        if due(&batch) {
                            expired.push(batch);
                        } else {
                            kept.push_back(batch);
                        }
                    }
                    *queue = kept;
                }
            }
            Expiry::InAccumulator { request_timeout } => {
                let config = &self.config;
                for (partition, queue) in &mut self.queues {
                    if self.muted.contains(partition) {
                        continue;
                    }
                    while let Some(front) = queue.front() {
                        let full = queue.len() > 1 || config.is_full(front);
                        if now < config.expires_at(front, full, request_timeout) {
                            break;
                        }
                        expired.extend(queue.pop_front());
                    }
                }
            }
        }
        self.queues.retain(|_, queue| !queue.is_empty());
        expired
    }

    /// The earliest time [`expire`](Self::expire) would remove a batch, as things stand.
    pub fn next_expiry(&self) -> Option<SimTime> {
        match self.config.expiry {
            Expiry::Delivery(timeout) => self
                .queues
                .values()
                .flatten()
                .map(|b| b.created + timeout)
                .min(),
            Expiry::InAccumulator { request_timeout } => self
                .queues
                .iter()
                .filter(|(p, _)| !self.muted.contains(p))
                .filter_map(|(_, queue)| {
                    let front = queue.front()?;
                    let full = queue.len() > 1 || self.config.is_full(front);
                    Some(self.config.expires_at(front, full, request_timeout))
                })
                .min(),
        }
    }

    pub fn expiry(&self) -> Expiry {
        self.config.expiry
    }

    /// Whether retries keep sequence order: false only under the mutation
    /// [`Bugs::reenqueue_ignores_sequence`](crate::config::bugs::Bugs::reenqueue_ignores_sequence).
    pub fn keeps_sequence_order(&self) -> bool {
        !self.config.reenqueue_ignores_sequence
    }

    pub fn mute(&mut self, partition: u32) {
        self.muted.insert(partition);
    }

    pub fn unmute(&mut self, partition: u32) {
        self.muted.remove(&partition);
    }

    /// From now on every batch is ready at once (the producer is flushing before it stops).
    pub fn close(&mut self) {
        self.closing = true;
    }

    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// Kafka's `beginFlush` (on) and the end of `awaitFlushCompletion` (off): a commit
    /// sends what lingers at once.
    pub fn set_flushing(&mut self, flushing: bool) {
        self.flushing = flushing;
    }

    /// Kafka's `abortUndrainedBatches`: remove the batches never sent (an aborted
    /// transaction's); batches already sent once stay to finish their retries.
    pub fn abort_undrained(&mut self) -> Vec<ProducerBatch> {
        let mut aborted = Vec::new();
        for queue in self.queues.values_mut() {
            let (undrained, drained): (VecDeque<_>, VecDeque<_>) =
                queue.drain(..).partition(|b| b.encoded.is_none());
            aborted.extend(undrained);
            *queue = drained;
        }
        self.queues.retain(|_, queue| !queue.is_empty());
        aborted
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn at(v: u64) -> SimTime {
        SimTime::from_millis(v)
    }

    fn record(seq: u32) -> PendingRecord {
        PendingRecord {
            id: MessageId { producer: 1, seq },
            timestamp_ms: 0,
        }
    }

    fn accumulator(
        batch_size_bytes: usize,
        linger: Duration,
        idempotent: bool,
    ) -> RecordAccumulator {
        RecordAccumulator::new(AccumulatorConfig {
            batch_size_bytes,
            linger,
            idempotent,
            expiry: Expiry::Delivery(ms(100)),
            retries_at_back: false,
            reenqueue_ignores_sequence: false,
        })
    }

    #[test]
    fn record_size_matches_kafka_default_record() {
        // attributes 1 + ts delta 1 + offset delta 1 + key len 1 + 5 + value len 1 + 10
        // + headers 1 = 21 bytes of body, plus its 1-byte length.
        assert_eq!(record_size_bytes(0, 0, Some(5), 10), 22);
        // A null key is length -1: one byte, no key bytes.
        assert_eq!(record_size_bytes(0, 0, None, 10), 17);
        assert_eq!(varint_size(63), 1);
        assert_eq!(varint_size(64), 2);
        assert_eq!(varint_size(-1), 1);
    }

    #[test]
    fn a_batch_waits_for_linger_unless_full() {
        let mut acc = accumulator(16_384, ms(5), false);
        acc.append(0, record(0), None, 64, at(10));
        assert!(acc.ready(at(14)).is_empty());
        assert!(!acc.is_ready(0, at(14)));
        assert_eq!(acc.next_ready_time(at(14)), Some(at(15)));
        assert_eq!(acc.ready(at(15)), vec![0]);
        assert!(acc.is_ready(0, at(15)) && !acc.is_ready(1, at(15)));
    }

    #[test]
    fn batch_size_closes_a_batch_and_makes_it_ready() {
        let one = record_size_bytes(0, 0, None, 64);
        let mut acc = accumulator(BATCH_HEADER_LEN + 2 * one, ms(1_000), false);
        acc.append(3, record(0), None, 64, at(0));
        acc.append(3, record(1), None, 64, at(0));
        assert!(acc.opens_new_batch(3, None, 64));
        acc.append(3, record(2), None, 64, at(0));
        assert_eq!(
            acc.ready(at(0)),
            vec![3],
            "two batches queued: the first is full"
        );
        let first = acc.drain(3).expect("a batch");
        assert_eq!(first.records.len(), 2);
        assert!(acc.ready(at(0)).is_empty(), "the second one lingers");
    }

    #[test]
    fn a_record_larger_than_batch_size_gets_its_own_batch() {
        let mut acc = accumulator(100, ms(0), false);
        acc.append(0, record(0), None, 1_000, at(0));
        let batch = acc.drain(0).expect("a batch");
        assert_eq!(batch.records.len(), 1);
        assert!(batch.size_bytes > 100);
    }

    #[test]
    fn a_drained_batch_is_closed_to_new_records() {
        let mut acc = accumulator(16_384, ms(0), false);
        acc.append(0, record(0), None, 10, at(0));
        let mut batch = acc.drain(0).expect("a batch");
        batch.encoded = Some(Vec::new());
        acc.reenqueue(batch, at(0), ms(100));
        assert!(acc.opens_new_batch(0, None, 10));
        acc.append(0, record(1), None, 10, at(0));
        assert_eq!(acc.drain(0).map(|b| b.records.len()), Some(1));
    }

    #[test]
    fn a_retried_batch_waits_out_the_backoff() {
        let mut acc = accumulator(16_384, ms(0), false);
        acc.append(0, record(0), None, 10, at(0));
        let batch = acc.drain(0).expect("a batch");
        acc.reenqueue(batch, at(50), ms(100));
        assert!(acc.ready(at(149)).is_empty());
        assert_eq!(acc.next_ready_time(at(149)), Some(at(150)));
        assert_eq!(acc.ready(at(150)), vec![0]);
    }

    /// Kafka re-enqueues a non-idempotent retry at the front: two failed in-flight batches
    /// come back in reverse order, which is how `max.in.flight > 1` reorders messages.
    #[test]
    fn non_idempotent_retries_go_to_the_front() {
        let mut acc = accumulator(16_384, ms(0), false);
        let mut in_flight = Vec::new();
        for seq in 0..2 {
            acc.append(0, record(seq), None, 10, at(0));
            let mut batch = acc.drain(0).expect("a batch");
            batch.encoded = Some(Vec::new());
            in_flight.push(batch);
        }
        for batch in in_flight {
            acc.reenqueue(batch, at(0), ms(0));
        }
        assert_eq!(acc.drain(0).map(|b| b.records[0].id.seq), Some(1));
        assert_eq!(acc.drain(0).map(|b| b.records[0].id.seq), Some(0));
    }

    #[test]
    fn idempotent_retries_keep_sequence_order() {
        let mut acc = accumulator(16_384, ms(0), true);
        let mut drained = Vec::new();
        for seq in 0..3 {
            acc.append(0, record(seq), None, 10, at(0));
            let mut batch = acc.drain(0).expect("a batch");
            batch.encoded = Some(Vec::new());
            batch.sequence = Some(Sequenced {
                producer_id: ProducerId(1),
                producer_epoch: 0,
                base_sequence: seq as i32,
            });
            drained.push(batch);
        }
        acc.append(0, record(3), None, 10, at(0));
        for batch in [drained.remove(1), drained.remove(1), drained.remove(0)] {
            acc.reenqueue(batch, at(0), ms(0));
        }
        let order: Vec<u32> = std::iter::from_fn(|| acc.drain(0))
            .map(|b| b.records[0].id.seq)
            .collect();
        assert_eq!(order, vec![0, 1, 2, 3]);
    }

    #[test]
    fn muted_partitions_are_not_ready() {
        let mut acc = accumulator(16_384, ms(0), false);
        acc.append(0, record(0), None, 10, at(0));
        acc.append(1, record(1), None, 10, at(0));
        acc.mute(0);
        assert_eq!(acc.ready(at(0)), vec![1]);
        assert!(!acc.is_ready(0, at(0)) && acc.is_ready(1, at(0)));
        acc.unmute(0);
        assert_eq!(acc.ready(at(0)), vec![0, 1]);
    }

    #[test]
    fn closing_skips_linger() {
        let mut acc = accumulator(16_384, ms(1_000), false);
        acc.append(0, record(0), None, 10, at(0));
        assert!(acc.ready(at(1)).is_empty());
        acc.close();
        assert_eq!(acc.ready(at(1)), vec![0]);
    }

    #[test]
    fn batches_expire_at_the_delivery_timeout() {
        let mut acc = accumulator(16_384, ms(1_000_000), false);
        acc.append(0, record(0), None, 10, at(0));
        acc.append(1, record(1), None, 10, at(10));
        assert_eq!(acc.next_expiry(), Some(at(100)));
        let expired = acc.expire(at(100));
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].partition, 0);
        assert!(!acc.is_empty());
        assert_eq!(acc.expire(at(110)).len(), 1);
        assert!(acc.is_empty());
    }

    fn pre_kip_91(batch_size_bytes: usize, linger: Duration) -> RecordAccumulator {
        RecordAccumulator {
            config: AccumulatorConfig {
                expiry: Expiry::InAccumulator {
                    request_timeout: ms(100),
                },
                ..accumulator(batch_size_bytes, linger, false).config
            },
            ..accumulator(batch_size_bytes, linger, false)
        }
    }

    /// Kafka 2.0's `maybeExpire`: an open batch after linger + request timeout, a full one
    /// request timeout after its last append, a retried one request timeout after its
    /// backoff; front first, stopping at the first batch not due.
    #[test]
    fn before_kip_91_a_batch_expires_by_its_wait_in_the_accumulator() {
        let mut acc = pre_kip_91(16_384, ms(50));
        acc.append(0, record(0), None, 10, at(0));
        acc.append(0, record(1), None, 10, at(30));
        assert_eq!(
            acc.next_expiry(),
            Some(at(150)),
            "open: linger + request timeout"
        );
        assert!(acc.expire(at(149)).is_empty());
        assert_eq!(acc.expire(at(150)).len(), 1);

        let mut acc = pre_kip_91(200, ms(1_000));
        acc.append(0, record(0), None, 100, at(0));
        acc.append(0, record(1), None, 100, at(20));
        assert_eq!(acc.queues[&0].len(), 2);
        assert_eq!(
            acc.next_expiry(),
            Some(at(100)),
            "full: its last append + request timeout"
        );
        assert_eq!(
            acc.expire(at(100)).len(),
            1,
            "the open batch behind is not yet due"
        );
        assert_eq!(acc.next_expiry(), Some(at(1_120)));

        let mut acc = pre_kip_91(16_384, ms(0));
        acc.append(0, record(0), None, 10, at(0));
        let batch = acc.drain(0).expect("ready");
        acc.reenqueue(batch, at(500), ms(100));
        assert_eq!(
            acc.next_expiry(),
            Some(at(700)),
            "retried: backoff end + request timeout"
        );
        acc.mute(0);
        assert_eq!(
            acc.next_expiry(),
            None,
            "nothing expires behind an in-flight batch"
        );
        assert!(acc.expire(at(10_000)).is_empty());
        acc.unmute(0);
        assert_eq!(acc.expire(at(700)).len(), 1);
    }

    proptest::proptest! {
        /// Without retries, every record is drained exactly once, in send order per
        /// partition, and a batch exceeds `batch.size` only when it holds one record.
        #[test]
        fn every_record_is_drained_once_in_order(
            sends in proptest::collection::vec((0u32..3, 0usize..200, proptest::bool::ANY), 1..200),
            batch_size_bytes in 100usize..600,
        ) {
            let mut acc = accumulator(batch_size_bytes, ms(5), false);
            let mut drained: Vec<ProducerBatch> = Vec::new();
            for (seq, &(partition, value_len, drain)) in sends.iter().enumerate() {
                let now = at(seq as u64);
                acc.append(partition, record(seq as u32), None, value_len, now);
                if drain {
                    for p in acc.ready(now) {
                        drained.extend(acc.drain(p));
                    }
                }
            }
            acc.close();
            let end = at(sends.len() as u64);
            while !acc.is_empty() {
                for p in acc.ready(end) {
                    drained.extend(acc.drain(p));
                }
            }
            for partition in 0..3 {
                let sent: Vec<u32> = sends
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.0 == partition)
                    .map(|(seq, _)| seq as u32)
                    .collect();
                let got: Vec<u32> = drained
                    .iter()
                    .filter(|b| b.partition == partition)
                    .flat_map(|b| b.records.iter().map(|r| r.id.seq))
                    .collect();
                proptest::prop_assert_eq!(sent, got);
            }
            for batch in &drained {
                proptest::prop_assert!(batch.size_bytes <= batch_size_bytes || batch.records.len() == 1);
            }
        }
    }
}
