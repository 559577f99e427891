//! The fault schedule of a run: the scenario's script plus the nemesis's draws, as one
//! time-ordered list. The nemesis draws from the seed alone, never from the variant's
//! settings, so every variant of a seed meets the same faults.

use crate::scenario::model::{Fault, FaultAction, Nemesis, NemesisAction, Target};
use crate::types::HostName;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// Every fault of a run, sorted by time (scripted faults first among equals, in file order).
pub fn schedule(
    scripted: &[Fault],
    nemesis: Option<&Nemesis>,
    brokers: u32,
    duration: Duration,
    seed: u64,
) -> Vec<Fault> {
    let mut faults = scripted.to_vec();
    if let Some(nemesis) = nemesis {
        faults.extend(nemesis_episodes(nemesis, brokers, duration, seed).concat());
    }
    faults.sort_by_key(|fault| fault.at);
    faults
}

/// An exponentially distributed delay with the given mean, at millisecond resolution.
fn exponential(rng: &mut StdRng, mean: Duration) -> Duration {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    let ms = -(mean.as_millis() as f64) * u.ln();
    Duration::from_millis(ms.round().max(1.0) as u64)
}

fn broker(rng: &mut StdRng, brokers: u32) -> HostName {
    HostName::Broker(rng.random_range(1..=brokers))
}

fn host(name: HostName) -> Target {
    Target::Host(name)
}

/// The faults `[nemesis]` draws, one episode at a time: a fault and what undoes it (when
/// that falls within the run), each episode over before the next begins.
pub fn nemesis_episodes(
    nemesis: &Nemesis,
    brokers: u32,
    duration: Duration,
    seed: u64,
) -> Vec<Vec<Fault>> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7321);
    let mut episodes = Vec::new();
    if nemesis.actions.is_empty() || brokers == 0 {
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
            NemesisAction::Isolate => (FaultAction::Isolate(host(victim)), FaultAction::Heal),
            NemesisAction::Partition => {
                let mut one = Vec::new();
                let mut other = vec![host(HostName::Controller)];
                for b in 1..=brokers {
                    let joins_victim = HostName::Broker(b) == victim || rng.random_bool(0.5);
                    let side = if joins_victim { &mut one } else { &mut other };
                    side.push(host(HostName::Broker(b)));
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
        let mut episode = vec![Fault { at, action: fault }];
        if until < duration {
            episode.push(Fault {
                at: until,
                action: undo,
            });
            // A broker whose log dir went offline stopped itself: bring it back too.
            if matches!(action, NemesisAction::FsyncError | NemesisAction::DiskFull) {
                episode.push(Fault {
                    at: until,
                    action: FaultAction::Restart(host(victim)),
                });
            }
        }
        episodes.push(episode);
        at = until.max(at) + exponential(&mut rng, nemesis.interval);
    }
    episodes
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let a = schedule(&[], Some(&nemesis()), 3, Duration::from_secs(60), 7);
        let b = schedule(&[], Some(&nemesis()), 3, Duration::from_secs(60), 7);
        let c = schedule(&[], Some(&nemesis()), 3, Duration::from_secs(60), 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(!a.is_empty());
    }

    #[test]
    fn faults_are_time_ordered_and_within_the_run() {
        let scripted = vec![Fault {
            at: Duration::from_secs(10),
            action: FaultAction::Heal,
        }];
        let all = schedule(&scripted, Some(&nemesis()), 3, Duration::from_secs(60), 1);
        assert!(all.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(all.iter().all(|f| f.at < Duration::from_secs(60)));
        assert!(all.contains(&scripted[0]));
    }
}
