//! The high watermark: the offset below which every in-sync replica has the data.
//!
//! A leader's HW is the minimum log end offset over its (maximal) ISR, and it never moves
//! back: a replica whose LEO is not yet known (-1 just after an election) holds the HW
//! where it is instead of lowering it. A follower's HW is the leader's HW it last learnt,
//! capped by its own LEO — one fetch round behind the leader (the lag KIP-101 is about).

use crate::types::Offset;

/// The HW a leader may move to, from the LEOs of the ISR (the leader's own included).
/// `None` for an empty ISR, which a leader never has.
pub fn high_watermark(isr_leos: impl IntoIterator<Item = Offset>) -> Option<Offset> {
    isr_leos.into_iter().min()
}

/// The leader's new HW: `candidate` if it moves forward, otherwise `current`. A leader's HW
/// never decreases (Kafka's `maybeIncrementLeaderHW`), and never passes its own LEO.
pub fn advance_leader_hw(current: Offset, candidate: Offset, leader_leo: Offset) -> Offset {
    let hw = current.max(candidate);
    debug_assert!(
        hw <= leader_leo,
        "leader HW {hw} above its LEO {leader_leo}"
    );
    hw
}

/// Kafka's strict min ISR (since 3.7, KAFKA-15583): a leader whose committed ISR is
/// smaller than `min.insync.replicas` (capped at the replica count) does not move its HW.
/// Before 3.7 the HW followed a lone leader's LEO, so a consumer could read, and a later
/// election roll back, records no other replica had. A pending expansion does not count.
pub fn under_min_isr(committed_isr: usize, min_insync_replicas: u32, replicas: usize) -> bool {
    committed_isr < (min_insync_replicas as usize).min(replicas)
}

/// A follower's HW after a fetch response: the leader's HW, capped by what it has itself.
pub fn follower_hw(leader_hw: Offset, own_leo: Offset) -> Offset {
    leader_hw.min(own_leo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hw_is_the_slowest_in_sync_replica() {
        let isr = [Offset(10), Offset(7), Offset(9)];
        assert_eq!(high_watermark(isr), Some(Offset(7)));
        assert_eq!(high_watermark(std::iter::empty()), None);
    }

    /// Guards against a new leader lowering its HW to a follower's unknown LEO (-1).
    #[test]
    fn unknown_follower_leo_does_not_lower_leader_hw() {
        let candidate = high_watermark([Offset(10), Offset::NONE]).unwrap_or(Offset::NONE);
        assert_eq!(
            advance_leader_hw(Offset(8), candidate, Offset(10)),
            Offset(8)
        );
    }

    #[test]
    fn under_min_isr_counts_the_committed_isr_against_min_isr_capped_at_the_replicas() {
        assert!(under_min_isr(1, 2, 3), "the leader alone, min ISR 2");
        assert!(!under_min_isr(2, 2, 3));
        assert!(
            !under_min_isr(1, 1, 3),
            "min ISR 1: a lone leader moves its HW"
        );
        assert!(
            !under_min_isr(2, 3, 2),
            "min ISR above the replica count is capped"
        );
        assert!(under_min_isr(1, 3, 2));
    }

    #[test]
    fn follower_hw_is_capped_by_its_leo() {
        assert_eq!(follower_hw(Offset(10), Offset(4)), Offset(4));
        assert_eq!(follower_hw(Offset(3), Offset(4)), Offset(3));
    }

    proptest! {
        /// A leader's HW is monotone and never above the min ISR LEO it was given, unless it
        /// was already there.
        #[test]
        fn leader_hw_never_decreases(leos in proptest::collection::vec(0i64..100, 1..6), start in 0i64..100) {
            let leader_leo = Offset(leos.iter().copied().max().unwrap_or(0).max(start));
            let current = Offset(start);
            let candidate = high_watermark(leos.iter().map(|&l| Offset(l))).unwrap_or(Offset::NONE);
            let hw = advance_leader_hw(current, candidate, leader_leo);
            prop_assert!(hw >= current);
            prop_assert!(hw == current || hw == candidate);
        }
    }
}
