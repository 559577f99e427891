//! The one table of checker counts. Each row is a field of [`Counts`] (and so a key of the
//! JSON report, in row order); the tallies and anomalies are also a [`Count`], named in
//! `[expect]` by the field's name, and the anomalies are the counts the report explains
//! with examples. A new count is one row here.

use serde::{Deserialize, Serialize};

macro_rules! counts {
    (
        $(#[$doc:meta])*
        tallies { $($(#[$tally_doc:meta])* $tally:ident: $Tally:ident,)* }
        anomalies { $($(#[$anomaly_doc:meta])* $anomaly:ident: $Anomaly:ident,)* }
        facts { $($(#[$fact_doc:meta])* $fact:ident: $Fact:ident,)* }
        deliveries { $($(#[$other_doc:meta])* $other:ident: $Other:ident,)* }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Counts {
            $($(#[$tally_doc])* pub $tally: u64,)*
            $($(#[$anomaly_doc])* pub $anomaly: u64,)*
            $($(#[$fact_doc])* pub $fact: u64,)*
            $($(#[$other_doc])* pub $other: u64,)*
        }

        /// A checker count, as named in `[expect]`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub enum Count {
            $($Tally,)*
            $($Anomaly,)*
            $($Fact,)*
            $($Other,)*
        }

        impl Count {
            /// Every count, in the order errors list them.
            pub const ALL: &'static [Count] =
                &[$(Count::$Tally,)* $(Count::$Anomaly,)* $(Count::$Fact,)* $(Count::$Other,)*];
        }

        /// The counts that are anomalies, in the order the report explains them.
        pub const ANOMALIES: &[Count] = &[$(Count::$Anomaly,)*];

        /// The count's name as written in `[expect]`.
        pub fn count_name(count: Count) -> &'static str {
            match count {
                $(Count::$Tally => stringify!($tally),)*
                $(Count::$Anomaly => stringify!($anomaly),)*
                $(Count::$Fact => stringify!($fact),)*
                $(Count::$Other => stringify!($other),)*
            }
        }

        impl Counts {
            pub fn get(&self, count: Count) -> u64 {
                match count {
                    $(Count::$Tally => self.$tally,)*
                    $(Count::$Anomaly => self.$anomaly,)*
                    $(Count::$Fact => self.$fact,)*
                    $(Count::$Other => self.$other,)*
                }
            }
        }
    };
}

counts! {
    /// Every checker count (docs/checkers.md).
    ///
    /// Sends are keyed by message id; a well-formed history has one invoke and at most one
    /// completion per id. Defensively, an id with several completions takes the strongest
    /// (ok, then fail, then info): if the client was ever told "ok", its ack is checked.
    /// `attempted == acked + failed + indeterminate`.
    tallies {
        /// Distinct ids the history mentions in an invoke (or, defensively, a completion).
        attempted: Attempted,
        acked: Acked,
        /// Of those, acked with a stored status other than a plain acknowledgement
        /// (RocketMQ's FLUSH_DISK_TIMEOUT): stored, with less promised.
        acked_degraded: AckedDegraded,
        failed: Failed,
        /// Completed with info, or never completed.
        indeterminate: Indeterminate,
        /// Transactions a transactional producer committed (commitTransaction returned).
        txn_committed: TxnCommitted,
        /// Transactions it aborted, or that failed before their commit was sent.
        txn_aborted: TxnAborted,
        /// Transactions whose commit was sent and whose outcome it never learned.
        txn_unknown: TxnUnknown,
    }
    anomalies {
        /// Acked ids with no copy anywhere in the final read.
        lost: Lost,
        /// Acked ids with copies in the final read, none at the acked partition and offset.
        moved: Moved,
        /// Over attempted ids: copies in the final read beyond the first. Records of ids
        /// never attempted count as `unexpected` only.
        duplicates: Duplicates,
        /// Final-read records whose value carries no parseable id, or an id never attempted.
        unexpected: Unexpected,
        /// Inversions: see `check::reorder` for the exact definition.
        reordered: Reordered,
        /// Read events (one per consumer read) whose id the final read does not hold at that
        /// partition and offset.
        dirty_reads: DirtyReads,
        /// Partitions where some replica holds different records from the leader below
        /// min(HW, that replica's LEO).
        divergent: Divergent,
        /// Partitions without a leader after the heal phase.
        offline: Offline,
        /// Sends that completed with a definite failure yet are in the final read: the
        /// client was told "not written", and it was.
        false_failures: FalseFailures,
        /// Partitions whose final ISR is smaller than their replica set.
        under_replicated: UnderReplicated,
        /// Partitions the final read could not read completely; acknowledged sends it did not
        /// reach there are neither lost nor moved, but unknown.
        unreadable: Unreadable,
        /// With a consumer group (0 without one): records of the final read, on partitions
        /// it read completely, that no member's `Processed` event matches by partition,
        /// offset and message id: consumer-side loss. A record the log replaced after the
        /// group processed another at its offset counts: the application never saw it.
        unprocessed: Unprocessed,
        /// With a consumer group (0 without one): records with more than one `Processed`
        /// event, a record being its partition, offset and message id (partition and offset
        /// for one without an id): consumer-side duplication. A record processed three
        /// times counts once, and one the log later lost counts too: the application saw
        /// it twice all the same.
        reprocessed: Reprocessed,
        /// Records of aborted transactions in the read_committed final read, plus read
        /// events of such records during the run (Jepsen's G1a, aborted read).
        aborted_reads: AbortedReads,
        /// Committed (or unknown) transactions only partly in the read_committed final
        /// read: some of their sends there, some absent from partitions read completely.
        torn: Torn,
        /// Partitions whose LSO was still below their HW when the heal phase ended: a
        /// transaction left open holds back every read_committed reader.
        hanging: Hanging,
        /// With stream processors (0 without): outputs in the read_committed final read of
        /// the output topic beyond one per copy of their input in the input topic: an
        /// input's effect seen twice downstream.
        eos_duplicates: EosDuplicates,
        /// With stream processors (0 without): input records below the group's last
        /// committed offset of their partition with no output in the output topic (read
        /// completely): an input the group will never process again, whose effect never
        /// came.
        eos_missing: EosMissing,
    }
    facts {
        /// Leaders the controller elected (clean or unclean), after the initial ones.
        elections: Elections,
        /// Of those, leaders elected from outside the ISR.
        unclean_elections: UncleanElections,
        /// ISR changes the controller committed that removed a replica.
        isr_shrinks: IsrShrinks,
        /// ISR changes the controller committed that added a replica.
        isr_expands: IsrExpands,
        /// Records followers removed from their logs' ends to match a leader.
        truncated: Truncated,
        /// Logs opened after an unclean stop, which recovery scanned.
        recoveries: Recoveries,
        /// Batches a producer put back to send again, after a retriable error or a
        /// request timeout.
        retries: Retries,
        /// Batch attempts whose request got no answer within the producer's request
        /// timeout (`request.timeout.ms`), retried or not.
        request_timeouts: RequestTimeouts,
        /// Producer epochs the transaction coordinator fenced, aborting the open
        /// transaction: a new instance's InitProducerId, or a transaction timeout.
        fenced: Fenced,
        /// Of those, transactions the coordinator aborted because they outlived
        /// `transaction.timeout.ms`.
        txn_timeouts: TxnTimeouts,
        /// Transaction markers written, one per partition of each ended transaction (a
        /// transaction whose markers a new coordinator sends again counts again).
        markers: Markers,
        /// The longest time, in milliseconds, from a transaction's start on its coordinator
        /// to its last marker written: how long it held back the LSO of the partitions it
        /// wrote. A transaction never ended counts `hanging` instead.
        lso_stall_max: LsoStallMax,
        /// Transactional batches a partition leader refused because the transaction
        /// coordinator did not have the partition in the producer's ongoing transaction
        /// (partition verification, KIP-890, Kafka 3.6): a produce that arrived after its
        /// transaction ended, refused instead of opening a transaction nobody would end.
        unverified: Unverified,
    }
    deliveries {
        /// Attempted ids with at least one copy in the final read.
        delivered: Delivered,
        /// Attempted ids neither delivered nor failed; equals `attempted - delivered - failed`
        /// unless a send that definitely failed shows up in the final read anyway. With
        /// acks=0 nothing is acknowledged, so this is what a fault cost.
        missing: Missing,
        /// Of the indeterminate sends, those still without any outcome when the heal phase
        /// (lengthened while producers could still answer them) ended.
        unresolved: Unresolved,
        /// Acked, delivered sends that sit in the final read after a later send of the same
        /// producer to the same partition: the sends `reordered`'s pairs are made of, a
        /// number that grows with the sends, not with their square.
        out_of_order: OutOfOrder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_report_keeps_its_keys_and_their_order() {
        let json = serde_json::to_string(&Counts::default()).unwrap();
        assert_eq!(
            json,
            "{\"attempted\":0,\"acked\":0,\"acked_degraded\":0,\"failed\":0,\"indeterminate\":0,\
             \"txn_committed\":0,\"txn_aborted\":0,\"txn_unknown\":0,\"lost\":0,\
             \"moved\":0,\"duplicates\":0,\"unexpected\":0,\"reordered\":0,\"dirty_reads\":0,\
             \"divergent\":0,\"offline\":0,\"false_failures\":0,\"under_replicated\":0,\"unreadable\":0,\"unprocessed\":0,\"reprocessed\":0,\
             \"aborted_reads\":0,\"torn\":0,\"hanging\":0,\"eos_duplicates\":0,\"eos_missing\":0,\
             \"elections\":0,\"unclean_elections\":0,\"isr_shrinks\":0,\
             \"isr_expands\":0,\"truncated\":0,\"recoveries\":0,\"retries\":0,\"request_timeouts\":0,\"fenced\":0,\"txn_timeouts\":0,\"markers\":0,\"lso_stall_max\":0,\"unverified\":0,\"delivered\":0,\"missing\":0,\"unresolved\":0,\"out_of_order\":0}"
        );
    }

    #[test]
    fn every_count_reads_its_own_field() {
        let counts = Counts {
            attempted: 1,
            acked: 2,
            acked_degraded: 3,
            failed: 4,
            indeterminate: 5,
            txn_committed: 6,
            txn_aborted: 7,
            txn_unknown: 8,
            lost: 9,
            moved: 10,
            duplicates: 11,
            unexpected: 12,
            reordered: 13,
            dirty_reads: 14,
            divergent: 15,
            offline: 16,
            false_failures: 17,
            under_replicated: 18,
            unreadable: 19,
            unprocessed: 20,
            reprocessed: 21,
            aborted_reads: 22,
            torn: 23,
            hanging: 24,
            eos_duplicates: 25,
            eos_missing: 26,
            elections: 27,
            unclean_elections: 28,
            isr_shrinks: 29,
            isr_expands: 30,
            truncated: 31,
            recoveries: 32,
            retries: 33,
            request_timeouts: 34,
            fenced: 35,
            txn_timeouts: 36,
            markers: 37,
            lso_stall_max: 38,
            unverified: 39,
            delivered: 40,
            missing: 41,
            unresolved: 42,
            out_of_order: 43,
        };
        let got: Vec<u64> = Count::ALL.iter().map(|c| counts.get(*c)).collect();
        assert_eq!(got, (1..=43).collect::<Vec<u64>>());
        let names: Vec<&str> = ANOMALIES.iter().map(|c| count_name(*c)).collect();
        assert_eq!(
            names,
            [
                "lost",
                "moved",
                "duplicates",
                "unexpected",
                "reordered",
                "dirty_reads",
                "divergent",
                "offline",
                "false_failures",
                "under_replicated",
                "unreadable",
                "unprocessed",
                "reprocessed",
                "aborted_reads",
                "torn",
                "hanging",
                "eos_duplicates",
                "eos_missing"
            ]
        );
    }
}
