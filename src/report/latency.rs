//! Ack latency (invoke to ok, in simulated time) and throughput, from the history.

use crate::history::{Event, MessageId, Op};
use crate::os::clock::SimTime;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Percentiles of ack latencies (nearest rank, exact), in simulated ms.
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
        let histogram = histogram_of(history);
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
            latency: histogram.stats(),
            histogram,
            throughput_per_s,
        }
    }
}

/// Ack latency percentiles of a history.
pub fn latency_stats(history: &[Event]) -> LatencyStats {
    histogram_of(history).stats()
}

fn histogram_of(history: &[Event]) -> LatencyHistogram {
    let mut histogram = LatencyHistogram::default();
    for latency in ack_latencies(history) {
        histogram.record(latency);
    }
    histogram
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

/// Index of the `q` quantile of `n > 0` sorted samples, by the nearest-rank method.
fn nearest_rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n) - 1
}

/// The latencies of any number of runs, exactly: a count per distinct value in µs.
/// Simulated latencies fall on the 1 ms tick, so a run has a few thousand distinct values
/// at most, and a merged histogram not many more. Every percentile hightide prints (a run's,
/// a variant's, a sweep row's) comes from one of these, so they agree.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyHistogram {
    counts: BTreeMap<u64, u64>,
    total: u64,
}

impl LatencyHistogram {
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        *self.counts.entry(us).or_default() += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (&us, &n) in &other.counts {
            *self.counts.entry(us).or_default() += n;
        }
        self.total += other.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// `(µs, acks)` per distinct latency, shortest first: what `--json` writes.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts.iter().map(|(&us, &n)| (us, n))
    }

    /// The histogram [`entries`](Self::entries) wrote.
    pub fn from_entries(entries: impl IntoIterator<Item = (u64, u64)>) -> LatencyHistogram {
        let mut histogram = LatencyHistogram::default();
        for (us, n) in entries {
            *histogram.counts.entry(us).or_default() += n;
            histogram.total += n;
        }
        histogram
    }

    /// The `q` quantile (nearest rank) in ms; 0 if empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = nearest_rank(q, self.total as usize) as u64 + 1;
        let mut seen = 0;
        for (&us, &n) in &self.counts {
            seen += n;
            if seen >= rank {
                return us as f64 / 1000.0;
            }
        }
        self.max_ms()
    }

    pub fn max_ms(&self) -> f64 {
        self.counts
            .keys()
            .next_back()
            .map_or(0.0, |&us| us as f64 / 1000.0)
    }

    /// Count, p50, p99 and max.
    pub fn stats(&self) -> LatencyStats {
        LatencyStats {
            count: self.total,
            p50_ms: self.quantile_ms(0.50),
            p99_ms: self.quantile_ms(0.99),
            max_ms: self.max_ms(),
        }
    }
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
                    degraded: None,
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

    proptest! {
        #[test]
        fn merged_histogram_quantiles_are_the_exact_nearest_rank(
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
            prop_assert_eq!(h.quantile_ms(q), exact);
            prop_assert_eq!(h.max_ms(), us[us.len() - 1] as f64 / 1000.0);
            prop_assert_eq!(h.count(), us.len() as u64);
        }
    }
}
