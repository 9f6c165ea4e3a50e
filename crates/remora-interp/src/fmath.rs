//! Remora's own Float `exp`, `ln`, `^` (pow) and `tanh`: evaluated in f64
//! (a range reduction and a polynomial, by fused multiply-adds where
//! noted, whose error is near 2^-50 relative) and rounded once to f32, so
//! the result is the correctly rounded f32 in all but vanishingly rare
//! cases, on every machine. `exp` and `ln` give, at every one of the 2^32
//! f32 inputs, the f64 function (C's `exp`, `log`) rounded to f32 (an
//! ignored test checks it).
//!
//! The compiled engine's runtime (`remora-compile`'s `runtime.c`,
//! `rt_expf`, `rt_logf`, `rt_powf`, `rt_tanhf`) performs the same f64
//! operations in the same order (C built without contraction) on the same
//! tables and coefficients (`remora_value::fmath_tables`, which the
//! compiler writes into the C program), so both engines give the same
//! bits: change one, change the other. A fused multiply-add (`mul_add`,
//! C's `fma`) rounds once wherever it runs (an instruction, or the C
//! library's exact emulation where there is none).
//!
//! The main path has no branches (special values are chosen by selects
//! after it), and `exp`, `ln` and `tanh` no table: each vectorises whole.
//! `^` looks up tables (its log2 must stay the one it was: a result of
//! `^` depends on every bit of it); its `*_lanes` forms compute each step
//! for [`LANES`] items at once, so that the arithmetic vectorises though
//! the table lookups between the steps do not (the C compiler vectorises
//! the lookups as gathers). The `*_lanes` forms give the scalar forms'
//! bits.

use remora_value::fmath_tables::{EXP_Q, EXP2, LN_R, LOG2_C, N};

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
/// The bits of the low end of `^`'s log's reduced argument z (0.705…,
/// near √2/2). z's bits from here are N subintervals of 2^45 each; the one
/// holding 1 is centred on it (1 − 2^-9 to 1 + 2^-8).
const LN_OFF: u64 = 0x3fe6_9000_0000_0000;
/// Half a subinterval of `^`'s log's, in bits.
const LN_HALF: u64 = 1 << 44;
/// The bits of √2/2, the nearest double: `ln` reduces its argument to z
/// in [√2/2, √2).
const SQRT_HALF: u64 = 0x3fe6_a09e_667f_3bcd;

/// Taylor coefficients of exp: 1/n! for n = 3..=5 (and 1/2).
const E3: f64 = 0.16666666666666666;
const E4: f64 = 0.041666666666666664;
const E5: f64 = 0.008333333333333333;

/// Coefficients of 2 atanh(s) = 2s + 2s·(s²/3 + s⁴/5 + s⁶/7 + …).
const A1: f64 = 0.3333333333333333;
const A2: f64 = 0.2;
const A3: f64 = 0.14285714285714285;

/// Items per step of the `*_lanes` forms.
pub const LANES: usize = 64;

/// e^r − 1 for |r| ≤ ln2/2N: r + r²/2! + … + r⁵/5! (the next term is
/// below 2^-60 of the result).
#[inline(always)]
fn expm1_poly(r: f64) -> f64 {
    let r2 = r * r;
    let a = 0.5 + r * E3;
    let b = E4 + r * E5;
    r + r2 * (a + r2 * b)
}

/// The k at the low bits of `kt` (k + `SHIFT`) as the index of 2^(j/N),
/// j = k mod N, and 2^⌊k/N⌋.
#[inline(always)]
fn exp2_index(kt: f64) -> (usize, f64) {
    let k_bits = kt.to_bits().wrapping_sub(SHIFT.to_bits());
    let j = (k_bits % N as u64) as usize;
    // (⌊k/N⌋ + 1023) << 52, with k + 1023·N never negative.
    let scale_bits = (k_bits.wrapping_add(1023 * N as u64) & !(N as u64 - 1)) << 45;
    (j, f64::from_bits(scale_bits))
}

/// 2^t = 2^⌊k/N⌋ · 2^(j/N) · e^r for t = k/N + r/ln2: t clamped to [-160,
/// 130], then (k + `SHIFT`, r); r = 0 for an integral t.
#[inline(always)]
fn exp2_reduce(t: f64) -> (f64, f64) {
    let t = if t > 130.0 { 130.0 } else { t };
    let t = if t < -160.0 { -160.0 } else { t };
    let kt = t * N as f64 + SHIFT;
    let k = kt - SHIFT;
    // t − k/N is exact.
    (kt, (t - k * (1.0 / N as f64)) * LN2)
}

