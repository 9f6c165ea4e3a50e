//! Terms that a loop nest's indices do not all decide, computed fewer
//! times. The cosine of a pair of rows, `(outer (fn (a b) (f./ (f.dot a
//! b) (f.sqrt (f.* (f.dot a a) (f.dot b b))))) x x)`, is a nest over the
//! rows `i` and the rows `j` of three sums; `(f.dot a a)` depends on `i`
//! alone, `(f.dot b b)` on `j` alone, `(f.dot a b)` on both.
//!
//! For each loop `L` (outermost first), a scalar reached from its body
//! through loops and reductions whose counts `L` does not change (its
//! *path*) is read by the indices of the path it depends on, its *frame*.
//! A reduction, or a costly scalar (`f.exp`: `Expr::calls_costly`):
//!
//! * on none of them (`(f.dot a a)` in the loop over `j`): it is computed
//!   once, before `L` (the `let`s it reads with it);
//! * on inner indices only, not `L`'s (`(f.dot b b)` in the loop over
//!   `i`): it is computed before `L` over its own frame into a buffer (a
//!   nest of loops of the path's counts), and read there at its place;
//! * a reduction on `L`'s index and an inner one, where that nest is a
//!   contraction (`(f.dot a b)`: a sum of products of a row of `i` and a
//!   row of `j`): the same, so the contraction becomes the runtime's
//!   kernel (a matrix product) and the rest of the nest reads its sums.
//!
//! And a `let` of a reduction's body that depends on the reduction's item
//! and not on `L` (the weight of a weighted sum of rows, `(reduce f.+
//! (f.* w v))` over the columns `L`: each weight computed once per
//! column) is computed over its frame before `L` where `L` is then a
//! contraction: each weight once, the sums the kernel's.
//!
//! Only what cannot fail moves (no division by a variable, no reduction
//! of possibly no items without a seed), reading only buffers `L` does
//! not write and scalars `L` does not set, and nothing after a check in
//! `L` (a load after it may be in range only because it passed): an error
//! is the interpreter's, in its order, and a term computed where the
//! original nest would not have run has no effect but its cost. Nor
//! is anything made where the loops around it would not have run: a
//! check that `checks.rs` raised out of `L` is guarded by `L`'s count,
//! and may be all that keeps a load of the term in range (`(f.sum (nth m
//! 1000000000))` in a map over no items), so what moves is made `if`
//! `L`'s count is positive, `L` after it in the same `if` (not where
//! the count is a positive constant), and a term inside an inner loop
//! whose count may be 0, not in its frame, stays. Each sum is the same operations on the same
//! values in the same order: the same bits.

use super::{contract, nest, product, ranges};
use crate::loops::{Expr, Stmt, Var};
use std::collections::{HashMap, HashSet};

/// Every loop of `body`, outermost first, with its reductions computed
/// as few times as their frames need.
pub(super) fn hoist_reductions(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    walk(body, 0, names);
}

/// [`hoist_reductions`] in `stmts`, inside `depth` loops.
fn walk(stmts: &mut Vec<Stmt>, depth: usize, names: &mut Vec<String>) {
    let mut at = 0;
    while at < stmts.len() {
        if matches!(stmts[at], Stmt::For { .. }) {
            let (before, guard) = hoisted(&mut stmts[at], depth, names);
            for body in stmts[at].bodies_mut() {
                walk(body, depth + 1, names);
            }
            match guard {
                _ if before.is_empty() => {}
                // Made only where `L` runs: `if` its count is positive,
                // what it no longer makes, then `L`.
                Some(cond) => {
                    let l = std::mem::replace(&mut stmts[at], Stmt::Fail { what: String::new() });
                    let mut then = before;
                    then.push(l);
                    stmts[at] = Stmt::If {
                        cond,
                        then,
                        otherwise: Vec::new(),
                    };
                }
                None => {
                    let n = before.len();
                    stmts.splice(at..at, before);
                    at += n;
                }
            }
            at += 1;
            continue;
        }
        let inner = depth
            + usize::from(matches!(
                stmts[at],
                Stmt::For { .. } | Stmt::Reduce { .. } | Stmt::DoWhile { .. }
            ));
        for body in stmts[at].bodies_mut() {
            walk(body, inner, names);
        }
        at += 1;
    }
}

/// A set of the path's loops, by their place on it (0: `L`).
type Frame = u64;

