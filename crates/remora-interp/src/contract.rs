//! Fused multiply-reduce: `(f.sum (f.* x y))` and `(reduce f.+ (f.* x y))`
//! — a dot product, and, lifted over frames, a matrix-vector or matrix
//! product as the papers write them — run as one pass that never builds
//! the product array (which, for a matrix product written as a lifted dot,
//! is the whole `[m p n]` cube).
//!
//! The operands are read in place through their steps (zero where an
//! operand is replicated, as lifting replicates it), so the rule holds for
//! any frames and any way the lifting was written. The sum is the same
//! bits as the product summed by `reduce` (`kernel::Order::Tree`): each
//! product rounded, then added in the tree's order. Many sums run side by
//! side along a *lane* axis (the item's inner axis for `reduce`, else the
//! last frame axis), so the additions vectorise across sums while each sum
//! keeps its own order.

use crate::batch::{Batched, Try, place};
use crate::eval::{Env, Interpreter, atoms_in, check_size};
use crate::kernel::{Layout, PAIRWISE_LEAF, row_major};
use remora_check::typed::{TExpr, TExprKind};
use remora_syntax::Span;
use remora_value::{Array, Data};

/// The sums of `[outer, items, lanes]` products, as prepared by
/// [`Interpreter::contraction`]: each operand dense over the axes it varies
/// on, with its steps over `(outer …, items, lanes)` (zero where
/// replicated; the lane step 0 or 1).
struct Operand<'a> {
    data: &'a [f32],
    outer: Vec<usize>,
    item: usize,
    lane: usize,
}

impl<'p> Interpreter {
    /// `e` as a fused multiply-reduce, when it is one: an application of
    /// `f.sum` (over a vector cell) or `reduce` by `f.+` to `(f.* x y)`.
    /// `None` when `e` is not of that form or the operands do not suit
    /// (the caller then evaluates `e` as written).
    pub(crate) fn contraction(&mut self, e: &'p TExpr, env: &Env<'p>) -> Try<Batched<'p>> {
        let (reducer, product, lifted) = contraction_form(e)?;
        if let Reducer::Reduce(op) = reducer {
            let op = self.eval_batched(op, env)?;
            if op.nb != 0 || crate::intrinsics::scalar_operator(&op.densify()?.v) != Some("f.+") {
                return None;
            }
        }
        let TExprKind::App { func, arg: y, .. } = &product.kind else {
            return None;
        };
        let TExprKind::App { arg: x, .. } = &func.kind else {
            return None;
        };
        let xcell = self.shape_of(&lifted.arg_cell, env, e.span).ok()?;
        let a = self.eval_batched(x, env)?;
        let b = self.eval_batched(y, env)?;
        let (own_a, own_b) = (a.v.shape.get(a.nb..)?, b.v.shape.get(b.nb..)?);
        let frame = if own_a.len() >= own_b.len() { own_a } else { own_b }.to_vec();
        if !frame.starts_with(own_a) || !frame.starts_with(own_b) {
            return None;
        }
        let nb = a.nb.max(b.nb);
        let mut shape: Vec<usize> = self.batch.get(..nb)?.to_vec();
        shape.extend(&frame);
        // [outer …, items, inner …] of the product.
        let (items_at, seed) = match reducer {
            Reducer::Sum if xcell.len() == 1 => (shape.len().checked_sub(1)?, Some(0.0f32)),
            Reducer::Reduce(_) if !xcell.is_empty() => (shape.len().checked_sub(xcell.len())?, None),
            _ => return None,
        };
        let items = *shape.get(items_at)?;
        if items == 0 && seed.is_none() {
            return None;
        }
        let steps_a = place(&a.strides, a.nb, nb, shape.len());
        let steps_b = place(&b.strides, b.nb, nb, shape.len());
        let (Data::Float(da), Data::Float(db)) = (&a.v.data, &b.v.data) else {
            return None;
        };
        // (A view's atoms start at its offset.)
        let (da, db) = (da.get(a.offset..)?, db.get(b.offset..)?);
        // The lanes: the inner axes (one axis, flattened, when both
        // operands step through them alike), else the last outer axis.
        let (lane_axes, outer_axes): (Vec<usize>, Vec<usize>) = if items_at + 1 < shape.len() {
            ((items_at + 1..shape.len()).collect(), (0..items_at).collect())
        } else if items_at > 0 {
            (vec![items_at - 1], (0..items_at - 1).collect())
        } else {
            (Vec::new(), Vec::new())
        };
        let outer_shape: Vec<usize> = outer_axes.iter().map(|&i| shape[i]).collect();
        let lanes: usize = lane_axes.iter().map(|&i| shape[i]).product();
        let result_atoms = atoms_in(&outer_shape).checked_mul(lanes)?;
        check_size(result_atoms, Span::default()).ok()?;
        let ra = relayout(da, &steps_a, &shape, &outer_axes, items_at, &lane_axes)?;
        let rb = relayout(db, &steps_b, &shape, &outer_axes, items_at, &lane_axes)?;
        let out = contract(&ra.operand(), &rb.operand(), &outer_shape, items, lanes, seed)?;
        // The result: the product's shape less the summed axis, laid out
        // [outer …, lanes …] — the same order when the lanes are the inner
        // axes or the last frame axis.
        let mut result_shape = shape.clone();
        result_shape.remove(items_at);
        Some(Batched::dense(
            Array {
                shape: result_shape,
                data: Data::Float(out.into()),
            },
            nb,
        ))
    }
}

