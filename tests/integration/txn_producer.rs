//! The transactional producer end to end, on three brokers with the transaction
//! coordinator: transactions committed and read by the read_committed final read,
//! transactions aborted after their batches expired and never read, and a producer killed
//! mid-transaction whose next instance fences it and aborts what it left open.

use hightide::check::Counts;
use hightide::config::bugs::Bugs;
use hightide::history::final_state::FinalState;
use hightide::history::{MessageId, Op, TxnOutcome};
use hightide::scenario::model::Variant;
use hightide::sim::runner::{RunOptions, RunOutcome};
use hightide::systems;
use std::collections::BTreeSet;
use std::path::Path;

/// Two transactional producers, 40 sends per transaction, on `out` (three partitions).
/// From 3 s to 7 s the producers cannot reach broker-3, the leader of out/2 (the
/// coordinator still can): batches for out/2 expire after 3 s, and their transactions
/// abort with what they wrote to out/0 and out/1. (A transaction waits for its markers,
/// so a dead or paused leader would stall the next transaction instead.) producer-1 is
/// killed at 8 s and restarted at 9 s.
const SCENARIO: &str = r#"
name = "transactional producers"
description = "Commits, aborts, and a producer killed mid-transaction."
seeds = 3
duration = "12s"
heal = "10s"

[cluster]
brokers = 3
topics = [{ name = "out", partitions = 3, replication_factor = 3 }]

[broker]
"transaction.state.log.num.partitions" = 3
"replica.lag.time.max.ms" = 500

[producer]
"transactional.id" = "writer"
"request.timeout.ms" = 1500
"delivery.timeout.ms" = 3000

[workload]
producers = 2
rate = 50
keys = 30
transaction_messages = 40

[[faults]]
at = "3s"
action = "partition"
groups = [["producer-1", "producer-2"], "broker-3"]

[[faults]]
at = "7s"
action = "heal"

[[faults]]
at = "8s"
action = "kill"
target = "producer-1"

[[faults]]
at = "9s"
action = "restart"
target = "producer-1"
"#;

fn variant(text: &str) -> Variant {
    let scenario = hightide::scenario::parse(text, Path::new("txn.toml")).expect("parses");
    scenario.variants.into_iter().next().expect("one variant")
}

fn run(variant: &Variant, seed: u64) -> RunOutcome {
    systems::run(variant, seed, &RunOptions::default()).expect("runs")
}

/// Ids the replicas' logs hold, in any replica: written, whatever became of them.
fn written(state: &FinalState) -> BTreeSet<MessageId> {
    state
        .partitions
        .iter()
        .flat_map(|p| &p.replicas)
        .flat_map(|r| &r.records)
        .filter_map(|r| r.id)
        .collect()
}

fn read(state: &FinalState) -> BTreeSet<MessageId> {
    state
        .partitions
        .iter()
        .flat_map(|p| &p.read)
        .filter_map(|r| r.id)
        .collect()
}

#[test]
fn committed_transactions_are_read_and_aborted_ones_are_not() {
    let variant = variant(SCENARIO);
    let outcome = run(&variant, 1);
    let counts: &Counts = &outcome.verdict.counts;
    assert!(counts.txn_committed > 20, "{counts:?}");
    assert!(
        counts.txn_aborted >= 1,
        "broker-3's outage aborts: {counts:?}"
    );
    assert_eq!(
        (
            counts.lost,
            counts.aborted_reads,
            counts.torn,
            counts.hanging
        ),
        (0, 0, 0, 0),
        "{counts:?}"
    );
    assert_eq!(counts.false_failures, 0, "{counts:?}");
    let history = &outcome.history;
    let state = &outcome.final_state;
    let (written, read) = (written(state), read(state));
    let aborted: Vec<(MessageId, MessageId)> = history
        .iter()
        .filter_map(|e| match e.op {
            Op::Txn {
                first,
                last,
                outcome: TxnOutcome::Aborted,
                ..
            } => Some((first, last)),
            _ => None,
        })
        .collect();
    let in_aborted = |id: &MessageId| aborted.iter().any(|(f, l)| f <= id && id <= l);
    assert!(
        written.iter().any(in_aborted),
        "some aborted sends reached the log: the markers, not the producer, hide them"
    );
    assert!(!read.iter().any(in_aborted), "none is read_committed");
    // producer-1's transaction open at the kill: written, never completed, and aborted
    // by its next instance's InitProducerId.
    let pending: Vec<MessageId> = {
        let completed: BTreeSet<MessageId> = history
            .iter()
            .filter_map(|e| match e.op {
                Op::Ok { id, .. } | Op::Fail { id, .. } | Op::Info { id, .. } => Some(id),
                _ => None,
            })
            .collect();
        history
            .iter()
            .filter_map(|e| match e.op {
                Op::Invoke { id, .. } if !completed.contains(&id) => Some(id),
                _ => None,
            })
            .collect()
    };
    assert!(
        pending
            .iter()
            .any(|id| id.producer == 1 && written.contains(id)),
        "the killed producer's open transaction reached the log: pending {pending:?}"
    );
    assert!(
        pending.iter().all(|id| !read.contains(id)),
        "and was aborted"
    );
    let again = run(&variant, 1);
    assert_eq!(
        again.trace_hash, outcome.trace_hash,
        "a run replays exactly"
    );
}

