//! `hightide explore`, as a person runs it: the first K failing seeds in seed order, the
//! same whatever the number of threads, each replayable; exit 1 when one failed, 0 when
//! none did.

use crate::support::ACKS_1_POWER_LOSS as SCENARIO;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scenario(name: &str, text: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explore");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file
}

fn hightide(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hightide"))
        .arg(args[0])
        .arg(file)
        .args(&args[1..])
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The report without its wall-clock time.
fn timeless(text: &str) -> String {
    text.lines()
        .map(|line| match line.find(" runs) in ") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn explore_reports_the_first_failing_seeds_the_same_on_any_number_of_threads() {
    let file = scenario("acks-1.toml", SCENARIO);
    let args = ["explore", "--seeds", "12", "--stop-after", "2"];
    let one = hightide(&[&args[..], &["--jobs", "1"]].concat(), &file);
    let two = hightide(&[&args[..], &["--jobs", "2"]].concat(), &file);
    assert_eq!(one.status.code(), Some(1), "{}", stdout(&one));
    assert_eq!(two.status.code(), Some(1));
    assert_eq!(timeless(&stdout(&one)), timeless(&stdout(&two)));
    let text = stdout(&one);
    let replays: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("replay seed "))
        .collect();
    assert_eq!(replays.len(), 2, "{text}");
    assert!(text.contains(": 2 failing seeds"), "{text}");
    assert!(text.contains("expected lost == 0, got"), "{text}");
    // The replay line's seed fails the same way under `run`.
    let seed = replays[0]
        .split("--seed ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap();
    let replay = hightide(&["run", "--seed", seed], &file);
    assert_eq!(replay.status.code(), Some(1));
    assert!(stdout(&replay).contains("expected lost == 0, got"));
}

#[test]
fn explore_exits_0_when_no_seed_fails() {
    let calm = SCENARIO.replace(
        "action = \"power-loss\"",
        "action = \"slow-disk\"\nlatency = \"1ms\"",
    );
    let file = scenario("calm.toml", &calm);
    let output = hightide(&["explore", "--seeds", "3"], &file);
    let text = stdout(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("explored 3 of 3 seeds (3 runs)"), "{text}");
    assert!(text.contains("no seed broke an expectation"), "{text}");
}
