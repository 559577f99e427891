//! The final read: a consumer that pulls every queue of the workload's topic from its
//! group's master, from the queue's first offset to its end as the broker answers it
//! then. Only what ReputMessageService dispatched is there to read.

use crate::config::rocketmq::Rules;
use crate::history::final_state::ReadRecord;
use crate::os::frame::NetError;
use crate::rocketmq::broker::PULL_BATCH;
use crate::rocketmq::remoting::{self, PullMessage, PullStatus, Request, Response};
use crate::types::{HostName, Offset, TopicPartition};
use std::time::Duration;

/// One queue to read: its partition in the history, its master and its queue id there.
#[derive(Clone, Debug)]
pub struct QueueToRead {
    pub tp: TopicPartition,
    pub master: HostName,
    pub queue_id: i32,
}

/// What the final read found in one queue.
#[derive(Clone, Debug)]
pub struct QueueRead {
    pub tp: TopicPartition,
    pub min_offset: Offset,
    pub max_offset: Offset,
    pub records: Vec<ReadRecord>,
    /// Read from the first offset to the end without a gap.
    pub complete: bool,
}

/// The reader's consumer group: it pulls without committing, so the broker keeps nothing
/// of it.
const READER_GROUP: &str = "hightide-final-read";

/// How long one request of the final read waits.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Read every queue, going on until `limit` has passed for a queue that does not answer.
pub async fn final_read(queues: Vec<QueueToRead>, limit: Duration, rules: Rules) -> Vec<QueueRead> {
    let client = remoting::Client::new(&rules);
    let mut out = Vec::with_capacity(queues.len());
    for queue in queues {
        let read = tokio::time::timeout(limit, read_queue(&client, &queue)).await;
        out.push(read.unwrap_or_else(|_| QueueRead {
            tp: queue.tp.clone(),
            min_offset: Offset(0),
            max_offset: Offset(0),
            records: Vec::new(),
            complete: false,
        }));
    }
    out
}

async fn read_queue(client: &remoting::Client, queue: &QueueToRead) -> QueueRead {
    let topic = queue.tp.topic.to_string();
    let (min_offset, max_offset) = loop {
        let request = Request::QueueRange {
            topic: topic.clone(),
            queue_id: queue.queue_id,
        };
        match client.invoke(queue.master, request, REQUEST_TIMEOUT).await {
            Ok(Response::QueueRange {
                min_offset,
                max_offset,
            }) => break (min_offset, max_offset),
            other => retry_after(other.err()).await,
        }
    };
    let mut records = Vec::new();
    let mut offset = min_offset;
    let mut complete = true;
    while offset < max_offset {
        let request = Request::PullMessage(PullMessage {
            group: READER_GROUP.into(),
            topic: topic.clone(),
            queue_id: queue.queue_id,
            queue_offset: offset,
            max_msg_nums: PULL_BATCH,
            commit_offset: None,
            suspend: None,
        });
        match client.invoke(queue.master, request, REQUEST_TIMEOUT).await {
            Ok(Response::PullMessage {
                status: PullStatus::Found,
                next_begin_offset,
                messages,
                ..
            }) => {
                for message in messages {
                    records.push(ReadRecord::new(Offset(message.queue_offset), &message.body));
                }
                offset = next_begin_offset;
            }
            Ok(Response::PullMessage {
                status: PullStatus::RetryImmediately,
                ..
            }) => {
                // An entry whose CommitLog bytes are not there: the read has a gap.
                complete = false;
                offset += 1;
            }
            Ok(Response::PullMessage { .. }) => break,
            other => retry_after(other.err()).await,
        }
    }
    QueueRead {
        tp: queue.tp.clone(),
        min_offset: Offset(min_offset),
        max_offset: Offset(max_offset),
        records,
        complete,
    }
}

/// A request that failed is tried again a little later.
async fn retry_after(error: Option<NetError>) {
    if let Some(error) = error {
        tracing::debug!(%error, "final read request failed");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}
