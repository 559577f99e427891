//! Reordering: did a producer's messages land in a partition in the order it sent them?
//!
//! Definition. For each producer P and partition T, take P's acked sends whose ack named
//! T and that have a copy in T in the final read; order them by P's send sequence (the
//! order of P's `send` calls); let `o_i` be the position of the `i`-th in T: the offset
//! its acknowledgement named when a copy is there (a retry that landed late and was the
//! one acknowledged is where the producer was told it is, even if an earlier copy of it
//! survived), else the offset of its first copy in T. `reordered` is the number of
//! inversions: pairs `i < j` with `o_i > o_j`. A batch
//! of `m` messages retried behind `k` later ones thus counts `m * k`: the number of pairs a
//! consumer sees in the wrong order. Examples are descents (adjacent pairs in send order
//! that are inverted); every inverted sequence has one.
//!
//! Lost sends and sends moved to another partition are not in the sequence: they are
//! counted as lost and moved.

use crate::history::MessageId;
use crate::types::Offset;
use std::collections::BTreeMap;

/// One acked, delivered send of a reorder group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    pub id: MessageId,
    /// Partition index in the final state.
    pub part: usize,
    pub acked: Offset,
    /// Its position in the final read: the acknowledged offset when a copy is there,
    /// else its first copy's.
    pub now: Offset,
}

/// Sends grouped by producer and partition; pushed in id order, so each group is in send
/// order.
#[derive(Default)]
pub struct Groups {
    groups: BTreeMap<(u32, usize), Vec<Placed>>,
}

impl Groups {
    pub fn push(&mut self, id: MessageId, part: usize, acked: Offset, now: Offset) {
        let group = self.groups.entry((id.producer, part)).or_default();
        debug_assert!(
            group.last().map(|p| p.id < id).unwrap_or(true),
            "pushed out of send order"
        );
        group.push(Placed {
            id,
            part,
            acked,
            now,
        });
    }

    /// Total inversions over all groups; `descent` is called for each adjacent inverted pair
    /// (earlier send first), in group order, for examples.
    pub fn count(&self, descent: &mut dyn FnMut(&Placed, &Placed)) -> u64 {
        let mut total = 0;
        let mut scratch = Vec::new();
        for group in self.groups.values() {
            for pair in group.windows(2) {
                if pair[0].now > pair[1].now {
                    descent(&pair[0], &pair[1]);
                }
            }
            scratch.clear();
            scratch.extend(group.iter().map(|p| p.now.0));
            total += inversions(&mut scratch);
        }
        total
    }
}

impl Groups {
    /// Sends placed after some later send of their group: O(n), from the back, against the
    /// smallest offset of the sends after it.
    pub fn out_of_order(&self) -> u64 {
        self.groups
            .values()
            .map(|group| {
                let mut smallest_after = Offset(i64::MAX);
                let mut overtaken = 0;
                for placed in group.iter().rev() {
                    overtaken += u64::from(placed.now > smallest_after);
                    smallest_after = smallest_after.min(placed.now);
                }
                overtaken
            })
            .sum()
    }
}

/// Pairs `i < j` with `values[i] > values[j]`, by merge sort: O(n log n). Sorts `values`.
pub fn inversions(values: &mut [i64]) -> u64 {
    let mut buffer = vec![0; values.len()];
    let mut total = 0;
    let mut width = 1;
    while width < values.len() {
        for start in (0..values.len()).step_by(2 * width) {
            let mid = (start + width).min(values.len());
            let end = (start + 2 * width).min(values.len());
            total += merge(
                &values[start..mid],
                &values[mid..end],
                &mut buffer[start..end],
            );
        }
        values.copy_from_slice(&buffer);
        width *= 2;
    }
    total
}

/// Merge two sorted runs into `out`, returning the inversions between them.
fn merge(left: &[i64], right: &[i64], out: &mut [i64]) -> u64 {
    let (mut i, mut j, mut inverted) = (0, 0, 0u64);
    for slot in out.iter_mut() {
        if j == right.len() || (i < left.len() && left[i] <= right[j]) {
            *slot = left[i];
            i += 1;
        } else {
            // right[j] is smaller than every remaining left value.
            inverted += (left.len() - i) as u64;
            *slot = right[j];
            j += 1;
        }
    }
    inverted
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brute_force(values: &[i64]) -> u64 {
        let mut n = 0;
        for i in 0..values.len() {
            for j in i + 1..values.len() {
                n += u64::from(values[i] > values[j]);
            }
        }
        n
    }

    fn group(offsets: &[i64]) -> Groups {
        let mut groups = Groups::default();
        for (seq, &offset) in offsets.iter().enumerate() {
            let id = MessageId {
                producer: 1,
                seq: seq as u32,
            };
            groups.push(id, 0, Offset(offset), Offset(offset));
        }
        groups
    }

    #[test]
    fn out_of_order_counts_the_sends_a_later_send_overtook() {
        // A batch of 2 retried behind 3 later sends: 6 inverted pairs, 2 sends out of order.
        let groups = group(&[13, 14, 10, 11, 12]);
        assert_eq!(groups.count(&mut |_, _| {}), 6);
        assert_eq!(groups.out_of_order(), 2);
        assert_eq!(group(&[1, 2, 3]).out_of_order(), 0);
        assert_eq!(group(&[3, 2, 1]).out_of_order(), 2);
    }

    proptest! {
        #[test]
        fn out_of_order_matches_brute_force(values in proptest::collection::vec(0i64..50, 0..100)) {
            let expected = (0..values.len())
                .filter(|&i| values[i + 1..].iter().any(|&later| later < values[i]))
                .count() as u64;
            prop_assert_eq!(group(&values).out_of_order(), expected);
        }
    }

    #[test]
    fn a_batch_retried_behind_later_sends_counts_each_inverted_pair() {
        // Sends 0..4; sends 0 and 1 (one batch) land after sends 2, 3, 4: 2 * 3 pairs.
        assert_eq!(inversions(&mut [13, 14, 10, 11, 12]), 6);
        assert_eq!(inversions(&mut [1, 2, 3]), 0);
        assert_eq!(inversions(&mut []), 0);
    }

    proptest! {
        #[test]
        fn merge_count_matches_brute_force(values in proptest::collection::vec(-50i64..50, 0..200)) {
            let expected = brute_force(&values);
            let mut sorted = values.clone();
            prop_assert_eq!(inversions(&mut sorted), expected);
            prop_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
