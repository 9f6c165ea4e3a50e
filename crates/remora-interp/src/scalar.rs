//! The scalar primitives of core.md §2.1, on whole buffers: one loop over
//! the principal frame, the operand with the shorter frame broadcast (its
//! index divided, never copied), as NumPy does.

use crate::kernel::{self, Layout};
use remora_value::Data;
use std::cell::Cell;

/// Why a primitive failed (the caller adds the position).
pub type Fault = String;

type Faulty<T> = Result<T, &'static str>;

pub fn is_scalar_primitive(name: &str) -> bool {
    arity(name).is_some()
}

/// The number of operands of a scalar primitive.
pub fn arity(name: &str) -> Option<usize> {
    Some(match name {
        "+" | "-" | "*" | "/" | "mod" | "^" | "max" | "min" | "bit-and" | "bit-or" | "bit-xor" | "shl"
        | "shr" | "f.+" | "f.-" | "f.*" | "f./" | "f.^" | "f.max" | "f.min" | "==" | "!=" | "<" | ">"
        | "<=" | ">=" | "f.==" | "f.!=" | "f.<" | "f.>" | "f.<=" | "f.>=" | "and" | "or" | "bool.=="
        | "bool.!=" | "f.atan2" | "f.mod" | "random.uniform" | "random.normal" => 2,
        "random.int" => 4,
        "not" | "bit-not" | "popc" | "sqrt" | "f.sqrt" | "f.ln" | "f.exp" | "f.tanh" | "i->f" | "i->bool"
        | "bool->i" | "bool->f" | "truncate" | "round" | "floor" | "ceiling" | "neg" | "abs" | "signum"
        | "f.neg" | "f.abs" | "f.signum" | "f.sin" | "f.cos" | "f.tan" | "f.asin" | "f.acos" | "f.atan"
        | "f.sinh" | "f.cosh" | "f.log2" | "f.log10" | "f.floor" | "f.ceiling" | "f.round" | "f.isnan" => 1,
        // Vocabulary A: (clip lo hi x).
        "clip" | "f.clip" => 3,
        _ => return None,
    })
}

/// Floor division (Haskell `div`).
fn div(a: i64, b: i64) -> Faulty<i64> {
    if b == 0 {
        return Err("divide by zero");
    }
    if a == i64::MIN && b == -1 {
        // Haskell's `div minBound (-1)` overflows.
        return Err("arithmetic overflow");
    }
    Ok(floor_div(a, b))
}

/// Floor division of a divisor that is neither 0 nor, for `i64::MIN`, -1.
#[inline(always)]
fn floor_div(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// Floor modulus by a divisor that is not 0.
#[inline(always)]
fn floor_mod(a: i64, b: i64) -> i64 {
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }
}

/// A faulting Int operation `f` over lanes of Ints' bits, `a` and `b`
/// into `out`; `None` when any lane faults. Floor division and modulus,
/// the common ones (a bisection's midpoint), run as their own loops,
/// inlined: the faults checked once over the lanes first.
pub(crate) fn faulty_lanes(
    f: fn(i64, i64) -> Faulty<i64>,
    out: &mut [u64],
    a: &[u64],
    b: &[u64],
) -> Option<()> {
    let total = |a: &[u64], b: &[u64]| {
        a.iter()
            .zip(b)
            .all(|(&x, &y)| y != 0 && !(x as i64 == i64::MIN && y as i64 == -1))
    };
    // By one power of two, a shift or a mask (floor division, floor
    // modulus: the same results).
    if let Some(&d) = b.first()
        && (d as i64) > 0
        && d.is_power_of_two()
        && b.iter().all(|&y| y == d)
    {
        let k = d.trailing_zeros();
        if std::ptr::fn_addr_eq(f, div as fn(i64, i64) -> Faulty<i64>) {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = ((x as i64) >> k) as u64;
            }
            return Some(());
        }
        if std::ptr::fn_addr_eq(f, modulo as fn(i64, i64) -> Faulty<i64>) {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = x & (d - 1);
            }
            return Some(());
        }
    }
    if std::ptr::fn_addr_eq(f, div as fn(i64, i64) -> Faulty<i64>) && total(a, b) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = floor_div(x as i64, y as i64) as u64;
        }
        return Some(());
    }
    if std::ptr::fn_addr_eq(f, modulo as fn(i64, i64) -> Faulty<i64>) && total(a, b) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = floor_mod(x as i64, y as i64) as u64;
        }
        return Some(());
    }
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x as i64, y as i64).ok()? as u64;
    }
    Some(())
}

