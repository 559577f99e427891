//! One partition's log, as Kafka's `UnifiedLog`/`LocalLog` keep it.
//!
//! ## Model
//! A directory `<topic>-<partition>` of segments (see `segment.rs`), the last of which is
//! the active one that appends go to, plus the partition's `leader-epoch-checkpoint`.
//! All state needed to serve requests (segment map, indexes, LEO, epoch cache, producer
//! state) is in memory; the bytes are in the simulated disk's page cache, and become
//! durable only through a flush or the OS flusher.
//!
//! ## Durability contract
//! Nothing here waits for a disk. A flush is a plan and a confirmation, like raft-rs's
//! `ready()`/`advance()`: [`Log::flush_plan`] lists the files and directories whose fsync
//! makes everything below `up_to` durable; the caller fsyncs them (the async Disk API) and
//! then calls [`Log::flush_done`], which advances the recovery point. Anything not below the
//! recovery point may be lost by a power failure and is re-validated by recovery.
//! - `log.flush.interval.messages`: an append that leaves that many messages above the
//!   recovery point returns `flush_needed: true`; Kafka flushes in the append path, so the
//!   broker flushes before it acknowledges.
//! - `log.flush.interval.ms`: the broker's flush scheduler compares it with
//!   [`Log::time_since_flush`].
//! - A roll leaves the old segment to be flushed: Kafka schedules that flush at once,
//!   asynchronously; [`Log::roll_flush_pending`] tells the broker to do the same.
//! - Metadata (segment files created, truncated or deleted; the epoch checkpoint renamed)
//!   is durable only with an fsync of the file or its directory, so such changes stay in
//!   every plan until a flush confirms them. Before 3.0 Kafka fsynced no directory
//!   (KAFKA-3968), and neither do plans under such a release: a name is then durable only
//!   once the file system commits it. One flush at a time: a plan is confirmed by
//!   the next `flush_done`.
//!
//! ## The leader-epoch-checkpoint
//! Kafka rewrites this file (write a temporary file, rename it over) on every change of
//! the epoch cache, in the append path, and fsyncs it there: the temporary file before the
//! rename, and from 3.0 the directory after it (KAFKA-3968). The one exception is 3.7,
//! where a rewrite after a truncation was not fsynced (KAFKA-15046, undone by KAFKA-16541
//! in 3.8): then the rename waits for the next flush plan, which fsyncs the file and the
//! directory. The fsync happens at once, without the disk's fsync latency: one per epoch
//! change. After a power loss the file may be stale or missing; recovery trims it to the
//! recovered log and re-adds the epochs of the batches it re-validated, or rebuilds it
//! from the log if it cannot be parsed.
//!
//! ## Truncation
//! Batches are atomic: truncating to an offset inside a batch removes the whole batch, so
//! the LEO afterwards may be below the requested offset. Logs are always contiguous
//! (leaders assign offsets from the LEO, followers append exactly at it), which lets
//! recovery treat any gap as damage (see `recovery.rs`).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::mem;
use std::time::Duration;

use crate::config::kafka::LogConfig;
use crate::kafka::record::{self, BatchHeader, EndTxnMarker, Record, RecordView, TxnResult};
use crate::kafka::storage::checkpoint::{self, CheckpointError, LEADER_EPOCH};
use crate::kafka::storage::epoch_cache::LeaderEpochCache;
use crate::kafka::storage::producer_state::{
    BatchSummary, CompletedTxn, MarkerCheck, ProducerStateManager, SequenceCheck, VerificationGuard,
};
use crate::kafka::storage::recovery::{self, ScanMode, SegmentBounds, SegmentScan};
use crate::kafka::storage::segment::{self, Indexing, Segment, INDEX_SUFFIX, TIME_INDEX_SUFFIX};
use crate::kafka::storage::txn_index::{AbortedTxn, TXN_INDEX_SUFFIX};
use crate::kafka::types::ProducerId;
use crate::os::clock::SimTime;
use crate::os::disk::{Disk, DiskError};
use crate::types::{Epoch, Offset, TopicPartition};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(transparent)]
    Disk(#[from] DiskError),
    #[error("corrupt log: {0}")]
    Corrupt(String),
    #[error("cannot read {file}: {error}")]
    Checkpoint {
        file: String,
        error: CheckpointError,
    },
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: Offset,
        log_start_offset: Offset,
        log_end_offset: Offset,
    },
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error("out of order sequence number")]
    OutOfOrderSequence,
    #[error("duplicate sequence number")]
    DuplicateSequence,
    /// A plain write from a producer with a transaction open on the partition.
    #[error("invalid transaction state")]
    InvalidTxnState,
    /// A marker from an older producer epoch than the partition has seen.
    #[error("invalid producer epoch")]
    InvalidProducerEpoch,
    /// A marker from a transaction coordinator older than the last one seen.
    #[error("transaction coordinator fenced")]
    TransactionCoordinatorFenced,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Written; `flush_needed` when `log.flush.interval.messages` is reached (Kafka flushes
    /// before it answers).
    Appended {
        first_offset: Offset,
        last_offset: Offset,
        flush_needed: bool,
    },
    /// An idempotent producer's retry of a batch already in the log, at these offsets.
    Duplicate {
        first_offset: Offset,
        last_offset: Offset,
    },
}

/// Files to fsync to make everything below `up_to` durable (segment `.log`/`.index`/
/// `.timeindex`, dirs of new segments, the partition's leader-epoch-checkpoint when it
/// changed). Fsync the files first, then the dirs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushPlan {
    pub files: Vec<String>,
    pub dirs: Vec<String>,
    pub up_to: Offset,
}

