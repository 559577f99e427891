//! `hightide dump-log`: Kafka's `kafka-dump-log.sh` over hightide's files (see
//! `storage::dump`), and RocketMQ's CommitLog and ConsumeQueue files
//! (`rocketmq::store::dump`), told apart by where a file lies in its store. This reads the files, prints, and turns what it found into the exit
//! status.

use super::{out, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::kafka::storage::dump::{self, Finding, Kind, Options, Summary};
use crate::rocketmq::store::dump as rocketmq_dump;
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
    if let Some(file) = RocketMqFile::of(path) {
        dump_rocketmq(path, file, options.print_data_log, &mut dumped);
        return dumped;
    }
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

/// A RocketMQ store file, told by where it lies: `commitlog/<offset>`, or
/// `consumequeue/<topic>/<queueId>/<offset>`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RocketMqFile {
    CommitLog {
        from: u64,
    },
    ConsumeQueue {
        topic: String,
        queue_id: i32,
        from: u64,
    },
}

impl RocketMqFile {
    fn of(path: &Path) -> Option<RocketMqFile> {
        let parts: Vec<String> = path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let from = parts.last()?;
        if from.len() < 20 || !from.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let from = from.parse().ok()?;
        match parts.as_slice() {
            [.., dir, _] if dir == "commitlog" => Some(RocketMqFile::CommitLog { from }),
            [.., dir, topic, queue, _] if dir == "consumequeue" => {
                Some(RocketMqFile::ConsumeQueue {
                    topic: topic.clone(),
                    queue_id: queue.parse().ok()?,
                    from,
                })
            }
            _ => None,
        }
    }
}

/// A RocketMQ file's dump; a ConsumeQueue's entries are checked against the store's
/// `commitlog` directory (three levels up), whose files are read as needed.
fn dump_rocketmq(path: &Path, file: RocketMqFile, print_body: bool, dumped: &mut Dumped) {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            dumped.err = format!("error: {}: {error}\n", path.display());
            dumped.status = EXIT_BAD_INPUT;
            return;
        }
    };
    let file = match file {
        RocketMqFile::CommitLog { from } => rocketmq_dump::commit_log(from, &bytes, print_body),
        RocketMqFile::ConsumeQueue {
            topic,
            queue_id,
            from,
        } => {
            let store = path.ancestors().nth(4).unwrap_or(Path::new("."));
            let files = CommitLogFiles::new(&store.join("commitlog"));
            rocketmq_dump::consume_queue(&topic, queue_id, from, &bytes, |at, len| {
                files.read(at, len)
            })
        }
    };
    dumped.out.push_str(&file.out);
    if file.damaged {
        dumped.status = dumped.status.max(EXIT_FAILED);
    }
}

/// A store's CommitLog files on the real disk, by the offset each is named after.
struct CommitLogFiles {
    files: Vec<(u64, PathBuf)>,
}

impl CommitLogFiles {
    fn new(dir: &Path) -> CommitLogFiles {
        let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let from = entry.file_name().to_string_lossy().parse().ok()?;
                Some((from, entry.path()))
            })
            .collect();
        files.sort();
        CommitLogFiles { files }
    }

    /// `len` bytes at physical offset `at`, if one file holds them all.
    fn read(&self, at: u64, len: usize) -> Option<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        let (from, path) = self.files.iter().rev().find(|(from, _)| *from <= at)?;
        let mut file = std::fs::File::open(path).ok()?;
        file.seek(SeekFrom::Start(at - from)).ok()?;
        let mut bytes = vec![0; len];
        file.read_exact(&mut bytes).ok()?;
        Some(bytes)
    }
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

    /// A RocketMQ store as `--dump-disks` writes it: its CommitLog file dumps record by
    /// record, a ConsumeQueue file entry by entry against it, and an entry pointing past
    /// the log is damage.
    #[test]
    fn rocketmq_files_are_told_by_their_place_in_the_store() {
        use crate::rocketmq::store::consume_queue::Entry;
        let dir = TempDir::new("rocketmq");
        let message = crate::rocketmq::store::test_message(0, b"v");
        let mut record = Vec::new();
        message.encode(&mut record);
        let name = "00000000000000000000";
        std::fs::create_dir_all(dir.0.join("store/commitlog")).unwrap();
        std::fs::create_dir_all(dir.0.join("store/consumequeue/orders/0")).unwrap();
        let log = dir.file(&format!("store/commitlog/{name}"), &record);
        let dumped = dump_path(&log, &Options::default());
        assert_eq!(dumped.status, EXIT_OK, "{}", dumped.out);
        assert!(
            dumped.out.contains("physicalOffset: 0 size: "),
            "{}",
            dumped.out
        );
        let entry = |offset: i64| {
            Entry {
                commit_log_offset: offset,
                size: record.len() as i32,
                tags_code: 0,
            }
            .to_bytes()
        };
        let queue = dir.file(&format!("store/consumequeue/orders/0/{name}"), &entry(0));
        let dumped = dump_path(&queue, &Options::default());
        assert_eq!(dumped.status, EXIT_OK, "{}", dumped.out);
        assert!(dumped.out.ends_with(" ok\n"), "{}", dumped.out);
        let past = dir.file(&format!("store/consumequeue/orders/0/{name}"), &entry(4096));
        let dumped = dump_path(&past, &Options::default());
        assert_eq!(dumped.status, EXIT_FAILED, "{}", dumped.out);
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
