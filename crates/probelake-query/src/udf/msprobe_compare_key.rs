//! `msprobe_compare_key(name, item, backward_order)`: the key `msprobe compare` joins two dumps on.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray, Int64Array, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

use crate::msprobe::rows::KeyRules;

/// The item name, where a backward entry's call number is replaced by its order among the
/// backward entries of the same op (msprobe's renumbering); NULL for an entry msprobe drops
/// (no forward/backward/parameters_grad in its last two segments).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MsprobeCompareKey {
    signature: Signature,
}

impl Default for MsprobeCompareKey {
    fn default() -> Self {
        Self::new()
    }
}

impl MsprobeCompareKey {
    /// The function.
    pub fn new() -> Self {
        MsprobeCompareKey {
            signature: Signature::exact(vec![DataType::Utf8, DataType::Utf8, DataType::Int64], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for MsprobeCompareKey {
    fn name(&self) -> &str {
        "msprobe_compare_key"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let [name, item, order] = take_function_args(self.name(), arrays)?;
        let (name, item) = (name.as_string::<i32>(), item.as_string::<i32>());
        let order = order.as_any().downcast_ref::<Int64Array>();
        // Keys are about as long as items, and are written straight into the column.
        // Sized from this slice's own bytes: `values()` is the whole buffer of a sliced array.
        let offsets = item.value_offsets();
        let item_bytes = offsets.last().zip(offsets.first()).map_or(0, |(end, start)| (end - start) as usize);
        let mut out = StringBuilder::with_capacity(item.len(), item_bytes + item.len() * 2);
        let mut rules = KeyRules::default();
        for i in 0..name.len() {
            let order = order.filter(|o| !o.is_null(i)).map_or(0, |o| o.value(i));
            // The builder takes every write; a key is ended by appending nothing more to it.
            let keyed = name.is_valid(i)
                && item.is_valid(i)
                && rules.write_compare_key(&mut out, name.value(i), item.value(i), order) == Ok(true);
            if keyed {
                out.append_value("");
            } else {
                out.append_null();
            }
        }
        from_array(Arc::new(out.finish()), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "The key msprobe compare joins on: the item, with backward call numbers replaced by backward_order; NULL for entries msprobe drops.",
                "msprobe_compare_key(name, item, backward_order)",
            )
            .with_sql_example("SELECT msprobe_compare_key('Functional.relu.3.backward', 'Functional.relu.3.backward.output.0', 0);  -- Functional.relu.0.backward.output.0")
            .with_argument("name", "the `name` column (the entry key)")
            .with_argument("item", "the `item` column")
            .with_argument("backward_order", "0-based order of the entry among the backward entries of its `msprobe_backward_group` (file order); ignored for other entries")
            .build()
        }))
    }
}
