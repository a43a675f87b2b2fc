//! The unit writer's contract: `record` returns before device copies finish; the budget waits,
//! refuses or drops by option; abort and drop leave nothing; nothing is visible before commit;
//! bad entries are refused at once and background failures fail the commit.
//!
//! Held copies of the simulated device make "still in flight" a state the tests control, so no
//! assertion depends on timing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use probelake_format::CommitRecord;
use tempfile::TempDir;

use super::*;
use crate::device::simulated::SimulatedDevice;
use crate::{DType, Lake, Tensor, WriterOptions};

fn lake() -> (TempDir, Lake) {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path().to_str().expect("utf-8")).expect("open");
    (dir, lake)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// The committed units (none when not even the manifest exists).
fn units(lake: &Lake) -> Vec<CommitRecord> {
    runtime().block_on(lake.format().units()).unwrap_or_default()
}

/// Data files: `.parquet` files outside `_probelake/` (which holds the readers' schema files).
fn parquet_files(dir: &std::path::Path) -> usize {
    fn walk(d: &std::path::Path, n: &mut usize) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|name| name == "_probelake") {
                continue;
            } else if p.is_dir() {
                walk(&p, n);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(dir, &mut n);
    n
}

/// Polls `cond` (a state change on another thread, not a duration being measured).
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(30), "never happened: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn f32s(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f32 * 0.5 - 3.0).to_le_bytes()).collect()
}

fn host_entry(name: &str, n: usize) -> Entry {
    let t = Tensor::new(DType::F32, [n as i64], TensorSource::host(f32s(n)));
    Entry::new(name).input_args([Value::tensor(t)]).output([Value::null()])
}

fn device_entry(name: &str, device: &SimulatedDevice, n: usize) -> Entry {
    let t = Tensor::new(DType::F32, [n as i64], TensorSource::device(device.upload(f32s(n))));
    Entry::new(name).input_args([Value::tensor(t)])
}

fn small_budget(backpressure: Backpressure) -> WriterOptions {
    // One 200-element f32 device entry costs 800 + 256 bytes: the budget holds one.
    WriterOptions { budget_bytes: 1100, backpressure, threads: 1, ..WriterOptions::default() }
}

#[test]
fn record_returns_before_device_copies_complete() {
    let (_dir, lake) = lake();
    let device = SimulatedDevice::new();
    device.hold();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    assert_eq!(unit.record(device_entry("Torch.exp.0.forward", &device, 64)).expect("record"), Recorded::Queued);
    assert_eq!((device.started(), device.completed()), (1, 0), "record started the copy and did not wait for it");
    device.release();
    let record = unit.commit_blocking().expect("commit");
    assert_eq!((record.counts.entries, record.counts.leaves), (1, 1));
    assert_eq!(device.completed(), 1);
}

#[test]
fn a_full_budget_refuses_with_backpressure_error() {
    let (_dir, lake) = lake();
    let device = SimulatedDevice::new();
    device.hold();
    let unit = lake.unit(Unit::new(0, "default", 0), small_budget(Backpressure::Error)).expect("unit");
    unit.record(device_entry("Torch.exp.0.forward", &device, 200)).expect("first fits");
    let err = unit.record(device_entry("Torch.exp.1.forward", &device, 200)).expect_err("budget full");
    assert!(matches!(err, WriterError::BudgetFull { needed: 1056, used: 1056, budget: 1100 }), "{err}");
    assert_eq!(unit.metrics().records, 1);
    device.release();
    assert_eq!(unit.commit_blocking().expect("commit").counts.entries, 1);
}

