//! Simulated time as seen from outside a host's runtime.
//!
//! A simulation runs on one thread, so the world publishes "now" in a thread-local before
//! every step; the disk (which lives outside the hosts) and the trace use it. Tests of
//! the disk alone set it by hand. Several seeds on several threads each see their own.

use std::cell::Cell;
use std::time::Duration;

thread_local! {
    static NOW: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// The current simulated time of this thread's simulation.
pub fn now() -> Duration {
    NOW.with(Cell::get)
}

/// Set the current simulated time; only the world (and tests) call this.
pub fn set(now: Duration) {
    NOW.with(|cell| cell.set(now));
}
