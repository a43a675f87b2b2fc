//! Both sides' leaves matched as msprobe compare matches them: a DataFusion plan over two
//! datasets, or the same rules in memory for msprobe files read in place.

pub(crate) mod fuzzy;
pub(crate) mod in_memory;
pub(crate) mod keyed;
pub(crate) mod leaves;
pub(crate) mod load;
pub(crate) mod mapping;
pub(crate) mod plan;
pub(crate) mod prepared;
