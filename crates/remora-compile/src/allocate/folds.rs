//! Rules for folds as people write them (the style matrix): a fold whose
//! state is a vector stepped atom by atom (Horner's rule over a whole
//! vector: `(fold (fn (acc c) (f.+ (f.* acc xs) c)) zeros cs)`) turned
//! inside out — one loop over the state's atoms, each atom's whole fold
//! in a scalar, instead of one pass over the state per item.

use super::*;

/// The step of a fold over `count` items whose state is the vector `acc`
/// (written into `next`, then swapped), `step` = `let …; for i < n { let
/// …; next[i] = value }; swap`, where every atom of the next state is
/// computed from the same atom of the state alone (`acc[i]`, no other
/// atom of it, nothing of `next`), by scalar `let`s: the fold as one loop
/// over the atoms, `acc[i]` a scalar `state` (of `elem`) through all the items. Each atom gets
/// the same operations in the same order, so the same bits; a step that
/// fails fails for the first item it fails on either way (an item's
/// `let`s now run again per atom: only where they cannot fail).
pub(super) fn fold_per_atom(
    acc: Var,
    next: Var,
    k: Var,
    count: &Expr,
    step: &[Stmt],
    state: Var,
    elem: Elem,
) -> Option<Vec<Stmt>> {
    let [
        lets @ ..,
        Stmt::For {
            index: i,
            count: n,
            parallel,
            body,
        },
        Stmt::Swap { a, b },
    ] = step
    else {
        return None;
    };
    if (*a, *b) != (acc, next) {
        return None;
    }
    let state_bufs = [acc, next];
    for l in lets {
        let Stmt::Let { value, .. } = l else {
            return None;
        };
        if !cannot_fail(value) || mentions(value, &state_bufs) || mentions(value, &[*i]) {
            return None;
        }
    }
    if mentions(n, &state_bufs) || mentions(n, &[k]) {
        return None;
    }
    let [atom_lets @ .., Stmt::Store { buf, index, value }] = body.as_slice() else {
        return None;
    };
    if *buf != next || *index != Expr::Var(*i) {
        return None;
    }
    // The atom's step, `acc[i]` read as the scalar.
    let mut per_item: Vec<Stmt> = lets.to_vec();
    for l in atom_lets {
        let Stmt::Let { var, elem, value } = l else {
            return None;
        };
        per_item.push(Stmt::Let {
            var: *var,
            elem: *elem,
            value: read_state(value, acc, next, *i, state)?,
        });
    }
    per_item.push(Stmt::Set {
        var: state,
        value: read_state(value, acc, next, *i, state)?,
    });
    Some(vec![Stmt::For {
        index: *i,
        count: n.clone(),
        parallel: *parallel,
        body: vec![
            Stmt::Let {
                var: state,
                elem,
                value: Expr::load(acc, Expr::Var(*i)),
            },
            Stmt::For {
                index: k,
                count: count.clone(),
                parallel: false,
                body: per_item,
            },
            Stmt::Store {
                buf: acc,
                index: Expr::Var(*i),
                value: Expr::Var(state),
            },
        ],
    }])
}

/// `e` with `acc[i]` as the variable `state`; `None` where it reads `acc`
/// elsewhere or `next` at all.
fn read_state(e: &Expr, acc: Var, next: Var, i: Var, state: Var) -> Option<Expr> {
    Some(match e {
        Expr::Load { buf, index } if *buf == acc => {
            if **index != Expr::Var(i) {
                return None;
            }
            Expr::Var(state)
        }
        Expr::Load { buf, index } => {
            if *buf == next || mentions(index, &[acc, next]) {
                return None;
            }
            e.clone()
        }
        Expr::Addr { .. } => return None,
        Expr::Op { op, args } => Expr::Op {
            op,
            args: args
                .iter()
                .map(|a| read_state(a, acc, next, i, state))
                .collect::<Option<Vec<_>>>()?,
        },
        Expr::Var(v) if *v == acc || *v == next => return None,
        _ => e.clone(),
    })
}

fn mentions(e: &Expr, vars: &[Var]) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= vars.contains(&v));
    found
}

/// Whether `e` cannot fail (no division, power, shift or checked
/// dimension arithmetic).
fn cannot_fail(e: &Expr) -> bool {
    match e {
        Expr::Op { op, args } => {
            !matches!(*op, "/" | "mod" | "^" | "shl" | "shr" | "dim+" | "dim*" | "wrap")
                && args.iter().all(cannot_fail)
        }
        Expr::Load { index, .. } | Expr::Addr { index, .. } => cannot_fail(index),
        _ => true,
    }
}

/// The most atoms of a vector state kept in scalars.
const MOST_SCALARS: i64 = 8;

