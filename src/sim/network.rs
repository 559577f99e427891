//! The network between the hosts: which links are cut, which machines have no power, which
//! links are slow, and what TCP does about it.
//!
//! ## Model
//! - A link is *closed* while a scenario partition cuts it or either end has no power.
//!   turmoil holds what is on a closed link, in flight and new, in both directions.
//! - Held segments stand for a sender's retransmissions. Each connection with a held
//!   segment is noted with the instant its first held segment was sent. When the link opens
//!   again, that connection's segments go out at its next retransmission instant
//!   ([`retransmit`]) after the opening, plus the link's latency; until then its newer
//!   segments wait in the receiver's reorder buffer, as TCP's do.
//! - A machine that loses power has already put its last packets on the wire: what it sent
//!   before the instant arrives (at once, up to one latency early). What it had held on a
//!   link already cut dies with it, and so do the FINs its dying sockets would send: its
//!   segments are purged, so peers hear nothing until they retransmit to its next boot and
//!   get RST.
//!
//! Approximations, and which way they lean:
//! - A segment a peer sends on an old connection *after* the host is back, while older
//!   segments of that connection still wait for their retransmission, reaches the host at
//!   once and draws RST: real TCP would queue it behind the retransmission. Failures of such
//!   connections are detected up to one retransmission interval early.
//! - Segments in flight when a link closes are held, though some had passed the point of
//!   the cut; they arrive at the first retransmission instead, a few ms late at best.

use super::retransmit::{self, Backoff};
use crate::os::clock::SimTime;
use crate::types::HostName;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use turmoil::{Protocol, Segment, Sim};

type Link = (HostName, HostName);
type Connection = (SocketAddr, SocketAddr);

