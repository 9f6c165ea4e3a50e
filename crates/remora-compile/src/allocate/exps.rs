//! One exp for the two of an online step. A step of the online log-sum-exp
//! (or softmax) rescales by the new maximum `m = (f.max a b)` both the
//! running sum, `(f.exp (f.- a m))`, and the new item, `(f.exp (f.- b m))`.
//! `m` is one of `a` and `b` (or NaN, where either is), so one of the two
//! differences is that operand less itself: ±0 (whose exp is exactly 1) or
//! NaN (an infinite operand, or a NaN: whose exp is the NaN doubled). Only
//! the other difference needs the exp: computed once (`exp.either`: the
//! exp of the first difference unless it is ±0 or NaN, else of the
//! second), each exp then that or its difference's own (`exp.given`). The
//! same values as the two exps, bit for bit, for every `a` and `b`.

use super::*;
use std::collections::HashMap;

/// Every such pair of `let`s in `body`, at any depth.
pub(super) fn one_exp_of_two(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    for s in body.iter_mut() {
        for inner in s.bodies_mut() {
            one_exp_of_two(inner, names);
        }
    }
    let pairs = pairs(body);
    if pairs.is_empty() {
        return;
    }
    let mut out = Vec::with_capacity(body.len() + pairs.len());
    for (i, s) in body.drain(..).enumerate() {
        let Stmt::Let { var, elem, value } = s else {
            out.push(s);
            continue;
        };
        let diff = exp_operand(&value).cloned();
        match (
            pairs.iter().find(|p| p.first == i),
            pairs.iter().find(|p| p.second == i),
            diff,
        ) {
            (Some(p), _, Some(diff)) => {
                let both = styles::fresh(names, "exps");
                out.push(Stmt::Let {
                    var: both,
                    elem: Elem::Float,
                    value: Expr::op("exp.either", vec![diff.clone(), p.other.clone()]),
                });
                out.push(Stmt::Let {
                    var,
                    elem,
                    value: Expr::op("exp.given", vec![diff, Expr::Var(both)]),
                });
                p.both.set(Some(both));
            }
            (_, Some(p), Some(diff)) => match p.both.get() {
                Some(both) => out.push(Stmt::Let {
                    var,
                    elem,
                    value: Expr::op("exp.given", vec![diff, Expr::Var(both)]),
                }),
                None => out.push(Stmt::Let { var, elem, value }),
            },
            _ => out.push(Stmt::Let { var, elem, value }),
        }
    }
    *body = out;
}

/// Two `let`s of a body, `first` before `second`, each the exp of an
/// operand of a maximum less that maximum, of the maximum's two operands;
/// `other`: `second`'s difference written where `first` is.
struct Pair {
    first: usize,
    second: usize,
    other: Expr,
    both: std::cell::Cell<Option<Var>>,
}

/// A `let` of an exp of `operand` less `max`, both as `canon` writes them;
/// `diff`, its operand as written.
struct Candidate {
    at: usize,
    operand: Expr,
    max: (Expr, Expr),
    diff: Expr,
}

