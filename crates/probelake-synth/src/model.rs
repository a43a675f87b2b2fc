//! The toy transformer of `gen_msprobe_runs.py` (embedding, pre-norm blocks with a fused qkv
//! linear and causal attention, GELU MLP, final norm and head), run in f32 with every hooked
//! call recorded the way msprobe records it.

use crate::params::{BlockParams, Params};
use crate::stack::Site;
use crate::tensor::{gelu, layer_norm, linear, logsumexp_rows, softmax_rows, LnCache};
use crate::trace::{Recorder, Val};

/// Shapes of the model; `heads` divides `d`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub(crate) layers: usize,
    pub(crate) d: usize,
    pub(crate) heads: usize,
    pub(crate) t: usize,
    pub(crate) b: usize,
    pub(crate) vocab: usize,
}

impl Dims {
    pub(crate) fn n(&self) -> usize {
        self.b * self.t
    }
    pub(crate) fn dh(&self) -> usize {
        self.d / self.heads
    }
    pub(crate) fn f(&self) -> usize {
        4 * self.d
    }
}

/// Activations one block keeps for the backward pass, plus the names of its recorded calls.
pub(crate) struct BlockTape {
    pub(crate) x: Vec<f32>,
    pub(crate) h1: Vec<f32>,
    pub(crate) ln1: LnCache,
    pub(crate) q: Vec<f32>,
    pub(crate) k: Vec<f32>,
    pub(crate) v: Vec<f32>,
    pub(crate) p: Vec<f32>,
    pub(crate) y: Vec<f32>,
    pub(crate) x2: Vec<f32>,
    pub(crate) h2: Vec<f32>,
    pub(crate) ln2: LnCache,
    pub(crate) f: Vec<f32>,
    pub(crate) g: Vec<f32>,
    pub(crate) scale: f32,
    /// Recorded names, in call order (see `forward_block`).
    pub(crate) names: Vec<String>,
}

/// Activations of the whole forward pass.
pub(crate) struct Tape {
    pub(crate) blocks: Vec<BlockTape>,
    pub(crate) hf: Vec<f32>,
    pub(crate) lnf: LnCache,
    pub(crate) logits: Vec<f32>,
    pub(crate) names: Vec<String>,
}

/// Context of one forward pass.
pub(crate) struct Run<'a> {
    pub(crate) dims: Dims,
    pub(crate) params: &'a Params,
    /// Gradient tracking on (actor_update) or off (`torch.no_grad()` stages).
    pub(crate) grad: bool,
    pub(crate) bug: Option<(usize, f64)>,
}