/// 2^(j/N) · e^r · scale from the table entry `t` = 2^(j/N).
#[inline(always)]
fn exp_finish(t: f64, r: f64, scale: f64) -> f64 {
    (t + t * expm1_poly(r)) * scale
}

/// The polynomial of `coefficients` (constant first) at `x`, by Horner's
/// rule with fused multiply-adds.
#[inline(always)]
fn horner<const D: usize>(coefficients: &[f64; D], x: f64) -> f64 {
    let mut p = coefficients[D - 1];
    for &c in coefficients[..D - 1].iter().rev() {
        p = p.mul_add(x, c);
    }
    p
}

/// e^x in f64 (NaN for NaN): x clamped to [-110, 90] (beyond which every
/// f32 result is 0 or infinite), x = k·ln2 + r with |r| ≤ ln2/2, e^x =
/// 2^k · (1 + r + r²·q(r)), q by `EXP_Q`. No table.
#[inline(always)]
fn exp_core(x: f32) -> f64 {
    let x = if x > 90.0 { 90.0 } else { x };
    let x = if x < -110.0 { -110.0 } else { x };
    let t = f64::from(x);
    let kt = t.mul_add(INV_LN2, SHIFT);
    let k = kt - SHIFT;
    let r = (-k).mul_add(LN2_LO, (-k).mul_add(LN2_HI, t));
    let scale = f64::from_bits(kt.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(1023) << 52);
    let p = (r * r).mul_add(horner(&EXP_Q, r), r);
    (1.0 + p) * scale
}

/// 2^t in f64 for t in f32's range of interest (NaN for NaN): exactly
/// 2^t for an integral t, so that `pow` of a power of 2 is exact.
#[inline(always)]
fn exp2_core(t: f64) -> f64 {
    let (kt, r) = exp2_reduce(t);
    let (j, scale) = exp2_index(kt);
    exp_finish(EXP2[j], r, scale)
}

/// x = 2^e · z, z in the log's subinterval i of centre c: (e, i, ln(z/c)), x
/// a positive normal double with 24 significant bits (an f32's value;
/// garbage otherwise: the callers choose the special values).
#[inline(always)]
fn ln_parts(x: f64) -> (f64, usize, f64) {
    let bits = x.to_bits();
    let from_off = bits.wrapping_sub(LN_OFF);
    // e + 1024: the top bits of the (never negative) from_off + 2^62.
    let e_biased = from_off.wrapping_add(1 << 62) >> 52;
    let i = ((from_off >> 45) % N as u64) as usize;
    let z_bits = bits.wrapping_sub(e_biased << 52).wrapping_add(1024 << 52);
    let z = f64::from_bits(z_bits);
    // The centre's bits are a multiple of 2^45 (so c has 8 significant
    // bits), 2^44 from the subinterval's ends.
    let c = f64::from_bits(z_bits.wrapping_add(LN_HALF) & !(2 * LN_HALF - 1));
    // e as a double without an integer conversion: SHIFT + e_biased is
    // exact, and so is the difference.
    let e = f64::from_bits(SHIFT.to_bits().wrapping_add(e_biased)) - (SHIFT + 1024.0);
    // ln(z/c) = 2 atanh(s), s = (z − c)/(z + c), |s| ≤ 2^-9: z − c and
    // z + c are exact.
    let s = (z - c) / (z + c);
    let w = s * s;
    let p = w * (A1 + w * (A2 + w * A3));
    let s2 = s + s;
    (e, i, s2 + s2 * p)
}

/// ln(x) in f64 for x a positive normal double with 24 significant bits
/// (garbage otherwise: the callers choose the special values): x = 2^e·z
/// with z in [√2/2, √2), ln z = 2 atanh(s) for s = (z − 1)/(z + 1), |s| ≤
/// 0.172, by `LN_R`. No table.
#[inline(always)]
fn ln_core(x: f64) -> f64 {
    let bits = x.to_bits();
    let from_off = bits.wrapping_sub(SQRT_HALF);
    // e + 1024, as in `ln_parts`.
    let e_biased = from_off.wrapping_add(1 << 62) >> 52;
    let z = f64::from_bits(bits.wrapping_sub(e_biased << 52).wrapping_add(1024 << 52));
    let e = f64::from_bits(SHIFT.to_bits().wrapping_add(e_biased)) - (SHIFT + 1024.0);
    let s = (z - 1.0) / (z + 1.0);
    let w = s * s;
    let s2 = s + s;
    let ln_z = (s2 * w).mul_add(horner(&LN_R, w), s2);
    e.mul_add(LN2_HI, e.mul_add(LN2_LO, ln_z))
}

