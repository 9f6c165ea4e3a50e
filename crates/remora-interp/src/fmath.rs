//! Remora's own Float `exp`, `ln`, `^` (pow) and `tanh`: evaluated in f64
//! (a range reduction and a polynomial whose error is near 2^-52 relative)
//! and rounded once to f32, so the result is the correctly rounded f32 in
//! all but vanishingly rare cases, on every machine.
//!
//! The compiled engine's runtime (`remora-compile`'s `runtime.c`,
//! `rt_expf`, `rt_logf`, `rt_powf`, `rt_tanhf`) performs the same f64
//! operations in the same order (C built without contraction), so both
//! engines give the same bits: change one, change the other.
//!
//! The main path has no branches (special values are chosen by selects
//! after it), so a loop over these functions vectorises.

/// 1/ln 2, the nearest double.
const INV_LN2: f64 = std::f64::consts::LOG2_E;
/// ln 2 to 42 significant bits: `k * LN2_HI` is exact for |k| < 2^11.
const LN2_HI: f64 = 0.6931471805598903;
/// ln 2 − `LN2_HI`, the nearest double.
const LN2_LO: f64 = 5.497923018708371e-14;
/// ln 2, the nearest double.
const LN2: f64 = std::f64::consts::LN_2;
/// 1.5 · 2^52: adding it to a double below 2^51 in magnitude rounds that
/// to an integer, which is then the low bits of the sum.
const SHIFT: f64 = 6755399441055744.0;
/// The bits of √2/2, the low end of the reduced argument of `ln`.
const SQRT1_2_BITS: u64 = 0x3fe6_a09e_667f_3bcd;

/// Taylor coefficients of exp: 1/n! for n = 2..=12 (1/0! = 1/1! = 1).
const E2: f64 = 0.5;
const E3: f64 = 0.16666666666666666;
const E4: f64 = 0.041666666666666664;
const E5: f64 = 0.008333333333333333;
const E6: f64 = 0.001388888888888889;
const E7: f64 = 0.0001984126984126984;
const E8: f64 = 2.48015873015873e-05;
const E9: f64 = 2.7557319223985893e-06;
const E10: f64 = 2.755731922398589e-07;
const E11: f64 = 2.505210838544172e-08;
const E12: f64 = 2.08767569878681e-09;

/// Coefficients of ln(m) = 2s + 2s·(s²/3 + s⁴/5 + …): 1/(2n+1), n = 1..=9.
const L1: f64 = 0.3333333333333333;
const L2: f64 = 0.2;
const L3: f64 = 0.14285714285714285;
const L4: f64 = 0.1111111111111111;
const L5: f64 = 0.09090909090909091;
const L6: f64 = 0.07692307692307693;
const L7: f64 = 0.06666666666666667;
const L8: f64 = 0.058823529411764705;
const L9: f64 = 0.05263157894736842;

/// exp(r) − 1 for |r| ≤ ln2/2, without the leading 1 (so that `expm1`
/// keeps its relative accuracy near 0): r + r²/2! + … + r¹²/12!.
#[inline(always)]
fn expm1_poly(r: f64) -> f64 {
    let p = E12;
    let p = p * r + E11;
    let p = p * r + E10;
    let p = p * r + E9;
    let p = p * r + E8;
    let p = p * r + E7;
    let p = p * r + E6;
    let p = p * r + E5;
    let p = p * r + E4;
    let p = p * r + E3;
    let p = p * r + E2;
    let p = p * r + 1.0;
    p * r
}

/// `t` split as k·ln2 + r with k an integer and |r| ≤ ln2/2 (t clamped to
/// [-110, 90], beyond which every f32 result is 0 or infinite): (r, 2^k).
#[inline(always)]
fn reduce(t: f64) -> (f64, f64) {
    let t = if t > 90.0 { 90.0 } else { t };
    let t = if t < -110.0 { -110.0 } else { t };
    let kt = t * INV_LN2 + SHIFT;
    let k = kt - SHIFT;
    let r = (t - k * LN2_HI) - k * LN2_LO;
    let k_bits = kt.to_bits().wrapping_sub(SHIFT.to_bits());
    let scale = f64::from_bits(k_bits.wrapping_add(1023) << 52);
    (r, scale)
}

/// e^t in f64 for t in f32's range of interest (NaN for NaN).
#[inline(always)]
fn exp_core(t: f64) -> f64 {
    let (r, scale) = reduce(t);
    let p = 1.0 + expm1_poly(r);
    p * scale
}

/// 2^t in f64 for t in f32's range of interest (NaN for NaN): exactly
/// 2^t for an integral t, so that `pow` of a power of 2 is exact.
#[inline(always)]
fn exp2_core(t: f64) -> f64 {
    let t = if t > 130.0 { 130.0 } else { t };
    let t = if t < -160.0 { -160.0 } else { t };
    let kt = t + SHIFT;
    let k = kt - SHIFT;
    let r = (t - k) * LN2;
    let k_bits = kt.to_bits().wrapping_sub(SHIFT.to_bits());
    let scale = f64::from_bits(k_bits.wrapping_add(1023) << 52);
    let p = 1.0 + expm1_poly(r);
    p * scale
}

