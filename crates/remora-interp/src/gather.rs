//! Gathers along several leading axes of an array's cells at once:
//! `index2d` by a pair per position, and a chain of selections such as
//! `(index (nth img r) c)` or `(nth (nth cube i) j)`, where each selection
//! takes the whole item the one inside it gives. Evaluated as written over
//! a frame of indices, the inner `nth` lays out a whole row (or plane) for
//! every position, only for the outer selection to keep one atom of it —
//! `[positions × row]` atoms moved to keep `[positions]`. Here the indices
//! of every selection are combined into one flat index per position (each
//! checked against its own axis, as the selection would check it) and the
//! array, its leading axes merged, is gathered once by it
//! (`gather_batched`: the array read in place however many positions share
//! it). The atoms gathered are the ones the selections would give, so the
//! result is the reference path's; an index out of range gives up the
//! batch (the cells then report it in their order), or at the top level
//! (`index2d`) is reported as the reference path meets it first.

use crate::batch::{Batched, Odometer, Try};
use crate::eval::{Env, Interpreter, atoms_in};
use crate::kernel::row_major;
use crate::tally::intrinsic_name;
use remora_check::typed::{TExpr, TExprKind, VarId};
use remora_types::Lifted;
use remora_value::{Array, Data};

/// One selection of a gather: `index` or `nth` (one index per position,
/// along one axis) or `index2d` (a pair per position, along two).
pub(crate) struct Pick<'p> {
    name: &'static str,
    index: Batched<'p>,
}

impl<'p> Pick<'p> {
    pub(crate) fn new(name: &'static str, index: Batched<'p>) -> Pick<'p> {
        Pick { name, index }
    }

    /// How many leading axes of the cell it selects along.
    fn axes(&self) -> usize {
        if self.name == "index2d" { 2 } else { 1 }
    }

    /// The cell of its index: a pair for `index2d`, else a scalar.
    fn cell(&self) -> &'static [usize] {
        if self.name == "index2d" { &[2] } else { &[] }
    }

    /// The error the selection reports for the index `at` along `dims`.
    fn out_of_range(&self, at: &[i64], dims: &[usize]) -> String {
        match (self.name, at, dims) {
            ("index2d", [i, j], [m, n]) => format!("index [{i} {j}] out of range for a {m}×{n} matrix"),
            ("nth", [i], [d]) => format!("nth: index {i} out of range for {d} items"),
            (_, [i], [d]) => format!("index {i} out of range for a vector of length {d}"),
            _ => String::from("index out of range"),
        }
    }
}

/// One selection of a chain as written: its head (the intrinsic under its
/// type and index applications), the array argument's lifting and the
/// index argument with its lifting.
struct Selection<'p> {
    name: &'static str,
    head: &'p TExpr,
    array: &'p Lifted,
    index: (&'p TExpr, &'p Lifted),
    at: remora_syntax::Span,
}

/// `e` as a chain of selections `(g (nth … (nth xs i1) …) ik)`, `g` one of
/// `index`, `nth`, `index2d`: the innermost array expression and the
/// selections, innermost first (none when `e` is no selection).
fn selections_of(e: &TExpr) -> (&TExpr, Vec<Selection<'_>>) {
    let mut selections = Vec::new();
    let mut at = e;
    loop {
        let (head, spine) = at.spine();
        let name = intrinsic_name(head).filter(|name| match selections.is_empty() {
            true => matches!(*name, "index" | "nth" | "index2d"),
            // Only `nth` gives an item that can be selected from again.
            false => *name == "nth",
        });
        let (Some(name), [(array, array_lifted), (index, index_lifted)]) = (name, spine.as_slice()) else {
            break;
        };
        selections.push(Selection {
            name,
            head,
            array: array_lifted,
            index: (index, index_lifted),
            at: at.span,
        });
        at = array;
    }
    selections.reverse();
    (at, selections)
}

/// `e` as a chain of at least two selections.
fn chain_form(e: &TExpr) -> Option<(&TExpr, Vec<Selection<'_>>)> {
    let (base, selections) = selections_of(e);
    (selections.len() >= 2).then_some((base, selections))
}

