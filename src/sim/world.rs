//! The simulated world: named hosts on a seeded turmoil network, each server host with a
//! disk that outlives its process, and the fault primitives scenarios use.
//!
//! ## Model
//! - One turmoil `Sim` per run, seeded from the run's seed, with a fixed epoch (so record
//!   timestamps do not depend on the wall clock), a 1 ms tick and the scenario's message
//!   latency. The world steps it tick by tick, so faults fire at exact simulated times, and
//!   publishes the simulated time to [`clock`] before every step.
//! - A host is a machine with a kernel and at most one process. `kill` ends the process
//!   (turmoil's `crash`): its sockets send FIN, as a living kernel closes them, and until
//!   it restarts the kernel answers RST to segments for them and refuses connections. A
//!   server whose software returned (a controlled shutdown, a log dir gone offline) is the
//!   same. The disk is untouched.
//! - `power_loss` stops the machine: see [`network`](super::network) for what its links do,
//!   then its disk loses its page cache per the power-loss model. A restart boots it again.
//! - Network faults (`partition`, `isolate`, `slow-link`) and power cuts are kept by the
//!   [`Network`], so that they compose on one link and heal independently.

use super::derive_seed;
use super::network::Network;
use crate::os::clock::{self, SimTime};
use crate::os::disk::Disk;
use crate::scenario::model::Settings;
use crate::types::HostName;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, SystemTime};
use turmoil::{Builder, Sim};

/// The fixed epoch of every simulation: 2024-01-01T00:00:00Z.
pub const EPOCH_SECS: u64 = 1_704_067_200;

/// A change of a host's state, for the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostChange {
    pub time: SimTime,
    pub host: HostName,
    /// `None`: the host (re)started, or resumed.
    pub stopped: Option<Stopped>,
}

/// Why a host is not running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    Killed,
    PowerLost,
    /// Its software returned: a controlled shutdown, or a broker whose log dir went offline.
    Exited,
    /// Its process is stopped (`pause`) until `resume`: recorded for the timeline only,
    /// never among the stopped hosts, since the process lives on.
    Paused,
}

