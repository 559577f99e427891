//! The simulated world: hosts on a turmoil network, disks, faults, the runner.

pub mod clock;
pub mod disk;
