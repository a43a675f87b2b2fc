//! One-pass max / min / sum / sum of squares over float buffers, at memory speed.
//!
//! Elements are read from little-endian bytes in rows ([`LANES`] f32, or [`BF16_ROW`]
//! bfloat16); each lane keeps its own max, min and sums, so the loop has no dependency across
//! lanes. Max and min are taken over integer keys that order like the floats ([`order_key`]).
//! Sums run in f32 over chunks of 128 elements — even and odd rows apart, so each f32 partial
//! sum adds 8 values (bfloat16: 512 elements, 16 values) — and the partial sums are added up in
//! f64: converting every element to f64 would halve the vector width and, measured, cost 3× the
//! time. The price is a bounded f32
//! rounding error, at most 7·2⁻²⁴ (bfloat16: 15·2⁻²⁴) of the partial's sum of magnitudes (see
//! [`super`]'s precision note).
//!
//! Squares of very small or very large f32 values underflow or overflow in f32 long before
//! their sum does in f64, so a tensor whose largest magnitude is below 2^-40 (and not 0) or
//! above 2^60 (and finite) is reduced again entirely in f64: such tensors are rare, and exact.
//!
//! NaN is not tracked in the loop: the sum of squares is NaN exactly when an element is
//! (squares are never negative, so `inf - inf` cannot happen there), which
//! [`Moments::has_nan`] reads afterwards.
//!
//! On x86-64 with AVX2 or AVX-512 (detected at run time) the row loops are `avx2.rs` and
//! `avx512.rs`, written with the intrinsics because the compiler's auto-vectorisation of the
//! portable loop proved fragile (2× to 4× slower depending on the code around it); all add in
//! the same order. bfloat16 rows sum in four sets of partials, each f32 lane taking a pair of
//! elements, the order in which AVX-512 BF16's `vdpbf16ps` adds them ([`reduce_bf16_rows`]).

use half::f16;

/// Independent accumulators per row.
pub(super) const LANES: usize = 8;
/// Rows summed in f32 before their sums move to f64.
pub(super) const CHUNK_ROWS: usize = 16;
/// Below this largest magnitude (but above 0) squares may underflow in f32: reduce in f64.
const TINY: f64 = 1.0 / (1u64 << 40) as f64;
/// Above this largest magnitude (finite) a chunk's sum of squares may overflow f32.
const HUGE: f64 = (1u64 << 60) as f64;

/// The moments of a float buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moments {
    /// The largest element, widened to f64 (meaningless when [`Moments::has_nan`]).
    pub max: f64,
    /// The smallest element.
    pub min: f64,
    /// Sum of the elements.
    pub sum: f64,
    /// Sum of the squared elements.
    pub sum_sq: f64,
    /// Number of elements.
    pub count: usize,
}

impl Moments {
    /// Whether any element is NaN.
    pub fn has_nan(&self) -> bool {
        self.sum_sq.is_nan()
    }

    /// Sum over count (NaN for no elements).
    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }

    /// Whether f32 squares may have lost precision (see the module docs).
    fn needs_f64(&self) -> bool {
        let m = self.max.abs().max(self.min.abs());
        (m > 0.0 && m < TINY) || (m > HUGE && m.is_finite())
    }
}

/// An f32's bits as an integer that orders like the float (for non-NaN values; -0.0 < 0.0):
/// integer max/min vectorize where float selects do not (measured: 4× faster).
#[inline(always)]
fn order_key(bits: u32) -> i32 {
    (bits ^ ((((bits as i32) >> 31) as u32) >> 1)) as i32
}

/// The order keys of the float max and min from the signed max and the unsigned max and min
/// of the elements' bits (the reasoning is `Extremes16::keys`', for 32-bit patterns). Only the
/// x86 kernels keep those three.
#[cfg(target_arch = "x86_64")]
pub(super) fn extreme_keys(signed_max: i32, unsigned_max: u32, unsigned_min: u32) -> (i32, i32) {
    let max = if signed_max >= 0 { signed_max as u32 } else { unsigned_min };
    let min = if unsigned_max >= 0x8000_0000 { unsigned_max } else { unsigned_min };
    (order_key(max), order_key(min))
}

