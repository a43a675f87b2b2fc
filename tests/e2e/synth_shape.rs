//! The synthesizer against real msprobe output: for every run under `tests/data/fixtures/runs`,
//! a synthesized run of the same layout, level, task and dtype must have the same folder
//! pattern and the same JSON shape (keys, value kinds, tensor key order, dtype strings).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use probelake_msprobe::json::{parse, Arena, Node, Value};
use probelake_synth::{write_run, SynthDtype, SynthLayout, SynthLevel, SynthSpec, SynthTask};

use crate::fixtures::{files_below, root};

/// A relative file path with numbers and process folder names abstracted:
/// `step_2/actor_update/step0/proc6357/dump.json` -> `step_N/actor_update/stepN/{proc}/dump.json`;
/// tensor files collapse to `dump_tensor_data/*.pt`.
fn path_pattern(rel: &Path) -> String {
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .map(|c| {
            if c.ends_with(".pt") || c.ends_with(".npy") {
                format!("*.{}", c.rsplit('.').next().unwrap_or(""))
            } else if c.strip_prefix("proc").or_else(|| c.strip_prefix("rank")).is_some_and(is_number) {
                "{proc}".to_string()
            } else {
                let mut out = String::new();
                for ch in c.chars() {
                    if ch.is_ascii_digit() {
                        if !out.ends_with('N') {
                            out.push('N');
                        }
                    } else {
                        out.push(ch);
                    }
                }
                out
            }
        })
        .collect();
    parts.join("/")
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn kind(v: &Value<'_>) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number("NaN" | "Infinity" | "-Infinity") => "nonfinite",
        Value::Number(t) if t.contains(['.', 'e', 'E']) => "float",
        Value::Number(_) => "int",
        Value::Str(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) | Value::Taken { .. } => "object",
        Value::Hole => "hole",
    }
}

fn str_of<'v>(v: Option<&'v Node<'_>>) -> Option<&'v str> {
    match v.map(|n| &n.value) {
        Some(Value::Str(s)) => Some(s),
        _ => None,
    }
}

