//! The checkers on built histories and final states: each count, exactly, with the
//! example text a person would follow into the trace.

mod build;

use build::{final_state, in_isr, ms, out_of_isr, partition, record, HistoryBuilder, VALUE_BYTES};
use hightide::check::{evaluate, Counts, Verdict};
use hightide::check::{Comparison, Count, Expectation};
use hightide::history::facts::kafka::{ElectedFrom, Fact as KafkaFact};
use hightide::history::facts::{Fact, FactEvent};
use hightide::history::final_state::{FinalState, ReadRecord, ReplicaLog};
use hightide::history::{Event, MessageId, TxnOutcome};
use hightide::kafka::teller::Teller;
use hightide::os::clock::SimTime;
use hightide::types::{BrokerId, Epoch, Offset, TopicPartition};
use proptest::prelude::*;
use std::time::Duration;

/// The counts, with examples in Kafka's words.
fn check(history: &[Event], state: &FinalState) -> Verdict {
    hightide::check::check(history, state, VALUE_BYTES, &Teller::new(&state.facts))
}

fn orders(partition: u32) -> TopicPartition {
    TopicPartition::new("orders", partition)
}

fn id(producer: u32, seq: u32) -> MessageId {
    MessageId { producer, seq }
}

fn examples(verdict: &Verdict, count: Count) -> Vec<&str> {
    verdict
        .examples_of(count)
        .map(|e| e.text.as_str())
        .collect()
}

#[test]
fn an_ack_absent_from_the_final_read_is_lost_and_its_example_names_the_replica_holding_it() {
    let tp = orders(0);
    let lost = id(1, 417);
    let history = HistoryBuilder::new()
        .at(ms(10_000))
        .send(lost, &tp)
        .completes_at(ms(10_012))
        .acked_at(812)
        .build();
    // The final read ends at HW 790; only broker-1, out of the ISR, still has the message.
    let p = partition(tp.clone(), vec![])
        .high_watermark(790)
        .log_start(790)
        .replica(out_of_isr(1, vec![record(812, lost)]))
        .leader(2);
    let verdict = check(&history, &final_state([p]));

    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 1,
            acked: 1,
            lost: 1,
            missing: 1,
            under_replicated: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Lost),
        vec!["producer-1:000417 acked at orders/0@812 (t=10.012s); absent from the final read (HW 790); held by broker-1 only (not in ISR)"]
    );
}

#[test]
fn a_lost_example_lists_every_holder_and_where_a_copy_sits_elsewhere() {
    let tp = orders(0);
    let lost = id(2, 5);
    let history = HistoryBuilder::new()
        .at(ms(1_000))
        .send(lost, &tp)
        .acked_at(7)
        .build();
    let p = partition(tp.clone(), vec![]).replicas(vec![
        out_of_isr(1, vec![record(7, lost)]),
        in_isr(3, vec![record(9, lost)]),
    ]);
    let verdict = check(&history, &final_state([p]));
    assert_eq!(verdict.counts.lost, 1);
    assert_eq!(
        examples(&verdict, Count::Lost),
        vec!["producer-2:000005 acked at orders/0@7 (t=1.002s); absent from the final read (HW 0); held by broker-1 (not in ISR), broker-3 at orders/0@9 (in ISR)"]
    );
}

#[test]
fn an_ack_found_at_another_offset_is_moved_not_lost() {
    let tp = orders(0);
    let m = id(1, 1);
    let history = HistoryBuilder::new()
        .at(ms(8))
        .send(m, &tp)
        .acked_at(5)
        .build();
    let verdict = check(
        &history,
        &final_state([partition(tp.clone(), vec![record(6, m)])]),
    );
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 1,
            acked: 1,
            moved: 1,
            delivered: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Moved),
        vec!["producer-1:000001 acked at orders/0@5 (t=0.010s); in the final read at orders/0@6"]
    );
}

#[test]
fn extra_copies_of_an_id_are_duplicates_whatever_the_client_was_told() {
    let tp = orders(0);
    let (a, b) = (id(1, 0), id(1, 1));
    let history = HistoryBuilder::new()
        .send(a, &tp)
        .acked_at(0)
        .send(b, &tp)
        .completes_at(ms(30_000))
        .indeterminate("request timed out")
        .build();
    let read = vec![
        record(0, a),
        record(1, a),
        record(2, b),
        record(3, b),
        record(4, b),
    ];
    let verdict = check(&history, &final_state([partition(tp.clone(), read)]));
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 2,
            acked: 1,
            indeterminate: 1,
            duplicates: 3,
            delivered: 2,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Duplicates),
        vec![
            "producer-1:000000 acked at orders/0@0 (t=0.002s); 2 copies in the final read: orders/0@0, orders/0@1",
            "producer-1:000001 indeterminate at t=30.000s (request timed out); 3 copies in the final read: orders/0@2, orders/0@3, orders/0@4",
        ]
    );
    assert_eq!(
        examples(&verdict, Count::Indeterminate),
        vec!["producer-1:000001 to orders/0 indeterminate at t=30.000s (request timed out); in the final read at orders/0@2, orders/0@3, orders/0@4"]
    );
}

