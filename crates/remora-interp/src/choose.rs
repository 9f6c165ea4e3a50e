//! `select` read in place: each operand that lies contiguously in its
//! buffer (from an offset: a `curtail`, a `tail`, a row) or is one atom
//! replicated over the result (a scalar choice, `(select keep xs -1)`) is
//! read where it is, instead of being laid out over the whole result
//! first. Only the result is written.

use crate::batch::Batched;
use crate::eval::{Fun, atoms_in};
use crate::kernel::row_major;
use remora_value::Data;

/// An operand's atoms over the result: from `at` on, one per position, or
/// the atom at `at` everywhere.
#[derive(Clone, Copy)]
struct Reading {
    at: usize,
    replicated: bool,
}

impl Reading {
    fn of(b: &Batched<'_>, cell: usize, nb: usize, outer: usize, shape: &[usize]) -> Option<Reading> {
        let steps = b.steps_over(cell, nb, outer, shape)?;
        let n = atoms_in(shape);
        if steps.iter().all(|&s| s == 0) {
            return (b.offset < b.v.data.len()).then_some(Reading {
                at: b.offset,
                replicated: true,
            });
        }
        let dense = row_major(shape);
        let contiguous = shape
            .iter()
            .zip(steps.iter().zip(&dense))
            .all(|(&d, (s, r))| d <= 1 || s == r);
        (contiguous && b.offset.checked_add(n)? <= b.v.data.len()).then_some(Reading {
            at: b.offset,
            replicated: false,
        })
    }

    /// The operand's atoms for `n` positions: a run of its buffer, or its
    /// one atom.
    fn atoms<T: Clone>(self, v: &[T], n: usize) -> Option<Atoms<'_, T>> {
        Some(if self.replicated {
            Atoms::One(v.get(self.at)?.clone())
        } else {
            Atoms::Run(v.get(self.at..self.at.checked_add(n)?)?)
        })
    }
}

/// An operand's atoms over the result (see [`Reading::atoms`]).
enum Atoms<'v, T> {
    Run(&'v [T]),
    One(T),
}

