//! `hightide bench storage`: append and read throughput of one partition log on a
//! simulated disk (page cache only, no fsync), for 100-byte records in batches of 1, 16
//! and 256. Wall time is measured with `std::time::Instant`, which is allowed here because
//! the benchmark runs outside any simulation.

use std::time::Instant;

use crate::config::LogConfig;
use crate::os::clock::SimTime;
use crate::os::disk::{Disk, DiskConfig};
use crate::record::BatchBuilder;
use crate::storage::log::{Log, StorageError};
use crate::types::{Epoch, Offset, ProducerId, TopicPartition};

pub const RECORD_BYTES: usize = 100;
pub const BATCH_SIZES: [usize; 3] = [1, 16, 256];
/// Record bytes appended per batch size when the CLI gives no other figure.
pub const DEFAULT_TOTAL_RECORD_BYTES: u64 = 64 << 20;

/// Throughput of one phase.
struct Rate {
    record_bytes: u64,
    batches: u64,
    seconds: f64,
}

impl Rate {
    fn describe(&self) -> String {
        let seconds = self.seconds.max(1e-9);
        format!(
            "{:>9.1} MB/s {:>12.0} batches/s",
            self.record_bytes as f64 / seconds / 1e6,
            self.batches as f64 / seconds
        )
    }
}

/// Run the benchmark, appending about `total_record_bytes` of record values per batch
/// size, and return the report.
pub fn run(total_record_bytes: u64) -> String {
    let mut report = format!(
        "storage bench: {RECORD_BYTES}-byte records, ~{} MB per case, page cache only (no fsync)\n",
        total_record_bytes / 1_000_000
    );
    for records_per_batch in BATCH_SIZES {
        let line = match bench_case(records_per_batch, total_record_bytes) {
            Ok((append, read)) => format!(
                "batch {records_per_batch:>3}: append {} | read {}\n",
                append.describe(),
                read.describe()
            ),
            Err(e) => format!("batch {records_per_batch:>3}: failed: {e}\n"),
        };
        report.push_str(&line);
    }
    report
}

fn bench_case(
    records_per_batch: usize,
    total_record_bytes: u64,
) -> Result<(Rate, Rate), StorageError> {
    let disk = Disk::new(DiskConfig::default(), 0);
    let tp = TopicPartition::new("bench", 0);
    let config = LogConfig {
        flush_interval_messages: crate::config::NEVER,
        ..LogConfig::default()
    };
    let mut log = Log::open(
        &disk,
        &tp,
        config,
        Offset(0),
        Offset(0),
        true,
        SimTime::ZERO,
    )?;
    let template = build_batch(records_per_batch);
    let batch_record_bytes = (records_per_batch * RECORD_BYTES) as u64;
    let batches = (total_record_bytes / batch_record_bytes).max(1);

    let started = Instant::now();
    for _ in 0..batches {
        log.append_as_leader(template.clone(), Epoch(0), SimTime::ZERO)?;
    }
    let append = Rate {
        record_bytes: batches * batch_record_bytes,
        batches,
        seconds: started.elapsed().as_secs_f64(),
    };

    let started = Instant::now();
    let mut from = log.log_start_offset();
    let end = log.log_end_offset();
    let mut read_batches = 0u64;
    while from < end {
        let bytes = log.read(from, 1 << 20, end)?;
        let mut position = 0;
        while let Ok(header) = crate::record::parse_header(&bytes[position..]) {
            position += header.size_bytes();
            from = header.next_offset();
            read_batches += 1;
        }
        if bytes.is_empty() {
            break;
        }
    }
    let read = Rate {
        record_bytes: read_batches * batch_record_bytes,
        batches: read_batches,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((append, read))
}

/// One batch of `records` 100-byte values (the copy appended each time stands for the
/// request buffer a broker would hand to the log).
fn build_batch(records: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
    let value = [b'x'; RECORD_BYTES];
    for _ in 0..records {
        builder.push(0, None, Some(&value));
    }
    builder.build()
}
