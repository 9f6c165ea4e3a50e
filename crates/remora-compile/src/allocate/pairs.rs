//! A matrix read once for two contractions. The gradient of a linear
//! model — `x@w` (each row's sum with a vector), a step per row (a
//! sigmoid, a residual), then `xᵀ·r` (the rows weighted by the step's
//! results, added over the tree of `reduce f.+`) — is two calls of the
//! contraction kernel (`contract.rs`) around a parallel loop, each call
//! reading the whole matrix from memory. Here they become one pass: the
//! tree's nodes at a depth on the threads (`rt_tree_top`, as
//! `reduce_by_leaves` splits a sum of rows), each node leaf by leaf — the
//! leaf's rows' sums (`rt_pair_rows`: the kernel's rows, on this thread),
//! the loop's iterations for those rows, then the leaf's rows weighted
//! and added into the node's stack of partial sums (`rt_pair_leaf`) while
//! they are in the cache — and the nodes' sums added as the tree adds
//! them (`rt_pair_total`). Every row's sum, every iteration and every
//! partial sum is the same as before, computed in an order that gives it
//! the same inputs: the same bits, on any number of threads.
//!
//! The rule holds where the loops over the rows between the calls (the
//! steps, one or more: by AD, the exps kept in a row of their own, then
//! the adjoint) read what the first call writes, and what they write
//! themselves, only at their own row (their index), write nothing either
//! call reads but at their row, and the other statements between
//! (allocations, `let`s, a seed's store, a loop making an array the
//! steps read) touch none of that: they move before the first call. The rows are at most 256 atoms
//! (one leaf each: a leaf of 256 rows stays in the second-level cache).

use super::ranges::each_load_in;
use super::*;
use std::collections::HashSet;

/// The longest row (a compile-time count) whose sums are one leaf.
const LONGEST_ROW: i64 = 256;

/// Every such pair among the outermost statements of `body`.
pub(super) fn one_pass_pairs(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    let mut i = 0;
    while i < body.len() {
        match pair_at(body, i, names) {
            Some((end, with)) => {
                let n = with.len();
                body.splice(i..end, with);
                i += n;
            }
            None => i += 1,
        }
    }
}

/// The arguments of a call of `rt_contract_f32` of one column (`n` = 1).
fn matvec(s: &Stmt) -> Option<&[Expr]> {
    match s {
        Stmt::Call {
            func: "rt_contract_f32",
            args,
        } if args.len() == 15 && args[7] == Expr::Int(1) => Some(args),
        _ => None,
    }
}

fn addr(e: &Expr) -> Option<(Var, &Expr)> {
    match e {
        Expr::Addr { buf, index } => Some((*buf, index)),
        _ => None,
    }
}

/// Whether `e` reads or names any of `bufs`.
fn mentions(e: &Expr, bufs: &HashSet<Var>) -> bool {
    let mut hit = false;
    e.each_var(&mut |v| hit |= bufs.contains(&v));
    hit
}

/// The loop's body: only `let`s, stores at `k`, `if`s and failures,
/// every load of a buffer in `written` at `k`. Its stored buffers added
/// to `stored`, its loaded ones to `loaded`.
fn row_local(
    stmts: &[Stmt],
    k: Var,
    written: &HashSet<Var>,
    stored: &mut HashSet<Var>,
    loaded: &mut HashSet<Var>,
) -> bool {
    let at_k = Expr::Var(k);
    let mut ok = true;
    let mut loads = |e: &Expr, loaded: &mut HashSet<Var>| {
        each_load_in(e, &mut |b, index| {
            loaded.insert(b);
            ok &= !written.contains(&b) || *index == at_k;
        });
        // (No address of a buffer: nothing but loads reads one.)
        let mut no_addr = true;
        any_addr(e, &mut no_addr);
        ok &= no_addr;
    };
    for s in stmts {
        match s {
            Stmt::Let { value, .. } => loads(value, loaded),
            Stmt::Store { buf, index, value } => {
                if *index != at_k {
                    return false;
                }
                stored.insert(*buf);
                loads(value, loaded);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                loads(cond, loaded);
                if !row_local(then, k, written, stored, loaded)
                    || !row_local(otherwise, k, written, stored, loaded)
                {
                    return false;
                }
            }
            Stmt::Fail { .. } => {}
            _ => return false,
        }
    }
    ok
}

