//! A frame literal of whole arrays read in place. `[s k t]` of three
//! vectors is a buffer made by copying each element's atoms after the
//! last's (a loop per element); where every later read of that buffer is
//! a load whose index, over the loops around it, stays within one
//! element's part (`(transpose2d [s k t])`'s columns, `(index o 1)` of
//! each row), the load reads that element's own buffer instead, and the
//! copies and the buffer are gone. The same atoms are read: the same
//! bits.

use super::*;
use crate::loops::{Output, Written};

/// One element's part of the stacked buffer: its atoms `from … from+len-1`
/// are `src`'s `0 … len-1`.
struct Part {
    from: i64,
    len: i64,
    src: Var,
}

/// Every stacked buffer of `body` (and of the statement lists nested in
/// it) that only loads read, each within a part, read in place.
pub(super) fn read_in_place(body: &mut Vec<Stmt>, outputs: &[Output]) {
    let mut at = 0;
    while at < body.len() {
        if let Some((buf, parts, end)) = stacked(body, at)
            && !outputs.iter().any(|o| output_reads(&o.value, buf))
            && parts.iter().all(|p| !changed(&body[end..], p.src))
            && let Some(rest) = body[end..]
                .iter()
                .map(|s| in_place(s, buf, &parts, &mut Vec::new()))
                .collect::<Option<Vec<Stmt>>>()
        {
            body.truncate(at);
            body.extend(rest);
            continue;
        }
        for inner in body[at].bodies_mut() {
            read_in_place(inner, outputs);
        }
        at += 1;
    }
}

/// Whether an output is `buf`, or reads it (a scalar result loaded from
/// it, an offset into another buffer).
fn output_reads(w: &Written, buf: Var) -> bool {
    match w {
        Written::Buffer(b) => *b == buf,
        Written::From { buf: b, offset } => *b == buf || mentions(offset, buf),
        Written::Scalar(e) => mentions(e, buf),
    }
}

/// `body[at]` allocates a buffer of a known length that the loops after it
/// fill, one after another, each with a copy of a whole buffer: the
/// buffer, its parts, and where the copies end.
fn stacked(body: &[Stmt], at: usize) -> Option<(Var, Vec<Part>, usize)> {
    let Stmt::Alloc {
        buf,
        len: Expr::Int(len),
        ..
    } = &body[at]
    else {
        return None;
    };
    let mut parts = Vec::new();
    let mut from = 0;
    let mut end = at + 1;
    while let Some(Stmt::For {
        index,
        count: Expr::Int(n),
        body: copy,
        ..
    }) = body.get(end)
    {
        let [
            Stmt::Store {
                buf: into,
                index: place,
                value:
                    Expr::Load {
                        buf: src,
                        index: read,
                    },
            },
        ] = copy.as_slice()
        else {
            break;
        };
        if into != buf || **read != Expr::Var(*index) || offset(place, *index) != Some(from) || src == buf {
            break;
        }
        parts.push(Part {
            from,
            len: *n,
            src: *src,
        });
        from += n;
        end += 1;
    }
    (from == *len && !parts.is_empty()).then_some((*buf, parts, end))
}

