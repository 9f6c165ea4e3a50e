//! `sort-by` and `grade-by` by a user's less-than over a frame of cells:
//! every merge of every cell stepped together. The reference sorts each
//! cell on its own by a stable merge sort (`intrinsics::merge_sort`),
//! calling the less-than once per comparison. Here, each pass of that
//! merge sort (runs of `width` merged pairwise) runs all its merges — of
//! all the cells — at once: a step compares, for every merge not yet
//! done, the next item of its right run with the next of its left run, by
//! one batched application of the less-than over all those pairs, and
//! each merge takes the item the reference would take. Every merge makes
//! exactly the comparisons it makes alone, in the same order, so the
//! orders are the reference's for any less-than, even one that is not an
//! order. A pass of width `w` takes at most `2w - 1` steps: about `2n`
//! batched applications in all, instead of about `n log n` calls per cell.
//!
//! Whatever cannot run batched (`trace`, an error, a less-than that
//! differs from cell to cell) gives up, and the reference path runs.

use crate::batch::{Batched, Try};
use crate::eval::{Fun, Interpreter, Value, atoms_in};
use crate::masked::take_rows;
use remora_value::{Array, Atom, Data};

/// One merge of two adjacent runs of one cell: the next item of the left
/// run (`i`, up to `mid`), of the right run (`j`, up to `hi`), and the
/// next place written (`k`). Places count from the start of the cell's
/// order in the whole frame's.
#[derive(Clone, Copy)]
struct Merge {
    i: usize,
    mid: usize,
    j: usize,
    hi: usize,
    k: usize,
}

impl<'p> Interpreter {
    /// `sort-by`/`grade-by` (`name`) by `less` over `xs`, whose own shape
    /// is a frame, then `[n] ++ cell`: the cells sorted (or their grades).
    pub(crate) fn sort_by_batched(
        &mut self,
        name: &str,
        less: &Batched<'p>,
        xs: &Batched<'p>,
        xcell: &[usize],
    ) -> Try<Batched<'p>> {
        if less.nb != 0 || !less.v.shape.is_empty() {
            return None;
        }
        let (&n, item_cell) = xcell.split_first()?;
        let xs = xs.densify()?;
        let outer_rank = xs.v.shape.len().checked_sub(xcell.len())?;
        let cells = atoms_in(xs.v.shape.get(..outer_rank)?);
        let size: usize = item_cell.iter().product();
        let order = self.merge_sort_cells(less, &xs.v.data, cells, n, item_cell, size)?;
        if name == "grade-by" {
            let mut shape = xs.v.shape.get(..outer_rank)?.to_vec();
            shape.push(n);
            let local = order.iter().enumerate().map(|(p, &r)| (r - p / n.max(1) * n) as i64);
            let data = Data::Int(local.collect::<Vec<_>>().into());
            return Some(Batched::dense(Array { shape, data }, xs.nb));
        }
        let data = take_rows(&xs.v.data, &order, size);
        Some(Batched::dense(
            Array {
                shape: xs.v.shape.clone(),
                data,
            },
            xs.nb,
        ))
    }

    /// The stable merge sort of each of `cells` cells of `n` items (items
    /// of `size` atoms of shape `item_cell`, row `c * n + r` of `items`),
    /// all merges of a pass stepped together: for each place, the row of
    /// the item there.
    fn merge_sort_cells(
        &mut self,
        less: &Batched<'p>,
        items: &Data<Fun<'p>>,
        cells: usize,
        n: usize,
        item_cell: &[usize],
        size: usize,
    ) -> Try<Vec<usize>> {
        let total = cells.checked_mul(n)?;
        let mut order: Vec<usize> = (0..total).collect();
        let mut merged = order.clone();
        let mut width = 1;
        while width < n {
            let mut live = Vec::new();
            for c in 0..cells {
                for lo in (c * n..(c + 1) * n).step_by(2 * width) {
                    let mid = (lo + width).min((c + 1) * n);
                    let hi = (lo + 2 * width).min((c + 1) * n);
                    live.push(Merge {
                        i: lo,
                        mid,
                        j: mid,
                        hi,
                        k: lo,
                    });
                }
            }
            let mut done = Vec::with_capacity(live.len());
            while !live.is_empty() {
                if let Some(fuel) = &mut self.fuel {
                    *fuel = fuel.checked_sub(1)?;
                }
                let (still, finished): (Vec<Merge>, Vec<Merge>) =
                    live.into_iter().partition(|m| m.i < m.mid && m.j < m.hi);
                done.extend(finished);
                live = still;
                if live.is_empty() {
                    break;
                }
                // Take from the right run only when strictly less.
                let right: Vec<usize> = live.iter().map(|m| order[m.j]).collect();
                let left: Vec<usize> = live.iter().map(|m| order[m.i]).collect();
                let takes_right = self.less_over(less, items, &right, &left, item_cell, size)?;
                for (m, right) in live.iter_mut().zip(takes_right) {
                    if right {
                        merged[m.k] = order[m.j];
                        m.j += 1;
                    } else {
                        merged[m.k] = order[m.i];
                        m.i += 1;
                    }
                    m.k += 1;
                }
            }
            // What is left of either run, in order.
            for m in done {
                let rest = (m.i..m.mid).chain(m.j..m.hi);
                for (k, from) in (m.k..).zip(rest) {
                    merged[k] = order[from];
                }
            }
            std::mem::swap(&mut order, &mut merged);
            width *= 2;
        }
        Some(order)
    }

    /// `(less a b)` for each pair of rows `a` of `firsts`, `b` of
    /// `seconds` of `items`, by one batched application.
    fn less_over(
        &mut self,
        less: &Batched<'p>,
        items: &Data<Fun<'p>>,
        firsts: &[usize],
        seconds: &[usize],
        item_cell: &[usize],
        size: usize,
    ) -> Try<Vec<bool>> {
        let rows = |at: &[usize]| -> Value<'p> {
            Array {
                shape: std::iter::once(at.len()).chain(item_cell.iter().copied()).collect(),
                data: take_rows(items, at, size),
            }
        };
        let args = vec![
            (Batched::plain(rows(firsts)), item_cell.to_vec()),
            (Batched::plain(rows(seconds)), item_cell.to_vec()),
        ];
        let r = match &less.v.data {
            // A lambda: its body over all the pairs (in strips, if many).
            Data::Atoms(atoms) if let Some(Atom::Fun(fun @ Fun::Lambda { .. })) = atoms.get(less.offset) => {
                self.apply_lambda_to_views(fun, args)?
            }
            _ => {
                let saved = std::mem::take(&mut self.batch);
                let r = self.apply_batched(less, args);
                self.batch = saved;
                r?.densify()?.v
            }
        };
        match &r.data {
            Data::Bool(b) if r.shape == [firsts.len()] => Some(b.to_vec()),
            _ => None,
        }
    }
}
