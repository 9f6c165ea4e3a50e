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
/// pass over the mask. A mask that is a comparison (`(f.== r (reduce f.max
/// r))`, `(< xs k)`) is not made either: its operands are compared a line
/// of items at a time as the choices read them.
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
        let (mask, _) = operands[0];
        let (compare, compared) = mask.spine();
        let comparison = crate::tally::intrinsic_name(compare)
            .and_then(crate::tally::comparison)
            .filter(|_| compared.len() == 2);
        Some((|| {
            let op_value = self.eval_batched(op, env)?;
            // The mask's comparands (when it is a comparison), then the
            // choices: evaluated in the order they are written.
            let written = match comparison {
                Some(_) => compared.iter().chain(&operands[1..]),
                None => operands[..1].iter().chain(&operands[1..]),
            };
            let mut all = Vec::with_capacity(4);
            for (x, lifted) in written {
                let v = self.eval_batched(x, env)?;
                let cell = self.shape_of(&lifted.arg_cell, env, x.span).ok()?;
                all.push((v, cell));
            }
            let rcell = self.shape_of(&reduced.arg_cell, env, chosen.span).ok()?;
            if let Some(r) = self.reduce_chosen(&op_value, comparison, &all, &rcell) {
                return Some(r);
            }
            // As written: the mask (when it is a comparison), the choice,
            // then the reduction.
            if comparison.is_some() {
                let f = self.eval_batched(compare, env)?;
                let rest = all.split_off(2);
                self.at = mask.span;
                let made = self.apply_batched(&f, all)?;
                all = std::iter::once((made, Vec::new())).chain(rest).collect();
                if let Some(r) = self.reduce_chosen(&op_value, None, &all, &rcell) {
                    return Some(r);
                }
            }
            let s = self.eval_batched(select, env)?;
            self.at = chosen.span;
            let made = self.apply_batched(&s, all)?;
            let r = self.eval_batched(head, env)?;
            self.at = e.span;
            self.apply_batched(&r, vec![(op_value, Vec::new()), (made, rcell)])
        })())
    }

    /// The rule, when it applies: scalar choices (and comparands), the
    /// reduced cells the choices' last axis. `all` holds the mask (or,
    /// with `comparison`, its two comparands), then the two choices.
    fn reduce_chosen(
        &mut self,
        op: &Batched<'p>,
        comparison: Option<crate::tally::Cmp>,
        all: &[(Batched<'p>, Vec<usize>)],
        rcell: &[usize],
    ) -> crate::batch::Try<Batched<'p>> {
        if op.nb != 0 {
            return None;
        }
        let op = crate::intrinsics::scalar_operator(&op.densify()?.v)?;
        let combine = match op {
            "min" => Combine::Min,
            "max" => Combine::Max,
            "+" => Combine::Add,
            _ => return None,
        };
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
        let rows = shape.get(..shape.len() - 1)?.to_vec();
        let lines: Vec<Line> = all
            .iter()
            .map(|(a, _)| {
                let s = a.steps_over(0, nb, outer, &shape)?;
                Some(Line {
                    at: a.offset,
                    step: *s.last()?,
                    steps: s.get(..rows.len())?.to_vec(),
                })
            })
            .collect::<Option<_>>()?;
        let (masks, choices) = all.split_at(all.len() - 2);
        let [(a, _), (b, _)] = choices else {
            return None;
        };
        let (Data::Int(xs), Data::Int(ys)) = (&a.v.data, &b.v.data) else {
            return None;
        };
        let (mask_lines, choice_lines) = lines.split_at(lines.len() - 2);
        let choices = Choices {
            xs,
            ys,
            lines: [&choice_lines[0], &choice_lines[1]],
            rows: &rows,
            n,
            combine,
        };
        let out = match (comparison, masks) {
            (None, [(m, _)]) => match &m.v.data {
                Data::Bool(mask) => choices.reduce(&Made {
                    mask,
                    line: &mask_lines[0],
                })?,
                _ => return None,
            },
            (Some(cmp), [(p, _), (q, _)]) => match (&p.v.data, &q.v.data) {
                (Data::Float(p), Data::Float(q)) => choices.reduce(&Compared {
                    cmp,
                    p,
                    q,
                    lines: [&mask_lines[0], &mask_lines[1]],
                })?,
                (Data::Int(p), Data::Int(q)) => choices.reduce(&Compared {
                    cmp,
                    p,
                    q,
                    lines: [&mask_lines[0], &mask_lines[1]],
                })?,
                _ => return None,
            },
            _ => return None,
        };
        Some(Batched::dense(
            remora_value::Array {
                shape: rows,
                data: Data::Int(out.into()),
            },
            nb.min(shape.len() - 1),
        ))
    }
}

/// Where an operand of a reduced choice lies: its first atom, its step
/// along the items and along each axis of the rows.
struct Line {
    at: usize,
    step: usize,
    steps: Vec<usize>,
}

