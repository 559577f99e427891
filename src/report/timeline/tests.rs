use super::data::{HostState, LeaderSpan};
use super::*;
use crate::check::Verdict;
use crate::config::kafka::Acks;
use crate::history::facts::kafka::{ElectedFrom, Fact as KafkaFact};
use crate::history::facts::rocketmq::Fact as RocketMqFact;
use crate::history::facts::{Fact, FactEvent, FactLog};
use crate::history::{Event, MessageId, Op};
use crate::os::clock::SimTime;
use crate::scenario::model::SystemName;
use crate::sim::timeline::{LeadershipChange, Timeline};
use crate::sim::world::{HostChange, Stopped};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::collections::BTreeMap;
use std::time::Duration;

fn at(ms: u64) -> SimTime {
    SimTime::from_millis(ms)
}

fn id(seq: u32) -> MessageId {
    MessageId { producer: 1, seq }
}

fn tp() -> TopicPartition {
    TopicPartition::new("orders", 0)
}

fn leadership(ms: u64, leader: Option<u32>, epoch: i32, isr: &[u32]) -> LeadershipChange {
    LeadershipChange {
        time: at(ms),
        tp: tp(),
        leader: leader.map(BrokerId),
        leader_host: leader.map(HostName::Broker),
        leader_epoch: Epoch(epoch),
        isr: isr.iter().copied().map(BrokerId).collect(),
    }
}

/// broker-1 leads, loses power at 8 s and is back at 11 s; the controller elects broker-2
/// only at 14 s, when broker-1's session has timed out.
fn timeline() -> Timeline {
    Timeline {
        duration: Duration::from_secs(20),
        heal: Duration::from_secs(5),
        hosts: vec![
            HostName::Broker(1),
            HostName::Broker(2),
            HostName::Producer(1),
            HostName::Reader,
        ],
        host_changes: vec![
            HostChange {
                time: at(8_000),
                host: HostName::Broker(1),
                stopped: Some(Stopped::PowerLost),
            },
            HostChange {
                time: at(11_000),
                host: HostName::Broker(1),
                stopped: None,
            },
        ],
        faults: vec![(at(8_000), "power-loss broker-1".to_owned())],
        leadership: vec![
            leadership(0, Some(1), 0, &[1, 2]),
            leadership(14_000, Some(2), 1, &[2]),
        ],
    }
}

fn event(ms: u64, op: Op) -> Event {
    Event {
        time: at(ms),
        process: "producer-1".into(),
        op,
    }
}

fn facts() -> FactLog {
    facts_with_lso_held(false)
}

/// Three appends and their acknowledgements on one partition, then an unclean election and
/// a truncation; `held`: a transaction holds the LSO at 5 at the second acknowledgement.
fn facts_with_lso_held(held: bool) -> FactLog {
    let mut log = FactLog::default();
    let mut push = |ms: u64, fact: Fact| log.push(FactEvent { time: at(ms), fact });
    for (ms, first, last, hw) in [(100, 0, 9, 0), (104, 10, 19, 10), (130, 20, 29, 20)] {
        let lso = if held && ms == 104 { 5 } else { hw };
        push(
            ms,
            Fact::Kafka(KafkaFact::Appended {
                tp: tp(),
                leader: BrokerId(1),
                epoch: Epoch(0),
                first: Offset(first),
                last: Offset(last),
            }),
        );
        push(
            ms + 1,
            Fact::Kafka(KafkaFact::Acknowledged {
                tp: tp(),
                leader: BrokerId(1),
                epoch: Epoch(0),
                acks: Acks::Leader,
                first: Offset(first),
                last: Offset(last),
                high_watermark: Offset(hw),
                last_stable_offset: Offset(lso),
                followers: Box::new([(BrokerId(2), Offset(hw))]),
            }),
        );
    }
    push(
        14_000,
        Fact::Kafka(KafkaFact::Election {
            tp: tp(),
            leader: BrokerId(2),
            epoch: Epoch(1),
            from: ElectedFrom::OutOfSync,
        }),
    );
    push(
        15_000,
        Fact::Kafka(KafkaFact::Truncation {
            tp: tp(),
            broker: BrokerId(1),
            from: Offset(30),
            to: Offset(20),
            rule: "leader-epoch".to_owned(),
        }),
    );
    log
}

