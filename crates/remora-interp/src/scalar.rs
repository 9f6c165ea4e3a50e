//! The scalar primitives of core.md §2.1, on whole buffers: one loop over
//! the principal frame, the operand with the shorter frame broadcast (its
//! index divided, never copied), as NumPy does.

use remora_value::Data;

/// Why a primitive failed (the caller adds the position).
pub type Fault = String;

pub fn is_scalar_primitive(name: &str) -> bool {
    arity(name).is_some()
}

/// The number of operands of a scalar primitive.
pub fn arity(name: &str) -> Option<usize> {
    Some(match name {
        "+" | "-" | "*" | "/" | "mod" | "^" | "max" | "min" | "bit-and" | "bit-or" | "bit-xor" | "shl"
        | "shr" | "f.+" | "f.-" | "f.*" | "f./" | "f.^" | "f.max" | "f.min" | "==" | "!=" | "<" | ">"
        | "<=" | ">=" | "f.==" | "f.!=" | "f.<" | "f.>" | "f.<=" | "f.>=" | "and" | "or" | "bool.=="
        | "bool.!=" => 2,
        "not" | "bit-not" | "popc" | "sqrt" | "f.sqrt" | "f.ln" | "f.exp" | "f.tanh" | "i->f" | "i->bool"
        | "bool->i" | "bool->f" | "truncate" | "round" | "floor" | "ceiling" => 1,
        _ => return None,
    })
}

/// Floor division (Haskell `div`).
fn div(a: i64, b: i64) -> Result<i64, Fault> {
    if b == 0 {
        return Err("divide by zero".into());
    }
    if a == i64::MIN && b == -1 {
        // Haskell's `div minBound (-1)` overflows.
        return Err("arithmetic overflow".into());
    }
    let q = a / b;
    Ok(if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Floor modulus: the sign of the divisor.
fn modulo(a: i64, b: i64) -> Result<i64, Fault> {
    if b == 0 {
        return Err("divide by zero".into());
    }
    let r = a.wrapping_rem(b);
    Ok(if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r })
}

fn power(mut base: i64, mut exp: i64) -> Result<i64, Fault> {
    if exp < 0 {
        return Err("Negative exponent".into());
    }
    let mut acc: i64 = 1;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    Ok(acc)
}

fn shift_left(a: i64, n: i64) -> Result<i64, Fault> {
    match n {
        n if n < 0 => Err("arithmetic overflow".into()),
        n if n >= 64 => Ok(0),
        n => Ok(a.wrapping_shl(n as u32)),
    }
}

fn shift_right(a: i64, n: i64) -> Result<i64, Fault> {
    match n {
        n if n < 0 => Err("arithmetic overflow".into()),
        n if n >= 64 => Ok(if a < 0 { -1 } else { 0 }),
        n => Ok(a >> n),
    }
}

/// An f32 converted to Int through an unbounded integer, wrapping at 64
/// bits (core.md §2.1: `(truncate 1.0e20)` is 7766281635539976192). The
/// value must already be integral; NaN and infinities give 0.
fn wrap_integral(x: f32) -> i64 {
    if !x.is_finite() {
        return 0;
    }
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32;
    if exp == 0 {
        return 0; // zero or a denormal, integral only as 0
    }
    let mantissa = i64::from((bits & 0x7f_ffff) | 0x80_0000);
    let shift = exp - 150;
    let magnitude = if shift >= 64 {
        0
    } else if shift >= 0 {
        mantissa.wrapping_shl(shift as u32)
    } else {
        mantissa >> (-shift).min(63)
    };
    if x < 0.0 {
        magnitude.wrapping_neg()
    } else {
        magnitude
    }
}

/// Haskell's `max`/`min` as remora-lang has them, with core.md §6 (7)'s
/// fix: NaN if either operand is NaN.
fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a <= b {
        b
    } else {
        a
    }
}

