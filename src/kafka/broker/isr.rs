//! In-sync replica rules, as a leader applies them (Kafka's `Partition.scala`).
//!
//! - A follower is *caught up* when a fetch of it reaches the leader's LEO, either the
//!   LEO at this fetch or the LEO the leader had at the follower's previous fetch (so that
//!   a steady stream of appends does not make a keeping-up follower look behind).
//! - Shrink: a follower not at the leader's LEO whose last caught-up time is older than
//!   `replica.lag.time.max.ms` leaves the ISR. The leader checks every half of that.
//! - Expand: a replica outside the ISR rejoins when its LEO reaches the HW and the start
//!   of the leader's current epoch (its fetches are in this leader epoch).
//! - The leader proposes ISR changes to the controller (AlterPartition); one at a time.

use crate::kafka::types::Incarnation;
use crate::os::clock::SimTime;
use crate::types::{BrokerId, Offset};
use std::time::Duration;

/// What the leader knows of one follower, from its fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's LEO: its last fetch offset. `Offset::NONE` until it fetches from
    /// this leader.
    pub leo: Offset,
    pub last_caught_up: SimTime,
    /// The leader's LEO when the follower last fetched, and when that was.
    pub last_fetch_leader_leo: Offset,
    pub last_fetch: SimTime,
    /// The broker epoch its last fetch carried (KIP-903, 3.5), passed on in
    /// AlterPartition so the controller can tell its process from a later one.
    pub broker_epoch: Option<Incarnation>,
}

impl FollowerState {
    /// A new leader's view of a follower: LEO unknown. An ISR member gets a full lag
    /// period to fetch before it can be removed; others count as never caught up.
    pub fn new_leader(in_isr: bool, now: SimTime) -> FollowerState {
        FollowerState {
            leo: Offset::NONE,
            last_caught_up: if in_isr { now } else { SimTime::ZERO },
            last_fetch_leader_leo: Offset::NONE,
            last_fetch: SimTime::ZERO,
            broker_epoch: None,
        }
    }

    /// Record a fetch at `fetch_offset` from the process of `broker_epoch` arriving at
    /// `now` while the leader's LEO is `leader_leo` (Kafka's `Replica.updateFetchState`).
    pub fn on_fetch(
        &mut self,
        fetch_offset: Offset,
        broker_epoch: Option<Incarnation>,
        leader_leo: Offset,
        now: SimTime,
    ) {
        if fetch_offset >= leader_leo {
            self.last_caught_up = self.last_caught_up.max(now);
        } else if fetch_offset >= self.last_fetch_leader_leo {
            self.last_caught_up = self.last_caught_up.max(self.last_fetch);
        }
        self.leo = fetch_offset;
        self.last_fetch_leader_leo = leader_leo;
        self.last_fetch = now;
        self.broker_epoch = broker_epoch;
    }

    /// Kafka's `isCaughtUp`: at the leader's LEO, or caught up within the lag limit.
    pub fn is_caught_up(&self, leader_leo: Offset, now: SimTime, lag_time_max: Duration) -> bool {
        self.leo == leader_leo || now - self.last_caught_up <= lag_time_max
    }
}

/// The ISR to propose after removing lagging followers, or `None` if all are in sync.
/// The leader never removes itself.
pub fn shrink_proposal<'a>(
    isr: &[BrokerId],
    leader: BrokerId,
    followers: impl Fn(BrokerId) -> Option<&'a FollowerState>,
    leader_leo: Offset,
    now: SimTime,
    lag_time_max: Duration,
) -> Option<Vec<BrokerId>> {
    let keep: Vec<BrokerId> = isr
        .iter()
        .copied()
        .filter(|&id| {
            id == leader
                || followers(id).is_some_and(|f| f.is_caught_up(leader_leo, now, lag_time_max))
        })
        .collect();
    (keep.len() < isr.len()).then_some(keep)
}

/// Kafka's `isFollowerInSync`: a replica may rejoin when it has everything below the HW
/// and has fetched past the start of the current leader epoch.
pub fn can_join(follower_leo: Offset, hw: Offset, leader_epoch_start_offset: Offset) -> bool {
    follower_leo >= hw && follower_leo >= leader_epoch_start_offset
}

