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
use crate::loops::{Elem, Expr, Extent, Input, Stmt, Var};
use std::collections::{HashMap, HashSet};

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

/// Checks inside a loop that cannot be raised out of it (inside a
/// branch, or past a statement that may fail: `searchsorted` in an `if`
/// of a lifted scalar function) but whose condition is invariant there
/// and costs a scan (`unsorted.…`, the order of the breakpoints) keep
/// their place, so the same programs fail at the same point: only their
/// verdict is computed once, before the outermost loop where it is
/// invariant, into a Bool that the check then tests (O(1) per iteration
/// instead of O(n)). The verdict is computed only where the loop runs
/// (guarded by its count), and it may be computed where the check would
/// never run, so everything it reads is made safe to compute anywhere:
/// its operations total ones (no division, no conversion that fails), and
/// each scan of a buffer's atoms guarded by `span.within` (the atoms it
/// reads lie inside the buffer: otherwise it is not computed, and counts
/// as in order — where the check does run, its operands are in range).
/// `lens` gives the inputs' lengths; allocations and literal buffers are
/// found in `stmts`.
pub(super) fn precompute_verdicts(stmts: &mut Vec<Stmt>, inputs: &[Input], names: &mut Vec<String>) {
    let lens = buffer_lengths(stmts, inputs);
    verdicts_in(stmts, &lens, names);
}

/// [`precompute_verdicts`] in `stmts`.
fn verdicts_in(stmts: &mut Vec<Stmt>, lens: &HashMap<Var, Expr>, names: &mut Vec<String>) {
    let mut at = 0;
    while at < stmts.len() {
        let mut before = Vec::new();
        if let Some((index, count, body)) = loop_parts(&mut stmts[at]) {
            let (mut varying, written) = varying_written(body);
            varying.extend(index);
            // Each distinct guarded condition: its verdict.
            let mut verdicts: Vec<(Expr, Var)> = Vec::new();
            replace_checks(body, &mut |cond| {
                if !scans(cond) || !invariant(cond, &varying, &written) {
                    return None;
                }
                let guarded = guard(cond, lens)?;
                if let Some((_, v)) = verdicts.iter().find(|(c, _)| *c == guarded) {
                    return Some(*v);
                }
                let v = Var(names.len() as u32);
                names.push("verdict".to_string());
                verdicts.push((guarded, v));
                Some(v)
            });
            for (cond, var) in verdicts {
                let value = match &count {
                    None => cond,
                    Some(Expr::Int(n)) if *n > 0 => cond,
                    Some(n) => Expr::op("and", vec![Expr::op("<", vec![Expr::Int(0), n.clone()]), cond]),
                };
                before.push(Stmt::Let {
                    var,
                    elem: Elem::Bool,
                    value,
                });
            }
        }
        for inner in stmts[at].bodies_mut() {
            verdicts_in(inner, lens, names);
        }
        let n = before.len();
        stmts.splice(at..at, before);
        at += n + 1;
    }
}

/// A loop's index, its count (`None` for a `do … while`, whose body
/// runs at least once) and its body.
fn loop_parts(s: &mut Stmt) -> Option<(Option<Var>, Option<Expr>, &mut Vec<Stmt>)> {
    match s {
        Stmt::For {
            index, count, body, ..
        }
        | Stmt::Reduce {
            index, count, body, ..
        } => Some((Some(*index), Some(count.clone()), body)),
        Stmt::DoWhile { body, .. } => Some((None, None, body)),
        _ => None,
    }
}

/// The scalars `body` sets or declares (its loops' indices among them),
/// and the buffers it may write.
fn varying_written(body: &[Stmt]) -> (HashSet<Var>, HashSet<Var>) {
    let mut varying = HashSet::new();
    Stmt::each(body, &mut |s| match s {
        Stmt::Set { var, .. } | Stmt::Let { var, .. } => {
            varying.insert(*var);
        }
        Stmt::For { index, .. } => {
            varying.insert(*index);
        }
        Stmt::Reduce { index, acc, .. } => {
            varying.insert(*index);
            varying.insert(*acc);
        }
        _ => {}
    });
    (varying, written(body))
}

/// Every check of `stmts`, at any depth, whose condition `f` gives a
/// verdict for: tests that verdict instead.
fn replace_checks(stmts: &mut [Stmt], f: &mut dyn FnMut(&Expr) -> Option<Var>) {
    for s in stmts.iter_mut() {
        if is_check(s) {
            if let Stmt::If { cond, .. } = s
                && let Some(v) = f(cond)
            {
                *cond = Expr::Var(v);
            }
            continue;
        }
        for inner in s.bodies_mut() {
            replace_checks(inner, f);
        }
    }
}

