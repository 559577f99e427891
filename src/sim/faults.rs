//! The faults of a run: the schedule (the scenario's script plus the nemesis's draws, as
//! one time-ordered list), each fault fired on the world as its time comes, and the heal.
//! The nemesis draws from the seed alone, never from the variant's settings, so every
//! variant of a seed meets the same faults.

use super::system::System;
use super::world::World;
use crate::history::facts::{Fact, Facts};
use crate::os::disk::DiskFault;
use crate::scenario::model::{
    added_latency, Cluster, CorruptRegion, Fault, FaultAction, Nemesis, NemesisAction, Target,
};
use crate::types::HostName;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// Every fault of a run, sorted by time (scripted faults first among equals, in file
/// order), each scripted fault with a jitter at the instant this seed draws for it.
pub fn schedule(
    scripted: &[Fault],
    nemesis: Option<&Nemesis>,
    cluster: &Cluster,
    duration: Duration,
    seed: u64,
) -> Vec<Fault> {
    let mut faults: Vec<Fault> = scripted
        .iter()
        .map(|fault| Fault {
            at: instant(fault, seed),
            jitter: Duration::ZERO,
            action: fault.action.clone(),
        })
        .collect();
    if let Some(nemesis) = nemesis {
        faults.extend(nemesis_episodes(nemesis, cluster, duration, seed).concat());
    }
    faults.sort_by_key(|fault| fault.at);
    faults
}

/// When a scripted fault fires on `seed`: at `at`, or at a millisecond drawn uniformly
/// within `at ± jitter` (not before the start). Each fault draws from its own stream,
/// named by what it is, so removing or moving another fault (as the shrinker does) leaves
/// its instant where it was.
pub fn instant(fault: &Fault, seed: u64) -> Duration {
    if fault.jitter.is_zero() {
        return fault.at;
    }
    let label = format!("jitter {}ms {}", fault.at.as_millis(), fault.action);
    let mut rng = StdRng::seed_from_u64(super::derive_seed(seed, &label));
    let lo = fault.at.saturating_sub(fault.jitter).as_millis() as u64;
    let hi = (fault.at + fault.jitter).as_millis() as u64;
    let at = Duration::from_millis(rng.random_range(lo..=hi));
    debug_assert!(at + fault.jitter >= fault.at && at <= fault.at + fault.jitter);
    at
}

/// An exponentially distributed delay with the given mean, at millisecond resolution.
fn exponential(rng: &mut StdRng, mean: Duration) -> Duration {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    let ms = -(mean.as_millis() as f64) * u.ln();
    Duration::from_millis(ms.round().max(1.0) as u64)
}

fn broker(rng: &mut StdRng, brokers: &[HostName]) -> HostName {
    brokers[rng.random_range(0..brokers.len())]
}

fn host(name: HostName) -> Target {
    Target::Host(name)
}

/// The faults `[nemesis]` draws, one episode at a time: a fault and what undoes it (when
/// that falls within the run), each episode over before the next begins.
pub fn nemesis_episodes(
    nemesis: &Nemesis,
    cluster: &Cluster,
    duration: Duration,
    seed: u64,
) -> Vec<Vec<Fault>> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7321);
    let mut episodes = Vec::new();
    let brokers = &cluster.broker_hosts()[..];
    if nemesis.actions.is_empty() || brokers.is_empty() {
        return episodes;
    }
    let mut at = exponential(&mut rng, nemesis.interval);
    while at < duration {
        let action = nemesis.actions[rng.random_range(0..nemesis.actions.len())];
        let victim = broker(&mut rng, brokers);
        let (fault, undo) = match action {
            NemesisAction::Kill => (
                FaultAction::Kill(host(victim)),
                FaultAction::Restart(host(victim)),
            ),
            NemesisAction::PowerLoss => (
                FaultAction::PowerLoss(host(victim)),
                FaultAction::Restart(host(victim)),
            ),
            NemesisAction::Shutdown => (
                FaultAction::Shutdown(host(victim)),
                FaultAction::Restart(host(victim)),
            ),
            NemesisAction::Pause => (
                FaultAction::Pause(host(victim)),
                FaultAction::Resume(host(victim)),
            ),
            NemesisAction::Isolate => (FaultAction::Isolate(host(victim)), FaultAction::Heal),
            NemesisAction::Partition => {
                let mut one = Vec::new();
                let mut other = vec![host(cluster.metadata_host())];
                for &b in brokers {
                    let joins_victim = b == victim || rng.random_bool(0.5);
                    let side = if joins_victim { &mut one } else { &mut other };
                    side.push(host(b));
                }
                (
                    FaultAction::Partition(vec![Target::List(one), Target::List(other)]),
                    FaultAction::Heal,
                )
            }
            NemesisAction::SlowLink => {
                let peer = broker(&mut rng, brokers);
                let latency = Duration::from_millis(rng.random_range(50..=500));
                (
                    FaultAction::SlowLink {
                        between: (host(victim), host(peer)),
                        latency,
                        bandwidth: None,
                    },
                    FaultAction::Heal,
                )
            }
            NemesisAction::SlowDisk => {
                let latency = Duration::from_millis(rng.random_range(10..=200));
                (
                    FaultAction::SlowDisk {
                        target: host(victim),
                        latency,
                        throughput: None,
                    },
                    FaultAction::HealDisk(host(victim)),
                )
            }
            NemesisAction::FsyncError => (
                FaultAction::FsyncError(host(victim)),
                FaultAction::HealDisk(host(victim)),
            ),
            NemesisAction::DiskFull => (
                FaultAction::DiskFull(host(victim)),
                FaultAction::HealDisk(host(victim)),
            ),
        };
        let until = at + exponential(&mut rng, nemesis.recover);
        let mut episode = vec![Fault {
            at,
            jitter: Duration::ZERO,
            action: fault,
        }];
        if until < duration {
            episode.push(Fault {
                at: until,
                jitter: Duration::ZERO,
                action: undo,
            });
            // A broker whose log dir went offline stopped itself: bring it back too.
            if matches!(action, NemesisAction::FsyncError | NemesisAction::DiskFull) {
                episode.push(Fault {
                    at: until,
                    jitter: Duration::ZERO,
                    action: FaultAction::Restart(host(victim)),
                });
            }
        }
        episodes.push(episode);
        at = until.max(at) + exponential(&mut rng, nemesis.interval);
    }
    episodes
}

