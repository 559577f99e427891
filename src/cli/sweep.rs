//! `hightide sweep MATRIX.toml`: the durability matrix. The cross product of `[vary]`
//! becomes variants of the base scenario (through the scenario parser, so every path and
//! value is validated as in a scenario file); every variant runs on every seed with the
//! same faults, and the results become a Markdown report with SVG charts.

use super::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::report::{self, RunReport, SweepRow};
use std::collections::BTreeMap;
use crate::scenario;
use crate::sim::batch::{self, Job};
use crate::sim::runner::RunOptions;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The matrix file.
    file: PathBuf,
    /// Seeds to run instead of the matrix's: "20", "3,17,42" or "100..200".
    #[arg(long)]
    seeds: Option<String>,
    /// Where to write `<name>.md` and its charts.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
    /// Simulations to run at once (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Matrix {
    name: String,
    base: String,
    #[serde(default)]
    seeds: Option<toml::Value>,
    vary: toml::Table,
}

/// One configuration of the cross product: (path, value) pairs.
type Combination = Vec<(String, toml::Value)>;

fn cross_product(vary: &toml::Table) -> Result<Vec<Combination>, String> {
    let mut combinations: Vec<Combination> = vec![Vec::new()];
    for (path, values) in vary {
        let values = values
            .as_array()
            .ok_or_else(|| format!("[vary] {path:?}: expected an array of values"))?;
        if values.is_empty() {
            return Err(format!("[vary] {path:?}: needs at least one value"));
        }
        combinations = combinations
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut next = c.clone();
                    next.push((path.clone(), v.clone()));
                    next
                })
            })
            .collect();
    }
    Ok(combinations)
}

