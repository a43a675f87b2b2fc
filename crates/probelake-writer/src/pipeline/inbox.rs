//! A statistics worker's queue, which wakes the worker only when it must.
//!
//! With a channel, every `record` woke a worker blocked on its queue: a system call on the
//! caller's thread, and on a machine with few cores often the caller's core handed to the
//! woken worker at once, the tail of `record`'s latency. Here a worker without work naps for
//! [`NAP`] at a time, [`NAPS`] times, before it sleeps until woken; a caller wakes it only when
//! it sleeps, or when the entry is large ([`Urgency::Now`]: the bytes would wait in the budget
//! otherwise), or at the end. A small entry waits at most one nap for a napping worker, and a
//! busy worker takes it without any call at all.
//!
//! Lost wake-ups: a caller pushes (under the queue's lock), then reads the state; a worker
//! sets [`SLEEPING`], then looks at the queue (under the lock) before it parks. Both are
//! sequentially consistent, so either the caller sees `SLEEPING` and unparks, or the worker
//! sees the entry.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::Duration;

/// How long a worker without work naps before it looks at its queue again.
pub(crate) const NAP: Duration = Duration::from_micros(200);

/// Naps before a worker without work sleeps until woken (about 5 ms of naps).
pub(crate) const NAPS: u32 = 25;

const AWAKE: u8 = 0;
const NAPPING: u8 = 1;
const SLEEPING: u8 = 2;

/// Whether a pushed item needs its worker now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// It can wait for the worker's next nap to end.
    Soon,
    /// Wake the worker if it naps or sleeps.
    Now,
}

struct Inner<T> {
    queue: Mutex<VecDeque<T>>,
    state: AtomicU8,
    worker: OnceLock<Thread>,
    /// The worker is gone: pushes fail.
    closed: AtomicBool,
    /// The sender is gone: once the queue is empty, `recv` says so.
    hung_up: AtomicBool,
}

/// The callers' end.
pub(crate) struct InboxSender<T>(Arc<Inner<T>>);

/// The worker's end; dropping it closes the inbox.
pub(crate) struct InboxReceiver<T>(Arc<Inner<T>>);

/// A new inbox: the sender for the callers, the receiver for the worker thread.
pub(crate) fn inbox<T>() -> (InboxSender<T>, InboxReceiver<T>) {
    let inner = Arc::new(Inner {
        queue: Mutex::new(VecDeque::new()),
        state: AtomicU8::new(AWAKE),
        worker: OnceLock::new(),
        closed: AtomicBool::new(false),
        hung_up: AtomicBool::new(false),
    });
    (InboxSender(Arc::clone(&inner)), InboxReceiver(inner))
}

impl<T> InboxSender<T> {
    /// Queues `item`, waking the worker as `urgency` and its state say; gives the item back
    /// when the worker is gone.
    pub(crate) fn push(&self, item: T, urgency: Urgency) -> Result<(), T> {
        if self.0.closed.load(Ordering::SeqCst) {
            return Err(item);
        }
        self.0.queue.lock().unwrap_or_else(|p| p.into_inner()).push_back(item);
        let wake = match self.0.state.load(Ordering::SeqCst) {
            AWAKE => false,
            NAPPING => urgency == Urgency::Now,
            _ => true,
        };
        if wake {
            if let Some(worker) = self.0.worker.get() {
                worker.unpark();
            }
        }
        Ok(())
    }
}

impl<T> InboxSender<T> {
    /// Wakes the worker if it naps or sleeps: a caller about to wait for the budget wants the
    /// queued entries taken now.
    pub(crate) fn nudge(&self) {
        if self.0.state.load(Ordering::SeqCst) != AWAKE {
            if let Some(worker) = self.0.worker.get() {
                worker.unpark();
            }
        }
    }
}

impl<T> InboxReceiver<T> {
    /// The next item, waiting for one (napping, then sleeping) as long as it takes; `None`
    /// once the sender is gone and the queue empty.
    pub(crate) fn recv(&self) -> Option<T> {
        let inner = &self.0;
        let _ = inner.worker.set(std::thread::current());
        let mut naps = 0;
        loop {
            if let Some(item) = self.take() {
                inner.state.store(AWAKE, Ordering::SeqCst);
                return Some(item);
            }
            if inner.hung_up.load(Ordering::SeqCst) {
                return self.take();
            }
            if naps < NAPS {
                naps += 1;
                inner.state.store(NAPPING, Ordering::SeqCst);
                std::thread::park_timeout(NAP);
            } else {
                inner.state.store(SLEEPING, Ordering::SeqCst);
                // Looked at again after saying so: a push before this is seen here, one after
                // it sees SLEEPING and unparks.
                if let Some(item) = self.take() {
                    inner.state.store(AWAKE, Ordering::SeqCst);
                    return Some(item);
                }
                if inner.hung_up.load(Ordering::SeqCst) {
                    return None;
                }
                std::thread::park();
            }
        }
    }

    fn take(&self) -> Option<T> {
        self.0.queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front()
    }
}

impl<T> Drop for InboxSender<T> {
    fn drop(&mut self) {
        self.0.hung_up.store(true, Ordering::SeqCst);
        if let Some(worker) = self.0.worker.get() {
            worker.unpark();
        }
    }
}

impl<T> Drop for InboxReceiver<T> {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn items_arrive_in_order_whether_the_worker_naps_or_sleeps() {
        let (tx, rx) = inbox::<u32>();
        let worker = std::thread::spawn(move || std::iter::from_fn(|| rx.recv()).collect::<Vec<_>>());
        tx.push(0, Urgency::Soon).unwrap();
        tx.push(1, Urgency::Now).unwrap();
        // Long enough for every nap to pass: the worker then sleeps and must be woken.
        std::thread::sleep(NAP * (NAPS + 10));
        tx.push(2, Urgency::Soon).unwrap();
        std::thread::sleep(NAP * 2);
        for i in 3..6 {
            tx.push(i, Urgency::Soon).unwrap();
        }
        let started = Instant::now();
        drop(tx);
        assert_eq!(worker.join().unwrap(), [0, 1, 2, 3, 4, 5]);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_sleeping_worker_learns_that_the_sender_is_gone() {
        let (tx, rx) = inbox::<u32>();
        let worker = std::thread::spawn(move || rx.recv());
        std::thread::sleep(NAP * (NAPS + 10));
        drop(tx);
        assert_eq!(worker.join().unwrap(), None);
    }

    #[test]
    fn a_push_to_a_gone_worker_gives_the_item_back() {
        let (tx, rx) = inbox::<u32>();
        drop(rx);
        assert_eq!(tx.push(7, Urgency::Now), Err(7));
    }

    #[test]
    fn no_wake_up_is_lost_under_contention() {
        let (tx, rx) = inbox::<u64>();
        let tx = Arc::new(tx);
        let n = 20_000u64;
        let senders: Vec<_> = (0..2)
            .map(|s| {
                let tx = Arc::clone(&tx);
                std::thread::spawn(move || {
                    for i in 0..n {
                        tx.push(s * n + i, Urgency::Soon).unwrap();
                        if i % 997 == 0 {
                            std::thread::sleep(NAP * (NAPS + 2));
                        }
                    }
                })
            })
            .collect();
        let mut sum = 0;
        for _ in 0..2 * n {
            sum += rx.recv().unwrap();
        }
        senders.into_iter().for_each(|s| s.join().unwrap());
        assert_eq!(sum, (0..2 * n).sum::<u64>());
    }
}
