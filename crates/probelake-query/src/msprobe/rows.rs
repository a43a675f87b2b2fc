//! The per-row rules of msprobe's compare (docs/msprobe-compare.md §3, §4): the cells a leaf yields
//! (synthetic fields of non-tensors), its state order and its join key with backward
//! renumbering. The SQL functions of `crate::udf` (`msprobe_compare_*`) wrap them; the join
//! itself is the DataFusion plan of `compare::plan`.

use std::borrow::Cow;
use std::fmt;

use probelake_msprobe::json::{self, Arena, Node, Value};

use super::crc::crc32_hex;
use super::pyfmt::{py_bool, py_int_list, py_str_node, py_type_name, PyVal};

/// One side of one compare row, with every cell msprobe derives from the dump. The texts a
/// leaf's columns hold as they are (names, dtype, md5, data name) are borrowed from the plan's
/// batches: a 10.7 MB pair has ~80k sides, and copying them out was a third of their cost.
#[derive(Debug, Clone)]
pub struct Side<'a> {
    /// Row name (`…forward.input.0`, or the tensor file stem).
    pub name: &'a str,
    /// The dump key (entry name).
    pub key: &'a str,
    /// Dtype text; `None` for a JSON null leaf (printed `N/A`).
    pub dtype: Option<Cow<'a, str>>,
    /// Shape text; `None` for a JSON null leaf.
    pub shape: Option<String>,
    /// `True`/`False`, or `None` when the leaf has no requires_grad (printed `N/A`).
    pub requires_grad: Option<Cow<'static, str>>,
    /// Max, Min, Mean, Norm as Python objects.
    pub stats: [PyVal; 4],
    /// CRC-32 text; `None` for a null leaf.
    pub md5: Option<Cow<'a, str>>,
    /// Tensor file name, `-1` when the leaf has none.
    pub data_name: Cow<'a, str>,
    /// Whether the leaf carries an `md5` field (decides md5 mode).
    pub has_md5: bool,
}

/// A target leaf with the bench leaf it is compared with, if any (`None` where there is none
/// or the dtype gate refuses it).
pub type MatchedRow<'a> = (Side<'a>, Option<Side<'a>>);

impl Side<'_> {
    /// The cell texts of the requires_grad column.
    pub fn requires_grad_cell(&self) -> &str {
        self.requires_grad.as_deref().unwrap_or("N/A")
    }
}

/// The direction of a dump key from its last two segments (docs/msprobe-compare.md §3.1); `None` drops the key.
fn key_direction(key: &str) -> Option<&'static str> {
    let (_, second, last) = split_last_two(key);
    let second = second.unwrap_or_default();
    ["parameters_grad", "forward", "backward"].into_iter().find(|direction| last == *direction || second == *direction)
}

/// A dump key cut before its last two segments: `Functional.relu.5.backward` gives
/// `("Functional.relu", Some("5"), "backward")`, the prefix being msprobe's `op_no_number`
/// (`split('.')` and slicing; a key of one segment has an empty prefix and no second segment).
/// Found by byte scans from the end: the plans' SQL functions ask for every leaf, and
/// `rsplitn`'s char searcher cost ~400 instructions a key.
fn split_last_two(name: &str) -> (&str, Option<&str>, &str) {
    let Some(last_dot) = name.bytes().rposition(|b| b == b'.') else {
        return ("", None, name);
    };
    let (head, last) = (&name[..last_dot], &name[last_dot + 1..]);
    match head.bytes().rposition(|b| b == b'.') {
        Some(dot) => (&head[..dot], Some(&head[dot + 1..]), last),
        None => ("", Some(head), last),
    }
}

/// msprobe's per-key rules, remembering the direction of the key asked for last: a side's
/// leaves come entry by entry, several per entry, so most rows ask again about the row
/// before's key, and comparing two keys costs a fraction of reading one. The plans' SQL
/// functions keep one per batch.
#[derive(Debug, Default)]
pub struct KeyRules<'a> {
    key: &'a str,
    direction: Option<&'static str>,
}

