//! A reduction along an axis of a view (`windows`, a transposition: atoms
//! strided over another array's buffer) without laying the view out: the
//! first item read out, then each further item combined into it where it
//! lies. A 3×3 stencil written as windows of windows, summed, holds the
//! sums, never the nine-times-larger blocks.

use crate::batch::Batched;
use crate::eval::{Fun, atoms_in};
use crate::kernel::{Layout, Order, PAIRWISE_LEAF};
use remora_value::{Array, Data};

/// Where each atom of [`reduce_view`]'s result starts.
pub(crate) enum Start<'a, 'p> {
    /// From the first item (`reduce`).
    First,
    /// From one atom, the same for every result atom (a whole-cell fold's
    /// unit: `f.sum` from 0.0).
    Unit(&'a Data<Fun<'p>>),
    /// From the atom at the same place of an array laid out as the result
    /// (`fold`'s seed, one for each position).
    Each(&'a Data<Fun<'p>>),
}

/// `(reduce op xs)` along axis `axis` of the view `xs` (`Start::First`),
/// or — from a seed — a fold from it over the atoms of the cells
/// of `cell_axes` axes from `axis` (row-major: `f.sum` of a block of a
/// stencil): left to right, as `reduce` combines up to `PAIRWISE_LEAF`
/// items (without a seed, any number for an operator other than `f.+`), so the bits
/// are those of the fold over the laid-out view. The result is made a
/// strip of its first axis at a time, each strip's items read while the
/// strip is in cache. `None` when the view is laid out anyway (dense),
/// the items are too many for that order, or `op` is not one that
/// combines in place (the caller then lays the view out).
pub(crate) fn reduce_view<'p>(
    op: &str,
    order: Order,
    xs: &Batched<'p>,
    (axis, cell_axes): (usize, usize),
    start: Start<'_, 'p>,
) -> Option<Batched<'p>> {
    let cell = xs.v.shape.get(axis..axis.checked_add(cell_axes)?)?;
    let items = atoms_in(cell);
    // (A fold from a seed, over whole cells, only of a few atoms a cell:
    // one pass over the result for each.)
    let seeded = !matches!(start, Start::First);
    if xs.is_dense()
        || (items == 0 && !seeded)
        || ((order == Order::Tree || seeded) && items > PAIRWISE_LEAF)
        || order == Order::Scan
    {
        return None;
    }
    // Where item `i` starts (from the view's offset): its index in the
    // cell, row-major, by the cell's steps.
    let cell_steps = xs.strides.get(axis..axis + cell_axes)?;
    let item_at = |mut i: usize| {
        let mut at = 0;
        for (&n, &step) in cell.iter().zip(cell_steps).rev() {
            at += i % n * step;
            i /= n;
        }
        at
    };
    let mut shape = xs.v.shape.clone();
    let mut strides = xs.strides.clone();
    shape.drain(axis..axis + cell_axes);
    strides.drain(axis..axis + cell_axes);
    let rows = shape.first().copied().unwrap_or(1);
    let per_row = atoms_in(shape.get(1..).unwrap_or_default()).max(1);
    let strip = (STRIP_ATOMS / per_row).max(1);
    if let Start::Each(s) = start
        && s.len() != atoms_in(&shape)
    {
        return None;
    }
    let mut out = xs.v.data.with_capacity_like(atoms_in(&shape));
    for r0 in (0..rows).step_by(strip) {
        let mut part = shape.clone();
        if let Some(first) = part.first_mut() {
            *first = strip.min(rows - r0);
        }
        let base = xs.offset + r0 * strides.first().copied().unwrap_or(0);
        let item = |i: usize| Layout {
            offset: base + item_at(i),
            strides: strides.clone(),
        };
        let (mut acc, from) = match start {
            Start::Unit(s) => (s.repeated(atoms_in(&part))?, 0),
            Start::Each(s) => (s.slice(r0 * per_row, atoms_in(&part)), 0),
            Start::First => (
                xs.view(part.clone(), xs.nb, base, strides.clone())
                    .densify()?
                    .v
                    .data,
                1,
            ),
        };
        for i in from..items {
            crate::scalar::apply_in_place(op, &mut acc, (&xs.v.data, &item(i)), true, &part)?.ok()?;
        }
        out.append(acc).ok()?;
    }
    Some(Batched::dense(Array { shape, data: out }, xs.nb))
}

/// About how many atoms of a result [`reduce_view`] makes at a time.
const STRIP_ATOMS: usize = 1 << 14;

