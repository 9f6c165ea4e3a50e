//! Reductions turned inside out: a loop over positions `j` whose body is
//! one reduction over items `k`, stored at `j`'s place, where the items
//! read memory along `j` (stride 1) and across it along `k` — a column of
//! a matrix for each `j`, as in a min-plus product written as an outer
//! product of a row and a column lambda, `(reduce f.min (f.+ r c))` over
//! `(transpose2d d)`. Each position's reduction then reads one atom per
//! cache line. Inside out, a row of accumulators (one per position) is
//! combined with the items of one `k` at a time, every position's item
//! read along the row: the loop over `j` is innermost and contiguous.
//!
//! Each position still combines its items in their order, from the seed
//! or the first item, so the rule holds for a reduction folded left to
//! right, for the operators whose every grouping that keeps the items'
//! order gives the same bits (`f.min`, `f.max`, Int `+` …: see
//! `exact_order` in prims.rs), whose tree is such a grouping, and for a
//! float sum of at most 256 items (its tree is then the left fold; over
//! more it is not, and its contractions are `contract.rs`'s).

use super::contract::affine;
use super::prims::exact_order;
use super::ranges::each_load_in;
use super::styles::fresh;
use crate::loops::{Expr, Order, Stmt, Var};

/// Every such nest of `body` (at any depth) turned inside out.
pub(super) fn reductions_inside_out(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body.drain(..) {
        if let Some(turned) = inside_out(&s, names) {
            out.extend(turned);
            continue;
        }
        for inner in s.bodies_mut() {
            reductions_inside_out(inner, names);
        }
        out.push(s);
    }
    *body = out;
}

/// `s` turned inside out, if it is a sequential loop over positions of a
/// reduction whose items read along the positions, not along the items.
fn inside_out(s: &Stmt, names: &mut Vec<String>) -> Option<Vec<Stmt>> {
    let Stmt::For {
        index: j,
        count: n,
        parallel: false,
        body,
    } = s
    else {
        return None;
    };
    let [
        Stmt::Reduce {
            acc,
            elem,
            op,
            seed,
            order,
            index: k,
            count,
            body: lets,
            item,
        },
        Stmt::Store {
            buf: c,
            index: c_at,
            value: Expr::Var(stored),
        },
    ] = body.as_slice()
    else {
        return None;
    };
    // (A tree of at most 256 items is the left fold: a float sum's too.)
    let left = *order == Order::Left || exact_order(op, Order::Left) == Order::Tree;
    if stored != acc || !(left || matches!(count, Expr::Int(n) if *n <= 256)) {
        return None;
    }
    // The item's own scalars: `let`s of loads and arithmetic only.
    let mut locals = vec![*acc];
    let mut values = Vec::new();
    for s in lets {
        let Stmt::Let { var, value, .. } = s else {
            return None;
        };
        locals.push(*var);
        values.push(value);
    }
    values.push(item);
    let vars = [*j, *k];
    let invariant = |e: &Expr| affine(e, &vars, &locals).is_some_and(|a| a.coefs.iter().all(is_zero));
    if !invariant(count) || !invariant(n) || seed.as_ref().is_some_and(|s| !invariant(s)) {
        return None;
    }
    // (A handful of positions, a cell of 3 or 4 atoms, read the same cache
    // lines either way: a row of accumulators would only cost a buffer.)
    if matches!(n, Expr::Int(x) if *x < 8) {
        return None;
    }
    // Each position its own place, which the items do not read.
    let place = affine(c_at, &vars, &locals)?;
    if is_zero(&place.coefs[0]) || !is_zero(&place.coefs[1]) {
        return None;
    }
    // The item's scalars that depend on the item alone (no position, no
    // load: `(mod p 5)`, `(/ p 5)` of a window's flat item number) read as
    // variables of their own, each moving with the item, not along it.
    let mut by_item: Vec<Var> = vec![*k];
    for s in lets {
        if let Stmt::Let { var, value, .. } = s {
            let mut alone = !has_load_in(value);
            value.each_var(&mut |v| alone &= v != *j && (by_item.contains(&v) || !locals.contains(&v)));
            if alone {
                by_item.push(*var);
            }
        }
    }
    let load_vars: Vec<Var> = std::iter::once(*j).chain(by_item.iter().copied()).collect();
    let load_locals: Vec<Var> = locals.iter().copied().filter(|v| !by_item.contains(v)).collect();
    // Worth it: some load contiguous along the positions and not along the
    // items, none contiguous along the items that moves with the position.
    let (mut along_j, mut ok) = (false, true);
    for v in &values {
        each_load_in(v, &mut |buf, index| {
            let Some(a) = affine(index, &load_vars, &load_locals) else {
                ok = false;
                return;
            };
            ok &= buf != *c;
            let (cj, ck, by_scalars) = (&a.coefs[0], &a.coefs[1], a.coefs[2..].iter().any(|c| !is_zero(c)));
            along_j |= is_one(cj) && !is_one(ck) && (!is_zero(ck) || by_scalars);
            ok &= !is_one(ck) || is_zero(cj);
        });
    }
    if !ok || !along_j {
        return None;
    }
    let row = fresh(names, "row");
    let mut out = vec![Stmt::Alloc {
        buf: row,
        elem: *elem,
        len: n.clone(),
    }];
    // The seed or the first item, then the others in order, each loop over
    // the positions one of its own.
    let (first, rest_from) = match seed {
        Some(s) => {
            let j1 = fresh(names, "j");
            let first = Stmt::Store {
                buf: row,
                index: Expr::Var(j1),
                value: s.clone(),
            };
            (positions(j1, n, vec![first]), Expr::Int(0))
        }
        None => {
            let j1 = fresh(names, "j");
            let by = [(*j, Expr::Var(j1)), (*k, Expr::Int(0))];
            let (mut cell, value) = item_at(lets, item, &by, names);
            cell.push(Stmt::Store {
                buf: row,
                index: Expr::Var(j1),
                value,
            });
            (positions(j1, n, cell), Expr::Int(1))
        }
    };
    out.push(first);
    let (k2, j2) = (fresh(names, "k"), fresh(names, "j"));
    let by = [
        (*j, Expr::Var(j2)),
        (*k, Expr::add(Expr::Var(k2), rest_from.clone())),
    ];
    let (mut cell, value) = item_at(lets, item, &by, names);
    cell.push(Stmt::Store {
        buf: row,
        index: Expr::Var(j2),
        value: Expr::op(op, vec![Expr::load(row, Expr::Var(j2)), value]),
    });
    out.push(Stmt::For {
        index: k2,
        count: Expr::op("-", vec![count.clone(), rest_from]),
        parallel: false,
        body: vec![positions(j2, n, cell)],
    });
    let j3 = fresh(names, "j");
    let last = Stmt::Store {
        buf: *c,
        index: substituted(c_at, &[(*j, Expr::Var(j3))]),
        value: Expr::load(row, Expr::Var(j3)),
    };
    out.push(positions(j3, n, vec![last]));
    Some(out)
}

