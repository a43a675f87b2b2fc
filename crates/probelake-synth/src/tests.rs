//! Tests of the synthesizer: CPython byte layout, determinism and the injected bug.
#![allow(clippy::unwrap_used)]

use super::*;
use probelake_msprobe::json::write_f64;
pub(crate) use probelake_msprobe::testing::files_below;

pub(super) fn tmp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("probelake-synth-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Re-lays out `text` token by token with CPython's `json.dumps(indent=1)` rules and checks
/// floats are in `repr` form; returns the re-rendered text.
pub(super) fn python_relayout(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    // After an opening bracket, an element needs a newline unless the container is empty.
    let mut pending_open = false;
    let nl = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth));
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if pending_open && c != b']' && c != b'}' {
            nl(&mut out, depth);
        }
        pending_open = false;
        match c {
            b'{' | b'[' => {
                out.push(c);
                depth += 1;
                pending_open = true;
                i += 1;
            }
            b'}' | b']' => {
                depth -= 1;
                if !matches!(out.last(), Some(b'{' | b'[')) {
                    nl(&mut out, depth);
                }
                out.push(c);
                i += 1;
            }
            b',' => {
                out.push(b',');
                nl(&mut out, depth);
                i += 1;
            }
            b':' => {
                out.extend_from_slice(b": ");
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                let s = &b[start..i];
                assert!(s.iter().all(|&c| (0x20..0x7f).contains(&c)), "non-ASCII string");
                out.extend_from_slice(s);
            }
            _ => {
                let start = i;
                while i < b.len() && !b",]}: \n".contains(&b[i]) {
                    i += 1;
                }
                let tok = &text[start..i];
                if tok.contains(['.', 'e']) && !matches!(tok, "true" | "false") {
                    let v: f64 = tok.parse().unwrap();
                    let mut r = Vec::new();
                    write_f64(&mut r, v);
                    assert_eq!(tok.as_bytes(), &r[..], "float not in repr form");
                }
                out.extend_from_slice(tok.as_bytes());
            }
        }
    }
    String::from_utf8(out).unwrap()
}

pub(super) fn parse(text: &str) -> serde_json::Value {
    let t = text
        .replace(": NaN", ": \"NaN\"")
        .replace(": -Infinity", ": \"-Infinity\"")
        .replace(": Infinity", ": \"Infinity\"");
    serde_json::from_str(&t).unwrap()
}

/// dump.json `data` entries in file order, as (name, text of the entry).
fn entries(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("  \"") && !line.starts_with("   ") {
            let name = line.trim().trim_end_matches(": {").trim_matches('"').to_string();
            out.push((name, String::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push_str(line);
            last.1.push('\n');
        }
    }
    out
}

#[test]
fn demo_tree_is_python_formatted_and_parses() {
    let root = tmp("demo");
    let report = write_run(&SynthSpec::demo(), &root).unwrap();
    let files = files_below(&root);
    assert_eq!(files.len(), 18);
    assert_eq!(report.files, 18);
    let mut bytes = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        bytes += text.len() as u64;
        assert_eq!(python_relayout(&text), text, "{}", f.display());
        let v = parse(&text);
        assert!(v.is_object());
    }
    assert_eq!(bytes, report.bytes);
    let upd = std::fs::read_to_string(root.join("step_1/actor_update/step0/rank0/dump.json")).unwrap();
    let names: Vec<String> = entries(&upd).into_iter().map(|e| e.0).collect();
    assert_eq!(names[0], "Functional.embedding.0.forward");
    assert_eq!(names[4], "Tensor.__mul__.0.forward");
    assert!(names.contains(&"Functional.cross_entropy.0.backward".to_string()));
    assert_eq!(names.last().map(String::as_str), Some("Tensor.add_.28.forward"));
    let v = parse(&upd);
    let emb = &v["data"]["Functional.embedding.0.forward"]["input_args"][0];
    assert_eq!(emb["dtype"], "torch.int64");
    assert!(emb["Mean"].is_null() && emb["Max"].is_i64());
    let ln = &v["data"]["Functional.layer_norm.0.forward"];
    assert_eq!(ln["input_args"][4]["value"], 1e-5);
    assert!(ln["output"][0]["Mean"].as_f64().unwrap().abs() < 0.05);
    assert_eq!(std::fs::read_to_string(root.join("step_1/actor_update/step0/rank0/construct.json")).unwrap(), "{}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn deterministic() {
    let (a, b) = (tmp("det-a"), tmp("det-b"));
    let spec = SynthSpec { level: SynthLevel::Mix, ..SynthSpec::demo() };
    assert_eq!(write_run(&spec, &a).unwrap(), write_run(&spec, &b).unwrap());
    let (fa, fb) = (files_below(&a), files_below(&b));
    assert_eq!(fa.len(), fb.len());
    for (x, y) in fa.iter().zip(&fb) {
        assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap());
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

fn rel(a: &serde_json::Value, b: &serde_json::Value) -> f64 {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if x != 0.0 => ((x - y) / x).abs(),
        _ => 0.0,
    }
}

#[test]
fn bug_diverges_exactly_at_the_buggy_mul() {
    let (base, bug) = (tmp("base"), tmp("bug"));
    let spec = SynthSpec::demo();
    write_run(&spec, &base).unwrap();
    let bug_spec = SynthSpec { attention_scale_bug: Some((1, 1.01)), ..spec };
    write_run(&bug_spec, &bug).unwrap();
    for step in ["step_1", "step_2"] {
        for stage in ["actor_compute_log_prob", "ref_compute_log_prob", "actor_update"] {
            let rel_path = format!("{step}/{stage}/step0/rank0/dump.json");
            let a = entries(&std::fs::read_to_string(base.join(&rel_path)).unwrap());
            let b = entries(&std::fs::read_to_string(bug.join(&rel_path)).unwrap());
            let names = |v: &[(String, String)]| v.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
            assert_eq!(names(&a), names(&b), "{rel_path}");
            let at = a.iter().position(|e| e.0 == "Tensor.__mul__.1.forward").unwrap();
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                if stage.starts_with("ref") || i < at {
                    assert_eq!(x.1, y.1, "{rel_path} {} should match", x.0);
                } else if !x.0.starts_with("Tensor.add_") {
                    // Optimizer updates of untouched parameters can round to the same value.
                    assert_ne!(x.1, y.1, "{rel_path} {} should differ", x.0);
                }
            }
        }
    }
    // The difference is visible in the statistics downstream, in the same layer.
    let p = "step_1/actor_compute_log_prob/step0/rank0/dump.json";
    let a = parse(&std::fs::read_to_string(base.join(p)).unwrap());
    let b = parse(&std::fs::read_to_string(bug.join(p)).unwrap());
    let out = |v: &serde_json::Value, k: &str| v["data"][k]["output"][0].clone();
    let (x, y) = (out(&a, "Tensor.__mul__.1.forward"), out(&b, "Tensor.__mul__.1.forward"));
    assert!((rel(&x["Norm"], &y["Norm"]) - 0.01).abs() < 1e-3);
    let max_rel = [
        "Functional.softmax.1.forward",
        "Torch.matmul.3.forward",
        "Functional.linear.5.forward",
        "Tensor.__add__.2.forward",
    ]
    .iter()
    .flat_map(|k| ["Max", "Min", "Mean", "Norm"].map(|s| rel(&out(&a, k)[s], &out(&b, k)[s])))
    .fold(0.0, f64::max);
    assert!(max_rel > 1e-4, "{max_rel}");
    let _ = std::fs::remove_dir_all(&base);
    let _ = std::fs::remove_dir_all(&bug);
}