/// Metadata changes not yet made durable, each stamped with a sequence number so that a
/// confirmation clears only what its plan covered.
#[derive(Debug, Default)]
struct PendingMetadata {
    seq: u64,
    files: BTreeMap<String, u64>,
    dir: Option<u64>,
    /// The sequence number the latest plan covered.
    planned: Cell<u64>,
}

impl PendingMetadata {
    fn file(&mut self, path: &str) {
        self.seq += 1;
        self.files.insert(path.to_owned(), self.seq);
    }

    fn dir(&mut self) {
        self.seq += 1;
        self.dir = Some(self.seq);
    }

    fn deleted(&mut self, path: &str) {
        self.files.remove(path);
        self.dir();
    }

    fn confirm(&mut self) {
        let planned = self.planned.get();
        self.files.retain(|_, seq| *seq > planned);
        self.dir = self.dir.filter(|seq| *seq > planned);
    }
}

/// Why the epoch cache changed, which decides whether the checkpoint is fsynced at once.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// An epoch was added (a leader's first append or election, a follower's append), or
    /// the cache was emptied with the log.
    NewEpoch,
    /// Entries were removed: a truncation of the log's end or start, or recovery.
    Truncation,
}

pub struct Log {
    disk: Disk,
    tp: TopicPartition,
    dir: String,
    config: LogConfig,
    /// Never empty: the last segment is the active one.
    segments: BTreeMap<Offset, Segment>,
    log_start_offset: Offset,
    log_end_offset: Offset,
    recovery_point: Offset,
    epochs: LeaderEpochCache,
    producer_state: ProducerStateManager,
    last_flush: SimTime,
    pending: PendingMetadata,
    /// Truncations so far, and as of the latest plan: a plan taken before a truncation
    /// must not advance the recovery point over data written after it.
    truncations: u64,
    planned_truncations: Cell<u64>,
}

impl Log {
    /// Open (create if missing) the log of `tp` under `disk`, running recovery unless `clean_shutdown`.
    pub fn open(
        disk: &Disk,
        tp: &TopicPartition,
        config: LogConfig,
        recovery_point: Offset,
        log_start_offset: Offset,
        clean_shutdown: bool,
        now: SimTime,
    ) -> Result<Log, StorageError> {
        let dir = tp.dir_name();
        let mut log = Log {
            disk: disk.clone(),
            tp: tp.clone(),
            dir,
            config,
            segments: BTreeMap::new(),
            log_start_offset,
            log_end_offset: log_start_offset,
            recovery_point,
            epochs: LeaderEpochCache::default(),
            producer_state: ProducerStateManager::default(),
            last_flush: now,
            pending: PendingMetadata::default(),
            truncations: 0,
            planned_truncations: Cell::new(0),
        };
        let bases = log.remove_stray_files()?;
        let mut headers = if bases.is_empty() {
            let base = Offset(log_start_offset.0.max(0));
            log.add_segment(base, now)?;
            LoadedHeaders::default()
        } else {
            log.load_segments(&bases, clean_shutdown, now)?
        };
        log.log_end_offset = log.active().next_offset();
        log.log_start_offset = log.log_start_offset.max(log.first().base_offset());
        if log.log_start_offset > log.log_end_offset {
            // The log lost everything up to its checkpointed start (a power loss undid
            // the segment files written after a `truncate_fully_and_start_at`).
            log.truncate_fully_and_start_at(log.log_start_offset, now)?;
            headers = LoadedHeaders::default();
        }
        log.recovery_point = recovery_point.clamp(log.first().base_offset(), log.log_end_offset);
        log.load_epochs(&headers)?;
        let (producer_state, completed) = ProducerStateManager::rebuild(headers.all.iter());
        log.producer_state = producer_state;
        log.rebuild_txn_indexes(&headers.txn_rebuild, &completed)?;
        log.inherit_unflushed_state();
        Ok(log)
    }

    /// Recovery's `txnIndex.reset()` and replay: each of `bases` gets the aborts whose
    /// marker it holds, as the replay of the whole log completed them.
    fn rebuild_txn_indexes(
        &mut self,
        bases: &[Offset],
        completed: &[CompletedTxn],
    ) -> Result<(), StorageError> {
        for base in bases {
            let Some(segment) = self.segments.get_mut(base) else {
                continue;
            };
            let end = segment.next_offset();
            let aborts = completed
                .iter()
                .filter(|t| t.result == TxnResult::Abort)
                .filter(|t| t.last_offset >= *base && t.last_offset < end)
                .map(AbortedTxn::of);
            if segment.rebuild_txn_index(&self.disk, aborts)? {
                self.pending.file(segment.txn_index_path());
            }
        }
        Ok(())
    }

    /// The page cache outlives a process: what the previous incarnation wrote but never
    /// fsynced (appends, truncations, deletions, the epoch checkpoint) is still dirty, and
    /// only this incarnation's flushes can make it durable. So the first plan covers every
    /// segment from the one holding the recovery point, the checkpoint and the directory.
    fn inherit_unflushed_state(&mut self) {
        let bases = self.segment_bases();
        let from = bases[recovery::first_segment_to_scan(&bases, self.recovery_point)];
        let paths: Vec<String> = self
            .segments
            .range(from..)
            .flat_map(|(_, segment)| segment.paths().map(str::to_owned))
            .collect();
        for path in paths {
            self.pending.file(&path);
        }
        let checkpoint = self.epoch_checkpoint_path();
        if self.disk.exists(&checkpoint) {
            self.pending.file(&checkpoint);
        }
        self.pending.dir();
    }