impl Line {
    /// Where the items of row `r` (row-major over `rows`) from item `k`
    /// start.
    fn start(&self, mut r: usize, rows: &[usize], k: usize) -> Option<usize> {
        let mut at = self.at.checked_add(k.checked_mul(self.step)?)?;
        for (&d, &s) in rows.iter().zip(&self.steps).rev() {
            at = at.checked_add((r % d).checked_mul(s)?)?;
            r /= d;
        }
        Some(at)
    }

    /// `len` atoms of `v` from item `k` of row `r`: a run of `v` in place,
    /// its one atom (a zero step), or (any other step) copied into
    /// `scratch`. `None` outside `v`.
    fn read<'a, T: Copy>(
        &self,
        v: &'a [T],
        (r, rows): (usize, &[usize]),
        k: usize,
        len: usize,
        scratch: &'a mut Vec<T>,
    ) -> Option<Atoms<'a, T>> {
        let at = self.start(r, rows, k)?;
        Some(match self.step {
            0 => Atoms::One(*v.get(at)?),
            1 => Atoms::Run(v.get(at..at.checked_add(len)?)?),
            step => {
                let last = at.checked_add(len.checked_sub(1)?.checked_mul(step)?)?;
                scratch.clear();
                scratch.extend(v.get(at..=last)?.iter().step_by(step));
                Atoms::Run(scratch)
            }
        })
    }
}

/// Items reduced a line (at most this many items of a row) at a time, so
/// that a mask compared and strided operands copied stay in cache.
const LINE: usize = 4096;

/// Rows of at least this many items in all are shared among the threads.
const PARALLEL_ITEMS: usize = 1 << 20;

/// The mask of a reduced choice, a line at a time.
trait MaskLines: Sync {
    /// Its scratch space (one per thread).
    type Scratch: Default;
    fn read<'s>(
        &'s self,
        row: (usize, &[usize]),
        k: usize,
        len: usize,
        scratch: &'s mut Self::Scratch,
    ) -> Option<Atoms<'s, bool>>;
}

/// A mask made before: read in place (or through its steps).
struct Made<'a> {
    mask: &'a [bool],
    line: &'a Line,
}

impl MaskLines for Made<'_> {
    type Scratch = Vec<bool>;
    fn read<'s>(
        &'s self,
        row: (usize, &[usize]),
        k: usize,
        len: usize,
        scratch: &'s mut Vec<bool>,
    ) -> Option<Atoms<'s, bool>> {
        self.line.read(self.mask, row, k, len, scratch)
    }
}

/// A mask `(cmp p q)` compared as it is read (the scalar primitive's
/// comparison: IEEE for Floats).
struct Compared<'a, T> {
    cmp: crate::tally::Cmp,
    p: &'a [T],
    q: &'a [T],
    lines: [&'a Line; 2],
}

impl<T: Copy + PartialOrd + Sync> MaskLines for Compared<'_, T> {
    type Scratch = (Vec<T>, Vec<T>, Vec<bool>);
    fn read<'s>(
        &'s self,
        row: (usize, &[usize]),
        k: usize,
        len: usize,
        (sp, sq, out): &'s mut Self::Scratch,
    ) -> Option<Atoms<'s, bool>> {
        use crate::tally::Cmp;
        let p = self.lines[0].read(self.p, row, k, len, sp)?;
        let q = self.lines[1].read(self.q, row, k, len, sq)?;
        out.clear();
        // One loop for each comparison, so that each vectorises.
        match self.cmp {
            Cmp::Eq => compare(p, q, len, out, |a, b| Cmp::Eq.holds(a, b)),
            Cmp::Ne => compare(p, q, len, out, |a, b| Cmp::Ne.holds(a, b)),
            Cmp::Lt => compare(p, q, len, out, |a, b| Cmp::Lt.holds(a, b)),
            Cmp::Le => compare(p, q, len, out, |a, b| Cmp::Le.holds(a, b)),
            Cmp::Gt => compare(p, q, len, out, |a, b| Cmp::Gt.holds(a, b)),
            Cmp::Ge => compare(p, q, len, out, |a, b| Cmp::Ge.holds(a, b)),
        }
        Some(Atoms::Run(out))
    }
}

/// `holds` of each pair of `len` atoms, into `out`.
#[inline(always)]
fn compare<T: Copy>(
    p: Atoms<'_, T>,
    q: Atoms<'_, T>,
    len: usize,
    out: &mut Vec<bool>,
    holds: impl Fn(T, T) -> bool,
) {
    crate::fmath::widest(
        #[inline(always)]
        || match (p, q) {
            (Atoms::Run(a), Atoms::Run(b)) => out.extend(a.iter().zip(b).map(|(&a, &b)| holds(a, b))),
            (Atoms::Run(a), Atoms::One(b)) => out.extend(a.iter().map(|&a| holds(a, b))),
            (Atoms::One(a), Atoms::Run(b)) => out.extend(b.iter().map(|&b| holds(a, b))),
            (Atoms::One(a), Atoms::One(b)) => out.resize(len, holds(a, b)),
        },
    )
}