/// log2(x) in f64, as `ln_finish`: exactly e for x = 2^e.
#[inline(always)]
fn log2_finish(e: f64, log2_c: f64, q: f64) -> f64 {
    e + (log2_c + q * INV_LN2)
}

/// `t` split as k·ln2 + r with k an integer and |r| ≤ ln2/2 (t clamped to
/// [-110, 90]): (r, 2^k), for `tanh`.
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

/// exp(r) − 1 for |r| ≤ ln2/2, without the leading 1 (so that `expm1`
/// keeps its relative accuracy near 0): r + r²/2! + … + r¹²/12!, for
/// `tanh`.
#[inline(always)]
fn expm1_poly12(r: f64) -> f64 {
    let p = 2.08767569878681e-09;
    let p = p * r + 2.505210838544172e-08;
    let p = p * r + 2.755731922398589e-07;
    let p = p * r + 2.7557319223985893e-06;
    let p = p * r + 2.48015873015873e-05;
    let p = p * r + 0.0001984126984126984;
    let p = p * r + 0.001388888888888889;
    let p = p * r + E5;
    let p = p * r + E4;
    let p = p * r + E3;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    p * r
}

/// `f.exp`: e^x (in the widest instructions, whose fused multiply-adds
/// are instructions).
#[inline]
pub fn exp(x: f32) -> f32 {
    widest(
        #[inline(always)]
        || exp_here(x),
    )
}

/// `exp` in the instructions of the caller.
#[inline(always)]
fn exp_here(x: f32) -> f32 {
    exp_special(x, exp_core(x))
}

/// `exp`'s f32 result from the f64 one.
#[inline(always)]
fn exp_special(x: f32, y: f64) -> f32 {
    let y = y as f32;
    if x.is_nan() { x + x } else { y }
}

/// `f.ln`: the natural logarithm (NaN below 0, −∞ at ±0), in the widest
/// instructions, as `exp`.
#[inline]
pub fn ln(x: f32) -> f32 {
    widest(
        #[inline(always)]
        || ln_here(x),
    )
}

/// `ln` in the instructions of the caller.
#[inline(always)]
fn ln_here(x: f32) -> f32 {
    ln_special(x, ln_core(f64::from(x)))
}

/// `ln`'s f32 result from the f64 one, which is garbage where x is not
/// positive and finite.
#[inline(always)]
fn ln_special(x: f32, y: f64) -> f32 {
    let y = y as f32;
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
    pow_by_log2(x, pow_log2(x), y)
}

/// log2 |x| from the f64 one, which is garbage at 0 and ∞.
#[inline(always)]
fn pow_log2_special(x: f32, l: f64) -> f64 {
    let ax = x.abs();
    let l = if ax == 0.0 { f64::NEG_INFINITY } else { l };
    if ax == f32::INFINITY { f64::INFINITY } else { l }
}

/// `pow`'s f32 result from |x|^y in f64.
#[inline(always)]
fn pow_special(x: f32, y: f32, magnitude: f64) -> f32 {
    let magnitude = magnitude as f32;
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
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = f64::from(x.abs());
    let a = if a > 20.0 { 20.0 } else { a };
    let (r, scale) = reduce(a + a);
    // e^t − 1 = 2^k·(e^r − 1) + (2^k − 1), both exact to a rounding.
    let em1 = scale * expm1_poly12(r) + (scale - 1.0);
    let t = (em1 / (em1 + 2.0)) as f32;
    let t = if x.is_sign_negative() { -t } else { t };
    if x.is_nan() { x + x } else { t }
}

/// `tanh` of each of `xs` (no table: every step vectorises).
pub fn tanh_lanes(xs: [f32; LANES]) -> [f32; LANES] {
    widest(
        #[inline(always)]
        || {
            let mut out = [0.0; LANES];
            for l in 0..LANES {
                out[l] = tanh(xs[l]);
            }
            out
        },
    )
}

