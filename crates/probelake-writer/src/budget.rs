//! The staging budget: bytes admitted but not yet written out, bounded; `record` acquires,
//! the pipeline releases.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// How often a blocked `record` re-checks whether the unit stopped.
const STOP_POLL: Duration = Duration::from_millis(50);

pub(crate) struct Budget {
    limit: u64,
    used: AtomicU64,
    sleepers: AtomicUsize,
    /// Callers waiting, blocking or async: the pipeline then writes out what it holds.
    waiting: AtomicUsize,
    lock: Mutex<()>,
    freed: Condvar,
    notify: Notify,
    warned: AtomicBool,
}

impl Budget {
    pub(crate) fn new(limit: u64) -> Self {
        Budget {
            limit,
            used: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            lock: Mutex::new(()),
            freed: Condvar::new(),
            notify: Notify::new(),
            warned: AtomicBool::new(false),
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Takes `n` bytes if they fit, or if nothing is staged (so an entry larger than the whole
    /// budget still gets through, alone).
    pub(crate) fn try_acquire(&self, n: u64) -> bool {
        let mut used = self.used.load(Ordering::SeqCst);
        loop {
            let fits = used == 0 || used.checked_add(n).is_some_and(|t| t <= self.limit);
            if !fits {
                return false;
            }
            match self.used.compare_exchange_weak(used, used.saturating_add(n), Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    /// Whether a caller is waiting for bytes.
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Blocks until `n` bytes are taken, or `stopped()` says the unit is over (then false).
    pub(crate) fn acquire_blocking(&self, n: u64, stopped: &dyn Fn() -> bool) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let taken = self.acquire_blocking_inner(n, stopped);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        taken
    }

    fn acquire_blocking_inner(&self, n: u64, stopped: &dyn Fn() -> bool) -> bool {
        self.note_wait();
        loop {
            if self.try_acquire(n) {
                return true;
            }
            if stopped() {
                return false;
            }
            let Ok(guard) = self.lock.lock() else { return false };
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            // Re-checked under the lock: a release in between either happened before (we see
            // it) or notifies after we sleep.
            if self.try_acquire(n) {
                self.sleepers.fetch_sub(1, Ordering::AcqRel);
                return true;
            }
            let _ = self.freed.wait_timeout(guard, STOP_POLL);
            self.sleepers.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Awaits until `n` bytes are taken, or `stopped()` (then false).
    pub(crate) async fn acquire_async(&self, n: u64, stopped: &(dyn Fn() -> bool + Sync)) -> bool {
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        self.note_wait();
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.try_acquire(n) {
                return true;
            }
            if stopped() {
                return false;
            }
            notified.await;
        }
    }

    pub(crate) fn release(&self, n: u64) {
        if n == 0 {
            return;
        }
        // SeqCst pairs with the sleeper's increment then re-check (a store-load handshake).
        let _ = self.used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| Some(u.saturating_sub(n)));
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock();
            self.freed.notify_all();
        }
        self.notify.notify_waiters();
    }

    /// Wakes every waiter (the unit stopped; they re-check and give up).
    pub(crate) fn wake_all(&self) {
        let _guard = self.lock.lock();
        self.freed.notify_all();
        self.notify.notify_waiters();
    }

    fn note_wait(&self) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::debug!(budget = self.limit, "staging budget full: record waits for staged bytes to be written");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_within_the_limit_and_an_oversized_entry_alone() {
        let b = Budget::new(100);
        assert!(b.try_acquire(60));
        assert!(b.try_acquire(40));
        assert!(!b.try_acquire(1));
        b.release(100);
        assert!(b.try_acquire(1000), "alone, an entry larger than the budget gets through");
        assert!(!b.try_acquire(1));
        b.release(1000);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_blocked_acquire_resumes_when_bytes_are_released() {
        let b = std::sync::Arc::new(Budget::new(10));
        assert!(b.try_acquire(10));
        let b2 = std::sync::Arc::clone(&b);
        let waiter = std::thread::spawn(move || b2.acquire_blocking(5, &|| false));
        b.release(10);
        assert!(waiter.join().unwrap());
        assert_eq!(b.used(), 5);
        assert!(!b.acquire_blocking(100, &|| true), "a stopped unit gives up");
    }
}
