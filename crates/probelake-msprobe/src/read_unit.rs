//! One unit's msprobe files read into its tables in memory, as [`import`](crate::import())
//! would write them, without writing anything: what a comparison of two dump.json files
//! reads, a unit pair at a time.

use arrow::record_batch::RecordBatch;
use probelake_format::lake::UnitCounts;

use crate::columns::{Origin, StackColumns, UnitColumns};
use crate::discover::DumpDir;
use crate::dump_folder::{stack_file, Reading};
use crate::error::Result;
use crate::import::{read_dump_dir, read_if_present};

/// A unit's tables in memory: the batches [`import`](crate::import()) would encode into the
/// unit's files, one per table and API family, in the schemas of `probelake_format::schema`.
#[derive(Debug, Clone)]
pub struct UnitTables {
    /// `dump` rows, one batch per API family.
    pub dump: Vec<RecordBatch>,
    /// `tensor` rows (tensor dumps), one batch per API family.
    pub tensor: Vec<RecordBatch>,
    /// `source` rows: one per dump file (their stack.json columns are left empty: see
    /// [`read_unit_stacks`]).
    pub source: RecordBatch,
    /// What the unit holds.
    pub counts: UnitCounts,
}

/// Reads the dump folders of one unit (`dirs`, all of one [`Unit`](probelake_format::Unit),
/// as [`discover`](crate::discover()) finds them) into its tables: the rows `import` stores,
/// for reading, not writing back. A file `import` refuses for its syntax or content is refused
/// here with the same error; what only writing back needs (the byte-for-byte round trip,
/// construct.json) is not read, nor stack.json: [`read_unit_stacks`] reads that apart, so
/// that a comparison can read the target's stacks on another core, and the golden side's not
/// at all (msprobe prints only the target's).
///
/// ```no_run
/// # fn demo() -> probelake_msprobe::Result<()> {
/// use probelake_msprobe::{discover, read_unit, Overrides};
///
/// let dirs = discover(std::path::Path::new("run/step0/rank0/dump.json"), &Overrides::default())?;
/// let tables = read_unit(&dirs.iter().collect::<Vec<_>>())?;
/// println!("{} leaves", tables.counts.leaves);
/// # Ok(()) }
/// ```
pub fn read_unit(dirs: &[&DumpDir]) -> Result<UnitTables> {
    let mut columns = UnitColumns::default();
    let mut counts = UnitCounts::default();
    for dir in dirs {
        read_dump_dir(dir, &mut columns, &mut counts, Reading::Compare, 1)?;
    }
    let dump = columns.dump.values_mut().map(|c| c.finish()).collect::<std::result::Result<_, _>>()?;
    let tensor = columns.tensor.values_mut().map(|c| c.finish()).collect::<std::result::Result<_, _>>()?;
    Ok(UnitTables { dump, tensor, source: columns.source.finish()?, counts })
}

/// The stack.json files of one unit's dump folders.
#[derive(Debug, Clone)]
pub struct UnitStacks {
    /// Their `stack` rows, as import stores them but for `frames`: a list of
    /// `Dictionary(Int32, Utf8)` in which the names of one stack group share their keys (read
    /// it with [`StackFrames`](crate::StackFrames)); `None` when no file has any.
    pub stack: Option<RecordBatch>,
    /// The dump files that have a stack.json (their inner step and pid), empty ones included.
    pub files: Vec<Origin>,
}

/// Reads the stack.json beside each dump file of `dirs` (as for [`read_unit`]), refusing a
/// damaged one with import's error.
pub fn read_unit_stacks(dirs: &[&DumpDir]) -> Result<UnitStacks> {
    let (mut columns, mut has_stack) = (StackColumns::default(), false);
    let mut files = Vec::new();
    for dir in dirs {
        let path = dir.dir.join("stack.json");
        let Some(bytes) = read_if_present(&path)? else { continue };
        let origin = Origin { inner_step: dir.inner_step, pid: dir.pid };
        stack_file(Some((&path, &bytes)), None, Reading::Compare, &mut columns, &mut has_stack, origin)?;
        files.push(origin);
    }
    let stack = if has_stack { Some(columns.finish()?) } else { None };
    Ok(UnitStacks { stack, files })
}
