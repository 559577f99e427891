//! Leader election: who may lead a partition whose leader is gone, and KIP-966's
//! eligible leader replicas (ELR), the replicas that may lead when the ISR is empty.
//!
//! Kafka's rule: the first replica, in assignment order, that is both in the ISR and
//! live (clean: it has every committed message). With ELR (Kafka 4.1's default), when
//! the ISR is empty, the first live ELR member (clean too: it left the ISR while the
//! high watermark could not move, so it has every committed message). With ISR and ELR
//! both empty, the last known leader (the leader when the ISR emptied) once it is live
//! again, whatever `unclean.leader.election.enable` says: unclean, since it may be back
//! from an unclean shutdown (Kafka 4.1's `canElectLastKnownLeader`, always on). Then, if
//! `unclean.leader.election.enable` is true, the first live replica at all (unclean: the
//! messages it lacks are gone); otherwise the partition stays offline.
//!
//! The ELR is kept only while the ISR is below `min.insync.replicas`, the state in which
//! strict min ISR (Kafka 3.7) holds the high watermark: a replica that leaves the ISR then
//! has every committed message and stays eligible, until it restarts without a clean
//! shutdown (its unflushed log may be gone) or the ISR is back to min ISR
//! (`PartitionChangeBuilder.maybePopulateTargetElr`).

use crate::types::BrokerId;

/// The outcome of one election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    Clean(BrokerId),
    /// Clean, from the ELR: the ISR was empty.
    Eligible(BrokerId),
    /// Unclean: ISR and ELR were empty, and the last leader came back.
    LastKnownLeader(BrokerId),
    Unclean(BrokerId),
    Offline,
}

impl Election {
    /// The elected leader, if any.
    pub fn leader(self) -> Option<BrokerId> {
        match self {
            Election::Clean(leader)
            | Election::Eligible(leader)
            | Election::LastKnownLeader(leader)
            | Election::Unclean(leader) => Some(leader),
            Election::Offline => None,
        }
    }

    /// The word the trace uses for this kind of election.
    pub fn kind(self) -> &'static str {
        match self {
            Election::Clean(_) => "clean",
            Election::Eligible(_) => "eligible",
            Election::LastKnownLeader(_) => "last-known-leader",
            Election::Unclean(_) => "unclean",
            Election::Offline => "offline",
        }
    }
}

/// Who may lead a partition besides its ISR (KIP-966; both empty without it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Eligible<'a> {
    pub elr: &'a [BrokerId],
    pub last_known_leader: Option<BrokerId>,
}

/// Elect a leader among `replicas` (assignment order), given the ISR, the ELR and last
/// known leader, which brokers are live (registered, unfenced, not shutting down) and
/// whether unclean election is on.
pub fn elect(
    replicas: &[BrokerId],
    isr: &[BrokerId],
    eligible: Eligible<'_>,
    is_live: impl Fn(BrokerId) -> bool,
    unclean_leader_election_enable: bool,
) -> Election {
    let elr = eligible.elr;
    if let Some(&leader) = replicas
        .iter()
        .find(|&&replica| isr.contains(&replica) && is_live(replica))
    {
        return Election::Clean(leader);
    }
    if isr.is_empty() {
        if let Some(&leader) = replicas
            .iter()
            .find(|&&replica| elr.contains(&replica) && is_live(replica))
        {
            return Election::Eligible(leader);
        }
        if elr.is_empty() {
            if let Some(leader) = eligible.last_known_leader.filter(|&l| is_live(l)) {
                return Election::LastKnownLeader(leader);
            }
        }
    }
    if unclean_leader_election_enable {
        if let Some(&leader) = replicas.iter().find(|&&replica| is_live(replica)) {
            return Election::Unclean(leader);
        }
    }
    Election::Offline
}