#[test]
fn corrupt_records_and_ids_never_sent_are_unexpected() {
    let tp = orders(0);
    let sent = id(1, 0);
    let history = HistoryBuilder::new().send(sent, &tp).acked_at(0).build();
    let read = vec![
        record(0, sent),
        record(1, id(9, 1)),
        ReadRecord::new(Offset(2), b"\x00\xffgarbage"),
    ];
    let verdict = check(&history, &final_state([partition(tp.clone(), read)]));
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 1,
            acked: 1,
            unexpected: 2,
            delivered: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Unexpected),
        vec![
            "orders/0@1 holds producer-9:000001, which was never sent",
            r#"orders/0@2 holds a value without a message id (9 bytes): "\x00\xffgarbage""#,
        ]
    );
}

/// `id`'s value as sent at `offset`, with the bits of `mask` flipped in byte `at`.
fn rotten(offset: i64, id: MessageId, at: usize, mask: u8) -> ReadRecord {
    let mut value = id.value(VALUE_BYTES);
    value[at] ^= mask;
    ReadRecord::new(Offset(offset), &value)
}

/// Three messages, acked at orders/0@0..2; the leader's log and the final read hold
/// `read`, broker-2's and broker-3's the values as sent.
fn rotten_on_the_leader(read: Vec<ReadRecord>) -> Verdict {
    let tp = orders(0);
    let sent = [id(1, 122), id(1, 123), id(1, 124)];
    let mut history = HistoryBuilder::new();
    for (offset, &id) in sent.iter().enumerate() {
        history = history.send(id, &tp).acked_at(offset as i64);
    }
    let sound: Vec<ReadRecord> = (0..).zip(sent).map(|(o, id)| record(o, id)).collect();
    let p = partition(tp, read)
        .replica(in_isr(2, sound.clone()))
        .replica(in_isr(3, sound));
    check(&history.build(), &final_state([p]))
}

/// A record is a copy of a message only with the value it was sent with. A flipped
/// padding byte leaves the id readable, but the record is corrupt: unexpected, and no
/// copy of its message, which is lost (the replicas that kept it as sent say where). A
/// flipped digit that spells an id nobody sent is unexpected too, and the story says
/// what the sound replicas hold there.
#[test]
fn a_value_not_exactly_as_sent_is_corrupt_and_no_copy_of_its_message() {
    // `producer-1:000123|...`: byte 11 is its first digit, `0`, whose bit 3 makes it `8`;
    // byte 25 is padding.
    let verdict = rotten_on_the_leader(vec![
        record(0, id(1, 122)),
        rotten(1, id(1, 123), 11, 0x08),
        rotten(2, id(1, 124), 25, 0x01),
    ]);
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 3,
            acked: 3,
            delivered: 1,
            lost: 2,
            missing: 2,
            unexpected: 2,
            divergent: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Unexpected),
        vec![
            "orders/0@1 holds producer-1:800123, which was never sent; broker-2, broker-3 hold producer-1:000123 there as sent",
            "orders/0@2 holds a value that starts with producer-1:000124 but is not the value producer-1:000124 was sent with: corrupt bytes served as data; broker-2, broker-3 hold producer-1:000124 there as sent",
        ]
    );
    assert_eq!(
        examples(&verdict, Count::Lost),
        vec![
            "producer-1:000123 acked at orders/0@1 (t=0.003s); absent from the final read (HW 3); held by broker-2 (in ISR), broker-3 (in ISR)",
            "producer-1:000124 acked at orders/0@2 (t=0.004s); in the final read only with corrupt bytes (HW 3); held by broker-2 (in ISR), broker-3 (in ISR)",
        ]
    );
}

/// The limit of checking values: a value is a function of its id, so a flipped digit
/// that spells the id of a message that was sent (`...123` to `...122`) leaves a value
/// that is, byte for byte, that message's. The final read cannot tell it from a second
/// copy of it: a duplicate, and the message it was is lost. Only the replicas' logs show
/// that the leader's bytes are not its followers' (divergent).
#[test]
fn a_flipped_digit_that_spells_a_sent_id_is_a_copy_of_that_message() {
    // Byte 16 is the last digit, `3`; bit 0 makes it `2`.
    let verdict = rotten_on_the_leader(vec![
        record(0, id(1, 122)),
        rotten(1, id(1, 123), 16, 0x01),
        record(2, id(1, 124)),
    ]);
    assert_eq!(
        (
            verdict.counts.duplicates,
            verdict.counts.lost,
            verdict.counts.unexpected,
            verdict.counts.divergent
        ),
        (1, 1, 0, 1),
        "{:?}",
        verdict.counts
    );
}

#[test]
fn a_retried_batch_behind_a_later_send_is_reordered_once_per_inverted_pair() {
    let (t0, t1) = (orders(0), orders(1));
    // producer-1's first send was retried and landed after its next two.
    let history = HistoryBuilder::new()
        .send(id(1, 1), &t0)
        .acked_at(12)
        .send(id(1, 2), &t0)
        .acked_at(10)
        .send(id(1, 3), &t0)
        .acked_at(11);
    // Other producers and partitions are separate sequences.
    let history = history
        .send(id(2, 1), &t0)
        .acked_at(13)
        .send(id(1, 4), &t1)
        .acked_at(1)
        .send(id(1, 5), &t1)
        .acked_at(2)
        .build();
    let read0 = vec![
        record(10, id(1, 2)),
        record(11, id(1, 3)),
        record(12, id(1, 1)),
        record(13, id(2, 1)),
    ];
    let read1 = vec![record(1, id(1, 4)), record(2, id(1, 5))];
    let state = final_state([partition(t0, read0), partition(t1, read1)]);
    let verdict = check(&history, &state);
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 6,
            acked: 6,
            reordered: 2,
            delivered: 6,
            out_of_order: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Reordered),
        vec!["producer-1:000001 and producer-1:000002, sent in that order to orders/0 (acked at @12 and @10), are at @12 and @10 in the final read"]
    );
}