/// `step` compiled for the widest vector instructions this machine has
/// (AVX-512, else AVX2, chosen when it runs), so that the lane loops of
/// an `#[inline(always)]` step vectorise 8 or 4 doubles wide instead of
/// SSE2's 2. The same operations in the same order, without contraction
/// into fused multiply-adds (Rust never contracts), so the same bits.
#[inline(always)]
pub(crate) fn widest<R>(step: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(step)
}

/// For each lane's reduced argument `kt`: its table entry 2^(j/N) and
/// its power-of-two scale (one lookup a lane).
#[inline(always)]
fn exp2_table_lanes(kt: &[f64; LANES]) -> ([f64; LANES], [f64; LANES]) {
    let mut t = [0.0; LANES];
    let mut scale = [0.0; LANES];
    for l in 0..LANES {
        let j;
        (j, scale[l]) = exp2_index(kt[l]);
        t[l] = EXP2[j];
    }
    (t, scale)
}

/// `exp` of each of `xs`.
pub fn exp_lanes(xs: [f32; LANES]) -> [f32; LANES] {
    widest(
        #[inline(always)]
        || exp_lanes_here(xs),
    )
}

/// `exp_lanes` in the instructions of the caller.
#[inline(always)]
fn exp_lanes_here(xs: [f32; LANES]) -> [f32; LANES] {
    let mut out = [0.0; LANES];
    for l in 0..LANES {
        out[l] = exp_here(xs[l]);
    }
    out
}

/// `ln` of each of `xs`.
pub fn ln_lanes(xs: [f32; LANES]) -> [f32; LANES] {
    widest(
        #[inline(always)]
        || ln_lanes_here(xs),
    )
}

/// `ln_lanes` in the instructions of the caller.
#[inline(always)]
fn ln_lanes_here(xs: [f32; LANES]) -> [f32; LANES] {
    let mut out = [0.0; LANES];
    for l in 0..LANES {
        out[l] = ln_here(xs[l]);
    }
    out
}

/// `pow` of each pair of `xs` and `ys`.
pub fn pow_lanes(xs: [f32; LANES], ys: [f32; LANES]) -> [f32; LANES] {
    widest(
        #[inline(always)]
        || pow_by_log2_lanes_here(xs, pow_log2_lanes_here(xs), ys),
    )
}

/// log2 |x| as `pow` takes it (−∞ at 0, ∞ at ∞): the part of `x^y` that
/// depends on x alone, for a base raised to many exponents.
#[inline]
pub fn pow_log2(x: f32) -> f64 {
    let (e, i, q) = ln_parts(f64::from(x.abs()));
    pow_log2_special(x, log2_finish(e, LOG2_C[i], q))
}

/// `pow` from the base's `pow_log2`, `l`: `pow(x, y)` is
/// `pow_by_log2(x, pow_log2(x), y)`.
#[inline]
pub fn pow_by_log2(x: f32, l: f64, y: f32) -> f32 {
    pow_special(x, y, exp2_core(f64::from(y) * l))
}

/// `pow_log2` of each of `xs`.
pub fn pow_log2_lanes(xs: [f32; LANES]) -> [f64; LANES] {
    widest(
        #[inline(always)]
        || pow_log2_lanes_here(xs),
    )
}

/// `pow_by_log2` of each base, its log and exponent.
pub fn pow_by_log2_lanes(xs: [f32; LANES], lg: [f64; LANES], ys: [f32; LANES]) -> [f32; LANES] {
    widest(
        #[inline(always)]
        || pow_by_log2_lanes_here(xs, lg, ys),
    )
}

/// `pow_log2_lanes` in the instructions of the caller.
#[inline(always)]
pub(crate) fn pow_log2_lanes_here(xs: [f32; LANES]) -> [f64; LANES] {
    let mut e = [0.0; LANES];
    let mut i = [0; LANES];
    let mut q = [0.0; LANES];
    for l in 0..LANES {
        (e[l], i[l], q[l]) = ln_parts(f64::from(xs[l].abs()));
    }
    let mut log2_c = [0.0; LANES];
    for l in 0..LANES {
        log2_c[l] = LOG2_C[i[l]];
    }
    let mut lg = [0.0; LANES];
    for l in 0..LANES {
        lg[l] = pow_log2_special(xs[l], log2_finish(e[l], log2_c[l], q[l]));
    }
    lg
}

