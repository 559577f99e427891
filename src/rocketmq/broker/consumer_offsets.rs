//! The consumer groups' committed offsets as the broker keeps them
//! (`ConsumerOffsetManager`): a table of `topic@group` to each queue's next offset, held
//! in memory and written to `config/consumerOffset.json` every
//! `flushConsumerOffsetInterval` (5 s) by `ConfigManager.persist`, whose way of writing
//! is the release's:
//!
//! - **4.9 to 5.0**: the new content to `consumerOffset.json.tmp`, the old to `.bak`,
//!   then delete the file and rename the `.tmp` over it; nothing fsynced.
//! - **5.1.0 to 5.3.3** (a961a9b, issue #5905): the old content to `.bak`, then the file
//!   overwritten in place (truncated and written); nothing fsynced.
//! - **develop** (#9706): the file moved to `.bak`, the directory fsynced, the new file
//!   written and forced, the directory fsynced.
//!
//! Loading reads the file, and the `.bak` if the file is missing, empty or not readable
//! (`ConfigManager.load`); a `.bak` that is not readable either stops the broker.
//!
//! The file is fastjson's pretty format (tabs, unquoted queue ids), with the table's keys
//! in the order a fresh broker's `ConcurrentHashMap` of 1,024 bins holds them. Left out:
//! 5.x's `dataVersion` and `groupTopicMap` fields, and the order a reloaded table takes
//! (fastjson rebuilds it with 16 bins).

use crate::config::rocketmq::ConfigPersist;
use crate::os::disk::{Disk, DiskError};
use crate::types::java_string_hash;
use std::collections::BTreeMap;

/// The file, under the store root.
pub const PATH: &str = "store/config/consumerOffset.json";
const DIR: &str = "store/config";

/// `ConsumerOffsetManager.offsetTable`: `topic@group` to queue id to offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerOffsets {
    table: BTreeMap<String, BTreeMap<i32, i64>>,
    /// The keys in the order they were first committed, which orders them within a bin.
    arrival: Vec<String>,
}

/// Where a load found the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    File(ConsumerOffsets),
    Backup(ConsumerOffsets),
    /// Neither file held anything: the broker starts with no offsets.
    Nothing,
    /// The file was unreadable and so was the `.bak`: `load` returns false and the
    /// broker does not start.
    Unreadable(String),
}

impl ConsumerOffsets {
    /// `commitOffset`: the group's next offset in the queue.
    pub fn commit(&mut self, topic: &str, group: &str, queue_id: i32, offset: i64) {
        let key = format!("{topic}@{group}");
        if !self.table.contains_key(&key) {
            self.arrival.push(key.clone());
        }
        self.table.entry(key).or_default().insert(queue_id, offset);
    }

    /// How many queues have an offset, over every group and topic.
    pub fn queues(&self) -> usize {
        self.table.values().map(BTreeMap::len).sum()
    }

    /// `queryOffset`, if the group committed one for the queue.
    pub fn query(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        self.table
            .get(&format!("{topic}@{group}"))?
            .get(&queue_id)
            .copied()
    }

    /// `encode(true)`: fastjson's pretty output of the table.
    pub fn encode(&self) -> String {
        if self.table.is_empty() {
            return "{\n\t\"offsetTable\":{}\n}".to_string();
        }
        let entries: Vec<String> = chm_order(&self.arrival, 1024)
            .into_iter()
            .map(|key| {
                let queues: Vec<String> = self.table[key]
                    .iter()
                    .map(|(queue, offset)| format!("{queue}:{offset}"))
                    .collect();
                format!("\t\t\"{key}\":{{{}\n\t\t}}", queues.join(","))
            })
            .collect();
        format!(
            "{{\n\t\"offsetTable\":{{\n{}\n\t}}\n}}",
            entries.join(",\n")
        )
    }

