//! The statistics row loops for x86-64 CPUs with AVX-512, chosen at run time by `float.rs`
//! ahead of the AVX2 ones.
//!
//! One 512-bit register holds two rows: an even row in its low half and the odd row after it in
//! its high half. So the register's sums are exactly the AVX2 loop's two registers (even and odd
//! rows apart), added in the same order, and the portable, AVX2 and AVX-512 loops give the same
//! bits (a test checks it). Only the loads take pointers; every other intrinsic is safe inside
//! these functions, which enable the features they use.

use std::arch::x86_64::{
    __m256, __m256d, __m512, __m512i, _mm256_add_pd, _mm256_castpd_ps, _mm256_loadu_si256, _mm256_max_epi16,
    _mm256_max_epu16, _mm256_min_epu16, _mm256_setzero_pd, _mm256_zextsi128_si256, _mm512_add_pd, _mm512_add_ps,
    _mm512_castpd512_pd256, _mm512_castps512_ps256, _mm512_castps_pd, _mm512_castsi512_ps, _mm512_castsi512_si256,
    _mm512_cvtph_ps, _mm512_cvtps_pd, _mm512_extractf64x4_pd, _mm512_extracti64x4_epi64, _mm512_fmadd_ps,
    _mm512_loadu_si512, _mm512_mask3_fmadd_ps, _mm512_mask_add_ps, _mm512_mask_max_epi16, _mm512_mask_max_epi32,
    _mm512_mask_max_epu16, _mm512_mask_max_epu32, _mm512_mask_min_epu16, _mm512_mask_min_epu32, _mm512_max_epi16,
    _mm512_max_epi32, _mm512_max_epu16, _mm512_max_epu32, _mm512_min_epu16, _mm512_min_epu32, _mm512_mul_ps,
    _mm512_reduce_max_epi32, _mm512_reduce_max_epu32, _mm512_reduce_min_epu32, _mm512_set1_epi16, _mm512_set1_epi32,
    _mm512_setzero_ps, _mm512_setzero_si512, _mm512_shuffle_f64x2, _mm512_unpackhi_epi16, _mm512_unpacklo_epi16,
    _mm512_zextsi256_si512, _mm_loadu_si128,
};

use super::avx2::{horizontal, Extremes};
use super::float::{extreme_keys, Acc, Extremes16, BF16_CHUNK_ROWS, BF16_ROW, CHUNK_ROWS, LANES};

/// The lanes of the even row.
const EVEN: u16 = 0x00ff;

/// Reduces `rows`, two at a time as `pair` loads them (sixteen f32 bit patterns), an unpaired
/// last row of a chunk as `single` loads it (lanes 0–7; the rest are masked off).
#[inline]
#[target_feature(enable = "avx512f,avx2")]
fn reduce<T>(rows: &[T], pair: impl Fn(&[T; 2]) -> __m512i, single: impl Fn(&T) -> __m512i) -> Acc {
    if rows.is_empty() {
        // The three reductions of no bits name no element.
        return Acc::new_empty();
    }
    // Max and min from three integer reductions of the raw bits, as the bfloat16 loops find
    // them (`Extremes16`): two fewer operations per register than an order key each.
    let (mut smax, mut umax, mut umin) = (_mm512_set1_epi32(i32::MIN), _mm512_setzero_si512(), _mm512_set1_epi32(-1));
    let (mut sum, mut sq) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for chunk in rows.chunks(CHUNK_ROWS) {
        let (mut s, mut q) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let (pairs, odd) = chunk.as_chunks::<2>();
        for two in pairs {
            let bits = pair(two);
            smax = _mm512_max_epi32(smax, bits);
            umax = _mm512_max_epu32(umax, bits);
            umin = _mm512_min_epu32(umin, bits);
            let v = _mm512_castsi512_ps(bits);
            s = _mm512_add_ps(s, v);
            q = _mm512_add_ps(q, _mm512_mul_ps(v, v));
        }
        for row in odd {
            let bits = single(row);
            smax = _mm512_mask_max_epi32(smax, EVEN, smax, bits);
            umax = _mm512_mask_max_epu32(umax, EVEN, umax, bits);
            umin = _mm512_mask_min_epu32(umin, EVEN, umin, bits);
            let v = _mm512_castsi512_ps(bits);
            // Masked: adding 0.0 to the odd lanes would turn a -0.0 sum into 0.0.
            s = _mm512_mask_add_ps(s, EVEN, s, v);
            q = _mm512_mask_add_ps(q, EVEN, q, _mm512_mul_ps(v, v));
        }
        sum = _mm256_add_pd(sum, widen_rows(s));
        sq = _mm256_add_pd(sq, widen_rows(q));
    }
    let (max, min) =
        extreme_keys(_mm512_reduce_max_epi32(smax), _mm512_reduce_max_epu32(umax), _mm512_reduce_min_epu32(umin));
    Acc { max, min, sum: horizontal(sum), sq: horizontal(sq), count: rows.len() * LANES }
}

