//! When a TCP sender retransmits a segment nobody acknowledged, as Linux schedules it.
//!
//! A segment that reaches no one (its link is cut, or the receiving machine has no power)
//! is sent again when the retransmission timer fires: first after the RTO, then after
//! twice that, and so on, each wait capped at `TCP_RTO_MAX`. A connection that had nothing
//! unacknowledged never retransmits, so it learns nothing until its application sends again
//! or gives up.
//!
//! The initial RTO of an established connection is `TCP_RTO_MIN` (200 ms): Linux's RTO is
//! the smoothed RTT plus a variance term floored at 200 ms, and the RTTs simulated here are
//! a few milliseconds. A SYN starts from `TCP_TIMEOUT_INIT` (1 s). Giving up
//! (`tcp_retries2`, ~15 min; `tcp_syn_retries`, ~2 min) is not modelled: every
//! application timeout here (at most `request.timeout.ms`, 30 s) fires long before.

use crate::os::clock::SimTime;
use std::time::Duration;

/// A retransmission timer's first wait and its cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

/// Segments of an established connection (`TCP_RTO_MIN`, `TCP_RTO_MAX`).
pub const DATA: Backoff = Backoff {
    initial: Duration::from_millis(200),
    max: Duration::from_secs(120),
};

/// A connection request (`TCP_TIMEOUT_INIT`, `TCP_RTO_MAX`).
pub const SYN: Backoff = Backoff {
    initial: Duration::from_secs(1),
    max: Duration::from_secs(120),
};

impl Backoff {
    /// The first retransmission, of a segment first sent at `sent`, at or after `not_before`.
    pub fn next_at_or_after(self, sent: SimTime, not_before: SimTime) -> SimTime {
        let mut wait = self.initial;
        let mut at = sent + wait;
        while at < not_before {
            wait = (wait * 2).min(self.max);
            at += wait;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> SimTime {
        SimTime::from_millis(ms)
    }

    #[test]
    fn data_retransmits_at_200_600_1400_3000_ms_after_the_send() {
        let sent = ms(1_000);
        let times: Vec<u64> = [0, 1_201, 1_601, 2_401, 3_999]
            .iter()
            .map(|&t| DATA.next_at_or_after(sent, ms(t)).since_start().as_millis() as u64)
            .collect();
        assert_eq!(times, [1_200, 1_600, 2_400, 4_000, 4_000]);
    }

    #[test]
    fn a_timer_that_fires_exactly_when_the_link_opens_fires_then() {
        assert_eq!(DATA.next_at_or_after(ms(0), ms(600)), ms(600));
    }

    #[test]
    fn waits_stop_doubling_at_the_cap() {
        // 200 ms doubled ten times is 204.8 s; the eleventh wait is capped at 120 s.
        let sum_of_ten: u64 = (0..10).map(|i| 200u64 << i).sum();
        let tenth = ms(sum_of_ten);
        assert_eq!(
            DATA.next_at_or_after(ms(0), tenth + Duration::from_millis(1)),
            tenth + Duration::from_secs(120)
        );
        assert_eq!(
            DATA.next_at_or_after(ms(0), tenth + Duration::from_secs(121)),
            tenth + Duration::from_secs(240)
        );
    }

    #[test]
    fn a_syn_starts_from_one_second() {
        assert_eq!(SYN.next_at_or_after(ms(0), ms(1)), ms(1_000));
        assert_eq!(SYN.next_at_or_after(ms(0), ms(1_001)), ms(3_000));
    }
}