/// A send whose first request landed but whose retry was the one acknowledged, after a
/// later send: its position is where the acknowledgement put it (as Jepsen reads a log),
/// so the pair is reordered, and the earlier copy is a duplicate.
#[test]
fn a_retry_acknowledged_behind_a_later_send_is_reordered_though_its_first_copy_is_not() {
    let tp = orders(0);
    let history = HistoryBuilder::new()
        .send(id(1, 1), &tp)
        .acked_at(12)
        .send(id(1, 2), &tp)
        .acked_at(11)
        .build();
    let read = vec![
        record(10, id(1, 1)),
        record(11, id(1, 2)),
        record(12, id(1, 1)),
    ];
    let verdict = check(&history, &final_state([partition(tp, read)]));
    assert_eq!(
        (
            verdict.counts.reordered,
            verdict.counts.duplicates,
            verdict.counts.out_of_order
        ),
        (1, 1, 1),
        "{:?}",
        verdict.counts
    );
}

#[test]
fn a_read_of_a_record_later_rolled_back_is_dirty() {
    let tp = orders(0);
    let (a, b, c) = (id(1, 0), id(1, 1), id(2, 0));
    let history = HistoryBuilder::new()
        .send(a, &tp)
        .acked_at(0)
        .send(b, &tp)
        .acked_at(1)
        .send(c, &tp)
        .acked_at(1);
    let history = history
        .at(ms(2_000))
        .read(1, &tp, 0, Some(a)) // still there: clean
        .at(ms(2_500))
        .read(1, &tp, 1, Some(b)) // replaced by c after truncation
        .at(ms(2_600))
        .read(2, &tp, 7, Some(id(1, 7))) // beyond the final HW
        .build();
    let verdict = check(
        &history,
        &final_state([partition(tp.clone(), vec![record(0, a), record(1, c)])]),
    );
    assert_eq!(verdict.counts.dirty_reads, 2);
    assert_eq!(
        examples(&verdict, Count::DirtyReads),
        vec![
            "consumer-1 read producer-1:000001 at orders/0@1 (t=2.500s); the final read holds producer-2:000000 there",
            "consumer-2 read producer-1:000007 at orders/0@7 (t=2.600s); the final read has no record there (log start 0, HW 2)",
        ]
    );
    // b was acked at offset 1 and is gone: also lost.
    assert_eq!(verdict.counts.lost, 1);
}

#[test]
fn replicas_that_differ_from_the_leader_below_the_hw_are_divergent_in_the_isr_or_not() {
    let (t0, t1, t2) = (orders(0), orders(1), orders(2));
    let (a, b, c, d) = (id(1, 0), id(1, 1), id(1, 2), id(2, 0));
    let p0 = partition(t0.clone(), vec![record(0, a), record(1, b), record(2, c)])
        .replica(in_isr(2, vec![record(0, a), record(1, b), record(2, d)]));
    // orders/1: a difference at or above the HW is no divergence.
    let p1 = partition(t1.clone(), vec![record(0, a)])
        .replica(in_isr(2, vec![record(0, a), record(1, b)]));
    // orders/2: a replica that never rejoined the ISR, holding another record below its LEO
    // (the follower a legacy truncation wedged looked like this).
    let p2 = partition(t2.clone(), vec![record(0, a), record(1, b)])
        .replica(out_of_isr(3, vec![record(0, d)]));
    let verdict = check(&[], &final_state([p0, p1, p2]));
    assert_eq!(verdict.counts.divergent, 2);
    assert_eq!(
        examples(&verdict, Count::Divergent),
        vec![
            "orders/0: broker-2 (in the ISR) differs from broker-1 below HW 3, first at offset 2: broker-1 holds producer-1:000002, broker-2 holds producer-2:000000",
            "orders/2: broker-3 (out of the ISR) differs from broker-1 below its LEO 1, first at offset 0: broker-1 holds producer-1:000000, broker-3 holds producer-2:000000",
        ]
    );
    assert_eq!(verdict.counts.under_replicated, 1);
}

