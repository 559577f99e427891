//! Fault targets (`broker-2`, `leader:orders/0`, `master:broker-a`, lists of them): their
//! syntax, and whether the cluster of the run's system has them.

use super::cluster::unknown_topic;
use super::keys;
use crate::scenario::model::{Settings, SystemName, Target, TargetForm};
use crate::scenario::node::{Node, Value};
use crate::scenario::Error;
use crate::types::{broker_name, HostName, TopicPartition};
use std::ops::Range;

/// A target expression: one name, or a list of names. Every name goes to `all` with its
/// span, for the checks against the cluster.
pub(super) fn read_target(
    node: &Node,
    all: &mut Vec<(Target, Range<usize>)>,
) -> Result<Target, Error> {
    match &node.value {
        Value::String(text) => {
            let target = parse_target(text).map_err(|m| Error::at(&node.span, m))?;
            all.push((target.clone(), node.span.clone()));
            Ok(target)
        }
        Value::Array(items) if !items.is_empty() => {
            let mut list = Vec::with_capacity(items.len());
            for item in items {
                let Value::String(text) = &item.value else {
                    return Err(keys::wrong_type(
                        "a target in a list",
                        "a string like \"broker-1\"",
                        item,
                    ));
                };
                let target = parse_target(text).map_err(|m| Error::at(&item.span, m))?;
                all.push((target.clone(), item.span.clone()));
                list.push(target);
            }
            Ok(Target::List(list))
        }
        Value::Array(_) => Err(Error::at(&node.span, "an empty target list".to_owned())),
        _ => Err(keys::wrong_type(
            "target",
            "a target string like \"broker-1\" or a list of them",
            node,
        )),
    }
}

/// `broker-N, controller, ... or followers:<topic>/<partition>`: every form, for errors.
fn forms_help() -> String {
    let forms: Vec<String> = TargetForm::ALL.iter().map(TargetForm::syntax).collect();
    match forms.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn parse_target(text: &str) -> Result<Target, String> {
    for form in TargetForm::ALL {
        match form {
            TargetForm::Word(word, target) if text == *word => return Ok(target.clone()),
            TargetForm::Word(..) => {}
            TargetForm::Numbered(prefix, make) => {
                if let Some(number) = text.strip_prefix(prefix).and_then(|t| t.strip_prefix('-')) {
                    // `broker-a-0` is a group's host, which its own form reads.
                    if group_letter(number).is_some_and(|(_, rest)| rest.starts_with('-')) {
                        continue;
                    }
                    return match number.parse::<u32>() {
                        Ok(n) if n >= 1 && number.bytes().all(|b| b.is_ascii_digit()) => {
                            Ok(Target::Host(make(n)))
                        }
                        _ => Err(format!(
                            "invalid target `{text}`: host numbers start at 1 (`{prefix}-1`)"
                        )),
                    };
                }
            }
            TargetForm::Role(role, make) => {
                if let Some(partition) = text.strip_prefix(role).and_then(|t| t.strip_prefix(':')) {
                    return topic_partition(partition).map(make).ok_or_else(|| {
                        format!("invalid target `{text}`: expected {role}:<topic>/<partition>, like `{role}:orders/0`")
                    });
                }
            }
            TargetForm::GroupHost(prefix, make) => {
                let rest = text.strip_prefix(prefix).and_then(|t| t.strip_prefix('-'));
                let group_and_id = rest
                    .and_then(group_letter)
                    .and_then(|(group, rest)| Some((group, rest.strip_prefix('-')?)));
                if let Some((group, id)) = group_and_id {
                    let digits = !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit());
                    return match id.parse::<u32>() {
                        Ok(id) if digits => Ok(Target::Host(make(group, id))),
                        _ => Err(format!(
                            "invalid target `{text}`: expected {prefix}-<letter>-<id>, a broker group's letter and a host id from 0, like `{prefix}-a-0`"
                        )),
                    };
                }
            }
            TargetForm::GroupRole(role, make) => {
                if let Some(group) = text.strip_prefix(role).and_then(|t| t.strip_prefix(':')) {
                    return match group.strip_prefix("broker-").map(group_letter) {
                        Some(Some((group, ""))) => Ok(make(group)),
                        _ => Err(format!(
                            "invalid target `{text}`: expected {role}:broker-<letter>, a broker group, like `{role}:broker-a`"
                        )),
                    };
                }
            }
        }
    }
    Err(format!(
        "invalid target `{text}`: expected {}",
        forms_help()
    ))
}

/// `a-0`: a broker group's letter, as its number (`a` is 0), and what follows it; `None`
/// if the text does not start with a lowercase letter.
fn group_letter(text: &str) -> Option<(u32, &str)> {
    let letter = *text.as_bytes().first()?;
    letter
        .is_ascii_lowercase()
        .then(|| (u32::from(letter - b'a'), &text[1..]))
}

