//! `item_slot(item, name)`: which slot of its entry an item belongs to.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{from_array, to_arrays, DOC_SECTION};

/// The first segment of an item name after its entry name: `input`, `output`, `parameters`,
/// a parameter name for `parameters_grad` entries; NULL when `item` does not start with
/// `name.` (tensor-mode items named after their file keep the same prefix).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ItemSlot {
    signature: Signature,
}

impl Default for ItemSlot {
    fn default() -> Self {
        Self::new()
    }
}

impl ItemSlot {
    /// The function.
    pub fn new() -> Self {
        ItemSlot { signature: Signature::exact(vec![DataType::Utf8, DataType::Utf8], Volatility::Immutable) }
    }
}

/// The scalar rule.
pub fn item_slot<'a>(item: &'a str, name: &str) -> Option<&'a str> {
    let rest = item.strip_prefix(name)?.strip_prefix('.')?;
    rest.split('.').next()
}

impl ScalarUDFImpl for ItemSlot {
    fn name(&self) -> &str {
        "item_slot"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (arrays, scalar) = to_arrays(&args.args, args.number_rows)?;
        let [item, name] = take_function_args(self.name(), arrays)?;
        let (item, name) = (item.as_string::<i32>(), name.as_string::<i32>());
        let out: StringArray = item.iter().zip(name.iter()).map(|(i, n)| item_slot(i?, n?)).collect();
        from_array(Arc::new(out), scalar)
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        Some(DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION,
                "The slot of an item inside its entry: input, output, parameters, or a parameter name.",
                "item_slot(item, name)",
            )
            .with_sql_example(
                "SELECT item_slot('Functional.linear.0.forward.output.0', 'Functional.linear.0.forward');  -- output",
            )
            .with_argument("item", "the `item` column")
            .with_argument("name", "the `name` column (the entry key)")
            .build()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::item_slot;

    #[test]
    fn slots() {
        assert_eq!(item_slot("A.b.0.forward.input.0", "A.b.0.forward"), Some("input"));
        assert_eq!(item_slot("M.fc.Linear.parameters_grad.0.weight", "M.fc.Linear.parameters_grad.0"), Some("weight"));
        assert_eq!(item_slot("X.y", "A.b"), None);
    }
}
