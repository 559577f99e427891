//! Scenario files: parse, validate, resolve into plain data (`model`). The contract is
//! `docs/scenarios.md`; every error names the file, and the line and column when it has
//! one.

mod keys;
pub mod model;
mod node;
mod parse;
mod values;
pub mod write;

pub(crate) use keys::kafka::release_steps;
pub use keys::{config_reference, rocketmq_reference};
pub use parse::{Overrides, FILE_KEYS};
pub use values::{format_duration, parse_comparison, parse_duration, parse_seeds};

use model::Scenario;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A scenario file that cannot run: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: PathBuf,
    /// 1-based line and column (in characters), when the error is about one place.
    pub location: Option<(usize, usize)>,
    pub message: String,
    /// The text of that line, for [`ScenarioError::excerpt`].
    pub line_text: Option<String>,
    /// The `--set` argument the error is about, when it is about one and not the file;
    /// `location` is then the column within `--set ARGUMENT`.
    pub argument: Option<String>,
}

impl ScenarioError {
    /// An error about a `--set` argument: where it falls (the argument and the column in
    /// `--set ARGUMENT`), if known.
    pub(crate) fn argument(place: Option<(String, usize)>, message: String) -> ScenarioError {
        let (argument, column) = place.unzip();
        ScenarioError {
            path: PathBuf::new(),
            location: column.map(|column| (1, column)),
            line_text: argument.as_ref().map(|a| format!("--set {a}")),
            message,
            argument,
        }
    }

    /// The offending line with a caret under the column, as compilers show it:
    /// ```text
    ///    4 | kafka = "2.9"
    ///      |         ^
    /// ```
    pub fn excerpt(&self) -> Option<String> {
        let ((line, column), text) = (self.location?, self.line_text.as_deref()?);
        // An argument has no line number: only the gutter.
        let number = match self.argument {
            Some(_) => " ".to_owned(),
            None => line.to_string(),
        };
        let gutter = " ".repeat(number.len());
        // Tabs keep their width, so the caret stays under the column.
        let pad: String = text
            .chars()
            .take(column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        Some(format!("{number} | {text}\n{gutter} | {pad}^"))
    }

    /// The message as the command line prints it: `error: ` and the excerpt under it.
    pub fn report(&self) -> String {
        match self.excerpt() {
            Some(excerpt) => format!("error: {self}\n{excerpt}"),
            None => format!("error: {self}"),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(argument) = &self.argument {
            return write!(f, "--set {argument}: {}", self.message);
        }
        match self.location {
            Some((line, column)) => {
                write!(
                    f,
                    "{}:{line}:{column}: {}",
                    self.path.display(),
                    self.message
                )
            }
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Read and parse a scenario file.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    load_with(path, &Overrides::default())
}

/// Read and parse a scenario file, with `--set` overrides applied over it.
pub fn load_with(path: &Path, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    parse_with(&read_text(path)?, path, overrides)
}

/// Parse scenario text; `path` names the file in errors and gives the default name.
pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
    parse_with(text, path, &Overrides::default())
}

/// Parse scenario text with `--set` overrides applied over it.
pub fn parse_with(
    text: &str,
    path: &Path,
    overrides: &Overrides,
) -> Result<Scenario, ScenarioError> {
    parse::scenario(text, path, overrides).map_err(|e| locate(e, text, path, overrides))
}

/// A sweep (`hightide sweep MATRIX.toml`): the base scenario, its variants replaced by
/// the cross product of the matrix's `[vary]`, and its seeds by the matrix's if given.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub name: String,
    pub matrix: PathBuf,
    pub scenario: Scenario,
}

/// Read a sweep matrix and its base scenario (`base` is relative to the matrix file),
/// with `--set` overrides applied over the base; an override may not set a varied path.
pub fn load_sweep(path: &Path, overrides: &Overrides) -> Result<Sweep, ScenarioError> {
    parse_sweep(&read_text(path)?, path, overrides)
}

/// Parse sweep matrix text; `path` names the matrix in errors, and its folder is where
/// `base` is found.
pub fn parse_sweep(text: &str, path: &Path, overrides: &Overrides) -> Result<Sweep, ScenarioError> {
    let in_matrix = |e| locate(e, text, path, overrides);
    let matrix = parse::matrix(text).map_err(in_matrix)?;
    overrides
        .check_not_varied(matrix.varied())
        .map_err(in_matrix)?;
    let base_path = path.parent().unwrap_or(Path::new("")).join(&matrix.base);
    let base_text = read_text(&base_path)?;
    let (base, mut scenario) = parse::sweep_base(&base_text, &base_path, overrides)
        .map_err(|e| locate(e, &base_text, &base_path, overrides))?;
    scenario.variants = parse::sweep_variants(&base, &matrix).map_err(in_matrix)?;
    if let Some(seeds) = matrix.seeds {
        scenario.test_seeds.clone_from(&seeds);
        scenario.seeds = seeds;
    }
    Ok(Sweep {
        name: matrix.name,
        matrix: path.to_owned(),
        scenario,
    })
}

/// Tie an error to the place it is about: a line and column of the file, or a `--set`
/// argument (whose spans lie past [`parse::ARGUMENTS`]).
fn locate(error: Error, text: &str, path: &Path, overrides: &Overrides) -> ScenarioError {
    if error
        .span
        .as_ref()
        .is_some_and(|span| span.start >= parse::ARGUMENTS)
    {
        return overrides.locate(error);
    }
    let location = error.span.map(|span| node::line_col(text, span.start));
    ScenarioError {
        path: path.to_owned(),
        line_text: location.and_then(|(line, _)| text.lines().nth(line - 1).map(str::to_owned)),
        location,
        message: error.message,
        argument: None,
    }
}

/// A file's text; a file that is not UTF-8 is an error at its first bad byte.
fn read_text(path: &Path) -> Result<String, ScenarioError> {
    let bytes = std::fs::read(path).map_err(|e| ScenarioError {
        path: path.to_owned(),
        location: None,
        message: format!("cannot read the file: {e}"),
        line_text: None,
        argument: None,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = String::from_utf8_lossy(&bytes[..valid]);
        let byte = bytes.get(valid).copied().unwrap_or_default();
        ScenarioError {
            path: path.to_owned(),
            location: Some(node::line_col(&before, valid)),
            message: format!("not a UTF-8 text file: invalid byte 0x{byte:02x}"),
            line_text: None,
            argument: None,
        }
    })
}

/// An error before it is tied to a file: a byte span, when known, and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Error {
    pub span: Option<Range<usize>>,
    pub message: String,
}

impl Error {
    pub(crate) fn at(span: &Range<usize>, message: String) -> Error {
        Error {
            span: Some(span.clone()),
            message,
        }
    }