/// `c` where `e` is `i + c` (or `i`, or `c + i`).
fn offset(e: &Expr, i: Var) -> Option<i64> {
    match e {
        Expr::Var(v) if *v == i => Some(0),
        Expr::Op { op: "+", args } => match args.as_slice() {
            [Expr::Var(v), Expr::Int(c)] | [Expr::Int(c), Expr::Var(v)] if *v == i => Some(*c),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `stmts` may change `buf`'s atoms (a store, a swap, or its
/// address handed to the runtime).
fn changed(stmts: &[Stmt], buf: Var) -> bool {
    let mut found = false;
    Stmt::each(stmts, &mut |s| match s {
        Stmt::Store { buf: b, .. } => found |= *b == buf,
        Stmt::Swap { a, b } => found |= *a == buf || *b == buf,
        Stmt::Call { args, .. } => found |= args.iter().any(|a| mentions(a, buf)),
        _ => {}
    });
    found
}

fn mentions(e: &Expr, x: Var) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= v == x);
    found
}

/// `s` with every load of `buf` reading its part's own buffer, `None` if
/// `buf` is used otherwise or a load's index may leave a part. `loops`:
/// the indices of the loops around `s` of known counts.
fn in_place(s: &Stmt, buf: Var, parts: &[Part], loops: &mut Vec<(Var, i64)>) -> Option<Stmt> {
    let e = |x: &Expr, loops: &[(Var, i64)]| read(x, buf, parts, loops);
    let block = |b: &[Stmt], loops: &mut Vec<(Var, i64)>| -> Option<Vec<Stmt>> {
        b.iter().map(|s| in_place(s, buf, parts, loops)).collect()
    };
    let counted = |index: Var, count: &Expr, loops: &mut Vec<(Var, i64)>| {
        if let Expr::Int(n) = count {
            loops.push((index, *n));
        } else {
            // An index of an unknown range is no index of a part.
            loops.push((index, -1));
        }
    };
    Some(match s {
        Stmt::Let { var, elem, value } => Stmt::Let {
            var: *var,
            elem: *elem,
            value: e(value, loops)?,
        },
        Stmt::Set { var, value } => Stmt::Set {
            var: *var,
            value: e(value, loops)?,
        },
        Stmt::Alloc { buf: b, elem, len } => Stmt::Alloc {
            buf: *b,
            elem: *elem,
            len: e(len, loops)?,
        },
        Stmt::Data { buf: b, elem, atoms } => Stmt::Data {
            buf: *b,
            elem: *elem,
            atoms: atoms.iter().map(|a| e(a, loops)).collect::<Option<_>>()?,
        },
        Stmt::Store { buf: b, index, value } if *b != buf => Stmt::Store {
            buf: *b,
            index: e(index, loops)?,
            value: e(value, loops)?,
        },
        Stmt::For {
            index,
            count,
            parallel,
            body,
        } => {
            let count = e(count, loops)?;
            counted(*index, &count, loops);
            let body = block(body, loops);
            loops.pop();
            Stmt::For {
                index: *index,
                count,
                parallel: *parallel,
                body: body?,
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
            let seed = match seed {
                Some(x) => Some(e(x, loops)?),
                None => None,
            };
            let count = e(count, loops)?;
            counted(*index, &count, loops);
            let body = block(body, loops);
            let item = e(item, loops);
            loops.pop();
            Stmt::Reduce {
                acc: *acc,
                elem: *elem,
                op,
                seed,
                order: *order,
                index: *index,
                count,
                body: body?,
                item: item?,
            }
        }
        Stmt::If {
            cond,
            then,
            otherwise,
        } => Stmt::If {
            cond: e(cond, loops)?,
            then: block(then, loops)?,
            otherwise: block(otherwise, loops)?,
        },
        Stmt::DoWhile { body, cond } => Stmt::DoWhile {
            body: block(body, loops)?,
            cond: e(cond, loops)?,
        },
        Stmt::Fail { .. } => s.clone(),
        Stmt::Call { func, args } => Stmt::Call {
            func,
            args: args.iter().map(|a| e(a, loops)).collect::<Option<_>>()?,
        },
        Stmt::Swap { a, b } if *a != buf && *b != buf => s.clone(),
        Stmt::Store { .. } | Stmt::Swap { .. } => return None,
    })
}

/// `x` with its loads of `buf` reading the parts' buffers.
fn read(x: &Expr, buf: Var, parts: &[Part], loops: &[(Var, i64)]) -> Option<Expr> {
    Some(match x {
        Expr::Load { buf: b, index } if *b == buf => {
            if mentions(index, buf) {
                return None;
            }
            // The range of atoms the index may take: a loop's index plus a
            // constant, or a constant.
            let (i, lo, n) = match &**index {
                Expr::Int(c) => (None, *c, 1),
                _ => loops.iter().rev().find_map(|&(i, n)| {
                    let c = offset(index, i)?;
                    Some((Some(i), c, n))
                })?,
            };
            let p = parts
                .iter()
                .find(|p| p.from <= lo && lo + n <= p.from + p.len && n > 0)?;
            let at = match i {
                Some(i) => Expr::add(Expr::Var(i), Expr::Int(lo - p.from)),
                None => Expr::Int(lo - p.from),
            };
            Expr::load(p.src, at)
        }
        Expr::Load { buf: b, index } => Expr::load(*b, read(index, buf, parts, loops)?),
        Expr::Var(v) if *v == buf => return None,
        Expr::Addr { buf: b, .. } if *b == buf => return None,
        Expr::Addr { buf: b, index } => Expr::Addr {
            buf: *b,
            index: Box::new(read(index, buf, parts, loops)?),
        },
        Expr::Op { op, args } => Expr::op(
            op,
            args.iter()
                .map(|a| read(a, buf, parts, loops))
                .collect::<Option<_>>()?,
        ),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => x.clone(),
    })
}
