//! The NameServer (`NamesrvController`, `RouteInfoManager`): the brokers that registered
//! lately and their topics, in memory only. A broker not heard from for
//! `BROKER_CHANNEL_EXPIRED_TIME` (120 s) is dropped by the scan that runs every 5 s
//! (`scanNotActiveBroker`), and a broker whose registering connection closes (a killed
//! process's FIN) is dropped at once (`onChannelDestroy`). A broker that lost power sends
//! nothing, so only the scan drops it.

use crate::os::clock::{self, SimTime};
use crate::rocketmq::remoting::{
    self, BrokerRoute, Request, Response, TopicQueues, TopicRoute, NAMESRV_PORT,
};
use crate::types::HostName;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// `BROKER_CHANNEL_EXPIRED_TIME`.
pub const BROKER_EXPIRED: Duration = Duration::from_secs(120);

/// `scanNotActiveBrokerInterval`.
const SCAN_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
struct Live {
    address: HostName,
    /// The connection its last registration came on.
    channel: u64,
    last_update: SimTime,
    topics: Vec<TopicQueues>,
}

/// The routing table: each registered broker by (`brokerName`, `brokerId`).
#[derive(Clone, Debug, Default)]
pub struct RouteInfo {
    brokers: BTreeMap<(String, u32), Live>,
}

impl RouteInfo {
    /// `registerBroker`: the broker and its topics, on `channel`, as of `now`.
    pub fn register(
        &mut self,
        (broker_name, broker_id): (String, u32),
        address: HostName,
        channel: u64,
        topics: Vec<TopicQueues>,
        now: SimTime,
    ) {
        self.brokers.insert(
            (broker_name, broker_id),
            Live {
                address,
                channel,
                last_update: now,
                topics,
            },
        );
    }

    /// `onChannelDestroy`: the brokers registered on a connection that closed go.
    pub fn channel_closed(&mut self, channel: u64) -> Vec<HostName> {
        let mut gone = Vec::new();
        self.brokers.retain(|_, live| {
            let keep = live.channel != channel;
            if !keep {
                gone.push(live.address);
            }
            keep
        });
        gone
    }

    /// `scanNotActiveBroker`: the brokers not heard from for [`BROKER_EXPIRED`] go.
    pub fn scan(&mut self, now: SimTime) -> Vec<HostName> {
        let mut expired = Vec::new();
        self.brokers.retain(|_, live| {
            let keep = now < live.last_update + BROKER_EXPIRED;
            if !keep {
                expired.push(live.address);
            }
            keep
        });
        expired
    }

    /// `pickupTopicRouteData`: each broker group that has the topic, its queues and its
    /// master if registered; `None` if no live broker has it.
    pub fn route(&self, topic: &str) -> Option<TopicRoute> {
        let mut groups: BTreeMap<&str, BrokerRoute> = BTreeMap::new();
        for ((name, id), live) in &self.brokers {
            let Some(queues) = live.topics.iter().find(|t| t.topic == topic) else {
                continue;
            };
            let route = groups.entry(name).or_insert_with(|| BrokerRoute {
                broker_name: name.clone(),
                master: None,
                queues: queues.queues,
            });
            if *id == 0 {
                route.master = Some(live.address);
                route.queues = queues.queues;
            }
        }
        (!groups.is_empty()).then(|| TopicRoute {
            brokers: groups.into_values().collect(),
        })
    }
}

/// The NameServer's request processor (`DefaultRequestProcessor`) over its route table.
#[derive(Clone)]
struct NameServer {
    routes: Rc<RefCell<RouteInfo>>,
}

impl remoting::Server for NameServer {
    fn handle(
        &self,
        request: Request,
        peer: &remoting::Peer,
    ) -> impl std::future::Future<Output = Response> + 'static {
        let answer = match request {
            Request::RegisterBroker {
                broker_name,
                broker_id,
                address,
                topics,
            } => {
                self.routes.borrow_mut().register(
                    (broker_name, broker_id),
                    address,
                    peer.id,
                    topics,
                    clock::now(),
                );
                Response::RegisterBroker
            }
            Request::GetRouteInfoByTopic { topic } => {
                Response::Route(self.routes.borrow().route(&topic))
            }
            _ => Response::NotSupported,
        };
        std::future::ready(answer)
    }

    fn closed(&self, peer: &remoting::Peer) {
        for broker in self.routes.borrow_mut().channel_closed(peer.id) {
            tracing::info!(%broker, "the NameServer dropped a broker whose connection closed");
        }
    }
}

pub async fn run() -> turmoil::Result {
    let routes = Rc::new(RefCell::new(RouteInfo::default()));
    let scanned = routes.clone();
    let scanner = tokio::task::spawn_local(async move {
        loop {
            tokio::time::sleep(SCAN_INTERVAL).await;
            for broker in scanned.borrow_mut().scan(clock::now()) {
                tracing::info!(%broker, "the NameServer dropped a broker it has not heard from");
            }
        }
    });
    let served = remoting::serve(NAMESRV_PORT, NameServer { routes }).await;
    scanner.abort();
    served?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(queues: u32) -> Vec<TopicQueues> {
        vec![TopicQueues {
            topic: "orders".into(),
            queues,
        }]
    }

    #[test]
    fn a_route_lists_each_group_with_its_master_until_the_master_expires() {
        let mut info = RouteInfo::default();
        let t0 = SimTime::from_millis(0);
        let b0 = HostName::GroupBroker { group: 1, id: 0 };
        let a0 = HostName::GroupBroker { group: 0, id: 0 };
        info.register(("broker-b".into(), 0), b0, 1, topics(2), t0);
        info.register(
            ("broker-a".into(), 0),
            a0,
            2,
            topics(4),
            t0 + Duration::from_secs(60),
        );
        assert!(info.route("payments").is_none());
        let route = info.route("orders").expect("a route");
        let names: Vec<_> = route
            .brokers
            .iter()
            .map(|b| (b.broker_name.as_str(), b.master, b.queues))
            .collect();
        assert_eq!(
            names,
            [("broker-a", Some(a0), 4), ("broker-b", Some(b0), 2)]
        );
        assert!(info.scan(t0 + Duration::from_millis(119_999)).is_empty());
        assert_eq!(info.scan(t0 + BROKER_EXPIRED), [b0]);
        assert_eq!(info.route("orders").expect("a route").brokers.len(), 1);
        // Its connection closing drops a broker at once; another connection's, nothing.
        assert!(info.channel_closed(1).is_empty());
        assert_eq!(info.channel_closed(2), [a0]);
        assert!(info.route("orders").is_none());
    }
}