    /// Read a file's content back; `Err` for anything fastjson would throw on.
    pub fn decode(text: &str) -> Result<ConsumerOffsets, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            at: 0,
        };
        let mut offsets = ConsumerOffsets::default();
        p.expect(b'{')?;
        let field = p.string()?;
        if field != "offsetTable" {
            return Err(format!("unexpected field `{field}`"));
        }
        p.expect(b':')?;
        p.expect(b'{')?;
        if !p.peek_is(b'}') {
            loop {
                let key = p.string()?;
                p.expect(b':')?;
                p.expect(b'{')?;
                let mut queues = BTreeMap::new();
                if !p.peek_is(b'}') {
                    loop {
                        let queue = p.integer()? as i32;
                        p.expect(b':')?;
                        queues.insert(queue, p.integer()?);
                        if !p.comma()? {
                            break;
                        }
                    }
                }
                p.expect(b'}')?;
                offsets.arrival.push(key.clone());
                offsets.table.insert(key, queues);
                if !p.comma()? {
                    break;
                }
            }
        }
        p.expect(b'}')?;
        p.expect(b'}')?;
        p.end()?;
        Ok(offsets)
    }

    /// `ConfigManager.persist`, the release's way.
    pub fn persist(&self, disk: &Disk, rule: ConfigPersist) -> Result<(), DiskError> {
        let content = self.encode();
        let backup = format!("{PATH}.bak");
        match rule {
            ConfigPersist::TmpThenRename => {
                let tmp = format!("{PATH}.tmp");
                write_file(disk, &tmp, &content)?;
                if disk.exists(PATH) {
                    let previous = disk.read_all(PATH)?;
                    disk.create(&backup)?;
                    disk.write(&backup, 0, &previous)?;
                    disk.delete(PATH)?;
                }
                disk.rename(&tmp, PATH)
            }
            ConfigPersist::BackupThenOverwrite => {
                if disk.exists(PATH) {
                    let previous = disk.read_all(PATH)?;
                    disk.create(&backup)?;
                    disk.write(&backup, 0, &previous)?;
                }
                write_file(disk, PATH, &content)
            }
            ConfigPersist::MoveThenFsync => {
                if disk.exists(PATH) {
                    disk.rename(PATH, &backup)?;
                    disk.fsync_dir_now(DIR)?;
                }
                write_file(disk, PATH, &content)?;
                disk.fsync_now(PATH)?;
                disk.fsync_dir_now(DIR)
            }
        }
    }

    /// `ConfigManager.load`.
    pub fn load(disk: &Disk) -> Loaded {
        if let Some(Ok(offsets)) = read(disk, PATH) {
            return Loaded::File(offsets);
        }
        match read(disk, &format!("{PATH}.bak")) {
            Some(Ok(offsets)) => Loaded::Backup(offsets),
            Some(Err(error)) => Loaded::Unreadable(error),
            None => Loaded::Nothing,
        }
    }
}

/// `ConsumerManageProcessor.queryConsumerOffset`'s answer: the committed offset; with
/// none, 0 if the queue starts at 0 and holds its first message in memory (always, for
/// a queue with messages here: nothing is swapped out), as for a group that started
/// before anything was sent; else `QUERY_NOT_FOUND` (`None`), and the client picks by
/// `consumeFromWhere`.
pub fn query_answer(committed: Option<i64>, (min_offset, max_offset): (i64, i64)) -> Option<i64> {
    committed.or_else(|| (min_offset <= 0 && max_offset > 0).then_some(0))
}

/// A file's table: `None` if it is missing or empty.
fn read(disk: &Disk, path: &str) -> Option<Result<ConsumerOffsets, String>> {
    let bytes = disk.read_all(path).ok().filter(|b| !b.is_empty())?;
    Some(
        String::from_utf8(bytes)
            .map_err(|e| e.to_string())
            .and_then(|text| ConsumerOffsets::decode(&text)),
    )
}

/// `FileWriter`/`FileOutputStream`: truncate, then write.
fn write_file(disk: &Disk, path: &str, content: &str) -> Result<(), DiskError> {
    disk.create(path)?;
    disk.write(path, 0, content.as_bytes())
}

/// The order a `ConcurrentHashMap` of `bins` bins iterates keys put in `arrival` order:
/// by bin (`spread(h) = (h ^ h >>> 16) & 0x7fffffff`, masked), then by arrival.
fn chm_order(arrival: &[String], bins: usize) -> Vec<&String> {
    let mut keyed: Vec<(usize, usize, &String)> = arrival
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let h = java_string_hash(key) as u32;
            let spread = (h ^ (h >> 16)) & 0x7fff_ffff;
            (spread as usize & (bins - 1), i, key)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, _, key)| key).collect()
}