impl Run<'_> {
    fn act(&self, dims: &[usize], data: &[f32]) -> Val {
        Val::f32(dims, data, self.grad)
    }

    /// Runs the model on `ids`; records every hooked call into `rec`.
    pub(crate) fn forward(&self, ids: &[i64], rec: &mut Recorder) -> Tape {
        let (dm, p) = (self.dims, self.params);
        let (b, t, d, n) = (dm.b, dm.t, dm.d, dm.n());
        let mut x = vec![0f32; n * d];
        for (row, &id) in ids.iter().enumerate() {
            let id = id.clamp(0, dm.vocab as i64 - 1) as usize;
            x[row * d..(row + 1) * d].copy_from_slice(&p.embed[id * d..(id + 1) * d]);
        }
        rec.enter("embed", "Embedding", false, Some(Site::ModEmbed));
        let ids_val = || Val::i64(&[b, t], ids);
        let embed_name = rec.api(
            "Functional.embedding",
            Site::Embed,
            vec![
                ids_val(),
                Val::f32(&[dm.vocab, d], &p.embed, true),
                Val::Null,
                Val::Null,
                Val::Float(2.0),
                Val::Bool(false),
                Val::Bool(false),
            ],
            vec![],
            vec![self.act(&[b, t, d], &x)],
        );
        rec.exit(
            vec![ids_val()],
            vec![self.act(&[b, t, d], &x)],
            Some(vec![("weight", Val::f32(&[dm.vocab, d], &p.embed, true))]),
        );
        let mut blocks = Vec::with_capacity(dm.layers);
        for l in 0..dm.layers {
            let tape = self.forward_block(l, &x, rec);
            x = tape_out(&tape, &p.blocks[l], &dm);
            blocks.push(tape);
        }
        rec.scope(None);
        let (hf, lnf, ln_name) = self.layer_norm(rec, "ln_f", Site::ModTop, Site::LnF, &x, &p.lnf_w, &p.lnf_b);
        let (logits, head_name) =
            self.linear(rec, "head", Site::ModTop, Site::Head, &hf, (d, dm.vocab), (&p.head_w, &p.head_b));
        Tape { blocks, hf, lnf, logits, names: vec![embed_name, ln_name, head_name] }
    }

    /// `F.layer_norm` inside an `nn.LayerNorm` module at `path`.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm(
        &self,
        rec: &mut Recorder,
        path: &str,
        msite: Site,
        site: Site,
        x: &[f32],
        w: &[f32],
        bias: &[f32],
    ) -> (Vec<f32>, LnCache, String) {
        let dm = self.dims;
        let shape = [dm.b, dm.t, dm.d];
        let (y, cache) = layer_norm(x, dm.n(), dm.d, w, bias);
        rec.enter(path, "LayerNorm", false, Some(msite));
        let name = rec.api(
            "Functional.layer_norm",
            site,
            vec![
                self.act(&shape, x),
                Val::List(vec![Val::Int(dm.d as i64)]),
                Val::f32(&[dm.d], w, true),
                Val::f32(&[dm.d], bias, true),
                Val::Float(1e-5),
            ],
            vec![],
            vec![self.act(&shape, &y)],
        );
        rec.exit(
            vec![self.act(&shape, x)],
            vec![self.act(&shape, &y)],
            Some(vec![("weight", Val::f32(&[dm.d], w, true)), ("bias", Val::f32(&[dm.d], bias, true))]),
        );
        (y, cache, name)
    }

    /// `F.linear` inside an `nn.Linear` module at `path`; `io` is (in, out) features.
    #[allow(clippy::too_many_arguments)] // mirrors F.linear's argument list plus the hook context
    fn linear(
        &self,
        rec: &mut Recorder,
        path: &str,
        msite: Site,
        site: Site,
        x: &[f32],
        io: (usize, usize),
        wb: (&[f32], &[f32]),
    ) -> (Vec<f32>, String) {
        let dm = self.dims;
        let (din, dout) = io;
        let y = linear(x, dm.n(), din, wb.0, wb.1, dout);
        let wv = || Val::f32(&[dout, din], wb.0, true);
        let bv = || Val::f32(&[dout], wb.1, true);
        rec.enter(path, "Linear", false, Some(msite));
        let name = rec.api(
            "Functional.linear",
            site,
            vec![self.act(&[dm.b, dm.t, din], x), wv(), bv()],
            vec![],
            vec![self.act(&[dm.b, dm.t, dout], &y)],
        );
        rec.exit(
            vec![self.act(&[dm.b, dm.t, din], x)],
            vec![self.act(&[dm.b, dm.t, dout], &y)],
            Some(vec![("weight", wv()), ("bias", bv())]),
        );
        (y, name)
    }

    fn forward_block(&self, l: usize, x: &[f32], rec: &mut Recorder) -> BlockTape {
        let dm = self.dims;
        let bp = &self.params.blocks[l];
        let (b, t, d, h, dh, n) = (dm.b, dm.t, dm.d, dm.heads, dm.dh(), dm.n());
        let path = |m: &str| format!("blocks.{l}.{m}");
        let bsh = [b, t, d];
        let hsh = [b, h, t, dh];
        let ssh = [b, h, t, t];
        rec.enter(&format!("blocks.{l}"), "Block", false, Some(Site::ModBlock));
        let mut names = Vec::with_capacity(16);
        let (h1, ln1, nm) = self.layer_norm(rec, &path("ln1"), Site::ModLn1, Site::Ln1, x, &bp.ln1_w, &bp.ln1_b);
        names.push(nm);
        let (qkv, nm) =
            self.linear(rec, &path("qkv"), Site::ModQkv, Site::Qkv, &h1, (d, 3 * d), (&bp.qkv_w, &bp.qkv_b));
        names.push(nm);
        for api in ["Tensor.split", "Tensor.transpose", "Tensor.transpose", "Tensor.transpose", "Tensor.transpose"] {
            names.push(rec.filtered(api));
        }
        // [b, t, 3d] -> three [b, h, t, dh] tensors (what view + transpose produce).
        let mut q = vec![0f32; n * d];
        let mut k = vec![0f32; n * d];
        let mut v = vec![0f32; n * d];
        for bi in 0..b {
            for ti in 0..t {
                for hi in 0..h {
                    for c in 0..dh {
                        let src = (bi * t + ti) * 3 * d + hi * dh + c;
                        let dst = ((bi * h + hi) * t + ti) * dh + c;
                        q[dst] = qkv[src];
                        k[dst] = qkv[src + d];
                        v[dst] = qkv[src + 2 * d];
                    }
                }
            }
        }
        let mut s = vec![0f32; b * h * t * t];
        for bh in 0..b * h {
            for i in 0..t {
                for j in 0..t {
                    let mut acc = 0f32;
                    for c in 0..dh {
                        acc += q[(bh * t + i) * dh + c] * k[(bh * t + j) * dh + c];
                    }
                    s[(bh * t + i) * t + j] = acc;
                }
            }
        }
        names.push(rec.api(
            "Torch.matmul",
            Site::Scores,
            vec![self.act(&hsh, &q), self.act(&[b, h, dh, t], &k)],
            vec![],
            vec![self.act(&ssh, &s)],
        ));
        // Python computes the scale in double; the tensor multiply uses it as float32.
        let mut scale64 = (dh as f64).powf(-0.5);
        if let Some((bl, factor)) = self.bug {
            if bl == l {
                scale64 *= factor;
            }
        }
        let scale = scale64 as f32;
        let a: Vec<f32> = s.iter().map(|v| v * scale).collect();
        names.push(rec.api(
            "Tensor.__mul__",
            Site::Scores,
            vec![self.act(&ssh, &s), Val::Float(scale64)],
            vec![],
            vec![self.act(&ssh, &a)],
        ));
        names.push(rec.filtered("Torch.triu"));
        let mut m = a.clone();
        for row in 0..b * h * t {
            let i = row % t;
            for j in i + 1..t {
                m[row * t + j] = f32::NEG_INFINITY;
            }
        }
        names.push(rec.api(
            "Tensor.masked_fill",
            Site::Mask,
            vec![
                self.act(&ssh, &a),
                Val::bool_tensor(&[t, t], (0..t * t).map(|k| k % t > k / t).collect()),
                Val::Float(f64::NEG_INFINITY),
            ],
            vec![],
            vec![self.act(&ssh, &m)],
        ));
        let p = softmax_rows(&m, t);
        names.push(rec.api(
            "Functional.softmax",
            Site::Softmax,
            vec![self.act(&ssh, &m)],
            vec![("dim", Val::Int(-1))],
            vec![self.act(&ssh, &p)],
        ));
        let mut o = vec![0f32; n * d];
        for bh in 0..b * h {
            for i in 0..t {
                for c in 0..dh {
                    let mut acc = 0f32;
                    for j in 0..t {
                        acc += p[(bh * t + i) * t + j] * v[(bh * t + j) * dh + c];
                    }
                    o[(bh * t + i) * dh + c] = acc;
                }
            }
        }
        names.push(rec.api(
            "Torch.matmul",
            Site::AttnOut,
            vec![self.act(&ssh, &p), self.act(&hsh, &v)],
            vec![],
            vec![self.act(&hsh, &o)],
        ));
        names.push(rec.filtered("Tensor.transpose"));
        names.push(rec.filtered("Tensor.reshape"));
        let y = heads_to_rows(&o, &dm);
        let (pr, nm) = self.linear(rec, &path("proj"), Site::ModProj, Site::Proj, &y, (d, d), (&bp.proj_w, &bp.proj_b));
        names.push(nm);
        let x2: Vec<f32> = x.iter().zip(&pr).map(|(a, c)| a + c).collect();
        names.push(rec.api(
            "Tensor.__add__",
            Site::Res1,
            vec![self.act(&bsh, x), self.act(&bsh, &pr)],
            vec![],
            vec![self.act(&bsh, &x2)],
        ));
        let (h2, ln2, nm) = self.layer_norm(rec, &path("ln2"), Site::ModLn2Fc1, Site::Ln2, &x2, &bp.ln2_w, &bp.ln2_b);
        names.push(nm);
        let (f, nm) =
            self.linear(rec, &path("fc1"), Site::ModLn2Fc1, Site::Fc1, &h2, (d, dm.f()), (&bp.fc1_w, &bp.fc1_b));
        names.push(nm);
        let g = gelu(&f);
        names.push(rec.api(
            "Functional.gelu",
            Site::Gelu,
            vec![self.act(&[b, t, dm.f()], &f)],
            vec![],
            vec![self.act(&[b, t, dm.f()], &g)],
        ));
        let (z, nm) = self.linear(rec, &path("fc2"), Site::ModFc2, Site::Fc2, &g, (dm.f(), d), (&bp.fc2_w, &bp.fc2_b));
        names.push(nm);
        let x3: Vec<f32> = x2.iter().zip(&z).map(|(a, c)| a + c).collect();
        names.push(rec.api(
            "Tensor.__add__",
            Site::Res2,
            vec![self.act(&bsh, &x2), self.act(&bsh, &z)],
            vec![],
            vec![self.act(&bsh, &x3)],
        ));
        rec.exit(vec![self.act(&bsh, x)], vec![self.act(&bsh, &x3)], Some(vec![]));
        BlockTape { x: x.to_vec(), h1, ln1, q, k, v, p, y, x2, h2, ln2, f, g, scale, names }
    }

    /// `torch.log_softmax(logits, dim=-1)` of the no-grad stages.
    pub(crate) fn log_softmax(&self, logits: &[f32], rec: &mut Recorder) {
        let dm = self.dims;
        let lse = logsumexp_rows(logits, dm.vocab);
        let out: Vec<f32> = logits.iter().enumerate().map(|(i, v)| v - lse[i / dm.vocab]).collect();
        rec.filtered("Tensor.float");
        let sh = [dm.b, dm.t, dm.vocab];
        rec.api(
            "Torch.log_softmax",
            Site::LogSoftmax,
            vec![Val::float32(&sh, logits, self.grad)],
            vec![("dim", Val::Int(-1))],
            vec![Val::float32(&sh, &out, self.grad)],
        );
    }
}