impl<'a> KeyRules<'a> {
    fn direction(&mut self, key: &'a str) -> Option<&'static str> {
        if key != self.key {
            self.direction = key_direction(key);
            self.key = key;
        }
        self.direction
    }

    /// msprobe's order of a leaf inside its entry (docs/msprobe-compare.md §3.4): 0 input (`input_args`,
    /// `input_kwargs`, `input`, debug values), 1 `parameters`, 2 `output`, 3 fields of a
    /// `parameters_grad` entry; `None` when the entry has no direction (msprobe drops it).
    pub fn compare_state(&mut self, name: &'a str, section: &str) -> Option<i32> {
        Some(match (self.direction(name)?, section) {
            ("parameters_grad", _) => 3,
            (_, "output") => 2,
            (_, "parameters") => 1,
            _ => 0,
        })
    }

    /// The group backward entries are renumbered in: the entry name without its last two
    /// segments (`op_no_number`), for backward entries only.
    pub fn backward_group(&mut self, name: &'a str) -> Option<&'a str> {
        (self.direction(name)? == "backward").then(|| split_last_two(name).0)
    }

    /// Appends the join key of a row (docs/msprobe-compare.md §4.1) to `out`: its item name, where for a backward
    /// entry the call number is replaced by `order`, the entry's rank among the backward
    /// entries of its group in file order. Returns false, writing nothing, when the entry has
    /// no direction (msprobe drops it). The SQL function writes the keys straight into its
    /// result column.
    pub fn write_compare_key(
        &mut self,
        out: &mut impl fmt::Write,
        name: &'a str,
        item: &str,
        order: i64,
    ) -> Result<bool, fmt::Error> {
        let Some(direction) = self.direction(name) else { return Ok(false) };
        if direction != "backward" {
            out.write_str(item)?;
            return Ok(true);
        }
        let (op_no_number, second, last) = split_last_two(name);
        let mut sep = if op_no_number.is_empty() { "" } else { "." };
        out.write_str(op_no_number)?;
        for seg in second.into_iter().chain([last]) {
            out.write_str(sep)?;
            sep = ".";
            if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                write!(out, "{order}")?;
            } else {
                out.write_str(seg)?;
            }
        }
        out.write_str(item.strip_prefix(name).unwrap_or(item))?;
        Ok(true)
    }
}

/// The node msprobe reads a leaf's cells from: a P2POp record is compared through its tensor.
fn compared_node<'n, 'a>(node: Option<&'n Node<'a>>) -> Option<&'n Node<'a>> {
    let tensor = node.and_then(|n| {
        (n.value.get("class_type").and_then(|c| c.value.as_str()) == Some("torch.distributed.P2POp"))
            .then(|| n.value.get("tensor"))
            .flatten()
    });
    tensor.or(node)
}

/// The torch float dtypes, which msprobe lets match each other.
pub const TORCH_FLOATS: [&str; 4] = ["torch.float16", "torch.float32", "torch.float64", "torch.bfloat16"];
/// The MindSpore float dtypes, which msprobe lets match each other.
pub const MS_FLOATS: [&str; 4] = ["Float16", "Float32", "Float64", "BFloat16"];

/// msprobe's dtype gate (docs/msprobe-compare.md §4.3): whether a bench leaf with the target leaf's key is its match,
/// from the two dtype cells (`None` for a JSON null leaf): the same dtype, or two floats of
/// one framework.
pub fn dtype_gate(npu: Option<&str>, bench: Option<&str>) -> bool {
    let both_in = |set: &[&str]| npu.is_some_and(|n| set.contains(&n)) && bench.is_some_and(|b| set.contains(&b));
    npu == bench || both_in(&TORCH_FLOATS) || both_in(&MS_FLOATS)
}

/// The dtype cell alone of `side_of(item, _, leaf_json)`, without the other cells' work (the
/// statistics, a CRC-32 of the value): `msprobe_compare_dtype` of a leaf's JSON, and
/// `LeafColumns::compare_dtype` for the leaves it cannot read from their columns.
pub fn dtype_of(item: &str, leaf_json: &str) -> Option<String> {
    let arena = Arena::new();
    let parsed = json::parse(leaf_json.as_bytes(), &arena).ok();
    let node = compared_node(parsed.as_ref()).filter(|n| matches!(n.value, Value::Object(_)))?;
    Some(match node.value.get("dtype") {
        Some(dtype) => py_str_node(dtype),
        None => {
            let kind = node.value.get("type").and_then(|t| t.value.as_str()).unwrap_or_default();
            synthetic_dtype(item, kind, node.value.get("value"))
        }
    })
}

/// Builds one side of a row from its item name, entry name and leaf JSON (docs/msprobe-compare.md §3.3).
pub fn side_of<'a>(item: &'a str, name: &'a str, leaf_json: &str) -> Side<'a> {
    let arena = Arena::new();
    let parsed = json::parse(leaf_json.as_bytes(), &arena).ok();
    let node = compared_node(parsed.as_ref());
    let data_name = node.and_then(|n| n.value.get("data_name")).and_then(|d| d.value.as_str());
    let base = Side {
        name: item,
        key: name,
        dtype: None,
        shape: None,
        requires_grad: None,
        stats: [PyVal::None, PyVal::None, PyVal::None, PyVal::None],
        md5: None,
        data_name: Cow::Owned(data_name_cell(data_name).into_owned()),
        has_md5: node.is_some_and(|n| n.value.get("md5").is_some()),
    };
    let Some(node) = node.filter(|n| matches!(n.value, Value::Object(_))) else { return base };
    let get = |k: &str| node.value.get(k);
    let requires_grad = get("requires_grad").map(|v| match &v.value {
        Value::Bool(b) => Cow::Borrowed(py_bool(*b)),
        _ => Cow::Owned(py_str_node(v)),
    });
    let kind = get("type").and_then(|t| t.value.as_str()).unwrap_or_default();
    let value = get("value");
    let md5_field = get("md5").and_then(|m| m.value.as_str()).filter(|m| !m.is_empty()).map(str::to_owned);
    if let Some(dtype) = get("dtype") {
        let shape = get("shape").map(|s| match &s.value {
            Value::Array(items) => {
                let dims: Option<Vec<i64>> = items
                    .iter()
                    .map(|d| match &d.value {
                        Value::Number(t) => t.parse().ok(),
                        _ => None,
                    })
                    .collect();
                dims.map_or_else(|| py_str_node(s), |d| py_int_list(&d))
            }
            _ => py_str_node(s),
        });
        let stats = ["Max", "Min", "Mean", "Norm"].map(|k| PyVal::from_node(get(k)));
        return Side {
            dtype: Some(py_str_node(dtype).into()),
            shape,
            requires_grad,
            stats,
            md5: Some(md5_field.unwrap_or_else(|| value_md5(value)).into()),
            ..base
        };
    }
    let synthetic = synthetic_fields(item, kind, value, get("group_ranks"));
    Side {
        dtype: Some(synthetic.dtype.into()),
        shape: Some(synthetic.shape),
        requires_grad,
        stats: synthetic.stats,
        md5: Some(md5_field.or(synthetic.md5).unwrap_or_else(|| value_md5(value)).into()),
        ..base
    }
}

/// The `Data_name` cell: the tensor file, `-1` when the leaf has none.
pub fn data_name_cell(data_name: Option<&str>) -> Cow<'_, str> {
    Cow::Borrowed(data_name.filter(|d| !d.is_empty()).unwrap_or("-1"))
}