#[test]
fn a_lagging_replica_out_of_the_isr_is_under_replicated_not_divergent() {
    let (a, b, c) = (id(1, 0), id(1, 1), id(1, 2));
    let p = partition(orders(0), vec![record(0, a), record(1, b), record(2, c)])
        .replica(out_of_isr(3, vec![record(0, a)]));
    let mut state = final_state([p]);
    let failed = |time, error: &str| FactEvent {
        time: ms(time),
        fact: Fact::Kafka(KafkaFact::FetchFailed {
            tp: orders(0),
            broker: BrokerId(3),
            leader: BrokerId(1),
            error: error.to_string(),
        }),
    };
    // The last fetch fact of broker-3 on orders/0 explains it, not an older one or
    // another replica's.
    state.facts = [
        failed(1000, "cannot connect: broker-1: connection refused"),
        failed(2500, "request timed out"),
        FactEvent {
            time: ms(3000),
            fact: Fact::Kafka(KafkaFact::FetchResumed {
                tp: orders(0),
                broker: BrokerId(2),
                leader: BrokerId(1),
            }),
        },
    ]
    .into_iter()
    .collect();
    let verdict = check(&[], &state);
    assert_eq!(verdict.counts.divergent, 0);
    assert_eq!(verdict.counts.under_replicated, 1);
    assert_eq!(
        examples(&verdict, Count::UnderReplicated),
        vec!["orders/0: 1 of 3 replicas out of the ISR after healing: broker-3 (LEO 1; its last fetch from broker-1 failed at t=2.500s: request timed out); against the leader broker-1's LEO 3, HW 3"]
    );
    state.facts.push(FactEvent {
        time: ms(4000),
        fact: Fact::Kafka(KafkaFact::FetchResumed {
            tp: orders(0),
            broker: BrokerId(3),
            leader: BrokerId(1),
        }),
    });
    let verdict = check(&[], &state);
    assert_eq!(
        examples(&verdict, Count::UnderReplicated),
        vec!["orders/0: 1 of 3 replicas out of the ISR after healing: broker-3 (LEO 1; fetching from broker-1 again since t=4.000s); against the leader broker-1's LEO 3, HW 3"]
    );
    state.partitions[0].replicas[2].running = false;
    let verdict = check(&[], &state);
    assert_eq!(
        examples(&verdict, Count::UnderReplicated),
        vec!["orders/0: 1 of 3 replicas out of the ISR after healing: broker-3 (LEO 1; its broker is down); against the leader broker-1's LEO 3, HW 3"]
    );
    // A leader's log read only up to a batch that fails its CRC, below the HW: its LEO is
    // not what the harness read.
    state.partitions[0].replicas[0].log_end_offset = Offset(2);
    let verdict = check(&[], &state);
    assert_eq!(
        examples(&verdict, Count::UnderReplicated),
        vec!["orders/0: 1 of 3 replicas out of the ISR after healing: broker-3 (LEO 1; its broker is down); against the leader broker-1's log, whose batches check out only up to offset 2, HW 3"]
    );
}

#[test]
fn a_replica_in_the_isr_missing_records_below_the_hw_is_divergent() {
    let tp = orders(0);
    let p = partition(tp, vec![record(0, id(1, 0)), record(1, id(1, 1))])
        .replica(in_isr(3, vec![record(0, id(1, 0))]));
    let verdict = check(&[], &final_state([p]));
    assert_eq!(verdict.counts.divergent, 1);
    assert_eq!(
        examples(&verdict, Count::Divergent),
        vec!["orders/0: broker-3 (in the ISR) differs from broker-1 below HW 2, first at offset 1: broker-1 holds producer-1:000001, broker-3 holds nothing"]
    );
}

#[test]
fn a_partition_without_a_leader_is_offline() {
    let p = partition(orders(1), vec![]).no_leader().replicas(vec![
        ReplicaLog {
            log_end_offset: Offset(500),
            ..in_isr(2, vec![])
        },
        ReplicaLog {
            log_end_offset: Offset(480),
            ..out_of_isr(3, vec![])
        },
    ]);
    let verdict = check(&[], &final_state([partition(orders(0), vec![]), p]));
    assert_eq!(
        verdict.counts,
        Counts {
            offline: 1,
            under_replicated: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Offline),
        vec!["orders/1 has no leader after the heal phase; replicas: broker-2 (LEO 500, in ISR; its broker is up), broker-3 (LEO 480, not in ISR; its broker is up)"]
    );
}

#[test]
fn with_acks_0_nothing_is_lost_but_missing_counts_what_never_arrived() {
    let tp = orders(0);
    let mut history = HistoryBuilder::new();
    for seq in 0..4 {
        history = history
            .send(id(1, seq), &tp)
            .completes_at(ms(u64::from(seq)))
            .indeterminate("acks=0");
    }
    let history = history
        .at(ms(9))
        .send(id(1, 4), &tp)
        .completes_at(ms(10))
        .failed("RecordTooLargeException")
        .at(ms(11))
        .send(id(1, 5), &tp)
        .unanswered()
        .build();
    let read = vec![
        record(0, id(1, 0)),
        record(1, id(1, 2)),
        record(2, id(1, 3)),
    ];
    let verdict = check(&history, &final_state([partition(tp.clone(), read)]));
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 6,
            failed: 1,
            indeterminate: 5,
            delivered: 3,
            missing: 2,
            unresolved: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Failed),
        vec!["producer-1:000004 to orders/0 failed at t=0.010s (RecordTooLargeException); absent from the final read"]
    );
    let indeterminate = examples(&verdict, Count::Indeterminate);
    assert_eq!(indeterminate.len(), 5);
    assert_eq!(indeterminate[1], "producer-1:000001 to orders/0 indeterminate at t=0.001s (acks=0); absent from the final read");
    assert_eq!(indeterminate[4], "producer-1:000005 to orders/0 sent at t=0.011s, never completed; absent from the final read");
}

