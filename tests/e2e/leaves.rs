//! The `dump` table has exactly one row per leaf, counted here independently of the importer.

use std::path::Path;

use serde_json::Value;

use crate::cli;
use crate::fixtures::{files_below, runs};

/// Replaces msprobe's bare `NaN` / `Infinity` / `-Infinity` tokens (outside strings) with
/// `null`, so serde_json reads the file.
fn to_strict_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let token = ["-Infinity", "Infinity", "NaN"].into_iter().find(|t| rest.starts_with(t));
        if let Some(t) = token {
            out.push_str("null");
            rest = &rest[t.len()..];
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn count(v: &Value) -> u64 {
    match v {
        Value::Null => 1,
        Value::Object(m) if m.get("type").is_some_and(Value::is_string) || m.contains_key("class_type") => 1,
        Value::Object(m) => m.values().map(count).sum(),
        Value::Array(a) => a.iter().map(count).sum(),
        _ => 0,
    }
}

/// Leaves of one dump.json / debug.json, by msprobe's slot rules.
pub fn leaves_in(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).expect("read");
    let doc: Value = serde_json::from_str(&to_strict_json(&text)).expect("valid JSON");
    let debug = path.file_name().is_some_and(|n| n == "debug.json");
    let Some(Value::Object(data)) = doc.get("data") else { return 0 };
    let mut n = 0;
    for (name, entry) in data {
        if debug {
            n += count(entry);
            continue;
        }
        let parts: Vec<&str> = name.rsplit('.').take(2).collect();
        let grads = parts.contains(&"parameters_grad");
        if let Value::Object(fields) = entry {
            for (k, v) in fields {
                if grads || matches!(k.as_str(), "input_args" | "input_kwargs" | "input" | "output" | "parameters") {
                    n += count(v);
                }
            }
        }
    }
    n
}

fn dataset_rows(ds: &Path) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    rt.block_on(async {
        let lake = probelake_format::Lake::local(ds).expect("open");
        let mut rows = 0;
        for unit in lake.units().await.expect("units") {
            for file in unit.files_of(probelake_format::Table::Dump) {
                rows += lake.read_file(file).await.expect("read").iter().map(|b| b.num_rows() as u64).sum::<u64>();
            }
        }
        rows
    })
}

#[test]
fn dump_rows_equal_leaves_in_the_json() {
    for run in runs() {
        let want: u64 = files_below(&run)
            .iter()
            .filter(|r| r.file_name().is_some_and(|n| n == "dump.json" || n == "debug.json"))
            .map(|r| leaves_in(&run.join(r)))
            .sum();
        let tmp = tempfile::tempdir().expect("tempdir");
        let ds = tmp.path().join("ds");
        cli::import(&run, &ds);
        assert_eq!(dataset_rows(&ds), want, "{}", run.display());
    }
}

#[test]
fn strict_json_rewrite_leaves_strings_alone() {
    assert_eq!(
        to_strict_json(r#"{"a": NaN, "b": "NaN -Infinity", "c": [-Infinity, Infinity]}"#),
        r#"{"a": null, "b": "NaN -Infinity", "c": [null, null]}"#
    );
}
