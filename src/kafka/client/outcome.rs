//! What a produce attempt means for the messages of its batch: acknowledged, retried, or
//! completed as a definite failure (nothing was written) or an unknown outcome. This is the
//! line between the history's `fail` and `info`, so it is decided here, in one place:
//!
//! - A response without error is an ack at `base_offset`.
//! - An error is a proof that this attempt wrote nothing only if Kafka never returns it
//!   after an append (the epoch fencing errors, NOT_ENOUGH_REPLICAS, CORRUPT_MESSAGE, ...).
//!   Kafka's `DelayedProduce.tryComplete` answers a parked acks=all produce, whose records
//!   the leader has already appended, with REQUEST_TIMED_OUT when it expires, with
//!   NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS_AFTER_APPEND from
//!   `Partition.checkEnoughReplicasReachOffset` (the leader moved, or the ISR shrank below
//!   `min.insync.replicas`), and with KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER or
//!   UNKNOWN_TOPIC_OR_PARTITION from `ReplicaManager.getPartitionOrError`. The same codes
//!   also reject produces before any append, and the client cannot tell which it got, so
//!   each of them leaves the outcome unknown.
//! - A request timeout or a disconnect after sending: unknown.
//! - A batch is a definite failure only if *no* attempt may have written it.
//! - DUPLICATE_SEQUENCE_NUMBER: the broker saw the batch before but no longer knows where
//!   it put it (beyond its last five batches): written, offset unknown, so `info`.
//! - OUT_OF_ORDER_SEQUENCE_NUMBER is retried while an earlier batch of the same producer id
//!   and partition is still unresolved (it is out of order only because that one is being
//!   retried, as Kafka's `TransactionManager.canRetry`); otherwise it completes the batch as
//!   unknown, and the producer takes a new producer id (see `idempotence`).
//!
//! Retries follow Kafka: retriable errors and network failures are retried while fewer than
//! `retries` retries were made and `delivery.timeout.ms` has not passed since the batch was
//! created.

use crate::kafka::protocol::messages::ErrorCode;
use crate::os::clock::SimTime;
use crate::types::Offset;
use std::time::Duration;

/// How one produce attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    /// The broker answered.
    Response {
        error: Option<ErrorCode>,
        base_offset: Offset,
    },
    /// No answer within `request.timeout.ms` (the connection is then closed, as Kafka does).
    TimedOut,
    /// The connection closed after the request was handed to it.
    Disconnected,
}

/// For the explanations: `NOT_LEADER_OR_FOLLOWER`, `request timed out`, `disconnected`.
impl std::fmt::Display for AttemptResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttemptResult::Response { error: Some(e), .. } => f.write_str(e.name()),
            AttemptResult::Response { error: None, .. } => f.write_str("success"),
            AttemptResult::TimedOut => f.write_str("request timed out (request.timeout.ms)"),
            AttemptResult::Disconnected => f.write_str("disconnected"),
        }
    }
}

/// What becomes of the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Acknowledged: record `i` of the batch is at `base_offset + i`.
    Ok { base_offset: Offset },
    /// Send again after `retry.backoff.ms`.
    Retry,
    /// Definitely not written.
    Fail(String),
    /// Outcome unknown.
    Info(String),
}

/// The batch's delivery so far, as far as the decision needs it.
#[derive(Clone, Copy, Debug)]
pub struct BatchProgress {
    /// Retries already made (attempts - 1 once sent).
    pub retries_done: u32,
    /// Whether an earlier attempt may have written the batch.
    pub maybe_written: bool,
    pub created: SimTime,
    /// Whether an earlier-sequence batch of the same producer id and partition is unresolved.
    pub earlier_unresolved: bool,
}

/// `retries` and `delivery.timeout.ms`.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub retries: u32,
    /// `None` before 2.1 (KIP-91): then `retries` alone bounds a send's attempts.
    pub delivery_timeout: Option<Duration>,
}

impl RetryPolicy {
    pub fn can_retry(&self, progress: &BatchProgress, now: SimTime) -> bool {
        progress.retries_done < self.retries
            && self
                .delivery_timeout
                .is_none_or(|timeout| now < progress.created + timeout)
    }
}

/// Errors that Kafka returns only before it appends anything (see the module doc for the
/// ones it can return after an append).
pub fn rejected_before_append(error: ErrorCode) -> bool {
    !matches!(
        error,
        ErrorCode::RequestTimedOut
            | ErrorCode::NotEnoughReplicasAfterAppend
            | ErrorCode::NotLeaderOrFollower
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::KafkaStorageError
            | ErrorCode::DuplicateSequenceNumber
    )
}