fn fmin(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// `op` on operands whose buffers hold `n` results' worth of atoms after
/// broadcasting: operand `k` has `counts[k]` atoms, each used for
/// `n / counts[k]` consecutive results.
pub fn apply<F>(name: &str, operands: &[&Data<F>], n: usize) -> Result<Data<F>, Fault> {
    let idx = |k: usize, i: usize| -> usize {
        let len = operands[k].len();
        n.checked_div(len).and_then(|per| i.checked_div(per)).unwrap_or(0)
    };
    macro_rules! ints2 {
        ($f:expr) => {{
            let (Data::Int(a), Data::Int(b)) = (operands[0], operands[1]) else {
                return Err(format!("{name}: operands are not Int"));
            };
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                out.push($f(a[idx(0, i)], b[idx(1, i)])?);
            }
            out
        }};
    }
    macro_rules! floats2 {
        ($f:expr) => {{
            let (Data::Float(a), Data::Float(b)) = (operands[0], operands[1]) else {
                return Err(format!("{name}: operands are not Float"));
            };
            (0..n).map(|i| $f(a[idx(0, i)], b[idx(1, i)])).collect::<Vec<_>>()
        }};
    }
    macro_rules! bools2 {
        ($f:expr) => {{
            let (Data::Bool(a), Data::Bool(b)) = (operands[0], operands[1]) else {
                return Err(format!("{name}: operands are not Bool"));
            };
            (0..n).map(|i| $f(a[idx(0, i)], b[idx(1, i)])).collect::<Vec<_>>()
        }};
    }
    let ok = |x: i64| -> Result<i64, Fault> { Ok(x) };
    Ok(match name {
        "+" => Data::Int(ints2!(|a: i64, b: i64| ok(a.wrapping_add(b)))),
        "-" => Data::Int(ints2!(|a: i64, b: i64| ok(a.wrapping_sub(b)))),
        "*" => Data::Int(ints2!(|a: i64, b: i64| ok(a.wrapping_mul(b)))),
        "/" => Data::Int(ints2!(div)),
        "mod" => Data::Int(ints2!(modulo)),
        "^" => Data::Int(ints2!(power)),
        "max" => Data::Int(ints2!(|a: i64, b: i64| ok(a.max(b)))),
        "min" => Data::Int(ints2!(|a: i64, b: i64| ok(a.min(b)))),
        "bit-and" => Data::Int(ints2!(|a: i64, b: i64| ok(a & b))),
        "bit-or" => Data::Int(ints2!(|a: i64, b: i64| ok(a | b))),
        "bit-xor" => Data::Int(ints2!(|a: i64, b: i64| ok(a ^ b))),
        "shl" => Data::Int(ints2!(shift_left)),
        "shr" => Data::Int(ints2!(shift_right)),
        "f.+" => Data::Float(floats2!(|a: f32, b: f32| a + b)),
        "f.-" => Data::Float(floats2!(|a: f32, b: f32| a - b)),
        "f.*" => Data::Float(floats2!(|a: f32, b: f32| a * b)),
        "f./" => Data::Float(floats2!(|a: f32, b: f32| a / b)),
        "f.^" => Data::Float(floats2!(|a: f32, b: f32| a.powf(b))),
        "f.max" => Data::Float(floats2!(fmax)),
        "f.min" => Data::Float(floats2!(fmin)),
        "==" | "!=" | "<" | ">" | "<=" | ">=" => {
            let (Data::Int(a), Data::Int(b)) = (operands[0], operands[1]) else {
                return Err(format!("{name}: operands are not Int"));
            };
            let cmp: fn(&i64, &i64) -> bool = match name {
                "==" => i64::eq,
                "!=" => i64::ne,
                "<" => i64::lt,
                ">" => i64::gt,
                "<=" => i64::le,
                _ => i64::ge,
            };
            Data::Bool((0..n).map(|i| cmp(&a[idx(0, i)], &b[idx(1, i)])).collect())
        }
        "f.==" | "f.!=" | "f.<" | "f.>" | "f.<=" | "f.>=" => {
            let (Data::Float(a), Data::Float(b)) = (operands[0], operands[1]) else {
                return Err(format!("{name}: operands are not Float"));
            };
            let cmp: fn(&f32, &f32) -> bool = match name {
                "f.==" => f32::eq,
                "f.!=" => f32::ne,
                "f.<" => f32::lt,
                "f.>" => f32::gt,
                "f.<=" => f32::le,
                _ => f32::ge,
            };
            Data::Bool((0..n).map(|i| cmp(&a[idx(0, i)], &b[idx(1, i)])).collect())
        }
        "and" => Data::Bool(bools2!(|a: bool, b: bool| a && b)),
        "or" => Data::Bool(bools2!(|a: bool, b: bool| a || b)),
        "bool.==" => Data::Bool(bools2!(|a: bool, b: bool| a == b)),
        "bool.!=" => Data::Bool(bools2!(|a: bool, b: bool| a != b)),
        _ => unary(name, operands[0], n)?,
    })
}