impl<'m> Alloc<'m> {
    /// The step of a fold over `count` items whose state is a short vector
    /// of `len` atoms (`acc`, written into `next`, then swapped) where the
    /// step reads and writes the state only at constant places (`[m s]`
    /// by `head` and `last`): the state in `len` scalars through the
    /// items, no buffer written per item, stored into `acc` once at the
    /// end. The same operations on the same values: the same bits.
    pub(super) fn fold_in_scalars(
        &mut self,
        acc: Var,
        next: Var,
        k: Var,
        count: &Expr,
        step: &[Stmt],
        elem: Elem,
        len: &Expr,
    ) -> Option<Vec<Stmt>> {
        let Expr::Int(len) = *len else {
            return None;
        };
        if !(1..=MOST_SCALARS).contains(&len) {
            return None;
        }
        let [stmts @ .., Stmt::Swap { a, b }] = step else {
            return None;
        };
        if (*a, *b) != (acc, next) {
            return None;
        }
        let states: Vec<Var> = (0..len).map(|_| self.fresh("state")).collect();
        let mut written: Vec<Option<Var>> = vec![None; len as usize];
        let mut per_item = Vec::new();
        for s in stmts {
            match s {
                Stmt::Let { var, elem, value } => per_item.push(Stmt::Let {
                    var: *var,
                    elem: *elem,
                    value: state_at(value, acc, next, &states)?,
                }),
                Stmt::Store { buf, index, value } if *buf == next => {
                    let c = constant(index).filter(|c| (0..len).contains(c))? as usize;
                    if written[c].is_some() {
                        return None;
                    }
                    let t = self.fresh("step");
                    per_item.push(Stmt::Let {
                        var: t,
                        elem,
                        value: state_at(value, acc, next, &states)?,
                    });
                    written[c] = Some(t);
                }
                _ => return None,
            }
        }
        for (s, t) in states.iter().zip(&written) {
            per_item.push(Stmt::Set {
                var: *s,
                value: Expr::Var((*t)?),
            });
        }
        let mut out: Vec<Stmt> = states
            .iter()
            .enumerate()
            .map(|(c, s)| Stmt::Let {
                var: *s,
                elem,
                value: Expr::load(acc, Expr::Int(c as i64)),
            })
            .collect();
        out.push(Stmt::For {
            index: k,
            count: count.clone(),
            parallel: false,
            body: per_item,
        });
        out.extend(states.iter().enumerate().map(|(c, s)| Stmt::Store {
            buf: acc,
            index: Expr::Int(c as i64),
            value: Expr::Var(*s),
        }));
        Some(out)
    }
}

/// An Int expression of constants only, evaluated (`+`, `-`, `*`).
fn constant(e: &Expr) -> Option<i64> {
    match e {
        Expr::Int(n) => Some(*n),
        Expr::Op { op, args } => match (*op, args.as_slice()) {
            ("+", [a, b]) => constant(a)?.checked_add(constant(b)?),
            ("-", [a, b]) => constant(a)?.checked_sub(constant(b)?),
            ("*", [a, b]) => constant(a)?.checked_mul(constant(b)?),
            _ => None,
        },
        _ => None,
    }
}

/// `e` with `acc[c]` (a constant place) as the state's scalar `c`; `None`
/// where it reads `acc` elsewhere or `next` at all.
fn state_at(e: &Expr, acc: Var, next: Var, states: &[Var]) -> Option<Expr> {
    Some(match e {
        Expr::Load { buf, index } if *buf == acc => {
            let c = constant(index)?;
            Expr::Var(*states.get(usize::try_from(c).ok()?)?)
        }
        Expr::Load { buf, index } => {
            if *buf == next || mentions(index, &[acc, next]) {
                return None;
            }
            e.clone()
        }
        Expr::Addr { .. } => return None,
        Expr::Op { op, args } => Expr::Op {
            op,
            args: args
                .iter()
                .map(|a| state_at(a, acc, next, states))
                .collect::<Option<Vec<_>>>()?,
        },
        Expr::Var(v) if *v == acc || *v == next => return None,
        _ => e.clone(),
    })
}

/// How many rows of a lifted fold run side by side.
const LANES: i64 = 8;
/// The most statements of a fold's step written out once per lane.
const MOST_STEP: usize = 32;