/// Errors after which the client's idea of the leader may be stale: the producer and the
/// fetchers both look the leader up again before their next attempt.
pub fn invalidates_metadata(error: ErrorCode) -> bool {
    matches!(
        error,
        ErrorCode::NotLeaderOrFollower
            | ErrorCode::FencedLeaderEpoch
            | ErrorCode::UnknownLeaderEpoch
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::KafkaStorageError
            | ErrorCode::BrokerNotAvailable
    )
}

/// Whether the attempt says the leader may have moved, so metadata must be refreshed,
/// whatever becomes of the batch: Kafka's `Sender` asks for an update on every
/// invalid-metadata error, retried or not, and its `NetworkClient` on every disconnect and
/// request timeout. A producer without retries would otherwise keep sending to a deposed
/// leader.
pub fn refreshes_metadata(result: &AttemptResult) -> bool {
    match *result {
        AttemptResult::Response {
            error: Some(error), ..
        } => invalidates_metadata(error),
        AttemptResult::Response { error: None, .. } => false,
        AttemptResult::TimedOut | AttemptResult::Disconnected => true,
    }
}

/// Whether this attempt may have written the batch.
pub fn may_have_written(result: &AttemptResult) -> bool {
    match result {
        AttemptResult::Response { error: Some(e), .. } => !rejected_before_append(*e),
        AttemptResult::Response { error: None, .. } => true,
        AttemptResult::TimedOut | AttemptResult::Disconnected => true,
    }
}

/// The unknown outcome of acks=0: sent, never answered. Kafka completes it as a success.
pub const SENT_AND_FORGOTTEN: &str = "acks=0";
/// DUPLICATE_SEQUENCE_NUMBER: Kafka completes the batch as a success without an offset.
const WRITTEN_BEFORE: &str = "DUPLICATE_SEQUENCE_NUMBER: written before, offset unknown";

/// What an application that takes every exception as "not written" records (`[workload]
/// on_error = "not-written"`): Kafka's send callback gets an exception for every batch
/// the producer gives up on, whether or not an attempt may have written it, so each such
/// unknown outcome becomes a failure. The two unknowns Kafka completes as successes stay.
pub fn taken_as_not_written(decision: Decision) -> Decision {
    match decision {
        Decision::Info(reason) if reason != SENT_AND_FORGOTTEN && reason != WRITTEN_BEFORE => {
            Decision::Fail(reason)
        }
        other => other,
    }
}

/// The decision for one attempt's result.
pub fn decide(
    result: &AttemptResult,
    progress: &BatchProgress,
    policy: &RetryPolicy,
    now: SimTime,
) -> Decision {
    let written = progress.maybe_written || may_have_written(result);
    let can_retry = policy.can_retry(progress, now);
    let give_up = |reason: &str| {
        if written {
            Decision::Info(reason.to_string())
        } else {
            Decision::Fail(reason.to_string())
        }
    };
    match *result {
        AttemptResult::Response {
            error: None,
            base_offset,
        } => Decision::Ok { base_offset },
        AttemptResult::Response {
            error: Some(ErrorCode::DuplicateSequenceNumber),
            ..
        } => Decision::Info(WRITTEN_BEFORE.to_string()),
        AttemptResult::Response {
            error: Some(error), ..
        } => {
            let retriable = error.is_retriable()
                || (error == ErrorCode::OutOfOrderSequenceNumber && progress.earlier_unresolved);
            if retriable && can_retry {
                Decision::Retry
            } else if error == ErrorCode::OutOfOrderSequenceNumber {
                Decision::Info(error.name().to_string())
            } else {
                give_up(error.name())
            }
        }
        AttemptResult::TimedOut if can_retry => Decision::Retry,
        AttemptResult::TimedOut => give_up("request timed out (request.timeout.ms)"),
        AttemptResult::Disconnected if can_retry => Decision::Retry,
        AttemptResult::Disconnected => give_up("disconnected"),
    }
}

