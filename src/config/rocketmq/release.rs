//! RocketMQ's releases, and what each changed about the store without a configuration
//! key. A release's rules are 4.9.0's with every [`STEP`](STEPS) up to it applied, in
//! order. Unlike Kafka's minor releases, RocketMQ's patch releases changed durability
//! (recovery in 5.3.2), so a release is named in full: `"5.3.3"`, or `"develop"` for the
//! source after 5.3.3 (apache/rocketmq 8fc57f1, 2025-09-19).
//!
//! Each step names the pull request or issue that made the change, read in the source at
//! each tag.

use std::fmt;

/// A RocketMQ release: `major.minor.patch`, or the development branch after the newest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Release {
    Tag(u8, u8, u8),
    Develop,
}

const fn v(major: u8, minor: u8, patch: u8) -> Release {
    Release::Tag(major, minor, patch)
}

/// Every release a scenario may name, oldest first.
pub const KNOWN: &[Release] = &[
    v(4, 9, 0),
    v(4, 9, 1),
    v(4, 9, 2),
    v(4, 9, 3),
    v(4, 9, 4),
    v(4, 9, 5),
    v(4, 9, 6),
    v(4, 9, 7),
    v(4, 9, 8),
    v(5, 0, 0),
    v(5, 1, 0),
    v(5, 1, 1),
    v(5, 1, 2),
    v(5, 1, 3),
    v(5, 1, 4),
    v(5, 2, 0),
    v(5, 3, 0),
    v(5, 3, 1),
    v(5, 3, 2),
    v(5, 3, 3),
    Release::Develop,
];

impl Release {
    /// The newest release: what a scenario gets when it names none.
    pub const NEWEST: Release = v(5, 3, 3);

    /// `"5.3.3"` or `"develop"`, if it is a release hightide knows; the error lists them.
    pub fn parse(text: &str) -> Result<Release, String> {
        let known = || {
            let names: Vec<String> = KNOWN.iter().map(Release::to_string).collect();
            names.join(", ")
        };
        if text == "develop" {
            return Ok(Release::Develop);
        }
        let parts: Vec<Option<u8>> = text
            .split('.')
            .map(|part| {
                (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| part.parse().ok())
                    .flatten()
            })
            .collect();
        match parts[..] {
            [Some(major), Some(minor), Some(patch)] if KNOWN.contains(&v(major, minor, patch)) => {
                Ok(v(major, minor, patch))
            }
            [Some(major), Some(minor), Some(patch)] => Err(format!(
                "unknown RocketMQ release `{}`; the releases are: {}",
                v(major, minor, patch),
                known()
            )),
            _ => Err(format!(
                "invalid RocketMQ release `{text}`: expected a release like \"5.3.3\" or \"develop\"; the releases are: {}",
                known()
            )),
        }
    }

    /// The rules of this release.
    pub fn rules(self) -> Rules {
        let mut rules = Rules::ROCKETMQ_4_9_0;
        for step in STEPS.iter().filter(|step| step.since <= self) {
            (step.apply)(&mut rules);
        }
        rules
    }

    /// The steps up to this release, oldest first.
    pub fn history(self) -> impl Iterator<Item = &'static Step> {
        STEPS.iter().filter(move |step| step.since <= self)
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Release::Tag(major, minor, patch) => write!(f, "{major}.{minor}.{patch}"),
            Release::Develop => f.write_str("develop"),
        }
    }
}

impl Default for Release {
    fn default() -> Self {
        Release::NEWEST
    }
}

/// Where a clean start's CommitLog scan begins (`CommitLog.recoverNormally`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormalStart {
    /// The third-last file, dispatching nothing: whatever the ConsumeQueues lack stays
    /// unindexed unless dispatch reaches it after the start.
    ThirdLastFile,
    /// The newest file at or below the ConsumeQueues' end, dispatching the records that
    /// start past that end.
    ConsumeQueueEnd,
}

/// How the broker writes a config file such as `consumerOffset.json`
/// (`ConfigManager.persist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigPersist {
    /// `MixAll.string2File`: the new content to `.tmp`, the old to `.bak`, delete the
    /// file, rename the `.tmp` over it; no fsync.
    TmpThenRename,
    /// The old content to `.bak`, then the file truncated and written in place; no fsync.
    BackupThenOverwrite,
    /// The file moved to `.bak` and its directory fsynced, the new file written and
    /// forced, the directory fsynced.
    MoveThenFsync,
}

