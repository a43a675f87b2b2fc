//! A stats worker: turns one recorded entry into its leaf rows, its skeleton fragment and (task
//! `tensor`) its payloads, walking it exactly as import walks a dump.json entry.

use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;

use super::inbox::InboxReceiver;
use std::sync::Arc;

use probelake_msprobe::json::{parse, write_compact, write_str, Arena};
use probelake_msprobe::{is_parameters_grad, slot_suffix, Leaf};

use super::{Job, Shared, ToAssembler, Work};
use crate::checksum::{crc32_hex, xor_md5, Md5};
use crate::dtype::DType;
use crate::entry::{Tensor, Value};
use crate::error::{Result, WriterError};
use crate::leaf::{null_leaf, scalar_leaf, tensor_leaf, TensorFacts};
use crate::options::{SummaryMode, Task};
use crate::source::{Held, Source};
use crate::stats::numpy::summarize_numpy;
use crate::stats::summarize;

/// One leaf's row, before it is appended.
pub(crate) struct LeafOut {
    pub leaf_no: i32,
    pub section: usize,
    pub path: String,
    pub item: String,
    pub leaf: Leaf<'static>,
}

/// A tensor payload for the `tensor` table (task `tensor`).
pub(crate) struct Payload {
    pub data_name: String,
    pub item: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub bytes: Held,
}

/// Everything one entry contributes to the unit.
pub(crate) struct EntryRows {
    pub seq: i64,
    pub name: String,
    pub sections: Vec<String>,
    pub leaves: Vec<LeafOut>,
    pub payloads: Vec<Payload>,
    /// `"name": {...}` with `$` for every leaf.
    pub skeleton: String,
    pub stack: Option<Vec<String>>,
    pub parent: Option<Option<String>>,
    /// Budget held until the rows are appended.
    pub overhead: u64,
    /// Budget held for the payloads until their file is stored.
    pub payload_bytes: u64,
}

/// The worker loop: entries in, rows out, until `Finish`.
pub(crate) fn run(
    rx: &InboxReceiver<Work>,
    out: &Sender<ToAssembler>,
    shared: &Arc<Shared>,
    pending: &std::sync::atomic::AtomicU64,
) {
    while let Some(work) = rx.recv() {
        let job = match work {
            Work::Entry(job) => job,
            Work::Finish => break,
        };
        let charged = job.tensor_bytes;
        pending.fetch_sub(charged, Ordering::AcqRel);
        if shared.stopped() {
            shared.budget.release(job.tensor_bytes + job.overhead);
            shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        let overhead = job.overhead;
        match process(job, shared) {
            Ok(rows) => {
                // Statistics are done: the tensor bytes are free again, except payloads.
                shared.budget.release(charged.saturating_sub(rows.payload_bytes));
                if out.send(ToAssembler::Rows(Box::new(rows))).is_err() {
                    return;
                }
            }
            Err(e) => {
                shared.budget.release(charged + overhead);
                shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
                shared.stop(&e.to_string());
            }
        }
    }
    let _ = out.send(ToAssembler::WorkerDone);
}

struct Walk<'s> {
    shared: &'s Shared,
    name: &'s str,
    grads: bool,
    skeleton: Vec<u8>,
    leaves: Vec<LeafOut>,
    payloads: Vec<Payload>,
    payload_bytes: u64,
    section: usize,
    /// The slot's category in tensor file names (`input`, `kwargs`, `output`, …).
    category: String,
    path: String,
    item: String,
}

