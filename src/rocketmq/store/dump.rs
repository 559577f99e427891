//! `hightide dump-log` over RocketMQ's files: a CommitLog file record by record, as
//! recovery's check reads them, and a ConsumeQueue file entry by entry, each checked
//! against the CommitLog record it points at. RocketMQ ships no such tool; the fields are
//! named as its `MessageExt` names them.

use super::consume_queue::{Entry, ENTRY_BYTES};
use super::message::{self, body_crc, Checked};

/// A file's dump: its text, and whether anything in it is damaged.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dumped {
    pub out: String,
    pub damaged: bool,
}

/// The CommitLog file that starts at `from`, from its first record to where recovery's
/// check would stop. Zeros after the last record end it cleanly (the rest of a
/// preallocated file); anything else there is damage.
pub fn commit_log(from: u64, bytes: &[u8], print_body: bool) -> Dumped {
    let mut dumped = Dumped::default();
    let mut at = 0usize;
    while at < bytes.len() {
        match message::check(&bytes[at..], true) {
            Checked::Message(record) => {
                let end = at + record.msg_size as usize;
                let body = message::body(&bytes[at..end]);
                dumped.out.push_str(&format!(
                    "physicalOffset: {} size: {} topic: {} queueId: {} queueOffset: {} storeTimestamp: {} bodyCRC: {:#010x}",
                    from + at as u64,
                    record.msg_size,
                    record.topic,
                    record.queue_id,
                    record.queue_offset,
                    record.store_timestamp,
                    body_crc(&body)
                ));
                if print_body {
                    dumped
                        .out
                        .push_str(&format!(" body: {}", String::from_utf8_lossy(&body)));
                }
                dumped.out.push('\n');
                at = end;
            }
            Checked::Blank => {
                dumped.out.push_str(&format!(
                    "BLANK at physicalOffset {}: the file ends here ({} bytes)\n",
                    from + at as u64,
                    bytes.len() - at
                ));
                return dumped;
            }
            Checked::End { half } => {
                let rest = &bytes[at..];
                if half.is_none() && rest.iter().all(|&b| b == 0) {
                    dumped.out.push_str(&format!(
                        "End of the log at physicalOffset {}: {} bytes of zeros follow\n",
                        from + at as u64,
                        rest.len()
                    ));
                } else {
                    dumped.damaged = true;
                    dumped.out.push_str(&format!(
                        "Found invalid bytes at physicalOffset {} ({}): recovery ends the log here\n",
                        from + at as u64,
                        if half.is_some() {
                            "a record whose lengths disagree"
                        } else {
                            "a bad magic code, length or body CRC"
                        }
                    ));
                }
                return dumped;
            }
        }
    }
    dumped
}

