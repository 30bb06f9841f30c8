//! The reorder buffer of a parallel stage: computed elements wait here, by sequence number, until
//! the consumer takes them (the lowest in order mode, any in as-completed mode).

use std::collections::VecDeque;

use crate::error::Result;
use crate::example::Example;

/// One computed element and the bytes it holds in the budget.
pub(super) struct Item {
    pub(super) res: Result<Example>,
    pub(super) bytes: usize,
}

/// Computed elements not yet taken, by sequence number: a ring of slots from `base`, which
/// follows the consumer's `low` (every number inserted is at or above it). Each number in the
/// window is filled once and taken once; a `BTreeMap`'s insert and remove were 2.5 % of an inline
/// Python map's samples.
#[derive(Default)]
pub(super) struct Ready {
    base: u64,
    slots: VecDeque<Option<Item>>,
    len: usize,
}

impl Ready {
    pub(super) fn starting_at(base: u64) -> Self {
        Ready {
            base,
            ..Ready::default()
        }
    }

    pub(super) fn insert(&mut self, seq: u64, item: Item) {
        while seq < self.base {
            // Not reached (numbers below `low` are never computed); kept correct all the same.
            self.base -= 1;
            self.slots.push_front(None);
        }
        let i = (seq - self.base) as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].replace(item).is_none() {
            self.len += 1;
        }
    }

    pub(super) fn remove(&mut self, seq: u64) -> Option<Item> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        let item = self.slots.get_mut(i)?.take();
        self.len -= usize::from(item.is_some());
        item
    }

    /// The lowest-numbered element (as-completed mode).
    pub(super) fn pop_first(&mut self) -> Option<(u64, Item)> {
        if self.len == 0 {
            return None;
        }
        let i = self.slots.iter().position(Option::is_some)?;
        self.len -= 1;
        Some((self.base + i as u64, self.slots[i].take()?))
    }

    pub(super) fn contains(&self, seq: u64) -> bool {
        seq.checked_sub(self.base)
            .and_then(|i| self.slots.get(usize::try_from(i).ok()?))
            .is_some_and(Option::is_some)
    }

    /// Drops the (empty) slots below `low`, the consumer's next number.
    pub(super) fn advance(&mut self, low: u64) {
        while self.base < low {
            if self.slots.pop_front().is_none() {
                self.base = low;
                break;
            }
            self.base += 1;
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the ring; the bytes its elements held.
    pub(super) fn clear(&mut self) -> usize {
        let held = self.slots.iter().flatten().map(|i| i.bytes).sum();
        self.slots.clear();
        self.len = 0;
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    fn x(e: &Example) -> i64 {
        e.tensor("test", "x").unwrap().to_vec::<i64>().unwrap()[0]
    }

    #[test]
    fn the_ready_ring_takes_each_number_once_in_any_order() {
        let item = |v: i64, bytes| Item {
            res: Ok(Example::new().with("x", Tensor::scalar(v))),
            bytes,
        };
        let mut r = Ready::starting_at(10);
        for seq in [13, 10, 12] {
            r.insert(seq, item(seq as i64, 1));
        }
        assert_eq!(r.len(), 3);
        assert!(r.contains(12) && !r.contains(11) && !r.contains(9) && !r.contains(99));
        assert!(r.remove(11).is_none() && r.remove(3).is_none());
        let first = r.pop_first().unwrap();
        assert_eq!((first.0, x(&first.1.res.unwrap())), (10, 10));
        r.advance(11);
        assert_eq!(x(&r.remove(13).unwrap().res.unwrap()), 13);
        r.advance(12); // 10 taken; 13 taken ahead of 12, the next
        assert!(r.contains(12) && !r.contains(10));
        r.insert(20, item(20, 5));
        assert_eq!((r.len(), r.clear(), r.len()), (2, 6, 0));
        r.insert(7, item(7, 1)); // below the base: extends the ring downwards
        assert!(r.contains(7) && r.pop_first().is_some_and(|(s, _)| s == 7));
    }
}
