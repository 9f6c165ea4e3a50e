//! Contractions: a map over a float sum of products — a dot product
//! lifted over the rows of one matrix and the columns of another (a
//! matrix product as the papers write it), an outer loop of weighted
//! sums — computed by the runtime's tiled kernel
//! (`rt_contract_f32`) instead of one tree reduction per sum.
//!
//! The rule works on the loop level, after the maps are loops, so it holds
//! however the program wrote the lifting (a function of vectors applied to
//! matrices, `transpose2d`, `replicate`, a `let`): two nested `for`
//! loops, or one (a matrix-vector product: one column), whose body is only
//! a `reduce f.+` (the tree order) of products of two loads, stored at the
//! loops' position; every index an affine function of the loops' indices
//! and the item's, each operand varying with at most one of the two loops.
//! A loop around such a nest (a batch of products) calls the kernel once
//! per iteration. The tree's split points depend only on the
//! number of items, never on the loops' indices, so the kernel sums a
//! tile of many positions together, each in its own order: the same bits.
//! An Int sum of products (`+` wraps: any order) is a contraction too
//! (`rt_contract_i64`).

use super::*;

/// The kernel's orders: the tree of `reduce f.+` (left to right up to 256
/// items), or blocks of 256 items one after another (`f.matmul`).
pub(super) const TREE: i64 = 0;
pub(super) const BLOCKS: i64 = 1;

/// Every nest in `body` (at any depth) that is a contraction, replaced by
/// a call of the kernel.
pub(super) fn contractions(body: &mut Vec<Stmt>) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body.drain(..) {
        if let Some(call) = contraction(&s) {
            out.extend(call);
            continue;
        }
        // (A choice of two forms of the same sums, the lane-by-lane
        // one a contraction: the kernel.)
        if let Some((check, [lanes])) = choice(&s)
            && let Some(call) = contraction_of(lanes, true)
        {
            out.extend(check);
            out.extend(call);
            continue;
        }
        for inner in s.bodies_mut() {
            contractions(inner);
        }
        out.push(s);
    }
    *body = out;
}

/// A reduction of rows whose count is known only at run time is written
/// in two forms of the same sums (see `reduce` in prims.rs): item by item
/// into the whole accumulator up to 256 items, lane by lane (a tree per
/// position) over more. The tree of up to 256 items is the left-to-right
/// sum, so the lane-by-lane form alone gives the same bits for every
/// count but 0, which item by item checks first. For such a choice `s`:
/// that check (where there is no seed) and the lane-by-lane form.
fn choice(s: &Stmt) -> Option<(Vec<Stmt>, &[Stmt])> {
    let Stmt::If { cond, otherwise, .. } = s else {
        return None;
    };
    // The lane loops (at least one), then the reduction of each lane.
    let [Stmt::For { body, .. }] = otherwise.as_slice() else {
        return None;
    };
    let mut nest = body.as_slice();
    while let [Stmt::For { body, .. }] = nest {
        nest = body;
    }
    let [Stmt::Reduce { count, seed, .. }, Stmt::Store { .. }] = nest else {
        return None;
    };
    // (`(<= count 256)`, maybe with a condition on the strides.)
    let short = Expr::op("<=", vec![count.clone(), Expr::Int(256)]);
    let chooses = match cond {
        Expr::Op { op: "and", args } => args.first() == Some(&short),
        c => *c == short,
    };
    if !chooses {
        return None;
    }
    let check = match seed {
        Some(_) => Vec::new(),
        None => vec![Stmt::If {
            cond: Expr::op("==", vec![count.clone(), Expr::Int(0)]),
            then: vec![Stmt::Fail {
                what: "reduce of an empty array".into(),
            }],
            otherwise: Vec::new(),
        }],
    };
    Some((check, otherwise))
}

/// A loop whose body is checks and a [`choice`]: the loop with the
/// choice's lane-by-lane form.
fn lane_by_lane(s: &Stmt) -> Option<Stmt> {
    let Stmt::For { body, .. } = s else {
        return None;
    };
    let checks = body.iter().take_while(|s| is_check(s)).count();
    let [last] = &body[checks..] else {
        return None;
    };
    let (check, lanes) = choice(last)?;
    let mut one_form = s.clone();
    let Stmt::For { body, .. } = &mut one_form else {
        return None;
    };
    body.truncate(checks);
    body.extend(check);
    body.extend(lanes.iter().cloned());
    Some(one_form)
}

/// An index as `offset + Σ coefficient · variable` over the given
/// variables (each coefficient free of them).
pub(super) struct Affine {
    pub(super) offset: Expr,
    pub(super) coefs: Vec<Expr>,
}

