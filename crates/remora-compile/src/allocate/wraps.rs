//! Rotations read without a branch per atom. A rotation's index is
//! `(wrap (+ i r) d)` (`i + r`, less `d` where that reaches `d`): inside
//! a loop over `i`, a branch at every atom, and a gather the C compiler
//! does not vectorise. Over the items before `d - r` the index is `i +
//! r`, over those after `i + r - d`, so a loop whose body reads such
//! indices (`r` and `d` the same for every item) runs in pieces, cut
//! where any of them first wraps, each piece a plain loop whose indices
//! are `i` plus an offset the piece fixes: the neighbours of a stencil by
//! `rotate` (or by index vectors `(mod (- i 1) n)`, which `ranges.rs`
//! makes wraps), a shifted copy, read straight through memory. The body
//! is written once (a loop over the pieces around it); each item gets the
//! same operations, so the same bits.
//!
//! Only loops with no loop inside (the loop that walks the memory); a
//! parallel one runs over blocks of [`BLOCK`] items, each cut into
//! pieces.

use super::ranges::{cannot_fail, declared_in};
use crate::loops::{Elem, Expr, Stmt, Var};
use std::collections::{HashMap, HashSet};

/// The items of a parallel loop's block.
const BLOCK: i64 = 2048;
/// The most distinct wraps of one loop (a piece each, and one more).
const MOST_WRAPS: usize = 8;
/// A loop of fewer items (a count known here) is left as it is: its
/// pieces would cost more than its branches.
const FEWEST: i64 = 64;

/// Every innermost loop of `body` that reads wrapped indices of its own
/// index, run in pieces (see the module's documentation).
pub(super) fn split_at_wraps(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    for s in std::mem::take(body) {
        match s {
            Stmt::For {
                index,
                count,
                parallel,
                body: mut inner,
            } => {
                split_at_wraps(&mut inner, names);
                let few = matches!(count, Expr::Int(n) if n < FEWEST);
                match wraps_of(index, &inner).filter(|_| !few) {
                    Some(wraps) => body.extend(in_pieces(index, count, parallel, inner, &wraps, names)),
                    None => body.push(Stmt::For {
                        index,
                        count,
                        parallel,
                        body: inner,
                    }),
                }
            }
            mut s => {
                for inner in s.bodies_mut() {
                    split_at_wraps(inner, names);
                }
                body.push(s);
            }
        }
    }
}

/// A wrapped index `(wrap (+ i r) d)` of a loop's index `i`: `r` and `d`
/// the same for every item.
#[derive(PartialEq)]
struct Wrap {
    r: Expr,
    d: Expr,
}

/// The distinct wraps of `index` in `body` (the body of its loop), if
/// there are some, at most [`MOST_WRAPS`], and no loop inside.
fn wraps_of(index: Var, body: &[Stmt]) -> Option<Vec<Wrap>> {
    let mut inside = HashSet::from([index]);
    declared_in(body, &mut inside);
    let mut nested = false;
    Stmt::each(body, &mut |s| match s {
        Stmt::For { .. } | Stmt::Reduce { .. } | Stmt::DoWhile { .. } => nested = true,
        Stmt::Set { var, .. } => {
            inside.insert(*var);
        }
        _ => {}
    });
    if nested {
        return None;
    }
    let lets = lets_of(body);
    let mut wraps = Vec::new();
    Stmt::each(body, &mut |s| {
        for e in s.exprs() {
            each_wrap(e, &mut |j, d| {
                if let Some(w) = wrap_at(j, d, index, &lets)
                    && invariant(&w.r, &inside)
                    && invariant(&w.d, &inside)
                    && cannot_fail(&w.r)
                    && cannot_fail(&w.d)
                    && !wraps.contains(&w)
                {
                    wraps.push(w);
                }
            });
        }
    });
    (!wraps.is_empty() && wraps.len() <= MOST_WRAPS).then_some(wraps)
}

/// `f` on the operands of every `wrap` in `e`.
fn each_wrap(e: &Expr, f: &mut dyn FnMut(&Expr, &Expr)) {
    match e {
        Expr::Op { op, args } => {
            if *op == "wrap"
                && let [j, d] = args.as_slice()
            {
                f(j, d);
            }
            args.iter().for_each(|a| each_wrap(a, f));
        }
        Expr::Load { index, .. } | Expr::Addr { index, .. } => each_wrap(index, f),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => {}
    }
}

