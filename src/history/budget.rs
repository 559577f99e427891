//! The send budget: who may send the next message, and with which id. The harness owns it
//! (outside the producer hosts), so a producer that crashes and restarts continues its
//! sequence instead of reusing ids, and the scenario's `messages` cap holds across all
//! producers and restarts.

use super::MessageId;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Shared counters; cloning shares them.
#[derive(Clone, Debug, Default)]
pub struct SendBudget {
    /// Next sequence number per producer number.
    next_seq: Rc<RefCell<BTreeMap<u32, u32>>>,
    /// Messages taken by all producers together.
    taken: Rc<Cell<u64>>,
    cap: Option<u64>,
}

impl SendBudget {
    /// A budget for producers `1..=producers` and at most `cap` messages in all (`None`: no cap).
    pub fn new(producers: u32, cap: Option<u64>) -> Self {
        let next_seq = (1..=producers).map(|p| (p, 0)).collect();
        SendBudget {
            next_seq: Rc::new(RefCell::new(next_seq)),
            taken: Rc::new(Cell::new(0)),
            cap,
        }
    }

    /// The id of producer `producer`'s next message, or `None` once the cap is reached or
    /// the producer has used every sequence number.
    pub fn take(&self, producer: u32) -> Option<MessageId> {
        if self.is_exhausted() {
            return None;
        }
        let mut next_seq = self.next_seq.borrow_mut();
        let next = next_seq.entry(producer).or_insert(0);
        let seq = *next;
        *next = seq.checked_add(1)?;
        let id = MessageId { producer, seq };
        self.taken.set(self.taken.get() + 1);
        Some(id)
    }

    /// Whether the global cap has been reached.
    pub fn is_exhausted(&self) -> bool {
        self.cap.is_some_and(|cap| self.taken.get() >= cap)
    }

    /// Messages taken so far by all producers.
    pub fn taken(&self) -> u64 {
        self.taken.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_per_producer_sequences() {
        let budget = SendBudget::new(2, None);
        assert_eq!(
            budget.take(1),
            Some(MessageId {
                producer: 1,
                seq: 0
            })
        );
        assert_eq!(
            budget.take(2),
            Some(MessageId {
                producer: 2,
                seq: 0
            })
        );
        assert_eq!(
            budget.take(1),
            Some(MessageId {
                producer: 1,
                seq: 1
            })
        );
        assert_eq!(budget.taken(), 3);
    }

    #[test]
    fn the_cap_is_global() {
        let budget = SendBudget::new(2, Some(3));
        assert!(budget.take(1).is_some());
        assert!(budget.take(2).is_some());
        assert!(budget.take(2).is_some());
        assert!(budget.is_exhausted());
        assert_eq!(budget.take(1), None);
        assert_eq!(budget.taken(), 3);
    }

    /// A restarted producer gets a fresh clone of the harness's budget: ids must not repeat.
    #[test]
    fn clones_share_the_counters_across_a_restart() {
        let budget = SendBudget::new(1, None);
        let first_life = budget.clone();
        assert_eq!(first_life.take(1).map(|id| id.seq), Some(0));
        drop(first_life);
        assert_eq!(budget.clone().take(1).map(|id| id.seq), Some(1));
    }
}
