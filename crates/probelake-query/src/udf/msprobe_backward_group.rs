//! `msprobe_backward_group(name)`: the group msprobe renumbers a backward entry in.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

use crate::msprobe::rows::KeyRules;

/// The entry name without its last two segments (msprobe's `op_no_number`) for a backward
/// entry; NULL for any other entry.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MsprobeBackwardGroup {
    signature: Signature,
}

impl Default for MsprobeBackwardGroup {
    fn default() -> Self {
        Self::new()
    }
}

impl MsprobeBackwardGroup {
    /// The function.
    pub fn new() -> Self {
        MsprobeBackwardGroup { signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for MsprobeBackwardGroup {
    fn name(&self) -> &str {
        "msprobe_backward_group"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let [name] = take_function_args(self.name(), arrays)?;
        // Borrowed prefixes of the names, copied once into the result.
        let mut rules = KeyRules::default();
        let out: StringArray = name.as_string::<i32>().iter().map(|n| rules.backward_group(n?)).collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "For a backward entry, its name without the call number and direction (msprobe's op_no_number); NULL otherwise.",
                "msprobe_backward_group(name)",
            )
            .with_sql_example("SELECT msprobe_backward_group('Functional.relu.3.backward');  -- Functional.relu")
            .with_argument("name", "the `name` column (the entry key)")
            .build()
        }))
    }
}