fn build(history: &[Event], verdict: &Verdict) -> Panel {
    build_with(&timeline(), history, verdict)
}

fn build_with(timeline: &Timeline, history: &[Event], verdict: &Verdict) -> Panel {
    build_from_facts(timeline, history, verdict, &facts())
}

fn build_from(history: &[Event], verdict: &Verdict, facts: &FactLog) -> Panel {
    build_from_facts(&timeline(), history, verdict, facts)
}

fn build_from_facts(
    timeline: &Timeline,
    history: &[Event],
    verdict: &Verdict,
    facts: &FactLog,
) -> Panel {
    let topics = BTreeMap::from([("orders".to_owned(), (2, 2))]);
    panel(&PanelInput {
        variant: "acks-1",
        summary: "summary".to_owned(),
        timeline,
        history,
        facts,
        verdict,
        system: SystemName::Kafka,
        topics: &topics,
    })
}

/// Of a coordinator topic's partitions, only those written to get lanes: the one the
/// run's transactional id hashes to, not the 49 idle ones.
#[test]
fn idle_internal_partitions_are_left_out() {
    let mut timeline = timeline();
    let state = |p| TopicPartition::new("__transaction_state", p);
    for p in [0, 7] {
        timeline.leadership.push(LeadershipChange {
            tp: state(p),
            ..leadership(0, Some(2), 0, &[2, 1])
        });
    }
    let mut facts = facts();
    facts.push(FactEvent {
        time: at(50),
        fact: Fact::Kafka(KafkaFact::Appended {
            tp: state(7),
            leader: BrokerId(2),
            epoch: Epoch(0),
            first: Offset(0),
            last: Offset(0),
        }),
    });
    let topics = BTreeMap::from([("orders".to_owned(), (2, 2))]);
    let panel = panel(&PanelInput {
        variant: "txn",
        summary: "summary".to_owned(),
        timeline: &timeline,
        history: &[],
        facts: &facts,
        verdict: &Verdict::default(),
        system: SystemName::Kafka,
        topics: &topics,
    });
    let lanes: Vec<&str> = panel.partitions.iter().map(|p| p.tp.as_str()).collect();
    assert_eq!(lanes, ["orders/0", "__transaction_state/7"]);
}

#[test]
fn a_leader_the_controller_still_names_is_marked_down_while_its_host_is() {
    let panel = build(&[], &Verdict::default());
    let spans: Vec<(u64, u64, Option<u32>, bool)> = panel.partitions[0]
        .leadership
        .iter()
        .map(|s: &LeaderSpan| (s.from, s.to, s.leader, s.leader_down))
        .collect();
    assert_eq!(
        spans,
        [
            (0, 8_000, Some(1), false),
            (8_000, 11_000, Some(1), true),
            (11_000, 14_000, Some(1), false),
            (14_000, 25_000, Some(2), false),
        ]
    );
    assert_eq!(panel.partitions[0].leadership[3].isr, [2]);
    assert_eq!(
        (panel.partitions[0].replicas, panel.partitions[0].min_isr),
        (2, 2)
    );
}

#[test]
fn host_lanes_follow_each_host_and_leave_out_the_reader() {
    let panel = build(&[], &Verdict::default());
    let names: Vec<&str> = panel.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(names, ["broker-1", "broker-2", "producer-1"]);
    let broker_1: Vec<(u64, u64, HostState)> = panel.hosts[0]
        .spans
        .iter()
        .map(|s| (s.from, s.to, s.state))
        .collect();
    assert_eq!(
        broker_1,
        [
            (0, 8_000, HostState::Up),
            (8_000, 11_000, HostState::PowerLost),
            (11_000, 25_000, HostState::Up),
        ]
    );
    assert_eq!((panel.end, panel.heal), (25_000, 20_000));
}

