//! A fold that keeps the index of the best item so far:
//! `(fold (fn ((b Int) (j Int)) (select (OP (index r j) (index r b)) j b)) b0 js)`
//! (either operand order, `if` for `select`, `nth` for `index`, the
//! branches either way round, any comparison), `r` a vector the step reads
//! from outside — an argmax (`f.>`: the first greatest) or argmin written
//! as a loop. Lifted over a frame, the step would run once per item over
//! every cell (two gathers, a comparison and a choice, each an array); here
//! each cell's fold is one native loop over its items that keeps the best
//! item's value beside its index (`r` never changes), taking exactly the
//! steps the reference takes — the same comparisons of the same numbers,
//! so the same index, NaNs included. An index out of range, or any other
//! form, runs the fold as written (which reports the error).

use crate::batch::{Batched, Try};
use crate::eval::{Fun, Interpreter, atoms_in};
use crate::tally::{Cmp, comparison, intrinsic_name};
use remora_check::typed::{TAtomKind, TExpr, TExprKind, VarId};
use remora_value::{Array, Atom, Data};

/// Cells at least this many items in all are shared among the threads.
const PARALLEL_STEPS: usize = 1 << 18;

/// The step, as "take item `j` when `cmp(r[j], r[b]) == take_if`".
#[derive(Clone, Copy)]
struct Step {
    cmp: Cmp,
    take_if: bool,
    array: VarId,
}

/// Which parameter of the step an expression is (`true`: the item).
fn which(e: &TExpr, best: VarId, item: VarId) -> Option<bool> {
    match e.kind {
        TExprKind::Var(v) if v == best => Some(false),
        TExprKind::Var(v) if v == item => Some(true),
        _ => None,
    }
}

/// `(index r X)` or `(nth r X)`: `r`'s variable and whether `X` is the item.
fn read_of(e: &TExpr, best: VarId, item: VarId) -> Option<(VarId, bool)> {
    let (head, spine) = e.spine();
    if !matches!(intrinsic_name(head)?, "index" | "nth") {
        return None;
    }
    let [(array, _), (at, _)] = spine.as_slice() else {
        return None;
    };
    match array.kind {
        TExprKind::Var(r) if r != best && r != item => Some((r, which(at, best, item)?)),
        _ => None,
    }
}

/// The step's form, if it is one this rule runs.
fn step_of(body: &TExpr, best: VarId, item: VarId) -> Option<Step> {
    let (cond, then, otherwise) = match &body.kind {
        TExprKind::If {
            cond,
            then,
            otherwise,
        } => (&**cond, &**then, &**otherwise),
        _ => {
            let (head, spine) = body.spine();
            match (intrinsic_name(head)?, spine.as_slice()) {
                ("select", [(c, _), (t, _), (o, _)]) => (*c, *t, *o),
                _ => return None,
            }
        }
    };
    let (then, otherwise) = (which(then, best, item)?, which(otherwise, best, item)?);
    if then == otherwise {
        return None;
    }
    let (head, spine) = cond.spine();
    let cmp = comparison(intrinsic_name(head)?)?;
    let [(left, _), (right, _)] = spine.as_slice() else {
        return None;
    };
    let ((r, left), (s, right)) = (read_of(left, best, item)?, read_of(right, best, item)?);
    if r != s || left == right {
        return None;
    }
    Some(Step {
        // As `cmp(r[j], r[b])`.
        cmp: if left { cmp } else { cmp.flipped() },
        take_if: then,
        array: r,
    })
}

/// The parameters and body of a lambda of two parameters.
fn two_params<'p>(fun: &Fun<'p>) -> Option<(VarId, VarId, &'p TExpr)> {
    let Fun::Lambda { param, body, .. } = fun else {
        return None;
    };
    let TExprKind::Array { shape, atoms } = &body.kind else {
        return None;
    };
    match (shape.as_slice(), atoms.as_slice()) {
        ([], [a]) => match &a.kind {
            TAtomKind::Lambda { param: item, body } => Some((*param, *item, body)),
            _ => None,
        },
        _ => None,
    }
}

/// A value's cells at each position of a batch: dense over its positions,
/// or one cell for every position (`shared`).
#[derive(Clone, Copy)]
struct Cells<'a, T> {
    data: &'a [T],
    size: usize,
    shared: bool,
}

impl<'a, T> Cells<'a, T> {
    fn at(self, pos: usize) -> Option<&'a [T]> {
        let start = if self.shared { 0 } else { pos * self.size };
        self.data.get(start..start + self.size)
    }
}

/// A value dense over `nb` batch axes (`true`), or its one cell.
type PerPosition<'p> = (Batched<'p>, bool);

