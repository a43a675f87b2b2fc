//! Splitting a comparison's CPU work over the cores.

use std::sync::mpsc::{sync_channel, Receiver};

/// Runs `work` on every job, each on a scoped thread of its own (a single job on the calling
/// thread), and returns the results in job order. A panic in a job is resumed here.
pub(crate) fn map_scoped<T: Sync, R: Send>(jobs: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if jobs.len() <= 1 {
        return jobs.iter().map(work).collect();
    }
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.iter().map(|job| scope.spawn(move || work(job))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// Runs `work` on every job on all cores, job `i` on thread `i % threads`, and hands the
/// results to `sink` in job order on the calling thread, so that `sink` works while later jobs
/// run. Each thread runs at most one job ahead of `sink` (back-pressure, not a growing queue).
/// Stops at the first error, of a job or of `sink`; a panic in a job is resumed here.
pub(crate) fn stream_scoped<J: Sync, T: Send, E: Send>(
    jobs: &[J],
    work: impl Fn(&J) -> Result<T, E> + Sync,
    mut sink: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    let threads = cores().min(jobs.len());
    if threads <= 1 {
        return jobs.iter().try_for_each(|job| sink(work(job)?));
    }
    let work = &work;
    std::thread::scope(|scope| {
        let (handles, results): (Vec<_>, Vec<Receiver<Result<T, E>>>) = (0..threads)
            .map(|first| {
                let (tx, rx) = sync_channel(1);
                let handle = scope.spawn(move || {
                    for job in jobs.iter().skip(first).step_by(threads) {
                        let result = work(job);
                        let failed = result.is_err();
                        // A failed send means the sink stopped (its receivers are dropped).
                        if tx.send(result).is_err() || failed {
                            break;
                        }
                    }
                });
                (handle, rx)
            })
            .unzip();
        // A receive fails only when its thread panicked: the join below resumes the panic.
        let streamed =
            (0..jobs.len()).map_while(|i| results[i % threads].recv().ok()).try_for_each(|result| sink(result?));
        drop(results);
        for handle in handles {
            handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
        streamed
    })
}

/// The number of cores to share work out over.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_results_come_in_job_order() {
        let jobs: Vec<usize> = (0..50).collect();
        let mut seen = Vec::new();
        let done = stream_scoped(
            &jobs,
            |&j| Ok::<_, String>(j * 2),
            |r| {
                seen.push(r);
                Ok(())
            },
        );
        assert_eq!(done, Ok(()));
        assert_eq!(seen, jobs.iter().map(|j| j * 2).collect::<Vec<_>>());
    }

    #[test]
    fn streaming_stops_at_the_first_error() {
        let jobs: Vec<usize> = (0..50).collect();
        let mut seen = Vec::new();
        let failed = stream_scoped(
            &jobs,
            |&j| if j == 7 { Err(j) } else { Ok(j) },
            |r| {
                seen.push(r);
                Ok(())
            },
        );
        assert_eq!((failed, seen.len()), (Err(7), 7));
        // The sink's own error stops the jobs too.
        let stopped = stream_scoped(&jobs, |&j| Ok(j), |r| if r == 3 { Err(r) } else { Ok(()) });
        assert_eq!(stopped, Err(3));
    }
}
