//! `import_captured`: one dump folder that a running job holds in memory, committed as a unit.
//!
//! msprobe's writer keeps a dump's `dump.json`, `stack.json` and `construct.json` in memory and
//! rewrites the files whole at every flush; its processor saves tensors with `torch.save`. When
//! those bytes are handed over here instead, nothing is written outside the dataset: the unit
//! is built exactly as `import` builds it from the same files, so `export` writes them back
//! byte for byte.

use std::path::Path;

use probelake_format::lake::{CommitRecord, Lake, UnitCounts};

use crate::columns::{Origin, UnitColumns};
use crate::discover::place_dump_file;
use crate::dump_folder::{read_dump_files, DumpFiles, Reading};
use crate::error::Result;
use crate::import::{encode_unit, push_tensor_file, store_unit};

/// One dump folder's files as msprobe would have written them, held in memory.
#[derive(Debug, Clone, Default)]
pub struct CapturedDump {
    /// Where msprobe would have written `dump.json` (or `debug.json`): its folders name the
    /// unit, as for `import` (`.../step_{g}/{stage}/step{S}/rank{R}/dump.json` or
    /// `.../step{N}/rank{R}/dump.json`).
    pub dump_path: String,
    /// The dump file's bytes.
    pub dump: Vec<u8>,
    /// `stack.json`, when msprobe writes one.
    pub stack: Option<Vec<u8>>,
    /// `construct.json`, when msprobe writes one.
    pub construct: Option<Vec<u8>>,
    /// The files of `dump_tensor_data/`: each name and the bytes `torch.save` (into memory) or
    /// `numpy.save` wrote.
    pub tensors: Vec<(String, Vec<u8>)>,
    /// `Some(n)`: the JSON files were serialized in json.dump's one-line layout (Python's
    /// `json.dumps(value)`, several times faster than with `indent`) and are stored as msprobe
    /// writes them, with indent `n`. `None`: stored in the layout they are in.
    pub relayout: Option<u16>,
}

/// Builds the unit of `dump` and commits it to `lake`, replacing the unit if it is there.
///
/// A `.pt` written by `torch.save` into a buffer names its archive folder `archive`; it is
/// stored with the file's stem instead, as `torch.save(tensor, path)` names it, so `export`
/// writes the file torch would have written. Bad bytes leave the dataset as it was.
pub async fn import_captured(lake: &Lake, dump: &CapturedDump) -> Result<CommitRecord> {
    let place = place_dump_file(Path::new(&dump.dump_path))?;
    lake.check_writable(std::slice::from_ref(&place.unit)).await?;
    let (encoded, counts) = build_captured(dump, &place)?;
    let staged = store_unit(lake, &place.unit, encoded, counts).await?;
    Ok(lake.commit(staged).await?)
}

fn build_captured(
    dump: &CapturedDump,
    place: &crate::discover::DumpDir,
) -> Result<(Vec<probelake_format::lake::EncodedFile>, UnitCounts)> {
    let origin = Origin { inner_step: place.inner_step, pid: place.pid };
    let stack_path = place.dir.join("stack.json");
    let construct_path = place.dir.join("construct.json");
    let files = DumpFiles {
        path: &place.path,
        file: &place.file,
        kind: place.kind,
        origin,
        dump: &dump.dump,
        stack: dump.stack.as_deref().map(|b| (stack_path.as_path(), b)),
        construct: dump.construct.as_deref().map(|b| (construct_path.as_path(), b)),
        relayout: dump.relayout,
        reading: Reading::Import,
        // A running job's dump is written beside its training: one thread, not every core.
        threads: 1,
    };
    let mut columns = UnitColumns::default();
    let mut counts = UnitCounts::default();
    read_dump_files(&files, &mut columns, &mut counts)?;
    let tensor_dir = place.dir.join("dump_tensor_data");
    let mut names: Vec<&(String, Vec<u8>)> = dump.tensors.iter().collect();
    // In the order `import` reads a folder, so the two build the same files.
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, bytes) in names {
        let stem = name.strip_suffix(".pt");
        push_tensor_file(name, bytes, &tensor_dir.join(name), stem, &mut columns, origin)?;
        counts.tensors += 1;
    }
    Ok((encode_unit(&mut columns, 1)?, counts))
}
