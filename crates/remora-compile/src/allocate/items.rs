//! A row's items computed once. A reduction over a row's items followed
//! by a loop over the same items that computes each of them by the same
//! costly expression (a softmax written over the whole array: the sum of
//! each row's exponentials, then each exponential over its row's sum, two
//! nests that `siblings.rs` made one) computes every item twice. The
//! items are stored in a row buffer by a loop of their own before the
//! reduction, which then reads them from it, as does the later loop: the
//! same values, combined in the same order (the same bits), each
//! computed once. The buffer is the row's, allocated where the reduction
//! is (once for a thread's rows, by the C backend).

use super::ranges::each_load_in;
use super::*;
use std::collections::HashSet;

/// Every such reduction of `body`, at any depth.
pub(super) fn shared_items(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    for s in body.iter_mut() {
        for inner in s.bodies_mut() {
            shared_items(inner, names);
        }
    }
    let mut r = 0;
    while r < body.len() {
        r += share(body, r, names);
    }
}

/// The statements `body[r]` has become (1, or 3 where its items are now
/// stored first).
fn share(body: &mut Vec<Stmt>, r: usize, names: &mut Vec<String>) -> usize {
    let Stmt::Reduce {
        elem,
        index: k,
        count,
        body: steps,
        item,
        ..
    } = &body[r]
    else {
        return 1;
    };
    if !steps.is_empty() || !item.calls_costly() {
        return 1;
    }
    let (elem, k, count, item) = (*elem, *k, count.clone(), item.clone());
    // What the item reads, which nothing up to the later loop may change.
    let mut buffers = HashSet::new();
    each_load_in(&item, &mut |b, _| {
        buffers.insert(b);
    });
    let mut vars = HashSet::new();
    for e in [&item, &count] {
        e.each_var(&mut |x| {
            vars.insert(x);
        });
    }
    let mut users = Vec::new();
    for (f, s) in body.iter().enumerate().skip(r + 1) {
        if let Stmt::For {
            index: i,
            count: n,
            parallel: false,
            body: cells,
        } = s
            && *n == count
        {
            let at_i = renamed(&item, k, *i);
            if cells
                .iter()
                .any(|c| matches!(c, Stmt::Let { value, .. } if *value == at_i))
                && !changes(&cells[..], &buffers, &vars)
            {
                users.push(f);
            }
        }
        if changes(std::slice::from_ref(s), &buffers, &vars) {
            break;
        }
    }
    if users.is_empty() {
        return 1;
    }
    names.push(format!("items_of_{}", k.0));
    let row = Var(names.len() as u32 - 1);
    names.push(format!("at_{}", k.0));
    let at = Var(names.len() as u32 - 1);
    for f in users {
        let Stmt::For {
            index: i,
            body: cells,
            ..
        } = &mut body[f]
        else {
            continue;
        };
        let at_i = renamed(&item, k, *i);
        let load = Expr::load(row, Expr::Var(*i));
        for c in cells.iter_mut() {
            if let Stmt::Let { value, .. } = c
                && *value == at_i
            {
                *value = load.clone();
            }
        }
    }
    if let Stmt::Reduce { item: read, .. } = &mut body[r] {
        *read = Expr::load(row, Expr::Var(k));
    }
    let store = Stmt::For {
        index: at,
        count: count.clone(),
        parallel: false,
        body: vec![Stmt::Store {
            buf: row,
            index: Expr::Var(at),
            value: renamed(&item, k, at),
        }],
    };
    body.splice(
        r..r,
        [
            Stmt::Alloc {
                buf: row,
                elem,
                len: count,
            },
            store,
        ],
    );
    3
}

/// `e` with the variable `from` read as `to`.
fn renamed(e: &Expr, from: Var, to: Var) -> Expr {
    match e {
        Expr::Var(x) if *x == from => Expr::Var(to),
        Expr::Load { buf, index } => Expr::Load {
            buf: *buf,
            index: Box::new(renamed(index, from, to)),
        },
        Expr::Addr { buf, index } => Expr::Addr {
            buf: *buf,
            index: Box::new(renamed(index, from, to)),
        },
        Expr::Op { op, args } => Expr::Op {
            op,
            args: args.iter().map(|a| renamed(a, from, to)).collect(),
        },
        _ => e.clone(),
    }
}

/// Whether `stmts` may change what an expression reading `buffers` and
/// `vars` gives: a store into one of the buffers, a runtime call or swap
/// of them, or a `set` of one of the variables.
fn changes(stmts: &[Stmt], buffers: &HashSet<Var>, vars: &HashSet<Var>) -> bool {
    let mut changed = false;
    Stmt::each(stmts, &mut |s| match s {
        Stmt::Store { buf, .. } => changed |= buffers.contains(buf),
        Stmt::Set { var, .. } => changed |= vars.contains(var),
        Stmt::Swap { a, b } => changed |= buffers.contains(a) || buffers.contains(b),
        Stmt::Call { args, .. } => {
            for a in args {
                a.each_var(&mut |x| changed |= buffers.contains(&x));
            }
        }
        _ => {}
    });
    changed
}
