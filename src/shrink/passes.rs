//! The shrink passes over one run's faults and settings. Each pass proposes candidates in
//! the order it prefers them (smallest first) and keeps the first that still fails.

use super::{first_failing, flatten, Candidate, Error, Options, Step};
use crate::check::Expectation;
use crate::scenario::format_duration;
use crate::scenario::model::{Fault, FaultAction, Settings, Target, Variant, Workload};
use crate::types::HostName;
use std::time::Duration;

/// A gap (between a fault and its undo, or between episodes) not worth halving further.
const FINEST: Duration = Duration::from_millis(200);

pub(super) struct Shrinker<'a, F> {
    base: &'a Variant,
    seed: u64,
    goal: Expectation,
    units: Vec<Vec<Fault>>,
    settings: Settings,
    threads: usize,
    max_runs: usize,
    kept_workload: bool,
    on_step: F,
    pub(super) count: u64,
    pub(super) runs: usize,
    pub(super) steps: Vec<Step>,
    pub(super) out_of_runs: bool,
    pub(super) original_faults: usize,
}

impl<'a, F: FnMut(&Step)> Shrinker<'a, F> {
    pub(super) fn new(
        base: &'a Variant,
        seed: u64,
        goal: Expectation,
        units: Vec<Vec<Fault>>,
        options: &Options,
        kept_workload: bool,
        on_step: F,
    ) -> Self {
        let mut settings = base.settings.clone();
        settings.nemesis = None;
        settings.faults = flatten(&units);
        Shrinker {
            base,
            seed,
            goal,
            original_faults: settings.faults.len(),
            units,
            settings,
            threads: options.threads.max(1),
            // The original run and its draws written out are spent whatever the budget.
            max_runs: options.max_runs.max(2),
            kept_workload,
            on_step,
            count: 0,
            runs: 1,
            steps: Vec::new(),
            out_of_runs: false,
        }
    }

    /// The shrunk variant as it stands.
    pub(super) fn variant(&self) -> Variant {
        Variant {
            settings: self.settings.clone(),
            ..self.base.clone()
        }
    }

    /// Replace the nemesis by its draws, written out, and check that the run is the same.
    pub(super) fn explicit(&mut self, original: u64) -> Result<(), Error> {
        let draws = self.settings.faults.len() - self.base.settings.faults.len();
        let change = match (&self.base.settings.nemesis, draws) {
            (None, _) => "the scenario's faults as written".to_owned(),
            (Some(_), draws) => format!("the nemesis's {draws} draws written out as faults"),
        };
        let candidate = self.candidate(self.units.clone(), self.settings.clone(), change);
        if self.try_all(vec![candidate])?.is_none() {
            return Err(Error::NotReplayed(format!(
                "the nemesis's draws written out do not fail as the nemesis did ({} {original})",
                crate::check::count_name(self.goal.count)
            )));
        }
        if self.count != original {
            return Err(Error::NotReplayed(format!(
                "the nemesis's draws written out give {} {} where the nemesis gave {original}",
                crate::check::count_name(self.goal.count),
                self.count
            )));
        }
        Ok(())
    }

    /// Every pass, again and again, until a round changes nothing or the runs run out.
    pub(super) fn run_passes(&mut self) -> Result<(), Error> {
        loop {
            let before = self.steps.len();
            self.drop_units()?;
            self.drop_single_faults()?;
            self.narrow_lists()?;
            self.shorten_episodes()?;
            self.move_earlier()?;
            if !self.kept_workload {
                self.cut_duration()?;
                self.lower_workload()?;
                self.lower_cluster()?;
            }
            if self.steps.len() == before || self.out_of_runs {
                return Ok(());
            }
        }
    }

    fn candidate(
        &self,
        units: Vec<Vec<Fault>>,
        mut settings: Settings,
        change: String,
    ) -> Candidate {
        settings.faults = flatten(&units);
        Candidate {
            units,
            settings,
            change,
        }
    }

    /// Run the candidates and keep the first that fails; which one it was.
    fn try_all(&mut self, mut candidates: Vec<Candidate>) -> Result<Option<usize>, Error> {
        let left = self.max_runs.saturating_sub(self.runs);
        if candidates.len() > left {
            candidates.truncate(left);
            self.out_of_runs = true;
        }
        if candidates.is_empty() {
            return Ok(None);
        }
        let (found, spent) =
            first_failing(self.base, self.seed, &self.goal, &candidates, self.threads)?;
        self.runs += spent;
        let Some((i, count)) = found else {
            return Ok(None);
        };
        let chosen = candidates.swap_remove(i);
        self.units = chosen.units;
        self.settings = chosen.settings;
        self.count = count;
        let step = Step {
            run: self.runs,
            change: chosen.change,
            faults: self.settings.faults.len(),
            count,
        };
        (self.on_step)(&step);
        self.steps.push(step);
        Ok(Some(i))
    }