    /// Delete what a crash can leave besides segments: temporary checkpoint files and
    /// index files whose `.log` is gone. Returns the segments' base offsets, in order.
    fn remove_stray_files(&mut self) -> Result<Vec<Offset>, StorageError> {
        let names = self.disk.list(&self.dir);
        let bases: Vec<Offset> = names
            .iter()
            .filter_map(|n| segment::parse_log_file_name(n))
            .collect();
        let base_set: BTreeSet<Offset> = bases.iter().copied().collect();
        for name in &names {
            let orphan_index = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
                .iter()
                .any(|suffix| {
                    name.strip_suffix(suffix)
                        .and_then(|stem| {
                            segment::parse_log_file_name(&format!("{stem}{}", segment::LOG_SUFFIX))
                        })
                        .is_some_and(|base| !base_set.contains(&base))
                });
            if orphan_index || name.ends_with(".tmp") {
                let path = format!("{}/{name}", self.dir);
                self.disk.delete(&path)?;
                self.pending.deleted(&path);
            }
        }
        Ok(bases)
    }

    /// Scan the segments (headers only below the recovery point after a clean shutdown,
    /// full validation from the segment holding it otherwise), cut the log at the first
    /// invalid byte, and load what remains.
    fn load_segments(
        &mut self,
        bases: &[Offset],
        clean_shutdown: bool,
        now: SimTime,
    ) -> Result<LoadedHeaders, StorageError> {
        let first_scanned = if clean_shutdown {
            bases.len()
        } else {
            recovery::first_segment_to_scan(bases, self.recovery_point)
        };
        let mut scans: Vec<SegmentScan> = Vec::with_capacity(bases.len());
        let mut summaries: Vec<Vec<BatchSummary>> = Vec::with_capacity(bases.len());
        for (i, base) in bases.iter().enumerate() {
            let bytes = self.disk.read_all(&self.segment_path(*base))?;
            let mode = if i < first_scanned || self.config.bugs.skip_crc_on_recovery {
                ScanMode::Trusted
            } else {
                ScanMode::Validate
            };
            let bounds = SegmentBounds {
                base: *base,
                expected: scans
                    .last()
                    .map_or(*base, |s: &SegmentScan| s.next_offset(bases[i - 1])),
                next_base: bases.get(i + 1).copied(),
            };
            let scan = recovery::scan_segment(&bytes, bounds, mode);
            let invalid = scan.invalid.is_some();
            summaries.push(
                scan.batches
                    .iter()
                    .map(|b| {
                        let at = b.position as usize;
                        BatchSummary::of(b.header, &bytes[at..at + b.header.size_bytes()])
                    })
                    .collect::<Vec<_>>(),
            );
            scans.push(scan);
            if invalid {
                break;
            }
        }
        let plan = recovery::plan_recovery(&scans);
        for base in &bases[plan.delete_from..] {
            for suffix in [
                segment::LOG_SUFFIX,
                INDEX_SUFFIX,
                TIME_INDEX_SUFFIX,
                TXN_INDEX_SUFFIX,
            ] {
                let path = format!("{}/{}", self.dir, segment::file_name(*base, suffix));
                if self.disk.exists(&path) {
                    self.disk.delete(&path)?;
                }
                self.pending.deleted(&path);
            }
        }
        let mut headers = LoadedHeaders::default();
        for (i, scan) in scans.iter().enumerate().take(plan.delete_from) {
            let base = bases[i];
            let truncated = plan.truncate == Some(i) || scan.stale_tail;
            if truncated {
                self.disk
                    .set_len(&self.segment_path(base), scan.valid_bytes)?;
            }
            let trust_indexes = i < first_scanned && !truncated;
            let mut segment = Segment::load(
                &self.disk,
                &self.dir,
                base,
                scan,
                self.indexing(),
                trust_indexes,
                now,
            )?;
            if truncated || !trust_indexes {
                for path in segment.paths() {
                    self.pending.file(path);
                }
            }
            if !trust_indexes || !segment.read_txn_index(&self.disk)? {
                headers.txn_rebuild.push(base);
            }
            self.segments.insert(base, segment);
            headers.all.extend_from_slice(&summaries[i]);
            if i >= first_scanned {
                headers.scanned_from.get_or_insert(base);
                headers
                    .scanned
                    .extend(scan.batches.iter().map(|b| b.header));
            }
        }
        Ok(headers)
    }

