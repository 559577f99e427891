//! Ack latency (invoke to ok, in simulated time) and throughput, from the history.

use crate::history::{Event, MessageId, Op};
use crate::os::clock::SimTime;
use serde::Serialize;
use std::time::Duration;

/// Exact percentiles of one run's ack latencies (nearest rank), in simulated ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Acks with a matching invoke.
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What a run's history says besides the checker counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryStats {
    pub events: u64,
    pub latency: LatencyStats,
    /// The same latencies, mergeable across runs (sweeps pool them per configuration).
    pub histogram: LatencyHistogram,
    /// Acked messages per simulated second, over the workload: from the first invoke to the
    /// last ack (the heal phase, when nothing is sent, does not dilute it).
    pub throughput_per_s: f64,
}

impl HistoryStats {
    pub fn from_history(history: &[Event]) -> HistoryStats {
        let latencies = ack_latencies(history);
        let mut histogram = LatencyHistogram::default();
        for &latency in &latencies {
            histogram.record(latency);
        }
        let first_invoke = history
            .iter()
            .find(|e| matches!(e.op, Op::Invoke { .. }))
            .map(|e| e.time);
        let acks: Vec<SimTime> = history
            .iter()
            .filter(|e| matches!(e.op, Op::Ok { .. }))
            .map(|e| e.time)
            .collect();
        let throughput_per_s = match (first_invoke, acks.iter().max()) {
            (Some(first), Some(&last)) => {
                // At least a millisecond, so one instant ack does not read as infinite.
                let span = (last - first).max(Duration::from_millis(1));
                acks.len() as f64 / span.as_secs_f64()
            }
            _ => 0.0,
        };
        HistoryStats {
            events: history.len() as u64,
            latency: stats(latencies),
            histogram,
            throughput_per_s,
        }
    }
}

/// Ack latency percentiles of a history.
pub fn latency_stats(history: &[Event]) -> LatencyStats {
    stats(ack_latencies(history))
}

/// Invoke-to-ok time of every acked send whose invoke is in the history.
fn ack_latencies(history: &[Event]) -> Vec<Duration> {
    let mut invokes: Vec<(MessageId, SimTime)> = history
        .iter()
        .filter_map(|e| match &e.op {
            Op::Invoke { id, .. } => Some((*id, e.time)),
            _ => None,
        })
        .collect();
    // Stable, so that the first invoke of an id is found first.
    invokes.sort_by_key(|&(id, _)| id);
    history
        .iter()
        .filter_map(|e| match &e.op {
            Op::Ok { id, .. } => {
                let i = invokes.partition_point(|&(other, _)| other < *id);
                invokes
                    .get(i)
                    .filter(|&&(other, _)| other == *id)
                    .map(|&(_, t)| e.time - t)
            }
            _ => None,
        })
        .collect()
}

fn stats(mut latencies: Vec<Duration>) -> LatencyStats {
    latencies.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    match latencies.last() {
        None => LatencyStats::default(),
        Some(&max) => LatencyStats {
            count: latencies.len() as u64,
            p50_ms: ms(latencies[nearest_rank(0.50, latencies.len())]),
            p99_ms: ms(latencies[nearest_rank(0.99, latencies.len())]),
            max_ms: ms(max),
        },
    }
}

/// Index of the `q` quantile of `n > 0` sorted samples, by the nearest-rank method.
fn nearest_rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n) - 1
}

/// Linear sub-buckets per power of two: relative error under 1/32 (about 3%).
const SUB_BUCKETS: u64 = 32;
/// Below this many microseconds every value has its own bucket.
const LINEAR_US: u64 = 2 * SUB_BUCKETS;

/// A log-linear histogram of latencies in microseconds (HdrHistogram's idea, small): exact
/// below 64 µs, then 32 buckets per power of two. Mergeable, so a sweep can pool the acks
/// of a hundred runs without keeping them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    max_us: u64,
}

impl LatencyHistogram {
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let bucket = bucket_of(us);
        if self.counts.len() <= bucket {
            self.counts.resize(bucket + 1, 0);
        }
        self.counts[bucket] += 1;
        self.total += 1;
        self.max_us = self.max_us.max(us);
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
        self.max_us = self.max_us.max(other.max_us);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (nearest rank) in ms, to the histogram's precision; 0 if empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = nearest_rank(q, self.total as usize) as u64 + 1;
        let mut seen = 0;
        for (bucket, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(bucket);
                let middle = (low + width / 2).min(self.max_us);
                return middle as f64 / 1000.0;
            }
        }
        self.max_ms()
    }

    pub fn max_ms(&self) -> f64 {
        self.max_us as f64 / 1000.0
    }
}

