//! Tests of the level, task and dtype options: what each adds to or removes from the tree.
#![allow(clippy::unwrap_used)]

use serde_json::Value;

use super::*;
use crate::leaf::bf16_round;
use crate::tests::{files_below, parse, python_relayout, tmp};
use probelake_msprobe::tensor_file::read_tensor_file;

/// One training step in msprobe's layout, 2 layers.
fn one_step(level: SynthLevel, task: SynthTask, dtype: SynthDtype) -> SynthSpec {
    SynthSpec { level, task, dtype, layout: SynthLayout::Msprobe, global_steps: vec![0], ..SynthSpec::demo() }
}

fn read(dir: &Path, file: &str) -> (String, Value) {
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    assert_eq!(python_relayout(&text), text, "{file} is not laid out as CPython's");
    let v = parse(&text);
    (text, v)
}

/// Every tensor object in a dump.json value, depth first.
fn tensors(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("torch.Tensor") => out.push(v.clone()),
        Value::Object(m) => m.values().for_each(|x| tensors(x, out)),
        Value::Array(a) => a.iter().for_each(|x| tensors(x, out)),
        _ => {}
    }
}

#[test]
fn level_l0_writes_modules_only_with_their_parents() {
    let root = tmp("l0");
    write_run(&one_step(SynthLevel::L0, SynthTask::Statistics, SynthDtype::Fp32), &root).unwrap();
    let dir = root.join("step0/rank0");
    let (_, dump) = read(&dir, "dump.json");
    assert_eq!(dump["level"], "L0");
    let data = dump["data"].as_object().unwrap();
    assert!(data.contains_key("Module.blocks.1.Block.backward.0"));
    assert!(data.contains_key("Module.head.Linear.parameters_grad.0"));
    assert!(data.keys().all(|k| k.starts_with("Module.")), "{:?}", data.keys().collect::<Vec<_>>());
    let (_, construct) = read(&dir, "construct.json");
    let c = construct.as_object().unwrap();
    assert_eq!(c["Module.blocks.0.qkv.Linear.forward.0"], "Module.blocks.0.Block.forward.0");
    assert!(c["Module.blocks.0.Block.forward.0"].is_null());
    assert!(c.keys().all(|k| k.starts_with("Module.") && !k.contains("parameters_grad")));
    let (_, stack) = read(&dir, "stack.json");
    let stacked: Vec<&str> =
        stack.as_object().unwrap().values().flat_map(|g| g[0].as_array().unwrap()).filter_map(Value::as_str).collect();
    assert!(!stacked.is_empty() && stacked.iter().all(|n| n.starts_with("Module.")), "{stacked:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn md5_task_adds_a_crc_that_follows_the_tensor() {
    let root = tmp("md5");
    write_run(&one_step(SynthLevel::L1, SynthTask::Md5, SynthDtype::Fp32), &root).unwrap();
    let (text, dump) = read(&root.join("step0/rank0"), "dump.json");
    assert_eq!(dump["task"], "statistics");
    assert!(text.contains("\"requires_grad\": false,\n     \"md5\": \""), "md5 must follow requires_grad");
    let mut all = Vec::new();
    tensors(&dump["data"], &mut all);
    assert!(all.iter().all(|t| t["md5"].as_str().is_some_and(|m| m.len() == 8 && u32::from_str_radix(m, 16).is_ok())));
    let data = &dump["data"];
    // The embedding's output is the first layer norm's input: same bytes, same CRC.
    let emb = &data["Functional.embedding.0.forward"]["output"][0];
    let ln = &data["Functional.layer_norm.0.forward"]["input_args"][0];
    assert_eq!(emb["md5"], ln["md5"]);
    assert_ne!(emb["md5"], data["Functional.layer_norm.0.forward"]["output"][0]["md5"]);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn tensor_task_saves_every_named_tensor_as_a_pt_file() {
    let root = tmp("tensor");
    let report = write_run(&one_step(SynthLevel::Mix, SynthTask::Tensor, SynthDtype::Bf16), &root).unwrap();
    let dir = root.join("step0/rank0");
    let (_, dump) = read(&dir, "dump.json");
    assert_eq!(dump["task"], "tensor");
    let data_dir = dump["dump_data_dir"].as_str().unwrap();
    assert!(Path::new(data_dir).is_absolute() && data_dir.ends_with("dump_tensor_data"), "{data_dir}");
    let mut all = Vec::new();
    tensors(&dump["data"], &mut all);
    let files = files_below(&dir.join("dump_tensor_data"));
    assert_eq!(files.len(), all.len());
    assert_eq!(report.files, files.len() + 3);
    let data = dump["data"].as_object().unwrap();
    assert_eq!(
        data["Module.blocks.0.qkv.Linear.parameters_grad.0"]["bias"][0]["data_name"],
        "Module.blocks.0.qkv.Linear.parameters_grad.0.bias.pt"
    );
    assert_eq!(
        data["Module.blocks.0.qkv.Linear.forward.0"]["parameters"]["weight"]["data_name"],
        "Module.blocks.0.qkv.Linear.forward.0.parameters.weight.pt"
    );
    assert_eq!(data["Tensor.add_.0.forward"]["input_args"][1]["data_name"], "Tensor.add_.0.forward.input.1.pt");
    for t in &all {
        let name = t["data_name"].as_str().unwrap();
        let bytes = std::fs::read(dir.join("dump_tensor_data").join(name)).unwrap();
        let (td, meta) = read_tensor_file(name, &bytes).unwrap();
        assert_eq!(td.dtype, t["dtype"].as_str().unwrap(), "{name}");
        let shape: Vec<i64> = t["shape"].as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect();
        assert_eq!(td.shape, shape, "{name}");
        assert_eq!(meta.pt.unwrap().archive, name.trim_end_matches(".pt"));
        if td.dtype == "torch.bfloat16" {
            // The file holds the values the statistics describe.
            let vals: Vec<f32> =
                td.data.chunks(2).map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)).collect();
            let max = vals.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(f64::from(max), t["Max"].as_f64().unwrap(), "{name}");
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn bf16_runs_write_bf16_dtypes_and_bf16_statistics() {
    let root = tmp("bf16");
    write_run(&one_step(SynthLevel::Mix, SynthTask::Statistics, SynthDtype::Bf16), &root).unwrap();
    let (_, dump) = read(&root.join("step0/rank0"), "dump.json");
    let mut all = Vec::new();
    tensors(&dump["data"], &mut all);
    let dtypes: std::collections::BTreeSet<&str> = all.iter().filter_map(|t| t["dtype"].as_str()).collect();
    // The loss and log_softmax tensors are float32 in bf16 runs too: the script calls .float().
    assert_eq!(
        dtypes.into_iter().collect::<Vec<_>>(),
        ["torch.bfloat16", "torch.bool", "torch.float32", "torch.int64"]
    );
    for t in all.iter().filter(|t| t["dtype"] == "torch.bfloat16") {
        for k in ["Max", "Min", "Mean", "Norm"] {
            // serde_json's float parsing may be off by an ulp of the double; a value that is
            // not a bf16 one is off by 2^-9 relative or more.
            if let Some(x) = t[k].as_f64().filter(|x| *x != 0.0) {
                let nearest = f64::from(bf16_round(x as f32));
                assert!(((nearest - x) / x).abs() < 1e-9, "{k} of {t}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
