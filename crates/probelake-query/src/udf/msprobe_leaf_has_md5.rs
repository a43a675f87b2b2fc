//! `msprobe_leaf_has_md5(leaf_json)`: whether a leaf carries an `md5` field.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{AsArray, BooleanArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

use crate::msprobe::rows::side_of;

/// Whether the leaf (or the tensor of a P2POp record) has an `md5` field: a statistics dump
/// with one is compared in md5 mode.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MsprobeLeafHasMd5 {
    signature: Signature,
}

impl Default for MsprobeLeafHasMd5 {
    fn default() -> Self {
        Self::new()
    }
}

impl MsprobeLeafHasMd5 {
    /// The function.
    pub fn new() -> Self {
        MsprobeLeafHasMd5 { signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for MsprobeLeafHasMd5 {
    fn name(&self) -> &str {
        "msprobe_leaf_has_md5"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let [leaf] = take_function_args(self.name(), arrays)?;
        let out: BooleanArray = leaf.as_string::<i32>().iter().map(|l| l.map(|l| side_of("", "", l).has_md5)).collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "Whether a leaf has an md5 field (a statistics dump with one is compared in md5 mode).",
                "msprobe_leaf_has_md5(leaf_json)",
            )
            .with_sql_example("SELECT bool_or(msprobe_leaf_has_md5(msprobe_leaf_json(kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw))) FROM dump;")
            .with_argument("leaf_json", "the leaf as JSON (`msprobe_leaf_json`)")
            .build()
        }))
    }
}