/// Just enough of fastjson's grammar for this file.
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek_is(&mut self, b: u8) -> bool {
        self.skip_space();
        self.s.get(self.at) == Some(&b)
    }

    fn expect(&mut self, b: u8) -> Result<(), String> {
        if self.peek_is(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", b as char, self.at))
        }
    }

    fn comma(&mut self) -> Result<bool, String> {
        if self.peek_is(b',') {
            self.at += 1;
            return Ok(true);
        }
        Ok(false)
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let start = self.at;
        while self.s.get(self.at).is_some_and(|&b| b != b'"') {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.at]).map_err(|e| e.to_string())?;
        self.expect(b'"')?;
        Ok(text.to_string())
    }

    fn integer(&mut self) -> Result<i64, String> {
        self.skip_space();
        let start = self.at;
        if self.s.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        while self.s.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        std::str::from_utf8(&self.s[start..self.at])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("expected a number at byte {start}"))
    }

    fn end(&mut self) -> Result<(), String> {
        self.skip_space();
        if self.at == self.s.len() {
            Ok(())
        } else {
            Err(format!("trailing bytes at {}", self.at))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::disk::{DiskConfig, Filesystem, PowerLossModel};

    /// The file fastjson 1.2.83 writes for this table (`JSON.toJSONString(mgr, true)`,
    /// run against the real library; the keys' order is the map's).
    #[test]
    fn the_file_is_fastjson_s_pretty_format() {
        let mut offsets = ConsumerOffsets::default();
        for (queue, offset) in [(0, 12), (1, 5), (2, 0), (3, 7)] {
            offsets.commit("TopicTest", "group_a", queue, offset);
        }
        offsets.commit("%RETRY%group_a", "group_a", 0, 0);
        let expected = "{\n\t\"offsetTable\":{\n\t\t\"%RETRY%group_a@group_a\":{0:0\n\t\t},\n\t\t\"TopicTest@group_a\":{0:12,1:5,2:0,3:7\n\t\t}\n\t}\n}";
        assert_eq!(offsets.encode(), expected);
        assert_eq!(
            ConsumerOffsets::default().encode(),
            "{\n\t\"offsetTable\":{}\n}"
        );
        let back = ConsumerOffsets::decode(expected).unwrap();
        assert_eq!(back.query("TopicTest", "group_a", 3), Some(7));
        assert_eq!(back.query("TopicTest", "group_b", 3), None);
        assert!(ConsumerOffsets::decode("{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:1").is_err());
        assert!(ConsumerOffsets::decode("\0\0\0\0").is_err());
    }

    fn disk() -> Disk {
        let config = DiskConfig {
            power_loss: PowerLossModel::DropUnflushed,
            filesystem: Filesystem::NoMetadataWriteback,
            ..DiskConfig::default()
        };
        Disk::new(config, 1)
    }

    #[test]
    fn a_query_answers_the_commit_else_zero_for_a_queue_that_starts_at_zero() {
        assert_eq!(query_answer(Some(7), (0, 100)), Some(7));
        assert_eq!(query_answer(Some(7), (50, 100)), Some(7));
        assert_eq!(query_answer(None, (0, 100)), Some(0));
        // An empty queue has no first message in memory; one past its start, none at 0.
        assert_eq!(query_answer(None, (0, 0)), None);
        assert_eq!(query_answer(None, (50, 100)), None);
    }

    fn table(offset: i64) -> ConsumerOffsets {
        let mut offsets = ConsumerOffsets::default();
        offsets.commit("orders", "billing", 0, offset);
        offsets
    }

    /// Up to 5.3.3 nothing is fsynced: a power loss takes every write since the last
    /// fsync (here, all of them); develop's file survives it.
    #[test]
    fn only_develop_s_file_survives_a_power_loss() {
        for rule in [
            ConfigPersist::TmpThenRename,
            ConfigPersist::BackupThenOverwrite,
        ] {
            let disk = disk();
            table(10).persist(&disk, rule).unwrap();
            table(20).persist(&disk, rule).unwrap();
            match ConsumerOffsets::load(&disk) {
                Loaded::File(read) => assert_eq!(read.query("orders", "billing", 0), Some(20)),
                other => panic!("{rule:?}: {other:?}"),
            }
            assert!(
                matches!(ConsumerOffsets::load(&disk), Loaded::File(_)),
                "a kill keeps the page cache"
            );
            disk.power_loss();
            assert_eq!(ConsumerOffsets::load(&disk), Loaded::Nothing, "{rule:?}");
        }
        let disk = disk();
        table(10)
            .persist(&disk, ConfigPersist::MoveThenFsync)
            .unwrap();
        table(20)
            .persist(&disk, ConfigPersist::MoveThenFsync)
            .unwrap();
        disk.power_loss();
        let Loaded::File(read) = ConsumerOffsets::load(&disk) else {
            panic!()
        };
        assert_eq!(read.query("orders", "billing", 0), Some(20));
    }

    /// 5.1 to 5.3.3 overwrite in place: a file whose new length reached the medium
    /// without its bytes reads as zeros, which fastjson cannot parse, so the `.bak` is
    /// read; when the `.bak` is zeros too, the broker does not start.
    #[test]
    fn a_zeroed_file_falls_back_to_the_backup_and_a_zeroed_backup_stops_the_broker() {
        let disk = disk();
        table(10)
            .persist(&disk, ConfigPersist::BackupThenOverwrite)
            .unwrap();
        disk.fsync_now(PATH).unwrap();
        disk.fsync_dir_now(DIR).unwrap();
        table(20)
            .persist(&disk, ConfigPersist::BackupThenOverwrite)
            .unwrap();
        disk.fsync_now(&format!("{PATH}.bak")).unwrap();
        disk.fsync_dir_now(DIR).unwrap();
        let zeros = vec![0; disk.len(PATH).unwrap() as usize];
        disk.write(PATH, 0, &zeros).unwrap();
        let Loaded::Backup(read) = ConsumerOffsets::load(&disk) else {
            panic!()
        };
        assert_eq!(read.query("orders", "billing", 0), Some(10));
        disk.write(&format!("{PATH}.bak"), 0, &zeros).unwrap();
        assert!(matches!(
            ConsumerOffsets::load(&disk),
            Loaded::Unreadable(_)
        ));
    }
}