/// msprobe's md5 of a leaf without an `md5` field: the CRC-32 of `str(value)`.
fn value_md5(value: Option<&Node<'_>>) -> String {
    crc32_hex(value.map(py_str_node).unwrap_or_default().as_bytes())
}

/// The cells msprobe makes up for a leaf that is not a tensor.
pub struct Synthetic {
    /// The `Dtype` cell.
    pub dtype: String,
    /// The `Tensor Shape` cell.
    pub shape: String,
    /// Max, Min, Mean, Norm.
    pub stats: [PyVal; 4],
    /// The md5 cell (md5 mode).
    pub md5: Option<String>,
}

/// Synthetic dtype, shape, statistics and md5 of a non-tensor leaf of type `kind` (docs/msprobe-compare.md §3.3).
pub fn synthetic_fields(item: &str, kind: &str, value: Option<&Node<'_>>, group_ranks: Option<&Node<'_>>) -> Synthetic {
    let class = Presented::of(item, kind);
    let (shape, md5) = match class {
        Presented::Size => (value.map(py_str_node).unwrap_or_default(), None),
        Presented::Slice => (slice_shape(value), None),
        Presented::Rank => ("[]".into(), Some(node_text(value))),
        Presented::Group => ("[]".into(), Some(node_text(group_ranks))),
        Presented::Ellipsis | Presented::Value => ("[]".into(), None),
    };
    let stats = class.stats(value, group_ranks);
    Synthetic { dtype: class.dtype(kind, value), shape, stats, md5 }
}