/// What a release does that no configuration key says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The buckets of the `HashMap` the broker reads a message's properties into, whose
    /// order the stored properties follow (`MessageDecoder.string2messageProperties`).
    pub properties_map_capacity: usize,
    /// Whether the stored properties keep their last separator
    /// (`messageProperties2String`).
    pub properties_trailing_separator: bool,
    /// The longs the checkpoint page holds: three timestamps, then the master's flushed
    /// offset, then the confirm offset (`StoreCheckpoint.flush`).
    pub checkpoint_longs: usize,
    /// A file queue's empty last file is deleted at load (`MappedFileQueue.doLoad`);
    /// before, its length stops the broker from starting.
    pub delete_empty_last_file: bool,
    pub normal_start: NormalStart,
    /// Abnormal recovery's start file may begin with a V2 record
    /// (`isMappedFileMatchedRecover`).
    pub abnormal_start_v2: bool,
    /// Abnormal recovery flushes every ConsumeQueue once after its re-dispatch.
    pub flush_queues_after_abnormal: bool,
    /// A CommitLog flush whose fsync failed still moves the flushed position
    /// (`DefaultMappedFile.flush`), so a SYNC_FLUSH put is answered PUT_OK after it.
    pub failed_flush_advances: bool,
    pub config_persist: ConfigPersist,
    /// Under SYNC_FLUSH, dispatch reads only what was flushed (`getConfirmOffset`
    /// returns `flushedWhere`); before, what was written.
    pub sync_flush_reads_flushed: bool,
    /// How many `flush(0)` calls GroupCommitService makes for a request before it answers
    /// FLUSH_DISK_TIMEOUT: two at once, or from 5.2.0 up to a thousand a millisecond apart.
    pub group_commit_flush_tries: u32,
    /// Dispatch starts after a start where recovery ended the log
    /// (`commitLog.getConfirmOffset()`); before, at the highest CommitLog end any
    /// ConsumeQueue indexes, so it indexes whatever a clean start passed over.
    pub reput_from_log_end: bool,
    /// The checkpoint is forced every second besides the ConsumeQueues' thorough flush.
    pub checkpoint_every_second: bool,
    /// The `abort` file holds the broker's PID, written by `string2File` (which leaves an
    /// `abort.bak`); before, it is empty.
    pub abort_holds_pid: bool,
    /// The broker stores a message's `WAIT` property and adds `MSG_REGION` and
    /// `TRACE_ON` to every message (`buildMsgContext` runs without a hook); before, it
    /// drops `WAIT` from the stored string and adds neither.
    pub context_properties: bool,
    /// A request that times out keeps its connection when getting the connection took
    /// most of the time (`left` ≤ 100 ms and ≤ a quarter of the timeout); before, every
    /// timeout closes it (`NettyRemotingClient.invokeSync`, `clientCloseSocketIfTimeout`).
    pub keep_channel_on_late_timeout: bool,
    /// The TransientStorePool is used only under ASYNC_FLUSH (`isTransientStorePoolEnable`);
    /// under SYNC_FLUSH `transientStorePoolEnable` is ignored.
    pub transient_store_pool_needs_async_flush: bool,
}

impl Rules {
    const ROCKETMQ_4_9_0: Rules = Rules {
        properties_map_capacity: 16,
        properties_trailing_separator: true,
        checkpoint_longs: 3,
        delete_empty_last_file: false,
        normal_start: NormalStart::ThirdLastFile,
        abnormal_start_v2: false,
        flush_queues_after_abnormal: false,
        failed_flush_advances: true,
        config_persist: ConfigPersist::TmpThenRename,
        sync_flush_reads_flushed: false,
        group_commit_flush_tries: 2,
        reput_from_log_end: false,
        checkpoint_every_second: false,
        abort_holds_pid: false,
        context_properties: false,
        keep_channel_on_late_timeout: false,
        transient_store_pool_needs_async_flush: true,
    };
}

