//! The final read after the heal phase: for each partition, what a consumer finds at the
//! leader from the log start offset up to the high watermark, or, in a run with
//! transactions, what a read_committed consumer finds up to the last stable offset. It is what the checkers
//! compare acknowledged sends with, so it reads through the same Fetch path as any
//! consumer and never looks inside a broker.

use crate::config::kafka::IsolationLevel;
use crate::history::final_state::ReadRecord;
use crate::kafka::client::fetch::{FetchOutcome, FetchPosition};
use crate::kafka::client::metadata::CONNECTION_SETUP_TIMEOUT;
use crate::kafka::protocol::fetch_session::FINAL_EPOCH;
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    Fetch, FetchPartition, FetchedPartition, OffsetSpec, Request, Response,
};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use std::rc::Rc;
use std::time::Duration;
use tokio::time::Instant;

/// The most one request of the final read may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// A quarter of a consumer's default `max.partition.fetch.bytes`: the final read reads
/// every partition at once, and an answer is copied at each step from the leader's log to
/// the reader (read, encoded, sent, received, decoded), so six 1 MiB answers in flight
/// were the peak of a run's memory.
const FETCH_MAX_BYTES: u64 = 262_144;

/// One partition's final read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRead {
    pub tp: TopicPartition,
    /// `None`: no leader could be found (offline).
    pub leader: Option<BrokerId>,
    /// Both `Offset::NONE` when no leader answered.
    pub log_start_offset: Offset,
    pub high_watermark: Offset,
    /// A read_committed read's bound: records from here to the HW belong to, or follow, a
    /// transaction still open. `None` for a read_uncommitted read.
    pub last_stable_offset: Option<Offset>,
    /// The records between them, or those read before time ran out.
    pub records: Vec<ReadRecord>,
    /// Whether every record from the log start offset to the HW was read.
    pub complete: bool,
    /// Under read_committed, with the LSO below the HW: the records from the LSO to the
    /// HW as a read_uncommitted consumer reads them (aborted ones included), once the
    /// read_committed read was whole. `None` if there was no such read or it did not
    /// finish.
    pub beyond_lso: Option<Vec<ReadRecord>>,
}

impl PartitionRead {
    fn unread(tp: TopicPartition) -> PartitionRead {
        PartitionRead {
            tp,
            leader: None,
            log_start_offset: Offset::NONE,
            high_watermark: Offset::NONE,
            last_stable_offset: None,
            records: Vec::new(),
            complete: false,
            beyond_lso: None,
        }
    }
}

/// How the final read reads, as a consumer's settings would say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// `check.crcs`: a read stops at a batch whose CRC is wrong, as Kafka's consumer raises
    /// CorruptRecordException there.
    pub check_crcs: bool,
    pub isolation: IsolationLevel,
    /// A mutation test's bug: read_committed without dropping aborted transactions.
    pub ignore_aborted: bool,
}

/// Who leads a partition, and in which leader epoch, as the controller says.
pub type LeaderOf = Rc<dyn Fn(&TopicPartition) -> Option<(BrokerId, Epoch)>>;

/// Read every partition in `topics`, all at once; `timeout` bounds each partition's read.
/// The leader and its epoch come from the controller (`leader_of`), as an operator asks
/// it who leads; the reads are fenced by that epoch, so a deposed leader cannot answer.
/// A partition that has no leader in time is reported offline with no records; one whose
/// read does not finish in time keeps the records read so far, marked incomplete: what it
/// did not read is unknown, not absent. Under read_committed the read stops at the LSO
/// and drops aborted transactions, as a read_committed consumer's would.
pub async fn final_read(
    topics: Vec<TopicPartition>,
    leader_of: LeaderOf,
    reading: Reading,
    timeout: Duration,
) -> Vec<PartitionRead> {
    let readers: Vec<_> = topics
        .into_iter()
        .map(|tp| {
            let read = read_partition(tp, leader_of.clone(), reading, timeout);
            tokio::task::spawn_local(read)
        })
        .collect();
    let mut reads = Vec::with_capacity(readers.len());
    for reader in readers {
        match reader.await {
            Ok(read) => reads.push(read),
            Err(e) => tracing::warn!(error = %e, "final read task failed"),
        }
    }
    reads
}

enum Attempt {
    Done(PartitionRead),
    /// Partial progress, kept in case time runs out.
    Failed(Option<PartitionRead>),
}