/// ln(x) in f64 for x a positive normal double (garbage otherwise: the
/// callers choose the special values).
#[inline(always)]
fn ln_core(x: f64) -> f64 {
    let (e, ln_m) = ln_parts(x);
    e * LN2_HI + (e * LN2_LO + ln_m)
}

/// log2(x) in f64, as `ln_core`: exactly e for x = 2^e.
#[inline(always)]
fn log2_core(x: f64) -> f64 {
    let (e, ln_m) = ln_parts(x);
    e + ln_m * INV_LN2
}

/// x = 2^e · m with m in [√2/2, √2): (e, ln m).
#[inline(always)]
fn ln_parts(x: f64) -> (f64, f64) {
    // x = 2^e · m with m in [√2/2, √2): e + 1024 is the top bits of the
    // (never negative) bits of x − √2/2 + 2^62.
    let bits = x.to_bits();
    let e_biased = bits.wrapping_sub(SQRT1_2_BITS).wrapping_add(1 << 62) >> 52;
    let m = f64::from_bits(bits.wrapping_sub(e_biased << 52).wrapping_add(1024 << 52));
    // e as a double without an integer conversion: SHIFT + e_biased is
    // exact, and so is the difference.
    let e = f64::from_bits(SHIFT.to_bits().wrapping_add(e_biased)) - (SHIFT + 1024.0);
    // ln m = 2 atanh(s), s = (m−1)/(m+1), |s| ≤ 0.1716.
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let p = L9;
    let p = p * z + L8;
    let p = p * z + L7;
    let p = p * z + L6;
    let p = p * z + L5;
    let p = p * z + L4;
    let p = p * z + L3;
    let p = p * z + L2;
    let p = p * z + L1;
    let s2 = s + s;
    let ln_m = s2 + s2 * (z * p);
    (e, ln_m)
}

/// `f.exp`: e^x.
#[inline]
pub fn exp(x: f32) -> f32 {
    let y = exp_core(f64::from(x)) as f32;
    if x.is_nan() { x + x } else { y }
}

/// `f.ln`: the natural logarithm (NaN below 0, −∞ at ±0).
#[inline]
pub fn ln(x: f32) -> f32 {
    let y = ln_core(f64::from(x)) as f32;
    let y = if x == f32::INFINITY { x } else { y };
    let y = if x == 0.0 { f32::NEG_INFINITY } else { y };
    let y = if x < 0.0 { f32::NAN } else { y };
    if x.is_nan() { x + x } else { y }
}

/// `f.^`: x to the power y, with C99's special cases (Annex F.10.4.4):
/// 1 where y is ±0 or x is 1 (even for NaN), ±1 for (−1)^±∞, a negative x
/// only to an integral y (odd: negative), ±0 and ±∞ by the limits.
#[inline]
pub fn pow(x: f32, y: f32) -> f32 {
    let ax = x.abs();
    let l = log2_core(f64::from(ax));
    let l = if ax == 0.0 { f64::NEG_INFINITY } else { l };
    let l = if ax == f32::INFINITY { f64::INFINITY } else { l };
    let magnitude = exp2_core(f64::from(y) * l) as f32;
    // Whether y is an integer (±∞ counts as an even one) and odd: below
    // 2^23, adding 2^23 rounds to an integer whose last bit is y's.
    let ay = y.abs();
    let big = ay >= 8388608.0;
    let rounded = ay + 8388608.0;
    let integral = big || rounded - 8388608.0 == ay;
    let low_bit = if big { ay.to_bits() } else { rounded.to_bits() } & 1;
    let odd = integral && ay < 16777216.0 && low_bit == 1;
    let r = if odd && x.is_sign_negative() {
        -magnitude
    } else {
        magnitude
    };
    let r = if x < 0.0 && x > f32::NEG_INFINITY && !integral {
        f32::NAN
    } else {
        r
    };
    let r = if x.is_nan() || y.is_nan() { f32::NAN } else { r };
    let r = if x == -1.0 && ay == f32::INFINITY { 1.0 } else { r };
    if x == 1.0 || y == 0.0 { 1.0 } else { r }
}

