//! The statistics row loops for x86-64 CPUs with AVX-512, chosen at run time by `float.rs`
//! ahead of the AVX2 ones.
//!
//! One 512-bit register holds two rows: an even row in its low half and the odd row after it in
//! its high half. So the register's sums are exactly the AVX2 loop's two registers (even and odd
//! rows apart), added in the same order, and the portable, AVX2 and AVX-512 loops give the same
//! bits (a test checks it). bfloat16 sums its rows in four sets (alternate registers), and where
//! the CPU has AVX-512 BF16, `vdpbf16ps` adds a register's values and squares in one instruction
//! each, wherever it cannot meet a subnormal. Only the loads take pointers; every other intrinsic
//! is safe inside these functions, which enable the features they use.

use std::arch::x86_64::{
    __m256, __m256d, __m512, __m512bh, __m512d, __m512i, __mmask16, __mmask32, _mm256_add_pd, _mm256_castpd_ps,
    _mm256_loadu_si256, _mm256_max_epi16, _mm256_max_epu16, _mm256_min_epu16, _mm256_setzero_pd,
    _mm256_zextsi128_si256, _mm512_add_pd, _mm512_add_ps, _mm512_and_si512, _mm512_castpd512_pd256,
    _mm512_castps512_ps256, _mm512_castps_pd, _mm512_castsi512_ps, _mm512_castsi512_si256, _mm512_cvtph_ps,
    _mm512_cvtps_pd, _mm512_extractf64x4_pd, _mm512_extracti64x4_epi64, _mm512_fmadd_ps, _mm512_loadu_si512,
    _mm512_mask3_fmadd_ps, _mm512_mask_add_ps, _mm512_mask_dpbf16_ps, _mm512_mask_max_epi16, _mm512_mask_max_epi32,
    _mm512_mask_max_epu16, _mm512_mask_max_epu32, _mm512_mask_min_epu16, _mm512_mask_min_epu32,
    _mm512_mask_test_epi16_mask, _mm512_max_epi16, _mm512_max_epi32, _mm512_max_epu16, _mm512_max_epu32,
    _mm512_min_epu16, _mm512_min_epu32, _mm512_mul_ps, _mm512_reduce_max_epi32, _mm512_reduce_max_epu32,
    _mm512_reduce_min_epu32, _mm512_set1_epi16, _mm512_set1_epi32, _mm512_setzero_pd, _mm512_setzero_ps,
    _mm512_setzero_si512, _mm512_shuffle_f64x2, _mm512_slli_epi32, _mm512_testn_epi16_mask, _mm512_zextsi256_si512,
    _mm_loadu_si128,
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
/// The squares are fused into their sums: a float16's square is exact in f32 (22 significant
/// bits at most, and never below f32's normal range), so the fused add rounds once where the
/// portable loop's `q + v * v` rounds once too, and both give the same bits, one operation fewer.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
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
                q = _mm512_fmadd_ps(v, v, q);
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
            q = _mm512_mask3_fmadd_ps(v, v, q, lanes);
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

/// The f32 partials of a bfloat16 chunk: the sums and the squares of row classes 0 and 1 (the
/// registers 0, 2, 4… of a chunk, even row low, odd row high) and of classes 2 and 3 (registers
/// 1, 3, 5…), as `float.rs` defines the classes.
struct Bf16Partials {
    sum: [__m512; 2],
    sq: [__m512; 2],
}

/// Rows of 16 little-endian bfloat16 values, two rows a register: max and min from the raw bits
/// (`Extremes16`), the sums as `add` adds a register to its classes' partials (`lanes`: all, or
/// the even row's alone for an unpaired last row). `add` returns the words it could not add
/// exactly; any makes the whole reduction `None`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx2")]
fn reduce_bf16(
    rows: &[[[u8; 2]; BF16_ROW]],
    add: impl Fn(&mut Bf16Partials, usize, __m512i, __mmask16) -> __mmask32,
) -> Option<Acc> {
    if rows.is_empty() {
        return Some(Acc::new_empty());
    }
    let (mut smax, mut umax, mut umin) = (_mm512_set1_epi16(i16::MIN), _mm512_setzero_si512(), _mm512_set1_epi16(-1));
    // The extremes of a register's `words` (all, or the even row's).
    let mut extremes = |bits: __m512i, words: __mmask32| {
        smax = _mm512_mask_max_epi16(smax, words, smax, bits);
        umax = _mm512_mask_max_epu16(umax, words, umax, bits);
        umin = _mm512_mask_min_epu16(umin, words, umin, bits);
    };
    // Eight f64 lanes, one per f32 partial of a class.
    let (mut sum, mut sq) = (_mm512_setzero_pd(), _mm512_setzero_pd());
    for chunk in rows.chunks(BF16_CHUNK_ROWS) {
        let mut partials = Bf16Partials { sum: [_mm512_setzero_ps(); 2], sq: [_mm512_setzero_ps(); 2] };
        let mut inexact = 0;
        let (pairs, last) = chunk.as_chunks::<2>();
        let (quads, rest) = pairs.as_chunks::<2>();
        for [a, b] in quads {
            for (class, two) in [(0, a), (1, b)] {
                // SAFETY: two rows are 64 readable bytes; an unaligned load has no other requirement.
                let bits = unsafe { _mm512_loadu_si512(two.as_ptr().cast()) };
                extremes(bits, u32::MAX);
                inexact |= add(&mut partials, class, bits, u16::MAX);
            }
        }
        for two in rest {
            // SAFETY: as above.
            let bits = unsafe { _mm512_loadu_si512(two.as_ptr().cast()) };
            extremes(bits, u32::MAX);
            inexact |= add(&mut partials, 0, bits, u16::MAX);
        }
        for row in last {
            // SAFETY: a row is 32 readable bytes.
            let bits = _mm512_zextsi256_si512(unsafe { _mm256_loadu_si256(row.as_ptr().cast()) });
            extremes(bits, EVEN_WORDS);
            // Its register follows the pairs: classes 0 and 1's after an even number of them.
            // (A constant index each way keeps the partials in registers.)
            inexact |= if pairs.len() % 2 == 0 {
                add(&mut partials, 0, bits, EVEN)
            } else {
                add(&mut partials, 1, bits, EVEN)
            };
        }
        if inexact != 0 {
            return None;
        }
        // Each lane's classes widened and added, 0 + 1, then 2 + 3, as `float.rs` adds them.
        let classes = |[a, b]: [__m512; 2]| {
            let (a, b) = (halves(a), halves(b));
            let (a, b) = (
                _mm512_add_pd(_mm512_cvtps_pd(a.0), _mm512_cvtps_pd(a.1)),
                _mm512_add_pd(_mm512_cvtps_pd(b.0), _mm512_cvtps_pd(b.1)),
            );
            _mm512_add_pd(a, b)
        };
        sum = _mm512_add_pd(sum, classes(partials.sum));
        sq = _mm512_add_pd(sq, classes(partials.sq));
    }
    let (max, min) = extremes16(smax, umax, umin).keys();
    // Lanes j and j + 4, then as the f32 loop adds its four f64 lanes.
    let total = |v: __m512d| horizontal(_mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd::<1>(v)));
    Some(Acc { max, min, sum: total(sum), sq: total(sq), count: rows.len() * BF16_ROW })
}

