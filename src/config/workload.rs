//! How a workload's sends arrive: the instants a producer's application calls `send`,
//! drawn from the seed. A fixed period meets every fault in the same phase on every seed
//! (a power loss at 8 s always falls just after a send, never in the window a follower
//! has yet to fetch); a Poisson process at the same mean rate puts each seed somewhere
//! else in that window, as independent clients do.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use std::time::Duration;

/// `[workload] arrivals`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Independent sends at the mean rate: exponential gaps, the first one too.
    Poisson,
    /// One send every `1/rate` s from the producer's start, on every seed: the same
    /// phase against every fault, for lessons that need it.
    Periodic,
}

impl Arrivals {
    pub const ALL: [Arrivals; 2] = [Arrivals::Poisson, Arrivals::Periodic];

    /// As a scenario file writes it.
    pub const fn name(self) -> &'static str {
        match self {
            Arrivals::Poisson => "poisson",
            Arrivals::Periodic => "periodic",
        }
    }
}

/// `[workload] on_error`: what the application records when Kafka's send callback gets an
/// exception.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// What the error proves: "not written" only where no attempt can have written the
    /// batch, unknown otherwise (a timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND), as Jepsen
    /// records it.
    WhatItProves,
    /// Every exception taken as "not written", as many applications log it.
    NotWritten,
}

impl OnError {
    pub const ALL: [OnError; 2] = [OnError::WhatItProves, OnError::NotWritten];

    /// As a scenario file writes it.
    pub const fn name(self) -> &'static str {
        match self {
            OnError::WhatItProves => "what-it-proves",
            OnError::NotWritten => "not-written",
        }
    }
}

/// One producer's send instants, as offsets from its start: an iterator that never ends
/// (the producer stops at the end of the load or of its budget).
#[derive(Clone, Debug)]
pub struct ArrivalProcess {
    kind: Arrivals,
    /// The mean gap, `1/rate` s.
    period: Duration,
    /// The gaps' distribution, for Poisson arrivals: exponential at `rate` per second.
    exp: Exp<f64>,
    rng: StdRng,
    /// The offset of the next send.
    next: Duration,
}

impl ArrivalProcess {
    /// `rate` sends per second on average (at least 1), drawn from `seed`.
    pub fn new(kind: Arrivals, rate: u32, seed: u64) -> ArrivalProcess {
        assert!(rate > 0, "a process that never sends has no arrivals");
        let period = Duration::from_secs(1) / rate;
        let mut process = ArrivalProcess {
            kind,
            period,
            exp: Exp::new(1.0 / period.as_secs_f64()).expect("a positive rate"),
            rng: StdRng::seed_from_u64(seed),
            next: Duration::ZERO,
        };
        if kind == Arrivals::Poisson {
            // Memoryless: the first send is as far from the start as any from the last.
            process.next = process.gap();
        }
        process
    }

    /// The gap to the next send after the current one.
    fn gap(&mut self) -> Duration {
        match self.kind {
            Arrivals::Periodic => self.period,
            Arrivals::Poisson => Duration::from_secs_f64(self.exp.sample(&mut self.rng)),
        }
    }
}

impl Iterator for ArrivalProcess {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let at = self.next;
        self.next = at + self.gap();
        debug_assert!(self.next >= at, "arrivals move forward");
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(kind: Arrivals, rate: u32, seed: u64, n: usize) -> Vec<Duration> {
        ArrivalProcess::new(kind, rate, seed).take(n).collect()
    }

    #[test]
    fn a_periodic_process_sends_every_period_from_the_start_on_every_seed() {
        for seed in [1, 2] {
            let sends = first(Arrivals::Periodic, 100, seed, 50);
            for (i, at) in sends.iter().enumerate() {
                assert_eq!(*at, Duration::from_millis(10) * i as u32);
            }
        }
    }

    #[test]
    fn a_poisson_process_keeps_the_mean_rate_and_differs_by_seed() {
        let starts: std::collections::BTreeSet<Duration> = (0..20)
            .map(|seed| first(Arrivals::Poisson, 100, seed, 1)[0])
            .collect();
        assert_eq!(starts.len(), 20, "the first send moves with the seed");
        let sends = first(Arrivals::Poisson, 1000, 1, 20_000);
        let span = sends.last().unwrap().as_secs_f64();
        let rate = sends.len() as f64 / span;
        assert!((950.0..1050.0).contains(&rate), "mean rate {rate}");
        assert!(sends.windows(2).all(|w| w[0] <= w[1]));
        // Exponential gaps: about 1/e of them longer than the mean.
        let mean = Duration::from_millis(1);
        let long = sends.windows(2).filter(|w| w[1] - w[0] > mean).count() as f64;
        let share = long / (sends.len() - 1) as f64;
        assert!(
            (0.34..0.40).contains(&share),
            "share of gaps above the mean {share}"
        );
        assert_ne!(first(Arrivals::Poisson, 1000, 2, 20), sends[..20]);
        assert_eq!(
            first(Arrivals::Poisson, 1000, 1, 20),
            sends[..20],
            "same seed, same instants"
        );
    }
}
