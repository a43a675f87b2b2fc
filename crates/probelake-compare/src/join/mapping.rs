//! msprobe compare's mapping options, for a target whose modules or APIs are named otherwise
//! than the golden run's (GPU Megatron against NPU MindSpeed, a refactored model): `-dm`
//! (`--data-mapping`, a YAML of `npu_row_name: bench_row_name`) and `-cm` (`--cell-mapping`,
//! module-name substitution). The rules are msprobe 26.2's for PyTorch dumps
//! (`core/compare/acc_compare.py`, `ProcessDf.assign_npu_df_compare_key`,
//! `process_data_mapping`, `process_cell_mapping`; `Match.match_api_infos`,
//! `gen_dtype_condition`), as `tests/data/compare-ref/mapping/RULES.md` records them:
//!
//! - with either option, the target's join key is built from its raw row name, without the
//!   backward renumbering the golden side's key still has (so a backward row of an op called
//!   more than once pairs with another call of the golden run, as msprobe pairs it);
//! - `-cm` decides the key when given (the first `Cell` of the name becomes `Module`, then the
//!   cell segment is replaced whole, or else each key found in it, in the file's order);
//!   otherwise `-dm` maps the whole row name, or leaves it as it is;
//! - with `-dm`, pairs of different dtypes stay paired (msprobe's dtype check is off).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::utils::take_function_args;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

/// The mapping options of one comparison (none by default): `-dm`, `-cm`, and `-fm`, which
/// pairs rows by a walk rather than by their keys (`fuzzy.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mappings {
    data: Option<HashMap<String, String>>,
    /// In the file's order: the substitutions apply one after another.
    cell: Option<Vec<(String, String)>>,
    fuzzy: bool,
}

/// How one side's join keys are made.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keys<'m> {
    /// msprobe's default: the item, a backward entry's with its call renumbered.
    Renumbered,
    /// The raw item, not renumbered, under the target's mapping options when given.
    Raw(Option<&'m Mappings>),
}

/// A mapping file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct MappingError {
    /// The file.
    pub path: String,
    /// What is wrong, and where.
    pub message: String,
}

impl Mappings {
    /// Whether no option is given: keys and dtype checks are msprobe's defaults.
    pub fn is_empty(&self) -> bool {
        self.data.is_none() && self.cell.is_none() && !self.fuzzy
    }

    /// With `-fm`: no side's backward calls are renumbered, and unless `-dm` is given too, rows
    /// are paired by msprobe's fuzzy walk over names without call counters. msprobe 26.2 gives
    /// usable results this way in tensor mode only; a comparison in another mode is refused
    /// ([`CompareError::FuzzyMatchMode`](crate::CompareError::FuzzyMatchMode)).
    pub fn with_fuzzy_match(mut self, yes: bool) -> Self {
        self.fuzzy = yes;
        self
    }

    /// How the target's keys are made.
    pub(crate) fn target_keys(&self) -> Keys<'_> {
        match self.is_empty() {
            true => Keys::Renumbered,
            false => Keys::Raw(Some(self)),
        }
    }

    /// How the golden run's keys are made: renumbered, but with `-fm`.
    pub(crate) fn golden_keys(&self) -> Keys<'_> {
        match self.fuzzy {
            true => Keys::Raw(None),
            false => Keys::Renumbered,
        }
    }

    /// Whether the target's keys are rewritten (`-dm` or `-cm`).
    pub(crate) fn renames(&self) -> bool {
        self.data.is_some() || self.cell.is_some()
    }

    /// Whether rows are paired by the fuzzy walk (`-fm` without `-dm`, whose join wins).
    pub(crate) fn walks(&self) -> bool {
        self.fuzzy && self.data.is_none()
    }

    /// With `-dm`: each target row named by a key is joined with the golden row named by its
    /// value.
    pub fn with_data_mapping(mut self, pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        self.data = Some(pairs.into_iter().collect());
        self
    }

    /// With `-cm`: cell (module) names substituted, in this order (none: a bare `-cm`, which
    /// still keys the target by its raw names and turns a `Cell` into `Module`).
    pub fn with_cell_mapping(mut self, pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        self.cell = Some(pairs.into_iter().collect());
        self
    }

    /// Whether pairs of incompatible dtypes are left unmatched (msprobe's check, off with `-dm`).
    pub(crate) fn checks_dtypes(&self) -> bool {
        self.data.is_none()
    }

    /// The target row `name`'s join key under these options (only when some are given).
    pub(crate) fn target_key(&self, name: &str) -> String {
        match (&self.cell, &self.data) {
            (Some(cells), _) => cell_key(name, cells),
            (None, Some(data)) => data.get(name).cloned().unwrap_or_else(|| name.to_string()),
            (None, None) => name.to_string(),
        }
    }
}