/// The pairs of `body`'s runs of `let`s (a statement of another kind ends
/// a run: what it writes or sets may change what a variable means).
fn pairs(body: &[Stmt]) -> Vec<Pair> {
    let mut pairs = Vec::new();
    let mut defs: HashMap<Var, Expr> = HashMap::new();
    let mut written: HashMap<Var, Expr> = HashMap::new();
    let mut bound_at: HashMap<Var, usize> = HashMap::new();
    let mut open: Vec<Candidate> = Vec::new();
    for (i, s) in body.iter().enumerate() {
        let Stmt::Let { var, elem, value } = s else {
            defs.clear();
            written.clear();
            bound_at.clear();
            open.clear();
            continue;
        };
        bound_at.insert(*var, i);
        let found = match (elem, exp_operand(value)) {
            (Elem::Float, Some(arg)) => candidate(i, arg, &defs),
            _ => None,
        };
        if let Some(c) = found {
            let partner = open.iter().enumerate().find_map(|(k, o)| {
                let pair = (o.max == c.max || o.max == (c.max.1.clone(), c.max.0.clone()))
                    && o.operand != c.operand
                    && [&c.max.0, &c.max.1].contains(&&o.operand);
                // Computed earlier than it was: only what cannot fail.
                let other = written_before(&c.diff, o.at, &written, &bound_at).filter(ranges::cannot_fail);
                other.filter(|_| pair).map(|other| (k, other))
            });
            match partner {
                Some((k, other)) => {
                    let o = open.remove(k);
                    pairs.push(Pair {
                        first: o.at,
                        second: i,
                        other,
                        both: std::cell::Cell::new(None),
                    });
                }
                None => open.push(c),
            }
        }
        if !value.calls_costly() && !reads_random(value) {
            defs.insert(*var, canon(value, &defs));
            written.insert(*var, value.clone());
        }
    }
    pairs
}

/// The operand of an exp.
fn exp_operand(value: &Expr) -> Option<&Expr> {
    match value {
        Expr::Op { op: "f.exp", args } if args.len() == 1 => Some(&args[0]),
        _ => None,
    }
}

/// `arg`, as `canon` writes it, when it is an operand of a maximum less
/// that maximum.
fn candidate(at: usize, arg: &Expr, defs: &HashMap<Var, Expr>) -> Option<Candidate> {
    let diff = canon(arg, defs);
    let Expr::Op { op: "f.-", args } = &diff else {
        return None;
    };
    let Expr::Op { op: "f.max", args: m } = &args[1] else {
        return None;
    };
    if args[0] != m[0] && args[0] != m[1] {
        return None;
    }
    Some(Candidate {
        at,
        operand: args[0].clone(),
        max: (m[0].clone(), m[1].clone()),
        diff: arg.clone(),
    })
}

/// `e` with each variable that a `let` of the run bound to a value without
/// costly calls replaced by that value: two expressions that read the same
/// are the same value.
fn canon(e: &Expr, defs: &HashMap<Var, Expr>) -> Expr {
    match e {
        Expr::Var(v) => defs.get(v).cloned().unwrap_or(Expr::Var(*v)),
        Expr::Load { buf, index } => Expr::load(*buf, canon(index, defs)),
        Expr::Addr { buf, index } => Expr::Addr {
            buf: *buf,
            index: Box::new(canon(index, defs)),
        },
        Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| canon(a, defs)).collect()),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => e.clone(),
    }
}

/// Whether `e` draws a random number (each evaluation another).
fn reads_random(e: &Expr) -> bool {
    match e {
        Expr::Op { op, args } => op.starts_with("random.") || args.iter().any(reads_random),
        Expr::Load { index, .. } | Expr::Addr { index, .. } => reads_random(index),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => false,
    }
}

/// `e` written where statement `at` is: each variable a `let` of the run
/// binds there or after replaced by its value, which must cost little.
fn written_before(
    e: &Expr,
    at: usize,
    written: &HashMap<Var, Expr>,
    bound_at: &HashMap<Var, usize>,
) -> Option<Expr> {
    Some(match e {
        Expr::Var(v) if bound_at.get(v).is_some_and(|&b| b >= at) => {
            written_before(written.get(v)?, at, written, bound_at)?
        }
        Expr::Load { buf, index } => Expr::load(*buf, written_before(index, at, written, bound_at)?),
        Expr::Addr { buf, index } => Expr::Addr {
            buf: *buf,
            index: Box::new(written_before(index, at, written, bound_at)?),
        },
        Expr::Op { op, args } => Expr::op(
            op,
            args.iter()
                .map(|a| written_before(a, at, written, bound_at))
                .collect::<Option<_>>()?,
        ),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => e.clone(),
    })
}
