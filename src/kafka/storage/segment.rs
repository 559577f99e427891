//! One log segment: a `.log` of record batches, its two sparse indexes, and its
//! transaction index once a transaction aborts in it.
//!
//! Files are named by the segment's base offset, 20 digits zero-padded, as Kafka names
//! them (`00000000000000000000.log`). The indexes live in memory and every new entry is
//! also appended to its file, so that a clean shutdown leaves usable index files behind;
//! after a crash the indexes of the segments recovery scans are rebuilt from the log.

use crate::kafka::record::{self, BatchHeader, BATCH_HEADER_LEN};
use crate::kafka::storage::index::{self, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
use crate::kafka::storage::producer_state::BatchSummary;
use crate::kafka::storage::recovery::SegmentScan;
use crate::kafka::storage::txn_index::{AbortedTxn, TxnIndex, TXN_INDEX_SUFFIX};
use crate::os::clock::SimTime;
use crate::os::disk::{Disk, DiskError};
use crate::types::Offset;
use std::time::Duration;

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";

/// Kafka's file name for a segment file: base offset, 20 digits, then the suffix.
pub fn file_name(base_offset: Offset, suffix: &str) -> String {
    format!("{:020}{suffix}", base_offset.0)
}

/// The base offset a `.log` file name stands for, if it is one.
pub fn parse_log_file_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(LOG_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Offset)
}

/// How a segment indexes its batches: an entry once more than `interval_bytes`
/// (`index.interval.bytes`) were written since the last, naming the batch at its position
/// by its last offset (`by_last_offset`, Kafka 2.0 on) or its base offset (0.10 to 1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indexing {
    pub interval_bytes: u64,
    pub by_last_offset: bool,
}

/// A segment's state in memory; the bytes stay on the disk.
#[derive(Clone, Debug)]
pub struct Segment {
    base_offset: Offset,
    next_offset: Offset,
    size_bytes: u64,
    index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: Offset,
    /// The first batch's max timestamp, which `log.roll.ms` is measured from (Kafka's
    /// `rollingBasedTimestamp`); the creation time when that is unknown.
    rolling_timestamp_ms: Option<i64>,
    created: SimTime,
    log_path: String,
    index_path: String,
    time_index_path: String,
    txn_index: TxnIndex,
    txn_index_path: String,
    /// Whether the `.txnindex` file exists: Kafka creates it at the first abort.
    txn_index_file: bool,
}

impl Segment {
    fn empty(dir: &str, base_offset: Offset, now: SimTime) -> Segment {
        let path = |suffix| format!("{dir}/{}", file_name(base_offset, suffix));
        Segment {
            base_offset,
            next_offset: base_offset,
            size_bytes: 0,
            index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            bytes_since_last_index_entry: 0,
            max_timestamp: i64::MIN,
            offset_of_max_timestamp: base_offset,
            rolling_timestamp_ms: None,
            created: now,
            log_path: path(LOG_SUFFIX),
            index_path: path(INDEX_SUFFIX),
            time_index_path: path(TIME_INDEX_SUFFIX),
            txn_index: TxnIndex::default(),
            txn_index_path: path(TXN_INDEX_SUFFIX),
            txn_index_file: false,
        }
    }

    /// Create the three (empty) files of a new segment.
    pub fn create(
        disk: &Disk,
        dir: &str,
        base_offset: Offset,
        now: SimTime,
    ) -> Result<Segment, DiskError> {
        let segment = Segment::empty(dir, base_offset, now);
        for path in segment.paths() {
            disk.create(path)?;
        }
        Ok(segment)
    }

    /// A segment from a scan of its `.log` (already cut to the scan's valid bytes). Its
    /// indexes are rebuilt from the scan unless `trust_indexes` and the index files pass
    /// the sanity check.
    pub fn load(
        disk: &Disk,
        dir: &str,
        base_offset: Offset,
        scan: &SegmentScan,
        indexing: Indexing,
        trust_indexes: bool,
        now: SimTime,
    ) -> Result<Segment, DiskError> {
        let mut segment = Segment::empty(dir, base_offset, now);
        for batch in &scan.batches {
            segment.account(&batch.header, u64::from(batch.position), indexing);
        }
        segment.size_bytes = scan.valid_bytes;
        let rebuilt = (segment.index.clone(), segment.time_index.clone());
        let loaded = trust_indexes.then(|| segment.read_indexes(disk)).flatten();
        match loaded {
            Some((offset_index, time_index)) => {
                segment.index = offset_index;
                segment.time_index = time_index;
            }
            None => {
                (segment.index, segment.time_index) = rebuilt;
                disk.create(&segment.index_path)?;
                disk.write(&segment.index_path, 0, &segment.index.to_bytes())?;
                disk.create(&segment.time_index_path)?;
                disk.write(&segment.time_index_path, 0, &segment.time_index.to_bytes())?;
            }
        }
        segment.txn_index_file = disk.exists(&segment.txn_index_path);
        Ok(segment)
    }