fn any_addr(e: &Expr, none: &mut bool) {
    match e {
        Expr::Addr { .. } => *none = false,
        Expr::Load { index, .. } => any_addr(index, none),
        Expr::Op { args, .. } => args.iter().for_each(|a| any_addr(a, none)),
        _ => {}
    }
}

/// A statement between the three that can move before the first: one
/// that reads nothing in `live`, stores into nothing in `touched` (nor in
/// `live`), and calls nothing (an allocation, a `let`, a seed stored, a
/// loop that makes an array the step reads).
fn movable(s: &Stmt, live: &HashSet<Var>, touched: &HashSet<Var>) -> bool {
    let mut ok = true;
    Stmt::each(std::slice::from_ref(s), &mut |s| {
        match s {
            Stmt::Store { buf, .. } => ok &= !touched.contains(buf) && !live.contains(buf),
            Stmt::Call { .. } | Stmt::Swap { .. } => ok = false,
            _ => {}
        }
        for e in s.exprs() {
            ok &= !mentions(e, live);
        }
    });
    ok
}

fn fresh(names: &mut Vec<String>, name: &str) -> Var {
    names.push(name.to_string());
    Var(names.len() as u32 - 1)
}

/// The pair whose first call is `body[i]`: the end of the statements it
/// replaces and what replaces them.
fn pair_at(body: &[Stmt], i: usize, names: &mut Vec<String>) -> Option<(usize, Vec<Stmt>)> {
    let c1 = matvec(&body[i])?;
    let (x, x_off) = addr(&c1[0])?;
    let (as_i, as_p) = (&c1[1], &c1[2]);
    let (w, _) = addr(&c1[3])?;
    let (rows, row_len) = (&c1[6], &c1[8]);
    let (c, c_at) = addr(&c1[9])?;
    let Expr::Int(lanes) = *row_len else {
        return None;
    };
    if !(1..=LONGEST_ROW).contains(&lanes) || *c_at != Expr::Int(0) || c1[10] != Expr::Int(1) {
        return None;
    }
    // The next call, the second; the loops over the rows before it, the
    // steps (each row's, one after another); what else lies between moves.
    let l = i
        + 1
        + body[i + 1..]
            .iter()
            .position(|s| matches!(s, Stmt::Call { .. }))?;
    let is_step = |s: &Stmt| matches!(s, Stmt::For { count, parallel: true, .. } if count == rows);
    let first_step = i + 1 + body[i + 1..l].iter().position(is_step)?;
    let steps: Vec<(Var, &[Stmt])> = body[i + 1..l]
        .iter()
        .filter_map(|s| match s {
            Stmt::For {
                index,
                count,
                parallel: true,
                body,
            } if count == rows => Some((*index, body.as_slice())),
            _ => None,
        })
        .collect();
    let c2 = matvec(body.get(l)?)?;
    let (r, r_at) = addr(&c2[3])?;
    let (has_seed, seed) = (&c2[13], &c2[14]);
    if c2[0] != c1[0]
        || c2[1] != *as_p
        || c2[2] != *as_i
        || c2[5] != Expr::Int(1)
        || *r_at != Expr::Int(0)
        || c2[6] != *row_len
        || c2[8] != *rows
        || c2[12] != Expr::Int(contract::TREE)
        || !matches!(has_seed, Expr::Int(0 | 1))
        || !matches!(c1[13], Expr::Int(0 | 1))
    {
        return None;
    }
    let (out, _) = addr(&c2[9])?;
    let written: HashSet<Var> = [c, r].into();
    let (mut stored, mut loaded) = (HashSet::new(), HashSet::new());
    for (_, step) in &steps {
        Stmt::each(step, &mut |s| {
            if let Stmt::Store { buf, .. } = s {
                stored.insert(*buf);
            }
        });
    }
    let written: HashSet<Var> = written.union(&stored).copied().collect();
    let mut stored = HashSet::new();
    for (k, step) in &steps {
        if !row_local(step, *k, &written, &mut stored, &mut loaded) {
            return None;
        }
    }
    // Neither call's matrix, vector nor result written by the loop; the
    // second's result not read by it.
    if [x, w, out].iter().any(|b| stored.contains(b)) || loaded.contains(&out) || [x, w].contains(&r) {
        return None;
    }
    // Every size and seed known before the first call.
    for e in [x_off, as_i, as_p, &c1[5], rows, &c1[14], seed, &c2[10], &c2[9]] {
        if mentions(e, &written) {
            return None;
        }
    }
    // (Those before the loop may make what it reads; those after it not.)
    let before: HashSet<Var> = [x, w, c, r, out]
        .into_iter()
        .chain(stored.iter().copied())
        .collect();
    let after: HashSet<Var> = before.union(&loaded).copied().collect();
    let between: Vec<&Stmt> = body[i + 1..l].iter().filter(|s| !is_step(s)).collect();
    if !body[i + 1..first_step]
        .iter()
        .all(|s| movable(s, &written, &before))
        || !body[first_step..l]
            .iter()
            .all(|s| is_step(s) || movable(s, &written, &after))
    {
        return None;
    }
    let mut with: Vec<Stmt> = between.into_iter().cloned().collect();
    with.extend(one_pass(
        Pair {
            x,
            x_off: x_off.clone(),
            as_i: as_i.clone(),
            as_p: as_p.clone(),
            w_arg: c1[3].clone(),
            w_step: c1[5].clone(),
            rows: rows.clone(),
            lanes,
            c,
            first_seed: (c1[13].clone(), c1[14].clone()),
            steps: steps.iter().map(|(k, step)| (*k, step.to_vec())).collect(),
            r,
            out: c2[9].clone(),
            out_step: c2[10].clone(),
            seed: (has_seed.clone(), seed.clone()),
        },
        names,
    ));
    Some((l + 1, with))
}

