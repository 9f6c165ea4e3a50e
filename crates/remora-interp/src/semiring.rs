//! `(reduce op (pair x y))` over operands replicated along different axes
//! — `op` a minimum, a maximum or an Int sum, `pair` a scalar primitive:
//! the (min, +) product of tropical algebra, a row against every column
//! by `outer`, a lambda of a row and a column lifted over both — as a
//! matrix product whose multiply is `pair` and whose add is `op`: each
//! result a fold over its items, the `[m n k]` pairs never made.
//!
//! Each fold runs along its items in order, as `reduce` folds them (left
//! to right from the first item: the same choice among equals, `f.min`
//! keeping the first and `f.max` the last, and `f32::NAN` where an item
//! is NaN and there are at least two), so the bits are the reference's.
//! A row's folds run side by side along its columns (a block of
//! `COLUMNS` at a time, which stays in cache while every item is folded
//! in, and vectorises), the columns' factor laid out `[k n]` once when it
//! does not lie so; rows are shared among the threads.

use crate::contract::Matrices;
use crate::matmul::Strided;
use crate::scalar::{fmax, fmin};

/// The folds and pairs this runs (others: `None`, evaluated as written).
/// Float `f.+` folds are `contract.rs`'s (a tree, and only of products).
pub(crate) fn supports(op: &str, pair: &str) -> bool {
    matches!(
        (op, pair),
        (
            "f.min" | "f.max",
            "f.+" | "f.-" | "f.*" | "f./" | "f.min" | "f.max"
        ) | ("min" | "max" | "+", "+" | "-" | "*" | "min" | "max")
    )
}

/// The scalar primitives `pair` may be (see [`supports`]).
pub(crate) const PAIRS: [&str; 11] = [
    "f.+", "f.-", "f.*", "f./", "f.min", "f.max", "+", "-", "*", "min", "max",
];

/// `reduce op` of `pair` applied to `a` and `b` (each its atoms from its
/// offset, and its steps over `shape`, `[outer …, items]`), along the
/// last axis: one result per outer position, row-major. `None` when the
/// operands are not rows against columns (replicated on complementary
/// axes), or the types do not suit.
pub(crate) fn folds_of_pairs<'p>(
    op: &str,
    pair: &str,
    a: (&remora_value::Data<crate::eval::Fun<'p>>, usize, &[usize]),
    b: (&remora_value::Data<crate::eval::Fun<'p>>, usize, &[usize]),
    shape: &[usize],
) -> Option<remora_value::Data<crate::eval::Fun<'p>>> {
    use remora_value::Data;
    let items_at = shape.len().checked_sub(1)?;
    let k = shape[items_at];
    if k == 0 || (0..items_at).any(|i| shape[i] == 0) {
        // (No item to start from: `reduce`'s error, or no fold at all.)
        return None;
    }
    let mx = Matrices::of(shape, items_at, a.2, b.2)?;
    // Each fold and pair its own loop (closures the compiler inlines).
    macro_rules! by_pair {
        ($x:expr, $y:expr, $fold:expr, $finish:expr, $($name:literal => $pair:expr),* $(,)?) => {
            match pair {
                $($name => products(&mx, ($x, $y), Fold { pair: $pair, fold: $fold, finish: $finish }),)*
                _ => None,
            }
        };
    }
    if let (Data::Float(x), Data::Float(y)) = (a.0, b.0) {
        let (x, y) = (x.get(a.1..)?, y.get(b.1..)?);
        // Over two items or more, a NaN anywhere is the fold's NaN.
        let finish = move |acc: f32| if acc.is_nan() && k > 1 { f32::NAN } else { acc };
        macro_rules! float_pairs {
            ($fold:expr) => {
                by_pair!(x, y, $fold, finish,
                    "f.+" => |a: f32, b: f32| a + b,
                    "f.-" => |a: f32, b: f32| a - b,
                    "f.*" => |a: f32, b: f32| a * b,
                    "f./" => |a: f32, b: f32| a / b,
                    "f.min" => fmin,
                    "f.max" => fmax,
                )
            };
        }
        let out = match op {
            // Where `fmin` keeps its first operand and `fmax` takes its
            // second; a NaN kept (and made `f32::NAN` at the end).
            "f.min" => float_pairs!(|acc: f32, v: f32| if v < acc || v.is_nan() { v } else { acc }),
            "f.max" => float_pairs!(|acc: f32, v: f32| if v >= acc || v.is_nan() { v } else { acc }),
            _ => None,
        }?;
        return Some(Data::Float(out.into()));
    }
    let (Data::Int(x), Data::Int(y)) = (a.0, b.0) else {
        return None;
    };
    let (x, y) = (x.get(a.1..)?, y.get(b.1..)?);
    macro_rules! int_pairs {
        ($fold:expr) => {
            by_pair!(x, y, $fold, |v: i64| v,
                "+" => i64::wrapping_add,
                "-" => i64::wrapping_sub,
                "*" => i64::wrapping_mul,
                "min" => i64::min,
                "max" => i64::max,
            )
        };
    }
    let out = match op {
        "min" => int_pairs!(i64::min),
        "max" => int_pairs!(i64::max),
        "+" => int_pairs!(i64::wrapping_add),
        _ => None,
    }?;
    Some(Data::Int(out.into()))
}

