//! Deterministic randomness, msprobe-style tensor statistics and the small f32 kernels the toy
//! transformer needs.

/// splitmix64: tiny, seedable and identical on every platform, which is all the synthesizer
/// needs (weights must match bit-for-bit between a base run and a bug run).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub(crate) fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32) / (1u64 << 23) as f32 - 1.0
    }

    pub(crate) fn normal(&mut self) -> f32 {
        // Box-Muller in f64 so the result does not depend on f32 transcendental accuracy.
        let u1 = ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }
}

/// Derives an independent stream seed from a parent seed and a tag.
pub(crate) fn derive(seed: u64, tag: u64) -> u64 {
    let mut r = Rng::new(seed ^ tag.wrapping_mul(0xd6e8_feb8_6659_fd93));
    r.next_u64()
}

/// Up to four dimensions, stored inline: the toy model never needs more, and avoiding a heap
/// allocation per recorded tensor matters when writing gigabyte trees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Shape {
    pub(crate) dims: [usize; 4],
    pub(crate) len: u8,
}

impl Shape {
    pub(crate) fn new(dims: &[usize]) -> Self {
        let mut d = [0; 4];
        let len = dims.len().min(4);
        d[..len].copy_from_slice(&dims[..len]);
        Shape { dims: d, len: len as u8 }
    }

    pub(crate) fn dims(&self) -> &[usize] {
        &self.dims[..self.len as usize]
    }
}

/// Statistics exactly as msprobe records them for one tensor dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Summary {
    /// float32: all four statistics are f32 values (written widened to f64).
    F32 { max: f32, min: f32, mean: f32, norm: f32 },
    /// int64: integer Max/Min, Mean/Norm null (msprobe since 2026-06-15).
    I64 { max: i64, min: i64 },
    /// bool: Max/Min as JSON booleans, Mean/Norm null.
    Bool { max: bool, min: bool },
}

/// msprobe's Max/Min/Mean/Norm of a float32 tensor, reduced in f32 like torch does. Eight
/// accumulator lanes mimic a vectorised reduction; the exact order does not matter, only that
/// it is deterministic.
pub(crate) fn f32_summary(data: &[f32]) -> Summary {
    if data.is_empty() {
        return Summary::F32 { max: f32::NAN, min: f32::NAN, mean: f32::NAN, norm: 0.0 };
    }
    // Lane-wise accumulators let the compiler vectorise; NaN inputs are detected afterwards
    // from the sum, which any NaN poisons.
    let mut mx = [f32::NEG_INFINITY; 8];
    let mut mn = [f32::INFINITY; 8];
    let mut sum = [0f32; 8];
    let mut sq = [0f32; 8];
    let chunks = data.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..8 {
            let v = c[l];
            mx[l] = if v > mx[l] { v } else { mx[l] };
            mn[l] = if v < mn[l] { v } else { mn[l] };
            sum[l] += v;
            sq[l] += v * v;
        }
    }
    for (l, &v) in rest.iter().enumerate() {
        mx[l] = if v > mx[l] { v } else { mx[l] };
        mn[l] = if v < mn[l] { v } else { mn[l] };
        sum[l] += v;
        sq[l] += v * v;
    }
    let mut max = mx.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut min = mn.iter().copied().fold(f32::INFINITY, f32::min);
    let total: f32 = (sum[0] + sum[4]) + (sum[1] + sum[5]) + ((sum[2] + sum[6]) + (sum[3] + sum[7]));
    let total_sq: f32 = (sq[0] + sq[4]) + (sq[1] + sq[5]) + ((sq[2] + sq[6]) + (sq[3] + sq[7]));
    if total.is_nan() && data.iter().any(|v| v.is_nan()) {
        // torch.max/min propagate NaN; the comparisons above silently skip it.
        max = f32::NAN;
        min = f32::NAN;
    }
    Summary::F32 { max, min, mean: total / data.len() as f32, norm: total_sq.sqrt() }
}

/// Dot product with eight partial sums, so it vectorises (f32 addition is not associative,
/// so a single accumulator would pin the compiler to scalar code).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    for (l, (x, y)) in ra.iter().zip(rb).enumerate() {
        acc[l] += x * y;
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// `y = x W^T + b` for `n` rows: the layout of `torch.nn.functional.linear`.
pub(crate) fn linear(x: &[f32], n: usize, din: usize, w: &[f32], b: &[f32], dout: usize) -> Vec<f32> {
    let mut y = vec![0f32; n * dout];
    for r in 0..n {
        let xr = &x[r * din..(r + 1) * din];
        for o in 0..dout {
            y[r * dout + o] = dot(xr, &w[o * din..(o + 1) * din]) + b[o];
        }
    }
    y
}

/// Backward of [`linear`]: `(dx, dW, db)`.
pub(crate) fn linear_bwd(
    dy: &[f32],
    x: &[f32],
    n: usize,
    din: usize,
    w: &[f32],
    dout: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dx = vec![0f32; n * din];
    let mut dw = vec![0f32; dout * din];
    let mut db = vec![0f32; dout];
    for r in 0..n {
        for o in 0..dout {
            let g = dy[r * dout + o];
            db[o] += g;
            for i in 0..din {
                dx[r * din + i] += g * w[o * din + i];
                dw[o * din + i] += g * x[r * din + i];
            }
        }
    }
    (dx, dw, db)
}

/// What layer_norm's backward needs from the forward pass.
pub(crate) struct LnCache {
    pub(crate) xhat: Vec<f32>,
    pub(crate) rstd: Vec<f32>,
}