/// What a scalar of `L` depends on: the path's loops, or `None` where it
/// may not move (it reads what `L` writes or sets, or can fail).
type Deps = Option<Frame>;

/// What to do at one place in `L`: take the statement out (it moved
/// before `L`), or replace it by another.
enum Edit {
    Remove,
    Replace(Stmt),
}

/// A place in `L`: the statement's position in `L`'s body, then in the
/// body of the loop there, and so on.
type Place = Vec<usize>;

struct Scan<'n> {
    /// The variables `L` declares (its index among them) and those it
    /// writes: buffers stored into, scalars set.
    declared: HashSet<Var>,
    written: HashSet<Var>,
    /// What each scalar `L` declares, scanned so far, depends on.
    deps: HashMap<Var, Deps>,
    /// The `let`s scanned so far, each with its place.
    lets: Vec<(Var, Place, Stmt)>,
    /// The scalars moved before `L` (declared there now).
    moved: HashSet<Var>,
    /// The path: each loop's index and count.
    path: Vec<(Var, Expr)>,
    /// How many loops enclose `L`.
    depth: usize,
    /// Whether what moves must be made only where `L` runs (a term moved
    /// out of `L` whose frame does not hold `L`'s index, `L`'s count
    /// perhaps not positive).
    guarded: bool,
    /// What goes before `L`, and what changes in it.
    before: Vec<Stmt>,
    edits: Vec<(Place, Edit)>,
    names: &'n mut Vec<String>,
}

/// The statements to make before the loop `l`, which it no longer makes,
/// and the condition they need to be made under (`l`'s count positive),
/// if any.
fn hoisted(l: &mut Stmt, depth: usize, names: &mut Vec<String>) -> (Vec<Stmt>, Option<Expr>) {
    let Stmt::For {
        index, count, body, ..
    } = &*l
    else {
        return (Vec::new(), None);
    };
    // (A contraction already: the kernel's as it is.)
    if contract::is_contraction(l) {
        return (Vec::new(), None);
    }
    let runs = Expr::op("<", vec![Expr::Int(0), count.clone()]);
    let mut declared = HashSet::from([*index]);
    let mut written = HashSet::new();
    Stmt::each(body, &mut |s| match s {
        Stmt::Let { var, .. } => {
            declared.insert(*var);
        }
        Stmt::Set { var, .. } | Stmt::Store { buf: var, .. } => {
            written.insert(*var);
        }
        Stmt::Alloc { buf, .. } | Stmt::Data { buf, .. } => {
            declared.insert(*buf);
        }
        Stmt::For { index, .. } => {
            declared.insert(*index);
        }
        Stmt::Reduce { acc, index, .. } => {
            declared.extend([*acc, *index]);
        }
        Stmt::Swap { a, b } => {
            written.extend([*a, *b]);
        }
        Stmt::Call { args, .. } => args
            .iter()
            .for_each(|a| a.each_var(&mut |v| _ = written.insert(v))),
        Stmt::If { .. } | Stmt::DoWhile { .. } | Stmt::Fail { .. } => {}
    });
    let mut scan = Scan {
        declared,
        written,
        deps: HashMap::new(),
        lets: Vec::new(),
        moved: HashSet::new(),
        path: vec![(*index, count.clone())],
        depth,
        guarded: false,
        before: Vec::new(),
        edits: Vec::new(),
        names,
    };
    scan.body(body, &mut Vec::new(), Some(&*l));
    let Scan {
        before,
        mut edits,
        guarded,
        ..
    } = scan;
    let guard = guarded.then_some(runs);
    // Last place first: taking a statement out moves none before it.
    edits.sort_by(|a, b| b.0.cmp(&a.0));
    let Stmt::For { body, .. } = l else {
        return (Vec::new(), None);
    };
    let mut cleaned = Vec::new();
    for (place, edit) in edits {
        let Some((last, outer)) = place.split_last() else {
            continue;
        };
        let Some(stmts) = body_at(body, outer) else {
            continue;
        };
        match edit {
            Edit::Remove => {
                stmts.remove(*last);
            }
            Edit::Replace(s) => {
                stmts[*last] = s;
                cleaned.push(outer.to_vec());
            }
        }
    }
    // The `let`s that only fed what is read from a buffer now.
    for place in cleaned {
        match place.split_last() {
            Some((k, outer)) => {
                if let Some(stmts) = body_at(body, outer)
                    && let Some(s) = stmts.get_mut(*k)
                {
                    match s {
                        Stmt::Reduce { body, item, .. } => drop_dead_lets(body, Some(item)),
                        Stmt::For { body, .. } => drop_dead_lets(body, None),
                        _ => {}
                    }
                }
            }
            None => drop_dead_lets(body, None),
        }
    }
    (before, guard)
}