/// Whether `e` scans a buffer (the order check of breakpoints): worth
/// computing once.
fn scans(e: &Expr) -> bool {
    match e {
        Expr::Op { op, args } => op.starts_with("unsorted.") || args.iter().any(scans),
        _ => false,
    }
}

/// `e` made safe to compute where it would not have been: `None` if it
/// holds an operation that may fail or read out of range (a division, a
/// conversion, a load), each scan of a buffer's atoms (`unsorted.…` of
/// an address, a stride and a count) only where those atoms lie inside
/// the buffer, whose length must be known.
fn guard(e: &Expr, lens: &HashMap<Var, Expr>) -> Option<Expr> {
    Some(match e {
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => e.clone(),
        Expr::Load { .. } | Expr::Addr { .. } => return None,
        Expr::Op { op, args } if op.starts_with("unsorted.") => {
            let [Expr::Addr { buf, index }, stride, count] = args.as_slice() else {
                return None;
            };
            let len = lens.get(buf)?.clone();
            let (index, stride, count) = (guard(index, lens)?, guard(stride, lens)?, guard(count, lens)?);
            let scan = Expr::op(
                op,
                vec![
                    Expr::Addr {
                        buf: *buf,
                        index: Box::new(index.clone()),
                    },
                    stride.clone(),
                    count.clone(),
                ],
            );
            Expr::op(
                "and",
                vec![Expr::op("span.within", vec![len, index, stride, count]), scan],
            )
        }
        Expr::Op { op, args } if total(op) => Expr::Op {
            op,
            args: args.iter().map(|a| guard(a, lens)).collect::<Option<_>>()?,
        },
        Expr::Op { .. } => return None,
    })
}

/// Whether the scalar primitive `op` gives a value for any operands,
/// without failing or undefined behaviour.
fn total(op: &str) -> bool {
    matches!(
        op,
        "+" | "-"
            | "*"
            | "max"
            | "min"
            | "bit-and"
            | "bit-or"
            | "bit-xor"
            | "=="
            | "!="
            | "<"
            | ">"
            | "<="
            | ">="
            | "f.+"
            | "f.-"
            | "f.*"
            | "f./"
            | "f.max"
            | "f.min"
            | "f.=="
            | "f.!="
            | "f.<"
            | "f.>"
            | "f.<="
            | "f.>="
            | "and"
            | "or"
            | "not"
            | "bool.=="
            | "bool.!="
            | "i->f"
            | "i->bool"
            | "bool->i"
            | "bool->f"
            | "f.isnan"
            | "f.abs"
            | "f.neg"
    )
}

/// The length of each buffer whose length is an expression that has the
/// same value wherever the buffer is in scope: an input's (the product
/// of its extents), a literal buffer's, and an allocation's where the
/// buffer is allocated once and never exchanged, its length reading no
/// scalar that is ever set again.
fn buffer_lengths(stmts: &[Stmt], inputs: &[Input]) -> HashMap<Var, Expr> {
    let mut lens = HashMap::new();
    for i in inputs {
        let extent = |d: &Extent| match d {
            Extent::Declare(v) => Expr::Var(*v),
            Extent::Equal(e) => e.clone(),
        };
        let len = match i.dims.split_first() {
            None => Expr::Int(1),
            Some((first, rest)) => rest
                .iter()
                .fold(extent(first), |acc, d| Expr::op("*", vec![acc, extent(d)])),
        };
        lens.insert(i.buf, len);
    }
    let mut set = HashSet::new();
    let mut allocs: HashMap<Var, Vec<Expr>> = HashMap::new();
    let mut swapped = HashSet::new();
    Stmt::each(stmts, &mut |s| match s {
        Stmt::Set { var, .. } => {
            set.insert(*var);
        }
        Stmt::Alloc { buf, len, .. } => allocs.entry(*buf).or_default().push(len.clone()),
        Stmt::Data { buf, atoms, .. } => allocs
            .entry(*buf)
            .or_default()
            .push(Expr::Int(atoms.len() as i64)),
        Stmt::Swap { a, b } => {
            swapped.insert(*a);
            swapped.insert(*b);
        }
        _ => {}
    });
    for (buf, made) in allocs {
        let [len] = made.as_slice() else {
            continue;
        };
        if swapped.contains(&buf) || lens.contains_key(&buf) {
            continue;
        }
        let len = len.clone();
        let mut steady = true;
        len.each_var(&mut |v| steady &= !set.contains(&v));
        if steady && !has_load(&len) {
            lens.insert(buf, len);
        }
    }
    lens
}

/// Whether `e` reads a buffer.
fn has_load(e: &Expr) -> bool {
    match e {
        Expr::Load { .. } | Expr::Addr { .. } => true,
        Expr::Op { args, .. } => args.iter().any(has_load),
        _ => false,
    }
}