/// The inverse of [`order_key`].
fn from_order_key(key: i32) -> f32 {
    let bits = key as u32;
    f32::from_bits(bits ^ ((((bits as i32) >> 31) as u32) >> 1))
}

/// Running state of the fast reduction.
pub(super) struct Acc {
    pub(super) max: i32,
    pub(super) min: i32,
    pub(super) sum: f64,
    pub(super) sq: f64,
    pub(super) count: usize,
}

/// The portable hot loop over whole rows; `bits` gives an element's f32 bits. It adds in the
/// same order as the AVX2 kernel (`avx2.rs`), so both give the same bits.
#[inline(always)]
fn reduce_rows<T: Copy>(rows: &[[T; LANES]], bits: impl Fn(T) -> u32) -> Acc {
    let mut max = [i32::MIN; LANES];
    let mut min = [i32::MAX; LANES];
    let (mut sum, mut sq) = ([0f64; 4], [0f64; 4]);
    for chunk in rows.chunks(CHUNK_ROWS) {
        // Even and odd rows apart, as the AVX2 loop keeps them.
        let mut s = [[0f32; LANES]; 2];
        let mut q = [[0f32; LANES]; 2];
        for (i, row) in chunk.iter().enumerate() {
            let b: [u32; LANES] = std::array::from_fn(|l| bits(row[l]));
            let (s, q) = if i % 2 == 0 { (&mut s[0], &mut q[0]) } else { (&mut s[1], &mut q[1]) };
            for l in 0..LANES {
                let key = order_key(b[l]);
                max[l] = max[l].max(key);
                min[l] = min[l].min(key);
                let v = f32::from_bits(b[l]);
                s[l] += v;
                q[l] += v * v;
            }
        }
        let pair = |v: &[f32; LANES], j: usize| f64::from(v[j]) + f64::from(v[j + 4]);
        for j in 0..4 {
            sum[j] += pair(&s[0], j) + pair(&s[1], j);
            sq[j] += pair(&q[0], j) + pair(&q[1], j);
        }
    }
    Acc {
        max: max.iter().copied().max().unwrap_or(i32::MIN),
        min: min.iter().copied().min().unwrap_or(i32::MAX),
        sum: (sum[0] + sum[2]) + (sum[1] + sum[3]),
        sq: (sq[0] + sq[2]) + (sq[1] + sq[3]),
        count: rows.len() * LANES,
    }
}

/// bfloat16 elements per row: one 256-bit register of 16-bit values.
pub(super) const BF16_ROW: usize = 16;
/// bfloat16 rows summed in f32 before their sums move to f64: each f32 partial sum adds 16
/// values, twice [`CHUNK_ROWS`]' 8, because widening the partials of a 16-row bfloat16 chunk was
/// a fifth of its instructions (32 rows measured 15–20% faster); the larger error bound is still
/// far below a bfloat16 ulp.
pub(super) const BF16_CHUNK_ROWS: usize = 2 * CHUNK_ROWS;
/// The bfloat16 rows of a chunk sum into this many sets of f32 partials, row `r` into set
/// `r % BF16_CLASSES`: enough independent chains that the adds' latency is hidden.
pub(super) const BF16_CLASSES: usize = 4;

/// What the bfloat16 loops keep of each lane's raw 16-bit patterns: their signed max and their
/// unsigned max and min. These three integer reductions of the bits as loaded locate the float
/// max and min ([`Extremes16::keys`]) without an order key per element, which would cost three
/// more vector operations per row than it saves.
#[derive(Clone, Copy)]
pub(super) struct Extremes16 {
    pub(super) signed_max: i16,
    pub(super) unsigned_max: u16,
    pub(super) unsigned_min: u16,
}

