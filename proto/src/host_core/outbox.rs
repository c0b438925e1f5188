//! The host core's queue of outgoing messages, bounded by a [`Bound`].
//!
//! A tool process can send LogMessages (or progress) faster than a host reads them. The queue
//! keeps its first items; past them it keeps the last ones, and drops the oldest droppable items
//! between (log, progress, resource updates; never a response or a request). An item that is not
//! droppable and says the same as one waiting in the last part is not queued twice
//! (`list_changed`). [`Outbox::pop`] gives, in order: the first items, [`Popped::Dropped`] with
//! the count of what was dropped, then the last items; after that the queue starts over.

use std::collections::VecDeque;

use crate::bound::Bound;

/// What [`Outbox::pop`] gives.
#[derive(Debug, PartialEq)]
pub enum Popped<T> {
    Item(T),
    /// This many items were dropped here (between the first and the last part).
    Dropped(u64),
}

/// One queued item with what the policy needs to know of it.
#[derive(Debug)]
struct Slot<T> {
    item: T,
    size: usize,
    droppable: bool,
    /// Items with the same key that are not droppable are queued once.
    key: Option<u8>,
}

/// The queue; see the module documentation.
#[derive(Debug)]
pub struct Outbox<T> {
    bound: Bound,
    head: VecDeque<Slot<T>>,
    head_bytes: usize,
    tail: VecDeque<Slot<T>>,
    tail_bytes: usize,
    dropped: u64,
}

impl<T> Outbox<T> {
    pub fn new(bound: Bound) -> Self {
        Outbox { bound, head: VecDeque::new(), head_bytes: 0, tail: VecDeque::new(), tail_bytes: 0, dropped: 0 }
    }

    /// Queues `item` of about `size` bytes; `key`: see the module documentation.
    pub fn push(&mut self, item: T, size: usize, droppable: bool, key: Option<u8>) {
        let b = self.bound;
        let slot = Slot { item, size, droppable, key };
        if self.tail.is_empty()
            && self.dropped == 0
            && self.head.len() < b.head_items
            && self.head_bytes + size <= b.head_bytes
        {
            self.head.push_back(slot);
            self.head_bytes += size;
            return;
        }
        if !droppable && key.is_some() && self.tail.iter().any(|s| !s.droppable && s.key == key) {
            return;
        }
        self.tail.push_back(slot);
        self.tail_bytes += size;
        while self.tail.len() > b.tail_items || self.tail_bytes > b.tail_bytes {
            // The oldest droppable item, but never the newest one.
            let last = self.tail.len() - 1;
            let Some(i) = self.tail.iter().take(last).position(|s| s.droppable) else { break };
            if let Some(s) = self.tail.remove(i) {
                self.tail_bytes -= s.size;
                self.dropped += 1;
            }
        }
    }

    /// The next item, or the count of the dropped ones where they were.
    pub fn pop(&mut self) -> Option<Popped<T>> {
        loop {
            if let Some(s) = self.head.pop_front() {
                self.head_bytes -= s.size;
                return Some(Popped::Item(s.item));
            }
            if self.dropped > 0 {
                return Some(Popped::Dropped(std::mem::take(&mut self.dropped)));
            }
            if self.tail.is_empty() {
                return None;
            }
            // The last part becomes the first part of what follows.
            self.head = std::mem::take(&mut self.tail);
            self.head_bytes = std::mem::take(&mut self.tail_bytes);
        }
    }

    /// Items queued now.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.dropped == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(head: usize, tail: usize) -> Bound {
        Bound { head_items: head, head_bytes: 1 << 20, tail_items: tail, tail_bytes: 1 << 20 }
    }

    fn drain(q: &mut Outbox<&'static str>) -> Vec<Popped<&'static str>> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    const LOG: [&str; 10] = ["l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9"];

    #[test]
    fn a_flood_keeps_the_first_and_the_last_items_and_counts_the_rest() {
        let mut q = Outbox::new(bound(3, 2));
        for l in LOG {
            q.push(l, 10, true, None);
        }
        assert_eq!(q.len(), 5);
        use Popped::*;
        assert_eq!(drain(&mut q), [Item("l0"), Item("l1"), Item("l2"), Dropped(5), Item("l8"), Item("l9")]);
    }

    #[test]
    fn answers_are_never_dropped_and_the_queue_starts_over_after_a_flood() {
        let mut q = Outbox::new(bound(1, 2));
        q.push("l0", 10, true, None);
        q.push("answer", 10, false, None);
        for l in &LOG[2..6] {
            q.push(l, 10, true, None);
        }
        use Popped::*;
        assert_eq!(q.pop(), Some(Item("l0")));
        assert_eq!(q.pop(), Some(Dropped(3)));
        assert_eq!(q.pop(), Some(Item("answer")));
        // Queued while the last part is being taken: behind it, nothing dropped.
        q.push("l6", 10, true, None);
        assert_eq!(drain(&mut q), [Item("l5"), Item("l6")]);
        assert!(q.is_empty());
    }

    #[test]
    fn equal_items_that_cannot_be_dropped_wait_once() {
        let mut q = Outbox::new(bound(1, 2));
        q.push("l0", 10, true, None);
        for _ in 0..1000 {
            q.push("changed", 10, false, Some(1));
            q.push("l1", 10, true, None);
        }
        use Popped::*;
        assert_eq!(drain(&mut q), [Item("l0"), Dropped(999), Item("changed"), Item("l1")]);
    }

    #[test]
    fn the_bytes_bound_drops_as_the_item_bound_does() {
        let mut q = Outbox::new(Bound { head_items: 100, head_bytes: 25, tail_items: 100, tail_bytes: 25 });
        for l in LOG {
            q.push(l, 10, true, None);
        }
        use Popped::*;
        assert_eq!(drain(&mut q), [Item("l0"), Item("l1"), Dropped(6), Item("l8"), Item("l9")]);
    }
}
