//! docs/scenarios.md, the scenario-file reference, against the parser: it names every
//! fault action, target form, checker count, comparison and fixed key the parser knows
//! (read from the tables the parser itself reads), and every whole file it shows parses.
//! A new action, count or key without its documentation fails here. And README.md's
//! counts against the repository: the catalog's files, the seeds of each, the runs of the
//! quickstart and the configurations of the durability matrix.

use hightide::check::{comparison_symbol, count_name, Comparison, Count};
use hightide::scenario::model::{FaultKind, TargetForm};
use hightide::scenario::{load_sweep, parse, parse_sweep, Overrides, FILE_KEYS};
use std::path::{Path, PathBuf};

fn reference_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/scenarios.md")
}

fn reference() -> String {
    std::fs::read_to_string(reference_path()).expect("docs/scenarios.md is readable")
}

/// The names `reference` does not show in code quotes (`` `name` ``), for one message
/// that lists them all.
fn undocumented<'a>(reference: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    names
        .into_iter()
        .filter(|name| !reference.contains(&format!("`{name}`")))
        .collect()
}

fn assert_documented<'a>(what: &str, names: impl IntoIterator<Item = &'a str>) {
    let missing = undocumented(&reference(), names);
    assert!(
        missing.is_empty(),
        "docs/scenarios.md does not document these {what}: {}",
        missing.join(", ")
    );
}

#[test]
fn every_fault_action_is_documented() {
    assert_documented("fault actions", FaultKind::ALL.iter().map(|k| k.name()));
}

#[test]
fn every_fault_field_and_fixed_key_is_documented() {
    for (table, keys) in FILE_KEYS {
        assert_documented(&format!("keys of {table}"), keys.iter().copied());
    }
}

#[test]
fn every_target_form_is_documented() {
    let forms: Vec<String> = TargetForm::ALL.iter().map(TargetForm::syntax).collect();
    assert_documented("target forms", forms.iter().map(String::as_str));
}

#[test]
fn every_checker_count_is_documented() {
    assert_documented(
        "checker counts",
        Count::ALL.iter().map(|count| count_name(*count)),
    );
}

#[test]
fn every_comparison_is_documented() {
    assert_documented(
        "comparisons",
        Comparison::ALL.iter().map(|c| comparison_symbol(*c)),
    );
}

/// A ```toml block of the reference: its text and the line its first line is on.
struct Block {
    line: usize,
    text: String,
}

/// Every ```toml block. One whose first line is `# fragment` is part of a file, not a
/// file, and is left out.
fn whole_files(reference: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (number, line) in reference.lines().enumerate() {
        match open.as_mut() {
            None if line.trim_end() == "```toml" => {
                open = Some(Block {
                    line: number + 2,
                    text: String::new(),
                })
            }
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(open.take()),
            Some(block) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
        }
    }
    assert!(open.is_none(), "a ```toml block is never closed");
    blocks.retain(|block| !block.text.starts_with("# fragment"));
    blocks
}

/// A sweep matrix names its base scenario; a scenario file has no `base`.
fn is_sweep_matrix(text: &str) -> bool {
    text.lines().any(|line| line.starts_with("base = "))
}

