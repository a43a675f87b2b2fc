//! The statistics row loop for x86-64 CPUs with AVX2, chosen at run time by `float.rs`.
//!
//! Eight lanes in one 256-bit register: max/min from integer reductions of the raw bits
//! (`vpmaxsd`, `vpmaxud`, `vpminud`), f32 sums over chunks of 16 rows (even and odd rows apart),
//! each chunk's sums widened and added in four f64 lanes. bfloat16 rows are 16 lanes wide,
//! summed in four sets of rows, and need FMA too. The order of every addition is the portable
//! loop's, so both give the same bits (a test checks it). The intrinsics are safe to call here:
//! every function enables the features it uses, and only the loads of 16-bit rows take a pointer.

use std::arch::x86_64::{
    __m128i, __m256, __m256d, __m256i, _mm256_add_pd, _mm256_add_ps, _mm256_and_si256, _mm256_broadcastsi128_si256,
    _mm256_castpd256_pd128, _mm256_castps256_ps128, _mm256_castsi256_ps, _mm256_castsi256_si128, _mm256_cvtph_ps,
    _mm256_cvtps_pd, _mm256_extract_epi32, _mm256_extractf128_pd, _mm256_extractf128_ps, _mm256_extracti128_si256,
    _mm256_fmadd_ps, _mm256_loadu_si256, _mm256_max_epi16, _mm256_max_epi32, _mm256_max_epu16, _mm256_max_epu32,
    _mm256_min_epu16, _mm256_min_epu32, _mm256_mul_ps, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_setr_epi32,
    _mm256_setzero_pd, _mm256_setzero_ps, _mm256_setzero_si256, _mm256_slli_epi32, _mm_add_pd, _mm_cvtsd_f64,
    _mm_extract_epi16, _mm_loadu_si128, _mm_unpackhi_pd,
};

use super::float::{extreme_keys, Acc, Extremes16, BF16_CHUNK_ROWS, BF16_CLASSES, BF16_ROW, CHUNK_ROWS, LANES};

/// The reduction state: per-lane extremes of the raw bits (signed max, unsigned max and min,
/// which locate the float max and min as `Extremes16` explains, with two fewer operations per
/// row than an order key each) and f64 partial sums.
struct State {
    signed_max: __m256i,
    unsigned_max: __m256i,
    unsigned_min: __m256i,
    sum: __m256d,
    sq: __m256d,
}

impl State {
    #[target_feature(enable = "avx2")]
    fn new() -> Self {
        State {
            signed_max: _mm256_set1_epi32(i32::MIN),
            unsigned_max: _mm256_setzero_si256(),
            unsigned_min: _mm256_set1_epi32(-1),
            sum: _mm256_setzero_pd(),
            sq: _mm256_setzero_pd(),
        }
    }

    /// Reduces `rows` (each loaded by `load` as eight f32 bit patterns). Even and odd rows sum
    /// into separate registers: two dependency chains keep the adders busy.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn rows<T>(&mut self, rows: &[T], load: impl Fn(&T) -> __m256i) {
        for chunk in rows.chunks(CHUNK_ROWS) {
            let (mut s0, mut s1, mut q0, mut q1) =
                (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
            let (pairs, odd) = chunk.as_chunks::<2>();
            for [even, next] in pairs {
                let (a, b) = (self.note_row(load(even)), self.note_row(load(next)));
                s0 = _mm256_add_ps(s0, a);
                q0 = _mm256_add_ps(q0, _mm256_mul_ps(a, a));
                s1 = _mm256_add_ps(s1, b);
                q1 = _mm256_add_ps(q1, _mm256_mul_ps(b, b));
            }
            for row in odd {
                let a = self.note_row(load(row));
                s0 = _mm256_add_ps(s0, a);
                q0 = _mm256_add_ps(q0, _mm256_mul_ps(a, a));
            }
            let (s, q) = ([s0, s1], [q0, q1]);
            self.sum = _mm256_add_pd(self.sum, _mm256_add_pd(widen_pairs(s[0]), widen_pairs(s[1])));
            self.sq = _mm256_add_pd(self.sq, _mm256_add_pd(widen_pairs(q[0]), widen_pairs(q[1])));
        }
    }