    /// Load the epoch cache from its checkpoint and make it agree with the recovered log:
    /// entries from the first re-validated offset on are dropped and re-derived from the
    /// batches there (a deferred checkpoint write may have missed them, or a power loss
    /// undone a truncation it recorded). A missing or empty checkpoint is an empty cache,
    /// as in Kafka, which does not re-derive the epochs of batches below the recovery point;
    /// an unreadable one fails the load (Kafka's `LeaderEpochFileCache` throws
    /// `KafkaStorageException` and takes the log dir offline).
    fn load_epochs(&mut self, headers: &LoadedHeaders) -> Result<(), StorageError> {
        let path = self.epoch_checkpoint_path();
        let unreadable = |error| StorageError::Checkpoint {
            file: path.clone(),
            error,
        };
        let loaded = checkpoint::read_text(&self.disk, &path)
            .and_then(|text| {
                text.map(|t| LeaderEpochCache::from_checkpoint(&t))
                    .transpose()
            })
            .map_err(unreadable)?;
        let before = loaded.as_ref().map(LeaderEpochCache::to_checkpoint);
        let mut epochs = loaded.unwrap_or_default();
        let replay = &headers.scanned;
        epochs.truncate_from_end(
            headers
                .scanned_from
                .unwrap_or(self.log_end_offset)
                .min(self.log_end_offset),
        );
        let mut added = false;
        for header in replay {
            if header.partition_leader_epoch >= Epoch(0) {
                added |= epochs.assign(header.partition_leader_epoch, header.base_offset);
            }
        }
        epochs.truncate_from_start(self.log_start_offset);
        self.epochs = epochs;
        if before.as_deref() != Some(self.epochs.to_checkpoint().as_str()) {
            let change = if added {
                Change::NewEpoch
            } else {
                Change::Truncation
            };
            self.write_epoch_checkpoint(change)?;
        }
        Ok(())
    }

