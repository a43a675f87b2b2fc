//! `Lake.unit(...)`: recording msprobe entries from Python into one (step, stage, rank) unit.

use std::sync::RwLock;

use probelake_writer::{Backpressure, Entry, Recorded, SummaryMode, Task, Unit, UnitWriter, Value, WriterOptions};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::error::{Error, Kind, Result};
use crate::runtime::block_on;
use crate::values::Converter;

/// Writer options from the keyword arguments of `Lake.unit`.
pub fn writer_options(options: &Bound<'_, PyDict>) -> Result<WriterOptions> {
    let mut out = WriterOptions::default();
    for (key, value) in options.iter() {
        let key: String = key.extract().map_err(|_| Error::argument("unit options: keys must be strings"))?;
        let bad = |what: &str| Error::argument(format!("{key}: expected {what}, got {}", short_repr(&value)));
        let text = || value.extract::<String>().map_err(|_| bad("a str"));
        let count = || value.extract::<u64>().map_err(|_| bad("an int ≥ 0"));
        match key.as_str() {
            "task" => {
                out.task = match text()?.as_str() {
                    "statistics" => Task::Statistics,
                    "tensor" => Task::Tensor,
                    other => return Err(Error::argument(format!("task {other:?}: use \"statistics\" or \"tensor\""))),
                }
            }
            "summary_mode" => {
                out.summary_mode = match text()?.as_str() {
                    "statistics" => SummaryMode::Statistics,
                    "md5" => SummaryMode::Md5,
                    "xor" => SummaryMode::Xor,
                    other => {
                        return Err(Error::argument(format!(
                            "summary_mode {other:?}: use \"statistics\", \"md5\" or \"xor\""
                        )))
                    }
                }
            }
            "backpressure" => {
                out.backpressure = match text()?.as_str() {
                    "wait" => Backpressure::Wait,
                    "error" => Backpressure::Error,
                    "drop" => Backpressure::Drop,
                    other => {
                        return Err(Error::argument(format!(
                            "backpressure {other:?}: use \"wait\", \"error\" or \"drop\""
                        )))
                    }
                }
            }
            "level" => out.level = text()?,
            "framework" => out.framework = text()?,
            "budget_bytes" => out.budget_bytes = count()?,
            "threads" => out.threads = usize::try_from(count()?).map_err(|_| bad("a thread count"))?,
            "batch_rows" => out.batch_rows = usize::try_from(count()?).map_err(|_| bad("a row count"))?,
            "tensor_batch_bytes" => out.tensor_batch_bytes = count()?,
            "extra_info" => out.extra_info = value.extract().map_err(|_| bad("a bool"))?,
            "pid" => out.pid = value.extract().map_err(|_| bad("an int or None"))?,
            "dump_data_dir" => out.dump_data_dir = value.extract().map_err(|_| bad("a str or None"))?,
            "_stage_cpu" => {}
            _ => {
                return Err(Error::argument(format!(
                    "unknown unit option {key:?}; the options are task, summary_mode, level, framework, budget_bytes, \
                     backpressure, threads, batch_rows, tensor_batch_bytes, extra_info, pid, dump_data_dir"
                )))
            }
        }
    }
    Ok(out)
}