/// What reduces the product.
enum Reducer<'p> {
    /// `f.sum` (from 0.0).
    Sum,
    /// `reduce` by this operator (which must be `f.+`).
    Reduce(&'p TExpr),
}

/// `(f.sum P)` or `(reduce op P)` with `P` an application of `f.*` to two
/// arguments: the reducer, `P`, and the lifting of the reducer's argument.
fn contraction_form(e: &TExpr) -> Option<(Reducer<'_>, &TExpr, &remora_types::Lifted)> {
    let (head, spine) = e.spine();
    let mut name = head;
    while let TExprKind::TApp { func, .. } | TExprKind::IApp { func, .. } = &name.kind {
        name = func;
    }
    let TExprKind::Intrinsic(name) = name.kind else {
        return None;
    };
    let (reducer, (product, lifted)) = match (name, spine.as_slice()) {
        ("f.sum", [p]) => (Reducer::Sum, *p),
        ("reduce", [(op, _), p]) => (Reducer::Reduce(op), *p),
        _ => return None,
    };
    let TExprKind::App { func, .. } = &product.kind else {
        return None;
    };
    let TExprKind::App { func: times, .. } = &func.kind else {
        return None;
    };
    matches!(times.kind, TExprKind::Intrinsic("f.*")).then_some((reducer, product, lifted))
}

/// An operand copied densely over the axes it varies on, in the order
/// `(outer …, items, lanes …)`, and its steps over them (zero on the axes
/// it is replicated along).
struct Relaid<'a> {
    data: std::borrow::Cow<'a, [f32]>,
    outer: Vec<usize>,
    item: usize,
    lane: usize,
}

impl Relaid<'_> {
    fn operand(&self) -> Operand<'_> {
        Operand {
            data: &self.data,
            outer: self.outer.clone(),
            item: self.item,
            lane: self.lane,
        }
    }
}

