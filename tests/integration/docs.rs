//! docs/scenarios.md, the scenario-file reference, against the parser: it names every
//! fault action, target form, checker count, comparison and fixed key the parser knows
//! (read from the tables the parser itself reads), and every whole file it shows parses.
//! A new action, count or key without its documentation fails here.

use hightide::check::{comparison_symbol, count_name, Comparison, Count};
use hightide::scenario::model::{FaultKind, TargetForm};
use hightide::scenario::{parse, parse_sweep, Overrides, FILE_KEYS};
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