fn process(job: Job, shared: &Shared) -> Result<EntryRows> {
    let Job { seq, entry, overhead, .. } = job;
    let grads = is_parameters_grad(&entry.name);
    let mut walk = Walk {
        shared,
        name: &entry.name,
        grads,
        skeleton: Vec::with_capacity(64 + entry.name.len()),
        leaves: Vec::new(),
        payloads: Vec::new(),
        payload_bytes: 0,
        section: 0,
        category: String::new(),
        path: String::new(),
        item: String::new(),
    };
    write_str(&mut walk.skeleton, &entry.name);
    walk.skeleton.extend_from_slice(b": {");
    let mut sections = Vec::with_capacity(entry.sections.len());
    for (i, (section, value)) in entry.sections.into_iter().enumerate() {
        if i > 0 {
            walk.skeleton.extend_from_slice(b", ");
        }
        write_str(&mut walk.skeleton, &section);
        walk.skeleton.extend_from_slice(b": ");
        match slot_suffix(&section, grads) {
            Some(suffix) => {
                walk.section = i;
                walk.category.clear();
                walk.category.push_str(match section.as_str() {
                    _ if grads => &section,
                    "input_kwargs" => "kwargs",
                    "input_args" => "input",
                    other => other,
                });
                walk.path.clear();
                walk.item.clear();
                walk.item.push_str(walk.name);
                walk.item.push('.');
                walk.item.push_str(suffix);
                walk.value(value)?;
            }
            None => match value {
                Value::Json(text) => walk.json(&text)?,
                _ => return Err(WriterError::Internal("a non-slot section holds a leaf".into())),
            },
        }
        sections.push(section);
    }
    walk.skeleton.push(b'}');
    let Walk { skeleton, leaves, payloads, payload_bytes, .. } = walk;
    let skeleton = String::from_utf8(skeleton).map_err(|_| WriterError::Internal("skeleton is not UTF-8".into()))?;
    Ok(EntryRows {
        seq,
        name: entry.name,
        sections,
        leaves,
        payloads,
        skeleton,
        stack: entry.stack,
        parent: entry.parent,
        overhead,
        payload_bytes,
    })
}