/// The read_committed final read that keeps aborted transactions' records: their sends,
/// written and aborted, show up, and `aborted_reads` counts them.
#[test]
fn a_final_read_that_ignores_aborted_transactions_is_caught() {
    let mut variant = variant(SCENARIO);
    variant.settings.bugs = Bugs {
        final_read_ignores_aborted: true,
        ..Bugs::default()
    };
    let counts = run(&variant, 1).verdict.counts;
    assert!(counts.aborted_reads > 0, "{counts:?}");
}

/// Before 2.5 (KIP-360) the producer cannot bump its epoch: a batch it never heard back
/// about is fatal, and the application starts a new instance, which fences the old
/// epoch; from 2.5 it aborts, bumps its epoch and goes on. Either way every committed
/// transaction is read whole.
#[test]
fn before_kip_360_an_unanswered_batch_is_fatal_and_after_it_abortable() {
    for (release, fatal) in [("2.4", true), ("4.1", false)] {
        let text = SCENARIO.replace(
            "[cluster]\n",
            &format!("[cluster]\nkafka = \"{release}\"\n"),
        );
        let outcome = run(&variant(&text), 2);
        let counts = &outcome.verdict.counts;
        assert!(counts.txn_committed > 20, "{release}: {counts:?}");
        assert!(counts.txn_aborted >= 1, "{release}: {counts:?}");
        assert_eq!(
            (counts.lost, counts.aborted_reads, counts.torn),
            (0, 0, 0),
            "{release}: {counts:?}"
        );
        let gave_up = outcome.history.iter().any(|e| {
            matches!(&e.op, Op::Txn { error: Some(error), .. } if error.contains("can no longer retry them"))
        });
        assert_eq!(gave_up, fatal, "{release}");
    }
}

/// producer-1's transaction coordinator (`txn-coordinator`) loses power at 6 s, while
/// commits are in flight, and boots again at 9 s.
const FAILOVER: &str = r#"
name = "transaction coordinator failover"
description = "The coordinator loses power mid-commit."
duration = "20s"
heal = "40s"

[cluster]
brokers = 3
topics = [{ name = "out", partitions = 3, replication_factor = 3 }]

[broker]
"transaction.state.log.num.partitions" = 3

[producer]
"transactional.id" = "writer"
"transaction.timeout.ms" = 10000

[workload]
producers = 1
rate = 200
keys = 30
transaction_messages = 20

[[faults]]
at = "6s"
action = "power-loss"
target = "txn-coordinator"

[[faults]]
at = "9s"
action = "restart"
target = "crashed"
"#;

/// With `__transaction_state` replicated (3 replicas, min ISR 2) a follower takes over the
/// coordinator's partition and finishes or times out what was open: nothing committed is
/// lost and no partition hangs. With one replica, the power loss takes the open
/// transaction's record with it: the coordinator that boots again does not know it,
/// answers the producer INVALID_PRODUCER_ID_MAPPING (its abort skips EndTxn and gets a
/// new producer id), and no one ever writes the marker that would close the transaction
/// on the partitions, so every read_committed reader stops at their LSO for good.
#[test]
fn a_coordinator_power_loss_is_survived_with_a_replicated_state_log_and_hangs_without() {
    let safe = run(&variant(FAILOVER), 1);
    let counts = &safe.verdict.counts;
    assert_eq!(
        (
            counts.lost,
            counts.torn,
            counts.hanging,
            counts.aborted_reads
        ),
        (0, 0, 0, 0),
        "{counts:?}"
    );
    assert!(counts.txn_committed > 60, "{counts:?}");
    let unsafe_log = FAILOVER.replace(
        "\"transaction.state.log.num.partitions\" = 3\n",
        "\"transaction.state.log.num.partitions\" = 3\n\"transaction.state.log.replication.factor\" = 1\n\"transaction.state.log.min.isr\" = 1\n",
    );
    let outcome = run(&variant(&unsafe_log), 1);
    let counts = &outcome.verdict.counts;
    assert_eq!(counts.hanging, 3, "{counts:?}");
    assert_eq!((counts.lost, counts.aborted_reads), (0, 0), "{counts:?}");
    assert!(
        outcome.history.iter().any(|e| matches!(
            &e.op,
            Op::Txn { error: Some(error), .. } if error.contains("INVALID_PRODUCER_ID_MAPPING")
        )),
        "the producer learned its coordinator had forgotten it"
    );
    let again = run(&variant(&unsafe_log), 1);
    assert_eq!(again.trace_hash, outcome.trace_hash);
}
