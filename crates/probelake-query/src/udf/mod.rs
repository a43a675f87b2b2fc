//! SQL functions for msprobe data, one per file with its documentation beside it.
//!
//! | function | what it answers |
//! |---|---|
//! | [`rel_err`](rel_err::RelErr) | msprobe's relative error of two statistics |
//! | [`is_finite_stats`](is_finite_stats::IsFiniteStats) | whether max/min/mean/norm are all finite |
//! | [`shape_numel`](shape_numel::ShapeNumel) | number of elements of a shape |
//! | [`item_slot`](item_slot::ItemSlot) | `input`, `output`, `parameters`, … of an item name |
//! | [`msprobe_leaf_json`](msprobe_leaf_json::MsprobeLeafJson) | a leaf as the dump.json held it |
//! | [`msprobe_compare_key`](msprobe_compare_key::MsprobeCompareKey) | msprobe compare's join key (backward renumbering) |
//! | [`msprobe_backward_group`](msprobe_backward_group::MsprobeBackwardGroup) | the group backward entries are renumbered in |
//! | [`msprobe_compare_state`](msprobe_compare_state::MsprobeCompareState) | a leaf's order inside its entry |
//! | [`msprobe_compare_dtype`](msprobe_compare_dtype::MsprobeCompareDtype) | the dtype cell msprobe compare shows |
//! | [`msprobe_leaf_has_md5`](msprobe_leaf_has_md5::MsprobeLeafHasMd5) | whether a leaf has an md5 field |
//!
//! and one table function, [`first_divergence`](first_divergence::FirstDivergenceFunction):
//! the first diverging entry of every unit pair of two runs.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF};

pub mod first_divergence;
pub mod is_finite_stats;
pub mod item_slot;
pub mod msprobe_backward_group;
pub mod msprobe_compare_dtype;
pub mod msprobe_compare_key;
pub mod msprobe_compare_state;
pub mod msprobe_leaf_has_md5;
pub mod msprobe_leaf_json;
pub mod rel_err;
pub mod shape_numel;

/// Every probelake SQL function.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Arc::new(ScalarUDF::from(rel_err::RelErr::new())),
        Arc::new(ScalarUDF::from(is_finite_stats::IsFiniteStats::new())),
        Arc::new(ScalarUDF::from(shape_numel::ShapeNumel::new())),
        Arc::new(ScalarUDF::from(item_slot::ItemSlot::new())),
        Arc::new(ScalarUDF::from(msprobe_leaf_json::MsprobeLeafJson::new())),
        Arc::new(ScalarUDF::from(msprobe_compare_key::MsprobeCompareKey::new())),
        Arc::new(ScalarUDF::from(msprobe_backward_group::MsprobeBackwardGroup::new())),
        Arc::new(ScalarUDF::from(msprobe_compare_state::MsprobeCompareState::new())),
        Arc::new(ScalarUDF::from(msprobe_compare_dtype::MsprobeCompareDtype::new())),
        Arc::new(ScalarUDF::from(msprobe_leaf_has_md5::MsprobeLeafHasMd5::new())),
    ]
}

/// The documentation section all probelake functions are listed under.
pub(crate) const DOC_SECTION: datafusion::logical_expr::DocSection =
    datafusion::logical_expr::DocSection { include: true, label: "msprobe functions", description: None };

/// Arguments as arrays of one length, and whether all of them were scalars (then the result
/// is turned back into a scalar).
pub(crate) fn to_arrays(args: &[ColumnarValue], rows: usize) -> Result<(Vec<ArrayRef>, bool)> {
    let all_scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let len = if all_scalar { 1 } else { rows };
    let arrays = args.iter().map(|a| a.to_array(len)).collect::<Result<Vec<_>>>()?;
    Ok((arrays, all_scalar))
}

/// Wraps a result array, as a scalar when every argument was one.
pub(crate) fn from_array(array: ArrayRef, all_scalar: bool) -> Result<ColumnarValue> {
    if all_scalar && array.len() == 1 {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?))
    } else {
        Ok(ColumnarValue::Array(array))
    }
}