/// The body of the loop or reduction at `place` in `body`.
fn body_at<'b>(body: &'b mut Vec<Stmt>, place: &[usize]) -> Option<&'b mut Vec<Stmt>> {
    match place.split_first() {
        None => Some(body),
        Some((k, rest)) => match body.get_mut(*k)? {
            Stmt::For { body, .. } | Stmt::Reduce { body, .. } => body_at(body, rest),
            _ => None,
        },
    }
}

/// The `let`s of `body` (a loop's, or a reduction's of `item`) that
/// nothing reads, removed.
fn drop_dead_lets(body: &mut Vec<Stmt>, item: Option<&Expr>) {
    loop {
        let mut read = HashSet::new();
        if let Some(item) = item {
            item.each_var(&mut |v| _ = read.insert(v));
        }
        for s in body.iter() {
            each_var_read(s, &mut |v| _ = read.insert(v));
        }
        let before = body.len();
        body.retain(|s| {
            !matches!(s, Stmt::Let { var, value, .. } if !read.contains(var) && ranges::cannot_fail(value))
        });
        if body.len() == before {
            return;
        }
    }
}

/// A term computed over its frame before `L`: the statements, and the
/// `let` that reads it at its place.
struct Plan {
    before: Vec<Stmt>,
    read: Stmt,
}