fn short_repr(value: &Bound<'_, PyAny>) -> String {
    let text = value.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

/// One unit being written. Closed by `commit` or `abort`; a unit opened before a `fork` cannot
/// be used in the child (its threads are the parent's).
#[pyclass(frozen, name = "UnitWriter", module = "probelake._internal")]
pub struct PyUnitWriter {
    /// Kept for the unit's life: the writer's I/O runtime belongs to the `Lake`, and a unit
    /// whose `Lake` is dropped (`probelake.open(p).unit(…)`) would have its uploads cancelled.
    _lake: probelake_writer::Lake,
    unit: Unit,
    pid: u32,
    writer: RwLock<Option<UnitWriter>>,
    stage_cpu: RwLock<Option<Py<PyAny>>>,
    /// The unit needs statistics only: device tensors are summarized on their device.
    statistics_only: bool,
    cpu_on_device: std::sync::atomic::AtomicBool,
}

impl PyUnitWriter {
    /// Wraps a started writer.
    pub fn new(writer: UnitWriter, lake: probelake_writer::Lake, unit: Unit, options: &WriterOptions) -> Self {
        PyUnitWriter {
            _lake: lake,
            unit,
            pid: crate::runtime::process_id(),
            writer: RwLock::new(Some(writer)),
            stage_cpu: RwLock::new(None),
            statistics_only: options.task == Task::Statistics && options.summary_mode == SummaryMode::Statistics,
            cpu_on_device: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn check_process(&self) -> Result<()> {
        if crate::runtime::process_id() != self.pid {
            return Err(Error::new(
                Kind::Internal,
                format!(
                    "unit {} was opened in process {} before a fork; its writer threads do not exist in this process \
                     (open a new unit here)",
                    self.unit, self.pid
                ),
            ));
        }
        Ok(())
    }

    fn closed(&self) -> Error {
        Error::argument(format!("unit {} is closed (committed or aborted); open a new one with lake.unit()", self.unit))
    }

    fn take(&self) -> Result<UnitWriter> {
        self.check_process()?;
        self.writer.write().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(|| self.closed())
    }
}

impl Drop for PyUnitWriter {
    /// In a child made by `fork`, the unit is the parent's: dropping its writer would talk to
    /// threads that do not exist here (and take their locks), so it is forgotten instead.
    fn drop(&mut self) {
        if crate::runtime::process_id() != self.pid {
            if let Some(writer) = self.writer.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
                std::mem::forget(writer);
            }
        }
    }
}

fn section_list<'py>(conv: &Converter<'_, 'py>, obj: &Bound<'py, PyAny>, name: &str) -> Result<Vec<Value>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        // msprobe wraps a single value in a one-element list.
        vec![obj.clone()]
    };
    items.iter().enumerate().map(|(i, v)| conv.value(v, &format!("{name}[{i}]"), 1)).collect()
}

fn section_map<'py>(conv: &Converter<'_, 'py>, obj: &Bound<'py, PyAny>, name: &str) -> Result<Vec<(String, Value)>> {
    let dict = obj
        .cast::<PyDict>()
        .map_err(|_| Error::argument(format!("entry `{}`: {name} must be a dict of str to values", conv.entry)))?;
    match conv.map(dict, name, 0)? {
        Value::Map(entries) => Ok(entries),
        _ => Err(Error::new(Kind::Internal, "a dict did not convert to a map")),
    }
}

