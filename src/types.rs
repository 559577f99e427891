//! The words every system shares, as newtypes, so that an offset is never confused with an
//! epoch or a broker id (TigerBeetle-style: units in the type, not in a comment). A
//! system's own words live with it (`kafka::types`).

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// A position in a partition's or a queue's log: signed 64-bit, as both Kafka and RocketMQ
/// keep them; -1 means "none".
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct Offset(pub i64);

/// A generation of leadership, bumped by every election: Kafka's leader epoch (KIP-101);
/// RocketMQ's master epoch and DLedger's term are the same idea.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct Epoch(pub i32);

/// A broker's id; host `broker-N` has id N.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrokerId(pub u32);

impl Offset {
    pub const NONE: Offset = Offset(-1);
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl Epoch {
    pub const NONE: Epoch = Epoch(-1);
}

/// A topic partition, written `topic/partition` in scenario files and reports.
///
/// A partition is named in every request, record and history event, and is a map key
/// everywhere, so its name is interned: one `Arc<str>` per topic and thread, shared by
/// every `TopicPartition` built or decoded there. A clone is a reference count, a decode
/// allocates nothing, and two names compare by pointer before they compare by bytes.
#[derive(Clone, Debug, Serialize)]
pub struct TopicPartition {
    pub topic: Arc<str>,
    pub partition: u32,
}

thread_local! {
    static TOPICS: RefCell<Vec<Arc<str>>> = const { RefCell::new(Vec::new()) };
}

/// The thread's one `Arc` for the topic `name` (a run names a handful of topics).
fn intern(name: &str) -> Arc<str> {
    TOPICS.with(|topics| {
        let mut topics = topics.borrow_mut();
        if let Some(topic) = topics.iter().find(|t| &***t == name) {
            return topic.clone();
        }
        let topic: Arc<str> = name.into();
        topics.push(topic.clone());
        topic
    })
}

impl TopicPartition {
    pub fn new(topic: impl AsRef<str>, partition: u32) -> Self {
        TopicPartition {
            topic: intern(topic.as_ref()),
            partition,
        }
    }

    /// The log directory name Kafka uses: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    fn topic_cmp(&self, other: &TopicPartition) -> Ordering {
        if Arc::ptr_eq(&self.topic, &other.topic) {
            Ordering::Equal
        } else {
            self.topic.cmp(&other.topic)
        }
    }
}

impl PartialEq for TopicPartition {
    fn eq(&self, other: &TopicPartition) -> bool {
        self.partition == other.partition && self.topic_cmp(other) == Ordering::Equal
    }
}

impl Eq for TopicPartition {}

impl PartialOrd for TopicPartition {
    fn partial_cmp(&self, other: &TopicPartition) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// By topic, then partition.
impl Ord for TopicPartition {
    fn cmp(&self, other: &TopicPartition) -> Ordering {
        self.topic_cmp(other)
            .then(self.partition.cmp(&other.partition))
    }
}

impl<'de> Deserialize<'de> for TopicPartition {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The wire form; the name is borrowed from the input where the format allows.
        #[derive(Deserialize)]
        #[serde(rename = "TopicPartition")]
        struct Wire<'a> {
            #[serde(borrow)]
            topic: Cow<'a, str>,
            partition: u32,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(TopicPartition::new(&*wire.topic, wire.partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for BrokerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "broker-{}", self.0)
    }
}

/// A host of the simulated world. The names are the scenario file's target names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HostName {
    Controller,
    /// A Kafka broker, `broker-N`.
    Broker(u32),
    /// A RocketMQ broker: `broker-a-0` is broker group 0 (`brokerName` broker-a), `brokerId`
    /// 0, its master.
    GroupBroker {
        group: u32,
        id: u32,
    },
    /// RocketMQ's NameServer, `namesrv`.
    NameServer,
    Producer(u32),
    Consumer(u32),
    /// The client that performs the final read after the heal phase.
    Reader,
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostName::Controller => write!(f, "controller"),
            HostName::Broker(n) => write!(f, "broker-{n}"),
            HostName::GroupBroker { group, id } => write!(f, "{}-{id}", broker_name(*group)),
            HostName::NameServer => write!(f, "namesrv"),
            HostName::Producer(n) => write!(f, "producer-{n}"),
            HostName::Consumer(n) => write!(f, "consumer-{n}"),
            HostName::Reader => write!(f, "reader"),
        }
    }
}

impl HostName {
    /// A host that serves the cluster (a broker, Kafka's controller, RocketMQ's
    /// NameServer), as opposed to a client.
    pub fn is_server(self) -> bool {
        matches!(
            self,
            HostName::Controller
                | HostName::Broker(_)
                | HostName::GroupBroker { .. }
                | HostName::NameServer
        )
    }
}

/// The most RocketMQ broker groups a cluster may have: one per letter, `broker-a` to
/// `broker-z`.
pub const MAX_BROKER_GROUPS: u32 = 26;

/// A RocketMQ broker group's `brokerName`: group 0 is `broker-a`.
pub fn broker_name(group: u32) -> String {
    assert!(
        group < MAX_BROKER_GROUPS,
        "broker group {group} has no letter"
    );
    format!("broker-{}", char::from(b'a' + group as u8))
}

/// Java's `String.hashCode` (over UTF-16 code units, wrapping), which both systems' brokers
/// use to place things: Kafka a group's offsets partition, RocketMQ a message's tags code.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_name_is_shared_by_every_partition_built_or_decoded_on_a_thread() {
        let a = TopicPartition::new("orders", 0);
        let b: TopicPartition =
            serde_json::from_str(r#"{"topic":"orders","partition":3}"#).expect("decodes");
        assert!(Arc::ptr_eq(&a.topic, &b.topic));
        let elsewhere = std::thread::spawn(|| TopicPartition::new("orders", 0))
            .join()
            .expect("thread");
        assert!(!Arc::ptr_eq(&a.topic, &elsewhere.topic));
        assert_eq!(a, elsewhere, "names compare by content too");
    }

    #[test]
    fn partitions_order_by_topic_then_partition() {
        let mut tps = [
            TopicPartition::new("payments", 0),
            TopicPartition::new("orders", 10),
            TopicPartition::new("orders", 2),
        ];
        tps.sort();
        let names: Vec<String> = tps.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["orders/2", "orders/10", "payments/0"]);
    }
}
