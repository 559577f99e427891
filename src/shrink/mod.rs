//! From a failing run to a small one that fails the same way. The nemesis's draws become
//! explicit faults (the run is unchanged: the nemesis only ever adds to the schedule),
//! then passes take away what the failure does not need, each keeping a change only if
//! the run still breaks the same expectation: drop whole fault episodes (a fault with
//! what undoes it) in halving chunks, as delta debugging does, then single faults;
//! shorten episodes and move them earlier; cut `duration` after the last fault; lower
//! the workload and the cluster's size. Passes repeat until none changes anything.
//!
//! A run is a function of its settings and seed, so a shrink is too: the same file,
//! seed and variant always give the same steps and the same result, on any number of
//! threads (candidates run side by side, and the first in order that fails wins).

mod passes;

use crate::check::{Comparison, Expectation};
use crate::scenario::model::{Fault, Scenario, Settings, Variant};
use crate::scenario::write::{standalone, Standalone};
use crate::scenario::{self, format_duration};
use crate::sim::batch::{self, Job};
use crate::sim::faults;
use crate::sim::runner::RunOptions;
use crate::sim::system::RunError;
use crate::systems;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How far to go.
#[derive(Clone, Debug)]
pub struct Options {
    /// Stop trying once this many runs are spent (the smallest failing run so far stands);
    /// at least 2, the original run and its draws written out.
    pub max_runs: usize,
    /// Candidates run at once.
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_runs: 1000,
            threads: batch::default_threads(),
        }
    }
}

/// One change that kept the failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Runs spent when it was found.
    pub run: usize,
    pub change: String,
    /// Faults left after it.
    pub faults: usize,
    /// The goal's count after it.
    pub count: u64,
}

/// What a shrink found.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The variant with the smallest settings found: no nemesis, every fault explicit.
    pub variant: Variant,
    pub seed: u64,
    /// The expectation kept broken: the first the original run broke.
    pub goal: Expectation,
    /// The goal's count in the original run, and in the shrunk one.
    pub original_count: u64,
    pub count: u64,
    /// Faults the original run met (scripted and drawn).
    pub original_faults: usize,
    pub original_duration: std::time::Duration,
    pub runs: usize,
    pub steps: Vec<Step>,
    /// Whether `max_runs` ended it before the passes ran out of changes.
    pub out_of_runs: bool,
    /// Whether the workload and the cluster kept their size: a goal that bounds a count
    /// from below (`acked > 10000`) would break merely because less was sent.
    pub kept_workload: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("seed {seed} of {variant} meets every [expect]: there is no failure to shrink")]
    NothingToShrink { variant: String, seed: u64 },
    #[error("seed {seed} of {variant}: {error}")]
    Run {
        variant: String,
        seed: u64,
        error: RunError,
    },
    /// A hightide bug: the nemesis's draws written out do not replay the nemesis run.
    #[error("{0}")]
    NotReplayed(String),
    /// The shrunk run has no file (it has injected bugs), or, a hightide bug, the file
    /// written does not say what was shrunk.
    #[error("the shrunk scenario cannot be written: {0}")]
    Write(String),
}

/// Shrink `variant`'s run on `seed`, calling `on_step` with the goal and each change kept.
pub fn shrink(
    variant: &Variant,
    seed: u64,
    options: &Options,
    mut on_step: impl FnMut(&Expectation, &Step),
) -> Result<Shrunk, Error> {
    let run_error = |error| Error::Run {
        variant: variant.name.clone(),
        seed,
        error,
    };
    let outcome = crate::systems::run(variant, seed, &RunOptions::default()).map_err(run_error)?;
    let counts = &outcome.verdict.counts;
    let Some(goal) = variant
        .expect
        .iter()
        .copied()
        .find(|e| !crate::check::holds(e, counts.get(e.count)))
    else {
        return Err(Error::NothingToShrink {
            variant: variant.name.clone(),
            seed,
        });
    };
    let settings = &variant.settings;
    // A fault with a jitter is pinned at the instant this seed drew for it: the same run,
    // and a file that reads as what happened.
    let mut units: Vec<Vec<Fault>> = settings
        .faults
        .iter()
        .map(|f| {
            vec![Fault {
                at: faults::instant(f, seed),
                jitter: Duration::ZERO,
                action: f.action.clone(),
            }]
        })
        .collect();
    if let Some(nemesis) = &settings.nemesis {
        units.extend(faults::nemesis_episodes(
            nemesis,
            &settings.cluster,
            settings.duration,
            seed,
        ));
    }
    let kept_workload = !bounds_from_above(&goal);
    let mut shrinker = passes::Shrinker::new(
        variant,
        seed,
        goal,
        units,
        options,
        kept_workload,
        move |step: &Step| on_step(&goal, step),
    );
    shrinker.explicit(counts.get(goal.count))?;
    shrinker.run_passes()?;
    Ok(Shrunk {
        variant: shrinker.variant(),
        seed,
        goal,
        original_count: counts.get(goal.count),
        count: shrinker.count,
        original_faults: shrinker.original_faults,
        original_duration: settings.duration,
        runs: shrinker.runs,
        steps: std::mem::take(&mut shrinker.steps),
        out_of_runs: shrinker.out_of_runs,
        kept_workload,
    })
}

/// Whether the goal caps a count (`lost == 0`, `lost < 5`): a smaller run can only make
/// such a count smaller, so a smaller run that still breaks it is a real finding.
fn bounds_from_above(goal: &Expectation) -> bool {
    match goal.comparison {
        Comparison::Lt | Comparison::Le => true,
        Comparison::Eq => goal.value == 0,
        Comparison::Gt | Comparison::Ge | Comparison::Ne => false,
    }
}

