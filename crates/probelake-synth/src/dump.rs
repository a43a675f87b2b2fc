//! dump.json for one process directory, and in the tensor task the `.pt` file of every
//! tensor it names, as msprobe's collector writes them.

use crate::emit::Jw;
use crate::leaf::{dtype_name, md5_field, pt_file, raw_bytes, summary, Encoding};
use crate::tensor::Summary;
use crate::trace::{Field, Recorder, Val};
use crate::{SynthLevel, SynthTask};
use probelake_msprobe::tensor_file::TensorFileError;

/// What the header of dump.json says besides `data`.
pub(crate) struct Header<'a> {
    pub(crate) level: SynthLevel,
    pub(crate) enc: Encoding,
    /// `dump_data_dir`: the absolute `dump_tensor_data` path in the tensor task.
    pub(crate) data_dir: Option<&'a str>,
}

/// What [`dump_json`] produced besides the JSON.
#[derive(Default)]
pub(crate) struct DumpOut {
    /// Leaf values written (tensors, scalars, nulls).
    pub(crate) leaves: usize,
    /// Tensor task: `(data_name, file bytes)` for `dump_tensor_data/`.
    pub(crate) tensor_files: Vec<(String, Vec<u8>)>,
}

struct Ctx {
    enc: Encoding,
    out: DumpOut,
    /// The data name of the value being written, without `.pt` (tensor task only: the other
    /// tasks skip building names they never write).
    path: String,
    names: bool,
}

impl Ctx {
    /// Appends `.{part}` to the current name; returns the length to truncate back to.
    fn push(&mut self, part: impl std::fmt::Display) -> usize {
        let len = self.path.len();
        if self.names {
            use std::fmt::Write as _;
            let _ = write!(self.path, ".{part}");
        }
        len
    }
}

fn bool_lit(b: bool) -> &'static [u8] {
    if b {
        b"true"
    } else {
        b"false"
    }
}

fn write_tensor(w: &mut Jw<'_>, cx: &mut Ctx, v: &Val) -> Result<(), TensorFileError> {
    let Val::Tensor { shape, elems, requires_grad } = v else { return Ok(()) };
    let dtype = dtype_name(elems, cx.enc.dtype);
    w.begin(b'{');
    w.key("type");
    w.str("torch.Tensor");
    w.key("dtype");
    w.str(dtype);
    w.key("shape");
    w.begin(b'[');
    for &d in shape.dims() {
        w.item();
        w.int(d as i64);
    }
    w.end(b']');
    match summary(elems, cx.enc.dtype) {
        Summary::F32 { max, min, mean, norm } => {
            for (k, x) in [("Max", max), ("Min", min), ("Mean", mean), ("Norm", norm)] {
                w.key(k);
                w.f32(x);
            }
        }
        Summary::I64 { max, min } => {
            w.key("Max");
            w.int(max);
            w.key("Min");
            w.int(min);
            w.key("Mean");
            w.raw(b"null");
            w.key("Norm");
            w.raw(b"null");
        }
        Summary::Bool { max, min } => {
            w.key("Max");
            w.raw(bool_lit(max));
            w.key("Min");
            w.raw(bool_lit(min));
            w.key("Mean");
            w.raw(b"null");
            w.key("Norm");
            w.raw(b"null");
        }
    }
    w.key("requires_grad");
    w.raw(bool_lit(*requires_grad));
    match cx.enc.task {
        SynthTask::Statistics => {}
        SynthTask::Md5 => {
            w.key("md5");
            w.str(&md5_field(&raw_bytes(elems, cx.enc.dtype)));
        }
        SynthTask::Tensor => {
            let name = format!("{}.pt", cx.path);
            w.key("data_name");
            w.str(&name);
            let file = pt_file(&name, dtype, shape.dims(), raw_bytes(elems, cx.enc.dtype))?;
            cx.out.tensor_files.push((name, file));
        }
    }
    w.end(b'}');
    Ok(())
}

fn scalar(w: &mut Jw<'_>, ty: &str, value: impl FnOnce(&mut Jw<'_>)) {
    w.begin(b'{');
    w.key("type");
    w.str(ty);
    w.key("value");
    value(w);
    w.end(b'}');
}

/// Writes one value (its key or item separator is already written) whose data name is
/// `cx.path`.
fn write_val(w: &mut Jw<'_>, cx: &mut Ctx, v: &Val) -> Result<(), TensorFileError> {
    match v {
        Val::Tensor { .. } => write_tensor(w, cx, v)?,
        Val::Null => w.raw(b"null"),
        Val::Float(x) => scalar(w, "float", |w| w.f64(*x)),
        Val::Int(x) => scalar(w, "int", |w| w.int(*x)),
        Val::Bool(x) => scalar(w, "bool", |w| w.raw(bool_lit(*x))),
        Val::List(items) => return write_list(w, cx, items),
    }
    cx.out.leaves += 1;
    Ok(())
}

/// A list whose items are named `{cx.path}.{index}`.
fn write_list(w: &mut Jw<'_>, cx: &mut Ctx, items: &[Val]) -> Result<(), TensorFileError> {
    w.begin(b'[');
    for (i, v) in items.iter().enumerate() {
        w.item();
        let len = cx.push(i);
        write_val(w, cx, v)?;
        cx.path.truncate(len);
    }
    w.end(b']');
    Ok(())
}

/// The data-name category msprobe uses for an entry field.
fn category(field: &str) -> &str {
    match field {
        "input_args" => "input",
        "input_kwargs" => "kwargs",
        other => other,
    }
}

/// Appends dump.json to `out`.
pub(crate) fn dump_json(out: &mut Vec<u8>, rec: &Recorder, header: &Header<'_>) -> Result<DumpOut, TensorFileError> {
    let mut w = Jw::new(out);
    w.begin(b'{');
    w.key("task");
    // md5 is a summary mode of the statistics task, not a task of its own.
    w.str(if header.enc.task == SynthTask::Tensor { "tensor" } else { "statistics" });
    w.key("level");
    w.str(match header.level {
        SynthLevel::L0 => "L0",
        SynthLevel::L1 => "L1",
        SynthLevel::Mix => "mix",
    });
    w.key("framework");
    w.str("pytorch");
    w.key("dump_data_dir");
    match header.data_dir {
        Some(d) => w.str(d),
        None => w.raw(b"null"),
    }
    w.key("data");
    w.begin(b'{');
    let names = header.enc.task == SynthTask::Tensor;
    let mut cx = Ctx { enc: header.enc, out: DumpOut::default(), path: String::new(), names };
    for e in &rec.entries {
        w.key(&e.name);
        w.begin(b'{');
        // Parameter gradients are named `{entry}.{param}`, without the list index.
        let grads = e.name.contains(".parameters_grad.");
        for (k, f) in &e.fields {
            w.key(k);
            cx.path.clear();
            if names {
                cx.path.push_str(&e.name);
            }
            cx.push(category(k));
            match f {
                Field::List(items) if grads => {
                    w.begin(b'[');
                    for v in items {
                        w.item();
                        write_val(&mut w, &mut cx, v)?;
                    }
                    w.end(b']');
                }
                Field::List(items) => write_list(&mut w, &mut cx, items)?,
                Field::Obj(kv) => {
                    w.begin(b'{');
                    for (k, v) in kv {
                        w.key(k);
                        let len = cx.push(k);
                        write_val(&mut w, &mut cx, v)?;
                        cx.path.truncate(len);
                    }
                    w.end(b'}');
                }
            }
        }
        w.end(b'}');
    }
    w.end(b'}');
    w.end(b'}');
    Ok(cx.out)
}
