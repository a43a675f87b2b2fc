//! The assembler: puts entries back in dump.json order, fills the format crate's Arrow builders,
//! writes Parquet files as batches fill, and on commit writes the rest and the commit record.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use probelake_format::lake::{encode_batch, EncodedFile, StagedUnit};
use probelake_msprobe::json::write_str;
use std::borrow::Cow;

use probelake_format::{CommitRecord, DataFile, FormatError, Lake, Table, UnitCounts};
use probelake_msprobe::tensor_file::default_pt_meta;
use probelake_msprobe::{
    parse_entry_name, ConstructColumns, ConstructRow, DumpColumns, LeafPlace, SourceColumns, SourceRow, StackColumns,
    StackRow, TensorColumns, TensorRow,
};
use tokio::task::JoinHandle;

use super::worker::EntryRows;
use super::{Shared, ToAssembler};
use crate::error::{Result, WriterError};
use crate::io_runtime::IoRuntime;
use crate::location::DumpLocation;
use crate::options::Task;

/// How often an idle assembler checks for callers waiting on the budget.
const WAITER_POLL: Duration = Duration::from_millis(20);

enum Ending {
    Commit(tokio::sync::oneshot::Sender<Result<CommitRecord>>),
    Abort(std::sync::mpsc::Sender<()>),
}

pub(crate) struct Assembler {
    shared: Arc<Shared>,
    lake: Lake,
    io: Arc<IoRuntime>,
    workers: usize,
    location: DumpLocation,
    pending: BTreeMap<i64, Box<EntryRows>>,
    next_seq: i64,
    names: HashSet<String>,
    dump: BTreeMap<String, DumpColumns>,
    dump_rows: usize,
    tensor: BTreeMap<String, TensorColumns>,
    tensor_bytes: u64,
    entries: Vec<u8>,
    counts: UnitCounts,
    stack: Vec<(Vec<String>, Vec<String>)>,
    stack_groups: HashMap<Vec<String>, usize>,
    construct: Vec<(String, Option<String>)>,
    uploads: Vec<JoinHandle<std::result::Result<DataFile, FormatError>>>,
    files: Vec<DataFile>,
}

impl Assembler {
    pub(crate) fn new(shared: Arc<Shared>, lake: Lake, io: Arc<IoRuntime>, workers: usize) -> Self {
        let location = DumpLocation::of(&shared.unit, shared.options.pid);
        Assembler {
            shared,
            lake,
            io,
            workers,
            location,
            pending: BTreeMap::new(),
            next_seq: 0,
            names: HashSet::new(),
            dump: BTreeMap::new(),
            dump_rows: 0,
            tensor: BTreeMap::new(),
            tensor_bytes: 0,
            entries: Vec::new(),
            counts: UnitCounts::default(),
            stack: Vec::new(),
            stack_groups: HashMap::new(),
            construct: Vec::new(),
            uploads: Vec::new(),
            files: Vec::new(),
        }
    }