/// `msprobe_target_key(item)`: the target's join key under a comparison's [`Mappings`],
/// registered in the session of each unit pair that has some (its plans name it where the
/// target's key would otherwise be `msprobe_compare_key`).
#[derive(Debug)]
pub(crate) struct TargetKey {
    mappings: Arc<Mappings>,
    signature: Signature,
}

impl TargetKey {
    /// The SQL name.
    pub(crate) const NAME: &'static str = "msprobe_target_key";

    pub(crate) fn new(mappings: Arc<Mappings>) -> Self {
        TargetKey { mappings, signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable) }
    }
}

// One function per comparison: equal when it is the same mappings.
impl PartialEq for TargetKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.mappings, &other.mappings)
    }
}

impl Eq for TargetKey {}

impl std::hash::Hash for TargetKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.mappings), state);
    }
}

impl ScalarUDFImpl for TargetKey {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> datafusion::error::Result<ColumnarValue> {
        let [item] = take_function_args(self.name(), args.args)?;
        Ok(match item {
            ColumnarValue::Scalar(ScalarValue::Utf8(item)) => {
                ColumnarValue::Scalar(ScalarValue::Utf8(item.map(|i| self.mappings.target_key(&i))))
            }
            ColumnarValue::Scalar(other) => ColumnarValue::Scalar(other),
            ColumnarValue::Array(items) => {
                let keys: StringArray =
                    items.as_string::<i32>().iter().map(|i| i.map(|i| self.mappings.target_key(i))).collect();
                ColumnarValue::Array(Arc::new(keys))
            }
        })
    }
}

/// msprobe's `process_cell_mapping` of one row name.
fn cell_key(name: &str, cells: &[(String, String)]) -> String {
    let params_grad = name.split('.').any(|part| part == "parameters_grad");
    if name.is_empty() || (!params_grad && !name.contains(".forward.") && !name.contains(".backward.")) {
        return "N/A".to_string();
    }
    let mut name = name.replacen("Cell", "Module", 1);
    if cells.is_empty() {
        return name;
    }
    let after_kind = name.split_once('.').map_or(name.as_str(), |(_, rest)| rest);
    let cell = cell_segment(after_kind).to_string();
    let new = match cells.iter().find(|(from, _)| *from == cell) {
        Some((_, to)) => to.clone(),
        None => cells.iter().fold(cell.clone(), |new, (from, to)| match new.contains(from.as_str()) {
            true => new.replacen(from.as_str(), to, 1),
            false => new,
        }),
    };
    if new != cell {
        name = name.replacen(&cell, &new, 1);
    }
    name
}

/// The text before the first `.forward.`, `.backward.` or `.parameters_grad.` (all of `text`
/// without one): `re.split(r'\.(?:forward|backward|parameters_grad)\.', text)[0]`.
fn cell_segment(text: &str) -> &str {
    let end = [".forward.", ".backward.", ".parameters_grad."].iter().filter_map(|m| text.find(m)).min();
    end.map_or(text, |e| &text[..e])
}

/// The `key: value` pairs of a mapping file, in its order. msprobe reads these files with
/// `yaml.safe_load` and uses them as a flat mapping of names to names; this reads that form:
/// one `key: value` a line, either side plain or quoted ('…' or "…"), `#` comments and blank
/// lines. Anything else (nesting, lists, a file with no mapping, which msprobe fails on) is an
/// error naming the line.
pub fn read_mapping_file(path: &Path) -> Result<Vec<(String, String)>, MappingError> {
    let shown = path.display().to_string();
    let error = |message: String| MappingError { path: shown.clone(), message };
    if path.extension().is_none_or(|e| e != "yaml") {
        return Err(error("a mapping file is a .yaml file, as msprobe requires".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let mut pairs = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() || line.trim_start().starts_with('#') || line == "---" {
            continue;
        }
        let at = |what: &str| error(format!("line {}: {what}: {line:?}", no + 1));
        if line.starts_with([' ', '\t', '-']) {
            return Err(at("only a flat `npu_name: bench_name` mapping is read (no nesting, no lists)"));
        }
        let (key, value) = split_pair(line).ok_or_else(|| at("expected `key: value`"))?;
        let (key, value) = (scalar(key).ok_or_else(|| at("bad key"))?, scalar(value).ok_or_else(|| at("bad value"))?);
        if value.is_empty() {
            return Err(at("a key without a value (only a flat `npu_name: bench_name` mapping is read)"));
        }
        pairs.push((key, value));
    }
    if pairs.is_empty() {
        return Err(error("holds no mapping".into()));
    }
    Ok(pairs)
}

/// `key: value` split at the first `: ` (or a final `:`) outside quotes.
fn split_pair(line: &str) -> Option<(&str, &str)> {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') if i == 0 => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ':') if line[i + 1..].is_empty() || line[i + 1..].starts_with([' ', '\t']) => {
                return Some((&line[..i], &line[i + 1..]));
            }
            _ => {}
        }
    }
    None
}

