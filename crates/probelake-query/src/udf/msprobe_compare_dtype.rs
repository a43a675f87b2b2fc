//! `msprobe_compare_dtype(item, name, leaf_json)`: the dtype cell msprobe compare shows for a leaf.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

use crate::compare::rows::dtype_of;

/// The `NPU Dtype` / `Bench Dtype` cell of a leaf (synthetic for non-tensors: `int`,
/// `torch.Size`, …); NULL for a JSON null leaf (shown `N/A`). msprobe's dtype gate compares these.
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
        MsprobeCompareDtype {
            signature: Signature::exact(vec![DataType::Utf8, DataType::Utf8, DataType::Utf8], Volatility::Immutable),
        }
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
        let [item, name, leaf] = take_function_args(self.name(), arrays)?;
        let (item, name, leaf) = (item.as_string::<i32>(), name.as_string::<i32>(), leaf.as_string::<i32>());
        // A NULL name gives NULL, as the whole side would.
        let out: StringArray =
            (0..item.len()).map(|i| at(name, i).and_then(|_| dtype_of(at(item, i)?, at(leaf, i)?))).collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "The dtype cell msprobe compare shows for a leaf (synthetic for non-tensors); NULL for a null leaf.",
                "msprobe_compare_dtype(item, name, leaf_json)",
            )
            .with_sql_example("SELECT item, msprobe_compare_dtype(item, name, msprobe_leaf_json(kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw)) FROM dump LIMIT 5;")
            .with_argument("item", "the `item` column")
            .with_argument("name", "the `name` column")
            .with_argument("leaf_json", "the leaf as JSON (`msprobe_leaf_json`)")
            .build()
        }))
    }
}
