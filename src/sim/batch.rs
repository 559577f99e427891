//! Many runs at once: one simulation per thread, seeds spread over the cores. A run is a
//! pure function of (variant, seed), so running seeds side by side changes no result.

use crate::scenario::model::Variant;
use crate::sim::runner::{self, RunError, RunOptions, RunOutcome};
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

/// Run every job on up to `threads` threads; results come back in job order.
pub fn run_all(
    jobs: &[Job<'_>],
    threads: usize,
    options: &RunOptions,
) -> Vec<Result<RunOutcome, RunError>> {
    let mut results = Vec::with_capacity(jobs.len());
    let never = AtomicBool::new(false);
    run_each(
        jobs,
        threads,
        options,
        &never,
        |_, r| r,
        |r| results.push(r),
    );
    results
}

/// Run every job on up to `threads` threads, streaming: each worker turns its run into a
/// `T` with `keep` (so a finished run can shrink to what the caller needs before it
/// waits), and `consume` gets them on this thread in job order, each as soon as the runs
/// before it are done. No job starts once `stop` is set; returns how many were consumed.
pub fn run_each<T: Send>(
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
                let kept = keep(job, runner::run(job.variant, job.seed, options));
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
