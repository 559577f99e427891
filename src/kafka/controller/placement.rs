//! Replica placement, deterministic and documented so that scenarios can name brokers.

use crate::types::BrokerId;

/// Partition `partition` of a topic with `replication_factor` replicas on `brokers`
/// brokers lives on brokers `((partition + i) mod brokers) + 1` for `i` in
/// `0..replication_factor`, in that order; the first is its first leader.
/// Empty when there are no brokers (the scenario validator rejects that earlier).
pub fn placement(partition: u32, brokers: u32, replication_factor: u32) -> Vec<BrokerId> {
    if brokers == 0 {
        return Vec::new();
    }
    let partition = partition % brokers;
    (0..replication_factor.min(brokers))
        .map(|i| BrokerId((partition + i) % brokers + 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_scenarios_md_rule() {
        // orders/0 with RF 3 on 3 brokers: broker-1 leads, broker-2 and broker-3 follow.
        assert_eq!(
            placement(0, 3, 3),
            vec![BrokerId(1), BrokerId(2), BrokerId(3)]
        );
        assert_eq!(
            placement(1, 3, 3),
            vec![BrokerId(2), BrokerId(3), BrokerId(1)]
        );
        assert_eq!(placement(4, 5, 2), vec![BrokerId(5), BrokerId(1)]);
        assert_eq!(placement(7, 3, 1), vec![BrokerId(2)]);
    }

    #[test]
    fn never_places_two_replicas_on_one_broker() {
        for brokers in 1..8 {
            for rf in 1..=brokers {
                for p in 0..20 {
                    let mut replicas = placement(p, brokers, rf);
                    assert_eq!(replicas.len() as u32, rf);
                    replicas.sort();
                    replicas.dedup();
                    assert_eq!(replicas.len() as u32, rf);
                }
            }
        }
    }
}