/// The statistics of [`synthetic_fields`] alone (compare's first pass reads nothing else).
pub fn synthetic_stats(item: &str, kind: &str, value: Option<&Node<'_>>, group_ranks: Option<&Node<'_>>) -> [PyVal; 4] {
    Presented::of(item, kind).stats(value, group_ranks)
}

/// The synthetic dtype of a non-tensor leaf: its type for the kinds msprobe names, else the
/// Python type of its value.
pub fn synthetic_dtype(item: &str, kind: &str, value: Option<&Node<'_>>) -> String {
    Presented::of(item, kind).dtype(kind, value)
}

/// How msprobe presents a non-tensor leaf, from its type and its row name: decided once per
/// leaf, where each synthetic field used to ask again (the rank test splits the row name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presented {
    Size,
    Slice,
    Ellipsis,
    /// A peer rank (`…src`, `…dst`), shown as text.
    Rank,
    Group,
    /// Any other scalar: its value.
    Value,
}

impl Presented {
    fn of(item: &str, kind: &str) -> Presented {
        match kind {
            "torch.Size" => Presented::Size,
            "slice" => Presented::Slice,
            "ellipsis" => Presented::Ellipsis,
            _ if is_rank_item(item) => Presented::Rank,
            "torch.ProcessGroup" => Presented::Group,
            _ => Presented::Value,
        }
    }

    fn stats(self, value: Option<&Node<'_>>, group_ranks: Option<&Node<'_>>) -> [PyVal; 4] {
        let same4 = |v: PyVal| [v.clone(), v.clone(), v.clone(), v];
        match self {
            Presented::Size | Presented::Slice => same4(PyVal::None),
            Presented::Rank => same4(PyVal::Str(node_text(value))),
            Presented::Group => same4(PyVal::Str(node_text(group_ranks))),
            Presented::Ellipsis | Presented::Value => same4(PyVal::from_node(value)),
        }
    }

    fn dtype(self, kind: &str, value: Option<&Node<'_>>) -> String {
        match self {
            Presented::Value => py_type_name(value).to_owned(),
            _ => kind.to_owned(),
        }
    }
}

/// A node as Python prints it, `None` when absent.
fn node_text(node: Option<&Node<'_>>) -> String {
    node.map(py_str_node).unwrap_or_else(|| "None".into())
}

/// Whether a row names a peer rank (`…src`, `…dst`), which msprobe shows as text.
fn is_rank_item(item: &str) -> bool {
    matches!(item.rsplit('.').next().unwrap_or_default(), "src" | "dst" | "group_src" | "group_dst")
}

