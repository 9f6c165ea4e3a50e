//! A map written over the buffer it reads. A nest that writes a fresh
//! buffer once, in row-major order (`for i: for j < c: new[i*c + j] =
//! f(old[i*c + j], …)`), reading another buffer of the same kind and
//! length only at the place it writes, before it writes there, where
//! nothing reads that buffer after the nest, writes into that buffer
//! instead: no fresh buffer (a big one's pages faulted in and zeroed by
//! the system, then written), one buffer less in the cache. Each place is
//! read before it is written, by the same iteration, and no other
//! iteration touches it (row-major: each place once), so every atom is
//! computed from the same operands as before: the same bits. The blocked
//! scan's offsets added to the scanned blocks are added in place.

use super::ranges::{each_load_in, mentions, row_major};
use crate::loops::{Expr, Output, Stmt, Var, Written};

/// Every nest of `body` (at any depth) that can write over a buffer it
/// reads (see the module's documentation) made to.
pub(super) fn write_over_dead(body: &mut Vec<Stmt>, outputs: &mut [Output]) {
    over_dead_in(body, None, outputs);
}

/// [`write_over_dead`] in `body`, which `tail` (a reduction's item, a
/// loop's condition) reads after, in its scope.
fn over_dead_in(body: &mut Vec<Stmt>, mut tail: Option<&mut Expr>, outputs: &mut [Output]) {
    for s in body.iter_mut() {
        match s {
            Stmt::Reduce { body, item, .. } => over_dead_in(body, Some(item), outputs),
            Stmt::DoWhile { body, cond } => over_dead_in(body, Some(cond), outputs),
            _ => {
                for inner in s.bodies_mut() {
                    over_dead_in(inner, None, outputs);
                }
            }
        }
    }
    let mut k = 0;
    while k < body.len() {
        let read_after = |old: Var| tail.as_deref().is_some_and(|e| names(e, old));
        if let Some((new, old)) = reusable(body, k, outputs).filter(|&(_, old)| !read_after(old)) {
            body.remove(k);
            for s in &mut body[k..] {
                rename_buffer(s, new, old);
            }
            if let Some(e) = tail.as_deref_mut() {
                rename_in(e, new, old);
            }
            for o in outputs.iter_mut() {
                match &mut o.value {
                    Written::Buffer(b) => rename_var(b, new, old),
                    Written::From { buf, offset } => {
                        rename_var(buf, new, old);
                        rename_in(offset, new, old);
                    }
                    Written::Scalar(e) => rename_in(e, new, old),
                }
                for d in &mut o.dims {
                    rename_in(d, new, old);
                }
            }
            continue;
        }
        k += 1;
    }
}

/// Where `body[k]` allocates a buffer that the next statement naming it
/// writes as the module describes, over a buffer `old`: the buffer and
/// `old`.
fn reusable(body: &[Stmt], k: usize, outputs: &[Output]) -> Option<(Var, Var)> {
    let Stmt::Alloc { buf: new, elem, len } = &body[k] else {
        return None;
    };
    let m = (k + 1..body.len()).find(|&j| mentions(&body[j], *new))?;
    let (indices, extents, inner) = nest_writing(&body[m], *new)?;
    let at = row_major(&indices, &extents).0;
    // The innermost body: `let`s, then the one store into `new`, at the
    // row-major place.
    let store = inner.iter().position(|s| mentions(s, *new))?;
    let Stmt::Store { buf, index, .. } = &inner[store] else {
        return None;
    };
    if buf != new || *index != at || inner[store + 1..].iter().any(|s| mentions(s, *new)) {
        return None;
    }
    // Each buffer read at that place before the store, only there in the
    // nest, allocated before it in `body` as `new` is, and named nowhere
    // after the nest.
    let mut candidates = Vec::new();
    for s in &inner[..=store] {
        if matches!(s, Stmt::Let { .. } | Stmt::Store { .. }) {
            for e in s.exprs() {
                each_load_in(e, &mut |b, i| {
                    if *i == at && !candidates.contains(&b) {
                        candidates.push(b);
                    }
                });
            }
        }
    }
    let escaped = |b: Var| {
        let mut named = false;
        for o in outputs {
            o.each_var(&mut |v| named |= v == b);
        }
        named
    };
    candidates.into_iter().find_map(|old| {
        let same_kind = body[..m].iter().any(
            |s| matches!(s, Stmt::Alloc { buf, elem: e, len: l } if *buf == old && e == elem && l == len),
        );
        let fits = same_kind
            && !escaped(old)
            && only_read_at(&body[m], old, &at, &inner[..=store])
            && !body[m + 1..].iter().any(|s| mentions(s, old));
        fits.then_some((*new, old))
    })
}