/// A short, readable name: `acks=all min.insync.replicas=2 flush=never leader-kill`.
fn label(combination: &Combination) -> String {
    combination
        .iter()
        .map(|(path, value)| {
            let key = path.split_once('.').map_or(path.as_str(), |(_, key)| key);
            let key = key.strip_prefix("log.flush.interval.").map_or(key, |_| "flush");
            let value = shown_value(value);
            if key == "faults" {
                value
            } else {
                format!("{key}={value}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn shown_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) if *i == i64::MAX => "never".to_string(),
        other => other.to_string(),
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A loaded sweep: its name, the generated scenario, the seeds, and each variant's settings.
type Loaded = (String, scenario::model::Scenario, Vec<u64>, BTreeMap<String, Vec<(String, String)>>);

fn load(args: &SweepArgs) -> Result<Loaded, String> {
    let file = args.file.display();
    let text = std::fs::read_to_string(&args.file).map_err(|e| format!("{file}: {e}"))?;
    let matrix: Matrix = toml::from_str(&text).map_err(|e| match e.span() {
        Some(span) => {
            let (line, col) = line_col(&text, span.start);
            format!("{file}:{line}:{col}: {}", e.message())
        }
        None => format!("{file}: {}", e.message()),
    })?;
    let base_path = args.file.parent().unwrap_or(Path::new(".")).join(&matrix.base);
    let base_text = std::fs::read_to_string(&base_path)
        .map_err(|e| format!("{file}: base {:?}: {}: {e}", matrix.base, base_path.display()))?;
    let mut base: toml::Table = base_text
        .parse()
        .map_err(|e| format!("{}: {e}", base_path.display()))?;
    let combinations = cross_product(&matrix.vary).map_err(|e| format!("{file}: {e}"))?;
    let mut variants = toml::Table::new();
    let mut settings_of = BTreeMap::new();
    for combination in &combinations {
        let shown = combination.iter().map(|(path, value)| (path.clone(), shown_value(value))).collect();
        settings_of.insert(label(combination), shown);
        let settings: toml::Table = combination.iter().cloned().collect();
        variants.insert(label(combination), toml::Value::Table(settings));
    }
    base.insert("variants".into(), toml::Value::Table(variants));
    if let Some(seeds) = matrix.seeds {
        base.insert("seeds".into(), seeds);
    }
    let generated = toml::to_string(&base).map_err(|e| format!("{file}: {e}"))?;
    let scenario = scenario::parse(&generated, &base_path)
        .map_err(|e| format!("{file}: the sweep over {}: {e}", base_path.display()))?;
    let seeds = match &args.seeds {
        Some(spec) => scenario::parse_seeds(spec).map_err(|e| format!("--seeds {spec:?}: {e}"))?,
        None => scenario.seeds.clone(),
    };
    Ok((matrix.name, scenario, seeds, settings_of))
}

pub fn run(args: SweepArgs) -> i32 {
    let (name, scenario, seeds, settings_of) = match load(&args) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    let jobs: Vec<Job> = scenario
        .variants
        .iter()
        .flat_map(|variant| seeds.iter().map(move |&seed| Job { variant, seed }))
        .collect();
    eprintln!("sweep {name}: {} configurations x {} seeds = {} runs", scenario.variants.len(), seeds.len(), jobs.len());
    let threads = args.jobs.unwrap_or_else(batch::default_threads);
    let mut reports = Vec::new();
    for result in batch::run_all(&jobs, threads, &RunOptions::default()) {
        match result {
            Ok(outcome) => {
                let variant = scenario.variants.iter().find(|v| v.name == outcome.variant);
                if let Some(variant) = variant {
                    reports.push(RunReport::from_outcome(&scenario.name, variant, &outcome));
                }
            }
            Err(error) => {
                eprintln!("error: {error}");
                return EXIT_FAILED;
            }
        }
    }
    let rows: Vec<SweepRow> = scenario
        .variants
        .iter()
        .map(|variant| {
            let runs: Vec<RunReport> =
                reports.iter().filter(|r| r.variant == variant.name).cloned().collect();
            let settings = settings_of.get(&variant.name).cloned().unwrap_or_default();
            SweepRow::from_reports(settings, &runs)
        })
        .collect();
    if let Err(error) = write_report(&args.out, &name, &rows) {
        eprintln!("error: writing the report to {}: {error}", args.out.display());
        return EXIT_BAD_INPUT;
    }
    for row in &rows {
        println!(
            "{:<60} runs {:>4}  with loss {:>4}  lost avg {:>8.1}  worst {:>6}  dup {:>6}  p99 {:>8.1} ms",
            row.label(),
            row.runs,
            row.runs_with_loss,
            row.lost_avg(),
            row.lost_max,
            row.duplicates,
            row.p99_ms()
        );
    }
    println!("wrote {}", args.out.join(format!("{name}.md")).display());
    EXIT_OK
}

fn write_report(out: &Path, name: &str, rows: &[SweepRow]) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("{name}.md")), report::sweep_markdown(name, rows))?;
    for (file, svg) in report::sweep_charts(name, rows) {
        std::fs::write(out.join(file), svg)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_product_covers_every_combination_in_order() {
        let vary: toml::Table = toml::from_str(
            r#""producer.acks" = ["1", "all"]
               faults = ["a", "b", "c"]"#,
        )
        .expect("valid");
        let all = cross_product(&vary).expect("valid");
        assert_eq!(all.len(), 6);
        let labels: Vec<String> = all.iter().map(label).collect();
        assert_eq!(labels[0], "acks=1 a");
        assert_eq!(labels[5], "acks=all c");
    }

    #[test]
    fn empty_or_scalar_vary_entries_are_errors() {
        let scalar: toml::Table = toml::from_str(r#""producer.acks" = "1""#).expect("valid");
        assert!(cross_product(&scalar).is_err());
        let empty: toml::Table = toml::from_str(r#""producer.acks" = []"#).expect("valid");
        assert!(cross_product(&empty).is_err());
    }

    #[test]
    fn never_is_spelled_out() {
        let c = vec![("broker.log.flush.interval.messages".to_string(), toml::Value::Integer(i64::MAX))];
        assert_eq!(label(&c), "flush=never");
    }
}
