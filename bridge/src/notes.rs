//! The queue of notifications for one host session, bounded by
//! [`crate::limits::BRIDGE_HOST_QUEUE`].
//!
//! A tool process can send LogMessages (or progress) faster than a host reads them. The queue
//! keeps its first items; past them it keeps the last ones, and drops the oldest droppable items
//! between (log, progress, resource updates; never a flush, whose caller waits for it). An item
//! that is not droppable and equal to one waiting in the last part is not queued twice
//! (`list_changed`). The receiver gets, in order: the first items, [`Popped::Dropped`] with the
//! count of what was dropped, then the last items; after that the queue starts over.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::limits::Bound;

/// What the queue needs to know of an item.
pub trait Queued {
    /// May the queue drop it when the host reads too slowly?
    fn droppable(&self) -> bool;
    /// About how many bytes of memory it holds.
    fn size(&self) -> usize;
    /// Whether it says the same as `other`, which is still waiting: then it is not queued.
    fn same(&self, _other: &Self) -> bool {
        false
    }
}

/// What [`Queue::recv`] gives.
#[derive(Debug, PartialEq)]
pub enum Popped<T> {
    Item(T),
    /// This many items were dropped here (between the first and the last part).
    Dropped(u64),
}

struct Inner<T> {
    head: VecDeque<(T, usize)>,
    head_bytes: usize,
    tail: VecDeque<(T, usize)>,
    tail_bytes: usize,
    dropped: u64,
    closed: bool,
    /// The receiver took an item and has not asked for the next one yet (it is still handling
    /// it): see [`Queue::idle`].
    in_hand: bool,
}

/// A queue with one receiver; see the module documentation.
pub struct Queue<T> {
    bound: Bound,
    inner: Mutex<Inner<T>>,
    ready: Notify,
}

impl<T: Queued> Queue<T> {
    pub fn new(bound: Bound) -> Self {
        Queue {
            bound,
            inner: Mutex::new(Inner {
                head: VecDeque::new(),
                head_bytes: 0,
                tail: VecDeque::new(),
                tail_bytes: 0,
                dropped: 0,
                closed: false,
                in_hand: false,
            }),
            ready: Notify::new(),
        }
    }

    /// Queues `item` (never waits); the item back when the queue is closed.
    pub fn send(&self, item: T) -> Result<(), T> {
        let size = item.size();
        let b = &self.bound;
        {
            let mut q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if q.closed {
                return Err(item);
            }
            if q.tail.is_empty() && q.dropped == 0 && q.head.len() < b.head_items && q.head_bytes + size <= b.head_bytes
            {
                q.head.push_back((item, size));
                q.head_bytes += size;
            } else if !item.droppable() && q.tail.iter().any(|(t, _)| t.same(&item)) {
                return Ok(());
            } else {
                q.tail.push_back((item, size));
                q.tail_bytes += size;
                while q.tail.len() > b.tail_items || q.tail_bytes > b.tail_bytes {
                    // The oldest droppable item, but never the newest one.
                    let last = q.tail.len() - 1;
                    let Some(i) = q.tail.iter().take(last).position(|(t, _)| t.droppable()) else { break };
                    if let Some((_, n)) = q.tail.remove(i) {
                        q.tail_bytes -= n;
                        q.dropped += 1;
                    }
                }
            }
        }
        self.ready.notify_one();
        Ok(())
    }

    /// No more items: [`Queue::recv`] ends once the queued ones are taken.
    pub fn close(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.ready.notify_one();
    }

