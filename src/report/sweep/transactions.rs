//! The sweep report's transactions section: for configurations with transactional
//! producers or stream processors, whether each input's effect reached the read_committed
//! reader exactly once, what the transactions cost the readers (the LSO held back), and how
//! one setting at a time moves both.

use super::{comparisons, kafka_name, list, median, rules, value_of, value_text, SweepRow};
use crate::check::Counts;
use crate::config::kafka::Release;
use std::fmt::Write;

/// A configuration's transaction counts, summed over its runs (docs/checkers.md).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TxnTally {
    /// Runs whose read_committed reader saw an effect other than once: an output
    /// duplicated or missing, a committed transaction torn, an aborted record read.
    pub runs_broken: u64,
    pub eos_duplicates: u64,
    pub eos_missing: u64,
    pub reprocessed: u64,
    pub aborted_reads: u64,
    pub torn: u64,
    pub hanging: u64,
    pub txn_committed: u64,
    pub txn_aborted: u64,
    pub txn_unknown: u64,
    pub fenced: u64,
    pub txn_timeouts: u64,
    /// Transactional batches refused by partition verification (KIP-890).
    pub unverified: u64,
    /// The longest stall of one run's read_committed readers, in ms.
    pub lso_stall_max: u64,
    /// Each run's longest stall, for the median.
    lso_stalls: Vec<u64>,
}

impl TxnTally {
    pub fn add(&mut self, counts: &Counts) {
        self.runs_broken += u64::from(broken(counts));
        self.eos_duplicates += counts.eos_duplicates;
        self.eos_missing += counts.eos_missing;
        self.reprocessed += counts.reprocessed;
        self.aborted_reads += counts.aborted_reads;
        self.torn += counts.torn;
        self.hanging += counts.hanging;
        self.txn_committed += counts.txn_committed;
        self.txn_aborted += counts.txn_aborted;
        self.txn_unknown += counts.txn_unknown;
        self.fenced += counts.fenced;
        self.txn_timeouts += counts.txn_timeouts;
        self.unverified += counts.unverified;
        self.lso_stall_max = self.lso_stall_max.max(counts.lso_stall_max);
        self.lso_stalls.push(counts.lso_stall_max);
    }

    /// The median over runs of each run's longest read_committed stall, in ms.
    pub fn lso_stall_median(&self) -> f64 {
        median(self.lso_stalls.iter().map(|&ms| ms as f64).collect())
    }
}

/// One number of a configuration's tally.
type Metric = fn(&TxnTally) -> u64;

/// Whether a run's downstream reader saw some input's effect other than exactly once.
fn broken(counts: &Counts) -> bool {
    counts.eos_duplicates + counts.eos_missing + counts.torn + counts.aborted_reads > 0
}

/// Whether the rows have anything for this section: transactions, or processors (whose
/// at-least-once and at-most-once commits are what exactly once is compared with).
pub fn applies(rows: &[SweepRow]) -> bool {
    rows.iter()
        .any(|r| r.context.transactional || r.context.processors)
}

