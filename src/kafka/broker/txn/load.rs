//! A coordinator coming to lead a `__transaction_state` partition reads it back (Kafka's
//! `loadTransactionsForTxnTopicPartition`): the last value of each transactional id wins,
//! a tombstone removes the id, and every transaction caught between its Prepare record
//! and its Complete record has its completion prepared, so that the new coordinator sends
//! its markers again (with its own, newer coordinator epoch). Ongoing transactions are
//! left to the timeout.

use std::collections::BTreeMap;

use super::log_record::{decode_key, decode_value, KEY_VERSION};
use super::metadata::{TxnMetadata, TxnState, TxnTransit};

/// The `__transaction_state` partition a transactional id lives on.
pub fn state_partition(transactional_id: &str, partitions: u32) -> u32 {
    crate::kafka::types::coordinator_partition(transactional_id, partitions)
}

#[derive(Debug, Default)]
pub struct Loaded {
    pub transactions: BTreeMap<String, TxnMetadata>,
    /// Transactions whose markers must be sent again, with the Complete* transition they
    /// end in (already pending on their metadata).
    pub to_complete: Vec<(String, TxnTransit)>,
}

/// Replay a partition's records (key, value; `None` a tombstone), oldest first. A key of a
/// version this release does not know is skipped, as Kafka skips it; a damaged record is
/// an error (Kafka's load fails, and the partition is not coordinated).
pub fn load<'a>(
    records: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    now_ms: i64,
) -> Result<Loaded, String> {
    let mut transactions = BTreeMap::new();
    for (key, value) in records {
        if key.len() >= 2 && i16::from_be_bytes([key[0], key[1]]) != KEY_VERSION {
            continue;
        }
        let id = decode_key(key)?;
        match value {
            None => {
                transactions.remove(&id);
            }
            Some(value) => {
                let transit = decode_value(value)?;
                transactions.insert(id.clone(), TxnMetadata::loaded(&id, &transit));
            }
        }
    }
    let mut to_complete = Vec::new();
    for (id, meta) in transactions.iter_mut() {
        if matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            to_complete.push((id.clone(), meta.prepare_complete(now_ms)));
        }
    }
    Ok(Loaded {
        transactions,
        to_complete,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::broker::txn::log_record::{encode_key, encode_value};
    use crate::kafka::types::ProducerId;
    use crate::types::TopicPartition;

    fn transit(state: TxnState, epoch: i16, partitions: &[u32]) -> TxnTransit {
        TxnTransit {
            producer_id: ProducerId(1000),
            last_producer_id: ProducerId::NONE,
            producer_epoch: epoch,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            partitions: partitions
                .iter()
                .map(|p| TopicPartition::new("out", *p))
                .collect(),
            start_ms: 5,
            last_update_ms: 6,
            client_transaction_version: 0,
        }
    }

    #[test]
    fn transactional_ids_land_where_kafka_puts_them() {
        assert_eq!(state_partition("txn-1", 50), 10);
        assert_eq!(state_partition("my-txn", 50), 45);
        assert_eq!(state_partition("a", 50), 47);
    }

    /// The last record of each id wins, a tombstone removes it, a Prepare* state is to be
    /// completed (its markers sent again) and an Ongoing one is not.
    #[test]
    fn the_last_record_wins_and_prepared_transactions_complete() {
        let records = [
            ("a", Some(transit(TxnState::Empty, 0, &[]))),
            ("a", Some(transit(TxnState::Ongoing, 0, &[0, 1]))),
            ("a", Some(transit(TxnState::PrepareCommit, 0, &[0, 1]))),
            ("b", Some(transit(TxnState::Ongoing, 3, &[2]))),
            ("c", Some(transit(TxnState::CompleteAbort, 1, &[]))),
            ("c", None),
        ];
        let bytes: Vec<(Vec<u8>, Option<Vec<u8>>)> = records
            .iter()
            .map(|(id, value)| (encode_key(id), value.as_ref().map(|v| encode_value(v, 0))))
            .collect();
        let mut newer_key = encode_key("z");
        newer_key[1] = 1;
        let loaded = load(
            bytes
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .chain([(newer_key.as_slice(), None)]),
            100,
        )
        .unwrap();
        let ids: Vec<&str> = loaded.transactions.keys().map(String::as_str).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(loaded.transactions["b"].state, TxnState::Ongoing);
        assert_eq!(loaded.to_complete.len(), 1);
        let (id, complete) = &loaded.to_complete[0];
        assert_eq!(
            (id.as_str(), complete.state),
            ("a", TxnState::CompleteCommit)
        );
        assert_eq!(
            loaded.transactions["a"].pending,
            Some(TxnState::CompleteCommit),
            "the markers go out before anything else happens to it"
        );
        assert!(
            loaded.transactions["a"].partitions.len() == 2,
            "the markers' partitions"
        );
    }

    #[test]
    fn a_damaged_record_fails_the_load() {
        let key = encode_key("a");
        assert!(load([(key.as_slice(), Some(&[0u8, 0, 1][..]))], 0).is_err());
    }
}