fn relayout<'a>(
    data: &'a [f32],
    steps: &[usize],
    shape: &[usize],
    outer_axes: &[usize],
    items_at: usize,
    lane_axes: &[usize],
) -> Option<Relaid<'a>> {
    let order: Vec<usize> = outer_axes
        .iter()
        .copied()
        .chain(std::iter::once(items_at))
        .chain(lane_axes.iter().copied())
        .collect();
    // The operand's own extent along each axis: 1 where it is replicated.
    let extent: Vec<usize> = order
        .iter()
        .map(|&i| if steps[i] == 0 { 1 } else { shape[i] })
        .collect();
    let from: Vec<usize> = order.iter().map(|&i| steps[i]).collect();
    let packed = row_major(&extent);
    let lanes_from = outer_axes.len() + 1;
    // A view whose lanes lie one after another (outer and item steps any:
    // shifted copies of one signal, a window) is read where it is too.
    let mut run = 1;
    let lanes_in_a_row = (lanes_from..order.len()).rev().all(|k| {
        let ok = extent[k] == 1 || from[k] == run;
        run *= extent[k];
        ok
    });
    let last = (0..extent.len())
        .map(|k| extent[k].saturating_sub(1).saturating_mul(from[k]))
        .fold(0usize, usize::saturating_add);
    if lanes_in_a_row && extent.iter().all(|&e| e > 0) && last < data.len() {
        let step = |k: usize| if extent[k] == 1 { 0 } else { from[k] };
        let lane = match (lanes_from..order.len()).map(step).any(|s| s != 0) {
            false => 0,
            true if (lanes_from..order.len()).all(|k| extent[k] == shape[order[k]]) => 1,
            true => return None,
        };
        return Some(Relaid {
            data: std::borrow::Cow::Borrowed(data),
            outer: (0..outer_axes.len()).map(step).collect(),
            item: step(outer_axes.len()),
            lane,
        });
    }
    // An operand already laid out so is read where it is.
    let in_place =
        (0..extent.len()).all(|k| extent[k] == 1 || from[k] == packed[k]) && data.len() >= atoms_in(&extent);
    let dense = if in_place {
        std::borrow::Cow::Borrowed(data)
    } else {
        let layout = Layout {
            offset: 0,
            strides: from,
        };
        std::borrow::Cow::Owned(crate::kernel::gather(&extent, data, &layout).ok()?)
    };
    let step = |k: usize| if extent[k] == 1 { 0 } else { packed[k] };
    // Lanes flattened: they must be all replicated or all dense.
    let lane_steps: Vec<usize> = (lanes_from..order.len()).map(step).collect();
    let lane = match lane_steps.last() {
        None => 0,
        Some(_) if lane_steps.iter().all(|s| *s == 0) => 0,
        Some(_) if (lanes_from..order.len()).all(|k| extent[k] == shape[order[k]]) => 1,
        Some(_) => return None,
    };
    Some(Relaid {
        data: dense,
        outer: (0..outer_axes.len()).map(step).collect(),
        item: step(outer_axes.len()),
        lane,
    })
}

