//! Known bugs a mutation test can switch on in either system's programs or the harness,
//! to prove the checkers catch each one.

/// Known bugs a test can switch on, to prove the checkers catch each one
/// (`tests/integration/mutations.rs`). Nothing in a scenario file reaches them: the parser
/// never sets them, so every run from a file has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bugs {
    /// The leader answers an acks=all produce at its append, not once the HW passes it.
    pub ack_at_append: bool,
    /// The leader's HW follows its own LEO, ignoring its followers'.
    pub hw_on_leader_leo: bool,
    /// A follower never truncates its log to match a new leader.
    pub skip_follower_truncation: bool,
    /// Consumer fetches are served up to the leader's LEO instead of its HW.
    pub read_beyond_hw: bool,
    /// The final read leaves out the first partition it was asked for.
    pub final_read_skips_a_partition: bool,
    /// The final read checks no batch CRC, whatever `check.crcs` says.
    pub final_read_skips_crc: bool,
    /// The read_committed final read keeps the records of aborted transactions (a consumer
    /// that ignores a fetch's aborted transactions).
    pub final_read_ignores_aborted: bool,
    /// The leader appends every batch, ignoring the producer's sequence numbers.
    pub ignore_sequences: bool,
    /// Log recovery trusts every batch header and checks no CRC.
    pub skip_crc_on_recovery: bool,
    /// The controller's clean election takes any live replica, in the ISR or not.
    pub clean_election_outside_isr: bool,
    /// The controller leaves a fenced broker in the ISRs it was in; only its leadership moves.
    pub keep_fenced_in_isr: bool,
    /// The controller registers a broker's new incarnation while its old one still holds a
    /// valid session, failing the old one over at once.
    pub register_in_session: bool,
    /// The controller ignores the broker epochs an AlterPartition names (no KIP-903), so a
    /// follower's new process can join the ISR on its old process's fetches.
    pub ignore_broker_epochs: bool,
    /// fsync reports success without making anything durable.
    pub fsync_returns_early: bool,
    /// A group member commits its fetch position, past records fetched and not yet
    /// processed, instead of the position after the last record it processed.
    pub commit_fetch_position: bool,
    /// A follower appends what its leader sent without checking the batches' CRCs.
    pub follower_skips_crc: bool,
    /// A controlled shutdown writes no clean-shutdown marker, so the next start recovers.
    pub shutdown_without_marker: bool,
    /// A group member fetches from its position after a leader change without asking the
    /// new leader where its last epoch ends (no KIP-320 validation).
    pub skip_position_validation: bool,
    /// A leader never removes a lagging follower from the ISR.
    pub never_shrink_isr: bool,
    /// A leader counts every fetch as caught up, wherever it reads from: a follower that
    /// keeps fetching never leaves the ISR, however far behind it is.
    pub any_fetch_caught_up: bool,
    /// The brokers take `min.insync.replicas` to be 1, whatever it is set to.
    pub ignore_min_insync_replicas: bool,
    /// A new group coordinator starts without reading back the offsets partition.
    pub coordinator_skips_load: bool,
    /// A new transaction coordinator starts without reading back its `__transaction_state`
    /// partition: the transactions its predecessor left open are never finished.
    pub txn_coordinator_skips_load: bool,
    /// The transaction coordinator aborts a timed-out transaction at its producer's own
    /// epoch, without fencing it (KAFKA-6119, 0.11.0.0): the producer's late batches are
    /// still current and open a transaction nobody ends.
    pub timeout_abort_skips_fence: bool,
    /// The transaction coordinator writes a PrepareCommit or PrepareAbort with acks=1, so
    /// it answers EndTxn once its own log has the record: a coordinator cut off from its
    /// followers promises a commit that its successor never hears of.
    pub end_txn_before_prepare_replicated: bool,
    /// The group coordinator takes a TxnOffsetCommit without checking its member and
    /// generation, as before KIP-447: a zombie processor's offsets count.
    pub txn_offsets_skip_generation: bool,
    /// The group coordinator answers an OffsetFetch that asks for stable offsets
    /// (KIP-447's RequireStable) with the committed ones, though a transaction's offsets
    /// for the partition wait for its marker: the partition's new owner resumes behind them.
    pub offset_fetch_ignores_require_stable: bool,
    /// The partition leader answers a read_committed fetch or ListOffsets with its HW
    /// as the LSO: open transactions' records are read before they commit or abort.
    pub lso_is_hw: bool,
    /// A partition leader appends a transactional batch that starts a transaction without
    /// asking the coordinator, whatever `transaction.partition.verification.enable` says
    /// (no KIP-890 part 1): a stray produce opens a transaction nobody ends.
    pub skip_partition_verification: bool,
    /// A power loss keeps the page cache, as a process crash does.
    pub power_loss_keeps_page_cache: bool,
    /// ext4's journal never commits on its `commit=` timer, and an fsync makes durable
    /// only its own file's data, size and name, not the rest of the running transaction.
    pub journal_per_file: bool,
    /// The producer puts a retried batch behind the newer ones queued for its partition,
    /// where Kafka's `RecordAccumulator.reenqueue` puts it in front.
    pub retries_enqueue_at_back: bool,
    /// An idempotent producer puts a retried batch at the front of its partition's queue,
    /// as one without idempotence does, instead of in sequence order.
    pub reenqueue_ignores_sequence: bool,
    /// The producer (either system's) takes a request that timed out for one that wrote
    /// nothing.
    pub timeout_proves_not_written: bool,
    /// A RocketMQ broker answers a SYNC_FLUSH put at its append, before GroupCommitService
    /// flushes it.
    pub sync_flush_acks_at_append: bool,
    /// RocketMQ's TransientStorePool commits each append to the file at once, so its
    /// buffer never holds what a kill would take.
    pub pool_commits_at_append: bool,
    /// A RocketMQ broker fsyncs `consumerOffset.json` at each persist, as only develop
    /// does.
    pub offsets_persist_fsyncs: bool,
    /// ReputMessageService dispatches past the flushed position under SYNC_FLUSH in every
    /// release, ignoring 5.3.0's fix.
    pub reput_past_flushed: bool,
}