impl Scan<'_> {
    /// The statements of `body` (at `place`, on the path, the body of the
    /// loop `enclosing`) in order, up to the first that may guard what
    /// follows; whether one may.
    fn body(&mut self, body: &[Stmt], place: &mut Place, enclosing: Option<&Stmt>) -> bool {
        for (k, s) in body.iter().enumerate() {
            place.push(k);
            let failed = self.stmt(s, place, enclosing);
            place.pop();
            if failed {
                return true;
            }
        }
        false
    }

    /// One statement at `place`; whether it may guard what follows.
    fn stmt(&mut self, s: &Stmt, place: &mut Place, enclosing: Option<&Stmt>) -> bool {
        match s {
            Stmt::Let { var, value, .. } => {
                let d = self.expr(value);
                self.deps.insert(*var, d);
                if d.is_some() {
                    self.lets.push((*var, place.clone(), s.clone()));
                }
                // A costly scalar (an `f.exp`) computed once per cell of
                // its frame.
                if let Some(frame) = d
                    && value.calls_costly()
                {
                    self.take(s, frame, place, |_: &Plan| true);
                }
                false
            }
            Stmt::Reduce { acc, count, .. } => {
                let d = self.reduction(s);
                self.deps.insert(*acc, d);
                let taken = d.is_some_and(|frame| self.take(s, frame, place, |_: &Plan| true));
                if !taken && self.expr(count) == Some(0) && self.path.len() < 64 {
                    self.reduction_body(s, place, enclosing);
                }
                guards(s)
            }
            Stmt::For {
                index, count, body, ..
            } if self.expr(count) == Some(0) && self.path.len() < 64 => {
                self.path.push((*index, count.clone()));
                let failed = self.body(body, place, Some(s));
                self.path.pop();
                failed
            }
            s => guards(s),
        }
    }

    /// The `let`s of the reduction `s` at `place` (in the loop
    /// `enclosing`), its items on the path: a `let` that depends on the
    /// item and not on `L` is computed over its frame before `L` where it
    /// is costly, or where the loop is then a contraction (the weights of
    /// a weighted sum of rows: each weight computed once, not once per
    /// column, and the sums the kernel's).
    fn reduction_body(&mut self, s: &Stmt, place: &mut Place, enclosing: Option<&Stmt>) {
        let Stmt::Reduce {
            index, count, body, ..
        } = s
        else {
            return;
        };
        self.path.push((*index, count.clone()));
        for (k, b) in body.iter().enumerate() {
            let Stmt::Let { var, value, .. } = b else {
                break;
            };
            place.push(k);
            let d = self.expr(value);
            self.deps.insert(*var, d);
            if let Some(frame) = d {
                self.lets.push((*var, place.clone(), b.clone()));
                let contracts = |plan: &Plan| match (enclosing, place.split_last()) {
                    (Some(f), Some((&k, [.., r]))) => contracts_with(f, *r, k, &plan.read),
                    _ => false,
                };
                if frame != 0 {
                    self.take(b, frame, place, |plan: &Plan| {
                        value.calls_costly() || contracts(plan)
                    });
                }
            }
            place.pop();
        }
        self.path.pop();
    }

    /// What `e` depends on.
    fn expr(&self, e: &Expr) -> Deps {
        if !ranges::cannot_fail(e) {
            return None;
        }
        self.reads(e)
    }

    fn reads(&self, e: &Expr) -> Deps {
        match e {
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => Some(0),
            Expr::Var(v) => self.var(*v),
            Expr::Load { buf, index } => {
                if self.written.contains(buf) || self.declared.contains(buf) {
                    return None;
                }
                self.reads(index)
            }
            Expr::Addr { .. } => None,
            Expr::Op { args, .. } => args.iter().try_fold(0, |d, a| Some(d | self.reads(a)?)),
        }
    }

    fn var(&self, v: Var) -> Deps {
        if self.written.contains(&v) {
            return None;
        }
        if let Some(k) = self.path.iter().position(|(i, _)| *i == v) {
            return Some(1 << k);
        }
        if self.moved.contains(&v) {
            return Some(0);
        }
        match self.deps.get(&v) {
            Some(d) => *d,
            None if self.declared.contains(&v) => None,
            None => Some(0),
        }
    }

    /// What a reduction depends on, where it can move: its body only
    /// `let`s and reductions of the same kind, none of which can fail.
    fn reduction(&mut self, s: &Stmt) -> Deps {
        let Stmt::Reduce {
            acc,
            seed,
            index,
            count,
            body,
            item,
            ..
        } = s
        else {
            return None;
        };
        if seed.is_none() && !matches!(count, Expr::Int(n) if *n >= 1) {
            return None;
        }
        let mut d = self.expr(count)?;
        if let Some(seed) = seed {
            d |= self.expr(seed)?;
        }
        // Its own scalars depend on nothing of the path but what they read.
        self.deps.insert(*index, Some(0));
        for s in body {
            match s {
                Stmt::Let { var, value, .. } => {
                    let v = self.expr(value);
                    self.deps.insert(*var, v);
                    d |= v?;
                }
                Stmt::Reduce { acc, .. } => {
                    let r = self.reduction(s);
                    self.deps.insert(*acc, r);
                    d |= r?;
                }
                _ => return None,
            }
        }
        d |= self.expr(item)?;
        self.deps.insert(*acc, Some(d));
        Some(d)
    }

    /// The `let`s declared in `L` (not moved) that the variables of `s`
    /// read, and those they read, in their order: each with its place.
    fn lets_read(&self, s: &Stmt) -> Vec<(Var, Place, Stmt)> {
        let mut wanted = HashSet::new();
        each_var_read(s, &mut |v| _ = wanted.insert(v));
        let mut out = Vec::new();
        for (var, place, stmt) in self.lets.iter().rev() {
            if wanted.contains(var) && !self.moved.contains(var) {
                each_var_read(stmt, &mut |v| _ = wanted.insert(v));
                out.push((*var, place.clone(), stmt.clone()));
            }
        }
        out.reverse();
        out
    }

    /// Whether every scalar declared in `L` that `s` reads is one of
    /// `lets` (not a reduction's sum that stayed).
    fn reads_only(&self, s: &Stmt, lets: &[(Var, Place, Stmt)]) -> bool {
        let own = declared_in(s);
        let mut ok = true;
        each_var_read(s, &mut |v| {
            ok &= own.contains(&v)
                || self.moved.contains(&v)
                || self.path.iter().any(|(i, _)| *i == v)
                || lets.iter().any(|(l, ..)| *l == v)
                || !self.declared.contains(&v);
        });
        ok
    }

    /// The scalar `s` (a `let` or a reduction) at `place`, depending on the
    /// path's loops in `frame`, made before `L` where `worth` says its
    /// plan is worth it (see the module's documentation); whether it was.
    fn take(&mut self, s: &Stmt, frame: Frame, place: &Place, worth: impl Fn(&Plan) -> bool) -> bool {
        // The loops around `s` that its frame does not hold must run for
        // it to be made (a check raised out of them, guarded by their
        // counts, may be all that keeps its loads in range): `L`'s is
        // tested before what moves; an inner one's cannot be.
        let mut guards_l = false;
        for (k, (_, count)) in self.path.iter().enumerate() {
            if frame & (1 << k) != 0 || matches!(count, Expr::Int(n) if *n > 0) {
                continue;
            }
            if k > 0 {
                return false;
            }
            guards_l = true;
        }
        let taken = self.take_in_frame(s, frame, place, worth);
        self.guarded |= taken && guards_l;
        taken
    }

    /// [`take`](Self::take), its loops' counts aside.
    fn take_in_frame(
        &mut self,
        s: &Stmt,
        frame: Frame,
        place: &Place,
        worth: impl Fn(&Plan) -> bool,
    ) -> bool {
        if frame == 0 {
            return self.move_before(s, place);
        }
        match self.plan(s, frame) {
            Some(plan) if worth(&plan) => {
                self.commit(plan, frame, place);
                true
            }
            _ => false,
        }
    }

    /// The scalar `s` at `place`, which depends on no loop of the path,
    /// moved before `L` with the `let`s it reads; whether it could be.
    fn move_before(&mut self, s: &Stmt, place: &Place) -> bool {
        let lets = self.lets_read(s);
        if !self.reads_only(s, &lets) {
            return false;
        }
        for (var, at, stmt) in lets {
            self.moved.insert(var);
            self.before.push(stmt);
            self.edits.push((at, Edit::Remove));
        }
        if let Some(v) = scalar_of(s) {
            self.moved.insert(v);
        }
        self.before.push(s.clone());
        self.edits.push((place.clone(), Edit::Remove));
        true
    }

    /// The scalar `s`, depending on the path's loops in `frame`, computed
    /// before `L` over that frame into a buffer (with the `let`s it
    /// reads), and the `let` that reads it at its place. With `L`'s
    /// index in the frame, only where the nest is a contraction (the
    /// kernel then sums it, not one sum at a time).
    fn plan(&mut self, s: &Stmt, frame: Frame) -> Option<Plan> {
        let (var, elem) = match s {
            Stmt::Reduce { acc, elem, .. } => (*acc, *elem),
            Stmt::Let { var, elem, .. } => (*var, *elem),
            _ => return None,
        };
        let lets = self.lets_read(s);
        if !self.reads_only(s, &lets) {
            return None;
        }
        let loops: Vec<(Var, Expr)> = (0..self.path.len())
            .filter(|k| frame & (1 << k) != 0)
            .map(|k| self.path[k].clone())
            .collect();
        // The frame's indices and every scalar of the nest, renamed.
        let mut renamed: HashMap<Var, Var> = HashMap::new();
        let indices: Vec<Var> = loops
            .iter()
            .map(|(i, _)| {
                let fresh = fresh_like(self.names, *i);
                renamed.insert(*i, fresh);
                fresh
            })
            .collect();
        let mut cell: Vec<Stmt> = Vec::new();
        for stmt in lets.iter().map(|l| &l.2).chain([s]) {
            for v in declared_in(stmt) {
                let fresh = fresh_like(self.names, v);
                renamed.insert(v, fresh);
            }
            let mut copy = stmt.clone();
            rename(&mut copy, &renamed);
            cell.push(copy);
        }
        let counts: Vec<Expr> = loops.iter().map(|(_, n)| n.clone()).collect();
        let position = |indices: &[Var]| {
            indices.iter().zip(0..).fold(Expr::Int(0), |at, (i, k)| {
                Expr::add(Expr::mul(at, counts[k].clone()), Expr::Var(*i))
            })
        };
        let buf = fresh_like(self.names, var);
        cell.push(Stmt::Store {
            buf,
            index: position(&indices),
            value: Expr::Var(renamed[&var]),
        });
        let computed = nest(&indices, counts.clone(), cell, self.depth);
        if frame & 1 != 0 && !computed.iter().all(contract::is_contraction) {
            return None;
        }
        let mut before = vec![Stmt::Alloc {
            buf,
            elem,
            len: product(&counts),
        }];
        before.extend(computed);
        let at: Vec<Var> = loops.iter().map(|(i, _)| *i).collect();
        let read = Stmt::Let {
            var,
            elem,
            value: Expr::load(buf, position(&at)),
        };
        Some(Plan { before, read })
    }

    /// A plan made: its statements before `L`, its read at `place`.
    fn commit(&mut self, plan: Plan, frame: Frame, place: &Place) {
        let Plan { before, read } = plan;
        let Some(var) = scalar_of(&read) else {
            return;
        };
        self.before.extend(before);
        self.lets.retain(|(v, ..)| *v != var);
        self.lets.push((var, place.clone(), read.clone()));
        self.edits.push((place.clone(), Edit::Replace(read)));
        self.deps.insert(var, Some(frame));
    }
}

