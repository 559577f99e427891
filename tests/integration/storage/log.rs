//! The partition log against a simple model, under crashes, power loss and corruption.

use std::time::Duration;

use hightide::config::kafka::LogConfig;
use hightide::kafka::record::{self, BatchBuilder};
use hightide::kafka::storage::dump;
use hightide::kafka::storage::log::{read_records, AppendOutcome, Log, StorageError};
use hightide::kafka::storage::segment;
use hightide::kafka::types::ProducerId;
use hightide::os::clock::{self, SimTime};
use hightide::os::disk::{Disk, DiskConfig, DiskFault, PowerLossModel};
use hightide::types::{Epoch, Offset, TopicPartition};
use proptest::prelude::*;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        roll: Duration::from_millis(5_000),
        index_interval_bytes: 128,
        index_by_last_offset: true,
        retention_bytes: 1_500,
        retention: Some(Duration::from_millis(20_000)),
        flush_interval_messages: 10,
        flush_interval: hightide::config::kafka::FOREVER,
        dir_fsync: true,
        epoch_truncation_fsync: true,
        transaction_verification: false,
        transaction_version_2: false,
        bugs: Default::default(),
    }
}

/// A batch of `count` records whose values name the batch `id`, stamped `now`.
fn batch(id: u64, count: usize, now: SimTime) -> Vec<u8> {
    let mut builder = BatchBuilder::new(now.timestamp_ms(), ProducerId::NONE, -1, -1);
    for i in 0..count {
        builder.push(
            now.timestamp_ms(),
            Some(b"key"),
            Some(format!("{id}:{i}").as_bytes()),
        );
    }
    builder.build()
}

fn batch_id(bytes: &[u8]) -> u64 {
    let records = record::records(bytes).expect("a validated batch decodes");
    let value = records[0].value.clone().expect("test records have values");
    let text = String::from_utf8(value).expect("test values are text");
    text.split(':')
        .next()
        .and_then(|id| id.parse().ok())
        .expect("value is id:index")
}

/// Apply a flush plan the way the broker does, with the synchronous fsyncs.
fn flush(disk: &Disk, log: &mut Log) -> Offset {
    let plan = log.flush_plan();
    for file in &plan.files {
        disk.fsync_now(file).expect("fsync of a planned file");
    }
    for dir in &plan.dirs {
        disk.fsync_dir_now(dir).expect("fsync of a planned dir");
    }
    log.flush_done(plan.up_to, clock::now());
    plan.up_to
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct ModelBatch {
    base: i64,
    count: i64,
    id: u64,
    epoch: i32,
}

/// What may be left after a restart.
#[derive(Clone, Copy, Debug)]
enum Survivor {
    /// The page cache survived: a prefix of the model.
    Prefix { flushed_must_survive: bool },
    /// Power loss: the flushed prefix, then any batches once appended at those offsets.
    AnyAppended,
}

#[derive(Clone, Debug)]
enum Op {
    Append { count: usize },
    FollowerAppend { batches: Vec<usize> },
    BumpEpoch,
    Tick { ms: u64 },
    Flush,
    Writeback,
    Truncate { back: i64 },
    TruncateFully { ahead: i64 },
    Retention,
    Kill,
    PowerLoss,
    Corrupt { bytes: u64 },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1usize..5).prop_map(|count| Op::Append { count }),
        2 => prop::collection::vec(1usize..4, 1..4).prop_map(|batches| Op::FollowerAppend { batches }),
        1 => Just(Op::BumpEpoch),
        2 => (1u64..3_000).prop_map(|ms| Op::Tick { ms }),
        3 => Just(Op::Flush),
        1 => Just(Op::Writeback),
        2 => (0i64..12).prop_map(|back| Op::Truncate { back }),
        1 => (0i64..5).prop_map(|ahead| Op::TruncateFully { ahead }),
        1 => Just(Op::Retention),
        1 => Just(Op::Kill),
        1 => Just(Op::PowerLoss),
        1 => (1u64..64).prop_map(|bytes| Op::Corrupt { bytes }),
        1 => Just(Op::Reopen),
    ]
}

fn power_loss_model() -> impl Strategy<Value = PowerLossModel> {
    prop_oneof![
        Just(PowerLossModel::DropUnflushed),
        Just(PowerLossModel::RandomWriteback),
        Just(PowerLossModel::TornTail),
    ]
}

