//! What a unit's compare table does not say: which entry each row belongs to and in what order
//! the entries ran (the `dump` table), the module each entry ran in (`construct`), and each
//! entry's call stack (`stack`). Read from the target's unit, as msprobe's visualization reads
//! the NPU side's construct.json and stack.json.

use std::collections::HashMap;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use probelake_format::columns::{cast_column, column};
use probelake_format::{CommitRecord, Lake, Table};
use probelake_msprobe::StackFrames;

use crate::error::ReportError;

/// The entries of one unit of the target.
#[derive(Debug, Default)]
pub(crate) struct UnitContext {
    /// Entry names in execution order (their first row's `seq`), each once.
    pub entries: Vec<String>,
    /// A row name (`item`, compare's NPU Name) → index into `entries`.
    pub entry_of_row: HashMap<String, usize>,
    /// An entry or module → the module it ran in (construct.json).
    pub parent: HashMap<String, String>,
    /// An entry → its frames, innermost first.
    pub stacks: HashMap<String, Vec<String>>,
}

impl UnitContext {
    /// Reads the unit `record` of `lake`.
    pub(crate) async fn read(lake: &Lake, record: &CommitRecord) -> Result<UnitContext, ReportError> {
        let mut context = UnitContext::default();
        let dump = batches(lake, record, Table::Dump, &["seq", "name", "item"], &[]).await?;
        let mut rows: Vec<(i64, String, String)> = Vec::new();
        for batch in &dump {
            let seq = cast_column(batch, "seq", &DataType::Int64)?;
            let (name, item) =
                (cast_column(batch, "name", &DataType::Utf8)?, cast_column(batch, "item", &DataType::Utf8)?);
            let (seq, name, item) = (seq.as_primitive::<Int64Type>(), name.as_string::<i32>(), item.as_string::<i32>());
            for i in 0..batch.num_rows() {
                if name.is_valid(i) && item.is_valid(i) {
                    rows.push((seq.value(i), name.value(i).to_string(), item.value(i).to_string()));
                }
            }
        }
        rows.sort_by_key(|(seq, _, _)| *seq);
        let mut entry_index: HashMap<String, usize> = HashMap::new();
        for (_, name, item) in rows {
            let next = entry_index.len();
            let index = *entry_index.entry(name.clone()).or_insert(next);
            if index == context.entries.len() {
                context.entries.push(name);
            }
            context.entry_of_row.entry(item).or_insert(index);
        }
        for batch in batches(lake, record, Table::Construct, &["name", "parent"], &[]).await? {
            let (name, parent) =
                (cast_column(&batch, "name", &DataType::Utf8)?, cast_column(&batch, "parent", &DataType::Utf8)?);
            let (name, parent) = (name.as_string::<i32>(), parent.as_string::<i32>());
            for i in 0..batch.num_rows() {
                if name.is_valid(i) && parent.is_valid(i) {
                    context.parent.insert(name.value(i).to_string(), parent.value(i).to_string());
                }
            }
        }
        for batch in batches(lake, record, Table::Stack, &["name", "frames"], &["frames"]).await? {
            let name = cast_column(&batch, "name", &DataType::Utf8)?;
            let name = name.as_string::<i32>();
            let frames = StackFrames::new(column(&batch, "frames")?.as_ref())
                .ok_or_else(|| ReportError::Schema("stack column `frames` is not a list of strings".into()))?;
            for i in 0..batch.num_rows() {
                if let (true, Some(f)) = (name.is_valid(i), frames.row(i)) {
                    context.stacks.insert(name.value(i).to_string(), f.into_iter().map(|s| s.into_owned()).collect());
                }
            }
        }
        Ok(context)
    }
}

/// The `table` batches of the unit `record`, with the columns `only`.
async fn batches(
    lake: &Lake,
    record: &CommitRecord,
    table: Table,
    only: &[&str],
    as_dictionary: &[&str],
) -> Result<Vec<RecordBatch>, ReportError> {
    let mut out = Vec::new();
    for file in record.files_of(table) {
        out.extend(lake.fetch_file(file).await?.decode_columns(Some(only), as_dictionary)?);
    }
    Ok(out)
}

/// A unit's nodes: its entries and the modules above them, parents before children, in the
/// order the entries ran.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    pub names: Vec<String>,
    pub parents: Vec<i64>,
    /// Entry index (of [`UnitContext::entries`]) → node index.
    pub node_of_entry: Vec<usize>,
    pub index: HashMap<String, usize>,
}

impl Tree {
    /// The tree of `context`: each entry under the module construct.json names, those modules
    /// under theirs, each node once. A chain that loops or runs deeper than 256 stops there.
    pub(crate) fn of(context: &UnitContext) -> Tree {
        let mut tree = Tree::default();
        for entry in &context.entries {
            let node = tree.add(entry, context);
            tree.node_of_entry.push(node);
        }
        tree
    }

    fn add(&mut self, name: &str, context: &UnitContext) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        // The chain of modules not yet in the tree, innermost first.
        let mut chain = vec![name.to_string()];
        let mut parent = None;
        while let Some(up) = chain.last().and_then(|n| context.parent.get(n)) {
            if let Some(&i) = self.index.get(up.as_str()) {
                parent = Some(i);
                break;
            }
            if chain.len() > 256 || chain.contains(up) {
                break;
            }
            chain.push(up.clone());
        }
        let mut parent = parent.map_or(-1, |p| p as i64);
        for name in chain.into_iter().rev() {
            let i = self.names.len();
            self.index.insert(name.clone(), i);
            self.names.push(name);
            self.parents.push(parent);
            parent = i as i64;
        }
        parent as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_come_before_the_entries_that_ran_in_them() {
        let mut context = UnitContext {
            entries: vec![
                "Functional.linear.0.forward".into(),
                "Module.a.Block.forward.0".into(),
                "Functional.relu.0.forward".into(),
            ],
            ..Default::default()
        };
        for (child, parent) in [
            ("Functional.linear.0.forward", "Module.a.Block.forward.0"),
            ("Module.a.Block.forward.0", "Module.root.Model.forward.0"),
            ("Functional.relu.0.forward", "Module.root.Model.forward.0"),
        ] {
            context.parent.insert(child.into(), parent.into());
        }
        let tree = Tree::of(&context);
        assert_eq!(
            tree.names,
            [
                "Module.root.Model.forward.0",
                "Module.a.Block.forward.0",
                "Functional.linear.0.forward",
                "Functional.relu.0.forward"
            ]
        );
        assert_eq!(tree.parents, [-1, 0, 1, 0]);
        assert_eq!(tree.node_of_entry, [2, 1, 3]);
        // A loop in construct.json stops the chain instead of running for ever.
        context.parent.insert("Module.root.Model.forward.0".into(), "Functional.linear.0.forward".into());
        assert_eq!(Tree::of(&context).names.len(), 4);
    }
}