/// Whether the loop `f`, its reduction at `r` in its body with the `let`
/// at `k` there replaced by `read` (and the `let`s that fed only it
/// gone), is a contraction.
fn contracts_with(f: &Stmt, r: usize, k: usize, read: &Stmt) -> bool {
    let mut f = f.clone();
    let Stmt::For { body, .. } = &mut f else {
        return false;
    };
    let Some(Stmt::Reduce { body, item, .. }) = body.get_mut(r) else {
        return false;
    };
    let Some(at) = body.get_mut(k) else {
        return false;
    };
    *at = read.clone();
    drop_dead_lets(body, Some(item));
    contract::is_contraction(&f)
}

/// The scalar a `let` or a reduction declares.
fn scalar_of(s: &Stmt) -> Option<Var> {
    match s {
        Stmt::Let { var, .. } => Some(*var),
        Stmt::Reduce { acc, .. } => Some(*acc),
        _ => None,
    }
}

/// A new variable named as `v` is.
fn fresh_like(names: &mut Vec<String>, v: Var) -> Var {
    let name = names.get(v.0 as usize).cloned().unwrap_or_else(|| "h".into());
    super::styles::fresh(names, &name)
}

/// The scalars `s` declares, at any depth.
fn declared_in(s: &Stmt) -> HashSet<Var> {
    let mut own = HashSet::new();
    Stmt::each(std::slice::from_ref(s), &mut |s| match s {
        Stmt::Let { var, .. } => _ = own.insert(*var),
        Stmt::Reduce { acc, index, .. } => own.extend([*acc, *index]),
        Stmt::For { index, .. } => _ = own.insert(*index),
        _ => {}
    });
    own
}

