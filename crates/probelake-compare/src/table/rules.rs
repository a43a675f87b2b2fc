//! The 26.x rule engine (docs/msprobe-compare.md §9) that overwrites `Result` and `Err_message` of every row.
//!
//! Rows are grouped by dump key; output rows are those whose NPU name contains `.output.`.
//! Metric-level messages ("No bench data matched." …) never reach the output in 26.x, so
//! only these rule messages are produced.

use std::borrow::Cow;

use probelake_query::msprobe::pyfmt::{py_float, PyVal};

/// The mode decides which rules run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleSet {
    Statistics,
    Tensor,
    Md5,
}

/// A cell value as the rule engine sees it: a number or a string.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cv {
    Num(f64),
    Text(Cow<'static, str>),
}

impl Cv {
    /// msprobe's `N/A` cell.
    pub(crate) const NA: Cv = Cv::Text(Cow::Borrowed("N/A"));
}

/// What the rules read of one row (the texts borrowed from the row's sides).
#[derive(Debug, Clone)]
pub(crate) struct RuleRow<'a> {
    pub key: &'a str,
    pub npu_name: &'a str,
    pub matched: bool,
    pub bench_name: &'a str,
    pub dtypes: [&'a str; 2],
    pub shapes: [&'a str; 2],
    pub requires_grad: [&'a str; 2],
    /// NPU max, NPU min, Bench max, Bench min (`None` = `N/A`).
    pub extremes: [Option<PyVal>; 4],
    /// `NormRelativeErr` (statistics mode).
    pub norm_rel: Cv,
    /// `One Thousandth Err Ratio` (tensor mode).
    pub thousandth: Cv,
    /// `Cosine` (tensor mode).
    pub cosine: Cv,
    /// `NPU MD5`, `BENCH MD5`.
    pub md5: [&'a str; 2],
}

const ALL_IGNORE: [&str; 9] = [
    "empty",
    "empty_like",
    "numpy",
    "to",
    "__setitem__",
    "empty_with_format",
    "new_empty_strided",
    "new_empty",
    "empty_strided",
];
const INPUT_IGNORE: [&str; 4] = ["_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Severity {
    Pass,
    Warning,
    Error,
}

fn nan_ish(v: &Option<PyVal>) -> bool {
    match v {
        Some(PyVal::Float(f)) => f.is_nan() || f.is_infinite(),
        Some(PyVal::Str(s)) => matches!(s.trim().to_ascii_lowercase().as_str(), "inf" | "-inf" | "nan"),
        _ => false,
    }
}

/// msprobe's `agg`: `%` strings as fractions, `None`/`Nan`/`N/A` and other strings skipped.
fn agg<'a>(vals: impl Iterator<Item = &'a Cv>, max: bool) -> f64 {
    let mut acc = if max { 0.0 } else { 1.0 };
    for v in vals {
        let x = match v {
            Cv::Num(x) => *x,
            Cv::Text(t) if matches!(t.as_ref(), "None" | "Nan" | "N/A") => continue,
            Cv::Text(t) => match t.strip_suffix('%').and_then(py_float) {
                Some(x) => x / 100.0,
                None => continue,
            },
        };
        // Python's min/max keep the first value when the comparison with NaN is false.
        if (max && x > acc) || (!max && x < acc) {
            acc = x;
        }
    }
    acc
}

/// msprobe's `pct`: `float(v.strip('%')) / 100`, 0 when that fails.
fn pct(v: &Cv) -> f64 {
    match v {
        Cv::Num(x) => x / 100.0,
        Cv::Text(t) => py_float(t.trim_matches('%')).map_or(0.0, |x| x / 100.0),
    }
}

/// The `Result` and `Err_message` cells of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    severity: Severity,
    messages: Vec<&'static str>,
}

impl Verdict {
    const PASS: Verdict = Verdict { severity: Severity::Pass, messages: Vec::new() };

    /// The `Result` cell.
    pub(crate) fn result(&self) -> &'static str {
        match self.severity {
            Severity::Pass => "pass",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    /// Appends the `Err_message` cell: the list of messages as msprobe writes it (`json.dumps`).
    pub(crate) fn write_messages(&self, out: &mut String) {
        out.push('[');
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push('"');
            out.push_str(m);
            out.push('"');
        }
        out.push(']');
    }
}

/// Runs the rules; returns the verdict of each row.
pub(crate) fn apply(rows: &[RuleRow<'_>], set: RuleSet) -> Vec<Verdict> {
    let mut verdicts = vec![Verdict::PASS; rows.len()];
    let mut start = 0;
    while start < rows.len() {
        let end = rows[start..].iter().position(|r| r.key != rows[start].key).map_or(rows.len(), |p| start + p);
        group(rows, start, end, set, &mut verdicts);
        start = end;
    }
    verdicts
}

fn group(rows: &[RuleRow<'_>], start: usize, end: usize, set: RuleSet, out: &mut [Verdict]) {
    let is_output = |i: usize| rows[i].npu_name.contains(".output.");
    let inputs: Vec<usize> = (start..end).filter(|&i| !is_output(i)).collect();
    let outputs: Vec<usize> = (start..end).filter(|&i| is_output(i)).collect();
    let api = inputs.first().and_then(|&i| rows[i].npu_name.split('.').nth(1)).unwrap_or_default();
    if ALL_IGNORE.contains(&api) && !inputs.is_empty() {
        return;
    }
    let ignore_inputs = INPUT_IGNORE.contains(&api) && !inputs.is_empty();
    let scope: Vec<usize> = (start..end).filter(|&i| !ignore_inputs || is_output(i)).collect();
    let mut flag = |i: usize, sev: Severity, msg: &'static str| {
        let v = &mut out[i];
        v.severity = v.severity.max(sev);
        v.messages.push(msg);
    };
    let per_row = |i: usize, rule: &dyn Fn(&RuleRow<'_>) -> bool| rule(&rows[i]);
    if set == RuleSet::Md5 {
        for &i in &scope {
            let [a, b] = &rows[i].md5;
            if a != b {
                if [a, b].iter().any(|s| matches!(**s, "N/A" | "Nan" | "")) {
                    flag(i, Severity::Warning, "warning: The parameter of NPU does not match the bench.");
                } else {
                    flag(i, Severity::Error, "error: The CRC-32 value of NPU differs from that of the bench.");
                }
            }
        }
        return;
    }
    // InfNan
    for &i in &scope {
        let [nmax, nmin, bmax, bmin] = &rows[i].extremes;
        if !(nan_ish(bmax) || nan_ish(bmin)) && (nan_ish(nmax) || nan_ish(nmin)) {
            flag(i, Severity::Error, "error: There is nan/inf/-inf in the maximum or minimum value of NPU.");
        }
    }
    if set == RuleSet::Statistics && !ignore_inputs {
        let a = agg(inputs.iter().map(|&i| &rows[i].norm_rel), true);
        if a.abs() < 0.1 {
            for &i in &outputs {
                if pct(&rows[i].norm_rel).abs() > 0.5 {
                    flag(i, Severity::Error, "error: The NormRelativeErr of output is greater than 0.5.");
                }
            }
        }
    }
    if set == RuleSet::Tensor && !ignore_inputs && !outputs.is_empty() {
        let mi = agg(inputs.iter().map(|&i| &rows[i].thousandth), false);
        let mo = agg(outputs.iter().map(|&i| &rows[i].thousandth), false);
        if mi > 0.9 && mo < 0.1 {
            flag(
                outputs[0],
                Severity::Error,
                "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6.",
            );
        }
    }
    for &i in &scope {
        if per_row(i, &|r| r.matched && r.requires_grad[0] != r.requires_grad[1]) {
            flag(i, Severity::Error, "error: The Required_Grad of NPU and Bench are inconsistent");
        }
    }
    if !ignore_inputs {
        for &i in &inputs {
            let r = &rows[i];
            let scalar = r.dtypes.iter().all(|d| d.contains("class")) && r.shapes[0] == "[]";
            let differ = match (&r.extremes[0], &r.extremes[2]) {
                (Some(a), Some(b)) => !a.py_eq(b),
                _ => true,
            };
            if r.matched && scalar && differ {
                flag(i, Severity::Error, "error: The scalar parameters of NPU and Bench are inconsistent.");
            }
        }
    }
    for &i in &scope {
        let r = &rows[i];
        if r.matched && !r.bench_name.contains("qkv") && !r.bench_name.contains("gate_up") && r.dtypes[0] != r.dtypes[1]
        {
            flag(i, Severity::Error, "error: The dtype of NPU and Bench are inconsistent.");
        }
    }
    for &i in &scope {
        let r = &rows[i];
        if r.matched && r.shapes[0] != r.shapes[1] {
            flag(i, Severity::Error, "error: The shape of NPU and Bench are inconsistent.");
        }
    }
    if ignore_inputs || outputs.is_empty() {
        return;
    }
    match set {
        RuleSet::Statistics => {
            let a = agg(inputs.iter().map(|&i| &rows[i].norm_rel), true).abs();
            let o = agg(outputs.iter().map(|&i| &rows[i].norm_rel), true).abs();
            if (a == 0.0 && o > 0.1) || (a != 0.0 && o / a > 10.0) {
                flag(
                    outputs[0],
                    Severity::Warning,
                    "warning: The norm relative error of output is 10 times that of input.",
                );
            }
        }
        RuleSet::Tensor => {
            let ci = agg(inputs.iter().map(|&i| &rows[i].cosine), false);
            let co = agg(outputs.iter().map(|&i| &rows[i].cosine), false);
            if ci > 0.9 && ci - co > 0.1 {
                flag(
                    outputs[0],
                    Severity::Warning,
                    "warning: The input/parameters of Cosine > 0.9, and input/parameters - output > 0.1",
                );
            }
        }
        RuleSet::Md5 => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(key: &'a str, npu_name: &'a str) -> RuleRow<'a> {
        RuleRow {
            key,
            npu_name,
            matched: true,
            bench_name: npu_name,
            dtypes: ["torch.float32", "torch.float32"],
            shapes: ["[2, 2]", "[2, 2]"],
            requires_grad: ["False", "False"],
            extremes: [
                Some(PyVal::Float(1.0)),
                Some(PyVal::Float(0.0)),
                Some(PyVal::Float(1.0)),
                Some(PyVal::Float(0.0)),
            ],
            norm_rel: Cv::Text("0.0%".into()),
            thousandth: Cv::Num(1.0),
            cosine: Cv::Num(1.0),
            md5: ["1a2b3c4d", "1a2b3c4d"],
        }
    }

    fn cells(v: &Verdict) -> (String, String) {
        let mut messages = String::new();
        v.write_messages(&mut messages);
        (v.result().to_string(), messages)
    }

    const KEY: &str = "Functional.linear.0.forward";
    const INPUT: &str = "Functional.linear.0.forward.input.0";
    const OUTPUT: &str = "Functional.linear.0.forward.output.0";

    #[test]
    fn equal_rows_pass_with_no_message() {
        let rows = [row(KEY, INPUT), row(KEY, OUTPUT)];
        for set in [RuleSet::Statistics, RuleSet::Tensor, RuleSet::Md5] {
            assert!(apply(&rows, set).iter().all(|v| cells(v) == ("pass".into(), "[]".into())), "{set:?}");
        }
    }

    #[test]
    fn an_output_norm_error_above_half_with_fine_inputs_is_an_error() {
        let mut output = row(KEY, OUTPUT);
        output.norm_rel = Cv::Text("60.0%".into());
        let verdicts = apply(&[row(KEY, INPUT), output], RuleSet::Statistics);
        assert_eq!(cells(&verdicts[0]), ("pass".into(), "[]".into()));
        let (result, messages) = cells(&verdicts[1]);
        assert_eq!(result, "error");
        assert!(messages.contains("The NormRelativeErr of output is greater than 0.5."), "{messages}");
        assert!(messages.contains("10 times that of input"), "{messages}");
        // With the inputs off by 10 % or more, the output's error is not blamed on the op.
        let mut input = row(KEY, INPUT);
        input.norm_rel = Cv::Text("20.0%".into());
        let mut output = row(KEY, OUTPUT);
        output.norm_rel = Cv::Text("60.0%".into());
        assert_eq!(apply(&[input, output], RuleSet::Statistics)[1].result(), "pass");
    }

    #[test]
    fn nan_on_the_npu_side_only_is_an_error() {
        let mut nan = row(KEY, OUTPUT);
        nan.extremes[0] = Some(PyVal::Float(f64::NAN));
        assert_eq!(apply(&[row(KEY, INPUT), nan.clone()], RuleSet::Statistics)[1].result(), "error");
        // The same NaN on the bench side is no difference of the NPU's.
        nan.extremes[2] = Some(PyVal::Float(f64::NAN));
        assert_eq!(apply(&[row(KEY, INPUT), nan], RuleSet::Statistics)[1].result(), "pass");
    }

    #[test]
    fn dtype_shape_and_requires_grad_differences_are_errors_of_matched_rows_only() {
        let mut differs = row(KEY, INPUT);
        differs.dtypes[1] = "torch.bfloat16";
        differs.shapes[1] = "[4]";
        differs.requires_grad[1] = "True";
        let (result, messages) = cells(&apply(&[differs.clone()], RuleSet::Statistics)[0]);
        assert_eq!(result, "error");
        for expected in ["Required_Grad", "dtype of NPU and Bench", "shape of NPU and Bench"] {
            assert!(messages.contains(expected), "{messages}");
        }
        differs.matched = false;
        assert_eq!(apply(&[differs], RuleSet::Statistics)[0].result(), "pass");
    }

    #[test]
    fn md5_differences_are_errors_and_a_missing_side_a_warning() {
        let mut differs = row(KEY, OUTPUT);
        differs.md5[1] = "ffffffff";
        let mut missing = row(KEY, OUTPUT);
        missing.md5[1] = "N/A";
        let verdicts = apply(&[differs, missing], RuleSet::Md5);
        assert_eq!(cells(&verdicts[0]).0, "error");
        assert_eq!(cells(&verdicts[1]).0, "warning");
    }

    #[test]
    fn ignored_apis_keep_every_row_passing() {
        let key = "Tensor.to.0.forward";
        let mut output = row(key, "Tensor.to.0.forward.output.0");
        output.dtypes[1] = "torch.float16";
        let verdicts = apply(&[row(key, "Tensor.to.0.forward.input.0"), output], RuleSet::Statistics);
        assert!(verdicts.iter().all(|v| v.result() == "pass"));
    }

    #[test]
    fn tensor_mode_flags_an_output_far_worse_than_its_inputs() {
        let mut output = row(KEY, OUTPUT);
        output.cosine = Cv::Num(0.5);
        output.thousandth = Cv::Num(0.05);
        let (result, messages) = cells(&apply(&[row(KEY, INPUT), output], RuleSet::Tensor)[1]);
        assert_eq!(result, "error");
        assert!(messages.contains("One Thousandth Err Ratio > 0.9") && messages.contains("Cosine > 0.9"), "{messages}");
    }
}