/// Floor modulus: the sign of the divisor.
fn modulo(a: i64, b: i64) -> Faulty<i64> {
    if b == 0 {
        return Err("divide by zero");
    }
    Ok(floor_mod(a, b))
}

fn power(mut base: i64, mut exp: i64) -> Faulty<i64> {
    if exp < 0 {
        return Err("Negative exponent");
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

fn shift_left(a: i64, n: i64) -> Faulty<i64> {
    match n {
        n if n < 0 => Err("arithmetic overflow"),
        n if n >= 64 => Ok(0),
        n => Ok(a.wrapping_shl(n as u32)),
    }
}

fn shift_right(a: i64, n: i64) -> Faulty<i64> {
    match n {
        n if n < 0 => Err("arithmetic overflow"),
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
/// Floored modulus, the sign of the divisor (as Int `mod` and NumPy's
/// `mod`); by 0.0 it is NaN.
/// Floored modulus: the sign of the divisor, a zero result included (as
/// NumPy's `mod`).
fn fmod(a: f32, b: f32) -> f32 {
    let r = a % b;
    if r == 0.0 {
        0.0f32.copysign(b)
    } else if (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

pub(crate) fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a <= b {
        b
    } else {
        a
    }
}

pub(crate) fn fmin(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// The first fault of a loop, in row-major order (a fallible primitive
/// records it and yields a placeholder, so its loop stays a plain loop).
#[derive(Default)]
struct FirstFault(Cell<Option<&'static str>>);

impl FirstFault {
    fn catch<T: Default>(&self, r: Result<T, &'static str>) -> T {
        r.unwrap_or_else(|m| {
            if self.0.get().is_none() {
                self.0.set(Some(m));
            }
            T::default()
        })
    }

    fn check(&self) -> Result<(), Fault> {
        match self.0.get() {
            Some(m) => Err(m.to_string()),
            None => Ok(()),
        }
    }
}

/// `op` at every position of `shape`, each operand a buffer laid out over
/// that shape (replicated where its layout steps by 0).
pub fn apply<F: Clone>(
    name: &str,
    operands: &[(&Data<F>, &Layout)],
    shape: &[usize],
) -> Result<Data<F>, Fault> {
    // An empty operand whose atoms' kind no atom tells (the empty result
    // of a function of a type variable's elements, lifted over an empty
    // frame) is of another operand's kind; with none, so is the result.
    let untyped = |d: &Data<F>| matches!(d, Data::Atoms(a) if a.is_empty());
    if operands.iter().any(|(d, _)| untyped(d))
        && let Some((like, _)) = operands.iter().find(|(d, _)| !matches!(d, Data::Atoms(_)))
    {
        let typed: Vec<Data<F>> = operands
            .iter()
            .map(|(d, _)| {
                if untyped(d) {
                    like.empty_like()
                } else {
                    (*d).clone()
                }
            })
            .collect();
        let typed: Vec<(&Data<F>, &Layout)> = typed.iter().zip(operands).map(|(d, (_, l))| (d, *l)).collect();
        return apply(name, &typed, shape);
    }
    // (No operand tells: the empty result is of untold kind too.)
    if operands.iter().any(|(d, _)| untyped(d)) {
        return Ok(Data::Atoms(Vec::new().into()));
    }
    let faults = FirstFault::default();
    let internal = |m: &'static str| -> Fault { m.to_string() };
    macro_rules! binary {
        ($variant:ident, $out:ident, $f:expr) => {{
            let [(Data::$variant(a), la), (Data::$variant(b), lb)] = operands else {
                return Err(format!("{name}: wrong operand types"));
            };
            Data::$out(
                kernel::map2(shape, (a.as_slice(), *la), (b.as_slice(), *lb), $f)
                    .map_err(internal)?
                    .into(),
            )
        }};
    }
    macro_rules! fallible {
        ($f:expr) => {{ binary!(Int, Int, |x: i64, y: i64| faults.catch($f(x, y))) }};
    }
    let data = match name {
        "+" => binary!(Int, Int, |a: i64, b: i64| a.wrapping_add(b)),
        "-" => binary!(Int, Int, |a: i64, b: i64| a.wrapping_sub(b)),
        "*" => binary!(Int, Int, |a: i64, b: i64| a.wrapping_mul(b)),
        "/" => fallible!(div),
        "mod" => fallible!(modulo),
        "^" => fallible!(power),
        "max" => binary!(Int, Int, |a: i64, b: i64| a.max(b)),
        "min" => binary!(Int, Int, |a: i64, b: i64| a.min(b)),
        "bit-and" => binary!(Int, Int, |a: i64, b: i64| a & b),
        "bit-or" => binary!(Int, Int, |a: i64, b: i64| a | b),
        "bit-xor" => binary!(Int, Int, |a: i64, b: i64| a ^ b),
        "shl" => fallible!(shift_left),
        "shr" => fallible!(shift_right),
        "f.+" => binary!(Float, Float, |a: f32, b: f32| a + b),
        "f.-" => binary!(Float, Float, |a: f32, b: f32| a - b),
        "f.*" => binary!(Float, Float, |a: f32, b: f32| a * b),
        "f./" => binary!(Float, Float, |a: f32, b: f32| a / b),
        "f.^" => {
            let [(Data::Float(a), la), (Data::Float(b), lb)] = operands else {
                return Err(format!("{name}: wrong operand types"));
            };
            Data::Float(
                crate::powers::pow(shape, (a, la), (b, lb))
                    .map_err(internal)?
                    .into(),
            )
        }
        "f.max" => binary!(Float, Float, fmax),
        "f.min" => binary!(Float, Float, fmin),
        "f.atan2" => binary!(Float, Float, f32::atan2),
        "f.mod" => binary!(Float, Float, fmod),
        "==" => binary!(Int, Bool, |a: i64, b: i64| a == b),
        "!=" => binary!(Int, Bool, |a: i64, b: i64| a != b),
        "<" => binary!(Int, Bool, |a: i64, b: i64| a < b),
        ">" => binary!(Int, Bool, |a: i64, b: i64| a > b),
        "<=" => binary!(Int, Bool, |a: i64, b: i64| a <= b),
        ">=" => binary!(Int, Bool, |a: i64, b: i64| a >= b),
        "f.==" => binary!(Float, Bool, |a: f32, b: f32| a == b),
        "f.!=" => binary!(Float, Bool, |a: f32, b: f32| a != b),
        "f.<" => binary!(Float, Bool, |a: f32, b: f32| a < b),
        "f.>" => binary!(Float, Bool, |a: f32, b: f32| a > b),
        "f.<=" => binary!(Float, Bool, |a: f32, b: f32| a <= b),
        "f.>=" => binary!(Float, Bool, |a: f32, b: f32| a >= b),
        "and" => binary!(Bool, Bool, |a: bool, b: bool| a && b),
        "or" => binary!(Bool, Bool, |a: bool, b: bool| a || b),
        "bool.==" => binary!(Bool, Bool, |a: bool, b: bool| a == b),
        "bool.!=" => binary!(Bool, Bool, |a: bool, b: bool| a != b),
        "random.uniform" => binary!(Int, Float, crate::random::uniform),
        "random.normal" => binary!(Int, Float, crate::random::normal),
        "random.int" => {
            let [
                (Data::Int(s), ls),
                (Data::Int(i), li),
                (Data::Int(lo), llo),
                (Data::Int(hi), lhi),
            ] = operands
            else {
                return Err(format!("{name}: wrong operand types"));
            };
            let operands = [
                (s.as_slice(), *ls),
                (i.as_slice(), *li),
                (lo.as_slice(), *llo),
                (hi.as_slice(), *lhi),
            ];
            Data::Int(
                kernel::map4(shape, operands, |[s, i, lo, hi]| {
                    faults.catch(crate::random::int_in(s, i, lo, hi))
                })
                .map_err(internal)?
                .into(),
            )
        }
        "clip" | "f.clip" => clip(name, operands, shape)?,
        _ => match operands {
            [(a, la)] => unary(name, a, la, shape)?,
            _ => return Err(format!("{name}: wrong number of operands")),
        },
    };
    faults.check()?;
    Ok(data)
}

/// A binary primitive whose result has the type of its operands, computed
/// into `target` (operand 0 when `target_first`, else operand 1), which
/// already has the result's shape. `None` when the primitive does not work
/// that way (it changes the type or can fail): the caller allocates.
pub fn apply_in_place<F>(
    name: &str,
    target: &mut Data<F>,
    other: (&Data<F>, &Layout),
    target_first: bool,
    shape: &[usize],
) -> Option<Result<(), Fault>> {
    macro_rules! zip {
        ($variant:ident, $f:expr) => {{
            let (Data::$variant(t), (Data::$variant(o), lo)) = (target, other) else {
                return None;
            };
            let t = t.unique_mut()?;
            let f = $f;
            let r = if target_first {
                kernel::zip_in_place(shape, t, (o.as_slice(), lo), |x, y| f(x, y))
            } else {
                kernel::zip_in_place(shape, t, (o.as_slice(), lo), |x, y| f(y, x))
            };
            Some(r.map_err(|m| m.to_string()))
        }};
    }
    match name {
        "+" => zip!(Int, |a: i64, b: i64| a.wrapping_add(b)),
        "-" => zip!(Int, |a: i64, b: i64| a.wrapping_sub(b)),
        "*" => zip!(Int, |a: i64, b: i64| a.wrapping_mul(b)),
        "max" => zip!(Int, |a: i64, b: i64| a.max(b)),
        "min" => zip!(Int, |a: i64, b: i64| a.min(b)),
        "bit-and" => zip!(Int, |a: i64, b: i64| a & b),
        "bit-or" => zip!(Int, |a: i64, b: i64| a | b),
        "bit-xor" => zip!(Int, |a: i64, b: i64| a ^ b),
        "f.+" => zip!(Float, |a: f32, b: f32| a + b),
        "f.-" => zip!(Float, |a: f32, b: f32| a - b),
        "f.*" => zip!(Float, |a: f32, b: f32| a * b),
        "f./" => zip!(Float, |a: f32, b: f32| a / b),
        "f.^" => {
            let (Data::Float(t), (Data::Float(o), lo)) = (target, other) else {
                return None;
            };
            let t = t.unique_mut()?;
            let (pow, pow1) = (crate::fmath::pow_lanes, crate::fmath::pow);
            let o = (o.as_slice(), lo);
            let r = if target_first {
                kernel::zip_in_place_lanes(shape, t, o, (pow, pow1))
            } else {
                kernel::zip_in_place_lanes(shape, t, o, (|x, y| pow(y, x), |x, y| pow1(y, x)))
            };
            Some(r.map_err(|m| m.to_string()))
        }
        "f.max" => zip!(Float, fmax),
        "f.min" => zip!(Float, fmin),
        "and" => zip!(Bool, |a: bool, b: bool| a && b),
        "or" => zip!(Bool, |a: bool, b: bool| a || b),
        "bool.==" => zip!(Bool, |a: bool, b: bool| a == b),
        "bool.!=" => zip!(Bool, |a: bool, b: bool| a != b),
        _ => None,
    }
}

/// A scalar primitive on single atoms, for code that runs an atom at a
/// time (`cellprog`'s cell programs): the functions `apply`'s and
/// `unary`'s loops run, by kind of operands and result (`f` Float, `i`
/// Int, `b` Bool; the result last). A test checks each against `apply`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AtomOp {
    Ff(fn(f32) -> f32),
    Ii(fn(i64) -> i64),
    Bb(fn(bool) -> bool),
    If(fn(i64) -> f32),
    Fi(fn(f32) -> i64),
    Ib(fn(i64) -> bool),
    Bi(fn(bool) -> i64),
    Bf(fn(bool) -> f32),
    Fb(fn(f32) -> bool),
    Fff(fn(f32, f32) -> f32),
    Iii(fn(i64, i64) -> i64),
    /// Can fail (divide by zero …).
    IiiFaulty(fn(i64, i64) -> Faulty<i64>),
    Ffb(fn(f32, f32) -> bool),
    Iib(fn(i64, i64) -> bool),
    Bbb(fn(bool, bool) -> bool),
    Iif(fn(i64, i64) -> f32),
}

/// `name` as an [`AtomOp`] (`None` for `random.int` and `clip`, which
/// take more operands).
pub(crate) fn atom_op(name: &str) -> Option<AtomOp> {
    use AtomOp::*;
    Some(match name {
        "+" => Iii(i64::wrapping_add),
        "-" => Iii(i64::wrapping_sub),
        "*" => Iii(i64::wrapping_mul),
        "/" => IiiFaulty(div),
        "mod" => IiiFaulty(modulo),
        "^" => IiiFaulty(power),
        "max" => Iii(i64::max),
        "min" => Iii(i64::min),
        "bit-and" => Iii(|a, b| a & b),
        "bit-or" => Iii(|a, b| a | b),
        "bit-xor" => Iii(|a, b| a ^ b),
        "shl" => IiiFaulty(shift_left),
        "shr" => IiiFaulty(shift_right),
        "f.+" => Fff(|a, b| a + b),
        "f.-" => Fff(|a, b| a - b),
        "f.*" => Fff(|a, b| a * b),
        "f./" => Fff(|a, b| a / b),
        "f.^" => Fff(crate::fmath::pow),
        "f.max" => Fff(fmax),
        "f.min" => Fff(fmin),
        "f.atan2" => Fff(f32::atan2),
        "f.mod" => Fff(fmod),
        "==" => Iib(|a, b| a == b),
        "!=" => Iib(|a, b| a != b),
        "<" => Iib(|a, b| a < b),
        ">" => Iib(|a, b| a > b),
        "<=" => Iib(|a, b| a <= b),
        ">=" => Iib(|a, b| a >= b),
        "f.==" => Ffb(|a, b| a == b),
        "f.!=" => Ffb(|a, b| a != b),
        "f.<" => Ffb(|a, b| a < b),
        "f.>" => Ffb(|a, b| a > b),
        "f.<=" => Ffb(|a, b| a <= b),
        "f.>=" => Ffb(|a, b| a >= b),
        "and" => Bbb(|a, b| a && b),
        "or" => Bbb(|a, b| a || b),
        "bool.==" => Bbb(|a, b| a == b),
        "bool.!=" => Bbb(|a, b| a != b),
        "random.uniform" => Iif(crate::random::uniform),
        "random.normal" => Iif(crate::random::normal),
        "not" => Bb(|b| !b),
        "bit-not" => Ii(|x| !x),
        "popc" => Ii(|x| i64::from(x.count_ones())),
        "sqrt" | "f.sqrt" => Ff(f32::sqrt),
        "f.ln" => Ff(crate::fmath::ln),
        "f.exp" => Ff(crate::fmath::exp),
        "f.tanh" => Ff(crate::fmath::tanh),
        "i->f" => If(|x| x as f32),
        "i->bool" => Ib(|x| x != 0),
        "bool->i" => Bi(i64::from),
        "bool->f" => Bf(|b| if b { 1.0 } else { 0.0 }),
        "truncate" => Fi(|x| wrap_integral(x.trunc())),
        "round" => Fi(|x| wrap_integral(x.round_ties_even())),
        "floor" => Fi(|x| wrap_integral(x.floor())),
        "ceiling" => Fi(|x| wrap_integral(x.ceil())),
        "neg" => Ii(i64::wrapping_neg),
        "abs" => Ii(i64::wrapping_abs),
        "signum" => Ii(i64::signum),
        "f.neg" => Ff(|x| -x),
        "f.abs" => Ff(f32::abs),
        "f.signum" => Ff(|x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }),
        "f.sin" => Ff(f32::sin),
        "f.cos" => Ff(f32::cos),
        "f.tan" => Ff(f32::tan),
        "f.asin" => Ff(f32::asin),
        "f.acos" => Ff(f32::acos),
        "f.atan" => Ff(f32::atan),
        "f.sinh" => Ff(f32::sinh),
        "f.cosh" => Ff(f32::cosh),
        "f.log2" => Ff(f32::log2),
        "f.log10" => Ff(f32::log10),
        "f.floor" => Ff(f32::floor),
        "f.ceiling" => Ff(f32::ceil),
        "f.round" => Ff(f32::round_ties_even),
        "f.isnan" => Fb(f32::is_nan),
        _ => return None,
    })
}

/// `(clip lo hi x)`: `(min (max x lo) hi)` (NumPy's `clip`: `hi` when
/// `lo > hi`; `f.clip` is NaN where any operand is). Two passes.
fn clip<F>(name: &str, operands: &[(&Data<F>, &Layout)], shape: &[usize]) -> Result<Data<F>, Fault> {
    let internal = |m: &'static str| -> Fault { m.to_string() };
    let flat = Layout::contiguous(shape);
    Ok(match operands {
        [(Data::Int(lo), llo), (Data::Int(hi), lhi), (Data::Int(x), lx)] => {
            let low = kernel::map2(shape, (x.as_slice(), *lx), (lo.as_slice(), *llo), i64::max)
                .map_err(internal)?;
            Data::Int(
                kernel::map2(shape, (low.as_slice(), &flat), (hi.as_slice(), *lhi), i64::min)
                    .map_err(internal)?
                    .into(),
            )
        }
        [
            (Data::Float(lo), llo),
            (Data::Float(hi), lhi),
            (Data::Float(x), lx),
        ] => {
            let low =
                kernel::map2(shape, (x.as_slice(), *lx), (lo.as_slice(), *llo), fmax).map_err(internal)?;
            Data::Float(
                kernel::map2(shape, (low.as_slice(), &flat), (hi.as_slice(), *lhi), fmin)
                    .map_err(internal)?
                    .into(),
            )
        }
        _ => return Err(format!("{name}: wrong operand types")),
    })
}

fn unary<F>(name: &str, a: &Data<F>, la: &Layout, shape: &[usize]) -> Result<Data<F>, Fault> {
    let internal = |m: &'static str| -> Fault { m.to_string() };
    macro_rules! un {
        ($v:expr, $out:ident, $f:expr) => {
            Data::$out(
                kernel::map1(shape, $v.as_slice(), la, $f)
                    .map_err(internal)?
                    .into(),
            )
        };
    }
    // A Float function of blocks of atoms (fmath's `*_lanes`).
    macro_rules! lanes {
        ($v:expr, $f:expr, $f1:expr) => {
            Data::Float(
                kernel::map1_lanes(shape, $v.as_slice(), la, ($f, $f1))
                    .map_err(internal)?
                    .into(),
            )
        };
    }
    Ok(match (name, a) {
        ("not", Data::Bool(v)) => un!(v, Bool, |b: bool| !b),
        ("bit-not", Data::Int(v)) => un!(v, Int, |x: i64| !x),
        ("popc", Data::Int(v)) => un!(v, Int, |x: i64| i64::from(x.count_ones())),
        ("sqrt" | "f.sqrt", Data::Float(v)) => un!(v, Float, f32::sqrt),
        ("f.ln", Data::Float(v)) => lanes!(v, crate::fmath::ln_lanes, crate::fmath::ln),
        ("f.exp", Data::Float(v)) => lanes!(v, crate::fmath::exp_lanes, crate::fmath::exp),
        ("f.tanh", Data::Float(v)) => lanes!(v, crate::fmath::tanh_lanes, crate::fmath::tanh),
        ("i->f", Data::Int(v)) => un!(v, Float, |x: i64| x as f32),
        ("i->bool", Data::Int(v)) => un!(v, Bool, |x: i64| x != 0),
        ("bool->i", Data::Bool(v)) => un!(v, Int, i64::from),
        ("bool->f", Data::Bool(v)) => un!(v, Float, |b: bool| if b { 1.0 } else { 0.0 }),
        ("truncate", Data::Float(v)) => un!(v, Int, |x: f32| wrap_integral(x.trunc())),
        ("round", Data::Float(v)) => un!(v, Int, |x: f32| wrap_integral(x.round_ties_even())),
        ("floor", Data::Float(v)) => un!(v, Int, |x: f32| wrap_integral(x.floor())),
        ("ceiling", Data::Float(v)) => un!(v, Int, |x: f32| wrap_integral(x.ceil())),
        // extensions.md §4: Int negation and absolute value wrap (abs of the
        // least Int is itself, as in NumPy).
        ("neg", Data::Int(v)) => un!(v, Int, i64::wrapping_neg),
        ("abs", Data::Int(v)) => un!(v, Int, i64::wrapping_abs),
        ("signum", Data::Int(v)) => un!(v, Int, i64::signum),
        ("f.neg", Data::Float(v)) => un!(v, Float, |x: f32| -x),
        ("f.abs", Data::Float(v)) => un!(v, Float, f32::abs),
        // ±0.0 and NaN are their own sign.
        ("f.signum", Data::Float(v)) => un!(v, Float, |x: f32| if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            x
        }),
        ("f.sin", Data::Float(v)) => un!(v, Float, f32::sin),
        ("f.cos", Data::Float(v)) => un!(v, Float, f32::cos),
        ("f.tan", Data::Float(v)) => un!(v, Float, f32::tan),
        ("f.asin", Data::Float(v)) => un!(v, Float, f32::asin),
        ("f.acos", Data::Float(v)) => un!(v, Float, f32::acos),
        ("f.atan", Data::Float(v)) => un!(v, Float, f32::atan),
        ("f.sinh", Data::Float(v)) => un!(v, Float, f32::sinh),
        ("f.cosh", Data::Float(v)) => un!(v, Float, f32::cosh),
        ("f.log2", Data::Float(v)) => un!(v, Float, f32::log2),
        ("f.log10", Data::Float(v)) => un!(v, Float, f32::log10),
        ("f.floor", Data::Float(v)) => un!(v, Float, f32::floor),
        ("f.ceiling", Data::Float(v)) => un!(v, Float, f32::ceil),
        // Half to even, as `round` and NumPy's `round`.
        ("f.round", Data::Float(v)) => un!(v, Float, f32::round_ties_even),
        ("f.isnan", Data::Float(v)) => un!(v, Bool, f32::is_nan),
        _ => return Err(format!("{name}: wrong operand type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `faulty_lanes`' own loops (floor division and modulus, by a power
    /// of two or any divisor) give what the operation gives atom by atom,
    /// and fault where it faults.
    #[test]
    fn faulty_lanes_agree_with_their_operations() {
        let xs: Vec<i64> = vec![
            0,
            1,
            -1,
            7,
            -7,
            8,
            -8,
            9,
            -9,
            1023,
            -1024,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ];
        let divisors: Vec<i64> = vec![1, 2, 4, 8, 1024, 3, -1, -2, -8, 7, i64::MAX, i64::MIN];
        for f in [div as fn(i64, i64) -> Faulty<i64>, modulo, power, shift_left] {
            for &d in &divisors {
                // Every lane by the same divisor, and by a mixture.
                for mixed in [false, true] {
                    let a: Vec<u64> = xs.iter().map(|&x| x as u64).collect();
                    let b: Vec<u64> = (0..xs.len())
                        .map(|k| if mixed && k % 3 == 1 { 5 } else { d as u64 })
                        .collect();
                    let want: Option<Vec<u64>> = a
                        .iter()
                        .zip(&b)
                        .map(|(&x, &y)| f(x as i64, y as i64).ok().map(|r| r as u64))
                        .collect();
                    let mut out = vec![0; a.len()];
                    let got = faulty_lanes(f, &mut out, &a, &b).map(|()| out);
                    assert_eq!(got, want, "divisor {d}, mixed {mixed}");
                }
            }
            let (a, b) = (vec![5u64, 6], vec![2u64, 0]);
            let mut out = vec![0; 2];
            if !std::ptr::fn_addr_eq(f, power as fn(i64, i64) -> Faulty<i64>)
                && !std::ptr::fn_addr_eq(f, shift_left as fn(i64, i64) -> Faulty<i64>)
            {
                assert!(faulty_lanes(f, &mut out, &a, &b).is_none());
            }
        }
    }

    fn int2(name: &str, a: i64, b: i64) -> Result<i64, Fault> {
        let (a, b): (Data, Data) = (Data::Int(vec![a].into()), Data::Int(vec![b].into()));
        let l = Layout::contiguous(&[]);
        match apply(name, &[(&a, &l), (&b, &l)], &[])? {
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
    fn atom_ops_are_the_loops() {
        // Each primitive on single atoms gives the bits `apply` gives.
        let floats = [
            0.0f32,
            -0.0,
            1.5,
            -2.25,
            3.0,
            f32::NAN,
            f32::INFINITY,
            1.0e20,
            0.1,
        ];
        let ints = [0i64, 1, -1, 7, -17, 5, 64, i64::MIN, i64::MAX];
        let bools = [false, true];
        let l = Layout::contiguous(&[]);
        let bits = |d: &Data| -> Vec<u64> {
            match d {
                Data::Int(v) => v.iter().map(|x| *x as u64).collect(),
                Data::Float(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
                Data::Bool(v) => v.iter().map(|x| u64::from(*x)).collect(),
                _ => Vec::new(),
            }
        };
        let names = [
            "+",
            "-",
            "*",
            "/",
            "mod",
            "^",
            "max",
            "min",
            "bit-and",
            "bit-or",
            "bit-xor",
            "shl",
            "shr",
            "f.+",
            "f.-",
            "f.*",
            "f./",
            "f.^",
            "f.max",
            "f.min",
            "f.atan2",
            "f.mod",
            "==",
            "!=",
            "<",
            ">",
            "<=",
            ">=",
            "f.==",
            "f.!=",
            "f.<",
            "f.>",
            "f.<=",
            "f.>=",
            "and",
            "or",
            "bool.==",
            "bool.!=",
            "random.uniform",
            "random.normal",
            "not",
            "bit-not",
            "popc",
            "sqrt",
            "f.sqrt",
            "f.ln",
            "f.exp",
            "f.tanh",
            "i->f",
            "i->bool",
            "bool->i",
            "bool->f",
            "truncate",
            "round",
            "floor",
            "ceiling",
            "neg",
            "abs",
            "signum",
            "f.neg",
            "f.abs",
            "f.signum",
            "f.sin",
            "f.cos",
            "f.tan",
            "f.asin",
            "f.acos",
            "f.atan",
            "f.sinh",
            "f.cosh",
            "f.log2",
            "f.log10",
            "f.floor",
            "f.ceiling",
            "f.round",
            "f.isnan",
        ];
        for name in names {
            let Some(op) = atom_op(name) else {
                unreachable!("{name} has no atom op");
            };
            use AtomOp::*;
            let f = |x: f32| Data::Float(vec![x].into());
            let i = |x: i64| Data::Int(vec![x].into());
            let b = |x: bool| Data::Bool(vec![x].into());
            let (operands, got): (Vec<Vec<Data>>, Vec<Result<u64, ()>>) = match op {
                Ff(g) => floats
                    .iter()
                    .map(|&x| (vec![f(x)], Ok(u64::from(g(x).to_bits()))))
                    .unzip(),
                Ii(g) => ints.iter().map(|&x| (vec![i(x)], Ok(g(x) as u64))).unzip(),
                Bb(g) => bools.iter().map(|&x| (vec![b(x)], Ok(u64::from(g(x))))).unzip(),
                If(g) => ints
                    .iter()
                    .map(|&x| (vec![i(x)], Ok(u64::from(g(x).to_bits()))))
                    .unzip(),
                Fi(g) => floats.iter().map(|&x| (vec![f(x)], Ok(g(x) as u64))).unzip(),
                Ib(g) => ints.iter().map(|&x| (vec![i(x)], Ok(u64::from(g(x))))).unzip(),
                Bi(g) => bools.iter().map(|&x| (vec![b(x)], Ok(g(x) as u64))).unzip(),
                Bf(g) => bools
                    .iter()
                    .map(|&x| (vec![b(x)], Ok(u64::from(g(x).to_bits()))))
                    .unzip(),
                Fb(g) => floats.iter().map(|&x| (vec![f(x)], Ok(u64::from(g(x))))).unzip(),
                Fff(g) => floats
                    .iter()
                    .flat_map(|&x| floats.iter().map(move |&y| (x, y)))
                    .map(|(x, y)| (vec![f(x), f(y)], Ok(u64::from(g(x, y).to_bits()))))
                    .unzip(),
                Iii(g) => ints
                    .iter()
                    .flat_map(|&x| ints.iter().map(move |&y| (x, y)))
                    .map(|(x, y)| (vec![i(x), i(y)], Ok(g(x, y) as u64)))
                    .unzip(),
                IiiFaulty(g) => ints
                    .iter()
                    .flat_map(|&x| ints.iter().map(move |&y| (x, y)))
                    .map(|(x, y)| (vec![i(x), i(y)], g(x, y).map(|r| r as u64).map_err(|_| ())))
                    .unzip(),
                Ffb(g) => floats
                    .iter()
                    .flat_map(|&x| floats.iter().map(move |&y| (x, y)))
                    .map(|(x, y)| (vec![f(x), f(y)], Ok(u64::from(g(x, y)))))
                    .unzip(),
                Iib(g) => ints
                    .iter()
                    .flat_map(|&x| ints.iter().map(move |&y| (x, y)))
                    .map(|(x, y)| (vec![i(x), i(y)], Ok(u64::from(g(x, y)))))
                    .unzip(),
                Bbb(g) => bools
                    .iter()
                    .flat_map(|&x| bools.iter().map(move |&y| (x, y)))
                    .map(|(x, y)| (vec![b(x), b(y)], Ok(u64::from(g(x, y)))))
                    .unzip(),
                Iif(g) => ints
                    .iter()
                    .flat_map(|&x| ints.iter().map(move |&y| (x, y)))
                    .map(|(x, y)| (vec![i(x), i(y)], Ok(u64::from(g(x, y).to_bits()))))
                    .unzip(),
            };
            for (ops, got) in operands.iter().zip(got) {
                let with: Vec<(&Data, &Layout)> = ops.iter().map(|d| (d, &l)).collect();
                let want = apply(name, &with, &[]).map(|d| bits(&d)[0]).map_err(|_| ());
                assert_eq!(want, got, "{name} of {ops:?}");
            }
        }
    }

    #[test]
    fn broadcasting_divides_the_index() {
        // [10 20] + [[1 2 3] [4 5 6]]: the vector's atoms each serve 3 results.
        let (a, b): (Data, Data) = (
            Data::Int(vec![10, 20].into()),
            Data::Int(vec![1, 2, 3, 4, 5, 6].into()),
        );
        let la = Layout::prefix(&[2], &[2, 3]);
        let lb = Layout::contiguous(&[2, 3]);
        let r = apply("+", &[(&a, &la), (&b, &lb)], &[2, 3]);
        assert!(matches!(r, Ok(Data::Int(v)) if *v == vec![11, 12, 13, 24, 25, 26]));
    }
}
