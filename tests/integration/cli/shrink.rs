//! `hightide shrink`, as a person runs it: it writes a file that `run` fails (exit 1),
//! never overwrites one, and says why when there is nothing to shrink (exit 2).

use crate::support::{fresh_dir, hightide, text, ACKS_1_POWER_LOSS as SCENARIO};
use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    fresh_dir("shrink-cli", name)
}

/// The first seed of the acks=1 power-loss scenario that `run` fails.
fn failing_seed(file: &str) -> String {
    (1..=10)
        .map(|seed| seed.to_string())
        .find(|seed| hightide(&["run", file, "--seed", seed]).status.code() == Some(1))
        .expect("a failing seed")
}

#[test]
fn shrink_writes_a_scenario_that_run_fails_and_never_overwrites_one() {
    let dir = dir("writes");
    let file = dir.join("acks-1.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let file = file.to_str().unwrap();
    let seed = failing_seed(file);
    let out = dir.join("min.toml");
    let out_arg = out.to_str().unwrap();
    let shrunk = hightide(&["shrink", file, "--seed", &seed, "--out", out_arg]);
    let stdout = text(&shrunk.stdout);
    assert_eq!(
        shrunk.status.code(),
        Some(0),
        "{stdout}{}",
        text(&shrunk.stderr)
    );
    assert!(stdout.contains("shrunk in "), "{stdout}");
    assert!(stdout.contains(&format!("wrote {out_arg}")), "{stdout}");
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.starts_with("# Shrunk by `hightide shrink "),
        "{written}"
    );
    let replay = hightide(&["run", out_arg]);
    assert_eq!(replay.status.code(), Some(1), "{}", text(&replay.stdout));
    assert!(text(&replay.stdout).contains("expected lost == 0, got"));

    // A second shrink to the same file is refused, and the file stays as it was.
    let again = hightide(&["shrink", file, "--seed", &seed, "--out", out_arg]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("never overwrites"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written);
}

#[test]
fn a_seed_that_passes_has_nothing_to_shrink() {
    let dir = dir("passes");
    let out = dir.join("min.toml");
    let shrunk = hightide(&[
        "shrink",
        "scenarios/quickstart.toml",
        "--variant",
        "acks-all-min-isr-2",
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(shrunk.status.code(), Some(2));
    assert!(
        text(&shrunk.stderr).contains("there is no failure to shrink"),
        "{}",
        text(&shrunk.stderr)
    );
    assert!(!out.exists());
}

#[test]
fn a_file_with_several_variants_needs_one_named() {
    let dir = dir("variants");
    let out = dir.join("min.toml");
    let shrunk = hightide(&[
        "shrink",
        "scenarios/quickstart.toml",
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(shrunk.status.code(), Some(2));
    assert!(
        text(&shrunk.stderr).contains("--variant"),
        "{}",
        text(&shrunk.stderr)
    );
}