/// `(rotate xs s)` inside a batch, `xs` the same at every position (one
/// array, no frame of its own) and the shift one number per position,
/// stepping evenly along each batch axis (`(rotate xs k)` over `k` from a
/// range, as a correlation or a stencil by shifts writes it): a view of
/// `xs` laid out twice end to end, each position's rotation starting at
/// its shift. `None` for any other shifts (the caller rotates each
/// position's copy).
pub(crate) fn rotate_view<'p>(
    xs: &Batched<'p>,
    acell: &[usize],
    k: &Batched<'p>,
    batch: &[usize],
) -> Option<Batched<'p>> {
    let d = *acell.first()?;
    if xs.nb != 0 || xs.v.shape != acell || k.nb == 0 || !k.own().is_empty() || d == 0 {
        return None;
    }
    let frame = batch.get(..k.nb)?;
    let item: usize = acell.get(1..)?.iter().product();
    let shifts = k.densify()?;
    let remora_value::Data::Int(s) = &shifts.v.data else {
        return None;
    };
    let d_i = i64::try_from(d).ok()?;
    let at = |pos: usize| -> Option<usize> { usize::try_from(s.get(pos)?.rem_euclid(d_i)).ok() };
    // The shift at the origin and its step along each batch axis (none
    // backwards): every position's shift must be what they make.
    let first = at(0)?;
    let steps_in_atoms = crate::kernel::row_major(frame);
    let mut steps = Vec::with_capacity(frame.len());
    for (axis, &len) in frame.iter().enumerate() {
        let step = if len > 1 {
            at(*steps_in_atoms.get(axis)?)?.checked_sub(first)?
        } else {
            0
        };
        steps.push(step);
    }
    let positions: usize = frame.iter().product();
    if positions > 1 << 20 {
        return None;
    }
    for pos in 0..positions {
        let mut want = first;
        let mut rest = pos;
        for (axis, &len) in frame.iter().enumerate().rev() {
            want += (rest % len) * steps.get(axis)?;
            rest /= len;
        }
        if want >= d || at(pos)? != want {
            return None;
        }
    }
    let once = xs.densify()?.v;
    let mut twice = once.data.clone();
    twice.append(once.data.clone()).ok()?;
    let mut strides: Vec<usize> = steps.iter().map(|st| st * item).collect();
    strides.extend(crate::kernel::row_major(acell));
    Some(Batched {
        v: Array {
            shape: frame.iter().chain(acell).copied().collect(),
            data: twice,
        },
        nb: k.nb,
        offset: first * item,
        strides,
    })
}

/// `(reverse xs)` along axis `axis` of a view whose axes nearer in memory
/// than `axis` make one contiguous block (a scan's steps stacked item
/// after item, the batch under each: `reverse` of its items is then a
/// copy of whole blocks in reverse order). The result keeps the view's
/// order of axes in memory, laid out densely, so the block that held
/// item `i` is copied whole to where item `d-1-i` goes. `None` for any
/// other layout (an axis repeated by a zero step, a gap inside the
/// block): the caller lays the view out and reverses that.
pub(crate) fn reverse_in_memory_order<'p>(xs: &Batched<'p>, axis: usize) -> Option<Batched<'p>> {
    let shape = &xs.v.shape;
    let d = *shape.get(axis)?;
    let block = *xs.strides.get(axis)?;
    // Axes in memory order, outermost first (the longer step; the axis
    // nearer the front among equals); those of one position are anywhere.
    let mut order: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] > 1).collect();
    if d < 2 || block == 0 || xs.v.data.is_empty() {
        return None;
    }
    order.sort_by_key(|&a| (std::cmp::Reverse(xs.strides[a]), a));
    let at = order.iter().position(|&a| a == axis)?;
    let (outside, inner) = order.split_at(at);
    // The axes inside the block: dense, exactly `block` atoms.
    let mut atoms = 1usize;
    for &a in inner.iter().skip(1).rev() {
        if xs.strides[a] != atoms {
            return None;
        }
        atoms = atoms.checked_mul(shape[a])?;
    }
    if atoms != block {
        return None;
    }
    // The start of every block in the result's order: the outside axes
    // by an odometer, then the items from last to first.
    let positions = atoms_in(&outside.iter().map(|&a| shape[a]).collect::<Vec<_>>());
    let mut starts = Vec::with_capacity(positions.checked_mul(d)?);
    let mut index = vec![0usize; outside.len()];
    for _ in 0..positions {
        let base = outside.iter().zip(&index).try_fold(xs.offset, |o, (&a, &i)| {
            o.checked_add(i.checked_mul(xs.strides[a])?)
        })?;
        for i in (0..d).rev() {
            starts.push(base.checked_add(i.checked_mul(block)?)?);
        }
        for (i, &a) in index.iter_mut().zip(outside).rev() {
            *i += 1;
            if *i < shape[a] {
                break;
            }
            *i = 0;
        }
    }
    let last = starts.iter().max()?.checked_add(block)?;
    if last > xs.v.data.len() {
        return None;
    }
    let data = crate::batch::pick_data(&xs.v.data, &starts, block)?;
    // The same memory order, laid out densely.
    let mut strides = vec![0; shape.len()];
    let mut step = 1usize;
    for &a in order.iter().rev() {
        strides[a] = step;
        step = step.checked_mul(shape[a])?;
    }
    Some(Batched {
        v: Array {
            shape: shape.clone(),
            data,
        },
        nb: xs.nb,
        offset: 0,
        strides,
    })
}
