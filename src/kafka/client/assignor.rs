//! Kafka's `RangeAssignor` (`partition.assignment.strategy`'s default through 3.x, beside
//! cooperative-sticky since 3.0): in the classic group protocol the group's leader, a
//! consumer, computes every member's partitions from the members' subscriptions and
//! hands them to the coordinator in its SyncGroup. Per topic, the members subscribed to it
//! in member-id order each take a contiguous range of its partitions; the first
//! `partitions % members` take one more.

use crate::types::TopicPartition;
use std::collections::BTreeMap;

/// Every member's partitions. `subscriptions` maps each member id to the topics it
/// subscribes to; `partitions` gives each topic's partition count (topics it lacks, the
/// metadata does not know yet, and nobody gets). Members appear in the result even with
/// nothing to own.
pub fn range(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut assignment: BTreeMap<String, Vec<TopicPartition>> = subscriptions
        .keys()
        .map(|member| (member.clone(), Vec::new()))
        .collect();
    for (topic, &count) in partitions {
        // BTreeMap order: member ids sorted, as Kafka sorts them.
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member, _)| member)
            .collect();
        if members.is_empty() {
            continue;
        }
        let n = members.len() as u32;
        let (each, extra) = (count / n, count % n);
        for (i, member) in (0u32..).zip(members) {
            let start = i * each + i.min(extra);
            let length = each + u32::from(i < extra);
            let owned = assignment.entry(member.clone()).or_default();
            owned.extend((start..start + length).map(|p| TopicPartition::new(topic, p)));
        }
    }
    assignment
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn subscriptions(members: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        members
            .iter()
            .map(|(m, topics)| {
                (
                    m.to_string(),
                    topics.iter().map(|t| t.to_string()).collect(),
                )
            })
            .collect()
    }

    fn names(owned: &[TopicPartition]) -> Vec<String> {
        owned.iter().map(ToString::to_string).collect()
    }

    /// Kafka's javadoc example: two consumers, two topics of three partitions each.
    #[test]
    fn the_first_members_take_the_extra_partitions_of_each_topic() {
        let subs = subscriptions(&[("C0", &["t0", "t1"]), ("C1", &["t0", "t1"])]);
        let parts = BTreeMap::from([("t0".to_string(), 3), ("t1".to_string(), 3)]);
        let got = range(&subs, &parts);
        assert_eq!(names(&got["C0"]), ["t0/0", "t0/1", "t1/0", "t1/1"]);
        assert_eq!(names(&got["C1"]), ["t0/2", "t1/2"]);
    }

    #[test]
    fn a_member_subscribed_to_nothing_known_owns_nothing() {
        let subs = subscriptions(&[("a", &["orders"]), ("b", &["other"]), ("c", &["orders"])]);
        let parts = BTreeMap::from([("orders".to_string(), 1)]);
        let got = range(&subs, &parts);
        assert_eq!(names(&got["a"]), ["orders/0"]);
        assert!(got["b"].is_empty() && got["c"].is_empty());
    }

    proptest! {
        /// Every partition of a subscribed topic has exactly one owner, among its
        /// subscribers, and owners' shares differ by at most one per topic.
        #[test]
        fn each_partition_has_one_owner_and_shares_are_even(
            members in proptest::collection::btree_map("[a-e][0-9]", proptest::collection::vec(0u8..3, 0..3), 1..6),
            counts in proptest::collection::vec(0u32..8, 3),
        ) {
            let subs: BTreeMap<String, Vec<String>> = members
                .iter()
                .map(|(m, topics)| (m.clone(), topics.iter().map(|t| format!("t{t}")).collect()))
                .collect();
            let parts: BTreeMap<String, u32> =
                counts.iter().enumerate().map(|(i, &n)| (format!("t{i}"), n)).collect();
            let got = range(&subs, &parts);
            for (topic, &count) in &parts {
                let subscribers: Vec<&String> =
                    subs.iter().filter(|(_, t)| t.contains(topic)).map(|(m, _)| m).collect();
                let mut owners = vec![0u32; count as usize];
                let mut shares = Vec::new();
                for (member, owned) in &got {
                    let mine: Vec<&TopicPartition> =
                        owned.iter().filter(|tp| tp.topic.as_ref() == topic.as_str()).collect();
                    if !subscribers.contains(&member) {
                        prop_assert!(mine.is_empty());
                        continue;
                    }
                    shares.push(mine.len());
                    for tp in mine {
                        owners[tp.partition as usize] += 1;
                    }
                }
                if !subscribers.is_empty() {
                    prop_assert!(owners.iter().all(|&n| n == 1), "{topic}: {owners:?}");
                    let (min, max) = (shares.iter().min(), shares.iter().max());
                    prop_assert!(max.zip(min).is_none_or(|(max, min)| max - min <= 1));
                }
            }
        }
    }
}
