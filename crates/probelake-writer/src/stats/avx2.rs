//! The statistics row loop for x86-64 CPUs with AVX2, chosen at run time by `float.rs`.
//!
//! Eight lanes in one 256-bit register: integer max/min over order keys (`vpmaxsd`), f32 sums
//! over chunks of 16 rows (even and odd rows apart), each chunk's sums widened and added in four
//! f64 lanes. The order of
//! every addition is the portable loop's, so both give the same bits (a test checks it). The
//! intrinsics are safe to call here: every function enables AVX2, and none takes a pointer.

use std::arch::x86_64::{
    __m128i, __m256, __m256d, __m256i, _mm256_add_pd, _mm256_add_ps, _mm256_castpd256_pd128, _mm256_castps256_ps128,
    _mm256_castps_si256, _mm256_castsi256_ps, _mm256_castsi256_si128, _mm256_cvtph_ps, _mm256_cvtps_pd,
    _mm256_extract_epi32, _mm256_extractf128_pd, _mm256_extractf128_ps, _mm256_extracti128_si256, _mm256_max_epi16,
    _mm256_max_epi32, _mm256_min_epi16, _mm256_min_epi32, _mm256_mul_ps, _mm256_set1_epi16, _mm256_set1_epi32,
    _mm256_setr_epi16, _mm256_setr_epi32, _mm256_setzero_pd, _mm256_setzero_ps, _mm256_setzero_si256,
    _mm256_srai_epi16, _mm256_srai_epi32, _mm256_srli_epi16, _mm256_srli_epi32, _mm256_unpackhi_epi16,
    _mm256_unpacklo_epi16, _mm256_xor_si256, _mm_add_pd, _mm_cvtsd_f64, _mm_extract_epi16, _mm_setr_epi16,
    _mm_unpackhi_pd,
};

use super::float::{widen_key16, Acc, BF16_ROW, CHUNK_ROWS, LANES};

/// The reduction state: per-lane keys and f64 partial sums.
struct State {
    max: __m256i,
    min: __m256i,
    sum: __m256d,
    sq: __m256d,
}

impl State {
    #[target_feature(enable = "avx2")]
    fn new() -> Self {
        State {
            max: _mm256_set1_epi32(i32::MIN),
            min: _mm256_set1_epi32(i32::MAX),
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
                let (a, b) = (self.keyed(load(even)), self.keyed(load(next)));
                s0 = _mm256_add_ps(s0, a);
                q0 = _mm256_add_ps(q0, _mm256_mul_ps(a, a));
                s1 = _mm256_add_ps(s1, b);
                q1 = _mm256_add_ps(q1, _mm256_mul_ps(b, b));
            }
            for row in odd {
                let a = self.keyed(load(row));
                s0 = _mm256_add_ps(s0, a);
                q0 = _mm256_add_ps(q0, _mm256_mul_ps(a, a));
            }
            let (s, q) = ([s0, s1], [q0, q1]);
            self.sum = _mm256_add_pd(self.sum, _mm256_add_pd(widen_pairs(s[0]), widen_pairs(s[1])));
            self.sq = _mm256_add_pd(self.sq, _mm256_add_pd(widen_pairs(q[0]), widen_pairs(q[1])));
        }
    }

    /// Updates max/min with one row's bits and returns the row as floats.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn keyed(&mut self, bits: __m256i) -> __m256 {
        // order_key: flip the magnitude bits of negative values.
        let key = _mm256_xor_si256(bits, _mm256_srli_epi32::<1>(_mm256_srai_epi32::<31>(bits)));
        self.max = _mm256_max_epi32(self.max, key);
        self.min = _mm256_min_epi32(self.min, key);
        _mm256_castsi256_ps(bits)
    }

    #[target_feature(enable = "avx2")]
    fn finish(self, count: usize) -> Acc {
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
        Acc {
            max: lanes(self.max).into_iter().max().unwrap_or(i32::MIN),
            min: lanes(self.min).into_iter().min().unwrap_or(i32::MAX),
            sum: horizontal(self.sum),
            sq: horizontal(self.sq),
            count,
        }
    }
}