/// `orders/0`: a topic name and a partition number of digits only.
fn topic_partition(text: &str) -> Option<TopicPartition> {
    let (topic, p) = text.rsplit_once('/')?;
    let digits = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    match (topic.is_empty(), digits, p.parse::<u32>()) {
        (false, true, Ok(p)) => Some(TopicPartition::new(topic, p)),
        _ => None,
    }
}

fn plural(n: u32, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Whether the cluster of `settings` has `target`, in a run of its system (`run` as the
/// errors name it): each system's own hosts and roles are errors in the other's runs.
pub(super) fn check_target(
    target: &Target,
    settings: &Settings,
    needs_disk: bool,
    run: &str,
) -> Result<(), String> {
    let cluster = &settings.cluster;
    if let Some(home) = system_of(target).filter(|home| *home != cluster.system) {
        return Err(other_system(target, home, settings, run));
    }
    let brokers = cluster.brokers;
    match target {
        Target::Host(HostName::Broker(n)) if *n > brokers => Err(format!(
            "no host `broker-{n}`: the cluster has {} (broker-1 to broker-{brokers})",
            plural(brokers, "broker")
        )),
        Target::Host(host @ HostName::GroupBroker { group, id })
            if *group >= cluster.groups || *id >= cluster.replicas =>
        {
            Err(format!("no host `{host}`: {}", rocketmq_hosts(settings)))
        }
        Target::Master(group) if *group >= cluster.groups => Err(format!(
            "no broker group `{}`: {}",
            broker_name(*group),
            rocketmq_hosts(settings)
        )),
        Target::Host(HostName::NameServer) if needs_disk => {
            Err("`namesrv` has no disk: the NameServer keeps its routes in memory".to_owned())
        }
        Target::Host(host @ (HostName::Producer(n) | HostName::Consumer(n))) => {
            let (kind, have) = match host {
                HostName::Producer(_) => ("producer", settings.workload.producers),
                _ => ("consumer", settings.workload.consumers),
            };
            if *n > have {
                Err(format!(
                    "no host `{host}`: [workload] has {}",
                    plural(have, kind)
                ))
            } else if needs_disk {
                Err(format!(
                    "`{host}` has no disk: disk faults apply to brokers and the controller"
                ))
            } else {
                Ok(())
            }
        }
        Target::Leader(tp) | Target::Follower(tp) | Target::Followers(tp) => {
            let names = cluster.topic_names();
            let Some(topic) = cluster.topics.iter().find(|t| *t.name == *tp.topic) else {
                return Err(format!(
                    "{} (in target `{}`)",
                    unknown_topic(&tp.topic, &names),
                    describe_target(target)
                ));
            };
            if cluster.system == SystemName::RocketMq {
                // The topic's queues are numbered across the groups, broker-a's first.
                let queues = topic.queues() * cluster.groups;
                if tp.partition >= queues {
                    return Err(format!(
                        "queue {} of topic `{}` does not exist: it has {} ({} on each of {}, 0 to {})",
                        tp.partition,
                        tp.topic,
                        plural(queues, "queue"),
                        topic.queues(),
                        plural(cluster.groups, "broker group"),
                        queues - 1
                    ));
                }
                return Ok(());
            }
            if tp.partition >= topic.partitions {
                return Err(format!(
                    "partition {} of topic `{}` does not exist: it has {} (0 to {})",
                    tp.partition,
                    tp.topic,
                    plural(topic.partitions, "partition"),
                    topic.partitions - 1
                ));
            }
            if !matches!(target, Target::Leader(_)) && topic.replication_factor < 2 {
                return Err(format!(
                    "`{tp}` has no followers: topic `{}` has replication factor 1",
                    tp.topic
                ));
            }
            Ok(())
        }
        Target::List(list) => list
            .iter()
            .try_for_each(|t| check_target(t, settings, needs_disk, run)),
        Target::Coordinator if settings.workload.group.is_none() => {
            Err("`coordinator` is a group's coordinator: [workload] has no `group`".to_owned())
        }
        Target::TxnCoordinator if !settings.transactional() => Err(
            "`txn-coordinator` is producer-1's transaction coordinator (consumer-1's with exactly-once processors only): [producer] has no `transactional.id` and [workload] no `commit` = \"transactional\""
                .to_owned(),
        ),
        _ => Ok(()),
    }
}

/// The system a target belongs to; `None` for what both have (`brokers`, `leader:`, the
/// clients, ...).
fn system_of(target: &Target) -> Option<SystemName> {
    match target {
        Target::Host(HostName::Broker(_) | HostName::Controller)
        | Target::Follower(_)
        | Target::Followers(_)
        | Target::Coordinator
        | Target::TxnCoordinator => Some(SystemName::Kafka),
        Target::Host(HostName::GroupBroker { .. } | HostName::NameServer) | Target::Master(_) => {
            Some(SystemName::RocketMq)
        }
        _ => None,
    }
}

/// A target of `home` in a run of the other system, with what that run has instead.
fn other_system(target: &Target, home: SystemName, settings: &Settings, run: &str) -> String {
    let cluster = &settings.cluster;
    let instead = match (home, target) {
        (SystemName::Kafka, Target::Host(HostName::Controller)) => {
            "its metadata host is `namesrv`".to_owned()
        }
        (SystemName::Kafka, Target::Follower(_) | Target::Followers(_)) => {
            "a broker group has no slaves yet (replicas = 1), only its master".to_owned()
        }
        (SystemName::Kafka, Target::Coordinator) => {
            "it has no group coordinator: each master keeps a group's offsets".to_owned()
        }
        (SystemName::Kafka, Target::TxnCoordinator) => {
            "it has no transaction coordinator: its transactions are half messages".to_owned()
        }
        (SystemName::Kafka, _) => rocketmq_hosts(settings),
        (SystemName::RocketMq, Target::Host(HostName::NameServer)) => {
            "its metadata host is `controller`".to_owned()
        }
        (SystemName::RocketMq, _) => format!(
            "the cluster has {} (broker-1 to broker-{})",
            plural(cluster.brokers, "broker"),
            cluster.brokers
        ),
    };
    let (home, other) = match home {
        SystemName::Kafka => ("Kafka", "RocketMQ"),
        SystemName::RocketMq => ("RocketMQ", "Kafka"),
    };
    format!("`{target}` is a {home} target, and {run} runs {other}: {instead}")
}

/// A RocketMQ cluster's broker hosts, as an error about one it lacks says them.
fn rocketmq_hosts(settings: &Settings) -> String {
    let cluster = &settings.cluster;
    let hosts = cluster.broker_hosts();
    let named = match hosts.as_slice() {
        [only] => only.to_string(),
        [first, .., last] => format!("{first} to {last}"),
        [] => String::new(),
    };
    format!(
        "the cluster has {} of {} ({named})",
        plural(cluster.groups, "broker group"),
        plural(cluster.replicas, "host")
    )
}

fn describe_target(target: &Target) -> String {
    match target {
        Target::Leader(tp) => format!("leader:{tp}"),
        Target::Follower(tp) => format!("follower:{tp}"),
        Target::Followers(tp) => format!("followers:{tp}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads_back_as_a_fired_fault_prints_it() {
        for form in TargetForm::ALL {
            let text = form
                .syntax()
                .replace("-N", "-2")
                .replace("<topic>/<partition>", "orders/1")
                .replace("<letter>", "b")
                .replace("<id>", "0");
            assert_eq!(parse_target(&text).map(|t| t.to_string()), Ok(text));
        }
    }

    #[test]
    fn targets_parse() {
        assert_eq!(
            parse_target("broker-3"),
            Ok(Target::Host(HostName::Broker(3)))
        );
        assert_eq!(
            parse_target("controller"),
            Ok(Target::Host(HostName::Controller))
        );
        assert_eq!(
            parse_target("producer-1"),
            Ok(Target::Host(HostName::Producer(1)))
        );
        assert_eq!(
            parse_target("consumer-2"),
            Ok(Target::Host(HostName::Consumer(2)))
        );
        assert_eq!(parse_target("brokers"), Ok(Target::Brokers));
        assert_eq!(parse_target("crashed"), Ok(Target::Crashed));
        assert_eq!(parse_target("random-broker"), Ok(Target::RandomBroker));
        assert_eq!(
            parse_target("leader:orders/0"),
            Ok(Target::Leader(TopicPartition::new("orders", 0)))
        );
        assert_eq!(
            parse_target("follower:a.b-c/12"),
            Ok(Target::Follower(TopicPartition::new("a.b-c", 12)))
        );
        assert_eq!(
            parse_target("followers:orders/1"),
            Ok(Target::Followers(TopicPartition::new("orders", 1)))
        );
        assert_eq!(parse_target("master:broker-a"), Ok(Target::Master(0)));
        assert_eq!(
            parse_target("broker-c-0"),
            Ok(Target::Host(HostName::GroupBroker { group: 2, id: 0 }))
        );
        assert_eq!(
            parse_target("namesrv"),
            Ok(Target::Host(HostName::NameServer))
        );
        for bad in [
            "master:broker-",
            "master:broker-ab",
            "master:broker-A",
            "master:a",
            "broker-a-",
            "broker-a-x",
            "broker-a-+1",
            "broker-a0",
            "broker-0",
            "broker-",
            "broker-x",
            "broker-+1",
            "leader:orders",
            "leader:/0",
            "leader:orders/-1",
            "leader:orders/+1",
            "leaders:orders/0",
            "Broker-1",
            "",
            "broker-99999999999",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