impl<'p> Interpreter {
    /// `e` evaluated in the batch frame when it is a chain of selections
    /// (`None` when it is not: nothing is evaluated).
    pub(crate) fn gather_chain(&mut self, e: &'p TExpr, env: &Env<'p>) -> Option<Try<Batched<'p>>> {
        let (base, selections) = chain_form(e)?;
        Some(self.gather_chain_of(base, &selections, env))
    }

    /// `(let ((val v (nth … xs …))) (g … v … k))`, a selection bound to a
    /// variable that is read once, as the array of a chain of selections
    /// (a row named, then an atom of it picked) evaluated in the batch
    /// frame as the one chain (`None` when it is not: nothing is
    /// evaluated).
    pub(crate) fn gather_let(
        &mut self,
        var: VarId,
        value: &'p TExpr,
        body: &'p TExpr,
        env: &Env<'p>,
    ) -> Option<Try<Batched<'p>>> {
        let (base, mut selections) = selections_of(value);
        if selections.last()?.name != "nth" {
            return None;
        }
        let (read, outer) = selections_of(body);
        let reads = |e: &TExpr| {
            e.find(&mut |x| matches!(x.kind, TExprKind::Var(v) if v == var))
                .is_some()
        };
        if outer.is_empty()
            || !matches!(read.kind, TExprKind::Var(v) if v == var)
            || outer.iter().any(|s| reads(s.index.0))
        {
            return None;
        }
        selections.extend(outer);
        Some(self.gather_chain_of(base, &selections, env))
    }

    fn gather_chain_of(
        &mut self,
        base: &'p TExpr,
        selections: &[Selection<'p>],
        env: &Env<'p>,
    ) -> Try<Batched<'p>> {
        let xs = self.eval_batched(base, env)?;
        let mut picks = Vec::with_capacity(selections.len());
        let mut cells = Vec::with_capacity(selections.len());
        for s in selections {
            let (index, lifted) = s.index;
            let pick = Pick::new(s.name, self.eval_batched(index, env)?);
            let cell = self.shape_of(&s.array.arg_cell, env, s.at).ok()?;
            let icell = self.shape_of(&lifted.arg_cell, env, s.at).ok()?;
            if icell != pick.cell() {
                return None;
            }
            cells.push(cell);
            picks.push(pick);
        }
        // Each selection takes the whole item the one inside it gives.
        let xcell = cells.first()?.clone();
        let mut taken = 0;
        let whole = picks.iter().zip(&cells).all(|(pick, cell)| {
            let whole = xcell.get(taken..) == Some(cell.as_slice());
            taken += pick.axes();
            whole
        });
        if whole {
            match self.gather_picks(&xs, &xcell, &picks) {
                Some(r) => return Some(r),
                None if crate::eval::doomed() || crate::eval::starved() || crate::eval::faulted() => {
                    return None;
                }
                None => {}
            }
        }
        // As written: one selection after another.
        let mut v = xs;
        for ((s, pick), cell) in selections.iter().zip(picks).zip(cells) {
            let f = self.eval_batched(s.head, env)?;
            self.at = s.at;
            let icell = pick.cell().to_vec();
            v = self.apply_batched(&f, vec![(v, cell), (pick.index, icell)])?;
        }
        Some(v)
    }

    /// The atoms that `picks` select, one after another, from each cell
    /// (of shape `xcell`) of `xs`, over the batch and the principal frame
    /// of `xs` and the picks' indices: one gather by a flat index into the
    /// cells' merged leading axes.
    pub(crate) fn gather_picks(
        &mut self,
        xs: &Batched<'p>,
        xcell: &[usize],
        picks: &[Pick<'p>],
    ) -> Try<Batched<'p>> {
        let lead: usize = picks.iter().map(Pick::axes).sum();
        let (dims, rest) = xcell.split_at_checked(lead)?;
        let nb = picks.iter().map(|p| p.index.nb).fold(xs.nb, usize::max);
        // The principal frame: the longest of the frames, every other a
        // prefix of it.
        let mut frames = vec![xs.own().get(..xs.own().len().checked_sub(xcell.len())?)?];
        for p in picks {
            let own = p.index.own();
            frames.push(own.get(..own.len().checked_sub(p.cell().len())?)?);
        }
        let principal = frames.iter().copied().max_by_key(|f| f.len())?;
        if !frames.iter().all(|f| principal.starts_with(f)) {
            return None;
        }
        let mut outer: Vec<usize> = self.batch.get(..nb)?.to_vec();
        outer.extend(principal);
        if picks.len() > 1 && atoms_in(&outer) == 0 {
            // (As written, the inner selections would still run over
            // their own, shorter frames, and check their indices.)
            return None;
        }
        // The cells with their leading axes merged into one: row-major
        // (items of the rest of the cell, laid out first if they are not
        // so), or, where the picks select atoms, the atoms' own steps (a
        // transposition read in place).
        let xframe = xs.own().len().checked_sub(xcell.len())?;
        let csteps = xs.strides.get(xs.nb + xframe..)?;
        let (xs, weights, items) = if csteps == row_major(xcell).as_slice() {
            (self.expand(xs, nb)?, row_major(dims), atoms_in(dims))
        } else if rest.is_empty() && atoms_in(dims) > 0 {
            let weights = csteps.get(..lead)?.to_vec();
            let span = dims.iter().zip(&weights).map(|(d, w)| (d - 1) * w).sum::<usize>() + 1;
            (self.expand(xs, nb)?, weights, span)
        } else {
            (self.expand(&xs.densify()?, nb)?, row_major(dims), atoms_in(dims))
        };
        let flat = match flat_index(picks, dims, &weights, nb, &outer)? {
            Ok(flat) => flat,
            Err(message) => {
                if self.batch.is_empty() && picks.len() == 1 {
                    crate::eval::note_fault(message);
                } else {
                    crate::eval::note_doomed();
                }
                return None;
            }
        };
        let mut merged: Vec<usize> = vec![items];
        merged.extend(rest);
        let mut shape: Vec<usize> = xs.v.shape.get(..nb + xframe)?.to_vec();
        shape.extend(&merged);
        let mut strides: Vec<usize> = xs.strides.get(..nb + xframe)?.to_vec();
        strides.push(atoms_in(rest));
        strides.extend(row_major(rest));
        let cells = xs.view(shape, nb, xs.offset, strides);
        let flat = Batched::dense(
            Array {
                shape: outer,
                data: Data::Int(flat.into()),
            },
            nb,
        );
        self.gather_batched("nth", &[(cells, merged), (flat, Vec::new())])
    }
}