struct Harness {
    disk: Disk,
    log: Log,
    model: Vec<ModelBatch>,
    model_leo: i64,
    /// Every batch ever appended: a truncation is not durable until the next flush (as in
    /// Kafka), so a power loss may bring truncated batches back — but only real ones.
    history: Vec<ModelBatch>,
    /// Everything below was made durable by a confirmed flush.
    flushed: i64,
    /// Bits were flipped in durable bytes: flushed data may be lost from then on.
    corrupted: bool,
    next_id: u64,
    epoch: i32,
    now: SimTime,
}

impl Harness {
    fn new(power_loss: PowerLossModel, seed: u64) -> Harness {
        clock::set(SimTime::ZERO);
        let disk = Disk::new(
            DiskConfig {
                power_loss,
                ..DiskConfig::default()
            },
            seed,
        );
        let log = Log::open(
            &disk,
            &tp(),
            small_config(),
            Offset(0),
            Offset(0),
            false,
            SimTime::ZERO,
        )
        .expect("open");
        Harness {
            disk,
            log,
            model: Vec::new(),
            model_leo: 0,
            history: Vec::new(),
            flushed: 0,
            corrupted: false,
            next_id: 0,
            epoch: 0,
            now: SimTime::ZERO,
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Append { count } => {
                let id = self.next_id;
                self.next_id += 1;
                let outcome = self
                    .log
                    .append_as_leader(batch(id, *count, self.now), Epoch(self.epoch), self.now)
                    .map_err(|e| TestCaseError::fail(format!("append: {e}")))?;
                let AppendOutcome::Appended {
                    first_offset,
                    last_offset,
                    flush_needed,
                } = outcome
                else {
                    return Err(TestCaseError::fail(
                        "non-idempotent batch reported as duplicate",
                    ));
                };
                prop_assert_eq!(first_offset, Offset(self.model_leo));
                prop_assert_eq!(last_offset, Offset(self.model_leo + *count as i64 - 1));
                self.push_model(id, *count as i64);
                prop_assert_eq!(flush_needed, self.log.unflushed_messages() >= 10);
                if flush_needed {
                    self.flush();
                }
            }
            Op::FollowerAppend { batches } => {
                let mut bytes = Vec::new();
                let mut base = self.model_leo;
                let mut pushed = Vec::new();
                for count in batches {
                    let id = self.next_id;
                    self.next_id += 1;
                    let mut one = batch(id, *count, self.now);
                    record::set_base_offset(&mut one, Offset(base));
                    record::set_partition_leader_epoch(&mut one, Epoch(self.epoch));
                    bytes.extend_from_slice(&one);
                    pushed.push((id, *count as i64));
                    base += *count as i64;
                }
                let leo = self
                    .log
                    .append_as_follower(&bytes, self.now)
                    .map_err(|e| TestCaseError::fail(format!("follower append: {e}")))?;
                for (id, count) in pushed {
                    self.push_model(id, count);
                }
                prop_assert_eq!(leo, Offset(self.model_leo));
            }
            Op::BumpEpoch => {
                self.epoch += 1;
                self.log
                    .assign_epoch(Epoch(self.epoch), Offset(self.model_leo))
                    .map_err(|e| TestCaseError::fail(format!("assign epoch: {e}")))?;
            }
            Op::Tick { ms } => {
                self.now += Duration::from_millis(*ms);
                clock::set(self.now);
            }
            Op::Flush => self.flush(),
            Op::Writeback => {
                self.now += Duration::from_millis(40_000);
                clock::set(self.now);
                self.disk.writeback(clock::now());
            }
            Op::Truncate { back } => {
                let target = (self.model_leo - back).max(self.log.log_start_offset().0);
                self.log
                    .truncate_to(Offset(target), self.now)
                    .map_err(|e| TestCaseError::fail(format!("truncate: {e}")))?;
                // Batches are atomic: one holding the target goes whole.
                if let Some(cut) = self.model.iter().find(|b| b.base + b.count > target) {
                    self.model_leo = cut.base.max(self.log.log_start_offset().0);
                }
                self.model.retain(|b| b.base + b.count <= target);
                prop_assert_eq!(self.log.log_end_offset(), Offset(self.model_leo));
                self.flushed = self.flushed.min(self.model_leo);
            }
            Op::TruncateFully { ahead } => {
                let start = self.model_leo + ahead;
                self.log
                    .truncate_fully_and_start_at(Offset(start), self.now)
                    .map_err(|e| TestCaseError::fail(format!("truncate fully: {e}")))?;
                self.model.clear();
                self.model_leo = start;
                self.flushed = start;
                prop_assert_eq!(self.log.log_start_offset(), Offset(start));
                prop_assert_eq!(self.log.segment_bases(), vec![Offset(start)]);
            }
            Op::Retention => {
                let before = self.log.segment_bases();
                let deleted = self
                    .log
                    .enforce_retention(self.log.log_end_offset(), self.now)
                    .map_err(|e| TestCaseError::fail(format!("retention: {e}")))?;
                let after = self.log.segment_bases();
                prop_assert_eq!(after.len() + deleted, before.len());
                prop_assert_eq!(
                    after.last(),
                    before.last(),
                    "the active segment is never deleted"
                );
                let start = self.log.log_start_offset();
                prop_assert!(after[0] <= start && start <= self.log.log_end_offset());
                prop_assert!(
                    after.get(1).is_none_or(|second| *second > start),
                    "a segment below the log start survived"
                );
            }
            Op::Kill => self.reopen(
                false,
                Survivor::Prefix {
                    flushed_must_survive: true,
                },
            )?,
            Op::PowerLoss => {
                self.disk.power_loss();
                self.reopen(false, Survivor::AnyAppended)?;
            }
            Op::Corrupt { bytes } => {
                self.corrupted = true;
                let glob = format!("{}/*.log", tp().dir_name());
                let _ = self.disk.inject(DiskFault::Corrupt {
                    glob,
                    bytes: *bytes,
                });
                self.reopen(
                    false,
                    Survivor::Prefix {
                        flushed_must_survive: false,
                    },
                )?;
            }
            Op::Reopen => {
                self.flush();
                self.reopen(
                    true,
                    Survivor::Prefix {
                        flushed_must_survive: true,
                    },
                )?;
            }
        }
        self.check_log()
    }

