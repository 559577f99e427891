//! The broker's periodic tasks (Kafka's `KafkaScheduler` jobs): the ISR shrink check,
//! HW and recovery-point checkpoints, the time-based flush and retention.

use super::replica_manager::ReplicaManager;
use crate::config::kafka::FOREVER;
use crate::kafka::storage::checkpoint;
use crate::os::clock;
use crate::types::{Offset, TopicPartition};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// Run `job` every `interval` until the broker stops. `FOREVER` disables the job.
async fn every<F, Fut>(rm: &ReplicaManager, interval: Duration, mut job: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if interval >= FOREVER {
        return;
    }
    let interval = interval.max(Duration::from_millis(1));
    loop {
        tokio::time::sleep(interval).await;
        if rm.stopped.get() || rm.offline.get() {
            return;
        }
        job().await;
    }
}

/// Kafka's `isr-expiration` job: every half of `replica.lag.time.max.ms`, each led
/// partition drops followers that have not caught up for that long.
pub async fn isr_expiration(rm: Rc<ReplicaManager>) {
    let lag = rm.config.replica_lag_time_max;
    // Kafka halves it in whole milliseconds (`replicaLagTimeMaxMs / 2`).
    let half = Duration::from_millis(lag.as_millis() as u64 / 2);
    every(&rm, half, || async {
        let now = clock::now();
        for partition in rm.partitions.borrow_mut().values_mut() {
            if let Some(isr) = partition.update(|p| p.on_isr_expiration(now, lag)) {
                rm.propose_isr(partition, isr);
            }
        }
    })
    .await;
}

/// `replica.high.watermark.checkpoint.interval.ms`: write every partition's HW.
pub async fn hw_checkpoint(rm: Rc<ReplicaManager>) {
    every(
        &rm,
        rm.config.replica_high_watermark_checkpoint_interval,
        || write_hw_checkpoint(&rm),
    )
    .await;
}

/// Checkpoint writes hold `checkpoint_lock` from reading the offsets to the rename, so
/// that an older snapshot never replaces a newer one and writers never share a temp file.
pub async fn write_hw_checkpoint(rm: &ReplicaManager) {
    let _guard = rm.checkpoint_lock.lock().await;
    let hws = select(rm, |(hw, _, _)| hw);
    write(rm, checkpoint::REPLICATION, &hws).await;
    tracing::info!(broker = rm.id.0, hws = ?hws.iter().map(|(tp, hw)| format!("{tp}:{hw}")).collect::<Vec<_>>(), "hw checkpoint");
}

/// `log.flush.offset.checkpoint.interval.ms`: write recovery points and log start offsets.
pub async fn recovery_point_checkpoint(rm: Rc<ReplicaManager>) {
    every(&rm, rm.config.log_flush_offset_checkpoint_interval, || {
        write_recovery_checkpoints(&rm)
    })
    .await;
}

pub async fn write_recovery_checkpoints(rm: &ReplicaManager) {
    let _guard = rm.checkpoint_lock.lock().await;
    write(rm, checkpoint::RECOVERY_POINT, &select(rm, |(_, rp, _)| rp)).await;
    write(
        rm,
        checkpoint::LOG_START,
        &select(rm, |(_, _, start)| start),
    )
    .await;
}

fn select(
    rm: &ReplicaManager,
    pick: impl Fn((Offset, Offset, Offset)) -> Offset,
) -> BTreeMap<TopicPartition, Offset> {
    rm.offsets()
        .into_iter()
        .map(|(tp, offsets)| (tp, pick(offsets)))
        .collect()
}

async fn write(rm: &ReplicaManager, file: &str, offsets: &BTreeMap<TopicPartition, Offset>) {
    if rm.offline.get() {
        return;
    }
    let text = checkpoint::offsets_to_text(offsets);
    if let Err(e) = checkpoint::write_atomic(&rm.disk, file, &text, rm.config.rules.dir_fsync).await
    {
        rm.storage_failed(file, &e);
    }
}

/// Kafka's `kafka-log-flusher`: every `log.flush.scheduler.interval.ms` (by default never),
/// flush the logs not flushed for `flush.ms`.
pub async fn flusher(rm: Rc<ReplicaManager>) {
    every(&rm, rm.config.log_flush_scheduler_interval, || async {
        let now = clock::now();
        let due: Vec<TopicPartition> = rm
            .partitions
            .borrow()
            .iter()
            .filter(|(_, p)| p.log().time_since_flush(now) >= p.log().config().flush_interval)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in due {
            if rm.flush(&tp).await.is_err() {
                return;
            }
        }
    })
    .await;
}

/// `log.retention.check.interval.ms`: delete whole segments past retention.
pub async fn retention(rm: Rc<ReplicaManager>) {
    every(&rm, rm.config.log_retention_check_interval, || async {
        let now = clock::now();
        let mut failed = None;
        for (tp, partition) in rm.partitions.borrow_mut().iter_mut() {
            match partition.update(|p| p.enforce_retention(now)) {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(broker = rm.id.0, %tp, deleted, log_start = %partition.log().log_start_offset(), "retention"),
                Err(e) => {
                    failed = Some((tp.clone(), e));
                    break;
                }
            }
        }
        if let Some((tp, e)) = failed {
            rm.storage_failed(&tp.to_string(), &e);
        }
    })
    .await;
}

/// Flush every log (a clean shutdown). `Err` if the log dir went offline.
pub async fn flush_all(rm: &ReplicaManager) -> Result<(), ()> {
    let tps: Vec<TopicPartition> = rm.partitions.borrow().keys().cloned().collect();
    for tp in tps {
        rm.flush(&tp).await?;
    }
    Ok(())
}

/// Poll period for flags set from outside (the world's shutdown, the log dir failing).
pub const POLL: Duration = Duration::from_millis(10);