struct Pair {
    x: Var,
    x_off: Expr,
    as_i: Expr,
    as_p: Expr,
    w_arg: Expr,
    w_step: Expr,
    rows: Expr,
    lanes: i64,
    c: Var,
    first_seed: (Expr, Expr),
    /// Each step's loop: its index and body.
    steps: Vec<(Var, Vec<Stmt>)>,
    r: Var,
    out: Expr,
    out_step: Expr,
    seed: (Expr, Expr),
}

/// The one pass (see the module's comment).
fn one_pass(p: Pair, names: &mut Vec<String>) -> Vec<Stmt> {
    let v = Expr::Var;
    let lanes = Expr::Int(p.lanes);
    let mut out = Vec::new();
    let (top, parts, psum, seed) = (
        fresh(names, "top"),
        fresh(names, "parts"),
        fresh(names, "psum"),
        fresh(names, "seed"),
    );
    out.push(Stmt::Alloc {
        buf: top,
        elem: Elem::Int,
        len: Expr::Int(18),
    });
    out.push(Stmt::Call {
        func: "rt_tree_top",
        args: vec![
            p.rows.clone(),
            Expr::Addr {
                buf: top,
                index: Box::new(Expr::Int(0)),
            },
        ],
    });
    out.push(Stmt::Let {
        var: parts,
        elem: Elem::Int,
        value: Expr::load(top, Expr::Int(0)),
    });
    out.push(Stmt::Alloc {
        buf: psum,
        elem: Elem::Float,
        len: Expr::Int(16 * p.lanes),
    });
    out.push(Stmt::Let {
        var: seed,
        elem: Elem::Float,
        value: p.seed.1.clone(),
    });
    // A sum of at most 256 rows is one leaf, from the seed.
    let from_seed = match &p.seed.0 {
        Expr::Int(0) => Expr::Bool(false),
        _ => Expr::op("<=", vec![p.rows.clone(), Expr::Int(LONGEST_ROW)]),
    };
    let (part, nlo, nn, mq, plan, nleaf, held, sp) = (
        fresh(names, "part"),
        fresh(names, "nlo"),
        fresh(names, "nn"),
        fresh(names, "mq"),
        fresh(names, "pplan"),
        fresh(names, "nleaf"),
        fresh(names, "held"),
        fresh(names, "sp"),
    );
    let mut part_body = vec![
        Stmt::Let {
            var: nlo,
            elem: Elem::Int,
            value: Expr::load(top, Expr::add(v(part), Expr::Int(1))),
        },
        Stmt::Let {
            var: nn,
            elem: Elem::Int,
            value: Expr::op(
                "-",
                vec![Expr::load(top, Expr::add(v(part), Expr::Int(2))), v(nlo)],
            ),
        },
        Stmt::Let {
            var: mq,
            elem: Elem::Int,
            value: Expr::add(
                Expr::op("/", vec![Expr::add(v(nn), Expr::Int(127)), Expr::Int(128)]),
                Expr::Int(1),
            ),
        },
        Stmt::Alloc {
            buf: plan,
            elem: Elem::Int,
            len: Expr::add(Expr::mul(v(mq), Expr::Int(2)), Expr::Int(4)),
        },
        Stmt::Call {
            func: "rt_tree_leaf_bounds",
            args: vec![
                v(nn),
                Expr::Addr {
                    buf: plan,
                    index: Box::new(Expr::Int(0)),
                },
            ],
        },
        Stmt::Let {
            var: nleaf,
            elem: Elem::Int,
            value: Expr::load(plan, Expr::Int(0)),
        },
        Stmt::Alloc {
            buf: held,
            elem: Elem::Float,
            len: Expr::mul(
                Expr::add(Expr::load(plan, Expr::Int(1)), Expr::Int(1)),
                lanes.clone(),
            ),
        },
        Stmt::Let {
            var: sp,
            elem: Elem::Int,
            value: Expr::Int(0),
        },
    ];
    let (t, first, cnt, kk, merges) = (
        fresh(names, "t"),
        fresh(names, "first"),
        fresh(names, "cnt"),
        fresh(names, "kk"),
        fresh(names, "merges"),
    );
    let rows_at = Expr::Addr {
        buf: p.x,
        index: Box::new(Expr::add(p.x_off.clone(), Expr::mul(v(first), p.as_i.clone()))),
    };
    let mut leaf = vec![
        Stmt::Let {
            var: first,
            elem: Elem::Int,
            value: Expr::add(v(nlo), Expr::load(plan, Expr::add(v(t), Expr::Int(2)))),
        },
        Stmt::Let {
            var: cnt,
            elem: Elem::Int,
            value: Expr::op(
                "-",
                vec![
                    Expr::add(v(nlo), Expr::load(plan, Expr::add(v(t), Expr::Int(3)))),
                    v(first),
                ],
            ),
        },
        Stmt::Call {
            func: "rt_pair_rows",
            args: vec![
                rows_at.clone(),
                p.as_i.clone(),
                p.as_p.clone(),
                p.w_arg,
                p.w_step,
                v(cnt),
                lanes.clone(),
                Expr::Addr {
                    buf: p.c,
                    index: Box::new(v(first)),
                },
                p.first_seed.0,
                p.first_seed.1,
            ],
        },
    ];
    for (n, (k, step)) in p.steps.into_iter().enumerate() {
        let kk = if n == 0 { kk } else { fresh(names, "kk") };
        let mut body = vec![Stmt::Let {
            var: k,
            elem: Elem::Int,
            value: Expr::add(v(first), v(kk)),
        }];
        body.extend(step);
        leaf.push(Stmt::For {
            index: kk,
            count: v(cnt),
            parallel: false,
            body,
        });
    }
    leaf.extend([
        Stmt::Let {
            var: merges,
            elem: Elem::Int,
            value: Expr::load(plan, Expr::add(Expr::add(v(t), Expr::Int(3)), v(mq))),
        },
        Stmt::Call {
            func: "rt_pair_leaf",
            args: vec![
                rows_at,
                p.as_i.clone(),
                p.as_p.clone(),
                Expr::Addr {
                    buf: p.r,
                    index: Box::new(v(first)),
                },
                v(cnt),
                lanes.clone(),
                Expr::Addr {
                    buf: held,
                    index: Box::new(Expr::Int(0)),
                },
                v(sp),
                v(merges),
                from_seed,
                v(seed),
            ],
        },
        Stmt::Set {
            var: sp,
            value: Expr::add(Expr::op("-", vec![v(sp), v(merges)]), Expr::Int(1)),
        },
    ]);
    part_body.push(Stmt::For {
        index: t,
        count: v(nleaf),
        parallel: false,
        body: leaf,
    });
    let lane = fresh(names, "l");
    part_body.push(Stmt::For {
        index: lane,
        count: lanes.clone(),
        parallel: false,
        body: vec![Stmt::Store {
            buf: psum,
            index: Expr::add(Expr::mul(v(part), lanes.clone()), v(lane)),
            value: Expr::load(held, v(lane)),
        }],
    });
    out.push(Stmt::For {
        index: part,
        count: v(parts),
        parallel: true,
        body: part_body,
    });
    out.push(Stmt::Call {
        func: "rt_pair_total",
        args: vec![
            Expr::Addr {
                buf: psum,
                index: Box::new(Expr::Int(0)),
            },
            v(parts),
            lanes,
            p.out,
            p.out_step,
            p.rows,
            p.seed.0,
            v(seed),
        ],
    });
    out
}