fn bucket_of(us: u64) -> usize {
    if us < LINEAR_US {
        return us as usize;
    }
    let exponent = u64::from(63 - us.leading_zeros());
    let shift = exponent - SUB_BUCKETS.trailing_zeros() as u64;
    let sub = (us >> shift) - SUB_BUCKETS;
    (LINEAR_US + (shift - 1) * SUB_BUCKETS + sub) as usize
}

/// (lowest value, width) of a bucket, in µs.
fn bucket_range(bucket: usize) -> (u64, u64) {
    let bucket = bucket as u64;
    if bucket < LINEAR_US {
        return (bucket, 1);
    }
    let shift = (bucket - LINEAR_US) / SUB_BUCKETS + 1;
    let sub = (bucket - LINEAR_US) % SUB_BUCKETS;
    ((SUB_BUCKETS + sub) << shift, 1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Offset, TopicPartition};
    use proptest::prelude::*;

    fn at(ms: u64, op: Op) -> Event {
        Event {
            time: SimTime::from_millis(ms),
            process: "producer-1".into(),
            op,
        }
    }

    #[test]
    fn latency_is_invoke_to_ok_and_percentiles_are_nearest_rank() {
        let tp = TopicPartition::new("t", 0);
        let mut history = Vec::new();
        for seq in 0..100u64 {
            let id = MessageId {
                producer: 1,
                seq: seq as u32,
            };
            history.push(at(seq * 10, Op::Invoke { id, tp: tp.clone() }));
            history.push(at(
                seq * 10 + seq + 1,
                Op::Ok {
                    id,
                    tp: tp.clone(),
                    offset: Offset(seq as i64),
                },
            ));
        }
        let stats = latency_stats(&history);
        assert_eq!(
            stats,
            LatencyStats {
                count: 100,
                p50_ms: 50.0,
                p99_ms: 99.0,
                max_ms: 100.0
            }
        );
        let run = HistoryStats::from_history(&history);
        // 100 acks from t=0 to t=1090 ms.
        assert!((run.throughput_per_s - 100.0 / 1.090).abs() < 1e-9);
        assert_eq!(run.histogram.count(), 100);
    }

    #[test]
    fn a_history_without_acks_has_zero_stats() {
        let history = vec![at(
            5,
            Op::Invoke {
                id: MessageId {
                    producer: 1,
                    seq: 0,
                },
                tp: TopicPartition::new("t", 0),
            },
        )];
        assert_eq!(latency_stats(&history), LatencyStats::default());
        assert_eq!(HistoryStats::from_history(&history).throughput_per_s, 0.0);
    }

    #[test]
    fn buckets_tile_the_line() {
        // 64 exact buckets, then 32 per power of two up to 2^64.
        let last = 64 + 58 * 32 - 1;
        let mut expected_low = 0;
        for bucket in 0..last {
            let (low, width) = bucket_range(bucket);
            assert_eq!(low, expected_low, "bucket {bucket}");
            assert_eq!(bucket_of(low), bucket);
            assert_eq!(bucket_of(low + width - 1), bucket);
            expected_low = low + width;
        }
        assert_eq!(bucket_range(last).0, expected_low);
        assert_eq!(bucket_of(u64::MAX), last);
    }

    proptest! {
        #[test]
        fn histogram_quantiles_are_within_its_precision(
            mut us in proptest::collection::vec(0u64..10_000_000, 1..300),
            q in 0.0f64..1.0,
        ) {
            let mut h = LatencyHistogram::default();
            let (left, right) = us.split_at(us.len() / 2);
            let mut other = LatencyHistogram::default();
            for &v in left { h.record(Duration::from_micros(v)); }
            for &v in right { other.record(Duration::from_micros(v)); }
            h.merge(&other);
            us.sort_unstable();
            let exact = us[nearest_rank(q, us.len())] as f64 / 1000.0;
            let approx = h.quantile_ms(q);
            prop_assert!((approx - exact).abs() <= exact / 32.0 + 0.001, "{approx} vs {exact}");
        }
    }
}
