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
pub(crate) enum Atoms<'v, T> {
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
        picked(
            &mut out,
            rc.atoms(cv, n)?,
            a.1.atoms(a.0, n)?,
            b.1.atoms(b.0, n)?,
            n,
        );
        Some(out)
    }
    Some(match (&a.v.data, &b.v.data) {
        (Data::Int(x), Data::Int(y)) => Data::Int(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        (Data::Float(x), Data::Float(y)) => Data::Float(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(choose(cv, rc, (x, ra), (y, rb), n)?.into()),
        _ => return None,
    })
}

/// The `n` choices (`c` picks `x` or `y`) pushed onto `out`: one loop for
/// each way the operands lie (a choice the compiler vectorises).
pub(crate) fn picked<T: Copy>(
    out: &mut Vec<T>,
    c: Atoms<'_, bool>,
    x: Atoms<'_, T>,
    y: Atoms<'_, T>,
    n: usize,
) {
    let pick = |c: bool, x: T, y: T| if c { x } else { y };
    match (c, x, y) {
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
                Atoms::One(v) => out.resize(out.len() + n, v),
            }
        }
    }
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

/// `(reduce op (select m a b))` and `(f.sum (select m a b))`, the choice
/// made along the reduced items, each sum of choices made as the operands
/// are read (in place, replicated ones by zero steps), the chosen array
/// never made — "the least index where the mask holds, else n" as one
/// pass over the mask, a weighted histogram lifted over its bins as one
/// pass over the weights. A mask that is a comparison (`(f.== r (reduce
/// f.max r))`, `(== bins b)`) is not made either: its operands are
/// compared as the choices read them. Int operators whose result does not
/// depend on the order they combine in (`min`, `max`, `+`) go along the
/// rows a line of items at a time; every reduction (the Float ones too,
/// in `reduce`'s own order) goes item by item along the lanes of a row
/// axis when the operands lie along it contiguously or replicated
/// (`chosen.rs`), and a Float one otherwise row by row.
impl<'p> crate::eval::Interpreter {
    pub(crate) fn reduce_of_select(
        &mut self,
        e: &'p remora_check::typed::TExpr,
        env: &crate::eval::Env<'p>,
    ) -> Option<crate::batch::Try<Batched<'p>>> {
        let (head, spine) = e.spine();
        let (op, (chosen, reduced)) = match (crate::tally::intrinsic_name(head)?, spine.as_slice()) {
            ("reduce", [(op, _), arg]) => (Some(*op), *arg),
            ("f.sum" | "sum", [arg]) => (None, *arg),
            _ => return None,
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
            let op_value = match op {
                Some(op) => Some(self.eval_batched(op, env)?),
                None => None,
            };
            let reducer = match (&op_value, crate::tally::intrinsic_name(head)) {
                (Some(v), _) if v.nb == 0 => {
                    Reducer::of(crate::intrinsics::scalar_operator(&v.densify()?.v)?, false)
                }
                (None, Some("f.sum")) => Reducer::of("f.+", true),
                (None, Some(_)) => Reducer::of("+", true),
                _ => None,
            };
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
            if let Some(reducer) = reducer
                && let Some(r) = self.reduce_chosen(reducer, comparison, &all, &rcell)
            {
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
                if let Some(reducer) = reducer
                    && let Some(r) = self.reduce_chosen(reducer, None, &all, &rcell)
                {
                    return Some(r);
                }
            }
            let s = self.eval_batched(select, env)?;
            self.at = chosen.span;
            let made = self.apply_batched(&s, all)?;
            let r = self.eval_batched(head, env)?;
            self.at = e.span;
            let args = match op_value {
                Some(op) => vec![(op, Vec::new()), (made, rcell)],
                None => vec![(made, rcell)],
            };
            self.apply_batched(&r, args)
        })())
    }

    /// The rule, when it applies: scalar choices (and comparands), the
    /// reduced cells the choices' last axis. `all` holds the mask (or,
    /// with `comparison`, its two comparands), then the two choices.
    fn reduce_chosen(
        &mut self,
        reducer: Reducer,
        comparison: Option<crate::tally::Cmp>,
        all: &[(Batched<'p>, Vec<usize>)],
        rcell: &[usize],
    ) -> crate::batch::Try<Batched<'p>> {
        let frame = Self::principal(all)?;
        let nb = all.iter().map(|(a, _)| a.nb).max()?;
        let &[n] = rcell else {
            return None;
        };
        if (n == 0 && reducer.seeded.is_none())
            || frame.last() != Some(&n)
            || all.iter().any(|(_, cell)| !cell.is_empty())
        {
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
        let (mask_lines, choice_lines) = lines.split_at(lines.len() - 2);
        let mask = match (comparison, masks) {
            (None, [(m, _)]) => match &m.v.data {
                Data::Bool(mask) => Mask::Made(Made {
                    mask,
                    line: &mask_lines[0],
                }),
                _ => return None,
            },
            (Some(cmp), [(p, _), (q, _)]) => {
                let lines = [&mask_lines[0], &mask_lines[1]];
                match (&p.v.data, &q.v.data) {
                    (Data::Float(p), Data::Float(q)) => Mask::Floats(Compared { cmp, p, q, lines }),
                    (Data::Int(p), Data::Int(q)) => Mask::Ints(Compared { cmp, p, q, lines }),
                    _ => return None,
                }
            }
            _ => return None,
        };
        let chosen = crate::chosen::Chosen {
            rows: &rows,
            n,
            lines: [&choice_lines[0], &choice_lines[1]],
        };
        let data = match (&a.v.data, &b.v.data, reducer.op) {
            (Data::Int(xs), Data::Int(ys), Op::Int(combine)) => Data::Int(
                match chosen.along_lanes(&mask, (xs, ys), reducer, combine) {
                    Some(out) => out,
                    None => {
                        let choices = Choices {
                            xs,
                            ys,
                            lines: chosen.lines,
                            rows: &rows,
                            n,
                            combine,
                        };
                        match &mask {
                            Mask::Made(m) => choices.reduce(m),
                            Mask::Floats(m) => choices.reduce(m),
                            Mask::Ints(m) => choices.reduce(m),
                        }?
                    }
                }
                .into(),
            ),
            (Data::Float(xs), Data::Float(ys), Op::Float(op)) => Data::Float(
                match chosen.along_lanes(&mask, (xs, ys), reducer, op) {
                    Some(out) => out,
                    None => chosen.along_rows(&mask, (xs, ys), reducer, op)?,
                }
                .into(),
            ),
            _ => return None,
        };
        Some(Batched::dense(
            remora_value::Array { shape: rows, data },
            nb.min(shape.len() - 1),
        ))
    }
}

/// A reduction of choices: its operator, and, for `f.sum` and `sum`, the
/// unit it starts from.
#[derive(Clone, Copy)]
pub(crate) struct Reducer {
    pub(crate) op: Op,
    pub(crate) seeded: Option<()>,
}

/// The operator of a reduced choice.
#[derive(Clone, Copy)]
pub(crate) enum Op {
    Int(Combine),
    Float(crate::chosen::FloatOp),
}

impl Reducer {
    fn of(op: &str, seeded: bool) -> Option<Reducer> {
        use crate::chosen::FloatOp;
        let op = match op {
            "min" => Op::Int(Combine::Min),
            "max" => Op::Int(Combine::Max),
            "+" => Op::Int(Combine::Add),
            "f.+" => Op::Float(FloatOp::Add),
            "f.max" => Op::Float(FloatOp::Max),
            "f.min" => Op::Float(FloatOp::Min),
            _ => return None,
        };
        Some(Reducer {
            op,
            seeded: seeded.then_some(()),
        })
    }
}

/// The mask of a reduced choice: made, or compared as it is read.
pub(crate) enum Mask<'a> {
    Made(Made<'a>),
    Floats(Compared<'a, f32>),
    Ints(Compared<'a, i64>),
}

/// Where an operand of a reduced choice lies: its first atom, its step
/// along the items and along each axis of the rows.
pub(crate) struct Line {
    pub(crate) at: usize,
    pub(crate) step: usize,
    pub(crate) steps: Vec<usize>,
}

impl Line {
    /// Where the items of row `r` (row-major over `rows`) from item `k`
    /// start.
    pub(crate) fn start(&self, mut r: usize, rows: &[usize], k: usize) -> Option<usize> {
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
    pub(crate) fn read<'a, T: Copy>(
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
pub(crate) const LINE: usize = 4096;

/// Rows of at least this many items in all are shared among the threads.
pub(crate) const PARALLEL_ITEMS: usize = 1 << 20;

/// The mask of a reduced choice, a line at a time.
pub(crate) trait MaskLines: Sync {
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
pub(crate) struct Made<'a> {
    pub(crate) mask: &'a [bool],
    pub(crate) line: &'a Line,
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
pub(crate) struct Compared<'a, T> {
    pub(crate) cmp: crate::tally::Cmp,
    pub(crate) p: &'a [T],
    pub(crate) q: &'a [T],
    pub(crate) lines: [&'a Line; 2],
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
pub(crate) enum Combine {
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

    pub(crate) fn of(self, a: i64, b: i64) -> i64 {
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
