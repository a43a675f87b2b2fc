//! How pandas types msprobe's statistics columns, which decides whether a JSON integer
//! statistic prints as `57` or as `57.0`.
//!
//! msprobe puts each side's four statistics into the table with
//! `result[["NPU max", "NPU min", "NPU mean", "NPU l2norm"]] = list_of_rows`. pandas turns the
//! rows into a DataFrame, inferring each column's dtype from its Python objects (all `int` →
//! int64; `int` and `float` → float64; any `str` — which includes `None`, `Nan`, `True` and
//! an unmatched row's `N/A`, all strings by then — → object, values untouched), and then takes
//! `.values` of the four columns together: when all four are numeric they share one dtype
//! (float64 as soon as one is float64), otherwise the array is object and each column keeps
//! its own values. So an integer statistic becomes a float when its column holds a float and
//! no string, or when all four columns of its side are numeric and one holds a float. The
//! difference cells are computed from these converted values (`str(57.0) != str(57)`).
//! Observed with msprobe 26.2 / pandas 3.1 on a module-level (L0) dump, where no scalar
//! arguments put strings into the columns: `Module.embed.Embedding.forward.0.input.0` max
//! `57.0`.

use probelake_query::msprobe::pyfmt::PyVal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Object,
}

fn kind_of(v: &PyVal) -> Kind {
    match v {
        PyVal::Int(text) if text.parse::<i64>().is_ok() => Kind::Int,
        PyVal::Float(_) => Kind::Float,
        // Beyond int64 pandas keeps Python ints as objects; everything else is a str by then.
        _ => Kind::Object,
    }
}

/// The pandas dtypes of a side's four statistic columns over the rows added so far; the rows
/// of a table can be added in parts and the parts merged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ColumnKinds {
    kinds: [Kind; 4],
    any: bool,
}

impl Default for ColumnKinds {
    fn default() -> Self {
        ColumnKinds { kinds: [Kind::Int; 4], any: false }
    }
}

fn widest(a: Kind, b: Kind) -> Kind {
    match (a, b) {
        (Kind::Object, _) | (_, Kind::Object) => Kind::Object,
        (Kind::Float, _) | (_, Kind::Float) => Kind::Float,
        _ => Kind::Int,
    }
}

impl ColumnKinds {
    /// Adds a row's statistics, `None` for an unmatched row.
    pub(crate) fn add(&mut self, row: Option<&[PyVal; 4]>) {
        self.any = true;
        for (i, kind) in self.kinds.iter_mut().enumerate() {
            *kind = widest(*kind, row.map_or(Kind::Object, |r| kind_of(&r[i])));
        }
    }

    /// The kinds over the rows of both.
    pub(crate) fn merge(self, other: ColumnKinds) -> ColumnKinds {
        ColumnKinds {
            kinds: std::array::from_fn(|i| widest(self.kinds[i], other.kinds[i])),
            any: self.any || other.any,
        }
    }

    /// Which columns turn their integers into floats.
    pub(crate) fn floats(&self) -> [bool; 4] {
        if !self.any {
            return [false; 4];
        }
        let all_numeric = self.kinds.iter().all(|k| *k != Kind::Object);
        let any_float = self.kinds.contains(&Kind::Float);
        self.kinds.map(|k| k == Kind::Float || (all_numeric && any_float))
    }
}

/// The statistics as the table holds them: integers of float columns as floats.
pub(crate) fn as_table(stats: &[PyVal; 4], floats: [bool; 4]) -> [PyVal; 4] {
    std::array::from_fn(|i| match &stats[i] {
        PyVal::Int(text) if floats[i] => {
            text.parse::<i64>().map_or_else(|_| stats[i].clone(), |x| PyVal::Float(x as f64))
        }
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of a side's four statistic columns turn their integers into floats. `rows` yields
    /// each row's statistics, `None` for an unmatched row (the string `N/A` in all four).
    fn float_columns<'a>(rows: impl Iterator<Item = Option<&'a [PyVal; 4]>>) -> [bool; 4] {
        let mut kinds = ColumnKinds::default();
        rows.for_each(|row| kinds.add(row));
        kinds.floats()
    }

    fn int(x: i64) -> PyVal {
        PyVal::Int(x.to_string())
    }

    fn floats(rows: &[[PyVal; 4]]) -> [bool; 4] {
        float_columns(rows.iter().map(Some))
    }

    /// The cases were run through pandas 3.1 (`df[cols] = rows`, then `to_csv`).
    #[test]
    fn follows_pandas() {
        let f = PyVal::Float;
        let s = |t: &str| PyVal::Str(t.into());
        // All numeric, one float column: every column is float64 (57 -> 57.0).
        assert_eq!(floats(&[[int(57), int(12), f(1.5), f(2.0)], [f(1.0), f(2.0), f(3.0), f(4.0)]]), [true; 4]);
        // All integers: int64, printed as integers.
        assert_eq!(floats(&[[int(57), int(12), int(3), int(2)], [int(1), int(2), int(3), int(4)]]), [false; 4]);
        // A string somewhere: object; a column of ints and floats still becomes float64.
        assert_eq!(
            floats(&[[int(57), int(12), int(3), int(2)], [int(1), int(2), f(3.5), s("N/A")]]),
            [false, false, true, false]
        );
        assert_eq!(
            floats(&[[int(57), int(12), f(1.5), f(2.0)], [f(1.0), f(2.0), f(3.0), s("Nan")]]),
            [true, true, true, false]
        );
        // An unmatched row (`N/A`) makes every column of its side object: integers stay.
        let rows = [[int(57), f(1.0), int(1), f(1.0)]];
        assert_eq!(float_columns(rows.iter().map(Some).chain([None])), [false; 4]);
        assert_eq!(float_columns(rows.iter().map(Some)), [true; 4]);
        assert_eq!(as_table(&rows[0], [true; 4])[0], PyVal::Float(57.0));
        // Added in parts and merged, the rows give what they give together.
        let table =
            [[int(57), int(12), int(3), int(2)], [int(1), int(2), f(3.5), s("N/A")], [f(1.0), f(2.0), f(3.0), f(4.0)]];
        for cut in 0..=table.len() {
            let mut parts = [ColumnKinds::default(); 2];
            table[..cut].iter().for_each(|r| parts[0].add(Some(r)));
            table[cut..].iter().for_each(|r| parts[1].add(Some(r)));
            assert_eq!(parts[0].merge(parts[1]).floats(), floats(&table), "cut at {cut}");
        }
    }
}
