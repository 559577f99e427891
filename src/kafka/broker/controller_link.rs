//! Everything the broker asks the controller: registration, the heartbeat long poll (which
//! also brings metadata), AlterPartition, ControlledShutdown, AllocateProducerId.
//!
//! Each kind of request has its own connection, because the server answers one request
//! per connection at a time and the heartbeat holds its connection for a long poll. The
//! controller being unreachable is normal (partitions, a crashed controller): every call
//! has a timeout and is retried.

use super::fetcher::{self, Fetchers};
use super::replica_manager::{IsrProposal, ReplicaManager};
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    AlterPartition, ErrorCode, Request, Response, HEARTBEAT_LONG_POLL,
};
use crate::kafka::types::{Brokers, ProducerId};
use crate::types::HostName;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::rc::Rc;
use std::time::Duration;

/// Connect timeout to the controller: a partitioned controller never answers a SYN.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1_000);
/// Time allowed for an ordinary controller request.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(5_000);
/// Pause between attempts when the controller is unreachable or refuses (the first, for
/// a registration).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// The registration backoff's jitter, a fraction either way.
const BACKOFF_JITTER: f64 = 0.02;

/// Send one request on a fresh connection.
async fn call(request: &Request, timeout: Duration) -> Option<Response> {
    let mut connection = Connection::connect(HostName::Controller, CONNECT_TIMEOUT)
        .await
        .ok()?;
    connection.call(request, timeout).await.ok()
}

/// Register this incarnation until the controller accepts it. A restart within the old
/// process's session is refused (`DUPLICATE_BROKER_REGISTRATION`) until that session
/// expires. A KRaft broker backs off between attempts as `BrokerLifecycleManager` does
/// (`seed` draws the jitter). A ZooKeeper-era broker finds its ephemeral znode still there,
/// fails its start-up with `NodeExistsException` and exits; it is taken as restarted at
/// once by a supervisor (systemd's default `RestartSec` is 100 ms, and a start here takes
/// no time), so it tries again every `RETRY_BACKOFF`.
pub async fn register(rm: &ReplicaManager, seed: u64) {
    let request = Request::RegisterBroker {
        broker: rm.id,
        incarnation: rm.incarnation,
        clean_shutdown: rm.clean_shutdown.get(),
    };
    let mut jitter = StdRng::seed_from_u64(seed);
    for failed_attempts in 0.. {
        if rm.stopped.get() || rm.offline.get() {
            return;
        }
        match call(&request, REQUEST_TIMEOUT).await {
            Some(Response::RegisterBroker { error: None }) => {
                tracing::info!(
                    broker = rm.id.0,
                    incarnation = %rm.incarnation,
                    "registered with the controller"
                );
                return;
            }
            Some(Response::RegisterBroker { error: Some(error) }) => {
                tracing::info!(
                    broker = rm.id.0,
                    error = error.name(),
                    "registration refused"
                );
            }
            _ => {}
        }
        let pause = if rm.config.rules.kraft_controller {
            let factor = jitter.random_range(1.0 - BACKOFF_JITTER..1.0 + BACKOFF_JITTER);
            registration_backoff(failed_attempts, rm.config.broker_session_timeout, factor)
        } else {
            RETRY_BACKOFF
        };
        tokio::time::sleep(pause).await;
    }
}

/// Kafka's registration backoff: `ExponentialBackoff(100, 2, broker.session.timeout.ms,
/// 0.02)` after `failed_attempts` failures, `factor` its jitter (within 1 ± 0.02).
fn registration_backoff(failed_attempts: u32, session_timeout: Duration, factor: f64) -> Duration {
    debug_assert!((1.0 - BACKOFF_JITTER..=1.0 + BACKOFF_JITTER).contains(&factor));
    let initial = RETRY_BACKOFF.min(session_timeout).as_millis() as f64;
    let max = session_timeout.as_millis() as f64;
    let exp_max = if max > initial {
        (max / initial).log2()
    } else {
        0.0
    };
    let term = initial * 2f64.powf(f64::from(failed_attempts).min(exp_max));
    Duration::from_millis(((factor * term) as u64).min(max as u64))
}

/// The heartbeat long poll: proves liveness and brings every new metadata image, which
/// is applied at once (becoming leader or follower starts or stops fetchers).
pub async fn heartbeat_loop(rm: Rc<ReplicaManager>) {
    let fetchers = Rc::new(Fetchers::default());
    let mut connection: Option<Connection> = None;
    let timeout = HEARTBEAT_LONG_POLL + rm.config.broker_heartbeat_interval;
    while !rm.stopped.get() && !rm.offline.get() {
        if connection.as_ref().is_none_or(Connection::is_broken) {
            connection = Connection::connect(HostName::Controller, CONNECT_TIMEOUT)
                .await
                .ok();
        }
        let Some(conn) = connection.as_mut() else {
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        };
        let request = Request::BrokerHeartbeat {
            broker: rm.id,
            incarnation: rm.incarnation,
            known_version: rm.metadata.borrow().version,
        };
        match conn.call(&request, timeout).await {
            Ok(Response::BrokerHeartbeat {
                metadata: Some(image),
                ..
            }) => {
                if image.version > rm.metadata.borrow().version {
                    apply(&rm, &fetchers, image);
                }
            }
            Ok(Response::BrokerHeartbeat { metadata: None, .. }) => {}
            _ => tokio::time::sleep(RETRY_BACKOFF).await,
        }
    }
}

