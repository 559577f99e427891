//! What the subcommands that run a scenario (`run`, `explore`, `shrink`, and the merges of
//! their shards) do alike with their file, `--set` and `--variant` arguments: load the
//! scenario, pick its variants, and spell the command line that replays them.

use super::{shard, EXIT_BAD_INPUT};
use crate::scenario::{self, model::Scenario, model::Variant};
use std::path::Path;

/// The scenario with every `--set` applied, or the exit status after saying why not.
pub(super) fn load(file: &Path, sets: &[String]) -> Result<Scenario, i32> {
    scenario::Overrides::parse(sets)
        .and_then(|overrides| scenario::load_with(file, &overrides))
        .map_err(|error| {
            eprintln!("{}", error.report());
            EXIT_BAD_INPUT
        })
}

/// The variants `--variant` picks (all without it), after the warnings of the `--set`s
/// that replaced their settings; or the exit status after saying why there are none.
pub(super) fn chosen_variants<'a>(
    scenario: &'a Scenario,
    name: Option<&str>,
    file: &Path,
) -> Result<Vec<&'a Variant>, i32> {
    let variants: Vec<&Variant> = scenario
        .variants
        .iter()
        .filter(|v| name.is_none_or(|name| v.name == name))
        .collect();
    for (variant, warning) in &scenario.warnings {
        if variants.iter().any(|v| &v.name == variant) {
            eprintln!("warning: {warning}");
        }
    }
    if variants.is_empty() {
        let names: Vec<_> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
        eprintln!(
            "error: no variant {:?} in {}; it has: {}",
            name.unwrap_or_default(),
            file.display(),
            names.join(", ")
        );
        return Err(EXIT_BAD_INPUT);
    }
    Ok(variants)
}

/// For a merge of `run` or `explore` shards: the scenario file read again, with the
/// shards' `--set`s, and checked to be the one they ran; or the exit status after saying
/// why not.
pub(super) fn load_shards_file(header: &shard::Header) -> Result<Scenario, i32> {
    let scenario = load(&header.file, &header.sets)?;
    if let Err(error) = header.check_current(&[&scenario.source]) {
        eprintln!("error: {error}");
        return Err(EXIT_BAD_INPUT);
    }
    Ok(scenario)
}

/// The command that runs this scenario again with the same settings: the program, the
/// file and every `--set`, quoted for a shell where needed.
pub(super) fn replay_command(file: &Path, sets: &[String]) -> String {
    let mut command = format!(
        "{} run {}",
        replay_program(),
        shell_word(&file.display().to_string())
    );
    for set in sets {
        command.push_str(&format!(" --set {}", shell_word(set)));
    }
    command
}

/// A word as a POSIX shell reads it back: as it is when it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// How to start hightide again the way it was started: through cargo when cargo ran it
/// (cargo sets `CARGO` for what it runs), else the program as invoked.
fn replay_program() -> String {
    let program = std::env::args()
        .next()
        .unwrap_or_else(|| "hightide".to_string());
    if std::env::var_os("CARGO").is_none() {
        return program;
    }
    if program.contains("/release/") || program.contains("\\release\\") {
        "cargo run --release --".to_string()
    } else {
        "cargo run --".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn replay_words_survive_a_shell() {
        assert_eq!(shell_word("producer.acks=all"), "producer.acks=all");
        assert_eq!(
            shell_word("scenarios/quick start.toml"),
            "'scenarios/quick start.toml'"
        );
        assert_eq!(
            shell_word("workload.topic=\"a b\""),
            "'workload.topic=\"a b\"'"
        );
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