    /// Updates the extremes with one row's bits and returns the row as floats.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn note_row(&mut self, bits: __m256i) -> __m256 {
        self.signed_max = _mm256_max_epi32(self.signed_max, bits);
        self.unsigned_max = _mm256_max_epu32(self.unsigned_max, bits);
        self.unsigned_min = _mm256_min_epu32(self.unsigned_min, bits);
        _mm256_castsi256_ps(bits)
    }

    #[target_feature(enable = "avx2")]
    fn finish(self, count: usize) -> Acc {
        if count == 0 {
            // The extremes of no bits name no element.
            return Acc::new_empty();
        }
        let lanes = |v: __m256i| {
            [
                _mm256_extract_epi32::<0>(v),
                _mm256_extract_epi32::<1>(v),
                _mm256_extract_epi32::<2>(v),
                _mm256_extract_epi32::<3>(v),
                _mm256_extract_epi32::<4>(v),
                _mm256_extract_epi32::<5>(v),
                _mm256_extract_epi32::<6>(v),
                _mm256_extract_epi32::<7>(v),
            ]
        };
        let signed_max = lanes(self.signed_max).into_iter().max().unwrap_or(i32::MIN);
        let unsigned_max = lanes(self.unsigned_max).into_iter().map(|l| l as u32).max().unwrap_or(0);
        let unsigned_min = lanes(self.unsigned_min).into_iter().map(|l| l as u32).min().unwrap_or(u32::MAX);
        let (max, min) = extreme_keys(signed_max, unsigned_max, unsigned_min);
        Acc { max, min, sum: horizontal(self.sum), sq: horizontal(self.sq), count }
    }
}

/// `[s0+s4, s1+s5, s2+s6, s3+s7]` in f64.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn widen_pairs(v: __m256) -> __m256d {
    _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)))
}

/// `(a0 + a2) + (a1 + a3)`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn horizontal(v: __m256d) -> f64 {
    let t = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
    _mm_cvtsd_f64(t) + _mm_cvtsd_f64(_mm_unpackhi_pd(t, t))
}

/// Rows of little-endian f32 words.
#[target_feature(enable = "avx2")]
pub(super) fn rows_f32(rows: &[[[u8; 4]; LANES]]) -> Acc {
    let mut state = State::new();
    state.rows(rows, |r| {
        let w = |i: usize| i32::from_le_bytes(r[i]);
        _mm256_setr_epi32(w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7))
    });
    state.finish(rows.len() * LANES)
}

/// Eight little-endian 16-bit values of a row, as one 128-bit register.
#[inline]
#[target_feature(enable = "avx2")]
fn halves(r: &[[u8; 2]; LANES]) -> __m128i {
    // SAFETY: a row is 16 readable bytes, and an unaligned load has no other requirement (the
    // safe `_mm_setr_epi16` of the eight words compiles to several instructions, not one).
    unsafe { _mm_loadu_si128(r.as_ptr().cast()) }
}

/// One row of 16 bfloat16 values as they lie in memory (little-endian, as x86 loads them).
#[inline]
#[target_feature(enable = "avx2")]
fn load_bf16(row: &[[u8; 2]; BF16_ROW]) -> __m256i {
    // SAFETY: `row` is 32 readable bytes, and an unaligned load has no other requirement. (The
    // safe `_mm256_setr_epi16` of the 16 words compiles to five instructions, not one.)
    unsafe { _mm256_loadu_si256(row.as_ptr().cast()) }
}

/// Per-lane [`Extremes16`] of rows of 16-bit floats (bfloat16 or float16).
pub(super) struct Extremes {
    pub(super) signed_max: __m256i,
    pub(super) unsigned_max: __m256i,
    pub(super) unsigned_min: __m256i,
}

