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
    with_states(e, acc, next, &|index| (*index == Expr::Var(i)).then_some(state))
}

fn mentions(e: &Expr, vars: &[Var]) -> bool {
    let mut found = false;
    e.each_var(&mut |v| found |= vars.contains(&v));
    found
}

/// Whether `e` cannot fail (no division, power, shift or checked
/// dimension arithmetic).
pub(super) fn cannot_fail(e: &Expr) -> bool {
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
        (acc, next): (Var, Var),
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
    with_states(e, acc, next, &|index| {
        states.get(usize::try_from(constant(index)?).ok()?).copied()
    })
}

/// `e` with each load of `acc` replaced by the scalar variable `place`
/// names for its index; `None` where `place` names none, or where `e`
/// reads `acc` otherwise or `next` at all.
fn with_states(e: &Expr, acc: Var, next: Var, place: &dyn Fn(&Expr) -> Option<Var>) -> Option<Expr> {
    Some(match e {
        Expr::Load { buf, index } if *buf == acc => Expr::Var(place(index)?),
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
                .map(|a| with_states(a, acc, next, place))
                .collect::<Option<Vec<_>>>()?,
        },
        Expr::Var(v) if *v == acc || *v == next => return None,
        _ => e.clone(),
    })
}

/// A fold that keeps an index into a buffer nothing writes and reads the
/// buffer there at every step (the best index so far, `(select (f.>
/// (index r j) (index r b)) j b)`): the atom at the index is carried
/// beside it, a scalar set wherever the index is (to the atom the step
/// read at its own item, or to another carried atom), and the step reads
/// that scalar instead of the buffer. Each step compares the same atoms:
/// the same bits; but no load waits on the index (a chain of dependent
/// loads), and lanes of such folds over rows a page apart read one line
/// each, not two. Only where the step cannot fail (nothing is read
/// before its time that a failure would have kept unread), its first
/// read at the index made before the first item (where there is one).
pub(super) fn carried_items(body: &mut Vec<Stmt>, names: &mut Vec<String>) {
    let mut p = 0;
    while p < body.len() {
        for inner in body[p].bodies_mut() {
            carried_items(inner, names);
        }
        if let Some(before) = carried(&mut body[p], names) {
            let n = before.len();
            body.splice(p..p, before);
            p += n;
        }
        p += 1;
    }
}

/// The buffers `stmts` write: stored, swapped, or whose addresses are
/// handed to the runtime.
fn written_in(stmts: &[Stmt]) -> std::collections::HashSet<Var> {
    let mut written = std::collections::HashSet::new();
    Stmt::each(stmts, &mut |s| {
        match s {
            Stmt::Store { buf, .. } => {
                written.insert(*buf);
            }
            Stmt::Swap { a, b } => {
                written.extend([*a, *b]);
            }
            _ => {}
        }
        for e in s.exprs() {
            addresses(e, &mut written);
        }
    });
    written
}

/// The buffers whose addresses `e` takes (handed to the runtime, which
/// may write them).
fn addresses(e: &Expr, out: &mut std::collections::HashSet<Var>) {
    match e {
        Expr::Addr { buf, index } => {
            out.insert(*buf);
            addresses(index, out);
        }
        Expr::Load { index, .. } => addresses(index, out),
        Expr::Op { args, .. } => args.iter().for_each(|a| addresses(a, out)),
        _ => {}
    }
}

