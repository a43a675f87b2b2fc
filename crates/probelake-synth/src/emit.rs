//! The JSON layout of CPython's `json.dump(obj, f, indent=1)`, and stack.json and
//! construct.json of a [`Recorder`] in it, byte for byte.

use std::collections::HashMap;

use crate::stack::{frames, Site, StackCtx};
use crate::trace::Recorder;
use probelake_msprobe::json::{write_f64, write_i64, write_str};

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