/// The findings of the section, one sentence each, for the report's list.
pub fn findings(rows: &[SweepRow]) -> Vec<String> {
    let ran: Vec<&SweepRow> = rows.iter().filter(|r| r.runs > 0).collect();
    if ran.is_empty() {
        return Vec::new();
    }
    let (broken, kept): (Vec<&SweepRow>, Vec<&SweepRow>) =
        ran.iter().partition(|r| r.txn.runs_broken > 0);
    let mut sentences = Vec::new();
    if broken.is_empty() {
        sentences.push(format!(
            "Exactly once held in all {} configurations: the read_committed reader saw every \
             input's effect once, and no aborted or partial transaction.",
            ran.len()
        ));
    } else {
        sentences.push(format!(
            "Exactly once held in {} of {} configurations; in {} the read_committed reader saw \
             some input's effect twice, or never, or part of a transaction.",
            kept.len(),
            ran.len(),
            broken.len()
        ));
        let lossy = kept.iter().filter(|r| r.runs_with_loss > 0).count();
        if lossy > 0 {
            sentences.push(format!(
                "{lossy} of the configurations that held it lost acknowledged messages all the \
                 same: exactly once counts each input's effect among the records the logs kept, \
                 and an input lost with its output is neither duplicated nor missing."
            ));
        }
        let keeps = rules(&ran, |r| r.txn.runs_broken == 0);
        if !keeps.is_empty() {
            sentences.push(format!(
                "Every configuration with {} held it.",
                keeps.join(", or with ")
            ));
        }
        let breaks = rules(&ran, |r| r.txn.runs_broken > 0);
        if !breaks.is_empty() {
            sentences.push(format!(
                "Every configuration with {} broke it in some run.",
                breaks.join(", or with ")
            ));
        }
        let eos: [(&str, Metric); 2] = [
            ("outputs seen twice downstream", |t| t.eos_duplicates),
            ("inputs committed past without an output", |t| t.eos_missing),
        ];
        for (what, of) in eos {
            let worst = ran
                .iter()
                .filter(|r| of(&r.txn) > 0)
                .max_by(|a, b| of(&a.txn).cmp(&of(&b.txn)).then(b.label().cmp(&a.label())));
            if let Some(worst) = worst {
                sentences.push(format!(
                    "Most {what}: {} in {} runs under {}.",
                    of(&worst.txn),
                    worst.runs,
                    worst.description()
                ));
            }
        }
    }
    if let Some(longest) = ran
        .iter()
        .filter(|r| r.txn.lso_stall_max > 0)
        .max_by(|a, b| {
            a.txn
                .lso_stall_max
                .cmp(&b.txn.lso_stall_max)
                .then(b.label().cmp(&a.label()))
        })
    {
        sentences.push(format!(
            "The longest a transaction held read_committed readers back was {:.1} s, under {} \
             (the median run's longest there: {:.1} s).",
            longest.txn.lso_stall_max as f64 / 1000.0,
            longest.description(),
            longest.txn.lso_stall_median() / 1000.0
        ));
    }
    let hanging: u64 = ran.iter().map(|r| r.txn.hanging).sum();
    if hanging > 0 {
        let rows = ran.iter().filter(|r| r.txn.hanging > 0).count();
        sentences.push(format!(
            "{hanging} partitions in {rows} configuration{} still had a transaction open when the \
             heal phase ended (hanging), holding back their read_committed readers until its \
             coordinator aborts it, if it still knows of it.",
            if rows == 1 { "" } else { "s" }
        ));
    }
    sentences
}

