//! RocketMQ's section of the key registry, `[rocketmq]`: the broker's store
//! (`MessageStoreConfig`), the broker (`BrokerConfig`) and the producer
//! (`DefaultMQProducer`), with RocketMQ's own camelCase names and defaults; and RocketMQ's
//! part of `hightide config --rocketmq`.

use super::{render, wrong_type, Key, Kind, Notes, Section, INT_MAX, LONG_MAX};
use crate::config::rocketmq::{ConsumeFromWhere, FlushDiskType, Release, RocketMqConfig, Rules};
use crate::scenario::node::{Node, Value};
use crate::scenario::Error;
use std::fmt::Write as _;
use std::time::Duration;

/// An interval or timeout: an integer of milliseconds, as RocketMQ's Java `int` and
/// `long` keys take it; a `Duration` in the config.
macro_rules! millis {
    ($name:literal, $($field:ident).+, $min:expr, $max:expr, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Int {
                min: $min,
                max: $max,
                get: |c| c.$($field).+.as_millis() as i64,
                set: |c, v| c.$($field).+ = Duration::from_millis(v.unsigned_abs()),
            },
        }
    };
}

/// A count or a size, in a field of one of the config's parts.
macro_rules! number {
    ($name:literal, $($field:ident).+ as $ty:ty, $min:expr, $max:expr, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Int {
                min: $min,
                max: $max,
                get: |c| c.$($field).+ as i64,
                set: |c, v| c.$($field).+ = v as $ty,
            },
        }
    };
}

macro_rules! flag {
    ($name:literal, $($field:ident).+, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Bool {
                get: |c| c.$($field).+,
                set: |c, v| c.$($field).+ = v,
            },
        }
    };
}

/// `flushDiskType`'s values, as RocketMQ names them, in the order of [`FLUSH_DISK_TYPES`].
const FLUSH_DISK_TYPE_NAMES: &[&str] = &[
    FlushDiskType::AsyncFlush.name(),
    FlushDiskType::SyncFlush.name(),
];
const FLUSH_DISK_TYPES: [FlushDiskType; 2] = [FlushDiskType::AsyncFlush, FlushDiskType::SyncFlush];

/// `consumeFromWhere`'s values, in the order of [`CONSUME_FROM`].
const CONSUME_FROM_NAMES: &[&str] = &["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET"];
const CONSUME_FROM: [ConsumeFromWhere; 2] =
    [ConsumeFromWhere::LastOffset, ConsumeFromWhere::FirstOffset];

/// The smallest `mappedFileSizeCommitLog`: one 4 KiB page, the unit RocketMQ's flush and
/// commit counts (`flushCommitLogLeastPages`) are in (`OS_PAGE_SIZE`); a smaller file
/// could not hold a page of messages, nor a record beside the blank that ends a file.
const MIN_COMMIT_LOG_FILE: i64 = 4096;
/// The size of a ConsumeQueue entry (`CQ_STORE_UNIT_SIZE`): offset, size, tags code.
const CONSUME_QUEUE_ENTRY: i64 = 20;