/// The ConsumeQueue file of `topic`'s queue `queue_id` that starts at byte `from`: each
/// entry, and whether the CommitLog (`read(offset, size)`, `None` where it has no such
/// bytes) holds the message it points at, of this queue at this queue offset.
pub fn consume_queue(
    topic: &str,
    queue_id: i32,
    from: u64,
    bytes: &[u8],
    read: impl Fn(u64, usize) -> Option<Vec<u8>>,
) -> Dumped {
    let mut dumped = Dumped::default();
    for (i, chunk) in bytes.chunks_exact(ENTRY_BYTES as usize).enumerate() {
        let entry = Entry::from_bytes(chunk);
        let queue_offset = (from / ENTRY_BYTES) as i64 + i as i64;
        if entry == Entry::PRE_BLANK {
            dumped.out.push_str(&format!(
                "queueOffset: {queue_offset} a blank entry before the queue's first\n"
            ));
            continue;
        }
        if entry.commit_log_offset < 0 || entry.size <= 0 {
            if bytes[i * ENTRY_BYTES as usize..].iter().all(|&b| b == 0) {
                dumped
                    .out
                    .push_str(&format!("End of the queue at queueOffset {queue_offset}\n"));
            } else {
                dumped.damaged = true;
                dumped.out.push_str(&format!(
                    "Found an invalid entry at queueOffset {queue_offset}: recovery cuts the queue here\n"
                ));
            }
            return dumped;
        }
        let found = read(entry.commit_log_offset as u64, entry.size as usize)
            .map(|record| message::check(&record, false));
        let verdict = match found {
            Some(Checked::Message(record))
                if record.topic == topic
                    && record.queue_id == queue_id
                    && record.queue_offset == queue_offset
                    && record.msg_size as i32 == entry.size =>
            {
                "ok".to_owned()
            }
            Some(Checked::Message(record)) => {
                dumped.damaged = true;
                format!(
                    "MISMATCH: the CommitLog holds {} queue {} offset {} there",
                    record.topic, record.queue_id, record.queue_offset
                )
            }
            Some(_) => {
                dumped.damaged = true;
                "MISMATCH: no message at that physical offset".to_owned()
            }
            None => {
                dumped.damaged = true;
                "MISSING: the CommitLog does not reach that physical offset".to_owned()
            }
        };
        dumped.out.push_str(&format!(
            "queueOffset: {queue_offset} commitLogOffset: {} size: {} tagsCode: {} {verdict}\n",
            entry.commit_log_offset, entry.size, entry.tags_code
        ));
    }
    dumped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rocketmq::store::test_message;

    fn record(queue_offset: i64, physical_offset: i64, body: &[u8]) -> Vec<u8> {
        let mut message = test_message(1, body);
        message.queue_offset = queue_offset;
        message.physical_offset = physical_offset;
        let mut bytes = Vec::new();
        message.encode(&mut bytes);
        bytes
    }

    #[test]
    fn a_commit_log_dumps_each_record_then_its_zeros_and_flags_a_bad_crc() {
        let first = record(0, 0, b"one");
        let mut file = first.clone();
        file.extend(record(1, first.len() as i64, b"two"));
        file.resize(file.len() + 100, 0);
        let dumped = commit_log(0, &file, true);
        assert!(!dumped.damaged, "{}", dumped.out);
        let lines: Vec<&str> = dumped.out.lines().collect();
        assert_eq!(lines.len(), 3, "{}", dumped.out);
        assert!(lines[0].starts_with("physicalOffset: 0 size: "));
        assert!(lines[1].contains("queueOffset: 1") && lines[1].ends_with("body: two"));
        assert_eq!(
            lines[2],
            format!(
                "End of the log at physicalOffset {}: 100 bytes of zeros follow",
                2 * first.len()
            )
        );
        let last = first.len() - 1;
        file[last] ^= 1;
        file[first.len() - 4] ^= 1; // a byte of the body: its CRC no longer matches
        let dumped = commit_log(0, &file, false);
        assert!(dumped.damaged);
        assert!(dumped
            .out
            .starts_with("Found invalid bytes at physicalOffset 0"));
    }

    #[test]
    fn a_consume_queue_entry_is_checked_against_the_commit_log() {
        let log = record(0, 0, b"one");
        let entry = |offset: i64, size: i32| {
            Entry {
                commit_log_offset: offset,
                size,
                tags_code: 0,
            }
            .to_bytes()
        };
        let read =
            |at: u64, len: usize| log.get(at as usize..at as usize + len).map(<[u8]>::to_vec);
        let mut queue = entry(0, log.len() as i32).to_vec();
        queue.extend([0; 40]);
        let dumped = consume_queue("orders", 1, 0, &queue, read);
        assert!(!dumped.damaged, "{}", dumped.out);
        assert!(
            dumped
                .out
                .ends_with(" ok\nEnd of the queue at queueOffset 1\n"),
            "{}",
            dumped.out
        );
        let wrong_queue = consume_queue("orders", 2, 0, &queue, read);
        assert!(wrong_queue.damaged && wrong_queue.out.contains("MISMATCH"));
        let past = entry(4096, log.len() as i32);
        let missing = consume_queue("orders", 1, 0, &past, read);
        assert!(
            missing.damaged && missing.out.contains("MISSING"),
            "{}",
            missing.out
        );
    }
}
