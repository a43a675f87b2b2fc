//! Serialises a [`Recorder`] as dump.json, stack.json and construct.json, byte for byte as
//! CPython's `json.dump(obj, f, indent=1)` lays them out.

use std::collections::HashMap;

use super::stack::{frames, Site, StackCtx};
use super::tensor::Summary;
use super::trace::{Field, Recorder, Val};
use crate::json::{write_f64, write_i64, write_str};

/// Streaming writer for CPython's indent=1 layout: each item on its own line indented by the
/// nesting depth, `,` at line ends, `": "` after keys and `[]`/`{}` for empty containers.
pub(crate) struct Jw<'a> {
    out: &'a mut Vec<u8>,
    /// Per open container: whether it already has an item.
    open: Vec<bool>,
}

impl<'a> Jw<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        Jw { out, open: Vec::with_capacity(16) }
    }

    fn newline(&mut self) {
        self.out.push(b'\n');
        self.out.extend(std::iter::repeat_n(b' ', self.open.len()));
    }

    /// Starts an array element (or the top-level value).
    pub(crate) fn item(&mut self) {
        if let Some(has) = self.open.last_mut() {
            let had = std::mem::replace(has, true);
            if had {
                self.out.push(b',');
            }
            self.newline();
        }
    }

    pub(crate) fn key(&mut self, k: &str) {
        self.item();
        write_str(self.out, k);
        self.out.extend_from_slice(b": ");
    }

    pub(crate) fn begin(&mut self, c: u8) {
        self.out.push(c);
        self.open.push(false);
    }

    pub(crate) fn end(&mut self, c: u8) {
        if self.open.pop() == Some(true) {
            self.newline();
        }
        self.out.push(c);
    }

    pub(crate) fn str(&mut self, s: &str) {
        write_str(self.out, s);
    }

    pub(crate) fn raw(&mut self, s: &[u8]) {
        self.out.extend_from_slice(s);
    }

    pub(crate) fn int(&mut self, v: i64) {
        write_i64(self.out, v);
    }

    /// A float32 statistic: the exact f32 value widened to a double, in CPython's repr.
    pub(crate) fn f32(&mut self, v: f32) {
        write_f64(self.out, f64::from(v));
    }

    pub(crate) fn f64(&mut self, v: f64) {
        write_f64(self.out, v);
    }
}

fn dtype_name(s: &Summary) -> &'static str {
    match s {
        Summary::F32 { .. } => "torch.float32",
        Summary::I64 { .. } => "torch.int64",
        Summary::Bool { .. } => "torch.bool",
    }
}

fn bool_lit(b: bool) -> &'static [u8] {
    if b {
        b"true"
    } else {
        b"false"
    }
}

/// Writes one value (the caller has already written its key or item separator); returns the
/// number of leaf values (tensors, scalars, nulls) written.
fn write_val(w: &mut Jw<'_>, v: &Val) -> usize {
    match v {
        Val::Tensor { shape, summary, requires_grad } => {
            w.begin(b'{');
            w.key("type");
            w.str("torch.Tensor");
            w.key("dtype");
            w.str(dtype_name(summary));
            w.key("shape");
            w.begin(b'[');
            for &d in shape.dims() {
                w.item();
                w.int(d as i64);
            }
            w.end(b']');
            match *summary {
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
            w.end(b'}');
            1
        }
        Val::Null => {
            w.raw(b"null");
            1
        }
        Val::Float(x) => {
            scalar(w, "float", |w| w.f64(*x));
            1
        }
        Val::Int(x) => {
            scalar(w, "int", |w| w.int(*x));
            1
        }
        Val::Bool(x) => {
            scalar(w, "bool", |w| w.raw(bool_lit(*x)));
            1
        }
        Val::List(items) => write_list(w, items),
    }
}

fn scalar(w: &mut Jw<'_>, ty: &str, value: impl FnOnce(&mut Jw<'_>)) {
    w.begin(b'{');
    w.key("type");
    w.str(ty);
    w.key("value");
    value(w);
    w.end(b'}');
}