#[test]
fn a_send_told_it_failed_that_is_in_the_final_read_is_a_false_failure() {
    let tp = orders(0);
    let history = HistoryBuilder::new()
        .send(id(1, 0), &tp)
        .acked_at(0)
        .send(id(1, 1), &tp)
        .completes_at(ms(5))
        .failed("NOT_ENOUGH_REPLICAS")
        .send(id(1, 2), &tp)
        .completes_at(ms(6))
        .failed("NOT_ENOUGH_REPLICAS")
        .build();
    let read = vec![record(0, id(1, 0)), record(1, id(1, 1))];
    let verdict = check(&history, &final_state([partition(tp, read)]));
    assert_eq!(verdict.counts.false_failures, 1);
    assert_eq!(verdict.counts.failed, 2);
    assert_eq!(
        examples(&verdict, Count::FalseFailures),
        vec!["producer-1:000001 to orders/0 failed at t=0.005s (NOT_ENOUGH_REPLICAS); in the final read at orders/0@1"]
    );
}

#[test]
fn an_empty_history_over_an_empty_cluster_counts_nothing() {
    let verdict = check(&[], &final_state([]));
    assert_eq!(verdict.counts, Counts::default());
    assert!(verdict.examples.is_empty());
}

#[test]
fn a_partition_with_no_records_is_no_anomaly() {
    let (t0, t1) = (orders(0), orders(1));
    let a = id(1, 0);
    let history = HistoryBuilder::new().send(a, &t0).acked_at(0).build();
    let state = final_state([partition(t0, vec![record(0, a)]), partition(t1, vec![])]);
    let verdict = check(&history, &state);
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 1,
            acked: 1,
            delivered: 1,
            ..Counts::default()
        }
    );
}

#[test]
fn one_id_in_two_partitions_is_a_duplicate_and_one_only_in_another_partition_moved() {
    let (t0, t1) = (orders(0), orders(1));
    let (a, b) = (id(1, 0), id(1, 1));
    let history = HistoryBuilder::new()
        .send(a, &t0)
        .acked_at(0)
        .send(b, &t0)
        .acked_at(1)
        .build();
    // a sits where its ack said and again in orders/1; b only in orders/1.
    let state = final_state([
        partition(t0, vec![record(0, a)]),
        partition(t1, vec![record(0, a), record(1, b)]),
    ]);
    let verdict = check(&history, &state);
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 2,
            acked: 2,
            delivered: 2,
            duplicates: 1,
            moved: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Moved),
        vec!["producer-1:000001 acked at orders/0@1 (t=0.003s); in the final read at orders/1@1"]
    );
}

#[test]
fn an_acknowledged_offset_holding_another_id_is_a_loss_not_a_move() {
    let tp = orders(0);
    let (a, b) = (id(1, 0), id(2, 0));
    let history = HistoryBuilder::new()
        .send(a, &tp)
        .acked_at(0)
        .send(b, &tp)
        .completes_at(ms(3_000))
        .indeterminate("REQUEST_TIMED_OUT")
        .build();
    // The new leader wrote b where a was acknowledged; a is nowhere.
    let verdict = check(&history, &final_state([partition(tp, vec![record(0, b)])]));
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 2,
            acked: 1,
            indeterminate: 1,
            lost: 1,
            delivered: 1,
            missing: 1,
            ..Counts::default()
        }
    );
}

#[test]
fn cluster_facts_are_counted_as_recorded() {
    let tp = orders(0);
    let fact = |time, fact| FactEvent {
        time: ms(time),
        fact,
    };
    let mut state = final_state([partition(tp.clone(), vec![])]);
    state.facts = [
        fact(10, Fact::Kafka(KafkaFact::IsrShrink { tp: tp.clone() })),
        fact(
            20,
            Fact::Kafka(KafkaFact::Election {
                tp: tp.clone(),
                leader: BrokerId(3),
                epoch: Epoch(2),
                from: ElectedFrom::OutOfSync,
            }),
        ),
        fact(
            30,
            Fact::Kafka(KafkaFact::Election {
                tp: tp.clone(),
                leader: BrokerId(1),
                epoch: Epoch(3),
                from: ElectedFrom::Isr,
            }),
        ),
        fact(
            40,
            Fact::Kafka(KafkaFact::Truncation {
                tp: tp.clone(),
                broker: BrokerId(2),
                from: Offset(17),
                to: Offset(10),
                rule: "leader-epoch".to_string(),
            }),
        ),
        fact(
            50,
            Fact::Kafka(KafkaFact::Truncation {
                tp: tp.clone(),
                broker: BrokerId(3),
                from: Offset(15),
                to: Offset(10),
                rule: "high-watermark".to_string(),
            }),
        ),
        fact(
            60,
            Fact::Kafka(KafkaFact::Recovery {
                tp: tp.clone(),
                broker: BrokerId(2),
                log_end_offset: Offset(9),
            }),
        ),
        fact(70, Fact::Kafka(KafkaFact::IsrExpand { tp })),
    ]
    .into_iter()
    .collect();
    let c = check(&[], &state).counts;
    assert_eq!(
        (
            c.elections,
            c.unclean_elections,
            c.isr_shrinks,
            c.isr_expands,
            c.truncated,
            c.recoveries
        ),
        (2, 1, 1, 1, 12, 1)
    );
}