/// The section: one setting at a time (the release included: it is where the protocol
/// changed), then every configuration.
pub fn section(md: &mut String, rows: &[SweepRow], keys: &[&str]) {
    let names: Vec<&str> = keys.iter().map(|k| kafka_name(k)).collect();
    let _ = writeln!(
        md,
        "## Transactions\n\n\
         What the downstream reader (read_committed, as Kafka Streams reads) saw of each input: \
         *broken* counts runs where exactly once did not hold (`eos_duplicates`: an output seen \
         twice; `eos_missing`: an input the group committed past with no output; `torn`: a \
         committed transaction partly visible; `aborted_reads`: an aborted record read). \
         *Reprocessed* counts records a processor processed again, work done twice whether or \
         not its effect showed twice. *Fenced* and *timeouts* count producer epochs the \
         coordinators fenced, and of those the transactions they aborted for outliving \
         `transaction.timeout.ms`; *unverified*, batches partition verification (KIP-890, \
         3.6) refused because their transaction had ended. *LSO stall* is how long the longest transaction of a run \
         held back read_committed readers of its partitions: the median run's and the \
         worst.\n"
    );
    // The release too: it is where the protocol changed.
    let steps = comparisons(rows, &["faults"]);
    if !steps.is_empty() {
        let _ = writeln!(
            md,
            "One setting at a time, pairs of configurations equal in every other ({}):\n\n\
             | change | pairs | broken configurations | eos duplicates, all runs | eos missing, all runs | LSO stall, median change ms |\n\
             | --- | ---: | ---: | ---: | ---: | ---: |",
            list(&names)
        );
        for step in &steps {
            let both = |of: &dyn Fn(&SweepRow) -> u64| {
                let sum = |after: bool| -> u64 {
                    step.pairs
                        .iter()
                        .map(|(b, a)| of(if after { a } else { b }))
                        .sum()
                };
                format!("{} → {}", sum(false), sum(true))
            };
            let stall = median(
                step.pairs
                    .iter()
                    .map(|(b, a)| a.txn.lso_stall_median() - b.txn.lso_stall_median())
                    .collect(),
            );
            let _ = writeln!(
                md,
                "| {}={} → {} | {} | {} | {} | {} | {} |",
                kafka_name(step.key),
                value_text(step.from),
                value_text(step.to),
                step.pairs.len(),
                both(&|r| u64::from(r.txn.runs_broken > 0)),
                both(&|r| r.txn.eos_duplicates),
                both(&|r| r.txn.eos_missing),
                super::signed(stall)
            );
        }
        md.push('\n');
    }
    let outcomes = rows
        .iter()
        .any(|r| r.txn.txn_committed + r.txn.txn_aborted + r.txn.txn_unknown > 0);
    let mut header = String::from("|");
    let mut rule = String::from("|");
    for name in &names {
        let _ = write!(header, " {name} |");
        rule.push_str(" --- |");
    }
    header.push_str(
        " runs | broken | eos duplicates | eos missing | torn | aborted reads | hanging | reprocessed | fenced | timeouts | unverified |",
    );
    rule.push_str(" ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    if outcomes {
        header.push_str(" committed | aborted | unknown |");
        rule.push_str(" ---: | ---: | ---: |");
    }
    header.push_str(" LSO stall, median ms | LSO stall, worst ms |");
    rule.push_str(" ---: | ---: |");
    let _ = writeln!(md, "{header}\n{rule}");
    for row in rows.iter().filter(|r| r.runs > 0) {
        let t = &row.txn;
        let mut line = String::from("|");
        for key in keys {
            let _ = write!(line, " {} |", value_of(row, key).map_or("", value_text));
        }
        let _ = write!(
            line,
            " {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.runs,
            t.runs_broken,
            t.eos_duplicates,
            t.eos_missing,
            t.torn,
            t.aborted_reads,
            t.hanging,
            t.reprocessed,
            t.fenced,
            t.txn_timeouts,
            t.unverified
        );
        if outcomes {
            let _ = write!(
                line,
                " {} | {} | {} |",
                t.txn_committed, t.txn_aborted, t.txn_unknown
            );
        }
        let _ = writeln!(line, " {:.0} | {} |", t.lso_stall_median(), t.lso_stall_max);
        md.push_str(&line);
    }
    md.push('\n');
    let kip_447 = Release::parse("2.5").ok();
    let before_447 = |r: &SweepRow| {
        super::release_of(r)
            .zip(kip_447)
            .is_some_and(|(release, kip_447)| release < kip_447)
    };
    if rows
        .iter()
        .any(|r| r.context.processors && r.context.transactional && before_447(r))
    {
        md.push_str(
            "Before Kafka 2.5, exactly once in a group took one `transactional.id` per input \
             partition (Kafka Streams' `exactly_once`), so that a partition's new owner fenced \
             the old one with InitProducerId. These processors have one per member, as \
             `exactly_once_v2` does, and so the rows before 2.5 show what that design needed \
             KIP-447 for: nothing fences a processor that lost its partitions, and its outputs \
             commit beside its successor's.\n\n",
        );
    }
}