    fn push_model(&mut self, id: u64, count: i64) {
        let batch = ModelBatch {
            base: self.model_leo,
            count,
            id,
            epoch: self.epoch,
        };
        self.model.push(batch);
        self.history.push(batch);
        self.model_leo += count;
    }

    fn flush(&mut self) {
        let up_to = flush(&self.disk, &mut self.log);
        self.flushed = self.flushed.max(up_to.0);
        assert_eq!(self.log.recovery_point(), up_to);
    }

    /// Restart the log on the same disk, as a broker restart does, passing the recovery
    /// point and log start offset its checkpoints would hold.
    fn reopen(&mut self, clean_shutdown: bool, survivor: Survivor) -> Result<(), TestCaseError> {
        let recovery_point = self.log.recovery_point();
        let log_start = self.log.log_start_offset();
        self.log = Log::open(
            &self.disk,
            &tp(),
            small_config(),
            recovery_point,
            log_start,
            clean_shutdown,
            self.now,
        )
        .map_err(|e| TestCaseError::fail(format!("reopen: {e}")))?;
        let found = self.read_log()?;
        let leo = self.log.log_end_offset().0;
        let flushed = if self.corrupted {
            log_start.0
        } else {
            self.flushed
        };
        let durable: Vec<ModelBatch> = self
            .model
            .iter()
            .copied()
            .filter(|b| b.base + b.count > log_start.0 && b.base + b.count <= flushed)
            .collect();
        match survivor {
            Survivor::Prefix {
                flushed_must_survive,
            } => {
                prop_assert!(
                    leo <= self.model_leo.max(log_start.0),
                    "LEO {} beyond what was appended {}",
                    leo,
                    self.model_leo
                );
                if flushed_must_survive {
                    prop_assert!(
                        found.len() >= durable.len(),
                        "lost flushed data: LEO {} < flushed {}",
                        leo,
                        self.flushed
                    );
                }
                self.model.retain(|b| b.base + b.count <= leo);
            }
            Survivor::AnyAppended => {
                prop_assert!(
                    found.len() >= durable.len(),
                    "lost flushed data: LEO {} < flushed {}",
                    leo,
                    self.flushed
                );
                prop_assert_eq!(
                    &found[..durable.len()],
                    &durable[..],
                    "flushed batches survive intact"
                );
                for batch in &found {
                    prop_assert!(
                        self.history.contains(batch),
                        "{:?} was never appended",
                        batch
                    );
                }
                self.model = found;
            }
        }
        self.model_leo = leo;
        self.flushed = self.flushed.min(leo);
        Ok(())
    }