#[test]
fn a_full_budget_drops_and_counts_with_backpressure_drop() {
    let (_dir, lake) = lake();
    let device = SimulatedDevice::new();
    device.hold();
    let unit = lake.unit(Unit::new(0, "default", 0), small_budget(Backpressure::Drop)).expect("unit");
    unit.record(device_entry("Torch.exp.0.forward", &device, 200)).expect("first fits");
    let released = Arc::new(AtomicUsize::new(0));
    let bytes: &'static [u8] = Box::leak(f32s(200).into_boxed_slice());
    let flag = Arc::clone(&released);
    // SAFETY: leaked, never written.
    let lent =
        unsafe { TensorSource::lent(bytes.as_ptr(), bytes.len(), move || _ = flag.fetch_add(1, Ordering::SeqCst)) };
    let dropped = Entry::new("Torch.exp.1.forward").input_args([Value::tensor(Tensor::new(DType::F32, [200], lent))]);
    assert_eq!(unit.record(dropped).expect("dropped, not an error"), Recorded::Dropped);
    assert_eq!(released.load(Ordering::SeqCst), 1, "the dropped entry's lent buffer was released");
    let m = unit.metrics();
    assert_eq!((m.records, m.drops, m.dropped_bytes), (1, 1, 800));
    device.release();
    assert_eq!(unit.commit_blocking().expect("commit").counts.entries, 1);
}

#[test]
fn a_full_budget_makes_record_wait_with_backpressure_wait() {
    let (_dir, lake) = lake();
    let device = SimulatedDevice::new();
    device.hold();
    let unit = lake.unit(Unit::new(0, "default", 0), small_budget(Backpressure::Wait)).expect("unit");
    unit.record(device_entry("Torch.exp.0.forward", &device, 200)).expect("first fits");
    std::thread::scope(|s| {
        let second = s.spawn(|| unit.record(device_entry("Torch.exp.1.forward", &device, 200)));
        eventually("the second record waits", || unit.metrics().waits == 1);
        assert!(!second.is_finished(), "record returned while the budget was full");
        assert_eq!(unit.metrics().records, 1);
        device.release();
        assert_eq!(second.join().expect("thread").expect("record"), Recorded::Queued);
    });
    let record = unit.commit_blocking().expect("commit");
    assert_eq!(record.counts.entries, 2);
    assert_eq!(unit_metrics_after(&lake), 2);
}

fn unit_metrics_after(lake: &Lake) -> u64 {
    units(lake).iter().map(|u| u.counts.entries).sum()
}

#[test]
fn nothing_is_visible_before_commit_and_abort_removes_the_files() {
    let (dir, lake) = lake();
    let device = SimulatedDevice::new();
    let options = WriterOptions { batch_rows: 1, ..WriterOptions::default() };
    // A unit committed first, to see that the other one never shows beside it.
    let done = lake.unit(Unit::new(0, "default", 0), options.clone()).expect("unit");
    done.record(host_entry("Torch.exp.0.forward", 8)).expect("record");
    done.commit_blocking().expect("commit");
    let before = parquet_files(dir.path());

    let unit = lake.unit(Unit::new(1, "default", 0), options).expect("unit");
    for i in 0..5 {
        unit.record(host_entry(&format!("Torch.exp.{i}.forward"), 16)).expect("record");
    }
    device.hold();
    unit.record(device_entry("Torch.exp.5.forward", &device, 16)).expect("record");
    eventually("batches are stored before commit", || parquet_files(dir.path()) >= before + 5);
    let visible: Vec<Unit> = units(&lake).into_iter().map(|r| r.unit).collect();
    assert_eq!(visible, vec![Unit::new(0, "default", 0)], "stored files of an uncommitted unit are invisible");
    device.release();
    unit.abort();
    assert_eq!(units(&lake).len(), 1);
    assert_eq!(parquet_files(dir.path()), before, "abort removed every file it stored");
}

#[test]
fn dropping_a_writer_aborts_it() {
    let (dir, lake) = lake();
    let unit = lake
        .unit(Unit::new(0, "default", 0), WriterOptions { batch_rows: 1, ..WriterOptions::default() })
        .expect("unit");
    for i in 0..4 {
        unit.record(host_entry(&format!("Torch.exp.{i}.forward"), 16)).expect("record");
    }
    drop(unit);
    eventually("the dropped unit's files are removed", || parquet_files(dir.path()) == 0);
    assert!(units(&lake).is_empty());
}

