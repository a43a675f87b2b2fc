//! The Arrow schemas of the tables. Partition columns (`step`, `stage`, `rank`, `api`) are
//! never stored inside files: they come from the hive path.

use std::sync::{Arc, OnceLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::layout::Table;

fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, true)))
}

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn int64(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Int64, nullable)
}

/// Columns that say which dump file of a unit a row came from: msprobe's inner `step{S}` folder
/// of a verl dump and the pid of a `proc{pid}` folder.
fn origin() -> [Field; 2] {
    [int64("inner_step", true), int64("pid", true)]
}

/// `dump`: one row per leaf (tensor, scalar or null) of every entry, in execution order.
pub fn dump_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        let mut fields = vec![
            int64("seq", false),
            Field::new("leaf", DataType::Int32, false),
            utf8("name", false),
            utf8("op", false),
            int64("call", true),
            utf8("direction", true),
            utf8("section", false),
            utf8("path", false),
            utf8("item", false),
            utf8("kind", true),
            utf8("dtype", true),
            Field::new("shape", list_of(DataType::Int64), true),
            Field::new("max", DataType::Float64, true),
            Field::new("min", DataType::Float64, true),
            Field::new("mean", DataType::Float64, true),
            Field::new("norm", DataType::Float64, true),
            Field::new("requires_grad", DataType::Boolean, true),
            utf8("md5", true),
            utf8("data_name", true),
            utf8("value", true),
            utf8("raw", true),
        ];
        fields.extend(origin());
        Arc::new(Schema::new(fields))
    })
    .clone()
}

/// `stack`: one row per entry name of stack.json, with its call stack (innermost frame first).
pub fn stack_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        let mut fields =
            vec![int64("group", false), utf8("name", false), Field::new("frames", list_of(DataType::Utf8), true)];
        fields.extend(origin());
        Arc::new(Schema::new(fields))
    })
    .clone()
}

/// `construct`: one row per node of construct.json: its parent module and Megatron micro step.
pub fn construct_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        let mut fields = vec![
            int64("seq", false),
            utf8("name", false),
            utf8("parent", true),
            int64("micro_step", true),
            utf8("raw", true),
        ];
        fields.extend(origin());
        Arc::new(Schema::new(fields))
    })
    .clone()
}

/// `tensor`: one row per tensor file of `dump_tensor_data/`, elements as little-endian bytes.
pub fn tensor_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        let mut fields = vec![
            utf8("data_name", false),
            utf8("item", false),
            utf8("dtype", false),
            Field::new("shape", list_of(DataType::Int64), false),
            Field::new("data", DataType::LargeBinary, false),
            utf8("container", false),
            utf8("meta", false),
            Field::new("original", DataType::LargeBinary, true),
        ];
        fields.extend(origin());
        Arc::new(Schema::new(fields))
    })
    .clone()
}

/// `source`: one row per imported dump.json / debug.json: its header, where it came from, its
/// layout and the skeleton that export fills with leaves; also stack.json/construct.json presence.
pub fn source_schema() -> SchemaRef {
    static S: OnceLock<SchemaRef> = OnceLock::new();
    S.get_or_init(|| {
        let mut fields = vec![
            utf8("file", false),
            utf8("kind", false),
            utf8("task", true),
            utf8("level", true),
            utf8("framework", true),
            utf8("dump_data_dir", true),
            int64("entries", false),
            int64("leaves", false),
            int64("bytes", false),
            Field::new("indent", DataType::Int32, true),
            Field::new("skeleton", DataType::LargeUtf8, false),
            Field::new("original", DataType::LargeBinary, true),
            utf8("stack_format", true),
            Field::new("stack_indent", DataType::Int32, true),
            Field::new("stack_original", DataType::LargeBinary, true),
            utf8("construct_format", true),
            Field::new("construct_indent", DataType::Int32, true),
            Field::new("construct_original", DataType::LargeBinary, true),
        ];
        fields.extend(origin());
        Arc::new(Schema::new(fields))
    })
    .clone()
}

/// The schema of `table`'s files.
pub fn schema_of(table: Table) -> SchemaRef {
    match table {
        Table::Dump => dump_schema(),
        Table::Stack => stack_schema(),
        Table::Construct => construct_schema(),
        Table::Tensor => tensor_schema(),
        Table::Source => source_schema(),
    }
}

/// The partition columns of `table`, in path order, with their SQL types.
pub fn partition_columns(table: Table) -> Vec<(&'static str, DataType)> {
    let mut cols = vec![("step", DataType::Int64), ("stage", DataType::Utf8), ("rank", DataType::Int64)];
    if table.has_api_partition() {
        cols.push(("api", DataType::Utf8));
    }
    cols
}