pub(crate) static ROCKETMQ: Section<RocketMqConfig> = Section {
    name: "rocketmq",
    title: "RocketMQ configuration (every broker, producer and consumer), RocketMQ's names and defaults",
    keys: &[
        Key {
            name: "flushDiskType",
            meaning: "When a put is answered (default ASYNC_FLUSH): \"ASYNC_FLUSH\" after the append to the page cache, FlushRealTimeService flushing behind it; \"SYNC_FLUSH\" after GroupCommitService's flush covers it.",
            kind: Kind::Choice {
                names: FLUSH_DISK_TYPE_NAMES,
                get: |c| {
                    FLUSH_DISK_TYPES
                        .iter()
                        .position(|t| *t == c.store.flush_disk_type)
                        .expect("every flush disk type is listed")
                },
                set: |c, i| c.store.flush_disk_type = FLUSH_DISK_TYPES[i],
            },
        },
        flag!("transientStorePoolEnable", store.transient_store_pool_enable,
            "Appends go to off-heap buffers, committed to the file every commitIntervalCommitLog (default false); up to 4.9.x only under ASYNC_FLUSH."),
        number!("transientStorePoolSize", store.transient_store_pool_size as u32, 1, INT_MAX,
            "Buffers of the transient store pool, each a CommitLog file's size (default 5)."),
        millis!("flushIntervalCommitLog", store.flush_interval_commit_log, 1, INT_MAX,
            "FlushRealTimeService's period under ASYNC_FLUSH, in milliseconds (default 500)."),
        number!("flushCommitLogLeastPages", store.flush_commit_log_least_pages as u64, 0, INT_MAX,
            "4 KiB pages the CommitLog must gain before a periodic flush (default 4)."),
        millis!("flushCommitLogThoroughInterval", store.flush_commit_log_thorough_interval, 0, INT_MAX,
            "A periodic flush of whatever is unflushed, pages or not, at least this often, in milliseconds (default 10000)."),
        flag!("flushCommitLogTimed", store.flush_commit_log_timed,
            "FlushRealTimeService sleeps its period (true) rather than waiting to be woken by a put (default true)."),
        millis!("syncFlushTimeout", store.sync_flush_timeout, 1, LONG_MAX,
            "Under SYNC_FLUSH, a put whose flush takes longer is answered FLUSH_DISK_TIMEOUT, in milliseconds (default 5000)."),
        millis!("commitIntervalCommitLog", store.commit_interval_commit_log, 1, INT_MAX,
            "With the transient store pool, how often CommitRealTimeService commits buffers to the file, in milliseconds (default 200)."),
        number!("commitCommitLogLeastPages", store.commit_commit_log_least_pages as u64, 0, INT_MAX,
            "4 KiB pages the buffer must gain before a periodic commit (default 4)."),
        millis!("commitCommitLogThoroughInterval", store.commit_commit_log_thorough_interval, 0, INT_MAX,
            "A commit of whatever is uncommitted at least this often, in milliseconds (default 200)."),
        millis!("flushIntervalConsumeQueue", store.flush_interval_consume_queue, 1, INT_MAX,
            "FlushConsumeQueueService's period, in milliseconds (default 1000)."),
        number!("flushConsumeQueueLeastPages", store.flush_consume_queue_least_pages as u64, 0, INT_MAX,
            "4 KiB pages a ConsumeQueue must gain before a periodic flush (default 2)."),
        millis!("flushConsumeQueueThoroughInterval", store.flush_consume_queue_thorough_interval, 0, INT_MAX,
            "A flush of every ConsumeQueue and the checkpoint at least this often, in milliseconds (default 60000)."),
        flag!("checkCRCOnRecover", store.check_crc_on_recover,
            "Recovery checks each message body's CRC and stops at the first mismatch (default true)."),
        number!("maxMessageSize", store.max_message_size as u64, 1, INT_MAX,
            "Largest message body the broker stores, in bytes (default 4194304, 4 MiB)."),
        number!("mappedFileSizeCommitLog", store.mapped_file_size_commit_log as u64, MIN_COMMIT_LOG_FILE, INT_MAX,
            "Bytes of each CommitLog file, at least one 4 KiB page (default 1073741824, 1 GiB)."),
        Key {
            name: "mappedFileSizeConsumeQueue",
            meaning: "Bytes of each ConsumeQueue file, a multiple of its 20-byte entries (default 6000000, 300000 entries).",
            kind: Kind::Other {
                set: set_consume_queue_file,
                show: |c| c.store.mapped_file_size_consume_queue.to_string(),
            },
        },
        millis!("flushConsumerOffsetInterval", store.flush_consumer_offset_interval, 1, INT_MAX,
            "How often the broker writes consumerOffset.json, in milliseconds (default 5000)."),
        millis!("registerNameServerPeriod", broker.register_name_server_period, 1, INT_MAX,
            "How often a broker registers with the NameServer after its first 10 s, in milliseconds (default 30000), clamped to 10000..60000 as BrokerController does."),
        millis!("sendMsgTimeout", producer.send_msg_timeout, 1, INT_MAX,
            "A synchronous send and all its retries must end within this, in milliseconds (default 3000)."),
        number!("retryTimesWhenSendFailed", producer.retry_times_when_send_failed as u32, 0, INT_MAX,
            "Retries of a failed synchronous send, each on another broker's queue if it can (default 2)."),
        flag!("retryAnotherBrokerWhenNotStoreOK", producer.retry_another_broker_when_not_store_ok,
            "Retry a send answered with a status other than SEND_OK, which stores the message again (default false)."),
        Key {
            name: "consumeFromWhere",
            meaning: "Where a consumer group starts in a queue it has no offset for (default CONSUME_FROM_LAST_OFFSET): \"CONSUME_FROM_LAST_OFFSET\" the queue's end (0 while its first message is in memory), \"CONSUME_FROM_FIRST_OFFSET\" its first message.",
            kind: Kind::Choice {
                names: CONSUME_FROM_NAMES,
                get: |c| {
                    CONSUME_FROM
                        .iter()
                        .position(|w| *w == c.consumer.consume_from_where)
                        .expect("every consumeFromWhere is listed")
                },
                set: |c, i| c.consumer.consume_from_where = CONSUME_FROM[i],
            },
        },
        millis!("persistConsumerOffsetInterval", consumer.persist_consumer_offset_interval, 1, INT_MAX,
            "How often a consumer sends its queues' offsets to their masters, oneway, in milliseconds (default 5000); each pull also carries its queue's offset."),
        millis!("pollNameServerInterval", producer.poll_name_server_interval, 1, INT_MAX,
            "How often a client refreshes its topic routes from the NameServer, in milliseconds (default 30000)."),
    ],
};