#[test]
fn invalid_entries_are_refused_when_recorded() {
    let (_dir, lake) = lake();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    let t = |shape: &[i64], bytes: usize| {
        Value::tensor(Tensor::new(DType::F32, shape.to_vec(), TensorSource::host(vec![0u8; bytes])))
    };
    let bad = [
        (Entry::new("Torch.a.0.forward").input_args([t(&[2, 3], 20)]), "20 bytes for shape [2, 3]"),
        (Entry::new("Torch.a.0.forward").input_args([t(&[-1], 0)]), "negative dimension"),
        (Entry::new("Torch.a.0.forward").input_args([t(&[i64::MAX, 4], 0)]), "overflows"),
        (Entry::new("Torch.a.0.forward").section("is_recompute", t(&[1], 4)), "not a value slot"),
        (Entry::new("Torch.a.0.forward").input_args([Value::scalar("int", "3 4")]), "not JSON"),
        (
            Entry::new("Torch.a.0.forward").input_args([Value::map([("type", Value::json("\"x\""))])]),
            "reads back as a leaf",
        ),
        (Entry::new("Torch.a.0.forward").input_args([Value::json("null")]), "number, string or boolean"),
        (Entry::new(""), "needs a name"),
    ];
    for (entry, want) in bad {
        let err = unit.record(entry).expect_err(want);
        assert!(matches!(err, WriterError::InvalidEntry { .. }) && err.to_string().contains(want), "{err}");
    }
    assert_eq!(unit.metrics().records, 0);
    assert_eq!(unit.commit_blocking().expect("an empty unit commits").counts.entries, 0);
}

#[test]
fn a_name_recorded_twice_fails_the_commit_and_leaves_nothing() {
    let (dir, lake) = lake();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    unit.record(host_entry("Torch.exp.0.forward", 4)).expect("record");
    unit.record(host_entry("Torch.exp.0.forward", 4)).expect("record");
    let err = unit.commit_blocking().expect_err("duplicate");
    assert!(err.to_string().contains("recorded twice"), "{err}");
    assert!(units(&lake).is_empty());
    assert_eq!(parquet_files(dir.path()), 0);
}

#[test]
fn a_failed_device_copy_stops_the_unit_and_fails_the_commit() {
    let (dir, lake) = lake();
    let device = SimulatedDevice::new();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    unit.record(host_entry("Torch.exp.0.forward", 4)).expect("record");
    let failing = Tensor::new(DType::F32, [4], TensorSource::device(device.upload_failing(f32s(4))));
    unit.record(Entry::new("Torch.exp.1.forward").input_args([Value::tensor(failing)])).expect("the copy fails later");
    eventually("the failure reaches the writer", || {
        matches!(unit.record(host_entry("Torch.exp.2.forward", 4)), Err(WriterError::Stopped { .. }))
    });
    let err = unit.commit_blocking().expect_err("failed copy");
    assert!(err.to_string().contains("simulated device: copy failed"), "{err}");
    assert!(units(&lake).is_empty());
    assert_eq!(parquet_files(dir.path()), 0);
}

#[test]
fn several_threads_record_into_one_unit() {
    let (_dir, lake) = lake();
    let unit = lake
        .unit(Unit::new(0, "default", 0), WriterOptions { threads: 3, batch_rows: 7, ..WriterOptions::default() })
        .expect("unit");
    std::thread::scope(|s| {
        for t in 0..4 {
            let unit = &unit;
            s.spawn(move || {
                for i in 0..50 {
                    unit.record(host_entry(&format!("Torch.t{t}.{i}.forward"), 1 + i)).expect("record");
                }
            });
        }
    });
    let m = unit.metrics();
    assert_eq!(m.records, 200);
    assert!(m.record_p50 <= m.record_p99 && m.record_p99 <= m.record_max, "{m:?}");
    let record = unit.commit_blocking().expect("commit");
    assert_eq!((record.counts.entries, record.counts.leaves), (200, 400));
    assert!(record.files.len() > 2, "batches of 7 rows were flushed as they filled");
}