#[test]
fn transaction_facts_count_fences_timeouts_markers_and_the_longest_stall() {
    let fact = |time, fact| FactEvent {
        time: ms(time),
        fact: Fact::Kafka(fact),
    };
    let fenced = |timed_out| KafkaFact::TxnFenced {
        transactional_id: "etl-consumer-1".to_owned(),
        epoch: 3,
        timed_out,
    };
    let marked = |started, partitions| KafkaFact::TxnMarked {
        transactional_id: "etl-consumer-1".to_owned(),
        committed: true,
        partitions,
        started: ms(started),
    };
    let mut state = final_state([partition(orders(0), vec![])]);
    state.facts = [
        fact(100, marked(40, 3)),
        fact(9_000, fenced(false)),
        fact(12_000, fenced(true)),
        fact(12_050, marked(1_000, 2)),
        fact(12_100, marked(12_000, 4)),
    ]
    .into_iter()
    .collect();
    let c = check(&[], &state).counts;
    assert_eq!(
        (c.fenced, c.txn_timeouts, c.markers, c.lso_stall_max),
        (2, 1, 9, 11_050)
    );
}

#[test]
fn sends_the_final_read_did_not_reach_are_unknown_not_lost() {
    let tp = orders(0);
    let (a, b, c) = (id(1, 0), id(1, 1), id(1, 2));
    let history = HistoryBuilder::new()
        .send(a, &tp)
        .acked_at(0)
        .send(b, &tp)
        .acked_at(1)
        .send(c, &tp)
        .acked_at(2)
        .build();
    // The read got offset 0 of HW 3, then ran out of time; the replicas hold all three.
    let whole = vec![record(0, a), record(1, b), record(2, c)];
    let p = partition(tp.clone(), vec![record(0, a)])
        .high_watermark(3)
        .unreadable()
        .replicas((1..=3).map(|b| in_isr(b, whole.clone())).collect());
    let verdict = check(&history, &final_state([p]));
    assert_eq!(
        verdict.counts,
        Counts {
            attempted: 3,
            acked: 3,
            delivered: 1,
            missing: 2,
            unreadable: 1,
            ..Counts::default()
        }
    );
    assert_eq!(
        examples(&verdict, Count::Unreadable),
        vec!["orders/0: the final read read up to offset 0 of log start 0 to HW 3 (leader broker-1) before time ran out; the acknowledged sends it did not reach are unknown, not lost"]
    );
    // The leader's log reads only as far as the final read got: a batch there does not
    // decode, and every fetch stops at it.
    let p = partition(tp, vec![record(0, a)])
        .high_watermark(3)
        .unreadable()
        .replica(in_isr(1, vec![record(0, a)]));
    let verdict = check(&history, &final_state([p]));
    assert_eq!(
        examples(&verdict, Count::Unreadable),
        vec!["orders/0: the final read read up to offset 0 of log start 0 to HW 3 (leader broker-1), where the leader's log holds a corrupt batch that every fetch stops at; the acknowledged sends it did not reach are unknown, not lost"]
    );
}

#[test]
fn examples_stop_at_five_per_count_while_counts_go_on() {
    let tp = orders(0);
    let mut history = HistoryBuilder::new();
    for seq in 0..20 {
        history = history.send(id(1, seq), &tp).acked_at(seq as i64);
    }
    let verdict = check(&history.build(), &final_state([partition(tp, vec![])]));
    assert_eq!(verdict.counts.lost, 20);
    assert_eq!(examples(&verdict, Count::Lost).len(), 5);
}

#[test]
fn the_verdict_against_expectations_names_what_failed() {
    let tp = orders(0);
    let history = HistoryBuilder::new()
        .send(id(1, 0), &tp)
        .acked_at(0)
        .build();
    let verdict = check(&history, &final_state([partition(tp, vec![])]));
    let expect = [
        Expectation {
            count: Count::Lost,
            comparison: Comparison::Eq,
            value: 0,
        },
        Expectation {
            count: Count::Acked,
            comparison: Comparison::Ge,
            value: 1,
        },
    ];
    assert_eq!(
        evaluate(&expect, &verdict.counts),
        vec!["expected lost == 0, got 1".to_string()]
    );
}

/// A million events: guards against quadratic work creeping into the checkers.
#[test]
fn a_history_of_a_million_events_checks() {
    let partitions: Vec<TopicPartition> = (0..4).map(orders).collect();
    let mut history = HistoryBuilder::new();
    let mut reads: Vec<Vec<ReadRecord>> = vec![Vec::new(); 4];
    for seq in 0..500_000u32 {
        let (producer, part) = (seq % 2 + 1, (seq % 4) as usize);
        let m = id(producer, seq);
        let offset = reads[part].len() as i64;
        let time = SimTime::after_start(Duration::from_micros(u64::from(seq) * 20));
        history = history
            .at(time)
            .send(m, &partitions[part])
            .completes_at(time)
            .acked_at(offset);
        if seq % 1000 != 0 {
            reads[part].push(record(offset, m));
        }
    }
    let state = final_state(
        partitions
            .iter()
            .zip(reads)
            .map(|(tp, read)| partition(tp.clone(), read)),
    );
    let verdict = check(&history.build(), &state);
    assert_eq!(verdict.counts.acked, 500_000);
    assert_eq!(verdict.counts.lost, 500);
    assert_eq!(verdict.counts.reordered, 0);
}

