//! `shape_numel(shape)`: the number of elements of a tensor shape.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, Int64Array};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type};
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

/// The product of the dimensions (`1` for a 0-dim shape `[]`); NULL for a NULL shape or
/// when the product overflows a BIGINT.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ShapeNumel {
    signature: Signature,
}

impl Default for ShapeNumel {
    fn default() -> Self {
        Self::new()
    }
}

impl ShapeNumel {
    /// The function.
    pub fn new() -> Self {
        let list = DataType::List(Arc::new(Field::new("item", DataType::Int64, true)));
        ShapeNumel { signature: Signature::exact(vec![list], Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for ShapeNumel {
    fn name(&self) -> &str {
        "shape_numel"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let [shape] = take_function_args(self.name(), arrays)?;
        let lists = shape.as_list::<i32>();
        let out: Int64Array = (0..lists.len())
            .map(|i| {
                if lists.is_null(i) {
                    return None;
                }
                let dims = lists.value(i);
                let dims = dims.as_primitive::<Int64Type>();
                dims.iter().try_fold(1i64, |acc, d| acc.checked_mul(d?))
            })
            .collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "Number of elements of a shape; 1 for a 0-dim tensor.",
                "shape_numel(shape)",
            )
            .with_sql_example("SELECT item, shape_numel(shape) FROM dump ORDER BY 2 DESC LIMIT 5;")
            .with_argument("shape", "a `shape` column (list of BIGINT)")
            .build()
        }))
    }
}