impl Extremes16 {
    /// The extremes of no elements.
    pub(super) const EMPTY: Extremes16 = Extremes16 { signed_max: i16::MIN, unsigned_max: 0, unsigned_min: u16::MAX };

    #[inline(always)]
    fn add(&mut self, bits: u16) {
        self.signed_max = self.signed_max.max(bits as i16);
        self.unsigned_max = self.unsigned_max.max(bits);
        self.unsigned_min = self.unsigned_min.min(bits);
    }

    /// The extremes of both sets of elements.
    pub(super) fn merge(self, other: Extremes16) -> Extremes16 {
        Extremes16 {
            signed_max: self.signed_max.max(other.signed_max),
            unsigned_max: self.unsigned_max.max(other.unsigned_max),
            unsigned_min: self.unsigned_min.min(other.unsigned_min),
        }
    }

    /// The f32 order keys of the float max and min. As signed integers the non-negative
    /// patterns (sign bit clear) order like their floats, so the signed max is the float max
    /// whenever one is non-negative; if none is, the float max is the negative of least
    /// magnitude, the unsigned min. Likewise the unsigned max is the negative of largest
    /// magnitude, the float min, whenever one is negative, else the min is the unsigned min.
    /// NaN patterns land where [`order_key`] puts them.
    pub(super) fn keys(self) -> (i32, i32) {
        let max = if self.signed_max >= 0 { self.signed_max as u16 } else { self.unsigned_min };
        let min = if self.unsigned_max >= 0x8000 { self.unsigned_max } else { self.unsigned_min };
        (order_key(u32::from(max) << 16), order_key(u32::from(min) << 16))
    }

    /// [`Extremes16::keys`] for IEEE float16 patterns, which order the same way (sign and
    /// magnitude) and widen to f32 by `half` rather than by a shift. Only the x86 kernels
    /// keep float16 extremes this way.
    #[cfg(target_arch = "x86_64")]
    pub(super) fn keys_f16(self) -> (i32, i32) {
        let max = if self.signed_max >= 0 { self.signed_max as u16 } else { self.unsigned_min };
        let min = if self.unsigned_max >= 0x8000 { self.unsigned_max } else { self.unsigned_min };
        let key = |bits: u16| order_key(f16::from_bits(bits).to_f32().to_bits());
        (key(max), key(min))
    }
}

/// The portable bfloat16 loop: 16 elements a row, the rows of a chunk in [`BF16_CLASSES`] sets
/// of eight f32 partials. Partial `l` takes elements `2l + 1` and then `2l` of each row of its
/// set: the order in which AVX-512 BF16's `vdpbf16ps` adds the two halves of a 32-bit lane, so
/// that instruction gives these bits wherever it cannot meet a subnormal (`avx512.rs`); the
/// x86 loops widen a lane's halves by a mask and a shift and add them in the same order.
/// Squares are fused into their sums (`mul_add`): the square of a bfloat16 is exact in f32 unless
/// it is subnormal, so fusing changes nothing else. (Where the CPU has no FMA, `mul_add` is a
/// library call; that is only where AVX2 is missing too, and the results still match bit for bit.)
fn reduce_bf16_rows(rows: &[[[u8; 2]; BF16_ROW]]) -> Acc {
    if rows.is_empty() {
        return Acc::new_empty();
    }
    let mut extremes = [Extremes16::EMPTY; BF16_ROW];
    let (mut sum, mut sq) = ([0f64; LANES], [0f64; LANES]);
    for chunk in rows.chunks(BF16_CHUNK_ROWS) {
        let mut s = [[0f32; LANES]; BF16_CLASSES];
        let mut q = [[0f32; LANES]; BF16_CLASSES];
        for (r, row) in chunk.iter().enumerate() {
            let b: [u16; BF16_ROW] = std::array::from_fn(|i| u16::from_le_bytes(row[i]));
            for (e, &bits) in extremes.iter_mut().zip(&b) {
                e.add(bits);
            }
            let (s, q) = (&mut s[r % BF16_CLASSES], &mut q[r % BF16_CLASSES]);
            for l in 0..LANES {
                for i in [2 * l + 1, 2 * l] {
                    let v = f32::from_bits(u32::from(b[i]) << 16);
                    s[l] += v;
                    q[l] = v.mul_add(v, q[l]);
                }
            }
        }
        // Each lane's classes widened to f64 and added, 0 + 1, then 2 + 3, into its f64 lane.
        let classes = |v: &[[f32; LANES]; BF16_CLASSES], l: usize| {
            (f64::from(v[0][l]) + f64::from(v[1][l])) + (f64::from(v[2][l]) + f64::from(v[3][l]))
        };
        for l in 0..LANES {
            sum[l] += classes(&s, l);
            sq[l] += classes(&q, l);
        }
    }
    // Lanes j and j + 4 first, then as the f32 loop adds its four f64 lanes.
    let total = |v: [f64; LANES]| ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    let (max, min) = extremes.into_iter().fold(Extremes16::EMPTY, Extremes16::merge).keys();
    Acc { max, min, sum: total(sum), sq: total(sq), count: rows.len() * BF16_ROW }
}

