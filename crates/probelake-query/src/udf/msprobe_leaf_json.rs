//! `msprobe_leaf_json(kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name,
//! value, raw)`: a `dump` row's leaf as the dump.json held it.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use probelake_format::json::Layout;
use probelake_format::msprobe::Leaf;

use super::{from_array, to_arrays, DOC_SECTION};

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

/// An argument cast to the type the renderer reads (Parquet may hand out views or dictionaries).
fn as_type(a: &ArrayRef, t: &DataType) -> Result<ArrayRef> {
    Ok(if a.data_type() == t { Arc::clone(a) } else { cast(a, t)? })
}

/// Row `i` of a Utf8 column, borrowed.
fn text(a: &ArrayRef, i: usize) -> Option<Cow<'_, str>> {
    let a = a.as_string::<i32>();
    a.is_valid(i).then(|| Cow::Borrowed(a.value(i)))
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
        let [kind, dtype, shape, max, min, mean, norm, requires_grad, md5, data_name, value, raw] =
            take_function_args(self.name(), arrays)?;
        let utf8 = |a: &ArrayRef| as_type(a, &DataType::Utf8);
        let f64s = |a: &ArrayRef| as_type(a, &DataType::Float64);
        let (kind, dtype, md5, data_name, value, raw) =
            (utf8(&kind)?, utf8(&dtype)?, utf8(&md5)?, utf8(&data_name)?, utf8(&value)?, utf8(&raw)?);
        let shape = as_type(&shape, &DataType::List(Arc::new(Field::new("item", DataType::Int64, true))))?;
        let stats = [f64s(&max)?, f64s(&min)?, f64s(&mean)?, f64s(&norm)?];
        let requires_grad = as_type(&requires_grad, &DataType::Boolean)?;
        let (shape, requires_grad) = (shape.as_list::<i32>(), requires_grad.as_boolean());
        let stats = stats.each_ref().map(|a| a.as_primitive::<Float64Type>());
        let mut buf = Vec::new();
        let out: StringArray = (0..kind.len())
            .map(|i| {
                let leaf = Leaf {
                    kind: text(&kind, i),
                    dtype: text(&dtype, i),
                    shape: shape.is_valid(i).then(|| {
                        shape.value(i).as_primitive::<Int64Type>().iter().map(|d| d.unwrap_or_default()).collect()
                    }),
                    stats: stats.map(|a| a.is_valid(i).then(|| a.value(i))),
                    requires_grad: requires_grad.is_valid(i).then(|| requires_grad.value(i)),
                    md5: text(&md5, i),
                    data_name: text(&data_name, i),
                    value: text(&value, i),
                    raw: text(&raw, i),
                };
                buf.clear();
                leaf.render(&mut buf, Layout { indent: None }, 0);
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
