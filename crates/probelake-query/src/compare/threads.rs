//! Splitting a comparison's CPU work over the cores.

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

/// The number of cores to share work out over.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