/// A plain or quoted YAML scalar, its comment cut off.
fn scalar(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('\'') {
        let end = rest.rfind('\'')?;
        return Some(rest[..end].replace("''", "'"));
    }
    if let Some(rest) = text.strip_prefix('"') {
        let end = rest.rfind('"')?;
        return Some(rest[..end].replace("\\\"", "\"").replace("\\\\", "\\"));
    }
    let text = match text.find(" #") {
        Some(i) => text[..i].trim_end(),
        None => text,
    };
    Some(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn a_cell_segment_is_replaced_whole_or_key_by_key() {
        let whole = cells(&[("blocks.0.up.Linear", "layers.0.fc1.Linear"), ("up", "nope")]);
        assert_eq!(
            cell_key("Module.blocks.0.up.Linear.forward.0.input.0", &whole),
            "Module.layers.0.fc1.Linear.forward.0.input.0"
        );
        let parts = cells(&[("blocks", "layers"), ("norm", "ln")]);
        assert_eq!(
            cell_key("Module.blocks.1.norm.LayerNorm.backward.0.output.0", &parts),
            "Module.layers.1.ln.LayerNorm.backward.0.output.0"
        );
        // Substrings reach API names too, as msprobe's replacement does.
        assert_eq!(
            cell_key("Functional.layer_norm.0.forward.input.0", &parts),
            "Functional.layer_ln.0.forward.input.0"
        );
        assert_eq!(
            cell_key("Functional.gelu.1.forward.output.0", &cells(&[("gelu.1", "relu.0")])),
            "Functional.relu.0.forward.output.0"
        );
        // The first `Cell` becomes `Module`, with or without a file.
        assert_eq!(cell_key("Module.rnn.LSTMCell.forward.0.input.0", &[]), "Module.rnn.LSTMModule.forward.0.input.0");
        assert_eq!(
            cell_key("Module.x.Linear.parameters_grad.weight", &cells(&[("x", "y")])),
            "Module.y.Linear.parameters_grad.weight"
        );
        assert_eq!(cell_key("no_direction", &[]), "N/A");
    }

    #[test]
    fn the_data_mapping_maps_whole_row_names_and_the_cell_mapping_wins() {
        let data = Mappings::default().with_data_mapping([("a.forward.input.0".into(), "b.forward.input.0".into())]);
        assert_eq!(data.target_key("a.forward.input.0"), "b.forward.input.0");
        assert_eq!(data.target_key("a.forward.output.0"), "a.forward.output.0");
        assert!(!data.checks_dtypes());
        let both = data.with_cell_mapping(cells(&[("a", "c")]));
        assert_eq!(both.target_key("Module.a.forward.input.0"), "Module.c.forward.input.0");
        assert!(Mappings::default().is_empty() && Mappings::default().checks_dtypes());
    }

    #[test]
    fn mapping_files_are_flat_name_to_name_yaml() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write");
            path
        };
        let good = file("m.yaml", "# a comment\n---\na.b.0: c.d.1\n'q: x': \"y \\\"z\\\"\"  \nk: v # trailing\n");
        assert_eq!(
            read_mapping_file(&good),
            Ok(vec![("a.b.0".into(), "c.d.1".into()), ("q: x".into(), "y \"z\"".into()), ("k".into(), "v".into())])
        );
        let nested = file("n.yaml", "Block:\n  norm: ln\n");
        let err = read_mapping_file(&nested).unwrap_err().to_string();
        assert!(err.contains("line 1: a key without a value") || err.contains("line 2"), "{err}");
        assert!(read_mapping_file(&file("e.yaml", "\n# nothing\n"))
            .unwrap_err()
            .to_string()
            .ends_with("holds no mapping"));
        assert!(read_mapping_file(&file("m.yml", "a: b\n")).unwrap_err().to_string().contains(".yaml file"));
        assert!(read_mapping_file(&dir.path().join("missing.yaml")).is_err());
    }
}
