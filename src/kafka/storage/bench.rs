//! `hightide bench storage`: append and read throughput of one partition log on a
//! simulated disk (page cache only, no fsync), for 100-byte records in batches of 1, 16
//! and 256. Wall time is measured with `std::time::Instant`, which is allowed here because
//! the benchmark runs outside any simulation.

use std::time::Instant;

use crate::config::kafka::LogConfig;
use crate::kafka::record::BatchBuilder;
use crate::kafka::storage::log::{Log, StorageError};
use crate::kafka::types::ProducerId;
use crate::os::clock::SimTime;
use crate::os::disk::{Disk, DiskConfig};
use crate::types::{Epoch, Offset, TopicPartition};

pub const RECORD_BYTES: usize = 100;
pub const BATCH_SIZES: [usize; 3] = [1, 16, 256];
/// Record bytes appended per batch size when the CLI gives no other figure.
pub const DEFAULT_TOTAL_RECORD_BYTES: u64 = 64 << 20;

/// Samples per case: one pass is not a measurement (two passes of the same build gave 200
/// and 362 MB/s), so each figure is the median of several, with the spread beside it.
pub const SAMPLES: usize = 7;

/// Throughput of one phase.
struct Rate {
    record_bytes: u64,
    batches: u64,
    seconds: f64,
}

impl Rate {
    fn mb_per_s(&self) -> f64 {
        self.record_bytes as f64 / self.seconds.max(1e-9) / 1e6
    }
}

/// `median MB/s (min-max)` over the samples.
fn describe(rates: &[Rate]) -> String {
    let mut mb: Vec<f64> = rates.iter().map(Rate::mb_per_s).collect();
    mb.sort_by(f64::total_cmp);
    let batches_per_s = rates
        .iter()
        .map(|r| r.batches as f64 / r.seconds.max(1e-9))
        .fold(f64::NAN, f64::max);
    format!(
        "{:>7.1} MB/s median ({:.1}-{:.1}), best {:>9.0} batches/s",
        mb[mb.len() / 2],
        mb[0],
        mb[mb.len() - 1],
        batches_per_s
    )
}

/// Run the benchmark, appending about `total_record_bytes` of record values per batch
/// size in each of [`SAMPLES`] samples, and return the report.
pub fn run(total_record_bytes: u64) -> String {
    let mut report = format!(
        "storage bench: {RECORD_BYTES}-byte records, ~{} MB per case, {SAMPLES} samples, page cache only (no fsync)\n",
        total_record_bytes / 1_000_000
    );
    for records_per_batch in BATCH_SIZES {
        let samples: Result<Vec<(Rate, Rate)>, StorageError> = (0..SAMPLES)
            .map(|_| bench_case(records_per_batch, total_record_bytes))
            .collect();
        let line = match samples {
            Ok(samples) => {
                let (append, read): (Vec<Rate>, Vec<Rate>) = samples.into_iter().unzip();
                format!(
                    "batch {records_per_batch:>3}: append {} | read {}\n",
                    describe(&append),
                    describe(&read)
                )
            }
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
        flush_interval_messages: crate::config::kafka::NEVER,
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
        while let Ok(header) = crate::kafka::record::parse_header(&bytes[position..]) {
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