/// `f` on every variable `s`'s expressions read, at any depth.
fn each_var_read(s: &Stmt, f: &mut dyn FnMut(Var)) {
    Stmt::each(std::slice::from_ref(s), &mut |s| {
        for e in s.exprs() {
            e.each_var(f);
        }
    });
}

/// `s` with the variables of `by` (declared or read) renamed, at any
/// depth.
fn rename(s: &mut Stmt, by: &HashMap<Var, Var>) {
    let var = |v: &mut Var| {
        if let Some(x) = by.get(v) {
            *v = *x;
        }
    };
    match s {
        Stmt::Let { var: v, .. } | Stmt::Set { var: v, .. } => var(v),
        Stmt::Reduce { acc, index, .. } => {
            var(acc);
            var(index);
        }
        Stmt::For { index, .. } => var(index),
        _ => {}
    }
    for e in s.exprs_mut() {
        rename_expr(e, by);
    }
    for body in s.bodies_mut() {
        body.iter_mut().for_each(|s| rename(s, by));
    }
}

fn rename_expr(e: &mut Expr, by: &HashMap<Var, Var>) {
    match e {
        Expr::Var(v) => {
            if let Some(x) = by.get(v) {
                *v = *x;
            }
        }
        Expr::Load { index, .. } | Expr::Addr { index, .. } => rename_expr(index, by),
        Expr::Op { args, .. } => args.iter_mut().for_each(|a| rename_expr(a, by)),
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => {}
    }
}

/// Whether `s` may guard what follows it: a check (a load after it may
/// be in range only because it passed) or a runtime call, at any depth.
/// (What else can fail — a division, a buffer too large, a reduction of
/// no items — guards nothing: a term that cannot fail run before it has
/// no effect.)
fn guards(s: &Stmt) -> bool {
    matches!(s, Stmt::Fail { .. } | Stmt::Call { .. }) || s.bodies().iter().any(|b| b.iter().any(guards))
}