/// Block output, recomputed from the tape (`x2 + fc2(gelu)`), so the tape need not hold it.
fn tape_out(tape: &BlockTape, bp: &BlockParams, dm: &Dims) -> Vec<f32> {
    let z = linear(&tape.g, dm.n(), dm.f(), &bp.fc2_w, &bp.fc2_b, dm.d);
    tape.x2.iter().zip(&z).map(|(a, c)| a + c).collect()
}

/// [b, h, t, dh] -> [b*t, d] (transpose(1, 2).reshape(b, t, d)).
pub(crate) fn heads_to_rows(o: &[f32], dm: &Dims) -> Vec<f32> {
    let (b, t, h, dh, d) = (dm.b, dm.t, dm.heads, dm.dh(), dm.d);
    let mut y = vec![0f32; b * t * d];
    for bi in 0..b {
        for hi in 0..h {
            for ti in 0..t {
                for c in 0..dh {
                    y[(bi * t + ti) * d + hi * dh + c] = o[((bi * h + hi) * t + ti) * dh + c];
                }
            }
        }
    }
    y
}

/// [b*t, d] -> [b, h, t, dh], the inverse of [`heads_to_rows`].
pub(crate) fn rows_to_heads(y: &[f32], dm: &Dims) -> Vec<f32> {
    let (b, t, h, dh, d) = (dm.b, dm.t, dm.heads, dm.dh(), dm.d);
    let mut o = vec![0f32; b * t * d];
    for bi in 0..b {
        for hi in 0..h {
            for ti in 0..t {
                for c in 0..dh {
                    o[((bi * h + hi) * t + ti) * dh + c] = y[(bi * t + ti) * d + hi * dh + c];
                }
            }
        }
    }
    o
}
