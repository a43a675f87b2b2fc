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

impl CompareMode {
    /// The word the mode is named by (`--mode`'s).
    pub fn word(self) -> &'static str {
        match self {
            CompareMode::Statistics => "statistics",
            CompareMode::Md5 => "md5",
            CompareMode::Tensor => "tensor",
        }
    }
}

impl std::fmt::Display for CompareMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}
