//! Sibling loops over one frame fused horizontally. Separate whole-array
//! updates of one state (z's real part, its imaginary part, the counts
//! and the mask they share, stepped by `iterate`) are a loop nest each,
//! one after the other over the same frame, each a pass over memory. Two
//! adjacent nests of the same extents whose shared buffers are read and
//! written only at the cell each iteration is at (its row-major index,
//! plus a constant offset: one part of a stacked state) are one nest, the
//! first's body then the second's at every cell: each cell sees the same
//! operations in the same order as before, so the same bits. Nests that
//! share only their outer loops (a reduction of each row beside a map over
//! the row's atoms: a softmax over the whole array, its row maxima and
//! sums taken over `transpose2d`) are one nest over those loops, on the
//! same condition at those loops' places; allocations between two nests
//! (the second's buffers) move before the first. A buffer then stored and
//! read back only in that one body (the mask, a row's maximum) is a
//! scalar there.

use super::ranges::{declared_in, each_load_in, mentions};
use super::wraps::lets_of;
use crate::loops::{Elem, Expr, Output, Stmt, Var};
use std::collections::{HashMap, HashSet};

/// Every run of adjacent fusable nests of `body` (at any depth) made one
/// nest, and the buffers left local to one cell made scalars.
pub(super) fn fuse_siblings(body: &mut Vec<Stmt>, outputs: &[Output], names: &mut Vec<String>) {
    let mut escaped = HashSet::new();
    for o in outputs {
        o.each_var(&mut |v| {
            escaped.insert(v);
        });
    }
    Stmt::each(body, &mut |s| match s {
        Stmt::Swap { a, b } => {
            escaped.extend([*a, *b]);
        }
        Stmt::Call { args, .. } => {
            for a in args {
                a.each_var(&mut |v| {
                    escaped.insert(v);
                })
            }
        }
        _ => {}
    });
    fuse_in(body, &escaped, names);
}

fn fuse_in(body: &mut Vec<Stmt>, escaped: &HashSet<Var>, names: &mut Vec<String>) {
    for s in body.iter_mut() {
        for inner in s.bodies_mut() {
            fuse_in(inner, escaped, names);
        }
    }
    let mut fused = false;
    let mut k = 0;
    while k + 1 < body.len() {
        // Allocations between the two nests (the second's buffers) move
        // before the first, where their lengths read nothing it writes.
        let mut next = k + 1;
        while next + 1 < body.len() && matches!(body[next], Stmt::Alloc { .. }) {
            next += 1;
        }
        match fusion(&body[k], &body[next]).filter(|_| sized_before(&body[k], &body[k + 1..next])) {
            Some(s) => {
                body.remove(next);
                body[k] = s;
                body[k..next].rotate_left(1);
                k = next - 1;
                fused = true;
            }
            None => k += 1,
        }
    }
    if fused {
        scalars(body, escaped, names);
    }
}

/// Whether the `allocs` after `first` have lengths that read no buffer
/// `first` writes.
fn sized_before(first: &Stmt, allocs: &[Stmt]) -> bool {
    let mut written = HashSet::new();
    Stmt::each(std::slice::from_ref(first), &mut |s| {
        if let Stmt::Store { buf, .. } = s {
            written.insert(*buf);
        }
    });
    allocs.iter().all(|a| {
        let mut reads = false;
        for e in a.exprs() {
            each_load_in(e, &mut |buf, _| reads |= written.contains(&buf));
        }
        !reads
    })
}

/// Whether `body` may stop with a run-time error.
fn fails(body: &[Stmt]) -> bool {
    let mut fails = false;
    Stmt::each(body, &mut |s| fails |= matches!(s, Stmt::Fail { .. }));
    fails
}

/// A perfect nest: its loops' indices, counts and parallel marks,
/// outermost first, and the body of each (the last, the innermost body).
struct Nest<'a> {
    levels: Vec<(Var, &'a Expr, bool)>,
    bodies: Vec<&'a [Stmt]>,
}

