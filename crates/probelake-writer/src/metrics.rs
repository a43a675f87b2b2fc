//! Counters a unit writer keeps while it runs: what was recorded, dropped and staged, and how
//! long `record` took on the caller's thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A snapshot of a unit writer's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Entries accepted by `record`.
    pub records: u64,
    /// Tensor bytes of the accepted entries.
    pub bytes: u64,
    /// Entries dropped by [`crate::Backpressure::Drop`].
    pub drops: u64,
    /// Tensor bytes of the dropped entries.
    pub dropped_bytes: u64,
    /// `record` calls that had to wait for the budget.
    pub waits: u64,
    /// Entries accepted but not yet in a batch.
    pub queue_depth: u64,
    /// Bytes held against the staging budget now.
    pub staged_bytes: u64,
    /// Leaves (rows of `dump`) built so far.
    pub leaves: u64,
    /// Median time `record` spent on the caller's thread.
    pub record_p50: Duration,
    /// 99th percentile of the same.
    pub record_p99: Duration,
    /// The longest `record`.
    pub record_max: Duration,
}

/// Log-linear latency histogram: exact below 16 ns, then 8 buckets per power of two (each
/// bucket spans 12.5% of its value). Lock-free; `record` adds one relaxed increment.
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
}

const LINEAR: u64 = 16;
const SUB: u64 = 8;
const BUCKETS: usize = (LINEAR + (64 - 4) * SUB) as usize;

fn bucket_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - u64::from(v.leading_zeros()); // ≥ 4
    let sub = (v >> (e - 3)) & (SUB - 1);
    (LINEAR + (e - 4) * SUB + sub) as usize
}

/// The upper end of bucket `i` (what a percentile reports: never an underestimate).
fn bucket_top(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let e = (i - LINEAR) / SUB + 4;
    let sub = (i - LINEAR) % SUB;
    let top = u128::from(SUB + sub + 1) << (e - 3);
    u64::try_from(top - 1).unwrap_or(u64::MAX)
}

impl Histogram {
    pub(crate) fn new() -> Self {
        Histogram { buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), max: AtomicU64::new(0) }
    }

    pub(crate) fn add(&self, nanos: u64) {
        if let Some(b) = self.buckets.get(bucket_of(nanos)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.max.fetch_max(nanos, Ordering::Relaxed);
    }

    /// The `q` quantile (0..=1) in nanoseconds.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_top(i).min(self.max());
            }
        }
        self.max()
    }

    pub(crate) fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_and_tops_bound_them() {
        for v in [0u64, 1, 15, 16, 17, 31, 32, 100, 1000, 4999, 5000, 1 << 40, u64::MAX] {
            let b = bucket_of(v);
            assert!(b < BUCKETS, "{v}");
            assert!(bucket_top(b) >= v, "{v}: top {}", bucket_top(b));
            assert!(bucket_top(b) as f64 <= (v as f64) * 1.125 + 1.0, "{v}: top {}", bucket_top(b));
            if b > 0 {
                assert!(bucket_top(b - 1) < v, "{v}");
            }
        }
    }

    #[test]
    fn quantiles() {
        let h = Histogram::new();
        for v in 1..=1000u64 {
            h.add(v * 10);
        }
        let p50 = h.quantile(0.5);
        let p99 = h.quantile(0.99);
        assert!((5000..=5000 * 9 / 8 + 1).contains(&p50), "{p50}");
        assert!((9900..=10000).contains(&p99), "{p99}");
        assert_eq!(h.max(), 10000);
    }
}