/// Every parallel loop (at any depth) whose body is a fold with a scalar
/// state — `for i < n parallel { …; for k < K { let …; set state … }; … }`,
/// a fold written for one row lifted over the rows — run eight rows side by
/// side: for each block of eight rows, the eight rows' `…` before, then one
/// loop over the items whose step is the eight rows' steps one after
/// another, then the eight rows' `…` after (the rows left over as before).
/// One row's fold is a chain of dependent operations, each waiting on the
/// last (an `f.exp` of the running maximum …); eight independent chains
/// fill that time. Each row gets the same operations in the same order:
/// the same bits. The iterations are independent (the loop is parallel),
/// so their interleaving changes nothing but which of two failing rows
/// fails first (an error either way).
pub(super) fn interleave_lifted_folds(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body.drain(..) {
        if let Some(lanes) = interleaved(&s, names) {
            out.extend(lanes);
            continue;
        }
        match &mut s {
            Stmt::For { body, .. } | Stmt::DoWhile { body, .. } | Stmt::Reduce { body, .. } => {
                interleave_lifted_folds(body, names)
            }
            Stmt::If { then, otherwise, .. } => {
                interleave_lifted_folds(then, names);
                interleave_lifted_folds(otherwise, names);
            }
            _ => {}
        }
        out.push(s);
    }
    *body = out;
}

/// Whether `body` may be written out once per lane in any order with the
/// other lanes': no runtime call (a trace's order), no loop that may not
/// end, nothing exchanged.
fn straight(body: &[Stmt]) -> bool {
    body.iter().all(|s| match s {
        Stmt::Let { .. } | Stmt::Set { .. } | Stmt::Alloc { .. } | Stmt::Data { .. } | Stmt::Store { .. } => {
            true
        }
        Stmt::Fail { .. } => true,
        Stmt::For {
            body,
            parallel: false,
            ..
        }
        | Stmt::Reduce { body, .. } => straight(body),
        Stmt::If { then, otherwise, .. } => straight(then) && straight(otherwise),
        _ => false,
    })
}

fn interleaved(s: &Stmt, names: &mut Vec<String>) -> Option<Vec<Stmt>> {
    let Stmt::For {
        index: i,
        count: n,
        parallel: true,
        body,
    } = s
    else {
        return None;
    };
    let at = body
        .iter()
        .position(|s| matches!(s, Stmt::For { parallel: false, body, .. } if body.iter().any(|s| matches!(s, Stmt::Set { .. }))))?;
    let (pre, rest) = body.split_at(at);
    let [
        Stmt::For {
            index: k,
            count: items,
            body: step,
            ..
        },
        post @ ..,
    ] = rest
    else {
        return None;
    };
    if step.len() > MOST_STEP
        || !step
            .iter()
            .all(|s| matches!(s, Stmt::Let { .. } | Stmt::Set { .. }))
    {
        return None;
    }
    if !straight(pre) || !straight(post) {
        return None;
    }
    // The items' count the same for every row.
    let mut declared = vec![*i];
    declare_all(pre, &mut declared);
    if mentions(items, &declared) {
        return None;
    }
    let block = fresh_like(names, "blk");
    let item = fresh_like(names, &names[k.0 as usize].clone());
    let mut lane_pre = Vec::new();
    let mut lane_step = Vec::new();
    let mut lane_post = Vec::new();
    for l in 0..LANES {
        let row = fresh_like(names, &names[i.0 as usize].clone());
        let mut map = HashMap::new();
        map.insert(*i, row);
        map.insert(*k, item);
        lane_pre.push(Stmt::Let {
            var: row,
            elem: Elem::Int,
            value: Expr::add(Expr::mul(Expr::Var(block), Expr::Int(LANES)), Expr::Int(l)),
        });
        lane_pre.extend(pre.iter().map(|s| renamed(s, &mut map, names)));
        lane_step.extend(step.iter().map(|s| renamed(s, &mut map, names)));
        lane_post.extend(post.iter().map(|s| renamed(s, &mut map, names)));
    }
    let blocks = Expr::op("/", vec![n.clone(), Expr::Int(LANES)]);
    let mut block_body = lane_pre;
    block_body.push(Stmt::For {
        index: item,
        count: items.clone(),
        parallel: false,
        body: lane_step,
    });
    block_body.extend(lane_post);
    // The rows left over, as they were.
    let left = fresh_like(names, "left");
    let mut left_body = vec![Stmt::Let {
        var: *i,
        elem: Elem::Int,
        value: Expr::add(Expr::mul(blocks.clone(), Expr::Int(LANES)), Expr::Var(left)),
    }];
    left_body.extend(body.iter().cloned());
    Some(vec![
        Stmt::For {
            index: block,
            count: blocks.clone(),
            parallel: true,
            body: block_body,
        },
        Stmt::For {
            index: left,
            count: Expr::op("-", vec![n.clone(), Expr::mul(blocks, Expr::Int(LANES))]),
            parallel: false,
            body: left_body,
        },
    ])
}

