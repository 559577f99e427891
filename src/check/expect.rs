//! The verdict against a scenario's `[expect]` (every seed) and `[expect_some]` (at least
//! one seed of the set).

use super::{count_name, Count, Counts};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Comparison {
    /// Every comparison, in the order a reader must try their symbols: each two-character
    /// one before the one-character symbol it starts with.
    pub const ALL: &'static [Comparison] = &[
        Comparison::Eq,
        Comparison::Ne,
        Comparison::Ge,
        Comparison::Le,
        Comparison::Gt,
        Comparison::Lt,
    ];
}

/// `lost = "> 0"`: a count, a comparison and a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub count: Count,
    pub comparison: Comparison,
    pub value: u64,
}

/// Counts every scenario expects to be 0 unless it names them itself (in `[expect]` or
/// `[expect_some]`, which then replaces the default): each is a checker that must never
/// be silent by omission. `moved` is here rather than folded into `lost`: a moved send
/// still exists, and what went wrong (its acknowledged offset now holds another record)
/// is a different failure, shown with its own examples. `under_replicated` is here because
/// the heal phase restarts every host and opens every link: a replica still out of the
/// ISR after it did not recover. `unreadable` is here because a partition the final read
/// could not finish hides its sends from every other count.
pub const DEFAULT_ZERO: &[Count] = &[
    Count::Moved,
    Count::Unexpected,
    Count::FalseFailures,
    Count::UnderReplicated,
    Count::Unreadable,
    Count::AbortedReads,
    Count::Torn,
];

/// `expect` with the [`DEFAULT_ZERO`] expectations the scenario did not replace.
pub fn with_defaults(
    mut expect: Vec<Expectation>,
    expect_some: &[Expectation],
) -> Vec<Expectation> {
    for &count in DEFAULT_ZERO {
        let named = expect.iter().chain(expect_some).any(|e| e.count == count);
        if !named {
            expect.push(Expectation {
                count,
                comparison: Comparison::Eq,
                value: 0,
            });
        }
    }
    expect
}

pub fn comparison_symbol(comparison: Comparison) -> &'static str {
    match comparison {
        Comparison::Eq => "==",
        Comparison::Ne => "!=",
        Comparison::Lt => "<",
        Comparison::Le => "<=",
        Comparison::Gt => ">",
        Comparison::Ge => ">=",
    }
}

/// Whether `value` satisfies the expectation.
pub fn holds(expectation: &Expectation, value: u64) -> bool {
    let bound = expectation.value;
    match expectation.comparison {
        Comparison::Eq => value == bound,
        Comparison::Ne => value != bound,
        Comparison::Lt => value < bound,
        Comparison::Le => value <= bound,
        Comparison::Gt => value > bound,
        Comparison::Ge => value >= bound,
    }
}

impl std::fmt::Display for Expectation {
    /// `lost == 0`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}",
            count_name(self.count),
            comparison_symbol(self.comparison),
            self.value
        )
    }
}

/// The expectations one run fails: `expected lost == 0, got 3`.
pub fn evaluate(expect: &[Expectation], counts: &Counts) -> Vec<String> {
    expect
        .iter()
        .filter_map(|e| {
            let got = counts.get(e.count);
            (!holds(e, got)).then(|| format!("expected {}, got {got}", e))
        })
        .collect()
}

/// `[expect_some]` over a set of runs: a message for each expectation no run met.
pub fn evaluate_some<'a>(
    expect_some: &[Expectation],
    runs: impl IntoIterator<Item = &'a Counts>,
) -> Vec<String> {
    let mut tallies: Vec<SomeTally> = expect_some.iter().cloned().map(SomeTally::new).collect();
    for counts in runs {
        for tally in &mut tallies {
            tally.add(counts);
        }
    }
    tallies.iter().filter_map(SomeTally::failure).collect()
}

/// One `[expect_some]` expectation judged over runs as they finish: whether any met it,
/// and the range of values seen, for the message when none did. It keeps no run.
#[derive(Clone, Debug)]
pub struct SomeTally {
    pub expectation: Expectation,
    held: bool,
    range: Option<(u64, u64)>,
    runs: usize,
}

impl SomeTally {
    pub fn new(expectation: Expectation) -> SomeTally {
        SomeTally {
            expectation,
            held: false,
            range: None,
            runs: 0,
        }
    }

    pub fn add(&mut self, counts: &Counts) {
        let value = counts.get(self.expectation.count);
        self.held |= holds(&self.expectation, value);
        self.range = Some(self.range.map_or((value, value), |(low, high)| {
            (low.min(value), high.max(value))
        }));
        self.runs += 1;
    }

    /// Why the expectation failed, if no run met it.
    pub fn failure(&self) -> Option<String> {
        if self.held {
            return None;
        }
        let wanted = format!("expected {} in at least one seed", self.expectation);
        Some(match self.range {
            Some((low, high)) if low == high => {
                format!("{wanted}, got {low} in all {} seeds", self.runs)
            }
            Some((low, high)) => {
                format!("{wanted}, got {low} to {high} across {} seeds", self.runs)
            }
            None => format!("{wanted}, but no seed ran"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(count: Count, comparison: Comparison, value: u64) -> Expectation {
        Expectation {
            count,
            comparison,
            value,
        }
    }

    #[test]
    fn a_failed_expectation_names_the_count_the_rule_and_the_value() {
        let counts = Counts {
            lost: 3,
            duplicates: 0,
            ..Counts::default()
        };
        let failures = evaluate(
            &[
                expect(Count::Lost, Comparison::Eq, 0),
                expect(Count::Duplicates, Comparison::Eq, 0),
            ],
            &counts,
        );
        assert_eq!(failures, vec!["expected lost == 0, got 3".to_string()]);
    }

    #[test]
    fn every_comparison_holds_where_it_should() {
        let cases = [
            (Comparison::Eq, [false, true, false]),
            (Comparison::Ne, [true, false, true]),
            (Comparison::Lt, [true, false, false]),
            (Comparison::Le, [true, true, false]),
            (Comparison::Gt, [false, false, true]),
            (Comparison::Ge, [false, true, true]),
        ];
        for (comparison, expected) in cases {
            for (value, want) in [4, 5, 6].into_iter().zip(expected) {
                assert_eq!(
                    holds(&expect(Count::Lost, comparison, 5), value),
                    want,
                    "{comparison:?} {value}"
                );
            }
        }
    }

    #[test]
    fn expect_some_holds_if_one_seed_satisfies_it() {
        let runs = [
            Counts {
                lost: 0,
                ..Counts::default()
            },
            Counts {
                lost: 2,
                ..Counts::default()
            },
        ];
        assert!(evaluate_some(&[expect(Count::Lost, Comparison::Gt, 0)], &runs).is_empty());
        assert_eq!(
            evaluate_some(&[expect(Count::Lost, Comparison::Gt, 5)], &runs),
            vec!["expected lost > 5 in at least one seed, got 0 to 2 across 2 seeds".to_string()]
        );
        assert_eq!(
            evaluate_some(&[expect(Count::DirtyReads, Comparison::Ge, 1)], &runs),
            vec![
                "expected dirty_reads >= 1 in at least one seed, got 0 in all 2 seeds".to_string()
            ]
        );
        assert_eq!(
            evaluate_some(&[expect(Count::Lost, Comparison::Gt, 0)], &[]),
            vec!["expected lost > 0 in at least one seed, but no seed ran".to_string()]
        );
    }
}