/// The even row's lanes and the odd row's.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
fn halves(v: __m512) -> (__m256, __m256) {
    (_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))))
}

/// `widen_pairs(even) + widen_pairs(odd)` of a register of even and odd row sums.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
fn widen_rows(v: __m512) -> __m256d {
    let (even, odd) = halves(v);
    widen_two(even, odd)
}

/// `widen_pairs(a) + widen_pairs(b)` (see `avx2.rs`): the same additions in the same order,
/// with both registers widened and paired at once in 512-bit lanes. It runs at the end of every
/// chunk, for the sums and again for the squares; done one 256-bit register at a time, that
/// was about a fifth of the float32 loop's operations.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
fn widen_two(a: __m256, b: __m256) -> __m256d {
    let (a, b) = (_mm512_cvtps_pd(a), _mm512_cvtps_pd(b));
    // [a 0..4, b 0..4] + [a 4..8, b 4..8]: both registers' widened pairs at once.
    let low = _mm512_shuffle_f64x2::<0b0100_0100>(a, b);
    let high = _mm512_shuffle_f64x2::<0b1110_1110>(a, b);
    let pairs = _mm512_add_pd(low, high);
    _mm256_add_pd(_mm512_castpd512_pd256(pairs), _mm512_extractf64x4_pd::<1>(pairs))
}

/// Rows of little-endian f32 words.
#[target_feature(enable = "avx512f,avx2")]
pub(super) fn rows_f32(rows: &[[[u8; 4]; LANES]]) -> Acc {
    reduce(
        rows,
        // SAFETY: two rows are 64 readable bytes; an unaligned load has no other requirement.
        |two| unsafe { _mm512_loadu_si512(two.as_ptr().cast()) },
        // SAFETY: a row is 32 readable bytes.
        |row| _mm512_zextsi256_si512(unsafe { _mm256_loadu_si256(row.as_ptr().cast()) }),
    )
}

/// Rows of little-endian IEEE float16 halves, four rows (64 bytes) a load: max and min from
/// 16-bit reductions of the raw bits (`Extremes16`), the sums over the rows widened two at a
/// time by `vcvtph2ps` (exact), each pair even row low, odd row high, as [`reduce`] keeps them.
#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub(super) fn rows_f16(rows: &[[[u8; 2]; LANES]]) -> Acc {
    if rows.is_empty() {
        return Acc::new_empty();
    }
    let (mut smax, mut umax, mut umin) = (_mm512_set1_epi16(i16::MIN), _mm512_setzero_si512(), _mm512_set1_epi16(-1));
    let (mut sum, mut sq) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for chunk in rows.chunks(CHUNK_ROWS) {
        let (mut s, mut q) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let (quads, rest) = chunk.as_chunks::<4>();
        for four in quads {
            // SAFETY: four rows are 64 readable bytes; an unaligned load has no other requirement.
            let bits = unsafe { _mm512_loadu_si512(four.as_ptr().cast()) };
            smax = _mm512_max_epi16(smax, bits);
            umax = _mm512_max_epu16(umax, bits);
            umin = _mm512_min_epu16(umin, bits);
            for pair in [_mm512_castsi512_si256(bits), _mm512_extracti64x4_epi64::<1>(bits)] {
                let v = _mm512_cvtph_ps(pair);
                s = _mm512_add_ps(s, v);
                q = _mm512_add_ps(q, _mm512_mul_ps(v, v));
            }
        }
        let (pairs, odd) = rest.as_chunks::<2>();
        // The rows after the last four: a pair (16 words, 16 floats), then an unpaired row
        // (8 words, the even lanes).
        let tails = pairs
            .iter()
            // SAFETY: two rows are 32 readable bytes.
            .map(|two| (unsafe { _mm256_loadu_si256(two.as_ptr().cast()) }, 0x0000_ffff, u16::MAX))
            .chain(odd.iter().map(|row| {
                // SAFETY: a row is 16 readable bytes.
                (_mm256_zextsi128_si256(unsafe { _mm_loadu_si128(row.as_ptr().cast()) }), 0x0000_00ff, EVEN)
            }));
        for (pair, words, lanes) in tails {
            let bits = _mm512_zextsi256_si512(pair);
            smax = _mm512_mask_max_epi16(smax, words, smax, bits);
            umax = _mm512_mask_max_epu16(umax, words, umax, bits);
            umin = _mm512_mask_min_epu16(umin, words, umin, bits);
            let v = _mm512_cvtph_ps(pair);
            s = _mm512_mask_add_ps(s, lanes, s, v);
            q = _mm512_mask_add_ps(q, lanes, q, _mm512_mul_ps(v, v));
        }
        sum = _mm256_add_pd(sum, widen_rows(s));
        sq = _mm256_add_pd(sq, widen_rows(q));
    }
    let (max, min) = extremes16(smax, umax, umin).keys_f16();
    Acc { max, min, sum: horizontal(sum), sq: horizontal(sq), count: rows.len() * LANES }
}

