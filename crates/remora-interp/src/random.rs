//! Reproducible random numbers for `random.uniform`, `random.normal` and
//! `random.int`: pure functions of a seed and a counter, built on the
//! counter-based generator Philox4x32-10 (Salmon, Moraes, Dror and Shaw,
//! "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the Random123
//! library). Nothing is stateful, so every position of a lifted
//! application computes its own value, and the results are the same on
//! every engine, in every order and on any number of threads.
//!
//! The mapping, which `docs/prelude.md` states for other engines:
//!
//! * key = the seed's 64 bits, low word first: `(seed mod 2^32, seed >> 32)`;
//! * counter = `(i mod 2^32, i >> 32, draw, tag)`: the counter `i`'s 64
//!   bits, low word first; `draw` is 0 except for `random.int`'s
//!   rejections; `tag` is 0 for `random.uniform`, 1 for `random.normal`, 2
//!   for `random.int`, so that the three never share bits;
//! * the result is the block `(x0, x1, x2, x3)` of four 32-bit words.

/// Philox4x32's multipliers and Weyl key increments (Random123).
const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32-10: ten rounds over the counter, the key bumped between
/// rounds.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for round in 0..10 {
        if round > 0 {
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        let p0 = u64::from(M0) * u64::from(c0);
        let p1 = u64::from(M1) * u64::from(c2);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0);
    }
    [c0, c1, c2, c3]
}

/// Which distribution a block is for (the counter's last word).
const UNIFORM: u32 = 0;
const NORMAL: u32 = 1;
const INT: u32 = 2;

/// The block of `(seed, i)` for the distribution `tag`, draw `draw`.
fn block(seed: i64, i: i64, draw: u32, tag: u32) -> [u32; 4] {
    let (s, i) = (seed as u64, i as u64);
    philox4x32_10(
        [i as u32, (i >> 32) as u32, draw, tag],
        [s as u32, (s >> 32) as u32],
    )
}

/// A Float in [0, 1): the top 24 bits of the first word times 2^-24 (every
/// multiple of 2^-24 below 1 equally likely; exact in binary32).
pub fn uniform(seed: i64, i: i64) -> f32 {
    let [x0, ..] = block(seed, i, 0, UNIFORM);
    (x0 >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// A standard normal Float by the Box–Muller transform of the first two
/// words: `u1 = (x0 + 1) · 2^-32` in (0, 1], `u2 = x1 · 2^-32` in [0, 1),
/// `sqrt(-2 ln u1) · cos(2π u2)`, computed in binary64 and rounded to
/// binary32 (so |z| ≤ 6.66).
pub fn normal(seed: i64, i: i64) -> f32 {
    let [x0, x1, ..] = block(seed, i, 0, NORMAL);
    let scale = 1.0 / 4_294_967_296.0;
    let u1 = (f64::from(x0) + 1.0) * scale;
    let u2 = f64::from(x1) * scale;
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// An Int in [lo, hi), every one equally likely (no bias): Lemire's
/// multiply-and-shift of a 64-bit candidate by the range, rejecting the
/// candidates that would make it uneven. Each block gives two candidates,
/// `x0 + 2^32 x1` then `x2 + 2^32 x3`; the next block (draw 1, 2 …) is
/// used only when both are rejected (for a range of r, with probability
/// below (r / 2^64)^2). An empty range is an error.
pub fn int_in(seed: i64, i: i64, lo: i64, hi: i64) -> Result<i64, &'static str> {
    if hi <= lo {
        return Err("random.int: the range [lo, hi) is empty");
    }
    let range = hi.wrapping_sub(lo) as u64;
    // 2^64 mod range: the candidates whose low product falls below it
    // are the uneven ones.
    let uneven = range.wrapping_neg() % range;
    let mut last = 0u64;
    for draw in 0..=u32::MAX {
        let [x0, x1, x2, x3] = block(seed, i, draw, INT);
        for candidate in [
            u64::from(x0) | (u64::from(x1) << 32),
            u64::from(x2) | (u64::from(x3) << 32),
        ] {
            let product = u128::from(candidate) * u128::from(range);
            last = (product >> 64) as u64;
            if (product as u64) >= uneven {
                return Ok(lo.wrapping_add(last as i64));
            }
        }
    }
    // (Not reached: 2^33 rejections in a row.)
    Ok(lo.wrapping_add(last as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's published known-answer vectors for Philox4x32-10
    /// (its `tests/kat_vectors`): counter, key, result.
    #[test]
    fn philox_known_answers() {
        let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0; 4],
                [0; 2],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (counter, key, want) in cases {
            assert_eq!(philox4x32_10(counter, key), want);
        }
    }

    #[test]
    fn the_mapping_to_the_generator() {
        // Seed 0, counter 0, uniform: Philox of all zeros, whose first
        // word is 0x6627e8d5, so 0x6627e8 · 2^-24.
        assert_eq!(uniform(0, 0), 0x66_27e8 as f32 / 16_777_216.0);
        // The seed's and the counter's words, low first.
        let seed = 0x299f_31d0_a409_3822_i64;
        let i = 0x85a3_08d3_243f_6a88_u64 as i64;
        assert_eq!(block(seed, i, 0x1319_8a2e, 0x0370_7344)[0], 0xd16c_fe09);
    }

    #[test]
    fn uniform_is_in_the_unit_interval() {
        for i in 0..10_000 {
            let u = uniform(7, i);
            assert!((0.0..1.0).contains(&u));
        }
        let mean = (0..100_000).map(|i| f64::from(uniform(1, i))).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
    }

    #[test]
    fn normal_has_mean_0_and_variance_1() {
        let n = 100_000;
        let zs: Vec<f64> = (0..n).map(|i| f64::from(normal(3, i))).collect();
        let mean = zs.iter().sum::<f64>() / n as f64;
        let var = zs.iter().map(|z| (z - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
        assert!(zs.iter().all(|z| z.is_finite() && z.abs() < 6.7));
    }

    #[test]
    fn ints_cover_their_range_evenly() {
        let mut counts = [0usize; 6];
        for i in 0..60_000 {
            let k = int_in(5, i, -2, 4);
            assert!(matches!(k, Ok(-2..=3)), "{k:?}");
            counts[(k.unwrap_or(0) + 2) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
        assert_eq!(int_in(5, 0, 3, 4), Ok(3));
        assert!(int_in(5, 0, 3, 3).is_err());
        // The whole Int range but one, and ranges wider than i64::MAX.
        let wide = int_in(9, 1, i64::MIN, i64::MAX);
        assert!(wide.is_ok_and(|k| k < i64::MAX));
        assert!(int_in(9, 2, -1, i64::MAX).is_ok_and(|k| k >= -1));
    }
}