#[test]
fn mix_msprobe_layout_has_modules_and_parents() {
    let root = tmp("mix");
    let spec = SynthSpec {
        level: SynthLevel::Mix,
        layout: SynthLayout::Msprobe,
        global_steps: vec![0, 1],
        ranks: 2,
        ..SynthSpec::demo()
    };
    let report = write_run(&spec, &root).unwrap();
    assert_eq!(report.files, 12);
    let dir = root.join("step1/rank1");
    let dump = std::fs::read_to_string(dir.join("dump.json")).unwrap();
    assert_eq!(python_relayout(&dump), dump);
    let names: Vec<String> = entries(&dump).into_iter().map(|e| e.0).collect();
    for want in [
        "Module.embed.Embedding.forward.0",
        "Module.blocks.0.qkv.Linear.forward.0",
        "Module.blocks.1.Block.forward.0",
        "Module.blocks.0.fc1.Linear.parameters_grad.0",
        "Module.blocks.1.Block.backward.0",
        "Module.embed.Embedding.parameters_grad.0",
    ] {
        assert!(names.iter().any(|n| n == want), "{want}");
    }
    let pos = |n: &str| names.iter().position(|x| x == n).unwrap();
    assert!(pos("Functional.linear.0.forward") < pos("Module.blocks.0.qkv.Linear.forward.0"));
    let construct_text = std::fs::read_to_string(dir.join("construct.json")).unwrap();
    assert_eq!(python_relayout(&construct_text), construct_text);
    let construct = parse(&construct_text);
    let c = construct.as_object().unwrap();
    assert_eq!(c["Functional.linear.0.forward"], "Module.blocks.0.qkv.Linear.forward.0");
    assert_eq!(c["Module.blocks.0.qkv.Linear.forward.0"], "Module.blocks.0.Block.forward.0");
    assert!(c["Module.blocks.0.Block.forward.0"].is_null());
    assert_eq!(c["Tensor.add_.0.forward"], "optimizer");
    for (k, v) in c {
        if let Some(p) = v.as_str() {
            assert!(c.contains_key(p), "{k} -> {p}");
        }
    }
    let v = parse(&dump);
    let pg = &v["data"]["Module.blocks.0.qkv.Linear.parameters_grad.0"];
    assert_eq!(pg["bias"][0]["shape"], serde_json::json!([96]));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn rejects_bad_specs() {
    let root = tmp("bad");
    let spec = SynthSpec { attention_scale_bug: Some((2, 1.01)), ..SynthSpec::demo() };
    assert!(matches!(write_run(&spec, &root), Err(SynthError::Spec(_))));
    let spec = SynthSpec { stages: vec!["../x".into()], ..SynthSpec::demo() };
    assert!(matches!(write_run(&spec, &root), Err(SynthError::Spec(_))));
}