    pub fn tp(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    /// The LEO: the offset the next appended record gets.
    pub fn log_end_offset(&self) -> Offset {
        self.log_end_offset
    }

    /// Everything below it has been fsynced; recovery re-validates from its segment on.
    pub fn recovery_point(&self) -> Offset {
        self.recovery_point
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The segments' base offsets, oldest first (the last is the active segment).
    pub fn segment_bases(&self) -> Vec<Offset> {
        self.segments.keys().copied().collect()
    }

    /// Bytes of record batches held, over all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size_bytes).sum()
    }

    /// Leader: validate CRC, check producer sequence, assign offsets from LEO, stamp `epoch`, append.
    pub fn append_as_leader(
        &mut self,
        batch: Vec<u8>,
        epoch: Epoch,
        now: SimTime,
    ) -> Result<AppendOutcome, StorageError> {
        self.append_verified_as_leader(batch, epoch, now, None)
    }

    /// [`Log::append_as_leader`] for a batch that may start a transaction under
    /// verification: `guard` is what [`Log::start_verification`] handed out for it.
    pub fn append_verified_as_leader(
        &mut self,
        batch: Vec<u8>,
        epoch: Epoch,
        now: SimTime,
        guard: Option<VerificationGuard>,
    ) -> Result<AppendOutcome, StorageError> {
        let header = one_batch(&batch)?;
        if header.is_control() {
            // Kafka's `LogValidator`: "Clients are not allowed to write control records".
            return Err(StorageError::InvalidRecord(
                "a client may not write a control batch".into(),
            ));
        }
        let check = if self.config.bugs.ignore_sequences {
            SequenceCheck::Accept
        } else {
            self.producer_state.check(&header)
        };
        // Kafka answers a retry with its offsets first, then refuses an unverified batch,
        // then judges epoch and sequence.
        let v2 = self.config.transaction_version_2;
        if (self.config.transaction_verification || v2)
            && !self.config.bugs.skip_partition_verification
            && !matches!(check, SequenceCheck::Duplicate { .. })
            && !self.producer_state.verified(&header, guard, v2)
        {
            return Err(StorageError::InvalidTxnState);
        }
        match check {
            SequenceCheck::Accept => {}
            SequenceCheck::Duplicate {
                first_offset,
                last_offset,
            } => {
                return Ok(AppendOutcome::Duplicate {
                    first_offset,
                    last_offset,
                });
            }
            SequenceCheck::OutOfOrder => return Err(StorageError::OutOfOrderSequence),
            SequenceCheck::DuplicateSequence => return Err(StorageError::DuplicateSequence),
            SequenceCheck::InvalidTxnState => return Err(StorageError::InvalidTxnState),
        }
        self.append_stamped(batch, header, None, epoch, now)
    }

    /// Leader, verification on: the guard a transactional batch of `producer_id` at
    /// `epoch` needs to start a transaction here, or `None` if it continues one (KIP-890).
    pub fn start_verification(
        &mut self,
        producer_id: ProducerId,
        epoch: i16,
    ) -> Option<VerificationGuard> {
        let v2 = self.config.transaction_version_2;
        debug_assert!(self.config.transaction_verification || v2);
        self.producer_state
            .start_verification(producer_id, v2.then_some(epoch))
    }

    /// Leader: a coordinator's own batch (origin COORDINATOR: the group coordinator's
    /// offsets, the transaction coordinator's state). A transactional one (TxnOffsetCommit)
    /// has its producer epoch checked, not its sequence.
    pub fn append_as_coordinator(
        &mut self,
        batch: Vec<u8>,
        epoch: Epoch,
        now: SimTime,
    ) -> Result<AppendOutcome, StorageError> {
        let header = one_batch(&batch)?;
        assert!(!header.is_control(), "a coordinator writes data batches");
        if self
            .producer_state
            .check_coordinator_batch(&header)
            .is_err()
        {
            return Err(StorageError::InvalidProducerEpoch);
        }
        self.append_stamped(batch, header, None, epoch, now)
    }

    /// Leader: a transaction coordinator's marker for `producer_id` (WriteTxnMarkers),
    /// stamped with the broker's clock, after Kafka's producer-epoch and coordinator-epoch
    /// checks. A marker ends the producer's transaction on this partition, if one is open.
    pub fn append_marker_as_leader(
        &mut self,
        producer_id: ProducerId,
        producer_epoch: i16,
        marker: EndTxnMarker,
        epoch: Epoch,
        now: SimTime,
    ) -> Result<AppendOutcome, StorageError> {
        match self
            .producer_state
            .check_marker(producer_id, producer_epoch, &marker)
        {
            MarkerCheck::Accept => {}
            MarkerCheck::InvalidProducerEpoch => return Err(StorageError::InvalidProducerEpoch),
            MarkerCheck::CoordinatorFenced => {
                return Err(StorageError::TransactionCoordinatorFenced)
            }
        }
        let batch = marker.batch(now.timestamp_ms(), producer_id, producer_epoch);
        let header = record::parse_header(&batch).expect("a marker batch parses");
        self.append_stamped(batch, header, Some(marker), epoch, now)
    }

    /// A leader's append: offsets from the LEO, stamped with its epoch.
    fn append_stamped(
        &mut self,
        mut batch: Vec<u8>,
        mut header: BatchHeader,
        marker: Option<EndTxnMarker>,
        epoch: Epoch,
        now: SimTime,
    ) -> Result<AppendOutcome, StorageError> {
        let first_offset = self.log_end_offset;
        record::set_base_offset(&mut batch, first_offset);
        record::set_partition_leader_epoch(&mut batch, epoch);
        header.base_offset = first_offset;
        header.partition_leader_epoch = epoch;
        self.append_batch(&batch, &header, now)?;
        if self.epochs.assign(epoch, first_offset) {
            self.write_epoch_checkpoint(Change::NewEpoch)?;
        }
        self.apply_to_producer_state(&BatchSummary { header, marker })?;
        Ok(AppendOutcome::Appended {
            first_offset,
            last_offset: header.last_offset(),
            flush_needed: self.flush_needed(),
        })
    }

    /// Producer state takes an appended batch; an abort it completes is indexed in the
    /// segment holding its marker, the active one (Kafka's `updateTxnIndex`).
    fn apply_to_producer_state(&mut self, batch: &BatchSummary) -> Result<(), StorageError> {
        let Some(txn) = self.producer_state.update(batch) else {
            return Ok(());
        };
        if txn.result == TxnResult::Abort {
            let (disk, active) = self.active_mut();
            if active.append_aborted(disk, AbortedTxn::of(&txn))? {
                let path = active.txn_index_path().to_owned();
                self.pending.file(&path);
            }
        }
        Ok(())
    }

    /// Follower: batches keep the leader's offsets and epochs; must start at LEO and be
    /// contiguous. All batches are validated before any is written. Returns the new LEO.
    pub fn append_as_follower(
        &mut self,
        batches: &[u8],
        now: SimTime,
    ) -> Result<Offset, StorageError> {
        let mut checked: Vec<(usize, BatchHeader)> = Vec::new();
        let mut expected = self.log_end_offset;
        let mut validated = record::batches(batches)
            .map(|item| item.map(|(position, header, _)| (position, header)));
        let mut unchecked;
        let items: &mut dyn Iterator<Item = Result<_, record::RecordError>> =
            if self.config.bugs.follower_skips_crc {
                unchecked = unchecked_batches(batches).into_iter();
                &mut unchecked
            } else {
                &mut validated
            };
        for item in items {
            let (position, header) =
                item.map_err(|e| StorageError::InvalidRecord(e.to_string()))?;
            if header.base_offset != expected {
                return Err(StorageError::InvalidRecord(format!(
                    "batch at offset {} where {expected} was expected",
                    header.base_offset
                )));
            }
            expected = header.next_offset();
            checked.push((position, header));
        }
        let mut epochs_changed = false;
        for (position, header) in checked {
            self.append_batch(
                &batches[position..position + header.size_bytes()],
                &header,
                now,
            )?;
            if header.partition_leader_epoch >= Epoch(0) {
                epochs_changed |= self
                    .epochs
                    .assign(header.partition_leader_epoch, header.base_offset);
            }
            let bytes = &batches[position..position + header.size_bytes()];
            self.apply_to_producer_state(&BatchSummary::of(header, bytes))?;
        }
        debug_assert_eq!(
            self.log_end_offset, expected,
            "the LEO is past the last batch appended"
        );
        if epochs_changed {
            self.write_epoch_checkpoint(Change::NewEpoch)?;
        }
        Ok(self.log_end_offset)
    }

    /// Write one batch whose offsets are assigned, rolling first if it would not fit.
    fn append_batch(
        &mut self,
        batch: &[u8],
        header: &BatchHeader,
        now: SimTime,
    ) -> Result<(), StorageError> {
        debug_assert_eq!(
            header.base_offset, self.log_end_offset,
            "offsets must be contiguous"
        );
        debug_assert!(
            header.next_offset() > header.base_offset,
            "a batch's offsets must increase"
        );
        if self.should_roll(batch.len(), header.last_offset(), now) {
            self.roll(now)?;
        }
        let indexing = self.indexing();
        let (disk, active) = self.active_mut();
        active.append(disk, batch, header, indexing)?;
        self.log_end_offset = header.next_offset();
        Ok(())
    }

    /// Kafka's `shouldRoll`: a non-empty active segment is closed when the batch would
    /// take it past `segment.bytes`, when it is older than `roll.ms`, or when the batch's
    /// offsets or position no longer fit its index entries.
    fn should_roll(&self, batch_bytes: usize, last_offset: Offset, now: SimTime) -> bool {
        let active = self.active();
        if active.is_empty() {
            return false;
        }
        active.size_bytes() + batch_bytes as u64 > self.config.segment_bytes
            || active.age(now) >= self.config.roll
            || !active.fits(last_offset, batch_bytes)
    }

    fn roll(&mut self, now: SimTime) -> Result<(), StorageError> {
        let (disk, active) = self.active_mut();
        active.close(disk)?;
        self.add_segment(self.log_end_offset, now)
    }

    fn add_segment(&mut self, base: Offset, now: SimTime) -> Result<(), StorageError> {
        let segment = Segment::create(&self.disk, &self.dir, base, now)?;
        for path in segment.paths() {
            self.pending.file(path);
        }
        self.pending.dir();
        self.segments.insert(base, segment);
        Ok(())
    }

    /// Whole batches from `from`, at least one if any (Kafka's rule), up to `max_bytes`, all
    /// ending below `upper_bound`. Like Kafka, one read serves from one segment.
    pub fn read(
        &self,
        from: Offset,
        max_bytes: u64,
        upper_bound: Offset,
    ) -> Result<Vec<u8>, StorageError> {
        if from < self.log_start_offset || from > self.log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                offset: from,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let mut out = Vec::new();
        let start = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(self.first().base_offset(), |(base, _)| *base);
        for segment in self.segments.range(start..).map(|(_, s)| s) {
            if from >= segment.next_offset() {
                continue;
            }
            let Some((position, first)) = segment.translate_offset(&self.disk, from)? else {
                return Err(StorageError::Corrupt(format!(
                    "{}: no batch holds offset {from} below the segment's end {}",
                    segment.log_path(),
                    segment.next_offset()
                )));
            };
            segment.read_from(
                &self.disk,
                position,
                &first,
                max_bytes,
                upper_bound,
                &mut out,
            )?;
            break;
        }
        Ok(out)
    }

    /// Remove every record at or above `offset` (a batch holding it is removed whole).
    /// `now` stamps the new segment if the truncation starts the log afresh.
    pub fn truncate_to(&mut self, offset: Offset, now: SimTime) -> Result<(), StorageError> {
        if offset >= self.log_end_offset {
            return Ok(());
        }
        if offset < self.log_start_offset {
            return self.truncate_fully_and_start_at(offset, now);
        }
        self.truncations += 1;
        let doomed: Vec<Offset> = self
            .segments
            .range(offset..)
            .map(|(base, _)| *base)
            .filter(|base| *base > self.first().base_offset())
            .collect();
        for base in doomed {
            self.delete_segment(base)?;
        }
        let (disk, active) = self.active_mut();
        if let Some((position, header)) = active.translate_offset(disk, offset)? {
            active.truncate_to(disk, position, header.base_offset)?;
            let paths: Vec<String> = active.paths().map(str::to_owned).collect();
            for path in paths {
                self.pending.file(&path);
            }
        }
        self.log_end_offset = self.active().next_offset();
        // A batch holding the log start offset may have gone whole.
        self.log_start_offset = self.log_start_offset.min(self.log_end_offset);
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        let before = self.epochs.to_checkpoint();
        self.epochs.truncate_from_end(self.log_end_offset);
        if self.epochs.to_checkpoint() != before {
            self.write_epoch_checkpoint(Change::Truncation)?;
        }
        self.rebuild_producer_state()
    }

    /// Delete the whole log and start it again, empty, at `offset` (a follower whose fetch
    /// offset fell below the leader's log start, or out of range).
    pub fn truncate_fully_and_start_at(
        &mut self,
        offset: Offset,
        now: SimTime,
    ) -> Result<(), StorageError> {
        self.truncations += 1;
        let bases = self.segment_bases();
        for base in bases {
            self.delete_segment(base)?;
        }
        self.add_segment(offset, now)?;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        self.epochs = LeaderEpochCache::default();
        self.write_epoch_checkpoint(Change::NewEpoch)?;
        self.producer_state = ProducerStateManager::default()
            .with_verifications_of(mem::take(&mut self.producer_state));
        Ok(())
    }

    fn delete_segment(&mut self, base: Offset) -> Result<(), StorageError> {
        if let Some(segment) = self.segments.remove(&base) {
            segment.delete(&self.disk)?;
            for path in segment.paths() {
                self.pending.deleted(path);
            }
        }
        Ok(())
    }

    fn rebuild_producer_state(&mut self) -> Result<(), StorageError> {
        let mut batches = Vec::new();
        for segment in self.segments.values() {
            batches.extend(segment.batches(&self.disk)?);
        }
        // The aborts it completes are in the transaction indexes already, which truncation
        // cut where it cut the log.
        self.producer_state = ProducerStateManager::rebuild(batches.iter())
            .0
            .with_verifications_of(mem::take(&mut self.producer_state));
        Ok(())
    }

    /// Files to fsync (then directories) so that everything below the current LEO is
    /// durable: every segment holding offsets above the recovery point, every file and the
    /// directory whose metadata changed since the last confirmed flush.
    pub fn flush_plan(&self) -> FlushPlan {
        let mut files: BTreeSet<&str> = self.pending.files.keys().map(String::as_str).collect();
        for segment in self.segments.values().rev() {
            if segment.next_offset() <= self.recovery_point {
                break;
            }
            files.extend(segment.paths());
        }
        self.pending.planned.set(self.pending.seq);
        self.planned_truncations.set(self.truncations);
        FlushPlan {
            files: files.into_iter().map(str::to_owned).collect(),
            dirs: self
                .pending
                .dir
                .filter(|_| self.config.dir_fsync)
                .map(|_| self.dir.clone())
                .into_iter()
                .collect(),
            up_to: self.log_end_offset,
        }
    }

    /// The latest plan's fsyncs are done: advance the recovery point to `up_to` (unless a
    /// truncation since the plan rewrote offsets below it). `now`, when the fsyncs
    /// finished, starts the next `log.flush.interval.ms`.
    pub fn flush_done(&mut self, up_to: Offset, now: SimTime) {
        self.pending.confirm();
        if self.planned_truncations.get() == self.truncations {
            self.recovery_point = self.recovery_point.max(up_to.min(self.log_end_offset));
        }
        self.last_flush = now;
    }

    /// For `log.flush.interval.ms`: time since the last confirmed flush (or the open).
    pub fn time_since_flush(&self, now: SimTime) -> Duration {
        now - self.last_flush
    }

    /// Messages above the recovery point (Kafka's `unflushedMessages`).
    pub fn unflushed_messages(&self) -> u64 {
        u64::try_from(self.log_end_offset.0 - self.recovery_point.0).unwrap_or(0)
    }

    /// `log.flush.interval.messages` is reached: the append path must flush (the leader's
    /// append reports it as `flush_needed`; a follower's append asks here).
    pub fn flush_needed(&self) -> bool {
        self.unflushed_messages() >= self.config.flush_interval_messages
    }

    /// A closed segment still holds data above the recovery point: after a roll Kafka
    /// flushes the old segment at once, asynchronously (not before acknowledging).
    pub fn roll_flush_pending(&self) -> bool {
        self.segments.len() > 1 && self.active().base_offset() > self.recovery_point
    }

    pub fn epochs(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    /// Becoming leader: the new epoch starts at the LEO.
    pub fn assign_epoch(&mut self, epoch: Epoch, start_offset: Offset) -> Result<(), StorageError> {
        if self.epochs.assign(epoch, start_offset) {
            self.write_epoch_checkpoint(Change::NewEpoch)?;
        }
        Ok(())
    }

    /// Where the oldest unstable transaction starts (never below the log start): the
    /// partition's LSO is this or its HW, whichever is lower.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.producer_state
            .first_unstable_offset()
            .map(|offset| offset.max(self.log_start_offset))
    }

    /// Transactions whose marker is below the new HW are stable (Kafka's
    /// `updateHighWatermarkMetadata` telling the producer state).
    pub fn on_high_watermark_updated(&mut self, high_watermark: Offset) {
        self.producer_state
            .on_high_watermark_updated(high_watermark);
    }

    /// The aborted transactions a `read_committed` fetch from `from` up to `upper_bound`
    /// must filter: Kafka's `collectAbortedTransactions`, from the segment holding `from`
    /// onwards, until an entry's LSO shows that later segments cannot matter.
    pub fn collect_aborted_txns(&self, from: Offset, upper_bound: Offset) -> Vec<AbortedTxn> {
        let start = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(self.first().base_offset(), |(base, _)| *base);
        let mut out = Vec::new();
        for segment in self.segments.range(start..).map(|(_, s)| s) {
            if segment.txn_index().collect(from, upper_bound, &mut out) {
                break;
            }
        }
        out
    }

    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }

