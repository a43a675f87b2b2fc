//! `is_finite_stats(max, min, mean, norm)`: no NaN or infinity among a leaf's statistics.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

/// `false` when any argument is NaN or ±infinity, `true` otherwise (NULLs, i.e. statistics
/// msprobe did not compute, are ignored); NULL when every argument is NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IsFiniteStats {
    signature: Signature,
}

impl Default for IsFiniteStats {
    fn default() -> Self {
        Self::new()
    }
}

impl IsFiniteStats {
    /// The function.
    pub fn new() -> Self {
        IsFiniteStats { signature: Signature::exact(vec![DataType::Float64; 4], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for IsFiniteStats {
    fn name(&self) -> &str {
        "is_finite_stats"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let cols: Vec<_> = arrays.iter().map(|a| a.as_primitive::<Float64Type>()).collect();
        let rows = cols.first().map_or(0, |c| c.len());
        let out: BooleanArray = (0..rows)
            .map(|i| {
                let mut any = false;
                for c in &cols {
                    if c.is_valid(i) {
                        any = true;
                        if !c.value(i).is_finite() {
                            return Some(false);
                        }
                    }
                }
                any.then_some(true)
            })
            .collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "false when any of the statistics is NaN or infinite; NULLs are ignored; NULL if all are NULL.",
                "is_finite_stats(max, min, mean, norm)",
            )
            .with_sql_example("SELECT item FROM dump WHERE NOT is_finite_stats(max, min, mean, norm);")
            .with_argument("max, min, mean, norm", "a leaf's statistics")
            .build()
        }))
    }
}
