//! RocketMQ configuration with RocketMQ's names and defaults (`MessageStoreConfig`,
//! `BrokerConfig`). A field is its key's name in snake case, `Interval`/`Timeout` keys as
//! `Duration`s: `flush_interval_commit_log` is `flushIntervalCommitLog`. The defaults are
//! the same in 4.9.7, 5.3.3 and develop; what changed between releases without a key is
//! each [`Release`]'s [`Rules`].

mod release;

pub use release::{
    ConfigPersist, NormalStart, Release, Rules, Step, KNOWN as RELEASES, STEPS as RELEASE_STEPS,
};

use std::time::Duration;

/// `flushDiskType`: when a put is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushDiskType {
    /// `ASYNC_FLUSH` (the default): after the append to the page cache; FlushRealTimeService
    /// flushes behind it.
    AsyncFlush,
    /// `SYNC_FLUSH`: after GroupCommitService's flush covers it (if the message asks to
    /// wait, which by default it does).
    SyncFlush,
}

impl FlushDiskType {
    /// As RocketMQ names it.
    pub const fn name(self) -> &'static str {
        match self {
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
        }
    }
}

/// The store's settings (`MessageStoreConfig`) and the broker's one the store needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    pub flush_disk_type: FlushDiskType,
    /// `mappedFileSizeCommitLog`: 1 GiB.
    pub mapped_file_size_commit_log: u64,
    /// `mappedFileSizeConsumeQueue`: 300,000 entries of 20 bytes.
    pub mapped_file_size_consume_queue: u64,
    /// `flushIntervalCommitLog`: FlushRealTimeService's period, 500 ms.
    pub flush_interval_commit_log: Duration,
    /// `flushCommitLogLeastPages`: 4 pages crossed before a periodic flush.
    pub flush_commit_log_least_pages: u64,
    /// `flushCommitLogThoroughInterval`: a flush of everything every 10 s.
    pub flush_commit_log_thorough_interval: Duration,
    /// `flushCommitLogTimed`: FlushRealTimeService sleeps its period (true) rather than
    /// waiting to be woken by a put.
    pub flush_commit_log_timed: bool,
    /// `syncFlushTimeout`: FlushDiskWatcher answers FLUSH_DISK_TIMEOUT after 5 s.
    pub sync_flush_timeout: Duration,
    /// `transientStorePoolEnable`: appends go to a buffer in process memory, committed to
    /// the file every `commitIntervalCommitLog`.
    pub transient_store_pool_enable: bool,
    pub transient_store_pool_size: u32,
    pub commit_interval_commit_log: Duration,
    pub commit_commit_log_least_pages: u64,
    pub commit_commit_log_thorough_interval: Duration,
    /// `flushIntervalConsumeQueue`: 1 s.
    pub flush_interval_consume_queue: Duration,
    /// `flushConsumeQueueLeastPages`: 2.
    pub flush_consume_queue_least_pages: u64,
    /// `flushConsumeQueueThoroughInterval`: 60 s, which also flushes the checkpoint.
    pub flush_consume_queue_thorough_interval: Duration,
    /// `checkCRCOnRecover`: recovery checks each body's CRC.
    pub check_crc_on_recover: bool,
    /// `maxMessageSize`: 4 MiB, a limit on the body.
    pub max_message_size: u64,
    /// `BrokerConfig.flushConsumerOffsetInterval`: `consumerOffset.json` every 5 s.
    pub flush_consumer_offset_interval: Duration,
}

impl StoreConfig {
    /// `isTransientStorePoolEnable`: whether appends go to the pool, which the release may
    /// allow only under ASYNC_FLUSH (every broker here is a master).
    pub fn transient_store_pool(&self, rules: &Rules) -> bool {
        self.transient_store_pool_enable
            && (self.flush_disk_type == FlushDiskType::AsyncFlush
                || !rules.transient_store_pool_needs_async_flush)
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            flush_disk_type: FlushDiskType::AsyncFlush,
            mapped_file_size_commit_log: 1 << 30,
            mapped_file_size_consume_queue: 300_000 * 20,
            flush_interval_commit_log: Duration::from_millis(500),
            flush_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval: Duration::from_secs(10),
            flush_commit_log_timed: true,
            sync_flush_timeout: Duration::from_secs(5),
            transient_store_pool_enable: false,
            transient_store_pool_size: 5,
            commit_interval_commit_log: Duration::from_millis(200),
            commit_commit_log_least_pages: 4,
            commit_commit_log_thorough_interval: Duration::from_millis(200),
            flush_interval_consume_queue: Duration::from_secs(1),
            flush_consume_queue_least_pages: 2,
            flush_consume_queue_thorough_interval: Duration::from_secs(60),
            check_crc_on_recover: true,
            max_message_size: 4 << 20,
            flush_consumer_offset_interval: Duration::from_secs(5),
        }
    }
}

/// The producer's settings (`DefaultMQProducer`, `ClientConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerConfig {
    /// `sendMsgTimeout`: 3 s for a send and all its retries together.
    pub send_msg_timeout: Duration,
    /// `retryTimesWhenSendFailed`: 2, so up to 3 attempts of a synchronous send, each on
    /// a queue of another broker than the last if it can.
    pub retry_times_when_send_failed: u32,
    /// `retryAnotherBrokerWhenNotStoreOK`: retry a send answered with a stored status other
    /// than SEND_OK (which stores the message again).
    pub retry_another_broker_when_not_store_ok: bool,
    /// `pollNameServerInterval`: the client refreshes its routes every 30 s.
    pub poll_name_server_interval: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            send_msg_timeout: Duration::from_secs(3),
            retry_times_when_send_failed: 2,
            retry_another_broker_when_not_store_ok: false,
            poll_name_server_interval: Duration::from_secs(30),
        }
    }
}

/// `consumeFromWhere`: where a group starts in a queue it has no offset for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeFromWhere {
    /// `CONSUME_FROM_LAST_OFFSET` (the default): the queue's end, so a group that starts
    /// after messages were sent skips them (though a broker answers 0 for a queue whose
    /// first message is still in memory).
    LastOffset,
    /// `CONSUME_FROM_FIRST_OFFSET`: the queue's first message.
    FirstOffset,
}

/// The push consumer's settings (`DefaultMQPushConsumer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerConfig {
    pub consume_from_where: ConsumeFromWhere,
    /// `persistConsumerOffsetInterval`: the client sends its offsets every 5 s.
    pub persist_consumer_offset_interval: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            consume_from_where: ConsumeFromWhere::LastOffset,
            persist_consumer_offset_interval: Duration::from_secs(5),
        }
    }
}

/// The broker's own settings besides the store's (`BrokerConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfig {
    /// `registerNameServerPeriod`: the broker registers with the NameServer every 30 s.
    pub register_name_server_period: Duration,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            register_name_server_period: Duration::from_secs(30),
        }
    }
}

/// Everything `[rocketmq]` sets: RocketMQ's keys, wherever RocketMQ keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RocketMqConfig {
    pub store: StoreConfig,
    pub broker: BrokerConfig,
    pub producer: ProducerConfig,
    pub consumer: ConsumerConfig,
}