/// A generated history: each send goes to a partition and is acked, failed or
/// indeterminate; written ones get the next offset of their partition.
#[derive(Clone, Debug)]
enum Fate {
    Acked,
    Failed,
    /// Indeterminate; written or not.
    Unknown(bool),
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![6 => Just(Fate::Acked), 1 => Just(Fate::Failed), 2 => any::<bool>().prop_map(Fate::Unknown)]
}

/// A clean run: every acked id exactly once at its acked offset, consumers reading
/// committed records only, in-sync replicas identical.
fn clean_run(
    sends: &[(u32, u32, Fate)],
    reads_every: usize,
) -> (Vec<Event>, FinalState, Vec<(usize, usize)>) {
    let partitions: Vec<TopicPartition> = (0..3).map(orders).collect();
    let mut history = HistoryBuilder::new();
    let mut read: Vec<Vec<ReadRecord>> = vec![Vec::new(); 3];
    let mut acked_at = Vec::new();
    let mut next_seq = [0u32; 3];
    for (i, (producer, part, fate)) in sends.iter().enumerate() {
        let (producer, part) = (*producer as usize, *part as usize);
        let m = id(producer as u32 + 1, next_seq[producer]);
        next_seq[producer] += 1;
        let invoked = i as u64;
        let send = history
            .at(ms(invoked))
            .send(m, &partitions[part])
            .completes_at(ms(invoked + 1));
        let offset = read[part].len() as i64;
        history = match fate {
            Fate::Acked => {
                acked_at.push((part, read[part].len()));
                read[part].push(record(offset, m));
                send.acked_at(offset)
            }
            Fate::Failed => send.failed("NOT_ENOUGH_REPLICAS"),
            Fate::Unknown(written) => {
                if *written {
                    read[part].push(record(offset, m));
                }
                send.indeterminate("request timed out")
            }
        };
    }
    for (part, records) in read.iter().enumerate() {
        for r in records.iter().step_by(reads_every) {
            let m = r.id;
            history = history
                .at(ms(10_000))
                .read(1, &partitions[part], r.offset.0, m);
        }
    }
    let state = final_state(
        partitions
            .into_iter()
            .zip(read)
            .map(|(tp, r)| partition(tp, r)),
    );
    (history.build(), state, acked_at)
}

fn anomalies(c: &Counts) -> [u64; 11] {
    [
        c.lost,
        c.moved,
        c.duplicates,
        c.unexpected,
        c.reordered,
        c.dirty_reads,
        c.divergent,
        c.offline,
        c.false_failures,
        c.under_replicated,
        c.unreadable,
    ]
}

proptest! {
    #[test]
    fn a_clean_run_has_no_anomalies_and_removing_one_acked_record_loses_exactly_it(
        sends in proptest::collection::vec((0u32..3, 0u32..3, fate()), 1..200),
        reads_every in 1usize..5,
        pick in any::<prop::sample::Index>(),
    ) {
        let (history, mut state, acked_at) = clean_run(&sends, reads_every);
        let verdict = check(&history, &state);
        let c = verdict.counts.clone();
        prop_assert_eq!(anomalies(&c), [0; 11], "{:?}", verdict.examples);
        prop_assert_eq!(c.attempted, sends.len() as u64);
        prop_assert_eq!(c.acked + c.failed + c.indeterminate, c.attempted);
        prop_assert_eq!(c.missing, c.attempted - c.delivered - c.failed);
        prop_assert!(verdict.examples.iter().all(|e| matches!(e.count, Count::Failed | Count::Indeterminate)));

        if !acked_at.is_empty() {
            let (part, i) = acked_at[pick.index(acked_at.len())];
            let p = &mut state.partitions[part];
            p.read.remove(i);
            for r in &mut p.replicas {
                r.records.remove(i);
            }
            let after = check(&history, &state);
            prop_assert_eq!(after.counts.lost, 1);
            prop_assert_eq!(after.counts.missing, c.missing + 1);
            prop_assert_eq!(after.counts.delivered, c.delivered - 1);
            prop_assert_eq!(after.counts.moved + after.counts.duplicates + after.counts.unexpected + after.counts.reordered, 0);
            prop_assert_eq!(after.examples_of(Count::Lost).count(), 1);
        }
    }
}

/// Producer 1's transactions on orders/0 and orders/1: sends 0-1 committed, 2-3 aborted,
/// 4-5 committed. `read` is what the read_committed final read of each partition holds.
fn transactions(read: [Vec<ReadRecord>; 2]) -> Verdict {
    let (a, b) = (orders(0), orders(1));
    let history = HistoryBuilder::new()
        .transaction(id(1, 0), id(1, 1), TxnOutcome::Committed)
        .send(id(1, 0), &a)
        .acked_at(0)
        .send(id(1, 1), &b)
        .acked_at(0)
        .transaction(id(1, 2), id(1, 3), TxnOutcome::Aborted)
        .send(id(1, 2), &a)
        .failed("transaction aborted: NOT_ENOUGH_REPLICAS")
        .send(id(1, 3), &b)
        .failed("transaction aborted: NOT_ENOUGH_REPLICAS")
        .transaction(id(1, 4), id(1, 5), TxnOutcome::Committed)
        .send(id(1, 4), &a)
        .acked_at(3)
        .send(id(1, 5), &b)
        .acked_at(3)
        .read(1, &a, 1, Some(id(1, 2)))
        .build();
    let [read_a, read_b] = read;
    check(
        &history,
        &final_state([partition(a, read_a), partition(b, read_b)]),
    )
}

