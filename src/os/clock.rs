//! The one simulated clock, and the one type for its instants.
//!
//! "Now" is the time the world published in a thread-local before the step it runs. Inside
//! a host that equals turmoil's clock for the host at every read: turmoil runs a host's
//! tasks at the time of the step, and tokio's timers have millisecond ticks, so broker,
//! producer, controller, disk, history and trace all see one clock. Reading the published
//! time instead of asking turmoil (a lookup of the current host and of its runtime's
//! clock) matters: it is read several times per message. Builds with debug assertions,
//! the tests among them, check the equality at every read. Without a world on the thread
//! (a bare turmoil test), hosts read turmoil's clock; tests of the disk alone set the
//! published time by hand. Several seeds on several threads each see their own.
//!
//! Durations are `std::time::Duration`; only instants are `SimTime`, so that an instant
//! and a timeout cannot be mixed up.

use std::cell::Cell;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// An instant of simulated time: nanoseconds since the run began. Eight bytes, not a
/// `Duration`'s sixteen: every history event carries one. The last instant, 584 years in,
/// stands for "never".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

impl SimTime {
    /// The start of the run.
    pub const ZERO: SimTime = SimTime(0);

    /// The last instant: what any instant past it saturates to.
    pub const LAST: SimTime = SimTime(u64::MAX);

    pub const fn from_millis(millis: u64) -> SimTime {
        SimTime(millis.saturating_mul(1_000_000))
    }

    /// The instant `elapsed` after the run began.
    pub const fn after_start(elapsed: Duration) -> SimTime {
        SimTime::ZERO.saturating_add(elapsed)
    }

    /// The time since the run began.
    pub const fn since_start(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// The instant as a Kafka timestamp: RecordBatch timestamps are `i64` milliseconds,
    /// and this simulation stamps CreateTime (and compares record ages) with the
    /// simulated clock. The last instant is Kafka's "never", `Long.MAX_VALUE`.
    pub fn timestamp_ms(self) -> i64 {
        if self == SimTime::LAST {
            return i64::MAX;
        }
        (self.0 / 1_000_000) as i64
    }

    /// The time from a record timestamp to this instant, zero if the timestamp is later.
    pub fn since_timestamp_ms(self, timestamp_ms: i64) -> Duration {
        let millis = self.timestamp_ms().saturating_sub(timestamp_ms);
        Duration::from_millis(u64::try_from(millis).unwrap_or(0))
    }

    /// `self + duration`, at most the last representable instant: Kafka's "never"
    /// (`Long.MAX_VALUE` ms) added to any instant stays "never".
    pub const fn saturating_add(self, duration: Duration) -> SimTime {
        let nanos = duration.as_nanos();
        if nanos > u64::MAX as u128 {
            return SimTime::LAST;
        }
        SimTime(self.0.saturating_add(nanos as u64))
    }
}

impl Add<Duration> for SimTime {
    type Output = SimTime;

    /// Saturating, like [`SimTime::saturating_add`].
    fn add(self, duration: Duration) -> SimTime {
        self.saturating_add(duration)
    }
}

impl AddAssign<Duration> for SimTime {
    fn add_assign(&mut self, duration: Duration) {
        *self = *self + duration;
    }
}

impl Sub<SimTime> for SimTime {
    type Output = Duration;

    /// The time from `earlier` to `self`, zero if `earlier` is later (like tokio's
    /// `Instant`).
    fn sub(self, earlier: SimTime) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let elapsed = self.since_start();
        write!(f, "{}.{:03}s", elapsed.as_secs(), elapsed.subsec_millis())
    }
}

thread_local! {
    static NOW: Cell<SimTime> = const { Cell::new(SimTime::ZERO) };
    /// Whether a world publishes the time on this thread at every step.
    static WORLD: Cell<bool> = const { Cell::new(false) };
}

/// The current simulated time of this thread's simulation.
pub fn now() -> SimTime {
    let published = NOW.with(Cell::get);
    if WORLD.with(Cell::get) {
        debug_assert_eq!(
            turmoil::sim_elapsed().map_or(published, SimTime::after_start),
            published,
            "a host's clock left the time the world published"
        );
        return published;
    }
    turmoil::sim_elapsed().map_or(published, SimTime::after_start)
}

/// Publish the current simulated time; only the world (and tests) call this.
pub fn set(now: SimTime) {
    NOW.with(|cell| cell.set(now));
}

/// While held, this thread's world publishes the time at every step, and hosts read it
/// (see the module docs). Dropped with the world, so a later bare turmoil test on the same
/// thread reads turmoil's clock again.
pub struct Published(());

/// Start publishing for this thread's world.
pub fn publish() -> Published {
    WORLD.with(|world| world.set(true));
    Published(())
}

impl Drop for Published {
    fn drop(&mut self) {
        WORLD.with(|world| world.set(false));
    }
}

/// Inside a host: sleep until the simulated clock reads `at` (at once if it has passed).
/// The host's tokio clock runs with the published one, so the wait is the difference.
pub async fn sleep_until(at: SimTime) {
    tokio::time::sleep(at - now()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_saturate_instead_of_overflowing() {
        let never = Duration::from_millis(i64::MAX as u64);
        let late = SimTime::from_millis(5_000).saturating_add(never);
        assert!(late > SimTime::from_millis(5_000));
        let last = SimTime::after_start(Duration::MAX);
        assert_eq!(last, SimTime::LAST);
        assert_eq!(last + never, last, "saturates at the last instant");
        assert_eq!(
            SimTime::from_millis(3) - SimTime::from_millis(5),
            Duration::ZERO
        );
        assert_eq!(
            SimTime::from_millis(5) - SimTime::from_millis(3),
            Duration::from_millis(2)
        );
        assert_eq!(late.timestamp_ms(), i64::MAX);
        assert_eq!(SimTime::from_millis(12_345).to_string(), "12.345s");
    }
}