fn set_consume_queue_file(config: &mut RocketMqConfig, node: &Node) -> Result<(), Error> {
    let name = "mappedFileSizeConsumeQueue";
    let Value::Integer(bytes) = node.value else {
        return Err(wrong_type(name, "an integer of bytes", node));
    };
    if !(CONSUME_QUEUE_ENTRY..=INT_MAX).contains(&bytes) || bytes % CONSUME_QUEUE_ENTRY != 0 {
        return Err(Error::at(
            &node.span,
            format!(
                "`{name}` must be a multiple of {CONSUME_QUEUE_ENTRY} (a ConsumeQueue entry's bytes) from {CONSUME_QUEUE_ENTRY} to {INT_MAX}, found {bytes}"
            ),
        ));
    }
    config.store.mapped_file_size_consume_queue = bytes as u64;
    Ok(())
}

/// RocketMQ's part of `hightide config --rocketmq`: `[cluster] system` and `rocketmq`, the
/// history of RocketMQ's changes up to `release` with the rules they make, and
/// `[rocketmq]` with its defaults (the same in every release).
pub(super) fn reference(out: &mut String, release: Release) {
    let _ = writeln!(
        out,
        "[cluster]\nsystem = \"rocketmq\"\n    The broker system a run models: \"kafka\" (default) or \"rocketmq\".\nrocketmq = \"{release}\"\n    The RocketMQ release whose rules apply: {} to {} (default {}).\n",
        crate::config::rocketmq::RELEASES[0],
        crate::config::rocketmq::RELEASES[crate::config::rocketmq::RELEASES.len() - 1],
        Release::NEWEST
    );
    let _ = writeln!(
        out,
        "# RocketMQ {release}: 4.9.0's rules and these changes:"
    );
    for step in release.history() {
        let _ = writeln!(
            out,
            "#   {:<7} {} ({})",
            step.since.to_string(),
            step.change,
            step.source
        );
    }
    let _ = writeln!(out, "# so its rules, which no key sets:");
    for (rule, value) in rules(&release.rules()) {
        let _ = writeln!(out, "#   {rule}: {value}");
    }
    out.push('\n');
    let notes = Notes {
        lacks: &|_, _| None,
        inherited: &|_| String::new(),
        meaning: &|_, _| None,
    };
    render(
        out,
        &ROCKETMQ,
        "[rocketmq]",
        &RocketMqConfig::default(),
        &notes,
    );
}