#[test]
fn transactions_are_tallied_and_a_clean_read_committed_read_has_no_anomaly_but_the_read_of_an_aborted_record(
) {
    let verdict = transactions([
        vec![record(0, id(1, 0)), record(3, id(1, 4))],
        vec![record(0, id(1, 1)), record(3, id(1, 5))],
    ]);
    let counts = &verdict.counts;
    assert_eq!(
        (counts.txn_committed, counts.txn_aborted, counts.txn_unknown),
        (2, 1, 0)
    );
    assert_eq!((counts.acked, counts.failed, counts.lost), (4, 2, 0));
    assert_eq!(
        (counts.torn, counts.hanging, counts.false_failures),
        (0, 0, 0)
    );
    assert_eq!(counts.aborted_reads, 1, "consumer-1 read producer-1:000002");
    assert_eq!(
        examples(&verdict, Count::AbortedReads),
        vec![
            "consumer-1 read producer-1:000002 of an aborted transaction at orders/0@1 (t=0.006s)"
        ]
    );
}

#[test]
fn an_aborted_record_in_the_read_committed_final_read_is_an_aborted_read_not_a_false_failure() {
    let verdict = transactions([
        vec![
            record(0, id(1, 0)),
            record(1, id(1, 2)),
            record(3, id(1, 4)),
        ],
        vec![record(0, id(1, 1)), record(3, id(1, 5))],
    ]);
    assert_eq!(verdict.counts.aborted_reads, 2);
    assert_eq!(verdict.counts.false_failures, 0);
    assert_eq!(
        examples(&verdict, Count::AbortedReads)[0],
        "producer-1:000002 of aborted transaction producer-1:000002..000003 is in the read_committed final read at orders/0@1"
    );
}

#[test]
fn a_committed_transaction_half_visible_is_torn_and_its_missing_half_lost() {
    let verdict = transactions([
        vec![record(0, id(1, 0)), record(3, id(1, 4))],
        vec![record(0, id(1, 1))],
    ]);
    assert_eq!(verdict.counts.torn, 1);
    assert_eq!(verdict.counts.lost, 1);
    assert_eq!(
        examples(&verdict, Count::Torn),
        vec!["transaction producer-1:000004..000005 (Committed): 1 of its sends in the read_committed final read, 1 absent"]
    );
}

/// The read past a hanging partition's LSO decides what the LSO hides: an acknowledged
/// send there is hidden, not lost; one found nowhere is lost; and the record at the LSO
/// names the transaction that holds it.
#[test]
fn the_read_past_the_lso_tells_hidden_from_lost_and_names_the_open_transaction() {
    let a = orders(0);
    let history = HistoryBuilder::new()
        .transaction(id(1, 0), id(1, 0), TxnOutcome::Committed)
        .send(id(1, 0), &a)
        .acked_at(0)
        .transaction(id(1, 1), id(1, 1), TxnOutcome::Aborted)
        .send(id(1, 1), &a)
        .failed("transaction aborted")
        .send(id(2, 0), &a)
        .acked_at(3)
        .send(id(2, 1), &a)
        .acked_at(4)
        .build();
    let state = final_state([partition(a, vec![record(0, id(1, 0))])
        .high_watermark(5)
        .last_stable_offset(2)
        .beyond_lso(vec![record(2, id(1, 1)), record(3, id(2, 0))])]);
    let verdict = check(&history, &state);
    assert_eq!((verdict.counts.hanging, verdict.counts.unreadable), (1, 1));
    assert_eq!(verdict.counts.lost, 1, "producer-2:000001 is nowhere");
    assert_eq!(
        examples(&verdict, Count::Hanging),
        vec!["orders/0: the LSO stayed at 2 below the HW 5 when the heal phase ended: a transaction open there (from producer-1:000001, of transaction producer-1:000001..000001, which its producer aborted, yet no marker ended here) holds back every read_committed reader"]
    );
    assert!(examples(&verdict, Count::Lost)[0].starts_with("producer-2:000001"));
}

#[test]
fn an_lso_below_the_hw_at_the_end_is_hanging_and_what_is_above_it_unknown_not_lost() {
    let (a, b) = (orders(0), orders(1));
    let history = HistoryBuilder::new()
        .transaction(id(1, 0), id(1, 1), TxnOutcome::Committed)
        .send(id(1, 0), &a)
        .acked_at(5)
        .send(id(1, 1), &b)
        .acked_at(0)
        .build();
    let state = final_state([
        partition(a, Vec::new())
            .high_watermark(6)
            .last_stable_offset(2),
        partition(b, vec![record(0, id(1, 1))]).last_stable_offset(1),
    ]);
    let verdict = check(&history, &state);
    assert_eq!(verdict.counts.hanging, 1);
    assert_eq!((verdict.counts.lost, verdict.counts.torn), (0, 0));
    assert_eq!(verdict.counts.unreadable, 1);
    assert_eq!(
        examples(&verdict, Count::Hanging),
        vec!["orders/0: the LSO stayed at 2 below the HW 6 when the heal phase ended: a transaction open there holds back every read_committed reader"]
    );
}