/// Reduces a JSON document to its shape: one line per distinct (normalised path, kind), and one
/// per distinct leaf object (`{"type": ...}`) listing its keys in file order with their kinds.
/// Object keys that are names rather than schema (dump entries, stack group numbers,
/// construct nodes) become placeholders; array positions become `[]`.
fn signature(file: &str, doc: &Value<'_>) -> BTreeSet<String> {
    fn walk(v: &Value<'_>, path: &str, names_here: Option<&str>, out: &mut BTreeSet<String>) {
        if let Some(ty) = str_of(v.get("type")) {
            let dtype = str_of(v.get("dtype")).unwrap_or("-");
            if let Value::Object(m) = v {
                let keys: Vec<String> = m.iter().map(|(k, x)| format!("{k}:{}", kind(&x.value))).collect();
                out.insert(format!("leaf {ty} {dtype}: {}", keys.join(", ")));
            }
            return;
        }
        out.insert(format!("{path}: {}", kind(v)));
        match v {
            Value::Array(a) => a.iter().for_each(|x| walk(&x.value, &format!("{path}[]"), None, out)),
            Value::Object(m) => {
                for (k, x) in m.iter() {
                    let key = match names_here {
                        // parameters_grad entries name their fields after parameters.
                        Some("<entry>") if k.contains(".parameters_grad.") => "<grads>",
                        Some(placeholder) => placeholder,
                        None => k.as_ref(),
                    };
                    let names = (path == "dump" && key == "data").then_some("<entry>");
                    walk(&x.value, &format!("{path}.{key}"), names, out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    let (path, names) = match file {
        "dump.json" => ("dump", None),
        "stack.json" => ("stack", Some("<group>")),
        _ => ("construct", Some("<node>")),
    };
    walk(doc, path, names, &mut out);
    // The top-level keys in order, which a set of paths does not show.
    if let (Value::Object(m), None) = (doc, names) {
        out.insert(format!("{path} keys: {}", m.iter().map(|(k, _)| k.as_ref()).collect::<Vec<_>>().join(", ")));
    }
    out
}

/// Folder pattern and JSON signature of a whole run.
fn run_shape(run: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut patterns = BTreeSet::new();
    let mut sig = BTreeSet::new();
    for rel in files_below(run) {
        patterns.insert(path_pattern(&rel));
        let name = rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(".json") {
            let bytes = std::fs::read(run.join(&rel)).expect("read json");
            let arena = Arena::new();
            let doc = parse(&bytes, &arena).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
            for line in signature(&name, &doc.value) {
                sig.insert(format!("{name} {line}"));
            }
        }
    }
    (patterns, sig)
}

/// The synth spec of a fixture run, read from its tree: layout, steps, stages, ranks, and
/// level, task and dtype from its first dump.json.
fn spec_like(run: &Path) -> SynthSpec {
    let files = files_below(run);
    let first = files.iter().find(|f| f.ends_with("dump.json")).expect("a dump.json");
    let text = std::fs::read_to_string(run.join(first)).expect("read dump.json");
    let arena = Arena::new();
    let dump = parse(text.as_bytes(), &arena).expect("dump.json parses").value;
    let level = match str_of(dump.get("level")) {
        Some("L0") => SynthLevel::L0,
        Some("mix") => SynthLevel::Mix,
        _ => SynthLevel::L1,
    };
    let task = if str_of(dump.get("task")) == Some("tensor") {
        SynthTask::Tensor
    } else if text.contains("\"md5\"") {
        SynthTask::Md5
    } else {
        SynthTask::Statistics
    };
    let dtype = if text.contains("torch.bfloat16") { SynthDtype::Bf16 } else { SynthDtype::Fp32 };
    let dirs: BTreeSet<PathBuf> = files.iter().filter_map(|f| f.parent().map(Path::to_path_buf)).collect();
    let at = |depth: usize| -> BTreeSet<String> {
        dirs.iter().filter_map(|d| d.iter().nth(depth).map(|c| c.to_string_lossy().into_owned())).collect()
    };
    let verl = first.iter().next().is_some_and(|c| c.to_string_lossy().starts_with("step_"));
    let steps = at(0).len() as i64;
    let (layout, global_steps, ranks) = if verl {
        (SynthLayout::Verl, (1..=steps).collect(), at(3).len())
    } else {
        (SynthLayout::Msprobe, (0..steps).collect(), at(1).len())
    };
    let stages = if verl { at(1).into_iter().collect() } else { SynthSpec::demo().stages };
    SynthSpec { level, task, dtype, layout, global_steps, stages, ranks, ..SynthSpec::demo() }
}

/// What real runs may show that the synthesizer does not make: NaN/inf in statistics other
/// than those a causal mask produces comes from a deliberately broken run.
fn only_in_real_runs_allowed(line: &str) -> bool {
    line.contains("nonfinite")
}

#[test]
fn synthesized_runs_have_the_shape_of_real_msprobe_runs() {
    let Some(fixtures) = root() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    let mut runs: Vec<PathBuf> = std::fs::read_dir(fixtures.join("runs"))
        .expect("runs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    runs.sort();
    for run in runs {
        let spec = spec_like(&run);
        let out = tmp.path().join(run.file_name().expect("run name"));
        write_run(&spec, &out).unwrap_or_else(|e| panic!("synth like {}: {e}", run.display()));
        let (want_paths, want_sig) = run_shape(&run);
        let (got_paths, got_sig) = run_shape(&out);
        let what = format!("{} ({:?}, {:?}, {:?})", run.display(), spec.level, spec.task, spec.dtype);
        assert_eq!(got_paths, want_paths, "{what}: folder pattern differs");
        let extra: Vec<&String> = got_sig.difference(&want_sig).collect();
        let missing: Vec<&String> = want_sig.difference(&got_sig).filter(|l| !only_in_real_runs_allowed(l)).collect();
        assert!(
            extra.is_empty() && missing.is_empty(),
            "{what}: JSON shape differs\n  only synthesized:\n    {}\n  only real:\n    {}",
            extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    "),
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    ")
        );
        checked += 1;
    }
    assert!(checked >= 1, "no fixture runs under {}", fixtures.display());
}
