//! One unit's msprobe files read into its tables in memory, as [`import`](crate::import())
//! would write them, without writing anything: what a comparison of two dump.json files
//! reads, a unit pair at a time.

use arrow::record_batch::RecordBatch;
use probelake_format::lake::UnitCounts;

use crate::columns::UnitColumns;
use crate::discover::DumpDir;
use crate::error::Result;
use crate::import::{read_dump_dir, Reading};

/// A unit's tables in memory: the batches [`import`](crate::import()) would encode into the
/// unit's files, one per table and API family, in the schemas of `probelake_format::schema`.
#[derive(Debug, Clone)]
pub struct UnitTables {
    /// `dump` rows, one batch per API family.
    pub dump: Vec<RecordBatch>,
    /// `tensor` rows (tensor dumps), one batch per API family.
    pub tensor: Vec<RecordBatch>,
    /// `stack` rows, when a stack.json was read.
    pub stack: Option<RecordBatch>,
    /// `source` rows: one per dump file.
    pub source: RecordBatch,
    /// What the unit holds.
    pub counts: UnitCounts,
}

/// Reads the dump folders of one unit (`dirs`, all of one [`Unit`](probelake_format::Unit),
/// as [`discover`](crate::discover()) finds them) into its tables: the rows `import` stores,
/// for reading, not writing back. A file `import` refuses for its syntax or content is refused
/// here with the same error; what only writing back needs (the byte-for-byte round trip,
/// construct.json) is not read, nor stack.json unless `with_stack` (a comparison prints the
/// target's stacks only, as msprobe does; `stack` is then `None`).
///
/// ```no_run
/// # fn demo() -> probelake_msprobe::Result<()> {
/// use probelake_msprobe::{discover, read_unit, Overrides};
///
/// let dirs = discover(std::path::Path::new("run/step0/rank0/dump.json"), &Overrides::default())?;
/// let tables = read_unit(&dirs.iter().collect::<Vec<_>>(), true)?;
/// println!("{} leaves", tables.counts.leaves);
/// # Ok(()) }
/// ```
pub fn read_unit(dirs: &[&DumpDir], with_stack: bool) -> Result<UnitTables> {
    let mut columns = UnitColumns::default();
    let mut counts = UnitCounts::default();
    for dir in dirs {
        read_dump_dir(dir, &mut columns, &mut counts, Reading::Compare { stack: with_stack })?;
    }
    let dump = columns.dump.values_mut().map(|c| c.finish()).collect::<std::result::Result<_, _>>()?;
    let tensor = columns.tensor.values_mut().map(|c| c.finish()).collect::<std::result::Result<_, _>>()?;
    let stack = if columns.has_stack { Some(columns.stack.finish()?) } else { None };
    Ok(UnitTables { dump, tensor, stack, source: columns.source.finish()?, counts })
}
