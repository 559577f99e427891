//! RocketMQ's message store (`org.apache.rocketmq.store`), as plain data over the
//! simulated disk: the CommitLog record codec, the files both logs live in, the
//! CommitLog itself.

pub mod checkpoint;
pub mod commit_log;
pub mod consume_queue;
pub mod dump;
pub mod mapped_file;
pub mod message;
pub mod message_store;
pub mod recovery;
pub mod services;

/// A message of topic `orders` as the store's tests append it: no properties, hosts on
/// 10.0.0.1, `body` as given.
#[cfg(test)]
pub(crate) fn test_message(queue_id: i32, body: &[u8]) -> message::Message {
    let host = message::Host {
        ip: [10, 0, 0, 1],
        port: 10911,
    };
    message::Message {
        topic: "orders".into(),
        queue_id,
        flag: 0,
        queue_offset: 0,
        physical_offset: 0,
        sys_flag: 0,
        born_timestamp: 1,
        born_host: host,
        store_timestamp: 0,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.to_vec(),
        properties: Vec::new(),
    }
}