pub(super) fn affine(e: &Expr, vars: &[Var], locals: &[Var]) -> Option<Affine> {
    let zero = || Affine {
        offset: Expr::Int(0),
        coefs: vec![Expr::Int(0); vars.len()],
    };
    let free = |e: &Expr| {
        let mut ok = true;
        e.each_var(&mut |v| ok &= !vars.contains(&v) && !locals.contains(&v));
        ok && !has_load(e)
    };
    match e {
        Expr::Var(v) if vars.contains(v) => {
            let mut a = zero();
            let k = vars.iter().position(|x| x == v)?;
            a.coefs[k] = Expr::Int(1);
            Some(a)
        }
        e if free(e) => Some(Affine {
            offset: e.clone(),
            coefs: vec![Expr::Int(0); vars.len()],
        }),
        Expr::Op { op: "+", args } if args.len() == 2 => {
            let (x, y) = (affine(&args[0], vars, locals)?, affine(&args[1], vars, locals)?);
            Some(Affine {
                offset: Expr::add(x.offset, y.offset),
                coefs: x
                    .coefs
                    .into_iter()
                    .zip(y.coefs)
                    .map(|(a, b)| Expr::add(a, b))
                    .collect(),
            })
        }
        Expr::Op { op: "*", args } if args.len() == 2 => {
            let (scale, x) = if free(&args[0]) {
                (&args[0], affine(&args[1], vars, locals)?)
            } else if free(&args[1]) {
                (&args[1], affine(&args[0], vars, locals)?)
            } else {
                return None;
            };
            Some(Affine {
                offset: Expr::mul(scale.clone(), x.offset),
                coefs: x.coefs.into_iter().map(|c| Expr::mul(scale.clone(), c)).collect(),
            })
        }
        _ => None,
    }
}

fn has_load(e: &Expr) -> bool {
    match e {
        Expr::Load { .. } | Expr::Addr { .. } => true,
        Expr::Op { args, .. } => args.iter().any(has_load),
        _ => false,
    }
}

fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Int(0))
}

/// A load of the reduction's item: its buffer and affine index over
/// (outer loop, inner loop, item).
struct Operand {
    buf: Var,
    at: Affine,
}

/// `s` as a call of the kernel, if it is a contraction (see the module's
/// documentation), after the checks the loops' body made (each of the
/// loops' invariants, raised where the loops run at least once).
fn contraction(s: &Stmt) -> Option<Vec<Stmt>> {
    contraction_of(s, false)
}

/// Whether `s` is a contraction the kernel computes.
pub(super) fn is_contraction(s: &Stmt) -> bool {
    contraction(s).is_some()
}

