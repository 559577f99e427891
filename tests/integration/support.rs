//! Helpers more than one area's tests use.

use hightide::os::clock::{self, SimTime};

/// One step of a turmoil simulation, with the simulated time published first as the world
/// does (storage and the history read it from the clock). True once every client is done.
pub fn step(sim: &mut turmoil::Sim<'_>) -> turmoil::Result<bool> {
    clock::set(SimTime::after_start(sim.elapsed()));
    sim.step()
}
