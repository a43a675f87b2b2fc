//! Statistics against a straightforward f64 reference, for every dtype: random buffers from a
//! seeded generator (the same cases on every run), empty and 0-dim tensors, NaN/inf mixes.
//!
//! The tolerance is the one documented in the module: Max and Min exact; Mean and Norm within
//! one unit in the last place of the dtype of the reference rounded to it, plus the bound of the
//! f32 partial sums (8·2⁻²⁴·mean|x| for Mean, 4·2⁻²⁴·Norm for Norm).

use half::{bf16, f16};

use super::*;

/// splitmix64: seedable and identical everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A float from one of several regimes: small, unit-ish, huge, or a special value.
    fn float(&mut self, specials: bool) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        match self.below(if specials { 12 } else { 10 }) {
            0 => u * 1e-30,
            1..=6 => u * 4.0,
            7 => u * 1e4,
            8 => u * 6e4,
            9 => (u * 1e30).round(),
            10 => [f64::INFINITY, f64::NEG_INFINITY, -0.0][self.below(3) as usize],
            _ => f64::NAN,
        }
    }
}

/// Encodes `values` in `dtype` (rounding to it), returning the bytes and the exact values kept.
fn encode(dtype: DType, values: &[f64]) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::new();
    let mut kept = Vec::new();
    for &v in values {
        match dtype {
            DType::F32 => {
                let x = v as f32;
                bytes.extend_from_slice(&x.to_le_bytes());
                kept.push(f64::from(x));
            }
            DType::BF16 => {
                let x = bf16::from_f64(v);
                bytes.extend_from_slice(&x.to_le_bytes());
                kept.push(x.to_f64());
            }
            DType::F16 => {
                let x = f16::from_f64(v);
                bytes.extend_from_slice(&x.to_le_bytes());
                kept.push(x.to_f64());
            }
            _ => {
                bytes.extend_from_slice(&v.to_le_bytes());
                kept.push(v);
            }
        }
    }
    (bytes, kept)
}

/// The distance from `v` (a value of `dtype`) to the next representable value away from zero.
fn ulp(dtype: DType, v: f64) -> f64 {
    let a = v.abs();
    match dtype {
        DType::F32 | DType::Complex64 => {
            let x = a as f32;
            f64::from(f32::from_bits(x.to_bits() + 1)) - f64::from(x)
        }
        DType::BF16 => {
            let x = bf16::from_f64(a);
            bf16::from_bits(x.to_bits() + 1).to_f64() - x.to_f64()
        }
        DType::F16 => {
            let x = f16::from_f64(a);
            f16::from_bits(x.to_bits() + 1).to_f64() - x.to_f64()
        }
        _ => f64::from_bits(a.to_bits() + 1) - a,
    }
}