/// The ISR to propose when `replica` rejoins, in replica-assignment order, or `None` if it
/// is already in or may not rejoin yet.
pub fn expand_proposal(
    isr: &[BrokerId],
    replicas: &[BrokerId],
    replica: BrokerId,
    follower_leo: Offset,
    hw: Offset,
    leader_epoch_start_offset: Offset,
) -> Option<Vec<BrokerId>> {
    if isr.contains(&replica)
        || !replicas.contains(&replica)
        || !can_join(follower_leo, hw, leader_epoch_start_offset)
    {
        return None;
    }
    Some(
        replicas
            .iter()
            .copied()
            .filter(|id| *id == replica || isr.contains(id))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: Duration = Duration::from_millis(10_000);

    fn at(millis: u64) -> SimTime {
        SimTime::from_millis(millis)
    }

    #[test]
    fn fetch_at_leader_leo_is_caught_up_now() {
        let mut f = FollowerState::new_leader(true, at(0));
        f.on_fetch(Offset(5), None, Offset(5), at(1_000));
        assert_eq!(f.last_caught_up, at(1_000));
        assert_eq!(f.leo, Offset(5));
    }

    /// A follower that keeps fetching while the leader keeps appending is never at the
    /// leader's current LEO, but reaches the LEO of its previous fetch: it stays in sync.
    #[test]
    fn fetch_reaching_previous_leader_leo_counts_as_caught_up_then() {
        let mut f = FollowerState::new_leader(true, at(0));
        f.on_fetch(Offset(5), None, Offset(8), at(1_000));
        f.on_fetch(Offset(8), None, Offset(12), at(2_000));
        assert_eq!(f.last_caught_up, at(1_000));
        f.on_fetch(Offset(11), None, Offset(15), at(3_000));
        assert_eq!(
            f.last_caught_up,
            at(1_000),
            "11 < 12: not caught up to the previous LEO"
        );
    }

    #[test]
    fn lagging_follower_is_shrunk_after_lag_time() {
        let leader = BrokerId(1);
        let isr = [BrokerId(1), BrokerId(2), BrokerId(3)];
        let mut f2 = FollowerState::new_leader(true, at(0));
        f2.on_fetch(Offset(10), None, Offset(10), at(0));
        let f3 = FollowerState::new_leader(true, at(0));
        let get = |id: BrokerId| match id.0 {
            2 => Some(&f2),
            3 => Some(&f3),
            _ => None,
        };
        assert_eq!(
            shrink_proposal(&isr, leader, get, Offset(10), at(0) + LAG, LAG),
            None
        );
        let shrunk = shrink_proposal(&isr, leader, get, Offset(10), at(1) + LAG, LAG);
        assert_eq!(
            shrunk,
            Some(vec![BrokerId(1), BrokerId(2)]),
            "f2 is at the LEO"
        );
    }

    #[test]
    fn replica_rejoins_only_past_hw_and_epoch_start() {
        let isr = [BrokerId(1)];
        let replicas = [BrokerId(1), BrokerId(2), BrokerId(3)];
        assert_eq!(
            expand_proposal(
                &isr,
                &replicas,
                BrokerId(3),
                Offset(9),
                Offset(10),
                Offset(5)
            ),
            None
        );
        assert_eq!(
            expand_proposal(
                &isr,
                &replicas,
                BrokerId(3),
                Offset(10),
                Offset(10),
                Offset(12)
            ),
            None,
            "has not fetched into the current leader epoch"
        );
        assert_eq!(
            expand_proposal(
                &isr,
                &replicas,
                BrokerId(3),
                Offset(12),
                Offset(10),
                Offset(12)
            ),
            Some(vec![BrokerId(1), BrokerId(3)])
        );
        assert_eq!(
            expand_proposal(
                &replicas,
                &replicas,
                BrokerId(3),
                Offset(12),
                Offset(10),
                Offset(12)
            ),
            None
        );
    }
}
