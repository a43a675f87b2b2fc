//! `rel_err(target, golden)`: msprobe's relative error of two statistics.

use std::sync::{Arc, OnceLock};

pub use crate::msprobe::rel_err::rel_err;
use datafusion::arrow::array::{AsArray, Float64Array};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

/// msprobe's relative error as a fraction: `|(target - golden) / golden|`, `0` when the two
/// values are equal (NaN = NaN and inf = inf included, as msprobe compares their text), and
/// NULL where msprobe writes a token instead of a number (`Nan`, `inf`, `N/A`: either side
/// NULL, NaN or infinite, or golden 0). So `rel_err(a, b) > 0.5` is exactly msprobe's
/// first-divergence (`-da`) test, which never counts those tokens.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct RelErr {
    signature: Signature,
}

impl Default for RelErr {
    fn default() -> Self {
        Self::new()
    }
}

impl RelErr {
    /// The function.
    pub fn new() -> Self {
        RelErr { signature: Signature::exact(vec![DataType::Float64, DataType::Float64], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for RelErr {
    fn name(&self) -> &str {
        "rel_err"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let [t, g] = take_function_args(self.name(), arrays)?;
        let (t, g) = (t.as_primitive::<Float64Type>(), g.as_primitive::<Float64Type>());
        let out: Float64Array = t.iter().zip(g.iter()).map(|(t, g)| rel_err(t?, g?)).collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "msprobe's relative error |(target - golden) / golden| as a fraction; 0 when equal \
                 (NaN = NaN, inf = inf); NULL where msprobe prints a token (NaN, inf, golden 0, NULL).",
                "rel_err(target, golden)",
            )
            .with_sql_example("SELECT rel_err(2.0, 2.01);  -- 0.004975124378109347")
            .with_argument("target", "the target (NPU) run's statistic")
            .with_argument("golden", "the golden (bench) run's statistic")
            .build()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::rel_err;

    #[test]
    fn follows_msprobe() {
        assert_eq!(rel_err(2.0, 2.01), Some((2.0f64 - 2.01).abs() / 2.01));
        assert_eq!(rel_err(f64::NAN, f64::NAN), Some(0.0));
        assert_eq!(rel_err(f64::INFINITY, f64::INFINITY), Some(0.0));
        assert_eq!(rel_err(1.0, 0.0), None);
        assert_eq!(rel_err(f64::NAN, 1.0), None);
        assert_eq!(rel_err(1.0, f64::NEG_INFINITY), None);
        assert_eq!(rel_err(3.0, 2.0), Some(0.5));
    }
}
