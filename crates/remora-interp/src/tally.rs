//! Comparisons counted against many keys: `(count (op xs k))`, with `op` a
//! comparison (`==`, `<`, `f.>=` …), inside a batch where `xs` is the same
//! for every cell and the key `k` one number per cell — a histogram written
//! as "for each bin, how many items are in it", or a rank written as "how
//! many items are below it". Evaluated as written that is the whole
//! `[keys, items]` comparison matrix, built and then reduced; here `xs` is
//! counted once (a table of how many items are below each value, for Ints
//! of a small range; a sorted copy otherwise) and each key looks its count
//! up: `O(items + keys)` work instead of `O(items × keys)`, and no matrix.
//!
//! The counts are exact, so the result is the reference path's. Every
//! other case (the items differ from cell to cell, the key is not a scalar,
//! the comparison is lifted further) runs the comparison and the count as
//! written, on the operands already evaluated.

use crate::batch::{Batched, Try};
use crate::eval::{Env, Interpreter, atoms_in};
use remora_check::typed::{TExpr, TExprKind};
use remora_value::{Array, Data};

/// Fewer keys than this are counted by comparing (the matrix is small).
const MIN_KEYS: usize = 4;

impl<'p> Interpreter {
    /// `e` evaluated in the batch frame when it has the form
    /// `(count (op a b))` (`None` when it has not: nothing is evaluated).
    pub(crate) fn tally(&mut self, e: &'p TExpr, env: &Env<'p>) -> Option<Try<Batched<'p>>> {
        let (head, spine) = e.spine();
        if intrinsic_name(head)? != "count" {
            return None;
        }
        let [(cmp, counted)] = spine.as_slice() else {
            return None;
        };
        let (op_head, operands) = cmp.spine();
        let op = intrinsic_name(op_head)?;
        comparison(op)?;
        let [(x, xl), (y, yl)] = operands.as_slice() else {
            return None;
        };
        Some(self.tally_operands(head, op_head, op, (x, xl), (y, yl), counted, e, env))
    }

    #[allow(clippy::too_many_arguments)]
    fn tally_operands(
        &mut self,
        count: &'p TExpr,
        op_head: &'p TExpr,
        op: &'static str,
        (x, xl): (&'p TExpr, &remora_types::Lifted),
        (y, yl): (&'p TExpr, &remora_types::Lifted),
        counted: &remora_types::Lifted,
        e: &'p TExpr,
        env: &Env<'p>,
    ) -> Try<Batched<'p>> {
        let a = self.eval_batched(x, env)?;
        let b = self.eval_batched(y, env)?;
        let cell = self.shape_of(&counted.arg_cell, env, e.span).ok()?;
        if let Some(r) = self.tally_counts(op, &a, &b, &cell) {
            return Some(r);
        }
        // As written: the comparison, then the count.
        let acell = self.shape_of(&xl.arg_cell, env, x.span).ok()?;
        let bcell = self.shape_of(&yl.arg_cell, env, y.span).ok()?;
        let f = self.eval_batched(op_head, env)?;
        self.at = e.span;
        let compared = self.apply_batched(&f, vec![(a, acell), (b, bcell)])?;
        let c = self.eval_batched(count, env)?;
        self.apply_batched(&c, vec![(compared, cell)])
    }

    /// The counts by table or by sorted copy, when the operands suit: one
    /// of them the whole counted cell and the same in every cell of the
    /// batch, the other a scalar per position of the batch.
    fn tally_counts(
        &mut self,
        op: &str,
        a: &Batched<'p>,
        b: &Batched<'p>,
        cell: &[usize],
    ) -> Try<Batched<'p>> {
        let suits = |items: &Batched<'p>, keys: &Batched<'p>| {
            items.nb == 0 && items.own() == cell && keys.nb > 0 && keys.own().is_empty()
        };
        let (items, keys, op) = if suits(a, b) {
            (a, b, comparison(op)?)
        } else if suits(b, a) {
            (b, a, comparison(op)?.flipped())
        } else {
            return None;
        };
        let key_shape: Vec<usize> = self.batch.get(..keys.nb)?.to_vec();
        let key_count = atoms_in(&key_shape);
        if key_count < MIN_KEYS {
            return None;
        }
        let items = items.densify()?;
        let keys = keys.densify()?;
        let n = atoms_in(cell);
        let counts: Vec<i64> = match (&items.v.data, &keys.v.data) {
            (Data::Int(xs), Data::Int(ks)) => {
                let xs = xs.get(items.offset..items.offset + n)?;
                let ks = ks.get(keys.offset..keys.offset + key_count)?;
                let table = IntTable::new(xs)?;
                ks.iter().map(|&k| table.count(op, k)).collect()
            }
            (Data::Float(xs), Data::Float(ks)) => {
                let xs = xs.get(items.offset..items.offset + n)?;
                let ks = ks.get(keys.offset..keys.offset + key_count)?;
                let sorted = crate::sort::sort_floats(xs).ok()?;
                ks.iter().map(|&k| float_count(&sorted, n, op, k)).collect()
            }
            _ => return None,
        };
        Some(Batched::dense(
            Array {
                shape: key_shape,
                data: Data::Int(counts.into()),
            },
            keys.nb,
        ))
    }
}

