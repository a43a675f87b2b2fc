//! `msprobe_compare_state(name, section)`: msprobe's order of a leaf inside its entry.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{AsArray, Int32Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

use crate::msprobe::rows::KeyRules;

/// 0 for inputs, 1 `parameters`, 2 `output`, 3 fields of a `parameters_grad` entry; NULL for an
/// entry msprobe drops.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MsprobeCompareState {
    signature: Signature,
}

impl Default for MsprobeCompareState {
    fn default() -> Self {
        Self::new()
    }
}

impl MsprobeCompareState {
    /// The function.
    pub fn new() -> Self {
        MsprobeCompareState { signature: Signature::exact(vec![DataType::Utf8, DataType::Utf8], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for MsprobeCompareState {
    fn name(&self) -> &str {
        "msprobe_compare_state"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let [name, section] = take_function_args(self.name(), arrays)?;
        let (name, section) = (name.as_string::<i32>(), section.as_string::<i32>());
        let mut rules = KeyRules::default();
        let out: Int32Array =
            name.iter().zip(section.iter()).map(|(n, s)| rules.compare_state(n?, s.unwrap_or_default())).collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "msprobe compare's order of a leaf inside its entry: 0 input, 1 parameters, 2 output, 3 parameters_grad; NULL for entries msprobe drops.",
                "msprobe_compare_state(name, section)",
            )
            .with_sql_example("SELECT msprobe_compare_state('Functional.linear.0.forward', 'output');  -- 2")
            .with_argument("name", "the `name` column (the entry key)")
            .with_argument("section", "the `section` column")
            .build()
        }))
    }
}
