//! Many runs at once: one simulation per thread, seeds spread over the cores. A run is a
//! pure function of (variant, seed), so running seeds side by side changes no result.

use super::runner::{RunOptions, RunOutcome, Runner};
use super::system::RunError;
use crate::scenario::model::Variant;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// One run to do: which variant, which seed.
#[derive(Clone, Copy, Debug)]
pub struct Job<'a> {
    pub variant: &'a Variant,
    pub seed: u64,
}

/// Every variant on every seed, seed by seed: the order runs are printed in.
pub fn jobs<'a>(seeds: &[u64], variants: &[&'a Variant]) -> Vec<Job<'a>> {
    seeds
        .iter()
        .flat_map(|&seed| variants.iter().map(move |&variant| Job { variant, seed }))
        .collect()
}

/// Run every job with `run` on up to `threads` threads; results come back in job order.
pub fn run_all(
    run: Runner,
    jobs: &[Job<'_>],
    threads: usize,
    options: &RunOptions,
) -> Vec<Result<RunOutcome, RunError>> {
    let mut results = Vec::with_capacity(jobs.len());
    let never = AtomicBool::new(false);
    run_each(
        run,
        jobs,
        threads,
        options,
        &never,
        |_, r| r,
        |r| results.push(r),
    );
    results
}

/// Run every job with `run` on up to `threads` threads, streaming: each worker turns its run into a
/// `T` with `keep` (so a finished run can shrink to what the caller needs before it
/// waits), and `consume` gets them on this thread in job order, each as soon as the runs
/// before it are done. No job starts once `stop` is set; returns how many were consumed.
pub fn run_each<T: Send>(
    run: Runner,
    jobs: &[Job<'_>],
    threads: usize,
    options: &RunOptions,
    stop: &AtomicBool,
    keep: impl Fn(&Job<'_>, Result<RunOutcome, RunError>) -> T + Sync,
    mut consume: impl FnMut(T),
) -> usize {
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, jobs.len().max(1));
    let (sender, receiver) = mpsc::channel::<(usize, T)>();
    let mut consumed = 0;
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let sender = sender.clone();
            let (next, keep) = (&next, &keep);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let kept = keep(job, run(job.variant, job.seed, options));
                if sender.send((i, kept)).is_err() {
                    break;
                }
            });
        }
        drop(sender);
        // Runs finish out of order; hold the early ones until their turn.
        let mut waiting: BTreeMap<usize, T> = BTreeMap::new();
        for (i, kept) in receiver {
            waiting.insert(i, kept);
            while let Some(kept) = waiting.remove(&consumed) {
                consume(kept);
                consumed += 1;
            }
        }
    });
    consumed
}

/// The machine's parallelism, for the default number of threads.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `--shard K/N`: the K-th of N shares of a command's runs, K counted from 1 as nextest
/// counts. Run `i` (in the order an unsharded command runs them) belongs to shard
/// `i % N + 1`, so every shard gets a like mix of seeds and variants, and the N shards
/// together run each run exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// From 1 to `count`.
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The items of `all` (runs, or seeds) that are this shard's, in their order.
    pub fn select<T: Clone>(&self, all: &[T]) -> Vec<T> {
        all.iter()
            .enumerate()
            .filter(|(i, _)| i % self.count + 1 == self.index)
            .map(|(_, item)| item.clone())
            .collect()
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `2/3`.
    fn from_str(text: &str) -> Result<Shard, String> {
        let wrong = || format!("`{text}` is not K/N with 1 <= K <= N, like 2/3");
        let (index, count) = text.split_once('/').ok_or_else(wrong)?;
        let (index, count): (usize, usize) = (
            index.trim().parse().map_err(|_| wrong())?,
            count.trim().parse().map_err(|_| wrong())?,
        );
        if index == 0 || index > count {
            return Err(wrong());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::Shard;

    #[test]
    fn shards_split_the_runs_exactly_once_between_them() {
        let all: Vec<u32> = (0..10).collect();
        let shards: Vec<Shard> = (1..=3).map(|k| format!("{k}/3").parse().unwrap()).collect();
        let parts: Vec<Vec<u32>> = shards.iter().map(|s| s.select(&all)).collect();
        assert_eq!(parts, [vec![0, 3, 6, 9], vec![1, 4, 7], vec![2, 5, 8]]);
        for bad in ["0/3", "4/3", "3", "a/b", "1/0"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(shards[1].to_string(), "2/3");
    }
}