    /// Every batch from the log start to the LEO, through `Log::read`; each must be valid
    /// and start where the previous one ended.
    fn read_log(&self) -> Result<Vec<ModelBatch>, TestCaseError> {
        let end = self.log.log_end_offset();
        let mut found = Vec::new();
        let mut from = self.log.log_start_offset();
        while from < end {
            let bytes = self
                .log
                .read(from, 256, end)
                .map_err(|e| TestCaseError::fail(format!("read {from}: {e}")))?;
            prop_assert!(
                !bytes.is_empty(),
                "read at {} below LEO returned nothing",
                from
            );
            for item in record::batches(&bytes) {
                let (_, header, batch) =
                    item.map_err(|e| TestCaseError::fail(format!("invalid batch served: {e}")))?;
                // The log start offset may lie inside a batch (a power loss can bring back
                // a segment retention had deleted); the batch holding it comes whole.
                let first =
                    found.is_empty() && header.base_offset <= from && from < header.next_offset();
                prop_assert!(
                    first || header.base_offset == from,
                    "offsets are contiguous: {} after {}",
                    header.base_offset,
                    from
                );
                found.push(ModelBatch {
                    base: header.base_offset.0,
                    count: i64::from(header.records_count),
                    id: batch_id(batch),
                    epoch: header.partition_leader_epoch.0,
                });
                from = header.next_offset();
            }
        }
        Ok(found)
    }

    /// The log reads back as the model's suffix from the log start offset, every batch
    /// valid, offsets contiguous, and every offset's lookup lands on the batch a linear
    /// scan finds.
    fn check_log(&self) -> Result<(), TestCaseError> {
        let start = self.log.log_start_offset().0;
        let end = self.log.log_end_offset();
        prop_assert_eq!(end, Offset(self.model_leo));
        let found = self.read_log()?;
        let expected: Vec<ModelBatch> = self
            .model
            .iter()
            .copied()
            .filter(|b| b.base + b.count > start)
            .collect();
        prop_assert_eq!(&found, &expected);
        for batch in &found {
            for offset in batch.base.max(start)..batch.base + batch.count {
                let bytes = self
                    .log
                    .read(Offset(offset), 1, end)
                    .map_err(|e| TestCaseError::fail(format!("lookup {offset}: {e}")))?;
                let header = record::parse_header(&bytes)
                    .map_err(|e| TestCaseError::fail(format!("lookup {offset}: {e}")))?;
                prop_assert_eq!(header.base_offset.0, batch.base, "lookup of {}", offset);
            }
        }
        let beyond = matches!(
            self.log.read(Offset(end.0 + 1), 1, end),
            Err(StorageError::OffsetOutOfRange { .. })
        );
        prop_assert!(beyond, "read above the LEO must be out of range");
        if start > 0 {
            let below = matches!(
                self.log.read(Offset(start - 1), 1, end),
                Err(StorageError::OffsetOutOfRange { .. })
            );
            prop_assert!(below, "read below the log start must be out of range");
        }
        if let Some(last) = found.last() {
            prop_assert!(
                self.log.epochs().latest_epoch() >= Some(Epoch(last.epoch)),
                "epochs {:?} behind the log {:?}",
                self.log.epochs().entries(),
                found
            );
        }
        let entries = self.log.epochs().entries();
        prop_assert!(entries
            .windows(2)
            .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset));
        prop_assert!(
            entries.last().is_none_or(|e| e.start_offset <= end),
            "epoch entry beyond the LEO"
        );
        let on_disk: Vec<i64> = read_records(&self.disk, &tp())
            .map_err(|e| TestCaseError::fail(format!("read_records: {e}")))?
            .into_iter()
            .map(|(offset, _, _)| offset.0)
            .filter(|offset| *offset >= start)
            .collect();
        let in_log: Vec<i64> = found
            .iter()
            .flat_map(|b| b.base..b.base + b.count)
            .filter(|offset| *offset >= start)
            .collect();
        prop_assert_eq!(on_disk, in_log);
        self.check_indexes()
    }

    /// Every segment's `.index` and `.timeindex`, as the disk holds them, pass Kafka's
    /// `kafka-dump-log.sh --verify-index-only` against their `.log`: an `.index` entry
    /// names the batch at its position by its last offset.
    fn check_indexes(&self) -> Result<(), TestCaseError> {
        let options = dump::Options {
            verify_index_only: true,
            ..dump::Options::default()
        };
        let dir = tp().dir_name();
        for base in self.log.segment_bases() {
            let path = |suffix| format!("{dir}/{}", segment::file_name(base, suffix));
            let log = self
                .disk
                .read_all(&path(segment::LOG_SUFFIX))
                .map_err(|e| TestCaseError::fail(format!("read log {base}: {e}")))?;
            for suffix in [segment::INDEX_SUFFIX, segment::TIME_INDEX_SUFFIX] {
                let file = path(suffix);
                let bytes = self
                    .disk
                    .read_all(&file)
                    .map_err(|e| TestCaseError::fail(format!("read {file}: {e}")))?;
                let name = segment::file_name(base, suffix);
                let kind = dump::Kind::of(&name).expect("a segment file name");
                let dumped = dump::dump(kind, &file, &bytes, Some(&log), &options);
                prop_assert!(
                    !dumped.damaged,
                    "{} disagrees with its log: {:?} {}",
                    file,
                    dumped.findings,
                    dumped.err
                );
            }
        }
        Ok(())
    }
}