/// The two choices of a reduced choice, and the reduction.
struct Choices<'a> {
    xs: &'a [i64],
    ys: &'a [i64],
    lines: [&'a Line; 2],
    rows: &'a [usize],
    n: usize,
    combine: Combine,
}

impl Choices<'_> {
    /// Each row's choices combined along its `n` items, a line at a time
    /// (the operator combines in any order with the same result), the
    /// rows shared among the threads when there are many items. `None`
    /// when an operand lies outside its buffer.
    fn reduce<M: MaskLines>(&self, mask: &M) -> Option<Vec<i64>> {
        let count = atoms_in(self.rows);
        let mut out = crate::kernel::buffer(count).ok()?;
        out.resize(count, 0);
        let rows = |first: usize, out: &mut [i64]| -> bool {
            let mut scratch = (M::Scratch::default(), Vec::new(), Vec::new());
            out.iter_mut()
                .enumerate()
                .all(|(i, o)| self.row(mask, first + i, &mut scratch).map(|v| *o = v).is_some())
        };
        let items = count.saturating_mul(self.n);
        crate::rows_in_parallel(&mut out, 1, items, PARALLEL_ITEMS, rows).then_some(out)
    }

    fn row<M: MaskLines>(
        &self,
        mask: &M,
        r: usize,
        (sm, sx, sy): &mut (M::Scratch, Vec<i64>, Vec<i64>),
    ) -> Option<i64> {
        let row = (r, self.rows);
        let mut acc = self.combine.unit();
        for k in (0..self.n).step_by(LINE) {
            let len = LINE.min(self.n - k);
            let m = mask.read(row, k, len, sm)?;
            let x = self.lines[0].read(self.xs, row, k, len, sx)?;
            let y = self.lines[1].read(self.ys, row, k, len, sy)?;
            acc = self.combine.of(acc, self.combine.choices(m, x, y, len));
        }
        Some(acc)
    }
}

/// The Int operators a reduced choice combines by: each gives the same
/// result in any order.
#[derive(Clone, Copy)]
enum Combine {
    Min,
    Max,
    Add,
}

impl Combine {
    fn unit(self) -> i64 {
        match self {
            Combine::Min => i64::MAX,
            Combine::Max => i64::MIN,
            Combine::Add => 0,
        }
    }

    fn of(self, a: i64, b: i64) -> i64 {
        match self {
            Combine::Min => a.min(b),
            Combine::Max => a.max(b),
            Combine::Add => a.wrapping_add(b),
        }
    }

    /// The `len` choices (`m` picks `x` or `y`) combined: one loop for
    /// each operator, in the widest vectors the machine has.
    fn choices(self, m: Atoms<'_, bool>, x: Atoms<'_, i64>, y: Atoms<'_, i64>, len: usize) -> i64 {
        let unit = self.unit();
        match self {
            Combine::Min => crate::fmath::widest(
                #[inline(always)]
                || combined(m, x, y, len, unit, i64::min),
            ),
            Combine::Max => crate::fmath::widest(
                #[inline(always)]
                || combined(m, x, y, len, unit, i64::max),
            ),
            Combine::Add => crate::fmath::widest(
                #[inline(always)]
                || combined(m, x, y, len, unit, i64::wrapping_add),
            ),
        }
    }
}

/// The `len` choices (`m` picks `x` or `y`) combined by `f` from `unit`.
#[inline(always)]
fn combined(
    m: Atoms<'_, bool>,
    x: Atoms<'_, i64>,
    y: Atoms<'_, i64>,
    len: usize,
    unit: i64,
    f: impl Fn(i64, i64) -> i64,
) -> i64 {
    let pick = |c: bool, x: i64, y: i64| if c { x } else { y };
    match (m, x, y) {
        (Atoms::Run(c), Atoms::Run(x), Atoms::Run(y)) => c
            .iter()
            .zip(x)
            .zip(y)
            .fold(unit, |a, ((&c, &x), &y)| f(a, pick(c, x, y))),
        (Atoms::Run(c), Atoms::Run(x), Atoms::One(y)) => {
            c.iter().zip(x).fold(unit, |a, (&c, &x)| f(a, pick(c, x, y)))
        }
        (Atoms::Run(c), Atoms::One(x), Atoms::Run(y)) => {
            c.iter().zip(y).fold(unit, |a, (&c, &y)| f(a, pick(c, x, y)))
        }
        (Atoms::Run(c), Atoms::One(x), Atoms::One(y)) => c.iter().fold(unit, |a, &c| f(a, pick(c, x, y))),
        (Atoms::One(c), x, y) => match if c { x } else { y } {
            Atoms::Run(v) => v.iter().fold(unit, |a, &v| f(a, v)),
            Atoms::One(v) => (0..len).fold(unit, |a, _| f(a, v)),
        },
    }
}
