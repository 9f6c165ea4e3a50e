//! `while` over a frame of cells, all cells stepped together (extensions.md
//! §3): the test runs once over every live cell, batched; the cells whose
//! test fails are finished and leave the live set (as NumPy code keeps a
//! mask, here compacted); the step runs once over the rest. Each cell still
//! loops independently: it takes exactly the steps it would alone.
//!
//! It is an optimisation of the reference semantics, which runs `while`
//! once per cell, in order. The cells go in runs (strips) of
//! `STRIP_CELLS`, in order, so that the live set and the step's
//! intermediates stay small. Whenever a strip cannot run batched (`trace`,
//! an error, a test or step that is not one lambda the same for every
//! cell), the cells from that strip on run one by one: the strips before
//! it ran without error, so the reference path would have reached the same
//! point, and results and errors are always the reference path's.

use crate::batch::{STRIP_CELLS, Try};
use crate::eval::{Fun, Interpreter, Run, Value, fail};
use remora_syntax::Span;
use remora_value::{Array, Atom, Data};

impl<'p> Interpreter {
    /// `(while test step x)` for every cell `x` of `xs` (shape `[n] ++
    /// cell`), where `looping` is `while` applied to `test` and `step`:
    /// the result over the frame, written over `xs`'s buffer (copied first
    /// if another value shares it).
    pub(crate) fn while_over_frame(
        &mut self,
        looping: &Fun<'p>,
        test: &Value<'p>,
        step: &Value<'p>,
        xs: Value<'p>,
        cell: &[usize],
        span: Span,
    ) -> Run<Value<'p>> {
        let n = xs.shape.first().copied().unwrap_or(0);
        let size: usize = cell.iter().product();
        let shape = xs.shape.clone();
        let mut out = xs.data;
        let lambdas = match (single_lambda(test), single_lambda(step)) {
            (Some(t), Some(s)) if !self.reference_only => Some((t, s)),
            _ => None,
        };
        let mut start = 0;
        if let Some((test, step)) = &lambdas {
            // Small cells: each cell's loop a cell program.
            let whole = Array {
                shape: shape.clone(),
                data: out.clone(),
            };
            if let Some(r) = self.loop_by_cell_program(Some(test), None, step, &whole, cell) {
                return Ok(r);
            }
            while start < n {
                let len = STRIP_CELLS.min(n - start);
                let strip = Array {
                    shape: std::iter::once(len).chain(cell.iter().copied()).collect(),
                    data: out.slice(start * size, len * size),
                };
                let Some(done) = self.masked_strip(test, step, strip, cell) else {
                    break;
                };
                if put_rows(&mut out, &done.data, (0..len).map(|r| (r, start + r)), size).is_none() {
                    return fail(span, "internal error: a while step changed the cell's shape");
                }
                start += len;
            }
        }
        // The reference path for the rest: one cell at a time, in order.
        for i in start..n {
            let x = Array {
                shape: cell.to_vec(),
                data: out.slice(i * size, size),
            };
            let done = self.call(looping, x, span)?;
            if done.shape != cell || put_rows(&mut out, &done.data, [(0, i)], size).is_none() {
                return fail(span, "internal error: a while step changed the cell's shape");
            }
        }
        Ok(Array { shape, data: out })
    }

    /// `(while test step xs)` for `xs` of shape `[n] ++ cell` inside a
    /// batch, one loop for all `n` cells; `None` when it gives up (the
    /// batch then runs cell by cell).
    pub(crate) fn masked_while(
        &mut self,
        test: &Value<'p>,
        step: &Value<'p>,
        xs: Value<'p>,
        cell: &[usize],
    ) -> Try<Value<'p>> {
        let (test, step) = (single_lambda(test)?, single_lambda(step)?);
        if let Some(r) = self.loop_by_cell_program(Some(&test), None, &step, &xs, cell) {
            return Some(r);
        }
        let n = *xs.shape.first()?;
        let size: usize = cell.iter().product();
        let mut data = xs.data.with_capacity_like(n.saturating_mul(size));
        for start in (0..n).step_by(STRIP_CELLS) {
            let len = STRIP_CELLS.min(n - start);
            let strip = Array {
                shape: std::iter::once(len).chain(cell.iter().copied()).collect(),
                data: xs.data.slice(start * size, len * size),
            };
            data.append(self.masked_strip(&test, &step, strip, cell)?.data)
                .ok()?;
        }
        Some(Array {
            shape: xs.shape.clone(),
            data,
        })
    }

    /// The masked loop over all of `xs`'s cells at once.
    fn masked_strip(
        &mut self,
        test: &Fun<'p>,
        step: &Fun<'p>,
        xs: Value<'p>,
        cell: &[usize],
    ) -> Try<Value<'p>> {
        let n = *xs.shape.first()?;
        let size: usize = cell.iter().product();
        // The live cells (rows of `x`) and the position each came from.
        let mut x = xs;
        let mut live: Vec<usize> = (0..n).collect();
        // Each finished cell is written at its position (over a copy: the
        // input is kept aside, as giving up reruns it cell by cell).
        let mut out = x.data.clone();
        while !live.is_empty() {
            let go = self.apply_lambda_batched(test, vec![(x.clone(), cell.to_vec())])?;
            let Data::Bool(go) = &go.data else {
                return None;
            };
            if go.len() != live.len() {
                return None;
            }
            let (keep, stop): (Vec<usize>, Vec<usize>) = (0..live.len()).partition(|&r| go[r]);
            if !stop.is_empty() {
                put_rows(&mut out, &x.data, stop.iter().map(|&r| (r, live[r])), size)?;
                if keep.is_empty() {
                    break;
                }
                x = Array {
                    shape: std::iter::once(keep.len()).chain(cell.iter().copied()).collect(),
                    data: take_rows(&x.data, &keep, size),
                };
                live = keep.iter().map(|&r| live[r]).collect();
            }
            x = self.apply_lambda_batched(step, vec![(x, cell.to_vec())])?;
            if x.shape.first() != Some(&live.len()) || x.shape.get(1..) != Some(cell) {
                return None;
            }
        }
        Some(Array {
            shape: std::iter::once(n).chain(cell.iter().copied()).collect(),
            data: out,
        })
    }
}