#[test]
fn lent_buffers_are_released_exactly_once_after_use() {
    let (_dir, lake) = lake();
    let released = Arc::new(AtomicUsize::new(0));
    for task in [crate::Task::Statistics, crate::Task::Tensor] {
        let unit = lake
            .unit(Unit::new(task as i64, "default", 0), WriterOptions { task, ..WriterOptions::default() })
            .expect("unit");
        for i in 0..10 {
            let bytes: &'static [u8] = Box::leak(f32s(32).into_boxed_slice());
            let flag = Arc::clone(&released);
            // SAFETY: leaked, never written.
            let lent = unsafe {
                TensorSource::lent(bytes.as_ptr(), bytes.len(), move || _ = flag.fetch_add(1, Ordering::SeqCst))
            };
            let e = Entry::new(format!("Torch.exp.{i}.forward")).input_args([Value::tensor(Tensor::new(
                DType::F32,
                [32],
                lent,
            ))]);
            unit.record(e).expect("record");
        }
        unit.commit_blocking().expect("commit");
    }
    assert_eq!(released.load(Ordering::SeqCst), 20);
}

#[test]
fn commit_works_from_a_current_thread_runtime() {
    let (_dir, lake) = lake();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    let record = runtime().block_on(async move {
        unit.record_async(host_entry("Torch.exp.0.forward", 8)).await.expect("record");
        unit.commit().await.expect("commit")
    });
    assert_eq!(record.counts.entries, 1);
    assert_eq!(units(&lake).len(), 1);
}

#[test]
fn a_second_commit_of_a_unit_replaces_the_first() {
    let (dir, lake) = lake();
    for n in [3, 5] {
        let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
        for i in 0..n {
            unit.record(host_entry(&format!("Torch.exp.{i}.forward"), 4)).expect("record");
        }
        unit.commit_blocking().expect("commit");
    }
    let all = units(&lake);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].counts.entries, 5);
    assert_eq!(parquet_files(dir.path()), all[0].files.len(), "the replaced unit's files were deleted");
}

#[test]
fn a_tensor_task_with_a_budget_below_the_batch_size_still_makes_progress() {
    // Payloads stay charged until their file is stored, and the batch (64 MiB) never fills
    // with a 2 KiB budget: the writer must store what it holds when a caller waits.
    let (_dir, lake) = lake();
    let options =
        WriterOptions { task: crate::Task::Tensor, budget_bytes: 2048, threads: 2, ..WriterOptions::default() };
    let unit = lake.unit(Unit::new(0, "default", 0), options).expect("unit");
    std::thread::scope(|s| {
        let recorder = s.spawn(|| {
            for i in 0..20 {
                unit.record(host_entry(&format!("Torch.exp.{i}.forward"), 200)).expect("record");
            }
        });
        eventually("all 20 entries are recorded", || recorder.is_finished());
    });
    assert!(unit.metrics().waits > 0, "the budget was full at times");
    let record = unit.commit_blocking().expect("commit");
    assert_eq!((record.counts.entries, record.counts.tensors), (20, 20));
}

