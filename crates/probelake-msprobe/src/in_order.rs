//! Independent per-unit jobs run on several threads, their results kept in job order: what
//! import (reading and encoding) does a wave at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{MsprobeError, Result};

/// Runs `work` on every job, on up to `threads` threads, and returns the results in job order.
///
/// After a job fails, jobs after it that have not started are skipped; their slots hold an
/// error no caller reaches, since callers stop at the first error in order. Every job before
/// a failure still runs, so that first error is always a real one.
pub(crate) fn map_in_order<T: Send, R: Send>(
    jobs: Vec<T>,
    threads: usize,
    work: impl Fn(T) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    let threads = threads.min(jobs.len());
    if threads <= 1 {
        // One after another, stopping at the first failure as the threads do.
        let mut failed = false;
        return jobs
            .into_iter()
            .map(|job| {
                if failed {
                    return Err(MsprobeError::Internal("not processed: an earlier job failed".into()));
                }
                let result = work(job);
                failed = result.is_err();
                result
            })
            .collect();
    }
    let first_failure = AtomicUsize::new(usize::MAX);
    let next = AtomicUsize::new(0);
    let jobs: Vec<Mutex<Option<T>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let slots: Vec<Mutex<Option<Result<R>>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let (Some(job), Some(slot)) = (jobs.get(i), slots.get(i)) else { break };
                if i > first_failure.load(Ordering::Relaxed) {
                    break;
                }
                let Some(job) = job.lock().ok().and_then(|mut j| j.take()) else { continue };
                let result = work(job);
                if result.is_err() {
                    first_failure.fetch_min(i, Ordering::Relaxed);
                }
                if let Ok(mut slot) = slot.lock() {
                    *slot = Some(result);
                }
            });
        }
    });
    // An empty slot is a job skipped after an earlier failure (or whose thread panicked).
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(MsprobeError::Internal("not processed: an earlier job failed".into())))
        })
        .collect()
}