fn nest(s: &Stmt) -> Option<Nest<'_>> {
    let mut levels = Vec::new();
    let mut bodies = Vec::new();
    let mut at = s;
    loop {
        let Stmt::For {
            index,
            count,
            parallel,
            body,
        } = at
        else {
            return None;
        };
        levels.push((*index, count, *parallel));
        bodies.push(body.as_slice());
        match body.as_slice() {
            [inner @ Stmt::For { .. }] => at = inner,
            _ => return Some(Nest { levels, bodies }),
        }
    }
}

/// The nest `a` then `b` as one, over the outer loops they share (the same
/// counts and parallel marks: all of them, or the first few, a reduction
/// over each row beside a map over its atoms), if every buffer one writes
/// and the other reads or writes is read and written by both only at the
/// places of those loops' cells ([`Places`]).
fn fusion(a: &Stmt, b: &Stmt) -> Option<Stmt> {
    let (mut na, mut nb) = (nest(a)?, nest(b)?);
    let renamed: HashMap<Var, Var> = nb
        .levels
        .iter()
        .zip(&na.levels)
        .map(|(y, x)| (y.0, x.0))
        .collect();
    let shared = na
        .levels
        .iter()
        .zip(&nb.levels)
        .take_while(|(x, y)| x.2 == y.2 && *x.1 == rename_expr(y.1, &renamed))
        .count();
    let whole = shared == na.levels.len() && shared == nb.levels.len();
    if shared == 0 || (!whole && fails(na.bodies[shared - 1]) && fails(nb.bodies[shared - 1])) {
        // (Where both may fail, the first's failure comes first: its
        // message, whichever of its rows fails.)
        return None;
    }
    for n in [&mut na, &mut nb] {
        n.levels.truncate(shared);
        n.bodies.truncate(shared);
    }
    let renamed: HashMap<Var, Var> = renamed
        .into_iter()
        .filter(|(y, _)| nb.levels.iter().any(|l| l.0 == *y))
        .collect();
    let (body_a, body_b) = (na.bodies[shared - 1], nb.bodies[shared - 1]);
    let mut second: Vec<Stmt> = body_b.to_vec();
    for s in &mut second {
        rename(s, &renamed);
    }
    let indices: Vec<Var> = na.levels.iter().map(|l| l.0).collect();
    let counts: Vec<&Expr> = na.levels.iter().map(|l| l.1).collect();
    let (ua, ub) = (Uses::of(body_a)?, Uses::of(&second)?);
    let shared: HashSet<Var> = ua
        .written
        .intersection(&ub.read.union(&ub.written).copied().collect())
        .chain(ub.written.intersection(&ua.read))
        .copied()
        .collect();
    let places = Places::new(&indices, &counts);
    for buf in shared {
        let mut offsets = Vec::new();
        for (uses, body) in [(&ua, body_a), (&ub, &second[..])] {
            for index in uses.at.get(&buf).into_iter().flatten() {
                offsets.push(places.offset(index, &lets_of(body))?);
            }
        }
        if !places.apart(&offsets) {
            return None;
        }
    }
    let mut cells = body_a.to_vec();
    cells.extend(second);
    Some(
        na.levels
            .iter()
            .rev()
            .fold(cells, |body, (index, count, parallel)| {
                vec![Stmt::For {
                    index: *index,
                    count: (*count).clone(),
                    parallel: *parallel,
                    body,
                }]
            })
            .remove(0),
    )
}

/// What a nest's body reads and writes: buffers loaded and stored (at
/// any depth) and the indices of every access; `None` where it does more
/// than compute and store (a runtime call, a swap, a `set` of a scalar
/// from outside).
#[derive(Default)]
struct Uses {
    read: HashSet<Var>,
    written: HashSet<Var>,
    at: HashMap<Var, Vec<Expr>>,
}

