//! Polling before sleeping, adaptively, as KVM's halt polling does for a vCPU. After the bridge
//! wrote something a peer will answer (a frame to the tool process, a line to the host, an HTTP
//! response), its one thread keeps polling its sockets for up to `max` instead of sleeping in
//! `epoll_wait` at once, but only while answers have lately come within that window. On a
//! virtual machine, waking a sleeping vCPU costs as much as the bridge's whole work for a
//! message; a peer that answers within the window finds the bridge awake. A bridge whose peers
//! are slow or idle sleeps as before (after one fruitless window when the traffic stops), and
//! while it polls it lets any other runnable thread of its CPU go first
//! (`std::thread::yield_now`: `sched_yield`), so it never takes a core from its peers.
//!
//! The poller is a task of the bridge's runtime, which must be tokio's current-thread one: a
//! task that yields there makes the scheduler poll its I/O driver with a zero timeout before
//! it runs the task again. On any other runtime [`Spin::run`] returns at once.
//!
//! The command line's window (`bridge --poll`, 0.4 ms by default) is chosen to cover how fast an
//! awake peer answers (docs/performance.md has the measurements); a Python host takes longer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The windows of one bridge: when one opened, how long the last one waited.
pub struct Spin {
    max: Duration,
    epoch: Instant,
    kick: tokio::sync::Notify,
    /// Nanoseconds after `epoch` (at least 1) of the write that opened the window now waiting
    /// for an answer; 0: none open.
    opened: AtomicU64,
    /// How long the last closed window waited for its answer, in nanoseconds.
    last_wait: AtomicU64,
    /// Windows opened (one for each write a peer will answer that found none open: how many
    /// there are depends only on the traffic), polled (the poller ran while the window was open:
    /// depends on scheduling too), and those of them that saw their answer arrive while polling.
    opened_count: AtomicU64,
    polled: AtomicU64,
    caught: AtomicU64,
}