#[test]
fn float8_and_float4_tensors_are_kept_without_statistics() {
    // msprobe computes no statistics for them (torch has no reductions for these types) but
    // saves their bytes in task `tensor` and takes their CRC in md5 mode.
    let (_dir, lake) = lake();
    let options =
        WriterOptions { task: crate::Task::Tensor, summary_mode: crate::SummaryMode::Md5, ..WriterOptions::default() };
    let unit = lake.unit(Unit::new(0, "default", 0), options).expect("unit");
    let low = DType::ALL.into_iter().filter(|d| !d.has_statistics());
    let values: Vec<Value> =
        low.map(|d| Value::tensor(Tensor::new(d, [4], TensorSource::host(vec![0x38, 0x40, 0xc0, 0x00])))).collect();
    assert_eq!(values.len(), 6);
    unit.record(Entry::new("Torch.to.0.forward").output(values)).expect("record");
    let record = unit.commit_blocking().expect("commit");
    assert_eq!((record.counts.leaves, record.counts.tensors), (6, 6));
}

/// A deferred f32 tensor of `n` elements whose bytes are made only when `record` admits it;
/// `made` counts the copies.
fn deferred_entry(name: &str, n: usize, made: &Arc<AtomicUsize>) -> Entry {
    let made = Arc::clone(made);
    let source = TensorSource::deferred(n * 4, move || {
        made.fetch_add(1, Ordering::SeqCst);
        Ok(TensorSource::host(f32s(n)))
    });
    Entry::new(name).input_args([Value::tensor(Tensor::new(DType::F32, [n as i64], source))])
}

#[test]
fn deferred_bytes_are_made_only_once_the_budget_admits_them() {
    let (_dir, lake) = lake();
    let made = Arc::new(AtomicUsize::new(0));
    for backpressure in [Backpressure::Error, Backpressure::Drop] {
        // A device of its own per unit, released before the abort: an abort waits for the
        // copies in flight, and a held one would never complete.
        let device = SimulatedDevice::new();
        device.hold();
        let unit = lake.unit(Unit::new(0, "default", 0), small_budget(backpressure)).expect("unit");
        unit.record(device_entry("Torch.exp.0.forward", &device, 200)).expect("first fits");
        let refused = unit.record(deferred_entry("Torch.exp.1.forward", 200, &made));
        assert!(matches!(refused, Err(WriterError::BudgetFull { .. }) | Ok(Recorded::Dropped)), "{refused:?}");
        assert_eq!(made.load(Ordering::SeqCst), 0, "{backpressure:?}: no copy for a refused entry");
        device.release();
        unit.abort();
    }
    let device = SimulatedDevice::new();
    device.hold();
    let unit = lake.unit(Unit::new(0, "default", 0), small_budget(Backpressure::Wait)).expect("unit");
    unit.record(device_entry("Torch.exp.0.forward", &device, 200)).expect("first fits");
    std::thread::scope(|s| {
        let second = s.spawn(|| unit.record(deferred_entry("Torch.exp.1.forward", 200, &made)));
        eventually("the second record waits", || unit.metrics().waits == 1);
        assert_eq!(made.load(Ordering::SeqCst), 0, "no copy while the budget is full");
        device.release();
        assert_eq!(second.join().expect("thread").expect("record"), Recorded::Queued);
    });
    assert_eq!(made.load(Ordering::SeqCst), 1);
    // Larger than the whole budget: admitted alone, once nothing else is staged.
    unit.record(deferred_entry("Torch.exp.2.forward", 1000, &made)).expect("alone");
    assert_eq!(unit.commit_blocking().expect("commit").counts.entries, 3);
    assert_eq!(made.load(Ordering::SeqCst), 2);
}

#[test]
fn a_deferred_source_of_the_wrong_size_fails_the_record() {
    let (_dir, lake) = lake();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    let source = TensorSource::deferred(16, || Ok(TensorSource::host(vec![0u8; 8])));
    let entry = Entry::new("Torch.exp.0.forward").output([Value::tensor(Tensor::new(DType::F32, [4], source))]);
    let err = unit.record(entry).expect_err("wrong size");
    assert!(matches!(err, WriterError::InvalidEntry { .. }), "{err}");
    let failing = TensorSource::deferred(16, || Err("the snapshot failed".into()));
    let entry = Entry::new("Torch.exp.1.forward").output([Value::tensor(Tensor::new(DType::F32, [4], failing))]);
    assert!(unit.record(entry).expect_err("make failed").to_string().contains("the snapshot failed"));
    assert_eq!(unit.commit_blocking().expect("commit").counts.entries, 0);
}