#[pymethods]
impl PyUnitWriter {
    /// Records one entry; returns `False` if it was dropped (`backpressure="drop"`).
    #[pyo3(signature = (name, input_args=None, input_kwargs=None, input=None, output=None, parameters=None, parameters_grad=None, stack=None, parent=None, has_parent=false))]
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        py: Python<'_>,
        name: &str,
        input_args: Option<&Bound<'_, PyAny>>,
        input_kwargs: Option<&Bound<'_, PyAny>>,
        input: Option<&Bound<'_, PyAny>>,
        output: Option<&Bound<'_, PyAny>>,
        parameters: Option<&Bound<'_, PyAny>>,
        parameters_grad: Option<&Bound<'_, PyAny>>,
        stack: Option<Vec<String>>,
        parent: Option<String>,
        has_parent: bool,
    ) -> PyResult<bool> {
        self.check_process()?;
        if name.is_empty() {
            return Err(Error::argument("entry name must not be empty").into());
        }
        let stage_cpu = self.stage_cpu.read().unwrap_or_else(|p| p.into_inner()).as_ref().map(|s| s.bind(py).clone());
        let mut conv = Converter::new(py, name, stage_cpu.as_ref());
        conv.statistics_only = self.statistics_only;
        conv.cpu_on_device = self.cpu_on_device.load(std::sync::atomic::Ordering::Relaxed);
        let mut entry = Entry::new(name);
        if let Some(v) = input_args {
            entry = entry.input_args(section_list(&conv, v, "input_args")?);
        }
        if let Some(v) = input_kwargs {
            entry = entry.input_kwargs(section_map(&conv, v, "input_kwargs")?);
        }
        if let Some(v) = input {
            entry = entry.input(section_list(&conv, v, "input")?);
        }
        if let Some(v) = output {
            entry = entry.output(section_list(&conv, v, "output")?);
        }
        if let Some(v) = parameters {
            entry = entry.parameters(section_map(&conv, v, "parameters")?);
        }
        if let Some(v) = parameters_grad {
            for (param, value) in section_map(&conv, v, "parameters_grad")? {
                entry = entry.grad(param, value);
            }
        }
        if let Some(frames) = stack {
            entry = entry.stack(frames);
        }
        if has_parent {
            entry = entry.parent(parent.as_deref());
        }
        conv.finish()?;
        // Before the lock: a call waiting for a fork holds no lock that commit() would wait on
        // with the GIL held.
        let _entered = crate::fork::enter(py);
        let guard = self.writer.read().unwrap_or_else(|p| p.into_inner());
        let writer = guard.as_ref().ok_or_else(|| self.closed())?;
        // Waits only when the staging budget is full; the GIL is free meanwhile.
        let recorded = py.detach(|| writer.record(entry)).map_err(Error::from)?;
        Ok(matches!(recorded, Recorded::Queued))
    }

    /// Writes what is left and makes the unit visible; returns the commit record's summary.
    fn commit(&self, py: Python<'_>) -> PyResult<(String, u64, u64, u64, u64)> {
        let _entered = crate::fork::enter(py);
        let writer = self.take()?;
        let record = block_on(py, async move { writer.commit().await })?.map_err(Error::from)?;
        let c = &record.counts;
        Ok((record.commit_id.clone(), c.entries, c.leaves, c.tensors, record.bytes()))
    }

    /// Drops the unit: nothing of it becomes visible. A closed unit is left as it is.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        self.check_process()?;
        let _entered = crate::fork::enter(py);
        let writer = self.writer.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer {
            py.detach(move || writer.abort());
        }
        Ok(())
    }

    /// Whether the unit is still open.
    #[getter]
    fn is_open(&self) -> bool {
        self.writer.read().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// (step, stage, rank).
    #[getter]
    fn unit(&self) -> (i64, String, i64) {
        (self.unit.step, self.unit.stage.clone(), self.unit.rank)
    }

    /// The writer's counters: a dict (durations in seconds).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.check_process()?;
        let guard = self.writer.read().unwrap_or_else(|p| p.into_inner());
        let writer = guard.as_ref().ok_or_else(|| self.closed())?;
        let m = writer.metrics();
        let d = PyDict::new(py);
        d.set_item("records", m.records)?;
        d.set_item("bytes", m.bytes)?;
        d.set_item("drops", m.drops)?;
        d.set_item("dropped_bytes", m.dropped_bytes)?;
        d.set_item("waits", m.waits)?;
        d.set_item("queue_depth", m.queue_depth)?;
        d.set_item("staged_bytes", m.staged_bytes)?;
        d.set_item("leaves", m.leaves)?;
        d.set_item("record_p50", m.record_p50.as_secs_f64())?;
        d.set_item("record_p99", m.record_p99.as_secs_f64())?;
        d.set_item("record_max", m.record_max.as_secs_f64())?;
        Ok(d)
    }

    /// Routes CPU tensors through `stage` as if they were on a device (tests of that path).
    fn _set_stage_cpu(&self, stage: Option<Py<PyAny>>) {
        *self.stage_cpu.write().unwrap_or_else(|p| p.into_inner()) = stage;
    }

    /// Test seam: CPU tensors take the device path (summarized by `probelake._device_stats`,
    /// or staged by `probelake._device.stage`) as accelerator tensors do.
    fn _set_device_path_always(&self, always: bool) {
        self.cpu_on_device.store(always, std::sync::atomic::Ordering::Relaxed);
    }

    fn __repr__(&self) -> String {
        let state = if self.is_open() { "open" } else { "closed" };
        format!("UnitWriter(step={}, stage={:?}, rank={}, {state})", self.unit.step, self.unit.stage, self.unit.rank)
    }
}