/// Resolve a target to hosts at this instant: names, lists and the harness's own sets
/// here, a system's roles (`leader:T/P`, `coordinator`, ...) by the system.
fn resolve<S: System>(
    world: &World<'_>,
    system: &mut S,
    rng: &mut StdRng,
    brokers: &[HostName],
    target: &Target,
) -> Vec<HostName> {
    match target {
        Target::Host(host) => vec![*host],
        Target::List(targets) => targets
            .iter()
            .flat_map(|t| resolve(world, system, rng, brokers, t))
            .collect(),
        Target::Brokers => brokers.to_vec(),
        Target::Crashed => world.stopped_hosts(),
        Target::RandomBroker => vec![broker(rng, brokers)],
        Target::Leader(_)
        | Target::Followers(_)
        | Target::Follower(_)
        | Target::Coordinator
        | Target::TxnCoordinator
        | Target::Master(_) => system.resolve_role(target, rng),
    }
}

/// Fire one fault of the schedule, and record it as a fact with the hosts it struck.
pub fn apply<S: System>(
    world: &mut World<'_>,
    system: &mut S,
    rng: &mut StdRng,
    facts: &Facts,
    brokers: &[HostName],
    fault: &Fault,
) {
    let mut struck = Vec::new();
    let mut hosts = |world: &World<'_>, target: &Target| {
        let hosts = resolve(world, system, rng, brokers, target);
        if hosts.is_empty() {
            tracing::info!(target = %target, "fault target resolves to no host now");
        }
        struck.extend_from_slice(&hosts);
        hosts
    };
    match &fault.action {
        FaultAction::Kill(t) => hosts(world, t).into_iter().for_each(|h| world.kill(h)),
        FaultAction::PowerLoss(t) => hosts(world, t)
            .into_iter()
            .for_each(|h| world.power_loss(h)),
        FaultAction::Restart(t) => hosts(world, t).into_iter().for_each(|h| world.restart(h)),
        FaultAction::Pause(t) => hosts(world, t).into_iter().for_each(|h| world.pause(h)),
        FaultAction::Resume(t) => hosts(world, t).into_iter().for_each(|h| world.resume(h)),
        FaultAction::Shutdown(t) => {
            for host in hosts(world, t) {
                if !system.shutdown(host) {
                    world.kill(host);
                }
            }
        }
        FaultAction::Partition(groups) => {
            let groups: Vec<Vec<HostName>> = groups.iter().map(|g| hosts(world, g)).collect();
            world.partition(&groups);
        }
        FaultAction::Isolate(t) => hosts(world, t).into_iter().for_each(|h| world.isolate(h)),
        FaultAction::Heal => world.heal_network(),
        FaultAction::SlowLink {
            between,
            latency,
            bandwidth,
        } => {
            let (a, b) = (hosts(world, &between.0), hosts(world, &between.1));
            for &x in &a {
                for &y in &b {
                    if x == y {
                        continue;
                    }
                    if let Some(latency) = added_latency(*latency, *bandwidth) {
                        world.slow_link(x, y, latency);
                    }
                    if let Some(bytes_per_second) = bandwidth {
                        world.narrow_link(x, y, *bytes_per_second);
                    }
                }
            }
        }
        FaultAction::SlowDisk {
            target,
            latency,
            throughput,
        } => {
            let struck = hosts(world, target);
            if let Some(latency) = added_latency(*latency, *throughput) {
                inject(world, struck.clone(), DiskFault::Slow(latency));
            }
            if let Some(bytes_per_second) = throughput {
                inject(world, struck, DiskFault::Throughput(*bytes_per_second));
            }
        }
        FaultAction::HealDisk(t) => inject(world, hosts(world, t), DiskFault::Heal),
        FaultAction::FsyncError(t) => inject(world, hosts(world, t), DiskFault::FsyncError),
        FaultAction::DiskFull(t) => inject(world, hosts(world, t), DiskFault::Full),
        FaultAction::Corrupt {
            target,
            file,
            bytes,
            region,
        } => {
            let (glob, bytes) = (file.clone(), *bytes);
            let fault = match region {
                CorruptRegion::Tail => DiskFault::Corrupt { glob, bytes },
                CorruptRegion::Anywhere => DiskFault::CorruptAnywhere { glob, bytes },
            };
            inject(world, hosts(world, target), fault)
        }
    }
    struck.sort_unstable();
    struck.dedup();
    facts.record(Fact::Fault {
        what: fault.action.to_string(),
        hosts: struck,
    });
}