impl Spin {
    /// Windows of up to `max`; `Duration::ZERO`: never poll.
    pub fn new(max: Duration) -> Spin {
        Spin {
            max,
            epoch: Instant::now(),
            kick: tokio::sync::Notify::new(),
            opened: AtomicU64::new(0),
            last_wait: AtomicU64::new(0),
            opened_count: AtomicU64::new(0),
            polled: AtomicU64::new(0),
            caught: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        (self.epoch.elapsed().as_nanos() as u64).max(1)
    }

    /// The bridge wrote something a peer will answer: a window opens unless one is open.
    pub fn wrote(&self) {
        if self.max.is_zero() {
            return;
        }
        if self.opened.compare_exchange(0, self.now_ns(), Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.opened_count.fetch_add(1, Ordering::Relaxed);
        }
        self.kick.notify_one();
    }

    /// Something arrived from a peer: the open window closes, its wait recorded.
    pub fn arrived(&self) {
        let opened = self.opened.swap(0, Ordering::Relaxed);
        if opened != 0 {
            self.last_wait.store(self.now_ns().saturating_sub(opened), Ordering::Relaxed);
        }
    }

    /// (windows opened, of them those polled, of those the ones whose answer came while
    /// polling).
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.opened_count.load(Ordering::Relaxed),
            self.polled.load(Ordering::Relaxed),
            self.caught.load(Ordering::Relaxed),
        )
    }

    /// The poller, for the bridge's life (until its task is dropped).
    pub async fn run(self: std::sync::Arc<Self>) {
        if self.max.is_zero()
            || tokio::runtime::Handle::current().runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread
        {
            return;
        }
        loop {
            self.kick.notified().await;
            let mut window = self.opened.load(Ordering::Relaxed);
            if window == 0 || !self.answers_come_soon() {
                continue;
            }
            self.polled.fetch_add(1, Ordering::Relaxed);
            let mut until = Instant::now() + self.max;
            loop {
                let open = self.opened.load(Ordering::Relaxed);
                if open != window {
                    // Answered while polling; the bridge may already have written the next
                    // thing a peer will answer: that window gets a whole `max` of its own.
                    self.caught.fetch_add(1, Ordering::Relaxed);
                    if open == 0 || !self.answers_come_soon() {
                        break;
                    }
                    window = open;
                    self.polled.fetch_add(1, Ordering::Relaxed);
                    until = Instant::now() + self.max;
                }
                if Instant::now() >= until {
                    break;
                }
                tokio::task::yield_now().await;
                std::thread::yield_now();
            }
        }
    }

    /// Whether the last window was answered within `max`.
    fn answers_come_soon(&self) -> bool {
        Duration::from_nanos(self.last_wait.load(Ordering::Relaxed)) <= self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use tokio::io::AsyncReadExt;

    /// A current-thread runtime that counts how often its thread went to sleep.
    fn counting_runtime() -> (tokio::runtime::Runtime, Arc<AtomicUsize>) {
        let parks = Arc::new(AtomicUsize::new(0));
        let p = parks.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(move || {
                p.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        (rt, parks)
    }

    /// A socket pair: the peer's end (written from a thread of its own) and ours.
    fn pair() -> (std::os::unix::net::UnixStream, tokio::net::UnixStream) {
        let (peer, ours) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        (peer, tokio::net::UnixStream::from_std(ours).unwrap())
    }

    /// The peer answers one byte after `after`; the bridge's side waits for it as the bridge
    /// does (the window closes when it arrives). Returns how often the runtime slept meanwhile.
    async fn answered_after(spin: &Spin, after: Duration, parks: &AtomicUsize) -> usize {
        let (mut peer, mut ours) = pair();
        let before = parks.load(Ordering::SeqCst);
        spin.wrote();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(after);
            peer.write_all(b"x").unwrap();
            peer
        });
        let mut b = [0u8; 1];
        ours.read_exact(&mut b).await.unwrap();
        spin.arrived();
        let slept = parks.load(Ordering::SeqCst) - before;
        drop(writer.join().unwrap());
        // The poller sees the window closed.
        tokio::task::yield_now().await;
        slept
    }

    /// Windows of up to `max`, with their poller started on this runtime.
    async fn polling(max: Duration) -> Arc<Spin> {
        let spin = Arc::new(Spin::new(max));
        tokio::spawn(spin.clone().run());
        tokio::task::yield_now().await;
        spin
    }

    #[test]
    fn an_answer_within_the_window_finds_the_thread_polling_not_asleep() {
        let (rt, parks) = counting_runtime();
        rt.block_on(async {
            let spin = polling(Duration::from_secs(5)).await;
            assert_eq!(answered_after(&spin, Duration::from_millis(20), &parks).await, 0);
            assert_eq!(spin.counts(), (1, 1, 1));
        });
    }

    #[test]
    fn after_an_answer_slower_than_the_window_the_next_window_sleeps_and_a_quick_answer_resumes_polling() {
        let (rt, parks) = counting_runtime();
        rt.block_on(async {
            // Windows of 50 ms: the quick answer at the end (1 ms asked) must come within one even
            // when a busy machine wakes the answering thread late.
            let spin = polling(Duration::from_millis(50)).await;
            // Polled (nothing known yet) and missed: the answer took 200 ms.
            spin.wrote();
            tokio::time::sleep(Duration::from_millis(200)).await;
            spin.arrived();
            assert_eq!(spin.counts(), (1, 1, 0));
            // The last wait exceeded the window: this one sleeps.
            assert!(answered_after(&spin, Duration::from_millis(100), &parks).await >= 1);
            assert_eq!(spin.counts(), (2, 1, 0));
            // An answer that came at once: the next window polls again.
            spin.wrote();
            spin.arrived();
            tokio::task::yield_now().await;
            let slept = answered_after(&spin, Duration::from_millis(1), &parks).await;
            assert_eq!(spin.counts(), (4, 2, 1), "slept {slept} times");
        });
    }

    #[test]
    fn no_window_opens_when_polling_is_off_and_the_poller_ends_at_once() {
        let (rt, _) = counting_runtime();
        rt.block_on(async {
            let spin = Arc::new(Spin::new(Duration::ZERO));
            spin.wrote();
            assert_eq!(spin.opened.load(Ordering::Relaxed), 0);
            spin.clone().run().await;
            assert_eq!(spin.counts(), (0, 0, 0));
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_multi_thread_runtime_the_poller_ends_at_once() {
        let spin = Arc::new(Spin::new(Duration::from_secs(5)));
        spin.wrote();
        tokio::time::timeout(Duration::from_secs(5), spin.clone().run()).await.expect("the poller returned");
        assert_eq!(spin.counts(), (1, 0, 0));
    }
}