fn write_list(w: &mut Jw<'_>, items: &[Val]) -> usize {
    w.begin(b'[');
    let mut leaves = 0;
    for v in items {
        w.item();
        leaves += write_val(w, v);
    }
    w.end(b']');
    leaves
}

/// Appends dump.json to `out`; returns the number of leaf values written.
pub(crate) fn dump_json(out: &mut Vec<u8>, rec: &Recorder) -> usize {
    let mut w = Jw::new(out);
    w.begin(b'{');
    w.key("task");
    w.str("statistics");
    w.key("level");
    w.str(if rec.mix { "mix" } else { "L1" });
    w.key("framework");
    w.str("pytorch");
    w.key("dump_data_dir");
    w.raw(b"null");
    w.key("data");
    w.begin(b'{');
    let mut leaves = 0;
    for e in &rec.entries {
        w.key(&e.name);
        w.begin(b'{');
        for (k, f) in &e.fields {
            w.key(k);
            match f {
                Field::List(items) => leaves += write_list(&mut w, items),
                Field::Obj(kv) => {
                    w.begin(b'{');
                    for (k, v) in kv {
                        w.key(k);
                        leaves += write_val(&mut w, v);
                    }
                    w.end(b'}');
                }
            }
        }
        w.end(b'}');
    }
    w.end(b'}');
    w.end(b'}');
    leaves
}

/// Appends stack.json (grouped format: one group per distinct stack, in capture order).
/// `cache` keeps each site's frames between files; the frames only depend on (site, ctx).
pub(crate) fn stack_json(
    out: &mut Vec<u8>,
    rec: &Recorder,
    ctx: StackCtx,
    cache: &mut HashMap<(Site, StackCtx), Vec<String>>,
) {
    let mut groups: Vec<(Site, Vec<&str>)> = Vec::new();
    let mut index: HashMap<Site, usize> = HashMap::new();
    for (site, name) in &rec.stacks {
        let i = *index.entry(*site).or_insert_with(|| {
            groups.push((*site, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(name);
    }
    let mut w = Jw::new(out);
    w.begin(b'{');
    for (i, (site, names)) in groups.iter().enumerate() {
        w.key(&i.to_string());
        w.begin(b'[');
        w.item();
        w.begin(b'[');
        for n in names {
            w.item();
            w.str(n);
        }
        w.end(b']');
        w.item();
        w.begin(b'[');
        for f in cache.entry((*site, ctx)).or_insert_with(|| frames(*site, ctx)).iter() {
            w.item();
            w.str(f);
        }
        w.end(b']');
        w.end(b']');
    }
    w.end(b'}');
}

/// Appends construct.json (`{}` at level L1).
pub(crate) fn construct_json(out: &mut Vec<u8>, rec: &Recorder) {
    let mut w = Jw::new(out);
    w.begin(b'{');
    for (k, parent) in &rec.construct {
        w.key(k);
        match parent {
            Some(p) => w.str(p),
            None => w.raw(b"null"),
        }
    }
    w.end(b'}');
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_cpython_indent_1() {
        let mut out = Vec::new();
        let mut w = Jw::new(&mut out);
        w.begin(b'{');
        w.key("a");
        w.begin(b'[');
        w.item();
        w.int(1);
        w.item();
        w.begin(b'{');
        w.end(b'}');
        w.end(b']');
        w.key("b");
        w.begin(b'[');
        w.end(b']');
        w.end(b'}');
        assert_eq!(String::from_utf8_lossy(&out), "{\n \"a\": [\n  1,\n  {}\n ],\n \"b\": []\n}");
    }

    #[test]
    fn float_ties_round_half_even_like_cpython() {
        let f = |v: f64| {
            let mut out = Vec::new();
            write_f64(&mut out, v);
            String::from_utf8(out).unwrap()
        };
        // CPython: repr(23.6343536376953125) == '23.634353637695312'
        assert_eq!(f(23.634_353_637_695_312), "23.634353637695312");
        assert_eq!(f(1e-5), "1e-05");
        assert_eq!(f(0.3535533905932738), "0.3535533905932738");
        assert_eq!(f(f64::NEG_INFINITY), "-Infinity");
    }
}
