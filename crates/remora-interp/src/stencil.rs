//! A weighted stencil: `(f.sum (f.* w x))` over cells of several axes,
//! the product never made — a filter's weights (or any factor) times a
//! block of a view (`windows` of `windows`, a transposition), summed over
//! the block. Each cell's sum is the reference's: from the unit, left to
//! right over the cell's atoms in row-major order (a cell of at most
//! `PAIRWISE_LEAF` atoms), each product rounded before it is added.
//!
//! The sums are made a block of frame rows at a time (in cache), one item
//! of the cell after another: for each item, each row's lanes (the last
//! frame axis) take `acc + a · b`, the two factors read where they lie,
//! through their steps (zero where a factor is the same for every cell,
//! as the filter's weights are) — so a 3×3 stencil is nine passes of a
//! multiply and an add over a block of the result, and the blocks, the
//! same size as the view's, are never laid out.

use crate::eval::atoms_in;
use crate::kernel::PAIRWISE_LEAF;

/// A factor: its atoms (from its offset) and its step along each axis of
/// the product.
pub(crate) type Factor<'a> = (&'a [f32], &'a [usize]);

/// `out[p] = seed + a[p, 0]·b[p, 0] + … + a[p, n-1]·b[p, n-1]` (left to
/// right) for each position `p` of `shape`'s first axes, the items the
/// atoms of its last `cell_axes` axes in row-major order. `None` when the
/// cells hold more than `PAIRWISE_LEAF` atoms (their sum is a tree) or a
/// factor does not reach as far as its steps say.
pub(crate) fn cell_sums<'a>(
    a: Factor<'a>,
    b: Factor<'a>,
    shape: &[usize],
    cell_axes: usize,
    seed: f32,
) -> Option<Vec<f32>> {
    let frame_axes = shape.len().checked_sub(cell_axes)?;
    let (frame, cell) = shape.split_at(frame_axes);
    let items = atoms_in(cell);
    if items > PAIRWISE_LEAF || a.1.len() != shape.len() || b.1.len() != shape.len() {
        return None;
    }
    let positions = atoms_in(frame);
    let mut out = crate::kernel::buffer(positions).ok()?;
    out.resize(positions, seed);
    if positions == 0 || items == 0 {
        return Some(out);
    }
    let lanes = frame.last().copied().unwrap_or(1);
    let outer = frame.get(..frame_axes.saturating_sub(1)).unwrap_or_default();
    let lines = |(data, steps): Factor<'a>| Lines {
        data,
        items: (0..items).map(|i| at(cell, &steps[frame_axes..], i)).collect(),
        outer: steps[..outer.len()].to_vec(),
        lane: frame_axes.checked_sub(1).map_or(0, |k| steps[k]),
    };
    let (a, b) = (lines(a), lines(b));
    let per_block = (BLOCK_ATOMS / lanes).max(1) * lanes;
    let block = |(first, out): (usize, &mut [f32])| {
        let rows = first..first + out.len() / lanes;
        let (starts_a, starts_b): (Vec<usize>, Vec<usize>) = rows
            .map(|r| (at(outer, &a.outer, r), at(outer, &b.outer, r)))
            .unzip();
        for (ia, ib) in a.items.iter().zip(&b.items) {
            for ((row, sa), sb) in out.chunks_exact_mut(lanes).zip(&starts_a).zip(&starts_b) {
                let x = a.line(sa + ia, lanes)?;
                let y = b.line(sb + ib, lanes)?;
                add_products(row, x, y)?;
            }
        }
        Some(())
    };
    let blocks = out
        .chunks_mut(per_block)
        .enumerate()
        .map(|(i, o)| (i * per_block / lanes, o));
    let threads = crate::threads();
    let ok = if threads >= 2 && positions.saturating_mul(items) >= 1 << 20 && positions > per_block {
        let parts: Vec<_> = blocks.collect();
        crate::in_parallel(parts, threads.min(positions.div_ceil(per_block)), |p| {
            block(p).is_some()
        })
    } else {
        blocks.map(block).all(|r| r.is_some())
    };
    ok.then_some(out)
}

/// About how many sums [`cell_sums`] keeps at a time (a block of rows).
const BLOCK_ATOMS: usize = 1 << 13;

/// Where atom `i` (row-major) of `shape` lies, by `steps`.
fn at(shape: &[usize], steps: &[usize], mut i: usize) -> usize {
    let mut offset = 0;
    for (&n, &step) in shape.iter().zip(steps).rev() {
        offset += i % n * step;
        i /= n;
    }
    offset
}

/// A factor as [`cell_sums`] reads it: where each item of a cell lies
/// (from the cell's start), the steps of the frame's outer axes, and its
/// step along the lanes.
struct Lines<'a> {
    data: &'a [f32],
    items: Vec<usize>,
    outer: Vec<usize>,
    lane: usize,
}

/// One line of a factor along the lanes.
enum Line<'a> {
    /// The same atom in every lane.
    Same(f32),
    /// One after another.
    Dense(&'a [f32]),
    /// From the first atom, this many apart.
    Strided(&'a [f32], usize),
}

impl<'a> Lines<'a> {
    /// The `lanes` atoms from `start`.
    fn line(&self, start: usize, lanes: usize) -> Option<Line<'a>> {
        Some(match self.lane {
            0 => Line::Same(*self.data.get(start)?),
            1 => Line::Dense(self.data.get(start..start.checked_add(lanes)?)?),
            step => {
                let last = start.checked_add((lanes - 1).checked_mul(step)?)?;
                Line::Strided(self.data.get(start..=last)?, step)
            }
        })
    }
}

/// `row[l] = row[l] + x[l] · y[l]` (the product rounded, then the sum).
fn add_products(row: &mut [f32], x: Line<'_>, y: Line<'_>) -> Option<()> {
    match (x, y) {
        (Line::Same(x), Line::Dense(y)) => row.iter_mut().zip(y).for_each(|(r, &y)| *r += x * y),
        (Line::Dense(x), Line::Same(y)) => row.iter_mut().zip(x).for_each(|(r, &x)| *r += x * y),
        (Line::Dense(x), Line::Dense(y)) => {
            row.iter_mut().zip(x).zip(y).for_each(|((r, &x), &y)| *r += x * y);
        }
        (x, y) => {
            for (l, r) in row.iter_mut().enumerate() {
                *r += pick(&x, l)? * pick(&y, l)?;
            }
        }
    }
    Some(())
}

/// Lane `l` of a line.
fn pick(line: &Line<'_>, l: usize) -> Option<f32> {
    match line {
        Line::Same(x) => Some(*x),
        Line::Dense(xs) => xs.get(l).copied(),
        Line::Strided(xs, step) => xs.get(l.checked_mul(*step)?).copied(),
    }
}