/// The loop `s` with an atom carried beside its index state (see
/// [`carried_items`]), and the statements that start it before the loop.
fn carried(s: &mut Stmt, names: &mut Vec<String>) -> Option<Vec<Stmt>> {
    let Stmt::For {
        index: k,
        count,
        parallel: false,
        body,
    } = s
    else {
        return None;
    };
    let k = *k;
    let written = written_in(body);
    let mut safe = cannot_fail(count);
    let mut inside = std::collections::HashSet::new();
    let mut set = std::collections::HashSet::new();
    Stmt::each(body, &mut |s| {
        safe &= !matches!(s, Stmt::Fail { .. } | Stmt::Call { .. }) && s.exprs().into_iter().all(cannot_fail);
        match s {
            Stmt::Let { var, .. } => {
                inside.insert(*var);
            }
            Stmt::Set { var, .. } => {
                set.insert(*var);
            }
            _ => {}
        }
    });
    if !safe {
        return None;
    }
    // `b = X[E(s)]`, the state `s` set in the loop and declared outside it,
    // and `a = X[E(k)]` before it: the atom at the item.
    for (at_b, st) in body.iter().enumerate() {
        let Stmt::Let {
            var: b,
            elem,
            value: Expr::Load { buf: x, index: eb },
        } = st
        else {
            continue;
        };
        if written.contains(x) {
            continue;
        }
        let mut vars = Vec::new();
        eb.each_var(&mut |v| vars.push(v));
        let Some(state) = vars
            .iter()
            .copied()
            .find(|v| set.contains(v) && !inside.contains(v) && *v != k)
        else {
            continue;
        };
        if vars
            .iter()
            .any(|v| *v != state && (*v == k || set.contains(v) || inside.contains(v)))
        {
            continue;
        }
        let Some(a) = body[..at_b].iter().find_map(|s| match s {
            Stmt::Let {
                var,
                value: Expr::Load { buf, index },
                ..
            } if buf == x && mentions(index, &[k]) && substituted(index, k, state) == **eb => Some(*var),
            _ => None,
        }) else {
            continue;
        };
        let at_a = body
            .iter()
            .position(|s| matches!(s, Stmt::Let { var, .. } if *var == a))?;
        let (b, elem, x, eb) = (*b, *elem, *x, (**eb).clone());
        // The index's copies: every assignment of one is a copy of another
        // or of `k`, at the top of the step or in its `if`s, after both reads.
        let mut tracked = vec![state];
        let mut grew = true;
        while grew {
            grew = false;
            Stmt::each(body, &mut |s| match s {
                Stmt::Let {
                    var,
                    value: Expr::Var(y),
                    ..
                } if (tracked.contains(y) || *y == k) && !tracked.contains(var) => {
                    tracked.push(*var);
                    grew = true;
                }
                _ => {}
            });
        }
        let mut copies = true;
        Stmt::each(body, &mut |s| match s {
            Stmt::Set { var, value } if tracked.contains(var) => {
                copies &= matches!(value, Expr::Var(y) if tracked.contains(y) || *y == k);
            }
            _ => {}
        });
        let assigns = |s: &Stmt| {
            let mut found = false;
            Stmt::each(std::slice::from_ref(s), &mut |s| match s {
                Stmt::Let { var, .. } | Stmt::Set { var, .. } => found |= tracked.contains(var),
                _ => {}
            });
            found
        };
        let placed = body
            .iter()
            .enumerate()
            .all(|(p, s)| !assigns(s) || p > at_a.max(at_b) && only_in_ifs(s, &|s| assigns(s)));
        if !copies || !placed {
            continue;
        }
        let mut carried: HashMap<Var, Expr> = HashMap::new();
        let item = {
            names.push("item".to_string());
            Var(names.len() as u32 - 1)
        };
        carried.insert(state, Expr::Var(item));
        carried.insert(k, Expr::Var(a));
        for t in &tracked[1..] {
            names.push("item".to_string());
            carried.insert(*t, Expr::Var(Var(names.len() as u32 - 1)));
        }
        body[at_b] = Stmt::Let {
            var: b,
            elem,
            value: Expr::Var(item),
        };
        carry_beside(body, &carried, elem);
        let zero = match elem {
            Elem::Int => Expr::Int(0),
            Elem::Float => Expr::Float(0.0),
            Elem::Bool => Expr::Bool(false),
        };
        return Some(vec![
            Stmt::Let {
                var: item,
                elem,
                value: zero,
            },
            Stmt::If {
                cond: Expr::op(">", vec![count.clone(), Expr::Int(0)]),
                then: vec![Stmt::Set {
                    var: item,
                    value: Expr::Load {
                        buf: x,
                        index: Box::new(eb),
                    },
                }],
                otherwise: Vec::new(),
            },
        ]);
    }
    None
}

/// Whether `s` is one statement `assigns` holds for, or an `if` whose
/// branches' statements are, at any depth of `if`s, no other loop.
fn only_in_ifs(s: &Stmt, assigns: &dyn Fn(&Stmt) -> bool) -> bool {
    match s {
        Stmt::If { then, otherwise, .. } => then
            .iter()
            .chain(otherwise)
            .all(|s| !assigns(s) || only_in_ifs(s, assigns)),
        Stmt::Let { .. } | Stmt::Set { .. } => true,
        _ => false,
    }
}

