//! `--shard K/N` and `hightide merge`: N shards merged report exactly what the one
//! unsharded command reports (the same text, trace hashes, p99 and verdict for `run`; the
//! same first failing seeds for `explore`; the same report files for `sweep`), and merge
//! refuses shards that are not all there, or not of one command.

use crate::support::{fresh_dir, hightide, text, ACKS_1_POWER_LOSS as SCENARIO};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

fn dir(name: &str) -> PathBuf {
    fresh_dir("shard", name)
}

fn stdout(output: &Output) -> String {
    text(&output.stdout)
}

/// Run `args` as shards 1/n to n/n, each into a file of `dir`; the files.
fn shards(args: &[&str], n: usize, dir: &Path) -> Vec<String> {
    (1..=n)
        .map(|k| {
            let shard = format!("{k}/{n}");
            let output = hightide(&[args, &["--shard", &shard]].concat());
            assert!(output.status.code().is_some_and(|c| c <= 1), "{output:?}");
            let file = dir.join(format!("shard-{k}.jsonl"));
            std::fs::write(&file, &output.stdout).unwrap();
            file.to_string_lossy().into_owned()
        })
        .collect()
}

fn merge(files: &[String], extra: &[&str]) -> Output {
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    hightide(&[&["merge"], &files[..], extra].concat())
}

/// Every trace hash in some JSON lines.
fn trace_hashes(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|value| value.get("trace_hash")?.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn three_run_shards_merged_are_the_one_run() {
    let dir = dir("run");
    let file = dir.join("acks-1.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let file = file.to_str().unwrap();
    let args = ["run", file, "--seeds", "7"];
    let one = hightide(&args);
    let files = shards(&args, 3, &dir);
    let merged = merge(&files, &[]);
    assert_eq!(one.status.code(), Some(1), "{}", stdout(&one));
    assert_eq!(merged.status.code(), one.status.code());
    assert_eq!(stdout(&merged), stdout(&one));
    assert!(stdout(&merged).contains("p99 ms"), "{}", stdout(&merged));

    let json = stdout(&hightide(&[&args[..], &["--json"]].concat()));
    let sharded: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert_eq!(trace_hashes(&json).len(), 7);
    assert_eq!(trace_hashes(&sharded), trace_hashes(&json));
}

#[test]
fn explore_shards_merged_find_the_same_first_failing_seeds() {
    let dir = dir("explore");
    let file = dir.join("acks-1.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let file = file.to_str().unwrap();
    let args = ["explore", file, "--seeds", "12", "--stop-after", "3"];
    let timeless = |text: String| {
        text.lines()
            .map(|line| match line.find(" runs) in ") {
                Some(at) => line[..at].to_owned(),
                None => line.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let one = hightide(&args);
    let merged = merge(&shards(&args, 3, &dir), &[]);
    assert_eq!(merged.status.code(), one.status.code());
    assert_eq!(timeless(stdout(&merged)), timeless(stdout(&one)));
    assert!(
        stdout(&one).contains(": 3 failing seeds"),
        "{}",
        stdout(&one)
    );
}

#[test]
fn sweep_shards_merged_write_the_same_report() {
    let dir = dir("sweep");
    std::fs::write(dir.join("base.toml"), SCENARIO).unwrap();
    let matrix = dir.join("matrix.toml");
    std::fs::write(
        &matrix,
        "name = \"tiny\"\nbase = \"base.toml\"\nseeds = 2\n[vary]\n\"producer.acks\" = [\"1\", \"all\"]\n",
    )
    .unwrap();
    let matrix = matrix.to_str().unwrap();
    let (one_out, merged_out) = (dir.join("one"), dir.join("merged"));
    let one = hightide(&["sweep", matrix, "--out", one_out.to_str().unwrap()]);
    assert_eq!(one.status.code(), Some(0), "{one:?}");
    let files = shards(&["sweep", matrix], 2, &dir);
    let merged = merge(&files, &["--out", merged_out.to_str().unwrap()]);
    assert_eq!(merged.status.code(), Some(0), "{merged:?}");
    for name in ["tiny.md", "tiny-lost.svg", "tiny-latency.svg"] {
        let read = |dir: &Path| std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(read(&merged_out), read(&one_out), "{name}");
    }
}

#[test]
fn merge_refuses_missing_doubled_and_unfinished_shards() {
    let dir = dir("refused");
    let file = dir.join("acks-1.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let file = file.to_str().unwrap();
    let files = shards(&["run", file, "--seeds", "3"], 3, &dir);
    let refused = |files: &[String], why: &str| {
        let output = merge(files, &[]);
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(why), "{stderr}");
    };
    refused(&files[..2], "missing shards: 3/3");
    refused(
        &[files[0].clone(), files[0].clone(), files[2].clone()],
        "are both shard 1/3",
    );
    let text = std::fs::read_to_string(&files[1]).unwrap();
    let cut = dir.join("cut.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&cut, lines[..lines.len() - 1].join("\n")).unwrap();
    let cut = cut.to_string_lossy().into_owned();
    refused(&[files[0].clone(), cut, files[2].clone()], "did not finish");
    let other_dir = dir.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = shards(&["run", file, "--seeds", "4"], 3, &other_dir);
    refused(
        &[files[0].clone(), other[1].clone(), files[2].clone()],
        "a shard of another command",
    );
    // The file the shards ran changed since: merge reads it again, so it refuses.
    std::fs::write(file, SCENARIO.replace("rate = 500", "rate = 50")).unwrap();
    refused(&files, "changed since the shards ran");
    std::fs::write(file, SCENARIO).unwrap();
    let plain = dir.join("plain.jsonl");
    std::fs::write(
        &plain,
        stdout(&hightide(&["run", file, "--seeds", "1", "--json"])),
    )
    .unwrap();
    refused(
        &[plain.to_string_lossy().into_owned()],
        "not a shard header",
    );
}
