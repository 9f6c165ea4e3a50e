//! A reduction along an axis of a view (`windows`, a transposition: atoms
//! strided over another array's buffer) without laying the view out: the
//! first item read out, then each further item combined into it where it
//! lies. A 3×3 stencil written as windows of windows, summed, holds the
//! sums, never the nine-times-larger blocks.

use crate::batch::Batched;
use crate::kernel::{Layout, Order, PAIRWISE_LEAF};
use remora_value::Array;

/// `(reduce op xs)` along axis `axis` of the view `xs` (no seed): left to
/// right, as `reduce` combines up to `PAIRWISE_LEAF` items (and any number
/// for an operator other than `f.+`), so the bits are those of the fold
/// over the laid-out view. `None` when the view is laid out anyway (dense),
/// the items are too many for that order, or `op` is not one that
/// combines in place (the caller then lays the view out).
pub(crate) fn reduce_view<'p>(op: &str, order: Order, xs: &Batched<'p>, axis: usize) -> Option<Batched<'p>> {
    let items = *xs.v.shape.get(axis)?;
    if xs.is_dense() || items == 0 || (order == Order::Tree && items > PAIRWISE_LEAF) || order == Order::Scan
    {
        return None;
    }
    let step = *xs.strides.get(axis)?;
    let mut shape = xs.v.shape.clone();
    let mut strides = xs.strides.clone();
    shape.remove(axis);
    strides.remove(axis);
    let item = |i: usize| Layout {
        offset: xs.offset + i * step,
        strides: strides.clone(),
    };
    let first = xs.view(shape.clone(), xs.nb, xs.offset, strides.clone());
    let mut acc: Array<_> = first.densify()?.v;
    for i in 1..items {
        crate::scalar::apply_in_place(op, &mut acc.data, (&xs.v.data, &item(i)), true, &shape)?.ok()?;
    }
    Some(Batched::dense(acc, xs.nb))
}
