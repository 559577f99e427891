//! The decisions of the store's service threads, as plain data the broker's tasks follow:
//! how many pages each periodic flush or commit needs, which SYNC_FLUSH puts a flush
//! answered (GroupCommitService, with FlushDiskWatcher's timeout), and how far dispatch
//! may read (ReputMessageService's bound, by release).

use super::commit_log::CommitLog;
use crate::config::rocketmq::{FlushDiskType, Rules};
use crate::os::clock::SimTime;
use std::time::Duration;

/// The "thorough" rule every periodic service follows: a pass needs `least` pages, except
/// one every `interval`, which takes whatever there is (0 pages). The first pass is
/// thorough (Java's timer starts at 0, against the wall clock). FlushRealTimeService
/// decides before it sleeps, so its thorough pass flushes what the sleep let in.
#[derive(Clone, Debug)]
pub struct Thorough {
    interval: Duration,
    last: Option<SimTime>,
}

impl Thorough {
    pub fn new(interval: Duration) -> Thorough {
        Thorough {
            interval,
            last: None,
        }
    }

    /// The pages this pass needs.
    pub fn least_pages(&mut self, now: SimTime, least: u64) -> u64 {
        match self.last {
            Some(last) if now < last + self.interval => least,
            _ => {
                self.last = Some(now);
                0
            }
        }
    }

    /// CommitRealTimeService restarts the timer after a pass that committed something.
    pub fn reset(&mut self, now: SimTime) {
        self.last = Some(now);
    }
}

/// How a SYNC_FLUSH put ends (`PutMessageStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    PutOk,
    /// The flush did not cover it in time; the message stays stored and is flushed later
    /// like any other, and the producer hears FLUSH_DISK_TIMEOUT.
    FlushDiskTimeout,
}

/// A put waiting for its flush (`GroupCommitRequest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushRequest {
    pub id: u64,
    /// The end of its record: a flush reaching it covers it.
    pub next_offset: u64,
}

/// GroupCommitService's requests: one flush answers every request it reaches.
#[derive(Clone, Debug, Default)]
pub struct GroupCommit {
    waiting: Vec<FlushRequest>,
}

impl GroupCommit {
    pub fn put(&mut self, request: FlushRequest) {
        self.waiting.push(request);
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The requests a flush reaching `flushed_where` answers, oldest first.
    pub fn flushed(&mut self, flushed_where: u64) -> Vec<(u64, Flushed)> {
        self.settle(|r| (r.next_offset <= flushed_where).then_some(Flushed::PutOk))
    }

    /// GroupCommitService gave up on every waiting request, after
    /// `Rules::group_commit_flush_tries` flushes that did not reach them.
    pub fn give_up(&mut self) -> Vec<(u64, Flushed)> {
        self.settle(|_| Some(Flushed::FlushDiskTimeout))
    }

    fn settle(
        &mut self,
        mut answer: impl FnMut(&FlushRequest) -> Option<Flushed>,
    ) -> Vec<(u64, Flushed)> {
        let mut answered = Vec::new();
        self.waiting.retain(|request| match answer(request) {
            Some(outcome) => {
                answered.push((request.id, outcome));
                false
            }
            None => true,
        });
        answered
    }
}

/// How far ReputMessageService may dispatch (`getReputEndOffset`): everything readable,
/// except under SYNC_FLUSH from 5.3.0 only what was flushed (#8240), so that before it a
/// consumer could read, and act on, a message a power loss then erased (#8239).
pub fn reput_end(rules: &Rules, flush_disk_type: FlushDiskType, log: &CommitLog) -> u64 {
    if rules.sync_flush_reads_flushed && flush_disk_type == FlushDiskType::SyncFlush {
        log.flushed_where()
    } else {
        log.max_offset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rocketmq::Release;
    use crate::os::disk::{Disk, DiskConfig};

    fn at(ms: u64) -> SimTime {
        SimTime::from_millis(ms)
    }

    /// FlushRealTimeService's defaults: 4 pages every 500 ms, everything every 10 s.
    #[test]
    fn a_pass_is_thorough_at_first_and_every_interval_after() {
        let mut timer = Thorough::new(Duration::from_secs(10));
        let passes: Vec<u64> = [0, 500, 9_500, 10_000, 10_500, 20_000]
            .map(|ms| timer.least_pages(at(ms), 4))
            .to_vec();
        assert_eq!(passes, [0, 4, 4, 0, 4, 0]);
        timer.reset(at(20_100));
        assert_eq!(timer.least_pages(at(30_000), 4), 4);
        assert_eq!(timer.least_pages(at(30_100), 4), 0);
    }

    #[test]
    fn one_flush_answers_every_request_it_reaches_and_giving_up_the_rest() {
        let mut commit = GroupCommit::default();
        for (id, next_offset) in [(1, 100), (2, 200), (3, 300)] {
            commit.put(FlushRequest { id, next_offset });
        }
        assert_eq!(
            commit.flushed(250),
            [(1, Flushed::PutOk), (2, Flushed::PutOk)]
        );
        assert!(commit.flushed(299).is_empty());
        assert_eq!(commit.give_up(), [(3, Flushed::FlushDiskTimeout)]);
        assert!(commit.is_empty());
    }

    /// Under SYNC_FLUSH, 5.2.0 dispatches what was written, 5.3.0 only what was flushed.
    #[test]
    fn sync_flush_dispatches_only_flushed_records_from_5_3_0() {
        let disk = Disk::new(DiskConfig::default(), 1);
        let mut log = CommitLog::empty(disk, 4096);
        let mut message = crate::rocketmq::store::test_message(0, b"unflushed");
        log.append(&mut message, 1).unwrap();
        let rules = |release: &str| Release::parse(release).unwrap().rules();
        let sync = FlushDiskType::SyncFlush;
        assert_eq!(reput_end(&rules("5.2.0"), sync, &log), log.max_offset());
        assert_eq!(reput_end(&rules("5.3.0"), sync, &log), 0);
        let async_flush = FlushDiskType::AsyncFlush;
        assert_eq!(
            reput_end(&rules("5.3.0"), async_flush, &log),
            log.max_offset()
        );
    }
}