/// `f.tanh`: (e^2|x| − 1)/(e^2|x| + 1) with x's sign, from an e^t − 1
/// that keeps its relative accuracy near 0.
#[inline]
pub fn tanh(x: f32) -> f32 {
    let a = f64::from(x.abs());
    let a = if a > 20.0 { 20.0 } else { a };
    let (r, scale) = reduce(a + a);
    // e^t − 1 = 2^k·(e^r − 1) + (2^k − 1), both exact to a rounding.
    let em1 = scale * expm1_poly(r) + (scale - 1.0);
    let t = (em1 / (em1 + 2.0)) as f32;
    let t = if x.is_sign_negative() { -t } else { t };
    if x.is_nan() { x + x } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same bits, NaN equal to NaN.
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn exp_special_values_and_table() {
        let cases: &[(f32, f32)] = &[
            (0.0, 1.0),
            (-0.0, 1.0),
            (1.0, std::f32::consts::E),
            (f32::INFINITY, f32::INFINITY),
            (f32::NEG_INFINITY, 0.0),
            (88.72283, 3.4027985e38),
            (88.72284, f32::INFINITY),
            (1000.0, f32::INFINITY),
            (-87.33655, 1.1754907e-38),
            (-103.0, 1e-45),
            (-103.97208, 1.4e-45),
            (-104.0, 0.0),
            (-1000.0, 0.0),
            (1e-10, 1.0),
            (-1e-8, 1.0),
            (0.5, 1.6487212),
            (-2.5, 0.082085),
            (10.0, 22026.465),
            (f32::NAN, f32::NAN),
        ];
        for &(x, want) in cases {
            assert!(same(exp(x), want), "exp({x:e}) = {:e}, not {want:e}", exp(x));
        }
    }

    #[test]
    fn ln_special_values_and_table() {
        let cases: &[(f32, f32)] = &[
            (1.0, 0.0),
            (std::f32::consts::E, 0.99999994),
            (2.0, std::f32::consts::LN_2),
            (10.0, std::f32::consts::LN_10),
            (0.5, -std::f32::consts::LN_2),
            (0.0, f32::NEG_INFINITY),
            (-0.0, f32::NEG_INFINITY),
            (-1.0, f32::NAN),
            (f32::NEG_INFINITY, f32::NAN),
            (f32::INFINITY, f32::INFINITY),
            (f32::MAX, 88.72284),
            (f32::MIN_POSITIVE, -87.33655),
            (1e-45, -103.27893),
            (1.0000001, 1.1920928e-7),
            (0.99999994, -5.9604645e-8),
            (f32::NAN, f32::NAN),
        ];
        for &(x, want) in cases {
            assert!(same(ln(x), want), "ln({x:e}) = {:e}, not {want:e}", ln(x));
        }
    }

    #[test]
    fn pow_special_values_of_c99_and_table() {
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let cases: &[(f32, f32, f32)] = &[
            (2.0, 10.0, 1024.0),
            (2.0, -1.0, 0.5),
            (-2.0, 3.0, -8.0),
            (-2.0, 2.0, 4.0),
            (-2.0, 0.5, nan),
            (-8.0, 1.0 / 3.0, nan),
            (10.0, 0.5, 3.1622777),
            (nan, 0.0, 1.0),
            (nan, -0.0, 1.0),
            (1.0, nan, 1.0),
            (1.0, inf, 1.0),
            (-1.0, inf, 1.0),
            (-1.0, -inf, 1.0),
            (-1.0, 3.0, -1.0),
            (nan, 1.0, nan),
            (2.0, nan, nan),
            (0.0, -3.0, inf),
            (-0.0, -3.0, -inf),
            (-0.0, -2.0, inf),
            (-0.0, -0.5, inf),
            (0.0, 3.0, 0.0),
            (-0.0, 3.0, -0.0),
            (-0.0, 2.0, 0.0),
            (-0.0, -inf, inf),
            (0.5, -inf, inf),
            (2.0, -inf, 0.0),
            (0.5, inf, 0.0),
            (-2.0, inf, inf),
            (-inf, -3.0, -0.0),
            (-inf, -2.0, 0.0),
            (-inf, 3.0, -inf),
            (-inf, 0.5, inf),
            (inf, -1.0, 0.0),
            (inf, 2.0, inf),
            (-3.0, 16777216.0, inf),
            (-1.0, 16777217.0, 1.0),
            (-1.0, 8388609.0, -1.0),
            (2.0, 128.0, inf),
            (2.0, -149.0, 1e-45),
            (2.0, -150.0, 0.0),
        ];
        for &(x, y, want) in cases {
            let got = pow(x, y);
            assert!(same(got, want), "pow({x:e}, {y:e}) = {got:e}, not {want:e}");
        }
    }

    #[test]
    fn tanh_special_values_and_table() {
        let cases: &[(f32, f32)] = &[
            (0.0, 0.0),
            (-0.0, -0.0),
            (1e-30, 1e-30),
            (f32::INFINITY, 1.0),
            (f32::NEG_INFINITY, -1.0),
            (100.0, 1.0),
            (0.5, 0.46211717),
            (-1.0, -0.7615942),
            (f32::NAN, f32::NAN),
        ];
        for &(x, want) in cases {
            assert!(same(tanh(x), want), "tanh({x:e}) = {:e}, not {want:e}", tanh(x));
        }
    }

    /// Against the f64 functions rounded to f32 (correctly rounded but for
    /// the rarest cases) over a sweep of each function's range.
    #[test]
    fn agrees_with_f64_rounded_on_a_sweep() {
        let mut worse = 0;
        for i in 0..200_000u32 {
            let x = f32::from_bits(i.wrapping_mul(21_467)); // all over the bit patterns
            if !same(exp(x), f64::from(x).exp() as f32) {
                worse += 1;
            }
            if !same(ln(x), f64::from(x).ln() as f32) {
                worse += 1;
            }
        }
        assert!(worse <= 2, "{worse} differ from f64 rounded");
    }
}