impl Uses {
    fn of(body: &[Stmt]) -> Option<Uses> {
        let mut own = HashSet::new();
        declared_in(body, &mut own);
        let mut u = Uses::default();
        let mut ok = true;
        Stmt::each(body, &mut |s| {
            match s {
                Stmt::Call { .. } | Stmt::Swap { .. } => ok = false,
                Stmt::Set { var, .. } => ok &= own.contains(var),
                Stmt::Store { buf, index, .. } => {
                    u.written.insert(*buf);
                    u.at.entry(*buf).or_default().push(index.clone());
                }
                _ => {}
            }
            for e in s.exprs() {
                each_load_in(e, &mut |buf, index| {
                    u.read.insert(buf);
                    u.at.entry(buf).or_default().push(index.clone());
                });
                ok &= !has_addr(e);
            }
        });
        ok.then_some(u)
    }
}

fn has_addr(e: &Expr) -> bool {
    match e {
        Expr::Addr { .. } => true,
        Expr::Load { index, .. } => has_addr(index),
        Expr::Op { args, .. } => args.iter().any(has_addr),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => false,
    }
}

/// A nest's cells' places: the row-major index of its indices in its
/// extents, as its terms.
struct Places {
    terms: Vec<Expr>,
    /// The number of cells, where the extents are constants.
    cells: Option<i64>,
}

impl Places {
    fn new(indices: &[Var], counts: &[&Expr]) -> Places {
        let mut strides = vec![Expr::Int(1); indices.len()];
        for k in (0..indices.len().saturating_sub(1)).rev() {
            strides[k] = Expr::mul(strides[k + 1].clone(), counts[k + 1].clone());
        }
        let mut terms = Vec::new();
        for (i, s) in indices.iter().zip(strides) {
            sum_terms(&Expr::mul(Expr::Var(*i), s), &mut terms);
        }
        let cells = counts.iter().try_fold(1i64, |n, c| match c {
            Expr::Int(c) => n.checked_mul(*c),
            _ => None,
        });
        Places { terms, cells }
    }

    /// The constant `o` where `index` (through the body's `lets`) is the
    /// cell's place plus `o`.
    fn offset(&self, index: &Expr, lets: &HashMap<Var, Expr>) -> Option<i64> {
        let mut terms = Vec::new();
        sum_terms(&expand(index, lets), &mut terms);
        let mut offset = 0i64;
        let mut rest = Vec::new();
        for t in terms {
            match t {
                Expr::Int(n) => offset = offset.checked_add(n)?,
                t => rest.push(t),
            }
        }
        let mut wanted = self.terms.clone();
        for t in rest {
            let k = wanted.iter().position(|w| *w == t)?;
            wanted.remove(k);
        }
        wanted.is_empty().then_some(offset)
    }

    /// Whether accesses at these offsets from each cell's place meet only
    /// at the same cell: offsets equal, or as far apart as the nest has
    /// cells.
    fn apart(&self, offsets: &[i64]) -> bool {
        offsets.iter().all(|a| {
            offsets.iter().all(|b| {
                a == b || matches!(self.cells, Some(n) if (*a as i128 - *b as i128).abs() >= n as i128)
            })
        })
    }
}

/// The terms of a sum.
fn sum_terms(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Op { op: "+", args } if args.len() == 2 => args.iter().for_each(|a| sum_terms(a, out)),
        _ => out.push(e.clone()),
    }
}

/// `e` with the `lets`' variables written in (Int index arithmetic).
fn expand(e: &Expr, lets: &HashMap<Var, Expr>) -> Expr {
    match e {
        Expr::Var(v) => lets.get(v).map_or_else(|| e.clone(), |x| expand(x, lets)),
        Expr::Op { op, args } if matches!(*op, "+" | "*" | "-") => {
            Expr::op(op, args.iter().map(|a| expand(a, lets)).collect())
        }
        _ => e.clone(),
    }
}

fn rename_expr(e: &Expr, by: &HashMap<Var, Var>) -> Expr {
    let mut e = e.clone();
    rename_in(&mut e, by);
    e
}