    /// The next item, or the count of the dropped ones where they were; `None` once the queue is
    /// closed and empty. One receiver at a time.
    pub async fn recv(&self) -> Option<Popped<T>> {
        loop {
            let notified = self.ready.notified();
            {
                let mut q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                // Asking for the next item: the last one is handled.
                q.in_hand = false;
                if let Some((item, n)) = q.head.pop_front() {
                    q.head_bytes -= n;
                    q.in_hand = true;
                    return Some(Popped::Item(item));
                }
                if q.dropped > 0 {
                    q.in_hand = true;
                    return Some(Popped::Dropped(std::mem::take(&mut q.dropped)));
                }
                if !q.tail.is_empty() {
                    // The last part becomes the first part of what follows.
                    q.head = std::mem::take(&mut q.tail);
                    q.head_bytes = std::mem::take(&mut q.tail_bytes);
                    continue;
                }
                if q.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Nothing queued and nothing in the receiver's hands: everything sent before now has been
    /// handled (the receiver handles one item at a time and asks for the next when done), so a
    /// flush marker would come straight back.
    pub fn idle(&self) -> bool {
        let q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        !q.in_hand && q.dropped == 0 && q.head.is_empty() && q.tail.is_empty()
    }

    /// Items queued now (for tests).
    pub fn len(&self) -> usize {
        let q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        q.head.len() + q.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum N {
        Log(u32),
        Flush(u32),
        Changed,
    }

    impl Queued for N {
        fn droppable(&self) -> bool {
            matches!(self, N::Log(_))
        }
        fn size(&self) -> usize {
            10
        }
        fn same(&self, other: &Self) -> bool {
            matches!((self, other), (N::Changed, N::Changed))
        }
    }

    fn bound(head: usize, tail: usize) -> Bound {
        Bound { head_items: head, head_bytes: 1 << 20, tail_items: tail, tail_bytes: 1 << 20 }
    }

    async fn drain(q: &Queue<N>) -> Vec<Popped<N>> {
        q.close();
        let mut out = Vec::new();
        while let Some(p) = q.recv().await {
            out.push(p);
        }
        out
    }

    #[tokio::test]
    async fn a_flood_keeps_the_first_and_the_last_notifications_and_counts_the_rest() {
        let q = Queue::new(bound(3, 2));
        for i in 0..10 {
            q.send(N::Log(i)).unwrap();
        }
        assert_eq!(q.len(), 5);
        let got = drain(&q).await;
        use Popped::*;
        assert_eq!(
            got,
            [Item(N::Log(0)), Item(N::Log(1)), Item(N::Log(2)), Dropped(5), Item(N::Log(8)), Item(N::Log(9))]
        );
    }

    #[tokio::test]
    async fn flushes_are_never_dropped_and_the_queue_starts_over_after_a_flood() {
        let q = Queue::new(bound(1, 2));
        q.send(N::Log(0)).unwrap();
        q.send(N::Flush(1)).unwrap();
        for i in 2..6 {
            q.send(N::Log(i)).unwrap();
        }
        use Popped::*;
        assert_eq!(q.recv().await, Some(Item(N::Log(0))));
        assert_eq!(q.recv().await, Some(Dropped(3)));
        assert_eq!(q.recv().await, Some(Item(N::Flush(1))));
        // Sent while the last part is being taken: behind it, nothing dropped.
        q.send(N::Log(6)).unwrap();
        assert_eq!(drain(&q).await, [Item(N::Log(5)), Item(N::Log(6))]);
    }

    #[tokio::test]
    async fn equal_notifications_that_cannot_be_dropped_wait_once() {
        let q = Queue::new(bound(1, 2));
        q.send(N::Log(0)).unwrap();
        for _ in 0..1000 {
            q.send(N::Changed).unwrap();
            q.send(N::Log(1)).unwrap();
        }
        use Popped::*;
        assert_eq!(drain(&q).await, [Item(N::Log(0)), Dropped(999), Item(N::Changed), Item(N::Log(1))]);
    }

    #[tokio::test]
    async fn the_queue_is_idle_only_when_nothing_is_queued_or_being_handled() {
        let q = Queue::new(bound(1, 2));
        assert!(q.idle());
        q.send(N::Log(0)).unwrap();
        assert!(!q.idle(), "an item is queued");
        assert_eq!(q.recv().await, Some(Popped::Item(N::Log(0))));
        assert!(!q.idle(), "the receiver still handles the item it took");
        for i in 1..6 {
            q.send(N::Log(i)).unwrap();
        }
        assert_eq!(q.recv().await, Some(Popped::Item(N::Log(1))));
        assert_eq!(q.recv().await, Some(Popped::Dropped(2)));
        assert!(!q.idle(), "the receiver handles the count of the dropped ones");
        assert_eq!(q.recv().await, Some(Popped::Item(N::Log(4))));
        assert_eq!(q.recv().await, Some(Popped::Item(N::Log(5))));
        assert!(!q.idle());
        // Asking for the next item says the last one is handled.
        q.close();
        assert_eq!(q.recv().await, None);
        assert!(q.idle());
    }

    #[tokio::test]
    async fn the_receiver_waits_for_items_and_ends_when_closed() {
        let q = std::sync::Arc::new(Queue::new(bound(8, 8)));
        let r = q.clone();
        let task = tokio::spawn(async move {
            let mut n = 0;
            while let Some(Popped::Item(_)) = r.recv().await {
                n += 1;
            }
            n
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        for i in 0..4 {
            q.send(N::Log(i)).unwrap();
        }
        q.close();
        assert!(q.send(N::Log(9)).is_err());
        assert_eq!(task.await.unwrap(), 4);
    }
}
