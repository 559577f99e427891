//! The store's service threads as the broker's tasks, each on RocketMQ's schedule:
//! FlushRealTimeService or GroupCommitService by `flushDiskType`, CommitRealTimeService
//! with the TransientStorePool, ReputMessageService, FlushConsumeQueueService, and from
//! 5.0 the checkpoint's own flush every second. What each pass decides is in
//! `store::services` and `store::message_store`.

use super::{Broker, BrokerContext};
use crate::config::rocketmq::FlushDiskType;
use crate::os::clock;
use crate::rocketmq::store::services::Thorough;
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// ReputMessageService's sleep between passes.
const REPUT_INTERVAL: Duration = Duration::from_millis(1);

/// GroupCommitService's wait when no put wakes it (`waitForRunning(10)`).
const GROUP_COMMIT_INTERVAL: Duration = Duration::from_millis(10);

/// From 5.2.0 GroupCommitService sleeps this long between the flushes of one request.
const GROUP_COMMIT_RETRY: Duration = Duration::from_millis(1);

/// The checkpoint's own flush from 5.0 (`addScheduleTask`).
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

pub(super) fn start(broker: &Rc<Broker>, ctx: &BrokerContext) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![match ctx.store.flush_disk_type {
        FlushDiskType::AsyncFlush => tokio::task::spawn_local(flush_real_time(broker.clone())),
        FlushDiskType::SyncFlush => tokio::task::spawn_local(group_commit(broker.clone())),
    }];
    if ctx.store.transient_store_pool(&ctx.rules) {
        tasks.push(tokio::task::spawn_local(commit_real_time(broker.clone())));
    }
    tasks.push(tokio::task::spawn_local(reput(broker.clone())));
    tasks.push(tokio::task::spawn_local(flush_consume_queue(
        broker.clone(),
    )));
    if ctx.rules.checkpoint_every_second {
        tasks.push(tokio::task::spawn_local(checkpoint(broker.clone())));
    }
    tasks.push(tokio::task::spawn_local(persist_offsets(
        broker.clone(),
        ctx.store.flush_consumer_offset_interval,
    )));
    tasks.push(tokio::task::spawn_local(scan_consumers(broker.clone())));
    tasks
}

/// `BrokerController`'s schedule for `consumerOffset.json`: 10 s after start, then every
/// `flushConsumerOffsetInterval`.
async fn persist_offsets(broker: Rc<Broker>, interval: Duration) {
    tokio::time::sleep(Duration::from_secs(10)).await;
    loop {
        broker.persist_offsets();
        tokio::time::sleep(interval).await;
    }
}

/// `ClientHousekeepingService`: every 10 s, members silent too long leave their groups.
async fn scan_consumers(broker: Rc<Broker>) {
    loop {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let left = broker.consumers.borrow_mut().scan(clock::now());
        broker.notify_changed(&left);
    }
}

/// FlushRealTimeService: decide the pass's pages (everything every
/// `flushCommitLogThoroughInterval`), sleep `flushIntervalCommitLog` (or wait to be
/// woken, with `flushCommitLogTimed` off), flush.
async fn flush_real_time(broker: Rc<Broker>) {
    let config = broker.store.borrow().config().clone();
    let mut thorough = Thorough::new(config.flush_commit_log_thorough_interval);
    loop {
        let least = thorough.least_pages(clock::now(), config.flush_commit_log_least_pages);
        if config.flush_commit_log_timed {
            tokio::time::sleep(config.flush_interval_commit_log).await;
        } else {
            tokio::select! {
                biased;
                () = broker.flush_wake.notified() => {}
                () = tokio::time::sleep(config.flush_interval_commit_log) => {}
            }
        }
        broker.flush_commit_log(least).await;
    }
}

/// GroupCommitService: woken by a put or every 10 ms, it takes the puts waiting so far
/// and flushes until they are covered, up to the release's number of tries, answering
/// each PUT_OK or FLUSH_DISK_TIMEOUT; with none waiting it flushes anyway.
async fn group_commit(broker: Rc<Broker>) {
    let tries = broker.store.borrow().rules().group_commit_flush_tries;
    loop {
        tokio::select! {
            biased;
            () = broker.flush_wake.notified() => {}
            () = tokio::time::sleep(GROUP_COMMIT_INTERVAL) => {}
        }
        let mut round = std::mem::take(&mut *broker.group_commit.borrow_mut());
        if round.is_empty() {
            broker.flush_commit_log(0).await;
            continue;
        }
        let mut left = tries;
        loop {
            let flushed_where = broker.store.borrow().commit_log().flushed_where();
            let answered = round.flushed(flushed_where);
            if !answered.is_empty() {
                left = tries;
            }
            broker.answer(answered);
            if round.is_empty() {
                break;
            }
            if left == 0 {
                broker.answer(round.give_up());
                break;
            }
            left -= 1;
            broker.flush_commit_log(0).await;
            if tries > 2 && broker.store.borrow().commit_log().flushed_where() == flushed_where {
                tokio::time::sleep(GROUP_COMMIT_RETRY).await;
            }
        }
    }
}

/// CommitRealTimeService: every `commitIntervalCommitLog`, the pool's buffer to the
/// file once it holds `commitCommitLogLeastPages` (everything every
/// `commitCommitLogThoroughInterval` after the last commit), waking the flush service.
async fn commit_real_time(broker: Rc<Broker>) {
    let config = broker.store.borrow().config().clone();
    let mut thorough = Thorough::new(config.commit_commit_log_thorough_interval);
    loop {
        let now = clock::now();
        let least = thorough.least_pages(now, config.commit_commit_log_least_pages);
        let committed = broker.store.borrow_mut().commit(least);
        if let Ok(true) = committed {
            thorough.reset(clock::now());
            broker.flush_wake.notify_one();
        }
        tokio::time::sleep(config.commit_interval_commit_log).await;
    }
}

/// ReputMessageService: every millisecond, index what the release lets consumers see.
async fn reput(broker: Rc<Broker>) {
    loop {
        tokio::time::sleep(REPUT_INTERVAL).await;
        match broker.store.borrow_mut().reput() {
            Ok(0) => {}
            Ok(_) => broker.arrived.notify_waiters(),
            Err(e) => tracing::debug!(error = %e, "dispatch failed"),
        }
    }
}

/// FlushConsumeQueueService: every `flushIntervalConsumeQueue` each queue once it holds
/// `flushConsumeQueueLeastPages`; every `flushConsumeQueueThoroughInterval` everything,
/// then the checkpoint with the ConsumeQueue timestamp read before the flush.
async fn flush_consume_queue(broker: Rc<Broker>) {
    let config = broker.store.borrow().config().clone();
    let mut thorough = Thorough::new(config.flush_consume_queue_thorough_interval);
    loop {
        tokio::time::sleep(config.flush_interval_consume_queue).await;
        let least = thorough.least_pages(clock::now(), config.flush_consume_queue_least_pages);
        let logics = broker.store.borrow().checkpoint().logics_msg_timestamp;
        broker.flush_queues(least).await;
        if least == 0 {
            if logics > 0 {
                broker.store.borrow_mut().set_logics_timestamp(logics);
            }
            broker.flush_checkpoint().await;
        }
    }
}

/// From 5.0, the checkpoint forced every second on its own.
async fn checkpoint(broker: Rc<Broker>) {
    loop {
        tokio::time::sleep(CHECKPOINT_INTERVAL).await;
        broker.flush_checkpoint().await;
    }
}
