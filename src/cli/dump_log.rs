//! `hightide dump-log`: Kafka's `kafka-dump-log.sh` over hightide's files (see
//! `storage::dump`). This reads the files, prints, and turns what it found into the exit
//! status.

use super::{out, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::kafka::storage::dump::{self, Finding, Kind, Options, Summary};
use std::path::{Path, PathBuf};

/// The exit statuses, for `--help`.
pub const EXIT_HELP: &str = "Exit status: 0 every file was dumped and is sound; 1 a file is \
    damaged or disagrees with its log (invalid bytes, a CRC mismatch, an index mismatch, a \
    failed sanity check, a checkpoint the broker could not load), its dump still printed; 2 \
    bad input: a file missing or unreadable, of an unknown kind, or a bad option.";

/// Kafka's option names and meanings; its decoder options are left out (see
/// `storage::dump::Options`).
#[derive(clap::Args, Debug)]
pub struct DumpLogArgs {
    /// REQUIRED: The comma separated list of data and index log files to be dumped.
    #[arg(
        long,
        required = true,
        value_delimiter = ',',
        value_name = "file1, file2, ..."
    )]
    files: Vec<PathBuf>,
    /// If set, printing the messages content when dumping data logs.
    #[arg(long)]
    print_data_log: bool,
    /// If set, just verify the index log without printing its content.
    #[arg(long)]
    verify_index_only: bool,
    /// If set, just checks the index sanity without printing its content: whole entries,
    /// each above the one before, the part of a broker's startup check (trust the index or
    /// rebuild it) that reads the index alone.
    #[arg(long)]
    index_sanity_check: bool,
    /// Size of largest message: an index entry pointing at a larger batch is reported.
    #[arg(long, value_name = "size", default_value_t = dump::DEFAULT_MAX_MESSAGE_SIZE as i32,
          value_parser = clap::value_parser!(i32).range(0..))]
    max_message_size: i32,
    /// Limit the amount of total batches read in bytes avoiding reading the whole .log
    /// file(s).
    #[arg(long, value_name = "size", default_value_t = dump::DEFAULT_MAX_BYTES as i32,
          value_parser = clap::value_parser!(i32).range(0..))]
    max_bytes: i32,
    /// If set, uses deep instead of shallow iteration: a line per record (and a check that
    /// record offsets follow each other). Automatically set if print-data-log is enabled.
    #[arg(long)]
    deep_iteration: bool,
    /// Whether to skip printing metadata for each record.
    #[arg(long)]
    skip_record_metadata: bool,
}

pub fn run(args: DumpLogArgs) -> i32 {
    let options = Options {
        print_data_log: args.print_data_log,
        deep_iteration: args.deep_iteration,
        skip_record_metadata: args.skip_record_metadata,
        verify_index_only: args.verify_index_only,
        index_sanity_check: args.index_sanity_check,
        max_message_size: args.max_message_size as usize,
        max_bytes: args.max_bytes as usize,
    };
    let mut status = EXIT_OK;
    let mut summary = Summary::default();
    for path in &args.files {
        let dumped = dump_path(path, &options);
        out(&dumped.out);
        eprint!("{}", dumped.err);
        status = status.max(dumped.status);
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        summary.add(absolute.display().to_string(), dumped.findings);
    }
    eprint!("{}", summary.render());
    status
}

/// One file's stdout and stderr text, exit status and findings for the summary.
struct Dumped {
    out: String,
    err: String,
    status: i32,
    findings: Vec<Finding>,
}