pub(crate) const LN_EPS: f32 = 1e-5;

pub(crate) fn layer_norm(x: &[f32], n: usize, d: usize, w: &[f32], b: &[f32]) -> (Vec<f32>, LnCache) {
    let mut y = vec![0f32; n * d];
    let mut xhat = vec![0f32; n * d];
    let mut rstd = vec![0f32; n];
    for r in 0..n {
        let row = &x[r * d..(r + 1) * d];
        let mean = row.iter().sum::<f32>() / d as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        let rs = 1.0 / (var + LN_EPS).sqrt();
        rstd[r] = rs;
        for i in 0..d {
            let h = (row[i] - mean) * rs;
            xhat[r * d + i] = h;
            y[r * d + i] = h * w[i] + b[i];
        }
    }
    (y, LnCache { xhat, rstd })
}

/// Backward of [`layer_norm`]: `(dx, dweight, dbias)`.
pub(crate) fn layer_norm_bwd(dy: &[f32], c: &LnCache, n: usize, d: usize, w: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dx = vec![0f32; n * d];
    let mut dw = vec![0f32; d];
    let mut db = vec![0f32; d];
    for r in 0..n {
        let (mut m1, mut m2) = (0f32, 0f32);
        for i in 0..d {
            let g = dy[r * d + i];
            let h = c.xhat[r * d + i];
            dw[i] += g * h;
            db[i] += g;
            m1 += g * w[i];
            m2 += g * w[i] * h;
        }
        m1 /= d as f32;
        m2 /= d as f32;
        for i in 0..d {
            let gh = dy[r * d + i] * w[i];
            dx[r * d + i] = c.rstd[r] * (gh - m1 - c.xhat[r * d + i] * m2);
        }
    }
    (dx, dw, db)
}

/// erf with ~1e-7 relative error (Numerical Recipes' erfc Chebyshev fit); torch's exact-erf
/// GELU differs in the last bits at most, which is fine for synthetic data.
fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - erfc
    } else {
        erfc - 1.0
    }
}

pub(crate) fn gelu(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| (0.5 * f64::from(v) * (1.0 + erf(f64::from(v) / std::f64::consts::SQRT_2))) as f32).collect()
}

pub(crate) fn gelu_bwd(dy: &[f32], x: &[f32]) -> Vec<f32> {
    let inv_sqrt_2pi = 1.0 / (2.0 * std::f64::consts::PI).sqrt();
    dy.iter()
        .zip(x)
        .map(|(&g, &v)| {
            let v = f64::from(v);
            let cdf = 0.5 * (1.0 + erf(v / std::f64::consts::SQRT_2));
            let pdf = (-0.5 * v * v).exp() * inv_sqrt_2pi;
            (f64::from(g) * (cdf + v * pdf)) as f32
        })
        .collect()
}

/// Row-wise softmax over the last `d` values.
pub(crate) fn softmax_rows(x: &[f32], d: usize) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for (src, dst) in x.chunks(d).zip(y.chunks_mut(d)) {
        let m = src.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut s = 0f32;
        for (o, &v) in dst.iter_mut().zip(src) {
            *o = (v - m).exp();
            s += *o;
        }
        for o in dst.iter_mut() {
            *o /= s;
        }
    }
    y
}

/// Row-wise log(sum(exp)), the shared part of log_softmax and cross_entropy.
pub(crate) fn logsumexp_rows(x: &[f32], d: usize) -> Vec<f32> {
    x.chunks(d)
        .map(|row| {
            let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            m + row.iter().map(|v| (v - m).exp()).sum::<f32>().ln()
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_computation() {
        let s = f32_summary(&[3.0, -4.0]);
        assert_eq!(s, Summary::F32 { max: 3.0, min: -4.0, mean: -0.5, norm: 5.0 });
        if let Summary::F32 { min, mean, norm, .. } = f32_summary(&[1.0, f32::NEG_INFINITY]) {
            assert_eq!((min, mean, norm), (f32::NEG_INFINITY, f32::NEG_INFINITY, f32::INFINITY));
        }
    }

    #[test]
    fn erf_is_accurate_enough() {
        assert!((erf(1.0) - 0.842_700_792_949_715).abs() < 1e-6);
        assert!((erf(-0.5) + 0.520_499_877_813_047).abs() < 1e-6);
    }

    #[test]
    fn layer_norm_backward_matches_finite_difference() {
        let x = [0.3f32, -1.2, 2.0, 0.7];
        let w = [1.1f32, 0.9, 1.0, 1.2];
        let b = [0.0f32; 4];
        let dy = [0.5f32, -0.25, 0.1, 0.3];
        let (_, c) = layer_norm(&x, 1, 4, &w, &b);
        let (dx, _, _) = layer_norm_bwd(&dy, &c, 1, 4, &w);
        let loss = |x: &[f32]| -> f64 {
            let (y, _) = layer_norm(x, 1, 4, &w, &b);
            y.iter().zip(&dy).map(|(a, b)| f64::from(a * b)).sum()
        };
        for i in 0..4 {
            let mut xp = x;
            xp[i] += 1e-2;
            let mut xm = x;
            xm[i] -= 1e-2;
            let fd = (loss(&xp) - loss(&xm)) / 2e-2;
            assert!((fd - f64::from(dx[i])).abs() < 1e-2, "{i}: {fd} vs {}", dx[i]);
        }
    }
}
