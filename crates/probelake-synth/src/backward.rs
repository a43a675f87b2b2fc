//! The training step of `actor_update`: cross-entropy loss, a real f32 backward pass recorded
//! the way msprobe's backward hooks see it, and the SGD update (`Tensor.add_` per parameter).

use crate::model::{heads_to_rows, rows_to_heads, Dims, Run, Tape};
use crate::params::Params;
use crate::stack::Site;
use crate::tensor::{gelu_bwd, layer_norm_bwd, linear_bwd, logsumexp_rows};
use crate::trace::{Recorder, Val};

const LR: f32 = 0.05;

fn g(dims: &[usize], data: &[f32]) -> Val {
    Val::f32(dims, data, false)
}

/// Shapes of the parameters in `named_parameters()` order (matches `Params::tensors_mut`).
fn param_shapes(dm: &Dims) -> Vec<Vec<usize>> {
    let (d, f) = (dm.d, dm.f());
    let mut v = vec![vec![dm.vocab, d]];
    for _ in 0..dm.layers {
        v.extend([
            vec![d],
            vec![d],
            vec![3 * d, d],
            vec![3 * d],
            vec![d, d],
            vec![d],
            vec![d],
            vec![d],
            vec![f, d],
            vec![f],
            vec![d, f],
            vec![d],
        ]);
    }
    v.extend([vec![d], vec![d], vec![dm.vocab, d], vec![dm.vocab]]);
    v
}

/// Records `F.cross_entropy(logits.float().view(-1, V), ids.view(-1))`, then, if `backward`,
/// the backward pass and the optimizer step.
pub(crate) fn train_step(run: &Run<'_>, tape: &Tape, ids: &[i64], backward: bool, rec: &mut Recorder) {
    let dm = run.dims;
    let (n, vsz) = (dm.n(), dm.vocab);
    let lse = logsumexp_rows(&tape.logits, vsz);
    let target = |r: usize| ids[r].clamp(0, vsz as i64 - 1) as usize;
    let loss = (0..n).map(|r| lse[r] - tape.logits[r * vsz + target(r)]).sum::<f32>() / n as f32;
    let float_name = rec.filtered("Tensor.float");
    let ce = rec.api(
        "Functional.cross_entropy",
        Site::Loss,
        vec![Val::float32(&[n, vsz], &tape.logits, true), Val::i64(&[n], ids)],
        vec![],
        vec![Val::float32(&[], &[loss], true)],
    );
    if !backward {
        return;
    }
    let mut dlogits = vec![0f32; n * vsz];
    for r in 0..n {
        for c in 0..vsz {
            dlogits[r * vsz + c] = (tape.logits[r * vsz + c] - lse[r]).exp() / n as f32;
        }
        dlogits[r * vsz + target(r)] -= 1.0 / n as f32;
    }
    rec.api_bwd(&ce, vec![Val::float32(&[], &[1.0], false)], vec![Val::float32(&[n, vsz], &dlogits, false)]);
    let p = run.params;
    let mut grads = p.clone();
    let (b, t, d) = (dm.b, dm.t, dm.d);
    let bsh = [b, t, d];

    rec.enter("head", "Linear", true, None);
    rec.filtered_bwd(&float_name);
    let (dhf, dw, db) = linear_bwd(&dlogits, &tape.hf, n, d, &p.head_w, vsz);
    rec.api_bwd(&tape.names[2], vec![g(&[b, t, vsz], &dlogits)], vec![g(&[n, vsz], &dlogits)]);
    rec.param_grad("head", "Linear", vec![("bias", g(&[vsz], &db)), ("weight", g(&[vsz, d], &dw))]);
    rec.exit(vec![g(&[b, t, vsz], &dlogits)], vec![g(&bsh, &dhf)], None);
    (grads.head_w, grads.head_b) = (dw, db);

    rec.enter("ln_f", "LayerNorm", true, None);
    let (mut dx, dw, db) = layer_norm_bwd(&dhf, &tape.lnf, n, d, &p.lnf_w);
    rec.api_bwd(&tape.names[1], vec![g(&bsh, &dhf)], vec![g(&bsh, &dx), g(&[d], &dw), g(&[d], &db)]);
    rec.param_grad("ln_f", "LayerNorm", vec![("weight", g(&[d], &dw)), ("bias", g(&[d], &db))]);
    rec.exit(vec![g(&bsh, &dhf)], vec![g(&bsh, &dx)], None);
    (grads.lnf_w, grads.lnf_b) = (dw, db);

    for l in (0..dm.layers).rev() {
        dx = block_bwd(run, tape, l, dx, &mut grads, rec);
    }

    rec.enter("embed", "Embedding", true, None);
    rec.exit(vec![g(&bsh, &dx)], vec![], None);
    let mut de = vec![0f32; vsz * d];
    for (r, &id) in ids.iter().enumerate() {
        let id = id.clamp(0, vsz as i64 - 1) as usize;
        for c in 0..d {
            de[id * d + c] += dx[r * d + c];
        }
    }
    rec.api_bwd(&tape.names[0], vec![g(&bsh, &dx)], vec![g(&[vsz, d], &de)]);
    rec.param_grad("embed", "Embedding", vec![("weight", g(&[vsz, d], &de))]);
    grads.embed = de;

    rec.construct_node("optimizer");
    rec.scope(Some("optimizer"));
    let mut params = p.clone();
    let shapes = param_shapes(&dm);
    for ((w, gr), shape) in params.tensors_mut().into_iter().zip(grads.tensors_mut()).zip(&shapes) {
        let updated: Vec<f32> = w.iter().zip(gr.iter()).map(|(a, c)| a + -LR * c).collect();
        rec.api(
            "Tensor.add_",
            Site::Sgd,
            vec![Val::f32(shape, w, true), g(shape, gr)],
            vec![("alpha", Val::Float(-f64::from(LR)))],
            vec![Val::f32(shape, &updated, true)],
        );
    }
    rec.scope(None);
}

