//! Float printing exactly as remora-lang prints it: GHC's `show` for a
//! binary32 `Float` (core.md §4.1).
//!
//! The digits are GHC's `floatToDigits 10`: Burger and Dybvig's free-format
//! algorithm with *exclusive* rounding bounds and a tie on the last digit
//! rounded up. They are usually the shortest digits that read back as the
//! same float, but not always (`107540336.0` shows as `1.07540336e8`). The
//! arithmetic needs integers of a few hundred bits: a small unsigned bignum
//! is below.

use std::cmp::Ordering;

/// An unsigned integer as little-endian 32-bit limbs (no trailing zeros).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(n: u64) -> Big {
        let mut b = Big(vec![n as u32, (n >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn mul_small(&self, m: u32) -> Big {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let mut carry = 0u64;
        for &limb in &self.0 {
            let v = u64::from(limb) * u64::from(m) + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry > 0 {
            out.push(carry as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn pow_mul(&self, base: u32, exp: u32) -> Big {
        (0..exp).fold(self.clone(), |acc, _| acc.mul_small(base))
    }

    fn add(&self, other: &Big) -> Big {
        let n = self.0.len().max(other.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v =
                u64::from(*self.0.get(i).unwrap_or(&0)) + u64::from(*other.0.get(i).unwrap_or(&0)) + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry > 0 {
            out.push(carry as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self - other`, for `self >= other`.
    fn sub(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = i64::from(self.0[i]) - i64::from(*other.0.get(i).unwrap_or(&0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// `(self / d, self % d)` when the quotient is below 10.
    fn div_digit(&self, d: &Big) -> (u32, Big) {
        let mut q = 0;
        let mut r = self.clone();
        while r.cmp(d) != Ordering::Less {
            r = r.sub(d);
            q += 1;
        }
        (q, r)
    }
}

/// GHC's `floatToDigits 10 x` for a finite, positive `x`: the digits
/// `d1 … dn` and the exponent `e` with `x = 0.d1…dn × 10^e`.
pub fn float_to_digits(x: f32) -> (Vec<u8>, i32) {
    let bits = x.to_bits();
    let exp_field = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;
    // x = f × 2^e, with e ≥ -149 (denormals keep the lowest exponent).
    let (f, e) = if exp_field == 0 {
        (u64::from(mantissa), -149)
    } else {
        (u64::from(mantissa | 0x80_0000), exp_field - 150)
    };
    let min_exp = -149;
    let hidden = 1u64 << 23; // b^(p-1)
    let fb = Big::from_u64(f);
    let (r, s, m_up, m_dn) = if e >= 0 {
        let be = Big::from_u64(1).pow_mul(2, e as u32);
        if f == hidden {
            (
                fb.mul_small(4).pow_mul(2, e as u32),
                Big::from_u64(4),
                be.mul_small(2),
                be,
            )
        } else {
            (
                fb.mul_small(2).pow_mul(2, e as u32),
                Big::from_u64(2),
                be.clone(),
                be,
            )
        }
    } else if e > min_exp && f == hidden {
        (
            fb.mul_small(4),
            Big::from_u64(2).pow_mul(2, (-e + 1) as u32),
            Big::from_u64(2),
            Big::from_u64(1),
        )
    } else {
        (
            fb.mul_small(2),
            Big::from_u64(2).pow_mul(2, (-e) as u32),
            Big::from_u64(1),
            Big::from_u64(1),
        )
    };
    // The smallest k with r + mUp <= 10^k × s (k ≥ 0), or
    // 10^-k × (r + mUp) <= s (k < 0), from an estimate that is never above it.
    let mut k = (f64::from(x).log10().floor() as i32) - 1;
    let high = r.add(&m_up);
    loop {
        let fits = if k >= 0 {
            high.cmp(&s.pow_mul(10, k as u32)) != Ordering::Greater
        } else {
            high.pow_mul(10, (-k) as u32).cmp(&s) != Ordering::Greater
        };
        if fits {
            break;
        }
        k += 1;
    }
    let (mut rn, sn, mut up, mut dn) = if k >= 0 {
        (r, s.pow_mul(10, k as u32), m_up, m_dn)
    } else {
        let p = (-k) as u32;
        (r.pow_mul(10, p), s, m_up.pow_mul(10, p), m_dn.pow_mul(10, p))
    };
    let mut digits = Vec::new();
    loop {
        let (d, rem) = rn.mul_small(10).div_digit(&sn);
        up = up.mul_small(10);
        dn = dn.mul_small(10);
        let low = rem.cmp(&dn) == Ordering::Less;
        let high = rem.add(&up).cmp(&sn) == Ordering::Greater;
        match (low, high) {
            (true, false) => {
                digits.push(d as u8);
                break;
            }
            (false, true) => {
                digits.push(d as u8 + 1);
                break;
            }
            (true, true) => {
                let twice = rem.mul_small(2);
                digits.push(if twice.cmp(&sn) == Ordering::Less {
                    d as u8
                } else {
                    d as u8 + 1
                });
                break;
            }
            (false, false) => {
                digits.push(d as u8);
                rn = rem;
            }
        }
    }
    (digits, k)
}

/// GHC's `show` for a binary32 float: fixed notation for 0.1 ≤ |x| < 10^7,
/// exponent notation otherwise, `NaN`, `Infinity`, `-0.0`.
pub fn format_float(x: f32) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x.is_infinite() {
        return format!("{sign}Infinity");
    }
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    let (digits, e) = float_to_digits(x.abs());
    let digits: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    if (0..=7).contains(&e) {
        let e = e as usize;
        let (int, frac) = if e == 0 {
            ("0".to_string(), digits)
        } else if digits.len() <= e {
            (format!("{digits}{}", "0".repeat(e - digits.len())), String::new())
        } else {
            (digits[..e].to_string(), digits[e..].to_string())
        };
        let frac = if frac.is_empty() { "0".to_string() } else { frac };
        format!("{sign}{int}.{frac}")
    } else {
        let (first, rest) = digits.split_at(1);
        let rest = if rest.is_empty() { "0" } else { rest };
        format!("{sign}{first}.{rest}e{}", e - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::format_float;

    #[test]
    // 2237179.25 is exact in f32; its shortest digits are 2237179.2.
    #[allow(clippy::excessive_precision)]
    fn ghc_show_examples() {
        let cases: [(f32, &str); 20] = [
            (9.0, "9.0"),
            (1.5, "1.5"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (7.403221e-2, "7.403221e-2"),
            (16777216.0, "1.6777216e7"),
            (1234567.0, "1234567.0"),
            (1.0e7, "1.0e7"),
            (5.0e-2, "5.0e-2"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.3"),
            // Where GHC's digits are not the shortest (core.md §4.1).
            (-107540336.0, "-1.07540336e8"),
            (2237179.25, "2237179.3"),
            (f32::NAN, "NaN"),
            (f32::INFINITY, "Infinity"),
            (f32::NEG_INFINITY, "-Infinity"),
            (123.25, "123.25"),
            (f32::MAX, "3.4028235e38"),
            (f32::MIN_POSITIVE, "1.1754944e-38"),
            (1.0e-45, "1.0e-45"),
        ];
        for (x, want) in cases {
            assert_eq!(format_float(x), want, "{x:?}");
        }
    }

    #[test]
    fn reads_back_as_the_same_float() {
        // A deterministic walk over bit patterns (xorshift).
        let mut state: u32 = 0x9e37_79b9;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let x = f32::from_bits(state);
            if !x.is_finite() {
                continue;
            }
            let s = format_float(x);
            let back: f32 = s.parse().unwrap_or(f32::NAN);
            assert_eq!(back.to_bits(), x.to_bits(), "{s}");
        }
    }

    #[test]
    fn mostly_the_shortest_digits() {
        // GHC's digits differ from the shortest ones only on rare ties: count.
        let mut state: u32 = 0x1234_5678;
        let mut differ = 0;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let x = f32::from_bits(state & 0x7fff_ffff);
            if !x.is_finite() || x == 0.0 {
                continue;
            }
            let ours = format_float(x);
            let shortest = format!("{:e}", x);
            let digits = |s: &str| s.chars().filter(|c| c.is_ascii_digit()).count();
            if digits(&ours) > digits(&shortest) + 2 {
                differ += 1;
            }
        }
        assert!(differ < 1_000, "{differ}");
    }
}