proptest! {
    /// After any sequence of appends, flushes, rolls, truncations, retention, crashes,
    /// power losses and corruption, the log is a prefix of what was appended (less what
    /// was truncated) and keeps everything a confirmed flush covered.
    #[test]
    fn log_matches_model_under_faults(
        power_loss in power_loss_model(),
        seed in any::<u64>(),
        corruption in prop::bool::weighted(0.3),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut harness = Harness::new(power_loss, seed);
        for op in ops.iter().filter(|op| corruption || !matches!(op, Op::Corrupt { .. })) {
            harness.apply(op)?;
        }
    }
}

fn open(disk: &Disk, config: LogConfig) -> Log {
    Log::open(
        disk,
        &tp(),
        config,
        Offset(0),
        Offset(0),
        false,
        SimTime::ZERO,
    )
    .expect("open")
}

#[test]
fn segments_roll_when_the_next_batch_would_not_fit() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk, small_config());
    let one = batch(0, 1, SimTime::ZERO).len() as u64;
    let per_segment = 600 / one;
    for id in 0..per_segment + 1 {
        log.append_as_leader(batch(id, 1, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append");
    }
    assert_eq!(
        log.segment_bases(),
        vec![Offset(0), Offset(per_segment as i64)]
    );
    assert!(disk.exists(&format!("t-0/{:020}.log", per_segment)));
    assert!(
        log.roll_flush_pending(),
        "the closed segment awaits its flush"
    );
    let plan = log.flush_plan();
    assert!(plan
        .files
        .contains(&"t-0/00000000000000000000.log".to_string()));
    assert!(plan
        .files
        .contains(&format!("t-0/{:020}.index", per_segment)));
    assert_eq!(
        plan.dirs,
        vec!["t-0".to_string()],
        "a new segment needs its directory fsynced"
    );
    flush(&disk, &mut log);
    assert!(!log.roll_flush_pending());
    assert!(
        log.flush_plan().dirs.is_empty(),
        "a confirmed flush clears the directory"
    );
}

#[test]
fn segments_roll_by_age() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk, small_config());
    log.append_as_leader(
        batch(0, 1, SimTime::from_millis(1_000)),
        Epoch(0),
        SimTime::from_millis(1_000),
    )
    .expect("append");
    log.append_as_leader(
        batch(1, 1, SimTime::from_millis(5_999)),
        Epoch(0),
        SimTime::from_millis(5_999),
    )
    .expect("append");
    assert_eq!(log.segment_bases().len(), 1);
    log.append_as_leader(
        batch(2, 1, SimTime::from_millis(6_000)),
        Epoch(0),
        SimTime::from_millis(6_000),
    )
    .expect("append");
    assert_eq!(log.segment_bases(), vec![Offset(0), Offset(2)]);
}

