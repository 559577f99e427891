//! Transactions in the partition log: markers, the `.txnindex`, the first unstable offset,
//! through appends, recovery and truncation.

use std::time::Duration;

use hightide::config::kafka::LogConfig;
use hightide::kafka::record::{BatchBuilder, EndTxnMarker, TxnResult};
use hightide::kafka::storage::log::{Log, StorageError};
use hightide::kafka::storage::txn_index::{AbortedTxn, TxnIndex};
use hightide::kafka::types::ProducerId;
use hightide::os::clock::SimTime;
use hightide::os::disk::{Disk, DiskConfig};
use hightide::types::{Epoch, Offset, TopicPartition};

/// Segments of about five small batches, so that transactions span segments; the rules
/// of 3.6 to 3.9 (transaction protocol v2's verification is `producer_state`'s to test).
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        roll: Duration::from_secs(3600),
        transaction_verification: true,
        transaction_version_2: false,
        ..LogConfig::default()
    }
}

fn open(disk: &Disk) -> Log {
    Log::open(
        disk,
        &TopicPartition::new("t", 0),
        config(),
        Offset(0),
        Offset(0),
        false,
        SimTime::ZERO,
    )
    .expect("open")
}

/// A transactional batch of one record from producer `pid` at `epoch`.
fn txn_batch(pid: i64, epoch: i16, sequence: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, ProducerId(pid), epoch, sequence).transactional();
    b.push(0, None, Some(format!("{pid}:{sequence}").as_bytes()));
    b.build()
}

fn end(log: &mut Log, pid: i64, result: TxnResult, coordinator_epoch: i32) -> Offset {
    let marker = EndTxnMarker {
        result,
        coordinator_epoch,
    };
    match log
        .append_marker_as_leader(ProducerId(pid), 0, marker, Epoch(0), SimTime::ZERO)
        .expect("marker")
    {
        hightide::kafka::storage::log::AppendOutcome::Appended { first_offset, .. } => first_offset,
        other => panic!("a marker is never a duplicate: {other:?}"),
    }
}

/// A transactional batch, verified as its coordinator would have answered (KIP-890).
fn write(log: &mut Log, pid: i64, sequence: i32) {
    let guard = log.start_verification(ProducerId(pid), 0);
    log.append_verified_as_leader(txn_batch(pid, 0, sequence), Epoch(0), SimTime::ZERO, guard)
        .expect("append");
}

/// KIP-890 part 1 at the log: a batch that would start a transaction needs the guard its
/// verification was handed, and a marker written while the coordinator was asked (the
/// transaction ended meanwhile) makes that guard worthless; a batch continuing an open
/// transaction needs none.
#[test]
fn only_a_verified_batch_starts_a_transaction_and_a_marker_meanwhile_refuses_it() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk);
    assert!(matches!(
        log.append_as_leader(txn_batch(1, 0, 0), Epoch(0), SimTime::ZERO),
        Err(StorageError::InvalidTxnState)
    ));
    let guard = log.start_verification(ProducerId(1), 0);
    assert!(guard.is_some());
    end(&mut log, 1, TxnResult::Abort, 0);
    assert!(matches!(
        log.append_verified_as_leader(txn_batch(1, 0, 0), Epoch(0), SimTime::ZERO, guard),
        Err(StorageError::InvalidTxnState)
    ));
    write(&mut log, 1, 0);
    assert_eq!(
        log.start_verification(ProducerId(1), 0),
        None,
        "open: nothing to ask"
    );
    log.append_as_leader(txn_batch(1, 0, 1), Epoch(0), SimTime::ZERO)
        .expect("continues the transaction");
    assert_eq!(log.first_unstable_offset(), Some(Offset(1)));
}

/// The `.txnindex` files on disk, by segment base offset.
fn txn_files(disk: &Disk, log: &Log) -> Vec<(Offset, Vec<AbortedTxn>)> {
    log.segment_bases()
        .into_iter()
        .filter_map(|base| {
            let path = format!("t-0/{:020}.txnindex", base.0);
            let bytes = disk.exists(&path).then(|| disk.read_all(&path).unwrap())?;
            Some((
                base,
                TxnIndex::parse(&bytes, base).unwrap().entries().to_vec(),
            ))
        })
        .collect()
}

/// Producer 1 aborts a transaction that began two segments back; producer 2 commits one.
/// Only the abort is indexed, in the segment holding its marker, with the LSO of the
/// transaction still open (producer 3's).
#[test]
fn an_abort_is_indexed_where_its_marker_is_and_a_commit_is_not() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk);
    write(&mut log, 1, 0);
    write(&mut log, 3, 0);
    for sequence in 0..12 {
        write(&mut log, 2, sequence);
    }
    end(&mut log, 2, TxnResult::Commit, 0);
    let abort = end(&mut log, 1, TxnResult::Abort, 0);
    assert!(log.segment_bases().len() >= 3, "{:?}", log.segment_bases());
    let marker_segment = *log.segment_bases().last().unwrap();
    let expected = AbortedTxn {
        producer_id: ProducerId(1),
        first_offset: Offset(0),
        last_offset: abort,
        last_stable_offset: Offset(1),
    };
    assert_eq!(
        txn_files(&disk, &log),
        vec![(marker_segment, vec![expected])]
    );
    assert_eq!(
        log.collect_aborted_txns(Offset(0), log.log_end_offset()),
        vec![expected]
    );
    assert_eq!(
        log.collect_aborted_txns(abort.next(), log.log_end_offset()),
        vec![],
        "a fetch past the marker needs no abort"
    );
    assert_eq!(log.first_unstable_offset(), Some(Offset(0)));
    log.on_high_watermark_updated(log.log_end_offset());
    assert_eq!(
        log.first_unstable_offset(),
        Some(Offset(1)),
        "producer 3's is open"
    );
}