/// Rows of f32 words, bfloat16 halves or float16 halves.
#[derive(Clone, Copy)]
enum Rows<'a> {
    F32(&'a [[[u8; 4]; LANES]]),
    Bf16(&'a [[[u8; 2]; BF16_ROW]]),
    F16(&'a [[[u8; 2]; LANES]]),
}

impl Rows<'_> {
    /// Reduces the rows with the widest x86 kernel the CPU has (AVX-512, then AVX2), else
    /// portably; all give the same bits.
    fn reduce(self) -> Acc {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                // SAFETY: the CPU supports AVX-512F and AVX2 (checked), the features it enables.
                Rows::F32(r) if has!("avx512f") && has!("avx2") => return unsafe { super::avx512::rows_f32(r) },
                // SAFETY: the CPU supports AVX-512F/BW, AVX2 and FMA (checked), the features it
                // enables.
                Rows::F16(r) if has!("avx512f") && has!("avx512bw") && has!("avx2") && has!("fma") => {
                    return unsafe { super::avx512::rows_f16(r) }
                }
                Rows::Bf16(r) if has!("avx512f") && has!("avx512bw") && has!("avx2") && has!("fma") => {
                    if has!("avx512bf16") {
                        // SAFETY: the CPU supports AVX-512F/BW/BF16 and AVX2 (checked), the
                        // features it enables. `None`: an element `vdpbf16ps` would flush.
                        if let Some(acc) = unsafe { super::avx512::rows_bf16_dot(r) } {
                            return acc;
                        }
                    }
                    // SAFETY: the CPU supports AVX-512F/BW, AVX2 and FMA (checked), the features
                    // it enables. Exact for every input.
                    return unsafe { super::avx512::rows_bf16(r) };
                }
                // SAFETY: the CPU supports AVX2 (checked), the only feature the function
                // enables; its body is safe code.
                Rows::F32(r) if has!("avx2") => return unsafe { super::avx2::rows_f32(r) },
                // SAFETY: the CPU supports AVX2 and FMA (checked), the features it enables.
                Rows::Bf16(r) if has!("avx2") && has!("fma") => return unsafe { super::avx2::rows_bf16(r) },
                // SAFETY: the CPU supports AVX2, F16C and FMA (checked), the features it enables.
                Rows::F16(r) if has!("avx2") && has!("f16c") && has!("fma") => {
                    return unsafe { super::avx2::rows_f16(r) }
                }
                _ => {}
            }
        }
        self.reduce_portable()
    }

    fn reduce_portable(self) -> Acc {
        match self {
            Rows::F32(r) => reduce_rows(r, u32::from_le_bytes),
            Rows::Bf16(r) => reduce_bf16_rows(r),
            Rows::F16(r) => reduce_rows(r, |h| f16::from_le_bytes(h).to_f32().to_bits()),
        }
    }
}