/// The ELR after the ISR goes from `isr` to `target_isr`: empty while the target ISR has
/// at least `min_insync_replicas` members; otherwise the old ELR and the old ISR members,
/// less the target ISR and the replicas that restarted without a clean shutdown, in
/// assignment order.
pub fn target_elr(
    replicas: &[BrokerId],
    isr: &[BrokerId],
    elr: &[BrokerId],
    target_isr: &[BrokerId],
    min_insync_replicas: u32,
    unclean_shutdown: Option<BrokerId>,
) -> Vec<BrokerId> {
    if target_isr.len() >= min_insync_replicas as usize {
        return Vec::new();
    }
    replicas
        .iter()
        .copied()
        .filter(|r| isr.contains(r) || elr.contains(r))
        .filter(|r| !target_isr.contains(r) && Some(*r) != unclean_shutdown)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(raw: &[u32]) -> Vec<BrokerId> {
        raw.iter().copied().map(BrokerId).collect()
    }

    fn none() -> Eligible<'static> {
        Eligible::default()
    }

    fn elr_of(elr: &[BrokerId]) -> Eligible<'_> {
        Eligible {
            elr,
            last_known_leader: None,
        }
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
            elect(&replicas, &isr, none(), live(&[1, 2, 3]), false),
            Election::Clean(BrokerId(3))
        );
        assert_eq!(
            elect(&replicas, &isr, none(), live(&[1, 2]), false),
            Election::Clean(BrokerId(1))
        );
    }

    #[test]
    fn a_live_replica_outside_the_isr_is_not_a_clean_candidate() {
        let replicas = ids(&[1, 2, 3]);
        let isr = ids(&[1]);
        assert_eq!(
            elect(&replicas, &isr, none(), live(&[2, 3]), false),
            Election::Offline
        );
    }

    #[test]
    fn unclean_election_takes_the_first_live_replica_only_when_enabled() {
        let replicas = ids(&[1, 2, 3]);
        let isr = ids(&[1]);
        assert_eq!(
            elect(&replicas, &isr, none(), live(&[3, 2]), true),
            Election::Unclean(BrokerId(2))
        );
        assert_eq!(
            elect(&replicas, &isr, none(), live(&[]), true),
            Election::Offline
        );
    }

    #[test]
    fn an_empty_isr_elects_the_first_live_elr_member_before_any_unclean_candidate() {
        let replicas = ids(&[1, 2, 3]);
        let elr = ids(&[3, 2]);
        assert_eq!(
            elect(&replicas, &[], elr_of(&elr), live(&[1, 2, 3]), true),
            Election::Eligible(BrokerId(2)),
            "assignment order, not ELR order; ELR before unclean"
        );
        assert_eq!(
            elect(&replicas, &[], elr_of(&elr), live(&[1]), true),
            Election::Unclean(BrokerId(1))
        );
        assert_eq!(
            elect(&replicas, &[], elr_of(&elr), live(&[1]), false),
            Election::Offline
        );
        assert_eq!(
            elect(&replicas, &ids(&[1]), elr_of(&elr), live(&[2, 3]), false),
            Election::Offline,
            "the ELR is for an empty ISR only"
        );
    }

    #[test]
    fn with_isr_and_elr_empty_the_last_known_leader_returns_uncleanly_even_with_unclean_off() {
        let replicas = ids(&[1, 2, 3]);
        let eligible = Eligible {
            elr: &[],
            last_known_leader: Some(BrokerId(1)),
        };
        assert_eq!(
            elect(&replicas, &[], eligible, live(&[1, 2, 3]), false),
            Election::LastKnownLeader(BrokerId(1))
        );
        assert_eq!(
            elect(&replicas, &[], eligible, live(&[2, 3]), false),
            Election::Offline,
            "not while it is away"
        );
        assert_eq!(
            elect(&replicas, &[], eligible, live(&[2, 3]), true),
            Election::Unclean(BrokerId(2))
        );
        let with_elr = Eligible {
            elr: &[BrokerId(3)],
            last_known_leader: Some(BrokerId(1)),
        };
        assert_eq!(
            elect(&replicas, &[], with_elr, live(&[1]), false),
            Election::Offline,
            "an ELR, even an absent one, comes first"
        );
    }

    #[test]
    fn the_elr_holds_who_left_the_isr_below_min_isr() {
        let replicas = ids(&[1, 2, 3]);
        // Min ISR 2: the ISR shrinks from {1,2,3} to {1}; 2 and 3 become eligible.
        assert_eq!(
            target_elr(&replicas, &ids(&[1, 2, 3]), &[], &ids(&[1]), 2, None),
            ids(&[2, 3])
        );
        // At min ISR there is no ELR.
        assert!(target_elr(&replicas, &ids(&[1, 2, 3]), &[], &ids(&[1, 2]), 2, None).is_empty());
        // The last member leaves: it joins the ELR too.
        assert_eq!(
            target_elr(&replicas, &ids(&[1]), &ids(&[2, 3]), &[], 2, None),
            ids(&[1, 2, 3])
        );
        // An unclean restart takes a replica out.
        assert_eq!(
            target_elr(&replicas, &[], &ids(&[1, 2, 3]), &[], 2, Some(BrokerId(1))),
            ids(&[2, 3])
        );
        // An ELR member back in the ISR leaves the ELR.
        assert_eq!(
            target_elr(&replicas, &[], &ids(&[2, 3]), &ids(&[2]), 2, None),
            ids(&[3])
        );
    }

    /// The trace's `leader election` line says which rule chose the leader: five words,
    /// one per outcome.
    #[test]
    fn each_kind_of_election_has_its_own_word_in_the_trace() {
        let b = BrokerId(1);
        let kinds = [
            Election::Clean(b),
            Election::Eligible(b),
            Election::LastKnownLeader(b),
            Election::Unclean(b),
            Election::Offline,
        ]
        .map(Election::kind);
        let distinct: std::collections::BTreeSet<_> = kinds.iter().collect();
        assert_eq!(distinct.len(), kinds.len(), "{kinds:?}");
    }

    #[test]
    fn clean_is_preferred_over_unclean_even_when_unclean_is_enabled() {
        let replicas = ids(&[1, 2, 3]);
        let isr = ids(&[3]);
        assert_eq!(
            elect(&replicas, &isr, none(), live(&[1, 2, 3]), true),
            Election::Clean(BrokerId(3))
        );
    }
}