fn apply(
    rm: &Rc<ReplicaManager>,
    fetchers: &Rc<Fetchers>,
    image: crate::kafka::protocol::messages::ClusterMetadata,
) {
    for (tp, generation, leader, epoch) in rm.apply_metadata(image) {
        fetcher::follow(rm, fetchers, tp, generation, leader, epoch);
    }
    fetcher::shut_down_idle(rm, fetchers);
}

/// Send queued AlterPartition proposals, one at a time, and apply the controller's answer.
/// A proposal the controller did not answer (unreachable, crashed, slow) is sent again
/// until it answers, as Kafka's `AlterPartitionManager` retries it without a timeout, for
/// as long as it is still based on the partition's current state (a stale one would be
/// refused). A refused proposal is dropped; the leader proposes again when its ISR check
/// next finds a difference.
pub async fn alter_partition_loop(rm: Rc<ReplicaManager>) {
    while !rm.stopped.get() && !rm.offline.get() {
        let next = {
            let mut queue = rm.isr_proposals.borrow_mut();
            (!queue.is_empty()).then(|| queue.remove(0))
        };
        let Some(IsrProposal {
            tp,
            leader_epoch,
            partition_epoch,
            new_isr,
            broker_epochs,
        }) = next
        else {
            let _ =
                tokio::time::timeout(Duration::from_millis(100), rm.isr_wakeup.notified()).await;
            continue;
        };
        let request = Request::AlterPartition(AlterPartition {
            broker: rm.id,
            incarnation: rm.incarnation,
            tp: tp.clone(),
            leader_epoch,
            partition_epoch,
            new_isr,
            broker_epochs,
        });
        let still_based = || {
            rm.partitions.borrow().get(&tp).is_some_and(|p| {
                p.is_leader()
                    && p.leader_epoch() == leader_epoch
                    && p.partition_epoch() == partition_epoch
            })
        };
        let answer = loop {
            match call(&request, REQUEST_TIMEOUT).await {
                Some(answer) => break Some(answer),
                None if still_based() && !rm.stopped.get() && !rm.offline.get() => {
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                None => break None,
            }
        };
        let mut partitions = rm.partitions.borrow_mut();
        let Some(partition) = partitions.get_mut(&tp) else {
            continue;
        };
        if partition.leader_epoch() != leader_epoch {
            continue;
        }
        match answer {
            Some(Response::AlterPartition {
                error: None,
                state: Some(state),
            }) => {
                if partition.update(|p| p.on_isr_committed(&state)) {
                    tracing::info!(broker = rm.id.0, %tp, partition_epoch = %state.partition_epoch, isr = %Brokers(&state.isr), "isr committed");
                }
            }
            other => {
                let error = match other {
                    Some(Response::AlterPartition { error, .. }) => error,
                    _ => Some(ErrorCode::RequestTimedOut),
                };
                tracing::info!(broker = rm.id.0, %tp, error = ?error, "isr change not committed");
                partition.update(|p| p.on_isr_rejected());
            }
        }
    }
}

/// Controlled shutdown: ask the controller to move leadership away until it reports that
/// this broker leads nothing, at most `attempts` times.
pub async fn controlled_shutdown(rm: &ReplicaManager, attempts: u32) -> bool {
    let request = Request::ControlledShutdown {
        broker: rm.id,
        incarnation: rm.incarnation,
    };
    for _ in 0..attempts {
        match call(&request, REQUEST_TIMEOUT).await {
            Some(Response::ControlledShutdown {
                error: None,
                remaining: 0,
            }) => return true,
            Some(Response::ControlledShutdown { remaining, .. }) => {
                tracing::info!(
                    broker = rm.id.0,
                    remaining,
                    "controlled shutdown: partitions still led"
                );
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}

/// InitProducerId: the controller hands out producer ids (as KRaft's controller allocates
/// id blocks to brokers; we ask for one id at a time).
pub async fn allocate_producer_id() -> Option<ProducerId> {
    match call(&Request::AllocateProducerId, REQUEST_TIMEOUT).await {
        Some(Response::AllocateProducerId { producer_id }) => Some(producer_id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn the_registration_backoff_doubles_from_100_ms_up_to_the_session_timeout() {
        let session = ms(9_000);
        let pauses: Vec<Duration> = (0..9)
            .map(|n| registration_backoff(n, session, 1.0))
            .collect();
        let expected = [100, 200, 400, 800, 1_600, 3_200, 6_400, 9_000, 9_000].map(ms);
        assert_eq!(pauses, expected);
    }

    #[test]
    fn the_jitter_scales_the_pause_but_never_past_the_session_timeout() {
        let session = ms(9_000);
        assert_eq!(registration_backoff(3, session, 0.98), ms(784));
        assert_eq!(registration_backoff(3, session, 1.02), ms(816));
        assert_eq!(registration_backoff(20, session, 1.02), session);
    }

    #[test]
    fn a_session_shorter_than_the_first_pause_caps_it() {
        assert_eq!(registration_backoff(0, ms(50), 1.0), ms(50));
        assert_eq!(registration_backoff(5, ms(50), 1.0), ms(50));
    }
}