/// The per-lane 16-bit extremes of 32 lanes, folded to one [`Extremes16`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx2")]
fn extremes16(smax: __m512i, umax: __m512i, umin: __m512i) -> Extremes16 {
    let fold = |v: __m512i| (_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    let ((smax_lo, smax_hi), (umax_lo, umax_hi), (umin_lo, umin_hi)) = (fold(smax), fold(umax), fold(umin));
    Extremes {
        signed_max: _mm256_max_epi16(smax_lo, smax_hi),
        unsigned_max: _mm256_max_epu16(umax_lo, umax_hi),
        unsigned_min: _mm256_min_epu16(umin_lo, umin_hi),
    }
    .finish()
}

/// The lanes of the even bfloat16 row (16-bit lanes).
const EVEN_WORDS: u32 = 0x0000_ffff;

/// Rows of 16 little-endian bfloat16 values, two rows a register: max and min from the raw bits
/// (`Extremes16`), each row's halves widened by `vpunpck{l,h}wd` with zero as the AVX2 loop
/// widens them (per 128-bit lane, so the even row's halves land in the low lanes), the squares
/// fused into their sums as there.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
pub(super) fn rows_bf16(rows: &[[[u8; 2]; BF16_ROW]]) -> Acc {
    if rows.is_empty() {
        return Acc::new_empty();
    }
    let (mut smax, mut umax, mut umin) = (_mm512_set1_epi16(i16::MIN), _mm512_setzero_si512(), _mm512_set1_epi16(-1));
    let (mut sum, mut sq) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let zero = _mm512_setzero_si512();
    for chunk in rows.chunks(BF16_CHUNK_ROWS) {
        // [low half, high half] of each row, even rows in lanes 0–7, odd rows in lanes 8–15.
        let (mut s, mut q) = ([_mm512_setzero_ps(); 2], [_mm512_setzero_ps(); 2]);
        let (pairs, odd) = chunk.as_chunks::<2>();
        for two in pairs {
            // SAFETY: two rows are 64 readable bytes; an unaligned load has no other requirement.
            let bits = unsafe { _mm512_loadu_si512(two.as_ptr().cast()) };
            smax = _mm512_max_epi16(smax, bits);
            umax = _mm512_max_epu16(umax, bits);
            umin = _mm512_min_epu16(umin, bits);
            let halves = [_mm512_unpacklo_epi16(zero, bits), _mm512_unpackhi_epi16(zero, bits)];
            for (h, half) in halves.into_iter().enumerate() {
                let v = _mm512_castsi512_ps(half);
                s[h] = _mm512_add_ps(s[h], v);
                q[h] = _mm512_fmadd_ps(v, v, q[h]);
            }
        }
        for row in odd {
            // SAFETY: a row is 32 readable bytes.
            let bits = _mm512_zextsi256_si512(unsafe { _mm256_loadu_si256(row.as_ptr().cast()) });
            smax = _mm512_mask_max_epi16(smax, EVEN_WORDS, smax, bits);
            umax = _mm512_mask_max_epu16(umax, EVEN_WORDS, umax, bits);
            umin = _mm512_mask_min_epu16(umin, EVEN_WORDS, umin, bits);
            let halves = [_mm512_unpacklo_epi16(zero, bits), _mm512_unpackhi_epi16(zero, bits)];
            for (h, half) in halves.into_iter().enumerate() {
                let v = _mm512_castsi512_ps(half);
                s[h] = _mm512_mask_add_ps(s[h], EVEN, s[h], v);
                q[h] = _mm512_mask3_fmadd_ps(v, v, q[h], EVEN);
            }
        }
        let (s_lo, s_hi) = (halves(s[0]), halves(s[1]));
        let (q_lo, q_hi) = (halves(q[0]), halves(q[1]));
        // Even rows' halves, then odd rows', as the AVX2 loop adds them.
        let even_sum = widen_two(s_lo.0, s_hi.0);
        let odd_sum = widen_two(s_lo.1, s_hi.1);
        let even_sq = widen_two(q_lo.0, q_hi.0);
        let odd_sq = widen_two(q_lo.1, q_hi.1);
        sum = _mm256_add_pd(sum, _mm256_add_pd(even_sum, odd_sum));
        sq = _mm256_add_pd(sq, _mm256_add_pd(even_sq, odd_sq));
    }
    let (max, min) = extremes16(smax, umax, umin).keys();
    Acc { max, min, sum: horizontal(sum), sq: horizontal(sq), count: rows.len() * BF16_ROW }
}