/// A paused host is its own state on its lane, and a leader paused is down: nobody can
/// write to its partition while it runs nothing.
#[test]
fn a_paused_leader_is_drawn_paused_and_down() {
    let mut t = timeline();
    t.host_changes = vec![
        HostChange {
            time: at(8_000),
            host: HostName::Broker(1),
            stopped: Some(Stopped::Paused),
        },
        HostChange {
            time: at(10_000),
            host: HostName::Broker(1),
            stopped: None,
        },
    ];
    let panel = build_with(&t, &[], &Verdict::default());
    let broker_1: Vec<(u64, u64, HostState)> = panel.hosts[0]
        .spans
        .iter()
        .map(|s| (s.from, s.to, s.state))
        .collect();
    assert_eq!(
        broker_1,
        [
            (0, 8_000, HostState::Up),
            (8_000, 10_000, HostState::Paused),
            (10_000, 25_000, HostState::Up),
        ]
    );
    let down: Vec<(u64, u64, bool)> = panel.partitions[0]
        .leadership
        .iter()
        .map(|s| (s.from, s.to, s.leader_down))
        .collect();
    assert_eq!(down[1], (8_000, 10_000, true));
}

#[test]
fn sends_are_counted_per_bucket_and_lost_acks_keep_their_times() {
    let history = [
        event(
            15,
            Op::Ok {
                id: id(1),
                tp: tp(),
                offset: Offset(0),
                degraded: None,
            },
        ),
        event(
            19,
            Op::Ok {
                id: id(2),
                tp: tp(),
                offset: Offset(1),
                degraded: None,
            },
        ),
        event(
            25,
            Op::Info {
                id: id(3),
                error: "timeout".to_owned(),
            },
        ),
        event(
            24_999,
            Op::Fail {
                id: id(4),
                error: "NOT_ENOUGH_REPLICAS".to_owned(),
            },
        ),
    ];
    let verdict = Verdict {
        lost_acked_at: vec![at(15), at(19)],
        ..Verdict::default()
    };
    let panel = build(&history, &verdict);
    assert_eq!(panel.acked.len(), (25_000 / BUCKET_MS) as usize);
    assert_eq!(panel.acked[1], 2);
    assert_eq!(panel.failed[2], 1);
    assert_eq!(panel.failed[panel.failed.len() - 1], 1);
    assert_eq!(panel.acked.iter().sum::<u32>(), 2);
    assert_eq!(panel.lost, [15, 19]);
}

#[test]
fn offsets_keep_the_last_value_of_each_bucket() {
    let panel = build(&[], &Verdict::default());
    // Appends at 100 and 104 ms share a bucket: the later LEO stands for it.
    assert_eq!(panel.partitions[0].leo, [(104, 20), (130, 30)]);
    assert_eq!(panel.partitions[0].hw, [(105, 10), (131, 20)]);
    assert!(
        panel.partitions[0].lso.is_empty(),
        "the LSO never left the HW"
    );
}

/// The LSO gets a line of its own only where a transaction held it below the HW.
#[test]
fn the_lso_is_drawn_where_a_transaction_held_it_below_the_hw() {
    let input = facts_with_lso_held(true);
    let panel = build_from(&[], &Verdict::default(), &input);
    assert_eq!(panel.partitions[0].hw, [(105, 10), (131, 20)]);
    assert_eq!(panel.partitions[0].lso, [(105, 5), (131, 20)]);
}

#[test]
fn markers_say_what_happened_on_the_lane_it_happened_to() {
    let panel = build(&[], &Verdict::default());
    let markers: Vec<(u64, &str, &str)> = panel
        .events
        .iter()
        .map(|m| (m.at, m.lane.as_str(), m.kind))
        .collect();
    assert_eq!(
        markers,
        [
            (8_000, "faults", "fault"),
            (14_000, "orders/0", "unclean-election"),
            (15_000, "broker-1", "truncation"),
        ]
    );
    assert!(panel.events[1].text.contains("from outside the ISR"));
    assert!(panel.events[2]
        .text
        .contains("truncated orders/0 from 30 to 20 (10 offsets gone), by leader-epoch"));
}