    /// Delta debugging over episodes: drop chunks of half of them, then of a quarter, and
    /// so on down to one; a chunk that can go goes, and the same size is tried again there.
    fn drop_units(&mut self) -> Result<(), Error> {
        let mut size = self.units.len().div_ceil(2);
        while size > 0 && !self.out_of_runs {
            let mut start = 0;
            loop {
                let candidates: Vec<Candidate> = (start..self.units.len())
                    .step_by(size)
                    .map(|from| {
                        let to = (from + size).min(self.units.len());
                        let mut units = self.units.clone();
                        let dropped: Vec<Vec<Fault>> = units.drain(from..to).collect();
                        self.candidate(units, self.settings.clone(), dropped_text(&dropped))
                    })
                    .collect();
                match self.try_all(candidates)? {
                    // The chunk there went; its successors moved up into its place.
                    Some(k) => start += k * size,
                    None => break,
                }
            }
            size /= 2;
        }
        Ok(())
    }

    /// One fault of an episode (an undo, say) at a time.
    fn drop_single_faults(&mut self) -> Result<(), Error> {
        loop {
            let mut candidates = Vec::new();
            for (u, unit) in self.units.iter().enumerate() {
                if unit.len() < 2 {
                    continue;
                }
                for f in 0..unit.len() {
                    let mut units = self.units.clone();
                    let fault = units[u].remove(f);
                    let change = format!("dropped {}", fault_text(&fault));
                    candidates.push(self.candidate(units, self.settings.clone(), change));
                }
            }
            if self.try_all(candidates)?.is_none() {
                return Ok(());
            }
        }
    }

    /// A host or role leaves a target list (`["leader:orders/0", "follower:orders/0"]`),
    /// in every fault of its episode at once so that an undo still undoes what its fault
    /// did; a list never empties, and a list of one becomes that one target.
    fn narrow_lists(&mut self) -> Result<(), Error> {
        loop {
            let mut candidates = Vec::new();
            for (u, unit) in self.units.iter().enumerate() {
                for member in list_members(unit) {
                    let mut units = self.units.clone();
                    for fault in &mut units[u] {
                        for target in fault.action.targets_mut() {
                            leave_out(target, &member);
                        }
                    }
                    let change = format!("{member} left out of {}", fault_text(&unit[0]));
                    candidates.push(self.candidate(units, self.settings.clone(), change));
                }
            }
            if self.try_all(candidates)?.is_none() {
                return Ok(());
            }
        }
    }

    /// An episode's undo comes sooner: half its length, while it still fails.
    fn shorten_episodes(&mut self) -> Result<(), Error> {
        loop {
            let mut candidates = Vec::new();
            for (u, unit) in self.units.iter().enumerate() {
                let Some((start, rest)) = unit.split_first() else {
                    continue;
                };
                let Some(end) = rest.iter().map(|f| f.at).max() else {
                    continue;
                };
                let length = end.saturating_sub(start.at);
                if length < FINEST {
                    continue;
                }
                let shorter = millis(length / 2);
                let mut units = self.units.clone();
                for fault in &mut units[u][1..] {
                    fault.at = start.at + shorter;
                }
                let change = format!(
                    "{} lasts {} instead of {}",
                    fault_text(start),
                    format_duration(shorter),
                    format_duration(length)
                );
                candidates.push(self.candidate(units, self.settings.clone(), change));
            }
            if self.try_all(candidates)?.is_none() {
                return Ok(());
            }
        }
    }

    /// An episode starts halfway to the one before it (or to the start of the run), so
    /// that less run comes before the failure.
    fn move_earlier(&mut self) -> Result<(), Error> {
        loop {
            let mut starts: Vec<(Duration, usize)> = self
                .units
                .iter()
                .enumerate()
                .filter_map(|(u, unit)| unit.first().map(|f| (f.at, u)))
                .collect();
            starts.sort();
            let mut candidates = Vec::new();
            let mut previous = Duration::ZERO;
            for &(at, u) in &starts {
                let gap = at.saturating_sub(previous);
                let unit_start = previous;
                previous = at;
                if gap < FINEST {
                    continue;
                }
                let shift = millis(gap / 2);
                let mut units = self.units.clone();
                for fault in &mut units[u] {
                    fault.at -= shift;
                }
                let change = format!(
                    "{} moved to {} (halfway from {})",
                    fault_text(&self.units[u][0]),
                    self::at(at - shift),
                    self::at(unit_start)
                );
                candidates.push(self.candidate(units, self.settings.clone(), change));
            }
            if self.try_all(candidates)?.is_none() {
                return Ok(());
            }
        }
    }