/// The flat index into the merged leading axes `dims` that `picks` select
/// at each position of `outer` (row-major; its first `nb` axes the
/// batch's): the picks taken in turn, each over every position, so the
/// first error is the one the selections as written meet first. `Err`:
/// an index out of range (the message its selection gives).
fn flat_index(
    picks: &[Pick<'_>],
    dims: &[usize],
    weights: &[usize],
    nb: usize,
    outer: &[usize],
) -> Option<Result<Vec<i64>, String>> {
    let mut flat = vec![0i64; atoms_in(outer)];
    let (mut dims, mut weights) = (dims, weights);
    for pick in picks {
        let (here, rest) = dims.split_at_checked(pick.axes())?;
        let (w, wrest) = weights.split_at_checked(pick.axes())?;
        (dims, weights) = (rest, wrest);
        let mut shape = outer.to_vec();
        shape.extend(pick.cell());
        let steps = pick
            .index
            .steps_over(pick.cell().len(), nb, outer.len(), &shape)?;
        let (steps, second) = steps.split_at_checked(outer.len())?;
        let second = second.first().copied().unwrap_or(0);
        let Data::Int(index) = &pick.index.v.data else {
            return None;
        };
        let starts = Odometer {
            outer,
            steps,
            at: vec![0; outer.len()],
            base: pick.index.offset,
        };
        let within = |i: i64, d: usize| usize::try_from(i).is_ok_and(|i| i < d);
        match here {
            [d] => {
                let (d, w) = (*d, *w.first()? as i64);
                for (f, s) in flat.iter_mut().zip(starts) {
                    let i = *index.get(s)?;
                    if !within(i, d) {
                        return Some(Err(pick.out_of_range(&[i], here)));
                    }
                    *f += i * w;
                }
            }
            [m, n] => {
                let (m, n) = (*m, *n);
                let [wi, wj] = [*w.first()? as i64, *w.get(1)? as i64];
                for (f, s) in flat.iter_mut().zip(starts) {
                    let (i, j) = (*index.get(s)?, *index.get(s + second)?);
                    if !within(i, m) || !within(j, n) {
                        return Some(Err(pick.out_of_range(&[i, j], here)));
                    }
                    *f += i * wi + j * wj;
                }
            }
            _ => return None,
        }
    }
    Some(Ok(flat))
}