/// A release's rules, each named as `Rules` names it, with its value. Destructured whole,
/// so that a new rule cannot go unlisted.
fn rules(rules: &Rules) -> Vec<(&'static str, String)> {
    let Rules {
        properties_map_capacity,
        properties_trailing_separator,
        checkpoint_longs,
        delete_empty_last_file,
        normal_start,
        abnormal_start_v2,
        flush_queues_after_abnormal,
        failed_flush_advances,
        config_persist,
        sync_flush_reads_flushed,
        group_commit_flush_tries,
        reput_from_log_end,
        checkpoint_every_second,
        abort_holds_pid,
        context_properties,
        keep_channel_on_late_timeout,
        transient_store_pool_needs_async_flush,
    } = rules;
    vec![
        (
            "properties_map_capacity",
            properties_map_capacity.to_string(),
        ),
        (
            "properties_trailing_separator",
            properties_trailing_separator.to_string(),
        ),
        ("checkpoint_longs", checkpoint_longs.to_string()),
        ("delete_empty_last_file", delete_empty_last_file.to_string()),
        ("normal_start", format!("{normal_start:?}")),
        ("abnormal_start_v2", abnormal_start_v2.to_string()),
        (
            "flush_queues_after_abnormal",
            flush_queues_after_abnormal.to_string(),
        ),
        ("failed_flush_advances", failed_flush_advances.to_string()),
        ("config_persist", format!("{config_persist:?}")),
        (
            "sync_flush_reads_flushed",
            sync_flush_reads_flushed.to_string(),
        ),
        (
            "group_commit_flush_tries",
            group_commit_flush_tries.to_string(),
        ),
        ("reput_from_log_end", reput_from_log_end.to_string()),
        (
            "checkpoint_every_second",
            checkpoint_every_second.to_string(),
        ),
        ("abort_holds_pid", abort_holds_pid.to_string()),
        ("context_properties", context_properties.to_string()),
        (
            "keep_channel_on_late_timeout",
            keep_channel_on_late_timeout.to_string(),
        ),
        (
            "transient_store_pool_needs_async_flush",
            transient_store_pool_needs_async_flush.to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::tests::{every_key_default_reads_back, names_are_unique};
    use super::*;

    #[test]
    fn printed_defaults_are_the_defaults() {
        every_key_default_reads_back(&ROCKETMQ, RocketMqConfig::default);
        names_are_unique(&ROCKETMQ);
    }

    /// Each meaning says the key's default, which is the one `hightide config` prints.
    #[test]
    fn every_meaning_says_its_default() {
        let defaults = RocketMqConfig::default();
        for key in ROCKETMQ.keys {
            let shown = key.show(&defaults, &|_| String::new());
            let says = format!("(default {}", shown.trim_matches('"'));
            assert!(key.meaning.contains(&says), "{}: {}", key.name, key.meaning);
        }
    }

    /// The keys set the fields their names say: a key set to a value of its own reads
    /// back as that value, and no other key's value moves.
    #[test]
    fn each_key_sets_its_own_field() {
        let set = |key: &str, text: &str| {
            let root = crate::scenario::node::parse_document(&format!("v = {text}")).unwrap();
            let mut config = RocketMqConfig::default();
            ROCKETMQ
                .find(key)
                .unwrap()
                .apply(&mut config, &root[0].value)
                .map(|()| config)
        };
        let sync = set("flushDiskType", "\"SYNC_FLUSH\"").unwrap();
        assert_eq!(sync.store.flush_disk_type, FlushDiskType::SyncFlush);
        let period = set("registerNameServerPeriod", "20000").unwrap();
        assert_eq!(
            period.broker.register_name_server_period,
            Duration::from_secs(20)
        );
        let retries = set("retryTimesWhenSendFailed", "0").unwrap();
        assert_eq!(retries.producer.retry_times_when_send_failed, 0);
        assert_eq!(retries.store, RocketMqConfig::default().store);
        let error = set("mappedFileSizeConsumeQueue", "30").unwrap_err();
        assert!(
            error.message.contains("multiple of 20"),
            "{}",
            error.message
        );
        assert!(set("mappedFileSizeConsumeQueue", "40").is_ok());
        let error = set("mappedFileSizeCommitLog", "4095").unwrap_err();
        assert!(error.message.contains("from 4096"), "{}", error.message);
    }
}