/// The sequential loop over the positions.
fn positions(j: Var, n: &Expr, body: Vec<Stmt>) -> Stmt {
    Stmt::For {
        index: j,
        count: n.clone(),
        parallel: false,
        body,
    }
}

/// The item's `let`s and value with the variables of `by` replaced (the
/// position and the item), each `let` a fresh scalar of its own.
fn item_at(lets: &[Stmt], item: &Expr, by: &[(Var, Expr)], names: &mut Vec<String>) -> (Vec<Stmt>, Expr) {
    let mut by = by.to_vec();
    let mut out = Vec::new();
    for s in lets {
        if let Stmt::Let { var, elem, value } = s {
            let to = fresh(names, "arg");
            out.push(Stmt::Let {
                var: to,
                elem: *elem,
                value: substituted(value, &by),
            });
            by.push((*var, Expr::Var(to)));
        }
    }
    (out, substituted(item, &by))
}

/// `e` with each variable of `by` replaced by its expression.
fn substituted(e: &Expr, by: &[(Var, Expr)]) -> Expr {
    match e {
        Expr::Var(v) => by
            .iter()
            .find(|(x, _)| x == v)
            .map_or_else(|| e.clone(), |(_, to)| to.clone()),
        Expr::Load { buf, index } => Expr::load(*buf, substituted(index, by)),
        Expr::Addr { buf, index } => Expr::Addr {
            buf: *buf,
            index: Box::new(substituted(index, by)),
        },
        Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| substituted(a, by)).collect()),
        _ => e.clone(),
    }
}

fn has_load_in(e: &Expr) -> bool {
    let mut any = false;
    each_load_in(e, &mut |_, _| any = true);
    any
}

fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Int(0))
}

fn is_one(e: &Expr) -> bool {
    matches!(e, Expr::Int(1))
}
