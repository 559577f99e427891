//! The `checkpoint` file (`StoreCheckpoint`): one 4 KiB page of big-endian longs, written
//! in place and forced, which abnormal recovery reads to choose the CommitLog file it
//! starts from. 4.9 keeps three timestamps; 5.x adds the master's flushed offset and the
//! confirm offset.

/// The file, under the store root.
pub const PATH: &str = "store/checkpoint";
/// It is mapped at one page.
pub const FILE_BYTES: u64 = 4096;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// The store timestamp of the CommitLog's last full flush.
    pub physic_msg_timestamp: i64,
    /// The store timestamp of the last message dispatched to a ConsumeQueue.
    pub logics_msg_timestamp: i64,
    pub index_msg_timestamp: i64,
    /// 5.x only.
    pub master_flushed_offset: i64,
    /// 5.x only.
    pub confirm_phy_offset: i64,
}

impl Checkpoint {
    /// The first `longs` fields, which a release writes at the start of the page (the
    /// rest stays as it was): `Rules::checkpoint_longs`.
    pub fn to_bytes(&self, longs: usize) -> Vec<u8> {
        [
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ][..longs]
            .iter()
            .flat_map(|field| field.to_be_bytes())
            .collect()
    }

    /// The page as read back; bytes past its end read as zeros, as a fresh mapping does.
    pub fn from_bytes(bytes: &[u8]) -> Checkpoint {
        let long = |at: usize| {
            let mut field = [0; 8];
            if let Some(b) = bytes.get(at..at + 8) {
                field.copy_from_slice(b);
            }
            i64::from_be_bytes(field)
        };
        Checkpoint {
            physic_msg_timestamp: long(0),
            logics_msg_timestamp: long(8),
            index_msg_timestamp: long(16),
            master_flushed_offset: long(24),
            confirm_phy_offset: long(32),
        }
    }

    /// `getMinTimestamp`: the older of the CommitLog's and the ConsumeQueues' timestamps,
    /// less 3 s, never below 0. A CommitLog file whose first message was stored at or
    /// before it is where abnormal recovery starts.
    pub fn min_timestamp(&self) -> i64 {
        (self.physic_msg_timestamp.min(self.logics_msg_timestamp) - 3_000).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_holds_big_endian_longs_in_rocketmq_s_order() {
        let checkpoint = Checkpoint {
            physic_msg_timestamp: 0x0102,
            logics_msg_timestamp: 0x0304,
            index_msg_timestamp: 0x0506,
            master_flushed_offset: 7,
            confirm_phy_offset: 8,
        };
        let five = checkpoint.to_bytes(5);
        assert_eq!(five.len(), 40);
        assert_eq!(five[6..8], [1, 2]);
        assert_eq!(five[14..16], [3, 4]);
        assert_eq!(five[22..24], [5, 6]);
        assert_eq!((five[31], five[39]), (7, 8));
        assert_eq!(checkpoint.to_bytes(3), five[..24]);
        assert_eq!(Checkpoint::from_bytes(&five), checkpoint);
        assert_eq!(Checkpoint::from_bytes(&five[..20]).index_msg_timestamp, 0);
    }

    #[test]
    fn the_minimum_timestamp_is_the_older_less_three_seconds() {
        let checkpoint = Checkpoint {
            physic_msg_timestamp: 10_000,
            logics_msg_timestamp: 9_000,
            index_msg_timestamp: 2_000,
            ..Checkpoint::default()
        };
        assert_eq!(
            checkpoint.min_timestamp(),
            6_000,
            "the index's is not counted"
        );
        assert_eq!(Checkpoint::default().min_timestamp(), 0);
    }
}
