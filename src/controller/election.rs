//! Leader election: who may lead a partition whose leader is gone.
//!
//! Kafka's rule: the first replica, in assignment order, that is both in the ISR and
//! live (clean: it has every committed message). If no ISR member is live and
//! `unclean.leader.election.enable` is true, the first live replica at all (unclean:
//! the messages it lacks are gone); otherwise the partition stays offline.

use crate::types::BrokerId;

/// The outcome of one election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    Clean(BrokerId),
    Unclean(BrokerId),
    Offline,
}

impl Election {
    /// The elected leader, if any.
    pub fn leader(self) -> Option<BrokerId> {
        match self {
            Election::Clean(leader) | Election::Unclean(leader) => Some(leader),
            Election::Offline => None,
        }
    }

    /// The word the trace uses for this kind of election.
    pub fn kind(self) -> &'static str {
        match self {
            Election::Clean(_) => "clean",
            Election::Unclean(_) => "unclean",
            Election::Offline => "offline",
        }
    }
}

/// Elect a leader among `replicas` (assignment order), given the ISR, which brokers are
/// live (registered, unfenced, not shutting down) and whether unclean election is on.
pub fn elect(
    replicas: &[BrokerId],
    isr: &[BrokerId],
    is_live: impl Fn(BrokerId) -> bool,
    unclean_leader_election_enable: bool,
) -> Election {
    if let Some(&leader) = replicas
        .iter()
        .find(|&&replica| isr.contains(&replica) && is_live(replica))
    {
        return Election::Clean(leader);
    }
    if unclean_leader_election_enable {
        if let Some(&leader) = replicas.iter().find(|&&replica| is_live(replica)) {
            return Election::Unclean(leader);
        }
    }
    Election::Offline
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(raw: &[u32]) -> Vec<BrokerId> {
        raw.iter().copied().map(BrokerId).collect()
    }

    fn live(raw: &'static [u32]) -> impl Fn(BrokerId) -> bool {
        move |b| raw.contains(&b.0)
    }

    #[test]
    fn clean_election_takes_the_first_live_isr_member_in_assignment_order() {
        // ISR order must not matter, assignment order does.
        let replicas = ids(&[3, 1, 2]);
        let isr = ids(&[1, 2, 3]);
        assert_eq!(
            elect(&replicas, &isr, live(&[1, 2, 3]), false),
            Election::Clean(BrokerId(3))
        );
        assert_eq!(
            elect(&replicas, &isr, live(&[1, 2]), false),
            Election::Clean(BrokerId(1))
        );
    }

    #[test]
    fn a_live_replica_outside_the_isr_is_not_a_clean_candidate() {
        let replicas = ids(&[1, 2, 3]);
        let isr = ids(&[1]);
        assert_eq!(
            elect(&replicas, &isr, live(&[2, 3]), false),
            Election::Offline
        );
    }

    #[test]
    fn unclean_election_takes_the_first_live_replica_only_when_enabled() {
        let replicas = ids(&[1, 2, 3]);
        let isr = ids(&[1]);
        assert_eq!(
            elect(&replicas, &isr, live(&[3, 2]), true),
            Election::Unclean(BrokerId(2))
        );
        assert_eq!(elect(&replicas, &isr, live(&[]), true), Election::Offline);
    }

    #[test]
    fn clean_is_preferred_over_unclean_even_when_unclean_is_enabled() {
        let replicas = ids(&[1, 2, 3]);
        let isr = ids(&[3]);
        assert_eq!(
            elect(&replicas, &isr, live(&[1, 2, 3]), true),
            Election::Clean(BrokerId(3))
        );
    }
}