/// [`reduce_bf16`] with each 32-bit lane's halves widened by a mask (the odd element) and a
/// shift (the even one) and added in that order, the squares fused into their sums as the
/// portable loop fuses them.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
pub(super) fn rows_bf16(rows: &[[[u8; 2]; BF16_ROW]]) -> Acc {
    let high_halves = _mm512_set1_epi32(-0x1_0000);
    let exact = reduce_bf16(rows, |p, class, bits, lanes| {
        let odd = _mm512_castsi512_ps(_mm512_and_si512(bits, high_halves));
        let even = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(bits));
        let s = _mm512_mask_add_ps(p.sum[class], lanes, p.sum[class], odd);
        p.sum[class] = _mm512_mask_add_ps(s, lanes, s, even);
        let q = _mm512_mask3_fmadd_ps(odd, odd, p.sq[class], lanes);
        p.sq[class] = _mm512_mask3_fmadd_ps(even, even, q, lanes);
        0
    });
    // `add` reports nothing inexact, so `reduce_bf16` always answers.
    exact.unwrap_or_else(Acc::new_empty)
}

/// [`reduce_bf16`] with AVX-512 BF16: one `vdpbf16ps` adds a register's 32 values into its
/// sums (against ones) and another its 32 squares, in place of the two widenings, two adds and
/// two FMAs of [`rows_bf16`]: 7 vector operations per 64 bytes instead of 9 (41 against 35.5
/// GiB/s at 256 KiB on the machine of docs/performance.md, "bfloat16 with AVX-512 BF16").
///
/// `vdpbf16ps` computes each 32-bit lane as two FMAs, the odd element first, exactly as the
/// portable loop does, but it reads subnormal inputs as zero and flushes subnormal results to
/// zero. Neither can happen while every nonzero element is at least 2⁻⁶³ in magnitude: its square
/// is then a normal f32 (and a sum of squares never shrinks), and every sum is a multiple of
/// 2⁻⁷⁰, so never subnormal. So each register is tested for a nonzero element below 2⁻⁶³
/// (exponent bits 14 and 13 clear, any of bits 12–0 set), and a chunk holding one makes the
/// result `None`: the caller then runs [`rows_bf16`], which gives the same bits for all inputs.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,avx2")]
pub(super) fn rows_bf16_dot(rows: &[[[u8; 2]; BF16_ROW]]) -> Option<Acc> {
    let ones = bf16_pairs(_mm512_set1_epi16(0x3f80));
    let (exponent_top, rest) = (_mm512_set1_epi16(0x6000), _mm512_set1_epi16(0x1fff));
    reduce_bf16(rows, |p, class, bits, lanes| {
        let v = bf16_pairs(bits);
        p.sum[class] = _mm512_mask_dpbf16_ps(p.sum[class], lanes, v, ones);
        p.sq[class] = _mm512_mask_dpbf16_ps(p.sq[class], lanes, v, v);
        let small = _mm512_testn_epi16_mask(bits, exponent_top);
        _mm512_mask_test_epi16_mask(small, bits, rest)
    })
}

/// A register's 32 words as the bfloat16 pairs `vdpbf16ps` reads.
#[inline]
#[target_feature(enable = "avx512f")]
fn bf16_pairs(bits: __m512i) -> __m512bh {
    // SAFETY: both types are 64 bytes of plain bits; `__m512bh` only names their reading.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(bits) }
}
