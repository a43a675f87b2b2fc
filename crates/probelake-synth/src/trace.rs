//! The in-memory record of one dump directory: dump.json entries in insertion order, the
//! stack captures in capture order and the construct.json parent map, built the way msprobe's
//! hooks build them.

use std::collections::{HashMap, HashSet};

use crate::stack::Site;
use crate::tensor::Shape;

/// A recorded tensor's elements. Kept whole (not summarised on the spot) because what is
/// written depends on the run's task and dtype: statistics of the bf16-rounded values, a
/// CRC of the raw bytes, or the bytes themselves in a `.pt` file.
pub(crate) enum Elems {
    /// A floating tensor in the run's dtype.
    F32(Vec<f32>),
    /// A tensor the script cast with `.float()`: float32 whatever the run's dtype.
    Float32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// One value in an argument list, as msprobe serialises it.
pub(crate) enum Val {
    Tensor { shape: Shape, elems: Elems, requires_grad: bool },
    Null,
    Float(f64),
    Int(i64),
    Bool(bool),
    List(Vec<Val>),
}

impl Val {
    pub(crate) fn f32(dims: &[usize], data: &[f32], requires_grad: bool) -> Val {
        Val::Tensor { shape: Shape::new(dims), elems: Elems::F32(data.to_vec()), requires_grad }
    }

    /// A `.float()` result (the loss inputs and outputs): float32 even in a bf16 run.
    pub(crate) fn float32(dims: &[usize], data: &[f32], requires_grad: bool) -> Val {
        Val::Tensor { shape: Shape::new(dims), elems: Elems::Float32(data.to_vec()), requires_grad }
    }

    pub(crate) fn i64(dims: &[usize], data: &[i64]) -> Val {
        Val::Tensor { shape: Shape::new(dims), elems: Elems::I64(data.to_vec()), requires_grad: false }
    }

    pub(crate) fn bool_tensor(dims: &[usize], data: Vec<bool>) -> Val {
        Val::Tensor { shape: Shape::new(dims), elems: Elems::Bool(data), requires_grad: false }
    }
}

/// A field of an entry: a JSON array of values or a JSON object of named values.
pub(crate) enum Field {
    List(Vec<Val>),
    Obj(Vec<(&'static str, Val)>),
}

/// One dump.json `data` entry.
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) fields: Vec<(&'static str, Field)>,
}

/// Collects one process's dump. At level L1 the module and construct calls are no-ops; at
/// level L0 the API calls are (they still advance their counters, as msprobe's do not matter
/// there, but nothing of them is written).
pub(crate) struct Recorder {
    /// API calls are dumped (L1, mix).
    apis: bool,
    /// Modules are dumped (L0, mix).
    modules: bool,
    pub(crate) entries: Vec<Entry>,
    /// (site, entry name) in the order msprobe captured the stacks.
    pub(crate) stacks: Vec<(Site, String)>,
    pub(crate) construct: Vec<(String, Option<String>)>,
    present: HashSet<String>,
    /// Open modules, outermost first.
    open: Vec<String>,
    counters: HashMap<&'static str, usize>,
}

impl Recorder {
    pub(crate) fn new(apis: bool, modules: bool) -> Self {
        Recorder {
            apis,
            modules,
            entries: Vec::new(),
            stacks: Vec::new(),
            construct: Vec::new(),
            present: HashSet::new(),
            open: Vec::new(),
            counters: HashMap::new(),
        }
    }

    fn next_name(&mut self, api: &'static str) -> String {
        let n = self.counters.entry(api).or_insert(0);
        let name = format!("{api}.{n}.forward");
        *n += 1;
        name
    }

    /// msprobe's construct.json insertion: the node itself, then every not-yet-seen ancestor
    /// from the outermost inwards (that is what the parent-chain walk in its hooks produces).
    fn add_construct(&mut self, name: &str) {
        if !self.modules {
            return;
        }
        let parent = self.open.last().cloned();
        if self.present.insert(name.to_string()) {
            self.construct.push((name.to_string(), parent));
        }
        for i in 0..self.open.len() {
            if self.present.insert(self.open[i].clone()) {
                let p = if i == 0 { None } else { Some(self.open[i - 1].clone()) };
                self.construct.push((self.open[i].clone(), p));
            }
        }
    }