async fn read_partition(
    tp: TopicPartition,
    leader_of: LeaderOf,
    reading: Reading,
    timeout: Duration,
) -> PartitionRead {
    let deadline = Instant::now() + timeout;
    let mut partial = None;
    while Instant::now() < deadline {
        if let Some((leader, epoch)) = leader_of(&tp) {
            match read_from_leader(&tp, (leader, epoch), reading, deadline).await {
                Attempt::Done(read) => return read,
                Attempt::Failed(progress) => partial = progress.or(partial),
            }
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
    tracing::warn!(%tp, complete = false, "final read ran out of time");
    partial.unwrap_or_else(|| PartitionRead::unread(tp))
}

async fn read_from_leader(
    tp: &TopicPartition,
    (leader, epoch): (BrokerId, Epoch),
    reading: Reading,
    deadline: Instant,
) -> Attempt {
    let isolation = reading.isolation;
    let remaining = || REQUEST_TIMEOUT.min(deadline.saturating_duration_since(Instant::now()));
    let Ok(mut connection) = Connection::connect(
        HostName::Broker(leader.0),
        CONNECTION_SETUP_TIMEOUT.min(remaining()),
    )
    .await
    else {
        return Attempt::Failed(None);
    };
    let uncommitted = IsolationLevel::ReadUncommitted;
    let (Some(start), Some(high_watermark)) = (
        list_offset(
            &mut connection,
            tp,
            (OffsetSpec::Earliest, uncommitted),
            epoch,
            remaining(),
        )
        .await,
        list_offset(
            &mut connection,
            tp,
            (OffsetSpec::Latest, uncommitted),
            epoch,
            remaining(),
        )
        .await,
    ) else {
        return Attempt::Failed(None);
    };
    let last_stable_offset = match isolation {
        IsolationLevel::ReadUncommitted => None,
        IsolationLevel::ReadCommitted => {
            let latest = (OffsetSpec::Latest, isolation);
            let Some(lso) = list_offset(&mut connection, tp, latest, epoch, remaining()).await
            else {
                return Attempt::Failed(None);
            };
            Some(lso.min(high_watermark))
        }
    };
    let end = last_stable_offset.unwrap_or(high_watermark);
    let read = |records, complete, beyond_lso| PartitionRead {
        tp: tp.clone(),
        leader: Some(leader),
        log_start_offset: start,
        high_watermark,
        last_stable_offset,
        records,
        complete,
        beyond_lso,
    };
    let records = match read_range(
        &mut connection,
        (tp, epoch),
        (start, end),
        reading,
        &remaining,
    )
    .await
    {
        Ok(records) => records,
        Err(records) => return Attempt::Failed(Some(read(records, false, None))),
    };
    // What the LSO hides, read as a read_uncommitted consumer would: whether acknowledged
    // records are there or gone, and whose transaction holds the LSO.
    let beyond_lso = match last_stable_offset {
        Some(lso) if lso < high_watermark => {
            let as_uncommitted = Reading {
                isolation: uncommitted,
                ..reading
            };
            read_range(
                &mut connection,
                (tp, epoch),
                (lso, high_watermark),
                as_uncommitted,
                &remaining,
            )
            .await
            .ok()
        }
        _ => None,
    };
    Attempt::Done(read(records, true, beyond_lso))
}

/// Fetch `[from, end)` of `tp` at the leader this connection reaches, in `epoch`, as
/// `reading` says. `Err` with what was read when a fetch fails or the leader changed.
async fn read_range(
    connection: &mut Connection,
    (tp, epoch): (&TopicPartition, Epoch),
    (from, end): (Offset, Offset),
    reading: Reading,
    remaining: &impl Fn() -> Duration,
) -> Result<Vec<ReadRecord>, Vec<ReadRecord>> {
    let isolation = reading.isolation;
    // Every offset below the HW holds a record (unless compacted away): room for them all.
    let expected = usize::try_from(end.0 - from.0).unwrap_or(0);
    let mut records = Vec::with_capacity(expected.min(1 << 24));
    let mut position = FetchPosition::new(from);
    while position.offset < end {
        let request = Request::Fetch(Fetch {
            replica: None,
            replica_epoch: None,
            isolation,
            max_wait_ms: 0,
            min_bytes: 0,
            session_id: 0,
            session_epoch: FINAL_EPOCH,
            forgotten: Vec::new(),
            partitions: vec![FetchPartition {
                tp: tp.clone(),
                fetch_offset: position.offset,
                current_leader_epoch: epoch,
                last_fetched_epoch: None,
                max_bytes: FETCH_MAX_BYTES,
            }],
        });
        let Ok(Response::Fetch(response)) = connection.call(&request, remaining()).await else {
            return Err(records);
        };
        let Some(response) = response.partitions.first().filter(|p| p.tp == *tp) else {
            return Err(records);
        };
        let unfiltered;
        let response = if reading.ignore_aborted {
            unfiltered = FetchedPartition {
                aborted_transactions: None,
                ..response.clone()
            };
            &unfiltered
        } else {
            response
        };
        let before = position.offset;
        match position.apply(response, reading.check_crcs) {
            FetchOutcome::Records {
                records: fetched, ..
            } => records.extend(fetched.into_iter().filter(|r| r.offset < end)),
            _ => return Err(records),
        }
        if position.offset <= before {
            // Nothing below the end came back: the leader changed under us; start over.
            return Err(records);
        }
    }
    Ok(records)
}

async fn list_offset(
    connection: &mut Connection,
    tp: &TopicPartition,
    (spec, isolation): (OffsetSpec, IsolationLevel),
    epoch: Epoch,
    timeout: Duration,
) -> Option<Offset> {
    let request = Request::ListOffsets {
        replica: None,
        isolation,
        tp: tp.clone(),
        spec,
        current_leader_epoch: epoch,
    };
    match connection.call(&request, timeout).await {
        Ok(Response::ListOffsets {
            error: None,
            offset,
        }) => Some(offset),
        _ => None,
    }
}
