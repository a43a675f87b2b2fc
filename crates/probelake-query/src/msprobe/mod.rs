//! msprobe's per-leaf rules, which the SQL functions (`crate::udf`) and `probelake-compare`
//! both apply: a leaf's side of a compare row (its cells, from its JSON or its typed columns),
//! the join key with backward renumbering, the dtype gate, the relative error of two statistics, Python's text for numbers, and the
//! first-divergence search of one unit pair that the `first_divergence` table function runs.

pub mod crc;
pub mod divergence;
pub mod leaf_side;
pub mod pyfmt;
pub mod rel_err;
pub mod rows;