fn inject(world: &World<'_>, hosts: Vec<HostName>, fault: DiskFault) {
    for host in hosts {
        if let Some(disk) = world.disk(host) {
            tracing::info!(host = %host, fault = ?fault, "disk fault");
            if let Err(error) = disk.inject(fault.clone()) {
                tracing::info!(host = %host, %error, "disk fault not applied");
            }
        }
    }
}

/// The heal phase: every fault lifted, every host up.
pub fn heal(world: &mut World<'_>, facts: &Facts) {
    tracing::info!("heal phase");
    facts.record(Fact::Fault {
        what: "heal phase: every fault lifted, every host up".to_string(),
        hosts: world.stopped_hosts(),
    });
    world.heal_network();
    for host in world.hosts().to_vec() {
        if let Some(disk) = world.disk(host) {
            let _ = disk.inject(DiskFault::Heal);
        }
    }
    for host in world.paused_hosts() {
        world.resume(host);
    }
    for host in world.stopped_hosts() {
        world.restart(host);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three Kafka brokers.
    fn cluster() -> Cluster {
        Cluster {
            system: crate::scenario::model::SystemName::Kafka,
            brokers: 3,
            topics: Vec::new(),
            kafka: crate::config::kafka::Release::NEWEST,
            rocketmq: crate::config::rocketmq::Release::NEWEST,
            groups: 1,
            replicas: 1,
        }
    }

    fn nemesis() -> Nemesis {
        Nemesis {
            actions: vec![
                NemesisAction::Kill,
                NemesisAction::Partition,
                NemesisAction::FsyncError,
            ],
            interval: Duration::from_secs(5),
            recover: Duration::from_secs(3),
        }
    }

    #[test]
    fn nemesis_is_a_function_of_the_seed() {
        let a = schedule(
            &[],
            Some(&nemesis()),
            &cluster(),
            Duration::from_secs(60),
            7,
        );
        let b = schedule(
            &[],
            Some(&nemesis()),
            &cluster(),
            Duration::from_secs(60),
            7,
        );
        let c = schedule(
            &[],
            Some(&nemesis()),
            &cluster(),
            Duration::from_secs(60),
            8,
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(!a.is_empty());
    }

    #[test]
    fn faults_are_time_ordered_and_within_the_run() {
        let scripted = vec![Fault {
            at: Duration::from_secs(10),
            jitter: Duration::ZERO,
            action: FaultAction::Heal,
        }];
        let all = schedule(
            &scripted,
            Some(&nemesis()),
            &cluster(),
            Duration::from_secs(60),
            1,
        );
        assert!(all.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(all.iter().all(|f| f.at < Duration::from_secs(60)));
        assert!(all.contains(&scripted[0]));
    }

    #[test]
    fn a_jittered_fault_fires_within_its_window_at_an_instant_of_its_own_per_seed() {
        let fault = |at: u64, jitter: u64, action: FaultAction| Fault {
            at: Duration::from_millis(at),
            jitter: Duration::from_millis(jitter),
            action,
        };
        let kill = fault(8_000, 500, FaultAction::Kill(host(HostName::Broker(1))));
        let instants: Vec<Duration> = (0..200).map(|seed| instant(&kill, seed)).collect();
        assert!(instants
            .iter()
            .all(|at| (7_500..=8_500).contains(&(at.as_millis() as u64))));
        let distinct: std::collections::BTreeSet<_> = instants.iter().collect();
        assert!(distinct.len() > 100, "{} distinct instants", distinct.len());
        assert!(instants.iter().any(|at| at.as_millis() < 7_700));
        assert!(instants.iter().any(|at| at.as_millis() > 8_300));
        // Another fault in the schedule does not move it; a fault without jitter is exact.
        let heal = fault(3_000, 0, FaultAction::Heal);
        let alone = schedule(
            std::slice::from_ref(&kill),
            None,
            &cluster(),
            Duration::from_secs(60),
            9,
        );
        let with = schedule(
            &[heal.clone(), kill.clone()],
            None,
            &cluster(),
            Duration::from_secs(60),
            9,
        );
        assert_eq!(alone[0].at, instant(&kill, 9));
        assert_eq!(with[1].at, alone[0].at);
        assert_eq!(with[0].at, heal.at);
        // Near the start, the window is cut at zero.
        let early = fault(100, 500, FaultAction::Heal);
        assert!((0..40).all(|seed| instant(&early, seed) <= Duration::from_millis(600)));
    }
}
