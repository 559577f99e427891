//! The harness: the world (hosts on a turmoil network, each broker with its disk), faults
//! fired at simulated times, the runner, seeds in parallel, the trace hash.

pub mod batch;
pub mod faults;
pub mod network;
pub mod retransmit;
pub mod runner;
pub mod system;
pub mod timeline;
pub mod trace;
pub mod world;

use siphasher::sip::SipHasher13;
use std::hash::Hasher;

/// A seed for one named part of a run (a disk, a producer), derived from the run's seed,
/// so that parts draw independent streams and adding one part does not shift the others.
pub fn derive_seed(seed: u64, label: &str) -> u64 {
    let mut hasher = SipHasher13::new_with_keys(seed, 0x6869_6768_7469_6465);
    hasher.write(label.as_bytes());
    hasher.finish()
}
