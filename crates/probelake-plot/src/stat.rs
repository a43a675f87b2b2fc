//! msprobe's four statistics, as chart axes.

use std::fmt;
use std::str::FromStr;

/// One of msprobe's statistics of a tensor (the `max`, `min`, `mean`, `norm` columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stat {
    /// The largest element.
    Max,
    /// The smallest element.
    Min,
    /// The mean of the elements.
    Mean,
    /// The L2 norm of the elements.
    Norm,
}

impl Stat {
    /// All four, in msprobe's order.
    pub const ALL: [Stat; 4] = [Stat::Max, Stat::Min, Stat::Mean, Stat::Norm];

    /// The column of the `dump` table.
    pub fn column(self) -> &'static str {
        match self {
            Stat::Max => "max",
            Stat::Min => "min",
            Stat::Mean => "mean",
            Stat::Norm => "norm",
        }
    }

    /// Position in [`Stat::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// How an axis names it, with what its values measure.
    pub fn axis_label(self) -> &'static str {
        match self {
            Stat::Max => "max (largest element)",
            Stat::Min => "min (smallest element)",
            Stat::Mean => "mean (of the elements)",
            Stat::Norm => "norm (L2, ‖x‖₂)",
        }
    }
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.column())
    }
}

impl FromStr for Stat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "max" => Ok(Stat::Max),
            "min" => Ok(Stat::Min),
            "mean" => Ok(Stat::Mean),
            "norm" | "l2norm" => Ok(Stat::Norm),
            _ => Err(format!("`{s}` is not a statistic: use max, min, mean or norm")),
        }
    }
}

/// `text` as a single-quoted SQL literal.
pub(crate) fn sql_string(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The names in `candidates` closest to `wanted` (by edit distance, then by containing it),
/// best first, at most `n`.
pub(crate) fn nearest(wanted: &str, candidates: &[String], n: usize) -> Vec<String> {
    let mut scored: Vec<(usize, &String)> =
        candidates.iter().map(|c| (if c.contains(wanted) { 0 } else { edit_distance(wanted, c) }, c)).collect();
    scored.sort();
    scored.into_iter().take(n).map(|(_, c)| c.clone()).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_parse_and_name_their_columns() {
        for s in Stat::ALL {
            assert_eq!(s.column().parse::<Stat>(), Ok(s));
            assert_eq!(Stat::ALL[s.index()], s);
        }
        assert_eq!("L2norm".parse::<Stat>(), Ok(Stat::Norm));
        assert!("median".parse::<Stat>().unwrap_err().contains("max, min, mean or norm"));
    }

    #[test]
    fn near_names_come_first() {
        let ops = ["Functional.linear", "Functional.layer_norm", "Torch.matmul"].map(String::from);
        assert_eq!(nearest("Functional.layernorm", &ops, 1), ["Functional.layer_norm"]);
        assert_eq!(nearest("matmul", &ops, 1), ["Torch.matmul"]);
        assert_eq!(sql_string("it's"), "'it''s'");
    }
}
