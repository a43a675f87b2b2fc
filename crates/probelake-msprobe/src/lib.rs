//! # probelake-msprobe
//!
//! msprobe's files for probelake: reading msprobe's dump trees into a dataset and writing them
//! back, byte for byte.
//!
//! - [`discover`](discover()) finds dump folders and tells msprobe, verl and single layouts apart;
//! - [`import`](import()) turns them into committed units;
//! - [`export`](export()) rebuilds the files, byte for byte.
//!
//! Below those, [`take_apart`] / [`render`] handle one dump.json or debug.json, and
//! [`Leaf`] one leaf value; [`json`] is msprobe's JSON dialect (CPython's `json` module,
//! `NaN` and `Infinity` included, read and written exactly), [`tensor_file`] its `.pt` and
//! `.npy` tensor files.
//!
//! The dataset itself (tables, units, commits, storage) is `probelake-format`'s; this crate
//! only knows how msprobe's files map onto it. The writer (`probelake-writer`), the SQL
//! functions (`probelake-query`) and `probelake-compare` use this crate's [`Leaf`], [`json`],
//! [`StackFrames`] and [`Origin`]: a leaf's JSON, its Python-exact floats, a stack's frames
//! and the dump file of a unit a row came from are msprobe's format, defined once, here.
#![warn(missing_docs)]

pub mod error;
pub mod json;
pub mod tensor_file;
pub mod testing;

mod captured;
mod columns;
mod construct;
mod discover;
mod dump_file;
mod dump_folder;
mod entry_ranges;
mod export;
mod import;
mod in_order;
mod leaf;
mod leaf_text;
mod name;
mod read_dump;
mod read_file;
mod read_unit;
mod shared_frames;
mod skeleton;
mod stack;
mod stack_frames;
mod stored_leaf;

pub use captured::{import_captured, CapturedDump};
pub use columns::{
    ConstructColumns, DumpColumns, FamilySize, LeafPlace, Origin, SideFileRef, SourceColumns, SourceRow, StackColumns,
    TensorColumns, TensorRow,
};
pub use construct::{render_construct, take_apart_construct, ConstructRow};
pub use discover::{by_unit, discover, place_dump_file, DumpDir, Overrides, TreeLayout};
pub use dump_file::{
    rebuilds_source, render, slot_suffix, take_apart, take_apart_read, take_apart_source, DumpKind, Header, LeafRow,
    ParsedDump,
};
pub use error::{MsprobeError, Result};
pub use export::{export, ExportOptions, ExportReport, EXPORT_DUMP_COLUMNS};
pub use import::{import, ImportOptions, ImportReport, NoProgress, Progress};
pub use leaf::{is_leaf, Leaf};
pub use leaf_text::{LeafReader, ReadLeaves};
pub use name::{is_parameters_grad, parse_entry_name, EntryName};
pub use read_dump::{parse_dump, DumpDoc};
pub use read_unit::{read_unit, read_unit_stacks, UnitStacks, UnitTables};
pub use stack::{render_stack, take_apart_stack, StackFormat, StackRow};
pub use stack_frames::StackFrames;
pub use stored_leaf::LeafValue;