/// `pow_by_log2` of each lane, in the instructions of the caller.
#[inline(always)]
pub(crate) fn pow_by_log2_lanes_here(xs: [f32; LANES], lg: [f64; LANES], ys: [f32; LANES]) -> [f32; LANES] {
    pow_by_log2_lanes_by(xs, lg, |l| ys[l])
}

/// `pow_by_log2_lanes_here` with lane `l`'s exponent `y(l)` (one exponent
/// for every lane, in a row of a table of powers: what depends on it alone
/// is worked out once).
#[inline(always)]
pub(crate) fn pow_by_log2_lanes_by(
    xs: [f32; LANES],
    lg: [f64; LANES],
    y: impl Fn(usize) -> f32,
) -> [f32; LANES] {
    let mut kt = [0.0; LANES];
    let mut r = [0.0; LANES];
    for l in 0..LANES {
        (kt[l], r[l]) = exp2_reduce(f64::from(y(l)) * lg[l]);
    }
    let (t, scale) = exp2_table_lanes(&kt);
    let mut out = [0.0; LANES];
    for l in 0..LANES {
        out[l] = pow_special(xs[l], y(l), exp_finish(t[l], r[l], scale[l]));
    }
    out
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

    /// Within a double's ulp of `want` (the f64 functions are within one
    /// ulp; the tables are the nearest doubles).
    fn near(got: f64, want: f64) -> bool {
        got == want || (got - want).abs() <= f64::EPSILON * want.abs()
    }

    #[test]
    fn the_tables_hold_their_functions() {
        for (j, &t) in EXP2.iter().enumerate() {
            assert!(near(t, (j as f64 / N as f64).exp2()), "EXP2[{j}] = {t:e}");
        }
        for (i, &l) in LOG2_C.iter().enumerate() {
            // The centre of the log's subinterval i, as `ln_parts` computes it.
            let c = f64::from_bits(LN_OFF + LN_HALF + (i as u64) * 2 * LN_HALF);
            assert!(near(l, c.log2()), "LOG2_C[{i}] = {l:e}");
        }
        assert_eq!(LOG2_C[75], 0.0, "the subinterval holding 1 is centred on it");
    }

    /// The polynomials hold their functions: e^r and ln z at their
    /// reductions' ends and within, to 2^-49 relative.
    #[test]
    fn the_polynomials_hold_their_functions() {
        for i in -100..=100 {
            let r = f64::from(i) / 100.0 * LN2 / 2.0;
            let e = 1.0 + r + r * r * horner(&EXP_Q, r);
            assert!((e - r.exp()).abs() <= r.exp() * 2f64.powi(-49), "e^{r:e}");
            let z = std::f64::consts::FRAC_1_SQRT_2 * 2f64.powf(f64::from(i + 100) / 200.0);
            let s = (z - 1.0) / (z + 1.0);
            let ln_z = 2.0 * s + 2.0 * s * s * s * horner(&LN_R, s * s);
            assert!((ln_z - z.ln()).abs() <= z.ln().abs() * 2f64.powi(-49), "ln {z:e}");
        }
    }

    /// The `*_lanes` forms give the scalar forms' bits.
    #[test]
    fn lanes_are_the_scalar_functions() {
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            2.0,
            0.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-45,
            f32::MAX,
        ];
        let xs: Vec<f32> = (0..40_000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(107_374)))
            .chain(specials)
            .collect();
        for (n, block) in xs.chunks(LANES).enumerate() {
            let mut x = [0.0; LANES];
            x[..block.len()].copy_from_slice(block);
            let mut y = x;
            y.rotate_left(n % LANES);
            let (e, l, p) = (exp_lanes(x), ln_lanes(x), pow_lanes(x, y));
            let t = tanh_lanes(x);
            let logs = pow_log2_lanes(x);
            let p2 = pow_by_log2_lanes(x, logs, y);
            for k in 0..LANES {
                assert!(same(p2[k], p[k]), "pow_by_log2_lanes at {:e}, {:e}", x[k], y[k]);
                assert!(same(e[k], exp(x[k])), "exp_lanes at {:e}", x[k]);
                assert!(same(l[k], ln(x[k])), "ln_lanes at {:e}", x[k]);
                assert!(same(t[k], tanh(x[k])), "tanh_lanes at {:e}", x[k]);
                assert!(same(p[k], pow(x[k], y[k])), "pow_lanes at {:e}, {:e}", x[k], y[k]);
            }
        }
    }

    /// Every f32 through `exp_lanes`, `ln_lanes` and `tanh_lanes` (vectorised for this
    /// machine's widest instructions) gives the scalar functions' bits,
    /// and `pow_lanes` every f32 base to a spread of exponents. Minutes in
    /// a debug build: `cargo test --release -p remora-interp -- --ignored`.
    #[test]
    #[ignore = "exhaustive: run in release"]
    fn every_f32_through_the_lanes_is_the_scalar_function() {
        let ys = [2.0, -1.0, 0.5, 3.0, -2.5, 7.0, 1e-3, 100.0];
        let mut x = [0.0f32; LANES];
        let mut bad = 0u64;
        for block in 0..(1u64 << 32) / LANES as u64 {
            for (l, slot) in x.iter_mut().enumerate() {
                *slot = f32::from_bits((block * LANES as u64 + l as u64) as u32);
            }
            let (e, g, t) = (exp_lanes(x), ln_lanes(x), tanh_lanes(x));
            let y = [ys[(block % ys.len() as u64) as usize]; LANES];
            let p = pow_lanes(x, y);
            for k in 0..LANES {
                let ok = same(e[k], exp(x[k]))
                    && same(g[k], ln(x[k]))
                    && same(t[k], tanh(x[k]))
                    && same(p[k], pow(x[k], y[k]));
                bad += u64::from(!ok);
            }
        }
        assert_eq!(bad, 0, "lanes that differ from the scalar functions");
    }

    /// `exp` and `ln` against the f64 functions rounded to f32, which they
    /// equal at every f32 (the ignored test below), over a sweep of the bit
    /// patterns and densely where their polynomials are least accurate and
    /// where the results are hardest to round.
    #[test]
    fn agrees_with_f64_rounded_on_a_sweep() {
        let sweep = (0..400_000u32).map(|i| f32::from_bits(i.wrapping_mul(10_733)));
        // Every f32 of [0.99, 1.01] (ln's results nearest 0), then near
        // odd multiples of ln2/2 (the ends of exp's reduction).
        let near_one = (0.99f32.to_bits()..=1.01f32.to_bits()).map(f32::from_bits);
        let ends = (-200..200).flat_map(|k| {
            let t = (f64::from(k) + 0.5) * std::f64::consts::LN_2;
            let b = (t as f32).to_bits();
            (b - 50..b + 50).map(f32::from_bits)
        });
        // Inputs whose e^x is among the nearest to an f32 rounding boundary
        // (where a degree-7 q, 2^-43.5, rounded the other way).
        let hard = [
            0x3e77_7fec,
            0x3e78_e1cd,
            0x3ebf_4a81,
            0x3f5b_c24c,
            0x401b_6c99,
            0x412b_7bb4,
            0x4288_942b,
            0x4296_75e7,
            0xbe5f_667d,
            0xbea6_154c,
            0xbfbf_a14b,
            0xc01a_001d,
        ]
        .map(f32::from_bits);
        for x in sweep.chain(near_one).chain(ends).chain(hard) {
            assert!(same(exp(x), f64::from(x).exp() as f32), "exp({x:e})");
            assert!(same(ln(x), f64::from(x).ln() as f32), "ln({x:e})");
        }
    }

    /// Every f32 through `exp` and `ln` is the f64 function (the C
    /// library's `exp`, `log`) rounded to f32, as the former table methods
    /// were, so that no result changed. Minutes in release: `cargo test
    /// --release -p remora-interp -- --ignored every_f32`.
    #[test]
    #[ignore = "exhaustive: run in release"]
    fn every_f32_exp_and_ln_is_the_f64_function_rounded() {
        let mut x = [0.0f32; LANES];
        let mut bad = 0u64;
        for block in 0..(1u64 << 32) / LANES as u64 {
            for (l, slot) in x.iter_mut().enumerate() {
                *slot = f32::from_bits((block * LANES as u64 + l as u64) as u32);
            }
            let (e, g) = (exp_lanes(x), ln_lanes(x));
            for k in 0..LANES {
                let want = (f64::from(x[k]).exp() as f32, f64::from(x[k]).ln() as f32);
                bad += u64::from(!same(e[k], want.0)) + u64::from(!same(g[k], want.1));
            }
        }
        assert_eq!(bad, 0, "results that differ from the f64 function rounded");
    }
}