/// The `let`s of a loop's body (at any depth) of variables never set.
pub(super) fn lets_of(body: &[Stmt]) -> HashMap<Var, Expr> {
    let mut lets = HashMap::new();
    let mut set = HashSet::new();
    Stmt::each(body, &mut |s| match s {
        Stmt::Let { var, value, .. } => {
            lets.insert(*var, value.clone());
        }
        Stmt::Set { var, .. } => {
            set.insert(*var);
        }
        _ => {}
    });
    lets.retain(|v, _| !set.contains(v));
    lets
}

/// `r` where `j` is `i + r` (sums and differences, `i` once, added;
/// through the body's `lets`).
fn offset(j: &Expr, i: Var, lets: &HashMap<Var, Expr>) -> Option<Expr> {
    match j {
        Expr::Var(v) if *v == i => Some(Expr::Int(0)),
        Expr::Var(v) => offset(lets.get(v)?, i, lets),
        Expr::Op { op: "+", args } if args.len() == 2 => {
            match (offset(&args[0], i, lets), offset(&args[1], i, lets)) {
                (Some(r), None) => Some(Expr::add(r, args[1].clone())),
                (None, Some(r)) => Some(Expr::add(args[0].clone(), r)),
                _ => None,
            }
        }
        Expr::Op { op: "-", args } if args.len() == 2 => {
            Some(sub(offset(&args[0], i, lets)?, args[1].clone()))
        }
        _ => None,
    }
}

/// `(wrap j d)` as a wrap of `index`, where `j` is `index + r`: `r` and
/// `d` with the body's `lets` written in (a rotation's split computed in
/// the body is the same at every item).
fn wrap_at(j: &Expr, d: &Expr, index: Var, lets: &HashMap<Var, Expr>) -> Option<Wrap> {
    Some(Wrap {
        r: through(&offset(j, index, lets)?, lets),
        d: through(d, lets),
    })
}

/// `e` with the variables of `lets` replaced by their values.
fn through(e: &Expr, lets: &HashMap<Var, Expr>) -> Expr {
    match e {
        Expr::Var(v) => lets.get(v).map_or_else(|| e.clone(), |x| through(x, lets)),
        Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| through(a, lets)).collect()),
        _ => e.clone(),
    }
}

/// `a - b` on Int, folding constants.
fn sub(a: Expr, b: Expr) -> Expr {
    match (a, b) {
        (x, Expr::Int(0)) => x,
        (Expr::Int(x), Expr::Int(y)) => Expr::Int(x.wrapping_sub(y)),
        (x, Expr::Int(y)) if y != i64::MIN => Expr::add(x, Expr::Int(-y)),
        (x, y) => Expr::op("-", vec![x, y]),
    }
}

/// Whether `e` has the same value at every item: no load, no variable of
/// `inside` (declared or set in the loop, or its index).
fn invariant(e: &Expr, inside: &HashSet<Var>) -> bool {
    match e {
        Expr::Var(v) => !inside.contains(v),
        Expr::Op { args, .. } => args.iter().all(|a| invariant(a, inside)),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => true,
        Expr::Load { .. } | Expr::Addr { .. } => false,
    }
}

/// The loop `for index < count: body` in pieces: sequential, one run of
/// pieces over all its items; parallel, a parallel loop over blocks, each
/// block's items in pieces.
fn in_pieces(
    index: Var,
    count: Expr,
    parallel: bool,
    body: Vec<Stmt>,
    wraps: &[Wrap],
    names: &mut Vec<String>,
) -> Vec<Stmt> {
    let mut fresh = |name: &str| {
        names.push(name.to_string());
        Var(names.len() as u32 - 1)
    };
    if !parallel {
        return pieces(Expr::Int(0), count, index, body, wraps, &mut fresh);
    }
    let blk = fresh("blk");
    let lo = fresh("lo");
    let items = fresh("items");
    let mut block = vec![
        Stmt::Let {
            var: lo,
            elem: Elem::Int,
            value: Expr::mul(Expr::Var(blk), Expr::Int(BLOCK)),
        },
        Stmt::Let {
            var: items,
            elem: Elem::Int,
            value: Expr::op(
                "min",
                vec![
                    Expr::Int(BLOCK),
                    Expr::op("-", vec![count.clone(), Expr::Var(lo)]),
                ],
            ),
        },
    ];
    block.extend(pieces(
        Expr::Var(lo),
        Expr::Var(items),
        index,
        body,
        wraps,
        &mut fresh,
    ));
    vec![Stmt::For {
        index: blk,
        count: Expr::op(
            "/",
            vec![Expr::add(count, Expr::Int(BLOCK - 1)), Expr::Int(BLOCK)],
        ),
        parallel: true,
        body: block,
    }]
}