impl Walk<'_> {
    fn push_leaf(&mut self, leaf: Leaf<'static>) {
        let item = match leaf.data_name.as_deref() {
            Some(dn) if !dn.is_empty() => dn.rsplit_once('.').map_or(dn, |(stem, _)| stem).to_string(),
            _ => self.item.clone(),
        };
        let leaf_no = self.leaves.len() as i32;
        self.leaves.push(LeafOut { leaf_no, section: self.section, path: self.path.clone(), item, leaf });
        self.skeleton.push(b'$');
    }

    fn json(&mut self, text: &str) -> Result<()> {
        let arena = Arena::new();
        let node = parse(text.as_bytes(), &arena)
            .map_err(|e| WriterError::invalid(self.name, format!("bad JSON literal {text:?}: {e}")))?;
        write_compact(&mut self.skeleton, &node);
        Ok(())
    }

    fn value(&mut self, value: Value) -> Result<()> {
        match value {
            Value::Null => self.push_leaf(null_leaf()),
            Value::Scalar { kind, value } => {
                let arena = Arena::new();
                let node = parse(value.as_bytes(), &arena)
                    .map_err(|e| WriterError::invalid(self.name, format!("bad JSON in a `{kind}` value: {e}")))?;
                let mut compact = Vec::with_capacity(value.len());
                write_compact(&mut compact, &node);
                self.push_leaf(scalar_leaf(kind, String::from_utf8_lossy(&compact).into_owned()));
            }
            Value::Tensor(t) => self.tensor(t)?,
            Value::Json(text) => self.json(&text)?,
            Value::List(items) => {
                let (path_len, item_len) = (self.path.len(), self.item.len());
                self.skeleton.push(b'[');
                for (i, child) in items.into_iter().enumerate() {
                    if i > 0 {
                        self.skeleton.extend_from_slice(b", ");
                    }
                    if path_len > 0 {
                        self.path.push('.');
                    }
                    self.path.push_str(&i.to_string());
                    if !self.grads {
                        self.item.push('.');
                        self.item.push_str(&i.to_string());
                    }
                    let walked = self.value(child);
                    self.path.truncate(path_len);
                    self.item.truncate(item_len);
                    walked?;
                }
                self.skeleton.push(b']');
            }
            Value::Map(members) => {
                let (path_len, item_len) = (self.path.len(), self.item.len());
                self.skeleton.push(b'{');
                for (i, (key, child)) in members.into_iter().enumerate() {
                    if i > 0 {
                        self.skeleton.extend_from_slice(b", ");
                    }
                    write_str(&mut self.skeleton, &key);
                    self.skeleton.extend_from_slice(b": ");
                    if path_len > 0 {
                        self.path.push('.');
                    }
                    self.path.push_str(&key);
                    self.item.push('.');
                    self.item.push_str(&key);
                    let walked = self.value(child);
                    self.path.truncate(path_len);
                    self.item.truncate(item_len);
                    walked?;
                }
                self.skeleton.push(b'}');
            }
        }
        Ok(())
    }

    /// msprobe's tensor file name: `{entry}.{category}.{path}.pt`, or `{entry}.{param}.pt` for a
    /// parameter gradient.
    fn data_name(&self) -> String {
        let mut name = String::with_capacity(self.name.len() + self.category.len() + self.path.len() + 8);
        name.push_str(self.name);
        name.push('.');
        name.push_str(&self.category);
        if !self.grads && !self.path.is_empty() {
            name.push('.');
            name.push_str(&self.path);
        }
        name.push_str(".pt");
        name
    }

    fn tensor(&mut self, t: Tensor) -> Result<()> {
        let Tensor { dtype, shape, requires_grad, kind, numpy, source } = t;
        if let Source::Summarized(summary) = source.0 {
            let summary = summary.wait().map_err(|e| WriterError::Device { item: self.item.clone(), message: e.0 })?;
            let leaf = tensor_leaf(TensorFacts {
                kind: kind.as_deref().unwrap_or("torch.Tensor"),
                dtype_name: dtype.torch_name(),
                shape: &shape,
                summary: Some(summary),
                requires_grad,
                data_name: None,
                md5: Md5::Absent,
            });
            self.push_leaf(leaf);
            return Ok(());
        }
        let held = match source.0 {
            Source::Host(b) => Held::Host(b),
            Source::Lent(l) => Held::Lent(l),
            Source::Copying(copy, _) => {
                Held::Pinned(copy.wait().map_err(|e| WriterError::Device { item: self.item.clone(), message: e.0 })?)
            }
            Source::Device(_) | Source::Deferred(..) | Source::Summarized(_) => {
                return Err(WriterError::Internal("a device or deferred tensor reached a worker unmade".into()))
            }
        };
        let data = held.as_slice();
        let zero_dim = shape.is_empty();
        let options = &self.shared.options;
        let summary = if numpy {
            Some(summarize_numpy(dtype, data))
        } else {
            (options.summary_mode != SummaryMode::Xor).then(|| summarize(dtype, data, zero_dim))
        };
        let md5 = match options.summary_mode {
            _ if numpy => Md5::Absent,
            SummaryMode::Statistics => Md5::Absent,
            SummaryMode::Md5 => Md5::Text(crc32_hex(data)),
            SummaryMode::Xor => xor_md5(dtype, data, zero_dim),
        };
        let saved = options.task == Task::Tensor && !data.is_empty();
        let data_name = saved.then(|| self.data_name());
        let leaf = tensor_leaf(TensorFacts {
            kind: kind.as_deref().unwrap_or("torch.Tensor"),
            dtype_name: if numpy { dtype.numpy_name() } else { dtype.torch_name() },
            shape: &shape,
            summary,
            requires_grad,
            data_name: data_name.clone(),
            md5,
        });
        self.push_leaf(leaf);
        if let Some(data_name) = data_name {
            let item = data_name.strip_suffix(".pt").unwrap_or(&data_name).to_string();
            self.payload_bytes += data.len() as u64;
            self.payloads.push(Payload { data_name, item, dtype, shape, bytes: held });
        }
        Ok(())
    }
}