/// Backward through block `l`; `dout` is the gradient at the block output. Returns the gradient
/// at the block input.
fn block_bwd(run: &Run<'_>, tape: &Tape, l: usize, dout: Vec<f32>, grads: &mut Params, rec: &mut Recorder) -> Vec<f32> {
    let dm = run.dims;
    let bt = &tape.blocks[l];
    let bp = &run.params.blocks[l];
    let gp = &mut grads.blocks[l];
    let (b, t, d, h, dh, n, f) = (dm.b, dm.t, dm.d, dm.heads, dm.dh(), dm.n(), dm.f());
    let bsh = [b, t, d];
    let nm = &bt.names;
    let path = |m: &str| format!("blocks.{l}.{m}");

    rec.enter(&format!("blocks.{l}"), "Block", true, None);
    rec.api_bwd(&nm[21], vec![g(&bsh, &dout)], vec![g(&bsh, &dout), g(&bsh, &dout)]);

    rec.enter(&path("fc2"), "Linear", true, None);
    let (dg, dw, db) = linear_bwd(&dout, &bt.g, n, f, &bp.fc2_w, d);
    rec.api_bwd(&nm[20], vec![g(&bsh, &dout)], vec![g(&[n, d], &dout)]);
    rec.param_grad(&path("fc2"), "Linear", vec![("bias", g(&[d], &db)), ("weight", g(&[d, f], &dw))]);
    rec.exit(vec![g(&bsh, &dout)], vec![g(&[b, t, f], &dg)], None);
    (gp.fc2_w, gp.fc2_b) = (dw, db);

    let df = gelu_bwd(&dg, &bt.f);
    rec.api_bwd(&nm[19], vec![g(&[b, t, f], &dg)], vec![g(&[b, t, f], &df)]);

    rec.enter(&path("fc1"), "Linear", true, None);
    let (dh2, dw, db) = linear_bwd(&df, &bt.h2, n, d, &bp.fc1_w, f);
    rec.api_bwd(&nm[18], vec![g(&[b, t, f], &df)], vec![g(&[n, f], &df)]);
    rec.param_grad(&path("fc1"), "Linear", vec![("bias", g(&[f], &db)), ("weight", g(&[f, d], &dw))]);
    rec.exit(vec![g(&[b, t, f], &df)], vec![g(&bsh, &dh2)], None);
    (gp.fc1_w, gp.fc1_b) = (dw, db);

    rec.enter(&path("ln2"), "LayerNorm", true, None);
    let (dx2p, dw, db) = layer_norm_bwd(&dh2, &bt.ln2, n, d, &bp.ln2_w);
    rec.api_bwd(&nm[17], vec![g(&bsh, &dh2)], vec![g(&bsh, &dx2p), g(&[d], &dw), g(&[d], &db)]);
    rec.param_grad(&path("ln2"), "LayerNorm", vec![("weight", g(&[d], &dw)), ("bias", g(&[d], &db))]);
    rec.exit(vec![g(&bsh, &dh2)], vec![g(&bsh, &dx2p)], None);
    (gp.ln2_w, gp.ln2_b) = (dw, db);

    let dx2: Vec<f32> = dout.iter().zip(&dx2p).map(|(a, c)| a + c).collect();
    rec.api_bwd(&nm[16], vec![g(&bsh, &dx2)], vec![g(&bsh, &dx2), g(&bsh, &dx2)]);

    rec.enter(&path("proj"), "Linear", true, None);
    let (dy, dw, db) = linear_bwd(&dx2, &bt.y, n, d, &bp.proj_w, d);
    rec.api_bwd(&nm[15], vec![g(&bsh, &dx2)], vec![g(&[n, d], &dx2)]);
    rec.param_grad(&path("proj"), "Linear", vec![("bias", g(&[d], &db)), ("weight", g(&[d, d], &dw))]);
    rec.exit(vec![g(&bsh, &dx2)], vec![g(&bsh, &dy)], None);
    (gp.proj_w, gp.proj_b) = (dw, db);

    rec.filtered_bwd(&nm[14]);
    rec.filtered_bwd(&nm[13]);
    let dout_h = rows_to_heads(&dy, &dm);
    let (hsh, ssh) = ([b, h, t, dh], [b, h, t, t]);
    rec.api_bwd(&nm[12], vec![g(&hsh, &dout_h)], vec![g(&[b * h, t, dh], &dout_h)]);
    let (mut dp, mut dv) = (vec![0f32; b * h * t * t], vec![0f32; n * d]);
    for bh in 0..b * h {
        for i in 0..t {
            for j in 0..t {
                let pij = bt.p[(bh * t + i) * t + j];
                let mut acc = 0f32;
                for c in 0..dh {
                    let go = dout_h[(bh * t + i) * dh + c];
                    acc += go * bt.v[(bh * t + j) * dh + c];
                    dv[(bh * t + j) * dh + c] += pij * go;
                }
                dp[(bh * t + i) * t + j] = acc;
            }
        }
    }
    let mut ds = vec![0f32; b * h * t * t];
    for row in 0..b * h * t {
        let r = row * t..(row + 1) * t;
        let dot: f32 = dp[r.clone()].iter().zip(&bt.p[r.clone()]).map(|(a, c)| a * c).sum();
        for k in r {
            ds[k] = bt.p[k] * (dp[k] - dot);
        }
    }
    rec.api_bwd(&nm[11], vec![g(&ssh, &dp)], vec![g(&ssh, &ds)]);
    rec.api_bwd(&nm[10], vec![g(&ssh, &ds)], vec![g(&ssh, &ds)]);
    let da: Vec<f32> = ds.iter().map(|v| v * bt.scale).collect();
    rec.api_bwd(&nm[8], vec![g(&ssh, &ds)], vec![g(&ssh, &da), Val::Null]);
    rec.api_bwd(&nm[7], vec![g(&ssh, &da)], vec![g(&[b * h, t, t], &da)]);
    let (mut dq, mut dk) = (vec![0f32; n * d], vec![0f32; n * d]);
    for bh in 0..b * h {
        for i in 0..t {
            for j in 0..t {
                let a = da[(bh * t + i) * t + j];
                for c in 0..dh {
                    dq[(bh * t + i) * dh + c] += a * bt.k[(bh * t + j) * dh + c];
                    dk[(bh * t + j) * dh + c] += a * bt.q[(bh * t + i) * dh + c];
                }
            }
        }
    }
    for k in (2..=6).rev() {
        rec.filtered_bwd(&nm[k]);
    }
    let (dq, dk, dv) = (heads_to_rows(&dq, &dm), heads_to_rows(&dk, &dm), heads_to_rows(&dv, &dm));
    let mut dqkv = vec![0f32; n * 3 * d];
    for r in 0..n {
        dqkv[r * 3 * d..r * 3 * d + d].copy_from_slice(&dq[r * d..(r + 1) * d]);
        dqkv[r * 3 * d + d..r * 3 * d + 2 * d].copy_from_slice(&dk[r * d..(r + 1) * d]);
        dqkv[r * 3 * d + 2 * d..(r + 1) * 3 * d].copy_from_slice(&dv[r * d..(r + 1) * d]);
    }

    rec.enter(&path("qkv"), "Linear", true, None);
    let (dh1, dw, db) = linear_bwd(&dqkv, &bt.h1, n, d, &bp.qkv_w, 3 * d);
    rec.api_bwd(&nm[1], vec![g(&[b, t, 3 * d], &dqkv)], vec![g(&[n, 3 * d], &dqkv)]);
    rec.param_grad(&path("qkv"), "Linear", vec![("bias", g(&[3 * d], &db)), ("weight", g(&[3 * d, d], &dw))]);
    rec.exit(vec![g(&[b, t, 3 * d], &dqkv)], vec![g(&bsh, &dh1)], None);
    (gp.qkv_w, gp.qkv_b) = (dw, db);

    rec.enter(&path("ln1"), "LayerNorm", true, None);
    let (dxp, dw, db) = layer_norm_bwd(&dh1, &bt.ln1, n, d, &bp.ln1_w);
    rec.api_bwd(&nm[0], vec![g(&bsh, &dh1)], vec![g(&bsh, &dxp), g(&[d], &dw), g(&[d], &db)]);
    rec.param_grad(&path("ln1"), "LayerNorm", vec![("weight", g(&[d], &dw)), ("bias", g(&[d], &db))]);
    rec.exit(vec![g(&bsh, &dh1)], vec![g(&bsh, &dxp)], None);
    (gp.ln1_w, gp.ln1_b) = (dw, db);

    let dx: Vec<f32> = dx2.iter().zip(&dxp).map(|(a, c)| a + c).collect();
    rec.exit(vec![g(&bsh, &dout)], vec![g(&bsh, &dx)], None);
    debug_assert_eq!(bt.x.len(), dx.len());
    dx
}