/// `out[o, l] = Σ_k a[o, k, l] · b[o, k, l]`, each sum in the order of
/// `kernel::Order::Tree` (from `seed` when given). The rows `o` are shared
/// among threads (`crate::threads`); no sum's order depends on that.
fn contract(
    a: &Operand<'_>,
    b: &Operand<'_>,
    outer: &[usize],
    items: usize,
    lanes: usize,
    seed: Option<f32>,
) -> Option<Vec<f32>> {
    let positions = atoms_in(outer);
    let mut out = vec![0.0f32; positions.checked_mul(lanes)?];
    // Where each row's operands start.
    let mut bases = Vec::with_capacity(positions);
    let mut odometer = vec![0usize; outer.len()];
    let (mut base_a, mut base_b) = (0usize, 0usize);
    for _ in 0..positions {
        bases.push((base_a, base_b));
        for axis in (0..outer.len()).rev() {
            odometer[axis] += 1;
            base_a += a.outer[axis];
            base_b += b.outer[axis];
            if odometer[axis] < outer[axis] {
                break;
            }
            base_a -= a.outer[axis] * outer[axis];
            base_b -= b.outer[axis] * outer[axis];
            odometer[axis] = 0;
        }
    }
    // A product whose one operand is the same row for consecutive sums
    // (a matrix product: `b` shared by the rows of `a`) runs `GROUP` rows
    // at a time, each item of the shared row loaded once for all of them.
    // Multiplication commutes exactly, so the operand that varies along
    // the lanes is taken as `b`.
    let (a, b, swapped) = if a.lane == 1 && b.lane == 0 {
        (b, a, true)
    } else {
        (a, b, false)
    };
    let grouped = a.lane == 0 && b.lane == 1 && lanes >= NR;
    let rows = |out: &mut [f32], bases: &[(usize, usize)]| -> Option<()> {
        for (group, bases) in out.chunks_mut(lanes.max(1) * GROUP).zip(bases.chunks(GROUP)) {
            let bases: Vec<(usize, usize)> = if swapped {
                bases.iter().map(|&(x, y)| (y, x)).collect()
            } else {
                bases.to_vec()
            };
            if grouped
                && bases.len() == GROUP
                && bases.iter().all(|&(_, y)| Some(y) == bases.first().map(|p| p.1))
            {
                group_sum(a, b, &bases, items, seed, group)?;
            } else {
                for (row, &base) in group.chunks_exact_mut(lanes.max(1)).zip(&bases) {
                    row_sum(a, b, base, items, seed, row)?;
                }
            }
        }
        Some(())
    };
    let work = positions.saturating_mul(items).saturating_mul(lanes);
    let threads = crate::threads().min(positions);
    if threads < 2 || work < 1 << 20 || lanes == 0 {
        rows(&mut out, &bases)?;
        return Some(out);
    }
    // Parts of rows shared among the threads.
    // (Whole groups of rows, see `group_sum`.)
    let per = positions.div_ceil(threads * 4).next_multiple_of(GROUP);
    let parts: Vec<Part<'_>> = out.chunks_mut(per * lanes).zip(bases.chunks(per)).collect();
    let ok = crate::in_parallel(parts, threads, |(part, bases)| rows(part, bases).is_some());
    ok.then_some(out)
}

/// Rows of sums to compute, and where their operands start.
type Part<'a> = (&'a mut [f32], &'a [(usize, usize)]);

/// One row of sums (see [`contract`]).
fn row_sum(
    a: &Operand<'_>,
    b: &Operand<'_>,
    (base_a, base_b): (usize, usize),
    items: usize,
    seed: Option<f32>,
    row: &mut [f32],
) -> Option<()> {
    let lanes = row.len();
    match seed {
        Some(s) if items <= PAIRWISE_LEAF => {
            // A left fold from the seed: the seed is its first term.
            row.fill(s);
            leaf_into(a, b, base_a, base_b, 0, items, row)
        }
        Some(s) => {
            for (r, x) in row.iter_mut().zip(tree(a, b, (base_a, base_b), 0, items, lanes)?) {
                *r = s + x;
            }
            Some(())
        }
        None => {
            row.copy_from_slice(&tree(a, b, (base_a, base_b), 0, items, lanes)?);
            Some(())
        }
    }
}

/// The tree sum of items `k0 .. k0 + n` for every lane (`n ≥ 1`), as
/// `kernel::Order::Tree` sums: each leaf from its first product, left to
/// right.
fn tree(
    a: &Operand<'_>,
    b: &Operand<'_>,
    base: (usize, usize),
    k0: usize,
    n: usize,
    lanes: usize,
) -> Option<Vec<f32>> {
    let (base_a, base_b) = base;
    if n <= PAIRWISE_LEAF {
        let mut acc = vec![0.0f32; lanes];
        let (oa, ob) = (base_a + k0 * a.item, base_b + k0 * b.item);
        for (l, x) in acc.iter_mut().enumerate() {
            *x = a.data.get(oa + l * a.lane)? * b.data.get(ob + l * b.lane)?;
        }
        leaf_into(a, b, base_a, base_b, k0 + 1, n.checked_sub(1)?, &mut acc)?;
        return Some(acc);
    }
    let half = n / 2;
    let mut left = tree(a, b, base, k0, half, lanes)?;
    let right = tree(a, b, base, k0 + half, n - half, lanes)?;
    for (x, y) in left.iter_mut().zip(right) {
        *x += y;
    }
    Some(left)
}

