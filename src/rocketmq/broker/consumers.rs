//! The consumer groups a broker knows (`ConsumerManager`), as plain data: each group's
//! members by client id, with the connection their last heartbeat came on and when.
//! A member joins with its first heartbeat and leaves when its connection closes
//! (`doChannelCloseEvent`) or when it has sent no heartbeat for `channelExpiredTimeout`
//! (120 s, `scanNotActiveChannel`). Each change is what makes the broker tell the
//! group's members to rebalance (`NOTIFY_CONSUMER_IDS_CHANGED`).

use crate::os::clock::SimTime;
use std::collections::BTreeMap;
use std::time::Duration;

/// `channelExpiredTimeout`: a member silent this long is dropped.
pub const CHANNEL_EXPIRED_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Member {
    /// The connection (`Peer::id`) the member's last heartbeat came on.
    peer: u64,
    last_heartbeat: SimTime,
}

#[derive(Clone, Debug, Default)]
pub struct ConsumerManager {
    groups: BTreeMap<String, BTreeMap<String, Member>>,
}

impl ConsumerManager {
    /// `registerConsumer`: whether the group's members changed (a new client id, or a
    /// known one on a new connection, which is a new channel to RocketMQ).
    pub fn heartbeat(&mut self, group: &str, client_id: &str, peer: u64, now: SimTime) -> bool {
        let members = self.groups.entry(group.to_owned()).or_default();
        let member = Member {
            peer,
            last_heartbeat: now,
        };
        let before = members.insert(client_id.to_owned(), member);
        debug_assert!(before.is_none_or(|b| b.last_heartbeat <= now));
        before.is_none_or(|b| b.peer != peer)
    }

    /// `getConsumerIdListByGroup`: the live members' client ids, sorted.
    pub fn ids(&self, group: &str) -> Vec<String> {
        self.groups
            .get(group)
            .map(|members| members.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The connections of a group's members, to tell them of a change.
    pub fn peers(&self, group: &str) -> Vec<u64> {
        self.groups
            .get(group)
            .map(|members| members.values().map(|m| m.peer).collect())
            .unwrap_or_default()
    }

    /// `doChannelCloseEvent`: the members on that connection leave; the groups they left.
    pub fn channel_closed(&mut self, peer: u64) -> Vec<String> {
        self.remove(|m| m.peer == peer)
    }

    /// `scanNotActiveChannel`: members silent past [`CHANNEL_EXPIRED_TIMEOUT`] leave; the
    /// groups they left.
    pub fn scan(&mut self, now: SimTime) -> Vec<String> {
        self.remove(|m| now - m.last_heartbeat > CHANNEL_EXPIRED_TIMEOUT)
    }

    fn remove(&mut self, gone: impl Fn(&Member) -> bool) -> Vec<String> {
        let mut changed = Vec::new();
        for (group, members) in &mut self.groups {
            let before = members.len();
            members.retain(|_, m| !gone(m));
            if members.len() != before {
                changed.push(group.clone());
            }
        }
        self.groups.retain(|_, members| !members.is_empty());
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SimTime {
        SimTime::after_start(Duration::from_secs(secs))
    }

    #[test]
    fn members_join_by_heartbeat_and_leave_by_close_or_silence() {
        let mut m = ConsumerManager::default();
        assert!(m.heartbeat("g", "consumer-2", 7, at(0)));
        assert!(m.heartbeat("g", "consumer-1", 8, at(1)));
        // The same member on the same connection changes nothing; on a new one it does.
        assert!(!m.heartbeat("g", "consumer-2", 7, at(30)));
        assert_eq!(m.ids("g"), ["consumer-1", "consumer-2"]);
        assert_eq!(m.peers("g"), [8, 7]);
        // consumer-1 stays silent past the timeout; consumer-2 kept beating.
        assert_eq!(m.scan(at(120)), Vec::<String>::new());
        assert_eq!(m.scan(at(122)), ["g"]);
        assert_eq!(m.ids("g"), ["consumer-2"]);
        assert!(m.heartbeat("g", "consumer-2", 9, at(130)));
        assert_eq!(m.channel_closed(7), Vec::<String>::new());
        assert_eq!(m.channel_closed(9), ["g"]);
        assert!(m.ids("g").is_empty());
    }
}