fn fresh_like(names: &mut Vec<String>, name: &str) -> Var {
    let v = Var(names.len() as u32);
    names.push(name.to_string());
    v
}

/// Every variable `body` declares, at any depth.
fn declare_all(body: &[Stmt], out: &mut Vec<Var>) {
    for s in body {
        match s {
            Stmt::Let { var, .. } => out.push(*var),
            Stmt::Alloc { buf, .. } | Stmt::Data { buf, .. } => out.push(*buf),
            Stmt::For { index, body, .. } => {
                out.push(*index);
                declare_all(body, out);
            }
            Stmt::Reduce { acc, index, body, .. } => {
                out.extend([*acc, *index]);
                declare_all(body, out);
            }
            Stmt::If { then, otherwise, .. } => {
                declare_all(then, out);
                declare_all(otherwise, out);
            }
            Stmt::DoWhile { body, .. } => declare_all(body, out),
            _ => {}
        }
    }
}

/// `s` with every variable it declares a fresh one (recorded in `map`) and
/// every variable in `map` read as its new one.
fn renamed(s: &Stmt, map: &mut HashMap<Var, Var>, names: &mut Vec<String>) -> Stmt {
    fn decl(v: Var, map: &mut HashMap<Var, Var>, names: &mut Vec<String>) -> Var {
        let name = names[v.0 as usize].clone();
        let new = fresh_like(names, &name);
        map.insert(v, new);
        new
    }
    fn var(v: Var, map: &HashMap<Var, Var>) -> Var {
        map.get(&v).copied().unwrap_or(v)
    }
    fn expr(e: &Expr, map: &HashMap<Var, Var>) -> Expr {
        match e {
            Expr::Var(v) => Expr::Var(var(*v, map)),
            Expr::Load { buf, index } => Expr::load(var(*buf, map), expr(index, map)),
            Expr::Addr { buf, index } => Expr::Addr {
                buf: var(*buf, map),
                index: Box::new(expr(index, map)),
            },
            Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| expr(a, map)).collect()),
            _ => e.clone(),
        }
    }
    let block = |b: &[Stmt], map: &mut HashMap<Var, Var>, names: &mut Vec<String>| {
        b.iter().map(|s| renamed(s, map, names)).collect::<Vec<_>>()
    };
    match s {
        Stmt::Let { var: v, elem, value } => {
            let value = expr(value, map);
            Stmt::Let {
                var: decl(*v, map, names),
                elem: *elem,
                value,
            }
        }
        Stmt::Set { var: v, value } => Stmt::Set {
            var: var(*v, map),
            value: expr(value, map),
        },
        Stmt::Alloc { buf, elem, len } => {
            let len = expr(len, map);
            Stmt::Alloc {
                buf: decl(*buf, map, names),
                elem: *elem,
                len,
            }
        }
        Stmt::Data { buf, elem, atoms } => {
            let atoms = atoms.iter().map(|a| expr(a, map)).collect();
            Stmt::Data {
                buf: decl(*buf, map, names),
                elem: *elem,
                atoms,
            }
        }
        Stmt::Store { buf, index, value } => Stmt::Store {
            buf: var(*buf, map),
            index: expr(index, map),
            value: expr(value, map),
        },
        Stmt::For {
            index,
            count,
            parallel,
            body,
        } => {
            let count = expr(count, map);
            let index = decl(*index, map, names);
            Stmt::For {
                index,
                count,
                parallel: *parallel,
                body: block(body, map, names),
            }
        }
        Stmt::Reduce {
            acc,
            elem,
            op,
            seed,
            order,
            index,
            count,
            body,
            item,
        } => {
            let seed = seed.as_ref().map(|e| expr(e, map));
            let count = expr(count, map);
            let index = decl(*index, map, names);
            let body = block(body, map, names);
            let item = expr(item, map);
            Stmt::Reduce {
                acc: decl(*acc, map, names),
                elem: *elem,
                op,
                seed,
                order: *order,
                index,
                count,
                body,
                item,
            }
        }
        Stmt::If {
            cond,
            then,
            otherwise,
        } => Stmt::If {
            cond: expr(cond, map),
            then: block(then, map, names),
            otherwise: block(otherwise, map, names),
        },
        Stmt::DoWhile { body, cond } => {
            let body = block(body, map, names);
            Stmt::DoWhile {
                body,
                cond: expr(cond, map),
            }
        }
        Stmt::Fail { what } => Stmt::Fail { what: what.clone() },
        Stmt::Call { func, args } => Stmt::Call {
            func,
            args: args.iter().map(|a| expr(a, map)).collect(),
        },
        Stmt::Swap { a, b } => Stmt::Swap {
            a: var(*a, map),
            b: var(*b, map),
        },
    }
}