fn dump_path(path: &Path, options: &Options) -> Dumped {
    let mut dumped = Dumped {
        out: format!("Dumping {}\n", path.display()),
        err: String::new(),
        status: EXIT_OK,
        findings: Vec::new(),
    };
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    let Some(kind) = Kind::of(&name) else {
        dumped.err = format!("Ignoring unknown file {}\n", path.display());
        dumped.status = EXIT_BAD_INPUT;
        return dumped;
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            dumped.err = format!("error: {}: {error}\n", path.display());
            dumped.status = EXIT_BAD_INPUT;
            return dumped;
        }
    };
    let log_path = path.with_file_name(dump::log_file_name(&name));
    let log = match kind.reads_log(options).then(|| std::fs::read(&log_path)) {
        Some(Err(error)) => {
            dumped.err = format!(
                "error: {}: {error} (the log {} is checked against)\n",
                log_path.display(),
                path.display()
            );
            dumped.status = EXIT_BAD_INPUT;
            None
        }
        Some(Ok(log)) => Some(log),
        None => None,
    };
    let file = dump::dump(
        kind,
        &path.display().to_string(),
        &bytes,
        log.as_deref(),
        options,
    );
    dumped.out.push_str(&file.out);
    dumped.err.push_str(&file.err);
    if file.damaged {
        dumped.status = dumped.status.max(EXIT_FAILED);
    }
    dumped.findings = file.findings;
    dumped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::BatchBuilder;
    use crate::kafka::types::ProducerId;

    /// A fresh directory under the system's temporary one, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(test: &str) -> TempDir {
            let dir = std::env::temp_dir()
                .join(format!("hightide-dump-log-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            TempDir(dir)
        }

        fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, bytes).expect("a temporary file");
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn segment() -> Vec<u8> {
        let mut b = BatchBuilder::new(1, ProducerId::NONE, -1, -1);
        b.push(1, None, Some(b"v"));
        b.build()
    }

    #[test]
    fn exit_status_is_0_clean_1_damaged_2_bad_input() {
        let dir = TempDir::new("status");
        let log = segment();
        let clean = dir.file("00000000000000000000.log", &log);
        let dumped = dump_path(&clean, &Options::default());
        assert_eq!(dumped.status, EXIT_OK, "{}{}", dumped.out, dumped.err);
        assert!(dumped.out.starts_with(&format!(
            "Dumping {}\nLog starting offset: 0\n",
            clean.display()
        )));
        let torn = dir.file("00000000000000000001.log", &log[..log.len() - 1]);
        let dumped = dump_path(&torn, &Options::default());
        assert_eq!(dumped.status, EXIT_FAILED);
        assert!(dumped.out.ends_with(&format!(
            "Found {} invalid bytes at the end of 00000000000000000001.log\n",
            log.len() - 1
        )));
        let missing = dir.0.join("00000000000000000002.log");
        assert_eq!(
            dump_path(&missing, &Options::default()).status,
            EXIT_BAD_INPUT
        );
    }

    #[test]
    fn unknown_files_are_ignored_as_kafka_says() {
        let dir = TempDir::new("unknown");
        let snapshot = dir.file("00000000000000000000.snapshot", b"");
        let dumped = dump_path(&snapshot, &Options::default());
        assert_eq!(dumped.out, format!("Dumping {}\n", snapshot.display()));
        assert_eq!(
            dumped.err,
            format!("Ignoring unknown file {}\n", snapshot.display())
        );
        assert_eq!(dumped.status, EXIT_BAD_INPUT);
    }

    /// An index is read with the `.log` beside it; without one it is still listed, and the
    /// missing log is bad input.
    #[test]
    fn an_index_is_checked_against_the_log_beside_it() {
        let dir = TempDir::new("index");
        let index = dir.file("00000000000000000000.index", &[0, 0, 0, 1, 0, 0, 0, 0]);
        let dumped = dump_path(&index, &Options::default());
        assert_eq!(
            dumped.out,
            format!("Dumping {}\noffset: 1 position: 0\n", index.display())
        );
        assert!(
            dumped.err.contains("00000000000000000000.log: "),
            "{}",
            dumped.err
        );
        assert_eq!(dumped.status, EXIT_BAD_INPUT);
        dir.file("00000000000000000000.log", &segment());
        let dumped = dump_path(&index, &Options::default());
        assert_eq!(
            dumped.findings,
            [Finding::IndexMismatch {
                index_offset: 1,
                log_offset: 0
            }]
        );
        assert_eq!(dumped.status, EXIT_FAILED);
    }
}