fn unary<F>(name: &str, a: &Data<F>, _n: usize) -> Result<Data<F>, Fault> {
    let wrong = || format!("{name}: wrong operand type");
    Ok(match (name, a) {
        ("not", Data::Bool(v)) => Data::Bool(v.iter().map(|b| !b).collect()),
        ("bit-not", Data::Int(v)) => Data::Int(v.iter().map(|x| !x).collect()),
        ("popc", Data::Int(v)) => Data::Int(v.iter().map(|x| i64::from(x.count_ones())).collect()),
        ("sqrt" | "f.sqrt", Data::Float(v)) => Data::Float(v.iter().map(|x| x.sqrt()).collect()),
        ("f.ln", Data::Float(v)) => Data::Float(v.iter().map(|x| x.ln()).collect()),
        ("f.exp", Data::Float(v)) => Data::Float(v.iter().map(|x| x.exp()).collect()),
        ("f.tanh", Data::Float(v)) => Data::Float(v.iter().map(|x| x.tanh()).collect()),
        ("i->f", Data::Int(v)) => Data::Float(v.iter().map(|x| *x as f32).collect()),
        ("i->bool", Data::Int(v)) => Data::Bool(v.iter().map(|x| *x != 0).collect()),
        ("bool->i", Data::Bool(v)) => Data::Int(v.iter().map(|b| i64::from(*b)).collect()),
        ("bool->f", Data::Bool(v)) => Data::Float(v.iter().map(|b| if *b { 1.0 } else { 0.0 }).collect()),
        ("truncate", Data::Float(v)) => Data::Int(v.iter().map(|x| wrap_integral(x.trunc())).collect()),
        ("round", Data::Float(v)) => {
            Data::Int(v.iter().map(|x| wrap_integral(x.round_ties_even())).collect())
        }
        ("floor", Data::Float(v)) => Data::Int(v.iter().map(|x| wrap_integral(x.floor())).collect()),
        ("ceiling", Data::Float(v)) => Data::Int(v.iter().map(|x| wrap_integral(x.ceil())).collect()),
        _ => return Err(wrong()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int2(name: &str, a: i64, b: i64) -> Result<i64, Fault> {
        let (a, b): (Data, Data) = (Data::Int(vec![a]), Data::Int(vec![b]));
        match apply(name, &[&a, &b], 1)? {
            Data::Int(v) => Ok(v[0]),
            _ => Err("not Int".into()),
        }
    }

    #[test]
    fn integer_edge_cases_of_core_md() {
        assert_eq!(int2("*", 9223372036854775807, 2), Ok(-2));
        assert_eq!(int2("/", -17, 5), Ok(-4));
        assert_eq!(int2("/", -7, 2), Ok(-4));
        assert_eq!(int2("mod", -17, 5), Ok(3));
        assert_eq!(int2("mod", -7, 2), Ok(1));
        assert!(int2("/", 1, 0).is_err());
        assert_eq!(int2("^", 3, 40), Ok(-6289078614652622815));
        assert_eq!(int2("^", 0, 0), Ok(1));
        assert!(int2("^", 2, -1).is_err());
        assert_eq!(int2("shl", 1, 63), Ok(-9223372036854775808));
        assert!(int2("/", i64::MIN, -1).is_err());
        assert_eq!(int2("mod", i64::MIN, -1), Ok(0));
        assert_eq!(int2("shl", 1, 64), Ok(0));
        assert_eq!(int2("shr", -8, 70), Ok(-1));
        assert!(int2("shl", 1, -1).is_err());
    }

    #[test]
    fn conversions() {
        assert_eq!(wrap_integral(1.0e20), 7766281635539976192);
        assert_eq!(wrap_integral((-2.7f32).trunc()), -2);
        assert_eq!(wrap_integral(2.5f32.round_ties_even()), 2);
        assert_eq!(wrap_integral(3.5f32.round_ties_even()), 4);
        assert_eq!(wrap_integral((-2.5f32).round_ties_even()), -2);
        assert_eq!(wrap_integral((-2.5f32).floor()), -3);
        assert_eq!(16777217i64 as f32, 16777216.0);
        assert!(fmax(1.0, f32::NAN).is_nan() && fmax(f32::NAN, 1.0).is_nan());
    }

    #[test]
    fn broadcasting_divides_the_index() {
        // [10 20] + [[1 2 3] [4 5 6]]: the vector's atoms each serve 3 results.
        let (a, b): (Data, Data) = (Data::Int(vec![10, 20]), Data::Int(vec![1, 2, 3, 4, 5, 6]));
        let r = apply("+", &[&a, &b], 6);
        assert!(matches!(r, Ok(Data::Int(v)) if v == vec![11, 12, 13, 24, 25, 26]));
    }
}