    pub(crate) fn nowhere(message: String) -> Error {
        Error {
            span: None,
            message,
        }
    }
}

/// The valid word nearest to a misspelt one, if it is near enough to be what was meant:
/// the same up to case and `_`/`-`/`.`, or a few edits away for its length.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    fn normal(word: &str) -> String {
        word.chars()
            .map(|c| {
                if c == '_' || c == '-' {
                    '.'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    }
    let word_normal = normal(word);
    if let Some(same) = candidates.iter().find(|c| normal(c) == word_normal) {
        return Some(same);
    }
    let limit = 1 + word.chars().count() / 4;
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(&word_normal, &normal(c)), *c))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// "unknown key `X` in CONTEXT; did you mean `Y`?"
pub(crate) fn unknown_key(key: &str, span: &Range<usize>, context: &str, valid: &[&str]) -> Error {
    let mut message = format!("unknown key `{key}` in {context}");
    match suggest(key, valid) {
        Some(near) => message.push_str(&format!("; did you mean `{near}`?")),
        None if valid.len() <= 12 => {
            message.push_str(&format!("; expected one of: {}", valid.join(", ")))
        }
        None => {}
    }
    Error::at(span, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_near_or_absent() {
        let keys = ["acks", "retries", "linger.ms", "enable.idempotence"];
        assert_eq!(suggest("ack", &keys), Some("acks"));
        assert_eq!(suggest("linger_ms", &keys), Some("linger.ms"));
        assert_eq!(
            suggest("enable.idempotency", &keys),
            Some("enable.idempotence")
        );
        assert_eq!(suggest("Retries", &keys), Some("retries"));
        assert_eq!(suggest("compression.type", &keys), None);
    }

    #[test]
    fn display_names_file_line_and_column() {
        let error = ScenarioError {
            path: PathBuf::from("scenarios/x.toml"),
            location: Some((3, 7)),
            message: "boom".into(),
            line_text: Some("acks = 2".into()),
            argument: None,
        };
        assert_eq!(error.to_string(), "scenarios/x.toml:3:7: boom");
        assert_eq!(
            error.report(),
            "error: scenarios/x.toml:3:7: boom\n3 | acks = 2\n  |       ^"
        );
        let error = ScenarioError {
            location: None,
            ..error
        };
        assert_eq!(error.to_string(), "scenarios/x.toml: boom");
        assert_eq!(error.report(), "error: scenarios/x.toml: boom");
    }
}