/// After each assignment of a tracked index (`let t y`, `set t y`), the
/// same of the atom carried beside it (`carried[t]`, from `carried[y]`).
fn carry_beside(stmts: &mut Vec<Stmt>, carried: &HashMap<Var, Expr>, elem: Elem) {
    let mut p = 0;
    while p < stmts.len() {
        let beside = match &mut stmts[p] {
            Stmt::Let {
                var,
                elem: _,
                value: Expr::Var(y),
            } if carried.contains_key(var) => match (&carried[var], carried.get(y)) {
                (Expr::Var(c), Some(from)) => Some(Stmt::Let {
                    var: *c,
                    elem,
                    value: from.clone(),
                }),
                _ => None,
            },
            Stmt::Set {
                var,
                value: Expr::Var(y),
            } if carried.contains_key(var) => match (&carried[var], carried.get(y)) {
                (Expr::Var(c), Some(from)) => Some(Stmt::Set {
                    var: *c,
                    value: from.clone(),
                }),
                _ => None,
            },
            Stmt::If { then, otherwise, .. } => {
                carry_beside(then, carried, elem);
                carry_beside(otherwise, carried, elem);
                None
            }
            _ => None,
        };
        if let Some(s) = beside {
            stmts.insert(p + 1, s);
            p += 1;
        }
        p += 1;
    }
}

/// `e` with `from` read as `to`.
fn substituted(e: &Expr, from: Var, to: Var) -> Expr {
    match e {
        Expr::Var(v) if *v == from => Expr::Var(to),
        Expr::Load { buf, index } => Expr::Load {
            buf: *buf,
            index: Box::new(substituted(index, from, to)),
        },
        Expr::Addr { buf, index } => Expr::Addr {
            buf: *buf,
            index: Box::new(substituted(index, from, to)),
        },
        Expr::Op { op, args } => Expr::op(op, args.iter().map(|a| substituted(a, from, to)).collect()),
        e => e.clone(),
    }
}

/// The comparison `(cmp (index r j) (index r b))` (or by `nth`) of a
/// best-index fold's step, as the operator that keeps `j` (`f.>`: `j`'s item greater), with
/// `r`: `(f.< (index r b) (index r j))` is `f.>` too.
fn best_index_test(cond: &maps::Expr, b: VarId, j: VarId) -> Option<(&'static str, VarId)> {
    let Kind::App { func, args } = &cond.kind else {
        return None;
    };
    let Kind::Prim(cmp) = func.instantiated().kind else {
        return None;
    };
    let [x, y] = args.as_slice() else {
        return None;
    };
    let indexed = |e: &maps::Expr| -> Option<(VarId, VarId)> {
        let Kind::App { func, args } = &e.kind else {
            return None;
        };
        let (Kind::Prim("index" | "nth"), [r, i]) = (&func.instantiated().kind, args.as_slice()) else {
            return None;
        };
        if !i.ty.shape.is_scalar() {
            return None;
        }
        match (&r.kind, &i.kind) {
            (Kind::Var(r), Kind::Var(i)) => Some((*r, *i)),
            _ => None,
        }
    };
    let ((r, i), (r2, i2)) = (indexed(x)?, indexed(y)?);
    if r != r2 {
        return None;
    }
    let flipped = |c: &str| match c {
        "f.>" => Some("f.<"),
        "f.<" => Some("f.>"),
        ">" => Some("<"),
        "<" => Some(">"),
        _ => None,
    };
    let keeps = if (i, i2) == (j, b) {
        flipped(flipped(cmp)?)?
    } else if (i, i2) == (b, j) {
        flipped(cmp)?
    } else {
        return None;
    };
    Some((keeps, r))
}

