//! `msprobe_leaf_json(kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name,
//! value, raw)`: a `dump` row's leaf as the dump.json held it.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};
use crate::msprobe::leaf_side::LeafArrays;

/// The leaf's JSON text (one-line layout), rebuilt from the typed columns by the format crate's
/// own renderer, which the import checked to be byte-exact (`raw` where the columns alone would
/// lose something). `msprobe compare` reads its cells from this text.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MsprobeLeafJson {
    signature: Signature,
}

impl Default for MsprobeLeafJson {
    fn default() -> Self {
        Self::new()
    }
}

impl MsprobeLeafJson {
    /// The function.
    pub fn new() -> Self {
        MsprobeLeafJson { signature: Signature::any(12, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for MsprobeLeafJson {
    fn name(&self) -> &str {
        "msprobe_leaf_json"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let columns: [ArrayRef; 12] = take_function_args(self.name(), arrays)?;
        let leaves = LeafArrays::from_columns(&columns)?;
        let mut buf = Vec::new();
        let out: StringArray = (0..leaves.len())
            .map(|i| {
                buf.clear();
                leaves.get(i).render(&mut buf);
                Some(String::from_utf8_lossy(&buf).into_owned())
            })
            .collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "A dump row's leaf as the dump.json held it (one line), rebuilt from the typed columns and raw.",
                "msprobe_leaf_json(kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw)",
            )
            .with_sql_example(
                "SELECT item, msprobe_leaf_json(kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw) FROM dump LIMIT 3;",
            )
            .with_argument("kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw", "the `dump` columns of the same names")
            .build()
        }))
    }
}