#[test]
fn every_whole_file_example_parses() {
    let blocks = whole_files(&reference());
    assert!(
        blocks.len() >= 5,
        "only {} whole-file examples found",
        blocks.len()
    );
    let mut failures = Vec::new();
    for block in &blocks {
        // Named as if it were a file in docs/, so that errors give the example's own line.
        // A matrix's `base` is relative to it, and docs/ sits beside sweeps/ and
        // scenarios/: the example's `../scenarios/...` names the same file from either.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(format!("example-at-line-{}.toml", block.line));
        let parsed = if is_sweep_matrix(&block.text) {
            parse_sweep(&block.text, &path, &Overrides::default()).map(|_| ())
        } else {
            parse(&block.text, &path).map(|_| ())
        };
        if let Err(error) = parsed {
            failures.push(format!(
                "the example at docs/scenarios.md:{}: {}",
                block.line,
                error.report()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_missing_name_is_reported() {
    let reference = "`kill` and `restart`, not the other";
    assert_eq!(
        undocumented(reference, ["kill", "heal", "restart", "corrupt"]),
        ["heal", "corrupt"]
    );
}

#[test]
fn fragments_are_left_out_and_whole_files_kept() {
    let text = "intro\n```toml\n# fragment\nat = \"1s\"\n```\n\n```toml\nduration = \"1s\"\n```\n";
    let blocks = whole_files(text);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].line, 8);
    assert_eq!(blocks[0].text, "duration = \"1s\"\n");
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md with every run of whitespace one space, so that a phrase is found wherever
/// the text wraps it.
fn readme() -> String {
    let text = std::fs::read_to_string(root().join("README.md")).expect("README.md is readable");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn assert_readme_says(readme: &str, phrase: &str) {
    assert!(
        readme.contains(phrase),
        "README.md should say \"{phrase}\", as the repository now has it"
    );
}

/// The catalog's files, as `cargo test --test scenarios` runs them.
fn catalog() -> Vec<PathBuf> {
    hightide::lab::scenario_files(&root().join("scenarios")).expect("scenarios/ is readable")
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn readme_counts_the_catalog_files_that_name_test_seeds() {
    let files = catalog();
    let naming = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("a catalog file is readable");
            text.lines().any(|line| line.starts_with("test_seeds"))
        })
        .count();
    assert_readme_says(
        &readme(),
        &format!("Of the catalog's {} files, {naming} name them", files.len()),
    );
}

/// nextest's `count:K/N` puts the i-th test (from 0, in name order) in partition
/// i mod N + 1; the catalog's tests are its files, in that order.
#[test]
fn readme_gives_the_catalog_nextest_partitions() {
    let files = catalog().len();
    let sizes: Vec<usize> = (0..3).map(|k| (files + 2 - k) / 3).collect();
    assert_eq!(sizes.iter().sum::<usize>(), files);
    assert_readme_says(
        &readme(),
        &format!(
            "the three partitions run {}, {} and {} of the {files} files",
            sizes[0], sizes[1], sizes[2]
        ),
    );
}

/// Each row of the catalog's table (`| `file.toml` | seeds | ... |`) against the file:
/// every file has a row, every row a file, and the row's seeds are the file's.
#[test]
fn readme_catalog_table_has_every_file_and_its_seeds() {
    let text = std::fs::read_to_string(root().join("README.md")).expect("README.md is readable");
    let rows: Vec<(String, String)> = text
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix("| `")?.split('|');
            let name = cells.next()?.trim().strip_suffix('`')?;
            name.ends_with(".toml").then(|| {
                (
                    name.to_owned(),
                    cells.next().unwrap_or("").trim().to_owned(),
                )
            })
        })
        .collect();
    let files = catalog();
    let mut wrong = Vec::new();
    for path in &files {
        let name = file_name(path);
        let seeds = hightide::load(path)
            .expect("a catalog file loads")
            .seeds
            .len()
            .to_string();
        match rows.iter().find(|(row, _)| *row == name) {
            None => wrong.push(format!("{name} has no row")),
            Some((_, said)) if *said != seeds => wrong.push(format!(
                "{name}: the row says {said} seeds, the file has {seeds}"
            )),
            Some(_) => {}
        }
    }
    for (row, _) in &rows {
        if !files.iter().any(|path| file_name(path) == *row) {
            wrong.push(format!("the row {row} names no file in scenarios/"));
        }
    }
    assert!(
        wrong.is_empty(),
        "README.md's catalog table: {}",
        wrong.join("; ")
    );
}

#[test]
fn readme_counts_the_quickstart_runs() {
    let quickstart = hightide::load(root().join("scenarios/quickstart.toml")).expect("it loads");
    let runs = quickstart.seeds.len() * quickstart.variants.len();
    // Its duration, then the heal phase.
    let simulated = |variant: &hightide::scenario::model::Variant| {
        (variant.settings.duration + variant.settings.heal).as_secs()
    };
    let seconds = simulated(&quickstart.variants[0]);
    assert!(quickstart.variants.iter().all(|v| simulated(v) == seconds));
    assert_readme_says(
        &readme(),
        &format!("runs {runs} simulations of {seconds} simulated seconds"),
    );
}

#[test]
fn readme_counts_the_durability_matrix() {
    let sweep = load_sweep(
        &root().join("sweeps/durability.toml"),
        &Overrides::default(),
    )
    .expect("the durability matrix loads");
    assert_readme_says(
        &readme(),
        &format!(
            "fault set, {} configurations",
            sweep.scenario.variants.len()
        ),
    );
}