    /// `duration` down towards a second past the last fault, in whole seconds.
    fn cut_duration(&mut self) -> Result<(), Error> {
        loop {
            let last = self.settings.faults.iter().map(|f| f.at).max();
            let floor = whole_seconds(last.unwrap_or_default() + Duration::from_secs(1)).as_secs();
            let current = self.settings.duration.as_secs();
            let candidates = ladder(floor, current)
                .into_iter()
                .map(|secs| {
                    let mut settings = self.settings.clone();
                    settings.duration = Duration::from_secs(secs);
                    let change = format!(
                        "duration {} instead of {}",
                        format_duration(settings.duration),
                        format_duration(self.settings.duration)
                    );
                    self.candidate(self.units.clone(), settings, change)
                })
                .collect();
            if self.try_all(candidates)?.is_none() {
                return Ok(());
            }
        }
    }

    /// Fewer sends per second, fewer messages, producers and consumers.
    fn lower_workload(&mut self) -> Result<(), Error> {
        type Knob = (&'static str, u64, fn(&mut Workload) -> &mut u32);
        let knobs: [Knob; 3] = [
            ("rate", 1, |w| &mut w.rate),
            ("producers", 1, |w| &mut w.producers),
            ("consumers", 0, |w| &mut w.consumers),
        ];
        for (name, floor, field) in knobs {
            // Never below a client a fault names (`kill producer-3`), nor a group without
            // members.
            let floor = floor.max(u64::from(highest_client(&self.settings.faults, name)));
            let grouped = name == "consumers" && self.settings.workload.group.is_some();
            let floor = if grouped { floor.max(1) } else { floor };
            loop {
                let current = u64::from(*field(&mut self.settings.workload.clone()));
                let candidates = ladder(floor, current)
                    .into_iter()
                    .map(|n| {
                        let mut settings = self.settings.clone();
                        *field(&mut settings.workload) = n as u32;
                        let change = format!("{name} {n} instead of {current}");
                        self.candidate(self.units.clone(), settings, change)
                    })
                    .collect();
                if self.try_all(candidates)?.is_none() {
                    break;
                }
            }
        }
        while let Some(current) = self.settings.workload.messages {
            let candidates = ladder(1, current)
                .into_iter()
                .map(|n| {
                    let mut settings = self.settings.clone();
                    settings.workload.messages = Some(n);
                    let change = format!("messages {n} instead of {current}");
                    self.candidate(self.units.clone(), settings, change)
                })
                .collect();
            if self.try_all(candidates)?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Fewer partitions per topic and fewer brokers, where every fault still names hosts
    /// and partitions the smaller cluster has and every topic still fits.
    fn lower_cluster(&mut self) -> Result<(), Error> {
        for t in 0..self.settings.cluster.topics.len() {
            loop {
                let topic = &self.settings.cluster.topics[t];
                let current = u64::from(topic.partitions);
                let candidates = ladder(1, current)
                    .into_iter()
                    .filter(|&n| partitions_fit(&self.settings.faults, &topic.name, n as u32))
                    .map(|n| {
                        let mut settings = self.settings.clone();
                        settings.cluster.topics[t].partitions = n as u32;
                        let change =
                            format!("{} partitions of {} instead of {current}", n, topic.name);
                        self.candidate(self.units.clone(), settings, change)
                    })
                    .collect();
                if self.try_all(candidates)?.is_none() {
                    break;
                }
            }
        }
        loop {
            let current = u64::from(self.settings.cluster.brokers);
            let needed = self
                .settings
                .cluster
                .topics
                .iter()
                .map(|t| u64::from(t.replication_factor))
                .max()
                .unwrap_or(1);
            let candidates = ladder(needed, current)
                .into_iter()
                .filter_map(|n| {
                    let units = fewer_brokers(&self.units, n as u32)?;
                    let mut settings = self.settings.clone();
                    settings.cluster.brokers = n as u32;
                    let change = format!("{n} brokers instead of {current}");
                    Some(self.candidate(units, settings, change))
                })
                .collect();
            if self.try_all(candidates)?.is_none() {
                return Ok(());
            }
        }
    }
}

/// Values from `floor` up to below `current` worth trying, smallest first: the floor,
/// then an eighth, a quarter, a half and three quarters of the way.
fn ladder(floor: u64, current: u64) -> Vec<u64> {
    if current <= floor {
        return Vec::new();
    }
    let span = current - floor;
    let mut steps: Vec<u64> = [0, span / 8, span / 4, span / 2, span * 3 / 4]
        .into_iter()
        .map(|step| floor + step)
        .filter(|&n| n < current)
        .collect();
    steps.dedup();
    steps
}

fn millis(duration: Duration) -> Duration {
    Duration::from_millis(duration.as_millis() as u64)
}

fn whole_seconds(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_millis().div_ceil(1000) as u64)
}

fn fault_text(fault: &Fault) -> String {
    format!("{} at {}", fault.action, at(fault.at))
}

/// A moment as the stories write it: `t=12.345s`.
fn at(time: Duration) -> String {
    format!("t={:.3}s", time.as_secs_f64())
}

fn dropped_text(units: &[Vec<Fault>]) -> String {
    match units {
        [unit] => match unit.as_slice() {
            [fault] => format!("dropped {}", fault_text(fault)),
            [fault, ..] => format!("dropped {} and its undo", fault_text(fault)),
            [] => "dropped an empty episode".to_owned(),
        },
        units => {
            let faults: usize = units.iter().map(Vec::len).sum();
            let times = units.iter().flatten().map(|f| f.at);
            let (from, to) = (times.clone().min(), times.max());
            format!(
                "dropped {} episodes ({faults} faults) from {} to {}",
                units.len(),
                at(from.unwrap_or_default()),
                at(to.unwrap_or_default())
            )
        }
    }
}

/// The members of the episode's target lists of two or more, each once, in the order
/// they are first named.
fn list_members(unit: &[Fault]) -> Vec<Target> {
    let mut members: Vec<Target> = Vec::new();
    for fault in unit {
        for target in fault.action.targets() {
            if let Target::List(list) = target {
                if list.len() > 1 {
                    for member in list {
                        if !members.contains(member) {
                            members.push(member.clone());
                        }
                    }
                }
            }
        }
    }
    members
}

/// `target` without `member`, if it is a list of two or more that names it.
fn leave_out(target: &mut Target, member: &Target) {
    let Target::List(list) = target else {
        return;
    };
    if list.len() < 2 || list.iter().all(|m| m == member) {
        return;
    }
    list.retain(|m| m != member);
    if let [one] = list.as_slice() {
        *target = one.clone();
    }
}

/// The highest `producer-N` (for `producers`) or `consumer-N` (for `consumers`) a fault
/// names; 0 for any other knob, or none named.
fn highest_client(faults: &[Fault], knob: &str) -> u32 {
    let mut highest = 0;
    for fault in faults {
        visit_targets(&fault.action, &mut |target| match (knob, target) {
            ("producers", Target::Host(HostName::Producer(n)))
            | ("consumers", Target::Host(HostName::Consumer(n))) => highest = highest.max(*n),
            _ => {}
        });
    }
    highest
}

/// Whether every fault naming a partition of `topic` names one below `partitions`.
fn partitions_fit(faults: &[Fault], topic: &str, partitions: u32) -> bool {
    let mut fits = true;
    for fault in faults {
        visit_targets(&fault.action, &mut |target| {
            if let Target::Leader(tp) | Target::Follower(tp) | Target::Followers(tp) = target {
                if tp.topic.as_ref() == topic && tp.partition >= partitions {
                    fits = false;
                }
            }
        });
    }
    fits
}

/// The units for a cluster of `brokers`: the brokers past it leave every partition
/// group; `None` if a fault would name one otherwise, or a group would be left empty.
fn fewer_brokers(units: &[Vec<Fault>], brokers: u32) -> Option<Vec<Vec<Fault>>> {
    let beyond =
        |target: &Target| matches!(target, Target::Host(HostName::Broker(n)) if *n > brokers);
    let mut out = units.to_vec();
    for fault in out.iter_mut().flatten() {
        if let FaultAction::Partition(groups) = &mut fault.action {
            for group in groups.iter_mut() {
                if let Target::List(members) = group {
                    members.retain(|m| !beyond(m));
                    if members.is_empty() {
                        return None;
                    }
                } else if beyond(group) {
                    return None;
                }
            }
        }
        let mut named = false;
        visit_targets(&fault.action, &mut |target| named |= beyond(target));
        if named {
            return None;
        }
    }
    Some(out)
}

/// Every target a fault names, list members one by one.
fn visit_targets(action: &FaultAction, visit: &mut dyn FnMut(&Target)) {
    fn walk(target: &Target, visit: &mut dyn FnMut(&Target)) {
        match target {
            Target::List(members) => members.iter().for_each(|m| walk(m, visit)),
            one => visit(one),
        }
    }
    for target in action.targets() {
        walk(target, visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ladder_climbs_from_the_floor_and_stays_below_the_current_value() {
        assert_eq!(ladder(1, 250), [1, 32, 63, 125, 187]);
        assert_eq!(ladder(0, 2), [0, 1]);
        assert_eq!(ladder(3, 3), Vec::<u64>::new());
        assert_eq!(ladder(5, 4), Vec::<u64>::new());
    }
}
