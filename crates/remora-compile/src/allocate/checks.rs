//! Checks raised out of loops. A function instantiated inside a lifted
//! map (`((i-app win3 (- $w 1)) row)` over the rows) checks its index
//! arguments in every cell: `if` a condition that only the loop's
//! surroundings decide, `fail`. At the start of a loop's body such a
//! check fails at the first iteration or never, so it is made once
//! before the loop, where the loop runs at least once: the same message
//! at the same point, nothing else having run in between. The loop's body
//! is then a nest of stores that cannot fail, which later passes read in
//! place (a lifted `windows` becomes a view again). The order check of
//! `searchsorted`'s breakpoints (`unsorted.…`) reads a buffer, and is
//! invariant when the loop does not write that buffer: a lookup of many
//! values in one table scans the table once, not once per value.

use super::is_check;
use crate::loops::{Expr, Stmt, Var};
use std::collections::HashSet;

/// Every loop of `stmts` (innermost first, so a check climbs a whole
/// nest) with its leading invariant checks made before it.
pub(super) fn raise_checks(stmts: &mut Vec<Stmt>) {
    let mut at = 0;
    while at < stmts.len() {
        for inner in stmts[at].bodies_mut() {
            raise_checks(inner);
        }
        let Stmt::For {
            index, count, body, ..
        } = &mut stmts[at]
        else {
            at += 1;
            continue;
        };
        let count = count.clone();
        // The scalars the loop sets or declares.
        let mut varying = HashSet::from([*index]);
        Stmt::each(body, &mut |s| match s {
            Stmt::Set { var, .. } | Stmt::Let { var, .. } => {
                varying.insert(*var);
            }
            Stmt::For { index, .. } | Stmt::Reduce { index, .. } => {
                varying.insert(*index);
            }
            _ => {}
        });
        let written = written(body);
        // The leading checks, past statements that cannot fail.
        let mut raised = Vec::new();
        let mut k = 0;
        while k < body.len() {
            match &body[k] {
                s if cannot_fail(s) => k += 1,
                s @ Stmt::If { cond, then, .. } if is_check(s) && invariant(cond, &varying, &written) => {
                    let cond = match &count {
                        Expr::Int(n) if *n > 0 => cond.clone(),
                        n => Expr::op(
                            "and",
                            vec![Expr::op("<", vec![Expr::Int(0), n.clone()]), cond.clone()],
                        ),
                    };
                    let check = Stmt::If {
                        cond,
                        then: then.clone(),
                        otherwise: Vec::new(),
                    };
                    // (The same check twice: once.)
                    if !raised.contains(&check) {
                        raised.push(check);
                    }
                    body.remove(k);
                }
                _ => break,
            }
        }
        let n = raised.len();
        stmts.splice(at..at, raised);
        at += n + 1;
    }
}

/// Whether `e` has the same value at every iteration of a loop: it reads
/// no buffer, and no scalar the loop declares or sets (its index among
/// them); or it is the order check of `searchsorted`'s breakpoints
/// (`unsorted.…`) in a buffer the loop does not write.
fn invariant(e: &Expr, varying: &HashSet<Var>, written: &HashSet<Var>) -> bool {
    match e {
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => true,
        Expr::Var(v) => !varying.contains(v),
        Expr::Load { .. } | Expr::Addr { .. } => false,
        Expr::Op { op, args } if op.starts_with("unsorted.") => match args.split_first() {
            Some((Expr::Addr { buf, index }, rest)) => {
                !written.contains(buf)
                    && !varying.contains(buf)
                    && invariant(index, varying, written)
                    && rest.iter().all(|a| invariant(a, varying, written))
            }
            _ => false,
        },
        Expr::Op { args, .. } => args.iter().all(|a| invariant(a, varying, written)),
    }
}

/// The buffers `body` may write (or allocate, or exchange): stored to,
/// or passed by address to anything but a search in them or the check
/// of their order.
fn written(body: &[Stmt]) -> HashSet<Var> {
    fn passed(e: &Expr, out: &mut HashSet<Var>) {
        match e {
            Expr::Addr { buf, index } => {
                out.insert(*buf);
                passed(index, out);
            }
            Expr::Load { index, .. } => passed(index, out),
            Expr::Op { op, args } if op.starts_with("search.") || op.starts_with("unsorted.") => {
                for (k, a) in args.iter().enumerate() {
                    match a {
                        Expr::Addr { index, .. } if k == 0 => passed(index, out),
                        a => passed(a, out),
                    }
                }
            }
            Expr::Op { args, .. } => args.iter().for_each(|a| passed(a, out)),
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => {}
        }
    }
    let mut out = HashSet::new();
    Stmt::each(body, &mut |s| {
        match s {
            Stmt::Store { buf, .. } | Stmt::Alloc { buf, .. } | Stmt::Data { buf, .. } => {
                out.insert(*buf);
            }
            Stmt::Swap { a, b } => {
                out.insert(*a);
                out.insert(*b);
            }
            _ => {}
        }
        for e in s.exprs() {
            passed(e, &mut out);
        }
    });
    out
}

/// Whether `s` runs without failing whatever the values: a store, a
/// scalar declared, a buffer of a constant length, a loop of such.
fn cannot_fail(s: &Stmt) -> bool {
    match s {
        Stmt::Store { .. } | Stmt::Let { .. } => true,
        Stmt::Alloc { len, .. } => matches!(len, Expr::Int(_)),
        Stmt::For { body, .. } => body.iter().all(cannot_fail),
        _ => false,
    }
}