    /// Load the `.txnindex` from its file (no file is an empty index). False: the file
    /// fails Kafka's sanity check, and the log must rebuild the index from its batches.
    pub fn read_txn_index(&mut self, disk: &Disk) -> Result<bool, DiskError> {
        if !self.txn_index_file {
            return Ok(true);
        }
        let bytes = disk.read_all(&self.txn_index_path)?;
        match TxnIndex::parse(&bytes, self.base_offset) {
            Ok(index) => {
                self.txn_index = index;
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// Replace the transaction index with one rebuilt from the log (recovery), rewriting
    /// the file if there is one or anything to write (Kafka's `txnIndex.reset()` then its
    /// appends). Returns whether the file was written.
    pub fn rebuild_txn_index(
        &mut self,
        disk: &Disk,
        entries: impl IntoIterator<Item = AbortedTxn>,
    ) -> Result<bool, DiskError> {
        self.txn_index = TxnIndex::default();
        for entry in entries {
            self.txn_index.push(entry);
        }
        if !self.txn_index_file && self.txn_index.is_empty() {
            return Ok(false);
        }
        disk.create(&self.txn_index_path)?;
        disk.write(&self.txn_index_path, 0, &self.txn_index.to_bytes())?;
        self.txn_index_file = true;
        Ok(true)
    }

    /// Index an abort whose marker this segment holds, creating the file at the first.
    /// Returns whether the file is new.
    pub fn append_aborted(&mut self, disk: &Disk, entry: AbortedTxn) -> Result<bool, DiskError> {
        debug_assert!(
            entry.last_offset >= self.base_offset && entry.last_offset < self.next_offset,
            "an abort is indexed in the segment holding its marker"
        );
        let bytes = self.txn_index.push(entry);
        let created = !self.txn_index_file;
        if created {
            disk.create(&self.txn_index_path)?;
            self.txn_index_file = true;
        }
        disk.append(&self.txn_index_path, &bytes)?;
        Ok(created)
    }

    pub fn txn_index(&self) -> &TxnIndex {
        &self.txn_index
    }

    pub fn txn_index_path(&self) -> &str {
        &self.txn_index_path
    }

    /// Read the index files if they pass Kafka's sanity check (whole entries, increasing)
    /// and agree with the log: positions inside it, offsets inside the segment.
    fn read_indexes(&self, disk: &Disk) -> Option<(OffsetIndex, TimeIndex)> {
        let offset_index = OffsetIndex::parse(&disk.read_all(&self.index_path).ok()?).ok()?;
        let time_index = TimeIndex::parse(&disk.read_all(&self.time_index_path).ok()?).ok()?;
        let span = index::relative_offset(self.base_offset, self.next_offset)?;
        let offsets_ok = offset_index
            .last()
            .is_none_or(|e| u64::from(e.position) < self.size_bytes && e.relative_offset < span);
        let times_ok = time_index.last().is_none_or(|e| e.relative_offset < span);
        (offsets_ok && times_ok).then_some((offset_index, time_index))
    }

    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// The offset after this segment's last record.
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    /// The largest record timestamp, which time-based retention compares with its limit.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    pub fn index(&self) -> &OffsetIndex {
        &self.index
    }

    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    pub fn log_path(&self) -> &str {
        &self.log_path
    }

    /// The segment's files: the `.txnindex` only once it exists.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        let txn_index = self.txn_index_file.then_some(self.txn_index_path.as_str());
        [
            self.log_path.as_str(),
            self.index_path.as_str(),
            self.time_index_path.as_str(),
        ]
        .into_iter()
        .chain(txn_index)
    }

    /// How long this segment has been rolling for, as `log.roll.ms` measures it.
    pub fn age(&self, now: SimTime) -> Duration {
        match self.rolling_timestamp_ms {
            Some(timestamp_ms) => now.since_timestamp_ms(timestamp_ms),
            None => now - self.created,
        }
    }

    /// Whether a batch ending at `last_offset` can go in: its offsets must be expressible
    /// relative to the base in an index entry and its position in a u32.
    pub fn fits(&self, last_offset: Offset, batch_bytes: usize) -> bool {
        index::relative_offset(self.base_offset, last_offset).is_some()
            && self.size_bytes + batch_bytes as u64 <= u64::from(u32::MAX)
    }

    /// Append one validated batch (offsets already assigned). The log bytes go first, so
    /// that an index entry never points past the end of the `.log`.
    pub fn append(
        &mut self,
        disk: &Disk,
        batch: &[u8],
        header: &BatchHeader,
        indexing: Indexing,
    ) -> Result<(), DiskError> {
        debug_assert_eq!(
            header.base_offset, self.next_offset,
            "segment offsets must be contiguous"
        );
        disk.append(&self.log_path, batch)?;
        let (offset_entry, time_entry) = self.account(header, self.size_bytes, indexing);
        if let Some(bytes) = offset_entry {
            disk.append(&self.index_path, &bytes)?;
        }
        if let Some(bytes) = time_entry {
            disk.append(&self.time_index_path, &bytes)?;
        }
        Ok(())
    }

    /// Update the in-memory state for a batch at `position`, as Kafka's `LogSegment.append`
    /// and `recover` do: an index entry as `indexing` says (see `storage::index`). Returns
    /// the index entries' bytes to append to the files.
    fn account(
        &mut self,
        header: &BatchHeader,
        position: u64,
        indexing: Indexing,
    ) -> (Option<[u8; 8]>, Option<[u8; 12]>) {
        let batch_bytes = header.size_bytes() as u64;
        if self.rolling_timestamp_ms.is_none() && header.max_timestamp >= 0 {
            self.rolling_timestamp_ms = Some(header.max_timestamp);
        }
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.last_offset();
        }
        let mut entries = (None, None);
        if self.bytes_since_last_index_entry > indexing.interval_bytes {
            let named = if indexing.by_last_offset {
                header.last_offset()
            } else {
                header.base_offset
            };
            let relative = index::relative_offset(self.base_offset, named);
            if let (Some(relative_offset), Ok(position)) = (relative, u32::try_from(position)) {
                entries.0 = Some(self.index.push(OffsetPosition {
                    relative_offset,
                    position,
                }));
                entries.1 = self.time_index_entry();
            }
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += batch_bytes;
        self.size_bytes = position + batch_bytes;
        self.next_offset = header.next_offset();
        entries
    }

    fn time_index_entry(&mut self) -> Option<[u8; 12]> {
        let relative_offset =
            index::relative_offset(self.base_offset, self.offset_of_max_timestamp)?;
        self.time_index.maybe_push(TimestampOffset {
            timestamp: self.max_timestamp,
            relative_offset,
        })
    }

    /// Kafka's `onBecomeInactiveSegment`: record the final largest timestamp in the time index.
    pub fn close(&mut self, disk: &Disk) -> Result<(), DiskError> {
        if self.max_timestamp == i64::MIN {
            return Ok(());
        }
        match self.time_index_entry() {
            Some(bytes) => disk.append(&self.time_index_path, &bytes).map(drop),
            None => Ok(()),
        }
    }

    /// Find the first batch holding an offset ≥ `target`: binary search of the index for the
    /// greatest entry ≤ target, then a forward scan of batch headers from the batch it names,
    /// which ends at or before `target`, as Kafka's `translateOffset`. Returns its position
    /// and header, or `None` if the segment ends before `target`. An index entry that does
    /// not lead to a batch starting at or below `target` (a damaged index) falls back to a
    /// scan from the segment's start, so a lookup always agrees with a linear scan.
    pub fn translate_offset(
        &self,
        disk: &Disk,
        target: Offset,
    ) -> Result<Option<(u64, BatchHeader)>, DiskError> {
        if target >= self.next_offset {
            return Ok(None);
        }
        let start = index::relative_offset(self.base_offset, target)
            .and_then(|relative| self.index.lookup(relative))
            .map_or(0, |entry| u64::from(entry.position));
        if let Some(found) = self.scan_from(disk, start, target)? {
            return Ok(Some(found));
        }
        if start == 0 {
            return Ok(None);
        }
        self.scan_from(disk, 0, target)
    }

    fn scan_from(
        &self,
        disk: &Disk,
        mut position: u64,
        target: Offset,
    ) -> Result<Option<(u64, BatchHeader)>, DiskError> {
        let mut first = true;
        let mut buf = [0u8; BATCH_HEADER_LEN];
        while position < self.size_bytes {
            let read = disk.read_into(&self.log_path, position, &mut buf)?;
            let Ok(header) = record::parse_header(&buf[..read]) else {
                return Ok(None);
            };
            if first && header.base_offset > target {
                return Ok(None);
            }
            first = false;
            if header.last_offset() >= target {
                return Ok(Some((position, header)));
            }
            position += header.size_bytes() as u64;
        }
        Ok(None)
    }

    /// Whole batches from `position` (where `first` starts): the first one regardless of
    /// `max_bytes`, then as many as fit, all ending below `upper_bound`.
    pub fn read_from(
        &self,
        disk: &Disk,
        position: u64,
        first: &BatchHeader,
        max_bytes: u64,
        upper_bound: Offset,
        out: &mut Vec<u8>,
    ) -> Result<(), DiskError> {
        if first.last_offset() >= upper_bound {
            return Ok(());
        }
        let want = max_bytes
            .max(first.size_bytes() as u64)
            .min(self.size_bytes - position);
        let mut bytes = disk.read(&self.log_path, position, want as usize)?;
        let mut end = 0usize;
        while end < bytes.len() {
            let Ok(header) = record::parse_header(&bytes[end..]) else {
                break;
            };
            let size = header.size_bytes();
            if end + size > bytes.len() || header.last_offset() >= upper_bound {
                break;
            }
            end += size;
        }
        bytes.truncate(end);
        if out.is_empty() {
            *out = bytes;
        } else {
            out.extend_from_slice(&bytes);
        }
        Ok(())
    }

    /// Cut the segment so that it ends before the batch at `position` (whose base offset is
    /// `next_offset`), dropping the index entries past the cut and rewriting the index files.
    /// Cutting the `.index` by position keeps what Kafka's `truncateTo` keeps by offset: an
    /// entry's batch lies wholly before the cut (its last offset below `next_offset`) or not.
    pub fn truncate_to(
        &mut self,
        disk: &Disk,
        position: u64,
        next_offset: Offset,
    ) -> Result<(), DiskError> {
        disk.set_len(&self.log_path, position)?;
        self.size_bytes = position;
        self.next_offset = next_offset;
        self.index
            .truncate_to_position(u32::try_from(position).unwrap_or(u32::MAX));
        if let Some(relative) = index::relative_offset(self.base_offset, next_offset) {
            self.time_index.truncate_to_offset(relative);
        }
        self.bytes_since_last_index_entry = self
            .index
            .last()
            .map_or(position, |e| position - u64::from(e.position));
        self.max_timestamp = i64::MIN;
        self.offset_of_max_timestamp = self.base_offset;
        self.rolling_timestamp_ms = None;
        for BatchSummary { header, .. } in self.batches(disk)? {
            if self.rolling_timestamp_ms.is_none() && header.max_timestamp >= 0 {
                self.rolling_timestamp_ms = Some(header.max_timestamp);
            }
            if header.max_timestamp > self.max_timestamp {
                self.max_timestamp = header.max_timestamp;
                self.offset_of_max_timestamp = header.last_offset();
            }
        }
        disk.create(&self.index_path)?;
        disk.write(&self.index_path, 0, &self.index.to_bytes())?;
        disk.create(&self.time_index_path)?;
        disk.write(&self.time_index_path, 0, &self.time_index.to_bytes())?;
        let txn_len = self.txn_index.truncate_to(next_offset);
        if self.txn_index_file {
            disk.set_len(&self.txn_index_path, txn_len)?;
        }
        Ok(())
    }

    pub fn delete(&self, disk: &Disk) -> Result<(), DiskError> {
        for path in self.paths() {
            match disk.delete(path) {
                Ok(()) | Err(DiskError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every batch of the segment as producer state reads it, from the page cache.
    pub fn batches(&self, disk: &Disk) -> Result<Vec<BatchSummary>, DiskError> {
        let bytes = disk.read(&self.log_path, 0, self.size_bytes as usize)?;
        let mut batches = Vec::new();
        let mut position = 0;
        while let Ok(header) = record::parse_header(&bytes[position..]) {
            let end = position + header.size_bytes();
            if end > bytes.len() {
                break;
            }
            batches.push(BatchSummary::of(header, &bytes[position..end]));
            position = end;
        }
        Ok(batches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::{set_base_offset, BatchBuilder};
    use crate::kafka::storage::recovery::{self, ScanMode, SegmentBounds};
    use crate::kafka::types::ProducerId;
    use crate::os::disk::DiskConfig;

    const BASE: Offset = Offset(100);
    /// Records per batch: most batches hold several, so base and last offsets differ.
    const COUNTS: [usize; 9] = [3, 1, 4, 2, 5, 1, 3, 2, 4];
    /// `index.interval.bytes`: about one entry every other batch, named as Kafka 2.0 on.
    const INDEXING: Indexing = Indexing {
        interval_bytes: 100,
        by_last_offset: true,
    };

    /// A segment at `BASE` with a batch per count, appended as the log appends them, with
    /// an index entry every other batch or so.
    fn segment_of(counts: &[usize]) -> (Disk, Segment) {
        let disk = Disk::new(DiskConfig::default(), 1);
        let mut segment = Segment::create(&disk, "d", BASE, SimTime::ZERO).expect("create");
        for &count in counts {
            append(&disk, &mut segment, count);
        }
        (disk, segment)
    }

    fn append(disk: &Disk, segment: &mut Segment, count: usize) {
        let stamp = segment.next_offset().0;
        let mut builder = BatchBuilder::new(stamp, ProducerId::NONE, -1, -1);
        for i in 0..count {
            builder.push(stamp + i as i64, None, Some(b"value"));
        }
        let mut batch = builder.build();
        set_base_offset(&mut batch, segment.next_offset());
        let header = record::parse_header(&batch).expect("built batch");
        segment
            .append(disk, &batch, &header, INDEXING)
            .expect("append");
    }

    /// The check of Kafka's `kafka-dump-log.sh --verify-index-only` on the `.index` the disk
    /// holds, which must be the segment's: each entry's offset is the last offset of the
    /// batch at its position. Returns the headers of the indexed batches.
    fn assert_entries_name_last_offsets(disk: &Disk, segment: &Segment) -> Vec<BatchHeader> {
        let log = disk.read_all(&segment.log_path).expect("log");
        let on_disk = OffsetIndex::parse(&disk.read_all(&segment.index_path).expect("index"))
            .expect("a sound index");
        assert_eq!(&on_disk, segment.index());
        let mut headers = Vec::new();
        for entry in on_disk.entries() {
            let header = record::parse_header(&log[entry.position as usize..]).expect("batch");
            assert_eq!(
                BASE.0 + i64::from(entry.relative_offset),
                header.last_offset().0,
                "entry {entry:?}"
            );
            headers.push(header);
        }
        headers
    }

    #[test]
    fn index_entries_name_the_last_offset_of_the_batch_at_their_position() {
        let (disk, segment) = segment_of(&COUNTS);
        let indexed = assert_entries_name_last_offsets(&disk, &segment);
        assert!(indexed.len() >= 3, "{indexed:?}");
        assert!(
            indexed.iter().any(|h| h.base_offset != h.last_offset()),
            "multi-record batches are indexed"
        );
    }

    /// Kafka 0.10 to 1.1 name each entry by the base offset of the batch at its position,
    /// and recovery rebuilds the same entries; lookups still land on the holding batch.
    #[test]
    fn before_2_0_index_entries_name_the_base_offset() {
        let old = Indexing {
            by_last_offset: false,
            ..INDEXING
        };
        let disk = Disk::new(DiskConfig::default(), 1);
        let mut segment = Segment::create(&disk, "d", BASE, SimTime::ZERO).expect("create");
        for &count in &COUNTS {
            let stamp = segment.next_offset().0;
            let mut builder = BatchBuilder::new(stamp, ProducerId::NONE, -1, -1);
            for i in 0..count {
                builder.push(stamp + i as i64, None, Some(b"value"));
            }
            let mut batch = builder.build();
            set_base_offset(&mut batch, segment.next_offset());
            let header = record::parse_header(&batch).expect("built batch");
            segment.append(&disk, &batch, &header, old).expect("append");
        }
        let log = disk.read_all(&segment.log_path).expect("log");
        let entries = segment.index().entries().to_vec();
        assert!(entries.len() >= 3, "{entries:?}");
        for entry in &entries {
            let header = record::parse_header(&log[entry.position as usize..]).expect("batch");
            assert_eq!(
                BASE.0 + i64::from(entry.relative_offset),
                header.base_offset.0
            );
        }
        let bounds = SegmentBounds {
            base: BASE,
            expected: BASE,
            next_base: None,
        };
        let scan = recovery::scan_segment(&log, bounds, ScanMode::Validate);
        let rebuilt =
            Segment::load(&disk, "d", BASE, &scan, old, false, SimTime::ZERO).expect("load");
        assert_eq!(rebuilt.index(), segment.index());
        for offset in BASE.0..segment.next_offset().0 {
            let (_, header) = segment
                .translate_offset(&disk, Offset(offset))
                .expect("read")
                .expect("a batch holds it");
            assert!(header.base_offset.0 <= offset && offset <= header.last_offset().0);
        }
    }

    /// Recovery rebuilds the very entries the appends wrote, as Kafka's `recover` does.
    #[test]
    fn a_rebuilt_index_is_the_one_the_appends_wrote() {
        let (disk, segment) = segment_of(&COUNTS);
        let written = [&segment.index_path, &segment.time_index_path]
            .map(|path| disk.read_all(path).expect("index"));
        let bytes = disk.read_all(&segment.log_path).expect("log");
        let bounds = SegmentBounds {
            base: BASE,
            expected: BASE,
            next_base: None,
        };
        let scan = recovery::scan_segment(&bytes, bounds, ScanMode::Validate);
        let rebuilt =
            Segment::load(&disk, "d", BASE, &scan, INDEXING, false, SimTime::ZERO).expect("load");
        assert_eq!(rebuilt.index(), segment.index());
        assert_eq!(rebuilt.time_index(), segment.time_index());
        for (path, written) in [&rebuilt.index_path, &rebuilt.time_index_path]
            .into_iter()
            .zip(written)
        {
            assert_eq!(disk.read_all(path).expect("index"), written, "{path}");
        }
    }

    /// Every offset's lookup lands on the batch holding it, although an entry names the
    /// batch by its last offset; a truncation inside a batch keeps only entries of batches
    /// before the cut, and appends after it index as before.
    #[test]
    fn lookups_and_truncation_agree_with_last_offset_entries() {
        let (disk, mut segment) = segment_of(&COUNTS);
        let holding = |segment: &Segment, offset: i64| {
            let (position, header) = segment
                .translate_offset(&disk, Offset(offset))
                .expect("read")
                .expect("a batch holds it");
            assert!(
                header.base_offset.0 <= offset && offset <= header.last_offset().0,
                "{offset} in {header:?}"
            );
            (position, header)
        };
        for offset in BASE.0..segment.next_offset().0 {
            holding(&segment, offset);
        }
        assert!(matches!(
            segment.translate_offset(&disk, segment.next_offset()),
            Ok(None)
        ));
        // Inside the batch of an entry, below the offset the entry names: the lookup starts
        // at the entry before, the cut drops this entry and every later one.
        let entries = segment.index().entries().to_vec();
        let log = disk.read_all(&segment.log_path).expect("log");
        let cut = (1..entries.len())
            .rev()
            .find(|&i| {
                let header = record::parse_header(&log[entries[i].position as usize..]);
                header.is_ok_and(|h| h.base_offset != h.last_offset())
            })
            .expect("an indexed multi-record batch after the first entry");
        let target = BASE.0 + i64::from(entries[cut].relative_offset) - 1;
        assert_eq!(
            segment.index().lookup(entries[cut].relative_offset - 1),
            Some(entries[cut - 1])
        );
        let (position, header) = holding(&segment, target);
        assert_eq!(position, u64::from(entries[cut].position));
        segment
            .truncate_to(&disk, position, header.base_offset)
            .expect("truncate");
        assert_eq!(segment.index().entries(), &entries[..cut]);
        assert_entries_name_last_offsets(&disk, &segment);
        for offset in BASE.0..segment.next_offset().0 {
            holding(&segment, offset);
        }
        for count in COUNTS {
            append(&disk, &mut segment, count);
        }
        for offset in BASE.0..segment.next_offset().0 {
            holding(&segment, offset);
        }
        assert_entries_name_last_offsets(&disk, &segment);
    }

    #[test]
    fn file_names_are_twenty_digit_base_offsets() {
        assert_eq!(file_name(Offset(0), LOG_SUFFIX), "00000000000000000000.log");
        assert_eq!(
            file_name(Offset(1234), INDEX_SUFFIX),
            "00000000000000001234.index"
        );
        assert_eq!(
            parse_log_file_name("00000000000000001234.log"),
            Some(Offset(1234))
        );
        assert_eq!(parse_log_file_name("00000000000000001234.index"), None);
        assert_eq!(parse_log_file_name("1234.log"), None);
        assert_eq!(parse_log_file_name("0000000000000000123x.log"), None);
        assert_eq!(parse_log_file_name("leader-epoch-checkpoint"), None);
    }
}
