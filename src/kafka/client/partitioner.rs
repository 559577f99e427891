//! Kafka's default partitioning: keyed records go to `toPositive(murmur2(key)) % partitions`
//! (byte-compatible with the Java client, so a key lands where a real Kafka producer would
//! put it); records without a key use the sticky partitioner (KIP-480), which keeps
//! filling one partition's batch and moves on only when a new batch would be started.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Kafka's `Utils.murmur2`: MurmurHash2, 32-bit, seed `0x9747b28c`, little-endian blocks.
/// Returned as the Java `int`'s bits.
pub fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        if tail.len() == 3 {
            h ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            h ^= u32::from(tail[1]) << 8;
        }
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on `MIN_VALUE`).
pub fn to_positive(hash: u32) -> u32 {
    hash & 0x7fff_ffff
}

/// The partition Kafka's default partitioner picks for a keyed record. Every partition
/// counts, available or not, exactly as in Kafka: a key's partition never moves.
/// `partitions` must be at least 1 (a topic always has a partition); 0 yields 0.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    to_positive(murmur2(key))
        .checked_rem(partitions)
        .unwrap_or(0)
}

/// The sticky partition for records without a key (Kafka 2.4's `StickyPartitionCache`).
#[derive(Debug)]
pub struct StickyPartitioner {
    partitions: u32,
    current: Option<u32>,
    rng: StdRng,
}

impl StickyPartitioner {
    pub fn new(partitions: u32, seed: u64) -> Self {
        StickyPartitioner {
            partitions: partitions.max(1),
            current: None,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The partition null-key records go to now; picks one on first use.
    /// `available` lists the partitions that have a leader (may be empty: then any).
    pub fn partition(&mut self, available: &[u32]) -> u32 {
        match self.current {
            Some(p) => p,
            None => self.choose(None, available),
        }
    }

    /// The sticky partition, if one was chosen.
    pub fn current(&self) -> Option<u32> {
        self.current
    }

    /// Kafka's `onNewBatch`: the record for `previous` would open a new batch, so move to
    /// another partition (a different one whenever there is a choice).
    pub fn on_new_batch(&mut self, previous: u32, available: &[u32]) -> u32 {
        if self.current != Some(previous) {
            // Someone already moved on since this record was partitioned.
            if let Some(p) = self.current {
                return p;
            }
        }
        self.choose(Some(previous), available)
    }

    fn choose(&mut self, previous: Option<u32>, available: &[u32]) -> u32 {
        let pick = if available.is_empty() {
            self.pick_excluding(previous, self.partitions, |i| i)
        } else {
            let n = available.len() as u32;
            self.pick_excluding(previous, n, |i| available[i as usize])
        };
        self.current = Some(pick);
        pick
    }

    /// A uniformly random candidate `map(i)`, `i < n`, other than `previous` when n > 1.
    fn pick_excluding(&mut self, previous: Option<u32>, n: u32, map: impl Fn(u32) -> u32) -> u32 {
        let candidates = (0..n)
            .map(&map)
            .filter(|&p| Some(p) != previous || n == 1)
            .count();
        let target = self.rng.random_range(0..candidates.max(1));
        (0..n)
            .map(map)
            .filter(|&p| Some(p) != previous || n == 1)
            .nth(target)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Apache Kafka's `UtilsTest.testMurmur2` vectors (Java ints): a mismatch would send
    /// keys to other partitions than a real Kafka producer does.
    #[test]
    fn murmur2_matches_kafka_utils_test() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input) as i32,
                expected,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN as u32), 0);
        assert_eq!(to_positive(-1i32 as u32), 0x7fff_ffff);
        assert_eq!(to_positive(10), 10);
    }

    #[test]
    fn keyed_partition_is_to_positive_modulo() {
        // "21" hashes to -973932308 = 0xc5f3b6ec; toPositive gives 0x45f3b6ec = 1173551340.
        assert_eq!(partition_for_key(b"21", 1_000), 1_173_551_340 % 1_000);
        assert_eq!(partition_for_key(b"21", 1), 0);
        assert_eq!(partition_for_key(b"21", 0), 0);
    }

    #[test]
    fn sticky_partition_stays_until_a_new_batch() {
        let mut sticky = StickyPartitioner::new(6, 7);
        let first = sticky.partition(&[]);
        for _ in 0..100 {
            assert_eq!(sticky.partition(&[]), first);
        }
        let second = sticky.on_new_batch(first, &[]);
        assert_ne!(second, first, "a new batch moves to another partition");
        assert_eq!(sticky.partition(&[]), second);
    }

    #[test]
    fn sticky_partitioner_uses_only_available_partitions() {
        let mut sticky = StickyPartitioner::new(6, 1);
        let mut p = sticky.partition(&[2, 4]);
        for _ in 0..50 {
            assert!(p == 2 || p == 4);
            let next = sticky.on_new_batch(p, &[2, 4]);
            assert_ne!(next, p);
            p = next;
        }
    }

    #[test]
    fn sticky_partitioner_with_one_partition_stays() {
        let mut sticky = StickyPartitioner::new(1, 3);
        assert_eq!(sticky.partition(&[]), 0);
        assert_eq!(sticky.on_new_batch(0, &[]), 0);
    }

    #[test]
    fn sticky_on_new_batch_for_a_stale_partition_keeps_the_current_one() {
        let mut sticky = StickyPartitioner::new(4, 9);
        let first = sticky.partition(&[]);
        let second = sticky.on_new_batch(first, &[]);
        assert_eq!(sticky.on_new_batch(first, &[]), second);
    }

    #[test]
    fn sticky_partitioner_is_deterministic_per_seed() {
        let walk = |seed| {
            let mut sticky = StickyPartitioner::new(8, seed);
            let mut p = sticky.partition(&[]);
            let mut seen = vec![p];
            for _ in 0..20 {
                p = sticky.on_new_batch(p, &[]);
                seen.push(p);
            }
            seen
        };
        assert_eq!(walk(5), walk(5));
        assert_ne!(walk(5), walk(6));
    }
}