/// The one lambda of a scalar function array, the same for every cell: not
/// a closure made inside a batch, which holds one value per batch position
/// (the cells of a masked loop are not the batch's positions).
pub(crate) fn single_lambda<'p>(f: &Value<'p>) -> Try<Fun<'p>> {
    match (&f.data, f.shape.is_empty()) {
        (Data::Atoms(a), true) => match a.as_slice() {
            [Atom::Fun(fun @ Fun::Lambda { .. })] if !fun.reads_batch() => Some(fun.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// For each pair `(r, to)`, row `r` of `src` written over row `to` of
/// `out` (rows of `size` atoms; `out` is copied first if another value
/// shares it); `None` when a row is out of range.
pub(crate) fn put_rows<F: Clone>(
    out: &mut Data<F>,
    src: &Data<F>,
    rows: impl IntoIterator<Item = (usize, usize)>,
    size: usize,
) -> Try<()> {
    fn put<T: Clone>(
        out: &mut [T],
        src: &[T],
        rows: impl IntoIterator<Item = (usize, usize)>,
        size: usize,
    ) -> Try<()> {
        if size == 1 {
            for (r, to) in rows {
                *out.get_mut(to)? = src.get(r)?.clone();
            }
            return Some(());
        }
        for (r, to) in rows {
            out.get_mut(to * size..(to + 1) * size)?
                .clone_from_slice(src.get(r * size..(r + 1) * size)?);
        }
        Some(())
    }
    match (out, src) {
        (Data::Int(o), Data::Int(s)) => put(o, s, rows, size),
        (Data::Float(o), Data::Float(s)) => put(o, s, rows, size),
        (Data::Bool(o), Data::Bool(s)) => put(o, s, rows, size),
        (Data::Atoms(o), Data::Atoms(s)) => put(o, s, rows, size),
        (Data::Records(o), Data::Records(s)) if o.fields.len() == s.fields.len() => {
            let rows: Vec<(usize, usize)> = rows.into_iter().collect();
            for (of, sf) in std::sync::Arc::make_mut(o).fields.iter_mut().zip(&s.fields) {
                let atoms = sf.size();
                put_rows(&mut of.data, &sf.data, rows.iter().copied(), size * atoms)?;
            }
            Some(())
        }
        _ => None,
    }
}

/// The rows `rows` (each `size` atoms) of a buffer, in that order.
pub(crate) fn take_rows<F: Clone>(d: &Data<F>, rows: &[usize], size: usize) -> Data<F> {
    fn pick<T: Clone>(v: &[T], rows: &[usize], size: usize) -> Vec<T> {
        if size == 1 {
            return rows.iter().map(|&r| v[r].clone()).collect();
        }
        let mut out = Vec::with_capacity(rows.len() * size);
        for &r in rows {
            out.extend_from_slice(&v[r * size..(r + 1) * size]);
        }
        out
    }
    match d {
        Data::Int(v) => Data::Int(pick(v, rows, size).into()),
        Data::Float(v) => Data::Float(pick(v, rows, size).into()),
        Data::Bool(v) => Data::Bool(pick(v, rows, size).into()),
        Data::Atoms(v) => Data::Atoms(pick(v, rows, size).into()),
        Data::Records(r) => r
            .map_fields(rows.len() * size, |f, atoms| {
                Some(take_rows(f, rows, size * atoms))
            })
            .map_or_else(|| d.empty_like(), Data::records),
    }
}
