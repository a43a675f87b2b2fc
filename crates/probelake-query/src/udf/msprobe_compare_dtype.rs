//! `msprobe_compare_dtype(item, name, leaf_json)` or `msprobe_compare_dtype(item, name, kind,
//! dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw)`: the dtype
//! cell msprobe compare shows for a leaf.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::exec_err;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

use crate::msprobe::leaf_side::LeafArrays;
use crate::msprobe::rows::dtype_of;

/// The `NPU Dtype` / `Bench Dtype` cell of a leaf (synthetic for non-tensors: `int`,
/// `torch.Size`, …); NULL for a JSON null leaf (shown `N/A`). msprobe's dtype gate compares these.
///
/// Given the leaf's `dump` columns in place of its JSON, it reads tensors and plain scalars
/// (most leaves) straight from the columns, without rendering and parsing their JSON; the cell
/// is the same either way.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MsprobeCompareDtype {
    signature: Signature,
}

impl Default for MsprobeCompareDtype {
    fn default() -> Self {
        Self::new()
    }
}

impl MsprobeCompareDtype {
    /// The function.
    pub fn new() -> Self {
        let json = TypeSignature::Exact(vec![DataType::Utf8; 3]);
        MsprobeCompareDtype { signature: Signature::one_of(vec![json, TypeSignature::Any(14)], Volatility::Immutable) }
    }
}

/// Row `i` of a string column.
fn at(a: &StringArray, i: usize) -> Option<&str> {
    a.is_valid(i).then(|| a.value(i))
}

impl ScalarUDFImpl for MsprobeCompareDtype {
    fn name(&self) -> &str {
        "msprobe_compare_dtype"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let (item, name) = match arrays.as_slice() {
            [item, name, ..] => (cast(item, &DataType::Utf8)?, cast(name, &DataType::Utf8)?),
            _ => return exec_err!("msprobe_compare_dtype takes 3 or 14 arguments"),
        };
        let (item, name) = (item.as_string::<i32>(), name.as_string::<i32>());
        // A NULL name gives NULL, as the whole side would.
        let out: StringArray = match &arrays[2..] {
            [leaf] => {
                let leaf = cast(leaf, &DataType::Utf8)?;
                let leaf = leaf.as_string::<i32>();
                (0..item.len()).map(|i| at(name, i).and_then(|_| dtype_of(at(item, i)?, at(leaf, i)?))).collect()
            }
            columns => {
                let Ok(columns) = <&[ArrayRef; 12]>::try_from(columns) else {
                    return exec_err!("msprobe_compare_dtype takes 3 or 14 arguments, not {}", arrays.len());
                };
                let leaves = LeafArrays::from_columns(columns)?;
                // Most cells are a tensor's `dtype` column, borrowed into the builder.
                let mut out = StringBuilder::with_capacity(item.len(), item.len() * 16);
                for i in 0..item.len() {
                    let leaf = leaves.get(i);
                    out.append_option(at(name, i).and(at(item, i)).and_then(|item| leaf.compare_dtype(item)));
                }
                out.finish()
            }
        };
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "The dtype cell msprobe compare shows for a leaf (synthetic for non-tensors); NULL for a null leaf. \
                 Given the leaf's columns in place of its JSON, the same cell without rendering the JSON.",
                "msprobe_compare_dtype(item, name, leaf_json)",
            )
            .with_sql_example("SELECT item, msprobe_compare_dtype(item, name, kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw) FROM dump LIMIT 5;")
            .with_argument("item", "the `item` column")
            .with_argument("name", "the `name` column")
            .with_argument(
                "leaf_json",
                "the leaf as JSON (`msprobe_leaf_json`), or in its place the twelve `dump` columns `msprobe_leaf_json` takes",
            )
            .build()
        }))
    }
}