    /// Runs until every worker is done and the unit is committed or aborted.
    pub(crate) fn run(mut self, rx: &Receiver<ToAssembler>) {
        let mut done = 0;
        let mut ending = None;
        while done < self.workers || ending.is_none() {
            match rx.recv_timeout(WAITER_POLL) {
                Err(RecvTimeoutError::Timeout) => {
                    // Staged payloads are released only when their file is stored: with a
                    // caller waiting for budget, write them out now rather than at the batch size.
                    if self.shared.budget.has_waiters() && self.tensor_bytes > 0 && !self.shared.stopped() {
                        let _busy = self.shared.busy();
                        if let Err(e) = self.flush_tensor() {
                            self.shared.stop(&e.to_string());
                        }
                    }
                }
                Ok(ToAssembler::Rows(rows)) => {
                    // Taken while the rows still count in the queue's depth, and held until
                    // their files are encoded and handed to the I/O thread: Lake::quiesce never
                    // sees a gap between the two.
                    let _busy = self.shared.busy();
                    if self.shared.stopped() {
                        self.release(&rows);
                    } else if let Err(e) = self.accept(rows) {
                        self.shared.stop(&e.to_string());
                    }
                }
                Ok(ToAssembler::WorkerDone) => done += 1,
                Ok(ToAssembler::Commit(tx, busy)) => ending = Some((Ending::Commit(tx), busy)),
                Ok(ToAssembler::Abort(tx, busy)) => ending = Some((Ending::Abort(tx), busy)),
                // Every sender is gone: the writer was dropped and its workers ended.
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // The ending's `Busy` guard is dropped once its answer is sent.
        match ending {
            Some((Ending::Commit(tx), _busy)) => {
                let result = self.finish();
                if result.is_err() {
                    self.discard_all();
                }
                let _ = tx.send(result);
            }
            Some((Ending::Abort(tx), _busy)) => {
                self.discard_all();
                let _ = tx.send(());
            }
            None => self.discard_all(),
        }
    }

    fn release(&self, rows: &EntryRows) {
        self.shared.budget.release(rows.overhead + rows.payload_bytes);
        self.shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
    }

    fn accept(&mut self, rows: Box<EntryRows>) -> Result<()> {
        self.pending.insert(rows.seq, rows);
        while let Some(rows) = self.pending.remove(&self.next_seq) {
            self.append(*rows)?;
            self.next_seq += 1;
        }
        if self.dump_rows >= self.shared.options.batch_rows {
            self.flush_dump()?;
        }
        let waited = self.shared.budget.has_waiters() && self.tensor_bytes > 0;
        if self.tensor_bytes >= self.shared.options.tensor_batch_bytes || waited {
            self.flush_tensor()?;
        }
        self.reap_uploads(false)
    }

    fn append(&mut self, rows: EntryRows) -> Result<()> {
        self.shared.budget.release(rows.overhead);
        self.shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
        if !self.names.insert(rows.name.clone()) {
            return Err(WriterError::invalid(
                &rows.name,
                "recorded twice in this unit; msprobe entry names are unique within a dump (advance the call counter)",
            ));
        }
        let name = parse_entry_name(&rows.name);
        let origin = self.location.origin;
        let cols = match self.dump.get_mut(name.api) {
            Some(c) => c,
            None => self.dump.entry(name.api.to_string()).or_default(),
        };
        for l in &rows.leaves {
            let section = rows.sections.get(l.section).map_or("", String::as_str);
            let place = LeafPlace { seq: rows.seq, leaf: l.leaf_no, section, path: &l.path, item: &l.item };
            cols.push_leaf(place, &l.leaf, &rows.name, &name, origin);
        }
        let n = rows.leaves.len() as u64;
        self.dump_rows += rows.leaves.len();
        self.counts.leaves += n;
        self.shared.leaves.fetch_add(n, Ordering::Relaxed);
        if self.counts.entries > 0 {
            self.entries.extend_from_slice(b", ");
        }
        self.entries.extend_from_slice(rows.skeleton.as_bytes());
        self.counts.entries += 1;

        for p in &rows.payloads {
            let meta = default_pt_meta(&p.item)
                .to_json()
                .map_err(|e| WriterError::Internal(format!("tensor file metadata: {e}")))?;
            let row = TensorRow {
                data_name: &p.data_name,
                item: &p.item,
                dtype: p.dtype.torch_name(),
                shape: &p.shape,
                data: p.bytes.as_slice(),
                container: "pt",
                meta: &meta,
                original: None,
            };
            match self.tensor.get_mut(name.api) {
                Some(c) => c.push(&row, origin),
                None => self.tensor.entry(name.api.to_string()).or_default().push(&row, origin),
            }
            self.counts.tensors += 1;
        }
        self.tensor_bytes += rows.payload_bytes;

        if self.shared.options.extra_info {
            if let Some(frames) = rows.stack {
                match self.stack_groups.get(&frames) {
                    Some(&g) => {
                        if let Some((names, _)) = self.stack.get_mut(g) {
                            names.push(rows.name.clone());
                        }
                    }
                    None => {
                        self.stack_groups.insert(frames.clone(), self.stack.len());
                        self.stack.push((vec![rows.name.clone()], frames));
                    }
                }
            }
            if let Some(parent) = rows.parent {
                self.construct.push((rows.name, parent));
            }
        }
        Ok(())
    }

    fn upload(&mut self, encoded: EncodedFile, charge: u64) -> Result<()> {
        let lake = self.lake.clone();
        let unit = self.shared.unit.clone();
        let shared = Arc::clone(&self.shared);
        let busy = self.shared.busy();
        self.uploads.push(self.io.handle()?.spawn(async move {
            let stored = lake.put_encoded(&unit, encoded).await;
            shared.budget.release(charge);
            drop(busy);
            stored
        }));
        Ok(())
    }

    fn encode(&self, table: Table, api: Option<&str>, batch: &arrow::record_batch::RecordBatch) -> Result<EncodedFile> {
        encode_batch(table, api, batch).map_err(|e| WriterError::format(&self.shared.unit, e))
    }

    fn flush_dump(&mut self) -> Result<()> {
        let mut encoded = Vec::new();
        for (api, cols) in &mut self.dump {
            let batch = cols.finish().map_err(|e| WriterError::format(&self.shared.unit, e))?;
            if batch.num_rows() > 0 {
                encoded.push(
                    encode_batch(Table::Dump, Some(api), &batch)
                        .map_err(|e| WriterError::format(&self.shared.unit, e))?,
                );
            }
        }
        for file in encoded {
            self.upload(file, 0)?;
        }
        self.dump_rows = 0;
        Ok(())
    }

    fn flush_tensor(&mut self) -> Result<()> {
        let mut encoded = Vec::new();
        for (api, cols) in &mut self.tensor {
            let batch = cols.finish().map_err(|e| WriterError::format(&self.shared.unit, e))?;
            if batch.num_rows() > 0 {
                encoded.push(
                    encode_batch(Table::Tensor, Some(api), &batch)
                        .map_err(|e| WriterError::format(&self.shared.unit, e))?,
                );
            }
        }
        // The payload bytes stay charged until the last of these files is stored.
        let charge = std::mem::take(&mut self.tensor_bytes);
        let last = encoded.len().saturating_sub(1);
        for (i, file) in encoded.into_iter().enumerate() {
            self.upload(file, if i == last { charge } else { 0 })?;
        }
        Ok(())
    }

    /// Collects finished uploads (all of them when `all`), surfacing the first failure.
    fn reap_uploads(&mut self, all: bool) -> Result<()> {
        if self.uploads.is_empty() {
            return Ok(());
        }
        let rt = self.io.handle()?;
        let mut first_error = None;
        let mut keep = Vec::with_capacity(self.uploads.len());
        for handle in std::mem::take(&mut self.uploads) {
            if !all && !handle.is_finished() {
                keep.push(handle);
                continue;
            }
            match rt.block_on(handle) {
                Ok(Ok(file)) => self.files.push(file),
                Ok(Err(e)) => {
                    first_error.get_or_insert(WriterError::format(&self.shared.unit, e));
                }
                Err(e) => {
                    first_error.get_or_insert(WriterError::Internal(format!("upload task: {e}")));
                }
            }
        }
        self.uploads = keep;
        first_error.map_or(Ok(()), Err)
    }

    /// Writes what is left and the commit record.
    fn finish(&mut self) -> Result<CommitRecord> {
        if let Some(message) = self.shared.failure() {
            return Err(WriterError::Stopped { unit: self.shared.unit.clone(), message });
        }
        if let Some((&seq, _)) = self.pending.iter().next() {
            return Err(WriterError::Internal(format!("entry {} never arrived (next is {seq})", self.next_seq)));
        }
        self.flush_dump()?;
        self.flush_tensor()?;
        let unit = self.shared.unit.clone();
        let fmt = |e| WriterError::format(&unit, e);
        let origin = self.location.origin;
        let extra = self.shared.options.extra_info;
        if extra && !self.stack.is_empty() {
            let mut cols = StackColumns::default();
            for (group, (names, frames)) in self.stack.iter().enumerate() {
                let frames: Vec<Cow<'_, str>> = frames.iter().map(|f| Cow::Borrowed(f.as_str())).collect();
                for name in names {
                    let row = StackRow { group: group as i64, name: Cow::Borrowed(name), frames: frames.clone() };
                    cols.push(&row, origin);
                }
            }
            let batch = cols.finish().map_err(fmt)?;
            let file = self.encode(Table::Stack, None, &batch)?;
            self.upload(file, 0)?;
        }
        if extra && !self.construct.is_empty() {
            let mut cols = ConstructColumns::default();
            for (seq, (name, parent)) in self.construct.iter().enumerate() {
                let row = ConstructRow {
                    name: Cow::Borrowed(name),
                    parent: parent.as_deref().map(Cow::Borrowed),
                    micro_step: None,
                    raw: None,
                };
                cols.push(seq as i64, &row, origin);
            }
            let batch = cols.finish().map_err(fmt)?;
            let file = self.encode(Table::Construct, None, &batch)?;
            self.upload(file, 0)?;
        }
        let source = self.source_batch()?;
        let file = self.encode(Table::Source, None, &source)?;
        self.upload(file, 0)?;
        self.reap_uploads(true)?;

        let options = &self.shared.options;
        self.counts.dump_files = 1;
        self.counts.task = Some(options.task.as_str().to_string());
        self.counts.level = Some(options.level.clone());
        self.counts.framework = Some(options.framework.clone());
        let staged = StagedUnit { unit: unit.clone(), files: self.files.clone(), counts: self.counts.clone() };
        let record = self.io.handle()?.block_on(self.lake.commit(staged)).map_err(fmt)?;
        // Committed: these files are the unit's now, not leftovers to discard.
        self.files.clear();
        tracing::debug!(unit = %unit, files = record.files.len(), leaves = self.counts.leaves, "unit committed");
        Ok(record)
    }

    /// The `source` row: the header, the skeleton, and where the files go on export.
    fn source_batch(&mut self) -> Result<arrow::record_batch::RecordBatch> {
        let options = &self.shared.options;
        let dump_data_dir = match options.task {
            Task::Tensor => Some(options.dump_data_dir.clone().unwrap_or_else(|| self.location.tensor_dir())),
            Task::Statistics => None,
        };
        let mut skeleton = Vec::with_capacity(self.entries.len() + 128);
        skeleton.extend_from_slice(b"{\"task\": ");
        write_str(&mut skeleton, options.task.as_str());
        skeleton.extend_from_slice(b", \"level\": ");
        write_str(&mut skeleton, &options.level);
        skeleton.extend_from_slice(b", \"framework\": ");
        write_str(&mut skeleton, &options.framework);
        skeleton.extend_from_slice(b", \"dump_data_dir\": ");
        match &dump_data_dir {
            Some(dir) => write_str(&mut skeleton, dir),
            None => skeleton.extend_from_slice(b"null"),
        }
        skeleton.extend_from_slice(b", \"data\": {");
        skeleton.extend_from_slice(&self.entries);
        skeleton.extend_from_slice(b"}}");
        let skeleton =
            String::from_utf8(skeleton).map_err(|_| WriterError::Internal("skeleton is not UTF-8".into()))?;
        // An empty stack.json / construct.json is `{}` on one line: import records no indent.
        let indent = |rows: usize| (rows > 0).then_some(1);
        let stack_rows = self.stack.iter().map(|(names, _)| names.len()).sum();
        let mut cols = SourceColumns::default();
        cols.push(
            &SourceRow {
                file: &self.location.file,
                kind: "dump",
                task: Some(options.task.as_str()),
                level: Some(&options.level),
                framework: Some(&options.framework),
                dump_data_dir: dump_data_dir.as_deref(),
                entries: self.counts.entries as i64,
                leaves: self.counts.leaves as i64,
                // The writer never renders the JSON, so it does not know its size.
                bytes: 0,
                indent: Some(1),
                skeleton: &skeleton,
                original: None,
                stack: options.extra_info.then_some(("grouped", indent(stack_rows), None)),
                construct: options.extra_info.then_some(("map", indent(self.construct.len()), None)),
            },
            self.location.origin,
        );
        cols.finish().map_err(|e| WriterError::format(&self.shared.unit, e))
    }

    /// Removes every file this unit stored (it will not be committed).
    fn discard_all(&mut self) {
        let _ = self.reap_uploads(true);
        let files = std::mem::take(&mut self.files);
        if !files.is_empty() {
            // Without a runtime the files stay behind, where `probelake vacuum` finds them.
            if let Ok(rt) = self.io.handle() {
                rt.block_on(self.lake.discard(&files));
            }
        }
    }
}