#[test]
fn flush_interval_messages_asks_for_a_flush_in_the_append_path() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(
        &disk,
        LogConfig {
            flush_interval_messages: 3,
            ..small_config()
        },
    );
    let needed = |outcome| {
        matches!(
            outcome,
            AppendOutcome::Appended {
                flush_needed: true,
                ..
            }
        )
    };
    assert!(!needed(
        log.append_as_leader(batch(0, 2, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append")
    ));
    assert!(needed(
        log.append_as_leader(batch(1, 1, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append")
    ));
    flush(&disk, &mut log);
    assert_eq!(log.recovery_point(), Offset(3));
    assert!(!needed(
        log.append_as_leader(batch(2, 1, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append")
    ));
}

#[test]
fn read_returns_at_least_one_whole_batch_and_respects_the_upper_bound() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk, LogConfig::default());
    for id in 0..3 {
        log.append_as_leader(batch(id, 4, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append");
    }
    let one = log.read(Offset(5), 1, Offset(12)).expect("read");
    let header = record::validate(&one).expect("valid");
    assert_eq!(
        (header.base_offset, one.len()),
        (Offset(4), header.size_bytes())
    );
    assert!(log.read(Offset(5), 1 << 20, Offset(8)).expect("read").len() == one.len());
    assert!(log
        .read(Offset(5), 1 << 20, Offset(7))
        .expect("read")
        .is_empty());
    assert!(log
        .read(Offset(12), 1 << 20, Offset(12))
        .expect("read")
        .is_empty());
    assert!(matches!(
        log.read(Offset(13), 1, Offset(12)),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn follower_append_must_start_at_the_log_end() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk, LogConfig::default());
    let mut gap = batch(0, 1, SimTime::ZERO);
    record::set_base_offset(&mut gap, Offset(1));
    assert!(matches!(
        log.append_as_follower(&gap, SimTime::ZERO),
        Err(StorageError::InvalidRecord(_))
    ));
    let mut ok = batch(0, 2, SimTime::ZERO);
    record::set_partition_leader_epoch(&mut ok, Epoch(3));
    assert_eq!(
        log.append_as_follower(&ok, SimTime::ZERO).expect("append"),
        Offset(2)
    );
    assert_eq!(log.epochs().latest_epoch(), Some(Epoch(3)));
}

#[test]
fn corrupt_leader_batch_is_rejected() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk, LogConfig::default());
    let mut bad = batch(0, 1, SimTime::ZERO);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(matches!(
        log.append_as_leader(bad, Epoch(0), SimTime::ZERO),
        Err(StorageError::InvalidRecord(_))
    ));
    assert_eq!(log.log_end_offset(), Offset(0));
}

/// A new epoch's checkpoint is durable as soon as it is written, in every release; a
/// truncation's is too, except in 3.7 (KAFKA-15046), where it waits for the next flush.
#[test]
fn epoch_checkpoint_writes_are_fsynced_as_the_release_does() {
    const CHECKPOINT: &str = "t-0/leader-epoch-checkpoint";
    for truncation_fsync in [true, false] {
        let disk = Disk::new(DiskConfig::default(), 1);
        let config = LogConfig {
            epoch_truncation_fsync: truncation_fsync,
            ..small_config()
        };
        let mut log = open(&disk, config);
        flush(&disk, &mut log);
        let durable = || String::from_utf8(disk.durable(CHECKPOINT).unwrap_or_default());
        log.append_as_leader(batch(0, 1, SimTime::ZERO), Epoch(4), SimTime::ZERO)
            .expect("append");
        let one_epoch = log.epochs().to_checkpoint();
        log.append_as_leader(batch(1, 1, SimTime::ZERO), Epoch(5), SimTime::ZERO)
            .expect("append");
        let two_epochs = log.epochs().to_checkpoint();
        assert_eq!(
            durable(),
            Ok(two_epochs.clone()),
            "a new epoch is fsynced at once"
        );
        assert!(!log.flush_plan().files.contains(&CHECKPOINT.to_string()));

        log.truncate_to(Offset(1), SimTime::ZERO).expect("truncate");
        assert_eq!(log.epochs().to_checkpoint(), one_epoch);
        let planned = log.flush_plan().files.contains(&CHECKPOINT.to_string());
        if truncation_fsync {
            assert_eq!(
                durable(),
                Ok(one_epoch.clone()),
                "fsynced with the truncation"
            );
            assert!(!planned);
        } else {
            assert_eq!(durable(), Ok(two_epochs), "3.7: not fsynced yet");
            assert!(planned, "3.7: left to the next flush");
            flush(&disk, &mut log);
            assert_eq!(durable(), Ok(one_epoch));
        }
    }
}

/// Before 3.0 (KAFKA-3968) Kafka fsynced no directory: a flush plan then names none.
#[test]
fn flush_plans_fsync_the_directory_only_from_kafka_3_0() {
    for dir_fsync in [true, false] {
        let disk = Disk::new(DiskConfig::default(), 1);
        let mut log = open(
            &disk,
            LogConfig {
                dir_fsync,
                ..small_config()
            },
        );
        log.append_as_leader(batch(0, 1, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append");
        assert_eq!(!log.flush_plan().dirs.is_empty(), dir_fsync);
    }
}

/// Kafka reads an empty leader-epoch-checkpoint as no entries, and one it cannot parse
/// fails the load (the broker takes its log dir offline): it is never silently rebuilt.
#[test]
fn an_unreadable_epoch_checkpoint_fails_the_load_and_an_empty_one_is_empty() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk, LogConfig::default());
    log.append_as_leader(batch(0, 3, SimTime::ZERO), Epoch(2), SimTime::ZERO)
        .expect("append");
    flush(&disk, &mut log);
    drop(log);
    let checkpoint = "t-0/leader-epoch-checkpoint";
    let reopen = || {
        Log::open(
            &disk,
            &tp(),
            LogConfig::default(),
            Offset(3),
            Offset(0),
            true,
            SimTime::ZERO,
        )
    };
    assert_eq!(
        reopen().expect("open").epochs().latest_epoch(),
        Some(Epoch(2))
    );

    disk.write(checkpoint, 0, b"0\n1\n2 x\n").expect("rot");
    assert!(matches!(
        reopen(),
        Err(StorageError::Checkpoint { ref file, .. }) if file == checkpoint
    ));

    disk.set_len(checkpoint, 0).expect("empty");
    let log = reopen().expect("an empty checkpoint opens");
    assert_eq!(log.epochs().latest_epoch(), None);
}

/// A missing or torn index must not be trusted even after a clean shutdown.
#[test]
fn clean_open_rebuilds_a_torn_index() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let config = LogConfig {
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = open(&disk, config.clone());
    for id in 0..20 {
        log.append_as_leader(batch(id, 1, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append");
    }
    flush(&disk, &mut log);
    drop(log);
    let index = "t-0/00000000000000000000.index";
    let len = disk.len(index).expect("index exists");
    assert!(len > 16);
    disk.set_len(index, len - 3).expect("tear");
    let log = Log::open(
        &disk,
        &tp(),
        config,
        Offset(20),
        Offset(0),
        true,
        SimTime::ZERO,
    )
    .expect("open");
    assert_eq!(disk.len(index).expect("rebuilt") % 8, 0);
    for offset in 0..20 {
        let bytes = log.read(Offset(offset), 1, Offset(20)).expect("read");
        assert_eq!(
            record::parse_header(&bytes).expect("batch").base_offset,
            Offset(offset)
        );
    }
}

#[test]
fn retention_by_bytes_deletes_whole_closed_segments_below_the_high_watermark() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(
        &disk,
        LogConfig {
            retention_bytes: 0,
            ..small_config()
        },
    );
    for id in 0..30 {
        log.append_as_leader(batch(id, 1, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append");
    }
    let bases = log.segment_bases();
    assert!(bases.len() >= 3);
    assert_eq!(
        log.enforce_retention(bases[1], SimTime::ZERO)
            .expect("retention"),
        1,
        "only below the high watermark"
    );
    let deleted = log
        .enforce_retention(log.log_end_offset(), SimTime::ZERO)
        .expect("retention");
    assert_eq!(deleted, bases.len() - 2);
    assert_eq!(log.segment_bases(), vec![*bases.last().expect("segments")]);
    assert_eq!(log.log_start_offset(), *bases.last().expect("segments"));
    assert!(!disk.exists("t-0/00000000000000000000.log"));
}

fn idempotent_batch(sequence: i32, count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, ProducerId(7), 0, sequence);
    for i in 0..count {
        builder.push(0, None, Some(format!("{sequence}:{i}").as_bytes()));
    }
    builder.build()
}

/// A retried idempotent batch is answered with its original offsets, also after a crash
/// (producer state is rebuilt from the log), and a sequence gap is refused.
#[test]
fn idempotent_retries_return_the_original_offsets() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk, LogConfig::default());
    log.append_as_leader(batch(0, 2, SimTime::ZERO), Epoch(0), SimTime::ZERO)
        .expect("append");
    let first = log
        .append_as_leader(idempotent_batch(0, 3), Epoch(0), SimTime::ZERO)
        .expect("append");
    assert!(matches!(
        first,
        AppendOutcome::Appended {
            first_offset: Offset(2),
            last_offset: Offset(4),
            ..
        }
    ));
    let retry = log
        .append_as_leader(idempotent_batch(0, 3), Epoch(0), SimTime::ZERO)
        .expect("retry");
    assert_eq!(
        retry,
        AppendOutcome::Duplicate {
            first_offset: Offset(2),
            last_offset: Offset(4)
        }
    );
    assert!(matches!(
        log.append_as_leader(idempotent_batch(5, 1), Epoch(0), SimTime::ZERO),
        Err(StorageError::OutOfOrderSequence)
    ));
    assert_eq!(log.log_end_offset(), Offset(5));
    drop(log);
    let mut log = open(&disk, LogConfig::default());
    let retry = log
        .append_as_leader(idempotent_batch(0, 3), Epoch(0), SimTime::ZERO)
        .expect("retry");
    assert_eq!(
        retry,
        AppendOutcome::Duplicate {
            first_offset: Offset(2),
            last_offset: Offset(4)
        }
    );
    assert!(matches!(
        log.append_as_leader(idempotent_batch(3, 1), Epoch(0), SimTime::ZERO)
            .expect("next"),
        AppendOutcome::Appended {
            first_offset: Offset(5),
            ..
        }
    ));
}

#[test]
fn retention_by_time_deletes_segments_whose_newest_record_expired() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(
        &disk,
        LogConfig {
            retention_bytes: -1,
            ..small_config()
        },
    );
    for id in 0..10 {
        let now = SimTime::from_millis(id * 1_000);
        log.append_as_leader(batch(id, 1, now), Epoch(0), now)
            .expect("append");
    }
    let bases = log.segment_bases();
    assert!(bases.len() >= 2, "roll.ms of 5 s rolled the log: {bases:?}");
    assert_eq!(
        log.enforce_retention(log.log_end_offset(), SimTime::from_millis(20_000))
            .expect("retention"),
        0
    );
    let deleted = log
        .enforce_retention(log.log_end_offset(), SimTime::from_millis(100_000))
        .expect("retention");
    assert_eq!(
        deleted,
        bases.len() - 1,
        "every closed segment expired, the active one stays"
    );
}

/// Power loss with a torn tail: recovery cuts the log at the last whole batch, which is
/// never below what a flush made durable.
#[test]
fn power_loss_cuts_a_torn_tail_back_to_the_flushed_prefix() {
    let disk = Disk::new(
        DiskConfig {
            power_loss: PowerLossModel::TornTail,
            ..DiskConfig::default()
        },
        3,
    );
    let mut log = open(&disk, LogConfig::default());
    for id in 0..5 {
        log.append_as_leader(batch(id, 3, SimTime::ZERO), Epoch(0), SimTime::ZERO)
            .expect("append");
    }
    flush(&disk, &mut log);
    for id in 5..60 {
        log.append_as_leader(batch(id, 3, SimTime::ZERO), Epoch(1), SimTime::ZERO)
            .expect("append");
    }
    disk.power_loss();
    let log = Log::open(
        &disk,
        &tp(),
        LogConfig::default(),
        Offset(15),
        Offset(0),
        false,
        SimTime::ZERO,
    )
    .expect("open");
    let leo = log.log_end_offset();
    assert!(leo >= Offset(15) && leo <= Offset(180), "LEO {leo}");
    assert_eq!(leo.0 % 3, 0, "whole batches only");
    let all = log.read(Offset(0), u64::MAX, leo).expect("read");
    let batches: Vec<_> = record::batches(&all)
        .collect::<Result<_, _>>()
        .expect("every batch valid");
    assert_eq!(batches.last().map(|(_, h, _)| h.next_offset()), Some(leo));
    let expected_latest = if leo > Offset(15) { Epoch(1) } else { Epoch(0) };
    assert_eq!(log.epochs().latest_epoch(), Some(expected_latest));
}