    /// Delete whole closed segments, oldest first, while one is wholly below the log start
    /// offset, older than `retention.ms` or beyond `retention.bytes`; never the active one,
    /// and, as in Kafka, only segments wholly below the high watermark (a follower must be
    /// able to fetch what is not yet committed). Returns how many were deleted.
    pub fn enforce_retention(
        &mut self,
        high_watermark: Offset,
        now: SimTime,
    ) -> Result<usize, StorageError> {
        let mut deleted = 0;
        let mut size = self.size_bytes();
        while let Some((head, next_base)) = self.deletable_head() {
            let below_start = next_base <= self.log_start_offset;
            let expired = self.config.retention.is_some_and(|retention| {
                head.max_timestamp != i64::MIN
                    && now.since_timestamp_ms(head.max_timestamp) > retention
            });
            let oversized = self.config.retention_bytes >= 0
                && size.saturating_sub(head.size_bytes) >= self.config.retention_bytes as u64;
            if next_base > high_watermark || !(below_start || expired || oversized) {
                break;
            }
            size -= head.size_bytes;
            self.delete_segment(head.base_offset)?;
            self.log_start_offset = self.log_start_offset.max(next_base);
            deleted += 1;
        }
        if deleted > 0 {
            self.recovery_point = self.recovery_point.max(self.log_start_offset);
            let before = self.epochs.to_checkpoint();
            self.epochs.truncate_from_start(self.log_start_offset);
            if self.epochs.to_checkpoint() != before {
                self.write_epoch_checkpoint(Change::Truncation)?;
            }
        }
        Ok(deleted)
    }