#[test]
fn the_page_embeds_its_data_so_that_no_text_can_end_the_script() {
    let mut panel = build(&[], &Verdict::default());
    panel.summary = "</script><b>".to_owned();
    let page = html("t <1>", &[panel]);
    assert_eq!(page.matches("</script>").count(), 2);
    assert!(page.contains(r"<\/script><b>"));
    assert!(page.contains("<title>t &lt;1&gt;</title>"));
    let start = page.find(r#"type="application/json">"#).unwrap() + 24;
    let end = start + page[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
    assert_eq!(data[0]["variant"], "acks-1");
    assert_eq!(data[0]["hosts"][0]["spans"][1]["state"], "power-lost");
}

/// A RocketMQ run: broker-a-0 holds the queue, loses power at 8 s and is back at 11 s; its
/// CommitLog lane comes from its facts, the queue's lines from what the clients saw.
#[test]
fn a_rocketmq_panel_draws_each_master_s_commit_log_and_each_queue_as_its_clients_saw_it() {
    let master = HostName::GroupBroker { group: 0, id: 0 };
    let mut timeline = timeline();
    timeline.hosts = vec![master, HostName::Producer(1), HostName::Consumer(1)];
    for change in &mut timeline.host_changes {
        change.host = master;
    }
    timeline.leadership = vec![LeadershipChange {
        leader_host: Some(master),
        ..leadership(0, Some(0), 0, &[0])
    }];
    let mut facts = FactLog::default();
    for (ms, max, flushed) in [(500, 4096, 0), (503, 4096, 4096), (1000, 9000, 4096)] {
        facts.push(FactEvent {
            time: at(ms),
            fact: Fact::RocketMq(RocketMqFact::CommitLog {
                broker: master,
                max_offset: max,
                flushed_where: flushed,
            }),
        });
    }
    let ok = |ms, seq, offset| {
        event(
            ms,
            Op::Ok {
                id: id(seq),
                tp: tp(),
                offset: Offset(offset),
                degraded: None,
            },
        )
    };
    let processed = |ms, offset| Event {
        time: at(ms),
        process: "consumer-1".into(),
        op: Op::Processed {
            consumer: 1,
            tp: tp(),
            offset: Offset(offset),
            id: None,
        },
    };
    let history = [
        ok(100, 0, 0),
        ok(200, 1, 1),
        processed(300, 0),
        ok(400, 2, 2),
    ];
    let topics = BTreeMap::new();
    let panel = panel(&PanelInput {
        variant: "async-flush",
        summary: String::new(),
        timeline: &timeline,
        history: &history,
        facts: &facts,
        verdict: &Verdict::default(),
        system: SystemName::RocketMq,
        topics: &topics,
    });
    assert_eq!(panel.system, "rocketmq");
    assert_eq!(panel.logs.len(), 1);
    assert_eq!(panel.logs[0].host, "broker-a-0");
    // Two facts in one 10 ms bucket keep the later value.
    assert_eq!(panel.logs[0].max, [(503, 4096), (1000, 9000)]);
    assert_eq!(panel.logs[0].flushed, [(503, 4096)]);
    let queue = &panel.partitions[0];
    assert_eq!(queue.leo, [(100, 1), (200, 2), (400, 3)]);
    assert_eq!(queue.hw, [(300, 1)]);
    // The master's power loss marks its stretch down, named by its host.
    let spans: Vec<(u64, u64, Option<&str>, bool)> = queue
        .leadership
        .iter()
        .map(|s| (s.from, s.to, s.host.as_deref(), s.leader_down))
        .collect();
    assert_eq!(
        spans,
        [
            (0, 8_000, Some("broker-a-0"), false),
            (8_000, 11_000, Some("broker-a-0"), true),
            (11_000, 25_000, Some("broker-a-0"), false),
        ]
    );
}
