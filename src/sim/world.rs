//! The simulated world: named hosts on a seeded turmoil network, each server host with a
//! disk that outlives its process, and the fault primitives scenarios use.
//!
//! ## Model
//! - One turmoil `Sim` per run, seeded from the run's seed, with a fixed epoch (so record
//!   timestamps do not depend on the wall clock), a 1 ms tick and the scenario's message
//!   latency. The world steps it tick by tick, so faults fire at exact simulated times, and
//!   publishes the simulated time to [`clock`] before every step.
//! - `kill` is turmoil's `crash`: the process's runtime is dropped and, as the kernel of a
//!   living machine would, its sockets send FIN. The disk is untouched.
//! - `power_loss` must not look like a clean close: before crashing, the host's links are
//!   cut, which drops in-flight messages and the FINs its sockets send while dying; they stay
//!   cut until it restarts, so peers see silence and time out, as with a machine that lost
//!   power. Then its disk loses its page cache per the power-loss model.
//! - turmoil holds messages to a crashed host until it restarts, so `connect` to it hangs:
//!   every network wait in hightide has a timeout.
//! - A network partition (`partition`, `isolate`) *holds* messages on the cut links, in
//!   flight and new, and delivers them when the cut heals. That is what TCP does for a
//!   connection across a partition that heals: it retransmits until the segments get
//!   through. turmoil has no retransmission, and a plain turmoil partition drops messages
//!   for good, which would leave a fetch or produce request unanswered until its 30 s
//!   request timeout, long after the network came back. A dead machine answers nothing, so
//!   a power cut drops instead.
//! - Network faults are kept as a set of cut host pairs and per-link extra latency, so that
//!   a power cut and a scenario partition on the same link compose and heal independently.

use crate::os::clock::{self, SimTime};
use crate::os::disk::Disk;
use crate::types::HostName;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};
use turmoil::{Builder, Sim};

/// The fixed epoch of every simulation: 2024-01-01T00:00:00Z.
pub const EPOCH_SECS: u64 = 1_704_067_200;

/// A change of a host's state, for the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostChange {
    pub time: SimTime,
    pub host: HostName,
    /// `None`: the host (re)started.
    pub stopped: Option<Stopped>,
}

/// Why a host is not running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    Killed,
    PowerLost,
    /// Its software returned: a controlled shutdown, or a broker whose log dir went offline.
    Exited,
}

pub struct World<'a> {
    sim: Sim<'a>,
    hosts: Vec<HostName>,
    /// Each host's address, to ask turmoil about it without a name lookup per tick.
    addrs: Vec<IpAddr>,
    disks: BTreeMap<HostName, Disk>,
    stopped: BTreeMap<HostName, Stopped>,
    /// Links cut by scenario faults (`partition`, `isolate`), as ordered pairs (a < b).
    cut: BTreeSet<(HostName, HostName)>,
    /// Hosts that lost power: all their links are down until they restart.
    unpowered: BTreeSet<HostName>,
    /// Extra latency on links slowed by `slow-link`.
    slow: BTreeMap<(HostName, HostName), Duration>,
    base_latency: (Duration, Duration),
    changes: Vec<HostChange>,
}