/// The indices, the inner extents and the innermost body of a nest of
/// `for` loops (`s`) in which every statement naming `buf` is the one
/// loop of the level below, down to a body that stores into it.
fn nest_writing(s: &Stmt, buf: Var) -> Option<(Vec<Var>, Vec<Expr>, &[Stmt])> {
    let Stmt::For { index, body, .. } = s else {
        return None;
    };
    let (mut indices, mut extents, mut inner) = (vec![*index], Vec::new(), body.as_slice());
    loop {
        let naming: Vec<&Stmt> = inner.iter().filter(|s| mentions(s, buf)).collect();
        match naming[..] {
            [
                Stmt::For {
                    index, count, body, ..
                },
            ] if indices.len() < 4 => {
                indices.push(*index);
                extents.push(count.clone());
                inner = body;
            }
            [Stmt::Store { .. }] => return Some((indices, extents, inner)),
            _ => return None,
        }
    }
}

/// Whether the nest `s` names `old` only in loads at `at` in `before`
/// (the innermost body up to its store): not written, not given to the
/// runtime, not read at any other place.
fn only_read_at(s: &Stmt, old: Var, at: &Expr, before: &[Stmt]) -> bool {
    let mut inside = 0;
    for t in before {
        for e in t.exprs() {
            each_load_in(e, &mut |b, i| inside += usize::from(b == old && i == at));
        }
    }
    let mut all = 0;
    let mut other = false;
    Stmt::each(std::slice::from_ref(s), &mut |t| {
        match t {
            Stmt::Store { buf, .. } | Stmt::Alloc { buf, .. } | Stmt::Data { buf, .. } => {
                other |= *buf == old
            }
            Stmt::Swap { a, b } => other |= *a == old || *b == old,
            _ => {}
        }
        for e in t.exprs() {
            each_load_in(e, &mut |b, _| all += usize::from(b == old));
            other |= addresses(e, old);
        }
    });
    !other && all == inside
}

/// Whether `e` takes the address of `buf` or names it as a scalar.
fn addresses(e: &Expr, buf: Var) -> bool {
    match e {
        Expr::Addr { buf: b, index } => *b == buf || addresses(index, buf),
        Expr::Var(v) => *v == buf,
        Expr::Load { index, .. } => addresses(index, buf),
        Expr::Op { args, .. } => args.iter().any(|a| addresses(a, buf)),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => false,
    }
}

/// Whether `e` names `v` (a buffer it loads from, a scalar).
fn names(e: &Expr, v: Var) -> bool {
    let mut found = false;
    e.each_var(&mut |x| found |= x == v);
    found
}

/// `v` as `to` if it is `from`.
fn rename_var(v: &mut Var, from: Var, to: Var) {
    if *v == from {
        *v = to;
    }
}

/// `e` with the buffer `from` as `to`.
fn rename_in(e: &mut Expr, from: Var, to: Var) {
    match e {
        Expr::Var(v) if *v == from => *v = to,
        Expr::Load { buf, index } | Expr::Addr { buf, index } => {
            if *buf == from {
                *buf = to;
            }
            rename_in(index, from, to);
        }
        Expr::Op { args, .. } => args.iter_mut().for_each(|a| rename_in(a, from, to)),
        _ => {}
    }
}

/// `s` with the buffer `from` as `to`, at any depth.
fn rename_buffer(s: &mut Stmt, from: Var, to: Var) {
    match s {
        Stmt::Store { buf, .. } | Stmt::Alloc { buf, .. } | Stmt::Data { buf, .. } if *buf == from => {
            *buf = to
        }
        Stmt::Swap { a, b } => {
            for x in [a, b] {
                if *x == from {
                    *x = to;
                }
            }
        }
        _ => {}
    }
    for e in s.exprs_mut() {
        rename_in(e, from, to);
    }
    for inner in s.bodies_mut() {
        for t in inner {
            rename_buffer(t, from, to);
        }
    }
}