/// `(select c a b)` over `shape` (`[batch nb, frame up to outer, cell]`),
/// when every operand can be read in place and holds plain atoms.
pub(crate) fn select_in_place<'p>(
    all: &[(Batched<'p>, Vec<usize>)],
    nb: usize,
    outer: usize,
    shape: &[usize],
) -> Option<Data<Fun<'p>>> {
    let [(c, ccell), (a, acell), (b, bcell)] = all else {
        return None;
    };
    let rc = Reading::of(c, ccell.len(), nb, outer, shape)?;
    let ra = Reading::of(a, acell.len(), nb, outer, shape)?;
    let rb = Reading::of(b, bcell.len(), nb, outer, shape)?;
    let Data::Bool(cv) = &c.v.data else {
        return None;
    };
    let n = atoms_in(shape);
    // Each arm one loop over runs (a choice the compiler vectorises).
    fn choose<T: Copy>(
        cv: &[bool],
        rc: Reading,
        a: (&[T], Reading),
        b: (&[T], Reading),
        n: usize,
    ) -> Option<Vec<T>> {
        let mut out = crate::kernel::buffer(n).ok()?;
        let pick = |c: bool, x: T, y: T| if c { x } else { y };
        match (rc.atoms(cv, n)?, a.1.atoms(a.0, n)?, b.1.atoms(b.0, n)?) {
            (Atoms::Run(c), Atoms::Run(x), Atoms::Run(y)) => {
                out.extend(c.iter().zip(x).zip(y).map(|((&c, &x), &y)| pick(c, x, y)))
            }
            (Atoms::Run(c), Atoms::Run(x), Atoms::One(y)) => {
                out.extend(c.iter().zip(x).map(|(&c, &x)| pick(c, x, y)))
            }
            (Atoms::Run(c), Atoms::One(x), Atoms::Run(y)) => {
                out.extend(c.iter().zip(y).map(|(&c, &y)| pick(c, x, y)))
            }
            (Atoms::Run(c), Atoms::One(x), Atoms::One(y)) => out.extend(c.iter().map(|&c| pick(c, x, y))),
            (Atoms::One(c), x, y) => {
                // One choice for every position: the chosen operand.
                match if c { x } else { y } {
                    Atoms::Run(v) => out.extend_from_slice(v),
                    Atoms::One(v) => out.resize(n, v),
                }
            }
        }
        Some(out)
    }
    Some(match (&a.v.data, &b.v.data) {
        (Data::Int(x), Data::Int(y)) => Data::Int(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        (Data::Float(x), Data::Float(y)) => Data::Float(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        _ => return None,
    })
}

/// `(scatter dest idx src)` outside any batch and frame: the destination
/// laid out once as the result (a replicated one, `((i-app replicate
/// [n]) 0.0)`, is never made and then copied) and the source's items
/// written over it at their indices, in order (the last write wins;
/// indices outside the destination are skipped, as the reference path
/// skips them).
pub(crate) fn scatter_whole<'p>(all: &[(Batched<'p>, Vec<usize>)]) -> Option<Batched<'p>> {
    let [(dest, dcell), (idx, icell), (src, scell)] = all else {
        return None;
    };
    if dest.nb != 0
        || idx.nb != 0
        || src.nb != 0
        || dest.own() != dcell
        || idx.own() != icell
        || src.own() != scell
    {
        return None;
    }
    let m = *dcell.first()?;
    let item = atoms_in(dcell.get(1..)?);
    let n = *icell.first()?;
    let idx = idx.densify()?;
    let src = src.densify()?;
    let Data::Int(iv) = &idx.v.data else {
        return None;
    };
    let rows = iv
        .get(..n)?
        .iter()
        .enumerate()
        .filter_map(|(i, &j)| usize::try_from(j).ok().filter(|j| *j < m).map(|j| (i, j)));
    let mut data = dest.laid_over(dcell.len(), 0, 0, dcell)?.data;
    crate::masked::put_rows(&mut data, &src.v.data, rows, item)?;
    Some(Batched::dense(
        remora_value::Array {
            shape: dcell.clone(),
            data,
        },
        0,
    ))
}