    /// Records a forward API call; returns its name (`Prefix.api.n.forward`).
    pub(crate) fn api(
        &mut self,
        api: &'static str,
        site: Site,
        args: Vec<Val>,
        kwargs: Vec<(&'static str, Val)>,
        output: Vec<Val>,
    ) -> String {
        let name = self.next_name(api);
        if !self.apis {
            return name;
        }
        self.add_construct(&name);
        self.stacks.push((site, name.clone()));
        self.entries.push(Entry {
            name: name.clone(),
            fields: vec![
                ("input_args", Field::List(args)),
                ("input_kwargs", Field::Obj(kwargs)),
                ("output", Field::List(output)),
            ],
        });
        name
    }

    /// A call that advances its counter and shows in construct.json but, being low-risk
    /// (view/transpose/reshape…), is not written to dump.json.
    pub(crate) fn filtered(&mut self, api: &'static str) -> String {
        let name = self.next_name(api);
        if self.apis {
            self.add_construct(&name);
        }
        name
    }

    /// Backward entry for a forward API name.
    pub(crate) fn api_bwd(&mut self, fwd: &str, input: Vec<Val>, output: Vec<Val>) {
        if !self.apis {
            return;
        }
        let name = backward_name(fwd);
        self.add_construct(&name);
        self.entries.push(Entry { name, fields: vec![("input", Field::List(input)), ("output", Field::List(output))] });
    }

    /// Backward of a filtered call: construct.json only.
    pub(crate) fn filtered_bwd(&mut self, fwd: &str) {
        if !self.apis {
            return;
        }
        let name = backward_name(fwd);
        self.add_construct(&name);
    }

    /// Opens a module (Mix only): `Module.{path}.{class}.forward.0` or `.backward.0`.
    pub(crate) fn enter(&mut self, path: &str, class: &str, backward: bool, site: Option<Site>) {
        if !self.modules {
            return;
        }
        let dir = if backward { "backward" } else { "forward" };
        let name = format!("Module.{path}.{class}.{dir}.0");
        if let Some(site) = site {
            self.stacks.push((site, name.clone()));
        }
        self.open.push(name);
    }

    /// Closes the innermost module and writes its entry (`parameters` only for forwards).
    pub(crate) fn exit(&mut self, input: Vec<Val>, output: Vec<Val>, parameters: Option<Vec<(&'static str, Val)>>) {
        if !self.modules {
            return;
        }
        let Some(name) = self.open.last().cloned() else {
            return;
        };
        if !self.present.contains(&name) {
            // A module without recorded children (Embedding's backward hook fires before the
            // API's): it enters construct.json when it is written.
            self.open.pop();
            self.add_construct(&name);
        } else {
            self.open.pop();
        }
        let fields = match parameters {
            Some(p) => vec![
                ("input_args", Field::List(input)),
                ("input_kwargs", Field::Obj(Vec::new())),
                ("output", Field::List(output)),
                ("parameters", Field::Obj(p)),
            ],
            None => vec![("input", Field::List(input)), ("output", Field::List(output))],
        };
        self.entries.push(Entry { name, fields });
    }

    /// `Module.{path}.{class}.parameters_grad.0` with one single-tensor list per parameter.
    pub(crate) fn param_grad(&mut self, path: &str, class: &str, grads: Vec<(&'static str, Val)>) {
        if !self.modules {
            return;
        }
        let fields = grads.into_iter().map(|(k, v)| (k, Field::List(vec![v]))).collect();
        self.entries.push(Entry { name: format!("Module.{path}.{class}.parameters_grad.0"), fields });
    }

    /// A plain construct.json node (the optimizer pseudo-module); only at mix, where the
    /// optimizer's API calls point at it.
    pub(crate) fn construct_node(&mut self, name: &str) {
        if self.apis && self.modules && self.present.insert(name.to_string()) {
            self.construct.push((name.to_string(), None));
        }
    }

    /// Makes `name` the parent of the following API calls without writing a module entry.
    pub(crate) fn scope(&mut self, name: Option<&str>) {
        if !(self.apis && self.modules) {
            return;
        }
        self.open.clear();
        if let Some(n) = name {
            self.open.push(n.to_string());
        }
    }
}

fn backward_name(fwd: &str) -> String {
    match fwd.strip_suffix(".forward") {
        Some(stem) => format!("{stem}.backward"),
        None => format!("{fwd}.backward"),
    }
}
