//! The runner: one scenario variant on one seed, on one system. It builds the world and
//! has the system add its hosts, fires the fault schedule at its simulated times, then
//! heals (every fault lifted, every host up, `heal` of settling), lets the system's clients
//! finish, and has it take the final read and hand over every replica's log for the
//! checkers.

use super::system::{Phase, RunError, System};
use super::timeline::Timeline;
use super::world::World;
use super::{derive_seed, faults, trace};
use crate::check::{self, Verdict};
use crate::history::facts::Facts;
use crate::history::final_state::FinalState;
use crate::history::{Event, History};
use crate::os::clock::SimTime;
use crate::os::disk::Disk;
use crate::scenario::model::{Settings, Variant};
use crate::types::HostName;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Runs one variant on one seed, on whichever system the variant names.
pub type Runner = fn(&Variant, u64, &RunOptions) -> Result<RunOutcome, RunError>;

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Which of the run's events to print to stderr.
    pub trace: trace::Print,
    /// Write every host's files after the run, where this says.
    pub dump_disks: Option<DumpDisks>,
}

/// `--dump-disks DIR`: every host's files after the run in `DIR/<host>/`, or, when the
/// command runs several variants, `DIR/<variant>/<host>/` (each run would otherwise
/// overwrite the last). Each run's files are written in a staging folder beside `DIR`
/// and renamed into place whole, so an interrupted dump leaves no half-written folder
/// to block the rerun; a staging folder left by one is removed first.
#[derive(Clone, Debug)]
pub struct DumpDisks {
    pub dir: PathBuf,
    pub per_variant: bool,
}

impl DumpDisks {
    /// Where the run of `variant` goes.
    pub fn target(&self, variant: &str) -> PathBuf {
        if self.per_variant {
            self.dir.join(variant)
        } else {
            self.dir.clone()
        }
    }

    /// Where the run of `variant` is written before it is renamed to its target.
    fn staging(&self, variant: &str) -> PathBuf {
        let name = self
            .dir
            .file_name()
            .map_or("dump".into(), |n| n.to_string_lossy());
        self.dir
            .with_file_name(format!(".{name}.hightide-partial"))
            .join(variant)
    }

    fn write(&self, variant: &str, disks: &BTreeMap<HostName, Disk>) -> std::io::Result<()> {
        let staging = self.staging(variant);
        if staging.exists() {
            std::fs::remove_dir_all(&staging)?;
        }
        for (host, disk) in disks {
            disk.dump_to(&staging.join(host.to_string()))?;
        }
        let target = self.target(variant);
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        // Over an empty directory a rename replaces it; the caller refused a full one.
        std::fs::rename(&staging, &target)?;
        if let Some(parent) = staging.parent() {
            // The staging parent is shared by the variants: the last one out removes it.
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }
}

/// How often the runner looks again whether every send has its outcome, after the heal.
const UNRESOLVED_POLL: Duration = Duration::from_millis(100);

/// Everything a run leaves behind.
pub struct RunOutcome {
    pub variant: String,
    pub seed: u64,
    pub history: Vec<Event>,
    pub final_state: FinalState,
    pub verdict: Verdict,
    /// `[expect]` failures of this run (expect_some is judged over all seeds).
    pub failures: Vec<String>,
    pub trace_hash: u64,
    pub sim_time: Duration,
    pub wall_time: Duration,
    pub timeline: Timeline,
}

/// Run one variant on one seed on the system `S`.
pub fn run<S: System>(
    variant: &Variant,
    seed: u64,
    options: &RunOptions,
) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    if options.trace != trace::Print::Nothing {
        // Runs print one after another: each under its own header, its clock from zero.
        eprintln!("\n=== {}, seed {seed} ===", variant.name);
    }
    let (result, hash) = trace::with_trace(options.trace, || simulate::<S>(variant, seed, options));
    let (history, final_state, timeline) = result?;
    let sim_time = timeline.duration + timeline.heal;
    let value_bytes = variant.settings.workload.value_bytes as usize;
    let verdict = check::check(
        &history,
        &final_state,
        value_bytes,
        &S::teller(&final_state.facts),
    );
    let failures = check::evaluate(&variant.expect, &verdict.counts);
    Ok(RunOutcome {
        variant: variant.name.clone(),
        seed,
        history,
        final_state,
        verdict,
        failures,
        trace_hash: hash.value(),
        sim_time,
        wall_time: started.elapsed(),
        timeline,
    })
}

