//! `sort-by` and `grade-by` by a user's less-than over a frame of cells:
//! every merge of every cell stepped together. The reference sorts each
//! cell on its own by a stable merge sort (`intrinsics::merge_sort`),
//! calling the less-than once per comparison. Here, each pass of that
//! merge sort (runs of `width` merged pairwise) runs all its merges — of
//! all the cells — at once: a step compares, for every merge not yet
//! done, the next item of its right run with the next of its left run, by
//! one batched application of the less-than, and each merge takes the
//! item the reference would take. Every merge makes exactly the
//! comparisons it makes alone, in the same order, so the orders are the
//! reference's for any less-than, even one that is not an order. A pass
//! of width `w` takes at most `2w - 1` steps: about `2n` batched
//! applications in all, instead of about `n log n` calls per cell.
//!
//! The comparisons of a step are laid out as `[cells, lanes]`, the cells
//! being the batch's and the frame's positions, so that a less-than that
//! captures a value of its cell (an argsort of a row, comparing the row's
//! items at two indices) sees its own cell's. A cell with fewer merges
//! left than the most repeats one of its own comparisons (a pure function
//! evaluated again, to the same result, raising nothing new).
//!
//! Whatever cannot run batched (`trace`, an error) gives up, and the
//! reference path runs.

use crate::batch::{Batched, Try};
use crate::eval::{Fun, Interpreter, atoms_in};
use crate::masked::take_rows;
use remora_value::{Array, Atom, Data};

/// One merge of two adjacent runs of one cell: the next item of the left
/// run (`i`, up to `mid`), of the right run (`j`, up to `hi`); the next
/// place written is `i + j - mid`. Places count from the start of the
/// whole frame's order (at most `u32::MAX` of them: 20 bytes a merge, as
/// every step streams them all).
#[derive(Clone, Copy)]
struct Merge {
    cell: u32,
    i: u32,
    mid: u32,
    j: u32,
    hi: u32,
}

impl Merge {
    fn going(&self) -> bool {
        self.i < self.mid && self.j < self.hi
    }