impl<'m> Alloc<'m> {
    /// A fold over `(iota [n])` keeping the index of the best item of a
    /// vector `r` of `n` items so far, `(fold (fn (b j) (select (f.> (index
    /// r j) (index r b)) j b)) b0 (iota [n]))` (or `f.<`, `>`, `<`: the
    /// first index of the greatest or least, ties to the earlier): two
    /// reductions that vectorise, as `f.argmax`'s, instead of a chain of
    /// dependent steps. The fold moves from `b` to `j` only where `j`'s
    /// item is strictly better than `b`'s; so, the best item `m` found
    /// first (`f.max`), the result is `b0` unless `m` is strictly better
    /// than `r[b0]`, else the first index holding `m` (`f.==` finds it,
    /// `-0.0` and `0.0` alike, as `f.>` compares them). A NaN is never
    /// better, nor bettered, which a reduction cannot say: where `m` is
    /// NaN (some item is), the fold itself runs. `b0` out of range fails,
    /// as the fold's first step does.
    pub(super) fn best_index_fold(
        &mut self,
        op: &Val<'m>,
        seed: &Val<'m>,
        xs: &View,
        e: &'m maps::Expr,
        body: &mut Vec<Stmt>,
    ) -> Option<Val<'m>> {
        let (Val::Func(c), Val::Scalar(Elem::Int, b0)) = (op, seed) else {
            return None;
        };
        let Kind::App { args, .. } = &e.kind else {
            return None;
        };
        let [_, _, items] = args.as_slice() else {
            return None;
        };
        if !matches!(items.instantiated().kind, Kind::Prim("iota" | "iota/static"))
            || items.ty.shape.rank() != Some(1)
            || xs.dims.len() != 1
        {
            return None;
        }
        let Binder::Value(b) = c.binder else {
            return None;
        };
        let Kind::Array { atoms, .. } = &c.body.kind else {
            return None;
        };
        let [
            Atom::Lambda {
                param: j, body: step, ..
            },
        ] = atoms.as_slice()
        else {
            return None;
        };
        let Kind::App { func, args } = &step.kind else {
            return None;
        };
        let (Kind::Prim("select"), [cond, then, otherwise]) = (&func.instantiated().kind, args.as_slice())
        else {
            return None;
        };
        if !matches!(then.kind, Kind::Var(v) if v == *j) || !matches!(otherwise.kind, Kind::Var(v) if v == b)
        {
            return None;
        }
        let (keeps, r) = best_index_test(cond, b, *j)?;
        let Some(Val::Array(r)) = c.scope.vars.get(&r) else {
            return None;
        };
        let n = xs.dims[0].clone();
        if r.dims.len() != 1 || r.dims[0] != n {
            return None;
        }
        let r = r.clone();
        let float = keeps.starts_with("f.");
        if float != (r.elem == Elem::Float) {
            return None;
        }
        let (extreme, better) = match keeps {
            "f.>" => ("f.max", "f.>"),
            "f.<" => ("f.min", "f.<"),
            ">" => ("max", ">"),
            _ => ("min", "<"),
        };
        let (start, result) = (self.fresh("b0"), self.fresh("best"));
        body.push(Stmt::Let {
            var: start,
            elem: Elem::Int,
            value: b0.clone(),
        });
        body.push(Stmt::Let {
            var: result,
            elem: Elem::Int,
            value: Expr::Var(start),
        });
        // Some item: `r[b0]` read (checked), then the best and its index.
        let mut some = Vec::new();
        let at = |k: Expr| r.cell(&[k]).load();
        some.push(Stmt::If {
            cond: Expr::op(
                "or",
                vec![
                    Expr::op("<", vec![Expr::Var(start), Expr::Int(0)]),
                    Expr::op(">=", vec![Expr::Var(start), n.clone()]),
                ],
            ),
            then: vec![Stmt::Fail {
                what: "index out of range".into(),
            }],
            otherwise: Vec::new(),
        });
        let first_item = self.fresh("x");
        some.push(Stmt::Let {
            var: first_item,
            elem: r.elem,
            value: at(Expr::Var(start)),
        });
        let m = self.extreme_item(extreme, r.elem, &n, at, &mut some);
        let mut searched = Vec::new();
        let equal = if float { "f.==" } else { "==" };
        let found = |x: Expr| Expr::op(equal, vec![x, Expr::Var(m)]);
        let first = self.first_where(r.elem, &n, at, found, &mut searched);
        searched.push(Stmt::If {
            cond: Expr::op(better, vec![Expr::Var(m), Expr::Var(first_item)]),
            then: vec![Stmt::Set {
                var: result,
                value: Expr::Var(first),
            }],
            otherwise: Vec::new(),
        });
        if float {
            // A NaN among the items (the best is NaN): the fold itself.
            let mut nan = Vec::new();
            let Ok(Val::Scalar(_, folded)) = self.fold(op.clone(), seed.clone(), xs, e, &mut nan) else {
                return None;
            };
            nan.push(Stmt::Set {
                var: result,
                value: folded,
            });
            some.push(Stmt::If {
                cond: Expr::op("f.isnan", vec![Expr::Var(m)]),
                then: nan,
                otherwise: searched,
            });
        } else {
            some.extend(searched);
        }
        body.push(Stmt::If {
            cond: Expr::op(">", vec![n, Expr::Int(0)]),
            then: some,
            otherwise: Vec::new(),
        });
        Some(Val::Scalar(Elem::Int, Expr::Var(result)))
    }
}