/// One change between releases, with where RocketMQ made it.
pub struct Step {
    pub since: Release,
    pub change: &'static str,
    pub source: &'static str,
    apply: fn(&mut Rules),
}

/// The changes since 4.9.0, oldest first.
pub const STEPS: &[Step] = &[
    Step {
        since: v(4, 9, 1),
        change: "the stored properties string loses its last separator",
        source: "PR #2961",
        apply: |r| r.properties_trailing_separator = false,
    },
    Step {
        since: v(5, 0, 0),
        change: "the TransientStorePool is used under SYNC_FLUSH too (only ASYNC_FLUSH before)",
        source: "commit 821b91f (batch ConsumeQueue support) drops the condition from isTransientStorePoolEnable",
        apply: |r| r.transient_store_pool_needs_async_flush = false,
    },
    Step {
        since: v(5, 0, 0),
        change: "the checkpoint page also holds the master's flushed offset",
        source: "PR #3979",
        apply: |r| r.checkpoint_longs = 4,
    },
    Step {
        since: v(5, 0, 0),
        change: "the checkpoint is forced every second",
        source: "PR #3979 (RIP-34)",
        apply: |r| r.checkpoint_every_second = true,
    },
    Step {
        since: v(5, 0, 0),
        change: "the abort file holds the broker's PID",
        source: "PR #3979 (RIP-34)",
        apply: |r| r.abort_holds_pid = true,
    },
    Step {
        since: v(5, 0, 0),
        change: "dispatch resumes at the end recovery found, not at the ConsumeQueues' end",
        source: "PR #4439",
        apply: |r| r.reput_from_log_end = true,
    },
    Step {
        since: v(5, 0, 0),
        change: "the broker stores WAIT and adds MSG_REGION and TRACE_ON to every message",
        source: "SendMessageProcessor, read at the 4.9.8 and 5.0.0 tags",
        apply: |r| r.context_properties = true,
    },
    Step {
        since: v(5, 1, 0),
        change: "the broker reads properties into a HashMap of 128 buckets, which orders them",
        source: "PR #5803",
        apply: |r| r.properties_map_capacity = 128,
    },
    Step {
        since: v(5, 1, 0),
        change: "abnormal recovery may start at a file whose first record is V2",
        source: "PR #5611",
        apply: |r| r.abnormal_start_v2 = true,
    },
    Step {
        since: v(5, 1, 0),
        change: "config files are overwritten in place after a copy to .bak, instead of renamed over",
        source: "a961a9b (issue #5905)",
        apply: |r| r.config_persist = ConfigPersist::BackupThenOverwrite,
    },
    Step {
        since: v(5, 1, 1),
        change: "the checkpoint page also holds the confirm offset",
        source: "PR #6618",
        apply: |r| r.checkpoint_longs = 5,
    },
    Step {
        since: v(5, 1, 3),
        change: "an empty last CommitLog or ConsumeQueue file is deleted at load instead of stopping the broker",
        source: "PR #6903",
        apply: |r| r.delete_empty_last_file = true,
    },
    Step {
        since: v(5, 1, 4),
        change: "a request that timed out keeps its connection if connecting took most of its time",
        source: "PR #7057 (issue #7056)",
        apply: |r| r.keep_channel_on_late_timeout = true,
    },
    Step {
        since: v(5, 2, 0),
        change: "the stored properties string keeps its last separator again",
        source: "PR #7468 (issue #7437)",
        apply: |r| r.properties_trailing_separator = true,
    },
    Step {
        since: v(5, 2, 0),
        change: "GroupCommitService retries a flush up to 1000 times, 1 ms apart, before FLUSH_DISK_TIMEOUT",
        source: "PR #7524",
        apply: |r| r.group_commit_flush_tries = 1000,
    },
    Step {
        since: v(5, 3, 0),
        change: "under SYNC_FLUSH consumers see only flushed messages",
        source: "PR #8240 (issue #8239)",
        apply: |r| r.sync_flush_reads_flushed = true,
    },
    Step {
        since: v(5, 3, 2),
        change: "a clean start scans from the ConsumeQueues' end and dispatches the records past it",
        source: "PR #8915",
        apply: |r| r.normal_start = NormalStart::ConsumeQueueEnd,
    },
    Step {
        since: v(5, 3, 2),
        change: "abnormal recovery flushes every ConsumeQueue after its re-dispatch",
        source: "PR #8842",
        apply: |r| r.flush_queues_after_abnormal = true,
    },
    Step {
        since: Release::Develop,
        change: "a failed CommitLog flush leaves the flushed position where it was",
        source: "#9713 (issue #2706)",
        apply: |r| r.failed_flush_advances = false,
    },
    Step {
        since: Release::Develop,
        change: "config files are fsynced: moved to .bak, written, forced, their directory fsynced",
        source: "#9706 (issue #9705)",
        apply: |r| r.config_persist = ConfigPersist::MoveThenFsync,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_in_full_and_sort_with_develop_last() {
        assert_eq!(Release::parse("5.3.2"), Ok(v(5, 3, 2)));
        assert_eq!(Release::parse("develop"), Ok(Release::Develop));
        assert!(Release::parse("5.3")
            .unwrap_err()
            .contains("expected a release like"));
        assert!(Release::parse("5.4.0")
            .unwrap_err()
            .starts_with("unknown RocketMQ release `5.4.0`"));
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
        assert!(KNOWN.contains(&Release::NEWEST));
        assert_eq!(Release::default(), v(5, 3, 3));
    }

    /// Each step changes its release's rules, in the order of the releases.
    #[test]
    fn every_step_changes_something_and_the_steps_are_in_order() {
        assert!(STEPS.windows(2).all(|w| w[0].since <= w[1].since));
        for (i, step) in STEPS.iter().enumerate() {
            let mut before = Rules::ROCKETMQ_4_9_0;
            for earlier in &STEPS[..i] {
                (earlier.apply)(&mut before);
            }
            let mut after = before;
            (step.apply)(&mut after);
            assert_ne!(before, after, "{} changes nothing", step.change);
            assert!(KNOWN.contains(&step.since));
        }
    }

    /// Read at the tags: 4.9.0 kept the last separator, 4.9.1 to 5.1.4 cut it, 5.2.0 on
    /// keep it; the recovery of 5.3.2 on; develop's flush.
    #[test]
    fn rules_follow_the_releases_that_made_them() {
        let trailing: Vec<bool> = [v(4, 9, 0), v(4, 9, 8), v(5, 1, 4), v(5, 2, 0)]
            .map(|r| r.rules().properties_trailing_separator)
            .to_vec();
        assert_eq!(trailing, [true, false, false, true]);
        assert_eq!(v(5, 3, 1).rules().normal_start, NormalStart::ThirdLastFile);
        assert_eq!(
            v(5, 3, 2).rules().normal_start,
            NormalStart::ConsumeQueueEnd
        );
        assert_eq!(v(5, 0, 0).rules().checkpoint_longs, 4);
        assert_eq!(v(5, 3, 3).rules().checkpoint_longs, 5);
        assert!(v(5, 3, 3).rules().failed_flush_advances);
        assert!(!Release::Develop.rules().failed_flush_advances);
        assert_eq!(v(5, 3, 3).history().count(), STEPS.len() - 2);
        assert_eq!(
            v(5, 0, 0).rules().config_persist,
            ConfigPersist::TmpThenRename
        );
        assert_eq!(
            v(5, 1, 0).rules().config_persist,
            ConfigPersist::BackupThenOverwrite
        );
    }

    /// 4.9's `isTransientStorePoolEnable` ignores the pool under SYNC_FLUSH; 5.0's does not.
    #[test]
    fn the_pool_needs_async_flush_until_5_0() {
        use super::super::{FlushDiskType, StoreConfig};
        let pool = |flush_disk_type| StoreConfig {
            transient_store_pool_enable: true,
            flush_disk_type,
            ..StoreConfig::default()
        };
        let (sync, asynchronous) = (
            pool(FlushDiskType::SyncFlush),
            pool(FlushDiskType::AsyncFlush),
        );
        assert!(!sync.transient_store_pool(&v(4, 9, 8).rules()));
        assert!(asynchronous.transient_store_pool(&v(4, 9, 8).rules()));
        assert!(sync.transient_store_pool(&v(5, 0, 0).rules()));
        assert!(!StoreConfig::default().transient_store_pool(&v(5, 3, 3).rules()));
    }
}