    /// The oldest segment if it is closed, with the base offset of its successor.
    fn deletable_head(&self) -> Option<(HeadSegment, Offset)> {
        let mut iter = self.segments.values();
        let head = iter.next()?;
        let next = iter.next()?;
        let head = HeadSegment {
            base_offset: head.base_offset(),
            size_bytes: head.size_bytes(),
            max_timestamp: head.max_timestamp(),
        };
        Some((head, next.base_offset()))
    }

    /// Rewrite the leader-epoch-checkpoint (temp file, rename), fsynced as the release
    /// does it for this `change`, or left to the next flush (see the module doc).
    fn write_epoch_checkpoint(&mut self, change: Change) -> Result<(), StorageError> {
        let path = self.epoch_checkpoint_path();
        let tmp = format!("{path}.tmp");
        self.disk.create(&tmp)?;
        self.disk
            .write(&tmp, 0, self.epochs.to_checkpoint().as_bytes())?;
        let sync = match change {
            Change::NewEpoch => true,
            Change::Truncation => self.config.epoch_truncation_fsync,
        };
        if sync {
            self.disk.fsync_now(&tmp)?;
        }
        self.disk.rename(&tmp, &path)?;
        if !sync {
            self.pending.file(&path);
            self.pending.dir();
        } else if self.config.dir_fsync {
            self.disk.fsync_dir_now(&self.dir)?;
        }
        Ok(())
    }

