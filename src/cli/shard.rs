//! `--shard K/N`: a command's runs split over N processes (or machines), each writing
//! JSON lines that `hightide merge` (`cli/merge.rs`) reads back. A shard's output opens with a header naming the command,
//! file, `--set`s, seeds and shard, holds a line per run (for `explore`, per run of a
//! failing seed), and closes with a line saying it finished; merge refuses a set of files
//! that is not every shard of one command, each complete.

use crate::report::{self, RunReport};
use crate::sim::batch::{Job, Shard};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What a shard ran: enough for merge to rebuild the command and check the shards agree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Header {
    /// `run`, `sweep` or `explore`.
    pub command: String,
    pub file: PathBuf,
    pub sets: Vec<String>,
    /// The unsharded command's seeds, in order.
    pub seeds: Vec<u64>,
    pub variant: Option<String>,
    /// `explore`'s `--stop-after`.
    pub stop_after: Option<usize>,
    /// `K/N`.
    pub shard: String,
    /// The hightide that ran it, and a hash of the files it read (the scenario; for a
    /// sweep, the matrix and its base): merge refuses shards of another build or of
    /// files changed since.
    pub hightide: String,
    pub files_hash: String,
}

impl Header {
    /// A header for this build; `files` are the texts the command read.
    pub fn new(command: &str, file: &std::path::Path, sets: &[String], files: &[&str]) -> Header {
        Header {
            command: command.to_owned(),
            file: file.to_owned(),
            sets: sets.to_vec(),
            seeds: Vec::new(),
            variant: None,
            stop_after: None,
            shard: String::new(),
            hightide: env!("CARGO_PKG_VERSION").to_owned(),
            files_hash: files_hash(files),
        }
    }

    /// Whether the files the shards read are the ones here now, and this is their build:
    /// why not, if not.
    pub fn check_current(&self, files: &[&str]) -> Result<(), String> {
        if self.hightide != env!("CARGO_PKG_VERSION") {
            return Err(format!(
                "the shards ran hightide {}, this is {}",
                self.hightide,
                env!("CARGO_PKG_VERSION")
            ));
        }
        if self.files_hash != files_hash(files) {
            return Err(format!(
                "{} changed since the shards ran: merge reads it again, and it must be the file they ran",
                self.file.display()
            ));
        }
        Ok(())
    }
}

/// A fixed-key hash of the texts, as 16 hex digits: the same on every machine.
fn files_hash(files: &[&str]) -> String {
    use std::hash::Hasher;
    let mut hasher = siphasher::sip::SipHasher13::new();
    for text in files {
        hasher.write_usize(text.len());
        hasher.write(text.as_bytes());
    }
    format!("{:016x}", hasher.finish())
}

/// The shard's last line: it finished, with this many run lines.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Done {
    pub runs: usize,
    /// `explore`: the seeds this shard tried.
    pub explored: usize,
    pub wall_time_ms: f64,
}

#[derive(Serialize, Deserialize)]
enum Line {
    #[serde(rename = "shard")]
    Header(Header),
    #[serde(rename = "shard_done")]
    Done(Done),
}

pub(super) fn header_line(header: &Header) -> String {
    let line = serde_json::to_string(&Line::Header(header.clone())).unwrap_or_default();
    format!("{line}\n")
}

pub(super) fn done_line(done: Done) -> String {
    let line = serde_json::to_string(&Line::Done(done)).unwrap_or_default();
    format!("{line}\n")
}

/// The shards read back: their common header, every run, the seeds the shards tried and
/// the longest shard's time.
pub(super) struct Merged {
    pub header: Header,
    pub runs: Vec<RunReport>,
    pub explored: usize,
    pub wall_time_ms: f64,
}

