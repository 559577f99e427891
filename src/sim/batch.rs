//! Many runs at once: one simulation per thread, seeds spread over the cores. A run is a
//! pure function of (variant, seed), so running seeds side by side changes no result.

use crate::scenario::model::Variant;
use crate::sim::runner::{self, RunError, RunOptions, RunOutcome};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One run to do: which variant, which seed.
#[derive(Clone, Copy, Debug)]
pub struct Job<'a> {
    pub variant: &'a Variant,
    pub seed: u64,
}

/// Run every job on up to `threads` threads; results come back in job order.
pub fn run_all(
    jobs: &[Job<'_>],
    threads: usize,
    options: &RunOptions,
) -> Vec<Result<RunOutcome, RunError>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunOutcome, RunError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let threads = threads.clamp(1, jobs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let outcome = runner::run(job.variant, job.seed, options);
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(outcome);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// The machine's parallelism, for the default number of threads.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