/// The intrinsic's name, under any type and index applications.
pub(crate) fn intrinsic_name(e: &TExpr) -> Option<&'static str> {
    let mut e = e;
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &e.kind {
        e = func;
    }
    match e.kind {
        TExprKind::Intrinsic(name) => Some(name),
        _ => None,
    }
}

/// A comparison `item OP key`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    /// `a OP b`, as the scalar primitive computes it (IEEE for Floats: a
    /// NaN is unordered).
    #[inline(always)]
    pub(crate) fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }

    /// `key OP item` as `item OP' key`.
    pub(crate) fn flipped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            c => c,
        }
    }

    /// The count from how many items are below the key (`lt`), at most
    /// the key (`le`), and how many are ordered at all (`ordered`, the
    /// items less the NaNs) of `n`.
    fn counted(self, lt: usize, le: usize, ordered: usize, n: usize) -> usize {
        match self {
            Cmp::Eq => le - lt,
            Cmp::Ne => n - (le - lt),
            Cmp::Lt => lt,
            Cmp::Le => le,
            Cmp::Gt => ordered - le,
            Cmp::Ge => ordered - lt,
        }
    }
}

pub(crate) fn comparison(name: &str) -> Option<Cmp> {
    Some(match name {
        "==" | "f.==" => Cmp::Eq,
        "!=" | "f.!=" => Cmp::Ne,
        "<" | "f.<" => Cmp::Lt,
        "<=" | "f.<=" => Cmp::Le,
        ">" | "f.>" => Cmp::Gt,
        ">=" | "f.>=" => Cmp::Ge,
        _ => return None,
    })
}

/// Ints counted: for a small range, how many items lie below each value of
/// it (one pass to count, one prefix sum); otherwise a sorted copy.
enum IntTable {
    /// `below[j]`: the items less than `low + j` (`j` up to the range + 1).
    Range {
        low: i64,
        below: Vec<usize>,
    },
    Sorted(Vec<i64>),
}

impl IntTable {
    fn new(xs: &[i64]) -> Option<IntTable> {
        let Some(&first) = xs.first() else {
            return Some(IntTable::Range {
                low: 0,
                below: vec![0],
            });
        };
        // A table no larger than the items (or 64 Ki entries); a wider
        // range is found out as soon as it shows.
        let limit = xs.len().max(1 << 16) as u64;
        let (mut low, mut high) = (first, first);
        let mut span = Some(0);
        for &x in xs {
            low = low.min(x);
            high = high.max(x);
            if high.abs_diff(low) > limit {
                span = None;
                break;
            }
        }
        let span = span.map(|_| high.abs_diff(low) as usize);
        match span {
            Some(span) => {
                let mut below = crate::kernel::buffer(span + 2).ok()?;
                below.resize(span + 2, 0usize);
                for &x in xs {
                    // (x - low ≤ span, checked above.)
                    below[(x - low) as usize + 1] += 1;
                }
                for j in 1..below.len() {
                    below[j] += below[j - 1];
                }
                Some(IntTable::Range { low, below })
            }
            _ => Some(IntTable::Sorted(crate::sort::sort_ints(xs).ok()?)),
        }
    }

    /// How many items stand in relation `op` to `k`.
    fn count(&self, op: Cmp, k: i64) -> i64 {
        let (lt, le, n) = match self {
            IntTable::Range { low, below } => {
                let top = below.len() - 1;
                let at = |v: i128| -> usize {
                    let j = (v - i128::from(*low)).clamp(0, top as i128);
                    below[j as usize]
                };
                (at(i128::from(k)), at(i128::from(k) + 1), below[top])
            }
            IntTable::Sorted(s) => (
                s.partition_point(|&x| x < k),
                s.partition_point(|&x| x <= k),
                s.len(),
            ),
        };
        op.counted(lt, le, n, n) as i64
    }
}

/// How many of the `n` items (`sorted`: those that are not NaN, ascending)
/// stand in relation `op` to `k`. A NaN compares false with everything,
/// `!=` true.
fn float_count(sorted: &[f32], n: usize, op: Cmp, k: f32) -> i64 {
    let count = if k.is_nan() {
        if op == Cmp::Ne { n } else { 0 }
    } else {
        let lt = sorted.partition_point(|&x| x < k);
        let le = sorted.partition_point(|&x| x <= k);
        op.counted(lt, le, sorted.len(), n)
    };
    count as i64
}