pub(super) fn read(files: &[PathBuf]) -> Result<Merged, String> {
    let mut shards: BTreeMap<usize, (PathBuf, Header)> = BTreeMap::new();
    let (mut runs, mut explored, mut wall_time_ms) = (Vec::new(), 0, 0.0f64);
    let mut count = None;
    for file in files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("{}: cannot read it: {e}", file.display()))?;
        let (header, mut shard_runs, done) =
            read_shard(&text).map_err(|(line, e)| format!("{}:{line}: {e}", file.display()))?;
        let shard: Shard = header
            .shard
            .parse()
            .map_err(|e| format!("{}: shard {e}", file.display()))?;
        if let Some((first, expected)) = shards.values().next() {
            let same = Header {
                shard: expected.shard.clone(),
                ..header.clone()
            };
            if &same != expected {
                return Err(format!(
                    "{} is a shard of another command than {} (their first lines differ)",
                    file.display(),
                    first.display()
                ));
            }
        }
        if *count.get_or_insert(shard.count) != shard.count {
            return Err(format!(
                "{} is shard {shard}, the others are of {} shards",
                file.display(),
                count.unwrap_or_default()
            ));
        }
        if let Some((other, _)) = shards.get(&shard.index) {
            return Err(format!(
                "{} and {} are both shard {shard}",
                other.display(),
                file.display()
            ));
        }
        if shard_runs.len() != done.runs {
            return Err(format!(
                "{}: {} run lines, its last line says {}",
                file.display(),
                shard_runs.len(),
                done.runs
            ));
        }
        explored += done.explored;
        wall_time_ms = wall_time_ms.max(done.wall_time_ms);
        runs.append(&mut shard_runs);
        shards.insert(shard.index, (file.clone(), header));
    }
    let count = count.unwrap_or_default();
    let missing: Vec<String> = (1..=count)
        .filter(|k| !shards.contains_key(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!("missing shards: {}", missing.join(", ")));
    }
    let (_, (_, header)) = shards.into_iter().next().ok_or("no shard given")?;
    Ok(Merged {
        header,
        runs,
        explored,
        wall_time_ms,
    })
}

/// One shard's header, runs and closing line; an error names the line (from 1).
fn read_shard(text: &str) -> Result<(Header, Vec<RunReport>, Done), (usize, String)> {
    let mut header = None;
    let mut done = None;
    let mut runs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |e: String| (i + 1, e);
        if line.trim().is_empty() {
            continue;
        }
        let first = header.is_none() && runs.is_empty();
        if done.is_some() {
            return Err(at("a line after the shard's last".into()));
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        if value.get("shard").is_some() || value.get("shard_done").is_some() {
            match serde_json::from_value(value).map_err(|e| at(e.to_string()))? {
                Line::Header(h) if first => header = Some(h),
                Line::Header(_) => return Err(at("a second header".into())),
                Line::Done(d) => done = Some(d),
            }
        } else if header.is_none() {
            return Err(at(
                "the first line is not a shard header: was this written with --shard K/N?".into(),
            ));
        } else {
            runs.push(report::run_from_json(value).map_err(at)?);
        }
    }
    let lines = text.lines().count();
    let header = header.ok_or((
        1,
        "no shard header: was this written with --shard K/N?".into(),
    ))?;
    let done = done.ok_or((
        lines,
        "the shard did not finish (no closing line): run it again".to_owned(),
    ))?;
    Ok((header, runs, done))
}

/// The shards' runs in `jobs`' order; an error if one is missing or there twice.
pub(super) fn in_job_order(
    runs: Vec<RunReport>,
    jobs: &[Job<'_>],
) -> Result<Vec<RunReport>, String> {
    let mut by_job: BTreeMap<(u64, String), RunReport> = BTreeMap::new();
    for run in runs {
        let key = (run.seed, run.variant.clone());
        if by_job.insert(key, run).is_some() {
            return Err("a run is in two shards".into());
        }
    }
    let mut ordered = Vec::with_capacity(jobs.len());
    for job in jobs {
        let key = (job.seed, job.variant.name.clone());
        let run = by_job.remove(&key).ok_or_else(|| {
            format!(
                "no shard holds seed {} of {}: the shards are not of this file as it stands",
                job.seed, job.variant.name
            )
        })?;
        ordered.push(run);
    }
    if let Some(((seed, variant), _)) = by_job.into_iter().next() {
        return Err(format!(
            "the shards hold seed {seed} of {variant}, which the command does not run"
        ));
    }
    Ok(ordered)
}