/// [`contraction`], where `nonempty` says the sums' count was checked not
/// to be 0 before `s`.
fn contraction_of(s: &Stmt, nonempty: bool) -> Option<Vec<Stmt>> {
    let Stmt::For {
        index: outer,
        count: outer_count,
        body,
        ..
    } = s
    else {
        return None;
    };
    if let Some(one_form) = lane_by_lane(s) {
        return contraction(&one_form);
    }
    // Checks of the outer loop's invariants before the inner loop (raised
    // where the outer loop runs at least once).
    let outer_checks = body.iter().take_while(|s| is_check(s)).count();
    let (outer_checks, body) = body.split_at(outer_checks);
    // Two loops (i over rows, j over columns), or one (a matrix-vector
    // product, a weighted sum of windows: one column, which the kernel
    // sums a block of rows at a time without packing).
    let (i, m, j, n, cell) = match body {
        [
            Stmt::For {
                index: inner,
                count: inner_count,
                body: cell,
                ..
            },
        ] => (
            *outer,
            outer_count.clone(),
            Some(*inner),
            inner_count.clone(),
            cell.as_slice(),
        ),
        cell => (*outer, outer_count.clone(), None, Expr::Int(1), cell),
    };
    if j.is_none() && !outer_checks.is_empty() {
        return None;
    }
    // Checks first (`if` an invariant condition `fail`), then the sum.
    let checks = cell.iter().take_while(|s| is_check(s)).count();
    let (checks, cell) = cell.split_at(checks);
    let [
        Stmt::Reduce {
            acc,
            elem,
            op,
            seed,
            order,
            index: p,
            count: k,
            body: lets,
            item,
        },
        Stmt::Store {
            buf: c,
            index: c_at,
            value: Expr::Var(stored),
        },
    ] = cell
    else {
        return None;
    };
    // Float sums in the tree's order; Int sums wrap (any order).
    let (func, times, unit) = match (elem, *op, order) {
        (Elem::Float, "f.+", Order::Tree) => ("rt_contract_f32", "f.*", Expr::Float(0.0)),
        (Elem::Int, "+", _) => ("rt_contract_i64", "*", Expr::Int(0)),
        _ => return None,
    };
    if stored != acc {
        return None;
    }
    let vars: Vec<Var> = [Some(i), j, Some(*p)].into_iter().flatten().collect();
    // (The nest's own scalars are no part of an index.)
    let mut locals = vec![*acc];
    for s in lets {
        if let Stmt::Let { var, .. } = s {
            locals.push(*var);
        }
    }
    // An index over (i, j, item), j's coefficient 0 where there is no j.
    let at = |e: &Expr| {
        let mut a = affine(e, &vars, &locals)?;
        if j.is_none() {
            a.coefs.insert(1, Expr::Int(0));
        }
        Some(a)
    };
    // The loop-invariant parts: the count, the seed, the extents.
    let invariant = |e: &Expr| at(e).is_some_and(|a| a.coefs.iter().all(is_zero));
    // (The seed is read once, before the kernel: a load of a buffer the
    // nest does not write, at a place its loops do not name, is one too:
    // a `reduce/zero`'s seed as a derivative passes it.)
    let seed_invariant = |e: &Expr| {
        let mut ok = true;
        e.each_var(&mut |v| ok &= !vars.contains(&v) && !locals.contains(&v) && v != *c);
        ok
    };
    if !invariant(k) || !invariant(&n) || seed.as_ref().is_some_and(|s| !seed_invariant(s)) {
        return None;
    }
    // Without a seed the count must be known to be at least 1 (or checked
    // before the loops).
    let empty = Expr::op("==", vec![k.clone(), Expr::Int(0)]);
    let checked = outer_checks
        .iter()
        .any(|s| matches!(s, Stmt::If { cond, .. } if *cond == empty));
    let (has_seed, seed) = match seed {
        Some(s) => (1, s.clone()),
        None if nonempty || checked || matches!(k, Expr::Int(x) if *x >= 1) => (0, unit),
        None => return None,
    };
    // The item: the product of two loads (each maybe named by a `let`).
    let Expr::Op { op: product, args } = item else {
        return None;
    };
    if *product != times {
        return None;
    }
    let [x, y] = args.as_slice() else {
        return None;
    };
    let load = |e: &Expr| -> Option<Operand> {
        let e = match e {
            Expr::Var(v) => lets.iter().find_map(|s| match s {
                Stmt::Let { var, value, .. } if var == v => Some(value),
                _ => None,
            })?,
            e => e,
        };
        let Expr::Load { buf, index } = e else {
            return None;
        };
        Some(Operand {
            buf: *buf,
            at: at(index)?,
        })
    };
    // Every `let` a load named by the product.
    let named = |v: &Var| [x, y].iter().any(|e| matches!(e, Expr::Var(w) if w == v));
    if !lets
        .iter()
        .all(|s| matches!(s, Stmt::Let { var, value: Expr::Load { .. }, .. } if named(var)))
    {
        return None;
    }
    let (x, y) = (load(x)?, load(y)?);
    // a varies with i (not j), b with j (not i): the product is a·b or,
    // the roles swapped, b·a (the same bits: multiplication commutes).
    let (a, b) = if is_zero(&x.at.coefs[1]) && is_zero(&y.at.coefs[0]) {
        (x, y)
    } else if is_zero(&y.at.coefs[1]) && is_zero(&x.at.coefs[0]) {
        (y, x)
    } else {
        return None;
    };
    let c_at = at(c_at)?;
    // Each position its own atom of the result (the kernel writes them
    // in no fixed order), which no operand reads.
    let distinct = !is_zero(&c_at.coefs[0]) && (j.is_none() || !is_zero(&c_at.coefs[1]));
    if !distinct || !is_zero(&c_at.coefs[2]) || *c == a.buf || *c == b.buf {
        return None;
    }
    let mut out = Vec::new();
    let outer_runs = Expr::op("<", vec![Expr::Int(0), m.clone()]);
    let inner_runs = Expr::op("<", vec![Expr::Int(0), n.clone()]);
    for (check, runs) in outer_checks.iter().map(|c| (c, outer_runs.clone())).chain(
        checks
            .iter()
            .map(|c| (c, Expr::op("and", vec![outer_runs.clone(), inner_runs.clone()]))),
    ) {
        let Stmt::If { cond, then, .. } = check else {
            return None;
        };
        if !invariant(cond) {
            return None;
        }
        out.push(Stmt::If {
            cond: Expr::op("and", vec![runs, cond.clone()]),
            then: then.clone(),
            otherwise: Vec::new(),
        });
    }
    let addr = |buf: Var, at: &Affine| Expr::Addr {
        buf,
        index: Box::new(at.offset.clone()),
    };
    out.push(Stmt::Call {
        func,
        args: vec![
            addr(a.buf, &a.at),
            a.at.coefs[0].clone(),
            a.at.coefs[2].clone(),
            addr(b.buf, &b.at),
            b.at.coefs[1].clone(),
            b.at.coefs[2].clone(),
            m,
            n,
            k.clone(),
            addr(*c, &c_at),
            c_at.coefs[0].clone(),
            c_at.coefs[1].clone(),
            Expr::Int(TREE),
            Expr::Int(has_seed),
            seed,
        ],
    });
    Some(out)
}