    fn indexing(&self) -> Indexing {
        Indexing {
            interval_bytes: self.config.index_interval_bytes,
            by_last_offset: self.config.index_by_last_offset,
        }
    }

    fn epoch_checkpoint_path(&self) -> String {
        format!("{}/{LEADER_EPOCH}", self.dir)
    }

    fn segment_path(&self, base: Offset) -> String {
        format!(
            "{}/{}",
            self.dir,
            segment::file_name(base, segment::LOG_SUFFIX)
        )
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }

    /// The active segment to write, with the disk its files are on: a segment writes
    /// through the log's disk, so the two are borrowed together.
    fn active_mut(&mut self) -> (&Disk, &mut Segment) {
        let active = self
            .segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment");
        (&self.disk, active)
    }

    fn first(&self) -> &Segment {
        self.segments
            .values()
            .next()
            .expect("a log always has an active segment")
    }
}

/// What retention needs to know of the oldest segment.
struct HeadSegment {
    base_offset: Offset,
    size_bytes: u64,
    max_timestamp: i64,
}

/// Batch headers found while opening: all of them (producer state), and those recovery
/// re-validated (their epochs are re-added to the epoch cache).
#[derive(Default)]
struct LoadedHeaders {
    all: Vec<BatchSummary>,
    scanned: Vec<BatchHeader>,
    /// The base offset of the first re-validated segment.
    scanned_from: Option<Offset>,
    /// Segments whose transaction index is rebuilt from the batches: those recovery
    /// re-validated, and those whose `.txnindex` fails the sanity check.
    txn_rebuild: Vec<Offset>,
}

/// Read-only scan of a partition dir (for the final state, --dump-disks, tests): every
/// valid record with its offset and leader epoch, stopping at the first invalid batch of
/// each segment.
pub fn read_records(
    disk: &Disk,
    tp: &TopicPartition,
) -> Result<Vec<(Offset, Epoch, Record)>, StorageError> {
    let mut out = Vec::new();
    visit_records(disk, tp, |offset, epoch, record| {
        out.push((offset, epoch, record.to_owned()));
    })?;
    Ok(out)
}

/// A leader's append is exactly one valid batch: its header, or why not.
fn one_batch(batch: &[u8]) -> Result<BatchHeader, StorageError> {
    let header = record::validate(batch).map_err(|e| StorageError::InvalidRecord(e.to_string()))?;
    if header.size_bytes() != batch.len() {
        return Err(StorageError::InvalidRecord(format!(
            "{} bytes after a {}-byte batch",
            batch.len() - header.size_bytes(),
            header.size_bytes()
        )));
    }
    Ok(header)
}

/// A mutation test's bug: the batches of a fetch answer by their headers alone, CRCs
/// unchecked.
fn unchecked_batches(bytes: &[u8]) -> Vec<Result<(usize, BatchHeader), record::RecordError>> {
    let mut items = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let available = bytes.len() - position;
        match record::parse_header(&bytes[position..]) {
            Ok(header) if header.size_bytes() <= available => {
                items.push(Ok((position, header)));
                position += header.size_bytes();
            }
            Ok(header) => {
                items.push(Err(record::RecordError::Truncated {
                    needed: header.size_bytes(),
                    available,
                }));
                break;
            }
            Err(e) => {
                items.push(Err(e));
                break;
            }
        }
    }
    items
}

/// [`read_records`], handing each record to `visit` as a view into the segment's bytes.
pub fn visit_records(
    disk: &Disk,
    tp: &TopicPartition,
    mut visit: impl FnMut(Offset, Epoch, RecordView<'_>),
) -> Result<(), StorageError> {
    let dir = tp.dir_name();
    for name in disk.list(&dir) {
        if segment::parse_log_file_name(&name).is_none() {
            continue;
        }
        let path = format!("{dir}/{name}");
        let end = disk.len(&path)?;
        // Batch by batch, not the whole segment at once: a segment can be larger than
        // everything else the final state holds.
        let mut position = 0;
        while position < end {
            let prefix = disk.read(&path, position, record::LOG_OVERHEAD)?;
            let size = match prefix.get(8..record::LOG_OVERHEAD) {
                Some(length) => {
                    let length = i32::from_be_bytes(length.try_into().expect("4 bytes"));
                    record::LOG_OVERHEAD as u64 + u64::try_from(length).unwrap_or(0)
                }
                None => prefix.len() as u64,
            };
            let bytes = disk.read(&path, position, size.min(end - position) as usize)?;
            let Some(Ok((_, header, batch))) = record::batches(&bytes).next() else {
                break;
            };
            let Ok(records) = record::record_views(batch) else {
                break;
            };
            for rec in records {
                let offset = Offset(header.base_offset.0 + i64::from(rec.offset_delta));
                visit(offset, header.partition_leader_epoch, rec);
            }
            position += batch.len() as u64;
        }
    }
    Ok(())
}
