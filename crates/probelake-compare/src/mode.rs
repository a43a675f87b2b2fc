//! Which table msprobe compare writes.

/// Which table msprobe writes (docs/msprobe-compare.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareMode {
    /// `task: statistics` without md5 fields: diffs of Max/Min/Mean/Norm.
    Statistics,
    /// `task: statistics` with `md5` fields: CRC-32 equality.
    Md5,
    /// `task: tensor`: metrics over the dumped tensors.
    Tensor,
}