/// `(reduce op (select m a b))`, `op` an Int operator whose result does
/// not depend on the order it combines in (`min`, `max`, `+`), the choice
/// made along the reduced items: each sum of choices made as the operands
/// are read (in place, replicated ones by zero steps), the chosen array
/// never made — "the least index where the mask holds, else n" as one
/// pass over the mask.
impl<'p> crate::eval::Interpreter {
    pub(crate) fn reduce_of_select(
        &mut self,
        e: &'p remora_check::typed::TExpr,
        env: &crate::eval::Env<'p>,
    ) -> Option<crate::batch::Try<Batched<'p>>> {
        let (head, spine) = e.spine();
        if crate::tally::intrinsic_name(head)? != "reduce" {
            return None;
        }
        let [(op, _), (chosen, reduced)] = spine.as_slice() else {
            return None;
        };
        let (select, operands) = chosen.spine();
        if crate::tally::intrinsic_name(select)? != "select" || operands.len() != 3 {
            return None;
        }
        Some((|| {
            let op_value = self.eval_batched(op, env)?;
            let mut all = Vec::with_capacity(3);
            for (x, lifted) in &operands {
                let v = self.eval_batched(x, env)?;
                let cell = self.shape_of(&lifted.arg_cell, env, x.span).ok()?;
                all.push((v, cell));
            }
            let rcell = self.shape_of(&reduced.arg_cell, env, chosen.span).ok()?;
            if let Some(r) = self.reduce_chosen(&op_value, &all, &rcell) {
                return Some(r);
            }
            // As written: the choice, then the reduction.
            let s = self.eval_batched(select, env)?;
            self.at = chosen.span;
            let made = self.apply_batched(&s, all)?;
            let r = self.eval_batched(head, env)?;
            self.at = e.span;
            self.apply_batched(&r, vec![(op_value, Vec::new()), (made, rcell)])
        })())
    }

    /// The rule, when it applies: scalar choices, the reduced cells the
    /// choices' last axis.
    fn reduce_chosen(
        &mut self,
        op: &Batched<'p>,
        all: &[(Batched<'p>, Vec<usize>)],
        rcell: &[usize],
    ) -> crate::batch::Try<Batched<'p>> {
        if op.nb != 0 {
            return None;
        }
        let op = crate::intrinsics::scalar_operator(&op.densify()?.v)?;
        if !matches!(op, "min" | "max" | "+") {
            return None;
        }
        let frame = Self::principal(all)?;
        let nb = all.iter().map(|(a, _)| a.nb).max()?;
        let &[n] = rcell else {
            return None;
        };
        if n == 0 || frame.last() != Some(&n) || all.iter().any(|(_, cell)| !cell.is_empty()) {
            return None;
        }
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        let outer = nb + frame.len();
        let steps: Vec<Vec<usize>> = all
            .iter()
            .map(|(a, _)| a.steps_over(0, nb, outer, &shape))
            .collect::<Option<_>>()?;
        let [(m, _), (a, _), (b, _)] = all else {
            return None;
        };
        let (Data::Bool(mask), Data::Int(xs), Data::Int(ys)) = (&m.v.data, &a.v.data, &b.v.data) else {
            return None;
        };
        let rows = shape.get(..shape.len() - 1)?.to_vec();
        let at = |offset: usize, s: &[usize]| Reduced {
            at: offset,
            step: s.last().copied().unwrap_or(0),
            steps: s.get(..rows.len()).unwrap_or_default().to_vec(),
        };
        let operands = [
            at(m.offset, &steps[0]),
            at(a.offset, &steps[1]),
            at(b.offset, &steps[2]),
        ];
        let out = match op {
            "min" => reduce_choices(mask, xs, ys, &rows, n, &operands, i64::min),
            "max" => reduce_choices(mask, xs, ys, &rows, n, &operands, i64::max),
            _ => reduce_choices(mask, xs, ys, &rows, n, &operands, i64::wrapping_add),
        }?;
        Some(Batched::dense(
            remora_value::Array {
                shape: rows,
                data: Data::Int(out.into()),
            },
            nb.min(shape.len() - 1),
        ))
    }
}

/// Where an operand of `reduce_choices` lies: its first atom, its step
/// along the items and along each axis of the rows.
struct Reduced {
    at: usize,
    step: usize,
    steps: Vec<usize>,
}

/// Each row's choices (`mask` picks `xs` or `ys`) combined along its `n`
/// items, the operands read through their steps (in range: checked).
fn reduce_choices(
    mask: &[bool],
    xs: &[i64],
    ys: &[i64],
    rows: &[usize],
    n: usize,
    [m, a, b]: &[Reduced; 3],
    combine: impl Fn(i64, i64) -> i64,
) -> Option<Vec<i64>> {
    let count = atoms_in(rows);
    let mut out = crate::kernel::buffer(count).ok()?;
    let mut index = vec![0usize; rows.len()];
    for _ in 0..count {
        let base = |r: &Reduced| r.at + index.iter().zip(&r.steps).map(|(i, s)| i * s).sum::<usize>();
        let (pm, pa, pb) = (base(m), base(a), base(b));
        let pick = |k: usize| {
            if *mask.get(pm + k * m.step)? {
                xs.get(pa + k * a.step).copied()
            } else {
                ys.get(pb + k * b.step).copied()
            }
        };
        let mut acc = pick(0)?;
        for k in 1..n {
            acc = combine(acc, pick(k)?);
        }
        out.push(acc);
        // The next row's index (an odometer).
        for (i, &d) in index.iter_mut().zip(rows).rev() {
            *i += 1;
            if *i < d {
                break;
            }
            *i = 0;
        }
    }
    Some(out)
}