/// After a crash recovery replays the log: the same `.txnindex` bytes, the same open
/// transactions; a missing index file is rebuilt too.
#[test]
fn recovery_rebuilds_the_txn_index_and_the_open_transactions() {
    let disk = Disk::new(DiskConfig::default(), 2);
    let mut log = open(&disk);
    for sequence in 0..8 {
        write(&mut log, 1, sequence);
    }
    let abort = end(&mut log, 1, TxnResult::Abort, 3);
    write(&mut log, 2, 0);
    let before = txn_files(&disk, &log);
    assert_eq!(before.len(), 1);
    drop(log);
    let mut log = open(&disk);
    assert_eq!(txn_files(&disk, &log), before);
    assert_eq!(
        log.first_unstable_offset(),
        Some(Offset(0)),
        "unstable until the partition learns its HW"
    );
    log.on_high_watermark_updated(log.log_end_offset());
    assert_eq!(log.first_unstable_offset(), Some(abort.next()));
    assert_eq!(
        log.producer_state()
            .entry(ProducerId(1))
            .unwrap()
            .coordinator_epoch,
        3
    );
    drop(log);
    let (base, _) = &before[0];
    disk.delete(&format!("t-0/{:020}.txnindex", base.0))
        .unwrap();
    let log = open(&disk);
    assert_eq!(txn_files(&disk, &log), before, "rebuilt from the log");
}

/// Truncating below a marker drops its index entry and reopens its transaction.
#[test]
fn truncation_cuts_the_txn_index_and_reopens_the_transaction() {
    let disk = Disk::new(DiskConfig::default(), 3);
    let mut log = open(&disk);
    write(&mut log, 1, 0);
    write(&mut log, 1, 1);
    let abort = end(&mut log, 1, TxnResult::Abort, 0);
    log.on_high_watermark_updated(log.log_end_offset());
    assert_eq!(log.first_unstable_offset(), None);
    log.truncate_to(abort, SimTime::ZERO).expect("truncate");
    assert_eq!(txn_files(&disk, &log), vec![(Offset(0), vec![])]);
    assert_eq!(log.first_unstable_offset(), Some(Offset(0)));
    assert_eq!(log.collect_aborted_txns(Offset(0), abort), vec![]);
}

#[test]
fn zombie_markers_and_client_control_batches_are_refused() {
    let disk = Disk::new(DiskConfig::default(), 4);
    let mut log = open(&disk);
    write(&mut log, 1, 0);
    end(&mut log, 1, TxnResult::Commit, 5);
    let marker = |coordinator_epoch| EndTxnMarker {
        result: TxnResult::Abort,
        coordinator_epoch,
    };
    assert!(matches!(
        log.append_marker_as_leader(ProducerId(1), 0, marker(4), Epoch(0), SimTime::ZERO),
        Err(StorageError::TransactionCoordinatorFenced)
    ));
    let forged = marker(9).batch(0, ProducerId(1), 0);
    assert!(matches!(
        log.append_as_leader(forged, Epoch(0), SimTime::ZERO),
        Err(StorageError::InvalidRecord(_))
    ));
    write(&mut log, 1, 1);
    let mut plain = BatchBuilder::new(0, ProducerId(1), 0, 2);
    plain.push(0, None, Some(b"x"));
    assert!(matches!(
        log.append_as_leader(plain.build(), Epoch(0), SimTime::ZERO),
        Err(StorageError::InvalidTxnState)
    ));
}

/// A group coordinator's TxnOffsetCommit batches all carry sequence 0 (Kafka's
/// `storeOffsets`): appended with origin COORDINATOR they are neither duplicates nor out
/// of order, each opens or continues the producer's transaction (so the LSO holds), and
/// only an older producer epoch is refused.
#[test]
fn a_coordinator_s_transactional_batches_skip_the_sequence_check() {
    let disk = Disk::new(DiskConfig::default(), 1);
    let mut log = open(&disk);
    for _ in 0..2 {
        log.append_as_coordinator(txn_batch(7, 1, 0), Epoch(0), SimTime::ZERO)
            .expect("a coordinator's batch");
    }
    assert_eq!(log.log_end_offset(), Offset(2), "both appended");
    assert_eq!(log.first_unstable_offset(), Some(Offset(0)));
    assert!(
        matches!(
            log.append_as_leader(txn_batch(7, 1, 0), Epoch(0), SimTime::ZERO),
            Ok(hightide::kafka::storage::log::AppendOutcome::Duplicate { .. })
        ),
        "the same batch from a client is a duplicate"
    );
    assert!(matches!(
        log.append_as_coordinator(txn_batch(7, 0, 0), Epoch(0), SimTime::ZERO),
        Err(StorageError::InvalidProducerEpoch)
    ));
    let commit = EndTxnMarker {
        result: TxnResult::Commit,
        coordinator_epoch: 0,
    };
    log.append_marker_as_leader(ProducerId(7), 1, commit, Epoch(0), SimTime::ZERO)
        .expect("marker");
    log.on_high_watermark_updated(log.log_end_offset());
    assert_eq!(
        log.first_unstable_offset(),
        None,
        "closed by the marker, replicated"
    );
}