/// The items `base + t`, `t < count`, of a loop over `index` in pieces:
/// each wrap's first item that wraps found first, then, piece after
/// piece, the items up to the next such item, each wrap there `index`
/// plus the piece's offset.
fn pieces(
    base: Expr,
    count: Expr,
    index: Var,
    body: Vec<Stmt>,
    wraps: &[Wrap],
    fresh: &mut dyn FnMut(&str) -> Var,
) -> Vec<Stmt> {
    let int = |var: Var, value: Expr| Stmt::Let {
        var,
        elem: Elem::Int,
        value,
    };
    let var = Expr::Var;
    let mut out = Vec::new();
    let n = match count {
        Expr::Var(n) => n,
        count => {
            let n = fresh("n");
            out.push(int(n, count));
            n
        }
    };
    // The item `t` from which wrap k wraps: base + t + r >= d.
    let firsts: Vec<Var> = wraps
        .iter()
        .map(|w| {
            let p = fresh("wraps_at");
            let at = sub(sub(w.d.clone(), w.r.clone()), base.clone());
            out.push(int(p, Expr::op("clip", vec![Expr::Int(0), var(n), at])));
            p
        })
        .collect();
    let start = fresh("start");
    out.push(int(start, Expr::Int(0)));
    let mut piece = Vec::new();
    let end = fresh("end");
    piece.push(int(end, var(n)));
    for p in &firsts {
        piece.push(Stmt::If {
            cond: Expr::op(">", vec![var(*p), var(start)]),
            then: vec![Stmt::Set {
                var: end,
                value: Expr::op("min", vec![var(end), var(*p)]),
            }],
            otherwise: Vec::new(),
        });
    }
    let mut offsets = Vec::new();
    for (w, p) in wraps.iter().zip(&firsts) {
        let off = fresh("off");
        piece.push(int(off, w.r.clone()));
        piece.push(Stmt::If {
            cond: Expr::op("<=", vec![var(*p), var(start)]),
            then: vec![Stmt::Set {
                var: off,
                value: sub(w.r.clone(), w.d.clone()),
            }],
            otherwise: Vec::new(),
        });
        offsets.push(off);
    }
    let t = fresh("t");
    let mut items = vec![int(index, Expr::add(Expr::add(base, var(start)), var(t)))];
    items.extend(body);
    let lets = lets_of(&items[1..]);
    for s in &mut items[1..] {
        unwrap_in(s, index, &lets, wraps, &offsets);
    }
    piece.push(Stmt::For {
        index: t,
        count: Expr::op("-", vec![var(end), var(start)]),
        parallel: false,
        body: items,
    });
    piece.push(Stmt::Set {
        var: start,
        value: var(end),
    });
    out.push(Stmt::For {
        index: fresh("piece"),
        count: Expr::Int(wraps.len() as i64 + 1),
        parallel: false,
        body: piece,
    });
    out
}

/// Every wrap of `wraps` in `s` (at any depth) replaced by `index` plus
/// its offset.
fn unwrap_in(s: &mut Stmt, index: Var, lets: &HashMap<Var, Expr>, wraps: &[Wrap], offsets: &[Var]) {
    let by = |e: &mut Expr| {
        if let Expr::Op { op: "wrap", args } = e
            && let [j, d] = args.as_slice()
            && let Some(w) = wrap_at(j, d, index, lets)
            && let Some(k) = wraps.iter().position(|x| *x == w)
        {
            *e = Expr::add(Expr::Var(index), Expr::Var(offsets[k]));
        }
    };
    fn expr(e: &mut Expr, by: &dyn Fn(&mut Expr)) {
        match e {
            Expr::Op { args, .. } => args.iter_mut().for_each(|a| expr(a, by)),
            Expr::Load { index, .. } | Expr::Addr { index, .. } => expr(index, by),
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => {}
        }
        by(e);
    }
    for e in s.exprs_mut() {
        expr(e, &by);
    }
    for inner in s.bodies_mut() {
        for s in inner {
            unwrap_in(s, index, lets, wraps, offsets);
        }
    }
}
