//! The seam between the harness and a broker system. The harness owns the loop, the
//! world, the fault schedule and the heal; a system owns its hosts and knows what its
//! roles mean. Each system implements [`System`] in its own folder (`kafka::system`), and
//! the runner is generic over it, as TigerBeetle's cluster harness takes the replica's
//! state machine as a parameter: the harness never names a system's internals.

use super::timeline::{LeadershipChange, Timeline};
use super::world::World;
use crate::check::Teller;
use crate::history::facts::{FactLog, Facts};
use crate::history::final_state::{FinalState, GroupFinal};
use crate::history::History;
use crate::os::clock::SimTime;
use crate::scenario::model::{Settings, Target};
use crate::types::{HostName, TopicPartition};
use rand::rngs::StdRng;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the simulation failed: {0}")]
    Simulation(String),
    #[error("writing --dump-disks: {0}")]
    Dump(#[from] std::io::Error),
}

/// How often the timeline samples the system's view of leadership.
const LEADERSHIP_SAMPLE: Duration = Duration::from_millis(10);

/// What a system provides to the harness, for one run.
pub trait System: Sized {
    /// A cheap handle on the system's view of who leads what, read between steps.
    type View: Leadership;

    /// Adds the system's hosts (servers, their controller, the workload's clients) to the
    /// world. Clients record into `history`; every program records what it does in `facts`.
    fn build(
        world: &mut World<'_>,
        settings: &Settings,
        seed: u64,
        history: &History,
        facts: &Facts,
    ) -> Self;

    /// The handle the harness samples for the timeline.
    fn view(&self) -> Self::View;

    /// The hosts a role names at this instant (`leader:T/P`, `followers:T/P`,
    /// `coordinator`, ...). `rng` is the run's stream for targets, for roles that pick one.
    fn resolve_role(&mut self, role: &Target, rng: &mut StdRng) -> Vec<HostName>;

    /// Asks `host` to stop cleanly; false when its software has no clean stop (the
    /// harness then kills it).
    fn shutdown(&mut self, host: HostName) -> bool;

    /// How long after the load ends a client may still take to learn every send's
    /// outcome: the heal goes on while sends are unresolved, up to this.
    fn give_up_after(&self) -> Duration;

    /// After the heal and the producers: the workload's consumers finish their part, if
    /// they have one to finish (a group processing up to the end of the log).
    fn consume(&mut self, phase: &mut Phase<'_, '_>) -> Result<Option<GroupFinal>, RunError>;

    /// The final read, by a reader host added for it, stepping the world until it is done.
    fn final_read(&mut self, world: &mut World<'_>) -> Result<(), RunError>;

    /// The end of the run: the final read as taken and each replica's log from its disk,
    /// with the facts the programs recorded. The world is consumed, its disks with it.
    fn collect(self, world: World<'_>, facts: &Facts) -> FinalState;

    /// The system's words for the checkers' examples, told from the facts of a run.
    fn teller(facts: &FactLog) -> impl Teller + '_;
}

/// Who leads each partition, as the system's controller sees it.
pub trait Leadership {
    /// Changes with every change of the view: an unchanged version needs no new sample.
    fn version(&self) -> u64;

    /// Each partition's leader, leader epoch and ISR now, stamped `now`.
    fn sample(&self, now: SimTime) -> Vec<LeadershipChange>;
}

/// The world stepped forward under the harness's eye: time advances, the timeline
/// samples the system's leadership on the way.
pub struct Phase<'p, 'w> {
    pub world: &'p mut World<'w>,
    pub leadership: &'p dyn Leadership,
    pub timeline: &'p mut Timeline,
}

impl Phase<'_, '_> {
    pub fn elapsed(&self) -> SimTime {
        self.world.elapsed()
    }

    /// Steps the world to `until`, sampling the system's leadership on the way.
    pub fn advance(&mut self, until: SimTime) -> Result<(), RunError> {
        let mut last: BTreeMap<TopicPartition, LeadershipChange> = BTreeMap::new();
        for change in &self.timeline.leadership {
            last.insert(change.tp.clone(), change.clone());
        }
        // The view only changes with its version: a sample of an unchanged one is skipped.
        let mut sampled_version = None;
        while self.world.elapsed() < until {
            self.world
                .step()
                .map_err(|e| RunError::Simulation(e.to_string()))?;
            let now = self.world.elapsed();
            if !now
                .since_start()
                .as_millis()
                .is_multiple_of(LEADERSHIP_SAMPLE.as_millis())
            {
                continue;
            }
            let version = self.leadership.version();
            if sampled_version == Some(version) {
                continue;
            }
            sampled_version = Some(version);
            for change in self.leadership.sample(now) {
                let seen = last.get(&change.tp);
                if seen.is_none_or(|c| {
                    c.leader != change.leader
                        || c.leader_epoch != change.leader_epoch
                        || c.isr != change.isr
                }) {
                    self.timeline.leadership.push(change.clone());
                    last.insert(change.tp.clone(), change);
                }
            }
        }
        Ok(())
    }
}