type Simulated = (Vec<Event>, FinalState, Timeline);

/// One run of a system: build it, fire the schedule, heal, let its clients finish, read
/// it back.
fn simulate<S: System>(
    variant: &Variant,
    seed: u64,
    options: &RunOptions,
) -> Result<Simulated, RunError> {
    let settings = &variant.settings;
    let mut world = World::new(
        seed,
        settings.network.latency_min,
        settings.network.latency_max,
    );
    world.set_bandwidth(settings.network.bandwidth);
    let history = History::with_capacity(expected_events(settings));
    // What the cluster's programs record doing (elections, truncations, ...).
    let facts = Facts::default();
    let mut system = S::build(&mut world, settings, seed, &history, &facts);
    let view = system.view();
    let mut targets = StdRng::seed_from_u64(derive_seed(seed, "targets"));

    let schedule = faults::schedule(
        &settings.faults,
        settings.nemesis.as_ref(),
        &settings.cluster,
        settings.duration,
        seed,
    );
    let mut timeline = Timeline {
        duration: settings.duration,
        heal: settings.heal,
        ..Timeline::default()
    };
    let brokers = settings.cluster.broker_hosts();
    let mut phase = Phase {
        world: &mut world,
        leadership: &view,
        timeline: &mut timeline,
    };
    for fault in &schedule {
        let at = SimTime::after_start(fault.at);
        phase.advance(at)?;
        phase.timeline.faults.push((at, fault.action.to_string()));
        faults::apply(
            phase.world,
            &mut system,
            &mut targets,
            &facts,
            &brokers,
            fault,
        );
    }
    let end = SimTime::after_start(settings.duration);
    phase.advance(end)?;

    faults::heal(phase.world, &facts);
    phase.advance(end + settings.heal)?;
    // Producers finish first: the heal phase goes on while sends are unresolved, up to the
    // longest a producer can take to give up on the last of them. A producer that was
    // killed never answers its own, so then there is nothing to wait for.
    let give_up = end + system.give_up_after();
    let producers_run = |world: &World<'_>| {
        !world
            .stopped_hosts()
            .iter()
            .any(|h| matches!(h, HostName::Producer(_)))
    };
    while history.unresolved() > 0 && phase.elapsed() < give_up && producers_run(phase.world) {
        let next = (phase.elapsed() + UNRESOLVED_POLL).min(give_up);
        phase.advance(next)?;
    }
    let group = system.consume(&mut phase)?;
    timeline.heal = world.elapsed() - end;

    system.final_read(&mut world)?;
    if let Some(dump) = &options.dump_disks {
        dump.write(&variant.name, world.disks())?;
    }
    timeline.hosts = world.hosts().to_vec();
    timeline.host_changes = world.host_changes().to_vec();
    let mut final_state = system.collect(world, &facts);
    final_state.group = group;
    Ok((history.take_events(), final_state, timeline))
}

/// About how many events the workload records: an invoke and a completion per send, and
/// a read per send per consumer.
fn expected_events(settings: &Settings) -> usize {
    let w = &settings.workload;
    let by_rate = u64::from(w.producers) * u64::from(w.rate) * settings.duration.as_secs();
    let sends = w.messages.map_or(by_rate, |m| m.min(by_rate));
    let events = sends.saturating_mul(2 + u64::from(w.consumers));
    // Generous but bounded: a mistaken estimate costs a doubling, not gigabytes.
    usize::try_from(events + events / 16).map_or(1 << 24, |e| e.min(1 << 24))
}