fn rename_in(e: &mut Expr, by: &HashMap<Var, Var>) {
    match e {
        Expr::Var(v) => {
            if let Some(x) = by.get(v) {
                *v = *x;
            }
        }
        Expr::Load { index, .. } | Expr::Addr { index, .. } => rename_in(index, by),
        Expr::Op { args, .. } => args.iter_mut().for_each(|a| rename_in(a, by)),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => {}
    }
}

fn rename(s: &mut Stmt, by: &HashMap<Var, Var>) {
    for e in s.exprs_mut() {
        rename_in(e, by);
    }
    for inner in s.bodies_mut() {
        for s in inner {
            rename(s, by);
        }
    }
}

/// Every buffer allocated in `body` (not escaping) that one nest of it
/// stores into at one place of its cells' body and reads back only
/// after, there, at that place: a scalar of that body.
fn scalars(body: &mut Vec<Stmt>, escaped: &HashSet<Var>, names: &mut Vec<String>) {
    let allocated: Vec<(Var, Elem)> = body
        .iter()
        .filter_map(|s| match s {
            Stmt::Alloc { buf, elem, .. } if !escaped.contains(buf) => Some((*buf, *elem)),
            _ => None,
        })
        .collect();
    for (buf, elem) in allocated {
        let users: Vec<usize> = (0..body.len())
            .filter(|&k| {
                !matches!(&body[k], Stmt::Alloc { buf: b, .. } if *b == buf) && mentions(&body[k], buf)
            })
            .collect();
        let [user] = users[..] else {
            continue;
        };
        let Some(cells) = cells_mut(&mut body[user]) else {
            continue;
        };
        if scalar_in(cells, buf, elem, names) {
            body.retain(|s| !matches!(s, Stmt::Alloc { buf: b, .. } if *b == buf));
        }
    }
}

/// The innermost body of a perfect nest.
fn cells_mut(s: &mut Stmt) -> Option<&mut Vec<Stmt>> {
    let Stmt::For { body, .. } = s else {
        return None;
    };
    if matches!(body.as_slice(), [Stmt::For { .. }]) {
        return cells_mut(&mut body[0]);
    }
    Some(body)
}

/// `buf` made a scalar of `cells` where it is stored once at its top and
/// only loaded after, at the same index.
fn scalar_in(cells: &mut [Stmt], buf: Var, elem: Elem, names: &mut Vec<String>) -> bool {
    let stores: Vec<usize> = (0..cells.len())
        .filter(|&k| matches!(&cells[k], Stmt::Store { buf: b, .. } if *b == buf))
        .collect();
    let [at] = stores[..] else {
        return false;
    };
    let Stmt::Store { index, value, .. } = &cells[at] else {
        return false;
    };
    let index = index.clone();
    let mut ok = true;
    for (k, s) in cells.iter().enumerate() {
        let mut other = false;
        Stmt::each(std::slice::from_ref(s), &mut |t| {
            other |= matches!(t, Stmt::Store { buf: b, .. } if *b == buf) && k != at;
            for e in t.exprs() {
                each_load_in(e, &mut |b, i| other |= b == buf && (k <= at || *i != index));
            }
        });
        ok &= !other;
    }
    if !ok {
        return false;
    }
    names.push(format!("cell_of_{}", buf.0));
    let var = Var(names.len() as u32 - 1);
    cells[at] = Stmt::Let {
        var,
        elem,
        value: value.clone(),
    };
    for s in cells[at + 1..].iter_mut() {
        load_as(s, buf, var);
    }
    true
}

fn load_as(s: &mut Stmt, buf: Var, var: Var) {
    fn expr(e: &mut Expr, buf: Var, var: Var) {
        match e {
            Expr::Load { buf: b, .. } if *b == buf => *e = Expr::Var(var),
            Expr::Load { index, .. } | Expr::Addr { index, .. } => expr(index, buf, var),
            Expr::Op { args, .. } => args.iter_mut().for_each(|a| expr(a, buf, var)),
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) => {}
        }
    }
    for e in s.exprs_mut() {
        expr(e, buf, var);
    }
    for inner in s.bodies_mut() {
        for s in inner {
            load_as(s, buf, var);
        }
    }
}