/// A batch that expired while queued, for `reason`.
pub fn expired(maybe_written: bool, reason: &str) -> Decision {
    let reason = reason.to_string();
    if maybe_written {
        Decision::Info(reason)
    } else {
        Decision::Fail(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_application_taking_exceptions_as_not_written_keeps_kafka_s_successes() {
        let info = |reason: &str| Decision::Info(reason.to_string());
        assert_eq!(
            taken_as_not_written(info("request timed out (request.timeout.ms)")),
            Decision::Fail("request timed out (request.timeout.ms)".to_string())
        );
        for success in [SENT_AND_FORGOTTEN, WRITTEN_BEFORE] {
            assert_eq!(taken_as_not_written(info(success)), info(success));
        }
        let ok = Decision::Ok {
            base_offset: Offset(7),
        };
        assert_eq!(taken_as_not_written(ok.clone()), ok);
        let fail = Decision::Fail("NOT_ENOUGH_REPLICAS".to_string());
        assert_eq!(taken_as_not_written(fail.clone()), fail);
    }

    const POLICY: RetryPolicy = RetryPolicy {
        retries: 3,
        delivery_timeout: Some(Duration::from_secs(120)),
    };

    fn fresh() -> BatchProgress {
        BatchProgress {
            retries_done: 0,
            maybe_written: false,
            created: SimTime::ZERO,
            earlier_unresolved: false,
        }
    }

    fn exhausted() -> BatchProgress {
        BatchProgress {
            retries_done: 3,
            ..fresh()
        }
    }

    fn error(e: ErrorCode) -> AttemptResult {
        AttemptResult::Response {
            error: Some(e),
            base_offset: Offset::NONE,
        }
    }

    fn now() -> SimTime {
        SimTime::from_millis(1_000)
    }

    #[test]
    fn success_is_an_ack_at_the_base_offset() {
        let ok = AttemptResult::Response {
            error: None,
            base_offset: Offset(42),
        };
        assert_eq!(
            decide(&ok, &fresh(), &POLICY, now()),
            Decision::Ok {
                base_offset: Offset(42)
            }
        );
        // Even after unknown attempts, an ack is an ack (the idempotent retry's answer).
        let progress = BatchProgress {
            maybe_written: true,
            ..exhausted()
        };
        assert_eq!(
            decide(&ok, &progress, &POLICY, now()),
            Decision::Ok {
                base_offset: Offset(42)
            }
        );
    }

    #[test]
    fn retriable_errors_are_retried_while_allowed() {
        for e in [
            ErrorCode::NotLeaderOrFollower,
            ErrorCode::NotEnoughReplicas,
            ErrorCode::NotEnoughReplicasAfterAppend,
            ErrorCode::RequestTimedOut,
            ErrorCode::KafkaStorageError,
        ] {
            assert!(
                matches!(decide(&error(e), &fresh(), &POLICY, now()), Decision::Retry),
                "{e}"
            );
        }
        assert_eq!(
            decide(
                &error(ErrorCode::NotLeaderOrFollower),
                &fresh(),
                &POLICY,
                now()
            ),
            Decision::Retry
        );
        assert!(refreshes_metadata(&error(ErrorCode::NotLeaderOrFollower)));
        assert_eq!(
            decide(
                &error(ErrorCode::NotEnoughReplicas),
                &fresh(),
                &POLICY,
                now()
            ),
            Decision::Retry
        );
        assert!(!refreshes_metadata(&error(ErrorCode::NotEnoughReplicas)));
    }

    /// With no retry left the batch fails, but the producer must still look the leader up
    /// again, or every later send goes to the deposed leader too.
    #[test]
    fn a_batch_given_up_on_still_refreshes_metadata() {
        let result = error(ErrorCode::NotLeaderOrFollower);
        assert!(matches!(
            decide(&result, &exhausted(), &POLICY, now()),
            Decision::Fail(_) | Decision::Info(_)
        ));
        assert!(refreshes_metadata(&result));
        assert!(refreshes_metadata(&AttemptResult::TimedOut));
        assert!(!refreshes_metadata(&AttemptResult::Response {
            error: None,
            base_offset: Offset(0)
        }));
    }

    #[test]
    fn errors_before_append_fail_definitely_when_retries_run_out() {
        for e in [
            ErrorCode::NotEnoughReplicas,
            ErrorCode::FencedLeaderEpoch,
            ErrorCode::UnknownLeaderEpoch,
        ] {
            assert_eq!(
                decide(&error(e), &exhausted(), &POLICY, now()),
                Decision::Fail(e.name().to_string())
            );
        }
    }

    /// Regression: NOT_LEADER_OR_FOLLOWER from the purgatory (the leader moved after the
    /// append, or shut down) was taken as a definite failure, so a message the final read
    /// held was recorded as failed.
    #[test]
    fn errors_kafka_can_return_after_an_append_are_unknown() {
        for e in [
            ErrorCode::NotEnoughReplicasAfterAppend,
            ErrorCode::RequestTimedOut,
            ErrorCode::KafkaStorageError,
            ErrorCode::NotLeaderOrFollower,
            ErrorCode::UnknownTopicOrPartition,
        ] {
            assert_eq!(
                decide(&error(e), &exhausted(), &POLICY, now()),
                Decision::Info(e.name().to_string())
            );
        }
    }

    /// A batch that once timed out may be in the log: a later NOT_ENOUGH_REPLICAS does not
    /// make it a definite failure.
    #[test]
    fn an_earlier_unknown_attempt_makes_a_definite_error_unknown() {
        let progress = BatchProgress {
            maybe_written: true,
            ..exhausted()
        };
        assert!(matches!(
            decide(
                &error(ErrorCode::NotEnoughReplicas),
                &progress,
                &POLICY,
                now()
            ),
            Decision::Info(_)
        ));
    }

    #[test]
    fn non_retriable_errors_complete_at_once() {
        assert_eq!(
            decide(&error(ErrorCode::CorruptMessage), &fresh(), &POLICY, now()),
            Decision::Fail("CORRUPT_MESSAGE".to_string())
        );
    }

    #[test]
    fn timeouts_and_disconnects_are_retried_then_unknown() {
        for result in [AttemptResult::TimedOut, AttemptResult::Disconnected] {
            assert_eq!(decide(&result, &fresh(), &POLICY, now()), Decision::Retry);
            assert!(matches!(
                decide(&result, &exhausted(), &POLICY, now()),
                Decision::Info(_)
            ));
        }
    }

    #[test]
    fn a_batch_never_sent_fails_definitely() {
        assert_eq!(
            expired(false, "delivery timeout (delivery.timeout.ms)"),
            Decision::Fail("delivery timeout (delivery.timeout.ms)".to_string())
        );
        assert!(matches!(
            expired(true, "delivery timeout (delivery.timeout.ms)"),
            Decision::Info(_)
        ));
    }

    #[test]
    fn the_delivery_timeout_stops_retries() {
        let late = SimTime::ZERO + Duration::from_secs(120);
        assert!(matches!(
            decide(&AttemptResult::TimedOut, &fresh(), &POLICY, late),
            Decision::Info(_)
        ));
        assert!(matches!(
            decide(
                &error(ErrorCode::NotEnoughReplicas),
                &fresh(),
                &POLICY,
                late
            ),
            Decision::Fail(_)
        ));
    }

    /// Before KIP-91 time does not stop retries: `retries` alone does.
    #[test]
    fn before_kip_91_only_retries_stop_retries() {
        let policy = RetryPolicy {
            delivery_timeout: None,
            ..POLICY
        };
        let much_later = SimTime::ZERO + Duration::from_secs(3_600);
        assert!(matches!(
            decide(&AttemptResult::TimedOut, &fresh(), &policy, much_later),
            Decision::Retry
        ));
        assert!(matches!(
            decide(&AttemptResult::TimedOut, &exhausted(), &policy, much_later),
            Decision::Info(_)
        ));
    }

    #[test]
    fn retries_zero_means_one_attempt() {
        let policy = RetryPolicy {
            retries: 0,
            ..POLICY
        };
        assert!(matches!(
            decide(&AttemptResult::TimedOut, &fresh(), &policy, now()),
            Decision::Info(_)
        ));
    }

    #[test]
    fn duplicate_sequence_is_written_at_an_unknown_offset() {
        assert!(matches!(
            decide(
                &error(ErrorCode::DuplicateSequenceNumber),
                &fresh(),
                &POLICY,
                now()
            ),
            Decision::Info(_)
        ));
    }

    #[test]
    fn out_of_order_sequence_waits_for_an_earlier_retry_else_is_unknown() {
        let behind = BatchProgress {
            earlier_unresolved: true,
            ..fresh()
        };
        assert!(matches!(
            decide(
                &error(ErrorCode::OutOfOrderSequenceNumber),
                &behind,
                &POLICY,
                now()
            ),
            Decision::Retry
        ));
        assert_eq!(
            decide(
                &error(ErrorCode::OutOfOrderSequenceNumber),
                &fresh(),
                &POLICY,
                now()
            ),
            Decision::Info("OUT_OF_ORDER_SEQUENCE_NUMBER".to_string())
        );
    }
}