/// numpy's shape text of a slice value `[start, stop, step]`: `(3,)`.
fn slice_shape(value: Option<&Node<'_>>) -> String {
    match value.map(|v| &v.value) {
        Some(Value::Array(items)) => format!("({},)", items.len()),
        _ => "()".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{key_direction, KeyRules};

    fn compare_key(name: &str, item: &str, order: i64) -> Option<String> {
        let mut key = String::new();
        KeyRules::default()
            .write_compare_key(&mut key, name, item, order)
            .expect("a String takes every write")
            .then_some(key)
    }

    fn backward_group(name: &str) -> Option<&str> {
        KeyRules::default().backward_group(name)
    }

    fn compare_state(name: &str, section: &str) -> Option<i32> {
        KeyRules::default().compare_state(name, section)
    }

    #[test]
    fn dtype_gate_lets_floats_of_one_framework_match() {
        use super::dtype_gate;
        assert!(dtype_gate(Some("torch.int64"), Some("torch.int64")));
        assert!(dtype_gate(Some("torch.bfloat16"), Some("torch.float32")));
        assert!(dtype_gate(Some("Float16"), Some("BFloat16")));
        assert!(dtype_gate(None, None));
        assert!(!dtype_gate(Some("torch.float32"), Some("Float32")));
        assert!(!dtype_gate(Some("torch.float32"), Some("torch.int32")));
        assert!(!dtype_gate(None, Some("torch.float32")));
    }

    #[test]
    fn keys() {
        let (name, item) = ("Functional.relu.5.backward", "Functional.relu.5.backward.input.0");
        assert_eq!(backward_group(name), Some("Functional.relu"));
        assert_eq!(compare_key(name, item, 0).as_deref(), Some("Functional.relu.0.backward.input.0"));
        let module = "Module.fc.Linear.backward.3";
        assert_eq!(
            compare_key(module, "Module.fc.Linear.backward.3.output.0", 1).as_deref(),
            Some("Module.fc.Linear.backward.1.output.0")
        );
        assert_eq!(
            compare_key("Functional.relu.5.forward", "Functional.relu.5.forward.output.0", 7).as_deref(),
            Some("Functional.relu.5.forward.output.0")
        );
        assert_eq!(compare_key("Distributed.barrier.0", "Distributed.barrier.0.x", 0), None);
        assert_eq!(compare_state("Functional.relu.5.forward", "output"), Some(2));
        assert_eq!(compare_state("M.fc.Linear.parameters_grad.0", "weight"), Some(3));
    }

    #[test]
    fn rules_kept_across_rows_answer_as_fresh_ones() {
        let names = [
            "Functional.relu.5.backward",
            "Functional.relu.5.backward",
            "Functional.relu.5.forward",
            "Module.fc.Linear.backward.3",
            "Module.fc.Linear.backward.3",
            "",
            "Distributed.barrier.0",
            "M.fc.Linear.parameters_grad.0",
            "M.fc.Linear.parameters_grad.0",
            "Functional.relu.5.backward",
        ];
        let mut kept = KeyRules::default();
        for (i, name) in names.iter().enumerate() {
            let order = i as i64;
            let item = format!("{name}.output.0");
            let (mut fresh_key, mut kept_key) = (String::new(), String::new());
            let fresh = KeyRules::default().write_compare_key(&mut fresh_key, name, &item, order);
            assert_eq!(kept.write_compare_key(&mut kept_key, name, &item, order), fresh, "{name}");
            assert_eq!(kept_key, fresh_key, "{name}");
            assert_eq!(kept.compare_state(name, "output"), compare_state(name, "output"), "{name}");
            assert_eq!(kept.backward_group(name), backward_group(name), "{name}");
        }
    }

    /// msprobe's renumbering written as its Python reads: `split('.')`, slices and joins.
    fn naive_key(name: &str, item: &str, order: i64) -> String {
        let segs: Vec<&str> = name.split('.').collect();
        let cut = segs.len().saturating_sub(2);
        let op_no_number = segs[..cut].join(".");
        let call_direction: Vec<String> = segs[cut..]
            .iter()
            .map(|s| {
                if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                    order.to_string()
                } else {
                    (*s).to_owned()
                }
            })
            .collect();
        let new_key = if op_no_number.is_empty() {
            call_direction.join(".")
        } else {
            format!("{op_no_number}.{}", call_direction.join("."))
        };
        format!("{new_key}{}", item.strip_prefix(name).unwrap_or(item))
    }

    #[test]
    fn keys_agree_with_the_naive_renumbering() {
        let names = [
            "Functional.relu.5.backward",
            "Module.fc.Linear.backward.3",
            "Tensor.__mul__.12.backward",
            "relu.backward",
            "backward",
            "7.backward",
            ".x.backward",
            "a..backward",
            "Module.layers.0.attn.Attention.backward.10",
            "Functional.relu.5.forward",
        ];
        for name in names {
            for item in [format!("{name}.input.0"), format!("{name}.output"), "other.item".to_owned()] {
                for order in [0, 3, 12] {
                    let want = key_direction(name).map(|_| {
                        if key_direction(name) == Some("backward") {
                            naive_key(name, &item, order)
                        } else {
                            item.clone()
                        }
                    });
                    assert_eq!(compare_key(name, &item, order), want, "{name} {item} {order}");
                }
            }
            let naive_group = name.split('.').collect::<Vec<_>>();
            let naive_group = naive_group[..naive_group.len().saturating_sub(2)].join(".");
            let want = (key_direction(name) == Some("backward")).then_some(naive_group.as_str());
            assert_eq!(backward_group(name), want, "{name}");
        }
    }
}