/// `[s0+s4, s1+s5, s2+s6, s3+s7]` in f64.
#[inline]
#[target_feature(enable = "avx2")]
fn widen_pairs(v: __m256) -> __m256d {
    _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)))
}

/// `(a0 + a2) + (a1 + a3)`.
#[inline]
#[target_feature(enable = "avx2")]
fn horizontal(v: __m256d) -> f64 {
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
    let w = |i: usize| i16::from_le_bytes(r[i]);
    _mm_setr_epi16(w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7))
}

/// Rows of 16 little-endian bfloat16 values: max/min keys on 16 bits (16 lanes), then each
/// half widened to f32 (`vpunpck{l,h}wd` with zero: the low 16 bits of an f32) and summed.
#[target_feature(enable = "avx2")]
pub(super) fn rows_bf16(rows: &[[[u8; 2]; BF16_ROW]]) -> Acc {
    if rows.is_empty() {
        return Acc::new_empty();
    }
    let zero = _mm256_setzero_si256();
    let mut max = _mm256_set1_epi16(i16::MIN);
    let mut min = _mm256_set1_epi16(i16::MAX);
    let (mut sum, mut sq) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for chunk in rows.chunks(CHUNK_ROWS / 2) {
        let (mut s0, mut s1, mut q0, mut q1) =
            (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
        for r in chunk {
            let w = |i: usize| i16::from_le_bytes(r[i]);
            let v = _mm256_setr_epi16(
                w(0),
                w(1),
                w(2),
                w(3),
                w(4),
                w(5),
                w(6),
                w(7),
                w(8),
                w(9),
                w(10),
                w(11),
                w(12),
                w(13),
                w(14),
                w(15),
            );
            let key = _mm256_xor_si256(v, _mm256_srli_epi16::<1>(_mm256_srai_epi16::<15>(v)));
            max = _mm256_max_epi16(max, key);
            min = _mm256_min_epi16(min, key);
            let a = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v));
            let b = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v));
            s0 = _mm256_add_ps(s0, a);
            q0 = _mm256_add_ps(q0, _mm256_mul_ps(a, a));
            s1 = _mm256_add_ps(s1, b);
            q1 = _mm256_add_ps(q1, _mm256_mul_ps(b, b));
        }
        sum = _mm256_add_pd(sum, _mm256_add_pd(widen_pairs(s0), widen_pairs(s1)));
        sq = _mm256_add_pd(sq, _mm256_add_pd(widen_pairs(q0), widen_pairs(q1)));
    }
    let keys = |v: __m256i| {
        let mut out = [0i16; BF16_ROW];
        let lo = _mm256_castsi256_si128(v);
        let hi = _mm256_extracti128_si256::<1>(v);
        for (half, src) in [lo, hi].into_iter().enumerate() {
            let words = [
                _mm_extract_epi16::<0>(src),
                _mm_extract_epi16::<1>(src),
                _mm_extract_epi16::<2>(src),
                _mm_extract_epi16::<3>(src),
                _mm_extract_epi16::<4>(src),
                _mm_extract_epi16::<5>(src),
                _mm_extract_epi16::<6>(src),
                _mm_extract_epi16::<7>(src),
            ];
            for (i, w) in words.into_iter().enumerate() {
                if let Some(slot) = out.get_mut(half * 8 + i) {
                    *slot = w as u16 as i16;
                }
            }
        }
        out
    };
    Acc {
        max: widen_key16(keys(max).into_iter().max().unwrap_or(i16::MIN)),
        min: widen_key16(keys(min).into_iter().min().unwrap_or(i16::MAX)),
        sum: horizontal(sum),
        sq: horizontal(sq),
        count: rows.len() * BF16_ROW,
    }
}

/// Rows of little-endian IEEE float16 halves, widened by F16C (`vcvtph2ps`, exact).
#[target_feature(enable = "avx2,f16c")]
pub(super) fn rows_f16(rows: &[[[u8; 2]; LANES]]) -> Acc {
    let mut state = State::new();
    state.rows(rows, |r| _mm256_castps_si256(_mm256_cvtph_ps(halves(r))));
    state.finish(rows.len() * LANES)
}
