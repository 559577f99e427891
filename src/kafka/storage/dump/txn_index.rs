//! A `.txnindex` as Kafka's `dumpTxnIndex` prints it: one line per aborted transaction.
//! Kafka reads whole entries only, so a torn tail is not shown; hightide says it is there.

use std::fmt::Write;

use super::FileDump;
use crate::kafka::storage::txn_index::{AbortedTxn, ENTRY_BYTES};

pub fn dump_txn_index(base_offset: i64, bytes: &[u8]) -> FileDump {
    let mut dump = FileDump::default();
    let chunks = bytes.chunks_exact(ENTRY_BYTES);
    let torn = chunks.remainder().len();
    for (i, chunk) in chunks.enumerate() {
        match AbortedTxn::decode(chunk.try_into().expect("chunks are entry-sized")) {
            Ok(e) => {
                let _ = writeln!(
                    dump.out,
                    "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                    e.producer_id.0, e.first_offset, e.last_offset, e.last_stable_offset
                );
                if e.last_offset.0 < base_offset {
                    let _ = writeln!(
                        dump.out,
                        "position: {}: last offset {} is before the segment's base offset \
                         {base_offset}",
                        i * ENTRY_BYTES,
                        e.last_offset
                    );
                    dump.damaged = true;
                }
            }
            Err(why) => {
                let _ = writeln!(dump.out, "position: {}: {why}", i * ENTRY_BYTES);
                dump.damaged = true;
                return dump;
            }
        }
    }
    if torn > 0 {
        let _ = writeln!(
            dump.out,
            "Found {torn} bytes of a torn entry at the end, which Kafka ignores"
        );
        dump.damaged = true;
    }
    dump
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::storage::txn_index::TxnIndex;
    use crate::kafka::types::ProducerId;
    use crate::types::Offset;

    #[test]
    fn entries_print_as_kafkas_tool_prints_them() {
        let mut index = TxnIndex::default();
        index.push(AbortedTxn {
            producer_id: ProducerId(1000),
            first_offset: Offset(0),
            last_offset: Offset(10),
            last_stable_offset: Offset(11),
        });
        let mut bytes = index.to_bytes();
        let dump = dump_txn_index(0, &bytes);
        assert_eq!(
            dump.out,
            "version: 0 producerId: 1000 firstOffset: 0 lastOffset: 10 lastStableOffset: 11\n"
        );
        assert!(!dump.damaged);
        bytes.extend_from_slice(&[0; 5]);
        let torn = dump_txn_index(0, &bytes);
        assert!(torn.damaged && torn.out.ends_with("which Kafka ignores\n"));
        assert!(
            dump_txn_index(11, &index.to_bytes()).damaged,
            "before the base"
        );
    }
}