/// How many lanes one pass over the items carries in registers.
const CHUNK: usize = 32;

/// Sums computed together when one operand's row is shared by them (see
/// [`group_sum`]): a register tile of `GROUP` rows × `NR` lanes.
const GROUP: usize = 4;
/// Lanes of a register tile.
const NR: usize = 8;

/// [`row_sum`] for `GROUP` rows at once, whose `b` row is the same (`a`
/// replicated along the lanes, `b` dense along them): `out` holds the
/// rows one after another. Each sum is the same bits as `row_sum`'s.
fn group_sum(
    a: &Operand<'_>,
    b: &Operand<'_>,
    bases: &[(usize, usize)],
    items: usize,
    seed: Option<f32>,
    out: &mut [f32],
) -> Option<()> {
    let lanes = out.len() / GROUP;
    let base_a: [usize; GROUP] = std::array::from_fn(|r| bases.get(r).map_or(0, |p| p.0));
    let base_b = bases.first()?.1;
    match seed {
        Some(s) if items <= PAIRWISE_LEAF => {
            out.fill(s);
            group_leaf(a, b, base_a, base_b, 0, items, lanes, out)
        }
        Some(s) => {
            for (r, x) in out
                .iter_mut()
                .zip(group_tree(a, b, base_a, base_b, 0, items, lanes)?)
            {
                *r = s + x;
            }
            Some(())
        }
        None => {
            out.copy_from_slice(&group_tree(a, b, base_a, base_b, 0, items, lanes)?);
            Some(())
        }
    }
}

/// [`tree`] for `GROUP` rows sharing their `b` row.
fn group_tree(
    a: &Operand<'_>,
    b: &Operand<'_>,
    base_a: [usize; GROUP],
    base_b: usize,
    k0: usize,
    n: usize,
    lanes: usize,
) -> Option<Vec<f32>> {
    if n <= PAIRWISE_LEAF {
        let mut acc = vec![0.0f32; GROUP * lanes];
        let xb = b.data.get(base_b + k0 * b.item..base_b + k0 * b.item + lanes)?;
        for (row, base) in acc.chunks_exact_mut(lanes).zip(base_a) {
            let x = *a.data.get(base + k0 * a.item)?;
            for (s, y) in row.iter_mut().zip(xb) {
                *s = x * y;
            }
        }
        group_leaf(a, b, base_a, base_b, k0 + 1, n.checked_sub(1)?, lanes, &mut acc)?;
        return Some(acc);
    }
    let half = n / 2;
    let mut left = group_tree(a, b, base_a, base_b, k0, half, lanes)?;
    let right = group_tree(a, b, base_a, base_b, k0 + half, n - half, lanes)?;
    for (x, y) in left.iter_mut().zip(right) {
        *x += y;
    }
    Some(left)
}