fn same_float(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// `got` is `exact` rounded to `dtype`, within one ulp plus `slack`.
fn assert_close(dtype: DType, what: &str, got: Stat, exact: f64, slack: f64, case: &str) {
    let Stat::Float(got) = got else { panic!("{case}: {what} is {got:?}, expected a float near {exact}") };
    let want = round_to(dtype, exact);
    if same_float(got, want) {
        return;
    }
    assert!(
        want.is_finite() && got.is_finite() && (got - want).abs() <= ulp(dtype, want) + slack,
        "{case}: {what} = {got}, reference {exact} rounds to {want} (1 ulp = {}, slack {slack})",
        ulp(dtype, want)
    );
}

/// 2⁻²⁴, the unit of the f32 chunk sums' error bound.
const F32_UNIT: f64 = 1.0 / (1u64 << 24) as f64;

/// The reference: a sequential f64 loop, nothing clever.
fn check_float(dtype: DType, values: &[f64], zero_dim: bool, case: &str) {
    let (bytes, kept) = encode(dtype, values);
    let got = summarize(dtype, &bytes, zero_dim);
    if kept.is_empty() {
        assert_eq!(got, Summary::NULL, "{case}");
        return;
    }
    if zero_dim {
        for s in got.as_array() {
            assert!(matches!(s, Stat::Float(v) if same_float(v, kept[0])), "{case}: {got:?}");
        }
        return;
    }
    let has_nan = kept.iter().any(|v| v.is_nan());
    let (mut max, mut min, mut sum, mut sq, mut abs) = (f64::NEG_INFINITY, f64::INFINITY, 0.0, 0.0, 0.0);
    for &v in &kept {
        max = max.max(v);
        min = min.min(v);
        sum += v;
        sq += v * v;
        abs += v.abs();
    }
    if has_nan {
        assert!(matches!(got.max, Stat::Float(v) if v.is_nan()), "{case}: {got:?}");
        assert!(matches!(got.min, Stat::Float(v) if v.is_nan()), "{case}: {got:?}");
    } else {
        assert_eq!(got.max, Stat::Float(max), "{case}");
        assert_eq!(got.min, Stat::Float(min), "{case}");
    }
    if dtype == DType::F64 {
        assert_eq!((got.mean, got.norm), (Stat::Null, Stat::Null), "{case}");
        return;
    }
    if has_nan {
        assert!(matches!(got.mean, Stat::Float(v) if v.is_nan()), "{case}: {got:?}");
        assert!(matches!(got.norm, Stat::Float(v) if v.is_nan()), "{case}: {got:?}");
        return;
    }
    let n = kept.len() as f64;
    // Values per f32 partial sum (the module's precision note).
    let partial = if dtype == DType::BF16 { 16.0 } else { 8.0 };
    assert_close(dtype, "mean", got.mean, sum / n, partial * F32_UNIT * abs / n, case);
    assert_close(dtype, "norm", got.norm, sq.sqrt(), partial / 2.0 * F32_UNIT * sq.sqrt(), case);
}

const FLOATS: [DType; 4] = [DType::F32, DType::BF16, DType::F16, DType::F64];

#[test]
fn random_float_tensors_match_the_reference() {
    let mut rng = Rng(0x5eed);
    for case in 0..3000 {
        let dtype = FLOATS[case % FLOATS.len()];
        let len = match rng.below(4) {
            0 => rng.below(9) as usize,
            1 => rng.below(40) as usize,
            _ => rng.below(700) as usize,
        };
        let specials = rng.below(4) == 0;
        let values: Vec<f64> = (0..len).map(|_| rng.float(specials)).collect();
        check_float(dtype, &values, false, &format!("case {case} ({dtype}, {len} elements)"));
    }
}

#[test]
fn empty_and_zero_dim_tensors_of_every_dtype() {
    for dtype in DType::ALL {
        assert_eq!(summarize(dtype, &[], false), Summary::NULL, "{dtype} empty");
    }
    for dtype in FLOATS {
        for v in [1.5, -0.0, f64::INFINITY, f64::NAN, 3.0e-5] {
            check_float(dtype, &[v], true, &format!("{dtype} scalar {v}"));
        }
    }
    assert_eq!(summarize(DType::I64, &(-7i64).to_le_bytes(), true), Summary::all(Stat::Int(-7)));
    assert_eq!(summarize(DType::U8, &[200], true), Summary::all(Stat::Int(200)));
    let t = Summary { max: Stat::Bool(true), min: Stat::Bool(true), mean: Stat::Null, norm: Stat::Null };
    assert_eq!(summarize(DType::Bool, &[1], true), t);
    // A 0-dim complex tensor follows the complex rule: |z| three times, no Norm.
    let z: Vec<u8> = [3.0f32, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let s = summarize(DType::Complex64, &z, true);
    assert_eq!(s, Summary { max: Stat::Float(5.0), min: Stat::Float(5.0), mean: Stat::Float(5.0), norm: Stat::Null });
}

#[test]
fn nan_and_inf_mixes_follow_ieee_as_torch_does() {
    let cases: &[(&[f64], [f64; 4])] = &[
        (&[f64::INFINITY, 1.0], [f64::INFINITY, 1.0, f64::INFINITY, f64::INFINITY]),
        (&[f64::NEG_INFINITY, 1.0], [1.0, f64::NEG_INFINITY, f64::NEG_INFINITY, f64::INFINITY]),
        (&[f64::INFINITY, f64::NEG_INFINITY], [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::INFINITY]),
        (&[f64::NAN, 1.0, f64::INFINITY], [f64::NAN; 4]),
        // float32 norm overflow gives Infinity (observed in msprobe).
        (&[3.0e38, 3.0e38], [f64::from(3.0e38f32), f64::from(3.0e38f32), f64::from(3.0e38f32), f64::INFINITY]),
    ];
    for (values, want) in cases {
        let (bytes, _) = encode(DType::F32, values);
        let got = summarize(DType::F32, &bytes, false).as_array();
        for (g, w) in got.iter().zip(want) {
            assert!(matches!(g, Stat::Float(v) if same_float(*v, *w)), "{values:?}: {got:?}");
        }
    }
    let (bytes, _) = encode(DType::F16, &[60000.0, 60000.0]);
    assert_eq!(summarize(DType::F16, &bytes, false).norm, Stat::Float(f64::INFINITY), "f16 norm overflows");
    let (bytes, _) = encode(DType::F64, &[1.0, f64::NAN]);
    let s = summarize(DType::F64, &bytes, false);
    assert!(matches!(s.max, Stat::Float(v) if v.is_nan()) && s.mean == Stat::Null, "{s:?}");
}

/// The bfloat16 kernel finds max and min from the raw bits' signed and unsigned extremes, with a
/// different rule when every element has the same sign: tensors of one sign, zeros of both signs,
/// infinities and NaN, long enough to fill whole rows and chunks.
#[test]
fn bf16_extremes_of_one_sign_and_of_signed_zeros() {
    let ramp = |f: fn(f64) -> f64| -> Vec<f64> { (0..1000).map(|i| f(f64::from(i % 97) + 0.5)).collect() };
    let cases: Vec<(&str, Vec<f64>)> = vec![
        ("all negative", ramp(|v| -v)),
        ("all positive", ramp(|v| v)),
        ("negative and -0.0", ramp(|v| if v < 3.0 { -0.0 } else { -v })),
        ("only -0.0", vec![-0.0; 600]),
        ("-0.0 and 0.0", (0..600).map(|i| if i % 5 == 0 { 0.0 } else { -0.0 }).collect()),
        ("positive and -inf", ramp(|v| if v > 90.0 { f64::NEG_INFINITY } else { v })),
        ("negative and +inf", ramp(|v| if v > 90.0 { f64::INFINITY } else { -v })),
        ("negative and NaN", ramp(|v| if v > 95.0 { f64::NAN } else { -v })),
    ];
    for (what, values) in cases {
        check_float(DType::BF16, &values, false, &format!("bf16 {what}"));
    }
}

#[test]
fn tiny_and_huge_tensors_are_reduced_in_f64() {
    // f32 squares of 1e-30 underflow and of 1e25 overflow; the norms must still be right.
    for scale in [1e-30, 1e-22, 1e25, 1e30] {
        let values: Vec<f64> = (1..=300).map(|i| f64::from(i) * scale * if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
        check_float(DType::F32, &values, false, &format!("f32 scale {scale}"));
        check_float(DType::BF16, &values, false, &format!("bf16 scale {scale}"));
        let (bytes, kept) = encode(DType::F32, &values);
        let norm = kept.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!(
            matches!(summarize(DType::F32, &bytes, false).norm, Stat::Float(v) if v > 0.0 && (v / norm - 1.0).abs() < 1e-6)
        );
    }
}

#[test]
fn integer_tensors_give_exact_integer_extremes() {
    let mut rng = Rng(7);
    for dtype in [DType::I8, DType::I16, DType::I32, DType::I64, DType::U8] {
        for case in 0..200 {
            let len = 1 + rng.below(300) as usize;
            let mut bytes = Vec::new();
            let mut values = Vec::new();
            for _ in 0..len {
                let r = rng.next();
                let v: i64 = match dtype {
                    DType::I8 => i64::from(r as i8),
                    DType::U8 => i64::from(r as u8),
                    DType::I16 => i64::from(r as i16),
                    DType::I32 => i64::from(r as i32),
                    _ => r as i64,
                };
                values.push(v);
                bytes.extend_from_slice(&v.to_le_bytes()[..dtype.itemsize()]);
            }
            let want = Summary {
                max: Stat::Int(values.iter().copied().max().unwrap_or_default()),
                min: Stat::Int(values.iter().copied().min().unwrap_or_default()),
                mean: Stat::Null,
                norm: Stat::Null,
            };
            assert_eq!(summarize(dtype, &bytes, false), want, "{dtype} case {case}");
        }
    }
    let extremes: Vec<u8> = [i64::MIN, i64::MAX].iter().flat_map(|v| v.to_le_bytes()).collect();
    let s = summarize(DType::I64, &extremes, false);
    assert_eq!((s.max, s.min), (Stat::Int(i64::MAX), Stat::Int(i64::MIN)));
}

#[test]
fn bool_tensors_give_any_and_all() {
    let s = |b: &[u8]| summarize(DType::Bool, b, false);
    assert_eq!((s(&[0, 1, 0]).max, s(&[0, 1, 0]).min), (Stat::Bool(true), Stat::Bool(false)));
    assert_eq!((s(&[1, 1]).max, s(&[1, 1]).min), (Stat::Bool(true), Stat::Bool(true)));
    assert_eq!((s(&[0]).max, s(&[0]).min, s(&[0]).mean), (Stat::Bool(false), Stat::Bool(false), Stat::Null));
}

#[test]
fn complex_tensors_give_magnitude_statistics() {
    let mut rng = Rng(99);
    for case in 0..300 {
        let len = 1 + rng.below(100) as usize;
        let parts: Vec<f64> = (0..2 * len).map(|_| rng.float(false)).collect();
        for dtype in [DType::Complex64, DType::Complex128] {
            let (bytes, kept) =
                if dtype == DType::Complex64 { encode(DType::F32, &parts) } else { encode(DType::F64, &parts) };
            let mags: Vec<f64> = kept.chunks(2).map(|p| p[0].hypot(p[1])).collect();
            let got = summarize(dtype, &bytes, false);
            let max = mags.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let min = mags.iter().copied().fold(f64::INFINITY, f64::min);
            let mean = mags.iter().sum::<f64>() / len as f64;
            let label = format!("{dtype} case {case}");
            assert_close(dtype, "max", got.max, max, 0.0, &label);
            assert_close(dtype, "min", got.min, min, 0.0, &label);
            assert_close(dtype, "mean", got.mean, mean, 0.0, &label);
            assert_eq!(got.norm, Stat::Null, "{label}");
        }
    }
}

#[test]
fn bf16_and_f16_statistics_are_values_of_their_dtype() {
    let (bytes, _) = encode(DType::BF16, &[1.0, 2.0, 3.3, -7.1, 1e-3]);
    for s in summarize(DType::BF16, &bytes, false).as_array() {
        let Stat::Float(v) = s else { panic!("{s:?}") };
        assert_eq!(bf16::from_f64(v).to_f64(), v, "{v} is a bfloat16 value");
    }
    let (bytes, _) = encode(DType::F16, &[1.0, 2.0, 3.3, -7.1, 1e-3]);
    for s in summarize(DType::F16, &bytes, false).as_array() {
        let Stat::Float(v) = s else { panic!("{s:?}") };
        assert_eq!(f16::from_f64(v).to_f64(), v, "{v} is a float16 value");
    }
}