impl Shrunk {
    /// The shrunk run as a standalone scenario file, `scenario`'s text edited: the
    /// variant alone, its faults spelled out, `seeds = [seed]`, every expectation in one
    /// `[expect]`, `sets` (the `--set` arguments of the shrink) written in, and comments
    /// saying where it came from. `out` is the path it will be read from. It is checked
    /// to resolve to exactly the shrunk settings.
    pub fn scenario_file(
        &self,
        scenario: &Scenario,
        sets: &[String],
        out: &Path,
    ) -> Result<String, Error> {
        let write = |m: String| Error::Write(m);
        let original = scenario
            .variants
            .iter()
            .find(|v| v.name == self.variant.name)
            .ok_or_else(|| write(format!("the scenario has no variant {}", self.variant.name)))?;
        if self.variant.settings.bugs != Default::default() {
            return Err(write(
                "a run with injected bugs has no scenario file (no file can set them)".into(),
            ));
        }
        let header = self.header(scenario, sets, out);
        let expect_some: Vec<Expectation> = self
            .variant
            .expect_some
            .iter()
            .copied()
            .filter(|e| crate::check::DEFAULT_ZERO.contains(&e.count))
            .collect();
        let text = standalone(&Standalone {
            text: &scenario.source,
            variant: &self.variant.name,
            original: &original.settings,
            settings: &self.variant.settings,
            sets,
            expect: &self.variant.expect,
            expect_some: &expect_some,
            name: &format!("{}, seed {} shrunk", scenario.name, self.seed),
            seed: self.seed,
            header: &header,
        })
        .map_err(write)?;
        let reread = scenario::parse(&text, out)
            .map_err(|e| write(format!("it does not parse: {}", e.report())))?;
        let sorted = |expect: &[Expectation]| {
            let mut sorted: Vec<String> = expect.iter().map(ToString::to_string).collect();
            sorted.sort();
            sorted
        };
        let same = reread.variants.len() == 1
            && format!("{:?}", reread.variants[0].settings)
                == format!("{:?}", self.variant.settings)
            && sorted(&reread.variants[0].expect) == sorted(&self.variant.expect)
            && reread.variants[0].expect_some == expect_some
            && reread.seeds == [self.seed];
        if !same {
            return Err(write(format!(
                "it resolves to other settings than the shrunk run's:\n{text}"
            )));
        }
        Ok(text)
    }

    fn header(&self, scenario: &Scenario, sets: &[String], out: &Path) -> Vec<String> {
        let faults = self.variant.settings.faults.len();
        let mut sets_text = String::new();
        for set in sets {
            sets_text.push_str(&format!(" --set {}", shell_word(set)));
        }
        let mut lines = vec![
            format!(
                "Shrunk by `hightide shrink {}{sets_text} --seed {} --variant {}`.",
                scenario.path.display(),
                self.seed,
                self.variant.name
            ),
            format!(
                "There `{}` failed with {} {} ({} faults in {});",
                self.goal,
                crate::check::count_name(self.goal.count),
                self.original_count,
                self.original_faults,
                format_duration(self.original_duration)
            ),
            format!(
                "here it fails with {} {} ({} {} in {}), found in {} runs.",
                crate::check::count_name(self.goal.count),
                self.count,
                faults,
                if faults == 1 { "fault" } else { "faults" },
                format_duration(self.variant.settings.duration),
                self.runs
            ),
        ];
        if !sets.is_empty() {
            lines.push("The --set values are written into the file.".to_owned());
        }
        lines.push(format!("Replay: hightide run {}", out.display()));
        lines
    }
}

/// A word as a shell reads it back: as it is when plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-=/:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A candidate run: the fault units (scripted faults one by one, nemesis episodes) and
/// the other settings.
#[derive(Clone, Debug)]
struct Candidate {
    units: Vec<Vec<Fault>>,
    settings: Settings,
    change: String,
}

/// Every unit's faults in firing order: by time, equal times in unit order (scripted
/// first, then the draws), as the runner's schedule orders them.
fn flatten(units: &[Vec<Fault>]) -> Vec<Fault> {
    let mut faults = units.concat();
    faults.sort_by_key(|f| f.at);
    faults
}

/// Run `candidates` (up to `threads` at once) and return the first in order whose run
/// breaks `goal`, with its count, and how many runs were spent. Runs past the first
/// failing one are not counted, so the count does not depend on the threads.
fn first_failing(
    base: &Variant,
    seed: u64,
    goal: &Expectation,
    candidates: &[Candidate],
    threads: usize,
) -> Result<(Option<(usize, u64)>, usize), Error> {
    let variants: Vec<Variant> = candidates
        .iter()
        .map(|c| Variant {
            name: base.name.clone(),
            settings: c.settings.clone(),
            expect: base.expect.clone(),
            expect_some: base.expect_some.clone(),
        })
        .collect();
    let jobs: Vec<Job<'_>> = variants
        .iter()
        .map(|variant| Job { variant, seed })
        .collect();
    let stop = AtomicBool::new(false);
    let (mut found, mut spent, mut error) = (None, 0, None);
    batch::run_each(
        systems::run,
        &jobs,
        threads,
        &RunOptions::default(),
        &stop,
        |_, result| result.map(|outcome| outcome.verdict.counts.get(goal.count)),
        |result| {
            if found.is_some() || error.is_some() {
                return;
            }
            spent += 1;
            match result {
                Ok(count) if !crate::check::holds(goal, count) => {
                    found = Some((spent - 1, count));
                    stop.store(true, Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(e) => {
                    error = Some(e);
                    stop.store(true, Ordering::Relaxed);
                }
            }
        },
    );
    match error {
        Some(error) => Err(Error::Run {
            variant: base.name.clone(),
            seed,
            error,
        }),
        None => Ok((found, spent)),
    }
}