pub struct World<'a> {
    sim: Sim<'a>,
    hosts: Vec<HostName>,
    /// Each host's address, to ask turmoil about it without a name lookup per tick.
    addrs: Vec<IpAddr>,
    /// Whether each host's process runs: when it does not, the host boots into a kernel
    /// with no process, which answers what arrives for the sockets that died.
    process: Vec<Rc<Cell<bool>>>,
    disks: BTreeMap<HostName, Disk>,
    stopped: BTreeMap<HostName, Stopped>,
    /// Running hosts whose process is stopped (`pause`) until a `resume`.
    paused: BTreeSet<HostName>,
    network: Network,
    changes: Vec<HostChange>,
    /// This world publishes the simulated time for its thread.
    _published: clock::Published,
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
            // turmoil has no TIME_WAIT and panics when a reused client port meets a
            // connection the server still holds; clients that open a connection per
            // partition wrapped its default 16,384 ports at 600 partitions.
            .ephemeral_ports(1024..=65535)
            .build();
        clock::set(SimTime::ZERO);
        World {
            sim,
            hosts: Vec::new(),
            addrs: Vec::new(),
            process: Vec::new(),
            disks: BTreeMap::new(),
            stopped: BTreeMap::new(),
            paused: BTreeSet::new(),
            network: Network::new(latency_min, latency_max),
            changes: Vec::new(),
            _published: clock::publish(),
        }
    }

    /// Register a host. `software` builds its program; it runs again from scratch on restart.
    pub fn add_host<F, Fut>(&mut self, name: HostName, disk: Option<Disk>, software: F)
    where
        F: Fn() -> Fut + 'a,
        Fut: Future<Output = turmoil::Result> + 'static,
    {
        let process = Rc::new(Cell::new(true));
        let runs = process.clone();
        self.sim.host(name.to_string(), move || {
            let software = runs.get().then(&software);
            async move {
                match software {
                    Some(software) => software.await,
                    None => std::future::pending().await,
                }
            }
        });
        let addr = self.sim.lookup(name.to_string());
        self.hosts.push(name);
        self.addrs.push(addr);
        self.process.push(process);
        self.network.add_host(&self.sim, name, addr);
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

    /// End the simulation and keep only the disks: every host's software is dropped with
    /// it, so each disk returned is its last handle and frees its pages when dropped.
    pub fn into_disks(self) -> BTreeMap<HostName, Disk> {
        let World { sim, disks, .. } = self;
        drop(sim);
        disks
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
        self.network.tick(&self.sim, now);
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

    /// Hosts whose software returned on its own are stopped (`Exited`); their kernels go on.
    fn note_exits(&mut self) {
        for i in 0..self.hosts.len() {
            let (host, addr) = (self.hosts[i], self.addrs[i]);
            if !self.stopped.contains_key(&host) && !self.sim.is_host_running(addr) {
                tracing::info!(host = %host, "host exited");
                self.boot(i, false);
                self.mark(host, Some(Stopped::Exited));
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
                let server = host.is_server();
                server || **why != Stopped::Exited
            })
            .map(|(host, _)| *host)
            .collect()
    }

    fn index(&self, host: HostName) -> usize {
        self.hosts
            .iter()
            .position(|&h| h == host)
            .expect("registered host")
    }

    /// Process crash (SIGKILL): the machine, its kernel and its page cache live on.
    pub fn kill(&mut self, host: HostName) {
        if !self.is_running(host) {
            return;
        }
        tracing::info!(host = %host, "kill");
        let i = self.index(host);
        self.boot(i, false);
        self.mark(host, Some(Stopped::Killed));
    }

    /// Process stop (SIGSTOP, a long GC pause): the process runs nothing until `resume`
    /// and its timers stand still; its kernel goes on, completing connects to it and
    /// buffering what arrives, as Linux does for a stopped process.
    pub fn pause(&mut self, host: HostName) {
        if !self.is_running(host) || !self.paused.insert(host) {
            return;
        }
        tracing::info!(host = %host, "pause");
        let i = self.index(host);
        self.sim.pause(self.addrs[i]);
        self.note_change(host, Some(Stopped::Paused));
    }

    /// Every paused host, for the heal phase to resume.
    pub fn paused_hosts(&self) -> Vec<HostName> {
        self.paused.iter().copied().collect()
    }

    /// The paused process goes on: its clock jumps to now, every timer that fell due
    /// while it was stopped fires at once, and it reads what waited for it.
    pub fn resume(&mut self, host: HostName) {
        if !self.paused.remove(&host) {
            return;
        }
        tracing::info!(host = %host, "resume");
        let i = self.index(host);
        self.sim.resume(self.addrs[i]);
        self.note_change(host, None);
    }

    /// Machine crash: what it sent arrives, then silence; the page cache is lost.
    pub fn power_loss(&mut self, host: HostName) {
        if self.stopped.get(&host) == Some(&Stopped::PowerLost) {
            return;
        }
        tracing::info!(host = %host, "power loss");
        let i = self.index(host);
        self.network.power_off(&self.sim, self.elapsed(), host);
        self.process[i].set(false);
        self.paused.remove(&host);
        self.sim.crash(self.addrs[i]);
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
        let i = self.index(host);
        self.network.power_on(&self.sim, self.elapsed(), host);
        self.boot(i, true);
    }

    /// Start host `i` afresh: with its software, or as a kernel without a process. Whatever
    /// ran there before is crashed first.
    fn boot(&mut self, i: usize, with_process: bool) {
        self.process[i].set(with_process);
        self.paused.remove(&self.hosts[i]);
        if self.sim.is_host_running(self.addrs[i]) {
            self.sim.crash(self.addrs[i]);
        }
        self.sim.bounce(self.addrs[i]);
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
        self.note_change(host, stopped);
    }

    fn note_change(&mut self, host: HostName, stopped: Option<Stopped>) {
        self.changes.push(HostChange {
            time: self.elapsed(),
            host,
            stopped,
        });
    }

    /// Cut every link between hosts of different groups.
    pub fn partition(&mut self, groups: &[Vec<HostName>]) {
        tracing::info!(groups = ?groups, "partition");
        self.network.partition(&self.sim, self.elapsed(), groups);
    }

    /// Cut every link of `host`.
    pub fn isolate(&mut self, host: HostName) {
        tracing::info!(host = %host, "isolate");
        self.network.isolate(&self.sim, self.elapsed(), host);
    }

    /// Restore every link cut by a fault and end every slowdown (power cuts stay).
    pub fn heal_network(&mut self) {
        tracing::info!("heal network");
        self.network.heal(&self.sim, self.elapsed());
    }

    /// Every link's bandwidth in bytes per second each way (`None`, the default: any
    /// amount at once). Set before adding hosts.
    pub fn set_bandwidth(&mut self, bandwidth: Option<u64>) {
        self.network.set_bandwidth(bandwidth);
    }

    /// Narrow one link to `bandwidth` bytes per second each way.
    pub fn narrow_link(&mut self, a: HostName, b: HostName, bandwidth: u64) {
        tracing::info!(a = %a, b = %b, bandwidth, "narrow link");
        self.network.narrow_link(&self.sim, a, b, bandwidth);
    }

    /// Add latency to one link (a lagging follower).
    pub fn slow_link(&mut self, a: HostName, b: HostName, latency: Duration) {
        tracing::info!(a = %a, b = %b, latency_ms = latency.as_millis() as u64, "slow link");
        self.network.slow_link(&self.sim, a, b, latency);
    }
}

/// A server host's disk for this run: the scenario's disk model, its own seeded stream.
pub fn disk_for(settings: &Settings, seed: u64, host: HostName) -> Disk {
    let disk = Disk::new(
        settings.disk.clone(),
        derive_seed(seed, &format!("disk/{host}")),
    );
    if settings.bugs.fsync_returns_early {
        disk.inject_lying_fsync();
    }
    if settings.bugs.power_loss_keeps_page_cache {
        disk.inject_cache_that_survives_power_loss();
    }
    if settings.bugs.journal_per_file {
        disk.inject_journal_per_file();
    }
    disk
}

/// Give the memory freed so far back to the OS. glibc keeps freed chunks resident, and a
/// dropped disk's pages are 4 KiB holes between other allocations, too small for the
/// records and indexes that the collection and the checkers allocate next: without this,
/// a run's peak memory held its logs twice, once as freed pages.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns glibc's free pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