impl<'p> Interpreter {
    fn per_position(&self, b: &Batched<'p>, nb: usize) -> Try<PerPosition<'p>> {
        if b.nb == 0 {
            return Some((b.densify()?, true));
        }
        Some((self.expand(b, nb)?.densify()?, false))
    }

    /// `fold` by an arg-best step (see the module comment) over scalar Int
    /// items from an Int seed, each cell's fold one loop.
    pub(crate) fn fold_arg_best(
        &mut self,
        op: &Batched<'p>,
        (seed, seed_cell): &(Batched<'p>, Vec<usize>),
        xs: &Batched<'p>,
        xcell: &[usize],
    ) -> Try<Batched<'p>> {
        if op.nb != 0 || !op.v.shape.is_empty() || !seed_cell.is_empty() || !seed.own().is_empty() {
            return None;
        }
        let fun = match &op.v.data {
            Data::Atoms(atoms) => match atoms.get(op.offset)? {
                Atom::Fun(fun) => fun,
                _ => return None,
            },
            _ => return None,
        };
        let (best, item, body) = two_params(fun)?;
        let step = step_of(body, best, item)?;
        let Fun::Lambda { env, .. } = fun else {
            return None;
        };
        let r = env.lookup_batched(step.array)?;
        let (&[n], &[m]) = (r.own(), xcell) else {
            return None;
        };
        if xs.own() != xcell {
            return None;
        }
        let nb = r.nb.max(seed.nb).max(xs.nb);
        let positions = atoms_in(self.batch.get(..nb)?);
        let (r, seed, xs) = (
            self.per_position(&r, nb)?,
            self.per_position(seed, nb)?,
            self.per_position(xs, nb)?,
        );
        let (Data::Int(seeds), Data::Int(items)) = (&seed.0.v.data, &xs.0.v.data) else {
            return None;
        };
        let seeds = Cells {
            data: seeds,
            size: 1,
            shared: seed.1,
        };
        let items = Cells {
            data: items,
            size: m,
            shared: xs.1,
        };
        // Items 0 … n-1 from 0, the first strictly greater (less) taken:
        // a vectorised arg-extreme of each row.
        let iota = xs.1 && m == n && items.data.iter().take(m).copied().eq(0..m as i64);
        let greatest = match (step.cmp, step.take_if) {
            (Cmp::Gt, true) => Some(true),
            (Cmp::Lt, true) => Some(false),
            _ => None,
        };
        let fast = greatest.filter(|_| iota);
        let mut out = crate::kernel::buffer(positions).ok()?;
        out.resize(positions, 0i64);
        let steps = positions.saturating_mul(m);
        let ok = match &r.0.v.data {
            Data::Float(row) => best_of_rows(&mut out, (row, n, r.1), seeds, items, step, fast, steps),
            Data::Int(row) => best_of_rows(&mut out, (row, n, r.1), seeds, items, step, fast, steps),
            _ => return None,
        };
        if !ok {
            return None;
        }
        let shape = self.batch.get(..nb)?.to_vec();
        Some(Batched::dense(
            Array {
                shape,
                data: Data::Int(out.into()),
            },
            nb,
        ))
    }
}

/// Each position's best index into `out` (the rows `n` items each, or one
/// row for every position), the positions shared among the threads when
/// the steps are many; false when one has none (an index out of range).
/// `fast`: items 0 … n-1, each row's arg-extreme (greatest or not) from 0.
fn best_of_rows<T: Copy + PartialOrd + Sync>(
    out: &mut [i64],
    (row, n, shared): (&[T], usize, bool),
    seeds: Cells<'_, i64>,
    items: Cells<'_, i64>,
    step: Step,
    fast: Option<bool>,
    steps: usize,
) -> bool {
    let rows = Cells {
        data: row,
        size: n,
        shared,
    };
    let best = |pos: usize| -> Option<i64> {
        let (row, seed, items) = (rows.at(pos)?, *seeds.at(pos)?.first()?, items.at(pos)?);
        match fast {
            Some(greatest) if seed == 0 && n > 0 => {
                Some(crate::vocab::arg_extreme_by(row, greatest, false) as i64)
            }
            _ => best_index(row, seed, items, step),
        }
    };
    crate::rows_in_parallel(out, 1, steps, PARALLEL_STEPS, |first, o| {
        for (k, o) in o.iter_mut().enumerate() {
            match best(first + k) {
                Some(b) => *o = b,
                None => return false,
            }
        }
        true
    })
}

/// One cell's fold: from `seed`, each item `j` taken when
/// `cmp(row[j], row[b]) == take_if`; `None` when an index is out of range.
fn best_index<T: Copy + PartialOrd>(row: &[T], seed: i64, items: &[i64], step: Step) -> Option<i64> {
    macro_rules! scan {
        ($take:expr) => {{
            if items.is_empty() {
                return Some(seed);
            }
            let mut b = usize::try_from(seed).ok()?;
            let mut vb = *row.get(b)?;
            for &j in items {
                let j = usize::try_from(j).ok()?;
                let vj = *row.get(j)?;
                if $take(vj, vb) {
                    b = j;
                    vb = vj;
                }
            }
            Some(b as i64)
        }};
    }
    match (step.cmp, step.take_if) {
        (Cmp::Gt, true) => scan!(|x: T, y: T| x > y),
        (Cmp::Lt, true) => scan!(|x: T, y: T| x < y),
        (Cmp::Ge, true) => scan!(|x: T, y: T| x >= y),
        (Cmp::Le, true) => scan!(|x: T, y: T| x <= y),
        (cmp, take_if) => scan!(|x: T, y: T| cmp.holds(x, y) == take_if),
    }
}