    fn at(x: u32) -> usize {
        x as usize
    }
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
        if !less.v.shape.get(less.nb..)?.is_empty() {
            return None;
        }
        let (&n, item_cell) = xcell.split_first()?;
        // A less-than that reads a value of the batch compares each cell's
        // items by that cell's value: every batch axis is the cells'.
        let reads_batch = match &less.v.data {
            Data::Atoms(atoms) => atoms.iter().any(|a| matches!(a, Atom::Fun(f) if f.reads_batch())),
            _ => false,
        };
        let nb = if reads_batch {
            self.batch.len()
        } else {
            xs.nb.max(less.nb)
        };
        let xs = self.expand(xs, nb)?.densify()?;
        let outer: Vec<usize> =
            xs.v.shape
                .get(..xs.v.shape.len().checked_sub(xcell.len())?)?
                .to_vec();
        let order = self.merge_sort_cells(less, &xs.v.data, (&outer, nb), n, item_cell)?;
        if name == "grade-by" {
            let mut shape = outer;
            shape.push(n);
            let local = order
                .iter()
                .enumerate()
                .map(|(p, &r)| (r - p / n.max(1) * n) as i64);
            let data = Data::Int(local.collect::<Vec<_>>().into());
            return Some(Batched::dense(Array { shape, data }, nb));
        }
        let data = take_rows(&xs.v.data, &order, atoms_in(item_cell));
        Some(Batched::dense(
            Array {
                shape: xs.v.shape.clone(),
                data,
            },
            nb,
        ))
    }

    /// The stable merge sort of each cell of `n` items (items of shape
    /// `item_cell`, row `c * n + r` of `items` for cell `c` of the `outer`
    /// shape, its first `nb` axes the batch's), all merges of a pass
    /// stepped together: for each place, the row of the item there.
    fn merge_sort_cells(
        &mut self,
        less: &Batched<'p>,
        items: &Data<Fun<'p>>,
        (outer, nb): (&[usize], usize),
        n: usize,
        item_cell: &[usize],
    ) -> Try<Vec<usize>> {
        let cells = atoms_in(outer);
        let total = cells.checked_mul(n)?;
        u32::try_from(total).ok()?;
        let mut order: Vec<usize> = (0..total).collect();
        let mut merged = order.clone();
        // Per cell, a comparison it made (rows right and left), repeated
        // where it has none left to make in a step (every cell makes one
        // at the first step, where all its first merges compare).
        let mut made: Vec<(usize, usize)> = vec![(0, 0); cells];
        // The merges of a pass, and those done (kept from pass to pass).
        let mut live: Vec<Merge> = Vec::with_capacity(total.div_ceil(2) + cells);
        let mut done: Vec<Merge> = Vec::with_capacity(live.capacity());
        let mut right = Vec::new();
        let mut left = Vec::new();
        let mut slots = Vec::new();
        let mut lanes = vec![0usize; cells];
        let mut width = 1;
        while width < n {
            live.clear();
            done.clear();
            for cell in 0..cells {
                for lo in (cell * n..(cell + 1) * n).step_by(2 * width) {
                    let mid = (lo + width).min((cell + 1) * n);
                    let hi = (lo + 2 * width).min((cell + 1) * n);
                    live.push(Merge {
                        cell: u32::try_from(cell).ok()?,
                        i: u32::try_from(lo).ok()?,
                        mid: u32::try_from(mid).ok()?,
                        j: u32::try_from(mid).ok()?,
                        hi: u32::try_from(hi).ok()?,
                    });
                }
            }
            loop {
                live.retain(|m| {
                    let going = m.going();
                    if !going {
                        done.push(*m);
                    }
                    going
                });
                if live.is_empty() {
                    break;
                }
                if let Some(fuel) = &mut self.fuel {
                    *fuel = fuel.checked_sub(1)?;
                }
                // Each merge's slot among its cell's lanes (the merges are
                // in the order of their cells).
                lanes.fill(0);
                slots.clear();
                for m in &live {
                    let c = Merge::at(m.cell);
                    slots.push(lanes[c]);
                    lanes[c] += 1;
                }
                let w = lanes.iter().copied().max()?;
                right.clear();
                right.resize(cells * w, 0);
                left.clear();
                left.resize(cells * w, 0);
                for (m, &s) in live.iter().zip(&slots) {
                    let at = Merge::at(m.cell) * w + s;
                    right[at] = order[Merge::at(m.j)];
                    left[at] = order[Merge::at(m.i)];
                }
                // Where a cell has fewer lanes, its first comparison of
                // this step again (or one it made before).
                for (c, &count) in lanes.iter().enumerate() {
                    if count > 0 {
                        made[c] = (right[c * w], left[c * w]);
                    }
                    for at in c * w + count..(c + 1) * w {
                        (right[at], left[at]) = made[c];
                    }
                }
                let mut lane_frame = outer.to_vec();
                lane_frame.push(w);
                let takes = self.less_over(less, items, (&right, &left), (&lane_frame, nb), item_cell)?;
                for (m, &s) in live.iter_mut().zip(&slots) {
                    let k = Merge::at(m.i + (m.j - m.mid));
                    // Take from the right run only when strictly less.
                    if *takes.get(Merge::at(m.cell) * w + s)? {
                        merged[k] = order[Merge::at(m.j)];
                        m.j += 1;
                    } else {
                        merged[k] = order[Merge::at(m.i)];
                        m.i += 1;
                    }
                }
            }
            // What is left of either run, in order.
            for m in &done {
                let rest = (m.i..m.mid).chain(m.j..m.hi);
                for (k, from) in (Merge::at(m.i + (m.j - m.mid))..).zip(rest) {
                    merged[k] = order[Merge::at(from)];
                }
            }
            std::mem::swap(&mut order, &mut merged);
            width *= 2;
        }
        Some(order)
    }

    /// `(less a b)` for each pair of rows `a` of `firsts`, `b` of
    /// `seconds` of `items`, laid over `frame` (its first `nb` axes the
    /// batch's), by one batched application.
    fn less_over(
        &mut self,
        less: &Batched<'p>,
        items: &Data<Fun<'p>>,
        (firsts, seconds): (&[usize], &[usize]),
        (frame, nb): (&[usize], usize),
        item_cell: &[usize],
    ) -> Try<Vec<bool>> {
        let size = atoms_in(item_cell);
        let rows = |at: &[usize]| -> Batched<'p> {
            let shape = frame.iter().chain(item_cell).copied().collect();
            Batched::dense(
                Array {
                    shape,
                    data: take_rows(items, at, size),
                },
                nb,
            )
        };
        let args = vec![
            (rows(firsts), item_cell.to_vec()),
            (rows(seconds), item_cell.to_vec()),
        ];
        let r = self.apply_batched(less, args)?;
        let r = self.expand(&r, nb)?.densify()?;
        match &r.v.data {
            Data::Bool(b) if r.v.shape == frame => Some(b.to_vec()),
            _ => None,
        }
    }
}