/// The link between two hosts, ordered (a < b).
fn link(a: HostName, b: HostName) -> Link {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

/// A connection with segments nobody has acknowledged.
#[derive(Clone, Copy, Debug)]
struct Unacked {
    first_sent: SimTime,
    backoff: Backoff,
}

pub struct Network {
    hosts: Vec<HostName>,
    names: BTreeMap<IpAddr, HostName>,
    /// Links cut by scenario faults (`partition`, `isolate`).
    cut: BTreeSet<Link>,
    /// Machines without power.
    unpowered: BTreeSet<HostName>,
    /// Links turmoil holds now: cut, or with an unpowered end.
    closed: BTreeSet<Link>,
    /// Extra latency on links slowed by `slow-link`.
    slow: BTreeMap<Link, Duration>,
    base_latency: (Duration, Duration),
    /// Bytes per second every link carries each way (`None`: any amount at once), and the
    /// links a `slow-link` narrowed.
    base_bandwidth: Option<u64>,
    narrowed: BTreeSet<Link>,
    unacked: BTreeMap<Connection, Unacked>,
    /// Retransmissions to send on open links, by instant.
    due: BTreeSet<(SimTime, Connection)>,
}

impl Network {
    pub fn new(latency_min: Duration, latency_max: Duration) -> Network {
        Network {
            hosts: Vec::new(),
            names: BTreeMap::new(),
            cut: BTreeSet::new(),
            unpowered: BTreeSet::new(),
            closed: BTreeSet::new(),
            slow: BTreeMap::new(),
            base_latency: (latency_min, latency_max),
            base_bandwidth: None,
            narrowed: BTreeSet::new(),
            unacked: BTreeMap::new(),
            due: BTreeSet::new(),
        }
    }

    /// Every link's bandwidth; set before any host is added.
    pub fn set_bandwidth(&mut self, bandwidth: Option<u64>) {
        assert!(
            self.hosts.is_empty(),
            "the bandwidth is set before the hosts are"
        );
        self.base_bandwidth = bandwidth;
    }

    /// A host joins, with a link to each host before it.
    pub fn add_host(&mut self, sim: &Sim, name: HostName, addr: IpAddr) {
        if self.base_bandwidth.is_some() {
            for &other in &self.hosts {
                sim.set_link_bandwidth(name.to_string(), other.to_string(), self.base_bandwidth);
            }
        }
        self.hosts.push(name);
        self.names.insert(addr, name);
    }

    /// Per tick: note the connections that just had a segment held, and send the
    /// retransmissions that are due.
    pub fn tick(&mut self, sim: &Sim, now: SimTime) {
        if !self.closed.is_empty() {
            self.note_held(sim, now);
        }
        if self.due.first().is_some_and(|&(at, _)| at <= now) {
            self.retransmit_due(sim, now);
        }
    }

    /// Cut every link between hosts of different groups.
    pub fn partition(&mut self, sim: &Sim, now: SimTime, groups: &[Vec<HostName>]) {
        for (i, a_group) in groups.iter().enumerate() {
            for b_group in &groups[i + 1..] {
                for &a in a_group {
                    for &b in b_group {
                        if a != b {
                            self.cut.insert(link(a, b));
                            self.apply(sim, now, a, b);
                        }
                    }
                }
            }
        }
    }

    /// Cut every link of `host`.
    pub fn isolate(&mut self, sim: &Sim, now: SimTime, host: HostName) {
        for other in self.hosts.clone() {
            if other != host {
                self.cut.insert(link(host, other));
                self.apply(sim, now, host, other);
            }
        }
    }

    /// Restore every link cut by a fault and end every slowdown (power cuts stay).
    pub fn heal(&mut self, sim: &Sim, now: SimTime) {
        for (a, b) in std::mem::take(&mut self.cut) {
            self.apply(sim, now, a, b);
        }
        let (min, max) = self.base_latency;
        for (a, b) in std::mem::take(&mut self.slow).into_keys() {
            sim.set_link_latency(a.to_string(), b.to_string(), min);
            sim.set_link_max_message_latency(a.to_string(), b.to_string(), max);
        }
        for (a, b) in std::mem::take(&mut self.narrowed) {
            sim.set_link_bandwidth(a.to_string(), b.to_string(), self.base_bandwidth);
        }
    }

    /// Add latency to one link (a lagging follower).
    pub fn slow_link(&mut self, sim: &Sim, a: HostName, b: HostName, latency: Duration) {
        self.slow.insert(link(a, b), latency);
        sim.set_link_latency(a.to_string(), b.to_string(), latency);
        let max = latency + self.base_latency.1;
        sim.set_link_max_message_latency(a.to_string(), b.to_string(), max);
    }

    /// Narrow one link to `bandwidth` bytes per second each way.
    pub fn narrow_link(&mut self, sim: &Sim, a: HostName, b: HostName, bandwidth: u64) {
        self.narrowed.insert(link(a, b));
        sim.set_link_bandwidth(a.to_string(), b.to_string(), Some(bandwidth));
    }

    /// `host` loses power, before its software is crashed: what it already sent is on its
    /// way, everything else of its is silenced.
    pub fn power_off(&mut self, sim: &Sim, now: SimTime, host: HostName) {
        self.unpowered.insert(host);
        let names = &self.names;
        self.unacked.retain(|(src, _), _| names[&src.ip()] != host);
        self.due.retain(|(_, (src, _))| names[&src.ip()] != host);
        // On links that were open, what it sent is on the wire; on links already cut, its
        // retransmissions die with it.
        let mut open = BTreeSet::new();
        for other in self.hosts.clone() {
            if other == host {
                continue;
            }
            if self.closed.contains(&link(host, other)) {
                purge_from(sim, host, other);
            } else {
                open.insert(link(host, other));
                self.apply(sim, now, host, other);
            }
        }
        let names = &self.names;
        sim.links(|links| {
            for segments in links {
                let (a, b) = segments.pair();
                if !open.contains(&link(names[&a], names[&b])) {
                    continue;
                }
                for segment in segments {
                    if names[&segment.pair().0.ip()] == host {
                        segment.deliver();
                    }
                }
            }
        });
    }

    /// `host` has power again, before its software boots: the FINs and retransmissions of
    /// the machine that died are gone; its links open where nothing else cuts them.
    pub fn power_on(&mut self, sim: &Sim, now: SimTime, host: HostName) {
        if !self.unpowered.remove(&host) {
            return;
        }
        for other in self.hosts.clone() {
            if other != host {
                purge_from(sim, host, other);
                self.apply(sim, now, host, other);
            }
        }
    }

    fn latency_min(&self, l: Link) -> Duration {
        self.slow.get(&l).copied().unwrap_or(self.base_latency.0)
    }

    /// Make turmoil's link match the faults, holding it when it closes and scheduling its
    /// connections' retransmissions when it opens.
    fn apply(&mut self, sim: &Sim, now: SimTime, a: HostName, b: HostName) {
        let l = link(a, b);
        let closed =
            self.cut.contains(&l) || self.unpowered.contains(&a) || self.unpowered.contains(&b);
        let (x, y) = (a.to_string(), b.to_string());
        if closed {
            // Also after a purge, which leaves one direction dropping.
            sim.hold(x, y);
            if self.closed.insert(l) {
                self.due.retain(|(_, (src, dst))| {
                    link(self.names[&src.ip()], self.names[&dst.ip()]) != l
                });
                self.note_held(sim, now);
            }
        } else {
            sim.repair(x, y);
            if self.closed.remove(&l) {
                let latency = self.latency_min(l);
                for (&connection, unacked) in &self.unacked {
                    let (src, dst) = connection;
                    if link(self.names[&src.ip()], self.names[&dst.ip()]) == l {
                        let at = unacked.backoff.next_at_or_after(unacked.first_sent, now);
                        self.due.insert((at + latency, connection));
                    }
                }
            }
        }
    }

    /// Note each connection with a segment held on a closed link, from a powered sender.
    fn note_held(&mut self, sim: &Sim, now: SimTime) {
        let Network {
            names,
            closed,
            unpowered,
            unacked,
            ..
        } = self;
        sim.links(|links| {
            for segments in links {
                let (a, b) = segments.pair();
                if !closed.contains(&link(names[&a], names[&b])) {
                    continue;
                }
                for segment in segments {
                    let connection = segment.pair();
                    if unpowered.contains(&names[&connection.0.ip()]) {
                        continue;
                    }
                    let backoff = match segment.protocol() {
                        Protocol::Tcp(Segment::Syn(_)) => retransmit::SYN,
                        _ => retransmit::DATA,
                    };
                    unacked.entry(connection).or_insert(Unacked {
                        first_sent: now,
                        backoff,
                    });
                }
            }
        });
    }

    /// Send every due retransmission: its connection's held segments go on the wire.
    fn retransmit_due(&mut self, sim: &Sim, now: SimTime) {
        let mut sending = BTreeSet::new();
        while let Some(&(at, connection)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            self.unacked.remove(&connection);
            sending.insert(connection);
        }
        sim.links(|links| {
            for segments in links {
                for segment in segments {
                    if sending.contains(&segment.pair()) {
                        segment.deliver();
                    }
                }
            }
        });
    }
}

/// Drop every segment `from` has on the link to `to`, in flight or held.
fn purge_from(sim: &Sim, from: HostName, to: HostName) {
    sim.partition_oneway(from.to_string(), to.to_string());
}
