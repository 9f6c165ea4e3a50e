//! Reductions of the same items side by side (horizontal fusion): the
//! least and the greatest of an array (`(reduce f.min y)` then `(reduce
//! f.max y)`, a rescale to [0, 1]) read it twice from memory, one whole
//! pass each. Adjacent reductions over the same count, by operators whose
//! value does not depend on the order or the grouping of the items
//! (`f.max` and `f.min`: the extreme, NaN if any item is, of equal items
//! the last (first) whatever the grouping; Int `+ * max min`, the bit
//! operations), run instead in blocks of [`BLOCK`] items on the threads:
//! each block's reductions one after another, the second reading the
//! block from the cache, each block's values stored, then each reduction
//! of its blocks' values. The same bits: only the grouping changed.
//!
//! Only reductions without a seed whose items are `let`s and an item that
//! cannot fail, none reading an earlier one's value; a count that may be 0
//! is checked first, as the first reduction would have (its message). A
//! check between them that the run's first passed already (the same
//! statement: a count's `(dim+ -1 n)`) is dropped.
//!
//! Before that, an outermost reduction nothing reads that cannot fail is
//! not computed ([`dead_reductions`]: a gradient's primal loss).

use super::styles::fresh;
use super::*;
use crate::loops::Output;
use std::collections::HashSet;

/// The items of a block: 64 KiB of floats, two passes of which stay in
/// the core's second-level cache.
const BLOCK: i64 = 16384;

/// Every run of two or more adjacent such reductions in the program's
/// outermost statements, in blocks.
pub(super) fn reductions_together(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    let mut out = Vec::with_capacity(body.len());
    let mut rest = std::mem::take(body).into_iter().peekable();
    while let Some(s) = rest.next() {
        if !fits(&s) {
            out.push(s);
            continue;
        }
        // (A check just before the run, made again before a later
        // reduction of it, `(dim+ -1 n)` of a count known only at run
        // time: passed already, so dropped.)
        let check = out.last().filter(|c| is_check(c)).cloned();
        let mut run = vec![s];
        while let Some(next) = rest.peek() {
            if check.as_ref() == Some(next) {
                rest.next();
            } else if fits(next) && same_count(&run[0], next) && !reads_any(next, &run) {
                run.extend(rest.next());
            } else {
                break;
            }
        }
        if run.len() >= 2 {
            out.extend(in_blocks(run, names));
        } else {
            out.extend(run);
        }
    }
    *body = out;
}

/// Whether `s` is a reduction this rule takes: an operator that ignores
/// the order, no seed, a tree over enough items to split, `let`s and an
/// item that cannot fail.
fn fits(s: &Stmt) -> bool {
    let Stmt::Reduce {
        elem,
        op,
        seed: None,
        order: Order::Tree,
        count,
        body,
        item,
        ..
    } = s
    else {
        return false;
    };
    let any_order = match elem {
        Elem::Float => matches!(*op, "f.max" | "f.min"),
        _ => matches!(
            *op,
            "+" | "*" | "max" | "min" | "bit-and" | "bit-or" | "bit-xor" | "and" | "or"
        ),
    };
    let enough = !matches!(count, Expr::Int(n) if *n < 2 * BLOCK);
    any_order
        && enough
        && ranges::cannot_fail(count)
        && ranges::cannot_fail(item)
        && body
            .iter()
            .all(|s| matches!(s, Stmt::Let { value, .. } if ranges::cannot_fail(value)))
}

/// Whether `s` is a check: `if` a condition, fail.
fn is_check(s: &Stmt) -> bool {
    matches!(s, Stmt::If { then, otherwise, .. } if otherwise.is_empty() && matches!(then.as_slice(), [Stmt::Fail { .. }]))
}

fn same_count(a: &Stmt, b: &Stmt) -> bool {
    matches!((a, b), (Stmt::Reduce { count: x, .. }, Stmt::Reduce { count: y, .. }) if x == y)
}

/// Whether `s` reads the value of a reduction of `run`.
fn reads_any(s: &Stmt, run: &[Stmt]) -> bool {
    let accs: Vec<Var> = run
        .iter()
        .filter_map(|r| match r {
            Stmt::Reduce { acc, .. } => Some(*acc),
            _ => None,
        })
        .collect();
    let mut reads = false;
    Stmt::each(std::slice::from_ref(s), &mut |s| {
        for e in s.exprs() {
            e.each_var(&mut |v| reads |= accs.contains(&v));
        }
    });
    reads
}