fn pair(a: HostName, b: HostName) -> (HostName, HostName) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl<'a> World<'a> {
    pub fn new(seed: u64, latency_min: Duration, latency_max: Duration) -> World<'a> {
        let sim = Builder::new()
            .rng_seed(seed)
            .epoch(SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH_SECS))
            .tick_duration(Duration::from_millis(1))
            .min_message_latency(latency_min)
            .max_message_latency(latency_max)
            .simulation_duration(Duration::from_secs(365 * 24 * 3600))
            .tcp_capacity(4096)
            .build();
        clock::set(SimTime::ZERO);
        World {
            sim,
            hosts: Vec::new(),
            addrs: Vec::new(),
            disks: BTreeMap::new(),
            stopped: BTreeMap::new(),
            cut: BTreeSet::new(),
            unpowered: BTreeSet::new(),
            slow: BTreeMap::new(),
            base_latency: (latency_min, latency_max),
            changes: Vec::new(),
        }
    }

    /// Register a host. `software` builds its program; it runs again from scratch on restart.
    pub fn add_host<F, Fut>(&mut self, name: HostName, disk: Option<Disk>, software: F)
    where
        F: Fn() -> Fut + 'a,
        Fut: Future<Output = turmoil::Result> + 'static,
    {
        self.sim.host(name.to_string(), software);
        self.hosts.push(name);
        self.addrs.push(self.sim.lookup(name.to_string()));
        if let Some(disk) = disk {
            self.disks.insert(name, disk);
        }
    }

    pub fn hosts(&self) -> &[HostName] {
        &self.hosts
    }

    pub fn disk(&self, host: HostName) -> Option<&Disk> {
        self.disks.get(&host)
    }

    pub fn disks(&self) -> &BTreeMap<HostName, Disk> {
        &self.disks
    }

    pub fn elapsed(&self) -> SimTime {
        SimTime::after_start(self.sim.elapsed())
    }

    /// Advance one tick: the network, every running host, then the disks' OS flushers.
    pub fn step(&mut self) -> turmoil::Result<()> {
        clock::set(self.elapsed());
        self.sim.step()?;
        let now = self.elapsed();
        clock::set(now);
        for disk in self.disks.values() {
            disk.writeback(now);
        }
        self.note_exits();
        Ok(())
    }

    /// Step until simulated time `until`.
    pub fn run_until(&mut self, until: SimTime) -> turmoil::Result<()> {
        while self.elapsed() < until {
            self.step()?;
        }
        Ok(())
    }

    /// Hosts whose software returned on its own are stopped (`Exited`).
    fn note_exits(&mut self) {
        for (&host, &addr) in self.hosts.iter().zip(&self.addrs) {
            if !self.stopped.contains_key(&host) && !self.sim.is_host_running(addr) {
                tracing::info!(host = %host, "host exited");
                self.stopped.insert(host, Stopped::Exited);
                self.changes.push(HostChange {
                    time: self.elapsed(),
                    host,
                    stopped: Some(Stopped::Exited),
                });
            }
        }
    }

    pub fn is_running(&self, host: HostName) -> bool {
        !self.stopped.contains_key(&host)
    }

    /// Every host stopped by a fault (the `crashed` target): killed or powered off, and
    /// servers that exited (a controlled shutdown, a log dir gone offline). A client that
    /// finished its work is not stopped by a fault.
    pub fn stopped_hosts(&self) -> Vec<HostName> {
        self.stopped
            .iter()
            .filter(|(host, why)| {
                let server = matches!(host, HostName::Controller | HostName::Broker(_));
                server || **why != Stopped::Exited
            })
            .map(|(host, _)| *host)
            .collect()
    }

    /// Process crash (SIGKILL): the page cache survives.
    pub fn kill(&mut self, host: HostName) {
        if !self.is_running(host) {
            return;
        }
        tracing::info!(host = %host, "kill");
        self.sim.crash(host.to_string());
        self.mark(host, Some(Stopped::Killed));
    }

    /// Machine crash: silence on the network, then the page cache is lost.
    pub fn power_loss(&mut self, host: HostName) {
        tracing::info!(host = %host, "power loss");
        self.unpowered.insert(host);
        self.apply_links_of(host);
        if self.is_running(host) {
            self.sim.crash(host.to_string());
        }
        if let Some(disk) = self.disks.get(&host) {
            disk.power_loss();
        }
        self.mark(host, Some(Stopped::PowerLost));
    }

    /// Start a stopped host again (a running host is left alone).
    pub fn restart(&mut self, host: HostName) {
        if self.is_running(host) {
            return;
        }
        tracing::info!(host = %host, "restart");
        self.mark(host, None);
        if self.unpowered.remove(&host) {
            self.apply_links_of(host);
        }
        if self.sim.is_host_running(host.to_string()) {
            self.sim.crash(host.to_string());
        }
        self.sim.bounce(host.to_string());
    }

    /// Every start and stop of a host so far.
    pub fn host_changes(&self) -> &[HostChange] {
        &self.changes
    }

    fn mark(&mut self, host: HostName, stopped: Option<Stopped>) {
        match stopped {
            Some(why) => self.stopped.insert(host, why),
            None => self.stopped.remove(&host),
        };
        self.changes.push(HostChange {
            time: self.elapsed(),
            host,
            stopped,
        });
    }

    /// Cut every link between hosts of different groups.
    pub fn partition(&mut self, groups: &[Vec<HostName>]) {
        tracing::info!(groups = ?groups, "partition");
        for (i, a_group) in groups.iter().enumerate() {
            for b_group in &groups[i + 1..] {
                for &a in a_group {
                    for &b in b_group {
                        if a != b {
                            self.cut.insert(pair(a, b));
                            self.apply_link(a, b);
                        }
                    }
                }
            }
        }
    }

    /// Cut every link of `host`.
    pub fn isolate(&mut self, host: HostName) {
        tracing::info!(host = %host, "isolate");
        for other in self.hosts.clone() {
            if other != host {
                self.cut.insert(pair(host, other));
                self.apply_link(host, other);
            }
        }
    }

    /// Restore every link cut by a fault and end every slowdown (power cuts stay).
    pub fn heal_network(&mut self) {
        tracing::info!("heal network");
        let cut = std::mem::take(&mut self.cut);
        for (a, b) in cut {
            self.apply_link(a, b);
        }
        let slow = std::mem::take(&mut self.slow);
        let (min, max) = self.base_latency;
        for (a, b) in slow.into_keys() {
            self.sim.set_link_latency(a.to_string(), b.to_string(), min);
            self.sim
                .set_link_max_message_latency(a.to_string(), b.to_string(), max);
        }
    }

    /// Add latency to one link (a lagging follower).
    pub fn slow_link(&mut self, a: HostName, b: HostName, latency: Duration) {
        tracing::info!(a = %a, b = %b, latency_ms = latency.as_millis() as u64, "slow link");
        self.slow.insert(pair(a, b), latency);
        self.sim
            .set_link_latency(a.to_string(), b.to_string(), latency);
        let max = latency + self.base_latency.1;
        self.sim
            .set_link_max_message_latency(a.to_string(), b.to_string(), max);
    }

    /// Make turmoil's link match the faults: dropped while either end has no power, held
    /// while cut, open (delivering what was held) otherwise.
    fn apply_link(&mut self, a: HostName, b: HostName) {
        let (x, y) = (a.to_string(), b.to_string());
        if self.unpowered.contains(&a) || self.unpowered.contains(&b) {
            self.sim.partition(x, y);
        } else if self.cut.contains(&pair(a, b)) {
            self.sim.hold(x, y);
        } else {
            self.sim.release(x, y);
        }
    }

    fn apply_links_of(&mut self, host: HostName) {
        for other in self.hosts.clone() {
            if other != host {
                self.apply_link(host, other);
            }
        }
    }
}
