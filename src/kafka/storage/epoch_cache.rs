//! The leader-epoch cache of KIP-101 (Kafka's `LeaderEpochFileCache`): for each leader
//! epoch, the first offset written in it. It answers OffsetsForLeaderEpoch (KIP-279), which
//! is how a follower finds where its log diverges from the leader's instead of truncating to
//! its high watermark — the rule whose data loss and divergence KIP-101 documents.
//!
//! Entries strictly increase in both epoch and start offset. The cache is persisted as the
//! partition's `leader-epoch-checkpoint` (`0`, count, `epoch startOffset` lines); when to
//! write it is the log's business.

use crate::kafka::storage::checkpoint::{format_entries, parse_entries, CheckpointError};
use crate::kafka::types::EpochEndOffset;
use crate::types::{Epoch, Offset};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: Epoch,
    pub start_offset: Offset,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Record that `epoch` starts at `start_offset`: only a newer epoch starting at or after
    /// the latest one's start (KIP-101); anything else leaves the cache as it is. Returns
    /// true if the cache changed (and its checkpoint must be written).
    pub fn assign(&mut self, epoch: Epoch, start_offset: Offset) -> bool {
        if epoch.0 < 0 || start_offset.0 < 0 {
            return false;
        }
        if let Some(latest) = self.entries.last() {
            if epoch <= latest.epoch || start_offset < latest.start_offset {
                return false;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    pub fn latest_epoch(&self) -> Option<Epoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Kafka's `endOffsetFor` (KIP-279): the largest epoch ≤ `requested` and where it ends
    /// — the next epoch's start offset, or `log_end` for the latest epoch. As in Kafka, an
    /// epoch below every cached one (its entries were removed with old segments) answers
    /// `(requested, first start offset)`, so the follower truncates to where the leader's
    /// log begins; an epoch above every cached one, or an empty cache, answers
    /// `(Epoch::NONE, Offset::NONE)`.
    pub fn end_offset_for(&self, requested: Epoch, log_end: Offset) -> EpochEndOffset {
        let undefined = EpochEndOffset {
            epoch: Epoch::NONE,
            end_offset: Offset::NONE,
        };
        if requested == Epoch::NONE {
            return undefined;
        }
        if self.latest_epoch() == Some(requested) {
            return EpochEndOffset {
                epoch: requested,
                end_offset: log_end,
            };
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else {
            return undefined;
        };
        let epoch = match higher.checked_sub(1) {
            Some(floor) => self.entries[floor].epoch,
            None => requested,
        };
        EpochEndOffset {
            epoch,
            end_offset: next.start_offset,
        }
    }

    /// The log was truncated to end at `end_offset` (exclusive): epochs starting at or after
    /// it no longer have any records.
    pub fn truncate_from_end(&mut self, end_offset: Offset) {
        if end_offset.0 < 0 {
            return;
        }
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        self.entries.truncate(keep);
    }

    /// The log now starts at `start_offset` (retention, or a follower's full truncation):
    /// drop epochs that end before it and move the epoch containing it to start there.
    pub fn truncate_from_start(&mut self, start_offset: Offset) {
        let removed = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if removed == 0 {
            return;
        }
        let containing = self.entries[removed - 1].epoch;
        self.entries.drain(..removed - 1);
        self.entries[0] = EpochEntry {
            epoch: containing,
            start_offset,
        };
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Kafka's `leader-epoch-checkpoint` text.
    pub fn to_checkpoint(&self) -> String {
        format_entries(
            self.entries.len(),
            self.entries
                .iter()
                .map(|e| format!("{} {}", e.epoch.0, e.start_offset.0)),
        )
    }

    /// Entries are re-assigned in order, as Kafka does on load: an entry that would break
    /// the monotonic order is dropped.
    pub fn from_checkpoint(text: &str) -> Result<Self, CheckpointError> {
        let mut cache = LeaderEpochCache::default();
        for entry in parse_checkpoint(text)? {
            cache.assign(entry.epoch, entry.start_offset);
        }
        Ok(cache)
    }
}

/// A `leader-epoch-checkpoint`'s entries as the file has them, before `from_checkpoint`
/// drops those out of order (so that `dump-log` can show what loading would drop).
pub fn parse_checkpoint(text: &str) -> Result<Vec<EpochEntry>, CheckpointError> {
    parse_entries(text, 2, |f| {
        Some(EpochEntry {
            epoch: Epoch(f[0].parse().ok()?),
            start_offset: Offset(f[1].parse().ok()?),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::default();
        for &(e, o) in entries {
            assert!(c.assign(Epoch(e), Offset(o)), "assign {e} {o}");
        }
        c
    }

    fn eo(epoch: i32, end_offset: i64) -> EpochEndOffset {
        EpochEndOffset {
            epoch: Epoch(epoch),
            end_offset: Offset(end_offset),
        }
    }

    fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect()
    }

    #[test]
    fn assign_only_newer_epochs_at_or_after_the_latest_start() {
        let mut c = cache(&[(0, 0), (2, 10)]);
        assert!(!c.assign(Epoch(2), Offset(15)), "same epoch");
        assert!(!c.assign(Epoch(1), Offset(20)), "older epoch");
        assert!(!c.assign(Epoch(3), Offset(5)), "start before the latest's");
        assert!(!c.assign(Epoch(-1), Offset(20)));
        assert!(
            c.assign(Epoch(3), Offset(10)),
            "an epoch with no records yet"
        );
        assert!(c.assign(Epoch(5), Offset(12)));
        assert_eq!(pairs(&c), [(0, 0), (2, 10), (3, 10), (5, 12)]);
        assert_eq!(c.latest_epoch(), Some(Epoch(5)));
        assert_eq!(LeaderEpochCache::default().latest_epoch(), None);
        // An undefined epoch or offset never enters, not even an empty cache.
        let mut empty = LeaderEpochCache::default();
        assert!(!empty.assign(Epoch::NONE, Offset(0)));
        assert!(!empty.assign(Epoch(0), Offset::NONE));
        assert_eq!(empty.entries(), []);
    }

    #[test]
    fn end_offset_for_follows_kip_279() {
        let c = cache(&[(1, 0), (2, 10), (4, 25)]);
        // The latest epoch is still being written: it ends at the log end.
        assert_eq!(c.end_offset_for(Epoch(4), Offset(40)), eo(4, 40));
        // A known epoch ends where the next starts.
        assert_eq!(c.end_offset_for(Epoch(1), Offset(40)), eo(1, 10));
        assert_eq!(c.end_offset_for(Epoch(2), Offset(40)), eo(2, 25));
        // An epoch this leader never had: the largest below it, ending at the next start.
        assert_eq!(c.end_offset_for(Epoch(3), Offset(40)), eo(2, 25));
        // Below all (removed with old segments): the requested epoch, ending at our start.
        assert_eq!(c.end_offset_for(Epoch(0), Offset(40)), eo(0, 0));
        // Above all, undefined, empty cache: nothing to answer.
        assert_eq!(c.end_offset_for(Epoch(5), Offset(40)), eo(-1, -1));
        assert_eq!(c.end_offset_for(Epoch::NONE, Offset(40)), eo(-1, -1));
        let empty = LeaderEpochCache::default();
        assert_eq!(empty.end_offset_for(Epoch(0), Offset(0)), eo(-1, -1));
    }

    /// KIP-279's divergence case: the follower led epoch 1 and wrote 0..8 plus 8..12 that
    /// never replicated; the leader (epoch 2) has epoch 0 up to 10 and epoch 2 from 10.
    /// Asking for epoch 1 the leader answers (0, 10); the follower's own epoch 0 ends at 8,
    /// so it truncates to min(10, 8) = 8 — not to 10, which would keep its divergent 8..10.
    #[test]
    fn kip_279_follower_truncates_to_the_common_epochs_end() {
        let leader = cache(&[(0, 0), (2, 10)]);
        let mut follower = cache(&[(0, 0), (1, 8)]);
        let answer = leader.end_offset_for(Epoch(1), Offset(20));
        assert_eq!(answer, eo(0, 10));
        let own = follower.end_offset_for(answer.epoch, Offset(12));
        assert_eq!(own, eo(0, 8));
        let truncate_to = answer.end_offset.min(own.end_offset);
        assert_eq!(truncate_to, Offset(8));
        follower.truncate_from_end(truncate_to);
        assert_eq!(pairs(&follower), [(0, 0)]);
    }

    /// KIP-101 scenario 1: with epochs, a follower that restarts asks the leader instead of
    /// truncating to its (lagging) high watermark, and keeps the acknowledged message.
    #[test]
    fn kip_101_follower_keeps_records_the_leader_has() {
        let leader = cache(&[(0, 0)]);
        let follower = cache(&[(0, 0)]);
        let answer = leader.end_offset_for(follower.latest_epoch().unwrap(), Offset(2));
        assert_eq!(
            answer,
            eo(0, 2),
            "follower with LEO 2 and HW 1 keeps offset 1"
        );
    }

    #[test]
    fn truncate_from_end_drops_epochs_starting_at_or_after() {
        let mut c = cache(&[(0, 0), (1, 5), (3, 9)]);
        c.truncate_from_end(Offset(9));
        assert_eq!(pairs(&c), [(0, 0), (1, 5)]);
        c.truncate_from_end(Offset(6));
        assert_eq!(pairs(&c), [(0, 0), (1, 5)]);
        c.truncate_from_end(Offset(-1));
        assert_eq!(pairs(&c), [(0, 0), (1, 5)]);
        c.truncate_from_end(Offset(0));
        assert!(c.entries().is_empty());
    }

    #[test]
    fn truncate_from_start_moves_the_containing_epoch() {
        let mut c = cache(&[(0, 0), (1, 5), (3, 9)]);
        c.truncate_from_start(Offset(0));
        assert_eq!(pairs(&c), [(0, 0), (1, 5), (3, 9)]);
        c.truncate_from_start(Offset(7));
        assert_eq!(pairs(&c), [(1, 7), (3, 9)]);
        c.truncate_from_start(Offset(9));
        assert_eq!(pairs(&c), [(3, 9)]);
        c.truncate_from_start(Offset(30));
        assert_eq!(pairs(&c), [(3, 30)]);
    }

    #[test]
    fn checkpoint_text_is_kafkas_format() {
        let c = cache(&[(0, 0), (2, 17)]);
        assert_eq!(c.to_checkpoint(), "0\n2\n0 0\n2 17\n");
        assert_eq!(LeaderEpochCache::from_checkpoint(&c.to_checkpoint()), Ok(c));
        assert!(LeaderEpochCache::from_checkpoint("0\n1\n0\n").is_err());
        assert!(LeaderEpochCache::from_checkpoint("0\n2\n0 0\n").is_err());
        let sanitized = LeaderEpochCache::from_checkpoint("0\n3\n0 0\n2 10\n1 12\n").unwrap();
        assert_eq!(pairs(&sanitized), [(0, 0), (2, 10)]);
    }

    proptest! {
        /// Whatever is assigned and truncated, entries stay strictly increasing in epoch and
        /// non-decreasing in start offset, and the checkpoint round-trips.
        #[test]
        fn entries_stay_monotonic(ops in proptest::collection::vec((0u8..3, 0i32..20, 0i64..100), 0..40)) {
            let mut c = LeaderEpochCache::default();
            for (op, e, o) in ops {
                match op {
                    0 => { c.assign(Epoch(e), Offset(o)); }
                    1 => c.truncate_from_end(Offset(o)),
                    _ => c.truncate_from_start(Offset(o)),
                }
                for w in c.entries().windows(2) {
                    prop_assert!(w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset);
                }
            }
            prop_assert_eq!(LeaderEpochCache::from_checkpoint(&c.to_checkpoint()), Ok(c));
        }
    }
}
