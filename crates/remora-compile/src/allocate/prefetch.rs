//! Gathers through an index vector read ahead. A parallel loop over
//! many items that loads each item's index from a buffer (`j =
//! idx[i]`) and then an atom at that index (`xs[j]`) misses the cache
//! at nearly every item: the index vector streams, the atoms do not.
//! Its body first asks the memory for the atom [`AHEAD`] items on
//! (`rt_prefetch`: a hint, which never faults, of an index read from
//! within the index vector), so that the misses of several items
//! overlap. A reduction's items that gather so (a sum of a gather, its
//! index checked) read ahead too. Nothing is computed differently: the
//! same bits.

use crate::loops::{Elem, Expr, Input, Stmt, Var};
use std::collections::HashMap;

/// How many items ahead an atom is asked for: enough misses in flight
/// to cover the memory's latency, not so many that lines asked for are
/// evicted before their item (10M Floats gathered by a permutation, CPU
/// time on one thread: 26 ms 64 ahead, 24 ms 96 or 128, 27 ms 192 and
/// more; the same on two).
const AHEAD: i64 = 96;

/// Loops of fewer items (a count known here) read what the caches hold.
const FEWEST: i64 = 1 << 16;

/// Every parallel loop of `body` (outside loops) that gathers through an
/// index vector, reading ahead.
pub(super) fn read_ahead(body: &mut [Stmt], inputs: &[Input]) {
    let mut elems: HashMap<Var, Elem> = inputs.iter().map(|i| (i.buf, i.elem)).collect();
    Stmt::each(body, &mut |s| {
        if let Stmt::Alloc { buf, elem, .. } | Stmt::Data { buf, elem, .. } = s {
            elems.insert(*buf, *elem);
        }
    });
    in_loops(body, &elems);
}

fn in_loops(body: &mut [Stmt], elems: &HashMap<Var, Elem>) {
    for s in body.iter_mut() {
        match s {
            Stmt::For {
                index,
                count,
                parallel: true,
                body: inner,
            } if !few(count) => read_ahead_in(*index, count, inner, None, elems),
            // (A reduction's items: its tree's leaves run in order, each
            // item a step of one chain; the loads of many items still
            // overlap. Not items of `let`s alone, which the C backend
            // computes first, in a loop of their own: c/lanes.rs.)
            Stmt::Reduce {
                index,
                count,
                body: inner,
                item,
                ..
            } if !few(count) && !inner.iter().all(|s| matches!(s, Stmt::Let { .. })) => {
                read_ahead_in(*index, count, inner, Some(item), elems)
            }
            Stmt::If { then, otherwise, .. } => {
                in_loops(then, elems);
                in_loops(otherwise, elems);
            }
            _ => {}
        }
    }
}

/// The body of a loop over `count` items (`index`), and a reduction's
/// item, reading ahead where they gather through an index vector.
fn read_ahead_in(
    index: Var,
    count: &Expr,
    inner: &mut Vec<Stmt>,
    item: Option<&Expr>,
    elems: &HashMap<Var, Elem>,
) {
    let Some((idx, xs)) = gather(index, inner, item) else {
        return;
    };
    let Some(elem) = elems.get(&xs) else {
        return;
    };
    let size = match elem {
        Elem::Int => 8,
        Elem::Float => 4,
        Elem::Bool => 1,
    };
    let last = Expr::op("-", vec![count.clone(), Expr::Int(1)]);
    let ahead = Expr::op("min", vec![Expr::add(Expr::Var(index), Expr::Int(AHEAD)), last]);
    inner.insert(
        0,
        Stmt::Call {
            func: "rt_prefetch",
            args: vec![
                Expr::Addr {
                    buf: xs,
                    index: Box::new(Expr::Int(0)),
                },
                Expr::load(idx, ahead),
                Expr::Int(size),
            ],
        },
    );
}

/// Whether a loop's count is known here and small.
fn few(count: &Expr) -> bool {
    matches!(count, Expr::Int(n) if *n < FEWEST)
}

/// In the body of a loop over `i` (and a reduction's item): an index `j`
/// read from a buffer at `i` (a `let` of the body itself, so every item
/// reads it), then an atom loaded at `j`: the index vector and the
/// gathered buffer.
fn gather(i: Var, body: &[Stmt], item: Option<&Expr>) -> Option<(Var, Var)> {
    let mut indices: Vec<(Var, Var)> = Vec::new();
    let mut found = None;
    let mut look = |e: &Expr, indices: &[(Var, Var)]| {
        super::ranges::each_load_in(e, &mut |buf, at| {
            if found.is_none()
                && let Expr::Var(j) = at
                && let Some((_, idx)) = indices.iter().find(|(v, _)| v == j)
            {
                found = Some((*idx, buf));
            }
        });
        found
    };
    for s in body {
        if let Stmt::Let {
            var,
            value: Expr::Load { buf, index },
            ..
        } = s
            && **index == Expr::Var(i)
        {
            indices.push((*var, *buf));
            continue;
        }
        for e in s.exprs() {
            if let Some(f) = look(e, &indices) {
                return Some(f);
            }
        }
    }
    item.and_then(|e| look(e, &indices))
}