/// Statistics a device computed, or its failure.
struct GivenSummary(std::result::Result<crate::stats::Summary, crate::device::DeviceError>);

impl crate::device::DeviceSummary for GivenSummary {
    fn wait(self: Box<Self>) -> std::result::Result<crate::stats::Summary, crate::device::DeviceError> {
        self.0
    }
}

fn summarized(result: std::result::Result<crate::stats::Summary, crate::device::DeviceError>) -> Value {
    Value::tensor(Tensor::new(DType::F32, [1 << 20], TensorSource::summarized(GivenSummary(result))))
}

#[test]
fn a_tensor_summarized_on_its_device_is_a_leaf_without_bytes() {
    use crate::stats::{Stat, Summary};
    let (_dir, lake) = lake();
    // A budget far below the tensor's 4 MiB: a summarized tensor charges no bytes.
    let unit = lake.unit(Unit::new(0, "default", 0), small_budget(Backpressure::Error)).expect("unit");
    let summary =
        Summary { max: Stat::Float(2.0), min: Stat::Float(-1.0), mean: Stat::Float(0.5), norm: Stat::Float(3.0) };
    unit.record(Entry::new("Torch.exp.0.forward").input_args([summarized(Ok(summary))])).expect("record");
    let record = unit.commit_blocking().expect("commit");
    assert_eq!((record.counts.leaves, record.counts.tensors), (1, 0));
}

#[test]
fn a_unit_that_needs_bytes_refuses_a_summarized_tensor() {
    let (_dir, lake) = lake();
    let options = WriterOptions { summary_mode: crate::SummaryMode::Md5, ..WriterOptions::default() };
    let unit = lake.unit(Unit::new(0, "default", 0), options).expect("unit");
    let err = unit
        .record(Entry::new("Torch.exp.0.forward").input_args([summarized(Ok(crate::stats::Summary::NULL))]))
        .expect_err("md5 needs the bytes");
    assert!(err.to_string().contains("carries no bytes"), "{err}");
    unit.abort();
}

#[test]
fn a_failed_device_summary_fails_the_commit() {
    let (_dir, lake) = lake();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    let failed = summarized(Err(crate::device::DeviceError("the device's reduction failed".into())));
    unit.record(Entry::new("Torch.exp.0.forward").input_args([failed])).expect("record");
    let err = unit.commit_blocking().expect_err("failed summary");
    assert!(err.to_string().contains("the device's reduction failed"), "{err}");
    assert!(units(&lake).is_empty());
}

#[test]
fn quiesce_waits_for_work_in_flight_and_the_unit_goes_on_after() {
    let (_dir, lake) = lake();
    let device = SimulatedDevice::new();
    device.hold();
    let unit = lake.unit(Unit::new(0, "default", 0), WriterOptions::default()).expect("unit");
    unit.record(device_entry("Torch.exp.0.forward", &device, 64)).expect("record");
    let quiesced = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            lake.quiesce();
            quiesced.store(true, Ordering::SeqCst);
        });
        // Held copies cannot finish: quiesce must still be waiting after any delay.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!quiesced.load(Ordering::SeqCst), "quiesce returned with a device copy in flight");
        device.release();
        waiter.join().expect("quiesce");
    });
    // The I/O thread is stopped; the unit goes on, and its commit starts the thread again.
    unit.record(host_entry("Torch.exp.1.forward", 8)).expect("record");
    let record = unit.commit_blocking().expect("commit");
    assert_eq!(record.counts.entries, 2);
    assert_eq!(units(&lake).len(), 1);
}