impl Acc {
    fn new() -> Self {
        Acc { max: i32::MIN, min: i32::MAX, sum: 0.0, sq: 0.0, count: 0 }
    }

    /// The reduction of no rows.
    pub(super) fn new_empty() -> Self {
        Self::new()
    }

    /// Adds what a row reduction found.
    fn merge(&mut self, p: Acc) {
        self.max = self.max.max(p.max);
        self.min = self.min.min(p.min);
        self.sum += p.sum;
        self.sq += p.sq;
        self.count += p.count;
    }

    /// Adds the few elements after the last whole row.
    fn tail(&mut self, values: impl Iterator<Item = f32>) {
        for v in values {
            let key = order_key(v.to_bits());
            self.max = self.max.max(key);
            self.min = self.min.min(key);
            let d = f64::from(v);
            self.sum += d;
            self.sq += d * d;
            self.count += 1;
        }
    }

    fn finish(self) -> Moments {
        Moments {
            max: f64::from(from_order_key(self.max)),
            min: f64::from(from_order_key(self.min)),
            sum: self.sum,
            sum_sq: self.sq,
            count: self.count,
        }
    }
}

/// The slow, exact path: every element widened to f64 first.
fn exact(values: impl Iterator<Item = f32>) -> Moments {
    let mut m = Moments { max: f64::NEG_INFINITY, min: f64::INFINITY, sum: 0.0, sum_sq: 0.0, count: 0 };
    for v in values {
        let d = f64::from(v);
        m.max = if d > m.max { d } else { m.max };
        m.min = if d < m.min { d } else { m.min };
        m.sum += d;
        m.sum_sq += d * d;
        m.count += 1;
    }
    m
}

fn bf16_to_f32(b: [u8; 2]) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16)
}