impl Extremes {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new() -> Self {
        Extremes {
            signed_max: _mm256_set1_epi16(i16::MIN),
            unsigned_max: _mm256_setzero_si256(),
            unsigned_min: _mm256_set1_epi16(-1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn add(&mut self, bits: __m256i) {
        self.signed_max = _mm256_max_epi16(self.signed_max, bits);
        self.unsigned_max = _mm256_max_epu16(self.unsigned_max, bits);
        self.unsigned_min = _mm256_min_epu16(self.unsigned_min, bits);
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn finish(self) -> Extremes16 {
        let (signed_max, unsigned_max, unsigned_min) =
            (words(self.signed_max), words(self.unsigned_max), words(self.unsigned_min));
        (0..BF16_ROW).fold(Extremes16::EMPTY, |all, i| {
            all.merge(Extremes16 {
                signed_max: signed_max[i] as i16,
                unsigned_max: unsigned_max[i],
                unsigned_min: unsigned_min[i],
            })
        })
    }
}

/// The sixteen 16-bit lanes of a register.
#[target_feature(enable = "avx2")]
fn words(v: __m256i) -> [u16; BF16_ROW] {
    let mut out = [0u16; BF16_ROW];
    let halves = [_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v)];
    for (slots, half) in out.chunks_exact_mut(8).zip(halves) {
        let lanes = [
            _mm_extract_epi16::<0>(half),
            _mm_extract_epi16::<1>(half),
            _mm_extract_epi16::<2>(half),
            _mm_extract_epi16::<3>(half),
            _mm_extract_epi16::<4>(half),
            _mm_extract_epi16::<5>(half),
            _mm_extract_epi16::<6>(half),
            _mm_extract_epi16::<7>(half),
        ];
        for (slot, lane) in slots.iter_mut().zip(lanes) {
            *slot = lane as u16;
        }
    }
    out
}

/// A bfloat16 row's 32-bit lanes as two f32 registers: the odd elements (each lane's high
/// half, masked) and the even ones (its low half, shifted up): a bfloat16 is the high 16 bits of
/// its f32.
#[inline]
#[target_feature(enable = "avx2")]
fn bf16_halves(bits: __m256i) -> (__m256, __m256) {
    let odd = _mm256_and_si256(bits, _mm256_set1_epi32(-0x1_0000));
    (_mm256_castsi256_ps(odd), _mm256_castsi256_ps(_mm256_slli_epi32::<16>(bits)))
}

/// Rows of 16 little-endian bfloat16 values: max and min from the raw bits ([`Extremes16`]),
/// sums over chunks of [`BF16_CHUNK_ROWS`] rows in [`BF16_CLASSES`] sets of partials, each lane
/// adding its odd element and then its even one, as the portable loop does. The squares are
/// fused into their sums: a bfloat16's square is exact in f32, so that rounds once, as the
/// unfused pair would.
#[target_feature(enable = "avx2,fma")]
pub(super) fn rows_bf16(rows: &[[[u8; 2]; BF16_ROW]]) -> Acc {
    if rows.is_empty() {
        return Acc::new_empty();
    }
    let mut extremes = Extremes::new();
    // f64 lanes 0–3 and 4–7 of the sums and of the squares.
    let (mut sum, mut sq) = ([_mm256_setzero_pd(); 2], [_mm256_setzero_pd(); 2]);
    for chunk in rows.chunks(BF16_CHUNK_ROWS) {
        let mut s = [_mm256_setzero_ps(); BF16_CLASSES];
        let mut q = [_mm256_setzero_ps(); BF16_CLASSES];
        let (quads, rest) = chunk.as_chunks::<BF16_CLASSES>();
        let mut add = |class: usize, row: &[[u8; 2]; BF16_ROW]| {
            let bits = load_bf16(row);
            extremes.add(bits);
            let (odd, even) = bf16_halves(bits);
            s[class] = _mm256_add_ps(_mm256_add_ps(s[class], odd), even);
            q[class] = _mm256_fmadd_ps(even, even, _mm256_fmadd_ps(odd, odd, q[class]));
        };
        for four in quads {
            for (class, row) in four.iter().enumerate() {
                add(class, row);
            }
        }
        for (class, row) in rest.iter().enumerate() {
            add(class, row);
        }
        // Each lane's classes widened and added, 0 + 1, then 2 + 3, as the portable loop does.
        let classes = |v: [__m256; BF16_CLASSES], half: usize| {
            let w = v.map(|v| if half == 0 { _mm256_castps256_ps128(v) } else { _mm256_extractf128_ps::<1>(v) });
            let w = [_mm256_cvtps_pd(w[0]), _mm256_cvtps_pd(w[1]), _mm256_cvtps_pd(w[2]), _mm256_cvtps_pd(w[3])];
            _mm256_add_pd(_mm256_add_pd(w[0], w[1]), _mm256_add_pd(w[2], w[3]))
        };
        for half in 0..2 {
            sum[half] = _mm256_add_pd(sum[half], classes(s, half));
            sq[half] = _mm256_add_pd(sq[half], classes(q, half));
        }
    }
    let (max, min) = extremes.finish().keys();
    let total = |v: [__m256d; 2]| horizontal(_mm256_add_pd(v[0], v[1]));
    Acc { max, min, sum: total(sum), sq: total(sq), count: rows.len() * BF16_ROW }
}

/// Rows of little-endian IEEE float16 halves, two rows (32 bytes) a load: max and min from
/// 16-bit reductions of the raw bits ([`Extremes16`]; float16 orders by sign and magnitude
/// too), each row widened by F16C (`vcvtph2ps`, exact) into the even or the odd rows' sums, the
/// squares fused into them (exact in f32, so the same bits as the portable loop's `q + v * v`).
#[target_feature(enable = "avx2,f16c,fma")]
pub(super) fn rows_f16(rows: &[[[u8; 2]; LANES]]) -> Acc {
    if rows.is_empty() {
        return Acc::new_empty();
    }
    let mut extremes = Extremes::new();
    let (mut sum, mut sq) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for chunk in rows.chunks(CHUNK_ROWS) {
        let (mut s0, mut s1, mut q0, mut q1) =
            (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
        let (pairs, odd) = chunk.as_chunks::<2>();
        for two in pairs {
            // SAFETY: two rows are 32 readable bytes; an unaligned load has no other requirement.
            let bits = unsafe { _mm256_loadu_si256(two.as_ptr().cast()) };
            extremes.add(bits);
            let (a, b) = (_mm256_castsi256_si128(bits), _mm256_extracti128_si256::<1>(bits));
            let (a, b) = (_mm256_cvtph_ps(a), _mm256_cvtph_ps(b));
            s0 = _mm256_add_ps(s0, a);
            q0 = _mm256_fmadd_ps(a, a, q0);
            s1 = _mm256_add_ps(s1, b);
            q1 = _mm256_fmadd_ps(b, b, q1);
        }
        for row in odd {
            let half = halves(row);
            // The row in both halves: the same extremes as the row alone.
            extremes.add(_mm256_broadcastsi128_si256(half));
            let a = _mm256_cvtph_ps(half);
            s0 = _mm256_add_ps(s0, a);
            q0 = _mm256_fmadd_ps(a, a, q0);
        }
        sum = _mm256_add_pd(sum, _mm256_add_pd(widen_pairs(s0), widen_pairs(s1)));
        sq = _mm256_add_pd(sq, _mm256_add_pd(widen_pairs(q0), widen_pairs(q1)));
    }
    let (max, min) = extremes.finish().keys_f16();
    Acc { max, min, sum: horizontal(sum), sq: horizontal(sq), count: rows.len() * LANES }
}
