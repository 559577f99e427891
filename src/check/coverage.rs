//! What a set of seeds covers, and a cheap subset that covers the same: how a scenario's
//! `test_seeds` are chosen, so that `cargo test` sees every behaviour the file's seeds
//! show at a fraction of their time.
//!
//! A *behaviour* is what one seed of one variant shows: each count's order of magnitude
//! (0, 1–9, 10–99, …: a seed that loses nothing, one that loses a few writes and one that
//! loses hundreds are all worth keeping), and each `[expect_some]` rule holding. The choice is the greedy set cover by coverage per
//! second: take the seed with the most behaviours not yet seen per second of wall time,
//! until every behaviour any seed shows is seen. Every `[expect_some]` rule that holds
//! on some seed thus keeps a witness.

use super::expect::holds;
use super::{Count, Counts, Expectation};
use std::collections::BTreeSet;
use std::time::Duration;

/// One seed of a scenario: its wall time over all variants, and each variant's counts.
#[derive(Clone, Debug)]
pub struct SeedRuns {
    pub seed: u64,
    pub wall: Duration,
    /// In the scenario's variant order.
    pub counts: Vec<Counts>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Behaviour {
    /// `count` has `digits` decimal digits in variant `variant` (0 for a count of 0).
    Count {
        variant: usize,
        count: Count,
        digits: u32,
    },
    /// The variant's `rule`-th `[expect_some]` holds.
    Witness { variant: usize, rule: usize },
}

/// What one seed shows; `expect_some[v]` is variant `v`'s `[expect_some]`.
pub fn behaviours(expect_some: &[Vec<Expectation>], run: &SeedRuns) -> BTreeSet<Behaviour> {
    let mut shown = BTreeSet::new();
    for (variant, counts) in run.counts.iter().enumerate() {
        for &count in Count::ALL {
            let value = counts.get(count);
            let digits = value.checked_ilog10().map_or(0, |log| log + 1);
            shown.insert(Behaviour::Count {
                variant,
                count,
                digits,
            });
        }
        let rules = expect_some.get(variant).map_or(&[][..], Vec::as_slice);
        for (rule, expectation) in rules.iter().enumerate() {
            if holds(expectation, counts.get(expectation.count)) {
                shown.insert(Behaviour::Witness { variant, rule });
            }
        }
    }
    shown
}

/// A seed taken, and how many behaviours it was the first to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pick {
    pub seed: u64,
    pub new: usize,
}

/// Seeds in the order the greedy cover takes them; together they show every behaviour
/// of `runs`. Ties go to the cheaper seed, then the lower one, so equal inputs give equal
/// choices.
pub fn choose(expect_some: &[Vec<Expectation>], runs: &[SeedRuns]) -> Vec<Pick> {
    let shown: Vec<BTreeSet<Behaviour>> = runs.iter().map(|r| behaviours(expect_some, r)).collect();
    let mut seen = BTreeSet::new();
    let mut taken = vec![false; runs.len()];
    let mut picks = Vec::new();
    loop {
        let best = (0..runs.len())
            .filter(|&i| !taken[i])
            .map(|i| (i, shown[i].difference(&seen).count()))
            .filter(|&(_, new)| new > 0)
            .max_by(|&(a, new_a), &(b, new_b)| {
                // new_a / wall_a against new_b / wall_b, cross-multiplied (walls may be 0).
                let (wall_a, wall_b) = (runs[a].wall.as_nanos(), runs[b].wall.as_nanos());
                (new_a as u128 * wall_b.max(1))
                    .cmp(&(new_b as u128 * wall_a.max(1)))
                    .then(wall_b.cmp(&wall_a))
                    .then(runs[b].seed.cmp(&runs[a].seed))
            });
        let Some((i, new)) = best else {
            return picks;
        };
        taken[i] = true;
        seen.extend(shown[i].iter().copied());
        picks.push(Pick {
            seed: runs[i].seed,
            new,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Comparison;

    fn run(seed: u64, wall_ms: u64, lost: &[u64]) -> SeedRuns {
        SeedRuns {
            seed,
            wall: Duration::from_millis(wall_ms),
            counts: lost
                .iter()
                .map(|&lost| Counts {
                    lost,
                    ..Counts::default()
                })
                .collect(),
        }
    }

    fn lost_above_zero() -> Expectation {
        Expectation {
            count: Count::Lost,
            comparison: Comparison::Gt,
            value: 0,
        }
    }

    #[test]
    fn the_cover_keeps_a_witness_and_every_order_of_magnitude() {
        // Seeds 1 and 2 lose nothing; seed 3 is the only witness of `lost > 0`.
        let runs = [run(1, 100, &[0]), run(2, 50, &[0]), run(3, 400, &[7])];
        let picks = choose(&[vec![lost_above_zero()]], &runs);
        let seeds: Vec<u64> = picks.iter().map(|p| p.seed).collect();
        assert_eq!(
            seeds,
            vec![2, 3],
            "the cheaper of the two equal seeds, then the witness"
        );
        assert_eq!(picks[1].new, 2, "lost > 0, and its witness");
    }

    #[test]
    fn a_count_ten_times_larger_is_another_behaviour() {
        let runs = [run(1, 100, &[3]), run(2, 100, &[7]), run(3, 100, &[40])];
        let seeds: Vec<u64> = choose(&[vec![]], &runs).iter().map(|p| p.seed).collect();
        assert_eq!(
            seeds,
            vec![1, 3],
            "3 and 7 lose a few each; 40 is another order"
        );
    }

    #[test]
    fn a_seed_that_adds_nothing_is_left_out_however_cheap() {
        let runs = [
            run(1, 300, &[5, 0]),
            run(2, 1, &[5, 0]),
            run(3, 200, &[0, 0]),
        ];
        let seeds: Vec<u64> = choose(&[vec![], vec![]], &runs)
            .iter()
            .map(|p| p.seed)
            .collect();
        assert_eq!(seeds, vec![2, 3]);
    }

    #[test]
    fn more_behaviours_per_second_wins_over_fewer_at_the_same_cost() {
        // Seed 1 shows `lost > 0` in both variants; seed 2 in one, at half the time.
        let runs = [
            run(1, 100, &[3, 3]),
            run(2, 40, &[3, 0]),
            run(3, 10, &[0, 0]),
        ];
        let picks = choose(&[vec![], vec![]], &runs);
        assert_eq!(picks.first().map(|p| p.seed), Some(3));
        let covered: BTreeSet<Behaviour> = picks
            .iter()
            .flat_map(|p| behaviours(&[vec![], vec![]], &runs[p.seed as usize - 1]))
            .collect();
        let all: BTreeSet<Behaviour> = runs
            .iter()
            .flat_map(|r| behaviours(&[vec![], vec![]], r))
            .collect();
        assert_eq!(covered, all);
    }
}