fn f32_fast(data: &[u8], rows_of: fn(Rows<'_>) -> Acc) -> Moments {
    let (words, _) = data.as_chunks::<4>();
    let (rows, tail) = words.as_chunks::<LANES>();
    let mut acc = Acc::new();
    acc.merge(rows_of(Rows::F32(rows)));
    acc.tail(tail.iter().map(|w| f32::from_le_bytes(*w)));
    acc.finish()
}

fn bf16_fast(data: &[u8], rows_of: fn(Rows<'_>) -> Acc) -> Moments {
    let (halves, _) = data.as_chunks::<2>();
    let (rows, tail) = halves.as_chunks::<BF16_ROW>();
    let mut acc = Acc::new();
    acc.merge(rows_of(Rows::Bf16(rows)));
    acc.tail(tail.iter().map(|h| bf16_to_f32(*h)));
    acc.finish()
}

fn f16_fast(data: &[u8], rows_of: fn(Rows<'_>) -> Acc) -> Moments {
    let (halves, _) = data.as_chunks::<2>();
    let (rows, tail) = halves.as_chunks::<LANES>();
    let mut acc = Acc::new();
    acc.merge(rows_of(Rows::F16(rows)));
    acc.tail(tail.iter().map(|h| f16::from_le_bytes(*h).to_f32()));
    acc.finish()
}

/// Moments of float32 elements.
pub fn moments_f32(data: &[u8]) -> Moments {
    let m = f32_fast(data, |r| r.reduce());
    if m.needs_f64() {
        let (words, _) = data.as_chunks::<4>();
        return exact(words.iter().map(|w| f32::from_le_bytes(*w)));
    }
    m
}

/// Moments of bfloat16 elements (widened to f32 exactly, by a shift).
pub fn moments_bf16(data: &[u8]) -> Moments {
    let m = bf16_fast(data, |r| r.reduce());
    if m.needs_f64() {
        let (halves, _) = data.as_chunks::<2>();
        return exact(halves.iter().map(|h| bf16_to_f32(*h)));
    }
    m
}

/// Moments of IEEE float16 elements, widened to f32 a block at a time by `half`.
pub fn moments_f16(data: &[u8]) -> Moments {
    let m = f16_fast(data, |r| r.reduce());
    if m.needs_f64() {
        let (halves, _) = data.as_chunks::<2>();
        return exact(halves.iter().map(|h| f16::from_le_bytes(*h).to_f32()));
    }
    m
}

/// Moments of float64 elements (max/min in f64; the sums too, so they can overflow to inf).
pub fn moments_f64(data: &[u8]) -> Moments {
    let (words, _) = data.as_chunks::<8>();
    let mut m = Moments { max: f64::NEG_INFINITY, min: f64::INFINITY, sum: 0.0, sum_sq: 0.0, count: words.len() };
    for w in words {
        let v = f64::from_le_bytes(*w);
        m.max = if v > m.max { v } else { m.max };
        m.min = if v < m.min { v } else { m.min };
        m.sum += v;
        m.sum_sq += v * v;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The portable loop and each x86 loop the CPU has give the same bits.
    #[test]
    fn every_build_of_a_kernel_gives_the_same_bits() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let all: Vec<f32> = (0..10_007).map(|_| ((xorshift(&mut x) >> 40) as f32) / 1e5 - 80.0).collect();
        // Whole chunks, a last chunk with an odd row, one row, a tail only.
        for len in [10_007, 8 * 16 * 3 + 8 * 5 + 3, 8 * 16, 8, 5] {
            same_bits_everywhere(&all[..len]);
        }
        // An odd last row must leave the other row's -0.0 sums alone.
        same_bits_everywhere(&[-0.0; 8 * 3]);
        // Elements AVX-512 BF16 would flush (a nonzero magnitude below 2^-63, a square below
        // f32's normal range; bfloat16 subnormals too), in a tensor not reduced in f64: that
        // loop declines, and the one without it gives the portable bits.
        let mut tiny = all.clone();
        for (i, v) in tiny.iter_mut().enumerate().skip(700).step_by(997) {
            *v = if i % 2 == 0 { 3.0e-20 } else { -1.0e-39 };
        }
        same_bits_everywhere(&tiny);
    }

    /// Where the CPU has AVX-512 BF16, its loop answers for ordinary values, declines for a
    /// nonzero element below 2^-63 however late it comes, and accepts zeros of either sign.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_bf16_dot_product_loop_declines_only_what_it_would_flush() {
        use std::arch::is_x86_feature_detected as has;
        if !(has!("avx512f") && has!("avx512bw") && has!("avx512bf16") && has!("avx2")) {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        let rows_of = |values: &[f32]| -> Vec<[[u8; 2]; BF16_ROW]> {
            let halves: Vec<[u8; 2]> = values.iter().map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect();
            halves.as_chunks::<BF16_ROW>().0.to_vec()
        };
        // SAFETY: the CPU has the features the loop enables (checked above).
        let dot = |values: &[f32]| unsafe { crate::stats::avx512::rows_bf16_dot(&rows_of(values)) };
        let mut values: Vec<f32> = (0..BF16_ROW * 70).map(|i| (i as f32 - 500.0) / 64.0).collect();
        values[3] = 0.0;
        values[4] = -0.0;
        values[5] = 2.0f32.powi(-63);
        assert!(dot(&values).is_some());
        let last = values.len() - 1;
        for tiny in [2.0f32.powi(-64), -1.0e-39, 1.0e-40] {
            values[last] = tiny;
            assert!(dot(&values).is_none(), "{tiny:e}");
        }
    }

    /// Every bfloat16 loop the CPU has gives the portable bits on 3000 random tensors of five
    /// kinds: ordinary values, a few elements below 2^-63 among them, many zeros of either sign,
    /// any bit pattern (NaN, infinities, subnormals), and a few infinities. NaN sums compare as
    /// NaN: their payloads differ between builds, and a statistic with a NaN is written as NaN.
    #[test]
    fn random_bfloat16_tensors_give_the_same_bits_in_every_build() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || xorshift(&mut x);
        let bits = |m: Moments| [m.max, m.min, m.sum, m.sum_sq].map(|v| if v.is_nan() { 1 } else { v.to_bits() });
        for t in 0..3000 {
            let len = (next() % 3000) as usize;
            let words: Vec<u16> = (0..len)
                .map(|_| {
                    let r = next();
                    let (any, ordinary) = ((r >> 16) as u16, (r >> 16) as u16 & 0xbfff | 0x3000);
                    match t % 5 {
                        0 => ordinary,
                        1 if r % 50 == 0 => any & 0x8fff,
                        2 if r % 7 == 0 => r as u16 & 0x8000,
                        3 => any,
                        4 if r % 100 == 0 => 0x7f80 | (r as u16 & 0x8000),
                        _ => ordinary,
                    }
                })
                .collect();
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let portable = bits(bf16_fast(&bytes, |r| r.reduce_portable()));
            for (name, kernel) in kernels() {
                assert_eq!(bits(bf16_fast(&bytes, kernel)), portable, "{name}, tensor {t}");
            }
        }
    }

    fn same_bits_everywhere(values: &[f32]) {
        let f32s: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bf16s: Vec<u8> = values.iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect();
        let f16s: Vec<u8> = values.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect();
        let bits = |m: Moments| [m.max, m.min, m.sum, m.sum_sq].map(f64::to_bits);
        let portable: Reduce = |r| r.reduce_portable();
        for (name, kernel) in kernels() {
            assert_eq!(bits(f32_fast(&f32s, portable)), bits(f32_fast(&f32s, kernel)), "{name}");
            assert_eq!(bits(bf16_fast(&bf16s, portable)), bits(bf16_fast(&bf16s, kernel)), "{name}");
            assert_eq!(bits(f16_fast(&f16s, portable)), bits(f16_fast(&f16s, kernel)), "{name}");
        }
        assert_eq!(f32_fast(&f32s, portable).count, values.len());
    }

    type Reduce = fn(Rows<'_>) -> Acc;

    /// The best loop (what `reduce` picks), and each x86 loop the CPU has by itself. Where the
    /// AVX-512 BF16 loop declines, the portable one stands in, so only what it answers counts.
    fn kernels() -> Vec<(&'static str, Reduce)> {
        // Only x86 adds kernels of its own.
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut kernels: Vec<(&'static str, Reduce)> = vec![("best", |r| r.reduce())];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") && has!("f16c") {
                // SAFETY: the CPU has the features each kernel enables (checked above).
                kernels.push(("avx2", |r| unsafe {
                    match r {
                        Rows::F32(r) => crate::stats::avx2::rows_f32(r),
                        Rows::Bf16(r) => crate::stats::avx2::rows_bf16(r),
                        Rows::F16(r) => crate::stats::avx2::rows_f16(r),
                    }
                }));
            }
            if has!("avx512f") && has!("avx512bw") && has!("avx2") && has!("fma") {
                // SAFETY: as above.
                kernels.push(("avx512", |r| unsafe {
                    match r {
                        Rows::F32(r) => crate::stats::avx512::rows_f32(r),
                        Rows::F16(r) => crate::stats::avx512::rows_f16(r),
                        Rows::Bf16(r) => crate::stats::avx512::rows_bf16(r),
                    }
                }));
            }
            if has!("avx512f") && has!("avx512bw") && has!("avx512bf16") && has!("avx2") {
                // SAFETY: as above.
                kernels.push(("avx512bf16", |r| match r {
                    Rows::Bf16(rows) => {
                        unsafe { crate::stats::avx512::rows_bf16_dot(rows) }.unwrap_or_else(|| r.reduce_portable())
                    }
                    _ => r.reduce_portable(),
                }));
            }
        }
        kernels
    }

    /// The next value of a xorshift64 sequence.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }
}