/// The operations of one kind of product: `fold(acc, pair(row, column))`
/// item by item, `finish` on each result.
#[derive(Clone, Copy)]
struct Fold<P, A, F> {
    pair: P,
    fold: A,
    finish: F,
}

/// Columns folded side by side at a time.
const COLUMNS: usize = 512;

/// Work (pairs made) from which rows are shared among the threads.
const PARALLEL_PAIRS: usize = 1 << 20;

/// Every product of the frame (`mx`), one after another.
fn products<T, P, A, F>(mx: &Matrices, (x, y): (&[T], &[T]), f: Fold<P, A, F>) -> Option<Vec<T>>
where
    T: Copy + Default + Send + Sync,
    P: Fn(T, T) -> T + Copy + Sync,
    A: Fn(T, T) -> T + Copy + Sync,
    F: Fn(T) -> T + Copy + Sync,
{
    let (m, k, n) = (mx.m, mx.k, mx.n);
    let (rows, cols) = if mx.rows_are_a { (x, y) } else { (y, x) };
    let mut out = crate::kernel::buffer(mx.positions().checked_mul(m)?.checked_mul(n)?).ok()?;
    for (base_rows, base_cols) in mx.bases() {
        let (r, c) = mx.at(rows, cols, base_rows, base_cols);
        let start = out.len();
        out.resize(start + m * n, T::default());
        let here = out.get_mut(start..)?;
        if mx.rows_are_a {
            product(r, c, [m, k, n], f, here)?;
        } else {
            // The rows are the second operand's: each pair the other way.
            let pair = f.pair;
            let swapped = Fold {
                pair: move |t: T, u: T| pair(u, t),
                fold: f.fold,
                finish: f.finish,
            };
            product(r, c, [m, k, n], swapped, here)?;
        }
    }
    Some(out)
}

/// `out[i, j] = finish(fold over l of pair(r[i, l], c[l, j]))`, each fold
/// from its first pair, for `r` `[m k]` and `c` `[k n]` read through their
/// steps (`c` laid out `[k n]` first unless its columns lie one after
/// another), `k ≥ 1`.
fn product<T, P, A, F>(
    r: Strided<'_, T>,
    c: Strided<'_, T>,
    [m, k, n]: [usize; 3],
    f: Fold<P, A, F>,
    out: &mut [T],
) -> Option<()>
where
    T: Copy + Send + Sync,
    P: Fn(T, T) -> T + Copy + Sync,
    A: Fn(T, T) -> T + Copy + Sync,
    F: Fn(T) -> T + Copy + Sync,
{
    if !r.holds(m, k) || !c.holds(k, n) || k == 0 || out.len() != m * n {
        return None;
    }
    // Each item's columns: from `first + l·step`, one after another.
    let packed;
    let (columns, first, step) = if c.col == 1 || n == 1 {
        (c.data, c.offset, c.row)
    } else {
        let mut laid = crate::kernel::buffer(k.checked_mul(n)?).ok()?;
        for l in 0..k {
            c.row_into(l, 0, n, &mut laid).ok()?;
        }
        packed = laid;
        (packed.as_slice(), 0, n)
    };
    let Fold { pair, fold, finish } = f;
    let rows = |i0: usize, out: &mut [T]| -> bool {
        for (i, row) in (i0..).zip(out.chunks_exact_mut(n)) {
            let at = r.offset + i * r.row;
            for j0 in (0..n).step_by(COLUMNS) {
                let w = COLUMNS.min(n - j0);
                let sums = &mut row[j0..j0 + w];
                let x = r.data[at];
                let line = &columns[first + j0..first + j0 + w];
                for (s, &y) in sums.iter_mut().zip(line) {
                    *s = pair(x, y);
                }
                for l in 1..k {
                    let x = r.data[at + l * r.col];
                    let from = first + l * step + j0;
                    let line = &columns[from..from + w];
                    for (s, &y) in sums.iter_mut().zip(line) {
                        *s = fold(*s, pair(x, y));
                    }
                }
                for s in sums {
                    *s = finish(*s);
                }
            }
        }
        true
    };
    crate::rows_in_parallel(
        out,
        n,
        m.saturating_mul(n).saturating_mul(k),
        PARALLEL_PAIRS,
        rows,
    )
    .then_some(())
}