/// The reductions of `run` (at least two, of one count) in blocks.
fn in_blocks(run: Vec<Stmt>, names: &mut Vec<String>) -> Vec<Stmt> {
    let Some(Stmt::Reduce { count, .. }) = run.first() else {
        return run;
    };
    let n = count.clone();
    let mut out = Vec::new();
    // (No items: the first reduction's error.)
    if !matches!(n, Expr::Int(x) if x >= 1) {
        out.push(Stmt::If {
            cond: Expr::op("==", vec![n.clone(), Expr::Int(0)]),
            then: vec![Stmt::Fail {
                what: "reduce of an empty array".into(),
            }],
            otherwise: Vec::new(),
        });
    }
    let blocks = match &n {
        Expr::Int(x) => Expr::Int((x + BLOCK - 1) / BLOCK),
        n => Expr::op(
            "/",
            vec![Expr::add(n.clone(), Expr::Int(BLOCK - 1)), Expr::Int(BLOCK)],
        ),
    };
    let b = fresh(names, "blk");
    let lo = fresh(names, "lo");
    let items = fresh(names, "items");
    let mut block = vec![
        Stmt::Let {
            var: lo,
            elem: Elem::Int,
            value: Expr::mul(Expr::Var(b), Expr::Int(BLOCK)),
        },
        Stmt::Let {
            var: items,
            elem: Elem::Int,
            value: Expr::op(
                "min",
                vec![Expr::Int(BLOCK), Expr::op("-", vec![n.clone(), Expr::Var(lo)])],
            ),
        },
    ];
    let mut last = Vec::new();
    for s in run {
        let Stmt::Reduce {
            acc,
            elem,
            op,
            order,
            index,
            body,
            item,
            ..
        } = s
        else {
            continue;
        };
        let part = fresh(names, "part");
        let part_acc = fresh(names, "acc");
        let at = fresh(names, "k");
        let mut lets = vec![Stmt::Let {
            var: index,
            elem: Elem::Int,
            value: Expr::add(Expr::Var(lo), Expr::Var(at)),
        }];
        lets.extend(body);
        out.push(Stmt::Alloc {
            buf: part,
            elem,
            len: blocks.clone(),
        });
        block.push(Stmt::Reduce {
            acc: part_acc,
            elem,
            op,
            seed: None,
            order,
            index: at,
            count: Expr::Var(items),
            body: lets,
            item,
        });
        block.push(Stmt::Store {
            buf: part,
            index: Expr::Var(b),
            value: Expr::Var(part_acc),
        });
        let k = fresh(names, "k");
        last.push(Stmt::Reduce {
            acc,
            elem,
            op,
            seed: None,
            order,
            index: k,
            count: blocks.clone(),
            body: Vec::new(),
            item: Expr::load(part, Expr::Var(k)),
        });
    }
    out.push(Stmt::For {
        index: b,
        count: blocks,
        parallel: true,
        body: block,
    });
    out.extend(last);
    out
}

/// The program's outermost reductions whose value nothing reads (neither
/// a later statement nor an output) and that cannot fail, removed: the
/// primal value beside a gradient (the loss, which `grad` computes and
/// drops). Last first, so that a reduction read only by a dead one goes
/// too.
pub(super) fn dead_reductions(body: &mut Vec<Stmt>, outputs: &[Output]) {
    let mut read = HashSet::new();
    for o in outputs {
        o.each_var(&mut |v| _ = read.insert(v));
    }
    let mut k = body.len();
    while k > 0 {
        k -= 1;
        let dead = match &body[k] {
            Stmt::Reduce {
                acc,
                seed,
                count,
                body: lets,
                item,
                ..
            } => {
                !read.contains(acc)
                    && (seed.is_some() || matches!(count, Expr::Int(n) if *n >= 1))
                    && seed.as_ref().is_none_or(ranges::cannot_fail)
                    && ranges::cannot_fail(count)
                    && ranges::cannot_fail(item)
                    && lets
                        .iter()
                        .all(|s| matches!(s, Stmt::Let { value, .. } if ranges::cannot_fail(value)))
            }
            _ => false,
        };
        if dead {
            body.remove(k);
            continue;
        }
        Stmt::each(std::slice::from_ref(&body[k]), &mut |s| {
            for e in s.exprs() {
                e.each_var(&mut |v| _ = read.insert(v));
            }
            if let Stmt::Set { var, .. } = s {
                read.insert(*var);
            }
        });
    }
}