/// `acc[r, l] += a[r, k] · b[k, l]` for items `k0 .. k0 + n` in order, a
/// tile of `GROUP × NR` sums held across the items.
#[allow(clippy::too_many_arguments)]
fn group_leaf(
    a: &Operand<'_>,
    b: &Operand<'_>,
    base_a: [usize; GROUP],
    base_b: usize,
    k0: usize,
    n: usize,
    lanes: usize,
    acc: &mut [f32],
) -> Option<()> {
    if n == 0 {
        return Some(());
    }
    // Every item read must exist.
    let (first, last) = (k0, k0 + n - 1);
    for base in base_a {
        a.data.get(base + first * a.item)?;
        a.data.get(base + last * a.item)?;
    }
    b.data
        .get(base_b + first * b.item..base_b + last * b.item + lanes)?;
    if acc.len() != GROUP * lanes {
        return None;
    }
    let mut l0 = 0;
    while l0 < lanes {
        let width = NR.min(lanes - l0);
        let mut tile = [[0.0f32; NR]; GROUP];
        for (r, t) in tile.iter_mut().enumerate() {
            t[..width].copy_from_slice(&acc[r * lanes + l0..r * lanes + l0 + width]);
        }
        if width == NR {
            for k in k0..k0 + n {
                let ob = base_b + k * b.item + l0;
                let mut y = [0.0f32; NR];
                y.copy_from_slice(&b.data[ob..ob + NR]);
                for (t, base) in tile.iter_mut().zip(base_a) {
                    let x = a.data[base + k * a.item];
                    for (s, y) in t.iter_mut().zip(&y) {
                        *s += x * y;
                    }
                }
            }
        } else {
            for k in k0..k0 + n {
                let ob = base_b + k * b.item + l0;
                let y = &b.data[ob..ob + width];
                for (t, base) in tile.iter_mut().zip(base_a) {
                    let x = a.data[base + k * a.item];
                    for (s, y) in t.iter_mut().zip(y) {
                        *s += x * y;
                    }
                }
            }
        }
        for (r, t) in tile.iter().enumerate() {
            acc[r * lanes + l0..r * lanes + l0 + width].copy_from_slice(&t[..width]);
        }
        l0 += width;
    }
    Some(())
}

/// `acc[l] += a[k, l] · b[k, l]` for items `k0 .. k0 + n` in order, the
/// lanes in chunks held across the items.
fn leaf_into(
    a: &Operand<'_>,
    b: &Operand<'_>,
    base_a: usize,
    base_b: usize,
    k0: usize,
    n: usize,
    acc: &mut [f32],
) -> Option<()> {
    let lanes = acc.len();
    let range = k0..k0 + n;
    // The last item read must exist (the loops below index by offsets).
    if n > 0 {
        let last = k0 + n - 1;
        let (oa, ob) = (base_a + last * a.item, base_b + last * b.item);
        a.data.get(oa + lanes.saturating_sub(1) * a.lane)?;
        b.data.get(ob + lanes.saturating_sub(1) * b.lane)?;
        a.data.get(base_a + k0 * a.item)?;
        b.data.get(base_b + k0 * b.item)?;
    }
    for (c, chunk) in acc.chunks_mut(CHUNK).enumerate() {
        let l0 = c * CHUNK;
        let mut r = [0.0f32; CHUNK];
        let r = &mut r[..chunk.len()];
        r.copy_from_slice(chunk);
        for k in range.clone() {
            let (oa, ob) = (
                base_a + k * a.item + l0 * a.lane,
                base_b + k * b.item + l0 * b.lane,
            );
            let len = r.len();
            match (a.lane, b.lane) {
                (1, 1) => {
                    let (xa, xb) = (a.data.get(oa..oa + len)?, b.data.get(ob..ob + len)?);
                    for ((s, x), y) in r.iter_mut().zip(xa).zip(xb) {
                        *s += x * y;
                    }
                }
                (0, 1) => {
                    let (x, xb) = (*a.data.get(oa)?, b.data.get(ob..ob + len)?);
                    for (s, y) in r.iter_mut().zip(xb) {
                        *s += x * y;
                    }
                }
                (1, 0) => {
                    let (xa, y) = (a.data.get(oa..oa + len)?, *b.data.get(ob)?);
                    for (s, x) in r.iter_mut().zip(xa) {
                        *s += x * y;
                    }
                }
                _ => {
                    let p = a.data.get(oa)? * b.data.get(ob)?;
                    for s in r.iter_mut() {
                        *s += p;
                    }
                }
            }
        }
        chunk.copy_from_slice(r);
    }
    Some(())
}
